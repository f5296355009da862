"""The Python API on a prepared toy SKB: ranked hits with stage ranks, explanations, shapes."""

from __future__ import annotations

import pytest

from grasp import methods
from grasp.api import MAX_QUERY_CHARS, Searcher, results_to_dataframe, results_to_run
from grasp.errors import InputError

pytestmark = pytest.mark.slow


def test_auto_picks_the_most_complete_prepared_method(prepared_toy):
    searcher, _ = prepared_toy
    assert searcher.method == "grasp-zs"
    ready = methods.readiness(searcher.workspace)
    assert ready["fused"] is None and ready["grasp"] and "grasp train reranker" in ready["grasp"]


def test_search_explains_every_stage(prepared_toy):
    searcher, _ = prepared_toy
    res = searcher.search("sodium channel genes on chromosome 2", k=3)
    assert [h.rank for h in res.hits] == [1, 2, 3]
    assert res.hits[0].name in ("SCN1A", "SCN2A") and res.hits[0].type == "gene"
    ex = res.explain
    assert list(ex["stages"]) == ["graph", "dense", "fused", "reranker", "grasp-zs"]
    graph = ex["stages"]["graph"]
    assert graph["plan"]["anchors"][0]["text"] == "chromosome 2" and graph["n_cand"] == 3
    assert graph["bindings"][0]["bindings"][0]["name"] == "chromosome 2" and 0 < graph["bindings"][0]["bindings"][0]["cosine"] <= 1
    assert "MATCH" in graph["cypher"] and graph["risk_level"] == "normal"
    assert set(ex["stages"]["fused"]) == {"mode", "weights", "rrf_k", "plan_confidence"}
    assert set(ex["stages"]["fused"]["weights"]) == {"graph", "dense"}
    assert ex["stages"]["fused"]["plan_confidence"] is None  # a static fusion reads no plan confidence
    assert set(ex["stages"]["grasp-zs"]["weights"]) == {"reranker", "fused"}
    assert ex["stages"]["dense"] == {}  # a stage without a trace
    rerank = res.traces["reranker"]
    assert rerank.reranker == "bi-encoder" and rerank.stored_vectors is False  # not built by `grasp index`
    assert {"graph", "dense", "fused", "reranker", "graph.plan", "graph.execute", "total"} <= set(ex["timings_ms"])
    top = res.hits[0]
    assert set(top.stage_ranks) == {"graph", "dense", "fused", "reranker", "final"} and top.stage_ranks["final"] == 1
    assert top.stage_ranks["graph"] in (1, 2, 3)  # the graph found both sodium genes on chromosome 2
    assert "full_name" in top.fields


def test_dataframe_trec_and_batch(prepared_toy, tmp_path):
    from grasp.eval import read_run, write_run

    searcher, srv = prepared_toy
    results = searcher.batch_search(["sodium channel genes on chromosome 2", "potassium channel"], k=2, workers=2)
    df = results_to_dataframe(results)
    assert list(df.columns) == ["qid", "query", "docno", "score", "rank", "name", "type"]
    assert len(df) == 4 and df["rank"].tolist() == [0, 1, 0, 1] and df["qid"].tolist() == ["0", "0", "1", "1"]
    write_run(results_to_run(results), tmp_path / "run.trec")
    assert set(read_run(tmp_path / "run.trec")) == {"0", "1"}
    assert results[0].explain == {}  # batch search explains only when asked


@pytest.mark.parametrize("query, problem", [
    ("", "query is empty"), ("   \n", "query is empty"), ("a" * (MAX_QUERY_CHARS + 1), "limit is"),
    ("bad\x00bytes", "NUL"), (b"bytes", "must be a string"), (None, "must be a string"),
])
def test_bad_queries_are_refused_clearly(prepared_toy, query, problem):
    searcher, _ = prepared_toy
    with pytest.raises(InputError, match=problem):
        searcher.search(query)


@pytest.mark.parametrize("k", [0, 101, -1, 2.5, True, "10"])
def test_bad_k_is_refused(prepared_toy, k):
    searcher, _ = prepared_toy
    with pytest.raises(InputError, match="k must be an integer"):
        searcher.search("sodium", k=k)


def test_other_scripts_are_answered(prepared_toy):
    searcher, _ = prepared_toy
    res = searcher.search("钠离子通道基因", k=2)  # Chinese: answered (badly, by this English encoder), not refused
    assert len(res.hits) == 2


def test_unprepared_method_is_named(prepared_toy):
    searcher, _ = prepared_toy
    with pytest.raises(InputError, match="not prepared.*grasp train reranker"):
        Searcher(searcher.workspace, "grasp")
    with pytest.raises(InputError, match="unknown method 'nope'"):
        Searcher(searcher.workspace, "nope")
