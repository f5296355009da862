"""Putting synthetic queries into words: by the local LLM (batched like planning, every reply cached on disk), or
by templates where no LLM is available or its reply does not keep the question answerable.

A question must name every anchor exactly (Stage 1 links them by name) and should paraphrase the text constraint
rather than copy the answer's field text; a reply that drops an anchor name, says nothing beside the anchors' names
(the relation to them lost), copies the phrase verbatim or runs too long is replaced by the template's question.
"""

from __future__ import annotations

import hashlib
import json
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from tqdm.auto import tqdm

from grasp.plan.cache import PlanCache
from grasp.plan.llm import ChatClient, LLMError
from grasp.synth.sample import Synthetic

MAX_CHARS = 300
STYLES = ("a question", "a request starting with a verb such as Find or List", "a short search phrase")
PROMPT_VERSION = 1
SYSTEM = ("You write the queries people type into a search engine over a knowledge base. You are given what the "
          "query is looking for, as structured facts. Write ONE query that asks for exactly that. Keep every entity "
          "name exactly as given, in double quotes. Do not copy the text hint word for word: paraphrase it. Do not "
          "mention relation names literally when a natural phrase says the same. "
          'Reply with JSON: {"query": "..."}')


def human(name: str) -> str:
    return name.replace("_", " ").replace("-", " ").strip()


def with_article(noun: str) -> str:
    """``noun`` after "a" or "an" by its first letter (a template's wording, not English's every exception)."""
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


PREPOSITIONS = frozenset("of in on to by from with for at into as".split())


def predicate(relation: str, plural: bool = False) -> str:
    """A relation's name as the verb of a clause: a name that starts or ends with a preposition (``member_of``,
    ``in_section``, ``located_in``) is a state, said with "is"; any other (``depends``, ``has_tag``) is its own verb."""
    name = human(relation)
    words = name.lower().split()
    return f"{'are' if plural else 'is'} {name}" if words and (words[0] in PREPOSITIONS or words[-1] in PREPOSITIONS) else name


def _link(step: dict, name: str, finite: bool, plural: bool = False) -> str:
    """How the answer relates to ``name`` through one step (seen from the anchor's side), as a clause after the
    answer's type (``finite``: after "Which TYPE", so with its verb; ``plural``: after "List the TYPE entries")."""
    if step["direction"] == "forward":    # the anchor is the stored source: "... that X depends"
        return f'that "{name}" {predicate(step["relation"])}'
    if step["direction"] == "backward":   # the anchor is the stored target: "... that depends X"
        return f'that {predicate(step["relation"], plural)} "{name}"'
    return ("is " if finite else "") + f'linked to the {human(step["from"])} "{name}" by {human(step["relation"])}'


def template_text(facts: dict, rng: np.random.Generator) -> str:
    """The question a template makes of the facts (the fallback, and what tests can predict)."""
    answer = human(facts["answer_type"])
    text = facts["text"]
    if not facts["anchors"]:
        return str(rng.choice([f"Which {answer} is about {text}?", f"Find the {answer} described by: {text}",
                               f"{answer} about {text}"]))
    opening, finite, plural = [(f"Which {answer}", True, False), (f"Find every {answer}", False, False),
                               (f"List the {answer} entries", False, True)][int(rng.integers(3))]
    parts = []
    for anchor, path in zip(facts["anchors"], facts["paths"], strict=True):
        if len(path) == 1:
            parts.append(_link(path[0], anchor["name"], finite, plural))
        else:
            middle = human(path[0]["to"])
            parts.append(("is " if finite else "") + f"linked by {human(path[1]['relation'])} to {with_article(middle)} "
                         + _link(path[0], anchor["name"], False))
    sentence = f"{opening} {' and '.join(parts)}"
    if text:
        sentence += str(rng.choice([f", about {text}", f", mentioning {text}", f" (related to {text})"]))
    return sentence + ("?" if finite else "")


def acceptable(text: str, facts: dict) -> bool:
    """A reply keeps the question answerable: every anchor named, the hint not copied, not too long."""
    if not text or len(text) > MAX_CHARS or "\0" in text:
        return False
    low = text.lower()
    if any(a["name"].lower() not in low for a in facts["anchors"]):
        return False
    rest = low
    for anchor in facts["anchors"]:
        rest = rest.replace(anchor["name"].lower(), " ")
    if facts["anchors"] and not re.search(r"[^\W\d_]{3,}", rest):
        return False  # only the anchors' names: which relation to them is asked for is lost
    hint = facts["text"].lower()
    return not (len(hint.split()) >= 3 and hint in low)


def names_relations(text: str, facts: dict) -> bool:
    """Whether ``text`` names every relation its facts walk: a word of the relation's name (its first four letters,
    so "specialize" names ``specializes``) or, for a name of short words only (``is_a``), its last two words. A
    worked example whose question does not say its relation teaches the planner to walk hops nobody asked for."""
    low = text.lower()
    found = {w[:4] for w in re.findall(r"[^\W\d_]+", low)}
    for path in facts["paths"]:
        for step in path:
            name = human(step["relation"]).lower()
            long_words = [w for w in name.split() if len(w) >= 3]
            if long_words and not any(w[:4] in found for w in long_words):
                return False
            if not long_words and not re.search(rf"\b{re.escape(' '.join(name.split()[-2:]))}\b", low):
                return False  # e.g. "is a" of bp_is_a
    return True


class LLMVerbalizer:
    """Questions written by a chat model; every reply cached (keyed by model, prompt and facts), so that a rerun
    costs no LLM call."""

    def __init__(self, client: ChatClient, cache: PlanCache, *, seed: int = 13) -> None:
        self.client, self.cache, self.seed = client, cache, seed

    def _key(self, facts: dict, style: str) -> str:
        blob = json.dumps([self.client.model_id, PROMPT_VERSION, SYSTEM, facts, style], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:24]

    def one(self, facts: dict, style: str) -> str:
        key = self._key(facts, style)
        hit = self.cache.get(key)
        if hit is not None:
            return hit["query"]
        shown = {k: v for k, v in facts.items() if k != "paths"}
        shown["relations"] = [[f"{human(s['from'])} -[{human(s['relation'])}]-> {human(s['to'])}"
                               + (f" (the anchor is the {'source' if s['direction'] == 'forward' else 'target'})"
                                  if s["direction"] else "") for s in path] for path in facts["paths"]]
        messages = [{"role": "system", "content": SYSTEM},
                    {"role": "user", "content": f"Facts: {json.dumps(shown, ensure_ascii=False)}\nWrite {style}."}]
        schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
                  "additionalProperties": False}
        try:
            reply = json.loads(self.client.chat(messages, json_schema=schema, max_tokens=96, seed=self.seed))
            text = str(reply.get("query", "")).strip() if isinstance(reply, dict) else ""
        except (LLMError, json.JSONDecodeError):
            return ""  # not cached: a later run asks again
        self.cache.put({"key": key, "query": text, "model": self.client.model_id})
        return text


def verbalize(items: list[Synthetic], llm: LLMVerbalizer | None, *, seed: int = 13, progress: bool = False) -> None:
    """Set each item's text: the LLM's question in a style drawn per item where it is acceptable, else the
    template's."""
    rng = np.random.default_rng(seed)
    styles = [str(rng.choice(STYLES)) for _ in items]
    templates = [template_text(it.facts, rng) for it in items]
    replies = [""] * len(items)
    if llm is not None:
        with ThreadPoolExecutor(max_workers=max(1, llm.client.concurrency)) as pool:
            jobs = pool.map(lambda pair: llm.one(*pair), zip((it.facts for it in items), styles, strict=True))
            replies = list(tqdm(jobs, total=len(items), desc="verbalizing", unit="query", disable=not progress))
    for it, reply, fallback in zip(items, replies, templates, strict=True):
        if llm is not None and acceptable(reply, it.facts):
            it.text, it.verbalizer = reply, llm.client.model_id
        else:
            it.text, it.verbalizer = fallback, "template"
