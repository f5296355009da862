"""Stage 3 on the toy SKB with the real MiniLM: zero-shot reranking, LoRA training, resume, final fusion."""

from __future__ import annotations

import pytest

from grasp.config import GraspConfig
from grasp.pipeline import Workspace
from grasp.rerank import (
    BiEncoderReranker,
    CrossEncoderReranker,
    RerankedRetriever,
    RerankTrainConfig,
    build_records,
    train_reranker,
)
from grasp.skb import read_queries

pytestmark = pytest.mark.slow


@pytest.fixture
def ws(toy_dir, tmp_path):
    return Workspace.open(toy_dir, GraspConfig(cache_dir=tmp_path / "cache"), progress=False)


def test_bi_encoder_zero_shot(ws, minilm):
    r = BiEncoderReranker(minilm)
    s = r.score("potassium channel", ["name: KCNQ2\nfull name: potassium voltage-gated channel",
                                      "name: glycosaminoglycan biosynthesis"])
    assert s[0] > s[1]


def test_reranked_retriever_fuses_with_upstream(ws, minilm):
    rr = RerankedRetriever(ws.retriever("bm25"), BiEncoderReranker(minilm), ws.skb, ws.layout, w=0.5, k=2)
    run = rr.batch_search(read_queries(ws.default_queries_path()), 5)
    assert len(run) == 4
    r = run["0"]
    assert r.node_ids[0] == 0 and r.meta["reranker"] == "bi-encoder"
    assert "[ON CHROMOSOME]" in rr.serialize(0)


def test_listwise_lora_training_saves_and_resumes(ws, tmp_path):
    queries = read_queries(ws.default_queries_path())
    upstream = ws.run("bm25", queries)
    # the toy pool is small: allow every non-gold candidate as a negative
    records = build_records(upstream, queries, depth=10, hard_negatives=5)
    assert records and all(r["positives"] and r["negatives"] for r in records)
    rr = RerankedRetriever(ws.retriever("bm25"), BiEncoderReranker(ws.encoder), ws.skb, ws.layout)
    cfg = RerankTrainConfig(epochs=1, lr=1e-3, global_batch=2, micro_batch=1, group_size=4, lora_r=4, lora_alpha=8,
                            save_every=1, max_length=64)
    out = tmp_path / "rr"
    state = train_reranker(records, rr.serialize, out, config=cfg, progress=False)
    first = state["step"]
    assert first >= 1 and (out / "adapter" / "grasp_train.json").exists()
    cfg.epochs = 2
    state = train_reranker(records, rr.serialize, out, config=cfg, progress=False)  # resumes after step `first`
    assert state["step"] == 2 * first and [e["step"] for e in state["log"]] == list(range(1, 2 * first + 1))
    ce = CrossEncoderReranker("minilm", out / "adapter", max_length=64)
    scores = ce.score("potassium channel", [rr.serialize(2), rr.serialize(3)])
    assert scores.shape == (2,)
