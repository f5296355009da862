"""Grid search of the fusion hyperparameters over cached runs, vectorised (paper appendix 7).

Everything is computed from a :class:`FusionTable` (per query: the union of the two rankings'
candidates with their graph and dense ranks, and which are gold), so no retrieval is re-run.
Static RRF: every (w, k) of the grid. Dynamic RRF: a query's Hit@1 depends on its weight only
through its (n_cand bucket, risk level) cell, so hits are precomputed per cell for every distinct
weight value, and every (k, w_bucket, m_risk) combination is then a sum of table lookups.
Bucketed static RRF (the final fusion's plan-conditioned rule): one static (w, k) per bucket of the
plan signal; the buckets' queries are disjoint, so each bucket's grid is searched on its own.
Confidence RRF: a per-query static weight w = scale * p^gamma from the plan's confidence p
(:mod:`grasp.fuse.confidence`), every (gamma, scale, k).
Selection is by Hit@1 (ties: the first setting in grid order); the static grid can instead take the
centre of the best 3x3 neighbourhood (a flat region rather than a sharp optimum), and
:func:`cross_validate` estimates, by K folds of the validation queries, how each selection rule does
on queries its grid did not see.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from grasp.fuse.confidence import confidence_weight
from grasp.fuse.dynamic import BUCKET_EDGES, plan_bucket, risk_index
from grasp.plan.model import RISK_LEVELS
from grasp.results import Query, Run, carrier

STATIC_W = tuple(round(0.05 * i, 2) for i in range(21))
STATIC_K = (1, 2, 5, 10, 20, 40, 60, 80, 100)
DYNAMIC_K = (5, 10, 20, 40, 80, 150, 300)
W_BUCKET = ((1.0, 1.2, 1.4, 1.6, 2.0), (0.8, 1.0, 1.2, 1.4), (0.2, 0.4, 0.6, 0.8), (0.0, 0.05, 0.1), (0.0, 0.05, 0.1))
M_RISK = ((0.0, 0.25, 0.5, 0.75), (0.5, 0.75, 1.0, 1.25), (0.75, 1.0, 1.25, 1.5), (1.0, 1.25, 1.5, 2.0))
CONFIDENCE_GAMMA = (0.5, 1.0, 2.0, 3.0)  # w = scale * p^gamma: gamma 1, scale 1 weighs the graph by P(it is right)
CONFIDENCE_SCALE = (0.5, 0.75, 1.0)


@dataclass
class FusionTable:
    qids: list[str]
    rank_g: np.ndarray   # (Q, C) 1-based ranks, inf where absent or padding
    rank_m: np.ndarray
    gold: np.ndarray     # (Q, C) bool
    valid: np.ndarray    # (Q, C) bool: a real candidate (not padding)
    bucket: np.ndarray   # (Q,) n_cand bucket index
    risk: np.ndarray     # (Q,) risk level index
    confidence: np.ndarray | None = None  # (Q,) the plan's confidence p (0: no candidate), for confidence RRF

    @classmethod
    def build(cls, graph: Run, dense: Run, queries: Sequence[Query], *, candidate_mask: np.ndarray | None = None,
              depth: int = 100, link_floor: float = 0.0, edges: Sequence[int] = BUCKET_EDGES,
              confidence: np.ndarray | None = None) -> FusionTable:
        """``graph`` and ``dense`` are the first and second runs fused; the plan signals (n_cand bucket by
        ``edges``, risk level) are those either ranking carries (Stage 2: the graph ranking's; the final fusion:
        the upstream's, fused from the graph ranking). ``confidence``: per query, the plan's confidence."""
        rows = []
        for q in queries:
            g = graph.get(q.qid)
            m = dense.get(q.qid)
            rg = g.rank_map(depth) if g is not None else {}
            rm = m.rank_map(depth) if m is not None else {}
            ids = sorted(set(rg) | set(rm))  # ascending id: argmax's first maximum = the tie-break of rankings
            if candidate_mask is not None:
                ids = [i for i in ids if candidate_mask[i]]
            rows.append((ids, rg, rm, set(q.answer_ids), *plan_bucket(carrier(g, m), edges, link_floor)))
        width = max([len(r[0]) for r in rows] + [1])
        n = len(rows)
        rank_g = np.full((n, width), np.inf)
        rank_m = np.full((n, width), np.inf)
        gold = np.zeros((n, width), dtype=bool)
        valid = np.zeros((n, width), dtype=bool)
        bucket = np.zeros(n, dtype=np.int64)
        risk = np.zeros(n, dtype=np.int64)
        for i, (ids, rg, rm, g_set, b, r) in enumerate(rows):
            c = len(ids)
            rank_g[i, :c] = [rg.get(x, np.inf) for x in ids]
            rank_m[i, :c] = [rm.get(x, np.inf) for x in ids]
            gold[i, :c] = [x in g_set for x in ids]
            valid[i, :c] = True
            bucket[i] = b
            risk[i] = risk_index(r)
        return cls([q.qid for q in queries], rank_g, rank_m, gold, valid, bucket, risk,
                   None if confidence is None else np.nan_to_num(np.asarray(confidence, dtype=np.float64)))

    def hits_at_1(self, w_graph: np.ndarray | float, w_dense: np.ndarray | float, k: np.ndarray | float) -> np.ndarray:
        """(Q,) bool: is the top fused candidate gold, for per-query (or global) weights and RRF constants."""
        wg, wd, kq = (np.broadcast_to(np.asarray(v, dtype=np.float64), (len(self.qids),))[:, None]
                      for v in (w_graph, w_dense, k))
        scores = wg / (kq + self.rank_g) + wd / (kq + self.rank_m)
        scores = np.where(self.valid, scores, -np.inf)
        top = np.argmax(scores, axis=1)
        has = self.valid.any(axis=1) & (np.take_along_axis(scores, top[:, None], 1)[:, 0] > 0)
        return has & np.take_along_axis(self.gold, top[:, None], 1)[:, 0]

    def subset(self, rows: np.ndarray) -> FusionTable:
        """The table of some queries only (row indices)."""
        return FusionTable([self.qids[i] for i in rows], self.rank_g[rows], self.rank_m[rows], self.gold[rows],
                           self.valid[rows], self.bucket[rows], self.risk[rows],
                           None if self.confidence is None else self.confidence[rows])


@dataclass
class GridResult:
    mode: str
    best: dict
    hit1: float
    n_settings: int                        # settings searched (bucketed: each bucket's grid, added up)
    within_1pt: int                        # settings within 0.01 Hit@1 of the best: how flat the optimum is (0: not counted)
    surface: np.ndarray | None = None      # static: Hit@1 over (w, k)
    axes: dict = field(default_factory=dict)

    def hits(self, table: FusionTable) -> np.ndarray:
        """(Q,) bool: Hit@1 of the chosen setting on (other) queries."""
        if self.mode == "static":
            return table.hits_at_1(self.best["w"], 1.0 - self.best["w"], self.best["rrf_k"])
        if self.mode == "confidence":
            w = confidence_weight(table.confidence, self.best["gamma"], self.best["scale"])
            return table.hits_at_1(w, 1.0 - w, self.best["rrf_k"])
        if self.mode == "bucketed":
            w = np.asarray(self.best["w_bucket"])[table.bucket]
            return table.hits_at_1(w, 1.0 - w, np.asarray(self.best["rrf_k_bucket"])[table.bucket])
        w_bucket = np.asarray(self.best["w_bucket"])
        m_risk = np.asarray([self.best["m_risk"][r] for r in RISK_LEVELS])
        return table.hits_at_1(w_bucket[table.bucket] * m_risk[table.risk], 1.0, self.best["rrf_k"])


def neighbourhood_mean(surface: np.ndarray) -> np.ndarray:
    """Each cell's mean over its 3x3 neighbourhood (edges: the cells that exist)."""
    padded = np.pad(surface, 1, constant_values=np.nan)
    stack = [padded[1 + di : 1 + di + surface.shape[0], 1 + dj : 1 + dj + surface.shape[1]]
             for di in (-1, 0, 1) for dj in (-1, 0, 1)]
    return np.nanmean(np.stack(stack), axis=0)


def search_static(table: FusionTable, ws: Sequence[float] = STATIC_W, ks: Sequence[float] = STATIC_K, *,
                  flat: bool = False) -> GridResult:
    """Every (w, k); the best cell, or with ``flat`` the cell whose 3x3 neighbourhood is best on average."""
    surface = np.array([[table.hits_at_1(w, 1.0 - w, k).mean() for k in ks] for w in ws])
    i, j = np.unravel_index(np.argmax(neighbourhood_mean(surface) if flat else surface), surface.shape)
    top = float(surface.max())
    return GridResult("static", {"w": float(ws[i]), "rrf_k": float(ks[j])}, float(surface[i, j]), surface.size,
                      int((surface >= top - 0.01 - 1e-12).sum()), surface, {"w": list(ws), "k": list(ks)})


def search_bucketed(table: FusionTable, n_buckets: int, ws: Sequence[float] = STATIC_W,
                    ks: Sequence[float] = STATIC_K, *, flat: bool = False) -> GridResult:
    """One static (w, k) per bucket of ``table.bucket`` (0..n_buckets-1), each searched on its own queries
    (best cell, or with ``flat`` the best 3x3 neighbourhood); a bucket without queries gets the static (w, k)
    fitted on every query. The in-sample Hit@1 is the buckets' hits over every query."""
    w_bucket, k_bucket, hits = [], [], 0.0
    pooled = None
    for b in range(n_buckets):
        rows = np.flatnonzero(table.bucket == b)
        if rows.size == 0:
            pooled = pooled or search_static(table, ws, ks, flat=flat)
            w_bucket.append(pooled.best["w"])
            k_bucket.append(pooled.best["rrf_k"])
            continue
        part = search_static(table.subset(rows), ws, ks, flat=flat)
        w_bucket.append(part.best["w"])
        k_bucket.append(part.best["rrf_k"])
        hits += part.hit1 * rows.size
    return GridResult("bucketed", {"w_bucket": w_bucket, "rrf_k_bucket": k_bucket}, hits / max(len(table.qids), 1),
                      len(ws) * len(ks) * n_buckets, 0)


def search_confidence(table: FusionTable, gammas: Sequence[float] = CONFIDENCE_GAMMA,
                      scales: Sequence[float] = CONFIDENCE_SCALE, ks: Sequence[float] = STATIC_K) -> GridResult:
    """Every (gamma, scale, k) of confidence RRF over the table's per-query confidence."""
    if table.confidence is None:
        raise ValueError("confidence RRF needs a table built with the plans' confidence")
    surface = np.array([[[table.hits_at_1(w, 1.0 - w, k).mean() for k in ks]
                         for w in (confidence_weight(table.confidence, g, sc) for sc in scales)] for g in gammas])
    i, j, m = np.unravel_index(np.argmax(surface), surface.shape)
    top = float(surface.max())
    return GridResult("confidence", {"gamma": float(gammas[i]), "scale": float(scales[j]), "rrf_k": float(ks[m])},
                      top, surface.size, int((surface >= top - 0.01 - 1e-12).sum()))


def folds(n: int, n_folds: int, seed: int) -> list[np.ndarray]:
    """``n_folds`` disjoint row sets covering 0..n-1, by a seeded permutation."""
    order = np.random.default_rng(seed).permutation(n)
    return [np.sort(part) for part in np.array_split(order, n_folds)]


def cross_validate(rules: dict[str, tuple[FusionTable, Callable[[FusionTable], GridResult]]], *, n_folds: int = 5,
                   seed: int = 0) -> dict:
    """Held-out Hit@1 of each selection rule (a table and a search over it): for every fold, each rule
    searches the other folds and is scored on this one. Also how often picking the rule with the best
    in-sample Hit@1 on the other folds (the plain grid argmax) picked the rule that was best held out.

    Returns ``{"cv": {rule: mean held-out Hit@1}, "folds": [per fold: each rule's train and test Hit@1],
    "argmax_right": fraction, "n_folds", "seed"}``; every table must hold the same queries in the same order."""
    n = len(next(iter(rules.values()))[0].qids)
    n_folds = min(n_folds, n)
    if n_folds < 2:  # too few queries to hold any out: each rule's in-sample Hit@1, said as such
        return {"cv": {name: search(table).hit1 for name, (table, search) in rules.items()}, "folds": [],
                "argmax_right": None, "n_folds": n_folds, "seed": seed}
    held: dict[str, list[np.ndarray]] = {name: [] for name in rules}
    per_fold = []
    right = 0
    for test in folds(n, n_folds, seed):
        train = np.setdiff1d(np.arange(n), test)
        fold = {}
        for name, (table, search) in rules.items():
            result = search(table.subset(train))
            hits = result.hits(table.subset(test))
            held[name].append(hits)
            fold[name] = {"train": result.hit1, "test": float(hits.mean())}
        picked = max(rules, key=lambda r: fold[r]["train"])  # ties: the first rule
        best_held = max(v["test"] for v in fold.values())
        right += fold[picked]["test"] >= best_held - 1e-12
        per_fold.append({"n": len(test), "picked_in_sample": picked, **fold})
    cv = {name: float(np.concatenate(h).mean()) if h else 0.0 for name, h in held.items()}
    return {"cv": cv, "folds": per_fold, "argmax_right": right / n_folds, "n_folds": n_folds, "seed": seed}


def choose(cv: dict[str, float], *, tolerance: float = 0.0) -> str:
    """The rule with the best held-out Hit@1; within ``tolerance`` of it, the first in order (simpler rules
    first)."""
    best = max(cv.values())
    return next(name for name, v in cv.items() if v >= best - tolerance - 1e-12)


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
        "rrf_k": float(ks[pos[0]]),
        "w_bucket": [float(w_bucket[b][pos[1 + b]]) for b in range(n_b)],
        "m_risk": {RISK_LEVELS[r]: float(m_risk[r][pos[1 + n_b + r]]) for r in range(n_r)},
    }
    top = float(total.flat[flat])
    return GridResult("dynamic", best, top, total.size, int((total >= top - 0.01 - 1e-12).sum()))
