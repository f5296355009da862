"""The retrieval methods: each one's retriever wired from a workspace's components, whether it can run, and the
verbs that run and evaluate it.

The table is wiring only: each stage's builder lives next to its stage (``graph/build.py``,
``text/mfar/build.py``, ``rerank/build.py``); a method's retriever is built once per workspace.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from grasp.artifacts import (
    FUSION_SETTING,
    MFAR_ENCODER,
    MFAR_WEIGHTS,
    RERANKER_ADAPTER,
    final_fusion_artifact,
)
from grasp.config import FusionConfig, RerankerConfig
from grasp.errors import ConfigError
from grasp.eval.evaluate import EvalReport, evaluate_run
from grasp.results import Query, Run
from grasp.retriever import Retriever
from grasp.workspace import Workspace

METHOD_ORDER = ("grasp", "grasp-zs", "fused", "bm25")  # most complete first: what "auto" picks from


def retriever(ws: Workspace, method: str) -> Retriever:
    """The method's retriever over this workspace, built on first use and kept."""
    if method not in METHODS:
        raise ConfigError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
    if method not in ws.retrievers:
        ws.retrievers[method] = METHODS[method](ws)
    return ws.retrievers[method]


def run(ws: Workspace, method: str, queries: Sequence[Query], k: int | None = None) -> Run:
    return retriever(ws, method).batch_search(queries, k or ws.config.search.depth, progress=ws.progress)


def evaluate(ws: Workspace, method: str, queries: Sequence[Query], k: int | None = None) -> tuple[Run, EvalReport]:
    """Build (or load) the method's indexes, retrieve for every query, and score the run."""
    t0 = time.perf_counter()
    built = retriever(ws, method)
    t1 = time.perf_counter()
    ranked = built.batch_search(queries, k or ws.config.search.depth, progress=ws.progress)
    t2 = time.perf_counter()
    report = evaluate_run(ranked, queries, candidate_mask=ws.skb.candidate_mask)
    report.method = method
    report.info.update({
        "skb": ws.skb.name,
        "index_seconds": round(t1 - t0, 3),
        "search_seconds": round(t2 - t1, 3),
        "ms_per_query": round(1000 * (t2 - t1) / max(len(queries), 1), 3),
    })
    return ranked, report


# the tuned parts each method reads, with what each is and the command that tunes it; a missing one runs on its
# untuned default (mFAR: uniform field weights; fusions: the static (w, rrf_k) of `fusion` / `reranker.final_*`)
TUNED_PARTS: dict[str, tuple[tuple[str, str, str], ...]] = {}
TUNED_PARTS["mfar"] = ((MFAR_WEIGHTS, "mFAR field weights", "grasp train mfar"),)
TUNED_PARTS["fused"] = (*TUNED_PARTS["mfar"], (FUSION_SETTING, "fusion", "grasp tune fusion"))
TUNED_PARTS["grasp-zs"] = (*TUNED_PARTS["fused"],
                           (final_fusion_artifact(False), "final fusion", "grasp tune rerank --zero-shot"))
TUNED_PARTS["grasp"] = (*TUNED_PARTS["fused"], (final_fusion_artifact(True), "final fusion", "grasp tune rerank"))


def readiness(ws: Workspace) -> dict[str, str | None]:
    """For each method: None when it can run now (tuned, or on untuned defaults: :func:`untuned`), else what is
    missing and the command that makes it. Only a trained reranker has no default."""
    out: dict[str, str | None] = dict.fromkeys(METHODS)
    if ws.config.mfar.encoder_tuning == "lora" and ws.mfar_encoder_adapter() is None:  # mFAR has no untuned encoder
        for method in ("mfar", "fused", "grasp-zs", "grasp"):
            out[method] = "mfar.encoder_tuning=lora, and no tuned mFAR encoder: grasp train mfar"
    if ws.artifact(RERANKER_ADAPTER) is None:
        out["grasp"] = out["grasp"] or "no trained reranker: grasp train reranker"
    return out


PLANNING_METHODS = ("graph", "fused", "grasp-zs", "grasp")  # those whose ranking starts from a plan
DRAWN_EXAMPLES_PART = ("planner's worked examples: drawn from the KB by templates (grasp synthesize, or grasp plans "
                       "examples on labelled queries)")


def untuned(ws: Workspace) -> dict[str, list[str]]:
    """For each method, the parts it would run on untuned defaults, each with the command that tunes it (the
    planner's worked examples among them where the KB has none but those drawn from it by templates)."""
    drawn = ws.config.planner.draw_examples and ws.planner.examples_source == "drawn"  # the planner built only then
    return {method: ([DRAWN_EXAMPLES_PART] if drawn and method in PLANNING_METHODS else [])
            + [f"{label} ({command})" for name, label, command in TUNED_PARTS.get(method, ()) if ws.artifact(name) is None]
            for method in METHODS}


def status_lines(ws: Workspace) -> list[str]:
    """One line per method: ready, ready with the parts it runs on untuned defaults, or what it needs."""
    ready, parts = readiness(ws), untuned(ws)
    return [f"{method:<9} " + (f"not ready: {missing}" if missing else
                               f"ready, untuned: {'; '.join(parts[method])}" if parts[method] else "ready")
            for method, missing in ready.items()]


def best_method(ws: Workspace) -> str:
    """The most complete method that can run now: ``grasp`` where a reranker was trained, else ``grasp-zs`` (on whatever
    is untuned, its defaults)."""
    ready = readiness(ws)
    return next(m for m in METHOD_ORDER if ready[m] is None)


def _bm25(ws: Workspace) -> Retriever:
    from grasp.text.bm25 import BM25Retriever

    return BM25Retriever(ws.skb, ws.layout, ws.cache_dir, ws.config.bm25, progress=ws.progress)


def _dense(ws: Workspace) -> Retriever:
    from grasp.text.dense import DenseRetriever

    return DenseRetriever(ws.node_vectors)


def _graph(ws: Workspace) -> Retriever:
    from grasp.graph.build import build_graph_retriever

    lexical = retriever(ws, "bm25").node_scores if ws.config.graph.lexical_weight > 0 else None
    return build_graph_retriever(ws.config.graph, ws.planner, ws.node_vectors, ws.cache_dir, lexical=lexical,
                                 progress=ws.progress)


def mfar_method(ws: Workspace, *, trained: bool = True, base_encoder: bool = False):
    """mFAR over this SKB's fields; with the weights `grasp train mfar` saved, if any (and ``trained``).
    With a tuned encoder (:func:`mfar_encoder_adapter`; not with ``base_encoder``) mFAR's dense fields are
    encoded by it, stored apart from Stage 1's vectors."""
    from grasp.text.mfar.build import build_mfar, load_weights, untrained_prior

    c = ws.config
    adapter = None if base_encoder else ws.mfar_encoder_adapter()
    if trained and adapter is None and c.mfar.encoder_tuning == "lora" and not base_encoder:
        raise ConfigError("mfar.encoder_tuning=lora, but no tuned mFAR encoder was trained for this SKB "
                          f"({ws.artifact_path(MFAR_ENCODER)}); run `grasp train mfar` first")
    if adapter is not None:
        from grasp.encode.tuned import TunedEncoder

        encoder, node_vectors = TunedEncoder.load(
            c.encoder.model, adapter, kind="mfar-encoder", max_length=c.encoder.max_length,
            batch_size=c.encoder.batch_size, device=c.encoder.device, precision=c.encoder.precision), None
    else:
        encoder, node_vectors = ws.encoder, ws.node_vectors
    retriever = build_mfar(c.mfar, ws.skb, ws.layout, encoder, ws.cache_dir, bm25=c.bm25,
                           node_vectors=node_vectors, vector_index=c.vector_index, progress=ws.progress)
    if trained and (path := ws.artifact(MFAR_WEIGHTS, check=mfar_expects(ws),
                                        loadable={"encoder", "layout", "dense_fields"})) is not None:
        load_weights(retriever, path)
    elif trained and c.mfar.untrained == "document":  # served untrained (training starts from uniform weights)
        untrained_prior(retriever, ["single"])
    return retriever


def mfar_expects(ws: Workspace) -> dict[str, Any]:
    """What mFAR's weights depend on: the encoder and layout, the (scorer:field) weights, which fields have a
    dense scorer, and the dimension."""
    from grasp.text.mfar.fields_index import selected_specs, weight_names

    return {**ws.expects(MFAR_WEIGHTS), "weights": weight_names(selected_specs(ws.skb, ws.config.mfar.fields)),
            "dense_fields": ws.config.mfar.dense_fields, "dim": ws.encoder.dim}


def _fused(ws: Workspace) -> Retriever:
    from grasp.fuse.retriever import FusedRetriever, FusionSetting

    setting = ws.load_setting(FusionSetting) or untuned_fusion(ws.config.fusion)
    return FusedRetriever(retriever(ws, "graph"), retriever(ws, setting.dense_method), setting,
                          depth=ws.config.fusion.depth)


def untuned_fusion(cfg: FusionConfig):
    """Stage 2's fusion where `grasp tune fusion` saved none: static RRF at the configured (w, rrf_k)."""
    from grasp.fuse.retriever import FusionSetting

    return FusionSetting("static", cfg.rrf_k, w=cfg.w, info={"untuned": True})


def untuned_final_fusion(cfg: RerankerConfig):
    """The final fusion where `grasp tune rerank` saved none: static RRF of the untuned zero-shot reranker at the
    configured (final_w, final_rrf_k), reranking the top ``final_depth``."""
    from grasp.rerank.retriever import RerankFusionSetting
    from grasp.rerank.zero_shot import UNTUNED_ZERO_SHOT

    return RerankFusionSetting(w=cfg.final_w, rrf_k=cfg.final_rrf_k, depth=cfg.final_depth, rule="untuned",
                               zero_shot=UNTUNED_ZERO_SHOT)


def reranked_method(ws: Workspace, *, trained: bool, w: float | None = None, rrf_k: float | None = None,
                    depth: int | None = None, upstream: str | None = None, zero_shot: str | None = None):
    """Stage 3 (``grasp`` with the trained reranker, ``grasp-zs`` zero-shot); the final RRF uses the setting
    `grasp tune rerank` saved (else :func:`untuned_final_fusion`), unless (w, rrf_k) are given. grasp-zs reranks the fused ranking with ``zero_shot``
    when given, else the configured zero-shot reranker (``auto``: the one its setting was tuned with); grasp
    reranks the ranking its setting was tuned over (``upstream`` when given): grasp-zs's when a zero-shot final
    fusion existed at tuning (every stage over the one before), else the fused one (settings tuned before)."""
    from grasp.rerank.build import build_reranked, build_reranker, rerank_depth
    from grasp.rerank.llm_yes_no import with_skb_instruction
    from grasp.rerank.retriever import RerankFusionSetting
    from grasp.rerank.zero_shot import ZERO_SHOT_RERANKERS, zero_shot_reranker_id

    cfg = with_skb_instruction(ws.config.reranker, ws.skb)
    adapter = None
    if trained:
        adapter = ws.artifact(RERANKER_ADAPTER, check=ws.expects(RERANKER_ADAPTER), loadable={"layout",
                              "reranker.max_field_tokens", "reranker.max_neighbors"})
        if adapter is None:
            raise ConfigError(f"no trained reranker for this SKB ({ws.artifact_path(RERANKER_ADAPTER)}); "
                              "run `grasp train reranker` first")
    name = final_fusion_artifact(trained)
    setting = None  # explicit (w, k): no saved setting applies, nor its depth
    if w is None or rrf_k is None:  # the tuned setting, else the untuned static one of the configuration
        setting = ws.load_setting(RerankFusionSetting, name) or untuned_final_fusion(cfg)
    source = upstream or (setting.upstream if setting is not None and trained else "fused")
    # the one asked for, else the configured one, else (auto) the one the setting was tuned with (a setting made
    # before it was recorded: the bi-encoder; the untuned one names its own)
    tuned_with = (setting.zero_shot or ZERO_SHOT_RERANKERS[0]) if setting is not None else ZERO_SHOT_RERANKERS[0]
    zero_shot = zero_shot or zero_shot_reranker_id(cfg) or tuned_with
    reranker = build_reranker(cfg, ws.encoder, adapter, ws.config.bm25, zero_shot=zero_shot)
    return build_reranked(retriever(ws, source), reranker, ws.serializer, name="grasp" if trained else "grasp-zs",
                          fusion=setting or RerankFusionSetting(w=float(w), rrf_k=float(rrf_k)),  # type: ignore[arg-type]
                          depth=depth if depth is not None else rerank_depth(cfg, setting),
                          vectors_dir=ws.vectors_dir, progress=ws.progress)


METHODS: dict[str, Callable[[Workspace], Retriever]] = {
    "bm25": _bm25, "dense": _dense, "graph": _graph, "mfar": mfar_method, "fused": _fused,
    "grasp-zs": lambda ws: reranked_method(ws, trained=False), "grasp": lambda ws: reranked_method(ws, trained=True),
}
