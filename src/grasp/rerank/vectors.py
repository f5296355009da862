"""Stored reranker vectors: a bi-encoder reranker's vector of every candidate's serialization.

Keyed, like every embedding matrix, by the encoder's ``model_id`` (for a trained reranker: the base
model, the adapter's digest and the token length), the serialization's key and the SKB fingerprint,
so a retrained adapter or a changed serialization never reuses old vectors. Built by ``grasp index``
(resumable and atomic through :class:`~grasp.encode.store.EmbeddingStore`); stored as float32 so
that scores equal on-the-fly encoding.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from grasp.encode.encoder import Encoder
from grasp.encode.store import EmbeddingStore
from grasp.skb.documents import CandidateSerializer


class CandidateVectors:
    name = "rerank-candidates"

    def __init__(self, root: Path, serializer: CandidateSerializer, encoder: Encoder, *, progress: bool = True) -> None:
        self.serializer, self.encoder, self.progress = serializer, encoder, progress
        self.store = EmbeddingStore(Path(root), dtype="float32")
        skb = serializer.skb
        self.node_ids = np.asarray(skb.candidate_ids, dtype=np.int64)
        self.key = {"mode": "rerank", "serialization": serializer.key, "skb": skb.fingerprint}
        self._row = np.full(skb.num_nodes, -1, dtype=np.int64)
        self._row[self.node_ids] = np.arange(self.node_ids.size)
        self._matrix: np.ndarray | None = None

    @property
    def built(self) -> bool:
        """Whether the full matrix is on disk (``grasp index`` builds it)."""
        return self._matrix is not None or self.store.exists(self.name, self.key, self.node_ids, self.encoder)

    def matrix(self) -> np.ndarray:
        """(n candidates, dim), built if missing (an encoder pass over every candidate)."""
        if self._matrix is None:
            self._matrix = self.store.get(self.name, self.key, self.node_ids, self.serializer, self.encoder,
                                          progress=self.progress)
        return self._matrix

    def of(self, node_ids: np.ndarray) -> np.ndarray:
        """The stored vectors of these candidate nodes, in their order."""
        rows = self._row[np.asarray(node_ids, dtype=np.int64)]
        if (rows < 0).any():
            raise ValueError("not candidate nodes: " + ", ".join(str(n) for n in np.asarray(node_ids)[rows < 0][:5]))
        return np.asarray(self.matrix()[rows], dtype=np.float32)
