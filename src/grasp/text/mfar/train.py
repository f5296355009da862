"""Training mFAR on the SKB's train split (CPU-sized by default).

Contrastive loss at temperature 0.05 over in-batch candidates: every query's positive, plus one
hard negative per query sampled from ranks 51-100 of the single-field BM25 run with positives
removed. By default only the field weights train (the encoder and the field embeddings stay
fixed), at learning rate 5e-3; early stopping on validation MRR; a checkpoint after every epoch,
from which an interrupted run resumes.

With ``mfar.encoder_tuning=lora`` (mFAR's own recipe) :func:`tune_encoder` first trains a LoRA
adapter of the encoder jointly with the weights under the same loss, the dense field scores
computed by the encoder under training; mFAR's dense fields are then re-encoded with it and
:func:`train` fits the weights over the new vectors as above.
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
from grasp.eval.evaluate import evaluate_run
from grasp.results import Query
from grasp.storage import atomic_dir, atomic_file
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


class _Examples:
    """What both training phases sample from: the train queries with a gold candidate, each one's hard
    negatives (candidate rows) and its field BM25 (cached), and the batches of every epoch."""

    def __init__(self, retriever: MFARRetriever, train_queries: Sequence[Query], cfg: MFARConfig) -> None:
        index = retriever.index
        self.row_of = row_of = index.row_of
        self.queries = queries = [q for q in train_queries if any(a in row_of for a in q.answer_ids)]
        single = next(i for i, s in enumerate(index.specs) if s.name == "single")
        lo, hi = cfg.train.hard_negative_ranks
        bm25_run = index.lexical[single].batch_search(queries, hi)
        self.hard = {q.qid: [row_of[int(n)] for n in bm25_run[q.qid].node_ids[lo - 1 : hi].tolist()
                             if int(n) not in set(q.answer_ids) and int(n) in row_of] for q in queries}
        self.lexical = _LexicalCache(index, index.tokenize([q.text for q in queries]))
        self.n_rows = len(row_of)
        self.batch_size = cfg.train.batch_size

    def batches(self, rng: random.Random):
        """One epoch: (query numbers, candidate rows (positives then negatives), lexical (B, C, F), mask of
        in-batch candidates that are gold for another query's row, so not negatives)."""
        order = list(range(len(self.queries)))
        rng.shuffle(order)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            gold = [[self.row_of[a] for a in self.queries[i].answer_ids if a in self.row_of] for i in batch]
            gold_sets = [set(g) for g in gold]
            pos = [rng.choice(g) for g in gold]
            neg = [rng.choice(self.hard[self.queries[i].qid]) if self.hard[self.queries[i].qid]
                   else rng.randrange(self.n_rows) for i in batch]
            cand = np.array(pos + neg)
            lex = np.stack([self.lexical.at(i, cand).T for i in batch])  # (B, C, F)
            mask = torch.tensor([[j != b and int(c) in gold_sets[b] for j, c in enumerate(cand)]
                                 for b in range(len(batch))])
            yield batch, cand, torch.from_numpy(lex), mask


def _loss(scores: torch.Tensor, mask: torch.Tensor, temperature: float) -> torch.Tensor:
    """In-batch contrastive loss: query b's positive is candidate b."""
    scores = (scores / temperature).masked_fill(mask, float("-inf"))
    return torch.nn.functional.cross_entropy(scores, torch.arange(scores.shape[0]))


def train(retriever: MFARRetriever, train_queries: Sequence[Query], val_queries: Sequence[Query], out_dir: Path,
          config: MFARConfig | None = None, *, seed: int = DEFAULT_SEED, progress: bool = True) -> dict:
    """Train ``retriever.weights`` in place with the ``mfar`` configuration section; returns the training
    log. Resumes from ``out_dir/checkpoint.pt`` if present; the best weights end in ``out_dir/weights.pt``."""
    cfg = config or MFARConfig()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    index = retriever.index
    rng = random.Random(seed)
    torch.manual_seed(seed)
    examples = _Examples(retriever, train_queries, cfg)
    q_emb = index.encoder.encode_queries([q.text for q in examples.queries])

    opt = torch.optim.Adam(retriever.weights.parameters(), lr=cfg.train.lr)
    state = {"epoch": 0, "best": -1.0, "bad_epochs": 0, "log": []}
    ckpt = out_dir / "checkpoint.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, weights_only=False)
        retriever.weights.load_state_dict(saved["weights"])
        opt.load_state_dict(saved["optimizer"])
        state = saved["state"]
        rng.setstate(saved["rng"])
    for epoch in range(state["epoch"], cfg.train.epochs):
        if state["bad_epochs"] > cfg.train.patience:
            break
        total = 0.0
        bar = tqdm(examples.batches(rng), total=-(-len(examples.queries) // cfg.train.batch_size),
                   desc=f"mfar epoch {epoch + 1}", disable=not progress)
        for batch, cand, lex, mask in bar:
            dense = torch.from_numpy(np.stack([index.dense_scores(q_emb[i], cand).T for i in batch]))
            w = retriever.weights(torch.from_numpy(q_emb[batch]))
            loss = _loss(retriever.weights.combine(w, lex, dense), mask, cfg.train.temperature)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(batch)
            bar.set_postfix(loss=f"{float(loss.detach()):.3f}")
        retriever.weights.eval()
        val = evaluate_run(retriever.batch_search(val_queries, 100), val_queries).means if val_queries else {"mrr": 0.0}
        retriever.weights.train()
        entry = {"epoch": epoch + 1, "loss": total / max(len(examples.queries), 1),
                 **{f"val_{k}": v for k, v in val.items()}}
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


def tune_encoder(retriever: MFARRetriever, train_queries: Sequence[Query], out_dir: Path, model: str,
                 config: MFARConfig | None = None, *, seed: int = DEFAULT_SEED, progress: bool = True) -> Path:
    """mFAR's encoder phase: a LoRA adapter of ``model`` (the encoder ``retriever``'s index was built with)
    trained jointly with fresh field weights, for ``encoder_epochs`` epochs; every dense field score is
    the cosine of the query and the candidate's field text, both embedded by the encoder under training
    (an empty field scores 0, as its zero vector does at search time). Returns the adapter folder
    (``out_dir/encoder``); a checkpoint after each epoch lets an interrupted run resume."""
    from peft import get_peft_model

    from grasp.encode.tuned import embed, load_bi_encoder, lora_config
    from grasp.text.mfar.model import FieldWeights

    cfg = config or MFARConfig()
    out_dir = Path(out_dir)
    adapter_dir = out_dir / "encoder"
    if adapter_dir.exists():
        return adapter_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    index = retriever.index
    rng = random.Random(seed)
    torch.manual_seed(seed)
    examples = _Examples(retriever, train_queries, cfg)
    tokenizer, base = load_bi_encoder(model)
    net = get_peft_model(base, lora_config(cfg.train.encoder_lora_r, 2 * cfg.train.encoder_lora_r, 0.05))
    weights = FieldWeights(index.encoder.dim, index.n_fields, index.has_dense)
    opt = torch.optim.AdamW([{"params": [p for p in net.parameters() if p.requires_grad], "lr": cfg.train.encoder_lr},
                             {"params": weights.parameters(), "lr": cfg.train.lr}])
    max_length = getattr(index.encoder, "max_length", 256)
    dense_fields = [f for f, has in enumerate(index.has_dense) if has]
    state = {"epoch": 0, "log": []}
    ckpt = out_dir / "encoder-checkpoint.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, weights_only=False)
        net.load_state_dict(saved["lora"], strict=False)
        weights.load_state_dict(saved["weights"])
        opt.load_state_dict(saved["optimizer"])
        state = saved["state"]
        rng.setstate(saved["rng"])
    net.train()
    for epoch in range(state["epoch"], cfg.train.encoder_epochs):
        total = 0.0
        bar = tqdm(examples.batches(rng), total=-(-len(examples.queries) // cfg.train.batch_size),
                   desc=f"mfar encoder epoch {epoch + 1}", disable=not progress)
        for batch, cand, lex, mask in bar:
            qv = embed(net, tokenizer, [examples.queries[i].text for i in batch], max_length)
            dense = torch.zeros(len(batch), len(cand), index.n_fields)
            for f in dense_fields:
                docs = [index.layouts[f].document(index.skb, int(index.node_ids[row])) for row in cand.tolist()]
                filled = [j for j, t in enumerate(docs) if t]
                if filled:
                    dv = embed(net, tokenizer, [docs[j] for j in filled], max_length)
                    dense[:, filled, f] = qv @ dv.T
            loss = _loss(weights.combine(weights(qv), lex, dense), mask, cfg.train.temperature)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(batch)
            bar.set_postfix(loss=f"{float(loss.detach()):.3f}")
        state["log"].append({"epoch": epoch + 1, "loss": total / max(len(examples.queries), 1)})
        state["epoch"] = epoch + 1
        lora = {k: v for k, v in net.state_dict().items() if "lora_" in k}
        _save(ckpt, {"lora": lora, "weights": weights.state_dict(), "optimizer": opt.state_dict(), "state": state,
                     "rng": rng.getstate()})
    with atomic_dir(adapter_dir) as tmp:
        net.save_pretrained(str(tmp))
        (Path(tmp) / "grasp_train.json").write_text(json.dumps({"log": state["log"], "seed": seed,
                                                                "mfar": cfg.model_dump(mode="json")}, indent=1))
    return adapter_dir
