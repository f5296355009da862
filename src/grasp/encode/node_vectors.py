"""Per-node-type vector indexes in two modes, as the planner's anchor linking needs them:

- ``name`` mode: the node's name alone (short entity strings such as "Sony");
- ``doc`` mode: the node's full document (descriptive phrases).

Embeddings are built per (mode, node type) on first use and reused from the embedding store.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Literal

import numpy as np

from grasp.config import VectorIndexConfig
from grasp.encode.encoder import Encoder
from grasp.encode.index import VectorIndex, merge_topk, open_index
from grasp.encode.store import EmbeddingStore
from grasp.skb.documents import DocumentLayout, name_text
from grasp.skb.graph import SKB

Mode = Literal["name", "doc"]


class NodeVectors:
    def __init__(self, skb: SKB, encoder: Encoder, layout: DocumentLayout, root: Path,
                 config: VectorIndexConfig | None = None, *, progress: bool = True) -> None:
        self.skb = skb
        self.encoder = encoder
        self.layout = layout
        self.config = config or VectorIndexConfig()
        self.store = EmbeddingStore(root, dtype=self.config.dtype)
        self.progress = progress
        self._indexes: dict[tuple[str, str], VectorIndex] = {}
        self._matrices: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}

    def embeddings(self, mode: Mode, node_type: str) -> tuple[np.ndarray, np.ndarray]:
        """(node ids, matrix) of one node type in one mode (loaded once, then kept)."""
        if (mode, node_type) in self._matrices:
            return self._matrices[(mode, node_type)]
        ids = self.skb.nodes_of_type(node_type)
        if mode == "name":
            key = {"mode": "name", "skb": self.skb.fingerprint}
            text_of = lambda i: name_text(self.skb, i)  # noqa: E731
        elif mode == "doc":
            key = {"mode": "doc", "layout": self.layout.key, "skb": self.skb.fingerprint}
            text_of = lambda i: self.layout.document(self.skb, i)  # noqa: E731
        else:
            raise ValueError(f"mode must be 'name' or 'doc', not {mode!r}")
        safe_type = node_type.replace("/", "_")
        matrix = self.store.get(f"{mode}-{safe_type}", key, ids, text_of, self.encoder, progress=self.progress)
        self._matrices[(mode, node_type)] = (ids, matrix)
        return ids, matrix

    def index(self, mode: Mode, node_type: str) -> VectorIndex:
        if (mode, node_type) not in self._indexes:
            ids, matrix = self.embeddings(mode, node_type)
            key = [self.encoder.model_id, self.layout.key, self.skb.fingerprint, mode, node_type]
            self._indexes[(mode, node_type)] = open_index(matrix, ids, self.config, label=f"{mode}-{node_type.replace('/', '_')}",
                                                          key=key, root=self.store.root, progress=self.progress)
        return self._indexes[(mode, node_type)]

    def search(self, query_vectors: np.ndarray, mode: Mode, node_types: Iterable[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k nodes of the given types for each query vector, merged across types."""
        parts = [self.index(mode, t).search(query_vectors, k) for t in node_types]
        return merge_topk(parts, k)
