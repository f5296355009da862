"""Validity and timing of the cached plans of a split (the planned prefix, in file order).

    python bench/plan_stats.py --skb ../shared/data/skb/bio [--split test]
"""

from __future__ import annotations

import argparse
import json

from grasp.config import load_config
from grasp.plan.summary import summarise
from grasp.workspace import Workspace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True)
    ap.add_argument("--split", default="test")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    ws = Workspace.open(args.skb, load_config(None, [*args.overrides, "planner.kind=cache"]), progress=False)
    outcomes, seconds = [], []
    for q in ws.queries(split=args.split):
        record = ws.planner.cache.get(ws.planner.key(q.text))
        if record is None:
            break
        outcomes.append(ws.planner.plan(q.text))
        seconds.append(record.get("seconds", 0.0))
    summary = summarise(outcomes)
    summary["llm_seconds_p50"] = sorted(seconds)[len(seconds) // 2] if seconds else None
    print(json.dumps({"skb": ws.skb.name, "split": args.split, **summary}, indent=1))


if __name__ == "__main__":
    main()
