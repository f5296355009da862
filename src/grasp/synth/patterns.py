"""The relational patterns a synthetic query is made from, enumerated from the schema, and the plan each one is.

A pattern is one or two paths, each from an anchor node to the answer (the target): ``1hop`` (anchor -r-> target),
``2hop`` (anchor -r1-> middle -r2-> target), ``2anchor`` (two 1-hop paths over different relations meeting at the
target) and ``text`` (no path: the answer described by its own text). Two more kinds are drawn only when asked for
(``synth.kinds``): ``2anchor-same`` (two anchors over the same relation: "packages tagged X and Y") and
``2anchor-2hop`` (two anchors, one of them two hops away: "packages of maintainer M that depend on a package built
from source S"). Each step says which way the stored edge runs where the relation joins
a type to itself (``depends``, ``is_a``): there the direction is what the question means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from grasp.config import DEFAULT_SYNTH_KINDS, SynthKind
from grasp.plan.model import Anchor, Hop, Plan, Target
from grasp.skb.schema import Schema

KINDS: tuple[str, ...] = DEFAULT_SYNTH_KINDS  # drawn by default
ALL_KINDS: tuple[str, ...] = get_args(SynthKind)


@dataclass(frozen=True)
class Step:
    """One relation walked from a node of ``start`` to one of ``end``; ``direction`` (only where the two types are
    the same) is "forward" when the start node is the stored edge's source, "backward" when it is the target."""

    rel: str
    start: str
    end: str
    direction: str | None = None

    def name(self) -> str:
        arrow = {"forward": "->", "backward": "<-", None: "-"}[self.direction]
        return f"{self.start}{arrow}{self.rel}{arrow}{self.end}"


@dataclass(frozen=True)
class Pattern:
    kind: str
    paths: tuple[tuple[Step, ...], ...]  # one per anchor, each ending at the target's type
    target: str

    @property
    def template(self) -> str:
        """The pattern's name, the ``template`` of the queries made from it."""
        body = " & ".join(" / ".join(s.name() for s in path) for path in self.paths) or self.target
        return f"synth:{self.kind}:{body}"


def steps(schema: Schema) -> list[Step]:
    """Every relation walked both ways."""
    out = []
    for r in schema.relations:
        same = r.source == r.target
        out.append(Step(r.name, r.source, r.target, "forward" if same else None))
        out.append(Step(r.name, r.target, r.source, "backward" if same else None))
    return list(dict.fromkeys(out))


def enumerate_patterns(schema: Schema, kinds: tuple[str, ...] = KINDS) -> dict[str, list[Pattern]]:
    """Every pattern of each of ``kinds`` whose answer is a candidate type (in the order of ``ALL_KINDS``)."""
    unknown = [k for k in kinds if k not in ALL_KINDS]
    if unknown:
        raise ValueError(f"unknown pattern kind {', '.join(unknown)}; the kinds: {', '.join(ALL_KINDS)}")
    candidates = set(schema.candidate_types)
    walks = steps(schema)
    into = [s for s in walks if s.end in candidates]
    # a walk back over the same relation is kept: "genes in the same process as gene X" (the anchor is no answer)
    two_hops = [(a, b) for b in into for a in walks if a.end == b.start]
    made = {
        "1hop": lambda: [Pattern("1hop", ((s,),), s.end) for s in into],
        "2hop": lambda: [Pattern("2hop", (path,), path[-1].end) for path in two_hops],
        "2anchor": lambda: [Pattern("2anchor", ((a,), (b,)), a.end) for i, a in enumerate(into) for b in into[i + 1:]
                            if a.end == b.end],
        "text": lambda: [Pattern("text", (), t) for t in schema.candidate_types],
        "2anchor-same": lambda: [Pattern("2anchor-same", ((s,), (s,)), s.end) for s in into],
        "2anchor-2hop": lambda: [Pattern("2anchor-2hop", ((a,), path), a.end) for a in into for path in two_hops
                                 if path[-1].end == a.end],
    }
    return {kind: made[kind]() for kind in ALL_KINDS if kind in kinds}


def plan_of(pattern: Pattern, anchors: list[tuple[str, str]], phrase: str = "") -> Plan:
    """The plan a query of ``pattern`` means, its anchors named (name, type) in path order; ``phrase`` is the text
    the answer must match (its relevance text). A text-only query is the planner's text-only shape: the target
    itself anchored by its description (doc mode)."""
    if not pattern.paths:
        return Plan(anchors=[Anchor(var="T", text=phrase, label=pattern.target, match_mode="doc")],
                    target=Target(var="T", labels=[pattern.target], relevance_text=phrase), risk_level="normal")
    plan_anchors, hops = [], []
    for i, (path, (name, label)) in enumerate(zip(pattern.paths, anchors, strict=True)):
        var = f"A{i}"
        plan_anchors.append(Anchor(var=var, text=name, label=label, match_mode="name"))
        for j, step in enumerate(path):
            to_var = "T" if j == len(path) - 1 else f"M{i}{j}"
            hops.append(Hop.model_validate({"from": var, "rel": step.rel, "to_var": to_var, "to_label": step.end,
                                            **({"dir": step.direction} if step.direction else {})}))
            var = to_var
    return Plan(anchors=plan_anchors, hops=hops, target=Target(var="T", labels=[pattern.target], relevance_text=phrase),
                risk_level="normal")
