"""A cross-encoder reranker: the encoder reads query and candidate as one pair; a linear head over the
mean of its token states gives one logit.

Why mean pooling and a zero head: all-MiniLM-L6-v2 was trained as a sentence encoder with mean pooling,
and the stock sequence-classification head reads the [CLS] state through a pooler, with a random
classifier on top. That start gives logits within +-0.01 of each other on every group, and a head
learning at the LoRA rate never left the listwise loss's ln G in our runs (README, Stage 3). The
head here reads what the encoder was trained to produce, standardised, starts at zero (every candidate equal,
the gradient on the head the mean difference between positive and negatives), and learns at its
own rate (``reranker.train.head_lr``) while LoRA adapts the encoder at ``reranker.train.lr``.

Built from the bundled MiniLM by default, or from any local transformers checkpoint; a trained
adapter folder holds the LoRA weights and ``head.pt``. Runs on the GPU when one is available.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from grasp.encode.encoder import inference_numerics, resolve_precision
from grasp.encode.tuned import load_transformer, lora_config, mean_pool
from grasp.errors import FormatError
from grasp.rerank.base import Reranker
from grasp.rerank.trainable import TrainableScorer

HEAD_FILE = "head.pt"


class PairScorer(torch.nn.Module):
    """encoder(query, candidate) -> mean of the token states, standardised (layer norm without parameters:
    MiniLM's pooled features are small, so a head on them would need many steps to separate candidates)
    -> linear -> one logit per pair."""

    def __init__(self, encoder: torch.nn.Module, hidden: int) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = torch.nn.Linear(hidden, 1)
        torch.nn.init.zeros_(self.head.weight)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, **enc) -> torch.Tensor:
        pooled = mean_pool(self.encoder(**enc).last_hidden_state, enc["attention_mask"])
        return self.head(torch.nn.functional.layer_norm(pooled, pooled.shape[-1:]))[:, 0]


def encode_pairs(tokenizer, queries: Sequence[str], docs: Sequence[str], max_length: int, device) -> dict:
    """Query and candidate as one input, the candidate truncated to fit ``max_length``."""
    return tokenizer(list(queries), list(docs), truncation="only_second", max_length=max_length, padding=True,
                     return_tensors="pt").to(device)


def load_cross_encoder(model: str = "minilm", adapter: Path | None = None, *, device: str | None = None):
    """(tokenizer, PairScorer) with a trained adapter's LoRA merged and its head loaded."""
    from transformers import AutoModel

    tokenizer, encoder = load_transformer(AutoModel, model, adapter, device)
    scorer = PairScorer(encoder, int(encoder.config.hidden_size)).to(next(encoder.parameters()).device)
    if adapter is not None:
        head = Path(adapter) / HEAD_FILE
        if not head.exists():
            raise FormatError(f"no {HEAD_FILE}: an adapter of the earlier cross-encoder ([CLS] head, which did not "
                              "learn); retrain it with `grasp --set reranker.kind=cross-encoder train reranker`",
                              file=Path(adapter))
        scorer.head.load_state_dict(torch.load(head, map_location="cpu", weights_only=True))
    return tokenizer, scorer


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
                enc = encode_pairs(self.tokenizer, [query] * len(docs), docs, self.max_length, self.device)
                out.append(self.model(**enc).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)


class CrossEncoderTrainable(TrainableScorer):
    """LoRA on the pair encoder at ``reranker.train.lr``; the zero-initialised head in full at ``reranker.train.head_lr``."""

    def __init__(self, cfg) -> None:
        from peft import get_peft_model

        tokenizer, scorer = load_cross_encoder(cfg.model)
        scorer.encoder = get_peft_model(scorer.encoder, lora_config(cfg.train.lora_r, cfg.train.lora_alpha, cfg.train.lora_dropout))
        self.tokenizer, self.net, self.max_length = tokenizer, scorer, cfg.max_length

    def parameter_groups(self, cfg) -> list[dict]:
        head = list(self.net.head.parameters())
        lora = [p for p in self.net.encoder.parameters() if p.requires_grad]
        return [{"params": lora, "lr": cfg.train.lr}, {"params": head, "lr": cfg.train.head_lr}]

    def group_logits(self, queries, docs, sizes) -> torch.Tensor:
        pair_queries = [q for q, n in zip(queries, sizes, strict=True) for _ in range(n)]
        return self.net(**encode_pairs(self.tokenizer, pair_queries, docs, self.max_length, self.device))

    def save(self, directory: Path) -> None:
        self.net.encoder.save_pretrained(str(directory))
        torch.save(self.net.head.state_dict(), Path(directory) / HEAD_FILE)
