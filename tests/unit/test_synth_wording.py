"""The synthesizer's wording checks, template fallback and choice of worked examples, on hand-made facts."""

from __future__ import annotations

import numpy as np

from grasp.synth.sample import Synthetic
from grasp.synth.synthesize import worked_examples
from grasp.synth.verbalize import acceptable, names_relations, predicate, template_text, with_article

FACTS = {"answer_type": "concept", "text": "", "anchors": [{"name": "graphite", "type": "concept"}],
         "paths": [[{"from": "concept", "relation": "is_a", "to": "concept", "direction": "backward"}]]}


def test_a_reply_that_is_only_the_anchors_name_is_refused():
    assert not acceptable("graphite", FACTS)
    assert not acceptable('"Graphite"?', FACTS)
    assert acceptable("which kinds of graphite are there", FACTS)
    assert not acceptable("kinds of carbon", FACTS)  # the anchor not named
    assert acceptable("tropical gannet", {**FACTS, "anchors": [], "paths": []})  # text-only: no anchor to lose


def test_templates_put_the_right_article_before_a_type():
    assert with_article("action") == "an action" and with_article("concept") == "a concept"
    facts = {"answer_type": "concept", "text": "", "anchors": [{"name": "suckle", "type": "action"}],
             "paths": [[{"from": "action", "relation": "entails", "to": "action", "direction": "forward"},
                        {"from": "action", "relation": "related_to", "to": "concept", "direction": None}]]}
    texts = {template_text(facts, np.random.default_rng(seed)) for seed in range(6)}
    assert all("to an action" in t and " a action" not in t for t in texts), texts


def test_a_question_names_its_relations_by_a_word_or_the_whole_short_name():
    facts = {**FACTS, "paths": [[{"from": "concept", "relation": "part_of", "to": "concept", "direction": "forward"},
                                 {"from": "concept", "relation": "is_a", "to": "concept", "direction": "forward"}]]}
    assert names_relations("Which kind of thing is a part of graphite?", facts)
    assert not names_relations("What is the spinal nerve?", facts)  # "is" alone is not "is a"; no part at all
    assert not names_relations("Which parts of graphite?", {**facts, "paths": [facts["paths"][0][1:]]})
    assert names_relations("actions that specialize eating", {**FACTS, "paths": [[{"relation": "specializes"}]]})
    assert names_relations("tropical gannet", {**FACTS, "anchors": [], "paths": []})


def _item(i: int, kind: str, rels: list[str], text: str, answers: int = 1) -> Synthetic:
    steps = [{"from": "concept", "relation": r, "to": "concept", "direction": "forward"} for r in rels]
    return Synthetic(f"synth:{kind}:{'/'.join(rels) or 'concept'}:{i % 2}",
                     {"hops": [{"rel": r} for r in rels]}, list(range(answers)),
                     {**FACTS, "anchors": [{"name": "x", "type": "concept"}] if rels else [], "paths": [steps]},
                     text=text, qid=f"s{i}", verbalizer="llm")


def test_worked_examples_show_each_shape_in_proportion_and_only_questions_naming_their_relations():
    items = ([_item(i, "text", [], f"a thing described {i}") for i in range(6)]
             + [_item(10 + i, "1hop", [rel], f"what is {rel.replace('_', ' ')} x") for i, rel in
                enumerate(["part_of", "made_of", "is_a", "part_of", "made_of", "is_a"])]
             + [_item(20, "2hop", ["part_of", "member_of"], "what is x?"),  # says neither relation: never shown
                _item(21, "2hop", ["part_of", "member_of"], "part of a member of x")])
    chosen = worked_examples(items, limit=6)
    by_id = {it.qid: it for it in items}
    kinds = [by_id[e.qid].template.split(":")[1] for e in chosen]
    assert sorted(kinds) == ["1hop", "1hop", "2hop", "text", "text", "text"]  # 6 x (6/13, 6/13, 1/13), floor 1
    assert "s20" not in {e.qid for e in chosen}
    assert {tuple(h["rel"] for h in e.plan["hops"]) for e in chosen if e.plan["hops"]} >= {("part_of", "member_of")}
    assert kinds[:3] == ["text", "1hop", "2hop"]  # shapes interleaved, not one kind after another


def test_a_relation_named_by_a_preposition_is_said_with_is():
    assert predicate("member_of") == "is member of" and predicate("in_section") == "is in section"
    assert predicate("depends") == "depends" and predicate("has_tag") == "has tag" and predicate("is_a") == "is a"
    facts = {**FACTS, "paths": [[{"from": "concept", "relation": "member_of", "to": "concept", "direction": "forward"}]]}
    assert all('that "graphite" is member of' in template_text(facts, np.random.default_rng(s)) for s in range(4))
    assert names_relations("Which gene processes are a subtype, that is a kind of x", {**FACTS, "paths": [[{"relation": "bp_is_a"}]]})
