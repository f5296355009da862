"""The stage interface: queries in, one :class:`~grasp.results.Ranking` per query out.

Every retriever (BM25, dense, and the later graph, fused and reranked stages) implements
:meth:`Retriever.batch_search`; :meth:`Retriever.search` is the one-query convenience.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence

from grasp.results import Query, Ranking, Run


class Retriever(ABC):
    """A stage that ranks candidate nodes for queries."""

    name: str = "retriever"

    @abstractmethod
    def batch_search(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> Run:
        """Rank the candidates for every query; returns a :class:`Run` keyed by query id."""

    def batch_search_stages(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> dict[str, Run]:
        """This stage's run and the runs of the stages it is composed of, keyed by stage name, this one
        last; each run's ``seconds`` is the time of that step alone. Composite stages override it."""
        t0 = time.perf_counter()
        run = self.batch_search(queries, k, progress=progress)
        run.seconds = time.perf_counter() - t0
        return {self.name: run}

    def children(self) -> list[Retriever]:
        """The stages this one is composed of (none for a single stage)."""
        return []

    def stages(self) -> list[Retriever]:
        """This stage and every stage below it, depth first."""
        return [self, *(s for child in self.children() for s in child.stages())]

    def prepare(self) -> None:
        """Build every index this stage reads, so that no query pays for it (``grasp index``). Stages
        whose indexes are built when they are constructed have nothing left to do; composites
        prepare the stages they are made of."""
        for child in self.children():
            child.prepare()

    def search(self, text: str, k: int = 10, *, qid: str = "q") -> Ranking:
        """Rank the candidates for one query text."""
        return self.batch_search([Query(qid, text)], k)[qid]
