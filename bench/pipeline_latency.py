"""Query latency per stage of the whole pipeline, one query at a time, as a user of the API or
the service sees it, next to BM25 measured in the same run.

    python bench/pipeline_latency.py --skb ../shared/data/skb/pkg [--method grasp] [--n 100] [--split test]

Runs the first N queries of the split whose plan is cached through ``Searcher.search(explain=True)`` and
reports p50/p95 in milliseconds of every stage the explanation times (graph and its steps,
mFAR, fusion, reranker) and of the whole call, plus the planner's cold-cache LLM time as
recorded in the plan cache when each plan was made; the last column divides each p50 by the BM25
p50 of the same run, since these machines are noisy.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from grasp.api import Searcher
from grasp.config import load_config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True)
    ap.add_argument("--method", default="grasp")
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--split", default="test", help="a split name, or 'all'")
    ap.add_argument("--set", dest="overrides", action="append", default=[],
                    help="config override KEY=VALUE, e.g. reranker.depth=100")
    args = ap.parse_args()
    config = load_config(None, ["planner.kind=cache", "planner.on_miss=no_trade", *args.overrides])
    searcher = Searcher.open(args.skb, method=args.method, config=config)
    bm25 = Searcher(searcher.workspace, "bm25")
    planner = searcher.workspace.planner
    planned = [(q, rec) for q in searcher.workspace.queries(split=None if args.split == "all" else args.split)
               if (rec := planner.cache.get(planner.key(q.text))) is not None][: args.n]
    queries = [q for q, _ in planned]
    searcher.search(queries[0].text, k=10)  # load every model and index first
    bm25.search(queries[0].text, k=10)
    stages: dict[str, list[float]] = defaultdict(list)
    for q in queries:
        t0 = time.perf_counter()
        bm25.search(q.text, k=10, explain=False)
        stages["bm25 (baseline)"].append(1000 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        res = searcher.search(q.text, k=10)
        wall = 1000 * (time.perf_counter() - t0)
        for name, ms in res.explain["timings_ms"].items():
            if name not in ("total", searcher.method):  # the final fusion's time is in "reranker"
                stages[name].append(ms)
        stages["whole call"].append(wall)
    # the cold-cache planner: the LLM time recorded in the cache when each plan was made
    cold = [1000 * rec["seconds"] for _, rec in planned if rec.get("seconds") is not None]
    if cold:
        stages["planner, cold (LLM, from the plan cache)"] = cold
    base = float(np.percentile(stages["bm25 (baseline)"], 50))
    rr = searcher.retriever
    depth = f", rerank depth {rr.depth}, stored vectors {rr.uses_stored_vectors}" if hasattr(rr, "depth") else ""
    print(f"{searcher.skb.schema.name}, method {searcher.method}{depth}, {len(queries)} queries, one at a time\n")
    print("| stage | p50 ms | p95 ms | p50 / BM25 p50 |")
    print("|---|---:|---:|---:|")
    for name, xs in stages.items():
        p50, p95 = np.percentile(xs, 50), np.percentile(xs, 95)
        print(f"| {name} | {p50:.1f} | {p95:.1f} | {p50 / base:.1f}x |")


if __name__ == "__main__":
    main()
