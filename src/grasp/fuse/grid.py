"""Grid search of the fusion hyperparameters over cached runs, vectorised (paper appendix 7).

Everything is computed from a :class:`FusionTable` (per query: the union of the two rankings'
candidates with their graph and dense ranks, and which are gold), so no retrieval is re-run.
Static RRF: every (w, k) of the grid. Dynamic RRF: a query's Hit@1 depends on its weight only
through its (n_cand bucket, risk level) cell, so hits are precomputed per cell for every distinct
weight value, and every (k, w_bucket, m_risk) combination is then a sum of table lookups.
Selection is by Hit@1 (ties: the first setting in grid order).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from grasp.fuse.dynamic import bucket_of, risk_index
from grasp.graph.retriever import plan_signals
from grasp.plan.model import RISK_LEVELS
from grasp.results import Query, Run

STATIC_W = tuple(round(0.05 * i, 2) for i in range(21))
STATIC_K = (1, 2, 5, 10, 20, 40, 60, 80, 100)
DYNAMIC_K = (5, 10, 20, 40, 80, 150, 300)
W_BUCKET = ((1.0, 1.2, 1.4, 1.6, 2.0), (0.8, 1.0, 1.2, 1.4), (0.2, 0.4, 0.6, 0.8), (0.0, 0.05, 0.1), (0.0, 0.05, 0.1))
M_RISK = ((0.0, 0.25, 0.5, 0.75), (0.5, 0.75, 1.0, 1.25), (0.75, 1.0, 1.25, 1.5), (1.0, 1.25, 1.5, 2.0))


@dataclass
class FusionTable:
    qids: list[str]
    rank_g: np.ndarray   # (Q, C) 1-based ranks, inf where absent or padding
    rank_m: np.ndarray
    gold: np.ndarray     # (Q, C) bool
    valid: np.ndarray    # (Q, C) bool: a real candidate (not padding)
    bucket: np.ndarray   # (Q,) n_cand bucket index
    risk: np.ndarray     # (Q,) risk level index

    @classmethod
    def build(cls, graph: Run, dense: Run, queries: Sequence[Query], *, candidate_mask: np.ndarray | None = None,
              depth: int = 100, link_floor: float = 0.0) -> FusionTable:
        rows = []
        for q in queries:
            g = graph.get(q.qid)
            m = dense.get(q.qid)
            rg = g.rank_map(depth) if g is not None else {}
            rm = m.rank_map(depth) if m is not None else {}
            ids = sorted(set(rg) | set(rm))  # ascending id: argmax's first maximum = the tie-break of rankings
            if candidate_mask is not None:
                ids = [i for i in ids if candidate_mask[i]]
            rows.append((ids, rg, rm, set(q.answer_ids), *plan_signals(g, link_floor)))
        width = max([len(r[0]) for r in rows] + [1])
        n = len(rows)
        rank_g = np.full((n, width), np.inf)
        rank_m = np.full((n, width), np.inf)
        gold = np.zeros((n, width), dtype=bool)
        valid = np.zeros((n, width), dtype=bool)
        bucket = np.zeros(n, dtype=np.int64)
        risk = np.zeros(n, dtype=np.int64)
        for i, (ids, rg, rm, g_set, n_cand, r) in enumerate(rows):
            c = len(ids)
            rank_g[i, :c] = [rg.get(x, np.inf) for x in ids]
            rank_m[i, :c] = [rm.get(x, np.inf) for x in ids]
            gold[i, :c] = [x in g_set for x in ids]
            valid[i, :c] = True
            bucket[i] = bucket_of(n_cand)
            risk[i] = risk_index(r)
        return cls([q.qid for q in queries], rank_g, rank_m, gold, valid, bucket, risk)

    def hits_at_1(self, w_graph: np.ndarray | float, w_dense: np.ndarray | float, k: float) -> np.ndarray:
        """(Q,) bool: is the top fused candidate gold, for per-query (or global) weights."""
        wg = np.broadcast_to(np.asarray(w_graph, dtype=np.float64), (len(self.qids),))[:, None]
        wd = np.broadcast_to(np.asarray(w_dense, dtype=np.float64), (len(self.qids),))[:, None]
        scores = wg / (k + self.rank_g) + wd / (k + self.rank_m)
        scores = np.where(self.valid, scores, -np.inf)
        top = np.argmax(scores, axis=1)
        has = self.valid.any(axis=1) & (np.take_along_axis(scores, top[:, None], 1)[:, 0] > 0)
        return has & np.take_along_axis(self.gold, top[:, None], 1)[:, 0]


@dataclass
class GridResult:
    mode: str
    best: dict
    hit1: float
    n_settings: int
    within_1pt: int                        # settings within 0.01 Hit@1 of the best: how flat the optimum is
    surface: np.ndarray | None = None      # static: Hit@1 over (w, k)
    axes: dict = field(default_factory=dict)


def search_static(table: FusionTable, ws: Sequence[float] = STATIC_W, ks: Sequence[float] = STATIC_K) -> GridResult:
    surface = np.array([[table.hits_at_1(w, 1.0 - w, k).mean() for k in ks] for w in ws])
    i, j = np.unravel_index(np.argmax(surface), surface.shape)
    best = float(surface[i, j])
    return GridResult("static", {"w": float(ws[i]), "k": float(ks[j])}, best, surface.size,
                      int((surface >= best - 0.01 - 1e-12).sum()), surface, {"w": list(ws), "k": list(ks)})


def search_dynamic(table: FusionTable, ks: Sequence[float] = DYNAMIC_K, w_bucket=W_BUCKET, m_risk=M_RISK) -> GridResult:
    values = sorted({round(a * b, 6) for opts_b in w_bucket for opts_r in m_risk for a in opts_b for b in opts_r})
    index = {v: i for i, v in enumerate(values)}
    n_b, n_r = len(w_bucket), len(m_risk)
    # H[k, b, r, v]: gold-at-1 count of the queries in cell (b, r) when their graph weight is values[v]
    H = np.zeros((len(ks), n_b, n_r, len(values)))
    for ki, k in enumerate(ks):
        for vi, v in enumerate(values):
            hits = table.hits_at_1(v, 1.0, k)
            np.add.at(H[ki, :, :, vi], (table.bucket, table.risk), hits)
    shape = (len(ks),) + tuple(len(o) for o in w_bucket) + tuple(len(o) for o in m_risk)
    total = np.zeros(shape)
    for b, r in itertools.product(range(n_b), range(n_r)):
        idx = np.vectorize(lambda x: index[round(x, 6)])(np.outer(w_bucket[b], m_risk[r]))
        contrib = H[:, b, r, :][:, idx]                      # (K, len(w_bucket[b]), len(m_risk[r]))
        view = [len(ks)] + [1] * (n_b + n_r)
        view[1 + b] = len(w_bucket[b])
        view[1 + n_b + r] = len(m_risk[r])
        total += contrib.reshape(view)
    total /= max(len(table.qids), 1)
    flat = int(np.argmax(total))
    pos = np.unravel_index(flat, shape)
    best = {
        "k": float(ks[pos[0]]),
        "w_bucket": [float(w_bucket[b][pos[1 + b]]) for b in range(n_b)],
        "m_risk": {RISK_LEVELS[r]: float(m_risk[r][pos[1 + n_b + r]]) for r in range(n_r)},
    }
    top = float(total.flat[flat])
    return GridResult("dynamic", best, top, total.size, int((total >= top - 0.01 - 1e-12).sum()))
