"""A knowledge base opened with a configuration, and the retrievers ("methods") built on it.

:class:`Workspace` knows where the SKB's indexes live (a folder per SKB content fingerprint
under the cache root, never inside the SKB directory, which may be read-only) and builds
each method's retriever on first use. Later stages register more methods in :data:`METHODS`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path

from grasp.config import GraspConfig
from grasp.encode.encoder import Encoder, build_encoder
from grasp.encode.node_vectors import NodeVectors
from grasp.errors import ConfigError, FormatError
from grasp.eval.report import EvalReport, evaluate_run
from grasp.results import Run
from grasp.retriever import Retriever
from grasp.skb import SKB, Query, load_skb, read_queries, select_queries
from grasp.skb.documents import DocumentLayout, layout_for
from grasp.storage import default_cache_dir


class Workspace:
    """One SKB + one configuration + the folder holding their indexes."""

    def __init__(self, skb: SKB, config: GraspConfig | None = None, *, progress: bool = True) -> None:
        self.skb = skb
        self.config = config or GraspConfig()
        self.progress = progress
        self._retrievers: dict[str, Retriever] = {}

    @classmethod
    def open(cls, path: Path | str, config: GraspConfig | None = None, *, stark_dataset: str | None = None,
             progress: bool = True) -> Workspace:
        return cls(load_skb(path, stark_dataset=stark_dataset), config, progress=progress)

    @property
    def cache_dir(self) -> Path:
        root = self.config.cache_dir or default_cache_dir()
        return Path(root) / "skb" / f"{self.skb.name}-{self.skb.fingerprint}"

    @cached_property
    def layout(self) -> DocumentLayout:
        try:
            return layout_for(self.skb, self.config.document_layout)
        except KeyError as e:
            raise ConfigError(str(e.args[0])) from None

    @cached_property
    def encoder(self) -> Encoder:
        return build_encoder(self.config.encoder)

    @cached_property
    def node_vectors(self) -> NodeVectors:
        return NodeVectors(self.skb, self.encoder, self.layout, self.cache_dir / "embeddings",
                           self.config.vector_index, progress=self.progress)

    def retriever(self, method: str) -> Retriever:
        if method not in METHODS:
            raise ConfigError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
        if method not in self._retrievers:
            self._retrievers[method] = METHODS[method](self)
        return self._retrievers[method]

    def default_queries_path(self) -> Path:
        return Path(self.skb.source) / "qa" / "queries.jsonl"

    def queries(self, path: Path | str | None = None, *, split: str | None = None, limit: int | None = None) -> list[Query]:
        path = Path(path) if path is not None else self.default_queries_path()
        if path is None or not path.exists():
            raise FormatError("queries file not found (pass --queries FILE)", file=path)
        return select_queries(read_queries(path), split, limit)

    def run(self, method: str, queries: Sequence[Query], k: int | None = None) -> Run:
        return self.retriever(method).batch_search(queries, k or self.config.eval.k, progress=self.progress)

    def evaluate(self, method: str, queries: Sequence[Query], k: int | None = None) -> tuple[Run, EvalReport]:
        """Build (or load) the method's indexes, retrieve for every query, and score the run."""
        t0 = time.perf_counter()
        retriever = self.retriever(method)
        t1 = time.perf_counter()
        run = retriever.batch_search(queries, k or self.config.eval.k, progress=self.progress)
        t2 = time.perf_counter()
        report = evaluate_run(run, queries, candidate_mask=self.skb.candidate_mask)
        report.info.update({
            "skb": self.skb.name,
            "index_seconds": round(t1 - t0, 3),
            "search_seconds": round(t2 - t1, 3),
            "ms_per_query": round(1000 * (t2 - t1) / max(len(queries), 1), 3),
        })
        return run, report


def _bm25(ws: Workspace) -> Retriever:
    from grasp.dense.bm25 import BM25Retriever

    return BM25Retriever(ws.skb, ws.layout, ws.cache_dir, ws.config.bm25, progress=ws.progress)


def _dense(ws: Workspace) -> Retriever:
    from grasp.dense.dense import DenseRetriever

    return DenseRetriever(ws.node_vectors)


METHODS: dict[str, Callable[[Workspace], Retriever]] = {"bm25": _bm25, "dense": _dense}
