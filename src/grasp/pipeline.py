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

SHIPPED_MODELS = Path(__file__).parent / "data" / "models"


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

    @cached_property
    def planner(self):
        """The Stage-1 planner: cached plans first (shipped + this workspace's), the LLM on a miss."""
        from grasp.plan.cache import PlanCache, shipped_plans
        from grasp.plan.examples import read_examples
        from grasp.plan.planner import Planner
        from grasp.plan.prompt import PromptBuilder, load_examples, profile_of

        cfg = self.config.planner
        cache = PlanCache(cfg.cache_file or self.cache_dir / "plans.jsonl", readonly=shipped_plans(self.skb.schema.name))
        factory = None if cfg.kind == "cache" else (lambda: make_chat_client(cfg, self.config))
        examples = load_examples(profile_of(self.skb))
        if not examples and self.examples_path.exists():  # drawn from this SKB's train split
            examples = read_examples(self.examples_path)
        return Planner(self.skb, factory, cache, builder=PromptBuilder(self.skb, examples=examples),
                       grammar=cfg.grammar, retries=cfg.retries, max_tokens=cfg.max_tokens, model_id=cfg.model,
                       on_miss=cfg.on_miss)

    @property
    def mfar_dir(self) -> Path:
        """Where `grasp train mfar` keeps checkpoints, the training log and the best weights."""
        from grasp.storage import stable_hash

        return self.cache_dir / f"mfar-train-{stable_hash([self.config.mfar.model_dump(), self.encoder.model_id, self.layout.key])}"

    @property
    def reranker_dir(self) -> Path:
        """Where `grasp train reranker` keeps its records, checkpoints and the adapter."""
        from grasp.storage import stable_hash

        cfg = self.config.reranker
        # what the trained reranker *is* (base, kind, input); training settings live in its grasp_train.json
        identity = cfg.model_dump(include={"model", "kind", "max_length", "max_field_tokens", "max_neighbors"})
        return self.cache_dir / f"reranker-{stable_hash([identity, self.layout.key])}"

    def artifact_path(self, name: str) -> Path:
        """Where this workspace writes a trained artifact: ``fusion.json``,
        ``rerank-fusion-{trained,zero-shot}.json``, ``mfar/weights.pt`` or ``reranker/adapter``."""
        if name.startswith("mfar/"):
            return self.mfar_dir / name.removeprefix("mfar/")
        if name.startswith("reranker/"):
            return self.reranker_dir / name.removeprefix("reranker/")
        return self.cache_dir / name

    def artifact(self, name: str) -> Path | None:
        """A trained artifact: this workspace's own, else one shipped with the package for this
        schema or its prompt profile (``grasp/data/models/<name or profile>/<name>``: the demo KB, a
        slice of pkg, uses pkg's), else None."""
        from grasp.plan.prompt import profile_of

        for path in (self.artifact_path(name), SHIPPED_MODELS / self.skb.schema.name / name,
                     SHIPPED_MODELS / profile_of(self.skb) / name):
            if path.exists():
                return path
        return None

    def readiness(self) -> dict[str, str | None]:
        """For each method: None when it can run now, else what is missing and the command that makes it."""
        fusion = None if self.artifact("fusion.json") else "no fusion setting: grasp tune fusion"
        out: dict[str, str | None] = {"bm25": None, "dense": None, "graph": None,
                                      "mfar": None if self.artifact("mfar/weights.pt") else "not trained: grasp train mfar",
                                      "fused": fusion}
        zs = None if self.artifact(rerank_fusion_name(False)) else "no final fusion: grasp tune rerank --zero-shot"
        out["grasp-zs"] = fusion or zs
        trained = (None if self.artifact("reranker/adapter") else "no reranker: grasp train reranker") or (
            None if self.artifact(rerank_fusion_name(True)) else "no final fusion: grasp tune rerank")
        out["grasp"] = fusion or trained
        return out

    def best_method(self) -> str:
        """The most complete method that can run now: grasp, grasp-zs, fused, else bm25."""
        ready = self.readiness()
        return next(m for m in ("grasp", "grasp-zs", "fused", "bm25") if ready[m] is None)

    @property
    def examples_path(self) -> Path:
        """Worked examples selected from this SKB's train split by `grasp plans examples`."""
        return self.cache_dir / "examples.jsonl"

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
        report.method = method  # the method's name (a composite's run is named after its last stage)
        report.info.update({
            "skb": self.skb.name,
            "index_seconds": round(t1 - t0, 3),
            "search_seconds": round(t2 - t1, 3),
            "ms_per_query": round(1000 * (t2 - t1) / max(len(queries), 1), 3),
        })
        return run, report


def make_chat_client(cfg, config: GraspConfig):
    """The planner's LLM client for a :class:`~grasp.config.PlannerConfig`."""
    from grasp.plan.llm import LocalGGUFClient, OpenAIChatClient, api_key_from_env

    if cfg.kind == "openai":
        if not cfg.base_url:
            raise ConfigError("planner.kind 'openai' needs planner.base_url, e.g. http://localhost:8000/v1")
        return OpenAIChatClient(cfg.base_url, cfg.model, api_key=api_key_from_env(cfg.api_key_env),
                                timeout_s=cfg.timeout_s, seed=config.seed, concurrency=cfg.workers)
    return LocalGGUFClient(local_planner_path(config), n_ctx=cfg.n_ctx, threads=cfg.threads, slots=cfg.slots,
                           flash_attn=cfg.flash_attn, seed=config.seed, model_id=cfg.model)


def local_planner_path(config: GraspConfig) -> Path:
    from grasp.plan.gguf import PLANNER

    return config.planner.model_path or Path(config.cache_dir or default_cache_dir()) / "models" / PLANNER.filename


def degrade_missing_planner(config: GraspConfig) -> str | None:
    """When the local planner model is not on disk, switch to replaying cached plans with new
    queries degraded to no_trade (the dense branch answers them) and say so; else None."""
    if config.planner.kind != "local" or local_planner_path(config).exists():
        return None
    config.planner = config.planner.model_copy(update={"kind": "cache", "on_miss": "no_trade"})
    return ("the planner model is not fetched (grasp fetch planner): cached plans are replayed and new queries "
            "get no plan, so the dense branch answers them alone")


def _bm25(ws: Workspace) -> Retriever:
    from grasp.dense.bm25 import BM25Retriever

    return BM25Retriever(ws.skb, ws.layout, ws.cache_dir, ws.config.bm25, progress=ws.progress)


def _dense(ws: Workspace) -> Retriever:
    from grasp.dense.dense import DenseRetriever

    return DenseRetriever(ws.node_vectors)


def graph_engine(ws: Workspace):
    """The configured Stage-1 engine: Kùzu (default), the in-memory executor, or a Neo4j server."""
    import os

    from grasp.graph.backends import KuzuBackend, Neo4jBackend
    from grasp.graph.memory import MemoryExecutor

    cfg = ws.config.graph
    if cfg.engine == "memory":
        return MemoryExecutor(ws.skb)
    if cfg.engine == "neo4j":
        return Neo4jBackend(ws.skb, cfg.neo4j_uri, user=cfg.neo4j_user,
                            password=os.environ.get(cfg.neo4j_password_env, ""), database=cfg.neo4j_database)
    return KuzuBackend(ws.skb, ws.cache_dir, buffer_pool_mb=cfg.buffer_pool_mb, progress=ws.progress)


def _graph(ws: Workspace) -> Retriever:
    from grasp.graph.linking import AnchorLinker
    from grasp.graph.retriever import GraphRetriever

    cfg = ws.config.graph
    linker = AnchorLinker(ws.node_vectors, name_k=cfg.name_k, name_tau=cfg.name_tau, doc_k=cfg.doc_k, doc_tau=cfg.doc_tau)
    return GraphRetriever(ws.planner, linker, graph_engine(ws), ws.node_vectors, rescore=cfg.rescore)


def mfar_retriever(ws: Workspace, *, trained: bool = True):
    """mFAR over this SKB's fields; with the weights `grasp train mfar` saved, if any."""
    import torch

    from grasp.dense.mfar import FieldIndex, MFARRetriever

    cfg = ws.config.mfar
    index = FieldIndex(ws.skb, ws.layout, ws.encoder, ws.cache_dir, bm25=ws.config.bm25, fields=cfg.fields,
                       dense_fields=cfg.dense_fields, node_vectors=ws.node_vectors, max_names=cfg.max_names,
                       dtype=ws.config.vector_index.dtype, progress=ws.progress)
    retriever = MFARRetriever(index, depth=cfg.depth)
    weights = ws.artifact("mfar/weights.pt")
    if trained and weights is not None:
        retriever.weights.load_state_dict(torch.load(weights, weights_only=True))
        retriever.trained = True
    return retriever


def _mfar(ws: Workspace) -> Retriever:
    return mfar_retriever(ws)


def _fused(ws: Workspace) -> Retriever:
    from grasp.fuse.retriever import FusedRetriever, FusionSetting

    path = ws.artifact("fusion.json")
    if path is None:
        raise ConfigError(f"no fusion setting for this SKB ({ws.artifact_path('fusion.json')}); "
                          "run `grasp tune fusion --skb ...` first")
    setting = FusionSetting.load(path)
    return FusedRetriever(ws.retriever("graph"), ws.retriever(setting.info.get("dense_method", "mfar")), setting)


def rerank_fusion_name(trained: bool) -> str:
    """The artifact holding a final-fusion setting (written by `grasp tune rerank`)."""
    return f"rerank-fusion-{'trained' if trained else 'zero-shot'}.json"


def candidate_serializer(ws: Workspace):
    """The reranker's view of a node (type, truncated fields, 1-hop neighbours), as configured."""
    from grasp.skb.documents import CandidateSerializer

    cfg = ws.config.reranker
    return CandidateSerializer(ws.skb, ws.layout, max_field_tokens=cfg.max_field_tokens, max_neighbors=cfg.max_neighbors)


def reranker_for(ws: Workspace, *, trained: bool):
    """The zero-shot bi-encoder, or the reranker `grasp train reranker` saved (its adapter says which kind)."""
    from grasp.rerank import BiEncoderReranker, load_trained_reranker

    cfg = ws.config.reranker
    if not trained:
        return BiEncoderReranker(ws.encoder)
    adapter = ws.artifact("reranker/adapter")
    if adapter is None:
        raise ConfigError(f"no trained reranker for this SKB ({ws.artifact_path('reranker/adapter')}); "
                          "run `grasp train reranker` first")
    return load_trained_reranker(cfg.model, adapter, max_length=cfg.max_length)


def reranked_retriever(ws: Workspace, *, trained: bool, w: float | None = None, k: float | None = None,
                       depth: int | None = None):
    """Stage 3 over the fused ranking; the final RRF uses the setting `grasp tune rerank` saved, unless
    (w, k) are given. A bi-encoder reranker reads its candidates' stored vectors once `grasp index` built them."""
    import json

    from grasp.rerank import RerankedRetriever
    from grasp.rerank.base import VectorReranker
    from grasp.rerank.vectors import CandidateVectors

    reranker = reranker_for(ws, trained=trained)
    name = rerank_fusion_name(trained)
    tuned = ws.artifact(name)
    setting_depth = None
    if w is None or k is None:
        if tuned is None:
            raise ConfigError(f"no final-fusion setting ({ws.artifact_path(name)}); run `grasp tune rerank` first")
        setting = json.loads(tuned.read_text())
        w, k = setting["w"], setting["k"]
        setting_depth = setting.get("depth")
    serializer = candidate_serializer(ws)
    vectors = (CandidateVectors(ws.cache_dir / "embeddings", serializer, reranker.document_encoder, progress=ws.progress)
               if isinstance(reranker, VectorReranker) else None)
    cfg = ws.config.reranker
    if depth is None:  # a depth the user set wins; else the depth the final fusion was tuned at
        depth = cfg.depth if "depth" in cfg.model_fields_set or setting_depth is None else setting_depth
    return RerankedRetriever(ws.retriever("fused"), reranker, serializer, depth=depth, w=w, k=k, vectors=vectors)


def _grasp_zero_shot(ws: Workspace) -> Retriever:
    return reranked_retriever(ws, trained=False)


def _grasp(ws: Workspace) -> Retriever:
    return reranked_retriever(ws, trained=True)


METHODS: dict[str, Callable[[Workspace], Retriever]] = {"bm25": _bm25, "dense": _dense, "graph": _graph,
                                                        "mfar": _mfar, "fused": _fused,
                                                        "grasp-zs": _grasp_zero_shot, "grasp": _grasp}
