"""The figures the paper uses to argue robustness (its Section 4.5 and Figure 2), drawn by `grasp report`:

- where the validation queries fall in the dynamic fusion's (n_cand bucket, risk level) cells, with the
  graph weight the chosen setting gives each cell;
- the reranker's own validation Hit@1 and MRR over its training steps (its ``log.json``);
- the final fusion's (w, k) Hit@1 surface at the tuned depth, and the share of settings within one
  point of the best (how flat the optimum is).

Each figure needs an artifact made by training or tuning; a missing one is named, not faked.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from grasp import methods
from grasp.artifacts import final_fusion_artifact
from grasp.fuse.dynamic import BUCKET_NAMES, bucket_names, bucket_of, risk_index
from grasp.fuse.retriever import FusionSetting
from grasp.graph.retriever import plan_signals
from grasp.plan.model import RISK_LEVELS
from grasp.rerank.retriever import RerankFusionSetting
from grasp.results import Run
from grasp.workspace import Workspace


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def cell_distribution(ws: Workspace, setting: FusionSetting, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(counts, weights): validation queries per (bucket, risk) cell, and the mean graph weight the setting
    gives the queries of each cell (NaN for an empty one)."""
    queries = ws.queries(split=split)
    graph = methods.run(ws, "graph", queries)
    dense = methods.run(ws, setting.dense_method, queries) if setting.mode == "confidence" else Run(setting.dense_method)
    weight_of = setting.weights(graph, dense)
    counts = np.zeros((len(BUCKET_NAMES), len(RISK_LEVELS)), dtype=int)
    totals = np.zeros(counts.shape)
    for q in queries:
        n_cand, risk = plan_signals(graph.get(q.qid), setting.link_floor)
        cell = bucket_of(n_cand), risk_index(risk)
        counts[cell] += 1
        totals[cell] += weight_of.get(q.qid, 0.0)
    with np.errstate(invalid="ignore"):
        return counts, totals / counts


def draw_cells(counts: np.ndarray, weights: np.ndarray, path: Path, *, title: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    im = ax.imshow(counts, cmap="Blues", aspect="auto")
    for (i, j), n in np.ndenumerate(counts):
        ax.text(j, i, f"{n}\nw={weights[i, j]:.2g}" if n else "0", ha="center", va="center", fontsize=8,
                color="white" if n > counts.max() / 2 else "black")
    ax.set_xticks(range(len(RISK_LEVELS)), RISK_LEVELS)
    ax.set_yticks(range(len(BUCKET_NAMES)), BUCKET_NAMES)
    ax.set_xlabel("risk level (planner)")
    ax.set_ylabel("n_cand bucket (graph candidates)")
    ax.set_title(title, fontsize=10)
    fig.colorbar(im, ax=ax, label="queries")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def draw_training(log: dict, path: Path, *, title: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    train = log.get("train", [])
    if train:
        ax.plot([e["step"] for e in train], [e["loss"] for e in train], color="grey", alpha=0.6, label="train loss")
    ax.set_xlabel("step")
    ax.set_ylabel("listwise loss")
    val = log.get("val", [])
    if val:
        ax2 = ax.twinx()
        steps = [e["step"] for e in val]
        ax2.plot(steps, [100 * e["hit@1"] for e in val], "o-", label="val Hit@1")
        ax2.plot(steps, [100 * e["mrr"] for e in val], "s-", label="val MRR")
        ax2.set_ylabel("% (reranker alone, validation pools)")
        ax2.legend(loc="upper right", fontsize=8)
    ax.legend(loc="upper left", fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def draw_final_fusion(setting: RerankFusionSetting, path: Path, *, title: str) -> float:
    """The (w, k) Hit@1 surface, the chosen setting starred; returns the share of settings within one point
    of the best."""
    from grasp.lab.tune import draw_heatmap

    surface = np.asarray(setting.surface, dtype=float)
    share = float((surface >= surface.max() - 0.01 - 1e-12).mean())
    draw_heatmap(surface, setting.axes, path, ylabel="w (reranker weight)",
                 mark=(setting.axes["w"].index(setting.w), setting.axes["k"].index(setting.rrf_k)),
                 title=f"{title}\n{100 * share:.0f}% of settings within 1 point of the best")
    return share


def bucket_line(setting: RerankFusionSetting) -> str:
    """A bucketed final fusion's (w, k) per bucket of graph candidates, with its tuning queries."""
    edges = setting.bucket_edges or []
    counts = setting.bucket_n or [None] * (len(edges) + 1)
    return "; ".join(f"{b} graph candidates: w {w:g}, k {k:g}" + (f" ({n} queries)" if n is not None else "")
                     for b, w, k, n in zip(bucket_names(edges), setting.w_bucket or [], setting.rrf_k_bucket or [], counts,
                                           strict=True)) + "."


def sensitivity(ws: Workspace, out_dir: Path) -> list[str]:
    """Draw what can be drawn into ``out_dir``; returns markdown lines saying what each figure shows."""
    from grasp.artifacts import RERANKER_ADAPTER

    out_dir.mkdir(parents=True, exist_ok=True)
    name = ws.skb.name
    lines = ["## Sensitivity (validation)", ""]
    fusion = ws.load_setting(FusionSetting)
    if fusion is None:
        lines.append("- fusion cells: no fusion setting (`grasp tune fusion`)")
    elif not ws.queries(split=fusion.info.get("split", "val")):
        lines.append(f"- fusion cells: no {fusion.info.get('split', 'val')} queries in this SKB")
    else:
        split = fusion.info.get("split", "val")
        counts, weights = cell_distribution(ws, fusion, split)
        draw_cells(counts, weights, out_dir / "fusion-cells.png",
                   title=f"{name}: {split} queries per cell, mean graph weight of the chosen {fusion.mode} RRF")
        busiest = np.unravel_index(np.argmax(counts), counts.shape)
        lines.append(f"- `fusion-cells.png`: {counts.sum()} {split} queries over (n_cand bucket, risk level); the "
                     f"busiest cell is ({BUCKET_NAMES[busiest[0]]}, {RISK_LEVELS[busiest[1]]}) with "
                     f"{counts[busiest]} queries; {fusion.mode} RRF, k {fusion.rrf_k:g}.")
    adapter = ws.artifact(RERANKER_ADAPTER)
    log_path = adapter.parent / "log.json" if adapter is not None else None
    if log_path is None or not log_path.exists():
        lines.append("- reranker training curve: no training log beside the adapter (`grasp train reranker` writes it)")
    else:
        log = json.loads(log_path.read_text())
        log = log if isinstance(log, dict) else {"train": log, "val": []}  # logs written before validation was logged
        draw_training(log, out_dir / "reranker-training.png", title=f"{name}: reranker training")
        val = log.get("val", [])
        best = max(val, key=lambda e: e["hit@1"]) if val else None
        lines.append(f"- `reranker-training.png`: {len(log.get('train', []))} steps"
                     + (f"; validation Hit@1 of the reranker alone peaks at {100 * best['hit@1']:.1f} (step "
                        f"{best['step']}), ends at {100 * val[-1]['hit@1']:.1f}" if best else "; no validation logged"))
    for trained in (True, False):
        setting = ws.load_setting(RerankFusionSetting, final_fusion_artifact(trained))
        label = "trained" if trained else "zero-shot"
        if setting is None or not setting.surface:
            lines.append(f"- final fusion ({label}): no (w, k) surface saved (`grasp tune rerank` writes it)")
            continue
        static = "static " if setting.bucketed else ""
        share = draw_final_fusion(setting, out_dir / f"final-fusion-{label}.png",
                                  title=f"{name}: final fusion ({label} reranker, depth {setting.depth}), {static}RRF")
        chosen = (f"the static surface (its best w {setting.w:g}, k {setting.rrf_k:g} starred)" if setting.bucketed
                  else f"w {setting.w:g}, k {setting.rrf_k:g}")
        lines.append(f"- `final-fusion-{label}.png`: {chosen} at depth {setting.depth} "
                     f"({setting.rule or 'best cell'}), validation Hit@1 {100 * (setting.val_hit1 or 0):.1f}; "
                     f"{100 * share:.0f}% of the static (w, k) grid lies within one point of its best."
                     + (f" Served: {bucket_line(setting)}" if setting.bucketed else ""))
    return lines
