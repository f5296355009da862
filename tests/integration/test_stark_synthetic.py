"""A tiny STaRK-format SKB with hostile names, written by the synthetic generator and read back through the
STaRK reader (the code a real download goes through), then answered by every method on Kùzu and in memory."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from grasp.cli import main
from grasp.skb import load_queries, read_stark_skb
from grasp.testing.stark_synthetic import generate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def prime(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic") / "prime"
    summary = generate("prime", out, scale=0.0012, seed=3, n_queries=24, words=12, hostile=0.3, progress=False)
    return out, summary


def test_reader_reads_what_the_generator_wrote(prime):
    out, summary = prime
    skb = read_stark_skb(out / "processed")
    assert skb.meta["stark_dataset"] == "prime" and skb.num_nodes == summary["nodes"]
    with open(out / "processed" / "node_info.pkl", "rb") as f:
        info = pickle.load(f)  # noqa: S301 - written by this test
    assert skb.names == [info[i]["name"] for i in range(skb.num_nodes)]
    hostile = "\n".join(skb.names)
    for piece in ('"', "\\", "\t", "\r\n", "東京", ","):
        assert piece in hostile, piece
    assert skb.num_edges * 2 == summary["edge_rows"] - _self_and_duplicate_rows(out)  # both directions stored, kept once
    assert "processed" not in skb.schema.description  # the prompt (and so the plans' cache keys) never holds a path


def _self_and_duplicate_rows(out) -> int:
    import torch

    ei = torch.load(out / "processed" / "edge_index.pt", weights_only=True).numpy()
    et = torch.load(out / "processed" / "edge_types.pt", weights_only=True).numpy()
    rows = np.stack([et, np.minimum(ei[0], ei[1]), np.maximum(ei[0], ei[1])], axis=1)
    return int(ei.shape[1] - 2 * np.unique(rows, axis=0).shape[0])


def test_gold_is_what_the_graph_says(prime):
    """Every intersection query's gold is exactly the answer-type nodes linked to both named nodes, as the
    reader's graph has them; every text query's phrase is in its one gold node's text and nowhere else."""
    out, _ = prime
    skb = read_stark_skb(out / "processed")
    queries = load_queries(out / "qa")
    assert {q.split for q in queries} == {"train", "val", "test"}
    plans = [json.loads(line) for line in (out / "plans.jsonl").read_text(encoding="utf-8").splitlines()]
    by_name = {n: i for i, n in enumerate(skb.names)}
    n_text = 0
    for q, p in zip(queries, plans, strict=True):
        assert q.text == p["query"]
        target = p["plan"]["target"]["labels"][0]
        sets = []
        for a, h in zip(p["plan"]["anchors"], p["plan"]["hops"], strict=True):
            nb = skb.neighbors(by_name[a["text"]], h["rel"])
            sets.append({int(x) for x in nb if skb.type_of(int(x)) == target})
        if p["plan"]["target"]["relevance_text"]:
            n_text += 1
            phrase = p["plan"]["target"]["relevance_text"]
            holders = [i for i in range(skb.num_nodes) if phrase in json.dumps(skb.fields[i], ensure_ascii=False)]
            assert holders == q.answer_ids and q.answer_ids[0] in sets[0]
        else:
            assert sorted(set.intersection(*sets) - {by_name[a["text"]] for a in p["plan"]["anchors"]}) == q.answer_ids
    assert 0 < n_text < len(queries)


def _cli(prime, cache, engine: str) -> tuple[list[str], list[str]]:
    out, _ = prime
    return (["-q", "--cache-dir", str(cache), "--set", f"graph.engine={engine}", "--set", "planner.kind=cache"],
            ["--skb", str(out / "processed")])


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def test_every_method_answers_on_kuzu(prime, cache, tmp_path, capsys):
    out, _ = prime
    base, skb = _cli(prime, cache, "kuzu")
    main([*base, "plans", "import", str(out / "plans.jsonl"), *skb])
    assert "imported 24 plans" in capsys.readouterr().out
    main([*base, "tune", "fusion", *skb, "--split", "val"])
    main([*base, "tune", "rerank", *skb, "--zero-shot", "--split", "val"])
    reports = {}
    for method in ("bm25", "dense", "mfar", "graph", "fused", "grasp-zs"):
        path = tmp_path / f"{method}.json"
        main([*base, "eval", *skb, "--method", method, "--split", "test", "--output-json", str(path)])
        reports[method] = json.loads(path.read_text())
        assert reports[method]["n"] == 5, method
    # the plans name their anchors exactly, so linking binds them and the graph reaches every gold answer of
    # the intersection queries (all of the test split's but its text query)
    plans = [json.loads(line) for line in (out / "plans.jsonl").read_text(encoding="utf-8").splitlines()][19:]
    per_query = {r["qid"]: r for r in reports["graph"]["per_query"]}
    for qid, p in zip(range(19, 24), plans, strict=True):
        if not p["plan"]["target"]["relevance_text"]:
            assert per_query[str(qid)]["recall@20"] == 1.0, (qid, p["query"])
    assert reports["graph"]["recall@20"] >= 0.8


def test_memory_engine_ranks_as_kuzu(prime, cache, tmp_path):
    """Every method that reads the graph ranks alike on both engines (after the Kùzu test: its settings are reused)."""
    out, _ = prime
    base, skb = _cli(prime, cache, "kuzu")
    main([*base, "plans", "import", str(out / "plans.jsonl"), *skb])  # a no-op after the Kùzu test's import
    if not (cache / "skb").exists() or not list((cache / "skb").glob("*/rerank-fusion-zero-shot.json")):
        main([*base, "tune", "fusion", *skb, "--split", "val"])
        main([*base, "tune", "rerank", *skb, "--zero-shot", "--split", "val"])
    for method in ("graph", "fused", "grasp-zs"):
        runs = {}
        for engine in ("kuzu", "memory"):
            base, skb = _cli(prime, cache, engine)
            path = tmp_path / f"{method}-{engine}.run"
            main([*base, "eval", *skb, "--method", method, "--split", "test", "--run-file", str(path)])
            runs[engine] = path.read_text()
        assert runs["memory"] == runs["kuzu"] and runs["kuzu"].count("\n") > 5, method


@pytest.mark.parametrize("dataset", ["amazon", "mag"])
def test_amazon_and_mag_read_with_their_layouts(dataset, tmp_path):
    """Amazon's reviews and Q&A, MAG's abstracts and venues (without type dictionaries, as STaRK ships MAG) reach
    the documents through STaRK's own layouts; hostile names survive the Kùzu bulk load."""
    from grasp.graph.backends import KuzuBackend
    from grasp.skb.documents import layout_for

    out = tmp_path / dataset
    generate(dataset, out, scale=0.0005, seed=1, n_queries=12, words=30, hostile=0.3, progress=False)
    assert (out / "processed" / "node_type_dict.pkl").exists() == (dataset == "amazon")
    skb = read_stark_skb(out / "processed")
    doc = layout_for(skb).document(skb, int(skb.candidate_ids[0]))
    for piece in {"amazon": ("- reviews:", "- Q&A:", "- features:"), "mag": (" - abstract:", " - publication date:")}[dataset]:
        assert piece in doc, (piece, doc[:300])
    kuzu = KuzuBackend(skb, tmp_path / "kuzu", buffer_pool_mb=64, progress=False)
    rows = kuzu._conn.execute(f"MATCH (n:{kuzu.names.label[skb.schema.candidate_types[0]]}) RETURN n.id, n.name")
    stored = dict(rows.get_all())
    assert stored and all(skb.names[i] == name for i, name in stored.items())
    assert any("\n" in n or '"' in n for n in stored.values())
    kuzu.close()


def test_one_candidate_type_reuses_stage1_vectors_without_a_copy(tmp_path, monkeypatch):
    """Amazon's candidates are one type: mFAR's name and single fields are views of Stage 1's memory-mapped
    matrices, equal to what the general path gathers row by row."""
    from grasp.encode.node_vectors import NodeVectors
    from grasp.skb.documents import layout_for
    from grasp.text.mfar.fields_index import FieldIndex
    from tests.integration.test_encode import HashEncoder

    out = tmp_path / "amazon"
    generate("amazon", out, scale=0.0005, seed=2, n_queries=12, words=30, hostile=0.3, progress=False)
    skb = read_stark_skb(out / "processed")
    layout, enc = layout_for(skb), HashEncoder(dim=24)
    vectors = NodeVectors(skb, enc, layout, tmp_path / "nv", progress=False)
    views = FieldIndex(skb, layout, enc, tmp_path / "a", node_vectors=vectors, progress=False)
    monkeypatch.setattr(skb.schema, "candidate_types", [*skb.schema.candidate_types, "brand"])  # the general path
    gathered = FieldIndex.__new__(FieldIndex)
    gathered.skb, gathered.encoder, gathered.node_ids = skb, enc, views.node_ids
    gathered.row_of = views.row_of
    names = [s.name for s in views.specs]
    for name, mode in (("title", "name"), ("single", "doc")):
        f = names.index(name)
        assert isinstance(views.dense[f], np.memmap) and views.dense[f].shape[0] == views.dense_rows[f].size > 100
        copy = FieldIndex._from_node_vectors(gathered, vectors, mode, views.dense_rows[f])
        assert not isinstance(copy, np.memmap) and np.array_equal(np.asarray(views.dense[f]), copy)
