"""Commands that answer queries: eval, search, plan, serve, index, info."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from grasp import methods
from grasp.cli.common import (
    config_of,
    echo_hit,
    method_choice,
    plan_line,
    print_ranking,
    queries_option,
    skb_option,
    stage_printer,
    stark_option,
    workspace,
)
from grasp.errors import GraspError
from grasp.inputs import MAX_DEPTH, MAX_K, check_query
from grasp.packaged import DEMO_SKB


@click.command("eval")
@skb_option
@stark_option
@queries_option
@click.option("--split", help="Keep only queries of this split (any name: train, val, test, heldout, ...).")
@click.option("--method", required=True, type=method_choice(), help="Retriever to evaluate.")
@click.option("--limit", type=click.IntRange(min=1), help="Keep the first N queries of the selection, in file order.")
@click.option("-k", "--k", "k", type=click.IntRange(1, MAX_DEPTH), help="Results per query (default: search.depth, 100).")
@click.option("--output-json", type=click.Path(dir_okay=False, path_type=Path), help="Write the report as JSON.")
@click.option("--run-file", type=click.Path(dir_okay=False, path_type=Path), help="Write the run as a TREC run file.")
@click.option("--report-md", type=click.Path(dir_okay=False, path_type=Path), help="Write the report as a markdown table.")
@click.pass_context
def eval_cmd(ctx, skb_dir, stark_dataset, queries_file, split, method, limit, k, output_json, run_file, report_md):
    """Evaluate a method: Hit@1, Hit@5, Recall@20 and MRR with STaRK's definitions."""
    from grasp.eval.trec import write_run
    from grasp.storage import write_json

    ws = workspace(ctx, skb_dir, stark_dataset)
    queries = ws.queries(queries_file, split=split, limit=limit)
    if not queries:
        raise GraspError(f"no queries selected (split={split!r}, limit={limit})")
    run, report = methods.evaluate(ws, method, queries, k)
    report.info.update({"split": split, "queries_file": str(queries_file or ws.default_queries_path())})
    if output_json:
        write_json(output_json, report.to_json())
    if run_file:
        write_run(run, run_file)
    if report_md:
        report_md.parent.mkdir(parents=True, exist_ok=True)
        report_md.write_text(report.to_markdown())
    click.echo(report.to_markdown())


@click.command()
@click.argument("query")
@skb_option
@stark_option
@click.option("--method", default="auto", show_default=True, type=method_choice(auto=True),
              help="auto: the method with the trained reranker (grasp) where there is one, else grasp-zs (untuned parts on their defaults), as the API and serve.")
@click.option("-k", "--k", "k", default=10, show_default=True, type=click.IntRange(1, MAX_K))
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON lines.")
@click.option("--explain", is_flag=True, help="Also print each stage's trace (plan, Cypher, fusion weights, ...) as JSON.")
@click.pass_context
def search(ctx, query, skb_dir, stark_dataset, method, k, as_json, explain):
    """Answer one QUERY and print the ranked nodes (through the Python API's Searcher: the same method choice,
    query checks and explanation)."""
    from grasp.api import Searcher
    from grasp.plan.build import degrade_missing_planner

    check_query(query)  # bad input is refused before any model loads
    note = degrade_missing_planner(config_of(ctx))
    searcher = Searcher(workspace(ctx, skb_dir, stark_dataset), method)
    if note and "graph" in searcher.stage_names:
        click.echo(f"note: {note}", err=True)
    with stage_printer(ctx):
        planned = searcher.plan_ahead(query)  # shown before the other stages run
        if planned is not None and ctx.obj["progress"]:
            click.echo(f"… {plan_line(planned)}", err=True)
        result = searcher.search(query, k, explain=explain)
    for h in result.hits:
        row = {"rank": h.rank, "node_id": h.node_id, "type": h.type, "name": h.name, "score": round(h.score, 4)}
        ranks = ", ".join(f"{s} {r if r is not None else '-'}" for s, r in h.stage_ranks.items() if s != "final")
        echo_hit({**row, "stage_ranks": h.stage_ranks} if explain else row, as_json, f"  [{ranks}]" if ranks else "")
    if explain:
        click.echo(json.dumps(result.explain, indent=None if as_json else 1, ensure_ascii=False, default=str))


@click.command()
@click.option("--skb", "skb_dir", default=DEMO_SKB, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Knowledge base (default: the bundled demo KB).")
@stark_option
@click.option("--method", default="auto", show_default=True,
              type=method_choice(auto=True),
              help="auto: the method with the trained reranker (grasp) where there is one, else grasp-zs (untuned parts on their defaults).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
@click.pass_context
def serve(ctx, skb_dir, stark_dataset, method, host, port):
    """Serve the REST API (POST /search, GET /health, GET /schema, /docs) and the web inspector (/)."""
    import uvicorn

    from grasp.api import Searcher
    from grasp.service import create_app, listen

    sock = listen(host, port)  # the port is ours before anything loads, and never claimed when it is taken
    searcher = Searcher.open(skb_dir, method=method, config=config_of(ctx), stark_dataset=stark_dataset,
                             progress=ctx.obj["progress"])
    for note in searcher.notes:
        click.echo(f"note: {note}")
    searcher.search("warm up", k=1)  # load every model and index before the first request
    click.echo(f"serving {searcher.skb.schema.name} with method {searcher.method} on http://{host}:{port}/")
    server = uvicorn.Server(uvicorn.Config(create_app(searcher), log_level="warning"))
    server.run(sockets=[sock])


@click.command()
@skb_option
@stark_option
@click.option("--method", "method_names", multiple=True, type=method_choice(),
              help="Methods to build (default: every method whose trained parts exist).")
@click.pass_context
def index(ctx, skb_dir, stark_dataset, method_names):
    """Build (or verify) the indexes of the given methods ahead of time."""
    ws = workspace(ctx, skb_dir, stark_dataset)
    if not method_names:
        ready = methods.readiness(ws)
        method_names = [m for m, missing in ready.items() if missing is None]
        for m, missing in ready.items():
            if missing is not None:
                click.echo(f"{m}: skipped ({missing})")
    for m in method_names:
        t0 = time.perf_counter()
        methods.retriever(ws, m).prepare()
        click.echo(f"{m}: ready ({time.perf_counter() - t0:.0f} s)")
    click.echo(f"indexes in {ws.cache_dir}")


@click.command()
@skb_option
@stark_option
@click.option("--verify", is_flag=True, help="Recompute every checksum and compare it with the recorded one.")
@click.pass_context
def info(ctx, skb_dir, stark_dataset, verify):
    """Print the SKB's size, node types and relations, its trained artifacts and its indexes."""
    from grasp import inventory

    ws = workspace(ctx, skb_dir, stark_dataset)
    skb = ws.skb
    click.echo(f"{skb.name}: {skb.num_nodes:,} nodes, {skb.num_edges:,} edges, layout {ws.layout.key}")
    click.echo(f"candidate types: {', '.join(skb.schema.candidate_types)} ({skb.candidate_ids.size:,} nodes)")
    for t, c in skb.type_counts().items():
        click.echo(f"  node  {t:<28} {c:>10,}")
    for r, c in skb.relation_counts().items():
        click.echo(f"  edge  {r:<28} {c:>10,}")
    click.echo(f"methods (auto: {methods.best_method(ws)}):")
    for line in methods.status_lines(ws):
        click.echo(f"  {line}")
    arts = inventory.artifacts(ws, verify=verify)
    click.echo("trained artifacts:" if arts else "trained artifacts: none")
    for entry in arts:
        click.echo(entry.line())
    click.echo(f"index cache: {ws.cache_dir}")
    idx = inventory.indexes(ws.cache_dir, verify=verify) if ws.cache_dir.exists() else []
    for entry in idx:
        click.echo(entry.line())
    if verify:
        changed = [e.label for e in [*arts, *idx] if e.verified is False]
        click.echo(f"verified: {'CHANGED: ' + ', '.join(changed) if changed else 'every recorded checksum holds'}")


@click.command("plan")
@click.argument("query")
@skb_option
@stark_option
@click.option("-k", "--k", "k", default=10, show_default=True, type=click.IntRange(1, MAX_K))
@click.option("--json", "as_json", is_flag=True, help="Print the whole trace as JSON.")
@click.pass_context
def plan_cmd(ctx, query, skb_dir, stark_dataset, k, as_json):
    """Plan one QUERY and run Stage 1: prints the plan, bindings, Cypher, n_cand and the top results."""
    from grasp.results import Query

    query = check_query(query)  # bad input is refused before any model loads
    ws = workspace(ctx, skb_dir, stark_dataset)
    with stage_printer(ctx):
        ranking = methods.retriever(ws, "graph").search_query(Query("q", query), k)
    trace = ranking.trace
    if as_json:
        rows = [{"rank": r + 1, "node_id": int(n), "name": ws.skb.names[n], "score": float(s)}
                for r, (n, s) in enumerate(zip(ranking.node_ids, ranking.scores, strict=True))]
        click.echo(json.dumps({**trace.to_json(), "results": rows}, indent=1, ensure_ascii=False, default=str))
        return
    click.echo(f"plan ({trace.plan_status}{', cached' if trace.plan_cached else ''}):")
    click.echo("  " + json.dumps(trace.plan, ensure_ascii=False))
    for r in trace.repairs:
        click.echo(f"  repair: {r}")
    if trace.plan_reason:
        click.echo(f"  reason: {trace.plan_reason}")
    for b in trace.bindings:
        shown = ", ".join(f"{x['name']} ({x['cosine']:.3f})" for x in b["bindings"])
        click.echo(f"anchor {b['var']}: {shown or '(no match)'}")
    if trace.cypher:
        click.echo("cypher:\n  " + trace.cypher.replace("\n", "\n  "))
    if trace.samples:
        statuses = ", ".join(f"{x['status']} ({x['n_cand']})" for x in trace.samples)
        click.echo(f"sampled plans: {statuses}; agreement {trace.agreement}")
    confidence = "" if trace.link_confidence is None else f"   link confidence: {trace.link_confidence:.3f}"
    click.echo(f"n_cand: {trace.n_cand}   risk_level: {trace.risk_level}{confidence}   timings (ms): {trace.timings_ms}")
    print_ranking(ws, ranking)


