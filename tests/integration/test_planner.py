"""The planner over a real HTTP client against a local fake endpoint: retries with the
validation error fed back, timeouts, non-JSON, unknown labels, injection attempts, caching."""

from __future__ import annotations

import json

import pytest

from grasp import methods
from grasp.plan.cache import PlanCache
from grasp.plan.llm import ChatClient, OpenAIChatClient
from grasp.plan.planner import Planner, PlanNotCached
from grasp.plan.prompt import PromptBuilder
from grasp.results import Query
from tests.fake_llm import FakeChatServer

GOOD = json.dumps({"anchors": [{"var": "C", "text": "chromosome 2", "label": "chromosome", "match_mode": "name"}],
                   "hops": [{"from": "C", "rel": "on_chromosome", "to_var": "T", "to_label": "gene"}],
                   "target": {"var": "T", "labels": ["gene"], "relevance_text": "sodium channel"},
                   "risk_level": "normal"})


def make_planner(skb, url, tmp_path, **kw):
    client = OpenAIChatClient(url, "fake-model", timeout_s=kw.pop("timeout_s", 5), retries=kw.pop("http_retries", 2))
    return Planner(skb, client, PlanCache(tmp_path / "plans.jsonl"), **kw)


def test_valid_plan_and_cache_hit(toy_skb, tmp_path):
    with FakeChatServer([GOOD]) as srv:
        planner = make_planner(toy_skb, srv.url, tmp_path)
        first = planner.plan("sodium channel genes on chromosome 2")
        assert first.check.status == "valid" and not first.cached
        body = srv.requests[0]
        assert body["response_format"]["type"] == "json_schema"
        assert body["temperature"] == 0 and body["messages"][0]["role"] == "system"
        again = planner.plan("sodium channel genes on chromosome 2")
        assert again.cached and len(srv.requests) == 1
    # a new process, the same cache file: no LLM needed at all
    replay = Planner(toy_skb, None, PlanCache(tmp_path / "plans.jsonl"), model_id="fake-model")
    assert replay.plan("sodium channel genes on chromosome 2").check.plan == first.check.plan
    with pytest.raises(PlanNotCached, match="no cached plan"):
        replay.plan("another query")
    lenient = Planner(toy_skb, None, PlanCache(tmp_path / "plans.jsonl"), model_id="fake-model", on_miss="no_trade")
    miss = lenient.plan("another query")
    assert miss.check.plan.risk_level == "no_trade" and not miss.check.usable and not miss.cached


def test_non_json_then_fixed_after_feedback(toy_skb, tmp_path):
    with FakeChatServer(["Sure, here are genes: SCN1A", GOOD]) as srv:
        out = make_planner(toy_skb, srv.url, tmp_path, retries=1).plan("q")
        assert out.check.status == "valid" and out.attempts == 2
        feedback = srv.requests[1]["messages"][-1]["content"]
        assert "invalid" in feedback and "no JSON object" in feedback


def test_unknown_label_exhausts_retries_and_degrades(toy_skb, tmp_path):
    bad = GOOD.replace('"chromosome", "match_mode"', '"organelle", "match_mode"')
    with FakeChatServer([bad]) as srv:
        out = make_planner(toy_skb, srv.url, tmp_path, retries=2).plan("q")
        assert len(srv.requests) == 3
    assert out.check.status == "rejected" and "unknown label 'organelle'" in out.check.reason
    assert out.check.plan.risk_level == "no_trade"


def test_timeout_is_an_error_not_a_hang(toy_skb, tmp_path):
    with FakeChatServer([("sleep", 3)]) as srv:
        out = make_planner(toy_skb, srv.url, tmp_path, timeout_s=0.5, http_retries=2).plan("q")
    assert out.check.status == "rejected" and out.error and "failed after 2 tries" in out.error


def test_server_errors_are_retried(toy_skb, tmp_path):
    with FakeChatServer([("status", 503), GOOD]) as srv:
        out = make_planner(toy_skb, srv.url, tmp_path).plan("q")
    assert out.check.status == "valid"


def test_injection_in_string_fields_stays_data(toy_skb, tmp_path):
    import numpy as np

    from grasp.graph.compiler import CypherNames, compile_plan
    from grasp.graph.linking import Binding

    evil = GOOD.replace("chromosome 2", r'2\"}) MATCH (n) DETACH DELETE n //').replace(
        "sodium channel", "'; DROP TABLE gene; --")
    with FakeChatServer([evil]) as srv:
        out = make_planner(toy_skb, srv.url, tmp_path).plan("q")
    assert out.check.usable
    q = compile_plan(out.check.plan, {"C": Binding("C", np.array([7]), np.array([0.9]))}, CypherNames(toy_skb.schema))
    assert "DELETE" not in q.cypher and "DROP" not in q.cypher


def test_injection_in_label_is_rejected(toy_skb, tmp_path):
    evil = GOOD.replace('"to_label": "gene"', '"to_label": "gene) DETACH DELETE (n"')
    with FakeChatServer([evil]) as srv:
        out = make_planner(toy_skb, srv.url, tmp_path, retries=0).plan("q")
    assert out.check.status == "rejected" and "unknown label" in out.check.reason


def test_prompt_is_built_from_the_schema_and_stable(toy_skb):
    b = PromptBuilder(toy_skb)
    system = b.system
    for name in ("gene", "process", "chromosome", "involved_in", "on_chromosome", "is_a", "B3GALT6"):
        assert name in system
    assert "## Fusion overlay allocator" in system and "risk_level" in system
    assert PromptBuilder(toy_skb).hash == b.hash
    assert b.messages("which genes?")[1]["content"].startswith("Query: which genes?")


def test_graph_method_end_to_end(toy_dir, tmp_path, capsys):
    """`grasp plan` and `grasp eval --method graph` through a fake endpoint, on both engines."""
    from grasp.cli import main

    with FakeChatServer([GOOD]) as srv:
        for engine in ("kuzu", "memory"):
            base = ["-q", "--cache-dir", str(tmp_path / "c"), "--set", "planner.kind=openai", "--set", "planner.format=flat",
                    "--set", f"planner.base_url={srv.url}", "--set", "planner.model=fake",
                    "--set", f"graph.engine={engine}"]
            main([*base, "plan", "sodium channel genes on chromosome 2", "--skb", str(toy_dir), "--json"])
            captured = capsys.readouterr().out
            assert captured.startswith("{"), captured[:300]
            trace = json.loads(captured)
            assert trace["n_cand"] == 3 and trace["plan_status"] == "valid" and trace["engine"] == engine
            assert {r["name"] for r in trace["results"][:2]} == {"SCN1A", "SCN2A"}  # rescored by "sodium channel"
            assert "MATCH" in trace["cypher"] and trace["bindings"][0]["bindings"][0]["name"] == "chromosome 2"
            out = tmp_path / f"{engine}.json"
            main([*base, "eval", "--skb", str(toy_dir), "--method", "graph", "--output-json", str(out)])
            assert "| graph | 4 |" in capsys.readouterr().out
            rep = json.loads(out.read_text())
            # the one scripted plan answers query 1 at rank 1 and query 3 (KCNQ2) at rank 3, on both engines
            assert (rep["n"], rep["hit@1"], rep["hit@5"]) == (4, 0.25, 0.5) and rep["mrr"] == pytest.approx(1 / 3)
        assert len(srv.requests) == 4  # one LLM call per distinct query; the second engine replayed the cache


@pytest.mark.parametrize("dataset", ["amazon", "mag", "prime"])
def test_stark_prompts_without_the_graph(dataset):
    """STaRK's schema alone is enough to build the prompt; its worked examples are valid plans."""
    from grasp.plan.prompt import load_examples
    from grasp.plan.validate import check_plan
    from grasp.skb import SKB
    from grasp.skb.stark import stark_schema

    schema = stark_schema(dataset)
    builder = PromptBuilder(SKB.schema_only(schema))
    assert builder.retrieval_mode == (dataset == "amazon")
    guidance = {"amazon": "retrieval_mode", "mag": "Metapath templates", "prime": "biomedical"}[dataset]
    assert guidance in builder.system
    examples = load_examples(f"stark-{dataset}")
    assert len(examples) >= 4
    for ex in examples:
        assert check_plan(ex.plan, schema).status == "valid", ex.qid
        assert ex.query in builder.system


def test_examples_drawn_from_train_split(toy_dir, tmp_path, capsys):
    """Zero-shot plans that retrieve their gold become the prompt's worked examples."""
    from grasp.cli import main
    from grasp.config import load_config
    from grasp.workspace import Workspace

    with FakeChatServer([GOOD]) as srv:
        base = ["-q", "--cache-dir", str(tmp_path / "c"), "--set", "planner.kind=openai", "--set", "planner.format=flat",
                "--set", f"planner.base_url={srv.url}", "--set", "planner.model=fake", "--set", "graph.engine=memory"]
        main([*base, "plans", "examples", "--skb", str(toy_dir), "--split", "test"])
        assert "1 examples" in capsys.readouterr().out  # query 1 (genes on chromosome 2) retrieves its gold
        cfg = load_config(None, [a for a in base[4:] if a != "--set"])
        ws = Workspace.open(toy_dir, cfg.model_copy(update={"cache_dir": tmp_path / "c"}), progress=False)
        assert "Query: sodium channel genes on chromosome 2" in ws.planner.builder.system


class _QueryEchoClient:
    """An in-process stand-in for the LLM (the external boundary): each query gets its own plan, the
    relevance text copied from the query; it records how many calls were in flight at once."""

    model_id = "echo"

    def __init__(self, concurrency: int, delay: float = 0.05) -> None:
        import threading

        self.concurrency, self.delay = concurrency, delay
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()

    def chat(self, messages, *, json_schema=None, max_tokens=512, temperature=0.0, seed=None) -> str:
        import time

        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        time.sleep(self.delay)
        with self._lock:
            self.in_flight -= 1
        import re

        plan = json.loads(GOOD)
        plan["target"]["relevance_text"] = re.search(r"function number \d+", messages[-1]["content"]).group(0)
        return json.dumps(plan)


def test_parallel_planning_gives_the_serial_plans(toy_skb, tmp_path):
    """plan_many keeps the client's slots full (as many calls in flight as it serves) and returns, in
    query order, exactly the plans that planning one query at a time returns."""
    from grasp.plan.llm import ChatClient
    from grasp.skb import Query

    ChatClient.register(_QueryEchoClient)
    queries = [Query(str(i), f"genes on chromosome 2 with function number {i}") for i in range(12)]
    serial_client, parallel_client = _QueryEchoClient(1), _QueryEchoClient(4)
    serial = Planner(toy_skb, serial_client, PlanCache(tmp_path / "a.jsonl")).plan_many(queries, progress=False)
    parallel = Planner(toy_skb, parallel_client, PlanCache(tmp_path / "b.jsonl")).plan_many(queries, progress=False)
    assert serial_client.max_in_flight == 1 and parallel_client.max_in_flight == 4
    assert list(parallel) == [q.qid for q in queries]
    assert [o.check.plan.dump() for o in parallel.values()] == [o.check.plan.dump() for o in serial.values()]
    assert parallel["3"].check.plan.target.relevance_text == "function number 3"
    # a second pass is all cache hits: no call at all
    again = Planner(toy_skb, _QueryEchoClient(4), PlanCache(tmp_path / "b.jsonl"))
    assert all(o.cached for o in again.plan_many(queries, progress=False).values())
    assert again._client.max_in_flight == 0


class _ScriptedClient(ChatClient):
    """The LLM boundary as a script: each query text gets its scripted reply."""

    model_id = "scripted"
    concurrency = 1

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies

    def chat(self, messages, *, json_schema=None, max_tokens=512, temperature=0.0, seed=None) -> str:
        return self.replies[messages[-1]["content"].split("Query: ")[1].split("\n")[0]]


def test_plans_report_judges_plans_by_execution(toy_dir, tmp_path):
    """Statuses, rejection kinds, gold among the executed candidates and graph-only Hit@1, overall and per
    template, as the toy's four scripted plans determine them."""
    from grasp.config import load_config
    from grasp.lab.plan_outcomes import plans_report, reason_kind, report_markdown
    from grasp.skb import read_queries
    from grasp.workspace import Workspace

    cfg = load_config(None, [f"cache_dir={tmp_path / 'c'}", "graph.engine=memory", "encoder.max_length=128"])
    ws = Workspace.open(toy_dir, cfg, progress=False)
    self_loop = json.dumps({"anchors": [{"var": "T", "text": "sodium", "label": "gene", "match_mode": "name"}],
                            "hops": [{"from": "T", "rel": "is_a", "to_var": "T", "to_label": "gene"}],
                            "target": {"var": "T", "labels": ["gene"], "relevance_text": ""}, "risk_level": "normal"})
    empty = json.dumps({"anchors": [], "hops": [], "target": {"var": "T", "labels": ["process"], "relevance_text": ""},
                        "risk_level": "weak"})
    queries = read_queries(toy_dir / "qa" / "queries.jsonl")
    script = dict(zip([q.text for q in queries], [GOOD, self_loop, empty, GOOD], strict=True))
    ws.planner = Planner(ws.skb, _ScriptedClient(script), PlanCache(tmp_path / "p.jsonl"), retries=0,
                         builder=PromptBuilder(ws.skb))
    report = plans_report(ws, queries)
    rows = {r["group"]: r for r in report["rows"]}
    assert list(rows) == ["all", "gene_text", "gene_chr", "go_def"]
    assert {k: rows["all"][k] for k in ("n", "usable", "rejected", "empty")} == {"n": 4, "usable": 0.5, "rejected": 0.25,
                                                                                 "empty": 0.25}
    # q0 (B3GALT6, chromosome 1) is not on chromosome 2; q3's KCNQ2 is, ranked third behind the sodium genes
    assert rows["gene_text"]["gold_in_candidates"] == 0.5 and rows["all"]["hit@1"] == 0.0
    assert rows["gene_text"]["mrr"] == pytest.approx(1 / 6)
    assert report["reject_reasons"] == {"hop V->V links a variable to itself": 1}
    # the usable plans' anchor "chromosome 2" is a node's name; rejected and empty plans link nothing
    assert [r["link_confidence"] for r in report["per_query"]] == [1.0, None, None, 1.0]
    assert reason_kind("variable T is 'gene' in one place and 'tag' in hop A1->T") == (
        "variable V is … in one place and … in hop V->V")
    assert "| gene_text | 2 | 100.0 |" in report_markdown(report)


class _SeededClient(ChatClient):
    """The LLM boundary for sampled plans: the reply depends on the seed (None: the greedy plan)."""

    model_id = "seeded"
    concurrency = 2

    def __init__(self, replies: dict) -> None:
        self.replies, self.calls = replies, []

    def chat(self, messages, *, json_schema=None, max_tokens=512, temperature=0.0, seed=None) -> str:
        self.calls.append((temperature, seed))
        return self.replies[seed]


def _plan(anchor: str, label: str, rel: str, risk: str = "normal") -> str:
    return json.dumps({"anchors": [{"var": "A", "text": anchor, "label": label, "match_mode": "name"}],
                       "hops": [{"from": "A", "rel": rel, "to_var": "T", "to_label": "gene"}],
                       "target": {"var": "T", "labels": ["gene"], "relevance_text": ""}, "risk_level": risk})


@pytest.mark.parametrize("second, agreement, risk, top", [
    # the sampled plan reaches the two sodium genes the greedy plan also reaches: they rise, the risk stays
    (("sodium ion transport", "process", "involved_in"), 2 / 3, "normal", {1, 8}),
    # it reaches another gene entirely: the plans disagree, the risk level drops a step
    (("glycosaminoglycan biosynthesis", "process", "involved_in"), 0.0, "weak", None),
])
def test_execution_guided_planning_fuses_the_sampled_plans(toy_dir, tmp_path, second, agreement, risk, top):
    from grasp.config import load_config
    from grasp.workspace import Workspace

    cfg = load_config(None, [f"cache_dir={tmp_path / 'c'}", "graph.engine=memory", "encoder.max_length=128",
                             "graph.rescore=false"])
    ws = Workspace.open(toy_dir, cfg, progress=False)
    client = _SeededClient({None: _plan("chromosome 2", "chromosome", "on_chromosome"), 14: _plan(*second),
                            15: "not a plan"})
    ws.planner = Planner(ws.skb, client, PlanCache(tmp_path / "p.jsonl"), retries=0, builder=PromptBuilder(ws.skb),
                         samples=3, temperature=0.7, seed=13)
    from grasp.results import Query

    q = Query("1", "sodium channel genes on chromosome 2", [1, 8])
    ranking = methods.retriever(ws, "graph").batch_search([q])["1"]
    assert sorted(client.calls) == [(0.0, None), (0.7, 14), (0.7, 15)]  # one greedy call, two sampled
    t = ranking.trace
    assert [s["status"] for s in t.samples] == ["valid", "valid", "rejected"]
    assert t.agreement == pytest.approx(agreement, abs=1e-4) and t.risk_level == risk
    assert t.plan["anchors"][0]["text"] == "chromosome 2"  # the greedy plan is shown on a tie
    if top is not None:
        assert set(ranking.node_ids[:2].tolist()) == top and t.n_cand == 3
    again = methods.retriever(ws, "graph").batch_search([q])["1"]  # every sample is cached: no new call
    assert len(client.calls) == 3 and again.node_ids.tolist() == ranking.node_ids.tolist()


@pytest.mark.parametrize("anchor, label, confidence, risk", [
    ("Chr 2", "chromosome", 1.0, "normal"),              # an abbreviation: every word is in "chromosome 2"
    ("sodium ion transport", "process", 1.0, "normal"),  # the node's own name
    # a description bound as a gene name: its best gene matches it poorly, the plan counts a risk level lower
    ("a pigment made of small molecules", "gene", None, "weak"),
])
def test_a_plan_whose_anchor_names_no_node_is_riskier(toy_dir, tmp_path, anchor, label, confidence, risk):
    """Stage 1 records how well the weakest name anchor names its node (cosine, or 1 when the node's name holds
    every word of the anchor); below a fusion setting's link_floor the plan counts one risk level lower (and
    its graph weight with it), while the candidates stay and floor 0 changes nothing."""
    from grasp.config import load_config
    from grasp.fuse.retriever import FusionSetting
    from grasp.graph.retriever import plan_signals
    from grasp.results import Query
    from grasp.workspace import Workspace

    rel = {"chromosome": "on_chromosome", "process": "involved_in"}.get(label)
    cfg = load_config(None, [f"cache_dir={tmp_path / 'c'}", "graph.engine=memory", "encoder.max_length=128"])
    ws = Workspace.open(toy_dir, cfg, progress=False)
    reply = _plan(anchor, label, rel) if rel else json.dumps({
        "anchors": [{"var": "A", "text": anchor, "label": "gene", "match_mode": "name"}],
        "hops": [{"from": "A", "rel": "involved_in", "to_var": "T", "to_label": "process"}],
        "target": {"var": "T", "labels": ["process"], "relevance_text": ""}, "risk_level": "normal"})
    ws.planner = Planner(ws.skb, _SeededClient({None: reply}), PlanCache(tmp_path / "p.jsonl"), retries=0,
                         builder=PromptBuilder(ws.skb))
    ranking = methods.retriever(ws, "graph").batch_search([Query("1", "q", [1])])["1"]
    t = ranking.trace
    assert t.plan_status == "valid" and t.n_cand > 0 and t.risk_level == "normal"
    if confidence is not None:
        assert t.link_confidence == confidence
    else:
        assert 0 < t.link_confidence < 0.9
    assert plan_signals(ranking, 0.9) == (t.n_cand, risk) and plan_signals(ranking) == (t.n_cand, "normal")
    setting = FusionSetting("dynamic", 5.0, w_bucket=[1.0] * 5, m_risk={"no_trade": 0.0, "weak": 0.5, "normal": 1.0,
                                                                        "aggressive": 1.0}, link_floor=0.9)
    assert setting.graph_weight(ranking) == (0.5 if risk == "weak" else 1.0)


def test_link_confidence_reads_words_and_cosines():
    import numpy as np

    from grasp.graph.linking import Binding, link_confidence, match_quality, words_contained
    from grasp.plan.model import Anchor

    assert words_contained("Chr 22", "chromosome 22") and words_contained("b3galt6", "B3GALT6")
    assert not words_contained("chromosome 2", "chromosome 22") and not words_contained("", "x")
    assert not words_contained("pigments products", "CAPRIN2")
    assert match_quality("nucleoplasm", "NUBPL", 0.416) == 0.416 and match_quality("Chr 2", "chromosome 2", 0.4) == 1.0
    names = ["CAPRIN2", "chromosome 22", "defense response"]
    anchors = [Anchor(var="A", text="Chr 22", label="chromosome"), Anchor(var="B", text="pigments", label="gene"),
               Anchor(var="D", text="defense response to injury", label="process", match_mode="doc")]
    bindings = {"A": Binding("A", np.array([1]), np.array([0.47])), "B": Binding("B", np.array([0]), np.array([0.31])),
                "D": Binding("D", np.array([2]), np.array([0.2]))}
    assert link_confidence(anchors, bindings, names) == pytest.approx(0.31)  # doc-mode anchors are not judged
    assert link_confidence(anchors[:1], bindings, names) == 1.0
    assert link_confidence(anchors[1:2], {"B": Binding("B", np.array([], dtype=np.int64), np.array([]))}, names) == 0.0
    assert link_confidence(anchors[2:], bindings, names) is None


def test_an_engine_failure_degrades_that_query_alone(toy_dir, tmp_path):
    """A query the engine refuses gets no graph candidates, no_trade and the error in its trace; the batch goes on."""
    from grasp.config import load_config
    from grasp.errors import GraspError
    from grasp.graph.memory import MemoryExecutor
    from grasp.lab.plan_outcomes import plans_report
    from grasp.results import Query
    from grasp.workspace import Workspace

    class Refusing(MemoryExecutor):  # fault injection: the engine refuses plans anchored at "chromosome 1"
        def execute(self, plan, bindings, compiled=None):
            if any(a.text == "chromosome 1" for a in plan.anchors):
                raise GraspError("Kùzu rejected the compiled query: Binder exception")
            return super().execute(plan, bindings, compiled)

    cfg = load_config(None, [f"cache_dir={tmp_path / 'c'}", "graph.engine=memory", "encoder.max_length=128"])
    ws = Workspace.open(toy_dir, cfg, progress=False)
    queries = [Query("a", "genes on chromosome 1", [0]), Query("b", "sodium channel genes on chromosome 2", [1, 8])]
    ws.planner = Planner(ws.skb, _ScriptedClient({"genes on chromosome 1": _plan("chromosome 1", "chromosome", "on_chromosome"),
                                                  "sodium channel genes on chromosome 2": GOOD}),
                         PlanCache(tmp_path / "p.jsonl"), retries=0, builder=PromptBuilder(ws.skb))
    graph = methods.retriever(ws, "graph")
    graph.engine = Refusing(ws.skb)
    run = graph.batch_search(queries)
    assert len(run["a"]) == 0 and run["a"].trace.risk_level == "no_trade" and "Binder" in run["a"].trace.error
    assert len(run["b"]) == 3 and run["b"].trace.error is None
    assert plans_report(ws, queries)["rows"][0]["failed"] == 0.5


def test_a_server_without_structured_output_is_named_once(toy_skb, tmp_path):
    """The schema is dropped for the rest of the client's life when the server refuses it, and the user is told."""
    refusal = ("status", 400, '{"error": "unsupported parameter: response_format"}')
    with FakeChatServer([refusal, GOOD]) as srv:
        planner = make_planner(toy_skb, srv.url, tmp_path)
        with pytest.warns(UserWarning, match="refuses JSON-schema structured output"):
            out = planner.plan("sodium channel genes on chromosome 2")
        assert out.check.status == "valid" and "response_format" in srv.requests[0]
        assert "response_format" not in srv.requests[1] and not planner.client.structured
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no second warning: the client no longer asks
            planner.plan("potassium channel")
        assert "response_format" not in srv.requests[2]


def test_plans_import_replays_plans_made_elsewhere(toy_dir, tmp_path, capsys):
    """`grasp plans import`: plans made elsewhere (flat or nested) are cached under the configured planner's key
    and replayed with no LLM; a rejected plan imports nothing unless --skip-rejected; bad lines name file and line."""
    from grasp.cli import main
    from grasp.config import GraspConfig
    from grasp.workspace import Workspace

    nested = {"target": {"label": "gene", "via": [{"rel": "involved_in", "node": {
        "label": "process", "anchor": {"text": "sodium ion transport", "match_mode": "name"}}}], "relevance_text": ""}}
    bad = {"anchors": [{"var": "T", "text": "x", "label": "gene"}], "hops": [{"from": "T", "rel": "is_a", "to_var": "T",
                                                                              "to_label": "gene"}]}
    good_file = tmp_path / "plans.jsonl"
    good_file.write_text(json.dumps({"query": "genes on chromosome 2", "plan": json.loads(GOOD)}) + "\n"
                         + json.dumps({"query": "genes in sodium ion transport", "plan": nested}) + "\n")
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(good_file.read_text() + json.dumps({"query": "broken", "plan": bad}) + "\n")
    base = ["-q", "--cache-dir", str(tmp_path / "c"), "--set", "planner.kind=cache"]
    with pytest.raises(SystemExit) as e:
        main([*base, "plans", "import", str(mixed), "--skb", str(toy_dir)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"{mixed}:3: rejected" in err and "1 of 3 plans rejected; nothing imported" in err
    ws = Workspace.open(toy_dir, GraspConfig(cache_dir=tmp_path / "c", planner={"kind": "cache"}), progress=False)
    assert ws.planner.cached("genes on chromosome 2") is None  # nothing imported
    main([*base, "plans", "import", str(mixed), "--skb", str(toy_dir), "--skip-rejected"])
    assert "imported 2 plans" in capsys.readouterr().out
    ws = Workspace.open(toy_dir, GraspConfig(cache_dir=tmp_path / "c", planner={"kind": "cache"}), progress=False)
    hit = ws.planner.cached("genes on chromosome 2")
    assert hit.check.status == "valid" and hit.check.plan.anchors[0].text == "chromosome 2"
    ranking = methods.retriever(ws, "graph").search_query(Query("q", "genes in sodium ion transport", [], None, None), 10)
    assert set(ranking.node_ids.tolist()) == {1, 8}  # SCN1A and SCN2A are involved in sodium ion transport
    lines = ws.planner.cache.writable.read_text().count("\n")
    main([*base, "plans", "import", str(good_file), "--skb", str(toy_dir)])
    assert ws.planner.cache.writable.read_text().count("\n") == lines  # the same plans again append nothing
    (tmp_path / "broken.jsonl").write_text('{"query": "q", "plan": {}}\n{"query": ""}\n')
    with pytest.raises(SystemExit):
        main([*base, "plans", "import", str(tmp_path / "broken.jsonl"), "--skb", str(toy_dir)])
    assert "broken.jsonl:2: field 'query': missing or empty query text" in capsys.readouterr().err


def test_a_bank_of_verified_plans_gives_each_query_its_nearest_examples(tmp_path, capsys):
    """`grasp plans bank` keeps the train plans whose execution reaches gold (never a test query's); with
    planner.bank the nearest banked questions are shown after the shared system prompt, and the plan is cached
    under a key of its own."""
    from grasp.cli import main
    from grasp.config import load_config
    from grasp.plan.bank import PlanBank
    from grasp.workspace import Workspace
    from tests.conftest import QUERIES, write_toy

    queries = [{**q, "split": "train"} if q["id"] in (1, 2) else q for q in QUERIES]
    queries.append({"id": 4, "query": "which genes on chromosome 2 are potassium channels", "answer_ids": [2],
                    "template": "gene_chr", "split": "train"})
    toy = write_toy(tmp_path / "toy", queries=queries)
    with FakeChatServer([GOOD]) as srv:
        sets = ["planner.kind=openai", "planner.format=flat", f"planner.base_url={srv.url}", "planner.model=fake",
                "graph.engine=memory", f"cache_dir={tmp_path / 'c'}"]
        base = ["-q", *[x for s in sets for x in ("--set", s)]]
        main([*base, "plans", "bank", "--skb", str(toy)])
        out = capsys.readouterr().out
        # the GOOD plan (genes on chromosome 2) reaches the gold of queries 1 and 4, not query 2's process
        assert "2 plans (1 shapes)" in out and "2 of 3 train plans reached a gold answer" in out
        ws = Workspace.open(toy, load_config(None, [*sets, "planner.bank=true", "planner.bank_k=1"]), progress=False)
        bank = PlanBank.load(ws.cache_dir)
        assert sorted(e.qid for e in bank.entries) == ["1", "4"] and bank.provenance["gold_not_reached"] == 1
        assert {e.gold_rank for e in bank.entries} <= {1, 2, 3}
        plain = Workspace.open(toy, load_config(None, sets), progress=False)
        planner = ws.planner
        assert planner.nearest is not None and planner.key("genes on chromosome 1") != plain.planner.key(
            "genes on chromosome 1")
        n = len(srv.requests)
        planner.plan("sodium channel genes on chromosome 1")
        planner.plan("sodium channel genes on chromosome 1")  # cached
        assert len(srv.requests) == n + 1
        system, user = (m["content"] for m in srv.requests[-1]["messages"])
        bare = Workspace.open(toy, load_config(None, [*sets, "planner.examples=none"]), progress=False)
        assert system == bare.planner.builder.system  # the shared prefix: the schema, no static examples
        assert "Solved questions like this one" in user and user.count("Query: ") == 2
        assert "Query: sodium channel genes on chromosome 2" in user  # the nearest banked question
        assert "galactosyltransferase" not in user  # a test query is never banked
        with pytest.raises(SystemExit):
            main([*base, "plans", "bank", "--skb", str(toy), "--split", "test"])
        assert "never enters a bank" in capsys.readouterr().err
    # static examples (here: drawn from the train split) leave the shared prompt for the nearest ones, unless kept
    from grasp.plan.examples import write_examples
    from grasp.plan.prompt import Example

    write_examples([Example("2", "movement of sodium ions", json.loads(GOOD))], ws.examples_path)
    with_bank = Workspace.open(toy, load_config(None, [*sets, "planner.bank=true"]), progress=False).planner
    kept = Workspace.open(toy, load_config(None, [*sets, "planner.bank=true", "planner.bank_keep_static=true"]),
                          progress=False).planner
    without = Workspace.open(toy, load_config(None, sets), progress=False).planner
    assert "Query: movement of sodium ions" in without.builder.system
    assert "Query: movement of sodium ions" not in with_bank.builder.system
    assert "Query: movement of sodium ions" in kept.builder.system and kept.nearest is not None


class _ConversationClient(ChatClient):
    """The LLM boundary for re-planning: replies in order, each request's messages kept."""

    model_id = "scripted"
    concurrency = 1

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.requests = replies, []

    def chat(self, messages, *, json_schema=None, max_tokens=512, temperature=0.0, seed=None) -> str:
        self.requests.append(messages)
        return self.replies[len(self.requests) - 1]


EMPTY_PLAN = json.dumps({"anchors": [{"var": "A", "text": "glycosaminoglycan biosynthesis", "label": "process",
                                      "match_mode": "name"}],
                         "hops": [{"from": "A", "rel": "is_a", "to_var": "T", "to_label": "process", "dir": "forward"}],
                         "target": {"var": "T", "labels": ["process"], "relevance_text": ""}, "risk_level": "normal"})


@pytest.mark.parametrize("replan, second, kept", [
    ("empty", _plan("chromosome 2", "chromosome", "on_chromosome"), True),  # the new plan finds the genes: kept
    ("empty", EMPTY_PLAN.replace("glycosaminoglycan biosynthesis", "ion transport"), False),  # nothing again
    ("off", None, False),
])
def test_a_plan_that_returned_nothing_is_made_again_with_what_execution_found(toy_dir, tmp_path, replan, second, kept):
    """graph.replan: the first plan (a process with no is_a parent) returns nothing; the planner is asked once
    more with the conversation so far and the execution's feedback (the anchors' links); the new plan is kept only
    when it returns candidates, and it is cached under that feedback, so a replay asks nothing."""
    from grasp.config import load_config
    from grasp.workspace import Workspace

    cfg = load_config(None, [f"cache_dir={tmp_path / 'c'}", "graph.engine=memory", "encoder.max_length=128",
                             f"graph.replan={replan}"])
    ws = Workspace.open(toy_dir, cfg, progress=False)
    client = _ConversationClient([EMPTY_PLAN, *([second] if second else [])])
    ws.planner = Planner(ws.skb, client, PlanCache(tmp_path / "p.jsonl"), retries=0, builder=PromptBuilder(ws.skb))
    q = Query("1", "sodium channel genes on chromosome 2", [1, 8])
    ranking = methods.retriever(ws, "graph").batch_search([q])["1"]
    t = ranking.trace
    if replan == "off":
        assert len(client.requests) == 1 and len(ranking) == 0 and t.replan is None
        return
    assert len(client.requests) == 2
    followup = client.requests[1]
    assert followup[:-2] == client.requests[0] and followup[-2] == {"role": "assistant", "content": EMPTY_PLAN}
    feedback = followup[-1]["content"]
    assert feedback.startswith("Executed on the graph, that plan returned no nodes.")
    assert "'glycosaminoglycan biosynthesis' -> the process named 'glycosaminoglycan biosynthesis'" in feedback
    assert t.replan["first_n_cand"] == 0 and t.replan["kept"] is kept and t.replan["feedback"] in feedback
    if kept:
        assert t.replan["n_cand"] == 3 and t.plan["anchors"][0]["text"] == "chromosome 2"
        assert set(ranking.node_ids.tolist()) == {1, 2, 8} and t.n_cand == 3
    else:
        assert t.replan["n_cand"] == 0 and len(ranking) == 0 and t.plan["anchors"][0]["text"].startswith("glycos")
    replay = Planner(ws.skb, None, PlanCache(tmp_path / "p.jsonl"), model_id="scripted", builder=PromptBuilder(ws.skb),
                     on_miss="no_trade")
    ws.planner = replay
    again = methods.retriever(ws, "graph").batch_search([q])["1"]  # both plans cached: the same answer, no LLM
    assert again.node_ids.tolist() == ranking.node_ids.tolist() and again.trace.replan["cached"] is True


@pytest.mark.parametrize("query_weight, lexical_weight", [(0.0, 0.0), (0.1, 0.0), (0.1, 0.75)])
def test_the_query_orders_the_candidates_a_plan_leaves_tied(toy_dir, tmp_path, query_weight, lexical_weight):
    """A plan with no relevance text scores every gene on chromosome 2 alike (one anchor): with graph.query_weight 0
    they stay in id order; above 0 each gains query_weight x its match with the query (the dense cosine, plus
    lexical_weight x its BM25 score over the candidates' best), so the potassium channel the query asks for comes
    first."""
    import numpy as np

    from grasp.config import load_config
    from grasp.results import Query
    from grasp.workspace import Workspace

    cfg = load_config(None, [f"cache_dir={tmp_path / 'c'}", "graph.engine=memory", "encoder.max_length=128",
                             f"graph.query_weight={query_weight}", f"graph.lexical_weight={lexical_weight}"])
    ws = Workspace.open(toy_dir, cfg, progress=False)
    ws.planner = Planner(ws.skb, _SeededClient({None: _plan("chromosome 2", "chromosome", "on_chromosome")}),
                         PlanCache(tmp_path / "p.jsonl"), retries=0, builder=PromptBuilder(ws.skb))
    graph = methods.retriever(ws, "graph")
    text = "potassium channel genes on chromosome 2"
    ranking = graph.batch_search([Query("3", text, [2])])["3"]
    ids = ranking.node_ids.tolist()
    assert sorted(ids) == [1, 2, 8]  # SCN1A, KCNQ2, SCN2A: the genes on chromosome 2
    anchor = pytest.approx(1.0, abs=1e-4)  # "chromosome 2" is the node's own name: its cosine
    if query_weight == 0:
        assert ids == [1, 2, 8] and len(set(ranking.scores.tolist())) == 1 and ranking.scores[0] == anchor
        return
    assert ids[0] == 2
    match = graph.cosines([text], np.asarray(ids))[0]
    if lexical_weight:
        lexical = methods.retriever(ws, "bm25").node_scores(text, np.asarray(ids))
        assert lexical[0] == lexical.max() > 0  # "potassium" is in KCNQ2's document only
        match = match + lexical_weight * lexical / lexical.max()
    assert np.ptp(ranking.scores - query_weight * match) < 1e-6  # the same anchor score under each
    assert ranking.scores[0] - query_weight * match[0] == anchor


def test_report_says_how_many_queries_have_no_cached_plan(toy_skb, tmp_path):
    """A report replaying cached plans (planner.kind=cache) names the queries it could not plan, instead of
    measuring their empty graph branch silently."""
    from grasp.config import load_config
    from grasp.lab.ablation import unplanned_note
    from grasp.workspace import Workspace

    config = load_config(None, [f"cache_dir={tmp_path}", "planner.kind=cache", "planner.on_miss=no_trade"])
    ws = Workspace(toy_skb, config, progress=False)
    queries = ws.queries()
    planner = ws.planner
    planner.cache.put({"key": planner.key(queries[0].text), "raw": GOOD})
    with pytest.warns(UserWarning, match=f"{len(queries) - 1} of {len(queries)} queries have no cached plan"):
        (line,) = unplanned_note(ws, queries)
    assert line.startswith(f"- graph: {len(queries) - 1} of {len(queries)}") and "grasp plans build" in line
    for q in queries[1:]:
        planner.cache.put({"key": planner.key(q.text), "raw": GOOD})
    assert unplanned_note(ws, queries) == []
    assert unplanned_note(Workspace(toy_skb, load_config(None, [f"cache_dir={tmp_path}"]), progress=False), queries) == []


def test_a_description_bound_as_a_name_is_run_as_text_above_the_floor(toy_dir, tmp_path):
    """graph.description_floor: the gene anchor that names no gene is dropped with its hop and the target is
    matched by its documents against the phrase; the trace shows the plan run and the phrase, and the link
    confidence stays the planner's (low). Off (0), the planner's plan is run as it is."""
    from grasp.config import load_config
    from grasp.results import Query
    from grasp.workspace import Workspace

    phrase = "a pigment made of small molecules"
    reply = json.dumps({
        "anchors": [{"var": "A", "text": phrase, "label": "gene", "match_mode": "name"}],
        "hops": [{"from": "A", "rel": "involved_in", "to_var": "T", "to_label": "process"}],
        "target": {"var": "T", "labels": ["process"], "relevance_text": ""}, "risk_level": "normal"})
    traces = {}
    for floor in (0.0, 0.9):
        cfg = load_config(None, [f"cache_dir={tmp_path / 'c'}", "graph.engine=memory", "encoder.max_length=128",
                                 f"graph.description_floor={floor}"])
        ws = Workspace.open(toy_dir, cfg, progress=False)
        ws.planner = Planner(ws.skb, _SeededClient({None: reply}), PlanCache(tmp_path / f"p{floor}.jsonl"),
                             retries=0, builder=PromptBuilder(ws.skb))
        traces[floor] = methods.retriever(ws, "graph").batch_search([Query("1", "q", [1])])["1"].trace
    off, on = traces[0.0], traces[0.9]
    assert off.described is None and off.plan["hops"] and off.plan["anchors"][0]["label"] == "gene"
    assert on.described == [phrase]
    assert on.plan["hops"] == [] and on.plan["target"]["relevance_text"] == phrase
    assert [(a["var"], a["label"], a["match_mode"]) for a in on.plan["anchors"]] == [("T", "process", "doc")]
    assert on.n_cand > 0 and on.link_confidence == off.link_confidence < 0.9
    assert {b["var"] for b in on.bindings} == {"T"}
