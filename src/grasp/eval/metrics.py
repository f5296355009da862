"""Per-query ranking metrics with STaRK's definitions.

Only candidate nodes are ranked: non-candidates are dropped from the ranking and from the
gold set before scoring (STaRK's evaluator does the same). Then, for a ranking ``r`` and gold
set ``G``:

- ``hit@k``    1 if any of the first k results is gold, else 0;
- ``recall@k`` |first k ∩ G| / |G| (over all gold, not capped at k);
- ``mrr``      1 / rank of the first gold result; 0 when no gold result is ranked.

A query whose gold set is empty after filtering scores 0 on every metric.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

DEFAULT_METRICS = ("hit@1", "hit@5", "recall@20", "mrr")


def _is_gold(ranked: np.ndarray, gold: np.ndarray) -> np.ndarray:
    return np.isin(ranked, gold)


def hit_at_k(ranked: np.ndarray, gold: np.ndarray, k: int) -> float:
    if gold.size == 0:
        return 0.0
    return float(_is_gold(ranked[:k], gold).any())


def recall_at_k(ranked: np.ndarray, gold: np.ndarray, k: int) -> float:
    if gold.size == 0:
        return 0.0
    return float(_is_gold(ranked[:k], gold).sum() / gold.size)


def reciprocal_rank(ranked: np.ndarray, gold: np.ndarray) -> float:
    hits = np.flatnonzero(_is_gold(ranked, gold))
    return 1.0 / (hits[0] + 1) if hits.size else 0.0


def metric_fn(name: str) -> Callable[[np.ndarray, np.ndarray], float]:
    """The function for a metric name: ``hit@K``, ``recall@K`` or ``mrr``."""
    if name == "mrr":
        return reciprocal_rank
    kind, _, k = name.partition("@")
    if kind in ("hit", "recall") and k.isdigit() and int(k) > 0:
        fn = hit_at_k if kind == "hit" else recall_at_k
        return lambda ranked, gold: fn(ranked, gold, int(k))
    raise ValueError(f"unknown metric {name!r}; use hit@K, recall@K or mrr")


def score_query(ranked: np.ndarray, gold: np.ndarray, metrics=DEFAULT_METRICS,
                candidate_mask: np.ndarray | None = None) -> dict[str, float]:
    """All metrics for one query, after dropping non-candidates when a mask is given."""
    ranked = np.asarray(ranked, dtype=np.int64)
    gold = np.unique(np.asarray(gold, dtype=np.int64))
    if candidate_mask is not None:
        n = candidate_mask.shape[0]
        ranked = ranked[(ranked >= 0) & (ranked < n)]
        ranked = ranked[candidate_mask[ranked]]
        gold = gold[(gold >= 0) & (gold < n)]
        gold = gold[candidate_mask[gold]]
    return {m: metric_fn(m)(ranked, gold) for m in metrics}
