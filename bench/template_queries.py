"""The queries of some templates only, written as a queries file: to report on the relational patterns a training
set never showed (e.g. the labelled test templates whose pattern `grasp synthesize` did not sample).

    python bench/template_queries.py --queries KB/qa/queries.jsonl --split test --template T [--template T2] --out OUT.jsonl
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from grasp.skb.queries import load_queries, write_queries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=Path, required=True, help="queries.jsonl (or a STaRK QA folder)")
    ap.add_argument("--split", default=None, help="keep only this split")
    ap.add_argument("--template", action="append", required=True, help="a template to keep (repeatable)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    queries = [q for q in load_queries(args.queries) if args.split is None or q.split == args.split]
    present = Counter(q.template for q in queries)
    missing = [t for t in args.template if t not in present]
    if missing:
        known = ", ".join(sorted(str(t) for t in present))
        raise SystemExit(f"{args.queries}: no {args.split or ''} query of template {', '.join(missing)} (there: {known})")
    kept = [q for q in queries if q.template in set(args.template)]
    write_queries(kept, args.out)
    print(f"{args.out}: {len(kept)} queries ({', '.join(f'{t} {present[t]}' for t in args.template)})")


if __name__ == "__main__":
    main()
