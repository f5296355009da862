"""What a long-running service keeps across queries stays bounded: the bi-encoder's document-vector cache (reused
across queries, bounded in bytes, least recently used out) and the pool-BM25 reranker's vocabulary."""

from __future__ import annotations

import numpy as np

from grasp.rerank.base import DocumentVectorCache


def _counting_encoder(dim: int = 4):
    calls: list[list[str]] = []

    def embed(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        return np.array([[len(t), hash(t) % 97, 1.0, 0.0][:dim] for t in texts], dtype=np.float32)
    return embed, calls


def test_vectors_are_reused_and_match_a_fresh_encoding():
    embed, calls = _counting_encoder()
    cache = DocumentVectorCache(embed)
    first = cache(["a", "bb", "a"])
    again = cache(["bb", "ccc"])
    assert calls == [["a", "bb"], ["ccc"]]  # each text encoded once
    np.testing.assert_array_equal(first[0], first[2])
    np.testing.assert_array_equal(again[0], first[1])
    np.testing.assert_array_equal(again, embed(["bb", "ccc"]))


def test_memory_is_bounded_and_the_least_recently_used_go_first():
    embed, calls = _counting_encoder()
    cache = DocumentVectorCache(embed, max_bytes=3 * 16)  # three float32 vectors of 4
    cache(["a", "b", "c"])
    cache(["a"])                 # a is now the most recently used
    cache(["d"])                 # over the bound: b, the least recently used, goes
    assert len(cache) == 3
    calls.clear()
    cache(["a", "c", "d"])
    assert calls == []           # kept
    cache(["b"])
    assert calls == [["b"]]      # evicted, so encoded again
    for i in range(1000):        # a long service life of distinct candidates stays within the bound
        cache([f"text {i}"])
    assert len(cache) == 3


def test_the_pool_bm25_vocabulary_starts_afresh_past_its_bound_with_the_same_scores():
    from grasp.rerank.lexical import LexicalReranker

    pool = ["yaml parser for python", "a json library", "yaml emitter and yaml loader"]
    kept = LexicalReranker()
    reset = LexicalReranker()
    reset.MAX_VOCABULARY = 5
    for i in range(50):  # queries with words nobody used before
        query = f"yaml parser word{i}"
        np.testing.assert_allclose(kept.score(query, pool), reset.score(query, pool))
    assert len(kept._tokenizer.word_to_id) > 50 and len(reset._tokenizer.word_to_id) <= 5 + 10
