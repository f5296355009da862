"""How far to trust a plan, from evidence rather than from what the planner says of itself.

The planner's own ``risk_level`` is nearly always "normal", so plan-conditioned fusion gave a plan that was
confidently wrong the full graph weight. Here the probability that the graph branch's top answer is right is
predicted from what the pipeline already knows once both branches have run: how many candidates the plan
returned, how well its name anchors name their nodes, the graph ranking's top score and margin, the plan's size,
the sampled plans' agreement, whether the dense branch ranks the graph's top answer high, and how often plans of
the same shape were right on the training queries (:class:`ShapePrior`). A logistic regression over those
(:func:`fit_confidence`, fitted on validation, with out-of-fold predictions for tuning and calibration) gives
the probability p; confidence RRF weighs the graph ranking scale * p^gamma and the dense one 1 minus that
(:func:`confidence_weight`; a plan with no candidate has p = 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from grasp.plan.bank import plan_shape
from grasp.plan.model import RISK_LEVELS
from grasp.results import Query, Ranking, Run
from grasp.storage import stable_hash

FEATURES = ("log_n_cand", "link_confidence", "no_name_anchor", "top_score", "top_gap", "hops", "anchors",
            "planner_risk", "relevance_text", "agreement", "dense_rank_of_top", "top10_overlap", "shape_rate",
            "shape_seen")
LOW = 0.5  # below this the evidence says the graph's top answer is more likely wrong than right
SHAPE_SMOOTHING = 2.0  # pseudo-queries at the overall rate added to each shape's record
L2 = 1.0               # ridge penalty of the logistic regression (standardized features)


def confidence_weight(p: np.ndarray | float, gamma: float, scale: float) -> np.ndarray:
    """Confidence RRF's graph weight: scale * p^gamma (the dense branch gets 1 minus it)."""
    return scale * np.power(np.asarray(p, dtype=np.float64), gamma)


def shape_key(plan: dict | None) -> str:
    return stable_hash(plan_shape(plan or {}), 12)


def graph_hit(ranking: Ranking | None, gold: Sequence[int]) -> bool:
    """Whether a ranking's top answer is gold: what the confidence predicts."""
    return ranking is not None and len(ranking) > 0 and int(ranking.node_ids[0]) in set(gold)


def planner_level(ranking: Ranking | None) -> str:
    """The risk level the planner itself gave a query's plan (no_trade where the graph returned nothing)."""
    signals = ranking.signals if ranking is not None and len(ranking) else None
    return (signals.risk_level or "no_trade") if signals is not None else "no_trade"


@dataclass
class ShapePrior:
    """How often plans of each shape (anchor names and relevance text blanked) put a gold answer first, on the
    queries it was counted on (the training split): ``shapes`` maps a shape's key to [plans, right]."""

    shapes: dict[str, list[int]] = field(default_factory=dict)
    rate: float = 0.0  # the overall rate, what an unseen shape gets

    @classmethod
    def count(cls, graph: Run, queries: Sequence[Query]) -> ShapePrior:
        shapes: dict[str, list[int]] = {}
        for q in queries:
            ranking = graph.get(q.qid)
            if ranking is None or len(ranking) == 0 or getattr(ranking.trace, "plan", None) is None:
                continue
            record = shapes.setdefault(shape_key(ranking.trace.plan), [0, 0])
            record[0] += 1
            record[1] += int(graph_hit(ranking, q.answer_ids))
        n = sum(r[0] for r in shapes.values())
        return cls(shapes, sum(r[1] for r in shapes.values()) / n if n else 0.0)

    def lookup(self, plan: dict | None) -> tuple[float, float]:
        """(smoothed rate of the plan's shape, log1p of how many plans of that shape were counted)."""
        n, right = self.shapes.get(shape_key(plan), (0, 0))
        return (right + SHAPE_SMOOTHING * self.rate) / (n + SHAPE_SMOOTHING), float(np.log1p(n))


def evidence(graph: Ranking | None, dense: Ranking | None, shapes: ShapePrior | None = None) -> np.ndarray | None:
    """The :data:`FEATURES` of one query (None when the graph returned no candidate: that stays no_trade)."""
    if graph is None or len(graph) == 0:
        return None
    trace = graph.trace
    plan = getattr(trace, "plan", None) or {}
    signals = graph.signals
    link = signals.link_confidence if signals is not None else None
    scores = graph.scores
    top = int(graph.node_ids[0])
    dense_rank = dense.rank_of(top) if dense is not None else None
    dense_top = set(dense.node_ids[:10].tolist()) if dense is not None else set()
    risk = getattr(trace, "risk_level", None) or (signals.risk_level if signals is not None else None)
    agreement = getattr(trace, "agreement", None)
    shape_rate, shape_seen = shapes.lookup(plan) if shapes is not None else (0.0, 0.0)
    n_cand = signals.n_cand if signals is not None else len(graph)
    return np.array([
        np.log1p(n_cand),
        1.0 if link is None else link,
        float(link is None),
        float(scores[0]),
        float(scores[0] - scores[1]) if len(scores) > 1 else 1.0,
        len(plan.get("hops", [])),
        len(plan.get("anchors", [])),
        RISK_LEVELS.index(risk) if risk in RISK_LEVELS else 0,
        float(bool(plan.get("target", {}).get("relevance_text"))),
        1.0 if agreement is None else agreement,
        0.0 if dense_rank is None else 1.0 / dense_rank,
        len(set(graph.node_ids[:10].tolist()) & dense_top) / 10.0,
        shape_rate,
        shape_seen,
    ], dtype=np.float64)


def logistic_fit(X: np.ndarray, y: np.ndarray, l2: float = L2, iterations: int = 50) -> np.ndarray:
    """Ridge logistic regression by Newton's method: weights, intercept last (not penalized)."""
    Xb = np.hstack([X, np.ones((len(X), 1))])
    w = np.zeros(Xb.shape[1])
    penalty = l2 * np.diag(np.r_[np.ones(X.shape[1]), 0.0])
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-Xb @ w))
        grad = Xb.T @ (p - y) + penalty @ w
        hess = (Xb * (p * (1 - p))[:, None]).T @ Xb + penalty
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


@dataclass
class PlanConfidence:
    """The fitted model: standardization, weights and intercept over :data:`FEATURES`, and the shape prior."""

    features: list[str]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    shapes: dict[str, list[int]] = field(default_factory=dict)
    shape_rate: float = 0.0

    @cached_property
    def prior(self) -> ShapePrior:
        return ShapePrior(self.shapes, self.shape_rate)

    def probability_of(self, x: np.ndarray) -> float:
        z = (x - np.asarray(self.mean)) / np.asarray(self.scale)
        return float(1.0 / (1.0 + np.exp(-(z @ np.asarray(self.coef) + self.intercept))))

    def probability(self, graph: Ranking | None, dense: Ranking | None) -> float | None:
        """P(the graph's top answer is right) for one query; None when the graph returned nothing."""
        x = evidence(graph, dense, self.prior)
        return None if x is None else self.probability_of(x)

    def to_json(self) -> dict:
        return {"features": self.features, "mean": self.mean, "scale": self.scale, "coef": self.coef,
                "intercept": self.intercept, "shapes": self.shapes, "shape_rate": self.shape_rate}

    @classmethod
    def from_json(cls, data: dict) -> PlanConfidence:
        if list(data.get("features", [])) != list(FEATURES):
            raise ValueError(f"a plan confidence over other features ({data.get('features')}); retune fusion")
        return cls(**data)


def _standardize(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    return mean, np.where(scale > 1e-9, scale, 1.0)


def _fit(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    mean, scale = _standardize(X)
    w = logistic_fit((X - mean) / scale, y)
    return mean, scale, w[:-1], float(w[-1])


@dataclass
class ConfidenceFit:
    """What :func:`fit_confidence` returns: the model fitted on every query, and per query (in the queries'
    order) the out-of-fold probability (NaN: no candidate), whether the graph's top answer was right, and the
    risk level the planner itself reported."""

    model: PlanConfidence
    oof: np.ndarray
    right: np.ndarray
    planner_risk: list[str]
    in_sample: int = 0  # probabilities that are in-sample after all (a fold too small to fit without)

    def summary(self) -> dict:
        """Out-of-fold calibration, and how the confidence treats queries whose graph answer is wrong."""
        return {**judge(self.oof, self.right, self.planner_risk), "in_sample": self.in_sample,
                "coef": dict(zip(self.model.features, np.round(self.model.coef, 4).tolist(), strict=True))}


def fit_confidence(graph: Run, dense: Run, queries: Sequence[Query], *, folds: Sequence[np.ndarray],
                   shapes: ShapePrior | None = None) -> ConfidenceFit:
    """Fit the confidence on ``queries`` (validation), with out-of-fold probabilities over ``folds`` (row index
    sets of ``queries``): what tuning and the reliability diagram read, since in-sample ones flatter."""
    rows = [evidence(graph.get(q.qid), dense.get(q.qid), shapes) for q in queries]
    right = np.array([graph_hit(graph.get(q.qid), q.answer_ids) for q in queries], dtype=np.float64)
    usable = np.array([r is not None for r in rows])
    X = np.array([r if r is not None else np.zeros(len(FEATURES)) for r in rows])
    if usable.sum() < 2 or len(set(right[usable].tolist())) < 2:
        raise ValueError("plan confidence needs validation queries whose graph answers are both right and wrong")
    oof = np.full(len(queries), np.nan)
    for test in folds:
        train = np.setdiff1d(np.flatnonzero(usable), test)
        if len(set(right[train].tolist())) < 2:
            continue
        mean, scale, coef, intercept = _fit(X[train], right[train])
        z = (X[test] - mean) / scale
        oof[test] = 1.0 / (1.0 + np.exp(-(z @ coef + intercept)))
    mean, scale, coef, intercept = _fit(X[usable], right[usable])
    unfilled = usable & np.isnan(oof)  # a fold too small to fit without: in-sample, as with a single fold
    oof[unfilled] = 1.0 / (1.0 + np.exp(-(((X[unfilled] - mean) / scale) @ coef + intercept)))
    oof[~usable] = np.nan
    model = PlanConfidence(list(FEATURES), mean.tolist(), scale.tolist(), coef.tolist(), intercept,
                           dict(shapes.shapes) if shapes else {}, shapes.rate if shapes else 0.0)
    return ConfidenceFit(model, oof, right, [planner_level(graph.get(q.qid)) for q in queries], int(unfilled.sum()))


def auc(p: np.ndarray, y: np.ndarray) -> float | None:
    """Area under the ROC curve (ties count half); None without both classes."""
    pos, neg = p[y > 0.5], p[y <= 0.5]
    if not pos.size or not neg.size:
        return None
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (pos.size * neg.size))


def reliability(p: np.ndarray, y: np.ndarray, bins: int = 10) -> list[dict]:
    """Equal-width probability bins: each non-empty one's range, size, mean prediction and observed rate."""
    out = []
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.digitize(p, edges[1:-1]), 0, bins - 1)
    for b in range(bins):
        sel = which == b
        if sel.any():
            out.append({"lo": float(edges[b]), "hi": float(edges[b + 1]), "n": int(sel.sum()),
                        "predicted": float(p[sel].mean()), "observed": float(y[sel].mean())})
    return out


def calibration(p: np.ndarray, y: np.ndarray) -> dict:
    """AUC, Brier score, expected calibration error and the reliability bins of predictions ``p``."""
    bins = reliability(p, y)
    ece = sum(b["n"] * abs(b["predicted"] - b["observed"]) for b in bins) / max(len(p), 1)
    return {"auc": auc(p, y), "brier": float(np.mean((p - y) ** 2)) if len(p) else None, "ece": float(ece),
            "bins": bins}


def low_weight_shares(confidence: np.ndarray, planner_levels: Sequence[str], right: np.ndarray) -> dict:
    """Of the queries whose graph answer is wrong, the share the evidence flags (p below :data:`LOW`, or no
    candidate: NaN) and the share the planner flags (its risk level no_trade or weak); and of those whose graph
    answer is right, the share each leaves unflagged: how often a wrong graph branch is leaned on less, and at
    what cost to the right ones."""
    low_evidence = np.nan_to_num(np.asarray(confidence, dtype=np.float64), nan=0.0) < LOW
    low_planner = np.array([lv in ("no_trade", "weak") for lv in planner_levels])
    wrong = np.asarray(right) < 0.5
    share = lambda flags, rows: float(flags[rows].mean()) if rows.any() else 0.0  # noqa: E731
    return {"wrong": int(wrong.sum()), "wrong_low_evidence": share(low_evidence, wrong),
            "wrong_low_planner": share(low_planner, wrong), "right_kept_evidence": share(~low_evidence, ~wrong),
            "right_kept_planner": share(~low_planner, ~wrong)}


def judge(confidence: np.ndarray, right: np.ndarray, planner_levels: Sequence[str]) -> dict:
    """The confidence judged on some queries (NaN: no candidate): how many had one and how many of those the graph
    answered right, the calibration over them, and the low-weight shares over all (:func:`low_weight_shares`)."""
    usable = ~np.isnan(confidence)
    y = right[usable]
    return {"n": int(usable.sum()), "right": float(y.mean()) if y.size else 0.0,
            **calibration(confidence[usable], y), **low_weight_shares(confidence, planner_levels, right)}
