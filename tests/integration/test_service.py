"""The REST service over a prepared toy SKB: search, health, schema, OpenAPI, and 4xx answers
that say what is wrong."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from grasp.service import create_app

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def client(prepared_toy):
    searcher, _ = prepared_toy
    return TestClient(create_app(searcher))


def test_search_with_and_without_explanations(client):
    r = client.post("/search", json={"query": "sodium channel genes on chromosome 2", "k": 2, "explain": True})
    assert r.status_code == 200
    body = r.json()
    assert body["method"] == "grasp-zs" and len(body["hits"]) == 2
    assert body["explain"]["stages"]["graph"]["cypher"].startswith("MATCH") and body["hits"][0]["stage_ranks"]["final"] == 1
    plain = client.post("/search", json={"query": "potassium channel"}).json()
    assert "explain" not in plain and len(plain["hits"]) <= 10


def test_health_schema_docs_and_page(client):
    h = client.get("/health").json()
    assert h["status"] == "ok" and h["kb"] == "toy" and h["methods"]["fused"] is None
    s = client.get("/schema").json()
    assert s["candidate_types"] == ["gene", "process"] and {"name": "is_a", "source": "process", "target": "process"} in s["relations"]
    assert "/search" in client.get("/openapi.json").json()["paths"]
    assert client.get("/docs").status_code == 200
    page = client.get("/")
    assert page.status_code == 200 and "GRASP inspector" in page.text


@pytest.mark.parametrize("payload, status, detail", [
    ({"query": ""}, 422, "query: String should have at least 1 character"),
    ({"query": "   "}, 422, "query is empty"),
    ({"query": "x" * 2001}, 422, "query: String should have at most 2000 characters"),
    ({"query": "a\u0000b"}, 422, "NUL"),
    ({"query": "sodium", "k": 0}, 422, "k: Input should be greater than or equal to 1"),
    ({"query": "sodium", "k": 1000}, 422, "k: Input should be less than or equal to 100"),
    ({"query": "sodium", "k": "many"}, 422, "k: Input should be a valid integer"),
    ({"k": 3}, 422, "query: Field required"),
    ({"query": ["a", "list"]}, 422, "query: Input should be a valid string"),
    ({"query": "sodium", "k": "5"}, 422, "k: Input should be a valid integer"),      # strict: never coerced
    ({"query": "sodium", "k": True}, 422, "k: Input should be a valid integer"),
    ({"query": "sodium", "k": 2.0}, 422, "k: Input should be a valid integer"),
    ({"query": "sodium", "explain": "yes"}, 422, "explain: Input should be a valid boolean"),
    ({"query": "sodium", "method": "bm25"}, 422, "method: Extra inputs are not permitted"),  # unknown: refused
])
def test_bad_requests_say_what_is_wrong(client, payload, status, detail):
    r = client.post("/search", json=payload)
    assert r.status_code == status and detail in r.json()["detail"]


def test_a_lone_surrogate_escape_is_refused(client):
    r = client.post("/search", content=b'{"query": "sodium \\ud800 channel"}', headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"].startswith("query: ")


def test_malformed_and_binary_bodies(client):
    r = client.post("/search", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "JSON" in r.json()["detail"]
    r = client.post("/search", content=b'{"query": "\xff\xfe binary"}', headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["detail"]  # not UTF-8: refused before parsing


def test_a_body_past_the_limit_gets_413_before_it_is_read(client):
    limit = 65536
    r = client.post("/search", content=b'{"query": "' + b"x" * (limit + 10) + b'"}',
                    headers={"content-type": "application/json"})
    assert r.status_code == 413 and "service.max_body_bytes" in r.json()["detail"]

    def chunks():  # no declared length: counted as it arrives
        yield b'{"query": "'
        for _ in range(100):
            yield b"x" * 1024
        yield b'"}'
    r = client.post("/search", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "service.max_body_bytes" in r.json()["detail"]
    assert client.post("/search", json={"query": "sodium", "k": 1}).status_code == 200


def test_no_request_can_write(client, prepared_toy):
    """A query that is a Cypher write reaches the graph only as a parameter: the graph is unchanged."""
    searcher, _ = prepared_toy
    skb = searcher.skb
    before = (len(skb.names), int(skb.num_edges))
    r = client.post("/search", json={"query": "MATCH (n) DETACH DELETE n; CREATE (x:gene {name: 'pwned'})"})
    assert r.status_code == 200
    assert (len(skb.names), int(skb.num_edges)) == before
    assert client.post("/search", json={"query": "pwned"}).json()["hits"][0]["name"] != "pwned"
    assert client.put("/search", json={"query": "x"}).status_code == 405


def test_streamed_search_announces_each_stage_then_answers(client):
    """The inspector's endpoint: NDJSON stage events while the pipeline runs, then the same answer as /search."""
    import json

    r = client.post("/search/stream", json={"query": "sodium channel genes on chromosome 2", "k": 2, "explain": True})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
    events = [json.loads(line) for line in r.text.splitlines() if line.strip()]
    stages = [e["stage"] for e in events if "stage" in e]
    assert stages[:3] == ["linking", "executing", "rescoring"] and stages[-2:] == ["fusing", "reranking"]
    final = events[-1]["result"]
    plain = client.post("/search", json={"query": "sodium channel genes on chromosome 2", "k": 2, "explain": True}).json()
    assert [h["node_id"] for h in final["hits"]] == [h["node_id"] for h in plain["hits"]]
    bad = client.post("/search/stream", json={"query": "", "k": 2})
    assert bad.status_code == 422


def test_new_questions_arriving_together_are_planned_in_one_batch(toy_dir, tmp_path):
    """Searches run one at a time, but their plans are made first on a pool of planning threads: new questions
    sent at once reach the torch engine together and are decoded as one batch (a tiny random-weight model stands
    in for the planner LLM, the service's external boundary); each search then finds its plan cached. The stream
    announces the planning first."""
    import json
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    pytest.importorskip("llguidance")
    from grasp.api import Searcher
    from grasp.config import load_config
    from grasp.plan.torch_llm import TorchChatClient
    from tests.tiny_llm import tiny_chat_model

    config = load_config(None, [f"cache_dir={tmp_path / 'cache'}", "graph.engine=memory", "encoder.max_length=128",
                                "planner.kind=openai", "planner.base_url=http://127.0.0.1:9/v1", "planner.workers=8",
                                "planner.format=flat", "planner.retries=0", "planner.max_tokens=96"])
    searcher = Searcher.open(toy_dir, method="graph", config=config)
    tokenizer, model = tiny_chat_model()
    llm = TorchChatClient(tokenizer, model, batch=8, model_id="tiny")
    sizes: list[int] = []
    decode, first = llm.generate, threading.Event()

    def recording(batch):
        sizes.append(len(batch))
        if not first.is_set():  # the first question holds the model a moment: the others arrive meanwhile
            first.set()
            time.sleep(0.5)
        return decode(batch)

    llm.generate = recording
    searcher.workspace.planner._client = llm  # the endpoint replaced by the in-process model
    client = TestClient(create_app(searcher))
    questions = ["genes on chromosome 2", "potassium channel genes", "a process of the heart", "sodium transport"]
    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = list(pool.map(lambda q: client.post("/search", json={"query": q, "k": 3}), questions))
    assert [a.status_code for a in answers] == [200] * 4
    assert sum(sizes) == 4 and max(sizes) >= 3, sizes  # one plan each, all but the first in one batch
    assert all(searcher.workspace.planner.cached(q) is not None for q in questions)
    r = client.post("/search/stream", json={"query": "genes of the sodium channel", "k": 2})
    stages = [json.loads(line).get("stage") for line in r.text.splitlines() if line.strip()]
    assert stages[0] == "planning" and sizes[-1] == 1
