"""The reranker interface: (query, candidate documents) -> one relevance score per candidate."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from weakref import WeakKeyDictionary

import numpy as np


class Reranker(ABC):
    name: str = "reranker"
    pool_dependent: bool = False  # True when a candidate's score depends on the others in the pool (BM25's df)

    @abstractmethod
    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        """Relevance of each document to the query (higher is better)."""

    @property
    def vector_part(self) -> VectorReranker | None:
        """The part of this reranker whose candidate vectors can be stored (a bi-encoder's), else None."""
        return None

    def score_pool(self, query: str, documents: Callable[[], Sequence[str]],
                   vectors: np.ndarray | None = None) -> np.ndarray:
        """Scores of a pool: ``documents`` returns its serialized candidates (called only when a text is read);
        ``vectors``: the pool's stored vectors for :attr:`vector_part`, when the store is built."""
        return self.score(query, documents())


class VectorReranker(Reranker):
    """A bi-encoder reranker: score = cos(query, candidate) / ``temperature``. A candidate's vector does
    not depend on the query, so the vectors of every candidate can be stored as an index
    (:class:`grasp.rerank.vectors.CandidateVectors`, built by ``grasp index``) and reranking then
    costs one query encoding and a dot product; without a store, vectors are encoded on demand and
    kept in memory across queries."""

    temperature: float = 1.0

    @property
    @abstractmethod
    def document_encoder(self):
        """The :class:`~grasp.encode.encoder.Encoder` of candidate texts (its ``model_id`` names the weights)."""

    @abstractmethod
    def query_vector(self, query: str) -> np.ndarray:
        """The query's unit vector, shape (dim,)."""

    @property
    def _documents(self) -> DocumentVectorCache:
        """The vectors of candidate texts already encoded by this document encoder, shared by every reranker
        over it (the zero-shot bi-encoder alone and inside the hybrid, compared in one tuning run)."""
        encoder = self.document_encoder
        if (cache := _DOCUMENT_VECTORS.get(encoder)) is None:
            cache = _DOCUMENT_VECTORS[encoder] = DocumentVectorCache(encoder.encode)
        return cache

    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        if not documents:
            return np.zeros(0)
        return self.score_vectors(query, self._documents(list(documents)))

    @property
    def vector_part(self) -> VectorReranker:
        return self

    def score_pool(self, query: str, documents: Callable[[], Sequence[str]],
                   vectors: np.ndarray | None = None) -> np.ndarray:
        return self.score(query, documents()) if vectors is None else self.score_vectors(query, vectors)

    def score_vectors(self, query: str, vectors: np.ndarray) -> np.ndarray:
        """Scores of candidates whose document vectors are given (rows of ``vectors``)."""
        if len(vectors) == 0:
            return np.zeros(0)
        return np.asarray(vectors, dtype=np.float32) @ self.query_vector(query) / self.temperature


class DocumentVectorCache:
    """Vectors of candidate texts, kept across queries: a bi-encoder's document vector does not
    depend on the query, and the same candidates recur in many queries' pools."""

    def __init__(self, embed_texts, max_items: int = 200_000) -> None:
        self.embed_texts = embed_texts  # list[str] -> (n, dim) float32 array
        self.max_items = max_items
        self._vectors: dict[str, np.ndarray] = {}

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            if len(self._vectors) + len(missing) > self.max_items:
                self._vectors.clear()
            for t, v in zip(missing, self.embed_texts(missing), strict=True):
                self._vectors[t] = v
        return np.stack([self._vectors[t] for t in texts])


_DOCUMENT_VECTORS: WeakKeyDictionary = WeakKeyDictionary()  # document encoder -> its DocumentVectorCache
