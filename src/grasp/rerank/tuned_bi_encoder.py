"""A bi-encoder reranker whose encoder carries a LoRA adapter trained with the listwise loss.

Score = cos(query, candidate text) / temperature, the candidate text being the reranker's own
serialization (type, fields, 1-hop neighbours). It starts from the zero-shot bi-encoder (the
bundled MiniLM with mean pooling, as sentence-transformers computes it), so training adapts a
ranker that already works, where a cross-encoder's fresh head must be learnt from nothing; with
a few hundred training queries that difference decides which one ranks better (the README gives
both, measured on validation).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from grasp.encode.encoder import (
    Encoder,
    inference_numerics,
    precision_suffix,
    resolve_model_path,
    resolve_precision,
    token_budget_batches,
    token_counts,
)
from grasp.rerank.base import VectorReranker, load_transformer, mean_pool
from grasp.rerank.trainable import TrainableScorer, lora_config, owners

TEMPERATURE = 0.05


def load_bi_encoder(model: str = "minilm", adapter: Path | None = None, *, device: str | None = None):
    """(tokenizer, encoder) with an optional LoRA adapter applied; float32."""
    from transformers import AutoModel

    return load_transformer(AutoModel, model, adapter, device)


def embed(net, tokenizer, texts: Sequence[str], max_length: int) -> torch.Tensor:
    """Mean-pooled, L2-normalised embeddings (sentence-transformers' MiniLM pooling)."""
    device = next(net.parameters()).device
    enc = tokenizer(list(texts), truncation=True, max_length=max_length, padding=True, return_tensors="pt").to(device)
    return torch.nn.functional.normalize(mean_pool(net(**enc).last_hidden_state, enc["attention_mask"]), dim=-1)


def adapter_digest(adapter: Path | None) -> str:
    """SHA-256 (16 hex digits) over an adapter folder's files: names the trained weights in cache keys."""
    if adapter is None:
        return "base"
    digest = hashlib.sha256()
    for f in sorted(p for p in Path(adapter).rglob("*") if p.is_file()):
        digest.update(f.relative_to(adapter).as_posix().encode())
        digest.update(f.read_bytes())
    return digest.hexdigest()[:16]


class TunedEncoder(Encoder):
    """The tuned encoder as an :class:`Encoder`, so its candidate vectors go into the embedding store."""

    def __init__(self, net, tokenizer, *, max_length: int, batch_size: int, identity: str,
                 tokens_per_batch: int = 2048, precision: str = "fp32") -> None:
        self.net, self.tokenizer = net, tokenizer
        self.max_length, self.batch_size = max_length, batch_size
        self.tokens_per_batch = max(tokens_per_batch, max_length)
        self.dim = int(net.config.hidden_size)
        self.device = str(next(net.parameters()).device)
        self.precision = resolve_precision(precision, self.device)
        self.model_id = f"{identity}:len{max_length}" + precision_suffix(self.precision)

    @torch.inference_mode()
    def encode(self, texts: Sequence[str], *, progress: bool = False, desc: str = "encoding") -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if len(texts) == 0:
            return out
        bar = tqdm(total=len(texts), desc=desc, unit="text", disable=not progress)
        with inference_numerics(self.precision, self.device):
            for idx in token_budget_batches(token_counts(self.tokenizer, texts, self.max_length),
                                            tokens_per_batch=self.tokens_per_batch, max_batch=4 * self.batch_size):
                out[idx] = embed(self.net, self.tokenizer, [texts[i] for i in idx],
                                 self.max_length).float().cpu().numpy()
                bar.update(len(idx))
        bar.close()
        return out


class TunedBiEncoderReranker(VectorReranker):
    name = "tuned-bi-encoder"
    temperature = TEMPERATURE

    def __init__(self, model: str = "minilm", adapter: Path | None = None, *, max_length: int = 256,
                 batch_size: int = 64, device: str | None = None, precision: str = "fp32") -> None:
        self.tokenizer, self.model = load_bi_encoder(model, adapter, device=device)
        self.model.eval()
        self.max_length, self.batch_size = max_length, batch_size
        self.encoder = TunedEncoder(self.model, self.tokenizer, max_length=max_length, batch_size=batch_size,
                                    identity=f"tuned-bi-encoder:{resolve_model_path(model)[1]}:{adapter_digest(adapter)}",
                                    precision=precision)

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
        self.net = get_peft_model(base, lora_config(cfg, "FEATURE_EXTRACTION"))
        self.max_length = cfg.max_length

    def group_logits(self, queries, docs, sizes) -> torch.Tensor:
        qv = embed(self.net, self.tokenizer, queries, self.max_length)
        dv = embed(self.net, self.tokenizer, docs, self.max_length)
        return (dv * qv[owners(sizes, qv.device)]).sum(-1) / TEMPERATURE

    def save(self, directory: Path) -> None:
        self.net.save_pretrained(str(directory))
