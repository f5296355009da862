"""The local planner model run by PyTorch, many requests decoded as one batch.

On CPUs that multiply bfloat16 natively (AVX512-BF16, AMX) a bfloat16 matrix product runs about
4.5x faster than float32 and far faster than llama.cpp's generic AVX2 build decodes the Q4_K_M file
(bench/planner_throughput.py). This client loads the same GGUF weights into transformers
(dequantized once, then cached as safetensors beside the GGUF), and decodes the requests that
arrive together as one batch:

- the prompt prefix the batch shares (the planner's system prompt: ~2,500 tokens, the same for
  every query) is computed once and kept, so each request pays only for its own user message;
- decoding is constrained by the same llguidance grammar the llama.cpp client uses (one matcher per
  request), greedy at temperature 0, sampled from a per-request seeded generator otherwise;
- a finished request leaves the batch at once, so short plans do not wait on long ones' compute.

Requests come from :meth:`ChatClient.chat` calls on several threads (``Planner.plan_many`` keeps
``concurrency`` of them in flight); one worker thread gathers what is waiting into a batch.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import numpy as np

from grasp.errors import ConfigError
from grasp.plan.llm import ChatClient, LLMError, guidance_grammar
from grasp.progress import announce
from grasp.storage import atomic_file, stable_hash


@dataclass
class _Request:
    messages: list[dict[str, str]]
    json_schema: dict | None
    max_tokens: int
    temperature: float
    seed: int
    done: Future = field(default_factory=Future)


def converted_dir(model_path: Path) -> Path:
    """Where the dequantized copy of a GGUF is kept (a folder beside it)."""
    return model_path.with_name(model_path.name + ".torch")


def convert_gguf(model_path: Path) -> Path:
    """The folder of a GGUF's weights dequantized for transformers (bfloat16 safetensors and the
    tokenizer), made on first use through transformers' GGUF reader (about a minute) and written
    atomically beside the file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grasp.storage import atomic_dir

    model_path = Path(model_path)
    if not model_path.exists():
        raise ConfigError(f"{model_path}: GGUF model not found; run `grasp fetch planner` or set planner.model_path")
    target = converted_dir(model_path)
    if not (target / "config.json").exists():
        announce("planner", f"converting {model_path.name} for PyTorch (once; kept in {target})")
        tokenizer = AutoTokenizer.from_pretrained(model_path.parent, gguf_file=model_path.name)
        loaded = AutoModelForCausalLM.from_pretrained(model_path.parent, gguf_file=model_path.name,
                                                      dtype=torch.bfloat16)
        # a model loaded from GGUF refuses save_pretrained: its weights go into a fresh one of its config
        model = AutoModelForCausalLM.from_config(loaded.config, dtype=torch.bfloat16)
        missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
        if unexpected or set(missing) - {"lm_head.weight"}:
            raise ConfigError(f"{model_path.name}: its weights do not fit the model transformers builds for it "
                              f"(missing {missing[:3]}, unexpected {unexpected[:3]})")
        del loaded
        with atomic_dir(target) as tmp:
            model.save_pretrained(tmp)
            tokenizer.save_pretrained(tmp)
    return target


def load_gguf_as_torch(model_path: Path, *, dtype):
    """(tokenizer, causal LM in ``dtype``) of a GGUF file, through :func:`convert_gguf`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = convert_gguf(model_path)
    model = AutoModelForCausalLM.from_pretrained(target, dtype=dtype)
    model.eval()
    return AutoTokenizer.from_pretrained(target), model


class TorchChatClient(ChatClient):
    """A chat model in PyTorch that decodes the requests arriving together as one batch (see the module
    docstring). ``batch`` requests at most decode at once; ``concurrency`` tells the planner to keep
    that many in flight."""

    engine = "torch"

    def __init__(self, tokenizer, model, *, batch: int = 32, seed: int = 13, model_id: str = "torch",
                 wait_s: float = 0.05, prefix_dir: Path | None = None) -> None:
        """``prefix_dir``: where computed prompt prefixes are kept across processes (keyed by the model and
        the prefix's tokens), so a new process does not recompute the planner's system prompt."""
        self.tokenizer, self.model = tokenizer, model
        self.prefix_dir = Path(prefix_dir) if prefix_dir else None
        self.concurrency = batch  # the most requests decoded at once, and so kept in flight by the planner
        self.seed = seed
        self.wait_s = wait_s
        self.model_id = model_id
        self.vocab = int(self.model.config.vocab_size)
        self._lltok = None
        self._eos = {t for t in (self.tokenizer.eos_token_id, self.tokenizer.convert_tokens_to_ids("<|im_end|>"),
                                 self.tokenizer.convert_tokens_to_ids("<|endoftext|>"))
                     if isinstance(t, int) and t != self.tokenizer.unk_token_id}
        self._prefix: tuple[tuple[int, ...], list] | None = None  # token ids, per-layer (keys, values)
        self._queue: queue.Queue[_Request] = queue.Queue()
        self._worker = threading.Thread(target=self._serve, name="torch-planner", daemon=True)
        self._worker.start()

    @classmethod
    def from_gguf(cls, model_path: Path, *, batch: int = 32, threads: int | None = None, seed: int = 13,
                  model_id: str | None = None, precision: str = "auto", keep_prefixes: bool = True) -> TorchChatClient:
        """The client of a GGUF file (loaded as :func:`load_gguf_as_torch` does), in bfloat16 where the CPU
        multiplies it natively (``precision="auto"``), else float32; computed prompt prefixes are kept on disk
        beside the converted model unless ``keep_prefixes`` is false."""
        import torch

        from grasp.encode.encoder import resolve_precision

        try:
            import llguidance  # noqa: F401
        except ImportError:
            raise ConfigError("planner.engine 'torch' needs llguidance: pip install 'llguidance==1.9.1'") from None
        torch.set_num_threads(threads or os.cpu_count() or 1)
        precision = resolve_precision(precision, "cpu")
        if precision not in ("bf16", "fp32"):
            raise ConfigError(f"the torch planner runs in bf16 or fp32, not {precision!r}")
        tokenizer, model = load_gguf_as_torch(Path(model_path),
                                              dtype=torch.bfloat16 if precision == "bf16" else torch.float32)
        return cls(tokenizer, model, batch=batch, seed=seed, model_id=model_id or f"gguf:{Path(model_path).name}",
                   prefix_dir=converted_dir(Path(model_path)) / "prefixes" if keep_prefixes else None)

    # --- the public side: one request per call, from any thread -----------------------------

    def chat(self, messages, *, json_schema=None, max_tokens=512, temperature=0.0, seed=None) -> str:
        req = _Request(messages, json_schema, max_tokens, temperature, self.seed if seed is None else seed)
        self._queue.put(req)
        return req.done.result()

    # --- the worker: gather a batch, decode it ------------------------------------------------

    def _serve(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < self.concurrency:
                try:
                    batch.append(self._queue.get(timeout=self.wait_s))
                except queue.Empty:
                    break
            try:
                texts = self.generate(batch)
            except Exception as e:  # noqa: BLE001 - every waiting caller gets the failure
                for r in batch:
                    r.done.set_exception(LLMError(f"local torch model failed: {e}"))
                continue
            for r, text in zip(batch, texts, strict=True):
                r.done.set_result(text)

    def _matcher(self, json_schema: dict | None):
        import llguidance
        import llguidance.hf

        if json_schema is None:
            return None
        if self._lltok is None:
            self._lltok = llguidance.hf.from_tokenizer(self.tokenizer, n_vocab=self.vocab)
        matcher = llguidance.LLMatcher(self._lltok, guidance_grammar(json_schema), log_level=0)
        if matcher.is_error():
            raise LLMError(f"the JSON schema does not compile to a grammar: {matcher.get_error()}")
        return matcher

    def _prefix_cache(self, ids: list[int]):
        """Per-layer (keys, values) of ``ids`` (batch 1): the kept prefix when it is the same, else one
        kept on disk (``prefix_dir``), else computed (and kept in both places)."""
        import torch
        from transformers import DynamicCache

        if self._prefix is not None and self._prefix[0] == tuple(ids):
            return self._prefix[1]
        layers = self._stored_prefix(ids)
        if layers is None:
            computed = DynamicCache()
            with torch.inference_mode():
                self.model(input_ids=torch.tensor([ids]), cache=computed, use_cache=True, logits_to_keep=1)
            layers = [(layer.keys, layer.values) for layer in computed.layers]
            self._store_prefix(ids, layers)
        self._prefix = (tuple(ids), layers)
        return layers

    def _prefix_path(self, ids: list[int]) -> Path | None:
        if self.prefix_dir is None:
            return None
        key = [self.model_id, str(self.model.dtype), self.model.config.num_hidden_layers, ids]
        return self.prefix_dir / f"prefix-{stable_hash(key, 24)}.pt"

    def _stored_prefix(self, ids: list[int]) -> list | None:
        import torch

        path = self._prefix_path(ids)
        if path is None or not path.exists():
            return None
        try:
            stored = torch.load(path, weights_only=True)
        except Exception:  # noqa: BLE001 - a damaged file is recomputed and rewritten
            return None
        if len(stored) != self.model.config.num_hidden_layers or stored[0][0].shape[2] != len(ids):
            return None
        return [(k, v) for k, v in stored]

    def _store_prefix(self, ids: list[int], layers: list) -> None:
        import torch

        path = self._prefix_path(ids)
        if path is not None:
            with atomic_file(path, "wb") as f:
                torch.save([(k.contiguous(), v.contiguous()) for k, v in layers], f)

    def generate(self, requests: list[_Request]) -> list[str]:
        """Decode a batch of requests together; their replies in order."""
        import torch
        from transformers import DynamicCache

        prompts = [self.tokenizer.apply_chat_template(r.messages, add_generation_prompt=True, tokenize=True)
                   for r in requests]
        prompts = [list(p["input_ids"] if hasattr(p, "keys") else p) for p in prompts]  # ids, or an encoding
        n = len(requests)
        shared = _common_prefix(prompts)
        shared = min(shared, min(len(p) for p in prompts) - 1)  # every request keeps a token of its own
        suffixes = [p[shared:] for p in prompts]
        width = max(len(s) for s in suffixes)

        cache = DynamicCache()
        room = width + max(r.max_tokens for r in requests) + 1
        if shared > 0:
            layer = _shared_prefix_layer_class()
            cache.layers = [layer(k, v, n, room) for k, v in self._prefix_cache(prompts[0][:shared])]
        # suffixes left-padded after the shared prefix; the mask hides the padding
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else min(self._eos)
        input_ids = torch.full((n, width), pad, dtype=torch.long)
        mask = torch.zeros((n, shared + width), dtype=torch.long)
        mask[:, :shared] = 1
        positions = torch.zeros((n, width), dtype=torch.long)
        for b, s in enumerate(suffixes):
            input_ids[b, width - len(s):] = torch.tensor(s)
            mask[b, shared + width - len(s):] = 1
            positions[b, width - len(s):] = torch.arange(shared, shared + len(s))
        next_pos = torch.tensor([len(p) for p in prompts])

        matchers = [self._matcher(r.json_schema) for r in requests]
        generators = [None if r.temperature <= 0 else torch.Generator().manual_seed(int(r.seed)) for r in requests]
        outputs: list[list[int]] = [[] for _ in requests]
        active = list(range(n))  # request index of each batch row
        with torch.inference_mode(), _shared_prefix(self.model, cache if shared > 0 else None):
            logits = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                                cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]
            while active:
                logits = logits.float()
                self._constrain(logits, [matchers[i] for i in active])
                tokens = []
                for row, i in enumerate(active):
                    r = requests[i]
                    if generators[i] is None:
                        tokens.append(int(torch.argmax(logits[row])))
                    else:
                        probs = torch.softmax(logits[row] / r.temperature, dim=-1)
                        tokens.append(int(torch.multinomial(probs, 1, generator=generators[i])))
                keep = []
                for row, (i, t) in enumerate(zip(active, tokens, strict=True)):
                    m = matchers[i]
                    if m is not None:
                        m.consume_token(t)
                    if t not in self._eos:
                        outputs[i].append(t)
                    finished = (t in self._eos or len(outputs[i]) >= requests[i].max_tokens
                                or (m is not None and (m.is_stopped() or m.is_error())))
                    if not finished:
                        keep.append(row)
                if not keep:
                    break
                if len(keep) < len(active):
                    rows = torch.tensor(keep)
                    cache.batch_select_indices(rows)
                    mask, next_pos = mask[rows], next_pos[rows]
                    tokens = [tokens[r] for r in keep]
                    active = [active[r] for r in keep]
                mask = torch.cat([mask, torch.ones((len(active), 1), dtype=torch.long)], dim=1)
                logits = self.model(input_ids=torch.tensor(tokens)[:, None], attention_mask=mask,
                                    position_ids=next_pos[:, None], cache=cache, use_cache=True,
                                    logits_to_keep=1).logits[:, -1, :]
                next_pos = next_pos + 1
        return [self.tokenizer.decode(o, skip_special_tokens=True) for o in outputs]

    def _constrain(self, logits, matchers) -> None:
        """Set to -inf every logit the grammar of each row forbids (rows without a grammar are free)."""
        import llguidance.numpy as llnp
        import torch

        rows = [r for r, m in enumerate(matchers) if m is not None]
        if not rows:
            return
        bitmask = llnp.allocate_token_bitmask(len(rows), self.vocab)
        for j, r in enumerate(rows):
            llnp.fill_next_token_bitmask(matchers[r], bitmask, j)
        allowed = np.unpackbits(bitmask.view(np.uint8), axis=1, bitorder="little")[:, : logits.shape[1]]
        logits[rows] = logits[rows].masked_fill(torch.from_numpy(allowed == 0), float("-inf"))


_ATTENTION = "grasp_shared_prefix"
_ACTIVE: dict[str, object] = {}  # "cache": the cache whose shared prefix the attention reads (one decoding thread)


@cache
def _shared_prefix_layer_class():
    from transformers.cache_utils import DynamicLayer

    class SharedPrefixLayer(DynamicLayer):
        """One layer's cache for a batch that shares a prompt prefix: the prefix's keys and values once
        (batch 1), and each row's own tokens in a buffer with room to grow (a decoding step writes in place,
        where transformers' DynamicLayer copies the whole cache at every step). ``update`` returns the rows'
        own keys and values; :func:`_shared_prefix_attention` adds the prefix. Reading the ~2,500-token
        prefix once per layer instead of once per row is most of a batched step's memory traffic saved."""

        def __init__(self, prefix_keys, prefix_values, batch: int, room: int) -> None:
            super().__init__()
            self.device = prefix_keys.device
            self.prefix_keys, self.prefix_values = prefix_keys, prefix_values
            _, h, self.n_prefix, d = prefix_keys.shape
            self._k = prefix_keys.new_empty((batch, h, room, d))
            self._v = prefix_values.new_empty((batch, h, room, prefix_values.shape[-1]))
            self._n = 0
            self._views()
            self.is_initialized = True

        def _views(self) -> None:
            self.keys, self.values = self._k[:, :, : self._n], self._v[:, :, : self._n]

        def update(self, key_states, value_states, *args, **kwargs):
            m = key_states.shape[-2]
            if self._n + m > self._k.shape[2]:  # out of room: grow (not expected: room covers max_tokens)
                grow = max(m, 256)
                self._k = _with_room(self._k[:, :, : self._n], grow)
                self._v = _with_room(self._v[:, :, : self._n], grow)
            self._k[:, :, self._n : self._n + m] = key_states
            self._v[:, :, self._n : self._n + m] = value_states
            self._n += m
            self._views()
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self.n_prefix + self._n

        def batch_select_indices(self, indices) -> None:
            self._k, self._v = self._k[indices], self._v[indices]  # one copy when rows leave the batch
            self._views()

    return SharedPrefixLayer


def _with_room(x, room: int):
    """``x`` (batch, heads, length, dim) copied into a tensor with ``room`` more positions."""
    import torch

    return torch.cat([x, x.new_empty((*x.shape[:2], room, x.shape[-1]))], dim=2)


@cache
def _register_attention() -> None:
    """Make :func:`_shared_prefix_attention` (with SDPA's masks) selectable as ``_ATTENTION``, once."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(_ATTENTION, _shared_prefix_attention)
    AttentionMaskInterface.register(_ATTENTION, sdpa_mask)


def _shared_prefix_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Attention of a batch over its shared prefix and each row's own tokens, as one softmax: the prefix's
    scores come from one product per key/value head over every row's queries (the prefix read once), the
    own tokens' from the rows' own caches; the mask transformers built over prefix + own is split between
    them. Without an active shared-prefix cache (computing the prefix itself) it is plain SDPA."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    cache = _ACTIVE.get("cache")
    if cache is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      **kwargs)
    layer = cache.layers[module.layer_idx]
    b, h, q, d = query.shape
    kvh = key.shape[1]
    g = h // kvh
    pk, pv = layer.prefix_keys[0], layer.prefix_values[0]  # (kvh, P, d)
    n_prefix, n_own = pk.shape[1], key.shape[2]
    qg = query.reshape(b, kvh, g * q, d)  # query head j reads key/value head j // g
    folded = qg.transpose(0, 1).reshape(kvh, b * g * q, d)
    scores_prefix = (folded @ pk.transpose(1, 2)).reshape(kvh, b, g * q, n_prefix).transpose(0, 1)
    scores = torch.cat([scores_prefix, qg @ key.transpose(-1, -2)], dim=-1).float() * (scaling or d**-0.5)
    if attention_mask is None:  # transformers left it out: nothing padded, so only causality within the own tokens
        own = torch.arange(n_own - q, n_own)[:, None] >= torch.arange(n_own)[None, :]
        allowed = torch.cat([torch.ones(q, n_prefix, dtype=torch.bool), own], dim=-1)[None, None]
        allowed = allowed.expand(b, 1, q, n_prefix + n_own)
    elif attention_mask.dtype == torch.bool:
        allowed = attention_mask[..., -(n_prefix + n_own):]
    else:
        allowed = attention_mask[..., -(n_prefix + n_own):] > torch.finfo(attention_mask.dtype).min / 2
    allowed = allowed.unsqueeze(2).expand(b, allowed.shape[1], g, q, n_prefix + n_own).reshape(b, -1, g * q,
                                                                                                n_prefix + n_own)
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1).to(value.dtype)
    w_prefix = weights[..., :n_prefix].transpose(0, 1).reshape(kvh, b * g * q, n_prefix)
    out = (w_prefix @ pv).reshape(kvh, b, g * q, d).transpose(0, 1) + weights[..., n_prefix:] @ value
    return out.reshape(b, h, q, d).transpose(1, 2).contiguous(), None


class _shared_prefix:  # noqa: N801 - used as a context manager
    """Route the model's attention through :func:`_shared_prefix_attention` while ``cache`` decodes."""

    def __init__(self, model, cache) -> None:
        self.model, self.cache = model, cache

    def __enter__(self):
        if self.cache is None:
            return self
        _register_attention()
        self._before = self.model.config._attn_implementation
        self.model.set_attn_implementation(_ATTENTION)
        _ACTIVE["cache"] = self.cache
        return self

    def __exit__(self, *exc) -> None:
        if self.cache is not None:
            _ACTIVE.pop("cache", None)
            self.model.set_attn_implementation(self._before)


def _common_prefix(seqs: list[list[int]]) -> int:
    """Length of the longest token prefix every sequence shares."""
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for s in seqs[1:]:
        a = np.asarray(first[:n])
        b = np.asarray(s[:n])
        diff = np.flatnonzero(a != b)
        n = int(diff[0]) if len(diff) else n
    return n

