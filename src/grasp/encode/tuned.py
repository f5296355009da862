"""Transformer encoders with LoRA adapters: loading, mean-pooled embedding, and the tuned encoder as an
:class:`~grasp.encode.encoder.Encoder`.

Shared by every stage that fine-tunes the bundled MiniLM: mFAR's encoder (Stage 2) and the
bi-encoder and cross-encoder rerankers (Stage 3), so training and serving embed texts one way.
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


def mean_pool(states, attention_mask):
    """The mean of each row's token states over its real tokens (sentence-transformers' MiniLM pooling)."""
    mask = attention_mask.unsqueeze(-1).to(states.dtype)
    return (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)


def load_transformer(auto_class, model: str, adapter: Path | None, device: str | None, **kwargs):
    """(tokenizer, network) of a transformers ``Auto*`` class in float32 (whatever the checkpoint
    stores: a float16 copy trains poorly in half precision), with a LoRA adapter merged in when
    given (plain weights: faster inference)."""
    from transformers import AutoTokenizer

    from grasp.encode.encoder import default_device

    path, _ = resolve_model_path(model)
    tokenizer = AutoTokenizer.from_pretrained(path)
    net = auto_class.from_pretrained(path, dtype=torch.float32, **kwargs)
    if adapter is not None:
        from peft import PeftModel

        net = PeftModel.from_pretrained(net, str(adapter)).merge_and_unload()
    return tokenizer, net.to(device or default_device())


def load_bi_encoder(model: str = "minilm", adapter: Path | None = None, *, device: str | None = None):
    """(tokenizer, encoder) with an optional LoRA adapter applied; float32."""
    from transformers import AutoModel

    return load_transformer(AutoModel, model, adapter, device)


def lora_config(r: int, alpha: int, dropout: float, task_type: str = "FEATURE_EXTRACTION"):
    """LoRA on every linear layer, as the paper configures its reranker."""
    from peft import LoraConfig

    return LoraConfig(task_type=task_type, r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules="all-linear")


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
    """A (LoRA-merged) transformer as an :class:`Encoder`, so its vectors go into the embedding store under
    an identity naming the adapter."""

    def __init__(self, net, tokenizer, *, max_length: int, batch_size: int, identity: str,
                 tokens_per_batch: int = 2048, precision: str = "fp32") -> None:
        self.net, self.tokenizer = net, tokenizer
        self.max_length, self.batch_size = max_length, batch_size
        self.tokens_per_batch = max(tokens_per_batch, max_length)
        self.dim = int(net.config.hidden_size)
        self.device = str(next(net.parameters()).device)
        self.precision = resolve_precision(precision, self.device)
        self.model_id = f"{identity}:len{max_length}" + precision_suffix(self.precision)

    @classmethod
    def load(cls, model: str, adapter: Path | None, *, kind: str, max_length: int, batch_size: int = 64,
             device: str | None = None, precision: str = "fp32") -> TunedEncoder:
        """``model`` with ``adapter`` merged in; ``kind`` names its role in the identity (e.g. ``mfar-encoder``)."""
        tokenizer, net = load_bi_encoder(model, adapter, device=device)
        net.eval()
        return cls(net, tokenizer, max_length=max_length, batch_size=batch_size, precision=precision,
                   identity=f"{kind}:{resolve_model_path(model)[1]}:{adapter_digest(adapter)}")

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
