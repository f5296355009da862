"""The local planner model run by PyTorch, many requests decoded as one batch.

On CPUs that multiply bfloat16 natively (AVX512-BF16, AMX) a bfloat16 matrix product runs far faster than
float32, and than llama.cpp's generic AVX2 build decodes the Q4_K_M file (measured in docs/benchmarks.md,
bench/planner_throughput.py). This client loads the same GGUF weights into transformers
(dequantized once, then cached as safetensors beside the GGUF), and decodes the requests that
arrive together as one batch:

- the prompt prefix the batch shares (the planner's system prompt: ~2,500 tokens, the same for
  every query) is computed once and kept, so each request pays only for its own user message;
- decoding is constrained by the same llguidance grammar the llama.cpp client uses (one matcher per
  request), greedy at temperature 0, sampled from a per-request seeded generator otherwise;
- a finished request leaves the batch at once, so short plans do not wait on long ones' compute;
- a request decoded alone (a person's one question) drafts the tokens it will probably write next and checks
  them all in one forward pass (:meth:`TorchChatClient._generate_one`): the tokens the grammar forces (braces,
  keys, the rest of a type name once a prefix decides it) and the tokens that follow the last few written ones
  in the prompt (anchor text copied from the question, a plan shape copied from a worked example). A draft
  token is kept only where it is the token greedy decoding picks there, so the reply is greedy decoding's.

Requests come from :meth:`ChatClient.chat` calls on several threads (``Planner.plan_many`` keeps
``concurrency`` of them in flight); one worker thread gathers what is waiting into a batch.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from grasp.errors import ConfigError
from grasp.plan.gguf import converted_dir, load_gguf_as_torch
from grasp.plan.llm import ChatClient, LLMError, guidance_grammar
from grasp.plan.shared_prefix import shared_prefix, shared_prefix_layer_class
from grasp.storage import atomic_file, stable_hash


@dataclass
class _Request:
    messages: list[dict[str, str]]
    json_schema: dict | None
    max_tokens: int
    temperature: float
    seed: int
    done: Future = field(default_factory=Future)


class TorchChatClient(ChatClient):
    """A chat model in PyTorch that decodes the requests arriving together as one batch (see the module
    docstring). ``batch`` requests at most decode at once; ``concurrency`` tells the planner to keep
    that many in flight."""

    engine = "torch"

    def __init__(self, tokenizer, model, *, batch: int = 32, seed: int = 13, model_id: str = "torch",
                 wait_s: float = 0.05, prefix_dir: Path | None = None, draft_tokens: int = 16) -> None:
        """``prefix_dir``: where computed prompt prefixes are kept across processes (keyed by the model and
        the prefix's tokens), so a new process does not recompute the planner's system prompt.
        ``draft_tokens``: the most tokens a request decoded alone drafts and checks per forward pass (0: one
        token per pass, plain greedy decoding)."""
        self.tokenizer, self.model = tokenizer, model
        self.prefix_dir = Path(prefix_dir) if prefix_dir else None
        self.concurrency = batch  # the most requests decoded at once, and so kept in flight by the planner
        self.seed = seed
        self.wait_s = wait_s
        self.draft_tokens = draft_tokens
        self.precision = str(model.dtype)  # what the prefix's keys and values depend on (from_gguf names it)
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
                  model_id: str | None = None, precision: str = "auto", keep_prefixes: bool = True,
                  draft_tokens: int = 16) -> TorchChatClient:
        """The client of a GGUF file (loaded as :func:`load_gguf_as_torch` does), in bfloat16 where the CPU
        multiplies it natively (``precision="auto"``), else float32, or with every linear layer in int8 (dynamic
        quantization of the float32 model: a quarter of bfloat16's bytes read per token); computed prompt prefixes
        are kept on disk beside the converted model unless ``keep_prefixes`` is false."""
        import torch

        from grasp.encode.encoder import quantize_int8, resolve_precision

        try:
            import llguidance  # noqa: F401
        except ImportError:
            raise ConfigError("planner.engine 'torch' needs llguidance: pip install 'llguidance==1.9.1'") from None
        torch.set_num_threads(threads or os.cpu_count() or 1)
        precision = resolve_precision(precision, "cpu")
        tokenizer, model = load_gguf_as_torch(Path(model_path),
                                              dtype=torch.bfloat16 if precision == "bf16" else torch.float32)
        if precision == "int8":
            model = quantize_int8(model)
        client = cls(tokenizer, model, batch=batch, seed=seed, model_id=model_id or f"gguf:{Path(model_path).name}",
                     prefix_dir=converted_dir(Path(model_path)) / "prefixes" if keep_prefixes else None,
                     draft_tokens=draft_tokens)
        client.precision = precision
        return client

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
        key = [self.model_id, self.precision, self.model.config.num_hidden_layers, ids]
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

    def _tokens(self, messages: list[dict[str, str]], *, generation: bool) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=generation, tokenize=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)  # ids, or an encoding

    def _shared_length(self, requests: list[_Request], prompts: list[list[int]]) -> int:
        """How many leading tokens the batch computes once (and keeps): what every prompt shares, no further
        than the end of the system turn (what the next batch or the next lone question will share too; a
        lone question's own words are never kept), and short of every prompt's last token."""
        shared = _common_prefix(prompts)
        first = requests[0].messages
        if first and first[0].get("role") == "system":
            shared = min(shared, _common_prefix([prompts[0], self._tokens(first[:1], generation=False)]))
        return min(shared, min(len(p) for p in prompts) - 1)  # every request keeps a token of its own

    def _generate_one(self, request: _Request, prompt: list[int], shared: int) -> str:
        """Greedy decoding of one request, several tokens per forward pass: after each pass the request drafts
        the tokens the grammar forces next, then the tokens that followed the last written ones where they
        last occurred in the prompt or the reply (:func:`_draft_from_lookup`), and the next pass checks them
        all at once. Each draft token is kept while it is the token greedy decoding picks at its place (the
        first one that is not is replaced by greedy's); the cache drops what was computed past the last
        kept token. The reply is plain greedy decoding's, up to the floating-point sums of a wider pass."""
        import torch
        from transformers import DynamicCache

        matcher = self._matcher(request.json_schema)
        cache = DynamicCache()
        if shared > 0:
            layer = shared_prefix_layer_class()
            room = len(prompt) - shared + request.max_tokens + self.draft_tokens + 2
            cache.layers = [layer(k, v, 1, room) for k, v in self._prefix_cache(prompt[:shared])]
        history = list(prompt)  # what the drafts are looked up in: the prompt, then the reply so far
        out: list[int] = []
        feed, pos = prompt[shared:], shared
        with torch.inference_mode(), shared_prefix(self.model, cache if shared > 0 else None):
            logits = self._forward(feed, pos, cache, keep=1)
            pos += len(feed)
            while True:
                token = self._pick(logits[-1], matcher)
                if self._accept(token, out, history, matcher, request):
                    break
                draft = self._draft(matcher, history, request.max_tokens - len(out))
                logits = self._forward([token, *draft], pos, cache, keep=len(draft) + 1)
                pos += 1
                kept, done = 0, False
                for j, d in enumerate(draft):
                    if self._pick(logits[j], matcher) != d:
                        break
                    kept += 1
                    pos += 1
                    if self._accept(d, out, history, matcher, request):
                        done = True
                        break
                if done:
                    break
                extra = cache.get_seq_length() - pos
                if extra > 0:
                    cache.crop(-extra)
                logits = logits[: kept + 1]
        return self.tokenizer.decode(out, skip_special_tokens=True)

    def _forward(self, tokens: list[int], pos: int, cache, *, keep: int):
        """The model's last ``keep`` logits (float32, one row each) for ``tokens`` placed at ``pos``."""
        import torch

        ids = torch.tensor([tokens])
        positions = torch.arange(pos, pos + len(tokens))[None]
        out = self.model(input_ids=ids, position_ids=positions, cache=cache, use_cache=True, logits_to_keep=keep)
        return out.logits[0].float()

    def _pick(self, logits, matcher) -> int:
        """Greedy's token at one position: the highest logit the grammar allows (in its present state)."""
        row = logits[None].clone()
        self._constrain(row, [matcher])
        return int(row[0].argmax())

    def _accept(self, token: int, out: list[int], history: list[int], matcher, request: _Request) -> bool:
        """Append ``token`` to the reply (and to the grammar's state); whether the reply is finished."""
        if matcher is not None:
            matcher.consume_token(token)
        if token not in self._eos:
            out.append(token)
            history.append(token)
        return (token in self._eos or len(out) >= request.max_tokens
                or (matcher is not None and (matcher.is_stopped() or matcher.is_error())))

    def _draft(self, matcher, history: list[int], room: int) -> list[int]:
        """Tokens to check in the next pass: those the grammar forces, then those a lookup in the prompt and
        the reply suggests after them, cut where the grammar would refuse one."""
        limit = min(self.draft_tokens, room - 1)
        if limit <= 0:
            return []
        forced = list(matcher.compute_ff_tokens()[:limit]) if matcher is not None else []
        draft = forced + _draft_from_lookup(history + forced, limit - len(forced))
        if matcher is not None and len(draft) > len(forced):
            draft = draft[: matcher.validate_tokens(draft)]
        return draft

    def generate(self, requests: list[_Request]) -> list[str]:
        """Decode a batch of requests together; their replies in order."""
        import torch
        from transformers import DynamicCache

        prompts = [self._tokens(r.messages, generation=True) for r in requests]
        n = len(requests)
        shared = self._shared_length(requests, prompts)
        if n == 1 and self.draft_tokens > 0 and requests[0].temperature <= 0:
            return [self._generate_one(requests[0], prompts[0], shared)]
        suffixes = [p[shared:] for p in prompts]
        width = max(len(s) for s in suffixes)

        cache = DynamicCache()
        room = width + max(r.max_tokens for r in requests) + 1
        if shared > 0:
            layer = shared_prefix_layer_class()
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
        with torch.inference_mode(), shared_prefix(self.model, cache if shared > 0 else None):
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


def _draft_from_lookup(history: list[int], limit: int, *, longest: int = 8) -> list[int]:
    """Up to ``limit`` tokens that followed the last ``n`` tokens of ``history`` (n from ``longest`` down to 1)
    where they occurred last before (prompt-lookup drafting: a plan copies its anchors from the question and
    its shape from the worked examples)."""
    if limit <= 0 or len(history) < 2:
        return []
    seq = np.asarray(history)
    for n in range(min(longest, len(seq) - 1), 0, -1):
        tail = seq[-n:]
        # every start i < len - n where seq[i:i+n] == tail, found by comparing shifted views
        hits = np.ones(len(seq) - n, dtype=bool)
        for k in range(n):
            hits &= seq[k : len(seq) - n + k] == tail[k]
        found = np.flatnonzero(hits)
        if len(found):
            start = int(found[-1]) + n
            return [int(t) for t in seq[start : start + limit]]
    return []


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

