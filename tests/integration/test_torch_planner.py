"""The planner's PyTorch engine (grasp.plan.torch_llm): requests decoded together in one batch, over a
shared prompt prefix, give exactly what each gives decoded alone; decoding obeys the JSON schema.

A tiny Qwen2 model with random weights and a byte-level BPE tokenizer (tests.tiny_llm) stand in for the real
planner (the same code path; the real model is exercised in tests/external/test_gguf_models.py)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("llguidance")

from grasp.plan.torch_llm import TorchChatClient, _Request  # noqa: E402
from tests.tiny_llm import QUERIES, SCHEMA, SYSTEM, tiny_chat_model  # noqa: E402


@pytest.fixture(scope="module")
def client():
    tokenizer, model = tiny_chat_model()
    return TorchChatClient(tokenizer, model, batch=8, model_id="tiny")


def request(query: str, *, schema=SCHEMA, temperature: float = 0.0, seed: int = 13, max_tokens: int = 160):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": query}]
    return _Request(messages, schema, max_tokens, temperature, seed)


def test_batched_equals_alone_and_obeys_the_schema(client):
    alone = [client.generate([request(q)])[0] for q in QUERIES]
    together = client.generate([request(q) for q in QUERIES])
    assert together == alone
    for text in together:
        plan = json.loads(text)  # the grammar admits only the schema's objects
        assert set(plan) == {"label", "risk", "hops"}
        assert plan["label"] in ("gene", "disease", "pathway") and plan["risk"] in ("weak", "normal")
        assert isinstance(plan["hops"], bool)


def test_the_shared_prefix_is_kept_and_reused(client):
    first = client.generate([request(q) for q in QUERIES[:2]])
    kept = client._prefix
    assert kept is not None and len(kept[0]) > 20  # the system turn and the user turn's opening
    again = client.generate([request(q) for q in QUERIES[:2]])
    assert again == first and client._prefix is kept


def test_a_prefix_kept_on_disk_serves_the_next_process(client, tmp_path):
    """With ``prefix_dir`` the computed prompt prefix is written once and read by a later client (a new
    process) instead of being recomputed; a damaged file is recomputed and rewritten."""
    first = TorchChatClient(client.tokenizer, client.model, batch=4, model_id="tiny", prefix_dir=tmp_path)
    want = first.generate([request(q) for q in QUERIES])
    stored = list(tmp_path.glob("prefix-*.pt"))
    assert len(stored) == 1
    second = TorchChatClient(client.tokenizer, client.model, batch=4, model_id="tiny", prefix_dir=tmp_path)
    computed = []
    second._store_prefix = lambda ids, layers: computed.append(ids)  # called only after computing a prefix
    assert second.generate([request(q) for q in QUERIES]) == want
    assert computed == []
    prefix_len = len(second._prefix[0])
    assert second._stored_prefix(list(second._prefix[0]))[0][0].shape[2] == prefix_len
    stored[0].write_bytes(b"not a tensor file")
    third = TorchChatClient(client.tokenizer, client.model, batch=4, model_id="tiny", prefix_dir=tmp_path)
    assert third.generate([request(q) for q in QUERIES]) == want
    assert third._stored_prefix(list(third._prefix[0])) is not None  # rewritten


def test_unconstrained_and_sampled_requests_in_one_batch(client):
    free = request(QUERIES[0], schema=None, max_tokens=12)
    sampled = request(QUERIES[1], temperature=0.9, seed=7)
    mixed = client.generate([free, sampled, request(QUERIES[2])])
    assert mixed[0] == client.generate([request(QUERIES[0], schema=None, max_tokens=12)])[0]
    assert len(client.tokenizer(mixed[0])["input_ids"]) <= 12
    assert mixed[1] == client.generate([request(QUERIES[1], temperature=0.9, seed=7)])[0]  # the seed decides
    json.loads(mixed[1])


def test_concurrent_chat_calls_share_batches(client):
    messages = [[{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}] for q in QUERIES]
    with ThreadPoolExecutor(max_workers=3) as pool:
        replies = list(pool.map(lambda m: client.chat(m, json_schema=SCHEMA, max_tokens=160), messages))
    assert replies == [client.generate([request(q)])[0] for q in QUERIES]


def test_decoding_equals_transformers_own_greedy_generation(client):
    """The shared-prefix cache and attention, the padding and the batch give the tokens that transformers'
    own greedy ``generate`` gives for each request alone (no grammar)."""
    replies = client.generate([request(q, schema=None, max_tokens=16) for q in QUERIES])
    for q, reply in zip(QUERIES, replies, strict=True):
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}]
        ids = client.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                   return_dict=True)["input_ids"]
        with torch.inference_mode():
            out = client.model.generate(ids, max_new_tokens=16, do_sample=False, eos_token_id=sorted(client._eos),
                                        pad_token_id=client.tokenizer.pad_token_id)
        assert reply == client.tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


def plain_greedy(client):
    """The same model and tokenizer decoding one token per forward pass (no drafts)."""
    return TorchChatClient(client.tokenizer, client.model, batch=1, model_id="tiny", draft_tokens=0)


@pytest.mark.parametrize("schema", [SCHEMA, None], ids=["grammar", "free"])
def test_drafted_decoding_of_one_request_equals_plain_greedy(client, schema):
    """A request decoded alone checks drafted tokens (the grammar's forced ones, then prompt lookups) several per
    pass; the reply is the one plain greedy decoding writes, in fewer forward passes."""
    plain = plain_greedy(client)
    passes = []
    forward = client._forward
    client._forward = lambda tokens, pos, cache, keep: passes.append(len(tokens)) or forward(tokens, pos, cache,
                                                                                            keep=keep)
    try:
        for q in QUERIES:
            want = plain.generate([request(q, schema=schema, max_tokens=40)])[0]
            passes.clear()
            got = client.generate([request(q, schema=schema, max_tokens=40)])[0]
            assert got == want
            written = len(client.tokenizer(got)["input_ids"])
            if schema is not None:  # the grammar forces most of a small JSON object: far fewer passes than tokens
                assert len(passes) - 1 < written / 2, (passes, written)
    finally:
        client._forward = forward


def test_lookup_drafts_continue_the_last_occurrence():
    from grasp.plan.torch_llm import _draft_from_lookup

    history = [5, 6, 7, 8, 9, 1, 2, 5, 6, 7, 3, 4, 5, 6]
    assert _draft_from_lookup(history, 3) == [7, 3, 4]  # "5 6" last seen before at index 7, then 7 3 4
    assert _draft_from_lookup(history + [7], 2) == [3, 4]  # the longest tail that recurs ("5 6 7") decides
    assert _draft_from_lookup([1, 2, 3], 4) == []  # 3 never occurred before
    assert _draft_from_lookup(history, 0) == []


def test_only_the_system_turn_is_kept_as_prefix(client):
    """A lone question's prefix is the system turn every later question shares, not its own prompt."""
    fresh = TorchChatClient(client.tokenizer, client.model, batch=1, model_id="tiny")
    fresh.generate([request(QUERIES[0])])
    kept = fresh._prefix[0]
    system = fresh._tokens([{"role": "system", "content": SYSTEM}], generation=False)
    assert list(kept) == system[: len(kept)] and len(kept) >= len(system) - 1
    fresh.generate([request(QUERIES[1])])
    assert fresh._prefix[0] == kept
