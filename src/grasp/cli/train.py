"""Training and tuning commands: prepare, train mfar | reranker, tune fusion | rerank, report."""

from __future__ import annotations

import json
from pathlib import Path

import click

from grasp.cli.common import method_choice, queries_option, skb_option, stage_printer, stark_option, workspace
from grasp.lab.prepare import STEP_NAMES


@click.group("train")
def train_group() -> None:
    """Train the trainable stages."""


@train_group.command("mfar")
@skb_option
@stark_option
@click.option("--limit", type=click.IntRange(min=1), help="Use only the first N train queries.")
@click.pass_context
def train_mfar(ctx, skb_dir, stark_dataset, limit):
    """Train mFAR's field weights on the train split, early-stopping on val; with mfar.encoder_tuning=lora,
    first its encoder (LoRA) jointly with them. Resumes if interrupted."""
    from grasp.lab.train import train_mfar

    ws = workspace(ctx, skb_dir, stark_dataset)
    state = train_mfar(ws, limit=limit, announce=click.echo)
    for entry in state["log"]:
        click.echo(json.dumps(entry))
    click.echo(f"best validation MRR {state['best']:.4f}; weights in {ws.mfar_dir}")


@train_group.command("reranker")
@skb_option
@stark_option
@click.option("--limit", type=click.IntRange(min=1), help="Use only the first N train queries.")
@click.option("--pool", type=click.Choice(["fused", "mfar"]), default="fused", show_default=True,
              help="Where the hard negatives come from. Train queries without a cached plan get no graph ranking, "
                   "so their fused pool is the mFAR pool; 'mfar' needs no fusion setting yet.")
@click.option("--export", "export_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the records, validation pools and candidate texts to this .json.xz bundle and stop "
                   "(train it elsewhere with scripts/train_reranker_bundle.py).")
@click.pass_context
def train_reranker_cmd(ctx, skb_dir, stark_dataset, limit, pool, export_path):
    """LoRA-train the reranker (reranker.kind: bi-encoder by default, cross-encoder or llm-yes-no) on hard negatives
    from the Stage-2 top-100 of the train split (resumable)."""
    from grasp.lab.train import export_reranker_bundle, train_reranker
    from grasp.rerank.train import mean_loss

    ws = workspace(ctx, skb_dir, stark_dataset)
    if export_path is not None:
        click.echo(f"{export_reranker_bundle(ws, export_path, pool=pool, limit=limit)} -> {export_path}")
        return
    state = train_reranker(ws, pool=pool, limit=limit)
    click.echo(f"{state['records']} records, {state['step']} steps, loss {mean_loss(state['log'], True):.3f} -> "
               f"{mean_loss(state['log'], False):.3f}; adapter in {ws.reranker_dir / 'adapter'}")
    for entry in state.get("val", []):
        click.echo(f"step {entry['step']}: validation Hit@1 {entry['hit@1']:.4f}, MRR {entry['mrr']:.4f} "
                   f"(reranker alone, {entry['n']} queries)")


@click.group("tune")
def tune_group() -> None:
    """Tune hyperparameters on validation."""


@tune_group.command("fusion")
@skb_option
@stark_option
@click.option("--split", default="val", show_default=True)
@click.option("--dense-method", default="mfar", show_default=True, type=method_choice())
@click.option("--limit", type=click.IntRange(min=1))
@click.option("--heatmap", type=click.Path(dir_okay=False, path_type=Path), help="Write the static (w, k) Hit@1 heatmap PNG.")
@click.pass_context
def tune_fusion_cmd(ctx, skb_dir, stark_dataset, split, dense_method, limit, heatmap):
    """Grid-search static and dynamic RRF on validation runs; save the better setting with the index."""
    from grasp.lab.tune import tune_fusion

    ws = workspace(ctx, skb_dir, stark_dataset)
    setting, info = tune_fusion(ws, split=split, dense_method=dense_method, limit=limit, heatmap=heatmap)
    click.echo(json.dumps(info, indent=1))
    click.echo(f"chosen: {setting.mode} (validation Hit@1 {setting.val_hit1:.4f}) -> "
               f"{ws.artifact_path(setting.artifact)}")


@tune_group.command("rerank")
@skb_option
@stark_option
@click.option("--zero-shot", is_flag=True, help="Tune the zero-shot reranker's final fusion instead of the trained one's.")
@click.option("--split", default="val", show_default=True)
@click.option("--limit", type=click.IntRange(min=1))
@click.pass_context
def tune_rerank_cmd(ctx, skb_dir, stark_dataset, zero_shot, split, limit):
    """Choose the final fusion of the reranker's and the upstream rankings on validation: reranked depth, static or
    bucketed (w, k) (one per bucket of graph candidates) and, zero-shot under reranker.zero_shot=auto, the reranker,
    by cross-validated Hit@1."""
    from grasp.lab.tune import tune_rerank

    ws = workspace(ctx, skb_dir, stark_dataset)
    click.echo(json.dumps(tune_rerank(ws, trained=not zero_shot, split=split, limit=limit).to_json(), indent=1))


@click.command()
@skb_option
@stark_option
@queries_option
@click.option("--split", default="test", show_default=True)
@click.option("--limit", type=click.IntRange(min=1))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("report"), show_default=True)
@click.option("--sensitivity/--no-sensitivity", default=True, show_default=True,
              help="Also draw the validation sensitivity figures (fusion cells, reranker training, final-fusion surface).")
@click.pass_context
def report(ctx, skb_dir, stark_dataset, queries_file, split, limit, out_dir, sensitivity):
    """Ablation table (markdown + PNG bar chart) of every stage on a split, with rank progressions and
    the validation sensitivity figures."""
    from grasp.lab.ablation import ablation

    ws = workspace(ctx, skb_dir, stark_dataset)
    click.echo(ablation(ws, split=split, limit=limit, out_dir=out_dir, sensitivity_figures=sensitivity,
                        queries_file=queries_file))




@click.command()
@skb_option
@stark_option
@click.option("--until", type=click.Choice(STEP_NAMES), help="Stop after this step.")
@click.option("--synthesize", is_flag=True, help="Train on queries synthesized from the KB even where it has "
              "labelled ones (queries=synthetic).")
@click.pass_context
def prepare(ctx, skb_dir, stark_dataset, until, synthesize):
    """The whole recipe: validate, index, synthesize training queries from the KB where it has no labelled train
    and val queries, plan them, train mFAR, tune fusion, train the reranker, tune both final fusions, index the
    reranker's vectors. Each step is skipped when what it makes is there, so an interrupted run resumes. Ends with
    which methods are ready and what each tuned part was made on (labelled or synthetic queries, or defaults)."""
    from grasp.lab.prepare import prepare as run_recipe
    from grasp.lab.prepare import summary

    ws = workspace(ctx, skb_dir, stark_dataset)
    with stage_printer(ctx):
        outcomes = run_recipe(ws, until=until, synthesize=synthesize, on_step=lambda outcome: click.echo(outcome.line()))
    ran = [o for o in outcomes if o.status == "ran"]
    click.echo(f"{len(ran)} steps ran in {sum(o.wall_s for o in ran):.0f} s "
               f"({sum(o.cpu_s for o in ran):.0f} CPU-s); {ws.skb.name} now:")
    for line in summary(ws):
        click.echo(f"  {line}")
