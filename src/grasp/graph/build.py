"""Building Stage 1 from the ``graph`` configuration: the graph engine and the anchor linker."""

from __future__ import annotations

import os
from pathlib import Path

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
                          progress: bool = True) -> GraphRetriever:
    linker = AnchorLinker(vectors, name_k=cfg.name_k, name_tau=cfg.name_tau, doc_k=cfg.doc_k, doc_tau=cfg.doc_tau)
    return GraphRetriever(planner, linker, build_engine(cfg, planner.skb, index_dir, progress=progress), vectors,
                          rescore=cfg.rescore, replan=cfg.replan, replan_hub=cfg.replan_hub)
