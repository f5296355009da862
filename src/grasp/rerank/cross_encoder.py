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

from grasp.encode.encoder import default_device, resolve_model_path
from grasp.rerank.base import Reranker


def load_cross_encoder(model: str = "minilm", adapter: Path | None = None, *, device: str | None = None):
    """(tokenizer, model) with an optional LoRA adapter applied."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path, _ = resolve_model_path(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    # float32 whatever the checkpoint stores (a float16 copy of the weights trains poorly in half precision)
    net = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, dtype=torch.float32)
    if adapter is not None:
        from peft import PeftModel

        net = PeftModel.from_pretrained(net, str(adapter)).merge_and_unload()  # plain weights: faster inference
    return tokenizer, net.to(device or default_device())


class CrossEncoderReranker(Reranker):
    name = "cross-encoder"

    def __init__(self, model: str = "minilm", adapter: Path | None = None, *, max_length: int = 512,
                 batch_size: int = 32, device: str | None = None) -> None:
        self.tokenizer, self.model = load_cross_encoder(model, adapter, device=device)
        self.model.eval()
        self.max_length = max_length
        self.batch_size = batch_size

    @torch.no_grad()
    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        out = []
        device = next(self.model.parameters()).device
        for start in range(0, len(documents), self.batch_size):
            docs = list(documents[start : start + self.batch_size])
            enc = self.tokenizer([query] * len(docs), docs, truncation="only_second", max_length=self.max_length,
                                 padding=True, return_tensors="pt").to(device)
            out.append(self.model(**enc).logits[:, 0].float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)
