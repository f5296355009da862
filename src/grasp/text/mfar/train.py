"""Training mFAR's field weights on the SKB's train split (CPU-sized by default).

Contrastive loss at temperature 0.05 over in-batch candidates: every query's positive, plus one
hard negative per query sampled from ranks 51-100 of the single-field BM25 run with positives
removed. Only the weights train by default (the encoder and the field embeddings stay fixed),
at learning rate 5e-3; early stopping on validation MRR; a checkpoint after every epoch, from
which an interrupted run resumes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from grasp.config import DEFAULT_SEED, MFARConfig
from grasp.eval.report import evaluate_run
from grasp.results import Query
from grasp.storage import atomic_file
from grasp.text.mfar.retriever import MFARRetriever


def _save(path: Path, obj: dict) -> None:
    with atomic_file(path, "wb") as f:
        torch.save(obj, f)


class _LexicalCache:
    """Each training query's field BM25 over every candidate, computed once (not once per epoch) and
    kept sparse: most candidates share no term with a query, and the dense (F, N) matrices of a
    thousand queries would not fit in memory. ``at`` returns exactly what ``lexical_scores`` does."""

    def __init__(self, index, tokens: list[list[list[int]]]) -> None:
        self.index, self.tokens = index, tokens
        self._rows: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}

    def at(self, query: int, rows: np.ndarray) -> np.ndarray:
        """(F, len(rows)) normalised BM25 of query number ``query`` at these candidate rows."""
        if query not in self._rows:
            full = self.index.lexical_scores([t[query] for t in self.tokens])
            self._rows[query] = [(np.flatnonzero(f), f[np.flatnonzero(f)]) for f in full]
        out = np.zeros((len(self._rows[query]), len(rows)), dtype=np.float32)
        for f, (nz, vals) in enumerate(self._rows[query]):
            if nz.size:
                pos = np.minimum(np.searchsorted(nz, rows), nz.size - 1)
                hit = nz[pos] == rows
                out[f, hit] = vals[pos[hit]]
        return out


def train(retriever: MFARRetriever, train_queries: Sequence[Query], val_queries: Sequence[Query], out_dir: Path,
          config: MFARConfig | None = None, *, seed: int = DEFAULT_SEED, progress: bool = True) -> dict:
    """Train ``retriever.weights`` in place with the ``mfar`` configuration section; returns the training
    log. Resumes from ``out_dir/checkpoint.pt`` if present; the best weights end in ``out_dir/weights.pt``."""
    cfg = config or MFARConfig()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    index = retriever.index
    row_of = index.row_of
    queries = [q for q in train_queries if any(a in row_of for a in q.answer_ids)]
    rng = random.Random(seed)
    torch.manual_seed(seed)

    # hard negatives: ranks 51-100 of the single-field BM25 run, positives removed
    single = next(i for i, s in enumerate(index.specs) if s.name == "single")
    lo, hi = cfg.hard_negative_ranks
    bm25_run = index.lexical[single].batch_search(queries, hi)
    hard = {q.qid: [row_of[int(n)] for n in bm25_run[q.qid].node_ids[lo - 1 : hi].tolist()
                    if int(n) not in set(q.answer_ids) and int(n) in row_of] for q in queries}
    q_emb = index.encoder.encode_queries([q.text for q in queries])
    lexical = _LexicalCache(index, index.tokenize([q.text for q in queries]))

    opt = torch.optim.Adam(retriever.weights.parameters(), lr=cfg.lr)
    state = {"epoch": 0, "best": -1.0, "bad_epochs": 0, "log": []}
    ckpt = out_dir / "checkpoint.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, weights_only=False)
        retriever.weights.load_state_dict(saved["weights"])
        opt.load_state_dict(saved["optimizer"])
        state = saved["state"]
        rng.setstate(saved["rng"])
    for epoch in range(state["epoch"], cfg.epochs):
        if state["bad_epochs"] > cfg.patience:
            break
        order = list(range(len(queries)))
        rng.shuffle(order)
        total = 0.0
        bar = tqdm(range(0, len(order), cfg.batch_size), desc=f"mfar epoch {epoch + 1}", disable=not progress)
        for start in bar:
            batch = order[start : start + cfg.batch_size]
            pos = [rng.choice([row_of[a] for a in queries[i].answer_ids if a in row_of]) for i in batch]
            neg = [rng.choice(hard[queries[i].qid]) if hard[queries[i].qid] else rng.randrange(len(row_of)) for i in batch]
            cand = np.array(pos + neg)
            lex = np.stack([lexical.at(i, cand).T for i in batch])  # (B, C, F)
            dense = np.stack([index.dense_scores(q_emb[i], cand).T for i in batch])
            w = retriever.weights(torch.from_numpy(q_emb[batch]))
            scores = retriever.weights.combine(w, torch.from_numpy(lex), torch.from_numpy(dense)) / cfg.temperature
            # another query's candidate that is also gold for this query is not a negative
            gold_rows = [{row_of[a] for a in queries[i].answer_ids if a in row_of} for i in batch]
            mask = torch.tensor([[j != b and int(c) in gold_rows[b] for j, c in enumerate(cand)] for b in range(len(batch))])
            scores = scores.masked_fill(mask, float("-inf"))
            loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(batch)))
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(batch)
            bar.set_postfix(loss=f"{float(loss.detach()):.3f}")
        retriever.weights.eval()
        val = evaluate_run(retriever.batch_search(val_queries, 100), val_queries).means if val_queries else {"mrr": 0.0}
        retriever.weights.train()
        entry = {"epoch": epoch + 1, "loss": total / max(len(order), 1), **{f"val_{k}": v for k, v in val.items()}}
        state["log"].append(entry)
        if val["mrr"] > state["best"]:
            state["best"], state["bad_epochs"] = val["mrr"], 0
            _save(out_dir / "weights.pt", retriever.weights.state_dict())
        else:
            state["bad_epochs"] += 1
        state["epoch"] = epoch + 1
        _save(ckpt, {"weights": retriever.weights.state_dict(), "optimizer": opt.state_dict(), "state": state,
                     "rng": rng.getstate()})
    if (out_dir / "weights.pt").exists():
        retriever.weights.load_state_dict(torch.load(out_dir / "weights.pt", weights_only=True))
    (out_dir / "log.json").write_text(json.dumps(state["log"], indent=1))
    return state
