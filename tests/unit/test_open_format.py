"""Open SKB format v1: reading, writing, and one clear error for every kind of bad file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from grasp.errors import FormatError
from grasp.skb import load_skb, read_skb, write_skb
from tests.conftest import EDGES, NODES, QUERIES, SCHEMA, write_toy


def test_reads_plain_and_gzip_identically(tmp_path):
    plain = read_skb(write_toy(tmp_path / "plain"))
    gz = read_skb(write_toy(tmp_path / "gz", gzip=True))
    assert plain.num_nodes == gz.num_nodes == len(NODES)
    assert plain.num_edges == gz.num_edges == len(EDGES)
    assert plain.names == gz.names
    assert plain.fields[0]["aliases"] == ["beta3GalT6", "EDSSPD2"]
    assert plain.type_of(6) == "chromosome"


def test_candidates_and_types(toy_skb):
    assert toy_skb.candidate_ids.tolist() == [0, 1, 2, 3, 4, 5, 8]
    assert toy_skb.type_counts() == {"gene": 4, "process": 3, "chromosome": 2}
    assert toy_skb.relation_counts()["involved_in"] == 4


def test_adjacency_is_undirected(toy_skb):
    # stored gene -> chromosome, traversed both ways
    assert toy_skb.neighbors(7, "on_chromosome").tolist() == [1, 2, 8]
    assert toy_skb.neighbors(1).tolist() == [4, 7]
    assert toy_skb.neighbors_by_relation(4) == {"involved_in": [1, 8], "is_a": [5]}
    degree = toy_skb.adjacency.degree()
    assert degree.sum() == 2 * len(EDGES)


def test_node_order_in_file_does_not_matter(tmp_path):
    skb = read_skb(write_toy(tmp_path / "shuffled", nodes=list(reversed(NODES))))
    assert skb.names == [n["name"] for n in NODES]


def test_write_then_read_round_trip(tmp_path, toy_skb):
    from grasp.skb import read_queries

    out = write_skb(toy_skb, tmp_path / "copy", queries=read_queries(tmp_path / "toy" / "qa" / "queries.jsonl")
                    if (tmp_path / "toy").exists() else None)
    again = read_skb(out)
    assert again.names == toy_skb.names
    assert again.fields == toy_skb.fields
    assert np.array_equal(again.edge_src, toy_skb.edge_src)
    assert (out / "nodes.jsonl.gz").exists() and (out / "edges.tsv.gz").exists()


def test_load_skb_rejects_unknown_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FormatError, match="neither an open-format SKB"):
        load_skb(tmp_path / "empty")


def _node(**over):
    base = dict(NODES[0])
    base.update(over)
    return base


BAD_CASES = {
    "duplicate id": (dict(nodes=NODES + [_node(id=3)]), "nodes.jsonl:10: field 'id': duplicate node id 3 (first on line 4)"),
    "non-dense ids": (dict(nodes=NODES[:-1] + [_node(id=12)]), "nodes.jsonl: field 'id': node ids must be dense 0..N-1"),
    "unknown node type": (dict(nodes=NODES[:2] + [_node(id=2, type="protein")] + NODES[3:]), "nodes.jsonl:3: field 'type': unknown node type 'protein'"),
    "empty name": (dict(nodes=[_node(name="  ")] + NODES[1:]), "nodes.jsonl:1: field 'name': missing or empty name"),
    "malformed JSON line": (dict(nodes=NODES[:4] + ['{"id": 4, "type": "process",'] + NODES[5:]), "nodes.jsonl:5: malformed JSON"),
    "bad field value": (dict(nodes=[_node(fields={"full_name": 3})] + NODES[1:]), "nodes.jsonl:1: field 'fields.full_name': values must be strings"),
    "unknown relation": (dict(edges=EDGES + [(0, "regulates", 3)]), "edges.tsv:11: field 'relation': unknown relation 'regulates'"),
    "edge to missing node": (dict(edges=EDGES + [(0, "involved_in", 99)]), "edges.tsv:11: field 'target': edge to a missing node 99"),
    "edge contradicts schema": (dict(edges=EDGES[:3] + [(3, "involved_in", 2)] + EDGES[4:]),
                                "edges.tsv:5: field 'relation': relation 'involved_in' links gene -> process, but this edge links process -> gene"),
    "malformed TSV line": (dict(edges=EDGES + ["0\tinvolved_in"]), "edges.tsv:11: expected 3 tab-separated columns, got 2"),
    "non-integer id in TSV": (dict(edges=EDGES + ["x\tinvolved_in\t3"]), "edges.tsv:11: field 'source': node id must be an integer"),
    "duplicate relation name": (dict(schema={**SCHEMA, "relations": SCHEMA["relations"] + [{"name": "is_a", "source": "gene", "target": "gene"}]}),
                                "schema.json: field 'relations[3].name': relation 'is_a' is declared twice"),
    "relation to unknown type": (dict(schema={**SCHEMA, "relations": [{"name": "r", "source": "gene", "target": "drug"}]}),
                                 "target type 'drug' is not in node_types"),
    "candidate type unknown": (dict(schema={**SCHEMA, "candidate_types": ["drug"]}), "candidate type 'drug' is not in node_types"),
}


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_files_name_the_place(tmp_path, case, gzip):
    kwargs, expected = BAD_CASES[case]
    directory = write_toy(tmp_path / "bad", gzip=gzip, **kwargs)
    with pytest.raises(FormatError) as info:
        read_skb(directory)
    message = str(info.value)
    expected = expected.replace("nodes.jsonl", "nodes.jsonl.gz" if gzip else "nodes.jsonl").replace(
        "edges.tsv", "edges.tsv.gz" if gzip else "edges.tsv")
    assert expected in message
    assert "\n" not in message


def test_bad_header_and_bad_schema_json(tmp_path):
    d = write_toy(tmp_path / "h")
    (d / "edges.tsv").write_text("src\trel\tdst\n0\tinvolved_in\t3\n")
    with pytest.raises(FormatError, match=r"edges.tsv:1: first line must be the header"):
        read_skb(d)
    d = write_toy(tmp_path / "s")
    (d / "schema.json").write_text('{"name": "x",\n "node_types": }')
    with pytest.raises(FormatError, match=r"schema.json:2: malformed JSON"):
        read_skb(d)


def test_missing_files(tmp_path):
    d = write_toy(tmp_path / "m")
    (d / "edges.tsv").unlink()
    with pytest.raises(FormatError, match="edges.tsv\\(.gz\\) not found"):
        read_skb(d)


def test_bad_queries_file(tmp_path):
    from grasp.skb import read_queries

    d = write_toy(tmp_path / "q", queries=QUERIES + [{"id": 9, "query": "x", "answer_ids": ["a"]}])
    with pytest.raises(FormatError, match=r"queries.jsonl:5: field 'answer_ids'"):
        read_queries(d / "qa" / "queries.jsonl")
    (d / "qa" / "queries.jsonl").write_text(json.dumps(QUERIES[0]) + "\n" + json.dumps(QUERIES[0]) + "\n")
    with pytest.raises(FormatError, match=r":2: field 'id': duplicate query id 0"):
        read_queries(d / "qa" / "queries.jsonl")


def test_writer_is_atomic(tmp_path, toy_skb, monkeypatch):
    """A write that fails midway leaves neither a half directory nor a damaged old one."""
    out = write_skb(toy_skb, tmp_path / "out")
    before = sorted(p.name for p in out.iterdir())

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr("grasp.skb.queries.write_queries", boom)
    from grasp.results import Query

    with pytest.raises(RuntimeError):
        write_skb(toy_skb, out, queries=[Query("1", "x")])
    assert sorted(p.name for p in out.iterdir()) == before
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    assert read_skb(out).num_nodes == toy_skb.num_nodes


def _bytes_of(path) -> bytes:
    return path.read_bytes()


@pytest.mark.parametrize("name", ["nodes.jsonl.gz", "edges.tsv.gz"])
def test_truncated_gzip_is_named_not_an_abort(tmp_path, name):
    """A cut-off download: one error naming the file, not click's 'aborted' (an EOFError) or a zlib traceback."""
    toy = write_toy(tmp_path / "toy", gzip=True)
    path = toy / name
    data = _bytes_of(path)
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(FormatError, match=rf"{name}:\d+: damaged or truncated gzip file"):
        read_skb(toy)


def test_damaged_gzip_stream_is_named(tmp_path):
    toy = write_toy(tmp_path / "toy", gzip=True)
    path = toy / "nodes.jsonl.gz"
    data = bytearray(_bytes_of(path))
    data[20:40] = b"\xff" * 20
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError, match=r"nodes.jsonl.gz:\d+: damaged or truncated gzip file"):
        read_skb(toy)


@pytest.mark.parametrize("gzip", [False, True], ids=["plain", "gzip"])
def test_invalid_utf8_names_the_line(tmp_path, gzip):
    nodes = [json.dumps(n) for n in NODES]
    toy = write_toy(tmp_path / "toy", nodes=nodes, gzip=gzip)
    import gzip as gz

    name = "nodes.jsonl.gz" if gzip else "nodes.jsonl"
    lines = (nodes[:2] + [nodes[2].replace("KCNQ2", "KCNQ\udcff")] + nodes[3:])
    raw = "\n".join(lines).encode("utf-8", "surrogateescape") + b"\n"
    (toy / name).write_bytes(gz.compress(raw) if gzip else raw)
    with pytest.raises(FormatError, match=rf"{name}:3: not UTF-8 text \(byte 0xff"):
        read_skb(toy)


def test_invalid_utf8_in_queries_and_schema(tmp_path):
    from grasp.skb import read_queries

    toy = write_toy(tmp_path / "toy")
    q = toy / "qa" / "queries.jsonl"
    q.write_bytes(b'{"id": 1, "query": "ok", "answer_ids": [0]}\n{"id": 2, "query": "caf\xe9", "answer_ids": [0]}\n')
    with pytest.raises(FormatError, match=r"queries.jsonl:2: not UTF-8 text \(byte 0xe9 at column 24\)"):
        read_queries(q)
    (toy / "schema.json").write_bytes((toy / "schema.json").read_bytes() + b"\xff")
    with pytest.raises(FormatError, match=r"schema.json: not UTF-8 text"):
        read_skb(toy)


@pytest.mark.parametrize("text, problem", [
    ("a\u0000b", "NUL character"),
    ("x" * 2001, "2001 characters long; the limit is 2000"),
    ("a \ud800 b", "not valid UTF-8 text"),        # a lone surrogate (a JSON escape can carry one)
    ("   ", "query is empty"),
])
def test_queries_file_refuses_what_search_refuses(tmp_path, text, problem):
    """One validator for every entry point: a query `grasp search` refuses is refused in a queries file too,
    naming the line."""
    from grasp.skb import read_queries

    q = tmp_path / "queries.jsonl"
    q.write_text('{"id": 1, "query": "fine", "answer_ids": [0]}\n'
                 + json.dumps({"id": 2, "query": text, "answer_ids": [0]}) + "\n", encoding="utf-8")
    with pytest.raises(FormatError, match=rf"queries.jsonl:2: field 'query': .*{problem}"):
        read_queries(q)
