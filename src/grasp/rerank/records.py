"""A portable bundle of reranker training data: the records, validation pools and every
candidate's serialized text, in one ``.json.xz`` file.

It lets the LoRA training run on another machine (a GPU box) without the knowledge base, its
indexes or the planner: ``grasp train reranker --export FILE`` writes it, and
``scripts/train_reranker_bundle.py FILE OUT`` trains from it and reports validation metrics of
the reranker alone on the validation pools.
"""

from __future__ import annotations

import json
import lzma
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grasp.errors import FormatError
from grasp.results import Query, Run
from grasp.storage import atomic_file

KIND = "grasp-reranker-bundle"


def validation_pools(upstream: Run, queries: Sequence[Query], depth: int) -> list[dict[str, Any]]:
    """Each validation query's upstream top-``depth`` with its gold ids (for reranker-only metrics)."""
    out = []
    for q in queries:
        r = upstream.get(q.qid)
        if r is not None and len(r):
            out.append({"qid": q.qid, "query": q.text, "pool": r.node_ids[:depth].tolist(), "gold": list(q.answer_ids)})
    return out


def write_bundle(path: Path, records: list[dict], val_pools: list[dict], serialize: Callable[[int], str], *,
                 info: dict[str, Any], max_chars: int = 1500) -> dict[str, int]:
    """Write the bundle atomically; texts are cut at ``max_chars`` (beyond the pair length anyway)."""
    nodes = sorted({n for r in records for n in (*r["positives"], *r["negatives"])} |
                   {n for p in val_pools for n in p["pool"]})
    texts = {str(n): serialize(n)[:max_chars] for n in nodes}
    payload = {"kind": KIND, "info": info, "records": records, "val_pools": val_pools, "texts": texts}
    with atomic_file(Path(path), "wb") as f:
        f.write(lzma.compress(json.dumps(payload, ensure_ascii=False).encode("utf-8"), preset=6))
    return {"records": len(records), "val_pools": len(val_pools), "texts": len(texts)}


def read_bundle(path: Path) -> dict[str, Any]:
    try:
        payload = json.loads(lzma.decompress(Path(path).read_bytes()))
    except (OSError, lzma.LZMAError, json.JSONDecodeError) as e:
        raise FormatError(f"not a readable reranker bundle ({e})", file=path) from None
    if payload.get("kind") != KIND:
        raise FormatError(f"field 'kind' is {payload.get('kind')!r}, expected {KIND!r}", file=path)
    payload["texts"] = {int(k): v for k, v in payload["texts"].items()}
    return payload
