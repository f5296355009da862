"""Reciprocal-rank fusion of two runs (paper Section 3.2): one low-level kernel per query
(:func:`fuse_pair`) under a Run → Run API (:func:`rrf`, and its two modes).

- static:  score(c) = w / (rrf_k + rank_g(c)) + (1 - w) / (rrf_k + rank_m(c))
- dynamic: score(c) = w_graph(q) / (rrf_k + rank_g(c)) + 1 / (rrf_k + rank_m(c))
- bucketed (the final fusion): static RRF with the (w, rrf_k) of the query's plan bucket
- confidence: static RRF with a per-query w = scale * p^gamma, p the plan's evidence-based confidence

``rrf_k`` is RRF's smoothing constant, not a result depth (the ``k`` results a search returns).

A candidate missing from one ranking gets nothing from it (its rank there is infinite).
Ranks are 1-based; ties in the fused score are broken by ascending node id. Stage 2 and the
final fusion after the reranker both fuse through :func:`rrf`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from grasp.results import Ranking, Run, StageTrace, carrier


@dataclass
class FusionTrace(StageTrace):
    """One query's fusion: the mode, the RRF constant and each fused stage's weight (by stage name)."""

    mode: str = "static"
    rrf_k: float = 60.0
    weights: dict[str, float] = field(default_factory=dict)
    plan_confidence: float | None = None  # confidence mode: P(the graph's top answer is right), from evidence


def fuse_pair(first: Ranking | None, second: Ranking | None, w_first: float, w_second: float, rrf_k: float,
              *, qid: str, stage: str, depth: int | None = None, trace: StageTrace | None = None) -> Ranking:
    """w_first / (rrf_k + rank_1) + w_second / (rrf_k + rank_2) over the union of the two rankings' top ``depth``; the
    fused ranking carries the plan signals one of them carries."""
    a = first.rank_map(depth) if first is not None else {}
    b = second.rank_map(depth) if second is not None else {}
    ids = np.array(sorted(set(a) | set(b)), dtype=np.int64)
    signals = getattr(carrier(first, second), "signals", None)
    if ids.size == 0:
        return Ranking(qid, [], [], stage=stage, trace=trace, signals=signals)
    ra = np.array([a.get(i, np.inf) for i in ids.tolist()])
    rb = np.array([b.get(i, np.inf) for i in ids.tolist()])
    scores = w_first / (rrf_k + ra) + w_second / (rrf_k + rb)
    return Ranking.from_scores(qid, ids, scores, stage=stage, trace=trace, signals=signals)


def rrf(first: Run, second: Run, weights: Callable[[str], tuple[float, float]], *,
        rrf_k: float | Callable[[str], float], mode: str, name: str, depth: int | None = None,
        top: int | None = None) -> Run:
    """Fuse every query of the two runs with per-query weights ``weights(qid) -> (w_first, w_second)`` and
    RRF constant ``rrf_k`` (one for all, or ``rrf_k(qid)``); each ranking keeps ``top`` results (all when None) and a
    :class:`FusionTrace`."""
    out = Run(name)
    for qid in dict.fromkeys([*first, *second]):
        w1, w2 = weights(qid)
        kq = float(rrf_k(qid)) if callable(rrf_k) else rrf_k
        trace = FusionTrace(mode, kq, {first.name: w1, second.name: w2})
        fused = fuse_pair(first.get(qid), second.get(qid), w1, w2, kq, qid=qid, stage=name, depth=depth, trace=trace)
        out.add(fused if top is None else fused.top(top))
    return out


def static_rrf(graph: Run, dense: Run, *, w: float, rrf_k: float, depth: int | None = None, name: str = "static-rrf",
               top: int | None = None) -> Run:
    """Fuse every query of the two runs with one global weight ``w`` of the first run."""
    w = float(w)
    return rrf(graph, dense, lambda _qid: (w, 1.0 - w), rrf_k=rrf_k, mode="static", name=name, depth=depth, top=top)


def weighted_rrf(first: Run, second: Run, w_first: Mapping[str, float], *, rrf_k: float, mode: str,
                 depth: int | None = None, name: str = "weighted-rrf", top: int | None = None) -> Run:
    """Fuse with a per-query weight w of the first run and 1 - w of the second (a query absent from ``w_first``:
    the second run alone)."""
    return rrf(first, second, lambda qid: (float(w_first.get(qid, 0.0)), 1.0 - float(w_first.get(qid, 0.0))),
               rrf_k=rrf_k, mode=mode, name=name, depth=depth, top=top)


def dynamic_rrf(graph: Run, dense: Run, w_graph: Mapping[str, float], *, rrf_k: float, depth: int | None = None,
                name: str = "dynamic-rrf", top: int | None = None) -> Run:
    """Fuse with a per-query graph weight (w_graph = 0 gives the dense ranking alone)."""
    return rrf(graph, dense, lambda qid: (float(w_graph.get(qid, 0.0)), 1.0), rrf_k=rrf_k, mode="dynamic", name=name,
               depth=depth, top=top)
