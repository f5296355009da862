"""Name anchors that name nothing in the KB, read as descriptions.

A small planner often binds a descriptive phrase as an entity ("packages for http proxy" becomes packages tagged
"http proxy", a tag the KB does not have). Linking then finds the nearest name anyway, and the plan walks from a
node the question never meant. Once the anchors are linked the evidence is there: an anchor whose best node's name
neither holds its words nor is near it in the encoder's space (:func:`grasp.graph.linking.match_quality` below a
floor) is a description. Its branch of the plan is dropped and its words join the target's relevance text; a plan
left with no anchor becomes the pure-text shape (the target matched by its documents). The other anchors, and the
walk between them and the target, stay as planned.
"""

from __future__ import annotations

from collections.abc import Sequence

from grasp.plan.model import Anchor, Plan


def descriptive_anchors(qualities: Sequence[tuple[Anchor, float]], floor: float) -> list[Anchor]:
    """The name-mode anchors whose best linked node names them less well than ``floor``, from their
    :func:`grasp.graph.linking.name_qualities`."""
    return [a for a, quality in qualities if quality < floor]


def as_descriptions(plan: Plan, described: Sequence[Anchor]) -> Plan:
    """``plan`` with each of ``described`` read as a description: the anchor dropped with the hops that led only
    from it to the target, its text added to the relevance text; where no anchor is left, the target is matched by
    its documents against the described text."""
    if not described:
        return plan
    dropped = {id(a) for a in described}
    target_var = plan.target.var
    kept = [a for a in plan.anchors if id(a) not in dropped]
    anchored = {a.var for a in kept} | {target_var}
    hops = list(plan.hops)
    while True:  # prune the branches that lead to no anchor left (leaves that are neither anchored nor the target)
        degree: dict[str, int] = {}
        for h in hops:
            degree[h.from_var] = degree.get(h.from_var, 0) + 1
            degree[h.to_var] = degree.get(h.to_var, 0) + 1
        leaves = {v for v, d in degree.items() if d == 1 and v not in anchored}
        if not leaves:
            break
        hops = [h for h in hops if h.from_var not in leaves and h.to_var not in leaves]
    texts = [a.text for a in described]
    relevance = plan.target.relevance_text
    for t in texts:
        if t.lower() not in relevance.lower():
            relevance = f"{relevance}; {t}" if relevance else t
    if not kept:  # nothing names a node: the pure-text shape
        label = plan.target.labels[0] if plan.target.labels else described[0].label
        kept, hops = [Anchor(var=target_var, text="; ".join(texts), label=label, match_mode="doc")], []
    target = plan.target.model_copy(update={"relevance_text": relevance})
    return plan.model_copy(update={"anchors": kept, "hops": hops, "target": target})
