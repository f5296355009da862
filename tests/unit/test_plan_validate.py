"""Plan validation against the SKB schema: what is repaired, what is rejected, and why."""

from __future__ import annotations

import pytest

from grasp.plan.grammar import plan_json_schema
from grasp.plan.validate import PlanRejected, check_plan, collapse_repeats, parse_plan_text


def A(var, text, label, mode="name"):
    return {"var": var, "text": text, "label": label, "match_mode": mode}


def H(f, rel, to, label):
    return {"from": f, "rel": rel, "to_var": to, "to_label": label}


def P(anchors, hops, labels=("gene",), rel="", risk="normal"):
    return {"anchors": anchors, "hops": hops, "target": {"var": "T", "labels": list(labels), "relevance_text": rel},
            "risk_level": risk}


def test_valid_plan(toy_skb):
    c = check_plan(P([A("C", "chromosome 2", "chromosome")], [H("C", "on_chromosome", "T", "gene")]), toy_skb.schema)
    assert c.status == "valid" and c.usable and c.repairs == []


@pytest.mark.parametrize("plan, repair", [
    (P([A("C", "chr 2", "Chromosomes")], [H("C", "on_chromosome", "T", "gene")]), "label 'Chromosomes' -> 'chromosome'"),
    (P([A("C", "chr 2", "chromosome")], [H("C", "On-Chromosome", "T", "gene")]), "names normalised"),
    (P([A("C", "chr 2", "chromosome")], [H("C", "on_chromosome", "T", "process")]), "to_label 'process' -> 'gene'"),
    (P([A("C", "chr 2", "chromosome")], [H("C", "involved_in", "T", "gene")]), "relation 'involved_in' -> 'on_chromosome'"),
    (P([A("C", "chr 2", "chromosome")], [H("C", "on_chromosome", "T", "gene")] * 2), "duplicate hop"),
    (P([A("C", "chr 2", "chromosome"), A("Z", "ion transport", "process")], [H("C", "on_chromosome", "T", "gene")]),
     "anchor Z is not connected to the target"),
    (P([A("C", "chr 2", "chromosome")], [H("C", "on_chromosome", "T", "gene"), H("T", "involved_in", "X", "process")]),
     "ends at a free variable"),
    (P([A("T", "ion transport", "process")], [H("T", "involved_in", "T", "gene")]), "renamed A1"),
    (P([A("T", "ion transport", "process")], [H("T", "is_a", "T", "process")], labels=["process"]), "walks to itself"),
    (P([A("C", "chr 2", "chromosome")], [H("T", "on_chromosome", "C", "chromosome")]), None),
    (P([A("C", "chr 2", "chromosome")], [H("C", "on_chromosome", "T", "gene")], labels=["gene", "chromosome"]),
     "'chromosome' is not a candidate type"),
    ({**P([A("C", "chr 2", "chromosome")], [H("C", "on_chromosome", "T", "gene")]), "risk_level": "HIGH"}, "risk_level"),
])
def test_repairs(toy_skb, plan, repair):
    c = check_plan(plan, toy_skb.schema)
    assert c.status in ("repaired", "valid"), c.reason
    if repair:
        assert any(repair in r for r in c.repairs), c.repairs
    assert c.plan.target.labels == (["process"] if "walks to itself" in (repair or "") else ["gene"])


@pytest.mark.parametrize("plan, reason", [
    (P([A("C", "chr 2", "organ")], [H("C", "on_chromosome", "T", "gene")]), "unknown label 'organ'"),
    (P([A("C", "chr 2", "chromosome")], [H("C", "regulates", "T", "gene")]), "unknown relation 'regulates'"),
    (P([A("G", "SCN1A", "gene"), A("P", "ion transport", "process")],
       [H("G", "involved_in", "P", "process"), H("P", "involved_in", "T", "gene"), H("G", "involved_in", "X", "process"),
        H("X", "involved_in", "T", "gene"), H("X", "is_a", "P", "process")]), "cycle"),
    (P([A("C", "chr 2", "chromosome")], [H("C", "on_chromosome", "C", "chromosome")]), "links a variable to itself"),
    ({"anchors": "nope"}, "field 'anchors'"),
])
def test_rejections(toy_skb, plan, reason):
    c = check_plan(plan, toy_skb.schema)
    assert c.status == "rejected" and not c.usable
    assert c.plan.risk_level == "no_trade" and c.plan.is_empty
    if reason:
        assert reason in c.reason


def test_undefined_variable_and_unconnected_anchor_leave_nothing(toy_skb):
    c = check_plan(P([A("C", "chr 2", "chromosome")], [H("Q", "involved_in", "T", "gene")]), toy_skb.schema)
    assert c.status == "empty" and c.plan.risk_level == "no_trade"
    assert any("anchor C is not connected" in r for r in c.repairs)
    assert any("free variable" in r for r in c.repairs)


def test_target_labels_follow_the_hops(toy_skb):
    c = check_plan(P([A("P", "x", "process")], [H("P", "is_a", "T", "process")], labels=["gene"]), toy_skb.schema)
    assert c.status == "repaired" and c.plan.target.labels == ["process"]


def test_empty_plan_degrades_to_no_trade(toy_skb):
    c = check_plan(P([], [], rel="something", risk="aggressive"), toy_skb.schema)
    assert c.status == "empty" and c.plan.risk_level == "no_trade"


def test_parse_reply_text():
    assert parse_plan_text('Sure! ```json\n{"anchors": []}\n```')["anchors"] == []
    assert parse_plan_text('prefix {"a": 1} suffix') == {"a": 1}
    for bad in ("no json here", '{"a": ', "[1, 2]"):
        with pytest.raises(PlanRejected):
            parse_plan_text(bad)


def test_non_json_reply_is_rejected_with_reason(toy_skb):
    c = check_plan("I think the answer is SCN1A.", toy_skb.schema)
    assert c.status == "rejected" and "no JSON object" in c.reason


def test_grammar_enumerates_this_schema(toy_skb):
    js = plan_json_schema(toy_skb.schema)
    anchor = js["properties"]["anchors"]["items"]["properties"]
    assert anchor["label"]["enum"] == ["gene", "process", "chromosome"]
    assert js["properties"]["hops"]["items"]["properties"]["rel"]["enum"] == ["involved_in", "on_chromosome", "is_a"]
    assert js["properties"]["target"]["properties"]["labels"]["items"]["enum"] == ["gene", "process"]
    assert "retrieval_mode" in plan_json_schema(toy_skb.schema, retrieval_mode=True)["properties"]


def test_amazon_retrieval_modes_are_acted_on(toy_skb):
    base = {"anchors": [{"var": "C", "text": "chromosome 2", "label": "chromosome", "match_mode": "name"}],
            "hops": [{"from": "C", "rel": "on_chromosome", "to_var": "T", "to_label": "gene"}],
            "target": {"var": "T", "labels": ["gene"], "relevance_text": "sodium"}, "risk_level": "normal"}
    skip = check_plan({**base, "retrieval_mode": "skip"}, toy_skb.schema)
    assert skip.plan.risk_level == "no_trade" and "retrieval_mode 'skip'" in skip.repairs[0]
    strict = check_plan({**base, "retrieval_mode": "graph_strict"}, toy_skb.schema)
    assert strict.plan.target.relevance_text == "" and strict.plan.risk_level == "normal"
    hybrid = check_plan({**base, "retrieval_mode": "graph_filter_doc"}, toy_skb.schema)
    assert hybrid.status == "valid" and hybrid.plan.target.relevance_text == "sodium"


def test_a_relevance_text_that_loops_keeps_each_phrase_once(toy_skb):
    """A schema-only plan looped on one phrase until the grammar's 300-character cap: each phrase is kept once, the
    cut-off last one dropped, and the repair recorded; a text without repeats is left as written."""
    looped = "black plumage, bird, family, " + ", ".join(["bird family"] * 22) + ", bird fam"
    plan = {"anchors": [{"var": "T", "text": "crow", "label": "gene", "match_mode": "doc"}], "hops": [],
            "target": {"var": "T", "labels": ["gene"], "relevance_text": looped}}
    check = check_plan(plan, toy_skb.schema)
    assert check.plan.target.relevance_text == "black plumage, bird, family, bird family"
    assert check.status == "repaired" and any("relevance_text" in r for r in check.repairs)
    assert collapse_repeats("sodium channel; Potassium, sodium CHANNEL") == "sodium channel, Potassium"
    assert collapse_repeats(" ion transport, membrane ") == "ion transport, membrane"
    assert collapse_repeats("bird family, bird, bird family") == "bird family, bird"  # "bird" is a phrase, not a cut
