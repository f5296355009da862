"""Checks against the workplace's shared data (the bio and pkg KBs' schemas and queries, STaRK's query files):
skipped where ../shared is absent, required under CI."""

from __future__ import annotations

import json

import pytest

from grasp.plan.nested import flat_to_nested, nested_json_schema, nested_to_flat
from grasp.plan.prompt import load_examples
from grasp.plan.validate import check_plan
from grasp.skb import read_stark_qa
from grasp.skb.open_format import read_schema
from tests.conftest import SHARED, skip_unless_ci
from tests.unit.test_plan_nested import _admits

SHARED_SKB = SHARED / "data" / "skb"

def test_real_stark_qa_files_load():
    """The real query files in shared/ (skipped where shared/ is absent)."""
    root = SHARED / "data" / "stark_qa"
    if not root.exists():
        skip_unless_ci("shared/data/stark_qa not present")
    for name, n, n_test in (("amazon", 9100, 1642), ("mag", 13323, 2665), ("primekg", 11204, 2801)):
        qs = read_stark_qa(root / name)
        assert len(qs) == n
        assert sum(q.split == "test" for q in qs) == n_test
    assert len(read_stark_qa(root / "primekg", human_generated=True)) == 109

@pytest.mark.parametrize("kb", ["bio", "pkg"])
def test_worked_examples_survive_the_round_trip(kb):
    """Every shipped example, shown in nested form, is admitted by its KB's grammar and flattens back to
    the same valid plan (anchors, relations, target) up to variable names."""
    path = SHARED_SKB / kb / "schema.json"
    if not path.exists():
        skip_unless_ci(f"{path} not here")
    schema = read_schema(path)
    grammar = nested_json_schema(schema)
    for ex in load_examples(kb):
        nested = flat_to_nested(ex.plan)
        assert _admits(grammar, nested), (ex.qid, json.dumps(nested))
        before, after = check_plan(ex.plan, schema), check_plan(nested_to_flat(nested), schema)
        assert after.status == "valid", (ex.qid, after.reason)
        shape = lambda c: (sorted((a.text, a.label, a.match_mode) for a in c.plan.anchors),  # noqa: E731
                           sorted((h.rel, h.to_label, h.direction or "") for h in c.plan.hops), c.plan.target.labels,
                           c.plan.target.relevance_text, c.plan.risk_level)
        assert shape(after) == shape(before), ex.qid

def test_bio_and_pkg_examples_are_valid_plans():
    """The shipped worked examples pass validation against their KB's real schema."""

    from grasp.plan.prompt import load_examples
    from grasp.plan.validate import check_plan
    from grasp.skb.open_format import read_schema

    root = SHARED / "data" / "skb"
    for kb in ("bio", "pkg"):
        examples = load_examples(kb)
        assert len(examples) >= 10
        if not root.exists():
            skip_unless_ci(f"{root} not present: the examples are not checked against the KBs' schemas")
        schema = read_schema(root / kb / "schema.json")
        for ex in examples:
            c = check_plan(ex.plan, schema)
            assert c.status == "valid", (kb, ex.qid, c.reason, c.repairs)

def test_worked_examples_come_from_the_train_split():
    """Every bio/pkg worked example is a train query of its KB (same id and text): none is a test or val query."""
    from grasp.plan.prompt import load_examples
    from grasp.skb import read_queries

    root = SHARED / "data" / "skb"
    if not root.exists():
        skip_unless_ci(f"{root} not present: the examples' provenance is not checked")
    for kb in ("bio", "pkg"):
        by_id = {q.qid: q for q in read_queries(root / kb / "qa" / "queries.jsonl")}
        for ex in load_examples(kb):
            q = by_id.get(ex.qid)
            assert q is not None and q.split == "train" and q.text == ex.query, (kb, ex.qid, q and q.split)
