"""Stage 2 as a retriever: the graph ranking fused with the dense partner's (mFAR) by the
setting chosen on validation (static or dynamic RRF)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from grasp.fuse.dynamic import graph_weight
from grasp.fuse.rrf import fuse_pair
from grasp.plan.model import RISK_LEVELS
from grasp.results import Run
from grasp.retriever import Retriever
from grasp.skb.queries import Query
from grasp.storage import write_json


@dataclass
class FusionSetting:
    mode: str                      # "static" or "dynamic"
    k: float
    w: float | None = None         # static graph weight
    w_bucket: list[float] | None = None
    m_risk: dict[str, float] | None = None
    val_hit1: float | None = None
    info: dict = field(default_factory=dict)

    def graph_weight(self, meta: dict) -> tuple[float, float]:
        """(weight of the graph ranking, weight of the dense ranking) for one query."""
        if self.mode == "static":
            return float(self.w), 1.0 - float(self.w)
        m_risk = [self.m_risk[r] for r in RISK_LEVELS]
        return graph_weight(int(meta.get("n_cand", 0)), meta.get("risk_level"), self.w_bucket, m_risk), 1.0

    def save(self, path: Path) -> None:
        write_json(path, asdict(self))

    @classmethod
    def load(cls, path: Path) -> FusionSetting:
        return cls(**json.loads(Path(path).read_text()))


class FusedRetriever(Retriever):
    name = "fused"

    def __init__(self, graph: Retriever, dense: Retriever, setting: FusionSetting, *, depth: int = 100) -> None:
        self.graph, self.dense, self.setting, self.depth = graph, dense, setting, depth

    def prepare(self) -> None:
        self.graph.prepare()
        self.dense.prepare()

    def fuse(self, graph_run: Run, dense_run: Run, k: int = 100) -> Run:
        out = Run(self.name)
        for qid in dict.fromkeys([*graph_run, *dense_run]):
            g, d = graph_run.get(qid), dense_run.get(qid)
            wg, wd = self.setting.graph_weight(g.meta if g is not None else {})
            meta = {"mode": self.setting.mode, "w_graph": wg, "w_dense": wd, "k": self.setting.k,
                    "n_cand": g.meta.get("n_cand") if g is not None else 0,
                    "risk_level": g.meta.get("risk_level") if g is not None else None}
            fused = fuse_pair(g, d, wg, wd, self.setting.k, qid=qid, stage=self.name, depth=self.depth, meta=meta)
            out.add(fused.top(k))
        return out

    def batch_search_stages(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> dict[str, Run]:
        graph = self.graph.batch_search_stages(queries, self.depth, progress=progress)
        dense = self.dense.batch_search_stages(queries, self.depth, progress=progress)
        t0 = time.perf_counter()
        fused = self.fuse(graph[self.graph.name], dense[self.dense.name], k)
        fused.seconds = time.perf_counter() - t0
        return {**graph, **dense, self.name: fused}

    def batch_search(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> Run:
        return self.batch_search_stages(queries, k, progress=progress)[self.name]
