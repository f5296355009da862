"""Re-planning from execution feedback (`graph.replan`), measured: the graph stage alone on a split with each mode,
its Hit@1, MRR and share of queries with gold among its top 100, how many plans were made again and kept, and what
the second LLM calls cost. The first plans are the cached ones; the re-plans are cached as they are made, so a rerun
costs no LLM call.

    python bench/replan.py --skb ../shared/data/skb/bio --split val [--modes off,empty,empty_or_hub] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from grasp import methods
from grasp.config import load_config
from grasp.eval.evaluate import evaluate_run
from grasp.workspace import Workspace


def measure(skb: str, split: str, mode: str, sets: list[str], limit: int | None) -> dict:
    ws = Workspace.open(skb, load_config(None, [f"graph.replan={mode}", *sets]), progress=False)
    queries = ws.queries(split=split, limit=limit)
    t0 = time.perf_counter()
    run = methods.run(ws, "graph", queries, 100)
    wall = time.perf_counter() - t0
    rep = evaluate_run(run, queries, candidate_mask=ws.skb.candidate_mask)
    traces = [run[q.qid].trace for q in queries if q.qid in run]
    replans = [t.replan for t in traces if t.replan is not None]
    gold_in = np.mean([bool(set(run[q.qid].node_ids.tolist()) & set(q.answer_ids)) for q in queries])
    new = [t for t in traces if t.replan is not None and not t.replan["cached"]]
    return {"skb": ws.skb.name, "split": split, "mode": mode, "n": len(queries), "hit@1": rep.means["hit@1"],
            "mrr": rep.means["mrr"], "gold@100": float(gold_in), "replanned": len(replans),
            "kept": sum(r["kept"] for r in replans), "usable": sum(r["status"] in ("valid", "repaired") for r in replans),
            "new_llm_calls": len(new), "wall_s": round(wall, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", action="append", required=True)
    ap.add_argument("--split", default="val")
    ap.add_argument("--modes", default="off,empty,empty_or_hub")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--set", action="append", default=[], help="configuration override")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    rows = [measure(skb, args.split, mode, args.set, args.limit) for skb in args.skb for mode in args.modes.split(",")]
    print("| KB | split | replan | n | graph Hit@1 | MRR | gold in top 100 | re-planned | usable | kept | new LLM calls | wall s |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['skb']} | {r['split']} | {r['mode']} | {r['n']} | {100 * r['hit@1']:.1f} | {100 * r['mrr']:.1f} | "
              f"{100 * r['gold@100']:.1f} | {r['replanned']} | {r['usable']} | {r['kept']} | {r['new_llm_calls']} | "
              f"{r['wall_s']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
