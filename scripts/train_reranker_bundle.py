"""Train a LoRA reranker (any reranker.kind) from a bundle written by `grasp train reranker --export FILE`,
on whatever machine runs it (the GPU when there is one), and report the reranker's own Hit@1 and
MRR on the bundle's validation pools.

    python scripts/train_reranker_bundle.py bundle.json.xz OUT_DIR [--kind KIND] [--model DIR] [--lr 2e-4] [--epochs 4]
    python scripts/train_reranker_bundle.py bundle.json.xz OUT_DIR --kind llm-yes-no --model MODEL.gguf|DIR --lr 3e-5 \
        --group-size 24 --max-length 1024   # the paper's LLM yes/no reranker, on a GPU

OUT_DIR/adapter is what `grasp` loads: copy it and its manifest (OUT_DIR/adapter.manifest.json, written from
what the bundle records about its SKB and configuration) to the reranker folder the README names on the
machine that serves queries.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from grasp.artifacts import write_manifest  # noqa: E402
from grasp.config import DEFAULT_SEED, RerankerConfig, RerankerTrainingConfig  # noqa: E402
from grasp.rerank import load_trained_reranker  # noqa: E402
from grasp.rerank.records import read_bundle  # noqa: E402
from grasp.rerank.train import mean_loss, pool_metrics, train_reranker  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", default="minilm", help="'minilm' (bundled) or a local transformers checkpoint; "
                    "--kind llm-yes-no: a causal-LM checkpoint folder or a .gguf file")
    for name, typ in (("epochs", int), ("lr", float), ("global_batch", int), ("micro_batch", int), ("group_size", int),
                      ("max_length", int), ("lora_r", int), ("lora_alpha", int), ("seed", int), ("kind", str), ("head_lr", float),
                      ("eval_every", int), ("eval_queries", int)):
        ap.add_argument(f"--{name.replace('_', '-')}", type=typ, default=None)
    args = ap.parse_args()
    bundle = read_bundle(args.bundle)
    overrides = {k: v for k, v in vars(args).items() if k not in ("bundle", "out", "seed") and v is not None}
    saved = dict(bundle["info"].get("reranker", {}))
    train = dict(saved.pop("train", {}))
    for key in list(saved):  # a bundle exported before the training arguments had a section of their own
        if key in RerankerTrainingConfig.model_fields:
            train[key] = saved.pop(key)
    for key in list(overrides):
        if key in RerankerTrainingConfig.model_fields:
            train[key] = overrides.pop(key)
    saved = {k: v for k, v in saved.items() if k in RerankerConfig.model_fields}
    cfg = RerankerConfig(**{**saved, **overrides, "train": train})
    seed = DEFAULT_SEED if args.seed is None else args.seed
    texts = bundle["texts"]
    t0 = time.perf_counter()
    state = train_reranker(bundle["records"], texts.__getitem__, args.out, config=cfg, seed=seed, progress=False,
                           val_pools=bundle["val_pools"])
    seconds = time.perf_counter() - t0
    reranker = load_trained_reranker(cfg.model, args.out / "adapter", max_length=cfg.max_length)
    val = pool_metrics(reranker.score, bundle["val_pools"], texts.__getitem__)
    summary = {"records": len(bundle["records"]), "steps": state["step"], "train_seconds": round(seconds, 1),
               "loss_first": mean_loss(state["log"], True), "loss_last": mean_loss(state["log"], False),
               "val": val, "val_during_training": state.get("val", []), "config": {**cfg.model_dump(mode="json"), "seed": seed}, "device": str(next(reranker.model.parameters()).device)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    made = bundle["info"].get("manifest")
    if made:  # bundles exported before manifests carry none: the adapter then loads unchecked, with a warning
        write_manifest(args.out / "adapter", kind="reranker/adapter", skb=made["skb"], data=made["data"],
                       config={**made["config"], "reranker.model": cfg.model},
                       context={"pool": bundle["info"].get("pool"), "records": len(bundle["records"]),
                                "trained_by": "scripts/train_reranker_bundle.py", "device": summary["device"],
                                "reranker": summary["config"]})
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
