"""Reciprocal-rank fusion of two rankings (paper Section 3.2).

- static:  score(c) = w / (k + rank_g(c)) + (1 - w) / (k + rank_m(c))
- dynamic: score(c) = w_graph(q) / (k + rank_g(c)) + 1 / (k + rank_m(c))

A candidate missing from one ranking gets nothing from it (its rank there is infinite).
Ranks are 1-based; ties in the fused score are broken by ascending node id.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from grasp.results import Ranking, Run


def _rank_map(r: Ranking | None) -> dict[int, int]:
    if r is None:
        return {}
    return {int(n): i + 1 for i, n in enumerate(r.node_ids.tolist())}


def fuse_pair(first: Ranking | None, second: Ranking | None, w_first: float, w_second: float, k: float,
              *, qid: str, stage: str, depth: int | None = None, meta: dict | None = None) -> Ranking:
    """w_first / (k + rank_1) + w_second / (k + rank_2) over the union of the two rankings."""
    a = _rank_map(first.top(depth) if (first is not None and depth) else first)
    b = _rank_map(second.top(depth) if (second is not None and depth) else second)
    ids = np.array(sorted(set(a) | set(b)), dtype=np.int64)
    if ids.size == 0:
        return Ranking(qid, [], [], stage=stage, meta=dict(meta or {}))
    ra = np.array([a.get(i, np.inf) for i in ids.tolist()])
    rb = np.array([b.get(i, np.inf) for i in ids.tolist()])
    scores = w_first / (k + ra) + w_second / (k + rb)
    return Ranking.from_scores(qid, ids, scores, stage=stage, meta=dict(meta or {}))


def static_rrf(graph: Run, dense: Run, *, w: float, k: float, depth: int | None = None, name: str = "static-rrf") -> Run:
    """Fuse every query of the two runs with one global graph weight ``w``."""
    out = Run(name)
    for qid in dict.fromkeys([*graph, *dense]):
        out.add(fuse_pair(graph.get(qid), dense.get(qid), w, 1.0 - w, k, qid=qid, stage=name, depth=depth,
                          meta={"w_graph": w, "k": k}))
    return out


def dynamic_rrf(graph: Run, dense: Run, w_graph: Mapping[str, float], *, k: float, depth: int | None = None,
                name: str = "dynamic-rrf") -> Run:
    """Fuse with a per-query graph weight (w_graph = 0 gives the dense ranking alone)."""
    out = Run(name)
    for qid in dict.fromkeys([*graph, *dense]):
        w = float(w_graph.get(qid, 0.0))
        out.add(fuse_pair(graph.get(qid), dense.get(qid), w, 1.0, k, qid=qid, stage=name, depth=depth,
                          meta={"w_graph": w, "k": k}))
    return out
