"""Stage 3 as a retriever: rerank the upstream top-``depth`` and fuse the reranker's ranking
with the upstream one by static RRF (w, k tuned on validation; the paper's best w 0.5-0.65, k 2-5)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from grasp.fuse.rrf import fuse_pair
from grasp.rerank.base import Reranker, VectorReranker
from grasp.rerank.vectors import CandidateVectors
from grasp.results import Ranking, Run
from grasp.retriever import Retriever
from grasp.skb.documents import CandidateSerializer
from grasp.skb.queries import Query


class RerankedRetriever(Retriever):
    name = "reranked"

    def __init__(self, upstream: Retriever, reranker: Reranker, serializer: CandidateSerializer, *,
                 depth: int = 100, w: float = 0.5, k: float = 2.0, vectors: CandidateVectors | None = None) -> None:
        """``vectors``: the stored candidate vectors of a bi-encoder reranker; used once built
        (``grasp index``), else candidates are serialized and encoded per query."""
        if vectors is not None and not isinstance(reranker, VectorReranker):
            raise ValueError(f"stored vectors need a bi-encoder reranker, not {reranker.name}")
        self.upstream, self.reranker, self.serialize = upstream, reranker, serializer
        self.depth, self.w, self.k = depth, w, k
        self.vectors = vectors

    @property
    def uses_stored_vectors(self) -> bool:
        return self.vectors is not None and self.vectors.built

    def prepare(self) -> None:
        """The upstream's indexes and, for a bi-encoder reranker, every candidate's stored vector."""
        self.upstream.prepare()
        if self.vectors is not None:
            self.vectors.matrix()

    def rerank(self, query: Query, upstream: Ranking) -> Ranking:
        pool = upstream.top(self.depth)
        if self.uses_stored_vectors:
            scores = self.reranker.score_vectors(query.text, self.vectors.of(pool.node_ids))  # type: ignore[union-attr]
        else:
            scores = self.reranker.score(query.text, [self.serialize(int(n)) for n in pool.node_ids])
        return Ranking.from_scores(query.qid, pool.node_ids, scores, stage=f"{self.name}:{self.reranker.name}")

    def batch_search_stages(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> dict[str, Run]:
        # the whole upstream run (not only the reranked top) is fused, so ranks below the depth keep their credit
        stages = self.upstream.batch_search_stages(queries, max(k, self.depth), progress=progress)
        scored, out = self.from_upstream(queries, stages[self.upstream.name], k)
        return {**stages, "reranker": scored, self.name: out}

    def from_upstream(self, queries: Sequence[Query], up: Run, k: int = 100) -> tuple[Run, Run]:
        """(the reranker's own ranking, the final fused one) over an upstream run already made."""
        t0 = time.perf_counter()
        scored, out = Run("reranker"), Run(self.name)
        for q in queries:
            base = up.get(q.qid) or Ranking(q.qid, [], [])
            reranked = self.rerank(q, base)
            scored.add(reranked)
            fused = fuse_pair(reranked, base, self.w, 1.0 - self.w, self.k, qid=q.qid, stage=self.name,
                              meta={"upstream": base.meta, "reranker": self.reranker.name, "w": self.w, "k": self.k,
                                    "stored_vectors": self.uses_stored_vectors,
                                    "reranked_ids": reranked.node_ids[:20].tolist()})
            out.add(fused.top(k))
        scored.seconds = time.perf_counter() - t0
        out.seconds = 0.0  # the final fusion is negligible beside the reranker; its time is in "reranker"
        return scored, out

    def batch_search(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> Run:
        return self.batch_search_stages(queries, k, progress=progress)[self.name]
