"""The mFAR retriever: union of the top-``depth`` of every (field, scorer), each candidate scored
on all fields with the query's weights, top-k returned."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from grasp.progress import announce
from grasp.results import Query, Ranking, Run, StageTrace
from grasp.retriever import Retriever
from grasp.text.mfar.fields_index import FieldIndex, weight_names
from grasp.text.mfar.model import FieldWeights


@dataclass
class MFARTrace(StageTrace):
    """mFAR for one query: whether its field weights are trained, and the query's active weights."""

    trained: bool = False
    field_weights: dict[str, float] = field(default_factory=dict)


def _top(scores: np.ndarray, depth: int) -> np.ndarray:
    depth = min(depth, scores.size)
    return np.argpartition(-scores, depth - 1)[:depth] if depth else np.zeros(0, dtype=np.int64)


class MFARRetriever(Retriever):
    name = "mfar"

    def __init__(self, index: FieldIndex, weights: FieldWeights | None = None, *, depth: int = 100) -> None:
        self.index = index
        self.weights = weights or FieldWeights(index.encoder.dim, index.n_fields, index.has_dense)
        self.depth = depth
        self.trained = False  # uniform weights until trained weights are loaded

    def field_scores(self, query_vec: np.ndarray, tokens: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(candidate rows, lexical (C, F), dense (C, F)) for one query."""
        lex_all = self.index.lexical_scores(tokens)                                   # (F, N)
        pools = [t[r[t] > 0] for r in lex_all if (t := _top(r, self.depth)).size]          # fields the query matches
        pools += self.index.dense_top(query_vec, self.depth)
        rows = np.unique(np.concatenate(pools)) if pools else np.zeros(0, dtype=np.int64)
        return rows, lex_all[:, rows].T, self.index.dense_scores(query_vec, rows).T

    @torch.no_grad()
    def batch_search(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> Run:
        run = Run(self.name)
        if not queries:
            return run
        texts = [q.text for q in queries]
        announce("mfar", "scoring every field of every candidate (BM25 and dense)")
        q_emb = self.index.encoder.encode_queries(texts, progress=progress)
        tokens = self.index.tokenize(texts)
        w = self.weights(torch.from_numpy(q_emb)).numpy()
        for i, q in enumerate(queries):
            rows, lex, dense = self.field_scores(q_emb[i], [t[i] for t in tokens])
            scores = FieldWeights.combine(torch.from_numpy(w[i : i + 1]), torch.from_numpy(lex[None]),
                                          torch.from_numpy(dense[None]))[0].numpy()
            run.add(Ranking.from_scores(q.qid, self.index.node_ids[rows], scores, stage=self.name, k=k,
                                        trace=MFARTrace(self.trained, self.field_weights(w[i]))))
        return run

    def weight_names(self) -> list[str]:
        return weight_names(self.index.specs)

    def field_weights(self, w: np.ndarray) -> dict[str, float]:
        """The active (scorer:field) weights of one query, for explanations."""
        active = [True] * self.index.n_fields + self.index.has_dense
        return {n: round(float(x), 4) for n, x, a in zip(self.weight_names(), w, active, strict=True) if a}
