"""`grasp prepare`: the whole recipe for one knowledge base, each step skipped when what it makes is there.

validate → index → synthesize (when the KB has no labelled train and val queries, or when asked) → plans → train
mFAR → tune fusion → train reranker → tune the zero-shot final fusion → tune the trained one → index (the trained
reranker's stored vectors). Every step is resumable on its own (indexes are built atomically and reused, synthetic
queries and plans are cached as they are made, training checkpoints), so an interrupted run, started again, skips
what is done and goes on where it stopped. The learning steps read the workspace's default queries (``queries``:
the KB's labelled ones, else the synthetic ones); without a train and a validation split the stages stay on their
untuned defaults, and the summary says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from grasp import methods
from grasp.artifacts import (
    FUSION_SETTING,
    MFAR_WEIGHTS,
    RERANKER_ADAPTER,
    final_fusion_artifact,
    read_manifest,
)
from grasp.errors import GraspError
from grasp.progress import announce
from grasp.skb import default_queries_path
from grasp.workspace import Workspace


@dataclass
class StepOutcome:
    """What one step did: ``ran`` (and what it made), ``skipped`` (already there) or ``not possible`` (why)."""

    step: str
    status: str
    detail: str
    wall_s: float = 0.0
    cpu_s: float = 0.0

    def line(self) -> str:
        cost = f" ({self.wall_s:.0f} s, {self.cpu_s:.0f} CPU-s)" if self.status == "ran" else ""
        return f"{self.step:<20} {self.status}{cost}: {self.detail}"


@dataclass(frozen=True)
class Step:
    name: str
    done: Callable[[Workspace], str | None]      # what makes it unnecessary, or None
    run: Callable[[Workspace], str]              # does it; says what it made
    needs_labels: bool = True


def _splits(ws: Workspace) -> tuple[str, str]:
    return ws.config.mfar.train.train_split, ws.config.mfar.train.val_split


def trainable(ws: Workspace) -> str | None:
    """None when the default queries have both a train and a validation split, else what is missing."""
    path = ws.default_queries_path()
    if not path.exists():
        return f"no labelled queries ({path} does not exist)"
    present = {q.split for q in ws.queries()}
    missing = [s for s in _splits(ws) if s not in present]
    return f"no {' or '.join(missing)} queries in {path}" if missing else None


def _validate(ws: Workspace) -> str:
    from grasp.skb import check_answers, load_queries

    path = ws.default_queries_path()
    if not path.exists():
        return f"{ws.skb!r}; no queries"
    queries = check_answers(load_queries(path), ws.skb, path)
    return f"{ws.skb!r}; {len(queries)} queries with valid gold answers"


def _index(ws: Workspace) -> str:
    built = []
    for method, missing in methods.readiness(ws).items():
        if missing is None:
            methods.retriever(ws, method).prepare()
            built.append(method)
    return f"indexes of {', '.join(built)} in {ws.cache_dir}"


def _synthesize(ws: Workspace) -> str:
    from grasp.lab.synthesize import synthesize_workspace

    return synthesize_workspace(ws).line()


def _synthesized(ws: Workspace) -> str | None:
    path = ws.synth_dir / "queries.jsonl"
    if path.exists():
        return f"{path} is there"
    if ws.config.queries == "labelled":
        return "queries=labelled: training reads only the KB's own queries"
    if ws.config.queries != "synthetic" and default_queries_path(ws.skb).exists():
        return "the KB has labelled queries (--synthesize makes synthetic ones to train on instead)"
    return None


def _plans(ws: Workspace) -> str:
    train, val = _splits(ws)
    queries = ws.queries(split=train) + ws.queries(split=val)
    outcomes = ws.planner.plan_many(queries, progress=ws.progress)
    usable = sum(o.check.usable for o in outcomes.values())
    if queries and not usable:
        raise GraspError(f"no usable plan for any of the {len(queries)} {train} and {val} queries (planner.kind="
                         f"{ws.config.planner.kind}): fetch the planner (grasp fetch planner) or set planner.kind=openai "
                         "with planner.base_url, then run grasp prepare again")
    return f"{usable} of {len(queries)} {train} and {val} queries have a usable plan"


def _planned(ws: Workspace) -> str | None:
    train, val = _splits(ws)
    queries = ws.queries(split=train) + ws.queries(split=val)
    missing = sum(ws.planner.cached(q.text) is None for q in queries)
    return None if missing else f"every {train} and {val} query is planned"


def _train_mfar(ws: Workspace) -> str:
    from grasp.lab.train import train_mfar

    state = train_mfar(ws, announce=lambda line: announce("mfar", line))
    return f"best validation MRR {state['best']:.4f}"


def _tune_fusion(ws: Workspace) -> str:
    from grasp.lab.tune import tune_fusion

    setting, _ = tune_fusion(ws, split=_splits(ws)[1])
    return f"{setting.mode} RRF, validation Hit@1 {setting.val_hit1:.4f}"


def _train_reranker(ws: Workspace) -> str:
    from grasp.lab.train import train_reranker

    state = train_reranker(ws)
    return f"{state['records']} records, {state['step']} steps"


def _tune_rerank(trained: bool) -> Callable[[Workspace], str]:
    def run(ws: Workspace) -> str:
        from grasp.lab.tune import tune_rerank

        setting = tune_rerank(ws, trained=trained, split=_splits(ws)[1])
        return f"{setting.rule}, validation Hit@1 {setting.val_hit1:.4f}"
    return run


def _index_reranker(ws: Workspace) -> str:
    methods.retriever(ws, "grasp").prepare()
    return "the trained reranker's stored candidate vectors"


def _has(name: str) -> Callable[[Workspace], str | None]:
    """Done when the artifact is there and was made on the queries training reads now (labelled or synthetic: a
    shipped artifact counts as labelled)."""
    def done(ws: Workspace) -> str | None:
        path = ws.artifact(name)
        manifest = read_manifest(path) if path is not None else None
        made_on = manifest.context.get("queries", "labelled") if manifest is not None else "labelled"
        return None if path is None or made_on != ws.queries_source else f"{path} is there"
    return done


STEPS: tuple[Step, ...] = (
    Step("validate", lambda ws: None, _validate, needs_labels=False),
    Step("index", lambda ws: None, _index, needs_labels=False),
    Step("synthesize", _synthesized, _synthesize, needs_labels=False),
    Step("plans", _planned, _plans),
    Step("train-mfar", _has(MFAR_WEIGHTS), _train_mfar),
    Step("tune-fusion", _has(FUSION_SETTING), _tune_fusion),
    Step("train-reranker", _has(RERANKER_ADAPTER), _train_reranker),
    Step("tune-rerank-zero-shot", _has(final_fusion_artifact(False)), _tune_rerank(False)),
    Step("tune-rerank", _has(final_fusion_artifact(True)), _tune_rerank(True)),
    Step("index-reranker", lambda ws: None, _index_reranker),
)
STEP_NAMES = tuple(s.name for s in STEPS)


def prepare(ws: Workspace, *, until: str | None = None, synthesize: bool = False,
            on_step: Callable[[StepOutcome], None] = lambda outcome: None) -> list[StepOutcome]:
    """Run the recipe's steps in order up to ``until`` (all by default); ``synthesize``: train on synthetic queries
    even where the KB has labelled ones (``queries=synthetic``). ``on_step`` hears each outcome as it ends."""
    if until is not None and until not in STEP_NAMES:
        raise GraspError(f"unknown step {until!r}; the steps: {', '.join(STEP_NAMES)}")
    if synthesize:
        if ws.config.queries == "labelled":
            raise GraspError("--synthesize trains on synthetic queries, but the configuration says queries=labelled")
        ws.config.queries = "synthetic"
    outcomes = []
    for step in STEPS:
        why_not = trainable(ws) if step.needs_labels else None
        if why_not is not None:
            outcome = StepOutcome(step.name, "not possible", f"{why_not}: the stages it tunes stay on their defaults")
        elif (reason := step.done(ws)) is not None:
            outcome = StepOutcome(step.name, "skipped", reason)
        else:
            announce("prepare", f"{step.name} ...")
            wall, cpu = time.perf_counter(), time.process_time()
            detail = step.run(ws)
            ws.reset()  # a later step builds its retrievers and planner over what this one made
            outcome = StepOutcome(step.name, "ran", detail, time.perf_counter() - wall, time.process_time() - cpu)
        outcomes.append(outcome)
        on_step(outcome)
        if step.name == until:
            break
    return outcomes


def summary(ws: Workspace) -> list[str]:
    """Which methods are ready, and what each tuned part was made on (labelled queries, or untuned defaults)."""
    lines = [f"auto: {methods.best_method(ws)}", *methods.status_lines(ws)]
    trained = ((RERANKER_ADAPTER, "reranker", ""),)
    for name, label, _ in methods.TUNED_PARTS["grasp"] + (methods.TUNED_PARTS["grasp-zs"][-1],) + trained:
        path = ws.artifact(name)
        if path is not None:
            manifest = read_manifest(path)
            made = (f"{manifest.context.get('queries', 'labelled')} queries, "
                    + ", ".join(f"{split} {n}" for split, n in manifest.data.items())) if manifest else "no manifest"
            lines.append(f"  {label} ({name}): made on {made}")
    return lines
