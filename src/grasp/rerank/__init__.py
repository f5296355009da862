"""Stage 3: rerankers (zero-shot bi-encoder, LoRA-tuned cross-encoder or bi-encoder, causal-LM yes/no) and the
final fusion."""

import json
from pathlib import Path

from grasp.rerank.base import Reranker
from grasp.rerank.bi_encoder import BiEncoderReranker
from grasp.rerank.cross_encoder import CrossEncoderReranker
from grasp.rerank.retriever import RerankedRetriever
from grasp.rerank.train import build_records, train_reranker
from grasp.rerank.tuned_bi_encoder import TunedBiEncoderReranker

__all__ = ["Reranker", "BiEncoderReranker", "CrossEncoderReranker", "RerankedRetriever",
           "TunedBiEncoderReranker", "load_trained_reranker",
           "build_records", "train_reranker"]


def load_trained_reranker(model: str, adapter: Path, *, max_length: int = 128, precision: str = "fp32") -> Reranker:
    """The reranker a trained adapter belongs to. Its ``grasp_train.json`` records the kind and the
    token length it was trained at; that length wins over ``max_length`` (the fallback for adapters
    without the record), so inference truncates candidates exactly as training did (and an LLM yes/no
    reranker reads the instruction it was trained with)."""
    meta_path = Path(adapter) / "grasp_train.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    if meta.get("kind") == "llm-yes-no":
        from grasp.rerank.llm_yes_no import LLMYesNoReranker

        return LLMYesNoReranker(model, adapter, instruction=meta.get("instruction"),
                                max_length=int(meta.get("max_length", max_length)), precision=precision)
    cls = TunedBiEncoderReranker if meta.get("kind", "cross-encoder") == "bi-encoder" else CrossEncoderReranker
    return cls(model, adapter, max_length=int(meta.get("max_length", max_length)), precision=precision)
