"""The nested plan format: its grammar admits the worked examples and refuses the malformed shapes a
small model writes in the flat format; flattening gives the plans the validator calls valid."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from grasp.plan.nested import flat_to_nested, nested_json_schema, nested_to_flat
from grasp.plan.validate import PlanRejected, check_plan
from tests.conftest import SHARED

SHARED_SKB = SHARED / "data" / "skb"


def _admits(schema: dict, plan: dict) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(plan)


def _anchored(label: str, text: str) -> dict:
    return {"label": label, "anchor": {"text": text, "match_mode": "name"}}


def test_grammar_admits_a_tree_and_refuses_malformed_shapes(toy_skb):
    g = nested_json_schema(toy_skb.schema)
    good = {"target": {"label": "gene", "via": [
        {"rel": "on_chromosome", "node": _anchored("chromosome", "chromosome 2")},
        {"rel": "involved_in", "node": {"label": "process", "via": [{"rel": "is_a", "node": _anchored("process", "ion transport")}]}}],
        "relevance_text": "sodium"}, "risk_level": "normal"}
    assert _admits(g, good)
    assert _admits(g, {"target": {"label": "process", "text": "movement of sodium", "relevance_text": ""}, "risk_level": "weak"})
    bad = {
        "a relation that does not link the two types": {"target": {"label": "gene", "via": [
            {"rel": "is_a", "node": _anchored("process", "x")}], "relevance_text": ""}, "risk_level": "normal"},
        "a wrong type at the relation's far end": {"target": {"label": "gene", "via": [
            {"rel": "on_chromosome", "node": _anchored("process", "x")}], "relevance_text": ""}, "risk_level": "normal"},
        "a target that is never an answer": {"target": {"label": "chromosome", "via": [
            {"rel": "on_chromosome", "node": _anchored("gene", "x")}], "relevance_text": ""}, "risk_level": "normal"},
        "a branch without an anchor": {"target": {"label": "gene", "via": [
            {"rel": "involved_in", "node": {"label": "process"}}], "relevance_text": ""}, "risk_level": "normal"},
        "an anchor on the target beside relations": {"target": {"label": "gene", "anchor": {"text": "x", "match_mode": "name"},
            "via": [{"rel": "on_chromosome", "node": _anchored("chromosome", "y")}], "relevance_text": ""}, "risk_level": "normal"},
        "no anchor at all": {"target": {"label": "gene", "via": [], "relevance_text": ""}, "risk_level": "normal"},
        "an unknown relation": {"target": {"label": "gene", "via": [
            {"rel": "located_on", "node": _anchored("chromosome", "x")}], "relevance_text": ""}, "risk_level": "normal"},
    }
    for why, plan in bad.items():
        assert not _admits(g, plan), why


def test_directions_are_offered_on_same_type_relations_only(toy_skb):
    g = nested_json_schema(toy_skb.schema)
    kinds = {"target": {"label": "process", "via": [
        {"rel": "is_a", "dir": "forward", "node": _anchored("process", "ion transport")}], "relevance_text": ""},
        "risk_level": "normal"}
    assert _admits(g, kinds)
    flat = nested_to_flat(kinds)  # "kinds of ion transport": T -is_a-> A, so the hop from A runs backward
    assert flat["hops"][0] | {} == {"from": "A", "rel": "is_a", "to_var": "T", "to_label": "process", "dir": "backward"}
    assert flat_to_nested(flat)["target"]["via"][0]["dir"] == "forward"
    sideways = {"target": {"label": "gene", "via": [
        {"rel": "on_chromosome", "dir": "forward", "node": _anchored("chromosome", "chromosome 2")}], "relevance_text": ""},
        "risk_level": "normal"}
    assert not _admits(g, sideways)  # the types say it already


def test_flattening_gives_a_valid_tree_around_the_target(toy_skb):
    nested = {"target": {"label": "gene", "via": [
        {"rel": "on_chromosome", "node": _anchored("chromosome", "chromosome 2")},
        {"rel": "involved_in", "node": {"label": "process", "via": [{"rel": "is_a", "node": _anchored("process", "ion transport")}]}}],
        "relevance_text": "sodium"}, "risk_level": "normal"}
    flat = nested_to_flat(nested)
    assert [(a["var"], a["text"]) for a in flat["anchors"]] == [("A", "chromosome 2"), ("B", "ion transport")]
    assert [(h["from"], h["rel"], h["to_var"]) for h in flat["hops"]] == [
        ("A", "on_chromosome", "T"), ("B", "is_a", "X1"), ("X1", "involved_in", "T")]
    check = check_plan(flat, toy_skb.schema)
    assert check.status == "valid", check.reason
    text_only = nested_to_flat({"target": {"label": "process", "text": "movement of sodium", "relevance_text": ""},
                                "risk_level": "weak"})
    assert text_only["anchors"] == [{"var": "T", "text": "movement of sodium", "label": "process", "match_mode": "doc"}]
    with pytest.raises(PlanRejected, match="neither an anchor nor a via"):
        nested_to_flat({"target": {"label": "gene", "via": [{"rel": "involved_in", "node": {"label": "process"}}]}})


def test_the_planner_writes_and_reads_nested_plans(toy_skb, tmp_path):
    from grasp.plan.cache import PlanCache
    from grasp.plan.planner import Planner
    from grasp.plan.prompt import PromptBuilder
    from tests.integration.test_planner import _ScriptedClient

    reply = json.dumps({"target": {"label": "gene", "via": [{"rel": "on_chromosome", "node": _anchored("chromosome", "chromosome 2")}],
                                   "relevance_text": "sodium channel"}, "risk_level": "normal"})
    builder = PromptBuilder(toy_skb, plan_format="nested")
    assert "A plan is a tree rooted at the answer" in builder.system
    planner = Planner(toy_skb, _ScriptedClient({"sodium channel genes on chromosome 2": reply}),
                      PlanCache(tmp_path / "p.jsonl"), builder=builder)
    assert "$defs" in planner.json_schema
    out = planner.plan("sodium channel genes on chromosome 2")
    assert out.check.status == "valid" and [h.rel for h in out.check.plan.hops] == ["on_chromosome"]
    assert planner.cached("sodium channel genes on chromosome 2").check.plan == out.check.plan  # replayed the same
    assert Path(tmp_path / "p.jsonl").exists()
