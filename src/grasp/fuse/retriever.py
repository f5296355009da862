"""Stage 2 as a retriever: the graph ranking fused with the dense partner's (mFAR) by the
setting chosen on validation (static, dynamic or confidence RRF)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import ClassVar

from grasp.fuse.confidence import PlanConfidence, confidence_weight
from grasp.fuse.dynamic import graph_weight
from grasp.fuse.rrf import dynamic_rrf, static_rrf, weighted_rrf
from grasp.graph.retriever import plan_signals
from grasp.plan.model import RISK_LEVELS
from grasp.progress import announce
from grasp.results import Query, Ranking, Run
from grasp.retriever import Retriever
from grasp.storage import Setting


@dataclass
class FusionSetting(Setting):
    """Stage 2's fusion, as `grasp tune fusion` chose it on validation."""

    artifact: ClassVar[str] = "fusion.json"  # grasp.artifacts.FUSION_SETTING
    renamed: ClassVar[dict[str, str]] = {"k": "rrf_k"}

    mode: str                      # "static", "dynamic" or "confidence"
    rrf_k: float                   # RRF's constant (not a result depth)
    w: float | None = None         # static graph weight
    w_bucket: list[float] | None = None
    m_risk: dict[str, float] | None = None
    val_hit1: float | None = None
    info: dict = field(default_factory=dict)
    link_floor: float = 0.0        # dynamic: plans whose anchors name no node below this count one risk level lower
    dense_method: str = "mfar"     # the method whose ranking the graph's is fused with
    confidence: dict | None = None  # the plan confidence fitted on validation (grasp.fuse.confidence), if any
    gamma: float | None = None     # confidence mode: graph weight = scale * p^gamma, dense 1 minus it
    scale: float | None = None

    def __post_init__(self) -> None:
        if "dense_method" in self.info:  # where settings saved before it was a field of its own kept it
            self.dense_method = self.info.pop("dense_method")
        if self.mode == "confidence" and (not self.confidence or self.gamma is None or self.scale is None):
            raise ValueError("confidence mode needs a fitted confidence, gamma and scale")

    @cached_property
    def plan_confidence(self) -> PlanConfidence | None:
        """The fitted plan confidence (read by confidence mode, and judged by `grasp report` in every mode)."""
        return PlanConfidence.from_json(self.confidence) if self.confidence else None

    def graph_weight(self, graph: Ranking | None) -> float:
        """Dynamic mode: the weight of the graph ranking for one query, from its plan's signals."""
        n_cand, risk = plan_signals(graph, self.link_floor)
        return graph_weight(n_cand, risk, self.w_bucket, [self.m_risk[r] for r in RISK_LEVELS])

    def confidences(self, graph: Run, dense: Run) -> dict[str, float | None]:
        """Each query's plan confidence p (None: the graph returned nothing), where one was fitted."""
        model = self.plan_confidence
        if model is None:
            return {}
        return {qid: model.probability(graph.get(qid), dense.get(qid)) for qid in dict.fromkeys([*graph, *dense])}

    def weights(self, graph: Run, dense: Run) -> dict[str, float]:
        """Each query's graph weight: static and confidence mode give the dense ranking 1 minus it, dynamic 1."""
        qids = list(dict.fromkeys([*graph, *dense]))
        if self.mode == "static":
            return dict.fromkeys(qids, float(self.w))
        if self.mode == "dynamic":
            return {qid: self.graph_weight(graph.get(qid)) for qid in qids}
        return self._confidence_weights(self.confidences(graph, dense))

    def _confidence_weights(self, confidence: dict[str, float | None]) -> dict[str, float]:
        """Confidence mode's graph weight of each query (no candidate: 0, the dense ranking alone)."""
        return {qid: float(confidence_weight(p or 0.0, self.gamma, self.scale)) for qid, p in confidence.items()}

    def fuse(self, graph: Run, dense: Run, *, name: str, depth: int | None = None, top: int | None = None) -> Run:
        if self.mode == "static":
            return static_rrf(graph, dense, w=float(self.w), rrf_k=self.rrf_k, depth=depth, name=name, top=top)
        if self.mode == "dynamic":
            return dynamic_rrf(graph, dense, self.weights(graph, dense), rrf_k=self.rrf_k, depth=depth, name=name, top=top)
        confidence = self.confidences(graph, dense)
        fused = weighted_rrf(graph, dense, self._confidence_weights(confidence), rrf_k=self.rrf_k, mode="confidence", depth=depth, name=name, top=top)
        for qid, p in confidence.items():  # the explanation shows what the weight was read from
            fused[qid].trace.plan_confidence = None if p is None else round(p, 4)
        return fused


class FusedRetriever(Retriever):
    name = "fused"

    def __init__(self, graph: Retriever, dense: Retriever, setting: FusionSetting, *, depth: int = 100) -> None:
        """``depth``: how many results of each branch are fused (``fusion.depth``)."""
        self.graph, self.dense, self.setting, self.depth = graph, dense, setting, depth

    def children(self) -> list[Retriever]:
        return [self.graph, self.dense]

    def fuse(self, graph_run: Run, dense_run: Run, k: int = 100) -> Run:
        return self.setting.fuse(graph_run, dense_run, name=self.name, depth=self.depth, top=k)

    def batch_search_stages(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> dict[str, Run]:
        graph = self.graph.batch_search_stages(queries, self.depth, progress=progress)
        dense = self.dense.batch_search_stages(queries, self.depth, progress=progress)
        t0 = time.perf_counter()
        announce("fusing", f"fusing the {self.graph.name} and {self.dense.name} rankings ({self.setting.mode} RRF)")
        fused = self.fuse(graph[self.graph.name], dense[self.dense.name], k)
        fused.seconds = time.perf_counter() - t0
        return {**graph, **dense, self.name: fused}

    def batch_search(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> Run:
        return self.batch_search_stages(queries, k, progress=progress)[self.name]
