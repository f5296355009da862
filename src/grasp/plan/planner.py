"""The planner: query -> validated plan, through an LLM, with a disk cache and retries.

An invalid reply is sent back to the model with the validator's reason, up to ``retries``
times; a plan that still fails degrades to ``no_trade``. Every outcome is cached by
(model, prompt hash, query, grammar), so evaluation and CI replay plans without the LLM.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from tqdm.auto import tqdm

from grasp.errors import GraspError
from grasp.plan.bank import ExampleRetriever
from grasp.plan.cache import PlanCache, plan_key
from grasp.plan.grammar import plan_json_schema
from grasp.plan.llm import ChatClient, LLMError
from grasp.plan.nested import flat_to_nested, nested_json_schema, nested_to_flat
from grasp.plan.prompt import PromptBuilder
from grasp.plan.schema_link import SchemaLinker
from grasp.plan.validate import PlanCheck, PlanRejected, check_plan, parse_plan_text
from grasp.progress import announce
from grasp.results import Query
from grasp.skb.graph import SKB
from grasp.skb.schema import Schema
from grasp.storage import stable_hash


class PlanNotCached(GraspError):
    """Cache-only planning met a query with no cached plan."""


@dataclass
class PlanOutcome:
    query: str
    check: PlanCheck
    raw: str
    cached: bool
    seconds: float
    attempts: int
    error: str | None = None
    meta: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"query": self.query, "plan": self.check.plan.dump(), "status": self.check.status,
                "repairs": self.check.repairs, "reason": self.check.reason, "raw": self.raw,
                "cached": self.cached, "seconds": round(self.seconds, 3), "attempts": self.attempts,
                "error": self.error}


class Planner:
    def __init__(self, skb: SKB, client: ChatClient | Callable[[], ChatClient] | None, cache: PlanCache, *,
                 builder: PromptBuilder | None = None, grammar: bool = True, retries: int = 1, max_tokens: int = 400,
                 model_id: str | None = None, on_miss: str = "error", samples: int = 1, temperature: float = 0.7,
                 seed: int = 13, nearest: ExampleRetriever | None = None, linker: SchemaLinker | None = None) -> None:
        """``client`` may be a factory: it is called on the first cache miss only, so replaying
        cached plans never loads a model. Without a client, a query with no cached plan raises
        :class:`PlanNotCached` (``on_miss="error"``) or degrades to no_trade (``"no_trade"``). ``nearest``: a bank
        of verified plans whose questions nearest each query are shown as its worked examples; ``linker``: each
        query is shown the part of the schema linked to it, and its grammar is built from that part."""
        self.examples_source = "given"  # where the prompt's static examples came from (set by build_planner)
        if on_miss not in ("error", "no_trade"):
            raise ValueError(f"on_miss must be 'error' or 'no_trade', not {on_miss!r}")
        if samples < 1:
            raise ValueError(f"samples must be at least 1, not {samples}")
        self.on_miss = on_miss
        self.samples, self.temperature, self.seed = samples, temperature, seed  # execution-guided planning
        self.skb = skb
        self._client = client
        self._client_lock = threading.Lock()  # the factory runs once, whichever thread plans first
        self.cache = cache
        self.builder = builder or PromptBuilder(skb)
        self.nearest = nearest
        self.linker = linker if linker is not None and linker.active else None
        # what a plan depends on besides the query: the shared prompt, the bank that picks its examples, the linking
        tags = [t.tag for t in (nearest, self.linker) if t is not None]
        self.prompt_hash = stable_hash([self.builder.hash, *tags]) if tags else self.builder.hash
        self.grammar = grammar
        self.retries = retries
        self.max_tokens = max_tokens
        self.model_id = model_id or (client.model_id if isinstance(client, ChatClient) else "cache-only")
        self.nested = self.builder.plan_format == "nested"
        self.json_schema = self.grammar_of(skb.schema)

    def grammar_of(self, schema: Schema) -> dict:
        """The JSON schema a reply is decoded under, for the (whole or linked) schema shown."""
        schema_of = nested_json_schema if self.nested else plan_json_schema
        return schema_of(schema, retrieval_mode=self.builder.retrieval_mode)

    def _prompt(self, query: str) -> tuple[list[dict], dict | None]:
        """The messages for one query (its nearest examples, its linked schema) and the grammar to decode under."""
        examples = self.nearest.examples(query) if self.nearest is not None else None
        linked = self.linker.link(query) if self.linker is not None else None
        grammar = (self.grammar_of(linked) if linked is not None else self.json_schema) if self.grammar else None
        return self.builder.messages(query, examples, linked), grammar

    @property
    def client(self) -> ChatClient:
        if self._client is not None and not isinstance(self._client, ChatClient):
            with self._client_lock:
                if not isinstance(self._client, ChatClient):
                    self._client = self._client()
        return self._client  # type: ignore[return-value]

    def check(self, raw: str) -> PlanCheck:
        """The reply validated (and repaired) as a flat plan; a nested reply is flattened first."""
        if self.nested:
            try:
                return check_plan(nested_to_flat(parse_plan_text(raw)), self.skb.schema)
            except PlanRejected as e:
                return _failed(self.skb, str(e))
        return check_plan(raw, self.skb.schema)

    def key(self, query: str, sample: int = 0, feedback: str | None = None) -> str:
        return plan_key(self.model_id, self.prompt_hash, query, self.grammar, sample, feedback)

    def cached(self, query: str, sample: int = 0, feedback: str | None = None) -> PlanOutcome | None:
        """The cached outcome for this query (``seconds``: the lookup's own time), or None."""
        t0 = time.perf_counter()
        hit = self.cache.get(self.key(query, sample, feedback))
        if hit is None:
            return None
        check = self.check(hit["raw"]) if hit.get("raw") else _failed(self.skb, hit.get("error"))
        return PlanOutcome(query, check, hit.get("raw", ""), True, time.perf_counter() - t0, hit.get("attempts", 1),
                           hit.get("error"))

    def plan(self, query: str, sample: int = 0) -> PlanOutcome:
        """The query's plan: ``sample`` 0 is the greedy one (temperature 0); sample i > 0 one more plan drawn
        at ``temperature`` with seed ``seed + i`` (execution-guided planning). Each is cached on its own."""
        hit = self.cached(query, sample)
        if hit is not None:
            return hit
        key = self.key(query, sample)
        if self._client is None and self.on_miss == "no_trade":
            return PlanOutcome(query, _failed(self.skb, "no cached plan"), "", False, 0.0, 0, "not planned")
        if self._client is None:
            raise PlanNotCached(f"no cached plan for query {query!r} (model {self.model_id}); "
                                "plan it first with `grasp plans build` or configure an LLM (planner.kind)")
        announce("planning", "asking the planner for a plan (an LLM call: seconds on a CPU)")
        messages, grammar = self._prompt(query)
        return self._converse(key, query, messages, grammar, sample=sample)

    def replan(self, first: PlanOutcome, feedback: str) -> PlanOutcome:
        """The query planned once more after its first plan was executed: the conversation so far (the prompt, the
        first plan) and ``feedback`` (what the execution found) go to the LLM, which answers with a corrected plan.
        Cached under the query and the feedback; a planner without an LLM returns the cached one, or no_trade."""
        query = first.query
        hit = self.cached(query, feedback=feedback)
        if hit is not None:
            return hit
        if self._client is None:
            return PlanOutcome(query, _failed(self.skb, "no cached re-plan"), "", False, 0.0, 0, "not planned")
        announce("planning", "asking the planner again, with what its plan's execution found (an LLM call)")
        messages, grammar = self._prompt(query)
        messages = [*messages, {"role": "assistant", "content": first.raw},
                    {"role": "user", "content": f"{feedback} Reply with a corrected JSON plan only."}]
        return self._converse(self.key(query, feedback=feedback), query, messages, grammar, feedback=feedback)

    def _converse(self, key: str, query: str, messages: list[dict], schema: dict | None, *, sample: int = 0,
                  feedback: str | None = None) -> PlanOutcome:
        """Ask the LLM (decoding under ``schema``), re-asking with the validator's reason up to ``retries`` times;
        cache the outcome."""
        t0 = time.perf_counter()
        raw, error, attempts = "", None, 0
        check = _failed(self.skb, "no reply")
        for attempts in range(1, self.retries + 2):  # noqa: B007 - the count is reported
            try:
                sampling = {"temperature": self.temperature, "seed": self.seed + sample} if sample else {}
                raw = self.client.chat(messages, json_schema=schema, max_tokens=self.max_tokens, **sampling)
            except LLMError as e:
                error = str(e)
                check = _failed(self.skb, f"LLM error: {e}")
                break
            check = self.check(raw)
            if check.status != "rejected":
                break
            messages = [*messages, {"role": "assistant", "content": raw},
                        {"role": "user", "content": f"That plan is invalid: {check.reason}. "
                                                    "Reply with a corrected JSON plan only."}]
        seconds = time.perf_counter() - t0
        self._put(key, query, raw if error is None else "", attempts=attempts, error=error, seconds=seconds,
                  **({"sample": sample} if sample else {}), **({"feedback": feedback} if feedback else {}),
                  **_engine_of(self.client))
        return PlanOutcome(query, check, raw, False, seconds, attempts, error)

    def _put(self, key: str, query: str, raw: str, *, attempts: int, error: str | None, seconds: float, **extra) -> None:
        """Cache one plan record (the LLM's reply, or a plan imported from elsewhere)."""
        self.cache.put({"key": key, "model": self.model_id, "prompt_hash": self.prompt_hash, "query": query,
                        "grammar": self.grammar, "raw": raw, "attempts": attempts, "error": error,
                        "seconds": round(seconds, 3), **extra})

    def adopt(self, plan: dict) -> tuple[str, PlanCheck]:
        """A plan made elsewhere (flat or nested: by hand, by another planner, by a generator) written in this
        planner's format, and its check."""
        import json

        try:
            nested = isinstance(plan.get("target"), dict) and "label" in plan["target"] and "anchors" not in plan
            flat = nested_to_flat(plan) if nested else plan
            raw = json.dumps(flat_to_nested(flat) if self.nested else flat, ensure_ascii=False)
        except (PlanRejected, KeyError, TypeError, AttributeError) as e:
            return "", _failed(self.skb, f"not a plan ({type(e).__name__}: {e})")
        return raw, self.check(raw)

    def store(self, query: str, raw: str, *, source: str) -> None:
        """Cache ``raw`` (from :meth:`adopt`) as this planner's greedy plan for ``query``, so that replaying the
        cache (``planner.kind=cache``) uses it as it would a plan of its own; the same plan again appends nothing."""
        key = self.key(query)
        if (self.cache.get(key) or {}).get("raw") != raw:
            self._put(key, query, raw, attempts=0, error=None, seconds=0.0, imported=source)

    def plan_many(self, queries: Sequence[Query], *, workers: int | None = None,
                  progress: bool = True) -> dict[str, PlanOutcome]:
        """Plan every query (each of its ``samples`` plans), ``workers`` at a time (default: as many as the LLM
        client serves at once, e.g. the local model's slots); cached plans cost nothing and load no model.
        Resumable, since each result is cached as soon as it exists. Returns the greedy plans."""
        out: dict[str, PlanOutcome] = {}  # the greedy plans: cached ones as found, new ones with the LLM's time
        todo = []
        for q in queries:
            for i in range(self.samples):
                hit = self.cached(q.text, i)
                if hit is None:
                    todo.append((q, i))
                elif i == 0:
                    out[q.qid] = hit
        if todo:
            if workers is None:
                workers = self.client.concurrency if self._client is not None else 1
            if self._client is not None:  # without one, the missing plans degrade (or raise) at once
                announce("planning", f"asking the planner for {len(todo)} plan(s) (LLM calls: seconds each on a CPU)")
            bar = tqdm(total=len(todo), desc="planning", unit="plan", disable=not progress)
            with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
                jobs = pool.map(lambda job: self.plan(job[0].text, job[1]), todo)
                for (q, i), outcome in zip(todo, jobs, strict=True):
                    if i == 0:
                        out[q.qid] = outcome
                    bar.update(1)
                    bar.set_postfix(status=outcome.check.status, cached=outcome.cached)
            bar.close()
        return {q.qid: out[q.qid] for q in queries}


def _engine_of(client: ChatClient) -> dict[str, str]:
    """What ran the model, for the plan's record (nothing when the client does not say)."""
    engine = getattr(client, "engine", "")
    return {"engine": engine} if engine else {}


def _failed(skb: SKB, reason: str | None) -> PlanCheck:
    from grasp.plan.model import Plan

    return PlanCheck(Plan.no_trade(list(skb.schema.candidate_types)), "rejected", [], reason or "no plan")
