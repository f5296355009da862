"""BM25 and dense retrieval on a small real SKB, through the stage interface and the workspace."""

from __future__ import annotations

import pytest

from grasp import methods
from grasp.config import GraspConfig
from grasp.skb import read_queries
from grasp.workspace import Workspace


@pytest.fixture
def ws(toy_dir, tmp_path):
    cfg = GraspConfig(cache_dir=tmp_path / "cache")
    cfg.encoder.max_length = 128
    return Workspace.open(toy_dir, cfg, progress=False)


def test_bm25_finds_lexical_match_and_only_candidates(ws):
    r = methods.retriever(ws, "bm25").search("galactosyltransferase", k=5)
    assert r.node_ids[0] == 0
    assert r.stage == "bm25"
    r = methods.retriever(ws, "bm25").search("chromosome", k=10)
    assert all(ws.skb.candidate_mask[i] for i in r.node_ids)  # chromosomes are not candidates


def test_bm25_node_scores_are_the_rankings_scores(ws):
    """Stage 1's lexical match: each node's BM25 score, equal to what the ranking gives it, 0 for a node the
    index does not hold (a chromosome), in the order the ids are asked for."""
    bm25 = methods.retriever(ws, "bm25")
    ranked = bm25.search("sodium voltage-gated channel", k=20)
    scores = dict(zip(ranked.node_ids.tolist(), ranked.scores.tolist(), strict=True))
    assert set(list(scores)[:2]) == {1, 8}  # SCN1A and SCN2A name it in full
    chromosome = next(i for i in range(ws.skb.num_nodes) if not ws.skb.candidate_mask[i])
    asked = [8, chromosome, 2, 1, 0]
    got = bm25.node_scores("sodium voltage-gated channel", asked)
    assert got.tolist() == pytest.approx([scores.get(i, 0.0) for i in asked])
    assert got[1] == 0.0 and got[0] > got[2] > 0  # KCNQ2 shares "voltage-gated channel" only


def test_bm25_query_with_no_known_word(ws):
    assert len(methods.retriever(ws, "bm25").search("zzzz qqqq", k=5)) == 0


def test_bm25_index_is_reused_not_rebuilt(ws, toy_dir):
    methods.retriever(ws, "bm25")
    dirs = list(ws.cache_dir.glob("bm25-*"))
    assert len(dirs) == 1
    stamp = (dirs[0] / "complete.json").stat().st_mtime_ns
    again = Workspace.open(toy_dir, ws.config, progress=False)
    methods.retriever(again, "bm25").search("sodium")
    assert (dirs[0] / "complete.json").stat().st_mtime_ns == stamp


def test_bm25_settings_change_the_index(ws, toy_dir):
    methods.retriever(ws, "bm25")
    cfg = ws.config.model_copy(deep=True)
    cfg.bm25.k1 = 0.9
    methods.retriever(Workspace.open(toy_dir, cfg, progress=False), "bm25")
    assert len(list(ws.cache_dir.glob("bm25-*"))) == 2


@pytest.mark.slow
def test_dense_ranks_semantic_match(ws):
    r = methods.retriever(ws, "dense").search("movement of sodium ions across membranes", k=3)
    assert r.node_ids[0] == 4
    assert r.stage == "dense"
    assert all(ws.skb.candidate_mask[i] for i in r.node_ids)


@pytest.mark.slow
def test_evaluate_both_methods(ws, toy_dir):
    queries = read_queries(toy_dir / "qa" / "queries.jsonl")
    for method in ("bm25", "dense"):
        run, report = methods.evaluate(ws, method, queries)
        assert report.n == 4 and len(run) == 4
        assert 0 < report.means["mrr"] <= 1
        assert report.info["ms_per_query"] >= 0


def test_index_never_written_into_skb_dir(ws, toy_dir):
    before = sorted(p.name for p in toy_dir.rglob("*"))
    methods.retriever(ws, "bm25")
    assert sorted(p.name for p in toy_dir.rglob("*")) == before
