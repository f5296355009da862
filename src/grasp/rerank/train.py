"""Listwise LoRA fine-tuning of a reranker (paper Section 3.3, appendix 7), whatever its kind.

Records: for each training query, the upstream (Stage-2) top-``depth`` pool; all its positives
and its ``hard_negatives`` highest-ranked non-gold candidates. Each step, per query, a group of
``group_size`` candidates: one positive sampled uniformly plus negatives resampled from the
stored ones (so each positive meets different negatives on every visit). Loss: cross-entropy of
the positive's position among the group's logits. LoRA adapters on all linear layers, cosine
learning rate with warmup, gradient accumulation to ``global_batch`` queries, a checkpoint every
``save_every`` steps (training resumes from it), the adapter saved with its config at the end.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from grasp.config import DEFAULT_SEED, RerankerConfig, RerankerTrainingConfig, marked
from grasp.errors import ConfigError
from grasp.results import Query, Run
from grasp.storage import atomic_dir, atomic_file

# settings a resumed run may change without starting over: more epochs continue, checkpoints are bookkeeping
RESUMABLE = marked(RerankerTrainingConfig, "resumable")


def build_records(upstream: Run, queries: Sequence[Query], *, depth: int = 100, hard_negatives: int = 30) -> list[dict]:
    """Training records from the upstream pool; queries with no positive in the pool are skipped."""
    records = []
    for q in queries:
        r = upstream.get(q.qid)
        if r is None:
            continue
        pool = r.node_ids[:depth].tolist()
        gold = set(q.answer_ids)
        pos = [n for n in pool if n in gold]
        neg = [n for n in pool if n not in gold][:hard_negatives]
        if pos and neg:
            records.append({"qid": q.qid, "query": q.text, "positives": pos, "negatives": neg})
    return records


def trainable(cfg: RerankerConfig):
    """The :class:`~grasp.rerank.trainable.TrainableScorer` of ``cfg.kind`` (imported on demand: each loads torch models)."""
    if cfg.kind == "bi-encoder":
        from grasp.rerank.tuned_bi_encoder import BiEncoderTrainable as kind
    elif cfg.kind == "cross-encoder":
        from grasp.rerank.cross_encoder import CrossEncoderTrainable as kind
    elif cfg.kind == "llm-yes-no":
        from grasp.rerank.llm_yes_no import LLMYesNoTrainable as kind
    else:
        raise ValueError(f"reranker kind {cfg.kind!r} cannot be trained")
    return kind(cfg)


def train_reranker(records: list[dict], serialize: Callable[[int], str], out_dir: Path, *,
                   config: RerankerConfig | None = None, seed: int = DEFAULT_SEED, progress: bool = True,
                   val_pools: Sequence[dict] = ()) -> dict:
    """Train a LoRA adapter of ``config.model`` with the ``reranker`` configuration section; returns the
    log. The adapter ends in ``out_dir/adapter``. With ``val_pools`` (see
    :func:`grasp.rerank.records.validation_pools`), the reranker alone is validated on the first
    ``eval_queries`` of them every ``eval_every`` steps and at the end (``state["val"]``)."""
    from transformers import get_cosine_schedule_with_warmup

    cfg = config or RerankerConfig()
    # what the adapter records (grasp_train.json), and what a checkpoint must match to be resumed: that record less
    # how the reranker is served and what may change between resumes
    identity = {**cfg.model_dump(mode="json", exclude={"train"}), **cfg.train.model_dump(mode="json"), "seed": seed}
    free = RESUMABLE | marked(RerankerConfig, "serving_only")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    scorer = trainable(cfg)
    net = scorer.net
    steps_per_epoch = max(1, len(records) // cfg.train.global_batch)
    total_steps = steps_per_epoch * cfg.train.epochs
    opt = torch.optim.AdamW(scorer.parameter_groups(cfg))
    sched = get_cosine_schedule_with_warmup(opt, int(cfg.train.warmup * total_steps), total_steps)
    state = {"step": 0, "log": []}
    ckpt = out_dir / "checkpoint.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, weights_only=False)
        before = saved.get("config", {})
        changed = [k for k, v in identity.items() if k not in free and k in before and before[k] != v]
        if changed:
            raise ConfigError(f"{ckpt} is from another training configuration ({', '.join(changed)} differ); "
                              "delete it to start over with this one")
        scorer.load_trainable_state(saved["model"], source=ckpt)
        opt.load_state_dict(saved["optimizer"])
        sched.load_state_dict(saved["scheduler"])
        state = saved["state"]
        rng.setstate(saved["rng"])
    texts: dict[int, str] = {}

    def text(n: int) -> str:
        if n not in texts:
            texts[n] = serialize(n)
        return texts[n]

    def groups_loss(recs: list[dict]) -> torch.Tensor:
        """Mean listwise loss of several groups scored in one forward pass."""
        queries, docs, sizes = [], [], []
        for rec in recs:
            pos = rng.choice(rec["positives"])
            negs = rng.sample(rec["negatives"], min(cfg.train.group_size - 1, len(rec["negatives"])))
            group = [text(n) for n in [pos, *negs]]
            queries.append(rec["query"])
            docs += group
            sizes.append(len(group))
        logits = scorer.group_logits(queries, docs, sizes)
        losses = [torch.nn.functional.cross_entropy(g[None, :], torch.zeros(1, dtype=torch.long, device=logits.device))
                  for g in torch.split(logits, sizes)]
        return torch.stack(losses).mean()

    val_sample = list(val_pools)[: cfg.train.eval_queries]

    @torch.no_grad()
    def validate() -> None:
        net.eval()
        chunk = cfg.train.micro_batch * cfg.train.group_size  # as many documents per forward pass as training scores

        def score(q: str, docs: list[str]) -> np.ndarray:
            parts = [scorer.group_logits([q], docs[i : i + chunk], [len(docs[i : i + chunk])]).float().cpu().numpy()
                     for i in range(0, len(docs), chunk)]
            return np.concatenate(parts) if parts else np.zeros(0)

        metrics = pool_metrics(score, val_sample, text)
        net.train()
        state.setdefault("val", []).append({"step": state["step"], **metrics})

    net.train()
    bar = tqdm(total=total_steps, initial=state["step"], desc="reranker", unit="step", disable=not progress)
    while state["step"] < total_steps:
        epoch, within = divmod(state["step"], steps_per_epoch)
        order = list(range(len(records)))
        random.Random(seed + epoch).shuffle(order)  # the same order for an epoch whatever the resume point
        batch = order[within * cfg.train.global_batch : (within + 1) * cfg.train.global_batch]
        opt.zero_grad()
        total = 0.0
        for start in range(0, len(batch), cfg.train.micro_batch):
            recs = [records[i] for i in batch[start : start + cfg.train.micro_batch]]
            loss = groups_loss(recs) * len(recs) / len(batch)
            loss.backward()
            total += float(loss.detach()) * len(batch)
        opt.step()
        sched.step()
        state["step"] += 1
        entry = {"step": state["step"], "loss": total / max(len(batch), 1), "lr": sched.get_last_lr()[0]}
        state["log"].append(entry)
        bar.update(1)
        bar.set_postfix(loss=f"{entry['loss']:.3f}")
        if val_sample and ((cfg.train.eval_every and state["step"] % cfg.train.eval_every == 0) or state["step"] == total_steps):
            validate()
            bar.set_postfix(loss=f"{entry['loss']:.3f}", val_hit1=f"{state['val'][-1]['hit@1']:.3f}")
        if state["step"] % cfg.train.save_every == 0 or state["step"] == total_steps:
            with atomic_file(ckpt, "wb") as f:
                torch.save({"model": scorer.trainable_state(),
                            "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "state": state,
                            "config": identity,
                            "rng": rng.getstate()}, f)
    bar.close()
    with atomic_dir(out_dir / "adapter") as tmp:  # the adapter appears whole, with the record of what it is
        scorer.save(tmp)
        (tmp / "grasp_train.json").write_text(json.dumps({**identity, "records": len(records)}, indent=1))
    with atomic_file(out_dir / "log.json", "w") as f:
        f.write(json.dumps({"train": state["log"], "val": state.get("val", [])}))
    return state


def pool_metrics(score: Callable[[str, list[str]], np.ndarray], pools: Sequence[dict],
                 texts: Callable[[int], str]) -> dict[str, float]:
    """Hit@1 and MRR of a reranker alone (``score(query, documents)``, e.g. ``Reranker.score``) over
    validation pools: model selection without the KB."""
    hit1, rr = [], []
    for p in pools:
        scores = score(p["query"], [texts(n) for n in p["pool"]])
        order = [p["pool"][i] for i in np.argsort(-np.asarray(scores), kind="stable")]
        gold = set(p["gold"])
        first = next((i for i, n in enumerate(order) if n in gold), None)
        hit1.append(float(first == 0))
        rr.append(0.0 if first is None else 1.0 / (first + 1))
    return {"hit@1": float(np.mean(hit1)) if hit1 else 0.0, "mrr": float(np.mean(rr)) if rr else 0.0, "n": len(pools)}


def mean_loss(log: list[dict], first: bool, n: int = 5) -> float:
    part = log[:n] if first else log[-n:]
    return float(np.mean([e["loss"] for e in part])) if part else float("nan")
