"""The nested plan format: a plan written as a tree rooted at the answer, with a grammar that
cannot express a malformed plan.

The flat format (anchors, hops, target; :mod:`grasp.plan.model`) names variables and links them by
name, which is where a small model goes wrong: a hop from T to T, an anchor bound to the target, a
cycle, a variable typed two ways, a target of a type that is never an answer. In the nested format
there are no variable names: the target holds ``via`` edges, each a relation of the schema leading
to a node, which holds its own anchor and/or further ``via`` edges::

    {"target": {"label": "gene", "via": [
        {"rel": "has_domain", "node": {"label": "protein_domain", "via": [
            {"rel": "has_domain", "node": {"label": "gene", "anchor": {"text": "DGKA", "match_mode": "name"}}}]}},
        {"rel": "on_chromosome", "node": {"label": "chromosome", "anchor": {"text": "chromosome 1", "match_mode": "name"}}}],
      "relevance_text": ""},
     "risk_level": "aggressive"}

The JSON schema built here from the SKB's schema (one definition per node type, whose edges are
exactly the relations that type takes part in, each to the type at the relation's other end)
makes every plan it admits a tree whose hops fit the schema, whose target is an answer type,
whose anchors are never the target (except the pure-text plan, ``{"label": ..., "text": ...}``)
and whose every branch ends at an anchor. :func:`nested_to_flat` turns it into the flat plan the
validator, the compiler and the plan cache already speak; :func:`flat_to_nested` renders the
worked examples.
"""

from __future__ import annotations

import itertools
from typing import Any

from grasp.plan.model import DIRECTIONS, RETRIEVAL_MODES, RISK_LEVELS, reverse
from grasp.plan.validate import PlanRejected
from grasp.skb.schema import Schema

MAX_VIA = 3  # edges per node: wide enough for the queries seen (at most 3 constraints on one node)


def _neighbours(schema: Schema, label: str) -> list[tuple[str, str]]:
    """(relation, type at its other end) for every relation ``label`` takes part in, in schema order."""
    out: list[tuple[str, str]] = []
    for r in schema.relations:
        for here, there in ((r.source, r.target), (r.target, r.source)):
            if here == label and (r.name, there) not in out:
                out.append((r.name, there))
    return out


def nested_json_schema(schema: Schema, *, retrieval_mode: bool = False) -> dict:
    """The grammar of nested plans over this schema (JSON schema with one ``$defs`` entry per node type)."""
    anchor = {
        "type": "object",
        "properties": {"text": {"type": "string", "minLength": 1, "maxLength": 200},
                       "match_mode": {"enum": ["name", "doc"]}},
        "required": ["text", "match_mode"],
        "additionalProperties": False,
    }

    same_type = {r.name for r in schema.relations if r.source == r.target}

    def edge(rel: str, here: str, there: str) -> dict:
        props: dict[str, Any] = {"rel": {"const": rel}}
        if here == there and rel in same_type:  # which way the stored edge runs, seen from the node above
            props["dir"] = {"enum": list(DIRECTIONS)}
        props["node"] = {"$ref": f"#/$defs/{there}"}
        return {"type": "object", "properties": props, "required": ["rel", "node"], "additionalProperties": False}

    def via(label: str) -> dict:
        edges = [edge(rel, label, there) for rel, there in _neighbours(schema, label)]
        return {"type": "array", "items": {"anyOf": edges}, "minItems": 1, "maxItems": MAX_VIA}

    defs: dict[str, Any] = {}
    for label in schema.type_names:
        label_const = {"const": label}
        anchored = {"type": "object", "properties": {"label": label_const, "anchor": anchor},
                    "required": ["label", "anchor"], "additionalProperties": False}
        if not _neighbours(schema, label):
            defs[label] = anchored
            continue
        anchored["properties"]["via"] = via(label)
        walk = {"type": "object", "properties": {"label": label_const, "via": via(label)},
                "required": ["label", "via"], "additionalProperties": False}
        defs[label] = {"anyOf": [anchored, walk]}
    relevance = {"type": "string", "maxLength": 300}
    targets = []
    for label in schema.candidate_types:
        if _neighbours(schema, label):
            targets.append({"type": "object",
                            "properties": {"label": {"const": label}, "via": via(label), "relevance_text": relevance},
                            "required": ["label", "via", "relevance_text"], "additionalProperties": False})
    targets.append({"type": "object",
                    "properties": {"label": {"enum": list(schema.candidate_types)},
                                   "text": {"type": "string", "minLength": 1, "maxLength": 200},
                                   "relevance_text": relevance},
                    "required": ["label", "text", "relevance_text"], "additionalProperties": False})
    props: dict[str, Any] = {"target": {"anyOf": targets}, "risk_level": {"enum": list(RISK_LEVELS)}}
    required = ["target", "risk_level"]
    if retrieval_mode:
        props["retrieval_mode"] = {"enum": list(RETRIEVAL_MODES)}
        required.append("retrieval_mode")
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False,
            "$defs": defs}


def nested_to_flat(obj: dict[str, Any]) -> dict[str, Any]:
    """The flat plan (anchors, hops, target, risk_level) of a nested one. Variables: T for the target,
    A, B, C, ... for anchored nodes, X1, X2, ... for the others; each edge becomes a hop from the node
    below to the node above (towards T), written leaves first, so every hop starts at a typed variable.
    Shapes the grammar forbids (it may be off, e.g. for an endpoint without schema support) raise
    :class:`PlanRejected` with the reason."""
    target = obj.get("target")
    if not isinstance(target, dict):
        raise PlanRejected("the plan has no target object")
    label = target.get("label")
    if not isinstance(label, str) or not label:
        raise PlanRejected("the target has no label")
    out: dict[str, Any] = {"anchors": [], "hops": [],
                           "target": {"var": "T", "labels": [label], "relevance_text": target.get("relevance_text") or ""},
                           "risk_level": obj.get("risk_level", "normal")}
    if obj.get("retrieval_mode") is not None:
        out["retrieval_mode"] = obj["retrieval_mode"]
    if target.get("text"):
        out["anchors"].append({"var": "T", "text": target["text"], "label": label, "match_mode": "doc"})
        return out
    anchor_names = (chr(c) for c in itertools.chain(range(ord("A"), ord("S")), range(ord("U"), ord("Z") + 1)))
    free_names = (f"X{i}" for i in itertools.count(1))

    def walk(node: dict[str, Any], var: str, node_label: str, depth: int) -> None:
        if depth > 8:
            raise PlanRejected("the plan nests deeper than 8 hops")
        for edge in node.get("via") or []:
            child = edge.get("node") if isinstance(edge, dict) else None
            if not isinstance(child, dict) or not isinstance(edge.get("rel"), str):
                raise PlanRejected(f"a via edge of {var} has no rel or node")
            child_label = child.get("label")
            if not isinstance(child_label, str) or not child_label:
                raise PlanRejected(f"a node below {var} has no label")
            anchor = child.get("anchor")
            if not anchor and not child.get("via"):
                raise PlanRejected(f"the {child_label} node below {var} has neither an anchor nor a via edge")
            child_var = next(anchor_names) if anchor else next(free_names)
            if anchor:
                if not isinstance(anchor, dict) or not isinstance(anchor.get("text"), str):
                    raise PlanRejected(f"the anchor of {child_var} has no text")
                out["anchors"].append({"var": child_var, "text": anchor["text"], "label": child_label,
                                       "match_mode": anchor.get("match_mode", "name")})
            walk(child, child_var, child_label, depth + 1)
            hop = {"from": child_var, "rel": edge["rel"], "to_var": var, "to_label": node_label}
            if edge.get("dir") is not None:  # seen from the node above; the hop starts below
                hop["dir"] = reverse(edge["dir"]) if edge["dir"] in DIRECTIONS else edge["dir"]
            out["hops"].append(hop)

    if not target.get("via"):
        raise PlanRejected("the target has neither via edges nor a text")
    walk(target, "T", label, 0)
    return out


def flat_to_nested(plan: dict[str, Any]) -> dict[str, Any]:
    """The nested form of a flat plan that is a tree around T (the worked examples)."""
    target = plan["target"]
    labels = {a["var"]: a["label"] for a in plan.get("anchors", [])}
    labels.update({h["to_var"]: h["to_label"] for h in plan.get("hops", [])})
    labels.setdefault(target.get("var", "T"), (target.get("labels") or [None])[0])
    anchors = {a["var"]: a for a in plan.get("anchors", [])}
    t = target.get("var", "T")
    head: dict[str, Any] = {"label": labels[t]}
    out: dict[str, Any] = {"target": head, "risk_level": plan.get("risk_level", "normal")}
    if plan.get("retrieval_mode") is not None:
        out["retrieval_mode"] = plan["retrieval_mode"]
    if t in anchors and not plan.get("hops"):
        head.update({"text": anchors[t]["text"], "relevance_text": target.get("relevance_text", "")})
        return out
    edges: dict[str, list[tuple[str, str, str | None]]] = {}
    for h in plan.get("hops", []):  # (relation, the other end, the direction seen from this end)
        edges.setdefault(h["from"], []).append((h["rel"], h["to_var"], h.get("dir")))
        edges.setdefault(h["to_var"], []).append((h["rel"], h["from"], reverse(h.get("dir"))))

    def node(var: str, parent: str | None) -> dict[str, Any]:
        n: dict[str, Any] = {"label": labels[var]}
        if var in anchors and var != t:
            a = anchors[var]
            n["anchor"] = {"text": a["text"], "match_mode": a.get("match_mode", "name")}
        via = [{"rel": rel, **({"dir": d} if d else {}), "node": node(other, var)}
               for rel, other, d in edges.get(var, []) if other != parent]
        if via:
            n["via"] = via
        return n

    head.update({k: v for k, v in node(t, None).items() if k == "via"})
    head["relevance_text"] = target.get("relevance_text", "")
    return out
