"""Chat clients for the planner.

- :class:`OpenAIChatClient`: any OpenAI-compatible ``/chat/completions`` endpoint (vLLM, Ollama,
  llama.cpp server, OpenAI), with JSON-schema structured output where the server supports it,
  timeouts and retries on transport errors.
- :class:`LocalGGUFClient`: a GGUF model run in-process by ``xllamacpp`` (the offline default),
  with the JSON schema turned into a decoding grammar.
"""

from __future__ import annotations

import json
import os
import threading
import time
import warnings
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING

from grasp.errors import ConfigError, GraspError

if TYPE_CHECKING:
    import httpx


class LLMError(GraspError):
    """The LLM endpoint failed (timeout, transport error, bad answer shape)."""


class ChatClient(ABC):
    model_id: str
    engine: str = ""  # what runs the model (recorded beside each plan it makes)
    concurrency: int = 1  # requests worth sending at once (the planner keeps this many in flight)

    @abstractmethod
    def chat(self, messages: list[dict[str, str]], *, json_schema: dict | None = None, max_tokens: int = 512,
             temperature: float = 0.0, seed: int | None = None) -> str:
        """The assistant's reply text. Temperature 0 with the client's seed by default (deterministic where the
        backend is); a sampled plan passes a temperature and a seed of its own."""


class OpenAIChatClient(ChatClient):
    engine = "openai"

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 120.0,
                 retries: int = 3, seed: int = 13, structured: bool = True, concurrency: int = 4) -> None:
        import httpx

        self.concurrency = concurrency
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.retries = retries
        self.seed = seed
        self.structured = structured
        self.model_id = model  # the cache key uses the model name alone, whatever serves it
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def chat(self, messages, *, json_schema=None, max_tokens=512, temperature=0.0, seed=None) -> str:
        import httpx

        body: dict = {"model": self.model, "messages": messages, "temperature": temperature,
                      "seed": self.seed if seed is None else seed, "max_tokens": max_tokens}
        if json_schema is not None and self.structured:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "plan", "schema": json_schema, "strict": True}}
        last: Exception | None = None
        for attempt in range(self.retries):
            try:
                r = self._client.post(f"{self.base_url}/chat/completions", json=body)
            except httpx.HTTPError as e:  # timeouts, refused connections
                last = e
                time.sleep(min(0.5 * 2**attempt, 4))
                continue
            if r.status_code == 400 and "response_format" in body and _refuses_schema(r.text):
                body.pop("response_format")  # the server has no structured output: plain JSON prompting
                self.structured = False
                warnings.warn(f"{self.base_url} refuses JSON-schema structured output ({_error_message(r)[:240]!r}); planning "
                              "goes on without the grammar, so plans are checked by the validator alone",
                              UserWarning, stacklevel=2)  # once: the client stops asking
                continue
            if r.status_code >= 500 or r.status_code == 429:
                last = LLMError(f"HTTP {r.status_code}: {r.text[:200]}")
                time.sleep(min(0.5 * 2**attempt, 4))
                continue
            if r.status_code >= 400:
                raise LLMError(f"{self.base_url} answered HTTP {r.status_code}: {r.text[:300]}")
            try:
                return r.json()["choices"][0]["message"]["content"] or ""
            except (ValueError, KeyError, IndexError, TypeError):
                raise LLMError(f"{self.base_url} returned no chat completion: {r.text[:200]}") from None
        raise LLMError(f"{self.base_url} failed after {self.retries} tries: {last}")


def _error_message(r: httpx.Response) -> str:
    """The server's own words: an OpenAI-style ``{"error": {"message": ...}}``, else the body."""
    try:
        error = r.json().get("error")
        return str(error.get("message") if isinstance(error, dict) else error or r.text)
    except (ValueError, AttributeError):
        return r.text


def _refuses_schema(error: str) -> bool:
    """Whether a 400 answer refuses the structured output itself: a server without ``response_format``
    (it names the field), or one that cannot compile this JSON schema into a grammar (llama.cpp: "JSON
    schema error ...", when its converter lacks a feature the schema uses)."""
    text = error.lower()
    return "response_format" in text or "json schema" in text or "json_schema" in text or "grammar" in text


class LocalGGUFClient(ChatClient):
    """In-process llama.cpp via ``xllamacpp``. With ``slots`` > 1 the server decodes that many requests
    at once (continuous batching): concurrent :meth:`chat` calls share each forward pass. Every slot
    keeps its own prompt cache, so the long system prompt is processed once per slot, then only each
    query's few tokens are (measured in bench/planner_throughput.py)."""

    engine = "llama.cpp"

    def __init__(self, model_path: Path, *, n_ctx: int = 8192, threads: int | None = None, slots: int = 1,
                 flash_attn: bool = True, seed: int = 13, model_id: str | None = None,
                 speculative: str | None = None) -> None:
        """``speculative``: llama.cpp's n-gram speculative decoding ("ngram_simple", "ngram_map_k": drafts
        looked up in the prompt and checked in one pass), or None."""
        try:
            import xllamacpp as xl
        except ImportError:
            raise ConfigError("the local planner needs xllamacpp: pip install 'xllamacpp==2026.10.11549'") from None
        model_path = Path(model_path)
        if not model_path.exists():
            raise ConfigError(f"{model_path}: GGUF model not found; run `grasp fetch planner` or set planner.model_path")
        p = xl.CommonParams()
        p.model.path = str(model_path)
        threads = threads or os.cpu_count() or 1
        p.n_ctx = n_ctx * slots  # split evenly between the slots
        p.n_parallel = slots
        p.cont_batching = True
        p.kv_unified = False  # measured: a unified cache made every slot attend over all slots' cells
        p.cache_prompt = True
        if flash_attn:
            p.flash_attn_type = xl.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_ENABLED
        p.cpuparams.n_threads = threads
        p.cpuparams_batch.n_threads = threads
        p.sampling.temp = 0.0
        p.sampling.seed = seed
        if speculative is not None:
            kind = getattr(xl.common_speculative_type, f"COMMON_SPECULATIVE_TYPE_{speculative.upper()}", None)
            if kind is None:
                raise ConfigError(f"xllamacpp has no speculative decoding {speculative!r}")
            p.speculative.types = [kind]
            for ngram in (p.speculative.ngram_simple, p.speculative.ngram_map_k):
                ngram.size_n, ngram.size_m = 3, 16  # look up the last 3 tokens, draft up to 16
        p.warmup = False
        p.verbosity = -1
        p.log_json = False
        self._server = xl.Server(p)
        self.concurrency = slots
        self._slots = threading.BoundedSemaphore(slots)
        self.seed = seed
        self.model_id = model_id or f"gguf:{model_path.name}"

    def chat(self, messages, *, json_schema=None, max_tokens=512, temperature=0.0, seed=None) -> str:
        req: dict = {"messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                     "seed": self.seed if seed is None else seed}
        if json_schema is not None:
            req["grammar"] = guidance_grammar(json_schema)
        with self._slots:
            r = self._server.handle_chat_completions(req)
        if not isinstance(r, dict) or "choices" not in r:
            raise LLMError(f"local model returned no completion: {str(r)[:200]}")
        return r["choices"][0]["message"].get("content") or ""


def guidance_grammar(json_schema: dict) -> str:
    """The llguidance grammar of a JSON schema, decoded as compact one-line JSON (fewer tokens than
    pretty JSON): the same for every local engine, so each decodes the same language."""
    compact = {**json_schema, "x-guidance": {"whitespace_flexible": False, "key_separator": ": ",
                                             "item_separator": ", "}}
    return "%llguidance {}\nstart: %json " + json.dumps(compact)


def api_key_from_env(name: str) -> str | None:
    return os.environ.get(name) or None
