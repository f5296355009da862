"""Building Stage 3 from the ``reranker`` configuration: the candidate serializer, the reranker
(zero-shot or a trained adapter) and the reranked retriever with its final fusion."""

from __future__ import annotations

from pathlib import Path

from grasp.config import BM25Config, RerankerConfig
from grasp.encode.encoder import Encoder
from grasp.rerank import BiEncoderReranker, load_trained_reranker
from grasp.rerank.base import Reranker
from grasp.rerank.retriever import RerankedRetriever, RerankFusionSetting
from grasp.rerank.vectors import CandidateVectors
from grasp.retriever import Retriever
from grasp.skb.documents import CandidateSerializer, DocumentLayout
from grasp.skb.graph import SKB


def build_serializer(cfg: RerankerConfig, skb: SKB, layout: DocumentLayout) -> CandidateSerializer:
    """The reranker's view of a node (type, truncated fields, 1-hop neighbours), as configured; training,
    serving and the stored vectors all read candidates through it."""
    return CandidateSerializer(skb, layout, max_field_tokens=cfg.max_field_tokens, max_neighbors=cfg.max_neighbors)


def build_reranker(cfg: RerankerConfig, encoder: Encoder, adapter: Path | None, bm25: BM25Config | None = None, *,
                   zero_shot: str | None = None) -> Reranker:
    """The zero-shot reranker (no adapter): ``zero_shot`` (default ``cfg.zero_shot``; ``auto`` means the
    bi-encoder here, as its setting is not read), BM25 over the pool (with ``bm25``'s tokenizer and parameters),
    the bi-encoder over ``encoder``, or their hybrid (both standardised over the pool, added); for ``reranker.kind=llm-yes-no`` the causal LM ``cfg.model`` untrained
    (it answers yes/no as it is); else the reranker a trained adapter belongs to."""
    if adapter is None and cfg.kind == "llm-yes-no":
        from grasp.rerank.llm_yes_no import LLMYesNoReranker

        return LLMYesNoReranker(cfg.model, instruction=cfg.instruction, max_length=cfg.max_length,
                                precision=cfg.precision)
    zero_shot = zero_shot or cfg.zero_shot
    if adapter is None and zero_shot in ("bm25", "hybrid"):
        from grasp.rerank.hybrid import HybridReranker
        from grasp.rerank.lexical import LexicalReranker

        lexical = LexicalReranker(bm25)
        return lexical if zero_shot == "bm25" else HybridReranker([BiEncoderReranker(encoder), lexical])
    if adapter is None:
        return BiEncoderReranker(encoder)
    return load_trained_reranker(cfg.model, adapter, max_length=cfg.max_length, precision=cfg.precision)


def rerank_depth(cfg: RerankerConfig, setting: RerankFusionSetting | None) -> int:
    """A depth the user set wins; else the depth the final fusion was tuned at; else the configured default."""
    if "depth" in cfg.model_fields_set or setting is None or setting.depth is None:
        return cfg.depth
    return setting.depth


def build_reranked(upstream: Retriever, reranker: Reranker, serializer: CandidateSerializer, *, name: str,
                   fusion: RerankFusionSetting, depth: int, vectors_dir: Path, progress: bool = True) -> RerankedRetriever:
    """Stage 3 over ``upstream`` with the final fusion ``fusion``; a bi-encoder reranker (or the hybrid's bi-encoder
    part) reads its candidates' stored vectors (under ``vectors_dir``) once `grasp index` built them."""
    part = reranker.vector_part  # a bi-encoder, or the hybrid's bi-encoder part
    vectors = (CandidateVectors(vectors_dir, serializer, part.document_encoder, progress=progress)
               if part is not None else None)
    return RerankedRetriever(upstream, reranker, serializer, name=name, depth=depth, fusion=fusion, vectors=vectors)
