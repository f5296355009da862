"""A bi-encoder reranker whose encoder carries a LoRA adapter trained with the listwise loss.

Score = cos(query, candidate text) / temperature, the candidate text being the reranker's own
serialization (type, fields, 1-hop neighbours). It starts from the zero-shot bi-encoder (the
bundled MiniLM with mean pooling, as sentence-transformers computes it), so training adapts a
ranker that already works, where a cross-encoder's fresh head must be learnt from nothing; with
a few hundred training queries that difference decides which one ranks better (the README gives
both, measured on validation).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from grasp.rerank.base import DocumentVectorCache, Reranker, load_transformer

TEMPERATURE = 0.05


def load_bi_encoder(model: str = "minilm", adapter: Path | None = None, *, device: str | None = None):
    """(tokenizer, encoder) with an optional LoRA adapter applied; float32."""
    from transformers import AutoModel

    return load_transformer(AutoModel, model, adapter, device)


def embed(net, tokenizer, texts: Sequence[str], max_length: int) -> torch.Tensor:
    """Mean-pooled, L2-normalised embeddings (sentence-transformers' MiniLM pooling)."""
    device = next(net.parameters()).device
    enc = tokenizer(list(texts), truncation=True, max_length=max_length, padding=True, return_tensors="pt").to(device)
    hidden = net(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


class TunedBiEncoderReranker(Reranker):
    name = "tuned-bi-encoder"

    def __init__(self, model: str = "minilm", adapter: Path | None = None, *, max_length: int = 256,
                 batch_size: int = 64, device: str | None = None) -> None:
        self.tokenizer, self.model = load_bi_encoder(model, adapter, device=device)
        self.model.eval()
        self.max_length, self.batch_size = max_length, batch_size
        self.documents = DocumentVectorCache(self._embed)

    @torch.no_grad()
    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        out = [embed(self.model, self.tokenizer, texts[i : i + self.batch_size], self.max_length)
               for i in range(0, len(texts), self.batch_size)]
        return torch.cat(out).float().cpu().numpy()

    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        if not documents:
            return np.zeros(0)
        q = self._embed([query])[0]
        return self.documents(list(documents)) @ q / TEMPERATURE
