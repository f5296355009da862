"""Stage 1 as a retriever: plan the query, link anchors, run the compiled plan on the graph
engine, rescore candidates with the plan's relevance text, and rank.

Every ranking carries a :class:`GraphTrace`: the plan and its validation, the bindings with their
cosines, the Cypher and its parameters, ``n_cand``, the risk level and per-step timings.
Candidates are only what the graph returns; nothing is invented for a plan that yields none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from grasp.encode.node_vectors import NodeVectors
from grasp.errors import GraspError
from grasp.graph.compiler import CypherNames, compile_plan
from grasp.graph.descriptions import as_descriptions, descriptive_anchors
from grasp.graph.engine import GraphBackend
from grasp.graph.linking import AnchorLinker, link_confidence, name_qualities
from grasp.plan.model import RISK_LEVELS
from grasp.plan.planner import Planner, PlanOutcome
from grasp.progress import announce
from grasp.results import PlanSignals, Query, Ranking, Run, StageTrace
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
    error: str | None = None  # the engine failed on this query: it gets no graph candidates, the run goes on
    agreement: float | None = None  # execution-guided planning: how much the sampled plans' top 10 agree
    link_confidence: float | None = None  # how well the weakest name anchor names its node (plan_signals)
    samples: list[dict[str, Any]] = field(default_factory=list)  # ... and each sampled plan's status and n_cand
    replan: dict[str, Any] | None = None  # re-planning: the first plan, its n_cand, the feedback, whether the new one was kept
    described: list[str] | None = None  # name anchors read as descriptions (grasp.graph.descriptions); plan is then the one run

    @property
    def signals(self) -> PlanSignals:
        """What fusion downstream reads of this plan (carried by the ranking, and by every ranking fused from it)."""
        return PlanSignals(self.n_cand, self.risk_level, self.link_confidence)


@dataclass
class _Execution:
    ids: np.ndarray
    scores: np.ndarray
    bindings: dict
    compiled: Any
    timings: dict[str, float]
    confidence: float | None = None  # grasp.graph.linking.link_confidence
    plan: Any = None                 # the plan run: the planner's, or it with descriptive anchors read as text
    described: list[str] | None = None


AGREEMENT = 0.5  # below this mean Jaccard of the sampled plans' top 10, the risk level drops one step


def lower_risk(risk: str | None) -> str:
    """One step down the risk levels (no_trade stays)."""
    return RISK_LEVELS[max(RISK_LEVELS.index(risk) - 1, 0)] if risk in RISK_LEVELS else "no_trade"


GRAPH_STAGE = "graph"  # the stage whose rankings carry the plan's signals (GraphTrace)
REPLAN = ("off", "empty", "empty_or_hub")


class GraphRetriever(Retriever):
    name = GRAPH_STAGE

    def __init__(self, planner: Planner, linker: AnchorLinker, engine: GraphBackend, vectors: NodeVectors, *,
                 rescore: bool = True, query_weight: float = 0.0,
                 lexical: Callable[[str, np.ndarray], np.ndarray] | None = None, lexical_weight: float = 0.0,
                 replan: str = "off", replan_hub: int = 1000, description_floor: float = 0.0) -> None:
        """``rescore``: add how well each candidate's document matches the plan's relevance text, and
        ``query_weight`` x how well it matches the query itself; a match is the dense cosine, plus ``lexical_weight``
        x the ``lexical`` score (BM25: text, node ids -> scores) over the candidates' best (:meth:`_text_scores`).
        ``replan``: when a plan's execution says it missed (``empty``: no candidate; ``empty_or_hub``: also more
        than ``replan_hub``), ask the planner once more with what the execution found (:meth:`_replan`).
        ``description_floor``: a name anchor whose best node names it less well than this is read as a description
        (:mod:`grasp.graph.descriptions`); 0: never."""
        if replan not in REPLAN:
            raise ValueError(f"replan must be one of {', '.join(REPLAN)}, not {replan!r}")
        self.replan, self.replan_hub = replan, replan_hub
        self.description_floor = description_floor
        self.planner = planner
        self.skb = planner.skb
        self.linker = linker
        self.engine = engine
        self.vectors = vectors
        self.rescore, self.query_weight = rescore, query_weight
        self.lexical, self.lexical_weight = lexical, lexical_weight
        self.names = CypherNames(self.skb.schema)

    def prepare(self) -> None:
        """Name- and doc-mode vectors of every node type an anchor may be linked to (otherwise built on
        the first anchor of that type, inside a query)."""
        for node_type in self.skb.schema.node_types:
            for mode in ("name", "doc"):
                self.vectors.index(mode, node_type)

    def cosines(self, texts: list[str], ids: np.ndarray) -> np.ndarray:
        """(len(texts), len(ids)): each text's cosine with each candidate's document vector (one encoder call)."""
        q = self.vectors.encoder.encode_queries(texts)
        out = np.zeros((len(texts), ids.size))
        types = self.skb.node_type[ids]
        for t in np.unique(types):
            tname = self.skb.schema.type_names[t]
            rows_ids, matrix = self.vectors.embeddings("doc", tname)
            sel = types == t
            rows = np.searchsorted(rows_ids, ids[sel])
            out[:, sel] = q @ np.asarray(matrix[rows], dtype=np.float32).T
        return out

    def _text_scores(self, relevance_text: str, query: str, ids: np.ndarray) -> np.ndarray | None:
        """What the candidates' text adds to their anchor score: match(relevance text) + query_weight x
        match(query), where match = cos(text, document) + lexical_weight x BM25(text, document) / the candidates'
        best BM25; None when nothing is added. Candidates reached through the same anchors score alike on the
        graph, and half the plans carry no relevance text: the query's own words order those ties and catch what
        the relevance text left out; the words themselves (a package name, a GO term) are what a small encoder
        blurs and BM25 keeps."""
        parts = [(what, text, w) for what, text, w in (("relevance text", relevance_text, 1.0),
                                                        ("query", query, self.query_weight)) if text and w > 0]
        if not self.rescore or not parts or not ids.size:
            return None
        announce("rescoring", f"rescoring {ids.size} candidates with the {' and the '.join(p[0] for p in parts)}")
        texts = [text for _, text, _ in parts]
        match = self.cosines(texts, ids)
        if self.lexical is not None and self.lexical_weight > 0:
            for i, text in enumerate(texts):
                lexical = self.lexical(text, ids)
                best = float(lexical.max())
                if best > 0:
                    match[i] += self.lexical_weight * lexical / best
        return np.asarray([w for _, _, w in parts]) @ match

    def _execute(self, plan, query: str) -> _Execution:
        """Link, execute and rescore one usable plan."""
        t0 = time.perf_counter()
        announce("linking", f"linking {len(plan.anchors)} anchor(s) to nodes")
        bindings = self.linker.link(plan.anchors)
        # the planner's own anchors say how far to trust the plan, whether or not some are then read as text
        qualities = name_qualities(plan.anchors, bindings, self.skb.names)
        confidence = link_confidence(plan.anchors, bindings, self.skb.names, qualities)
        described = descriptive_anchors(qualities, self.description_floor)
        if described:
            planned = {id(a) for a in plan.anchors}
            plan = as_descriptions(plan, described)
            # the kept anchors keep their links; only a new one (the pure-text shape's doc anchor) is linked
            bindings = ({a.var: bindings[a.var] for a in plan.anchors if id(a) in planned}
                        | self.linker.link([a for a in plan.anchors if id(a) not in planned]))
        t1 = time.perf_counter()
        compiled = compile_plan(plan, bindings, self.names)
        announce("executing", f"running the plan on {self.engine.name}")
        ids, scores = self.engine.execute(plan, bindings, compiled)
        t2 = time.perf_counter()
        added = self._text_scores(plan.target.relevance_text, query, ids)
        if added is not None:
            scores = scores + added
        t3 = time.perf_counter()
        timings = {"link": round(1000 * (t1 - t0), 2), "execute": round(1000 * (t2 - t1), 2),
                   "rescore": round(1000 * (t3 - t2), 2)}
        return _Execution(ids, np.asarray(scores, dtype=np.float64), bindings, compiled, timings, confidence, plan,
                          [a.text for a in described] or None)

    def search_query(self, query: Query, k: int | None = 100, outcome: PlanOutcome | None = None) -> Ranking:
        """Stage 1 for one query; ``outcome``: its plan when already made (``batch_search`` plans a whole
        batch at once, keeping the LLM's parallel slots full). With ``planner.samples`` > 1 every sampled
        plan is executed too and their candidates are fused (:meth:`_agree`)."""
        t0 = time.perf_counter()
        planned_before = outcome is not None
        if outcome is None:
            outcome = self.planner.plan(query.text)  # the cached plan, else the LLM's (which announces itself)
        outcomes = [outcome, *(self.planner.plan(query.text, i) for i in range(1, self.planner.samples))]
        t1 = time.perf_counter()
        plan_ms = round(1000 * (outcome.seconds if planned_before else t1 - t0), 2)  # the LLM's time when it ran
        runs, errors = [], []
        for o in outcomes:
            try:
                runs.append(self._execute(o.check.plan, query.text) if o.check.usable else None)
            except GraspError as e:  # one query's failure (an engine refusing its query) never ends a run
                runs.append(None)
                errors.append(str(e))
        replanned = None
        if len(outcomes) == 1 and self.replan != "off" and runs[0] is not None:
            outcome, runs[0], replanned, plan_ms = self._replan(outcome, runs[0], errors, plan_ms)
            outcomes = [outcome]
        if len(outcomes) == 1:
            chosen, agreement, risk = 0, None, None
            ids, scores = (runs[0].ids, runs[0].scores) if runs[0] is not None else (None, None)
        else:
            chosen, ids, scores, agreement, risk = self._agree(outcomes, runs)
        pick = outcomes[chosen]
        plan = pick.check.plan
        trace = GraphTrace(plan=plan.dump(), plan_status=pick.check.status, repairs=pick.check.repairs,
                           plan_reason=pick.check.reason, plan_cached=outcome.cached,
                           risk_level=risk or plan.risk_level, retrieval_mode=plan.retrieval_mode,
                           engine=self.engine.name, timings_ms={"plan": plan_ms}, agreement=agreement,
                           error="; ".join(errors) or None, replan=replanned)
        if runs[chosen] is None and errors:
            trace.risk_level = "no_trade"
        if len(outcomes) > 1:
            trace.samples = [{"status": o.check.status, "reason": o.check.reason,
                              "n_cand": int(r.ids.size) if r is not None else 0, "plan": o.check.plan.dump()}
                             for o, r in zip(outcomes, runs, strict=True)]
        run = runs[chosen]
        if run is None or ids is None:
            return Ranking(query.qid, [], [], stage=self.name, trace=trace, signals=trace.signals)
        trace.n_cand = int(ids.size)
        trace.link_confidence = run.confidence
        if run.described:
            trace.plan, trace.described = run.plan.dump(), run.described
        trace.bindings = [b.to_json(self.skb.names) for b in run.bindings.values()]
        trace.cypher = run.compiled.cypher if run.compiled else None
        trace.cypher_params = run.compiled.params if run.compiled else None
        for r in runs:  # every executed plan's steps, summed
            for step, ms in (r.timings.items() if r is not None else ()):
                trace.timings_ms[step] = round(trace.timings_ms.get(step, 0.0) + ms, 2)
        return Ranking.from_scores(query.qid, ids, scores, stage=self.name, k=k, trace=trace, signals=trace.signals)

    def feedback(self, plan, run: _Execution) -> str | None:
        """What a plan's execution found that says it missed, in words for the planner (None: nothing to say)."""
        n = int(run.ids.size)
        if n == 0:
            what = "returned no nodes"
        elif self.replan == "empty_or_hub" and n > self.replan_hub:
            what = f"returned {n} nodes, far too many to be the answer"
        else:
            return None
        names = self.skb.names
        links = []
        for a in plan.anchors:
            b = run.bindings.get(a.var)
            found = (f"the {a.label} named {names[int(b.node_ids[0])]!r} (cosine {float(b.scores[0]):.2f})"
                     if b is not None and b.node_ids.size else f"no {a.label}")
            links.append(f"{a.text!r} -> {found}")
        linked = f" Its anchors were linked to: {'; '.join(links)}." if links else ""
        return (f"Executed on the graph, that plan {what}.{linked} Check each anchor's type, each hop's relation and "
                "direction and the target type, and whether a descriptive phrase belongs in the relevance text "
                "rather than in an anchor.")

    def _replan(self, first: PlanOutcome, run: _Execution, errors: list[str],
                plan_ms: float) -> tuple[PlanOutcome, _Execution, dict | None, float]:
        """Re-planning from execution feedback: the first plan's outcome told to the planner, the new plan
        executed, and kept when it returns candidates (and, for a hub, fewer of them). Returns the plan and
        execution to use, the trace's record of it, and the planning time with the second call's."""
        feedback = self.feedback(first.check.plan, run)
        if feedback is None:
            return first, run, None, plan_ms
        second = self.planner.replan(first, feedback)
        record = {"first_plan": first.check.plan.dump(), "first_n_cand": int(run.ids.size), "feedback": feedback,
                  "status": second.check.status, "cached": second.cached, "n_cand": 0, "kept": False}
        plan_ms = round(plan_ms + (0.0 if second.cached else 1000 * second.seconds), 2)
        if not second.check.usable:
            return first, run, record, plan_ms
        try:
            again = self._execute(second.check.plan, first.query)
        except GraspError as e:
            errors.append(f"re-plan: {e}")
            return first, run, record, plan_ms
        record["n_cand"] = int(again.ids.size)
        if again.ids.size == 0 or (run.ids.size and again.ids.size >= run.ids.size):
            return first, run, record, plan_ms
        record["kept"] = True
        return second, again, record, plan_ms

    def _agree(self, outcomes: list[PlanOutcome], runs: list[_Execution | None]):
        """Execution-guided planning over K plans: each candidate scores the mean of its scores under the K plans
        (0 where a plan misses it, so what several plans reach rises); the plan shown is the usable one whose
        top 10 the others corroborate most (the greedy plan on ties); agreement is the mean pairwise Jaccard of
        the usable plans' top 10 (0 with fewer than two), and below AGREEMENT the risk level drops one step,
        so that Stage 2 leans on the dense branch. Returns (chosen, ids, scores, agreement, risk)."""
        usable = [i for i, r in enumerate(runs) if r is not None]
        if not usable:
            return 0, None, None, 0.0, None
        tops = {i: set(runs[i].ids[np.lexsort((runs[i].ids, -runs[i].scores))][:10].tolist()) for i in usable}
        jac = {(i, j): len(tops[i] & tops[j]) / max(len(tops[i] | tops[j]), 1) for i in usable for j in usable if i != j}
        support = {i: np.mean([jac[i, j] for j in usable if j != i]) if len(usable) > 1 else 0.0 for i in usable}
        chosen = max(usable, key=lambda i: (support[i], -i))
        agreement = float(np.mean(list(jac.values()))) if jac else 0.0
        ids = np.unique(np.concatenate([runs[i].ids for i in usable]))
        total = np.zeros(ids.size)
        for i in usable:
            total[np.searchsorted(ids, runs[i].ids)] += runs[i].scores
        risk = outcomes[chosen].check.plan.risk_level
        if agreement < AGREEMENT:
            risk = lower_risk(risk)
        return chosen, ids, total / len(outcomes), round(agreement, 4), risk

    def batch_search(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> Run:
        run = Run(self.name)
        outcomes = self.planner.plan_many(queries, progress=progress)  # cached plans cost nothing
        for q in tqdm(queries, desc="graph", unit="query", disable=not progress):
            run.add(self.search_query(q, k, outcomes.get(q.qid)))
        return run


def plan_signals(ranking: Ranking | None, link_floor: float = 0.0) -> tuple[int, str | None]:
    """(n_cand, risk_level) of a ranking carrying the plan's signals (the graph stage's, or one fused from it):
    what plan-conditioned fusion reads (none: 0, no_trade). With ``link_floor`` > 0, a plan whose weakest name
    anchor names its node less well than that (its ``link_confidence``: the planner bound a description as an
    entity) counts one risk level lower, so that fusion leans on the dense branch; tuning and serving both read
    the signals here."""
    signals = ranking.signals if ranking is not None else None
    if signals is None:
        return 0, "no_trade"
    risk = signals.risk_level
    if signals.link_confidence is not None and signals.link_confidence < link_floor:
        risk = lower_risk(risk)
    return signals.n_cand, risk
