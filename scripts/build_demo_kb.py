"""Build the bundled demo knowledge base: a slice of the Debian `pkg` graph by archive section.

    python scripts/build_demo_kb.py ../shared/data/skb/pkg src/grasp/data/demo

Keeps every package of the chosen sections with its maintainers, sections, tags and source
packages, and the dependency edges among those packages. The sections are Debian's `python`,
then, greedily, whichever section makes the most further pkg *test* queries answerable inside
the slice per package it adds, until ``MIN_TEST_QUERIES`` are. A query is answerable inside the
slice when all its gold answers are in it (their gold sets stay complete: a gold set is every
package that meets the constraints, so restricting the graph cannot add answers) and so is every
node the query names that links to all of its answers (its anchors: a library it depends on, a
package it is suggested by), so a graph walk can reach the answers as it does on pkg.

Only test queries are kept: the demo runs pkg's shipped stages, which were trained on pkg's
train split and tuned on its validation split, so the demo evaluates only queries none of them
saw. Node ids are renumbered.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

from grasp.results import Query
from grasp.skb import SKB, read_queries, read_skb, write_skb

README = (Path(__file__).parent / "demo_kb_README.md").read_text()
FIRST_SECTION = "python"
MIN_TEST_QUERIES = 60
SPLIT = "test"


def named_anchors(skb: SKB, q: Query) -> set[int]:
    """Nodes linked to every gold answer whose name the query spells out (case-insensitive, whole words)."""
    common = None
    for a in q.answer_ids:
        nbr = set(skb.neighbors(a).tolist())
        common = nbr if common is None else common & nbr
    text = q.text.lower()
    return {n for n in common or () if skb.names[n]
            and re.search(rf"(?<![\w-]){re.escape(skb.names[n].lower())}(?![\w-])", text)}


def needed_sections(skb: SKB, q: Query, section_of: dict[int, str]) -> frozenset[str]:
    """The sections that must be in the slice for ``q`` to be answerable there (non-package anchors come
    with the packages that link to them)."""
    nodes = set(q.answer_ids) | named_anchors(skb, q)
    return frozenset(section_of[n] for n in nodes if n in section_of)


def choose_sections(need: list[frozenset[str]], size: dict[str, int]) -> list[str]:
    """``FIRST_SECTION``, then greedily the section that makes the most further queries answerable per
    package it adds, until ``MIN_TEST_QUERIES`` are (or no section adds one)."""

    def answerable(sections: set[str]) -> int:
        return sum(n <= sections for n in need)

    chosen = [FIRST_SECTION]
    while (now := answerable(set(chosen))) < MIN_TEST_QUERIES:
        gains = {s: (answerable({*chosen, s}) - now) / size[s] for s in sorted(size) if s not in chosen}
        best = max(gains, key=lambda s: gains[s], default=None)
        if best is None or gains[best] <= 0:
            break
        chosen.append(best)
    return chosen


def build(src: Path, dest: Path) -> None:
    skb = read_skb(src)
    pkg_type = skb.type_id("package")
    is_pkg = skb.node_type == pkg_type
    section_of = {int(i): skb.fields[i].get("section") for i in np.flatnonzero(is_pkg)}
    size: dict[str, int] = {}
    for s in section_of.values():
        size[s] = size.get(s, 0) + 1
    candidates = [q for q in read_queries(src / "qa" / "queries.jsonl") if q.split == SPLIT and q.answer_ids]
    need = [needed_sections(skb, q, section_of) for q in candidates]
    sections = choose_sections(need, size)
    keep_pkg = np.array([is_pkg[i] and section_of.get(i) in sections for i in range(skb.num_nodes)])
    keep = keep_pkg.copy()
    # non-package neighbours (maintainer, section, tag, source) of kept packages
    s, d = skb.edge_src, skb.edge_dst
    keep[d[keep_pkg[s] & ~is_pkg[d]]] = True
    keep[s[keep_pkg[d] & ~is_pkg[s]]] = True
    edge_keep = keep[s] & keep[d]
    old_ids = np.flatnonzero(keep)
    new_of = -np.ones(skb.num_nodes, dtype=np.int64)
    new_of[old_ids] = np.arange(old_ids.size)
    schema = skb.schema.model_copy(update={
        "name": "demo-pkg",
        "description": "Demo slice of the Debian 12 'bookworm' package graph: the packages of some archive sections "
                       "(python first), with maintainers, sections, tags, sources and the dependencies among them.",
        "prompt_profile": "pkg",  # the planner uses pkg's guidance and worked examples
    })
    sub = SKB(
        schema, skb.node_type[old_ids], [skb.names[i] for i in old_ids], [skb.fields[i] for i in old_ids],
        new_of[s[edge_keep]].astype(np.int32), skb.edge_rel[edge_keep], new_of[d[edge_keep]].astype(np.int32),
    )
    queries = [Query(q.qid, q.text, [int(new_of[a]) for a in q.answer_ids], q.split, q.template)
               for q, n in zip(candidates, need, strict=True) if n <= set(sections)]
    write_skb(sub, dest, compress=True, queries=queries)
    (dest / "README.md").write_text(README.format(
        sections=", ".join(f"`{x}`" for x in sections), n_sections=len(sections), packages=int(keep_pkg.sum()),
        nodes=sub.num_nodes, edges=int(edge_keep.sum()), queries=len(queries), min_queries=MIN_TEST_QUERIES))
    print(f"{sub!r}, sections {sections}, {len(queries)} {SPLIT} queries -> {dest}")


if __name__ == "__main__":
    build(Path(sys.argv[1]), Path(sys.argv[2]))
