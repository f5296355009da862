"""Check a plan against the SKB's schema; repair it when the fix is unambiguous, else reject it.

Repairs (each recorded in :attr:`PlanCheck.repairs`): label or relation names that match exactly
one schema name after normalising case, spaces, hyphens and plurals; a hop whose relation fixes
the type at its far end; a hop whose two end types are linked by exactly one relation; duplicate
hops; anchors and hops not connected to the target; free variables at a dead end; target labels
that are not candidate types; a relevance text that repeats its phrases (a small model without worked examples can
loop until the grammar's length cap), kept once each. Anything else (an unknown name, a hop that fits no relation, an
undefined variable, a cycle, a label conflict) rejects the plan with a reason. A rejected or
empty plan degrades to ``risk_level = no_trade``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from grasp.errors import first_error
from grasp.plan.model import DIRECTIONS, RETRIEVAL_MODES, RISK_LEVELS, Hop, Plan, reverse
from grasp.skb.schema import Schema


class PlanRejected(Exception):
    """A plan that cannot be repaired; the message says why."""


@dataclass
class PlanCheck:
    plan: Plan
    status: Literal["valid", "repaired", "rejected", "empty"]
    repairs: list[str] = field(default_factory=list)
    reason: str | None = None

    @property
    def usable(self) -> bool:
        return self.status in ("valid", "repaired")


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_plan_text(text: str) -> dict[str, Any]:
    """The JSON object in an LLM reply (code fences and surrounding prose tolerated)."""
    m = _FENCE.search(text)
    candidate = m.group(1) if m else text
    start, end = candidate.find("{"), candidate.rfind("}")
    if start < 0 or end <= start:
        raise PlanRejected("the reply contains no JSON object")
    try:
        obj = json.loads(candidate[start : end + 1])
    except json.JSONDecodeError as e:
        raise PlanRejected(f"the reply is not valid JSON ({e.msg} at char {e.pos})") from None
    if not isinstance(obj, dict):
        raise PlanRejected("the reply's JSON is not an object")
    return obj


def _norm(name: str) -> str:
    s = re.sub(r"[\s_\-/]+", "", str(name).lower())
    return s[:-1] if s.endswith("s") and len(s) > 3 else s


def _resolve(name: str, options: list[str]) -> str | None:
    if name in options:
        return name
    hits = [o for o in options if _norm(o) == _norm(name)]
    return hits[0] if len(hits) == 1 else None


def check_plan(raw: dict[str, Any] | Plan | str, schema: Schema) -> PlanCheck:
    """Validate (and if possible repair) a plan; never raises for bad plans."""
    repairs: list[str] = []
    try:
        plan = _coerce(raw, repairs)
        plan = _repair(plan, schema, repairs)
    except PlanRejected as e:
        return PlanCheck(Plan.no_trade(list(schema.candidate_types)), "rejected", repairs, str(e))
    plan = _act_on_retrieval_mode(plan, repairs)
    if plan.is_empty:
        return PlanCheck(plan.model_copy(update={"risk_level": "no_trade"}), "empty", repairs, "the plan has no anchors")
    return PlanCheck(plan, "repaired" if repairs else "valid", repairs)


def _act_on_retrieval_mode(plan: Plan, repairs: list[str]) -> Plan:
    """Amazon's retrieval_mode, as the paper's planner uses it: ``skip`` (no usable plan) is no_trade
    downstream; ``graph_strict`` asserts that the hops alone are restrictive, so no relevance text."""
    if plan.retrieval_mode == "skip" and plan.risk_level != "no_trade":
        repairs.append("retrieval_mode 'skip': risk_level set to 'no_trade'")
        return plan.model_copy(update={"risk_level": "no_trade"})
    if plan.retrieval_mode == "graph_strict" and plan.target.relevance_text:
        repairs.append("retrieval_mode 'graph_strict': relevance_text dropped (the hops alone decide)")
        return plan.model_copy(update={"target": plan.target.model_copy(update={"relevance_text": ""})})
    return plan


def _coerce(raw: dict[str, Any] | Plan | str, repairs: list[str]) -> Plan:
    if isinstance(raw, Plan):
        return raw.model_copy(deep=True)
    if isinstance(raw, str):
        raw = parse_plan_text(raw)
    raw = dict(raw)
    risk = raw.get("risk_level")
    if isinstance(risk, str) and risk.strip().lower().replace("-", "_").replace(" ", "_") in RISK_LEVELS:
        raw["risk_level"] = risk.strip().lower().replace("-", "_").replace(" ", "_")
    elif risk is not None:
        repairs.append(f"unknown risk_level {risk!r} set to 'normal'")
        raw["risk_level"] = "normal"
    for h in raw.get("hops") or []:
        if isinstance(h, dict) and h.get("dir") not in (None, *DIRECTIONS):
            repairs.append(f"unknown hop direction {h.get('dir')!r} dropped (the hop is undirected)")
            h["dir"] = None
    for a in raw.get("anchors") or []:
        if isinstance(a, dict) and a.get("match_mode") not in (None, "name", "doc"):
            repairs.append(f"unknown match_mode {a.get('match_mode')!r} set to 'name'")
            a["match_mode"] = "name"
    if isinstance(raw.get("target"), dict) and isinstance(raw["target"].get("labels"), str):
        raw["target"]["labels"] = [raw["target"]["labels"]]
    if raw.get("retrieval_mode") is not None and raw.get("retrieval_mode") not in RETRIEVAL_MODES:
        repairs.append(f"unknown retrieval_mode {raw['retrieval_mode']!r} dropped")
        raw["retrieval_mode"] = None
    try:
        return Plan.model_validate(raw)
    except ValidationError as e:
        loc, msg = first_error(e)
        raise PlanRejected(f"field '{loc}': {msg}") from None


def _repair(plan: Plan, schema: Schema, repairs: list[str]) -> Plan:
    labels = schema.type_names
    rel_names = schema.relation_names
    target_var = plan.target.var or "T"

    # names -> schema names
    anchors = []
    for a in plan.anchors:
        if not a.text.strip():
            repairs.append(f"anchor {a.var} has no text; dropped")
            continue
        label = _resolve(a.label, labels)
        if label is None:
            raise PlanRejected(f"anchor {a.var}: unknown label {a.label!r}")
        if label != a.label:
            repairs.append(f"anchor {a.var}: label {a.label!r} -> {label!r}")
        anchors.append(a.model_copy(update={"label": label}))
    hops = []
    for h in plan.hops:
        rel = _resolve(h.rel, rel_names)
        if rel is None:
            raise PlanRejected(f"hop {h.from_var}->{h.to_var}: unknown relation {h.rel!r}")
        to_label = _resolve(h.to_label, labels)
        if to_label is None:
            raise PlanRejected(f"hop {h.from_var}->{h.to_var}: unknown label {h.to_label!r}")
        if (rel, to_label) != (h.rel, h.to_label):
            repairs.append(f"hop {h.from_var}->{h.to_var}: names normalised to {rel!r}/{to_label!r}")
        hops.append(Hop(**{"from": h.from_var, "rel": rel, "to_var": h.to_var, "to_label": to_label, "dir": h.direction}))

    anchors, hops = _split_anchor_from_target(anchors, hops, plan.target.labels, target_var, schema, repairs)
    for h in hops:
        if h.from_var == h.to_var:
            raise PlanRejected(f"hop {h.from_var}->{h.to_var} links a variable to itself")

    # duplicate hops
    seen, unique = set(), []
    for h in hops:
        key = (frozenset((h.from_var, h.to_var)), h.rel,
               h.direction if h.from_var <= h.to_var else reverse(h.direction))
        if key in seen:
            repairs.append(f"duplicate hop {h.from_var}-{h.rel}-{h.to_var} dropped")
            continue
        seen.add(key)
        unique.append(h)
    hops = unique

    # drop what is not connected to the target, and free dead-end variables
    anchors, hops = _prune(anchors, hops, target_var, repairs)

    # variable types
    var_label: dict[str, str] = {}

    def assign(var: str, label: str, where: str) -> None:
        if var in var_label and var_label[var] != label:
            raise PlanRejected(f"variable {var} is {var_label[var]!r} in one place and {label!r} in {where}")
        var_label[var] = label

    for a in anchors:
        assign(a.var, a.label, f"anchor {a.var}")
    fixed_hops = []
    for h in _order_hops(hops, var_label, schema, repairs):
        h = _directed(_fit_hop(h, var_label, schema, repairs, target_var), var_label, schema, repairs)
        assign(h.to_var, h.to_label, f"hop {h.from_var}->{h.to_var}")
        fixed_hops.append(h)
    hops = fixed_hops

    # target labels: candidate types, consistent with the hops that reach the target
    candidates = list(schema.candidate_types)
    t_labels = []
    for lab in plan.target.labels:
        r = _resolve(lab, labels)
        if r is None or r not in candidates:
            repairs.append(f"target label {lab!r} is not a candidate type; dropped")
            continue
        if r not in t_labels:
            t_labels.append(r)
    if target_var in var_label:
        tl = var_label[target_var]
        if tl not in candidates:
            raise PlanRejected(f"the target variable {target_var} has type {tl!r}, which is not a candidate type")
        if t_labels != [tl]:
            if t_labels:
                repairs.append(f"target labels {t_labels} -> [{tl!r}] (the type the plan gives {target_var})")
            t_labels = [tl]
    if not t_labels:
        if anchors or hops:
            raise PlanRejected("the target has no candidate label")
        t_labels = candidates
    relevance = collapse_repeats(plan.target.relevance_text or "")
    if relevance != (plan.target.relevance_text or "").strip():
        repairs.append(f"relevance_text's repeated phrases kept once: {relevance!r}")
    target = plan.target.model_copy(update={"var": target_var, "labels": t_labels, "relevance_text": relevance})
    return plan.model_copy(update={"anchors": anchors, "hops": hops, "target": target})


def collapse_repeats(text: str) -> str:
    """``text`` with each comma- or semicolon-separated phrase kept once (case-insensitively, first wins), where a
    phrase repeats; the last phrase is dropped too when it occurs only there and is the start of a longer one (the
    grammar's length cap cut it off). A text without repeats is returned as written."""
    phrases = [p.strip() for p in re.split(r"[,;]", text) if p.strip()]
    lowered = [p.lower() for p in phrases]
    kept: dict[str, str] = {}
    for low, phrase in zip(lowered, phrases, strict=True):
        kept.setdefault(low, phrase)  # the first spelling, in first-seen order
    if len(kept) == len(phrases):
        return text.strip()
    last = lowered[-1]
    if lowered.count(last) == 1 and any(low != last and low.startswith(last) for low in kept):
        del kept[last]
    return ", ".join(kept.values())


def _split_anchor_from_target(anchors, hops, target_labels, target_var, schema, repairs):
    """A small model often names an anchor "T" and then walks from "T": when the anchor's type is
    not the target's, or a hop goes from "T" to "T", and a hop from "T" fits the anchor's type,
    the anchor gets its own variable (the start of those hops)."""
    wanted = {_resolve(t, schema.type_names) for t in target_labels} | {h.to_label for h in hops if h.to_var == target_var}
    used = {a.var for a in anchors} | {h.from_var for h in hops} | {h.to_var for h in hops}
    out_anchors = []
    for a in anchors:
        self_loop = any(h.from_var == h.to_var == target_var for h in hops)
        if a.var != target_var or not hops or (a.label in wanted and not self_loop):
            out_anchors.append(a)
            continue
        new = next(f"A{i}" for i in range(1, 100) if f"A{i}" not in used)
        used.add(new)
        moved = []
        for i, h in enumerate(hops):
            if h.from_var == target_var and schema.find_relation(h.rel, a.label, h.to_label) is not None:
                hops[i] = h.model_copy(update={"from_var": new})
                moved.append(i)
        if not moved:
            out_anchors.append(a)
            continue
        why = "walks to itself" if self_loop else f"is a {a.label!r}, not an answer type"
        repairs.append(f"anchor on the target variable {target_var} {why}; renamed {new}")
        out_anchors.append(a.model_copy(update={"var": new}))
    return out_anchors, hops


def _prune(anchors, hops, target_var, repairs):
    """Keep only the component of the variable graph that contains the target; drop free
    (non-anchor, non-target) variables that are dead ends; reject cycles."""
    changed = True
    while changed:
        changed = False
        adj: dict[str, set[str]] = {}
        for h in hops:
            adj.setdefault(h.from_var, set()).add(h.to_var)
            adj.setdefault(h.to_var, set()).add(h.from_var)
        reach, stack = {target_var}, [target_var]
        while stack:
            v = stack.pop()
            for w in adj.get(v, ()):
                if w not in reach:
                    reach.add(w)
                    stack.append(w)
        keep_a = [a for a in anchors if a.var in reach]
        keep_h = [h for h in hops if h.from_var in reach]
        for a in anchors:
            if a.var not in reach:
                repairs.append(f"anchor {a.var} is not connected to the target; dropped")
        for h in hops:
            if h.from_var not in reach:
                repairs.append(f"hop {h.from_var}->{h.to_var} is not connected to the target; dropped")
        anchored = {a.var for a in keep_a} | {target_var}
        degree: dict[str, int] = {}
        for h in keep_h:
            degree[h.from_var] = degree.get(h.from_var, 0) + 1
            degree[h.to_var] = degree.get(h.to_var, 0) + 1
        dead = {v for v, d in degree.items() if d == 1 and v not in anchored}
        if dead:
            for h in keep_h:
                if h.from_var in dead or h.to_var in dead:
                    repairs.append(f"hop {h.from_var}->{h.to_var} ends at a free variable; dropped")
            keep_h = [h for h in keep_h if h.from_var not in dead and h.to_var not in dead]
        changed = len(keep_h) != len(hops) or len(keep_a) != len(anchors)
        anchors, hops = keep_a, keep_h
    n_vars = len({h.from_var for h in hops} | {h.to_var for h in hops})
    if hops and len(hops) > n_vars - 1:
        raise PlanRejected("the hops form a cycle; a plan must be a tree of variables around the target")
    return anchors, hops


def _order_hops(hops: list[Hop], var_label: dict[str, str], schema: Schema, repairs: list[str]) -> list[Hop]:
    """Hops in an order where each hop's ``from`` variable is typed before it is used. A hop
    written from the untyped end is turned round when the relation fixes the other end's type."""
    out, rest = [], list(hops)
    known = dict(var_label)
    while rest:
        progress = False
        for h in list(rest):
            if h.from_var in known:
                out.append(h)
                known.setdefault(h.to_var, h.to_label)
            elif h.to_var in known:
                here = known[h.to_var]
                ends = {r.target if r.source == here else r.source for r in schema.relations
                        if r.name == h.rel and here in (r.source, r.target)}
                if len(ends) != 1:
                    raise PlanRejected(f"hop {h.from_var}->{h.to_var} starts from an undefined variable {h.from_var}")
                flipped = Hop(**{"from": h.to_var, "rel": h.rel, "to_var": h.from_var, "to_label": ends.pop(),
                                 "dir": reverse(h.direction)})
                repairs.append(f"hop {h.from_var}->{h.to_var} turned round (its start {h.from_var} had no type)")
                out.append(flipped)
                known[flipped.to_var] = flipped.to_label
            else:
                continue
            rest.remove(h)
            progress = True
        if not progress:
            h = rest[0]
            raise PlanRejected(f"hop {h.from_var}->{h.to_var} starts from an undefined variable {h.from_var}")
    return out


def _fit_hop(h: Hop, var_label: dict[str, str], schema: Schema, repairs: list[str], target_var: str) -> Hop:
    src = var_label[h.from_var]
    if schema.find_relation(h.rel, src, h.to_label) is not None:
        return h
    # the relation fixes the far end's type
    ends = {r.target if r.source == src else r.source for r in schema.relations
            if r.name == h.rel and src in (r.source, r.target)}
    if len(ends) == 1 and h.to_var not in var_label:
        new = ends.pop()
        repairs.append(f"hop {h.from_var}->{h.to_var}: to_label {h.to_label!r} -> {new!r} (what {h.rel!r} links to {src!r})")
        return h.model_copy(update={"to_label": new})
    # exactly one relation links the two types
    links = {r.name for r in schema.relations if {r.source, r.target} == {src, h.to_label}}
    if len(links) == 1:
        new = links.pop()
        repairs.append(f"hop {h.from_var}->{h.to_var}: relation {h.rel!r} -> {new!r} (the only one linking {src!r} and {h.to_label!r})")
        return h.model_copy(update={"rel": new})
    raise PlanRejected(f"hop {h.from_var}->{h.to_var}: relation {h.rel!r} does not link {src!r} and {h.to_label!r}")


def _directed(h: Hop, var_label: dict[str, str], schema: Schema, repairs: list[str]) -> Hop:
    """A direction is kept on relations whose two ends have the same type; elsewhere the types already
    say which way the edge runs, and the direction is dropped (recorded when it contradicts them)."""
    if h.direction is None:
        return h
    src = var_label[h.from_var]
    i = schema.find_relation(h.rel, src, h.to_label)
    rel = schema.relations[i] if i is not None else None
    if rel is None or rel.source == rel.target:
        return h
    implied = "forward" if rel.source == src else "backward"
    if h.direction != implied:
        repairs.append(f"hop {h.from_var}->{h.to_var}: direction {h.direction!r} dropped ({h.rel!r} runs "
                       f"{rel.source} -> {rel.target})")
    return h.model_copy(update={"direction": None})
