"""Compile a validated plan and its anchor bindings into ONE parameterised Cypher query.

The query text is built only from identifiers derived from the SKB's schema (never from user
text); anchor ids and cosines travel as parameters. The form is the one that graph engines plan
well (``shared/docs/graph-databases.md``): anchors are filtered with ``WHERE a.id IN $ids`` and
scored with ``CASE a.id WHEN $id THEN $cos ... END``; each branch of the variable tree is
aggregated at the variable where it joins (staged aggregation), never joined as a cross product
of UNWINDs. Only portable Cypher is used (one label per node pattern, no list indexing, no
``CALL {}``), so the same text runs on Kùzu/Ladybug and on Neo4j 5 over Bolt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from grasp.graph.linking import Binding
from grasp.graph.tree import VarNode, anchor_vars, plan_tree
from grasp.plan.model import Plan, reverse
from grasp.skb.schema import Schema

WRITE_KEYWORDS = ("CREATE", "MERGE", "DELETE", "DETACH", "SET", "REMOVE", "DROP", "LOAD", "CALL", "FOREACH",
                  "COPY", "ALTER", "INSTALL", "ATTACH", "EXPORT", "IMPORT")
_RESERVED = set(WRITE_KEYWORDS) | {"MATCH", "WITH", "RETURN", "WHERE", "CASE", "WHEN", "THEN", "ELSE", "END", "IN",
                                   "AS", "AND", "OR", "NOT", "UNION", "ALL", "OPTIONAL", "UNWIND", "ORDER", "BY",
                                   "LIMIT", "SKIP", "NULL", "TRUE", "FALSE", "IS", "DISTINCT", "EXISTS", "COUNT"}
_WRITE_RE = re.compile(r"\b(" + "|".join(WRITE_KEYWORDS) + r")\b", re.IGNORECASE)


def assert_read_only(cypher: str) -> None:
    """Refuse any query that is not a read: compiled queries are MATCH / WITH / RETURN lines
    whose identifiers never spell a Cypher keyword. A guard of its own, because not every Bolt
    server enforces read-only transactions (ArcadeDB's plugin does not)."""
    from grasp.errors import GraspError

    lines = [line.split(" ", 1)[0] for line in cypher.strip().splitlines()]
    if any(first not in ("MATCH", "WITH", "RETURN") for first in lines) or _WRITE_RE.search(cypher):
        raise GraspError("refusing to run a query that is not a read-only MATCH/WITH/RETURN query")


class CypherNames:
    """Safe, readable identifiers for the schema's node types and relation names (never a Cypher keyword)."""

    def __init__(self, schema: Schema) -> None:
        self.label: dict[str, str] = {}
        self.rel: dict[str, str] = {}
        used: set[str] = set()
        for prefix, names, table in (("N", schema.type_names, self.label), ("R", schema.relation_names, self.rel)):
            for name in names:
                ident = re.sub(r"\W+", "_", name).strip("_") or prefix
                if ident[0].isdigit() or ident.upper() in _RESERVED:
                    ident = f"{prefix}_{ident}"
                base, i = ident, 2
                while ident.lower() in used:
                    ident = f"{base}_{i}"
                    i += 1
                used.add(ident.lower())
                table[name] = ident


@dataclass
class CompiledQuery:
    cypher: str
    params: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.cypher


class _Compiler:
    def __init__(self, names: CypherNames, bindings: dict[str, Binding]) -> None:
        self.names = names
        self.bindings = bindings
        self.params: dict = {}
        self.vars: dict[str, str] = {}
        self.lines: list[str] = []

    def v(self, var: str) -> str:
        """A Cypher variable name for a plan variable (plan variables are not trusted text)."""
        if var not in self.vars:
            self.vars[var] = f"v{len(self.vars)}"
        return self.vars[var]

    def node(self, n: VarNode, bind: bool = True) -> str:
        return f"({self.v(n.var)}:{self.names.label[n.label]})" if bind else f"({self.v(n.var)})"

    def anchor_filter(self, n: VarNode) -> str:
        key = f"ids_{self.v(n.var)}"
        self.params[key] = [int(i) for i in self.bindings[n.var].node_ids]
        return f"{self.v(n.var)}.id IN ${key}"

    def case(self, n: VarNode) -> str:
        b = self.bindings[n.var]
        if b.node_ids.size == 0:
            return "0.0"
        parts = []
        for j, (i, s) in enumerate(zip(b.node_ids.tolist(), b.scores.tolist(), strict=True)):
            ki, ks = f"id_{self.v(n.var)}_{j}", f"cos_{self.v(n.var)}_{j}"
            self.params[ki], self.params[ks] = int(i), float(s)
            parts.append(f"WHEN ${ki} THEN ${ks}")
        return f"CASE {self.v(n.var)}.id {' '.join(parts)} ELSE 0.0 END"

    def rel(self, name: str, direction: str | None = None) -> str:
        """The relation pattern written left to right; ``direction`` "forward": the left node is the source."""
        pattern = f"[:{self.names.rel[name]}]"
        return {"forward": f"-{pattern}->", "backward": f"<-{pattern}-"}.get(direction or "", f"-{pattern}-")

    # rows (n, s_n): the subtree of n scored at n, starting from its anchors (inward)
    def inward(self, n: VarNode) -> None:
        s = f"s_{self.v(n.var)}"
        if not n.children:
            self.lines.append(f"MATCH {self.node(n)} WHERE {self.anchor_filter(n)}")
            self.lines.append(f"WITH {self.v(n.var)}, {self.case(n)} AS {s}")
            return
        (rel, first, direction), rest = n.children[0], n.children[1:]
        self.inward(first)
        where = f" WHERE {self.anchor_filter(n)}" if n.anchor else ""
        # written child first: the step's direction, seen from the parent, is reversed
        self.lines.append(f"MATCH {self.node(first, False)}{self.rel(rel, reverse(direction))}{self.node(n)}{where}")
        self.lines.append(f"WITH {self.v(n.var)}, max(s_{self.v(first.var)}) AS {s}")
        for rel, child, direction in rest:
            self.outward(n, rel, child, direction)
        if n.anchor:
            self.lines.append(f"WITH {self.v(n.var)}, {s} + {self.case(n)} AS {s}")

    # join another branch at n: walk from n into the branch, score it, aggregate back at n
    def outward(self, n: VarNode, rel: str, child: VarNode, direction: str | None) -> None:
        s = f"s_{self.v(n.var)}"
        self._walk(n, rel, child, direction)
        total = " + ".join(self.case(self._find(child, a)) for a in anchor_vars(child)) or "0.0"
        # s is one value per row of n here, so max(s + branch) = s + max(branch); folding the sum into the
        # aggregate keeps a later max over n free of nested aggregation (Kùzu's binder refuses `s + b` there)
        self.lines.append(f"WITH {self.v(n.var)}, max({s} + {total}) AS {s}")

    def _walk(self, parent: VarNode, rel: str, n: VarNode, direction: str | None) -> None:
        where = f" WHERE {self.anchor_filter(n)}" if n.anchor else ""
        self.lines.append(f"MATCH {self.node(parent, False)}{self.rel(rel, direction)}{self.node(n)}{where}")
        for r, child, d in n.children:
            self._walk(n, r, child, d)

    @staticmethod
    def _find(n: VarNode, var: str) -> VarNode:
        if n.var == var:
            return n
        for step in n.children:
            try:
                return _Compiler._find(step.node, var)
            except KeyError:
                pass
        raise KeyError(var)


def compile_plan(plan: Plan, bindings: dict[str, Binding], names: CypherNames) -> CompiledQuery | None:
    """The Cypher query returning ``id, score`` for every target the plan reaches, or None when
    the plan has no anchor (nothing for the graph to do)."""
    root = plan_tree(plan)
    if not anchor_vars(root) or root.label is None:
        return None
    c = _Compiler(names, bindings)
    c.inward(root)
    c.lines.append(f"RETURN {c.v(root.var)}.id AS id, s_{c.v(root.var)} AS score")
    return CompiledQuery("\n".join(c.lines), c.params)
