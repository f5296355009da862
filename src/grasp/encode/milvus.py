"""Node vectors searched in Milvus: Milvus Lite (an embedded folder, on a laptop and in tests) or a Milvus server
or cluster by URI, through the same pymilvus client.

One collection per vector set (one node type's name or document vectors, one mFAR field), named by a hash of
everything that determines its vectors, so a changed encoder, layout or KB never reuses old ones. Loading is atomic:
rows go into ``<name>__loading`` in batches (with progress), which is indexed and renamed to ``<name>`` only when
complete; an interrupted load leaves only that build collection, which the next run drops and loads anew. The
content's sha256 (ids and float32 vectors, in id order) is recorded in the collection's properties and in a JSON
record beside the local vectors: each open checks the row count, ``grasp info --verify`` reads every vector back
and recomputes the checksum.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from grasp.encode.index import VectorIndex
from grasp.errors import ConfigError, GraspError
from grasp.storage import build_lock, stable_hash, writable, write_json_if_writable

VECTOR, ID = "vector", "id"
LOADING = "__loading"
INDEX_TIMEOUT_S = 6 * 3600  # an HNSW build over millions of vectors takes minutes to hours
_clients: dict[tuple[str, str | None], object] = {}
_clients_lock = threading.Lock()


def is_lite(uri: str) -> bool:
    """Whether ``uri`` names a Milvus Lite folder (a local ``.db`` path) rather than a server."""
    return not re.match(r"^[a-z][a-z0-9+.-]*://", uri) and uri.endswith(".db")


def connect(uri: str, token: str | None = None):
    """A pymilvus client for ``uri``, one per process and URI (Milvus Lite serves one folder to one process)."""
    try:
        from pymilvus import MilvusClient
    except ImportError:
        raise ConfigError("vector_index.backend 'milvus' needs pymilvus (and milvus-lite for a local folder): "
                          "pip install 'grasp-retrieval[milvus]'") from None
    # pymilvus logs every failed call with its traceback; the failures it reports reach the user as GraspErrors.
    # Milvus Lite's in-process gRPC server logs a traceback for each call it does not implement (pymilvus asks for
    # a server timestamp, then uses its own): neither is the user's to read
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
    if is_lite(uri):
        logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    with _clients_lock:
        client = _clients.get((uri, token))
        if client is None:
            if is_lite(uri):
                with writable(Path(uri)):
                    Path(uri).parent.mkdir(parents=True, exist_ok=True)
            try:
                client = MilvusClient(uri=uri, token=token or "")
            except Exception as e:  # noqa: BLE001 - pymilvus raises its own and grpc's errors: one line either way
                where = "Milvus Lite folder" if is_lite(uri) else "Milvus server"
                raise ConfigError(f"cannot open the {where} {uri}: {_message(e)}"
                                  + ("; another process may hold it (one process per Milvus Lite folder: "
                                     "serve from a Milvus server for several)" if is_lite(uri) else "")) from None
            _clients[(uri, token)] = client
    return client


def _message(error: Exception) -> str:
    return getattr(error, "message", None) or str(error).strip().splitlines()[0]


def collection_name(label: str, key: object) -> str:
    """A Milvus collection name (letters, digits, underscores) for one vector set and what determines it."""
    return f"grasp_{re.sub(r'[^A-Za-z0-9_]', '_', label)[:80]}_{stable_hash(key)}"


def content_sha256(ids: np.ndarray, vectors: np.ndarray, chunk_rows: int = 65536) -> str:
    """sha256 of (ids as int64, then the float32 vectors), rows in id order: the same bytes whether they are read
    from the local matrix or back from Milvus."""
    order = np.argsort(ids, kind="stable")
    h = hashlib.sha256(np.asarray(ids, dtype=np.int64)[order].tobytes())
    in_order = bool(np.all(order[1:] > order[:-1]))  # node ids come sorted: read the matrix forwards, no gather
    for lo in range(0, len(order), chunk_rows):
        block = vectors[lo:lo + chunk_rows] if in_order else vectors[order[lo:lo + chunk_rows]]
        h.update(np.ascontiguousarray(block, dtype=np.float32).tobytes())
    return h.hexdigest()


class MilvusIndex(VectorIndex):
    """Inner-product search over one collection; built from the local vectors when it is missing or incomplete."""

    def __init__(self, vectors: np.ndarray, ids: np.ndarray, *, uri: str, token_env: str = "MILVUS_TOKEN", name: str,
                 record: Path, index_type: str = "HNSW", m: int = 32, ef_search: int = 128, batch_rows: int = 4096,
                 progress: bool = True) -> None:
        self.ids = np.asarray(ids, dtype=np.int64)
        self.client = connect(uri, os.environ.get(token_env))
        self.uri, self.token_env, self.name, self.record = uri, token_env, name, Path(record)
        self.index_type, self.m, self.ef_search = index_type, m, ef_search
        self.dim = int(vectors.shape[1])
        with build_lock(self.record):
            problem = self._problem()  # a complete collection is loaded (into search memory) by the check
            if problem is not None:
                self._load(vectors, batch_rows, progress, problem)
                self._call("load the collection", lambda: self.client.load_collection(self.name))

    def _call(self, what: str, fn):
        """Run one Milvus call; its failure becomes one line naming the collection."""
        try:
            return fn()
        except GraspError:
            raise
        except Exception as e:  # noqa: BLE001 - pymilvus and grpc errors alike
            raise GraspError(f"Milvus could not {what} ({self.name}): {_message(e)}") from None

    def _count(self, name: str) -> int:
        rows = self._call("count rows", lambda: self.client.query(name, output_fields=["count(*)"]))
        return int(rows[0]["count(*)"])

    def _problem(self) -> str | None:
        """None when the collection is complete (its recorded row count matches the vectors and Milvus holds that
        many rows), else why it must be loaded."""
        if not self._call("list collections", lambda: self.client.has_collection(self.name)):
            return "missing"
        props = self._call("describe the collection", lambda: self.client.describe_collection(self.name))
        recorded = props.get("properties", {}).get("grasp.rows")
        if recorded is None or int(recorded) != self.ids.size:
            return f"records {recorded} rows, the vectors have {self.ids.size}"
        self._call("load the collection", lambda: self.client.load_collection(self.name))
        held = self._count(self.name)
        return None if held == self.ids.size else f"holds {held} of its {self.ids.size} rows"

    def _load(self, vectors: np.ndarray, batch_rows: int, progress: bool, why: str) -> None:
        """Load every row into a build collection, index it, then rename it into place."""
        from pymilvus import DataType

        building = self.name + LOADING
        c = self.client
        if why != "missing":
            tqdm.write(f"milvus: {self.name} {why}: loading it again")
            self._call("drop the incomplete collection", lambda: c.drop_collection(self.name))
        if self._call("list collections", lambda: c.has_collection(building)):  # an interrupted load
            self._call("drop an interrupted load", lambda: c.drop_collection(building))
        schema = c.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field(ID, DataType.INT64, is_primary=True)
        schema.add_field(VECTOR, DataType.FLOAT_VECTOR, dim=self.dim)
        self._call("create a collection", lambda: c.create_collection(building, schema=schema))
        bar = tqdm(total=self.ids.size, desc=f"milvus {self.name}", unit="vec", disable=not progress)
        for lo in range(0, self.ids.size, batch_rows):
            block = np.asarray(vectors[lo:lo + batch_rows], dtype=np.float32)
            rows = [{ID: i, VECTOR: v} for i, v in zip(self.ids[lo:lo + batch_rows].tolist(), block, strict=True)]
            self._call("insert rows", lambda rows=rows: c.insert(building, rows))
            bar.update(len(rows))
        bar.close()
        self._call("flush", lambda: c.flush(building))
        params = c.prepare_index_params()
        extra = {"M": self.m, "efConstruction": max(2 * self.m, 64)} if self.index_type == "HNSW" else {}
        params.add_index(field_name=VECTOR, index_type=self.index_type, metric_type="IP", params=extra)
        try:
            self._call("build the vector index", lambda: c.create_index(building, params, timeout=INDEX_TIMEOUT_S))
        except GraspError:
            # a long build can outlive the call's connection; pymilvus then asks again, and the server answers that
            # the index it is building (or built) already exists: that index is the one wanted
            if VECTOR not in (self._call("list indexes", lambda: c.list_indexes(building)) or []):
                raise
        sha = content_sha256(self.ids, vectors)
        self._call("record the checksum", lambda: c.alter_collection_properties(
            building, {"grasp.rows": str(self.ids.size), "grasp.sha256": sha}))
        self._call("rename the loaded collection", lambda: c.rename_collection(building, self.name))
        write_json_if_writable(self.record, {"collection": self.name, "uri": self.uri, "token_env": self.token_env,
                                             "rows": int(self.ids.size), "dim": self.dim,
                                             "index_type": self.index_type, "sha256": sha})

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        k = min(k, self.ids.size)
        m = q.shape[0]
        ids = np.full((m, k), -1, dtype=np.int64)
        scores = np.full((m, k), -np.inf, dtype=np.float32)
        if k == 0:
            return ids, scores
        params = {"metric_type": "IP", "params": {"ef": max(self.ef_search, k)} if self.index_type == "HNSW" else {}}
        hits = self._call("search", lambda: self.client.search(self.name, data=q.tolist(), limit=k, anns_field=VECTOR,
                                                               search_params=params, output_fields=[ID]))
        for row, found in enumerate(hits):
            pairs = sorted((-float(h["distance"]), int(h["id"])) for h in found)[:k]  # best first, ties by id
            ids[row, :len(pairs)] = [i for _, i in pairs]
            scores[row, :len(pairs)] = [-s for s, _ in pairs]
        return ids, scores

    def verify(self) -> bool:
        """Read every vector back from Milvus and recompute the checksum recorded when it was loaded."""
        return read_back_sha256(self.client, self.name) == self._recorded()

    def _recorded(self) -> str | None:
        props = self._call("describe the collection", lambda: self.client.describe_collection(self.name))
        return props.get("properties", {}).get("grasp.sha256")


def verify_record(record: dict) -> bool:
    """Whether the collection a record names still holds what was loaded (``grasp info --verify``); False when it
    is gone or cannot be read."""
    try:
        client = connect(record["uri"], os.environ.get(record.get("token_env", "MILVUS_TOKEN")))
        return read_back_sha256(client, record["collection"]) == record.get("sha256")
    except Exception:  # noqa: BLE001 - a collection that cannot be read back does not hold
        return False


def read_back_sha256(client, name: str, batch_rows: int = 4096) -> str:
    """The content checksum of what a collection holds, every row read back."""
    client.load_collection(name)
    it = client.query_iterator(name, batch_size=batch_rows, filter="", output_fields=[ID, VECTOR])
    ids, vectors = [], []
    try:
        while batch := it.next():
            ids.extend(int(r[ID]) for r in batch)
            vectors.extend(r[VECTOR] for r in batch)
    finally:
        it.close()
    return content_sha256(np.asarray(ids, dtype=np.int64), np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1))
