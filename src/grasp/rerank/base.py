"""The reranker interface: (query, candidate documents) -> one relevance score per candidate."""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections import OrderedDict
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
    """Vectors of candidate texts, kept across queries: a bi-encoder's document vector does not depend on the
    query, and the same candidates recur in many queries' pools. Least recently used first out past ``max_bytes``
    (keyed by a digest of the text, so a long serialized candidate costs 20 bytes of key), so that a service's memory
    stays flat however many distinct candidates its queries bring."""

    def __init__(self, embed_texts, max_bytes: int = 64 << 20) -> None:
        self.embed_texts = embed_texts  # list[str] -> (n, dim) float32 array
        self.max_bytes = max_bytes
        self._vectors: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._bytes = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode("utf-8", "surrogatepass")).digest() for t in texts]
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._vectors}
        if missing:
            for k, v in zip(missing, self.embed_texts(list(missing.values())), strict=True):
                self._vectors[k] = v = np.asarray(v, dtype=np.float32)
                self._bytes += v.nbytes
        out = np.stack([self._vectors[k] for k in keys])
        for k in keys:
            self._vectors.move_to_end(k)
        while self._bytes > self.max_bytes and len(self._vectors) > len(set(keys)):
            self._bytes -= self._vectors.popitem(last=False)[1].nbytes
        return out

    def __len__(self) -> int:
        return len(self._vectors)


_DOCUMENT_VECTORS: WeakKeyDictionary = WeakKeyDictionary()  # document encoder -> its DocumentVectorCache
