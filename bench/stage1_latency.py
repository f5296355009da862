"""Stage-1 latency per step on one SKB, embedded engines, next to BM25 measured in the same run.

    python bench/stage1_latency.py --skb ../shared/data/skb/bio [--n 100] [--split test]

Uses the first N queries that have a cached plan (plans are made once by `grasp plans build`;
their LLM time is reported from the cache as "planner, cold"). Steps: planner with a warm
cache, anchor linking (query encoding + vector search), execution (Kùzu Cypher, and the
in-memory executor), rescoring (the relevance text and the query: cosine and BM25). p50/p95 in
milliseconds; the ratio column divides by the BM25 p50 of the same run, since these machines are noisy.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from grasp import methods
from grasp.config import load_config
from grasp.workspace import Workspace


def pct(values, q):
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--split", default="test")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    config = load_config(None, [*args.overrides, "planner.kind=cache"])
    ws = Workspace.open(args.skb, config, progress=False)
    queries = [q for q in ws.queries(split=args.split) if ws.planner.cache.get(ws.planner.key(q.text))][: args.n]
    if not queries:
        raise SystemExit("no cached plans for this split: run `grasp plans build` first")
    cold = [ws.planner.cache.get(ws.planner.key(q.text)).get("seconds", float("nan")) * 1000 for q in queries]

    bm25 = methods.retriever(ws, "bm25")
    bm25_ms = []
    for q in queries:
        t = time.perf_counter()
        bm25.search(q.text, 100)
        bm25_ms.append(1000 * (time.perf_counter() - t))

    rows = {"BM25 (baseline)": bm25_ms, "planner, cold (LLM, from cache records)": cold}
    n_cand = []
    for engine in ("kuzu", "memory"):
        ws.config.graph.engine = engine
        ws.retrievers.pop("graph", None)
        graph = methods.retriever(ws, "graph")
        graph.search_query(queries[0], 100)  # warm-up: load indexes, first query compile
        steps: dict[str, list[float]] = {"plan": [], "link": [], "execute": [], "rescore": [], "total": []}
        for q in queries:
            t = time.perf_counter()
            r = graph.search_query(q, 100)
            steps["total"].append(1000 * (time.perf_counter() - t))
            for k, v in r.trace.timings_ms.items():
                steps[k].append(v)
            if engine == "kuzu":
                n_cand.append(r.trace.n_cand)
        if engine == "kuzu":
            rows["planner, warm cache"] = steps["plan"]
            rows["anchor linking"] = steps["link"]
            rows["rescoring"] = steps["rescore"]
        rows[f"execute ({engine})"] = steps["execute"]
        rows[f"stage 1 total ({engine})"] = steps["total"]

    base = pct(bm25_ms, 50)
    print(f"{ws.skb!r}: {len(queries)} queries with cached plans; n_cand p50 {pct(n_cand, 50):.0f}, max {max(n_cand)}")
    print("\n| step | p50 ms | p95 ms | p50 / BM25 p50 |")
    print("|---|---:|---:|---:|")
    for name, vals in rows.items():
        print(f"| {name} | {pct(vals, 50):.1f} | {pct(vals, 95):.1f} | {pct(vals, 50) / base:.2f} |")


if __name__ == "__main__":
    main()
