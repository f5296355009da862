"""The plan-conditioned graph weight of dynamic RRF:
w_graph(q) = w_bucket[b(q)] * m_risk[r(q)], with b(q) the n_cand bucket and r(q) the risk level."""

from __future__ import annotations

from collections.abc import Sequence

from grasp.plan.model import RISK_LEVELS

# n_cand buckets, in the paper's order: [1,10], [11,50], [51,100], [101,500], >500
BUCKET_EDGES = (10, 50, 100, 500)
BUCKET_NAMES = ("1-10", "11-50", "51-100", "101-500", ">500")


def bucket_of(n_cand: int) -> int:
    """Index of the n_cand bucket (a plan with no candidate falls in the first; its weight is moot)."""
    for i, edge in enumerate(BUCKET_EDGES):
        if n_cand <= edge:
            return i
    return len(BUCKET_EDGES)


def risk_index(risk: str | None) -> int:
    return RISK_LEVELS.index(risk) if risk in RISK_LEVELS else RISK_LEVELS.index("no_trade")


def graph_weight(n_cand: int, risk: str | None, w_bucket: Sequence[float], m_risk: Sequence[float]) -> float:
    return float(w_bucket[bucket_of(n_cand)]) * float(m_risk[risk_index(risk)])
