"""The in-memory semi-structured knowledge base: typed nodes with text, typed edges as CSR adjacency."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from grasp.skb.schema import Schema


@dataclass(frozen=True)
class Adjacency:
    """Undirected compressed adjacency: the neighbours of node ``u`` are
    ``nbr[indptr[u]:indptr[u+1]]`` reached through relations ``rel[...]`` (schema relation ids);
    ``out[...]`` says whether the edge was stored from ``u`` (u is the relation's source). Each stored
    edge appears once from each end; an edge stored both ways appears twice from each end."""

    indptr: np.ndarray
    nbr: np.ndarray
    rel: np.ndarray
    out: np.ndarray

    @classmethod
    def build(cls, n: int, src: np.ndarray, rel: np.ndarray, dst: np.ndarray) -> Adjacency:
        u = np.concatenate([src, dst]).astype(np.int64)
        v = np.concatenate([dst, src]).astype(np.int64)
        r = np.concatenate([rel, rel]).astype(np.int64)
        out = np.concatenate([np.ones(len(src), dtype=bool), np.zeros(len(dst), dtype=bool)])
        if u.size:
            n_rel = int(r.max()) + 1
            key = ((u * n + v) * n_rel + r) * 2 + out
            key, first = np.unique(key, return_index=True)  # sorted by (u, v, r, out); drops duplicates
            u, v, r, out = u[first], v[first], r[first], out[first]
        counts = np.bincount(u, minlength=n)
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(indptr, v.astype(np.int32), r.astype(np.int16), out)

    def neighbors(self, node: int) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = self.indptr[node], self.indptr[node + 1]
        return self.nbr[lo:hi], self.rel[lo:hi]

    def degree(self) -> np.ndarray:
        return np.diff(self.indptr)


@dataclass
class SKB:
    """A typed graph whose nodes carry text.

    Nodes are ``0..N-1``; ``node_type[i]`` indexes ``schema.type_names``; ``fields[i]`` maps
    field names to values (strings or lists of strings in the open format; STaRK data may hold
    richer values). Edges are kept as stored (``edge_src -> edge_dst`` through schema relation
    ``edge_rel``) and, for traversal, as undirected CSR adjacency (:attr:`adjacency`).
    """

    schema: Schema
    node_type: np.ndarray
    names: list[str]
    fields: list[dict[str, Any]]
    edge_src: np.ndarray
    edge_rel: np.ndarray
    edge_dst: np.ndarray
    source: str = ""
    fingerprint: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def schema_only(cls, schema: Schema) -> SKB:
        """An SKB with a schema and no nodes: enough to plan queries without the graph."""
        empty = np.zeros(0, dtype=np.int32)
        return cls(schema, np.zeros(0, dtype=np.int16), [], [], empty, empty.astype(np.int16), empty,
                   fingerprint=f"schema-only-{schema.name}")

    # --- sizes and types -------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.schema.name

    @property
    def num_nodes(self) -> int:
        return len(self.names)

    @property
    def num_edges(self) -> int:
        return int(self.edge_src.shape[0])

    def type_of(self, node: int) -> str:
        return self.schema.type_names[int(self.node_type[node])]

    def type_id(self, type_name: str) -> int:
        try:
            return self.schema.type_names.index(type_name)
        except ValueError:
            raise KeyError(f"unknown node type {type_name!r}; known: {', '.join(self.schema.type_names)}") from None

    def nodes_of_type(self, type_name: str) -> np.ndarray:
        return np.flatnonzero(self.node_type == self.type_id(type_name))

    @cached_property
    def candidate_mask(self) -> np.ndarray:
        """True for nodes of a candidate (answer) type; only these are ranked and evaluated."""
        ids = [self.type_id(t) for t in self.schema.candidate_types]
        return np.isin(self.node_type, ids)

    @cached_property
    def candidate_ids(self) -> np.ndarray:
        return np.flatnonzero(self.candidate_mask)

    def type_counts(self) -> dict[str, int]:
        counts = np.bincount(self.node_type, minlength=len(self.schema.type_names))
        return {t: int(c) for t, c in zip(self.schema.type_names, counts, strict=True)}

    def relation_counts(self) -> dict[str, int]:
        counts = np.bincount(self.edge_rel, minlength=len(self.schema.relations))
        out: dict[str, int] = {}
        for rel, c in zip(self.schema.relations, counts, strict=True):
            out[rel.name] = out.get(rel.name, 0) + int(c)
        return out

    # --- graph -----------------------------------------------------------------------------
    @cached_property
    def adjacency(self) -> Adjacency:
        return Adjacency.build(self.num_nodes, self.edge_src, self.edge_rel, self.edge_dst)

    def neighbors(self, node: int, relation: str | None = None) -> np.ndarray:
        """Neighbour ids of ``node`` (relations are undirected), optionally through one relation name."""
        nbr, rel = self.adjacency.neighbors(node)
        if relation is not None:
            keep = np.isin(rel, self.schema.relation_ids(relation))
            nbr = nbr[keep]
        return np.unique(nbr)

    def neighbors_by_relation(self, node: int) -> dict[str, list[int]]:
        """Neighbour ids grouped by relation name, each group in ascending id order."""
        nbr, rel = self.adjacency.neighbors(node)
        groups: dict[str, list[int]] = {}
        for v, r in zip(nbr.tolist(), rel.tolist(), strict=True):
            groups.setdefault(self.schema.relations[r].name, []).append(v)
        return {name: sorted(set(ids)) for name, ids in groups.items()}

    def __repr__(self) -> str:
        return f"SKB({self.name!r}, {self.num_nodes:,} nodes, {self.num_edges:,} edges)"
