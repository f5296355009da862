"""The Python API: open a knowledge base, search it, and see why each result is where it is.

::

    from grasp import Searcher
    searcher = Searcher.open("path/to/skb")          # or Searcher.demo() for the bundled demo KB
    result = searcher.search("python packages that parse yaml", k=10)
    for hit in result.hits:
        print(hit.rank, hit.name, hit.type, round(hit.score, 4), hit.stage_ranks)
    result.traces["graph"].plan, result.traces["graph"].cypher, result.traces["fused"].weights
    result.explain                                   # the same as JSON: {"stages": {stage: trace}, "timings_ms"}
    df = result.to_dataframe()                       # qid, query, docno, score, rank, name, type

Searching runs the chosen method's stages once and keeps every stage's ranking, so each hit
carries its rank in the graph, mFAR, fused and reranker rankings, and each stage's typed trace
explains it: the plan, the anchor bindings with their cosines, the Cypher, ``n_cand`` and the
risk level (graph), mFAR's field weights, the fusion weights, the reranker; plus per-stage timings.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from grasp import methods
from grasp.config import GraspConfig, load_config
from grasp.errors import GraspError, InputError
from grasp.graph.retriever import GraphTrace
from grasp.inputs import MAX_K, MAX_QUERY_CHARS, check_k, check_query  # noqa: F401 (re-exported)
from grasp.methods import METHODS
from grasp.packaged import DEMO_SKB
from grasp.plan.build import degrade_missing_planner
from grasp.plan.planner import PlanOutcome
from grasp.results import Query, Ranking, Run, StageTrace
from grasp.workspace import Workspace


@dataclass
class Hit:
    """One ranked node."""

    node_id: int
    name: str
    type: str
    score: float
    rank: int
    stage_ranks: dict[str, int | None] = field(default_factory=dict)  # 1-based rank in each stage; None = absent
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class SearchResult:
    qid: str
    query: str
    method: str
    hits: list[Hit]
    traces: dict[str, StageTrace | None] = field(default_factory=dict)  # per stage, in pipeline order (if explained)
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def explain(self) -> dict[str, Any]:
        """The traces as JSON: ``{"method", "stages": {stage: trace}, "timings_ms"}``; {} when not explained."""
        if not self.traces:
            return {}
        return {"method": self.method,
                "stages": {name: t.to_json() if t is not None else {} for name, t in self.traces.items()},
                "timings_ms": self.timings_ms}

    def to_dict(self) -> dict[str, Any]:
        return {"qid": self.qid, "query": self.query, "method": self.method, "hits": [asdict(h) for h in self.hits],
                "explain": self.explain}

    def records(self) -> list[dict[str, Any]]:
        """Rows in PyTerrier's column names (rank 0-based, as PyTerrier), plus name and type."""
        return [{"qid": self.qid, "query": self.query, "docno": str(h.node_id), "score": h.score,
                 "rank": h.rank - 1, "name": h.name, "type": h.type} for h in self.hits]

    def to_dataframe(self):
        return results_to_dataframe([self])


def results_to_dataframe(results: Iterable[SearchResult]):
    """One pandas DataFrame (qid, query, docno, score, rank, name, type) for many results."""
    import pandas as pd

    rows = [r for res in results for r in res.records()]
    return pd.DataFrame(rows, columns=["qid", "query", "docno", "score", "rank", "name", "type"])


def results_to_run(results: Iterable[SearchResult], name: str = "grasp") -> Run:
    """The results as a :class:`~grasp.results.Run` (for ``write_run`` / ``evaluate_run``)."""
    run = Run(name)
    for res in results:
        run.add(Ranking(res.qid, [h.node_id for h in res.hits], [h.score for h in res.hits], stage=res.method))
    return run


class Searcher:
    """A knowledge base, its indexes and one retrieval method, ready for queries."""

    def __init__(self, workspace: Workspace, method: str = "auto", *, notes: Sequence[str] = ()) -> None:
        self.workspace = workspace
        self.notes = list(notes)  # what the searcher could not set up as configured, for /health
        self.skb = workspace.skb
        ready = methods.readiness(workspace)
        if method == "auto":
            method = methods.best_method(workspace)
        if method not in METHODS:
            raise InputError(f"unknown method {method!r}; available: auto, {', '.join(METHODS)}")
        if ready[method] is not None:
            raise InputError(f"method {method!r} is not prepared for this knowledge base: {ready[method]}")
        self.method = method
        self.untuned = methods.untuned(workspace)[method]  # parts running on untuned defaults
        if self.untuned:
            self.notes.append(f"{method} runs on untuned defaults for: {'; '.join(self.untuned)}")
        self.retriever = methods.retriever(workspace, method)

    @classmethod
    def open(cls, skb: str | Path, *, method: str = "auto", config: GraspConfig | None = None,
             config_file: str | Path | None = None, overrides: Sequence[str] = (), stark_dataset: str | None = None,
             progress: bool = False) -> Searcher:
        """Open an SKB directory (open format or STaRK) with its indexes from the cache. Without the
        local planner model on disk, cached plans are replayed and new queries fall back to the
        dense branch (``notes`` says so)."""
        if config is None:
            config = load_config(Path(config_file) if config_file else None, list(overrides))
        note = degrade_missing_planner(config)
        return cls(Workspace.open(skb, config, stark_dataset=stark_dataset, progress=progress), method,
                   notes=[note] if note else [])

    @classmethod
    def demo(cls, **kwargs: Any) -> Searcher:
        """The bundled demo knowledge base (a slice of Debian's package graph)."""
        return cls.open(DEMO_SKB, **kwargs)

    def schema(self) -> dict[str, Any]:
        s = self.skb.schema
        return {"name": s.name, "candidate_types": list(s.candidate_types),
                "node_types": {t: {"count": int((self.skb.node_type == i).sum()), "text_fields": list(nt.text_fields)}
                               for i, (t, nt) in enumerate(s.node_types.items())},
                "relations": [{"name": r.name, "source": r.source, "target": r.target} for r in s.relations],
                "method": self.method, "nodes": len(self.skb.names)}

    def document(self, node_id: int) -> str:
        """A node's document: its name, type and fields as the KB's layout renders them (what the text retrievers
        read)."""
        if isinstance(node_id, bool) or not isinstance(node_id, int) or not 0 <= node_id < self.skb.num_nodes:
            raise InputError(f"node id must be an integer from 0 to {self.skb.num_nodes - 1}, not {node_id!r}")
        return self.workspace.layout.document(self.skb, node_id)

    def search(self, query: str, k: int = 10, *, explain: bool = True, qid: str = "q") -> SearchResult:
        return self.batch_search([Query(qid, check_query(query))], k, explain=explain)[0]

    def batch_search(self, queries: Sequence[str | Query], k: int = 10, *, explain: bool = False,
                     workers: int | None = None, progress: bool = False) -> list[SearchResult]:
        """Search many queries. The graph stage plans the whole batch first, as many at a time as the planner's
        client serves (the local model's slots, or planner.workers for an endpoint); ``workers`` overrides that."""
        k = check_k(k)
        qs = [q if isinstance(q, Query) else Query(str(i), check_query(q)) for i, q in enumerate(queries)]
        if workers is not None and "graph" in self.stage_names:
            self.workspace.planner.plan_many(qs, workers=workers, progress=progress)
        t0 = time.perf_counter()
        stages = self.retriever.batch_search_stages(qs, max(k, self.workspace.config.search.depth), progress=progress)
        total = time.perf_counter() - t0
        final = stages[self.retriever.name]
        return [self._result(q, stages, final.get(q.qid) or Ranking(q.qid, [], []), k, explain, total / len(qs))
                for q in qs]

    def plan_ahead(self, query: str) -> PlanOutcome | None:
        """Plan ``query`` now (every plan its search will use), so that searching it finds them cached, and return
        its greedy plan: None when the method has no graph stage, or no plan was made (no model and no cached plan,
        or a failure, which the search meets and reports). Safe from many threads at once: questions planned
        together share the local model's batches (the torch engine decodes what arrives together as one batch),
        where searches run one at a time."""
        if "graph" not in self.stage_names:
            return None
        planner = self.workspace.planner
        try:
            text = check_query(query)
            outcomes = [planner.plan(text, sample) for sample in range(planner.samples)]
        except GraspError:
            return None
        planned = outcomes[0].cached or outcomes[0].attempts > 0  # else no model and no cached plan: nothing made
        return outcomes[0] if planned else None

    @property
    def stage_names(self) -> list[str]:
        """The stages the method runs, from the last one down (grasp: grasp, fused, graph, mfar)."""
        return [s.name for s in self.retriever.stages()]

    def _result(self, q: Query, stages: dict[str, Run], final: Ranking, k: int, explain: bool,
                seconds: float) -> SearchResult:
        final_name = self.retriever.name
        rankings = {name: run.get(q.qid) for name, run in stages.items()}
        hits = []
        for rank, (nid, score) in enumerate(zip(final.node_ids[:k].tolist(), final.scores[:k].tolist(), strict=True), 1):
            stage_ranks = {name: (r.rank_of(nid) if r is not None else None)
                           for name, r in rankings.items() if name != final_name}
            stage_ranks["final"] = rank
            fields = {f: v[:300] for f, v in self.workspace.layout.text_fields(self.skb, nid).items()} if explain else {}
            hits.append(Hit(nid, self.skb.names[nid], self.skb.type_of(nid), float(score), rank, stage_ranks, fields))
        if not explain:
            return SearchResult(q.qid, q.text, self.method, hits)
        traces = {name: r.trace if r is not None else None for name, r in rankings.items()}
        return SearchResult(q.qid, q.text, self.method, hits, traces, self._timings(traces, stages, seconds))

    @staticmethod
    def _timings(traces: dict[str, StageTrace | None], stages: dict[str, Run], seconds: float) -> dict[str, float]:
        """Milliseconds per query of each stage's own step, the graph stage's sub-steps, and the whole call."""
        n = max(len(next(iter(stages.values()))), 1)
        timings = {name: round(1000 * run.seconds / n, 2) for name, run in stages.items() if run.seconds is not None}
        graph = traces.get("graph")
        if isinstance(graph, GraphTrace):
            timings.update({f"graph.{k}": v for k, v in graph.timings_ms.items()})
        timings["total"] = round(1000 * seconds, 2)
        return timings


def prepare(skb: str | Path, *, until: str | None = None, synthesize: bool = False, config: GraspConfig | None = None,
            overrides: Sequence[str] = (), stark_dataset: str | None = None, progress: bool = True,
            on_step=None) -> list:
    """`grasp prepare` in Python: the whole recipe for one knowledge base (validate, index, plans, train mFAR, tune
    fusion, train the reranker, tune both final fusions; queries synthesized from the KB where it has no labelled
    ones, or with ``synthesize``), each step skipped when what it makes is there; returns
    each step's outcome (:class:`grasp.lab.prepare.StepOutcome`). ``on_step`` hears each one as it ends."""
    from grasp.lab.prepare import prepare as run_recipe

    config = config or load_config(None, list(overrides))
    ws = Workspace.open(skb, config, stark_dataset=stark_dataset, progress=progress)
    return run_recipe(ws, until=until, synthesize=synthesize, on_step=on_step or (lambda outcome: None))
