"""A bi-encoder reranker whose encoder carries a LoRA adapter trained with the listwise loss.

Score = cos(query, candidate text) / temperature, the candidate text being the reranker's own
serialization (type, fields, 1-hop neighbours). It starts from the zero-shot bi-encoder (the
bundled MiniLM with mean pooling, as sentence-transformers computes it), so training adapts a
ranker that already works, where a cross-encoder's fresh head must be learnt from nothing; with
a few hundred training queries that difference decides which one ranks better (the README gives
both, measured on validation).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from grasp.encode.encoder import Encoder
from grasp.encode.tuned import TunedEncoder, embed, load_bi_encoder, lora_config
from grasp.rerank.base import VectorReranker
from grasp.rerank.trainable import TrainableScorer, owners

TEMPERATURE = 0.05


class TunedBiEncoderReranker(VectorReranker):
    name = "tuned-bi-encoder"
    temperature = TEMPERATURE

    def __init__(self, model: str = "minilm", adapter: Path | None = None, *, max_length: int = 256,
                 batch_size: int = 64, device: str | None = None, precision: str = "fp32") -> None:
        self.encoder = TunedEncoder.load(model, adapter, kind="tuned-bi-encoder", max_length=max_length,
                                         batch_size=batch_size, device=device, precision=precision)
        self.tokenizer, self.model = self.encoder.tokenizer, self.encoder.net
        self.max_length, self.batch_size = max_length, batch_size

    @property
    def document_encoder(self) -> Encoder:
        return self.encoder

    def query_vector(self, query: str) -> np.ndarray:
        return self.encoder.encode([query])[0]


class BiEncoderTrainable(TrainableScorer):
    """LoRA on the bi-encoder's encoder; a group's logits are its documents' cosines to the query / temperature,
    so training starts exactly at the zero-shot ranking."""

    def __init__(self, cfg) -> None:
        from peft import get_peft_model

        self.tokenizer, base = load_bi_encoder(cfg.model)
        self.net = get_peft_model(base, lora_config(cfg.train.lora_r, cfg.train.lora_alpha, cfg.train.lora_dropout))
        self.max_length = cfg.max_length

    def group_logits(self, queries, docs, sizes) -> torch.Tensor:
        qv = embed(self.net, self.tokenizer, queries, self.max_length)
        dv = embed(self.net, self.tokenizer, docs, self.max_length)
        return (dv * qv[owners(sizes, qv.device)]).sum(-1) / TEMPERATURE

    def save(self, directory: Path) -> None:
        self.net.save_pretrained(str(directory))
