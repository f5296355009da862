"""`grasp synthesize`: every synthetic query's gold answers are what its plan selects when re-executed on Kùzu (and
match its text constraint), the files it writes are accepted by `grasp data validate` and `grasp plans import`,
its LLM wording is checked and cached, and a KB it cannot make relational queries from gets a clear message."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from grasp import methods
from grasp.cli import main
from grasp.config import GraspConfig
from grasp.errors import GraspError
from grasp.graph.compiler import compile_plan
from grasp.graph.linking import Binding
from grasp.lab.synthesize import synthesize_workspace
from grasp.plan.cache import PlanCache
from grasp.plan.llm import ChatClient
from grasp.plan.model import Plan
from grasp.skb import read_queries
from grasp.synth.sample import content_words
from grasp.synth.synthesize import synthesize
from grasp.synth.verbalize import LLMVerbalizer
from grasp.workspace import Workspace
from tests.conftest import write_toy

pytestmark = pytest.mark.slow


@pytest.fixture
def synthesized(toy_dir, tmp_path):
    ws = Workspace.open(toy_dir, GraspConfig(cache_dir=tmp_path / "c", graph={"engine": "kuzu"}), progress=False)
    report = synthesize_workspace(ws, n=40, llm=False)
    return ws, report


def test_gold_is_what_each_plan_selects_re_executed_on_kuzu(synthesized):
    ws, report = synthesized
    assert report.n >= 20 and set(report.by_kind) == {"1hop", "2hop", "2anchor", "text"}
    assert_gold_re_executed(ws, report)


def test_the_kinds_asked_for_are_drawn_and_their_gold_re_executed(toy_dir, tmp_path):
    kinds = ("2anchor-same", "2anchor-2hop", "text")
    config = GraspConfig(cache_dir=tmp_path / "c", graph={"engine": "kuzu"}, synth={"kinds": kinds})
    ws = Workspace.open(toy_dir, config, progress=False)
    report = synthesize_workspace(ws, n=30, llm=False)
    assert set(report.by_kind) == set(kinds)
    plans = [json.loads(line)["plan"] for line in (ws.synth_dir / "plans.jsonl").read_text().splitlines()]
    for plan in plans:
        if plan["anchors"][0]["match_mode"] == "name":  # two anchors, their paths meeting at the target
            assert len(plan["anchors"]) == 2 and len(plan["hops"]) in (2, 3)
            assert len({a["text"] for a in plan["anchors"]}) == 2
    assert any(len(p["hops"]) == 3 for p in plans)  # one anchor two hops away
    assert any(len(p["hops"]) == 2 and p["hops"][0]["rel"] == p["hops"][1]["rel"] for p in plans)  # one relation
    assert_gold_re_executed(ws, report)


def assert_gold_re_executed(ws: Workspace, report) -> None:
    """Each query's gold is what its plan selects when executed on the graph database, less its anchors."""
    engine = methods.retriever(ws, "graph").engine
    names = {n: i for i, n in enumerate(ws.skb.names)}
    queries = {q.text: q for q in read_queries(ws.synth_dir / "queries.jsonl")}
    rows = [json.loads(line) for line in (ws.synth_dir / "plans.jsonl").read_text().splitlines()]
    assert len(rows) == len(queries) == report.n
    for row in rows:
        q, plan = queries[row["query"]], Plan.model_validate(row["plan"])
        phrase = {w.lower() for w in content_words(plan.target.relevance_text)}

        def fits(node: int, phrase: set = phrase) -> bool:
            fields = " ".join(str(v) for v in ws.layout.text_fields(ws.skb, node).values())
            return phrase <= {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9-]+", fields)}
        if plan.hops:
            anchors = [names[a.text] for a in plan.anchors]
            bindings = {a.var: Binding(a.var, np.array([n]), np.array([1.0])) for a, n in zip(plan.anchors, anchors, strict=True)}
            ids, _ = engine.execute(plan, bindings, compile_plan(plan, bindings, engine.names))
            expected = sorted(int(i) for i in set(ids.tolist()) - set(anchors) if fits(int(i)))
        else:  # text only (the target anchored by its description): every node of its type whose text holds it
            assert [(a.var, a.text, a.match_mode) for a in plan.anchors] == [("T", plan.target.relevance_text, "doc")]
            expected = [int(n) for n in ws.skb.nodes_of_type(plan.target.labels[0]) if fits(int(n))]
        assert q.answer_ids == expected, (q.text, plan.dump())
        assert q.template == row["template"] and q.split in ("train", "val")
        assert not {ws.skb.names[g].lower() for g in q.answer_ids} & {a.text.lower() for a in plan.anchors
                                                                       if a.match_mode == "name"}


def test_what_it_writes_is_accepted_and_read_by_default(synthesized, toy_dir, tmp_path, capsys):
    ws, report = synthesized
    path = ws.synth_dir / "queries.jsonl"
    main(["-q", "data", "validate", str(toy_dir), "--queries", str(path)])
    assert f"ok: {report.n} queries" in capsys.readouterr().out
    main(["-q", "--cache-dir", str(tmp_path / "c"), "plans", "import", str(ws.synth_dir / "plans.jsonl"),
          "--skb", str(toy_dir)])
    out = capsys.readouterr().out
    assert f"imported {report.n} plans" in out and "'rejected': 0" in out
    assert ws.default_queries_path() != path  # the KB's own labelled queries come first
    (toy_dir / "qa" / "queries.jsonl").unlink()
    assert ws.default_queries_path() == path and ws.queries_source == "synthetic"
    assert {q.split for q in ws.queries()} == {"train", "val"}
    examples = [json.loads(line) for line in ws.synth_examples_path.read_text().splitlines()]
    assert 1 <= len(examples) == report.examples and all(e["plan"]["target"]["labels"] for e in examples)


def test_the_same_seed_makes_the_same_queries(toy_dir, tmp_path):
    ws = Workspace.open(toy_dir, GraspConfig(cache_dir=tmp_path / "c"), progress=False)
    runs = []
    for out in ("a", "b"):
        synthesize(ws.skb, ws.layout, tmp_path / out, n=25, seed=5)
        runs.append((tmp_path / out / "queries.jsonl").read_text())
    assert runs[0] == runs[1]
    synthesize(ws.skb, ws.layout, tmp_path / "c2", n=25, seed=6)
    assert (tmp_path / "c2" / "queries.jsonl").read_text() != runs[0]


class EchoLLM(ChatClient):
    """An LLM at the process boundary: it writes a question from the facts it is shown (or, for one answer type,
    forgets the anchor's name, which the wording must refuse)."""

    model_id, concurrency = "echo", 2

    def __init__(self) -> None:
        self.calls = 0

    def chat(self, messages, *, json_schema=None, max_tokens=512, temperature=0.0, seed=None) -> str:
        self.calls += 1
        facts = json.loads(messages[1]["content"].split("\n")[0].removeprefix("Facts: "))
        names = " and ".join(f'"{a["name"]}"' for a in facts["anchors"])
        if facts["answer_type"] == "process" and names:
            return json.dumps({"query": "which process is it?"})  # no anchor named: refused
        hint = " ".join(reversed(facts["text"].split()))  # not the answer's text word for word
        return json.dumps({"query": f"Echo: {facts['answer_type']} for {names or hint}"})


def test_llm_wording_is_checked_and_cached(toy_dir, tmp_path):
    ws = Workspace.open(toy_dir, GraspConfig(cache_dir=tmp_path / "c"), progress=False)
    llm = EchoLLM()
    first = synthesize(ws.skb, ws.layout, tmp_path / "s", n=30, llm=LLMVerbalizer(llm, PlanCache(tmp_path / "w.jsonl")))
    calls = llm.calls
    assert calls >= 30 and first.by_verbalizer.get("echo", 0) > 0 and first.by_verbalizer.get("template", 0) > 0
    queries = read_queries(tmp_path / "s" / "queries.jsonl")
    for q in queries:  # the LLM's wording, except where it forgot the anchor's name (the template's instead)
        forgot = not q.template.startswith("synth:text") and q.template.endswith("process")
        assert q.text.startswith("Echo: ") != forgot, q
    again = EchoLLM()
    synthesize(ws.skb, ws.layout, tmp_path / "s2", n=30, llm=LLMVerbalizer(again, PlanCache(tmp_path / "w.jsonl")))
    assert again.calls == 0 and (tmp_path / "s2" / "queries.jsonl").read_text() == (tmp_path / "s" / "queries.jsonl").read_text()


def test_an_unknown_kind_is_refused_by_the_configuration():
    with pytest.raises(ValueError, match="synth.kinds"):
        GraspConfig(synth={"kinds": ["3hop"]})


def test_a_kb_without_relations_gets_a_clear_message(tmp_path, capsys):
    from tests.conftest import SCHEMA

    flat = write_toy(tmp_path / "flat", schema={**SCHEMA, "relations": []}, edges=[])
    ws = Workspace.open(flat, GraspConfig(cache_dir=tmp_path / "c"), progress=False)
    with pytest.raises(GraspError, match="no relation of its schema reaches a candidate type"):
        synthesize(ws.skb, ws.layout, tmp_path / "out", n=10)
    assert not (tmp_path / "out" / "queries.jsonl").exists()
    with pytest.raises(SystemExit) as e:
        main(["-q", "--cache-dir", str(tmp_path / "c"), "synthesize", "--skb", str(flat), "--no-llm"])
    assert e.value.code == 2 and "error: toy: no relation" in capsys.readouterr().err
