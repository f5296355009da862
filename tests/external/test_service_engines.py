"""No request to the REST service can write to a real graph database: Kùzu (embedded) and a Bolt server.

The planner is a fake endpoint (the one true external boundary here) that echoes the request's text into
the plan's relevance text, so a query written as Cypher travels with Stage 1's compiled query; the
graph's node and edge counts are read from the engine itself before and after."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from grasp import methods
from grasp.graph.compiler import CompiledQuery
from tests.conftest import BOLT_PASSWORD, write_toy
from tests.fake_llm import FakeChatServer

pytestmark = pytest.mark.slow

ATTACK = "x'}) MATCH (n) DETACH DELETE n WITH 1 AS x CREATE (:gene {id: 99, name: 'pwned'}) //"
PLAN = json.dumps({"anchors": [{"var": "C", "text": "chromosome 2", "label": "chromosome", "match_mode": "name"}],
                   "hops": [{"from": "C", "rel": "on_chromosome", "to_var": "T", "to_label": "gene"}],
                   "target": {"var": "T", "labels": ["gene"], "relevance_text": ATTACK},
                   "risk_level": "normal"})


def _size(engine) -> tuple[int, int]:
    nodes = engine.run(CompiledQuery("MATCH (n) RETURN count(n) AS id, 0.0 AS score"))[0]
    edges = engine.run(CompiledQuery("MATCH (a)-[r]->(b) RETURN count(r) AS id, 0.0 AS score"))[0]
    return int(nodes[0]), int(edges[0])


@pytest.fixture(params=["kuzu", "neo4j"])
def engine_overrides(request, tmp_path, monkeypatch):
    if request.param == "kuzu":
        return ["graph.engine=kuzu"], 0
    uri = request.getfixturevalue("bolt_server")
    monkeypatch.setenv("GRASP_TEST_BOLT_PASSWORD", BOLT_PASSWORD)
    return ["graph.engine=neo4j", f"graph.neo4j_uri={uri}", "graph.neo4j_user=root",
            "graph.neo4j_password_env=GRASP_TEST_BOLT_PASSWORD", "graph.neo4j_database=service"], 1  # + its marker


def test_no_request_can_write_to_the_graph_database(engine_overrides, tmp_path):
    engine_overrides, markers = engine_overrides
    from grasp.api import Searcher
    from grasp.config import load_config
    from grasp.service import create_app

    toy = write_toy(tmp_path / "toy")
    with FakeChatServer([PLAN]) as srv:
        overrides = [f"cache_dir={tmp_path / 'cache'}", "planner.kind=openai", "planner.format=flat", f"planner.base_url={srv.url}",
                     "planner.model=fake", "encoder.max_length=128", *engine_overrides]
        searcher = Searcher.open(toy, method="graph", config=load_config(None, overrides))
        engine = methods.retriever(searcher.workspace, "graph").engine
        before = _size(engine)
        assert before == (len(searcher.skb.names) + markers, int(searcher.skb.num_edges))
        client = TestClient(create_app(searcher))
        r = client.post("/search", json={"query": ATTACK, "k": 5, "explain": True})
        assert r.status_code == 200, r.text
        trace = r.json()["explain"]["stages"]["graph"]
        assert trace["plan_status"] == "valid" and trace["n_cand"] > 0  # the compiled query ran on the engine
        assert ATTACK not in trace["cypher"] and "DELETE" not in trace["cypher"]  # text is never spliced in
        assert _size(engine) == before
        assert {h["name"] for h in r.json()["hits"]} == {"SCN1A", "SCN2A", "KCNQ2"}  # the genes on chromosome 2
