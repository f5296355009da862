"""The shapes data flows in: a :class:`Query` in, one :class:`Ranking` per query out.

A :class:`Ranking` holds (query id, node ids, scores) in rank order plus the typed trace of the
stage that made it (a :class:`StageTrace` subclass defined next to that stage); a :class:`Run` is
a named collection of rankings, one per query. Any stage's output can be evaluated, fused,
written as a TREC run and explained the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass
class Query:
    """One query. ``qid`` is the query id as a string (TREC runs need strings)."""

    qid: str
    text: str
    answer_ids: list[int] = field(default_factory=list)
    split: str | None = None
    template: str | None = None

    def to_json(self) -> dict:
        out: dict = {"id": _id_value(self.qid), "query": self.text, "answer_ids": list(self.answer_ids)}
        if self.template is not None:
            out["template"] = self.template
        if self.split is not None:
            out["split"] = self.split
        return out


def _id_value(qid: str) -> int | str:
    return int(qid) if qid.lstrip("-").isdigit() else qid


@dataclass
class StageTrace:
    """What one stage did for one query, beyond the ranking itself. Each stage defines its own
    subclass next to it (the graph stage's plan and Cypher, the fusion weights, the reranker's
    settings); explanations are ``{stage name: trace.to_json()}``."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PlanSignals:
    """What Stage 1's plan says of one query, carried by the graph ranking and by every ranking fused from it, so
    that plan-conditioned fusion reads it from the ranking it fuses: how many candidates the plan's execution
    returned, the plan's risk level, and how well its weakest name anchor names its node (None: no name anchor)."""

    n_cand: int = 0
    risk_level: str | None = "no_trade"
    link_confidence: float | None = None


@dataclass
class Ranking:
    """Ranked node ids for one query, best first. Ranks are 1-based positions. ``signals``: the plan's, on the
    graph stage's ranking and on those fused from it (None elsewhere)."""

    qid: str
    node_ids: np.ndarray
    scores: np.ndarray
    stage: str = ""
    trace: StageTrace | None = None
    signals: PlanSignals | None = None

    def __post_init__(self) -> None:
        self.node_ids = np.asarray(self.node_ids, dtype=np.int64)
        self.scores = np.asarray(self.scores, dtype=np.float64)
        if self.node_ids.shape != self.scores.shape:
            raise ValueError("node_ids and scores must have the same length")

    @classmethod
    def from_scores(
        cls,
        qid: str,
        node_ids: np.ndarray,
        scores: np.ndarray,
        *,
        stage: str = "",
        k: int | None = None,
        trace: StageTrace | None = None,
        signals: PlanSignals | None = None,
    ) -> Ranking:
        """Sort by descending score (ties: ascending node id, so results are deterministic)."""
        node_ids = np.asarray(node_ids, dtype=np.int64)
        scores = np.asarray(scores, dtype=np.float64)
        order = np.lexsort((node_ids, -scores))
        if k is not None:
            order = order[:k]
        return cls(qid, node_ids[order], scores[order], stage, trace, signals)

    def __len__(self) -> int:
        return int(self.node_ids.shape[0])

    @property
    def ranks(self) -> np.ndarray:
        return np.arange(1, len(self) + 1)

    def top(self, k: int) -> Ranking:
        return Ranking(self.qid, self.node_ids[:k], self.scores[:k], self.stage, self.trace, self.signals)

    def rank_of(self, node_id: int) -> int | None:
        """1-based rank of ``node_id``, or None when it is not in the ranking."""
        hit = np.flatnonzero(self.node_ids == node_id)
        return int(hit[0]) + 1 if hit.size else None

    def rank_map(self, depth: int | None = None) -> dict[int, int]:
        """{node id: 1-based rank} of the top ``depth`` (all when None)."""
        ids = self.node_ids if depth is None else self.node_ids[:depth]
        return {int(n): i + 1 for i, n in enumerate(ids.tolist())}

    def first_rank_in(self, gold: Iterable[int]) -> int | None:
        """1-based rank of the first node in ``gold``, or None when none is ranked."""
        hit = np.flatnonzero(np.isin(self.node_ids, np.fromiter(gold, dtype=np.int64)))
        return int(hit[0]) + 1 if hit.size else None

    def records(self) -> Iterator[dict[str, Any]]:
        """Rows in PyTerrier's column names: qid, docno, score, rank (0-based, as PyTerrier)."""
        for i, (nid, s) in enumerate(zip(self.node_ids.tolist(), self.scores.tolist(), strict=True)):
            yield {"qid": self.qid, "docno": str(nid), "score": s, "rank": i}


def carrier(*rankings: Ranking | None) -> Ranking | None:
    """The first of these rankings that carries plan signals (None when none does)."""
    return next((r for r in rankings if r is not None and r.signals is not None), None)


class Run(Mapping[str, Ranking]):
    """Rankings keyed by query id, in insertion order, under one method name."""

    def __init__(self, name: str, rankings: Mapping[str, Ranking] | None = None, *, seconds: float | None = None) -> None:
        self.name = name
        self._rankings: dict[str, Ranking] = dict(rankings or {})
        self.seconds = seconds  # wall time of the stage that produced it (its own step only), if measured

    def add(self, ranking: Ranking) -> None:
        self._rankings[ranking.qid] = ranking

    def __getitem__(self, qid: str) -> Ranking:
        return self._rankings[qid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rankings)

    def __len__(self) -> int:
        return len(self._rankings)

    def __repr__(self) -> str:
        return f"Run({self.name!r}, {len(self)} queries)"
