"""Reciprocal-rank fusion of two runs (paper Section 3.2): one low-level kernel per query
(:func:`fuse_pair`) under a Run → Run API (:func:`rrf`, and its two modes).

- static:  score(c) = w / (k + rank_g(c)) + (1 - w) / (k + rank_m(c))
- dynamic: score(c) = w_graph(q) / (k + rank_g(c)) + 1 / (k + rank_m(c))
- bucketed (the final fusion): static RRF with the (w, k) of the query's plan bucket

A candidate missing from one ranking gets nothing from it (its rank there is infinite).
Ranks are 1-based; ties in the fused score are broken by ascending node id. Stage 2 and the
final fusion after the reranker both fuse through :func:`rrf`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from grasp.results import Ranking, Run, StageTrace


@dataclass
class FusionTrace(StageTrace):
    """One query's fusion: the mode, the RRF constant and each fused stage's weight (by stage name)."""

    mode: str = "static"
    k: float = 60.0
    weights: dict[str, float] = field(default_factory=dict)


def fuse_pair(first: Ranking | None, second: Ranking | None, w_first: float, w_second: float, k: float,
              *, qid: str, stage: str, depth: int | None = None, trace: StageTrace | None = None) -> Ranking:
    """w_first / (k + rank_1) + w_second / (k + rank_2) over the union of the two rankings' top ``depth``."""
    a = first.rank_map(depth) if first is not None else {}
    b = second.rank_map(depth) if second is not None else {}
    ids = np.array(sorted(set(a) | set(b)), dtype=np.int64)
    if ids.size == 0:
        return Ranking(qid, [], [], stage=stage, trace=trace)
    ra = np.array([a.get(i, np.inf) for i in ids.tolist()])
    rb = np.array([b.get(i, np.inf) for i in ids.tolist()])
    scores = w_first / (k + ra) + w_second / (k + rb)
    return Ranking.from_scores(qid, ids, scores, stage=stage, trace=trace)


def rrf(first: Run, second: Run, weights: Callable[[str], tuple[float, float]], *,
        k: float | Callable[[str], float], mode: str, name: str, depth: int | None = None,
        top: int | None = None) -> Run:
    """Fuse every query of the two runs with per-query weights ``weights(qid) -> (w_first, w_second)`` and
    RRF constant ``k`` (one for all, or ``k(qid)``); each ranking keeps ``top`` results (all when None) and a
    :class:`FusionTrace`."""
    out = Run(name)
    for qid in dict.fromkeys([*first, *second]):
        w1, w2 = weights(qid)
        kq = float(k(qid)) if callable(k) else k
        trace = FusionTrace(mode, kq, {first.name: w1, second.name: w2})
        fused = fuse_pair(first.get(qid), second.get(qid), w1, w2, kq, qid=qid, stage=name, depth=depth, trace=trace)
        out.add(fused if top is None else fused.top(top))
    return out


def static_rrf(graph: Run, dense: Run, *, w: float, k: float, depth: int | None = None, name: str = "static-rrf",
               top: int | None = None) -> Run:
    """Fuse every query of the two runs with one global weight ``w`` of the first run."""
    w = float(w)
    return rrf(graph, dense, lambda _qid: (w, 1.0 - w), k=k, mode="static", name=name, depth=depth, top=top)


def dynamic_rrf(graph: Run, dense: Run, w_graph: Mapping[str, float], *, k: float, depth: int | None = None,
                name: str = "dynamic-rrf", top: int | None = None) -> Run:
    """Fuse with a per-query graph weight (w_graph = 0 gives the dense ranking alone)."""
    return rrf(graph, dense, lambda qid: (float(w_graph.get(qid, 0.0)), 1.0), k=k, mode="dynamic", name=name,
               depth=depth, top=top)
