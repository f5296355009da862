"""Listwise LoRA fine-tuning of the cross-encoder (paper Section 3.3, appendix 7).

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

from grasp.config import DEFAULT_SEED, RerankerConfig
from grasp.errors import ConfigError
from grasp.results import Query, Run
from grasp.storage import atomic_dir, atomic_file

# settings a resumed run may change without starting over: more epochs continue, checkpoints are bookkeeping
RESUMABLE = ("epochs", "save_every", "val_split")


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


def train_reranker(records: list[dict], serialize: Callable[[int], str], out_dir: Path, *,
                   config: RerankerConfig | None = None, seed: int = DEFAULT_SEED, progress: bool = True) -> dict:
    """Train a LoRA adapter of ``config.model`` with the ``reranker`` configuration section; returns the
    log. The adapter ends in ``out_dir/adapter``."""
    from peft import LoraConfig, get_peft_model
    from transformers import get_cosine_schedule_with_warmup

    from grasp.rerank.cross_encoder import load_cross_encoder
    from grasp.rerank.tuned_bi_encoder import TEMPERATURE, embed, load_bi_encoder

    cfg = config or RerankerConfig()
    model = cfg.model
    identity = {**cfg.model_dump(mode="json"), "seed": seed}
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    if cfg.kind not in ("cross-encoder", "bi-encoder"):
        raise ValueError(f"kind must be 'cross-encoder' or 'bi-encoder', not {cfg.kind!r}")
    cross = cfg.kind == "cross-encoder"
    tokenizer, base = load_cross_encoder(model) if cross else load_bi_encoder(model)
    device = next(base.parameters()).device
    net = get_peft_model(base, LoraConfig(task_type="SEQ_CLS" if cross else "FEATURE_EXTRACTION", r=cfg.lora_r,
                                          lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                                          target_modules="all-linear"))
    steps_per_epoch = max(1, len(records) // cfg.global_batch)
    total_steps = steps_per_epoch * cfg.epochs
    opt = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=cfg.lr)
    sched = get_cosine_schedule_with_warmup(opt, int(cfg.warmup * total_steps), total_steps)
    state = {"step": 0, "log": []}
    ckpt = out_dir / "checkpoint.pt"
    if ckpt.exists():
        saved = torch.load(ckpt, weights_only=False)
        before = saved.get("config", {})
        changed = [k for k, v in identity.items() if k not in RESUMABLE and k in before and before[k] != v]
        if changed:
            raise ConfigError(f"{ckpt} is from another training configuration ({', '.join(changed)} differ); "
                              "delete it to start over with this one")
        net.load_state_dict(saved["model"], strict=False)
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
            negs = rng.sample(rec["negatives"], min(cfg.group_size - 1, len(rec["negatives"])))
            group = [text(n) for n in [pos, *negs]]
            queries.append(rec["query"])
            docs += group
            sizes.append(len(group))
        if cross:
            pair_q = [q for q, n in zip(queries, sizes, strict=True) for _ in range(n)]
            enc = tokenizer(pair_q, docs, truncation="only_second", max_length=cfg.max_length, padding=True,
                            return_tensors="pt").to(device)
            logits = net(**enc).logits[:, 0]
        else:
            qv = embed(net, tokenizer, queries, cfg.max_length)
            dv = embed(net, tokenizer, docs, cfg.max_length)
            owner = torch.repeat_interleave(torch.arange(len(sizes), device=device), torch.tensor(sizes, device=device))
            logits = (dv * qv[owner]).sum(-1) / TEMPERATURE
        losses = [torch.nn.functional.cross_entropy(g[None, :], torch.zeros(1, dtype=torch.long, device=device))
                  for g in torch.split(logits, sizes)]
        return torch.stack(losses).mean()

    net.train()
    bar = tqdm(total=total_steps, initial=state["step"], desc="reranker", unit="step", disable=not progress)
    while state["step"] < total_steps:
        epoch, within = divmod(state["step"], steps_per_epoch)
        order = list(range(len(records)))
        random.Random(seed + epoch).shuffle(order)  # the same order for an epoch whatever the resume point
        batch = order[within * cfg.global_batch : (within + 1) * cfg.global_batch]
        opt.zero_grad()
        total = 0.0
        for start in range(0, len(batch), cfg.micro_batch):
            recs = [records[i] for i in batch[start : start + cfg.micro_batch]]
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
        if state["step"] % cfg.save_every == 0 or state["step"] == total_steps:
            with atomic_file(ckpt, "wb") as f:
                torch.save({"model": {k: v for k, v in net.state_dict().items() if "lora" in k or "classifier" in k
                                      or "modules_to_save" in k or "score" in k},
                            "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "state": state,
                            "config": identity,
                            "rng": rng.getstate()}, f)
    bar.close()
    with atomic_dir(out_dir / "adapter") as tmp:  # the adapter appears whole, with the record of what it is
        net.save_pretrained(str(tmp))
        (tmp / "grasp_train.json").write_text(json.dumps({**identity, "records": len(records)}, indent=1))
    with atomic_file(out_dir / "log.json", "w") as f:
        f.write(json.dumps(state["log"]))
    return state


def pool_metrics(reranker, pools: Sequence[dict], texts: Callable[[int], str]) -> dict[str, float]:
    """Hit@1 and MRR of the reranker alone over validation pools (model selection without the KB)."""
    hit1, rr = [], []
    for p in pools:
        scores = reranker.score(p["query"], [texts(n) for n in p["pool"]])
        order = [p["pool"][i] for i in np.argsort(-np.asarray(scores), kind="stable")]
        gold = set(p["gold"])
        first = next((i for i, n in enumerate(order) if n in gold), None)
        hit1.append(float(first == 0))
        rr.append(0.0 if first is None else 1.0 / (first + 1))
    return {"hit@1": float(np.mean(hit1)) if hit1 else 0.0, "mrr": float(np.mean(rr)) if rr else 0.0, "n": len(pools)}


def mean_loss(log: list[dict], first: bool, n: int = 5) -> float:
    part = log[:n] if first else log[-n:]
    return float(np.mean([e["loss"] for e in part])) if part else float("nan")
