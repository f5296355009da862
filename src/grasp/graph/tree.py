"""A validated plan seen as a tree of variables rooted at the target.

Both executors (Cypher and in-memory) walk this tree bottom-up: the score of a variable's node
is its own anchor cosine (if it is an anchor) plus, for each child sub-tree reached through a hop,
the best child score among its neighbours. At the target this is the paper's "sum of cosines
along the path, max over rows" (for a tree of variables the maximum of a sum over independent
branches is the sum of the branches' maxima). Each hop is matched on its own, so a path may
revisit a node or an edge.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from grasp.plan.model import Direction, Plan, reverse


class Step(NamedTuple):
    """An edge of the tree: ``relation`` from the parent to ``node``; ``direction`` "forward" when the
    parent is the relation's source, "backward" when ``node`` is, None for either."""

    relation: str
    node: VarNode
    direction: Direction | None = None


@dataclass
class VarNode:
    var: str
    label: str | None                    # None only for a hop-less target with several labels
    anchor: bool = False
    children: list[Step] = field(default_factory=list)


def plan_tree(plan: Plan) -> VarNode:
    """Root the (validated) plan's variable graph at the target variable."""
    t = plan.target.var
    labels = {a.var: a.label for a in plan.anchors}
    for h in plan.hops:
        labels.setdefault(h.to_var, h.to_label)
    anchors = {a.var for a in plan.anchors}
    if t not in labels and len(plan.target.labels) == 1:
        labels[t] = plan.target.labels[0]
    adj: dict[str, list[tuple[str, str, Direction | None]]] = {}
    for h in plan.hops:  # each entry: (relation, the other end, the direction seen from this end)
        adj.setdefault(h.from_var, []).append((h.rel, h.to_var, h.direction))
        adj.setdefault(h.to_var, []).append((h.rel, h.from_var, reverse(h.direction)))

    def build(var: str, parent: str | None) -> VarNode:
        node = VarNode(var, labels.get(var), var in anchors)
        for rel, other, direction in adj.get(var, []):
            if other != parent:
                node.children.append(Step(rel, build(other, var), direction))
        return node

    return build(t, None)


def anchor_vars(node: VarNode) -> list[str]:
    out = [node.var] if node.anchor else []
    for step in node.children:
        out += anchor_vars(step.node)
    return out
