"""The evidence-based plan confidence: its kernels against reference implementations, its features on a ranking
built by hand, its fit on runs whose correctness a feature determines, and confidence RRF from grid to service."""

from __future__ import annotations

import numpy as np
import pytest

from grasp.errors import FormatError
from grasp.eval import evaluate_run
from grasp.fuse import (
    FusionTable,
    PlanConfidence,
    ShapePrior,
    confidence_weight,
    evidence,
    fit_confidence,
    search_confidence,
    search_static,
)
from grasp.fuse.confidence import FEATURES, auc, calibration, logistic_fit, low_weight_shares, reliability
from grasp.fuse.grid import folds
from grasp.fuse.retriever import FusionSetting
from grasp.graph.retriever import GraphTrace
from grasp.results import PlanSignals, Query, Ranking, Run

PLAN_A = {"anchors": [{"var": "a", "text": "X", "label": "gene", "match_mode": "name"}],
          "hops": [{"from": "a", "rel": "ppi", "to_var": "T", "to_label": "gene"}],
          "target": {"var": "T", "labels": ["gene"], "relevance_text": ""}, "risk_level": "normal"}
PLAN_B = {"anchors": [], "hops": [], "target": {"var": "T", "labels": ["gene"], "relevance_text": "some text"},
          "risk_level": "aggressive"}


def graph_ranking(qid: str, ids, scores, plan: dict, *, n_cand: int | None = None, link: float | None = 1.0,
                  agreement: float | None = None) -> Ranking:
    trace = GraphTrace(plan=plan, risk_level=plan["risk_level"], n_cand=n_cand or len(ids), link_confidence=link,
                       agreement=agreement)
    return Ranking(qid, ids, scores, stage="graph", trace=trace, signals=trace.signals)


def test_logistic_fit_matches_scikit_learn():
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = (X @ [1.5, -2.0, 0.0, 0.5] + rng.normal(size=200) > 0).astype(float)
    w = logistic_fit(X, y, l2=2.0)
    ref = LogisticRegression(C=1 / 2.0, tol=1e-10, max_iter=10_000).fit(X, y)  # penalty 1/(2C)|w|^2, intercept free
    assert w[:-1] == pytest.approx(ref.coef_[0], abs=1e-5) and w[-1] == pytest.approx(ref.intercept_[0], abs=1e-5)


def test_auc_matches_scikit_learn_with_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    p = rng.integers(0, 5, size=60) / 4  # many ties
    y = (rng.random(60) < p).astype(float)
    assert auc(p, y) == pytest.approx(roc_auc_score(y, p))
    assert auc(p, np.ones(60)) is None


def test_reliability_bins_and_calibration_by_hand():
    p = np.array([0.05, 0.15, 0.12, 0.95, 0.99])
    y = np.array([0.0, 0.0, 1.0, 1.0, 1.0])
    bins = reliability(p, y)
    assert [(b["lo"], b["n"]) for b in bins] == [(0.0, 1), (0.1, 2), (0.9, 2)]
    assert bins[1]["predicted"] == pytest.approx(0.135) and bins[1]["observed"] == 0.5
    cal = calibration(p, y)
    # ECE: (1 * .05 + 2 * |.135 - .5| + 2 * |.97 - 1|) / 5
    assert cal["ece"] == pytest.approx((0.05 + 2 * 0.365 + 2 * 0.03) / 5)
    assert cal["brier"] == pytest.approx(np.mean((p - y) ** 2)) and cal["auc"] == pytest.approx(5 / 6)


def test_evidence_features_of_a_ranking_built_by_hand():
    g = graph_ranking("q", [7, 8, 9], [1.5, 1.0, 0.2], PLAN_A, n_cand=40, link=0.8)
    dense = Ranking("q", [3, 7, 8], [3.0, 2.0, 1.0])
    shapes = ShapePrior({}, 0.4)
    x = dict(zip(FEATURES, evidence(g, dense, shapes), strict=True))
    assert x["log_n_cand"] == pytest.approx(np.log1p(40)) and x["link_confidence"] == 0.8 and x["no_name_anchor"] == 0
    assert x["top_score"] == 1.5 and x["top_gap"] == pytest.approx(0.5) and x["hops"] == 1 and x["anchors"] == 1
    assert x["planner_risk"] == 2 and x["relevance_text"] == 0 and x["agreement"] == 1.0
    assert x["dense_rank_of_top"] == pytest.approx(0.5)  # node 7 is second in the dense ranking
    assert x["top10_overlap"] == pytest.approx(0.2)  # 7 and 8 of the graph's top 10 are in the dense top 10
    assert x["shape_rate"] == pytest.approx(0.4) and x["shape_seen"] == 0  # an unseen shape: the overall rate
    b = dict(zip(FEATURES, evidence(graph_ranking("q", [5], [0.3], PLAN_B, link=None), None), strict=True))
    assert b["no_name_anchor"] == 1 and b["link_confidence"] == 1.0 and b["top_gap"] == 1.0 and b["relevance_text"] == 1
    assert b["planner_risk"] == 3 and b["dense_rank_of_top"] == 0 and b["top10_overlap"] == 0
    assert evidence(graph_ranking("q", [], [], PLAN_A), dense) is None  # no candidate: no evidence, p is None


def test_shape_prior_counts_right_answers_per_shape():
    queries = [Query(str(i), "q", [1]) for i in range(5)]
    plan_a2 = {**PLAN_A, "anchors": [{**PLAN_A["anchors"][0], "text": "another gene"}]}  # same shape as PLAN_A
    graph = Run("graph", {"0": graph_ranking("0", [1], [1.0], PLAN_A), "1": graph_ranking("1", [2], [1.0], plan_a2),
                          "2": graph_ranking("2", [1], [1.0], plan_a2), "3": graph_ranking("3", [2], [1.0], PLAN_B)})
    prior = ShapePrior.count(graph, queries)  # query 4 has no ranking: not counted
    assert sorted(prior.shapes.values()) == [[1, 0], [3, 2]] and prior.rate == pytest.approx(0.5)
    rate, seen = prior.lookup(PLAN_A)
    assert rate == pytest.approx((2 + 2 * 0.5) / (3 + 2)) and seen == pytest.approx(np.log1p(3))


def synthetic_runs(seed: int, n: int = 120):
    """Graph rankings whose top answer is gold exactly when the plan's name anchor links well (link confidence
    0.95 against 0.4), and dense rankings that find gold exactly when the graph does not: no single static weight
    serves both halves."""
    rng = np.random.default_rng(seed)
    graph, dense, queries = Run("graph"), Run("mfar"), []
    for i in range(n):
        qid = str(i)
        good = bool(rng.random() < 0.5)
        gold = 100 + i
        ids = [gold, 1, 2] if good else [1, 2, 6]
        if i % 10 == 9:  # a plan that returned nothing
            graph.add(graph_ranking(qid, [], [], PLAN_A))
        else:
            graph.add(graph_ranking(qid, ids, [1.0, 0.9, 0.1], PLAN_A, link=0.95 if good else 0.4))
        dense.add(Ranking(qid, [3, 4, 5] if good else [gold, 3, 4], [1.0, 0.8, 0.5]))
        queries.append(Query(qid, "q", [gold]))
    return graph, dense, queries


def test_fit_confidence_learns_the_evidence_out_of_fold():
    graph, dense, queries = synthetic_runs(0)
    fit = fit_confidence(graph, dense, queries, folds=folds(len(queries), 5, 0))
    none = np.array([len(graph[q.qid]) == 0 for q in queries])
    assert np.isnan(fit.oof[none]).all() and not np.isnan(fit.oof[~none]).any()
    summary = fit.summary()
    assert summary["auc"] == 1.0 and summary["n"] == int((~none).sum())
    assert summary["wrong_low_evidence"] == 1.0 and summary["right_kept_evidence"] == 1.0
    assert summary["wrong_low_planner"] == pytest.approx(none.sum() / summary["wrong"])  # only the plans with no candidate
    model = PlanConfidence.from_json(fit.model.to_json())
    g, m = graph["0"], dense["0"]
    assert model.probability(g, m) == pytest.approx(fit.model.probability(g, m))
    good = [q.qid for q in queries if len(graph[q.qid]) and graph[q.qid].signals.link_confidence > 0.9]
    bad = [q.qid for q in queries if len(graph[q.qid]) and graph[q.qid].signals.link_confidence < 0.5]
    assert min(model.probability(graph[q], dense[q]) for q in good) > 0.5 > max(model.probability(graph[q], dense[q])
                                                                              for q in bad)
    with pytest.raises(ValueError, match="both right and wrong"):
        fit_confidence(graph, dense, queries[:1], folds=[np.array([0])])
    with pytest.raises(ValueError, match="other features"):
        PlanConfidence.from_json({**fit.model.to_json(), "features": ["x"]})


def test_low_weight_shares_by_hand():
    shares = low_weight_shares(np.array([0.2, 0.8, np.nan, 0.6]), ["normal", "weak", "no_trade", "normal"],
                               np.array([0.0, 0.0, 0.0, 1.0]))
    assert shares == {"wrong": 3, "wrong_low_evidence": pytest.approx(2 / 3), "wrong_low_planner": pytest.approx(2 / 3),
                      "right_kept_evidence": 1.0, "right_kept_planner": 1.0}


def test_confidence_rrf_beats_static_and_is_served_as_the_grid_scored_it(tmp_path):
    graph, dense, queries = synthetic_runs(1)
    fit = fit_confidence(graph, dense, queries, folds=folds(len(queries), 5, 0))
    table = FusionTable.build(graph, dense, queries, confidence=fit.oof)
    res = search_confidence(table)
    assert res.mode == "confidence" and res.n_settings == 4 * 3 * 9
    reachable = np.mean([any(len(r) and int(r.node_ids[0]) == q.answer_ids[0] for r in (graph[q.qid], dense[q.qid]))
                         for q in queries])  # one branch or the other has gold first
    assert res.hit1 == pytest.approx(reachable) and search_static(table).hit1 < reachable - 0.3
    # the served setting, with the model fitted on every query, gives the grid's Hit@1 on the same probabilities
    setting = FusionSetting("confidence", res.best["rrf_k"], gamma=res.best["gamma"], scale=res.best["scale"],
                            confidence=fit.model.to_json())
    served_p = np.array([np.nan if (p := setting.plan_confidence.probability(graph[q.qid], dense[q.qid])) is None else p
                         for q in queries])
    fused = setting.fuse(graph, dense, name="fused")
    served_table = FusionTable.build(graph, dense, queries, confidence=served_p)
    assert evaluate_run(fused, queries).means["hit@1"] == pytest.approx(res.hits(served_table).mean())
    trace = fused["0"].trace
    assert trace.mode == "confidence" and trace.plan_confidence == pytest.approx(served_p[0], abs=1e-4)
    w = float(confidence_weight(served_p[0], res.best["gamma"], res.best["scale"]))
    assert trace.weights == {"graph": pytest.approx(w), "mfar": pytest.approx(1 - w)}
    assert fused["9"].trace.plan_confidence is None and fused["9"].trace.weights["graph"] == 0.0  # no candidate
    # saved and loaded as a workspace setting; confidence mode without its model is a clear error
    setting.save(tmp_path / "fusion.json")
    loaded = FusionSetting.load(tmp_path / "fusion.json")
    assert loaded.plan_confidence.probability(graph["0"], dense["0"]) == pytest.approx(served_p[0])
    (tmp_path / "bad.json").write_text('{"mode": "confidence", "rrf_k": 60, "gamma": 1, "scale": 1}')
    with pytest.raises(FormatError, match="confidence mode needs"):
        FusionSetting.load(tmp_path / "bad.json")


def test_confidence_weight_and_signals_carried():
    assert confidence_weight(np.array([0.0, 0.25, 1.0]), 0.5, 0.8).tolist() == pytest.approx([0.0, 0.4, 0.8])
    g = graph_ranking("q", [1], [1.0], PLAN_A, link=0.3)
    assert g.signals == PlanSignals(1, "normal", 0.3)
