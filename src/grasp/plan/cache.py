"""LLM outputs on disk, keyed by (model, prompt hash, query): a rerun costs no LLM call.

A cache is an append-only JSONL file (one record per planned query), so an interrupted run
loses at most the line being written and resumes where it stopped. Read-only caches (e.g. the
plans shipped for bio and pkg) can be layered under the writable one.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from grasp.packaged import SHIPPED_PLANS


def shipped_plans(schema_name: str) -> list[Path]:
    """The plan cache shipped in the package for an SKB of this schema name, if there is one."""
    path = SHIPPED_PLANS / f"{schema_name}.jsonl"
    return [path] if path.exists() else []


def plan_key(model_id: str, prompt_hash: str, query: str, grammar: bool, sample: int = 0,
             feedback: str | None = None) -> str:
    """The cache key of a plan; ``sample`` > 0 names one of the extra plans sampled for execution-guided
    planning (sample 0, the greedy plan, keeps the key it always had); ``feedback``: a plan made again after the
    first one's execution was told to the planner (re-planning)."""
    key = [model_id, prompt_hash, query, grammar] + ([sample] if sample else []) + ([feedback] if feedback else [])
    blob = json.dumps(key, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class PlanCache:
    def __init__(self, writable: Path | None, readonly: list[Path] | tuple[Path, ...] = ()) -> None:
        self.writable = Path(writable) if writable else None
        self._records: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        for path in [*readonly, *([self.writable] if self.writable else [])]:
            self._load(Path(path))

    def _load(self, path: Path) -> None:
        if not path.exists():
            return
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut by an interruption: that query is planned again
                if isinstance(rec, dict) and "key" in rec:
                    self._records[rec["key"]] = rec

    def get(self, key: str) -> dict[str, Any] | None:
        return self._records.get(key)

    def put(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._records[record["key"]] = record
            if self.writable is None:
                return
            self.writable.parent.mkdir(parents=True, exist_ok=True)
            with open(self.writable, "a", encoding="utf-8") as f:
                f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
                f.flush()

    def __len__(self) -> int:
        return len(self._records)
