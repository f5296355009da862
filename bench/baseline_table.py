"""Print a results table from the JSON reports `grasp eval --output-json` wrote.

    python bench/baseline_table.py out [--methods bm25,dense] [--kbs bio,pkg] [--suffix ""]

Reads out/<kb>-<method><suffix>.json for each KB and method, in that order.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

METRICS = ("hit@1", "hit@5", "recall@20", "mrr")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", nargs="?", default="out", type=Path)
    ap.add_argument("--methods", default="bm25,dense")
    ap.add_argument("--kbs", default="bio,pkg")
    ap.add_argument("--suffix", default="")
    args = ap.parse_args()
    print("| KB | method | n | Hit@1 | Hit@5 | Recall@20 | MRR | ms/query |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for kb in args.kbs.split(","):
        for method in args.methods.split(","):
            path = args.folder / f"{kb}-{method}{args.suffix}.json"
            if not path.exists():
                continue
            rep = json.loads(path.read_text())
            cells = " | ".join(f"{100 * rep[m]:.1f}" for m in METRICS)
            print(f"| {kb} | {rep['method']} | {rep['n']} | {cells} | {rep.get('ms_per_query', float('nan')):.1f} |")


if __name__ == "__main__":
    main()
