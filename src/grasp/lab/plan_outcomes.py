"""`grasp plans report`: what the planner does on a split, judged by execution.

Per query: the plan's status (valid, repaired, rejected for a reason, empty), whether the graph's
executed candidates (all of them, not only the top k) contain a gold answer, and the graph stage's
own Hit@1 and MRR, overall and per template, so that a planner change is judged on one table.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from grasp import methods
from grasp.eval.metrics import score_query
from grasp.results import Query
from grasp.workspace import Workspace

COLUMNS = ("n", "usable", "repaired", "rejected", "empty", "failed", "gold_in_candidates", "hit@1", "mrr")


def reason_kind(reason: str | None) -> str:
    """A rejection reason with its variables and names blanked, so that reasons of one kind count together."""
    text = re.sub(r"'[^']*'", "…", reason or "no reason")
    text = re.sub(r"\b[A-Z][A-Za-z]?[0-9]*\b", "V", text)
    return text.split(" (")[0]


def plans_report(ws: Workspace, queries: Sequence[Query], *, progress: bool = False) -> dict:
    """The table (``rows``: overall first, then one per template) and the rejection reasons by kind."""
    graph = methods.retriever(ws, "graph")
    outcomes = ws.planner.plan_many(queries, progress=progress)
    per_query = []
    mask = ws.skb.candidate_mask
    for q in queries:
        outcome = outcomes[q.qid]
        ranking = graph.search_query(q, None, outcome)  # every executed candidate
        scores = score_query(ranking.node_ids, np.asarray(q.answer_ids, dtype=np.int64), ("hit@1", "mrr"),
                             candidate_mask=mask)
        trace = ranking.trace  # the plan Stage 1 used (with planner.samples > 1, the best corroborated one)
        status = trace.plan_status
        per_query.append({"qid": q.qid, "template": q.template, "status": status,
                          "reason": reason_kind(trace.plan_reason) if status == "rejected" else None,
                          "gold_in_candidates": bool(set(ranking.node_ids.tolist()) & set(q.answer_ids)),
                          "failed": trace.error is not None,
                          "n_cand": len(ranking), "link_confidence": trace.link_confidence, **scores})
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in per_query:
        groups["all"].append(row)
        if row["template"] is not None:
            groups[row["template"]].append(row)
    rows = [{"group": name, **_summary(items)} for name, items in groups.items()]
    reasons = Counter(r["reason"] for r in per_query if r["reason"])
    return {"skb": ws.skb.name, "planner": ws.planner.model_id, "format": ws.config.planner.format,
            "grammar": ws.planner.grammar, "samples": ws.planner.samples, "rows": rows, "reject_reasons": dict(reasons.most_common()),
            "per_query": per_query}


def _summary(items: list[dict]) -> dict:
    n = len(items)
    share = lambda pred: sum(pred(r) for r in items) / n  # noqa: E731
    return {"n": n, "usable": share(lambda r: r["status"] in ("valid", "repaired")),
            "repaired": share(lambda r: r["status"] == "repaired"), "rejected": share(lambda r: r["status"] == "rejected"),
            "empty": share(lambda r: r["status"] == "empty"), "failed": share(lambda r: r["failed"]),
            "gold_in_candidates": share(lambda r: r["gold_in_candidates"]),
            "hit@1": float(np.mean([r["hit@1"] for r in items])), "mrr": float(np.mean([r["mrr"] for r in items]))}


def report_markdown(report: dict) -> str:
    head = "| template | " + " | ".join(COLUMNS) + " |"
    lines = [f"Plans on {report['skb']} ({report['planner']}, {report['format']} format, grammar "
             f"{'on' if report['grammar'] else 'off'}, {report['samples']} plan(s) per query); shares and metrics in %",
             "", head,
             "|---|" + "---:|" * len(COLUMNS)]
    for row in report["rows"]:
        cells = [str(row["n"])] + [f"{100 * row[c]:.1f}" for c in COLUMNS[1:]]
        lines.append(f"| {row['group']} | " + " | ".join(cells) + " |")
    if report["reject_reasons"]:
        lines += ["", "Rejected, by reason:"] + [f"- {n} × {why}" for why, n in report["reject_reasons"].items()]
    return "\n".join(lines) + "\n"
