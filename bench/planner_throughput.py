"""Planner throughput: plans per hour on the same queries, the serial planner vs the parallel engines.

    python bench/planner_throughput.py --skb ../shared/data/skb/pkg [--n 30] [--split val --offset 100]
                                       [--variants serial,llama.cpp,torch]

Every variant runs the local planner model (Qwen2.5-Coder-1.5B Q4_K_M, `grasp fetch planner`) through
``Planner.plan_many`` into a fresh plan cache (nothing is replayed), one after the other in one run:
"serial" is the baseline planner (llama.cpp, 1 thread, 1 slot, no flash attention),
"llama.cpp" its parallel slots (every core, ``planner.slots`` slots, flash attention), "torch" the
PyTorch engine (bfloat16 where the CPU has it, ``planner.batch`` requests decoded as one batch over the
shared system prompt; grasp.plan.torch_llm). Wall time includes loading the model and the first pass
over the system prompt (the torch engine's one-off GGUF conversion is done before timing). Prints
plans/hour, the ratio to the first variant, how many plans differ from the first variant's
(temperature 0; other kernels and batching change floating-point sums, so some may) and the usable
share of each. The default selection (pkg's validation queries 101-130) has no shipped plan.
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
    ap.add_argument("--variants", default="serial,llama.cpp,torch", help="comma-separated: serial, llama.cpp, torch")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override KEY=VALUE")
    args = ap.parse_args()

    from grasp.config import load_config
    from grasp.plan.build import local_planner_path
    from grasp.plan.cache import PlanCache
    from grasp.plan.gguf import convert_gguf
    from grasp.plan.llm import LocalGGUFClient
    from grasp.plan.planner import Planner
    from grasp.plan.prompt import PromptBuilder, load_examples, profile_of
    from grasp.plan.torch_llm import TorchChatClient
    from grasp.skb import load_skb, read_queries, select_queries

    config = load_config(None, args.overrides)
    cfg = config.planner
    skb = load_skb(args.skb)
    queries = select_queries(read_queries(Path(args.skb) / "qa" / "queries.jsonl"), args.split, None)
    queries = queries[args.offset : args.offset + args.n]
    builder = PromptBuilder(skb, examples=load_examples(profile_of(skb)), plan_format=cfg.format)
    path = local_planner_path(cfg, config.cache_root)
    variants = {"serial": ("serial (llama.cpp, 1 thread, 1 slot; baseline)",
                           lambda: LocalGGUFClient(path, n_ctx=cfg.n_ctx, seed=config.seed, model_id=cfg.model,
                                                   threads=1, slots=1, flash_attn=False)),
                "llama.cpp": (f"llama.cpp ({cfg.threads or 'all'} threads, {cfg.slots} slots, flash attention)",
                              lambda: LocalGGUFClient(path, n_ctx=cfg.n_ctx, seed=config.seed, model_id=cfg.model,
                                                      threads=cfg.threads, slots=cfg.slots, flash_attn=cfg.flash_attn)),
                "torch": (f"torch ({cfg.batch} requests a batch, shared prefix)",
                          lambda: TorchChatClient.from_gguf(path, batch=cfg.batch, threads=cfg.threads,
                                                            seed=config.seed, model_id=cfg.model,
                                                            keep_prefixes=False))}  # its first prefix pass counts
    chosen = [v.strip() for v in args.variants.split(",")]
    if "torch" in chosen:  # the one-off conversion of the GGUF is not part of any run's time
        convert_gguf(path)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, key in enumerate(chosen):
            name, make = variants[key]
            t0 = time.perf_counter()
            client = make()
            planner = Planner(skb, client, PlanCache(Path(tmp) / f"{i}.jsonl"), builder=builder, grammar=cfg.grammar,
                              retries=cfg.retries, max_tokens=cfg.max_tokens, model_id=cfg.model)
            outcomes = planner.plan_many(queries, progress=True)
            wall = time.perf_counter() - t0
            results[name] = (wall, outcomes)
            print(f"{name}: {len(queries)} plans in {wall:.0f} s", flush=True)
            del planner, client
    base_wall, base = next(iter(results.values()))
    print(f"\n{args.skb}: {len(queries)} {args.split} queries (from #{args.offset + 1})\n")
    print("| planner | wall s | plans/hour | / first | usable | plans differing from the first |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (wall, outcomes) in results.items():
        usable = sum(o.check.usable for o in outcomes.values()) / len(queries)
        differ = sum(base[q.qid].check.plan.dump() != outcomes[q.qid].check.plan.dump() for q in queries)
        print(f"| {name} | {wall:.0f} | {3600 * len(queries) / wall:.0f} | {base_wall / wall:.2f}x "
              f"| {100 * usable:.0f}% | {differ} |")


if __name__ == "__main__":
    main()
