"""Evaluate a run against gold answers and report: mean metrics, per-template breakdown,
per-query rows, as JSON and as a markdown table."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grasp.eval.metrics import DEFAULT_METRICS, score_query
from grasp.results import Query, Run


@dataclass
class EvalReport:
    method: str
    n: int
    means: dict[str, float]
    per_query: list[dict[str, Any]] = field(default_factory=list)
    per_template: dict[str, dict[str, float]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self, *, per_query: bool = True) -> dict[str, Any]:
        """``{"method", "n", <metric>: value, ..., "per_template", "per_query", ...}``; values are
        fractions in [0, 1]."""
        out: dict[str, Any] = {"method": self.method, "n": self.n, **self.means}
        if self.per_template:
            out["per_template"] = self.per_template
        out.update(self.info)
        if per_query:
            out["per_query"] = self.per_query
        return out

    def to_markdown(self, *, percent: bool = True) -> str:
        metrics = list(self.means)
        fmt = (lambda v: f"{100 * v:.1f}") if percent else (lambda v: f"{v:.3f}")
        lines = [f"| method | n | {' | '.join(metrics)} |", "|---|---:|" + "---:|" * len(metrics)]
        lines.append(f"| {self.method} | {self.n} | " + " | ".join(fmt(self.means[m]) for m in metrics) + " |")
        if self.per_template:
            lines += ["", f"| template | n | {' | '.join(metrics)} |", "|---|---:|" + "---:|" * len(metrics)]
            for t, row in sorted(self.per_template.items()):
                lines.append(f"| {t} | {int(row['n'])} | " + " | ".join(fmt(row[m]) for m in metrics) + " |")
        return "\n".join(lines) + "\n"


def evaluate_run(run: Run, queries: Sequence[Query], *, candidate_mask: np.ndarray | None = None,
                 metrics: Sequence[str] = DEFAULT_METRICS) -> EvalReport:
    """Score every query (a query missing from the run scores 0) and average."""
    rows = []
    empty = np.zeros(0, dtype=np.int64)
    for q in queries:
        ranked = run[q.qid].node_ids if q.qid in run else empty
        scores = score_query(ranked, np.asarray(q.answer_ids), metrics, candidate_mask)
        rows.append({"qid": q.qid, "template": q.template, **scores})
    means = {m: (float(np.mean([r[m] for r in rows])) if rows else 0.0) for m in metrics}
    per_template: dict[str, dict[str, float]] = {}
    templates = sorted({r["template"] for r in rows if r["template"]})
    for t in templates:
        sub = [r for r in rows if r["template"] == t]
        per_template[t] = {"n": len(sub), **{m: float(np.mean([r[m] for r in sub])) for m in metrics}}
    return EvalReport(run.name, len(rows), means, rows, per_template)


def markdown_table(reports: Sequence[EvalReport], *, percent: bool = True) -> str:
    """Several methods side by side (one row each)."""
    if not reports:
        return ""
    metrics = list(reports[0].means)
    fmt = (lambda v: f"{100 * v:.1f}") if percent else (lambda v: f"{v:.3f}")
    lines = [f"| method | n | {' | '.join(metrics)} |", "|---|---:|" + "---:|" * len(metrics)]
    for r in reports:
        lines.append(f"| {r.method} | {r.n} | " + " | ".join(fmt(r.means[m]) for m in metrics) + " |")
    return "\n".join(lines) + "\n"
