"""Schema linking: show the planner the part of the schema a query needs.

A real KB can have far more relations than a 1.5B planner can choose among (one per pair of types quickly makes a
hundred), and given them all it picks a target type or a sibling ``*_is_a`` the question never meant. As text-to-SQL
systems link the question to tables and columns first, :class:`SchemaLinker` ranks the schema's relations by the
cosine of the query with a short description of each (its name in words, its two end types, its description, a few
example names of its end types) and keeps the ``keep`` best; the sub-schema holds those relations, the types at their
ends and every candidate type. The prompt's schema block and the grammar are rendered from it (so a plan can only use
a linked relation), while validation still reads the full schema. A schema with at most ``keep`` relations is shown
whole: linking only ever narrows what is too wide to read.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import numpy as np

from grasp.encode.encoder import Encoder
from grasp.skb.graph import SKB
from grasp.skb.schema import Schema
from grasp.storage import stable_hash

EXAMPLE_NAMES = 3  # example node names of each end type in a relation's description


def words(name: str) -> str:
    """A relation or type name as words ("has_domain" -> "has domain", "worksWith" -> "works with")."""
    return re.sub(r"([a-z])([A-Z])", r"\1 \2", re.sub(r"[_\-:./]+", " ", name)).lower().strip()


class SchemaLinker:
    """The relations of a schema nearest a query, and the sub-schema made of them."""

    def __init__(self, skb: SKB, encoder: Callable[[], Encoder] | Encoder, *, keep: int) -> None:
        """``encoder``: the encoder, or a factory of it called on the first query linked (a replayed plan needs none)."""
        if keep < 1:
            raise ValueError(f"keep must be at least 1, not {keep}")
        self.skb, self.keep = skb, keep
        self._encoder = encoder
        self._vectors: np.ndarray | None = None
        self._lock = threading.Lock()  # the planner's threads link queries at once; a tokenizer is not shared safely
        self.descriptions = [self.describe(i) for i in range(len(skb.schema.relations))]
        self.active = len(skb.schema.relations) > keep
        # enters the plan cache key: the plan depends on which relations were shown
        self.tag = f"schema-link:{keep}:{stable_hash(self.descriptions, 12)}" if self.active else ""

    def describe(self, index: int) -> str:
        """The text a query is compared with: the relation in words, its ends, its description, example names."""
        r = self.skb.schema.relations[index]
        examples = []
        for end in dict.fromkeys((r.source, r.target)):
            ids = self.skb.nodes_of_type(end)
            picks = ids[:: max(1, len(ids) // EXAMPLE_NAMES)][:EXAMPLE_NAMES] if len(ids) else []
            examples.append(f"{words(end)} such as " + ", ".join(self.skb.names[i] for i in picks))
        text = f"{words(r.source)} {words(r.name)} {words(r.target)}"
        return "; ".join(part for part in (text, r.description, *examples) if part)

    @property
    def encoder(self) -> Encoder:
        if not isinstance(self._encoder, Encoder):
            self._encoder = self._encoder()
        return self._encoder

    def scores(self, query: str) -> np.ndarray:
        """Cosine of the query with each relation's description, in schema order."""
        with self._lock:
            if self._vectors is None:
                self._vectors = np.asarray(self.encoder.encode(self.descriptions), dtype=np.float32)
            q = np.asarray(self.encoder.encode_queries([query]), dtype=np.float32)[0]
        return self._vectors @ q

    def link(self, query: str) -> Schema | None:
        """The sub-schema for this query (None: the schema is narrow enough to show whole). Relations keep their
        schema order; ties in score go to the earlier relation."""
        if not self.active:
            return None
        scores = self.scores(query)
        keep = sorted(np.lexsort((np.arange(scores.size), -scores))[: self.keep].tolist())
        schema = self.skb.schema
        relations = [schema.relations[i] for i in keep]
        types = dict.fromkeys([*(t for r in relations for t in (r.source, r.target)), *schema.candidate_types])
        return schema.model_copy(update={"relations": relations,
                                         "node_types": {t: spec for t, spec in schema.node_types.items() if t in types}})
