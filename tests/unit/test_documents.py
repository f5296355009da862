"""Document layouts, the name text and the reranker serialization."""

from __future__ import annotations

from grasp.skb.documents import get_layout, name_text, render_value, serialize_candidate, truncate_words
from tests.conftest import write_toy


def test_generic_layout(toy_skb):
    doc = get_layout("generic").document(toy_skb, 0)
    assert doc == ("name: B3GALT6\ntype: gene\nfull name: beta-1,3-galactosyltransferase 6\n"
                   "aliases: beta3GalT6, EDSSPD2")
    assert get_layout("generic").document(toy_skb, 6) == "name: chromosome 1\ntype: chromosome"
    assert name_text(toy_skb, 3) == "glycosaminoglycan biosynthesis"


def test_layout_keys_differ():
    keys = {get_layout(n).key for n in ("generic", "stark-amazon", "stark-mag", "stark-prime")}
    assert len(keys) == 4


def test_render_value():
    assert render_value(["a", "", "b"]) == "a, b"
    assert render_value({"x": 1, "y": None, "z": ["p", "q"]}) == "x: 1; z: p, q"
    assert render_value(float("nan")) == ""


def test_serialization_groups_neighbours_by_relation(toy_skb):
    text = serialize_candidate(toy_skb, 4)
    assert text.splitlines() == [
        "type: process",
        "name: sodium ion transport",
        "definition: The directed movement of sodium ions into, out of or within a cell.",
        "[INVOLVED IN] SCN1A; SCN2A",
        "[IS A] ion transport",
    ]


def test_serialization_caps_neighbours_and_truncates_fields(tmp_path):
    from tests.conftest import EDGES, NODES, SCHEMA

    nodes = list(NODES) + [
        {"id": 9 + i, "type": "gene", "name": f"G{i:02d}", "fields": {"full_name": "word " * 50}} for i in range(12)
    ]
    edges = list(EDGES) + [(9 + i, "on_chromosome", 6) for i in range(12)]
    from grasp.skb import read_skb

    skb = read_skb(write_toy(tmp_path / "big", nodes=nodes, edges=edges, schema=SCHEMA))
    text = serialize_candidate(skb, 6, max_neighbors_per_relation=10)
    line = [x for x in text.splitlines() if x.startswith("[ON CHROMOSOME]")][0]
    assert line.count(";") == 9 and line.endswith("(+3 more)")
    gene = serialize_candidate(skb, 9, max_field_tokens=5)
    assert "full name: word word word word word ..." in gene
    assert truncate_words("a b c", 5) == "a b c"
