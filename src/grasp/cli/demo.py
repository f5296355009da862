"""`grasp demo`: the demo KB end to end, with the story of a few answers."""

from __future__ import annotations

from pathlib import Path

import click

from grasp import methods
from grasp.cli.common import config_of
from grasp.errors import GraspError
from grasp.packaged import DEMO_SKB


@click.command()
@click.option("--skb", "skb_dir", default=DEMO_SKB, show_default=False, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Knowledge base (default: the bundled demo, a slice of Debian's package graph).")
@click.option("--examples", default=3, show_default=True, type=click.IntRange(min=0), help="Example queries to answer.")
@click.option("--split", default="test", show_default=True,
              help="Queries to evaluate. The demo's trained stages are pkg's (trained on pkg's train split and tuned on "
                   "its validation split, which hold the demo's train and val queries), so only 'test' is unseen.")
@click.pass_context
def demo(ctx, skb_dir, examples, split):
    """Build the demo KB's indexes, evaluate every prepared method on its test queries, answer a few
    examples with the most complete pipeline and show why it ranked them so."""
    from grasp.api import Searcher
    from grasp.eval.evaluate import markdown_table
    from grasp.methods import METHODS
    from grasp.plan.build import degrade_missing_planner
    from grasp.workspace import Workspace

    config = config_of(ctx)
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
        gold = set(q.answer_ids)
        graph, fusion = res.traces.get("graph"), res.traces.get("fused")
        click.echo(f"Q{q.qid}: {q.text}")
        if graph is not None and graph.plan is not None:
            click.echo(f"  plan {graph.plan_status}, risk {graph.risk_level}, n_cand {graph.n_cand}"
                       + (f", graph weight {fusion.weights['graph']:.2f}" if fusion is not None else ""))
        for h in res.hits:
            mark = "*" if h.node_id in gold else " "
            ranks = ", ".join(f"{s} {r if r is not None else '-'}" for s, r in h.stage_ranks.items() if s != "final")
            click.echo(f"  {mark}{h.rank}. {h.name} — {_first_line(ws, h.node_id)}  [{ranks}]")
        click.echo("")
    click.echo("(* = a gold answer; [stage rank] = where each stage had it)")


def _first_line(ws, nid: int) -> str:
    fields = ws.layout.text_fields(ws.skb, nid)
    return next(iter(fields.values()), "")[:90] if fields else ""


