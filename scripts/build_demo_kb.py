"""Build the bundled demo knowledge base: the Python section of the Debian `pkg` graph.

    python scripts/build_demo_kb.py ../shared/data/skb/pkg src/grasp/data/demo

Keeps every package in section `python` with its maintainers, section, tags and source
packages, and the dependency edges among those packages; keeps the pkg queries whose gold
answers all lie in the slice (their gold sets stay complete: a gold set is every package that
meets the constraints, so restricting the graph cannot add answers). Node ids are renumbered.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from grasp.results import Query
from grasp.skb import SKB, read_queries, read_skb, write_skb

README = (Path(__file__).parent / "demo_kb_README.md").read_text()
SECTION = "python"
MAX_QUERIES = 60


def build(src: Path, dest: Path) -> None:
    skb = read_skb(src)
    pkg_type = skb.type_id("package")
    is_pkg = skb.node_type == pkg_type
    keep_pkg = np.array([is_pkg[i] and skb.fields[i].get("section") == SECTION for i in range(skb.num_nodes)])
    keep = keep_pkg.copy()
    # non-package neighbours (maintainer, section, tag, source) of kept packages
    s, d = skb.edge_src, skb.edge_dst
    attach = keep_pkg[s] & ~is_pkg[d]
    keep[d[attach]] = True
    edge_keep = keep[s] & keep[d]
    old_ids = np.flatnonzero(keep)
    new_of = -np.ones(skb.num_nodes, dtype=np.int64)
    new_of[old_ids] = np.arange(old_ids.size)
    schema = skb.schema.model_copy(update={
        "name": "demo-pkg-python",
        "description": "Demo slice of the Debian 12 'bookworm' package graph: section python, with maintainers, "
                       "sections, tags, sources and the dependencies among these packages.",
        "prompt_profile": "pkg",  # the planner uses pkg's guidance and worked examples
    })
    sub = SKB(
        schema, skb.node_type[old_ids], [skb.names[i] for i in old_ids], [skb.fields[i] for i in old_ids],
        new_of[s[edge_keep]].astype(np.int32), skb.edge_rel[edge_keep], new_of[d[edge_keep]].astype(np.int32),
    )
    queries = []
    for q in read_queries(src / "qa" / "queries.jsonl"):
        if q.answer_ids and all(keep_pkg[a] for a in q.answer_ids):
            queries.append(Query(q.qid, q.text, [int(new_of[a]) for a in q.answer_ids], q.split, q.template))
    queries = queries[:MAX_QUERIES]
    write_skb(sub, dest, compress=True, queries=queries)
    (dest / "README.md").write_text(README)
    print(f"{sub!r}, {len(queries)} queries -> {dest}")


if __name__ == "__main__":
    build(Path(sys.argv[1]), Path(sys.argv[2]))
