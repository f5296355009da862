"""The README's main job on the bundled demo KB, from a fresh cache: every stage prepared (the
trained stages are pkg's, shipped in grasp/data/models/pkg), the full pipeline answering, and
the service's search on it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_demo_runs_the_full_pipeline(capsys):
    from grasp.cli import main

    main(["demo", "--examples", "1"])
    out = capsys.readouterr().out
    assert "16 test queries" in out
    for method in ("bm25", "dense", "graph", "mfar", "fused", "grasp-zs", "grasp"):
        assert f"| {method} " in out, method
    assert "answered by the most complete prepared method (grasp)" in out
    assert "plan " in out and "graph weight" in out


def test_demo_searcher_explains(capsys):
    from grasp.api import Searcher

    searcher = Searcher.demo()
    assert searcher.method == "grasp"
    res = searcher.search("I remember Debian Python Team packaging something about specification models. What is it?", k=5)
    assert list(res.explain["stages"]) == ["graph", "mfar", "fused", "reranker", "grasp"]
    graph = res.explain["stages"]["graph"]
    assert graph["plan"] is not None and graph["cypher"].startswith("MATCH")
    assert res.traces["graph"].cypher == graph["cypher"]  # the typed trace and its JSON agree
    assert all(set(h.stage_ranks) == {"graph", "mfar", "fused", "reranker", "final"} for h in res.hits)
