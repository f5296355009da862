"""Print the README's baseline table from the JSON reports `grasp eval --output-json` wrote.

    python bench/baseline_table.py out      # reads out/{bio,pkg}-{bm25,dense}.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

METRICS = ("hit@1", "hit@5", "recall@20", "mrr")


def main(folder: Path) -> None:
    print("| KB | method | n | Hit@1 | Hit@5 | Recall@20 | MRR | ms/query |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for path in sorted(folder.glob("*-*.json")):
        rep = json.loads(path.read_text())
        kb = path.stem.split("-")[0]
        cells = " | ".join(f"{100 * rep[m]:.1f}" for m in METRICS)
        print(f"| {kb} | {rep['method']} | {rep['n']} | {cells} | {rep.get('ms_per_query', float('nan')):.1f} |")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "out"))
