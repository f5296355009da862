"""The README's main job on the bundled demo KB, from a fresh cache: every stage prepared (the
trained stages are pkg's, shipped in grasp/data/models/pkg), the full pipeline answering, and
the service's search on it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_demo_runs_the_full_pipeline(capsys):
    from grasp.cli import main
    from grasp.config import PlannerConfig
    from grasp.plan.build import local_planner_path
    from grasp.storage import cache_root

    main(["demo", "--examples", "1", "--no-fetch"])  # CI fetched the planner; elsewhere nothing is downloaded
    out = capsys.readouterr().out
    assert "62 test queries" in out
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[1] == "62":
            rows[cells[0]] = {"hit@1": float(cells[2]), "hit@5": float(cells[3]), "mrr": float(cells[5])}
    # floors one query (1.6 points) under the measurement of the 62 test queries (the 15-section slice,
    # pkg's settings tuned by cross-validation on its 300 validation queries, the zero-shot one with BM25 over the
    # pool, the trained one over grasp-zs; Stage 2 by confidence RRF): a regression of two queries in any stage, or the shipped plans no
    # longer hitting (every query no_trade), fails here
    measured = {"bm25": (37.1, 49.7), "dense": (22.6, 34.1), "mfar": (58.1, 69.5), "graph": (61.3, 62.3),
                "fused": (72.6, 79.7), "grasp-zs": (72.6, 80.3), "grasp": (71.0, 80.7)}
    for method, (hit1, mrr) in measured.items():
        assert method in rows, method
        assert rows[method]["hit@1"] >= hit1 - 1.7 and rows[method]["mrr"] >= mrr - 1.7, (method, rows[method])
    # what the demo shows a new user: fusion ahead of the graph alone and of BM25, each reranker ahead of what it
    # reranks at MRR (on these 62 queries the zero-shot reranker ties fusion at Hit@1 and the trained one over it
    # loses one rank-1 answer while lifting MRR: docs/experiments.md, "The demo")
    assert rows["fused"]["hit@1"] > rows["graph"]["hit@1"] > rows["bm25"]["hit@1"]
    # (at least as far: on a CPU that multiplies bfloat16 natively the two rerankers tie at MRR 80.0)
    assert rows["grasp"]["mrr"] >= rows["grasp-zs"]["mrr"] >= rows["fused"]["mrr"], rows
    assert "answered by the most complete prepared method (grasp)" in out
    assert "plan " in out and "graph weight" in out
    # the closing new question: planned live by the local model where it is on the machine, else said to be skipped
    live = out[out.index("a new question, planned live"):]
    if local_planner_path(PlannerConfig(), cache_root()).exists():
        assert "plan (made in" in live or "plan (cached by an earlier run" in live
        assert '"rel": "maintained_by"' in live and '"rel": "depends"' in live and "1. " in live
    else:
        assert "skipped: the planner model is not fetched" in live


def test_demo_searcher_explains(capsys):
    from grasp.api import Searcher

    searcher = Searcher.demo()
    assert searcher.method == "grasp"
    res = searcher.search("I remember Debian R Packages Maintainers packaging something about multidimensional analysis. What "
                          "is it?", k=5)  # a demo test query: its plan is shipped
    # the trained reranker stacks on the zero-shot one: both rerankers' rankings are kept, each under its own name
    assert list(res.explain["stages"]) == ["graph", "mfar", "fused", "grasp-zs", "reranker:grasp-zs", "reranker", "grasp"]
    graph = res.explain["stages"]["graph"]
    assert graph["plan"] is not None and graph["cypher"].startswith("MATCH")
    assert res.traces["graph"].cypher == graph["cypher"]  # the typed trace and its JSON agree
    assert all(set(h.stage_ranks) == {"graph", "mfar", "fused", "grasp-zs", "reranker:grasp-zs", "reranker", "final"}
               for h in res.hits)


def test_the_shipped_plan_caches_hit():
    """Every demo query and every bio/pkg test query replays a shipped plan in the default (nested) format, and so
    do the validation plans each shipped fusion setting was tuned on, bio's train plans (its reranker's fused training
    pools) and pkg's flat plans (the earlier baseline), so
    evaluation needs no LLM; a changed prompt or key fails here."""
    from grasp.config import load_config
    from grasp.packaged import DEMO_SKB
    from grasp.workspace import Workspace
    from tests.conftest import SHARED, skip_unless_ci

    expected = [(DEMO_SKB, "nested", {"test": 62})]
    if (SHARED / "data" / "skb").exists():
        expected += [(SHARED / "data" / "skb" / "bio", "nested", {"train": 900, "val": 300, "test": 300}),
                     (SHARED / "data" / "skb" / "pkg", "nested", {"train": 900, "val": 300, "test": 300}),
                     (SHARED / "data" / "skb" / "pkg", "flat", {"val": 100, "test": 300})]
    for path, plan_format, splits in expected:
        ws = Workspace.open(path, load_config(None, ["planner.kind=cache", f"planner.format={plan_format}"]), progress=False)
        for split, n in splits.items():
            hits = sum(ws.planner.cached(q.text) is not None for q in ws.queries(split=split))
            assert hits >= n, (path.name, plan_format, split, hits)
    if len(expected) == 1:
        skip_unless_ci("shared/data/skb not present: only the demo's plans were checked")
    # the four sampled plans (planner.samples = 5) of bio's first 27 validation queries, README's K table
    ws = Workspace.open(SHARED / "data" / "skb" / "bio", load_config(None, ["planner.kind=cache"]), progress=False)
    assert all(ws.planner.cached(q.text, i) is not None for q in ws.queries(split="val", limit=27) for i in range(1, 5))
