"""A JSON schema for plans built from THIS SKB's schema (labels and relation names as enums).

Given to a grammar-constrained decoder (llama.cpp's ``response_format`` schema, or an
OpenAI-compatible server's ``json_schema`` response format), it makes a small model unable to
emit an unknown label or relation; type fit of each hop is still checked by the validator.
"""

from __future__ import annotations

from grasp.plan.model import RETRIEVAL_MODES, RISK_LEVELS
from grasp.skb.schema import Schema


def plan_json_schema(schema: Schema, *, retrieval_mode: bool = False) -> dict:
    labels = list(schema.type_names)
    rels = list(schema.relation_names)
    var = {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_]{0,15}$"}
    anchor = {
        "type": "object",
        "properties": {
            "var": var,
            "text": {"type": "string", "minLength": 1, "maxLength": 200},
            "label": {"enum": labels},
            "match_mode": {"enum": ["name", "doc"]},
        },
        "required": ["var", "text", "label", "match_mode"],
        "additionalProperties": False,
    }
    hop = {
        "type": "object",
        "properties": {"from": var, "rel": {"enum": rels}, "to_var": var, "to_label": {"enum": labels}},
        "required": ["from", "rel", "to_var", "to_label"],
        "additionalProperties": False,
    }
    target = {
        "type": "object",
        "properties": {
            "var": {"const": "T"},
            "labels": {"type": "array", "items": {"enum": list(schema.candidate_types)}, "minItems": 1, "maxItems": 4},
            "relevance_text": {"type": "string", "maxLength": 300},
        },
        "required": ["var", "labels", "relevance_text"],
        "additionalProperties": False,
    }
    props = {
        "anchors": {"type": "array", "items": anchor, "maxItems": 4},
        "hops": {"type": "array", "items": hop, "maxItems": 6},
        "target": target,
        "risk_level": {"enum": list(RISK_LEVELS)},
    }
    required = ["anchors", "hops", "target", "risk_level"]
    if retrieval_mode:
        props["retrieval_mode"] = {"enum": list(RETRIEVAL_MODES)}
        required.append("retrieval_mode")
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}
