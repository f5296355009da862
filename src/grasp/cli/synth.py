"""`grasp synthesize`: training queries made from the knowledge base itself."""

from __future__ import annotations

import click

from grasp.cli.common import skb_option, stark_option, workspace


@click.command()
@skb_option
@stark_option
@click.option("--n", "n", type=click.IntRange(min=1), help="Queries to make (default: synth.n, 2000).")
@click.option("--seed", type=int, help="Sampling seed (default: the configuration's seed).")
@click.option("--val-share", type=click.FloatRange(0, 1), help="Share put in val (default: synth.val_share, 0.2).")
@click.option("--max-answers", type=click.IntRange(min=1), help="Most gold answers a query may have (synth.max_answers).")
@click.option("--llm/--no-llm", default=None,
              help="Word the queries with the planner's LLM (its replies cached in the workspace); --no-llm: templates.")
@click.pass_context
def synthesize(ctx, skb_dir, stark_dataset, n, seed, val_share, max_answers, llm):
    """Make queries with gold answers from the KB: relational patterns sampled from its schema (1 and 2 hops, two
    anchors meeting at the answer, a relation joining a type to itself, text only), anchors drawn across degrees,
    gold answers by executing each pattern's plan, a phrase of an answer's text where it narrows them; worded by
    the local LLM (or templates), deduplicated, split into train and val. Written into the workspace, with each
    query's plan and the planner's worked examples for a KB without its own."""
    from grasp.lab.synthesize import synthesize_workspace

    ws = workspace(ctx, skb_dir, stark_dataset)
    report = synthesize_workspace(ws, n=n, seed=seed, val_share=val_share, max_answers=max_answers, llm=llm)
    click.echo(report.line())
