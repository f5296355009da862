"""The trained rerankers compared on validation: the LoRA bi-encoder, the LoRA
cross-encoder and their combination (each one's scores standardised over the reranked pool and added,
as the zero-shot hybrid does), alone and after the final fusion.

Each reranker is a label and its configuration overrides (`--reranker cross:reranker.kind=cross-encoder`; the
default compares the two kinds) and reads the adapter those settings name (`grasp --set reranker.kind=KIND train
reranker` first; where the cache has none, the shipped one for that configuration). Every kind reranks
the same upstream run (the one `grasp tune rerank` fuses with: grasp-zs when its setting exists), at the
depths `grasp tune rerank` compares; "alone" is the reranker's own ranking of the upstream top 100;
"after fusion" is each selection rule's Hit@1 on held-out folds (the same cross-validation that chooses
the shipped setting), best rule per kind.

    python bench/reranker_kinds.py --skb ../shared/data/skb/pkg [--reranker LABEL:KEY=VALUE[,KEY=VALUE]]...
        [--combine LABEL+LABEL]... [--limit N]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from grasp import methods
from grasp.artifacts import final_fusion_artifact
from grasp.config import load_config
from grasp.eval.evaluate import evaluate_run, markdown_table
from grasp.fuse.grid import cross_validate
from grasp.lab.tune import RERANK_DEPTHS, final_fusion_rules, within_depth
from grasp.methods import reranked_method
from grasp.rerank.hybrid import standardise
from grasp.results import Ranking, Run
from grasp.workspace import Workspace

DEEPEST = max(RERANK_DEPTHS)


def combined(runs: list[Run], name: str) -> Run:
    """Per query, every run's scores standardised over the pool and added (the runs rank the same pool)."""
    out = Run(name)
    for qid in runs[0].keys():
        node_ids = np.sort(runs[0][qid].node_ids)
        total = np.zeros(len(node_ids))
        for run in runs:
            ranking = run[qid]
            by_node = dict(zip(ranking.node_ids.tolist(), ranking.scores.tolist(), strict=True))
            total += standardise(np.array([by_node[int(n)] for n in node_ids]))
        out.add(Ranking.from_scores(qid, node_ids, total, stage=name))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True)
    ap.add_argument("--split", default="val")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--reranker", action="append", dest="rerankers", metavar="LABEL:KEY=VALUE[,KEY=VALUE]",
                    help="a trained reranker to compare (default: bi:reranker.kind=bi-encoder and "
                         "cross:reranker.kind=cross-encoder)")
    ap.add_argument("--combine", action="append", metavar="LABEL+LABEL[+...]",
                    help="rerankers whose standardised scores are added (repeatable; default: the first two)")
    ap.add_argument("--output-json", help="also write every rule's held-out Hit@1 and the alone metrics here")
    ap.add_argument("--set", action="append", default=[], help="configuration override (e.g. cache_dir=...)")
    args = ap.parse_args()
    base = ["planner.kind=cache", "planner.on_miss=no_trade", *args.set]
    specs = dict(spec.split(":", 1) for spec in args.rerankers or
                 ["bi:reranker.kind=bi-encoder", "cross:reranker.kind=cross-encoder"])
    combos = {name: name.split("+") for name in args.combine or ["+".join(list(specs)[:2])] if "+" in name}
    unknown = {label for labels in combos.values() for label in labels} - set(specs)
    if unknown:
        raise SystemExit(f"--combine names {sorted(unknown)}, which no --reranker labels")
    spaces = {label: Workspace.open(args.skb, load_config(None, [*base, *overrides.split(",")]), progress=False)
              for label, overrides in specs.items()}
    ws = next(iter(spaces.values()))
    queries = ws.queries(split=args.split, limit=args.limit)
    source = "grasp-zs" if ws.artifact(final_fusion_artifact(False)) is not None else "fused"
    stages = methods.retriever(ws, source).batch_search_stages(queries, DEEPEST)
    upstream = stages[source]

    scored: dict[str, Run] = {}
    seconds: dict[str, float] = {}
    for label, space in spaces.items():
        rr = reranked_method(space, trained=True, w=0.5, rrf_k=2.0, upstream=source, depth=DEEPEST)
        t0 = time.perf_counter()
        scored[label], _ = rr.from_upstream(queries, upstream, DEEPEST, progress=True)
        seconds[label] = time.perf_counter() - t0
    names = [*spaces, *combos]

    rules, reports = {}, []
    for name in names:
        for depth in RERANK_DEPTHS:
            if name in spaces:
                at_depth = within_depth(scored[name], upstream, depth)
            else:  # standardised over the pool that depth reranks
                at_depth = combined([within_depth(scored[label], upstream, depth) for label in combos[name]], name)
            if depth == DEEPEST:
                rep = evaluate_run(at_depth, queries, candidate_mask=ws.skb.candidate_mask)
                rep.method = f"{name} alone (top {depth})"
                reports.append(rep)
            rules.update(final_fusion_rules(at_depth, upstream, queries, depth=depth,
                                            prefix=f"{name}:", candidate_mask=ws.skb.candidate_mask))
    upstream_report = evaluate_run(upstream, queries, candidate_mask=ws.skb.candidate_mask)
    upstream_report.method = f"{source} (upstream)"
    cv = cross_validate(rules, seed=ws.config.seed)["cv"]
    print(f"{ws.skb.name}, {args.split} ({len(queries)} queries); upstream {source}; reranking seconds: "
          + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()) + "\n")
    print(markdown_table([upstream_report, *reports]))
    print("\nafter the final fusion (held-out Hit@1, 5-fold cross-validation):\n")
    print("| reranker | best rule | held-out Hit@1 |\n|---|---|---:|")
    for name in names:
        mine = {rule: v for rule, v in cv.items() if rule.startswith(f"{name}:")}
        best = max(mine, key=mine.get)
        print(f"| {name} | {best.removeprefix(name + ':')} | {100 * mine[best]:.1f} |")
    if args.output_json:
        Path(args.output_json).write_text(json.dumps(
            {"split": args.split, "n": len(queries), "upstream": source, "rerankers": specs, "combined": combos,
             "alone": {rep.method: rep.means for rep in [upstream_report, *reports]}, "cv": cv}, indent=1))


if __name__ == "__main__":
    main()
