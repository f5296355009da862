"""Stage 3 on the toy SKB with the real MiniLM: zero-shot reranking, LoRA training, resume, final fusion."""

from __future__ import annotations

import numpy as np
import pytest

from grasp import methods
from grasp.config import GraspConfig, RerankerConfig, RerankerTrainingConfig
from grasp.rerank import (
    BiEncoderReranker,
    CrossEncoderReranker,
    RerankedRetriever,
    build_records,
    train_reranker,
)
from grasp.skb import read_queries
from grasp.skb.documents import CandidateSerializer
from grasp.workspace import Workspace

pytestmark = pytest.mark.slow


@pytest.fixture
def ws(toy_dir, tmp_path):
    return Workspace.open(toy_dir, GraspConfig(cache_dir=tmp_path / "cache"), progress=False)


def test_bi_encoder_zero_shot(ws, minilm):
    r = BiEncoderReranker(minilm)
    s = r.score("potassium channel", ["name: KCNQ2\nfull name: potassium voltage-gated channel",
                                      "name: glycosaminoglycan biosynthesis"])
    assert s[0] > s[1]


@pytest.fixture
def zero_shot_over_bm25(ws, minilm):
    """The zero-shot bi-encoder reranking BM25's ranking, fused with it at w 0.5, k 2."""
    return RerankedRetriever(methods.retriever(ws, "bm25"), BiEncoderReranker(minilm), CandidateSerializer(ws.skb, ws.layout),
                             name="grasp-zs", w=0.5, rrf_k=2)


def test_reranked_retriever_fuses_with_upstream(ws, zero_shot_over_bm25):
    rr = zero_shot_over_bm25
    stages = rr.batch_search_stages(read_queries(ws.default_queries_path()), 5)
    run = stages["grasp-zs"]
    assert len(run) == 4
    r = run["0"]
    assert r.node_ids[0] == 0 and stages["reranker"]["0"].trace.reranker == "bi-encoder"
    assert r.trace.weights == {"reranker": 0.5, "bm25": 0.5} and r.trace.rrf_k == 2
    assert "[ON CHROMOSOME]" in rr.serialize(0)


def test_reranking_shows_its_progress_per_query(ws, zero_shot_over_bm25, capsys):
    """An LLM reranker reading serialized candidates takes seconds a query: the rerank loop shows a bar."""
    rr = zero_shot_over_bm25
    queries = read_queries(ws.default_queries_path())
    rr.batch_search_stages(queries, 5, progress=True)
    err = capsys.readouterr().err
    assert "reranker: 100%" in err and f"{len(queries)}/{len(queries)}" in err
    rr.batch_search_stages(queries, 5, progress=False)
    assert "reranker:" not in capsys.readouterr().err


def test_listwise_lora_training_saves_and_resumes(ws, tmp_path):
    queries = read_queries(ws.default_queries_path())
    upstream = methods.run(ws, "bm25", queries)
    # the toy pool is small: allow every non-gold candidate as a negative
    records = build_records(upstream, queries, depth=10, hard_negatives=5)
    assert records and all(r["positives"] and r["negatives"] for r in records)
    rr = RerankedRetriever(methods.retriever(ws, "bm25"), BiEncoderReranker(ws.encoder), CandidateSerializer(ws.skb, ws.layout),
                           name="grasp-zs")
    cfg = RerankerConfig(max_length=64, kind="cross-encoder", train=RerankerTrainingConfig(epochs=1, lr=1e-3, global_batch=2, micro_batch=1, group_size=4, lora_r=4, lora_alpha=8, save_every=1))
    out = tmp_path / "rr"
    state = train_reranker(records, rr.serialize, out, config=cfg, progress=False)
    first = state["step"]
    assert first >= 1 and (out / "adapter" / "grasp_train.json").exists()
    cfg.train.epochs = 2
    state = train_reranker(records, rr.serialize, out, config=cfg, progress=False)  # resumes after step `first`
    assert state["step"] == 2 * first and [e["step"] for e in state["log"]] == list(range(1, 2 * first + 1))
    from grasp.errors import ConfigError

    cfg.train.lr = 5e-4  # other settings than the checkpoint's: refused, not silently mixed
    with pytest.raises(ConfigError, match="another training configuration"):
        train_reranker(records, rr.serialize, out, config=cfg, progress=False)
    cfg.train.lr = 1e-3
    ce = CrossEncoderReranker("minilm", out / "adapter", max_length=64)
    scores = ce.score("potassium channel", [rr.serialize(2), rr.serialize(3)])
    assert scores.shape == (2,)


def test_bundle_export_then_train_elsewhere(toy_dir, tmp_path):
    """`grasp train reranker --export` writes a self-contained bundle; the bundle script trains from it
    without the KB and reports the reranker's own validation metrics."""
    import json
    import subprocess
    import sys

    from grasp.cli import main
    from grasp.errors import FormatError
    from grasp.rerank.records import read_bundle
    from tests.conftest import REPO

    bundle = tmp_path / "b.json.xz"
    main(["-q", "--cache-dir", str(tmp_path / "c"), "--set", "reranker.train.train_split=test", "--set", "reranker.train.val_split=test",
          "--set", "reranker.train.hard_negatives=5", "train", "reranker", "--skb", str(toy_dir), "--pool", "mfar",
          "--export", str(bundle)])
    b = read_bundle(bundle)
    assert b["records"] and b["val_pools"] and set(b["texts"]) >= {n for r in b["records"] for n in r["positives"]}
    assert b["texts"][0].startswith("type: gene") or "B3GALT6" in b["texts"][0]
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "train_reranker_bundle.py"), str(bundle), str(tmp_path / "o"),
                          "--epochs", "1", "--global-batch", "2", "--micro-batch", "1", "--group-size", "4",
                          "--lora-r", "4", "--lora-alpha", "8", "--max-length", "64"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["val"]["n"] == len(b["val_pools"]) and 0 <= summary["val"]["hit@1"] <= 1
    assert (tmp_path / "o" / "adapter" / "adapter_config.json").exists()
    from grasp.artifacts import read_manifest
    from grasp.storage import checksum

    m = read_manifest(tmp_path / "o" / "adapter")  # what the bundle recorded of its SKB and configuration
    assert m.skb["name"] == "toy" and m.data == {"test": 2} and m.config["reranker.model"] == "minilm"
    assert m.sha256 == checksum(tmp_path / "o" / "adapter") and m.context["records"] == len(b["records"])
    (tmp_path / "bad.json.xz").write_bytes(b"nope")
    with pytest.raises(FormatError, match="bad.json.xz: not a readable reranker bundle"):
        read_bundle(tmp_path / "bad.json.xz")


def test_cross_encoder_learns_and_is_validated_while_training(ws, tmp_path):
    """The cross-encoder's head starts at zero (every candidate equal: loss ln G) and its listwise loss
    then falls: the signal reaches the logits (the earlier [CLS] head stayed at ln G). Validation of
    the reranker alone is logged during training, and its scores are what the saved adapter gives."""
    import math

    import numpy as np

    from grasp.errors import FormatError
    from grasp.rerank import load_trained_reranker
    from grasp.rerank.records import validation_pools

    queries = read_queries(ws.default_queries_path())
    upstream = methods.run(ws, "bm25", queries)
    records = build_records(upstream, queries, depth=10, hard_negatives=5)
    serialize = CandidateSerializer(ws.skb, ws.layout)
    cfg = RerankerConfig(kind="cross-encoder", max_length=64, train=RerankerTrainingConfig(epochs=12, lr=1e-3, head_lr=5e-2, global_batch=2, micro_batch=2, group_size=4, lora_r=4, lora_alpha=8, warmup=0.0, eval_every=6))
    pools = validation_pools(upstream, queries, 10)
    state = train_reranker(records, serialize, tmp_path / "ce", config=cfg, progress=False, val_pools=pools)
    losses = [e["loss"] for e in state["log"]]
    # zero head: every candidate ties, so the first loss is the mean ln(group size) (groups of 4, or 3 where a
    # query has only two negatives in the toy pool)
    assert math.log(3) - 1e-4 <= losses[0] <= math.log(4) + 1e-4
    assert np.mean(losses[-4:]) < losses[0] - 0.3
    assert [v["step"] for v in state["val"]] == [6, 12, 18, 24] and all(v["n"] == len(pools) for v in state["val"])
    ce = load_trained_reranker("minilm", tmp_path / "ce" / "adapter")
    assert isinstance(ce, CrossEncoderReranker)
    from grasp.rerank.train import pool_metrics

    texts = serialize.__call__
    assert pool_metrics(ce.score, pools, texts)["mrr"] == pytest.approx(state["val"][-1]["mrr"], abs=1e-6)
    (tmp_path / "ce" / "adapter" / "head.pt").unlink()  # an adapter of the earlier [CLS]-head cross-encoder
    with pytest.raises(FormatError, match="head.pt"):
        load_trained_reranker("minilm", tmp_path / "ce" / "adapter")


def test_bi_encoder_kind_starts_from_the_zero_shot_ranker(ws, tmp_path):
    """The LoRA-tuned bi-encoder begins exactly where the zero-shot bi-encoder is (its scores are
    the same cosines / temperature) and its adapter loads back as the right kind."""
    import numpy as np

    from grasp.rerank import TunedBiEncoderReranker, load_trained_reranker

    queries = read_queries(ws.default_queries_path())
    records = build_records(methods.run(ws, "bm25", queries), queries, depth=10, hard_negatives=5)
    rr = RerankedRetriever(methods.retriever(ws, "bm25"), BiEncoderReranker(ws.encoder), CandidateSerializer(ws.skb, ws.layout),
                           name="grasp-zs")
    docs = [rr.serialize(n) for n in (1, 2, 3)]
    zero = BiEncoderReranker(ws.encoder).score("sodium channel", docs)
    fresh = TunedBiEncoderReranker("minilm", max_length=256).score("sodium channel", docs)
    np.testing.assert_allclose(fresh * 0.05, zero, atol=2e-3)
    cfg = RerankerConfig(max_length=64, kind="bi-encoder", train=RerankerTrainingConfig(epochs=1, lr=1e-3, global_batch=2, micro_batch=2, group_size=4, lora_r=4, lora_alpha=8))
    state = train_reranker(records, rr.serialize, tmp_path / "bi", config=cfg, progress=False)
    assert state["step"] >= 1
    loaded = load_trained_reranker("minilm", tmp_path / "bi" / "adapter", max_length=512)
    assert isinstance(loaded, TunedBiEncoderReranker) and loaded.score("sodium", docs).shape == (3,)
    assert loaded.max_length == 64  # the length it was trained at wins over the caller's fallback


def test_stored_candidate_vectors_score_as_on_the_fly_encoding(ws, tmp_path):
    """A trained bi-encoder's candidate vectors, stored once, give the scores (and so the rankings) that
    serializing and encoding each pool per query gives; a retrained adapter gets a store of its own."""
    import numpy as np

    from grasp.rerank import TunedBiEncoderReranker
    from grasp.rerank.vectors import CandidateVectors

    queries = read_queries(ws.default_queries_path())
    serializer = CandidateSerializer(ws.skb, ws.layout)
    records = build_records(methods.run(ws, "bm25", queries), queries, depth=10, hard_negatives=5)
    cfg = RerankerConfig(max_length=64, kind="bi-encoder", train=RerankerTrainingConfig(epochs=1, lr=1e-3, global_batch=2, micro_batch=2, group_size=4, lora_r=4, lora_alpha=8))
    train_reranker(records, serializer, tmp_path / "bi", config=cfg, progress=False)
    reranker = TunedBiEncoderReranker("minilm", tmp_path / "bi" / "adapter", max_length=64)
    vectors = CandidateVectors(tmp_path / "vec", serializer, reranker.document_encoder, progress=False)
    live = RerankedRetriever(methods.retriever(ws, "bm25"), reranker, serializer, name="grasp", depth=10)
    stored = RerankedRetriever(methods.retriever(ws, "bm25"), reranker, serializer, name="grasp", depth=10, vectors=vectors)
    assert not stored.uses_stored_vectors  # not built yet: encoded per query, as before
    stored.prepare()  # what `grasp index` does
    assert stored.uses_stored_vectors and vectors.matrix().shape == (ws.skb.candidate_ids.size, 384)
    up = methods.run(ws, "bm25", queries, 10)
    for q in queries:
        a, b = live.rerank(q, up[q.qid]), stored.rerank(q, up[q.qid])
        assert a.node_ids.tolist() == b.node_ids.tolist()
        np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-4)
    # the store is keyed by the adapter's digest: other weights never read these vectors
    base = TunedBiEncoderReranker("minilm", max_length=64)
    assert not CandidateVectors(tmp_path / "vec", serializer, base.document_encoder, progress=False).built
    with pytest.raises(ValueError, match="not candidate nodes"):
        vectors.of(np.array([int(n) for n in range(ws.skb.num_nodes) if not ws.skb.candidate_mask[n]][:1]))


def test_hybrid_reads_the_stored_vectors_of_its_bi_encoder_part(ws, minilm, tmp_path):
    """The hybrid's bi-encoder part scores from the stored candidate vectors once built (the store the zero-shot
    bi-encoder alone uses), BM25 still from the serialized pool: same scores as encoding each pool."""
    from grasp.config import BM25Config, RerankerConfig
    from grasp.rerank.build import build_reranked, build_reranker
    from grasp.rerank.retriever import RerankFusionSetting

    queries = read_queries(ws.default_queries_path())
    serializer = CandidateSerializer(ws.skb, ws.layout)
    hybrid = build_reranker(RerankerConfig(zero_shot="hybrid"), minilm, None, BM25Config())
    assert hybrid.vector_part is hybrid.rerankers[0] and hybrid.rerankers[1].vector_part is None
    live = RerankedRetriever(methods.retriever(ws, "bm25"), hybrid, serializer, name="grasp-zs", depth=10)
    stored = build_reranked(methods.retriever(ws, "bm25"), hybrid, serializer, name="grasp-zs", depth=10,
                            fusion=RerankFusionSetting(w=0.5, rrf_k=2), vectors_dir=tmp_path / "vec", progress=False)
    assert not stored.uses_stored_vectors
    stored.prepare()
    assert stored.uses_stored_vectors
    alone = build_reranked(methods.retriever(ws, "bm25"), BiEncoderReranker(minilm), serializer, name="grasp-zs", depth=10,
                           fusion=RerankFusionSetting(w=0.5, rrf_k=2), vectors_dir=tmp_path / "vec", progress=False)
    assert alone.uses_stored_vectors  # one store for the bi-encoder alone and inside the hybrid
    up = methods.run(ws, "bm25", queries, 10)
    for q in queries:
        a, b = live.rerank(q, up[q.qid]), stored.rerank(q, up[q.qid])
        assert b.trace.stored_vectors and not a.trace.stored_vectors
        assert a.node_ids.tolist() == b.node_ids.tolist()
        np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-4)
    with pytest.raises(ValueError, match="bi-encoder part"):
        RerankedRetriever(methods.retriever(ws, "bm25"), hybrid.rerankers[1], serializer, name="grasp-zs",
                          vectors=stored.vectors)


def test_lexical_zero_shot_reranker_is_bm25_over_the_pool():
    """BM25 with document frequencies counted over the pool: values a hand computation gives."""
    import math

    from grasp.config import BM25Config
    from grasp.rerank.lexical import LexicalReranker

    r = LexicalReranker(BM25Config(stopwords=None, stemmer=None))
    s = r.score("sodium channel", ["sodium channel", "sodium", "potassium"])
    n, k1, b, avg = 3, 1.2, 0.75, 4 / 3
    idf_sodium, idf_channel = math.log1p((n - 2 + 0.5) / 2.5), math.log1p((n - 1 + 0.5) / 1.5)
    tf = lambda length: 2.2 / (1 + k1 * (1 - b + b * length / avg))  # noqa: E731
    assert s[0] == pytest.approx((idf_sodium + idf_channel) * tf(2))
    assert s[1] == pytest.approx(idf_sodium * tf(1)) and s[2] == 0.0


def test_hybrid_zero_shot_reranker_adds_standardised_scores(minilm):
    """The hybrid: each reranker's scores standardised over the pool and added; a pool whose scores all tie adds
    nothing for that reranker; what build_reranker makes for reranker.zero_shot=hybrid."""
    from grasp.config import BM25Config, RerankerConfig
    from grasp.rerank.build import build_reranker
    from grasp.rerank.hybrid import HybridReranker, standardise
    from grasp.rerank.lexical import LexicalReranker

    docs = ["voltage-gated sodium channel subunit", "sodium", "kinase of the cell cycle", "potassium transporter"]
    bi, lexical = BiEncoderReranker(minilm), LexicalReranker(BM25Config(stopwords=None, stemmer=None))
    hybrid = HybridReranker([bi, lexical])
    s = hybrid.score("sodium channel", docs)
    expected = standardise(bi.score("sodium channel", docs)) + standardise(lexical.score("sodium channel", docs))
    np.testing.assert_allclose(s, expected, rtol=1e-6)
    assert np.argmax(s) == 0 and s.sum() == pytest.approx(0.0, abs=1e-9) and hybrid.pool_dependent
    assert standardise(np.array([2.0, 2.0])).tolist() == [0.0, 0.0]
    assert standardise(np.array([1.0, 3.0])).tolist() == [-1.0, 1.0]
    built = build_reranker(RerankerConfig(zero_shot="hybrid"), minilm, None, BM25Config())
    assert isinstance(built, HybridReranker) and [r.name for r in built.rerankers] == ["bi-encoder", "bm25"]
    with pytest.raises(ValueError, match="two or more"):
        HybridReranker([bi])
