"""`grasp report`'s plan-confidence section: is the evidence-based confidence of :mod:`grasp.fuse.confidence`
calibrated (a reliability diagram, out of fold on validation and on the report's split), and how often a query
whose graph answer is wrong is put at a low weight, beside the planner's own risk level."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grasp.fuse.confidence import graph_hit, judge, planner_level
from grasp.fuse.retriever import FusionSetting
from grasp.results import Query, Run
from grasp.workspace import Workspace

FIGURE = "reliability.png"


def split_calibration(setting: FusionSetting, queries: Sequence[Query], graph: Run, dense: Run) -> dict:
    """The fitted confidence judged on ``queries``: calibration of P(graph's top answer is right) and the low-weight
    shares of the evidence's levels against the planner's."""
    model = setting.plan_confidence
    probs = np.array([np.nan if (p := model.probability(graph.get(q.qid), dense.get(q.qid))) is None else p
                      for q in queries])
    right = np.array([graph_hit(graph.get(q.qid), q.answer_ids) for q in queries], dtype=np.float64)
    return judge(probs, right, [planner_level(graph.get(q.qid)) for q in queries])


def draw_reliability(curves: dict[str, dict], path: Path, *, title: str) -> None:
    """Observed rate against mean prediction per bin, one line per curve, the diagonal for reference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="calibrated")
    for name, result in curves.items():
        bins = result["bins"]
        ax.plot([b["predicted"] for b in bins], [b["observed"] for b in bins], marker="o",
                label=f"{name} (n {result['n']}, ECE {result['ece']:.3f})")
        for b in bins:
            ax.annotate(str(b["n"]), (b["predicted"], b["observed"]), fontsize=6, xytext=(3, -8),
                        textcoords="offset points")
    ax.set_xlabel("predicted P(graph's top answer is right)")
    ax.set_ylabel("observed share right")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _row(name: str, r: dict) -> str:
    def cell(key: str, scale: float = 1.0, digits: int = 1) -> str:  # "–" where a set gives no value
        return "–" if r.get(key) is None else f"{scale * r[key]:.{digits}f}"
    return (f"| {name} | {r['n']} | {cell('right', 100)} | {cell('auc', digits=3)} | {cell('brier', digits=3)} | "
            f"{cell('ece', digits=3)} | {cell('wrong_low_evidence', 100)} | {cell('wrong_low_planner', 100)} | "
            f"{cell('right_kept_evidence', 100)} | {cell('right_kept_planner', 100)} |")


def confidence_section(ws: Workspace, queries: Sequence[Query], split: str, runs: dict[str, Run],
                       out_dir: Path) -> list[str]:
    """Markdown lines (and ``reliability.png``) for the report; what is missing is named, not faked."""
    lines = ["## Plan confidence", ""]
    setting = ws.load_setting(FusionSetting)
    if setting is None or setting.plan_confidence is None:
        return lines + ["- no plan confidence fitted (`grasp tune fusion` fits one with `fusion.evidence` on)"]
    if "graph" not in runs or setting.dense_method not in runs:
        return lines + [f"- no graph and {setting.dense_method} runs on {split} to judge the plan confidence on"]
    on_split = split_calibration(setting, queries, runs["graph"], runs[setting.dense_method])
    curves = {f"{split}": on_split}
    val = setting.info.get("confidence")
    if val:
        held = "out of fold" if not val.get("in_sample") else "in sample"
        curves = {f"{setting.info.get('split', 'val')} ({held})": val, **curves}
    draw_reliability(curves, out_dir / FIGURE, title=f"{ws.skb.name}: plan confidence, reliability")
    cv = setting.info.get("cv", {}).get("cv", {})
    uses = (f"Stage 2 weighs the graph ranking {setting.scale:g} * p^{setting.gamma:g} (confidence RRF)"
            if setting.mode == "confidence" else
            f"Stage 2 kept {setting.info.get('chosen')} RRF (cross-validated Hit@1 "
            f"{100 * cv.get(setting.info.get('chosen'), float('nan')):.1f}; confidence RRF "
            f"{100 * cv.get('confidence', float('nan')):.1f})")
    lines += [f"p = P(the graph's top answer is right), predicted from evidence (`grasp.fuse.confidence`); {uses}. "
              "\"wrong → low\": of the queries whose graph answer is wrong, the share flagged (evidence: p < 0.5 "
              "or no candidate; planner: its risk level no_trade or weak); \"right → kept\": of those whose graph "
              "answer is right, the share not flagged.", "",
              "| queries | n | graph right % | AUC | Brier | ECE | wrong → low (evidence) | wrong → low (planner) | "
              "right → kept (evidence) | right → kept (planner) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [_row(name, r) for name, r in curves.items()]
    lines += ["", f"`{FIGURE}`: observed share right per predicted-probability bin (the count beside each point)."]
    return lines
