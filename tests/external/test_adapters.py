"""The adapters, each run through its real library over the demo KB (plans replayed from the shipped cache):
PyTerrier's Experiment agrees with GRASP's own evaluation; LangChain and LlamaIndex return the Searcher's ranking."""

from __future__ import annotations

import pytest

from grasp.api import Searcher
from grasp.config import load_config
from grasp.eval.evaluate import evaluate_run
from grasp.skb import read_queries
from tests.conftest import DEMO_SKB, skip_unless_ci

pytestmark = pytest.mark.slow

CONFIG = ["planner.kind=cache", "planner.on_miss=no_trade"]


def require(module: str) -> None:
    """The adapter's library, installed with the dev extra: a skip on a machine without it, a failure under CI."""
    import importlib

    try:
        importlib.import_module(module)
    except ImportError:
        skip_unless_ci(f"{module} is not installed (pip install -e '.[dev]')")


@pytest.fixture(scope="module")
def searchers():
    """Over the demo's indexes in the session's cache (built once, shared with the other demo tests)."""
    config = load_config(None, CONFIG)
    return {m: Searcher.open(DEMO_SKB, method=m, config=config) for m in ("bm25", "fused")}


@pytest.fixture(scope="module")
def queries():
    return read_queries(DEMO_SKB / "qa" / "queries.jsonl")[:12]


def test_pyterrier_experiment_agrees_with_grasps_own_evaluation(searchers, queries):
    require("pyterrier")
    import pyterrier as pt
    from ir_measures import RR, P

    from grasp.adapters.pyterrier_transformer import (
        GraspTransformer,
        frame_to_run,
        qrels_frame,
        run_to_frame,
        topics_frame,
    )

    topics, qrels = topics_frame(queries), qrels_frame(queries)
    bm25, fused = GraspTransformer(searchers["bm25"], k=20), GraspTransformer(searchers["fused"], k=20)
    table = pt.Experiment([bm25, fused], topics, qrels, eval_metrics=[P @ 1, RR], names=["bm25", "fused"])
    for name, transformer in (("bm25", bm25), ("fused", fused)):
        frame = transformer.transform(topics)
        assert list(frame.columns) == ["qid", "query", "docno", "score", "rank", "name", "type"]
        assert frame.groupby("qid")["rank"].min().eq(0).all()  # PyTerrier's ranks are 0-based
        ours = evaluate_run(frame_to_run(frame), queries)
        row = table.set_index("name").loc[name]
        assert row["P@1"] == pytest.approx(ours.means["hit@1"]) and row["RR"] == pytest.approx(ours.means["mrr"])
    assert table.set_index("name").loc["fused", "RR"] > table.set_index("name").loc["bm25", "RR"]
    # runs go both ways unchanged
    run = frame_to_run(fused.transform(topics))
    back = frame_to_run(run_to_frame(run))
    assert [back[q].node_ids.tolist() for q in back] == [run[q].node_ids.tolist() for q in run]


def test_pyterrier_transformer_composes_and_refuses_a_bad_frame(searchers, queries):
    require("pyterrier")
    import pandas as pd

    from grasp.adapters.pyterrier_transformer import GraspTransformer, topics_frame
    from grasp.errors import InputError

    top3 = GraspTransformer(searchers["fused"], k=10, text=True) % 3  # PyTerrier's rank cutoff operator
    frame = top3.transform(topics_frame(queries[:2]))
    assert frame.groupby("qid").size().tolist() == [3, 3] and frame["text"].str.len().min() > 0
    with pytest.raises(InputError, match="missing: query"):
        GraspTransformer(searchers["fused"]).transform(pd.DataFrame({"qid": ["1"]}))


def test_langchain_retriever_returns_the_searchers_ranking(searchers, queries):
    require("langchain_core")
    from grasp.adapters.langchain_retriever import GraspRetriever

    retriever = GraspRetriever(searcher=searchers["fused"], k=5)
    docs = retriever.invoke(queries[0].text)
    hits = searchers["fused"].search(queries[0].text, 5).hits
    assert [d.metadata["node_id"] for d in docs] == [h.node_id for h in hits]
    assert [d.id for d in docs] == [str(h.node_id) for h in hits]
    first = docs[0]
    assert first.page_content == searchers["fused"].document(hits[0].node_id) and hits[0].name in first.page_content
    assert first.metadata["type"] == "package" and first.metadata["stage_ranks"]["final"] == 1
    assert set(first.metadata["stage_ranks"]) >= {"graph", "mfar", "final"}
    assert "target" in first.metadata["plan"]  # the plan the graph stage executed


def test_llamaindex_retriever_returns_the_searchers_ranking(searchers, queries):
    require("llama_index.core")
    from grasp.adapters.llamaindex_retriever import GraspLlamaIndexRetriever

    retriever = GraspLlamaIndexRetriever(searchers["fused"], k=5)
    nodes = retriever.retrieve(queries[0].text)
    hits = searchers["fused"].search(queries[0].text, 5).hits
    assert [n.node.node_id for n in nodes] == [str(h.node_id) for h in hits]
    assert [n.score for n in nodes] == pytest.approx([h.score for h in hits])
    assert nodes[0].node.metadata["name"] == hits[0].name and hits[0].name in nodes[0].node.get_content()
