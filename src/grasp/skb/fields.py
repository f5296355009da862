"""The multi-field view of a node that mFAR scores field by field (Li et al., ICLR 2025).

Fields of an SKB: the node's name, each text field of the candidate types, one field per
relation touching a candidate type (the names of the node's neighbours through it, grouped by
their type), and ``single``: the whole document. For STaRK the fields follow mFAR's choice
(Amazon 8, MAG 5, Prime 22 — see :data:`STARK_FIELDS`); for an open-format SKB they come from its
schema. A node without a field gets the empty string, which its scorers treat as "no evidence".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from grasp.skb.documents import DocumentLayout, render_value
from grasp.skb.graph import SKB

Kind = Literal["name", "text", "relation", "single"]


@dataclass(frozen=True)
class FieldSpec:
    name: str
    kind: Kind
    source: str = ""  # the text field or relation name


STARK_FIELDS: dict[str, list[tuple[str, Kind, str]]] = {
    "stark-amazon": [("title", "name", ""), ("brand", "text", "brand"), ("description", "text", "description"),
                     ("feature", "text", "feature"), ("review", "text", "review"), ("qa", "text", "qa"),
                     ("also_buy", "relation", "also_buy"), ("also_view", "relation", "also_view")],
    "stark-mag": [("title", "name", ""), ("abstract", "text", "abstract"),
                  ("cites", "relation", "paper___cites___paper"),
                  ("has_topic", "relation", "paper___has_topic___field_of_study"),
                  ("author_institution", "relation", "author___writes___paper")],
}


def field_specs(skb: SKB) -> list[FieldSpec]:
    """The fields of this SKB, ending with ``single``."""
    stark = STARK_FIELDS.get(skb.schema.name)
    if stark is not None:
        return [FieldSpec(n, k, s) for n, k, s in stark] + [FieldSpec("single", "single")]
    specs = [FieldSpec("name", "name")]
    if skb.schema.name == "stark-prime":
        specs += [FieldSpec("type", "text", "__type__"), FieldSpec("details", "text", "details")]
    else:
        seen: list[str] = []
        for t in skb.schema.candidate_types:
            for f in skb.schema.node_types[t].text_fields:
                if f not in seen:
                    seen.append(f)
        specs += [FieldSpec(f, "text", f) for f in seen]
    cand = set(skb.schema.candidate_types)
    rels = [r.name for r in skb.schema.relations if r.source in cand or r.target in cand]
    specs += [FieldSpec(f"rel:{r}", "relation", r) for r in dict.fromkeys(rels)]
    return specs + [FieldSpec("single", "single")]


def field_text(skb: SKB, node: int, spec: FieldSpec, layout: DocumentLayout, *, max_names: int = 64) -> str:
    """The text of one field of one node ('' when the node has none)."""
    if spec.kind == "name":
        return skb.names[node]
    if spec.kind == "single":
        return layout.document(skb, node)
    if spec.kind == "text":
        if spec.source == "__type__":
            return skb.type_of(node)
        return render_value(skb.fields[node].get(spec.source))
    ids = skb.neighbors(node, spec.source)
    if ids.size == 0:
        return ""
    if spec.source == "author___writes___paper":  # MAG: authors with their institutions
        return "; ".join(_author_with_institutions(skb, int(a)) for a in ids[:max_names])
    by_type: dict[str, list[str]] = {}
    for i in ids[:max_names].tolist():
        by_type.setdefault(skb.type_of(i), []).append(skb.names[i])
    return "; ".join(f"{t}: {', '.join(names)}" for t, names in by_type.items())


def _author_with_institutions(skb: SKB, author: int) -> str:
    inst = skb.neighbors(author, "author___affiliated_with___institution")
    return f"{skb.names[author]} ({', '.join(skb.names[i] for i in inst[:3])})" if inst.size else skb.names[author]
