"""A knowledge base with many relations, made from an open-format one by splitting a node type on one of its fields:
each value of the field becomes a node type of its own, and each relation into the split type one relation per new
type. From the demo KB (tags split by their debtags facet) it makes 35 node types and 37 relations (from 5 and 7), a
width at which schema linking (`planner.schema_link`) is meant to matter.

    python bench/wide_kb.py --skb src/grasp/data/demo --type tag --field facet --out /tmp/wide-demo
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
from collections import Counter
from pathlib import Path


def _open(folder: Path, name: str):
    path = folder / name
    return gzip.open(f"{path}.gz", "rt", encoding="utf-8") if not path.exists() else open(path, encoding="utf-8")


def slug(value: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", value.lower()).strip("_") or "other"


def widen(src: Path, out: Path, node_type: str, field: str, min_nodes: int = 1) -> dict:
    schema = json.loads((src / "schema.json").read_text(encoding="utf-8"))
    if node_type not in schema["node_types"]:
        raise SystemExit(f"{src}/schema.json has no node type {node_type!r}")
    nodes, type_of, values = [], {}, Counter()
    with _open(src, "nodes.jsonl") as f:
        for line in f:
            node = json.loads(line)
            if node["type"] == node_type:
                values[slug(str(node["fields"].get(field, "")))] += 1
            nodes.append(node)
    kept = {v for v, n in values.items() if n >= min_nodes}
    for node in nodes:
        if node["type"] == node_type:
            value = slug(str(node["fields"].get(field, "")))
            node["type"] = f"{node_type}_{value}" if value in kept else node_type
        type_of[node["id"]] = node["type"]
    spec = schema["node_types"].pop(node_type)
    new_types = sorted({t for t in type_of.values() if t.startswith(f"{node_type}_")} | (
        {node_type} if node_type in type_of.values() else set()))
    for t in new_types:
        schema["node_types"][t] = spec
    relations = []
    for rel in schema["relations"]:
        if node_type not in (rel["source"], rel["target"]):
            relations.append(rel)
            continue
        for t in new_types:
            suffix = t[len(node_type) + 1:] or "other"
            relations.append({**rel, "name": f"{rel['name']}_{suffix}",
                              "source": t if rel["source"] == node_type else rel["source"],
                              "target": t if rel["target"] == node_type else rel["target"],
                              "description": f"{rel.get('description', '')} ({field} {suffix})".strip()})
    schema["relations"] = relations
    schema["name"] = f"{schema['name']}-wide"
    schema["candidate_types"] = [t for c in schema["candidate_types"] for t in (new_types if c == node_type else [c])]
    names = {r["name"] for r in relations}
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "schema.json").write_text(json.dumps(schema, indent=1, ensure_ascii=False), encoding="utf-8")
    with open(tmp / "nodes.jsonl", "w", encoding="utf-8") as f:
        for node in nodes:
            f.write(json.dumps(node, ensure_ascii=False) + "\n")
    n_edges = 0
    with _open(src, "edges.tsv") as f, open(tmp / "edges.tsv", "w", encoding="utf-8") as g:
        g.write(next(f))
        for line in f:
            s, r, t = line.rstrip("\n").split("\t")
            ends = (type_of[int(s)], type_of[int(t)])
            split = [e for e in ends if e == node_type or e.startswith(f"{node_type}_")]
            name = f"{r}_{split[0][len(node_type) + 1:] or 'other'}" if split else r
            if name not in names:
                raise SystemExit(f"no relation {name} for edge {line.strip()} (types {ends})")
            g.write(f"{s}\t{name}\t{t}\n")
            n_edges += 1
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return {"out": str(out), "node_types": len(schema["node_types"]), "relations": len(relations), "edges": n_edges}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skb", required=True, type=Path)
    ap.add_argument("--type", required=True)
    ap.add_argument("--field", required=True)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    print(json.dumps(widen(args.skb, args.out, args.type, args.field)))


if __name__ == "__main__":
    main()
