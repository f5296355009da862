"""Planner throughput: plans per hour on the same queries, main's serial default vs the new default.

    python bench/planner_throughput.py --skb ../shared/data/skb/pkg [--n 30] [--split val --offset 100]

Both variants run the local GGUF planner (Qwen2.5-Coder-1.5B, `grasp fetch planner`) through
``Planner.plan_many`` into fresh plan caches (nothing is replayed), in one run, one after the
other: "serial" is main's setting before this change (1 thread, 1 slot, no flash attention),
"parallel" the new defaults (every core, ``planner.slots`` slots decoding at once, flash attention).
Wall time includes loading the model and each slot's first pass over the system prompt. Prints
plans/hour, the ratio, how many plans differ between the two (temperature 0: batching changes the
floating-point sums, so a few may) and the usable share of each. The default selection (pkg's
validation queries 101-130) has no shipped plan.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--split", default="val")
    ap.add_argument("--offset", type=int, default=100, help="skip the first N queries of the split")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override KEY=VALUE")
    args = ap.parse_args()

    from grasp.config import load_config
    from grasp.plan.build import local_planner_path
    from grasp.plan.cache import PlanCache
    from grasp.plan.llm import LocalGGUFClient
    from grasp.plan.planner import Planner
    from grasp.plan.prompt import PromptBuilder, load_examples, profile_of
    from grasp.skb import load_skb, read_queries, select_queries

    config = load_config(None, args.overrides)
    cfg = config.planner
    skb = load_skb(args.skb)
    queries = select_queries(read_queries(Path(args.skb) / "qa" / "queries.jsonl"), args.split, None)
    queries = queries[args.offset : args.offset + args.n]
    builder = PromptBuilder(skb, examples=load_examples(profile_of(skb)))
    variants = {"serial (main: 1 thread, 1 slot)": {"threads": 1, "slots": 1, "flash_attn": False},
                f"parallel (default: {cfg.threads or 'all'} threads, {cfg.slots} slots, flash attention)":
                    {"threads": cfg.threads, "slots": cfg.slots, "flash_attn": cfg.flash_attn}}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, kw) in enumerate(variants.items()):
            t0 = time.perf_counter()
            client = LocalGGUFClient(local_planner_path(cfg, config.cache_root), n_ctx=cfg.n_ctx, seed=config.seed, model_id=cfg.model, **kw)
            planner = Planner(skb, client, PlanCache(Path(tmp) / f"{i}.jsonl"), builder=builder, grammar=cfg.grammar,
                              retries=cfg.retries, max_tokens=cfg.max_tokens, model_id=cfg.model)
            outcomes = planner.plan_many(queries, progress=True)
            wall = time.perf_counter() - t0
            results[name] = (wall, outcomes)
            print(f"{name}: {len(queries)} plans in {wall:.0f} s", flush=True)
            del planner, client
    (base_wall, base), (new_wall, new) = results.values()
    differ = sum(base[q.qid].check.plan.dump() != new[q.qid].check.plan.dump() for q in queries)
    print(f"\n{args.skb}: {len(queries)} {args.split} queries (from #{args.offset + 1}); {differ} plans differ\n")
    print("| planner | wall s | plans/hour | / serial | usable |")
    print("|---|---:|---:|---:|---:|")
    for name, (wall, outcomes) in results.items():
        usable = sum(o.check.usable for o in outcomes.values()) / len(queries)
        print(f"| {name} | {wall:.0f} | {3600 * len(queries) / wall:.0f} | {base_wall / wall:.2f}x | {100 * usable:.0f}% |")


if __name__ == "__main__":
    main()
