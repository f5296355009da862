"""The plan-conditioned graph weight of dynamic RRF:
w_graph(q) = w_bucket[b(q)] * m_risk[r(q)], with b(q) the n_cand bucket and r(q) the risk level.

The final fusion (Stage 3) conditions on the same signal with coarser buckets (:data:`GRAPH_SIZE_EDGES`):
no graph candidate at all (the fused ranking is mFAR's alone), a few, or many."""

from __future__ import annotations

from collections.abc import Sequence

from grasp.graph.retriever import plan_signals
from grasp.plan.model import RISK_LEVELS
from grasp.results import Ranking

# n_cand buckets, in the paper's order: [1,10], [11,50], [51,100], [101,500], >500
BUCKET_EDGES = (10, 50, 100, 500)
BUCKET_NAMES = ("1-10", "11-50", "51-100", "101-500", ">500")
# the final fusion's buckets of the upstream's graph candidates: 0, 1-10, >10
GRAPH_SIZE_EDGES = (0, 10)


def bucket_of(n_cand: int, edges: Sequence[int] = BUCKET_EDGES) -> int:
    """Index of the n_cand bucket: the first whose upper edge n_cand does not pass (with the paper's
    edges a plan with no candidate falls in the first; its weight is moot)."""
    for i, edge in enumerate(edges):
        if n_cand <= edge:
            return i
    return len(edges)


def plan_bucket(graph: Ranking | None, edges: Sequence[int] = BUCKET_EDGES, link_floor: float = 0.0) -> tuple[int, str | None]:
    """(n_cand bucket, risk level) of a query from its graph ranking's plan signals: what tuning tables and
    served fusions both read (no graph ranking: no candidate, no_trade)."""
    n_cand, risk = plan_signals(graph, link_floor)
    return bucket_of(n_cand, edges), risk


def bucket_names(edges: Sequence[int]) -> list[str]:
    """Readable names of the buckets ``edges`` cut: (0, 10) -> ["0", "1-10", ">10"]."""
    names, low = [], 0
    for edge in edges:
        names.append(str(edge) if edge == low else f"{low}-{edge}")
        low = edge + 1
    return [*names, f">{edges[-1]}"] if edges else ["all"]


def risk_index(risk: str | None) -> int:
    return RISK_LEVELS.index(risk) if risk in RISK_LEVELS else RISK_LEVELS.index("no_trade")


def graph_weight(n_cand: int, risk: str | None, w_bucket: Sequence[float], m_risk: Sequence[float]) -> float:
    return float(w_bucket[bucket_of(n_cand)]) * float(m_risk[risk_index(risk)])
