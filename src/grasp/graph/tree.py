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

from grasp.plan.model import Plan


@dataclass
class VarNode:
    var: str
    label: str | None                    # None only for a hop-less target with several labels
    anchor: bool = False
    children: list[tuple[str, VarNode]] = field(default_factory=list)  # (relation name, child)


def plan_tree(plan: Plan) -> VarNode:
    """Root the (validated) plan's variable graph at the target variable."""
    t = plan.target.var
    labels = {a.var: a.label for a in plan.anchors}
    for h in plan.hops:
        labels.setdefault(h.to_var, h.to_label)
    anchors = {a.var for a in plan.anchors}
    if t not in labels and len(plan.target.labels) == 1:
        labels[t] = plan.target.labels[0]
    adj: dict[str, list[tuple[str, str]]] = {}
    for h in plan.hops:
        adj.setdefault(h.from_var, []).append((h.rel, h.to_var))
        adj.setdefault(h.to_var, []).append((h.rel, h.from_var))

    def build(var: str, parent: str | None) -> VarNode:
        node = VarNode(var, labels.get(var), var in anchors)
        for rel, other in adj.get(var, []):
            if other != parent:
                node.children.append((rel, build(other, var)))
        return node

    return build(t, None)


def anchor_vars(node: VarNode) -> list[str]:
    out = [node.var] if node.anchor else []
    for _, child in node.children:
        out += anchor_vars(child)
    return out
