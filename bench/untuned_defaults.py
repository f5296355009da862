"""How the untuned defaults were chosen: the static fusions a KB nobody labelled is served.

For each knowledge base, on its validation split, with every shipped artifact switched off (so mFAR has its
untrained, uniform field weights): the graph and mFAR runs, the static-RRF Hit@1 surface over the (w, rrf_k) grid
that `grasp tune fusion` searches; then, over the fused ranking that the chosen Stage-2 default gives, each
zero-shot reranker at each rerank depth and its final-fusion surface. Within a surface, a default is the cell whose
3x3 neighbourhood has the best mean Hit@1 averaged over the KBs (a flat region, not a sharp optimum); among the
rerankers and depths, the one whose smallest gain over the fusion alone, across the KBs, is largest (a reranker that
helps one KB by hurting another is not a default). Printed beside each: leave one KB out (the cell chosen on the
other KBs alone, scored on the one left out, against that KB's own best), which is what a KB that was not among
them can expect.

    python bench/untuned_defaults.py --skb ../shared/data/skb/bio --skb ../shared/data/skb/pkg \\
        [--split val] [--output-json defaults.json]
    python bench/untuned_defaults.py --from-json bench/untuned_defaults.json   # the tables again, from a saved run

Plans are replayed from the shipped caches (no LLM runs); test queries are never read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from grasp import methods
from grasp.config import load_config
from grasp.fuse.grid import STATIC_K, STATIC_W, FusionTable, neighbourhood_mean, search_static
from grasp.fuse.retriever import FusionSetting
from grasp.lab.tune import RERANK_DEPTHS, within_depth
from grasp.rerank.zero_shot import ZERO_SHOT_RERANKERS
from grasp.workspace import Workspace

UNTUNED = ["artifacts.shipped=false", "planner.kind=cache", "planner.on_miss=no_trade"]


def surface(first, second, queries, ws: Workspace, depth: int = 100) -> np.ndarray:
    table = FusionTable.build(first, second, queries, candidate_mask=ws.skb.candidate_mask, depth=depth)
    return search_static(table).surface


def choose(surfaces: dict[str, np.ndarray]) -> dict:
    """The flattest best cell of the KBs' mean surface, and leave-one-KB-out."""
    def cell(names):
        mean = np.mean([surfaces[n] for n in names], axis=0)
        return np.unravel_index(int(np.argmax(neighbourhood_mean(mean))), mean.shape)

    i, j = cell(list(surfaces))
    out = {"w": STATIC_W[i], "rrf_k": float(STATIC_K[j]),
           "hit@1": {n: round(float(s[i, j]), 4) for n, s in surfaces.items()},
           "best": {n: round(float(s.max()), 4) for n, s in surfaces.items()}}
    if len(surfaces) > 1:
        held = {}
        for left in surfaces:
            a, b = cell([n for n in surfaces if n != left])
            held[left] = {"w": STATIC_W[a], "rrf_k": float(STATIC_K[b]), "hit@1": round(float(surfaces[left][a, b]), 4),
                          "own_best": round(float(surfaces[left].max()), 4)}
        out["leave_one_out"] = held
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", action="append")
    ap.add_argument("--from-json", type=Path, help="print the tables of a saved run instead of measuring")
    ap.add_argument("--split", default="val")
    ap.add_argument("--set", action="append", default=[], help="configuration override (e.g. cache_dir=...)")
    ap.add_argument("--output-json", type=Path)
    args = ap.parse_args()
    if args.from_json:
        print_tables(json.loads(args.from_json.read_text()))
        return
    if not args.skb:
        ap.error("--skb (at least one) or --from-json")
    spaces, runs, fusion_surfaces = {}, {}, {}
    for path in args.skb:
        ws = Workspace.open(path, load_config(None, [*UNTUNED, *args.set]), progress=False)
        queries = ws.queries(split=args.split)
        graph, mfar = methods.run(ws, "graph", queries), methods.run(ws, "mfar", queries)
        name = ws.skb.name
        spaces[name], runs[name] = (ws, queries), (graph, mfar)
        fusion_surfaces[name] = surface(graph, mfar, queries, ws)
        print(f"{name}: {len(queries)} {args.split} queries; graph, mFAR (untrained) and the fusion surface done",
              flush=True)
    fusion = choose(fusion_surfaces)
    print(json.dumps({"fusion": fusion}), flush=True)  # (progress: the final fusions take minutes more)

    final_surfaces: dict[tuple[str, int], dict[str, np.ndarray]] = {}
    for name, (ws, queries) in spaces.items():
        graph, mfar = runs[name]
        fused = FusionSetting("static", fusion["rrf_k"], w=fusion["w"]).fuse(graph, mfar, name="fused", depth=100,
                                                                            top=100)
        for kind in ZERO_SHOT_RERANKERS:
            rr = methods.reranked_method(ws, trained=False, w=0.5, rrf_k=60.0, zero_shot=kind, depth=100)
            scored, _ = rr.from_upstream(queries, fused, 100)
            for depth in RERANK_DEPTHS:
                at_depth = scored if depth == 100 or not rr.reranker.pool_dependent else None
                if at_depth is None:  # scores that depend on the pool are made from the pool that will be reranked
                    rr.depth = depth
                    at_depth, _ = rr.from_upstream(queries, fused, depth)
                    rr.depth = 100
                elif depth < 100:
                    at_depth = within_depth(scored, fused, depth)
                final_surfaces.setdefault((kind, depth), {})[name] = surface(at_depth, fused, queries, ws, depth=100)
            print(f"{name}: {kind} reranked", flush=True)
    finals = {f"{kind}@{depth}": choose(s) for (kind, depth), s in final_surfaces.items()}
    report = {"split": args.split, "fusion": fusion, "final": finals,
              "fusion_surfaces": {n: s.round(4).tolist() for n, s in fusion_surfaces.items()},
              "axes": {"w": list(STATIC_W), "rrf_k": list(STATIC_K)}}
    if args.output_json:
        args.output_json.write_text(json.dumps(report, indent=1))
    print_tables(report)


def chosen_final(report: dict) -> str:
    """The reranker and depth whose smallest gain over the fusion alone, across the KBs, is largest (then the best
    mean)."""
    base = report["fusion"]["hit@1"]

    def score(rule: str) -> tuple[float, float]:
        hits = report["final"][rule]["hit@1"]
        return min(hits[n] - base[n] for n in hits), float(np.mean(list(hits.values())))
    return max(report["final"], key=score)


def print_tables(report: dict) -> None:
    names = list(report["fusion"]["hit@1"])
    best = chosen_final(report)
    print(f"\nchosen: fusion w {report['fusion']['w']}, rrf_k {report['fusion']['rrf_k']:g}; final fusion {best}, "
          f"w {report['final'][best]['w']}, rrf_k {report['final'][best]['rrf_k']:g}\n")
    print("| rule | " + " | ".join(f"{n} Hit@1 (its own best)" for n in names) + " | left out: "
          + " | ".join(f"{n}" for n in names) + " |")
    print("|---|" + "---:|" * (2 * len(names)))
    rows = [("fusion (graph + untrained mFAR)", report["fusion"]),
            *((f"final fusion, {k}" + (" (chosen)" if k == best else ""), v) for k, v in report["final"].items())]
    for label, r in rows:
        cells = [f"{100 * r['hit@1'][n]:.1f} ({100 * r['best'][n]:.1f})" for n in names]
        held = [f"{100 * r['leave_one_out'][n]['hit@1']:.1f}" for n in names] if "leave_one_out" in r else ["–"] * len(names)
        print(f"| {label}: w {r['w']}, rrf_k {r['rrf_k']:g} | " + " | ".join(cells) + " | " + " | ".join(held) + " |")


if __name__ == "__main__":
    main()
