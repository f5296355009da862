"""Metrics with STaRK's definitions, checked by hand and against ranx."""

from __future__ import annotations

import numpy as np
import pytest

from grasp.eval import evaluate_run, score_query
from grasp.eval.metrics import hit_at_k, metric_fn, recall_at_k, reciprocal_rank
from grasp.results import Query, Ranking, Run


def test_hand_computed():
    ranked = np.array([5, 3, 9, 1, 7])
    gold = np.array([9, 7, 100])
    assert hit_at_k(ranked, gold, 1) == 0.0
    assert hit_at_k(ranked, gold, 3) == 1.0
    assert recall_at_k(ranked, gold, 3) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, gold, 20) == pytest.approx(2 / 3)  # over all gold, even unretrieved
    assert reciprocal_rank(ranked, gold) == pytest.approx(1 / 3)   # from the first gold
    assert reciprocal_rank(ranked, np.array([42])) == 0.0


def test_non_candidates_are_dropped_from_ranking_and_gold():
    mask = np.array([True, False, True, True, False])
    # node 1 is not a candidate: it neither takes rank 1 nor counts as gold
    s = score_query([1, 2, 3], [2, 4], candidate_mask=mask)
    assert s == {"hit@1": 1.0, "hit@5": 1.0, "recall@20": 1.0, "mrr": 1.0}
    s = score_query([1, 2, 3], [4], candidate_mask=mask)  # gold empty after filtering
    assert s["mrr"] == 0.0 and s["hit@5"] == 0.0


def test_unknown_metric():
    with pytest.raises(ValueError):
        metric_fn("ndcg@10")


def test_report_means_and_templates():
    run = Run("m", {"a": Ranking("a", [1, 2], [2.0, 1.0]), "b": Ranking("b", [3, 1], [2.0, 1.0])})
    queries = [Query("a", "x", [1], template="t1"), Query("b", "y", [1], template="t2"), Query("c", "z", [1], template="t2")]
    rep = evaluate_run(run, queries)
    assert rep.n == 3
    assert rep.means["hit@1"] == pytest.approx(1 / 3)
    assert rep.means["mrr"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert rep.per_template["t2"]["n"] == 2 and rep.per_template["t2"]["mrr"] == pytest.approx(0.25)
    js = rep.to_json()
    assert {"method", "n", "hit@1", "hit@5", "recall@20", "mrr"} <= set(js)
    md = rep.to_markdown()
    assert "| m | 3 | 33.3 |" in md and "| t2 | 2 |" in md


def test_agrees_with_ranx_on_random_runs():
    ranx = pytest.importorskip("ranx")
    rng = np.random.default_rng(0)
    qrels, run_dict, queries, rankings = {}, {}, [], {}
    for q in range(60):
        gold = rng.choice(200, size=rng.integers(1, 8), replace=False)
        ids = rng.choice(200, size=50, replace=False)
        scores = np.sort(rng.random(50))[::-1] + np.arange(50)[::-1]  # strictly decreasing: no ties
        qid = f"q{q}"
        qrels[qid] = {str(g): 1 for g in gold}
        run_dict[qid] = {str(i): float(s) for i, s in zip(ids, scores, strict=True)}
        queries.append(Query(qid, "x", gold.tolist()))
        rankings[qid] = Ranking(qid, ids, scores)
    ours = evaluate_run(Run("r", rankings), queries).means
    theirs = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run_dict), ["hit_rate@1", "hit_rate@5", "recall@20", "mrr"])
    assert ours["hit@1"] == pytest.approx(theirs["hit_rate@1"])
    assert ours["hit@5"] == pytest.approx(theirs["hit_rate@5"])
    assert ours["recall@20"] == pytest.approx(theirs["recall@20"])
    assert ours["mrr"] == pytest.approx(theirs["mrr"])


def test_trec_round_trip(tmp_path):
    from grasp.eval import read_run, write_qrels, write_run

    run = Run("bm25", {"1": Ranking("1", [4, 2], [3.5, 1.25]), "2": Ranking("2", [7], [0.5])})
    write_run(run, tmp_path / "r.trec")
    lines = (tmp_path / "r.trec").read_text().splitlines()
    assert lines[0] == "1 Q0 4 1 3.500000 bm25"
    back = read_run(tmp_path / "r.trec")
    assert back["1"].node_ids.tolist() == [4, 2] and back.name == "bm25"
    write_qrels([Query("1", "x", [4, 5])], tmp_path / "q.qrels")
    assert (tmp_path / "q.qrels").read_text() == "1 0 4 1\n1 0 5 1\n"


def test_ranking_from_scores_is_deterministic():
    r = Ranking.from_scores("q", [5, 1, 3], [1.0, 2.0, 1.0], k=2)
    assert r.node_ids.tolist() == [1, 3]
    assert r.rank_of(3) == 2 and r.rank_of(5) is None
    assert list(r.records())[0] == {"qid": "q", "docno": "1", "score": 2.0, "rank": 0}
