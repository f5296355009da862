"""The graph engine interface: a plan with its anchor bindings in, (node ids, scores) out.

:class:`CypherBackend` engines (Kùzu, Neo4j) run the plan compiled to one Cypher query; the
in-memory executor evaluates the plan's tree directly. Stage 1 only sees :class:`GraphBackend`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from grasp.graph.compiler import CompiledQuery
from grasp.graph.linking import Binding
from grasp.plan.model import Plan


def no_candidates() -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(0, dtype=np.int64), np.zeros(0)


class GraphBackend(ABC):
    name: str

    @abstractmethod
    def execute(self, plan: Plan, bindings: dict[str, Binding],
                compiled: CompiledQuery | None) -> tuple[np.ndarray, np.ndarray]:
        """(node ids, scores) of the plan's target; ``compiled`` is the plan as Cypher (None when the
        plan compiles to nothing that can match)."""

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold resources to release
        """Release connections (optional)."""


class CypherBackend(GraphBackend):
    """A graph database that answers the compiled Cypher."""

    @abstractmethod
    def run(self, query: CompiledQuery) -> tuple[np.ndarray, np.ndarray]:
        """(node ids, scores) returned by the query."""

    def execute(self, plan: Plan, bindings: dict[str, Binding],
                compiled: CompiledQuery | None) -> tuple[np.ndarray, np.ndarray]:
        return no_candidates() if compiled is None else self.run(compiled)
