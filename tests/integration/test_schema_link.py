"""Schema linking with the real encoder on the toy KB: which relations a query is shown, the prompt and grammar
built from them, and the cache key that depends on them."""

from __future__ import annotations

import json

import pytest

from grasp.plan.cache import PlanCache
from grasp.plan.llm import ChatClient
from grasp.plan.planner import Planner
from grasp.plan.prompt import PromptBuilder
from grasp.plan.schema_link import SchemaLinker, words

PLAN = json.dumps({"target": {"label": "gene", "via": [{"rel": "on_chromosome", "node": {
    "label": "chromosome", "anchor": {"text": "chromosome 2", "match_mode": "name"}}}], "relevance_text": ""},
    "risk_level": "normal"})


class _Recorder(ChatClient):
    model_id = "recorder"
    concurrency = 1

    def __init__(self) -> None:
        self.calls = []

    def chat(self, messages, *, json_schema=None, max_tokens=512, temperature=0.0, seed=None) -> str:
        self.calls.append((messages, json_schema))
        return PLAN


@pytest.fixture
def workspace(toy_dir, tmp_path):
    from grasp.config import load_config
    from grasp.workspace import Workspace

    return Workspace.open(toy_dir, load_config(None, [f"cache_dir={tmp_path / 'c'}", "encoder.max_length=128"]),
                          progress=False)


def test_relation_names_read_as_words():
    assert words("has_domain") == "has domain" and words("worksWith") == "works with"
    assert words("works-with-format") == "works with format" and words("parent::child") == "parent child"


@pytest.mark.parametrize("query, relation", [
    ("sodium channel genes on chromosome 2", "on_chromosome"),
    ("processes that are a kind of ion transport", "is_a"),
    ("genes involved in glycosaminoglycan biosynthesis", "involved_in"),
])
def test_a_query_is_shown_the_relation_it_needs(workspace, query, relation):
    linker = SchemaLinker(workspace.skb, workspace.encoder, keep=1)
    sub = linker.link(query)
    assert [r.name for r in sub.relations] == [relation]
    ends = {t for r in sub.relations for t in (r.source, r.target)}
    assert set(sub.node_types) == ends | set(workspace.skb.schema.candidate_types)
    assert linker.active and linker.tag.startswith("schema-link:1:")


def test_a_narrow_schema_is_shown_whole(workspace):
    linker = SchemaLinker(workspace.skb, lambda: pytest.fail("no encoder is needed"), keep=3)
    assert not linker.active and linker.link("anything") is None and linker.tag == ""
    with pytest.raises(ValueError, match="at least 1"):
        SchemaLinker(workspace.skb, workspace.encoder, keep=0)


def test_the_planner_shows_and_decodes_under_the_linked_part(workspace, tmp_path):
    builder = PromptBuilder(workspace.skb, plan_format="nested")
    client = _Recorder()
    linked = Planner(workspace.skb, client, PlanCache(tmp_path / "p.jsonl"), builder=builder,
                     linker=SchemaLinker(workspace.skb, workspace.encoder, keep=1))
    whole = Planner(workspace.skb, _Recorder(), PlanCache(tmp_path / "q.jsonl"), builder=builder,
                    linker=SchemaLinker(workspace.skb, workspace.encoder, keep=3))  # inactive: as without a linker
    assert whole.prompt_hash == builder.hash and linked.prompt_hash != builder.hash
    outcome = linked.plan("sodium channel genes on chromosome 2")
    assert outcome.check.status == "valid"
    (messages, grammar), = client.calls
    system, user = messages[0]["content"], messages[1]["content"]
    assert "-[on_chromosome]->" not in system and "-[involved_in]->" not in system  # the shared prefix has no schema
    assert "-[on_chromosome]->" in user and "-[involved_in]->" not in user and "-[is_a]->" not in user
    text = json.dumps(grammar)
    assert "on_chromosome" in text and "involved_in" not in text and "is_a" not in text
    assert linked.plan("sodium channel genes on chromosome 2").cached and len(client.calls) == 1
    # another query shares the same system prompt (a local model's cached prefix), with its own schema part
    linked.plan("genes involved in glycosaminoglycan biosynthesis")
    assert client.calls[1][0][0]["content"] == system and "-[involved_in]->" in client.calls[1][0][1]["content"]


def test_linking_from_many_threads_at_once_gives_the_serial_answers(workspace):
    """The planner's threads link their queries at once (plan_many): the first use encodes the relations once, and
    a tokenizer shared unguarded fails under such a start."""
    from concurrent.futures import ThreadPoolExecutor

    queries = ["sodium channel genes on chromosome 2", "processes that are a kind of ion transport",
               "genes involved in glycosaminoglycan biosynthesis"] * 4
    linker = SchemaLinker(workspace.skb, workspace.encoder, keep=1)
    with ThreadPoolExecutor(max_workers=6) as pool:
        together = list(pool.map(lambda q: [r.name for r in linker.link(q).relations], queries))
    serial = SchemaLinker(workspace.skb, workspace.encoder, keep=1)
    assert together == [[r.name for r in serial.link(q).relations] for q in queries]
