"""Append a workspace's newly planned queries to a shipped plan cache.

`grasp plans build` caches every plan in the workspace (``<cache>/skb/<name>-<fingerprint>/plans.jsonl``);
the repository ships one cache per KB (``src/grasp/data/plans/<name>.jsonl``) so that evaluation and CI
replay plans without an LLM. This copies the workspace records made with one prompt (its hash, printed by
``grasp plans build`` and recorded in each record) whose keys the shipped file does not hold yet, in the
workspace's order; records already shipped are never rewritten.

    python scripts/ship_plans.py ~/.cache/grasp/skb/bio-3eb6a16d79c0261e/plans.jsonl \
        src/grasp/data/plans/bio.jsonl --prompt-hash 7ae3cb7c3de91d4c
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def ship(workspace_file: Path, shipped_file: Path, prompt_hash: str) -> int:
    """Append the new records; returns how many were added."""
    have = {json.loads(line)["key"] for line in shipped_file.read_text(encoding="utf-8").splitlines() if line.strip()}
    new = []
    for line in workspace_file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("prompt_hash") == prompt_hash and record["key"] not in have:
            new.append(json.dumps(record, sort_keys=True))
            have.add(record["key"])
    if new:
        with open(shipped_file, "a", encoding="utf-8") as out:
            out.write("\n".join(new) + "\n")
    return len(new)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace_file", type=Path)
    parser.add_argument("shipped_file", type=Path)
    parser.add_argument("--prompt-hash", required=True, help="keep only the records made with this prompt")
    args = parser.parse_args()
    print(f"added {ship(args.workspace_file, args.shipped_file, args.prompt_hash)} plan(s) to {args.shipped_file}")


if __name__ == "__main__":
    main()
