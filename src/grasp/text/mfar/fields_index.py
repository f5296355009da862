"""Per-field scorers for mFAR: a BM25 index and an embedding matrix for every field.

Both cover the SKB's candidate nodes, in ``node_ids`` order. A node with an empty field has an
all-zero embedding and an empty BM25 document, so that field contributes nothing for it.
Every field has a BM25 scorer; the fields named in ``dense_fields`` also have a dense one (on a
CPU each embedded field costs an encoder pass over the KB, so the default embeds only ``name``
and ``single``, whose vectors are the Stage-1 name- and doc-mode indexes, reused as they are).
Field scores are put on comparable scales: BM25 is divided by the query's best BM25 score in
that field (so it lies in [0, 1]); dense scores are cosines. The same scaling is used in
training and at test time.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grasp.config import BM25Config, VectorIndexConfig
from grasp.encode.encoder import Encoder
from grasp.encode.index import VectorIndex, open_index
from grasp.encode.node_vectors import NodeVectors
from grasp.encode.store import EmbeddingStore
from grasp.errors import ConfigError, IndexCorruptError
from grasp.skb.documents import DocumentLayout
from grasp.skb.fields import FieldSpec, field_specs, field_text
from grasp.skb.graph import SKB
from grasp.storage import (
    atomic_file,
    checksum,
    recorded_sha256,
    require_intact,
    stable_hash,
    write_json_if_writable,
)
from grasp.text.bm25 import BM25Retriever


class _FieldLayout(DocumentLayout):
    """One field of the node as its 'document' (so the BM25 and embedding code serve fields too)."""

    def __init__(self, base: DocumentLayout, spec: FieldSpec, max_names: int) -> None:
        self.base, self.spec, self.max_names = base, spec, max_names
        self.name = f"field-{spec.name}"
        self.version = base.version

    @property
    def key(self) -> str:
        return f"{self.base.key}/{self.spec.kind}:{self.spec.name}:{self.spec.source}:{self.max_names}"

    def document(self, skb: SKB, node: int) -> str:
        return field_text(skb, node, self.spec, self.base, max_names=self.max_names)


def selected_specs(skb: SKB, fields: Sequence[str] | None) -> list[FieldSpec]:
    """The SKB's fields that ``mfar.fields`` keeps (all when None)."""
    specs = field_specs(skb)
    chosen = [s for s in specs if fields is None or s.name in fields]
    if not chosen:
        raise ConfigError(f"mfar.fields {list(fields or [])} names none of this SKB's fields: "
                          f"{', '.join(s.name for s in specs)}")
    return chosen


def weight_names(specs: Sequence[FieldSpec]) -> list[str]:
    """mFAR's (scorer:field) weights in their order: every field's BM25, then every field's dense."""
    return [f"bm25:{s.name}" for s in specs] + [f"dense:{s.name}" for s in specs]


def _load_rows(path: Path, n: int) -> np.ndarray:
    """A field's non-empty candidate rows, refused when damaged: changed since written (where its checksum is
    recorded), unreadable, or not row numbers below ``n``."""
    require_intact(path, recorded_sha256(path.with_suffix(".json")), "mFAR field rows")
    try:
        rows = np.load(path)
    except (OSError, ValueError, EOFError) as e:
        raise IndexCorruptError(f"{path}: unreadable ({e}); delete it and the next run rebuilds it") from None
    if rows.ndim != 1 or rows.dtype.kind not in "iu" or (rows.size and (rows.min() < 0 or rows.max() >= n)):
        raise IndexCorruptError(f"{path}: not a list of candidate rows; delete it and the next run rebuilds it")
    if not path.with_suffix(".json").exists():  # written before its checksum was recorded: recorded now
        _record_rows(path, rows)
    return rows


def _record_rows(path: Path, rows: np.ndarray) -> None:
    write_json_if_writable(path.with_suffix(".json"), {"shape": list(rows.shape), "dtype": str(rows.dtype),
                                                       "sha256": checksum(path)})


class FieldIndex:
    def __init__(self, skb: SKB, layout: DocumentLayout, encoder: Encoder, root: Path, *,
                 bm25: BM25Config | None = None, fields: Sequence[str] | None = None,
                 dense_fields: Sequence[str] | None = None, node_vectors: NodeVectors | None = None,
                 max_names: int = 64, vector_index: VectorIndexConfig | None = None, progress: bool = True) -> None:
        self.skb = skb
        self.encoder = encoder
        self.node_ids = skb.candidate_ids
        self.row_of = {int(n): r for r, n in enumerate(self.node_ids.tolist())}
        self._nodes_hash = stable_hash(self.node_ids.tolist())
        self.specs = selected_specs(skb, fields)
        self.layouts = [_FieldLayout(layout, s, max_names) for s in self.specs]
        vector_index = vector_index or VectorIndexConfig()
        store = EmbeddingStore(Path(root) / "embeddings", dtype=vector_index.dtype)
        self.lexical: list[BM25Retriever] = []
        self.dense_rows: list[np.ndarray] = []   # per field: candidate rows whose field is non-empty
        self.dense: list[np.ndarray] = []        # per field: their embeddings, as stored (float16, memory-mapped)
        self._dense_search: list[VectorIndex] = []
        self.has_dense: list[bool] = []
        for spec, lay in zip(self.specs, self.layouts, strict=True):
            rows_path = Path(root) / "mfar" / f"rows-{stable_hash([lay.key, self.skb.fingerprint, self._nodes_hash])}.npy"
            found: list[np.ndarray] = []  # non-empty rows seen while BM25 renders the field (one pass for both)
            whole = spec.kind == "single"  # the whole document: the BM25 baseline's own index, built once for both
            self.lexical.append(BM25Retriever(
                skb, layout if whole else lay, Path(root) if whole else Path(root) / "mfar", bm25, progress=progress,
                node_ids=self.node_ids,
                on_chunk=None if rows_path.exists() else lambda lo, texts, f=found: f.append(
                    lo + np.flatnonzero([bool(t) for t in texts]))))
            rows = self._nonempty_rows(rows_path, lay, found)
            use_dense = dense_fields is None or spec.name in dense_fields
            self.has_dense.append(use_dense)
            if not use_dense:
                emb = np.zeros((0, encoder.dim), dtype=np.float16)
                rows = rows[:0]
            elif node_vectors is not None and self._reusable(spec, layout, node_vectors):
                emb = self._from_node_vectors(node_vectors, "name" if spec.kind == "name" else "doc", rows)
            else:
                key = {"mode": "field", "layout": lay.key, "skb": skb.fingerprint}
                emb = store.get(f"field-{spec.name.replace(':', '_').replace('/', '_')}", key, self.node_ids[rows],
                                lambda node, lay=lay: lay.document(skb, node), encoder, progress=progress)
            self.dense_rows.append(rows)
            # kept as stored (a float32 copy would double a large KB's fields in memory); the exact index
            # finds each field's top rows in half precision, then scores them in float32
            self.dense.append(emb)
            self._dense_search.append(open_index(
                emb, rows, vector_index, label=f"field-{spec.name.replace(':', '_').replace('/', '_')}",
                key=[encoder.model_id, lay.key, skb.fingerprint, self._nodes_hash], root=store.root,
                progress=progress))

    def _nonempty_rows(self, path: Path, lay: DocumentLayout, found: list[np.ndarray]) -> np.ndarray:
        """Candidate rows whose field is non-empty, kept beside the field's BM25 index so that a start with
        built indexes renders nothing; ``found``: what the BM25 build saw (empty when the index was built
        before, and the field is then rendered once more, without holding its texts)."""
        if path.exists():
            return _load_rows(path, len(self.node_ids))
        if found:
            rows = np.concatenate(found).astype(np.int64)
        else:
            rows = np.array([r for r, node in enumerate(self.node_ids.tolist()) if lay.document(self.skb, node)],
                            dtype=np.int64)
        with atomic_file(path, "wb") as f:
            np.save(f, rows)
        _record_rows(path, rows)
        return rows

    @staticmethod
    def _reusable(spec: FieldSpec, layout: DocumentLayout, vectors: NodeVectors) -> bool:
        """The name field is the name-mode text; single is the doc-mode text when the layouts agree."""
        return spec.kind == "name" or (spec.kind == "single" and vectors.layout.key == layout.key)

    def _from_node_vectors(self, vectors: NodeVectors, mode: str, rows: np.ndarray) -> np.ndarray:
        """The Stage-1 vectors of these candidate rows: a view of the type's memory-mapped matrix when the rows
        are a run of one type's nodes in order (Amazon's and MAG's candidates are one type: no copy of their
        matrix), else gathered from the per-type indexes."""
        types = self.skb.schema.candidate_types
        if len(types) == 1 and rows.size:
            ids, matrix = vectors.embeddings(mode, types[0])  # type: ignore[arg-type]
            nodes = self.node_ids[rows]
            first = int(np.searchsorted(ids, nodes[0]))
            if first + nodes.size <= ids.size and np.array_equal(ids[first:first + nodes.size], nodes):
                return matrix[first:first + nodes.size]
        out = np.zeros((rows.size, self.encoder.dim), dtype=np.float16)
        pos_of = {int(r): p for p, r in enumerate(rows.tolist())}
        for t in self.skb.schema.candidate_types:
            ids, matrix = vectors.embeddings(mode, t)  # type: ignore[arg-type]
            pairs = [(j, pos_of[r]) for j, node in enumerate(ids.tolist())
                     if (r := self.row_of.get(int(node), -1)) in pos_of]
            if pairs:
                src, dst = np.array(pairs).T
                out[dst] = np.asarray(matrix)[src]
        return out

    @property
    def n_fields(self) -> int:
        return len(self.specs)

    def tokenize(self, texts: Sequence[str]) -> list[list[list[int]]]:
        """Token ids of each query in each field's vocabulary: [field][query] -> ids."""
        return [r.tokenizer.tokenize(list(texts), update_vocab=False, return_as="ids", show_progress=False)
                for r in self.lexical]

    def lexical_scores(self, tokens: Sequence[Sequence[int]]) -> np.ndarray:
        """(F, N) BM25 of one query (its ids per field) in every field, each row divided by its maximum."""
        out = np.zeros((self.n_fields, self.node_ids.size), dtype=np.float32)
        for f, (r, ids) in enumerate(zip(self.lexical, tokens, strict=True)):
            if len(ids) == 0:
                continue
            s = np.asarray(r.model.get_scores(list(ids)), dtype=np.float32)
            top = float(s.max()) if s.size else 0.0
            if top > 0:
                out[f] = s / top
        return out

    def dense_top(self, query_vec: np.ndarray, depth: int) -> list[np.ndarray]:
        """Per dense field, the candidate rows of its ``depth`` best cosines with the query (exact, best
        first; only rows whose field is non-empty)."""
        return [index.search(query_vec, depth)[0][0] for index, rows in zip(self._dense_search, self.dense_rows,
                                                                           strict=True) if rows.size]

    def dense_scores(self, query_vec: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """(F, len(rows)) cosines of one query with the given candidate rows in every field."""
        out = np.zeros((self.n_fields, len(rows)), dtype=np.float32)
        for f, (have, m) in enumerate(zip(self.dense_rows, self.dense, strict=True)):
            pos = np.searchsorted(have, rows)
            hit = (pos < have.size) & (have[np.minimum(pos, max(have.size - 1, 0))] == rows) if have.size else np.zeros(len(rows), bool)
            if hit.any():
                out[f, hit] = np.asarray(m[pos[hit]], dtype=np.float32) @ query_vec
        return out
