"""A zero-shot hybrid: the bi-encoder's cosine and BM25 over the pool, each standardised over the pool and
added (equal weights, nothing tuned).

Why: the two zero-shot rerankers see different evidence (MiniLM's paraphrase-level match of the query to the
serialized candidate; exact query terms in its fields and neighbours, weighted by how rare they are in the
pool), and their errors differ. Their raw scales differ too (a cosine in [-1, 1], an unbounded BM25 sum), so
each is turned into z-scores over the pool first, the usual way to add rankers' scores without a trained
weight. A score depends on the rest of the pool (the z-scores and BM25's frequencies). The bi-encoder part
reads the stored candidate vectors once `grasp index` built them, as the bi-encoder alone does."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

import numpy as np

from grasp.rerank.base import Reranker, VectorReranker


def standardise(scores: np.ndarray) -> np.ndarray:
    """(x - mean) / std over the pool; a pool whose scores are all equal gives zeros."""
    scores = np.asarray(scores, dtype=np.float64)
    std = scores.std()
    return (scores - scores.mean()) / std if std > 1e-12 else np.zeros_like(scores)


class HybridReranker(Reranker):
    name = "hybrid"
    pool_dependent = True

    def __init__(self, rerankers: Sequence[Reranker]) -> None:
        if len(rerankers) < 2:
            raise ValueError("a hybrid reranker adds two or more rerankers' scores")
        self.rerankers = list(rerankers)

    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        if not documents:
            return np.zeros(0)
        return np.sum([standardise(r.score(query, documents)) for r in self.rerankers], axis=0)

    @property
    def vector_part(self) -> VectorReranker | None:
        """The first part with storable candidate vectors (the bi-encoder's)."""
        return next((r.vector_part for r in self.rerankers if r.vector_part is not None), None)

    def score_pool(self, query: str, documents: Callable[[], Sequence[str]],
                   vectors: np.ndarray | None = None) -> np.ndarray:
        texts = cache(documents)  # serialized once, for the parts that read text
        part = self.vector_part
        scores = [r.score_pool(query, texts, vectors if part is not None and r.vector_part is part else None)
                  for r in self.rerankers]
        return np.sum([standardise(s) for s in scores], axis=0) if len(scores[0]) else np.zeros(0)
