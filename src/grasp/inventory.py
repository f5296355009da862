"""What a workspace holds, for `grasp info`: its trained artifacts (own or shipped) with their manifests,
and its indexes with the checksums recorded when they were built (recomputed on request)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from grasp.artifacts import ARTIFACT_LABELS, read_manifest
from grasp.errors import FormatError
from grasp.storage import checksum
from grasp.workspace import Workspace


@dataclass
class Entry:
    """One artifact or index: what it is, where, its recorded checksum and (when verified) whether it holds."""

    label: str
    path: Path
    detail: str
    sha256: str | None        # recorded when built; None for what was built before checksums were recorded
    verified: bool | None = None  # None: not recomputed

    def line(self) -> str:
        recorded = f"sha256 {self.sha256[:12]}" if self.sha256 else "sha256 not recorded (built before grasp recorded it)"
        state = {None: "", True: "  ok", False: "  CHANGED since it was built"}[self.verified]
        return f"  {self.label:<34} {self.detail}  {recorded}{state}"


def artifacts(ws: Workspace, *, verify: bool = False) -> list[Entry]:
    """Each trained artifact this workspace would load, with what its manifest says."""
    out = []
    for name, label in ARTIFACT_LABELS.items():
        path = ws.artifact(name)
        if path is None:
            continue
        where = "own" if path == ws.artifact_path(name) else "shipped"
        try:
            manifest = read_manifest(path)
        except FormatError as e:
            out.append(Entry(label, path, f"{where}; unreadable manifest ({e})", None))
            continue
        if manifest is None:
            out.append(Entry(label, path, f"{where}; no manifest", None))
            continue
        data = ", ".join(f"{split} {n}" for split, n in manifest.data.items())
        detail = (f"{where}; made on {manifest.skb.get('name')} {manifest.skb.get('fingerprint')} ({data}) "
                  f"by {manifest.code}")
        out.append(Entry(label, path, detail, manifest.sha256, checksum(path) == manifest.sha256 if verify else None))
    return out


def indexes(cache_dir: Path, *, verify: bool = False) -> list[Entry]:
    """The indexes under a workspace's cache folder: embedding matrices, BM25 indexes, graph databases, and the
    Milvus collections loaded from them (recorded beside them)."""
    out = []
    for record in sorted(cache_dir.rglob("*.json")):
        rel = record.relative_to(cache_dir)
        if ".partial" in record.parent.name or record.name.startswith("."):
            continue
        try:
            meta = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(meta, dict):
            continue
        if record.name == "complete.json" and "bm25" in meta:
            target, label = record.parent, f"bm25 {rel.parent}"
            detail, recorded = f"BM25 arrays over {meta.get('layout')}", meta.get("sha256")
            recompute = partial(checksum, target, exclude=frozenset({"complete.json"}))
        elif record.name == "complete.json" and "labels" in meta:
            target, label = record.parent / "db", f"graph {rel.parent}"
            detail, recorded = "graph database files", meta.get("db_sha256")
            recompute = partial(checksum, target)
        elif "collection" in meta and "uri" in meta:
            from grasp.encode.milvus import verify_record

            target, label = record, f"milvus {meta['collection']}"
            detail = f"{meta.get('rows')} vectors in {meta['uri']} ({meta.get('index_type')})"
            recorded, recompute = meta.get("sha256"), lambda meta=meta: meta.get("sha256") if verify_record(meta) else ""
        elif "shape" in meta and record.with_suffix(".npy").exists():
            target = record.with_suffix(".npy")
            label = f"vectors {rel.with_suffix('')}"
            detail = f"{tuple(meta['shape'])} {meta.get('dtype', '')} {meta.get('model', '')}".rstrip()
            recorded, recompute = meta.get("sha256"), partial(checksum, target)
        else:
            continue
        verified = recompute() == recorded if verify and recorded else None
        out.append(Entry(label, target, detail, recorded, verified))
    return out
