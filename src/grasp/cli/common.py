"""What the command modules share: options, the workspace of a command, printing a ranking."""

from __future__ import annotations

import json
from pathlib import Path

import click

from grasp.config import GraspConfig
from grasp.methods import METHODS
from grasp.workspace import Workspace


def config_of(ctx: click.Context) -> GraspConfig:
    return ctx.obj["config"]


skb_option = click.option("--skb", "skb_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
                          help="Knowledge base: an open-format directory or a STaRK processed directory.")
stark_option = click.option("--stark-dataset", type=click.Choice(["amazon", "mag", "prime"]),
                            help="Which STaRK dataset a processed directory holds (detected when omitted).")

queries_option = click.option(
    "--queries", "queries_file", type=click.Path(exists=True, path_type=Path),
    help="queries.jsonl in the open format, or a STaRK QA folder (stark_qa/stark_qa.csv and split/*.index); "
         "default: the SKB's qa/queries.jsonl (for a STaRK processed folder, a STaRK QA folder qa/ beside it).")


def stage_printer(ctx: click.Context):
    """While a command waits on the pipeline, print each stage as it starts, with the seconds since the first one
    (on stderr; not with -q)."""
    import contextlib
    import time

    from grasp.progress import listening

    if not ctx.obj["progress"]:
        return contextlib.nullcontext()
    t0 = time.perf_counter()
    return listening(lambda stage, message: click.echo(f"… {time.perf_counter() - t0:5.1f} s {stage}: {message}",
                                                       err=True))


def workspace(ctx: click.Context, skb_dir: Path, stark_dataset: str | None = None) -> Workspace:
    return Workspace.open(skb_dir, config_of(ctx), stark_dataset=stark_dataset, progress=ctx.obj["progress"])


def method_choice(auto: bool = False) -> click.Choice:
    return click.Choice((["auto"] if auto else []) + sorted(METHODS))


def echo_hit(row: dict, as_json: bool = False, suffix: str = "") -> None:
    """One ranked node: a JSON line, or ``rank score [type] name (id N)`` and ``suffix``."""
    if as_json:
        click.echo(json.dumps(row, ensure_ascii=False))
    else:
        click.echo(f"{row['rank']:>3}  {row['score']:8.4f}  [{row['type']}] {row['name']}  (id {row['node_id']}){suffix}")


def print_ranking(ws, ranking, as_json: bool = False) -> None:
    for rank, (nid, score) in enumerate(zip(ranking.node_ids.tolist(), ranking.scores.tolist(), strict=True), 1):
        echo_hit({"rank": rank, "node_id": nid, "type": ws.skb.type_of(nid), "name": ws.skb.names[nid],
                  "score": round(score, 4)}, as_json)




def plan_line(planned, *, cached: str = "cached") -> str:
    """A plan outcome as one line: how it was made (``cached`` names a replayed one), its status and the plan as
    JSON."""
    import json

    made = cached if planned.cached else f"made in {planned.seconds:.1f} s"
    return f"plan ({made}, {planned.check.status}): {json.dumps(planned.check.plan.dump(), ensure_ascii=False)}"
