"""Share of valid plans with and without the schema grammar, on real query text, and the shapes of the usable plans.

    python bench/plan_validity.py --n 30 [--shared ../shared] [--datasets stark-amazon,stark-mag,stark-prime,bio,pkg]
        [--grammar both|yes|no]

STaRK: the first N test queries of each dataset (its graphs are not available, so plans are
validated against STaRK's schema alone); bio/pkg: the first N test queries, against their SKB.
Each (dataset, grammar) pair plans with the configured planner (default: the local GGUF model)
into its own cache file under out/plan-validity/, so a rerun costs no LLM call. Prints a
markdown table (the README's; bio/pkg replay from committed caches, STaRK costs about 40 s of
CPU per plan): usable = valid or repaired after at most one retry with the error fed back;
first try = usable without a retry. A second table gives the usable plans' shapes: the share with 0, 1 and 2+
anchors and 0, 1 and 2+ hops, the share of anchors matched by name, the number of distinct shapes and the relations
used most.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from grasp.config import load_config
from grasp.plan.build import build_chat_client
from grasp.plan.cache import PlanCache, shipped_plans
from grasp.plan.planner import Planner
from grasp.plan.summary import summarise
from grasp.skb import SKB, read_skb, read_stark_qa, select_queries
from grasp.skb.stark import stark_schema

# bio/pkg plans made without the grammar by this bench (STaRK's query text is not committed: its plans stay in --out)
COMMITTED = sorted((Path(__file__).parent / "plan-validity").glob("*.jsonl"))


def load(name: str, shared: Path, n: int):
    if name.startswith("stark-"):
        ds = name.removeprefix("stark-")
        folder = {"amazon": "amazon", "mag": "mag", "prime": "primekg"}[ds]
        queries = select_queries(read_stark_qa(shared / "data" / "stark_qa" / folder), "test", n)
        return SKB.schema_only(stark_schema(ds)), queries
    from grasp.skb import read_queries

    skb = read_skb(shared / "data" / "skb" / name)
    return skb, select_queries(read_queries(shared / "data" / "skb" / name / "qa" / "queries.jsonl"), "test", n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--shared", type=Path, default=Path("../shared"))
    ap.add_argument("--datasets", default="stark-amazon,stark-mag,stark-prime,bio,pkg")
    ap.add_argument("--out", type=Path, default=Path("out/plan-validity"))
    ap.add_argument("--grammar", choices=["both", "yes", "no"], default="both")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override KEY=VALUE")
    args = ap.parse_args()
    config = load_config(None, args.overrides)
    client = None
    rows = []
    for name in args.datasets.split(","):
        skb, queries = load(name, args.shared, args.n)
        for grammar in {"both": (True, False), "yes": (True,), "no": (False,)}[args.grammar]:
            # plans already made are reused (the key holds model, prompt and grammar flag): the pipeline's shipped
            # caches (bio/pkg, with the grammar) and this bench's committed bio/pkg runs without it
            cache = PlanCache(args.out / f"{name}-{'grammar' if grammar else 'free'}.jsonl",
                              readonly=[*shipped_plans(skb.schema.name), *COMMITTED])

            def factory():
                nonlocal client
                client = client or build_chat_client(config.planner, cache_root=config.cache_root, seed=config.seed)
                return client

            planner = Planner(skb, factory, cache, grammar=grammar, retries=config.planner.retries,
                              max_tokens=config.planner.max_tokens, model_id=config.planner.model)
            summary = summarise(planner.plan_many(queries, progress=True).values())
            rows.append((name, grammar, summary))
            print(json.dumps({"dataset": name, "grammar": grammar, **summary}), flush=True)
    print("\n| dataset | n | grammar | usable | first try | valid | repaired | rejected | empty | s/plan p50 |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, grammar, s in rows:
        p50 = f"{s['seconds_per_plan_p50']:.1f}" if s["seconds_per_plan_p50"] is not None else "cached"
        print(f"| {name} | {s['n']} | {'yes' if grammar else 'no'} | {100 * s['usable']:.0f}% | "
              f"{100 * s['first_try_usable']:.0f}% | {100 * s['valid']:.0f}% | {100 * s['repaired']:.0f}% | "
              f"{100 * s['rejected']:.0f}% | {100 * s['empty']:.0f}% | {p50} |")
    print("\n| dataset | grammar | usable plans | anchors 0 / 1 / 2+ | hops 0 / 1 / 2+ | anchors by name | distinct shapes "
          "| relations used most |")
    print("|---|---|---:|---|---|---:|---:|---|")
    for name, grammar, s in rows:
        sh = s["shapes"]
        modes = sh["match_modes"]
        by_name = modes.get("name", 0) / max(1, sum(modes.values()))
        top = ", ".join(f"{r} {c}" for r, c in list(sh["relations"].items())[:4])
        print(f"| {name} | {'yes' if grammar else 'no'} | {sh['plans']} | {split_counts(sh['anchors'])} | "
              f"{split_counts(sh['hops'])} | {100 * by_name:.0f}% | {sh['distinct_shapes']} | {top} |")


def split_counts(shares: dict) -> str:
    """Shares of 0, 1 and 2-or-more, as percentages ("10 / 70 / 20")."""
    zero, one = shares.get("0", 0.0), shares.get("1", 0.0)
    return f"{100 * zero:.0f} / {100 * one:.0f} / {100 * (1 - zero - one) if shares else 0:.0f}"


if __name__ == "__main__":
    main()
