"""Stage 3 as a retriever: rerank the upstream top-``depth`` and fuse the reranker's ranking
with the upstream one by static RRF (w, k tuned on validation; the paper's best w 0.5-0.65, k 2-5),
or by bucketed RRF: one (w, k) per bucket of the upstream's graph candidates (none, a few, many), the
plan signal Stage 2's dynamic fusion reads, so the reranker can count for more where the graph found nothing.

Its stages are named ``reranker`` (the reranker's own ranking of the pool, with a
:class:`RerankTrace`) and the method's name (``grasp`` or ``grasp-zs``: the final fusion)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from tqdm.auto import tqdm

from grasp.fuse.dynamic import plan_bucket
from grasp.fuse.rrf import rrf, static_rrf
from grasp.progress import announce
from grasp.rerank.base import Reranker
from grasp.rerank.vectors import CandidateVectors
from grasp.results import Query, Ranking, Run, StageTrace
from grasp.retriever import Retriever
from grasp.skb.documents import CandidateSerializer
from grasp.storage import Setting

RERANKER_STAGE = "reranker"


@dataclass
class RerankTrace(StageTrace):
    """The reranker's pass over one query's pool."""

    reranker: str = ""
    depth: int = 100
    stored_vectors: bool = False  # scored from the stored candidate vectors (else serialized and encoded)


@dataclass
class RerankFusionSetting(Setting):
    """The final fusion (reranker and upstream rankings), as `grasp tune rerank` chose it on validation."""

    w: float
    rrf_k: float                   # RRF's constant (not a result depth)
    depth: int | None = None       # the rerank depth it was tuned at
    val_hit1: float | None = None
    split: str = "val"
    n: int = 0
    within_1pt: int = 0
    trained: bool = True
    rule: str = ""                 # the selection rule cross-validation chose (e.g. "static-flat@100")
    upstream: str = "fused"        # the ranking it reranks: fused, or grasp-zs (the trained reranker over the zero-shot one)
    zero_shot: str | None = None   # a zero-shot one: the reranker it was tuned with (made before it was recorded: bi-encoder)
    cv: dict = field(default_factory=dict)  # every rule's held-out Hit@1
    argmax_right: float | None = None       # share of folds where the in-sample best rule was best held out
    surface: list = field(default_factory=list)  # static Hit@1 over (w, k) at the chosen depth (grasp report's heatmap)
    axes: dict = field(default_factory=dict)
    # bucketed rule: the buckets' upper edges of the upstream's graph n_cand (e.g. [0, 10]: 0, 1-10, >10) and
    # each bucket's (w, k), which serving uses instead of (w, k) (then the static fit at the same depth)
    bucket_edges: list[int] | None = None
    w_bucket: list[float] | None = None
    rrf_k_bucket: list[float] | None = None
    bucket_n: list[int] | None = None   # the tuning queries in each bucket

    artifact: ClassVar[str] = ""  # two of them (trained, zero-shot): grasp.artifacts.final_fusion_artifact names each
    renamed: ClassVar[dict[str, str]] = {"k": "rrf_k", "k_bucket": "rrf_k_bucket"}

    def __post_init__(self) -> None:
        if self.bucket_edges is not None:
            n = len(self.bucket_edges) + 1
            if len(self.w_bucket or []) != n or len(self.rrf_k_bucket or []) != n:
                raise ValueError(f"a bucketed final fusion needs {n} w_bucket and rrf_k_bucket values "
                                 f"(one per bucket of bucket_edges {self.bucket_edges})")

    @property
    def bucketed(self) -> bool:
        return self.bucket_edges is not None

    def params(self, upstream: Ranking | None) -> tuple[float, float]:
        """(w, k) of the final fusion for one query, from the plan signals its upstream ranking carries (a query
        without them has no graph candidate)."""
        if not self.bucketed:
            return self.w, self.rrf_k
        b, _ = plan_bucket(upstream, self.bucket_edges)  # type: ignore[arg-type]
        return float(self.w_bucket[b]), float(self.rrf_k_bucket[b])  # type: ignore[index]

    def fuse(self, scored: Run, upstream: Run, *, name: str, top: int | None = None) -> Run:
        """The reranker's run fused with the upstream one (bucketed: by the plan signals its rankings carry)."""
        if not self.bucketed:
            return static_rrf(scored, upstream, w=self.w, rrf_k=self.rrf_k, name=name, top=top)
        if not any(r.signals is not None for r in upstream.values()):
            # every query would silently take the no-graph-candidate bucket's weights
            raise ValueError(f"the {self.rule or 'bucketed'} final fusion reads the plan signals of the upstream's "
                             f"graph stage: {upstream.name} carries none")
        params = {qid: self.params(upstream.get(qid)) for qid in dict.fromkeys([*scored, *upstream])}
        return rrf(scored, upstream, lambda qid: (params[qid][0], 1.0 - params[qid][0]), rrf_k=lambda qid: params[qid][1],
                   mode="bucketed", name=name, top=top)


class RerankedRetriever(Retriever):
    def __init__(self, upstream: Retriever, reranker: Reranker, serializer: CandidateSerializer, *,
                 name: str, depth: int = 100, w: float = 0.5, rrf_k: float = 2.0,
                 fusion: RerankFusionSetting | None = None, vectors: CandidateVectors | None = None) -> None:
        """``name``: the method (``grasp`` trained, ``grasp-zs`` zero-shot); ``fusion``: the final fusion
        (default: static RRF at ``w``, ``rrf_k``); ``vectors``: the stored candidate vectors of a bi-encoder
        reranker, used once built (``grasp index``), else candidates are serialized and encoded per query."""
        if vectors is not None and reranker.vector_part is None:
            raise ValueError(f"stored vectors need a reranker with a bi-encoder part, not {reranker.name}")
        self.name = name
        self.upstream, self.reranker, self.serialize = upstream, reranker, serializer
        self.depth = depth
        self.fusion = fusion if fusion is not None else RerankFusionSetting(w=w, rrf_k=rrf_k)
        self.vectors = vectors

    def children(self) -> list[Retriever]:
        return [self.upstream]

    @property
    def uses_stored_vectors(self) -> bool:
        return self.vectors is not None and self.vectors.built

    def prepare(self) -> None:
        """The upstream's indexes and, for a bi-encoder reranker, every candidate's stored vector."""
        super().prepare()
        if self.vectors is not None:
            self.vectors.matrix()

    def rerank(self, query: Query, upstream: Ranking) -> Ranking:
        pool = upstream.top(self.depth)
        stored = self.uses_stored_vectors
        vectors = self.vectors.of(pool.node_ids) if stored else None  # type: ignore[union-attr]
        scores = self.reranker.score_pool(query.text, lambda: [self.serialize(int(n)) for n in pool.node_ids], vectors)
        return Ranking.from_scores(query.qid, pool.node_ids, scores, stage=RERANKER_STAGE,
                                   trace=RerankTrace(self.reranker.name, self.depth, stored))

    def batch_search_stages(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> dict[str, Run]:
        # the whole upstream run (not only the reranked top) is fused, so ranks below the depth keep their credit
        stages = self.upstream.batch_search_stages(queries, max(k, self.depth), progress=progress)
        if RERANKER_STAGE in stages:  # an upstream reranker (the zero-shot one under the trained one) keeps its run
            stages[f"{RERANKER_STAGE}:{self.upstream.name}"] = stages.pop(RERANKER_STAGE)
        scored, out = self.from_upstream(queries, stages[self.upstream.name], k, progress=progress)
        return {**stages, RERANKER_STAGE: scored, self.name: out}

    def from_upstream(self, queries: Sequence[Query], up: Run, k: int = 100, *,
                      progress: bool = False) -> tuple[Run, Run]:
        """(the reranker's own ranking, the final fused one) over an upstream run already made (a bucketed final
        fusion reads the plan signals its rankings carry); ``progress`` shows a bar per query (an LLM reranker
        reading serialized candidates takes seconds a query)."""
        t0 = time.perf_counter()
        announce("reranking", f"reranking the top {self.depth} with the {self.reranker.name} reranker"
                 + (" (stored vectors)" if self.uses_stored_vectors else ""))
        scored = Run(RERANKER_STAGE)
        for q in tqdm(queries, desc="reranker", unit="query", disable=not progress):
            scored.add(self.rerank(q, up.get(q.qid) or Ranking(q.qid, [], [])))
        scored.seconds = time.perf_counter() - t0
        upstream = Run(up.name, {q.qid: up[q.qid] for q in queries if q.qid in up})
        out = self.fusion.fuse(scored, upstream, name=self.name, top=k)
        out.seconds = 0.0  # the final fusion is negligible beside the reranker; its time is in "reranker"
        return scored, out

    def batch_search(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> Run:
        return self.batch_search_stages(queries, k, progress=progress)[self.name]
