"""The zero-shot default: BM25 of the query against each serialized candidate (type, fields and 1-hop
neighbours), with document frequencies counted over the pool itself.

Why lexical: Stage 2 already holds MiniLM's view of every candidate (mFAR's dense fields), so the
zero-shot bi-encoder over the same encoder adds nothing on validation (README); exact terms of the
query matched in a candidate's neighbours (a dependency's name, a gene symbol) are evidence neither
mFAR's per-field BM25 nor the graph branch scores. Frequencies over the pool, not the corpus: a term
every candidate shares (the anchor's name, when the graph found them all through it) separates them
no better than a stopword, and the scores need no index.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from grasp.config import BM25Config
from grasp.rerank.base import Reranker
from grasp.text.bm25 import make_tokenizer


class LexicalReranker(Reranker):
    name = "bm25"
    pool_dependent = True
    MAX_VOCABULARY = 200_000  # words the tokenizer keeps across calls before it starts afresh

    def __init__(self, config: BM25Config | None = None) -> None:
        self.config = config or BM25Config()
        self._tokenizer = make_tokenizer(self.config)

    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        if not documents:
            return np.zeros(0)
        if len(self._tokenizer.word_to_id) > self.MAX_VOCABULARY:  # ids live for one call: a fresh vocabulary
            self._tokenizer = make_tokenizer(self.config)            # scores the same, and a service stays bounded
        ids = self._tokenizer.tokenize([*documents, query], update_vocab=True, return_as="ids", show_progress=False)
        docs, terms = ids[:-1], np.unique(np.asarray(ids[-1], dtype=np.int64))
        lengths = np.array([len(d) for d in docs], dtype=np.float64)
        if terms.size == 0:
            return np.zeros(len(docs))
        # term frequency of each query term in each document: (n_docs, n_terms)
        tf = np.stack([np.bincount(np.searchsorted(terms, t[np.isin(t, terms)]), minlength=terms.size)
                       for t in (np.asarray(d, dtype=np.int64) for d in docs)]).astype(np.float64)
        df = (tf > 0).sum(0)
        n = len(docs)
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        k1, b = self.config.k1, self.config.b
        norm = k1 * (1 - b + b * lengths / max(lengths.mean(), 1e-9))
        return (idf * tf * (k1 + 1) / (tf + norm[:, None])).sum(1)
