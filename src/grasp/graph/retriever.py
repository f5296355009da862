"""Stage 1 as a retriever: plan the query, link anchors, run the compiled plan on the graph
engine, rescore candidates with the plan's relevance text, and rank.

Every ranking carries a :class:`GraphTrace`: the plan and its validation, the bindings with their
cosines, the Cypher and its parameters, ``n_cand``, the risk level and per-step timings.
Candidates are only what the graph returns; nothing is invented for a plan that yields none.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from grasp.encode.node_vectors import NodeVectors
from grasp.graph.compiler import CypherNames, compile_plan
from grasp.graph.engine import GraphBackend
from grasp.graph.linking import AnchorLinker
from grasp.plan.planner import Planner, PlanOutcome
from grasp.results import Query, Ranking, Run, StageTrace
from grasp.retriever import Retriever


@dataclass
class GraphTrace(StageTrace):
    """Stage 1 for one query. ``n_cand`` and ``risk_level`` are what dynamic fusion conditions on."""

    plan: dict[str, Any] | None = None
    plan_status: str = "valid"
    plan_reason: str | None = None
    repairs: list[str] = field(default_factory=list)
    plan_cached: bool = False
    risk_level: str | None = "no_trade"
    retrieval_mode: str | None = None
    engine: str = ""
    n_cand: int = 0
    bindings: list[dict[str, Any]] = field(default_factory=list)  # per anchor var: the bound nodes and cosines
    cypher: str | None = None
    cypher_params: dict[str, Any] | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)  # plan, link, execute, rescore


class GraphRetriever(Retriever):
    name = "graph"

    def __init__(self, planner: Planner, linker: AnchorLinker, engine: GraphBackend, vectors: NodeVectors, *,
                 rescore: bool = True) -> None:
        self.planner = planner
        self.skb = planner.skb
        self.linker = linker
        self.engine = engine
        self.vectors = vectors
        self.rescore = rescore
        self.names = CypherNames(self.skb.schema)

    def prepare(self) -> None:
        """Name- and doc-mode vectors of every node type an anchor may be linked to (otherwise built on
        the first anchor of that type, inside a query)."""
        for node_type in self.skb.schema.node_types:
            for mode in ("name", "doc"):
                self.vectors.index(mode, node_type)

    def _relevance(self, text: str, ids: np.ndarray) -> np.ndarray:
        q = self.vectors.encoder.encode_queries([text])[0]
        out = np.zeros(ids.size)
        types = self.skb.node_type[ids]
        for t in np.unique(types):
            tname = self.skb.schema.type_names[t]
            rows_ids, matrix = self.vectors.embeddings("doc", tname)
            sel = types == t
            rows = np.searchsorted(rows_ids, ids[sel])
            out[sel] = np.asarray(matrix[rows], dtype=np.float32) @ q
        return out

    def search_query(self, query: Query, k: int = 100, outcome: PlanOutcome | None = None) -> Ranking:
        """Stage 1 for one query; ``outcome``: its plan when already made (``batch_search`` plans a whole
        batch at once, keeping the LLM's parallel slots full)."""
        t0 = time.perf_counter()
        planned_before = outcome is not None
        if outcome is None:
            outcome = self.planner.plan(query.text)
        t1 = time.perf_counter()
        plan_ms = round(1000 * (outcome.seconds if planned_before else t1 - t0), 2)  # the LLM's time when it ran
        plan = outcome.check.plan
        trace = GraphTrace(plan=plan.dump(), plan_status=outcome.check.status, repairs=outcome.check.repairs,
                           plan_reason=outcome.check.reason, plan_cached=outcome.cached, risk_level=plan.risk_level,
                           retrieval_mode=plan.retrieval_mode, engine=self.engine.name, timings_ms={"plan": plan_ms})
        if not outcome.check.usable:
            return Ranking(query.qid, [], [], stage=self.name, trace=trace)
        bindings = self.linker.link(plan.anchors)
        t2 = time.perf_counter()
        compiled = compile_plan(plan, bindings, self.names)
        ids, scores = self.engine.execute(plan, bindings, compiled)
        t3 = time.perf_counter()
        text = plan.target.relevance_text
        if self.rescore and text and ids.size:
            scores = scores + self._relevance(text, ids)
        t4 = time.perf_counter()
        trace.n_cand = int(ids.size)
        trace.bindings = [b.to_json(self.skb.names) for b in bindings.values()]
        trace.cypher = compiled.cypher if compiled else None
        trace.cypher_params = compiled.params if compiled else None
        trace.timings_ms.update({"link": round(1000 * (t2 - t1), 2), "execute": round(1000 * (t3 - t2), 2),
                                 "rescore": round(1000 * (t4 - t3), 2)})
        return Ranking.from_scores(query.qid, ids, scores, stage=self.name, k=k, trace=trace)

    def batch_search(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> Run:
        run = Run(self.name)
        outcomes = self.planner.plan_many(queries, progress=progress)  # cached plans cost nothing
        for q in tqdm(queries, desc="graph", unit="query", disable=not progress):
            run.add(self.search_query(q, k, outcomes.get(q.qid)))
        return run


def plan_signals(ranking: Ranking | None) -> tuple[int, str | None]:
    """(n_cand, risk_level) of a graph ranking: what plan-conditioned fusion reads (no plan: 0, no_trade)."""
    trace = ranking.trace if ranking is not None else None
    if isinstance(trace, GraphTrace):
        return trace.n_cand, trace.risk_level
    return 0, "no_trade"
