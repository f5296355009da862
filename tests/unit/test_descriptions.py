"""Name anchors that name nothing in the KB, read as descriptions: which anchors, and the plan that is run."""

from __future__ import annotations

import numpy as np

from grasp.graph.descriptions import as_descriptions, descriptive_anchors
from grasp.graph.linking import Binding, name_qualities
from grasp.plan.model import Plan

NAMES = ["gir1.2-hkl-5.0", "hkl", "role::program", "security::cryptography", "openssl"]


def plan(anchors, hops, relevance=""):
    return Plan.model_validate({"anchors": anchors, "hops": hops,
                                "target": {"var": "T", "labels": ["package"], "relevance_text": relevance}})


def binding(var, node, cosine):
    return Binding(var, np.array([node]), np.array([cosine]))


SOURCE = {"var": "S", "text": "hkl", "label": "source", "match_mode": "name"}
TAG = {"var": "G", "text": "control application", "label": "tag", "match_mode": "name"}
TWO = plan([SOURCE, TAG], [{"from": "S", "rel": "built_from", "to_var": "T", "to_label": "package"},
                           {"from": "G", "rel": "has_tag", "to_var": "T", "to_label": "package"}])


def test_an_anchor_is_a_description_when_its_best_name_neither_holds_its_words_nor_is_near_it():
    bindings = {"S": binding("S", 1, 0.41), "G": binding("G", 2, 0.52)}  # "hkl" is named; the tag is not
    qualities = name_qualities(TWO.anchors, bindings, NAMES)
    assert [a.text for a in descriptive_anchors(qualities, 0.6)] == ["control application"]
    assert descriptive_anchors(qualities, 0.5) == []     # cosine 0.52 passes a lower floor
    assert descriptive_anchors(qualities, 0.0) == []     # off
    unbound = {"S": binding("S", 1, 0.9), "G": Binding("G", np.array([], dtype=np.int64), np.array([]))}
    assert [a.text for a in descriptive_anchors(name_qualities(TWO.anchors, unbound, NAMES), 0.1)] == [
        "control application"]


def test_a_described_branch_is_dropped_and_its_words_join_the_relevance_text():
    (tag,) = [a for a in TWO.anchors if a.var == "G"]
    out = as_descriptions(TWO, [tag])
    assert [a.var for a in out.anchors] == ["S"]
    assert [(h.from_var, h.rel) for h in out.hops] == [("S", "built_from")]
    assert out.target.relevance_text == "control application"
    assert TWO.anchors[1].text == "control application" and len(TWO.hops) == 2  # the planner's plan is kept as it was


def test_the_hops_leading_only_to_a_described_anchor_go_with_it():
    chain = plan([{"var": "M", "text": "Dylan", "label": "maintainer", "match_mode": "name"},
                  {"var": "S", "text": "the init system", "label": "source", "match_mode": "name"}],
                 [{"from": "M", "rel": "maintained_by", "to_var": "T", "to_label": "package"},
                  {"from": "T", "rel": "depends", "to_var": "P", "to_label": "package", "dir": "forward"},
                  {"from": "S", "rel": "built_from", "to_var": "P", "to_label": "package"}], relevance="tools")
    out = as_descriptions(chain, [chain.anchors[1]])
    assert [(h.from_var, h.to_var) for h in out.hops] == [("M", "T")]  # S -> P and the now dangling T -> P
    assert out.target.relevance_text == "tools; the init system"


def test_a_plan_left_with_no_name_becomes_the_pure_text_shape():
    one = plan([{"var": "G", "text": "http proxy", "label": "tag", "match_mode": "name"}],
               [{"from": "G", "rel": "has_tag", "to_var": "T", "to_label": "package"}])
    out = as_descriptions(one, list(one.anchors))
    assert out.hops == []
    assert [(a.var, a.text, a.label, a.match_mode) for a in out.anchors] == [("T", "http proxy", "package", "doc")]
    assert out.target.relevance_text == "http proxy"
    assert as_descriptions(one, []) is one
