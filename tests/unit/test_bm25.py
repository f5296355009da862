"""The chunked BM25 index against bm25s' own index step (the reference): same scores, vocabulary, results."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest

from grasp.config import BM25Config
from grasp.text.bm25 import index_in_chunks, make_tokenizer


def _corpus(n: int = 200, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = ["graph", "graphs", "planning", "planned", "the", "and", "protein", "proteins", "kinase", "binding",
             "naïve", "東京", "retrieval", "retrieving", "of", "epilepsy", "focal", "gene", "genes", "b3galt6"]
    docs = [" ".join(rng.choice(words, size=int(rng.integers(1, 40)))) for _ in range(n)]
    docs[3] = ""          # an empty document
    docs[7] = "the and of"  # only stopwords
    return docs


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
@pytest.mark.parametrize("stemmer", ["english", None])
def test_chunked_index_equals_bm25s(method, stemmer, monkeypatch):
    import grasp.text.bm25

    monkeypatch.setattr(grasp.text.bm25, "_SCORE_SLICE", 97)  # the scores computed over many slices
    corpus = _corpus()
    cfg = BM25Config(method=method, stemmer=stemmer)
    ref_tok, our_tok = make_tokenizer(cfg), make_tokenizer(cfg)
    ref = bm25s.BM25(method=method, k1=cfg.k1, b=cfg.b)
    ref.index(ref_tok.tokenize(corpus, update_vocab=True, return_as="tuple", show_progress=False), show_progress=False)
    ours = bm25s.BM25(method=method, k1=cfg.k1, b=cfg.b)
    index_in_chunks(ours, our_tok, (corpus[i:i + 7] for i in range(0, len(corpus), 7)))
    assert ours.vocab_dict == ref.vocab_dict and ours.scores["num_docs"] == ref.scores["num_docs"] == 200
    for part in ("indptr", "indices"):
        assert np.array_equal(ours.scores[part], ref.scores[part]), part
    np.testing.assert_allclose(ours.scores["data"], ref.scores["data"], rtol=1e-5, atol=1e-6)
    if ref.nonoccurrence_array is not None:
        np.testing.assert_allclose(ours.nonoccurrence_array, ref.nonoccurrence_array, rtol=1e-5)
    queries = ["focal epilepsy gene", "protein kinase binding", "東京 graphs", "planning retrieval of the graph"]
    q_ids = our_tok.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False)
    d_ours, s_ours = ours.retrieve(q_ids, k=10, show_progress=False)
    d_ref, s_ref = ref.retrieve(q_ids, k=10, show_progress=False)
    np.testing.assert_allclose(s_ours, s_ref, rtol=1e-5, atol=1e-6)
    assert (d_ours == d_ref).mean() > 0.95  # ties may order differently; the scores above agree


def test_saved_and_loaded_index_answers_the_same(tmp_path):
    corpus = _corpus(60, seed=1)
    cfg = BM25Config()
    tok = make_tokenizer(cfg)
    model = bm25s.BM25(method=cfg.method, k1=cfg.k1, b=cfg.b)
    index_in_chunks(model, tok, [corpus[:25], corpus[25:]])
    model.save(str(tmp_path / "m"))
    loaded = bm25s.BM25.load(str(tmp_path / "m"), mmap=True)
    q = tok.tokenize(["focal epilepsy gene"], update_vocab=False, return_as="ids", show_progress=False)
    np.testing.assert_allclose(loaded.get_scores(q[0]), model.get_scores(q[0]), rtol=1e-6)
    assert loaded.get_scores(q[0]).max() > 0
