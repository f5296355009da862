"""The synthesizer's wording checks and template fallback, on hand-made facts."""

from __future__ import annotations

import numpy as np

from grasp.synth.verbalize import acceptable, template_text, with_article

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
