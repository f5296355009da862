"""Stage 3: rerankers (zero-shot bi-encoder, LoRA-tuned cross-encoder or bi-encoder) and the final fusion."""

import json
from pathlib import Path

from grasp.rerank.base import Reranker
from grasp.rerank.bi_encoder import BiEncoderReranker
from grasp.rerank.cross_encoder import CrossEncoderReranker
from grasp.rerank.retriever import RerankedRetriever
from grasp.rerank.train import RerankTrainConfig, build_records, train_reranker
from grasp.rerank.tuned_bi_encoder import TunedBiEncoderReranker

__all__ = ["Reranker", "BiEncoderReranker", "CrossEncoderReranker", "RerankedRetriever", "RerankTrainConfig",
           "TunedBiEncoderReranker", "load_trained_reranker",
           "build_records", "train_reranker"]


def load_trained_reranker(model: str, adapter: Path, *, max_length: int = 256) -> Reranker:
    """The reranker a trained adapter belongs to (its ``grasp_train.json`` records the kind)."""
    meta = Path(adapter) / "grasp_train.json"
    kind = json.loads(meta.read_text()).get("kind", "cross-encoder") if meta.exists() else "cross-encoder"
    cls = TunedBiEncoderReranker if kind == "bi-encoder" else CrossEncoderReranker
    return cls(model, adapter, max_length=max_length)
