"""Building Stage 1 from the ``graph`` configuration: the graph engine and the anchor linker."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from grasp.config import GraphConfig
from grasp.encode.node_vectors import NodeVectors
from grasp.graph.engine import GraphBackend
from grasp.graph.linking import AnchorLinker
from grasp.graph.retriever import GraphRetriever
from grasp.plan.planner import Planner
from grasp.skb.graph import SKB


def build_engine(cfg: GraphConfig, skb: SKB, index_dir: Path, *, progress: bool = True) -> GraphBackend:
    """Kùzu embedded under ``index_dir`` (default), LadybugDB (its maintained fork) likewise, the in-memory
    executor, or a Neo4j server."""
    from grasp.graph.backends import KuzuBackend, LadybugBackend, Neo4jBackend
    from grasp.graph.memory import MemoryExecutor

    if cfg.engine == "memory":
        return MemoryExecutor(skb)
    if cfg.engine == "neo4j":
        return Neo4jBackend(skb, cfg.neo4j_uri, user=cfg.neo4j_user,
                            password=os.environ.get(cfg.neo4j_password_env, ""), database=cfg.neo4j_database)
    embedded = LadybugBackend if cfg.engine == "ladybug" else KuzuBackend
    return embedded(skb, index_dir, buffer_pool_mb=cfg.buffer_pool_mb, progress=progress)


def build_graph_retriever(cfg: GraphConfig, planner: Planner, vectors: NodeVectors, index_dir: Path, *,
                          lexical: Callable[[str, np.ndarray], np.ndarray] | None = None,
                          progress: bool = True) -> GraphRetriever:
    """``lexical``: the word-level scorer (BM25) that rescoring adds at ``graph.lexical_weight``."""
    linker = AnchorLinker(vectors, name_k=cfg.name_k, name_tau=cfg.name_tau, doc_k=cfg.doc_k, doc_tau=cfg.doc_tau)
    return GraphRetriever(planner, linker, build_engine(cfg, planner.skb, index_dir, progress=progress), vectors,
                          rescore=cfg.rescore, query_weight=cfg.query_weight, lexical=lexical,
                          lexical_weight=cfg.lexical_weight, replan=cfg.replan, replan_hub=cfg.replan_hub,
                          description_floor=cfg.description_floor)
