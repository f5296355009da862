"""A zero-shot hybrid: the bi-encoder's cosine and BM25 over the pool, each standardised over the pool and
added (equal weights, nothing tuned).

Why: the two zero-shot rerankers see different evidence (MiniLM's paraphrase-level match of the query to the
serialized candidate; exact query terms in its fields and neighbours, weighted by how rare they are in the
pool), and their errors differ. Their raw scales differ too (a cosine in [-1, 1], an unbounded BM25 sum), so
each is turned into z-scores over the pool first, the usual way to add rankers' scores without a trained
weight. A score depends on the rest of the pool (the z-scores and BM25's frequencies)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from grasp.rerank.base import Reranker


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
