"""The stage interface: queries in, one :class:`~grasp.results.Ranking` per query out.

Every retriever (BM25, dense, and the later graph, fused and reranked stages) implements
:meth:`Retriever.batch_search`; :meth:`Retriever.search` is the one-query convenience.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from grasp.results import Ranking, Run
from grasp.skb.queries import Query


class Retriever(ABC):
    """A stage that ranks candidate nodes for queries."""

    name: str = "retriever"

    @abstractmethod
    def batch_search(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> Run:
        """Rank the candidates for every query; returns a :class:`Run` keyed by query id."""

    def search(self, text: str, k: int = 10, *, qid: str = "q") -> Ranking:
        """Rank the candidates for one query text."""
        return self.batch_search([Query(qid, text)], k)[qid]
