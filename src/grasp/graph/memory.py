"""The in-memory executor: the plan's tree evaluated by max-plus passes over the SKB's CSR
adjacency. It computes exactly the scores of the compiled Cypher (a test checks it on random
plans) and touches only the edges leaving the nodes currently in play, so hub-anchored plans
stay fast."""

from __future__ import annotations

import numpy as np

from grasp.graph.compiler import CompiledQuery
from grasp.graph.engine import GraphBackend
from grasp.graph.linking import Binding
from grasp.graph.tree import VarNode, plan_tree
from grasp.plan.model import Plan
from grasp.skb.graph import SKB

NEG = -np.inf


def _ragged_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.arange(total, dtype=np.int64) - offsets + np.repeat(starts, lengths)


class MemoryExecutor(GraphBackend):
    name = "memory"

    def __init__(self, skb: SKB) -> None:
        self.skb = skb
        self.adj = skb.adjacency

    def _base(self, node: VarNode, bindings: dict[str, Binding], labels: list[str]) -> np.ndarray:
        arr = np.full(self.skb.num_nodes, NEG)
        if node.anchor:
            b = bindings.get(node.var)
            if b is not None and b.node_ids.size:
                ok = np.isin(self.skb.node_type[b.node_ids], [self.skb.type_id(t) for t in labels])
                arr[b.node_ids[ok]] = b.scores[ok]
        else:
            arr[np.isin(self.skb.node_type, [self.skb.type_id(t) for t in labels])] = 0.0
        return arr

    def _propagate(self, child: np.ndarray, relation: str, label: str, direction: str | None = None) -> np.ndarray:
        """best[w] = max over neighbours u of w (through ``relation``) of child[u]; w of type ``label``;
        ``direction`` (seen from w): "forward" keeps only edges stored w -> u, "backward" only u -> w."""
        active = np.flatnonzero(child > NEG)
        out = np.full(self.skb.num_nodes, NEG)
        if active.size == 0:
            return out
        starts = self.adj.indptr[active]
        lengths = self.adj.indptr[active + 1] - starts
        pos = _ragged_positions(starts, lengths)
        nbr = self.adj.nbr[pos]
        keep = np.isin(self.adj.rel[pos], self.skb.schema.relation_ids(relation))
        keep &= self.skb.node_type[nbr] == self.skb.type_id(label)
        if direction is not None:  # the entry (u, w) is out when u is the stored source
            keep &= self.adj.out[pos] == (direction == "backward")
        np.maximum.at(out, nbr[keep], np.repeat(child[active], lengths)[keep])
        return out

    def _score(self, node: VarNode, bindings: dict[str, Binding], labels: list[str]) -> np.ndarray:
        arr = self._base(node, bindings, labels)
        for rel, child, direction in node.children:
            sub = self._score(child, bindings, [child.label])
            arr = arr + self._propagate(sub, rel, node.label, direction)
        return arr

    def execute(self, plan: Plan, bindings: dict[str, Binding],
                compiled: CompiledQuery | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(target node ids, anchor scores) of every target the plan reaches, unsorted (the plan's
        tree is evaluated directly; ``compiled`` is not needed)."""
        root = plan_tree(plan)
        labels = [root.label] if root.label else list(plan.target.labels)
        arr = self._score(root, bindings, labels)
        ids = np.flatnonzero(arr > NEG)
        return ids, arr[ids]
