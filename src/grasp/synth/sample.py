"""Sampling synthetic queries: a pattern, anchor nodes chosen with care for degree, the gold answers by executing
the pattern's plan on the graph, and (where a phrase of one answer's text narrows them) a text constraint.

Anchors are drawn by degree stratum (log2 of the node's edges through the pattern's first relation), each stratum
as likely as any other, so hubs and leaves are both asked about. Gold answers are what the plan selects when
executed (the in-memory executor computes what the compiled Cypher does); the anchors themselves are never answers,
and a query whose answer is named by its own anchor is dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

import numpy as np

from grasp.graph.linking import Binding
from grasp.graph.memory import MemoryExecutor
from grasp.skb.documents import DocumentLayout
from grasp.skb.graph import SKB
from grasp.synth.patterns import Pattern, Step, plan_of

WORD = re.compile(r"[A-Za-z][A-Za-z0-9-]+")
STOPWORDS = frozenset("""a an and are as at be but by for from has have in is it its of on or that the this to was were
which with not into than then them they their there these those also such can may been being more most other some
any all each every one two three per via over under upon between within without where when what who whose how
other others only very much many used uses using""".split())


@dataclass
class Synthetic:
    """One synthetic query before (``text`` empty) and after it is put into words."""

    template: str
    plan: dict
    answer_ids: list[int]
    facts: dict                      # what the question must say: answer type, anchors, relations, text
    text: str = ""
    split: str = "train"
    qid: str = ""
    verbalizer: str = ""             # "template" or the LLM's model id
    extra: dict = field(default_factory=dict)

    def record(self) -> dict:
        return {"id": self.qid, "query": self.text, "answer_ids": self.answer_ids, "template": self.template,
                "split": self.split}


def words(text: str) -> list[str]:
    return WORD.findall(text)


def is_content(word: str) -> bool:
    return len(word) > 3 and word.lower() not in STOPWORDS


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if is_content(w)]


class Sampler:
    """Draws synthetic queries of given patterns from one SKB (deterministic for a seed)."""

    def __init__(self, skb: SKB, layout: DocumentLayout, *, seed: int = 13, max_answers: int = 10,
                 constraint_share: float = 0.5) -> None:
        self.skb, self.layout = skb, layout
        self.rng = np.random.default_rng(seed)
        self.max_answers = max_answers
        self.constraint_share = constraint_share
        self.executor = MemoryExecutor(skb)
        adj = skb.adjacency
        self._row = np.repeat(np.arange(skb.num_nodes), np.diff(adj.indptr))  # each CSR entry's own node

    # --- anchors ------------------------------------------------------------------------------------------

    @cache  # noqa: B019 - one sampler per synthesis run
    def _degree(self, step: Step) -> np.ndarray:
        """(num_nodes,) edges each node has through ``step`` (its relation, far type and direction)."""
        adj, skb = self.skb.adjacency, self.skb
        keep = np.isin(adj.rel, skb.schema.relation_ids(step.rel)) & (skb.node_type[adj.nbr] == skb.type_id(step.end))
        if step.direction is not None:
            keep &= adj.out == (step.direction == "forward")
        deg = np.bincount(self._row[keep], minlength=skb.num_nodes)
        deg[skb.node_type != skb.type_id(step.start)] = 0
        return deg

    def anchor(self, step: Step) -> int | None:
        """A node of the step's start type with at least one such edge, by a uniformly drawn degree stratum."""
        deg = self._degree(step)
        nodes = np.flatnonzero(deg > 0)
        if nodes.size == 0:
            return None
        strata = np.floor(np.log2(deg[nodes])).astype(int)
        chosen = self.rng.choice(np.unique(strata))
        return int(self.rng.choice(nodes[strata == chosen]))

    def _neighbour(self, node: int, step: Step) -> int | None:
        """A node reached from ``node`` by walking ``step`` backwards (for the second anchor of a meeting)."""
        adj, skb = self.skb.adjacency, self.skb
        lo, hi = adj.indptr[node], adj.indptr[node + 1]
        keep = np.isin(adj.rel[lo:hi], skb.schema.relation_ids(step.rel))
        keep &= skb.node_type[adj.nbr[lo:hi]] == skb.type_id(step.start)
        if step.direction is not None:  # seen from ``node``, the far end of the step: the other way round
            keep &= adj.out[lo:hi] == (step.direction == "backward")
        found = adj.nbr[lo:hi][keep]
        return int(self.rng.choice(found)) if found.size else None

    # --- text -----------------------------------------------------------------------------------------------

    @cache  # noqa: B019
    def _words_of(self, node: int) -> frozenset[str]:
        fields = self.layout.text_fields(self.skb, node) or {}
        return frozenset(w.lower() for text in fields.values() for w in words(str(text)))

    def phrase(self, node: int, length: int) -> str | None:
        """Consecutive words of one of the node's text fields (not its name), from a content word to the
        ``length``-th content word after it, at most two other words in between."""
        fields = [words(str(t)) for t in (self.layout.text_fields(self.skb, node) or {}).values()]
        spans = []
        for run in fields:
            content = [i for i, w in enumerate(run) if is_content(w)]
            spans += [(run, content[i], content[i + length - 1]) for i in range(len(content) - length + 1)
                      if content[i + length - 1] - content[i] < length + 2]
        if not spans:
            return None
        run, start, end = spans[int(self.rng.integers(len(spans)))]
        return " ".join(run[start:end + 1])

    def matching(self, nodes, phrase: str) -> list[int]:
        need = {w.lower() for w in content_words(phrase)}
        return [int(n) for n in nodes if need <= self._words_of(int(n))]

    @cache  # noqa: B019
    def _inverted(self, type_name: str) -> dict[str, np.ndarray]:
        """word -> the nodes of a (candidate) type whose text holds it: what a text-only pattern searches."""
        index: dict[str, list[int]] = {}
        for n in self.skb.nodes_of_type(type_name).tolist():
            for w in self._words_of(n):
                index.setdefault(w, []).append(n)
        return {w: np.asarray(ns) for w, ns in index.items()}

    # --- one query --------------------------------------------------------------------------------------------

    def draw(self, pattern: Pattern) -> Synthetic | None:
        """One query of ``pattern``, or None when this draw gives no usable one (the caller draws again)."""
        if pattern.kind == "text":
            return self._text_only(pattern)
        anchors: list[int] = []
        first = self.anchor(pattern.paths[0][0])
        if first is None:
            return None
        anchors.append(first)
        if len(pattern.paths) == 2:  # the second anchor: walked back from an answer of the first path
            reached = self._execute(Pattern("1hop", pattern.paths[:1], pattern.target), anchors, "")
            if not reached:
                return None
            second: int | None = int(self.rng.choice(reached))
            for step in reversed(pattern.paths[1]):
                second = self._neighbour(second, step)
                if second is None:
                    return None
            if second == first:
                return None
            anchors.append(second)
            if pattern.paths[0] == pattern.paths[1]:
                anchors.sort()  # one query, whichever anchor was drawn first
        gold = self._execute(pattern, anchors, "")
        phrase = ""
        if len(gold) > self.max_answers or (len(gold) > 1 and self.rng.random() < self.constraint_share):
            phrase, gold = self._narrow(gold)
        if not 1 <= len(gold) <= self.max_answers:
            return None
        names = {self.skb.names[a].lower() for a in anchors}
        if any(self.skb.names[g].lower() in names for g in gold):
            return None  # the answer is named by the question itself
        return self._made(pattern, anchors, phrase, gold)

    def _execute(self, pattern: Pattern, anchors: list[int], phrase: str) -> list[int]:
        plan = plan_of(pattern, [(self.skb.names[a], self.skb.type_of(a)) for a in anchors], phrase)
        bindings = {a.var: Binding(a.var, np.array([node]), np.array([1.0])) for a, node in zip(plan.anchors, anchors,
                                                                                                strict=True)}
        ids, _ = self.executor.execute(plan, bindings)
        return sorted(set(ids.tolist()) - set(anchors))

    def _narrow(self, gold: list[int]) -> tuple[str, list[int]]:
        """A phrase of one answer's text and the answers it still fits, when it narrows them; else ("", gold)."""
        for _ in range(3):
            node = int(self.rng.choice(gold))
            phrase = self.phrase(node, int(self.rng.integers(1, 3)))
            if phrase is None:
                continue
            kept = self.matching(gold, phrase)
            if node in kept and len(kept) < len(gold):
                return phrase, kept
        return "", gold

    def _text_only(self, pattern: Pattern) -> Synthetic | None:
        nodes = self.skb.nodes_of_type(pattern.target)
        if nodes.size == 0:
            return None
        node = int(self.rng.choice(nodes))
        index = self._inverted(pattern.target)
        for length in (3, 4, 5):
            phrase = self.phrase(node, length)
            if phrase is None:
                return None
            sets = [index.get(w.lower(), np.zeros(0, dtype=np.int64)) for w in content_words(phrase)]
            gold = sorted(set.intersection(*(set(s.tolist()) for s in sets))) if sets else []
            if node in gold and len(gold) <= self.max_answers:
                if phrase.lower() in self.skb.names[node].lower():
                    return None  # the phrase is the answer's own name
                return self._made(pattern, [], phrase, gold)
        return None

    def _made(self, pattern: Pattern, anchors: list[int], phrase: str, gold: list[int]) -> Synthetic:
        names = [(self.skb.names[a], self.skb.type_of(a)) for a in anchors]
        plan = plan_of(pattern, names, phrase)
        facts = {"answer_type": pattern.target, "text": phrase,
                 "anchors": [{"name": n, "type": t} for n, t in names],
                 "paths": [[{"relation": s.rel, "from": s.start, "to": s.end, "direction": s.direction} for s in path]
                           for path in pattern.paths]}
        return Synthetic(pattern.template, plan.dump(), gold, facts, extra={"anchors": anchors})
