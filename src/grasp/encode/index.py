"""Nearest-neighbour search by cosine (inner product of unit vectors).

:class:`ExactIndex` scans the matrix in row chunks so memory stays bounded whatever its size;
:class:`FaissIndex` (optional, ``pip install grasp-retrieval[faiss]``) is an HNSW index for
million-node graphs; :class:`grasp.encode.milvus.MilvusIndex` (``[milvus]``) keeps the vectors in Milvus.
:func:`open_index` picks the configured one.
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from grasp.config import VectorIndexConfig
from grasp.errors import ConfigError, IndexCorruptError
from grasp.storage import stable_hash


class VectorIndex(ABC):
    """Rows of a matrix, each labelled by a node id; search returns node ids and cosines."""

    ids: np.ndarray

    @abstractmethod
    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """For each query row: (node ids, scores), best first, shape (m, min(k, n)) each."""


class ExactIndex(VectorIndex):
    """Exact top-k by cosine. A float16 matrix of more than ``two_pass_rows`` rows is searched in two passes: a
    half-precision product over every row (torch's fp16 kernel reads the stored matrix as it is, where converting
    it to float32 chunk by chunk dominates a search over a million rows: bench/search_kernels.py),
    then the best ``k + SHORTLIST`` rows rescored in float32 as the one-pass scan scores them, so the result is
    a float32 ranking of every row (ties by row; the scan keeps an arbitrary few of rows tied at its cut) unless
    more than SHORTLIST rows lie within fp16 rounding (~5e-4) of the k-th score."""

    SHORTLIST = 1024

    def __init__(self, vectors: np.ndarray, ids: np.ndarray, *, chunk_rows: int = 65536,
                 two_pass_rows: int = 8192) -> None:
        self.vectors = vectors
        self.ids = np.asarray(ids, dtype=np.int64)
        self.chunk_rows = chunk_rows
        self.two_pass_rows = min(two_pass_rows, chunk_rows)
        self._half = None  # the fp16 matrix as a torch tensor (no copy), made on the first two-pass search

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        n = self.vectors.shape[0]
        k = min(k, n)
        m = q.shape[0]
        if k == 0:
            return np.zeros((m, 0), dtype=np.int64), np.zeros((m, 0), dtype=np.float32)
        if self.vectors.dtype == np.float16 and n > self.two_pass_rows:
            return self._two_pass(q, k)
        return self._scan(q, k)

    def _two_pass(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import torch

        if self._half is None:
            with warnings.catch_warnings():  # a read-only memory map: torch warns, and nothing writes to it
                warnings.simplefilter("ignore", UserWarning)
                self._half = torch.from_numpy(np.asarray(self.vectors))
        n = self.vectors.shape[0]
        short = min(n, k + self.SHORTLIST)
        with torch.no_grad():
            approx = torch.from_numpy(q).half() @ self._half.T
            rows = torch.topk(approx, short, dim=1).indices.numpy()
        ids, scores = [], []
        for qi, r in zip(q, rows, strict=True):
            r = np.sort(r)  # rows in order: the gather reads the memory map forwards
            exact = np.asarray(self.vectors[r], dtype=np.float32) @ qi
            order = np.lexsort((r, -exact))[:k]
            ids.append(r[order])
            scores.append(exact[order])
        return self.ids[np.stack(ids)], np.stack(scores).astype(np.float32)

    def _scan(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """One pass over the matrix in row chunks, each converted to float32."""
        n, m = self.vectors.shape[0], q.shape[0]
        best_s = np.full((m, 0), -np.inf, dtype=np.float32)
        best_i = np.zeros((m, 0), dtype=np.int64)
        for lo in range(0, n, self.chunk_rows):
            block = np.asarray(self.vectors[lo : lo + self.chunk_rows], dtype=np.float32)
            s = q @ block.T
            kk = min(k, s.shape[1])
            part = np.argpartition(-s, kk - 1, axis=1)[:, :kk]
            cand_s = np.concatenate([best_s, np.take_along_axis(s, part, 1)], axis=1)
            cand_i = np.concatenate([best_i, part + lo], axis=1)
            keep = np.argpartition(-cand_s, min(k, cand_s.shape[1]) - 1, axis=1)[:, :k]
            best_s = np.take_along_axis(cand_s, keep, 1)
            best_i = np.take_along_axis(cand_i, keep, 1)
        # sort: score descending, then row ascending for determinism
        order = np.lexsort((best_i, -best_s), axis=1)
        best_s = np.take_along_axis(best_s, order, 1)
        best_i = np.take_along_axis(best_i, order, 1)
        return self.ids[best_i], best_s


class FaissIndex(VectorIndex):
    """HNSW over inner product; built once and saved beside the embeddings."""

    def __init__(self, vectors: np.ndarray, ids: np.ndarray, *, path: Path | None = None,
                 m: int = 32, ef_search: int = 128) -> None:
        try:
            import faiss
        except ImportError:
            raise ConfigError("vector_index.backend 'faiss' needs faiss: pip install 'grasp-retrieval[faiss]'") from None
        self.ids = np.asarray(ids, dtype=np.int64)
        if path is not None and path.exists():
            from grasp.storage import recorded_sha256, require_intact

            require_intact(path, recorded_sha256(path.with_suffix(".json")), "HNSW index")
            try:
                self._index = faiss.read_index(str(path))
            except RuntimeError as e:
                raise IndexCorruptError(f"{path}: unreadable HNSW index ({e}); delete it to rebuild") from None
        else:
            self._index = faiss.IndexHNSWFlat(vectors.shape[1], m, faiss.METRIC_INNER_PRODUCT)
            self._index.add(np.ascontiguousarray(vectors, dtype=np.float32))
            if path is not None:
                from grasp.storage import atomic_file, checksum, write_json

                with atomic_file(path, "wb") as f:
                    f.write(faiss.serialize_index(self._index).tobytes())
                write_json(path.with_suffix(".json"), {"shape": [self._index.ntotal, vectors.shape[1]],
                                                       "dtype": "hnsw", "sha256": checksum(path)})
        self._index.hnsw.efSearch = max(ef_search, 1)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        k = min(k, self.ids.shape[0])
        scores, rows = self._index.search(q, k)
        valid = rows >= 0
        ids = np.where(valid, self.ids[np.clip(rows, 0, None)], -1)
        return ids, np.where(valid, scores, -np.inf).astype(np.float32)


def open_index(vectors: np.ndarray, ids: np.ndarray, config: VectorIndexConfig, *, label: str, key: list,
               root: Path, progress: bool = True) -> VectorIndex:
    """The configured backend's index over these rows. ``label`` names the vector set, ``key`` is what determines
    its vectors (an index built from other vectors is never reused); faiss files, Milvus records and the Milvus
    Lite folder live under ``root``."""
    if len(ids) == 0:  # an empty field or type: nothing to index or to store
        return ExactIndex(vectors, ids)
    if config.backend == "faiss":
        path = root / f"faiss-{label}-{stable_hash([*key, config.faiss_m])}.index"
        return FaissIndex(vectors, ids, path=path, m=config.faiss_m, ef_search=config.faiss_ef_search)
    if config.backend == "milvus":
        from grasp.encode import milvus

        full_key = [*key, config.dtype, config.milvus_index, config.faiss_m]
        uri = config.milvus_uri or str(root / "milvus.db")
        return milvus.MilvusIndex(vectors, ids, uri=uri, token_env=config.milvus_token_env,
                                  name=milvus.collection_name(label, full_key),
                                  record=root / f"milvus-{label}-{stable_hash([*full_key, uri])}.json",
                                  index_type=config.milvus_index, m=config.faiss_m, ef_search=config.faiss_ef_search,
                                  batch_rows=config.milvus_batch_rows, progress=progress)
    return ExactIndex(vectors, ids, chunk_rows=config.chunk_rows, two_pass_rows=config.two_pass_rows)


def merge_topk(parts: list[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Merge per-index results (same query rows) into one top-k, best first."""
    ids = np.concatenate([p[0] for p in parts], axis=1)
    scores = np.concatenate([p[1] for p in parts], axis=1)
    order = np.lexsort((ids, -scores), axis=1)[:, :k]
    return np.take_along_axis(ids, order, 1), np.take_along_axis(scores, order, 1)
