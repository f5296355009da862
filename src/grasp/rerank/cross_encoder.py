"""A cross-encoder reranker: a sequence-classification head on an encoder (one logit per pair).

Built from the bundled MiniLM by default (its head starts untrained, so use it after
`grasp train reranker`), or from any local transformers checkpoint; a LoRA adapter saved by the
trainer is loaded on top. Runs on the GPU when one is available.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from grasp.encode.encoder import inference_numerics, resolve_precision
from grasp.rerank.base import Reranker, load_transformer


def load_cross_encoder(model: str = "minilm", adapter: Path | None = None, *, device: str | None = None):
    """(tokenizer, model) with an optional LoRA adapter applied."""
    from transformers import AutoModelForSequenceClassification

    return load_transformer(AutoModelForSequenceClassification, model, adapter, device, num_labels=1)


class CrossEncoderReranker(Reranker):
    name = "cross-encoder"

    def __init__(self, model: str = "minilm", adapter: Path | None = None, *, max_length: int = 512,
                 batch_size: int = 32, device: str | None = None, precision: str = "fp32") -> None:
        self.tokenizer, self.model = load_cross_encoder(model, adapter, device=device)
        self.model.eval()
        self.device = str(next(self.model.parameters()).device)
        self.precision = resolve_precision(precision, self.device)
        self.max_length = max_length
        self.batch_size = batch_size

    @torch.no_grad()
    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        out = []
        with inference_numerics(self.precision, self.device):
            for start in range(0, len(documents), self.batch_size):
                docs = list(documents[start : start + self.batch_size])
                enc = self.tokenizer([query] * len(docs), docs, truncation="only_second", max_length=self.max_length,
                                     padding=True, return_tensors="pt").to(self.device)
                out.append(self.model(**enc).logits[:, 0].float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)
