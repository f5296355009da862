"""Reciprocal-rank fusion and its vectorised grid search, checked against brute force."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from grasp.eval import evaluate_run
from grasp.fuse import (
    FusionTable,
    bucket_of,
    dynamic_rrf,
    graph_weight,
    search_dynamic,
    search_static,
    static_rrf,
)
from grasp.fuse.retriever import FusionSetting
from grasp.plan.model import RISK_LEVELS
from grasp.results import PlanSignals, Query, Ranking, Run


def test_static_formula_by_hand():
    g = Run("g", {"q": Ranking("q", [10, 20], [2.0, 1.0])})
    m = Run("m", {"q": Ranking("q", [20, 30], [2.0, 1.0])})
    fused = static_rrf(g, m, w=0.5, rrf_k=1)["q"]
    # 10: .5/2 ; 20: .5/3 + .5/2 ; 30: .5/3
    assert fused.node_ids.tolist() == [20, 10, 30]
    assert fused.scores.tolist() == pytest.approx([0.5 / 3 + 0.25, 0.25, 0.5 / 3])


def test_dynamic_zero_weight_is_the_dense_ranking():
    g = Run("g", {"q": Ranking("q", [1, 2, 3], [3, 2, 1])})
    m = Run("m", {"q": Ranking("q", [3, 2, 1], [3, 2, 1])})
    assert dynamic_rrf(g, m, {"q": 0.0}, rrf_k=60)["q"].node_ids.tolist() == [3, 2, 1]
    assert dynamic_rrf(g, m, {"q": 5.0}, rrf_k=60)["q"].node_ids.tolist() == [1, 2, 3]


def test_buckets_and_weights():
    assert [bucket_of(n) for n in (0, 1, 10, 11, 50, 51, 100, 101, 500, 501)] == [0, 0, 0, 1, 1, 2, 2, 3, 3, 4]
    assert graph_weight(30, "weak", [1, 2, 3, 4, 5], [0, 0.5, 1, 2]) == 1.0
    assert graph_weight(30, "garbage", [1, 2, 3, 4, 5], [0, 0.5, 1, 2]) == 0.0  # unknown risk = no_trade


def random_runs(seed=0, n_q=80):
    rng = np.random.default_rng(seed)
    g_run, m_run, queries = Run("g"), Run("m"), []
    for i in range(n_q):
        qid = str(i)
        pool = rng.choice(400, size=120, replace=False)
        gold = rng.choice(pool, size=int(rng.integers(1, 4)), replace=False)
        n_cand = int(rng.choice([3, 30, 80, 300, 900]))
        g_ids = rng.permutation(pool)[: min(n_cand, 60)]
        m_ids = rng.permutation(pool)[:60]
        g_run.add(Ranking(qid, g_ids, np.linspace(1, 0, g_ids.size),
                          signals=PlanSignals(n_cand, str(rng.choice(RISK_LEVELS)),
                                              float(rng.choice([0.3, 0.7, 0.95, 1.0])))))
        m_run.add(Ranking(qid, m_ids, np.linspace(1, 0, m_ids.size)))
        queries.append(Query(qid, "q", gold.tolist()))
    return g_run, m_run, queries


def fused_from(graph: Run, other: Run) -> Run:
    """``other``'s rankings carrying ``graph``'s plan signals, as the rankings Stage 2 fuses from a graph ranking do."""
    return Run(other.name, {q: dataclasses.replace(r, signals=graph[q].signals) for q, r in other.items()})


def test_static_grid_equals_brute_force():
    g, m, queries = random_runs(1)
    table = FusionTable.build(g, m, queries)
    res = search_static(table, ws=(0.0, 0.3, 0.7, 1.0), ks=(1, 20, 60))
    for i, w in enumerate((0.0, 0.3, 0.7, 1.0)):
        for j, k in enumerate((1, 20, 60)):
            brute = evaluate_run(static_rrf(g, m, w=w, rrf_k=k), queries).means["hit@1"]
            assert res.surface[i, j] == pytest.approx(brute)
    assert res.hit1 == pytest.approx(res.surface.max()) and res.within_1pt >= 1


def test_dynamic_grid_equals_brute_force_and_finds_the_best():
    g, m, queries = random_runs(2)
    table = FusionTable.build(g, m, queries)
    w_bucket = ((1.0, 2.0), (0.5, 1.0), (0.2,), (0.0, 0.1), (0.0,))
    m_risk = ((0.0, 0.5), (1.0,), (0.75, 1.5), (1.0, 2.0))
    res = search_dynamic(table, ks=(5, 40), w_bucket=w_bucket, m_risk=m_risk)
    assert res.n_settings == 2 * 2 * 2 * 1 * 2 * 1 * 2 * 1 * 2 * 2
    best_brute = -1.0
    import itertools

    for k in (5, 40):
        for wb in itertools.product(*w_bucket):
            for mr in itertools.product(*m_risk):
                weights = {qid: graph_weight(g[qid].signals.n_cand, g[qid].signals.risk_level, wb, mr) for qid in g}
                best_brute = max(best_brute, evaluate_run(dynamic_rrf(g, m, weights, rrf_k=k), queries).means["hit@1"])
    assert res.hit1 == pytest.approx(best_brute)
    b = res.best
    weights = {qid: graph_weight(g[qid].signals.n_cand, g[qid].signals.risk_level, b["w_bucket"],
                                 [b["m_risk"][r] for r in RISK_LEVELS]) for qid in g}
    assert evaluate_run(dynamic_rrf(g, m, weights, rrf_k=b["rrf_k"]), queries).means["hit@1"] == pytest.approx(res.hit1)


def test_the_served_fusion_scores_what_the_grid_chose():
    """FusedRetriever fuses through FusionSetting.fuse: the setting the grid picks, served, gives the grid's Hit@1."""
    g, m, queries = random_runs(4)
    table = FusionTable.build(g, m, queries)
    st = search_static(table, ws=(0.2, 0.6), ks=(5, 60))
    static = FusionSetting("static", st.best["rrf_k"], w=st.best["w"])
    assert evaluate_run(static.fuse(g, m, name="fused"), queries).means["hit@1"] == pytest.approx(st.hit1)
    dy = search_dynamic(table, ks=(5, 40), w_bucket=((1.0, 2.0), (0.5,), (0.2,), (0.0,), (0.0,)),
                        m_risk=((0.0,), (1.0,), (0.75, 1.5), (1.0,)))
    dynamic = FusionSetting("dynamic", dy.best["rrf_k"], w_bucket=dy.best["w_bucket"], m_risk=dy.best["m_risk"])
    fused = dynamic.fuse(g, m, name="fused", top=10)
    assert evaluate_run(fused, queries).means["hit@1"] == pytest.approx(dy.hit1)
    some = next(iter(fused.values()))
    assert len(some) <= 10 and some.trace.mode == "dynamic" and set(some.trace.weights) == {g.name, m.name}
    # with a link floor the poorly linked plans sit a risk level lower, in the grid and when served alike
    floored = FusionTable.build(g, m, queries, link_floor=0.9)
    low = np.array([g[q].signals.link_confidence < 0.9 and g[q].signals.risk_level != "no_trade" for q in table.qids])
    assert low.any() and (floored.risk[low] == table.risk[low] - 1).all() and (floored.risk[~low] == table.risk[~low]).all()
    dy = search_dynamic(floored, ks=(5, 40), w_bucket=((1.0, 2.0), (0.5,), (0.2,), (0.0,), (0.0,)),
                        m_risk=((0.0,), (0.25, 1.0), (0.75, 1.5), (1.0,)))
    served = FusionSetting("dynamic", dy.best["rrf_k"], w_bucket=dy.best["w_bucket"], m_risk=dy.best["m_risk"], link_floor=0.9)
    assert evaluate_run(served.fuse(g, m, name="fused"), queries).means["hit@1"] == pytest.approx(dy.hit1)


def test_full_paper_grid_is_fast():
    import time

    g, m, queries = random_runs(3, n_q=300)
    table = FusionTable.build(g, m, queries)
    t = time.perf_counter()
    res = search_dynamic(table)
    assert res.n_settings == 7 * 5 * 4 * 4 * 3 * 3 * 4 * 4 * 4 * 4
    assert time.perf_counter() - t < 60  # seconds, not hours (loose bound: CI machines are noisy)


def test_flat_choice_is_the_best_neighbourhood_and_hits_replay_the_grid():
    from grasp.fuse.grid import neighbourhood_mean

    surface = np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.9, 0.0, 0.0], [0.6, 0.6, 0.6, 0.7], [0.6, 0.6, 0.6, 0.7]])
    smooth = neighbourhood_mean(surface)
    assert smooth[0, 0] == pytest.approx(0.9 / 4) and smooth[2, 2] == pytest.approx(4.7 / 9)
    assert smooth[3, 3] == pytest.approx(2.6 / 4)
    assert np.unravel_index(np.argmax(smooth), smooth.shape) == (3, 3)  # the plateau, not the spike at (1, 1)
    g, m, queries = random_runs(5)
    table = FusionTable.build(g, m, queries)
    sharp, flat = search_static(table), search_static(table, flat=True)
    assert sharp.hit1 >= flat.hit1 and flat.surface is not None
    assert flat.hits(table).mean() == pytest.approx(flat.hit1)
    dy = search_dynamic(table, ks=(5, 40), w_bucket=((1.0, 2.0), (0.5,), (0.2,), (0.0,), (0.0,)),
                        m_risk=((0.0,), (1.0,), (0.75, 1.5), (1.0,)))
    assert dy.hits(table).mean() == pytest.approx(dy.hit1)
    rows = np.array([0, 3, 7])
    assert table.subset(rows).qids == [table.qids[i] for i in rows]
    assert (dy.hits(table.subset(rows)) == dy.hits(table)[rows]).all()


def test_cross_validation_scores_each_rule_on_held_out_folds():
    from grasp.fuse.grid import choose, cross_validate, folds

    parts = folds(23, 5, seed=1)
    assert sorted(np.concatenate(parts).tolist()) == list(range(23)) and [len(p) for p in parts] == [5, 5, 5, 4, 4]
    g, m, queries = random_runs(6, n_q=60)
    table = FusionTable.build(g, m, queries)

    def only(w, k):  # a rule with a single setting: its held-out Hit@1 is its Hit@1 on all queries
        return lambda t: search_static(t, ws=(w,), ks=(k,))

    rules = {"graph": (table, only(1.0, 60)), "dense": (table, only(0.0, 60)), "grid": (table, search_static)}
    out = cross_validate(rules, n_folds=4, seed=0)
    assert out["cv"]["graph"] == pytest.approx(table.hits_at_1(1.0, 0.0, 60).mean())
    assert out["cv"]["dense"] == pytest.approx(table.hits_at_1(0.0, 1.0, 60).mean())
    assert len(out["folds"]) == 4 and sum(f["n"] for f in out["folds"]) == 60
    # a grid searched in-sample scores at least as well there as held out, on average
    assert np.mean([f["grid"]["train"] for f in out["folds"]]) >= out["cv"]["grid"] - 1e-9
    assert 0.0 <= out["argmax_right"] <= 1.0
    assert choose({"a": 0.50, "b": 0.51}) == "b" and choose({"a": 0.50, "b": 0.51}, tolerance=0.02) == "a"


@pytest.mark.slow
def test_tune_fusion_and_fused_method_end_to_end(toy_dir, tmp_path, capsys):
    """graph (through a fake LLM endpoint) + dense partner -> tuned setting -> --method fused."""
    import json

    from grasp.cli import main
    from tests.fake_llm import FakeChatServer
    from tests.integration.test_planner import GOOD

    with FakeChatServer([GOOD]) as srv:
        base = ["-q", "--cache-dir", str(tmp_path / "c"), "--set", "planner.kind=openai", "--set", "planner.format=flat",
                "--set", f"planner.base_url={srv.url}", "--set", "planner.model=fake", "--set", "graph.engine=memory"]
        png = tmp_path / "heat.png"
        main([*base, "tune", "fusion", "--skb", str(toy_dir), "--split", "test", "--dense-method", "dense",
              "--heatmap", str(png)])
        out = capsys.readouterr().out
        assert "chosen:" in out and png.stat().st_size > 1000
        main([*base, "eval", "--skb", str(toy_dir), "--method", "fused", "--output-json", str(tmp_path / "f.json")])
    rep = json.loads((tmp_path / "f.json").read_text())
    assert rep["method"] == "fused" and rep["n"] == 4


def test_bucketed_final_fusion_searches_each_bucket_and_serves_what_it_chose():
    """The final fusion's bucketed rule: one static (w, k) per bucket of the upstream's graph candidates (0, 1-10,
    >10, read from the graph run's traces, not from the fused runs); its in-sample Hit@1 is the best over every
    per-bucket combination (brute force), and the served setting replays it."""
    import itertools

    from grasp.fuse.dynamic import GRAPH_SIZE_EDGES, bucket_names
    from grasp.fuse.grid import search_bucketed
    from grasp.rerank.retriever import RerankFusionSetting

    assert [bucket_of(n, GRAPH_SIZE_EDGES) for n in (0, 1, 10, 11, 900)] == [0, 1, 1, 2, 2]
    assert bucket_names(GRAPH_SIZE_EDGES) == ["0", "1-10", ">10"]
    g, up, queries = random_runs(6, n_q=60)
    for i, qid in enumerate(g):
        if i % 3 == 0:  # the graph found nothing for a third of the queries
            g[qid].signals = dataclasses.replace(g[qid].signals, n_cand=0)
    up = fused_from(g, up)  # the upstream rankings carry the graph's plan signals, as fused ones do
    rng = np.random.default_rng(7)
    scored = Run("reranker", {q: Ranking(q, rng.permutation(up[q].node_ids), np.linspace(1, 0, len(up[q])))
                              for q in up})
    table = FusionTable.build(scored, up, queries, edges=GRAPH_SIZE_EDGES)
    assert sorted(set(table.bucket.tolist())) == [0, 1, 2]
    assert table.bucket.tolist() == [bucket_of(g[q].signals.n_cand, GRAPH_SIZE_EDGES) for q in table.qids]
    ws, ks = (0.0, 0.3, 0.7, 1.0), (1, 20)
    res = search_bucketed(table, 3, ws=ws, ks=ks)
    assert res.mode == "bucketed" and res.n_settings == 8 * 3
    cells = list(itertools.product(ws, ks))
    brute = max(evaluate_run(RerankFusionSetting(w=0.0, rrf_k=1.0, bucket_edges=list(GRAPH_SIZE_EDGES),
                                                 w_bucket=[c[0] for c in combo], rrf_k_bucket=[c[1] for c in combo])
                             .fuse(scored, up, name="grasp"), queries).means["hit@1"]
                for combo in itertools.product(cells, repeat=3))
    assert res.hit1 == pytest.approx(brute)
    assert res.hit1 >= search_static(table, ws=ws, ks=ks).hit1 - 1e-12  # a static setting is one bucketed setting
    served = RerankFusionSetting(w=0.0, rrf_k=1.0, bucket_edges=list(GRAPH_SIZE_EDGES), **res.best)
    fused = served.fuse(scored, up, name="grasp")
    assert evaluate_run(fused, queries).means["hit@1"] == pytest.approx(res.hit1)
    assert res.hits(table).mean() == pytest.approx(res.hit1)
    q0 = table.qids[0]  # a query without graph candidates: its fusion used bucket 0's (w, k), as its trace says
    assert (fused[q0].trace.mode, fused[q0].trace.rrf_k) == ("bucketed", res.best["rrf_k_bucket"][0])
    assert fused[q0].trace.weights["reranker"] == res.best["w_bucket"][0]
    # a query without plan signals has no graph candidate; an upstream carrying none at all is refused
    assert served.params(None) == (res.best["w_bucket"][0], res.best["rrf_k_bucket"][0])
    bare = Run("fused", {q: dataclasses.replace(r, signals=None) for q, r in up.items()})
    with pytest.raises(ValueError, match="reads the plan signals of the upstream's graph stage"):
        served.fuse(scored, bare, name="grasp")
    # a bucket without tuning queries gets the static fit over all of them
    only = table.subset(np.flatnonzero(table.bucket == 0))
    pooled = search_static(only, ws=ws, ks=ks).best
    assert search_bucketed(only, 3, ws=ws, ks=ks).best["w_bucket"][1:] == [pooled["w"], pooled["w"]]
    with pytest.raises(ValueError, match="needs 3 w_bucket and rrf_k_bucket values"):
        RerankFusionSetting(w=0.0, rrf_k=1.0, bucket_edges=[0, 10], w_bucket=[0.1], rrf_k_bucket=[1.0])


def test_final_fusion_rules_are_the_four_searches_over_one_table():
    """`grasp tune rerank` and bench/reranker_kinds.py build the same rules for one reranker's ranking: static and
    bucketed, best cell and flattest region, named by prefix and depth, over one table with the graph buckets."""
    from grasp.fuse.dynamic import GRAPH_SIZE_EDGES
    from grasp.fuse.grid import cross_validate, search_bucketed
    from grasp.lab.tune import final_fusion_rules

    g, up, queries = random_runs(8, n_q=40)
    up = fused_from(g, up)
    rng = np.random.default_rng(3)
    scored = Run("reranker", {q: Ranking(q, rng.permutation(up[q].node_ids), np.linspace(1, 0, len(up[q])))
                              for q in up})
    rules = final_fusion_rules(scored, up, queries, depth=30, prefix="bi:")
    assert list(rules) == ["bi:static@30", "bi:static-flat@30", "bi:bucketed@30", "bi:bucketed-flat@30"]
    tables = {id(table) for table, _ in rules.values()}
    assert len(tables) == 1  # one table, four searches
    table = rules["bi:static@30"][0]
    assert table.bucket.tolist() == [bucket_of(g[q].signals.n_cand, GRAPH_SIZE_EDGES) for q in table.qids]
    assert rules["bi:static@30"][1](table).hit1 == pytest.approx(search_static(table).hit1)
    assert rules["bi:bucketed@30"][1](table).hit1 == pytest.approx(search_bucketed(table, 3).hit1)
    assert rules["bi:static-flat@30"][1](table).best == search_static(table, flat=True).best
    assert set(cross_validate(rules, n_folds=4)["cv"]) == set(rules)
