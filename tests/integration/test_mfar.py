"""mFAR on the toy SKB with the real MiniLM: field scores, retrieval, training, resume."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grasp.config import MFARConfig, MFARTrainingConfig
from grasp.skb import read_queries
from grasp.skb.documents import get_layout
from grasp.text.mfar import FieldIndex, FieldWeights, MFARRetriever, train

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def index(tmp_path_factory, minilm):
    from grasp.skb import read_skb
    from tests.conftest import write_toy

    d = write_toy(tmp_path_factory.mktemp("toy") / "toy")
    skb = read_skb(d)
    return FieldIndex(skb, get_layout("generic"), minilm, tmp_path_factory.mktemp("mfar"), progress=False), d


def test_field_scores_are_on_comparable_scales(index):
    idx, _ = index
    tokens = [t[0] for t in idx.tokenize(["sodium channel"])]
    lex = idx.lexical_scores(tokens)
    assert lex.shape == (idx.n_fields, idx.node_ids.size) and 0 <= lex.min() and lex.max() == pytest.approx(1.0)
    dense = idx.dense_scores(idx.encoder.encode_queries(["sodium channel"])[0], np.arange(idx.node_ids.size))
    assert np.abs(dense).max() <= 1.0 + 1e-3
    empty_field = [s.name for s in idx.specs].index("definition")
    genes = [idx.row_of[g] for g in (0, 1, 2, 8)]
    assert np.all(dense[empty_field, genes] == 0)  # genes have no definition: no evidence from that field


def test_candidate_pool_is_every_field_top_with_exact_scores(index):
    """The pool is the union of each field's top ``depth`` (BM25 rows it matches, dense rows by cosine over
    the field's non-empty rows) and every pool row's field scores are exact, the dense ones from the stored
    float16 vectors in float32; a brute-force reference over the whole matrix agrees."""
    idx, _ = index
    r = MFARRetriever(idx, depth=3)
    text = "sodium voltage-gated channel"
    q = idx.encoder.encode_queries([text])[0]
    tokens = [t[0] for t in idx.tokenize([text])]
    rows, lex, dense = r.field_scores(q, tokens)


    def strictly_top3(scores: np.ndarray) -> np.ndarray:  # what any top 3 holds, whichever ties it breaks
        return np.flatnonzero(scores > (np.sort(scores)[-4] if scores.size > 3 else -np.inf))

    want: set[int] = set()
    for full in idx.lexical_scores(tokens):
        want |= {int(i) for i in strictly_top3(full) if full[i] > 0}
    for have, m in zip(idx.dense_rows, idx.dense, strict=True):
        if have.size:
            want |= set(have[strictly_top3(np.asarray(m, np.float32) @ q)].tolist())
    assert len(want) >= 6 and want <= set(rows.tolist())
    np.testing.assert_allclose(lex, idx.lexical_scores(tokens)[:, rows].T)
    ref = np.zeros((rows.size, idx.n_fields), np.float32)
    for f, (have, m) in enumerate(zip(idx.dense_rows, idx.dense, strict=True)):
        for j, row in enumerate(rows.tolist()):
            if row in have.tolist():
                ref[j, f] = np.asarray(m[have.tolist().index(row)], np.float32) @ q
    np.testing.assert_allclose(dense, ref, atol=1e-6)
    assert all(m.dtype == np.float16 for m in idx.dense)  # nothing is held in float32


def test_uniform_weights_at_start_and_retrieval(index):
    idx, _ = index
    w = FieldWeights(idx.encoder.dim, idx.n_fields)
    out = w(torch.randn(3, idx.encoder.dim))
    assert torch.allclose(out, torch.full_like(out, 1 / (2 * idx.n_fields)))
    r = MFARRetriever(idx, w).search("sodium voltage-gated channel alpha subunit", k=3)
    assert r.node_ids[0] in (1, 8) and set(r.node_ids.tolist()) <= set(idx.node_ids.tolist())
    assert len(r.trace.field_weights) == 2 * idx.n_fields


def test_training_lowers_the_loss_and_resumes(index, tmp_path):
    idx, d = index
    queries = read_queries(d / "qa" / "queries.jsonl")
    cfg = MFARConfig(train=MFARTrainingConfig(epochs=1, batch_size=4, hard_negative_ranks=(2, 4), patience=5))
    r1 = MFARRetriever(idx)
    state = train(r1, queries, queries, tmp_path / "run", cfg, progress=False)
    assert state["epoch"] == 1 and (tmp_path / "run" / "checkpoint.pt").exists()
    cfg.train.epochs = 3
    r2 = MFARRetriever(idx)
    state = train(r2, queries, queries, tmp_path / "run", cfg, progress=False)  # resumes at epoch 1
    assert [e["epoch"] for e in state["log"]] == [1, 2, 3]
    assert state["log"][-1]["loss"] < state["log"][0]["loss"]
    assert (tmp_path / "run" / "weights.pt").exists()


def test_cli_train_then_eval(tmp_path, capsys):
    from grasp.cli import main
    from tests.conftest import write_toy

    toy = write_toy(tmp_path / "toy")
    base = ["-q", "--cache-dir", str(tmp_path / "c"), "--set", "mfar.train.epochs=2", "--set", "mfar.train.batch_size=2",
            "--set", "mfar.train.train_split=test", "--set", "mfar.train.val_split=test"]
    main([*base, "train", "mfar", "--skb", str(toy)])
    assert "best validation MRR" in capsys.readouterr().out
    main([*base, "eval", "--skb", str(toy), "--method", "mfar", "--output-json", str(tmp_path / "r.json")])
    import json

    assert json.loads((tmp_path / "r.json").read_text())["n"] == 4


def test_cli_train_with_encoder_tuning_records_the_encoder(tmp_path, capsys):
    """`grasp train mfar` with mfar.encoder_tuning=lora: the adapter and weights are recorded, the weights'
    manifest names the tuned encoder, mFAR's dense fields are re-encoded with it (Stage 1's vectors are not
    reused), and evaluation loads the tuned mFAR."""
    import json

    from grasp.artifacts import MFAR_ENCODER, MFAR_WEIGHTS, read_manifest
    from grasp.cli import main
    from grasp.config import load_config
    from grasp.workspace import Workspace
    from tests.conftest import write_toy

    toy = write_toy(tmp_path / "toy")
    sets = ["mfar.train.epochs=1", "mfar.train.batch_size=2", "mfar.train.train_split=test", "mfar.train.val_split=test",
            "mfar.encoder_tuning=lora", "mfar.train.encoder_epochs=1"]
    base = ["-q", "--cache-dir", str(tmp_path / "c")] + [a for s in sets for a in ("--set", s)]
    main([*base, "train", "mfar", "--skb", str(toy)])
    assert "mFAR encoder adapter in" in capsys.readouterr().out
    ws = Workspace.open(toy, load_config(None, [*sets, f"cache_dir={tmp_path / 'c'}"]), progress=False)
    assert ws.artifact(MFAR_ENCODER) is not None
    assert ws.mfar_encoder_id().startswith("lora:") and ws.mfar_encoder_id() != "lora:untrained"
    assert read_manifest(ws.artifact(MFAR_WEIGHTS)).config["mfar.encoder"] == ws.mfar_encoder_id()
    assert list((ws.cache_dir / "embeddings").glob("field-single-*.npy"))  # re-encoded with the tuned encoder
    main([*base, "eval", "--skb", str(toy), "--method", "mfar", "--output-json", str(tmp_path / "r.json")])
    assert json.loads((tmp_path / "r.json").read_text())["n"] == 4


def test_dense_subset_reuses_stage1_vectors(index, tmp_path):
    from grasp.encode.node_vectors import NodeVectors

    full, _ = index
    vectors = NodeVectors(full.skb, full.encoder, get_layout("generic"), tmp_path / "nv", progress=False)
    sub = FieldIndex(full.skb, get_layout("generic"), full.encoder, tmp_path / "mfar", dense_fields=["name", "single"],
                     node_vectors=vectors, progress=False)
    names = [s.name for s in sub.specs]
    assert sub.has_dense == [n in ("name", "single") for n in names]
    for n in ("name", "single"):  # the reused Stage-1 vectors equal the field's own embeddings
        f = names.index(n)
        np.testing.assert_allclose(np.asarray(sub.dense[f], np.float32), np.asarray(full.dense[f], np.float32), atol=2e-3)
    assert not list((tmp_path / "mfar" / "embeddings").glob("field-*.npy"))  # nothing re-embedded
    r = MFARRetriever(sub)
    w = r.weights(torch.randn(2, sub.encoder.dim))
    f = sub.n_fields
    assert torch.all(w[:, f:][:, [not d for d in sub.has_dense]] == 0)
    assert torch.allclose(w.sum(-1), torch.ones(2))
    assert set(r.search("sodium channel", k=3).trace.field_weights) == (
        {f"bm25:{n}" for n in names} | {"dense:name", "dense:single"})


def test_training_lexical_cache_equals_the_full_scores(index):
    """Training reads each query's field BM25 from a sparse cache computed once; at any rows it holds
    exactly what scoring the query over every candidate gives."""
    from grasp.text.mfar.train import _LexicalCache

    idx, _ = index
    texts = ["sodium channel", "glycosaminoglycan biosynthesis on chromosome 2", "zzzz unknown words"]
    cache = _LexicalCache(idx, idx.tokenize(texts))
    rows = np.array([0, 3, 1, idx.node_ids.size - 1, 2, 3])
    for q, text in enumerate(texts):
        full = idx.lexical_scores([t[0] for t in idx.tokenize([text])])
        np.testing.assert_array_equal(cache.at(q, rows), full[:, rows])


def test_a_start_with_built_indexes_renders_no_field(index, monkeypatch):
    """Once the field indexes exist, opening them again renders no candidate's fields."""
    from grasp.text.mfar import fields_index

    idx, _ = index
    calls = []
    monkeypatch.setattr(fields_index._FieldLayout, "document", lambda self, skb, node: calls.append(node) or "")
    again = FieldIndex(idx.skb, get_layout("generic"), idx.encoder, idx.lexical[0].index_dir.parent.parent,
                       progress=False)
    assert calls == [] and [r.tolist() for r in again.dense_rows] == [r.tolist() for r in idx.dense_rows]


def test_a_first_build_renders_each_lexical_field_once(index, tmp_path, monkeypatch):
    """BM25 and the non-empty rows of a field come from one rendering pass; only a dense field that is not
    reused from Stage 1 renders its non-empty rows once more, for the encoder."""
    from collections import Counter

    from grasp.text.mfar import fields_index

    idx, _ = index
    calls: Counter = Counter()
    real = fields_index._FieldLayout.document
    monkeypatch.setattr(fields_index._FieldLayout, "document",
                        lambda self, skb, node: calls.update([self.spec.name]) or real(self, skb, node))
    fresh = FieldIndex(idx.skb, get_layout("generic"), idx.encoder, tmp_path, dense_fields=["definition"],
                       progress=False)
    n = idx.node_ids.size
    names = [s.name for s in fresh.specs]
    definition = fresh.dense_rows[names.index("definition")].size
    assert 0 < definition < n
    # single, the whole document, is the BM25 baseline's index (rendered by the document layout itself)
    assert calls == Counter({name: n + (definition if name == "definition" else 0) for name in names if name != "single"})
    from grasp.text.bm25 import BM25Retriever

    baseline = BM25Retriever(idx.skb, get_layout("generic"), tmp_path, progress=False)
    assert fresh.lexical[names.index("single")].index_dir == baseline.index_dir
    assert [r.tolist() for r in fresh.lexical_scores([t[0] for t in fresh.tokenize(["sodium"])])] == \
        [r.tolist() for r in idx.lexical_scores([t[0] for t in idx.tokenize(["sodium"])])]


def test_encoder_tuning_trains_a_lora_adapter_that_changes_the_dense_scores(index, tmp_path):
    """mFAR's own recipe: the encoder phase writes a LoRA adapter (and resumes from its checkpoint);
    the tuned encoder embeds differently from the base one and mFAR built on it retrieves."""
    from grasp.encode.tuned import TunedEncoder
    from grasp.text.mfar.train import tune_encoder

    idx, d = index
    queries = read_queries(d / "qa" / "queries.jsonl")
    cfg = MFARConfig(encoder_tuning="lora", train=MFARTrainingConfig(encoder_epochs=1, batch_size=4, hard_negative_ranks=(2, 4), encoder_lr=5e-3))
    adapter = tune_encoder(MFARRetriever(idx), queries, tmp_path / "run", "minilm", cfg, progress=False)
    assert (adapter / "adapter_config.json").exists() and (tmp_path / "run" / "encoder-checkpoint.pt").exists()
    assert tune_encoder(MFARRetriever(idx), queries, tmp_path / "run", "minilm", cfg, progress=False) == adapter
    tuned = TunedEncoder.load("minilm", adapter, kind="mfar-encoder", max_length=256, precision="fp32")
    base = TunedEncoder.load("minilm", None, kind="mfar-encoder", max_length=256, precision="fp32")
    text = ["sodium voltage-gated channel"]
    np.testing.assert_allclose(base.encode(text), idx.encoder.encode(text), atol=1e-4)  # base = Stage 1's MiniLM
    assert float(tuned.encode(text)[0] @ base.encode(text)[0]) < 0.9999
    assert tuned.model_id != base.model_id
    sub = FieldIndex(idx.skb, get_layout("generic"), tuned, tmp_path / "tuned", dense_fields=["name", "single"],
                     progress=False)
    ranking = MFARRetriever(sub).search(queries[0].text, k=3)
    assert len(ranking.node_ids) == 3
