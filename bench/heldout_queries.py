"""Held-out queries for a KB with no labelled ones: one synthetic set's queries whose gold answers no query of the
training set has, written as a ``test`` split.

Two `grasp synthesize` runs with different seeds draw some of the same answers (on the WordNet slice, 20 of 100
queries); a query whose gold set the training queries also have would flatter what was trained on them, so it is
left out, whatever its wording or template.

    python bench/heldout_queries.py --queries HELDOUT.jsonl --split val --exclude TRAINING.jsonl --out EVAL.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from grasp.skb.queries import load_queries, write_queries


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=Path, required=True, help="the synthetic queries to hold out (queries.jsonl)")
    ap.add_argument("--split", default="val", help="which of their splits")
    ap.add_argument("--exclude", type=Path, required=True, action="append",
                    help="queries.jsonl of a training set (repeatable)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    seen = {frozenset(q.answer_ids) for path in args.exclude for q in load_queries(path)}
    chosen = [q for q in load_queries(args.queries) if q.split == args.split]
    kept = [q for q in chosen if frozenset(q.answer_ids) not in seen]
    write_queries([dataclasses.replace(q, split="test") for q in kept], args.out)
    print(f"{args.out}: {len(kept)} of {len(chosen)} {args.split} queries kept "
          f"({len(chosen) - len(kept)} share their gold set with a training query)")


if __name__ == "__main__":
    main()
