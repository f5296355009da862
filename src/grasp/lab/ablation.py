"""The ablation report (paper Table 1, lower block, and its case studies): each stage's metrics on
a split, a bar chart, and the rank of the gold answer as it moves through the stages."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from grasp import methods
from grasp.artifacts import ARTIFACT_LABELS, code_version
from grasp.errors import GraspError
from grasp.eval.evaluate import EvalReport, evaluate_run, markdown_table
from grasp.packaged import DATA
from grasp.storage import checksum
from grasp.workspace import Workspace

STAGES = [
    ("bm25", "BM25"),
    ("dense", "dense (single vector)"),
    ("mfar", "mFAR"),
    ("graph", "graph only (Stage 1)"),
    ("fused", "+ fusion (Stage 2)"),
    ("grasp-zs", "+ zero-shot reranker"),
    ("grasp", "+ trained reranker (GRASP)"),
]
PROGRESSION = ("mfar", "graph", "fused", "grasp-zs", "grasp")


def ablation(ws: Workspace, *, split: str = "test", limit: int | None = None, out_dir: Path, examples: int = 3,
             sensitivity_figures: bool = True, queries_file: Path | None = None) -> str:
    """Each stage is computed once: the most complete prepared method runs with all its stages kept
    (graph, mFAR, fused, reranker and the final fusion, grasp or grasp-zs), the zero-shot reranker reranks that same fused run, and the
    baselines run on their own. Then the validation sensitivity figures (:mod:`grasp.lab.sensitivity`).
    ``queries_file``: the queries to report on (default: the workspace's, e.g. the labelled test split of a KB
    whose stages were trained on synthetic queries)."""
    queries = ws.queries(queries_file, split=split, limit=limit)
    ready = methods.readiness(ws)
    k = ws.config.search.depth
    runs: dict = {}
    full = next((m for m in ("grasp", "grasp-zs", "fused") if ready[m] is None), None)
    if full is not None:
        runs.update(methods.retriever(ws, full).batch_search_stages(queries, k, progress=ws.progress))
        if full == "grasp" and ready["grasp-zs"] is None and "grasp-zs" not in runs:  # grasp over fused
            runs["grasp-zs"] = methods.retriever(ws, "grasp-zs").from_upstream(queries, runs["fused"], k, progress=ws.progress)[1]
    reports, skipped = [], []
    for method, label in STAGES:
        if method not in runs:
            try:
                runs[method] = methods.run(ws, method, queries, k)
            except GraspError as e:
                skipped.append(f"- {label}: skipped ({e})")
                continue
        rep = evaluate_run(runs[method], queries, candidate_mask=ws.skb.candidate_mask)
        rep.method = label
        reports.append(rep)
    out_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"# Ablation on {ws.skb.name}, split {split} ({len(queries)} queries)", "", markdown_table(reports)]
    untuned = methods.untuned(ws)
    notes = [f"- {label}: untuned defaults for {'; '.join(untuned[m])}" for m, label in STAGES
             if untuned.get(m) and m in runs]
    notes += unplanned_note(ws, queries)
    if skipped or notes:
        lines += ["", *skipped, *notes]
    lines += ["", "## Rank of the first gold answer through the stages", ""]
    shown = [m for m in PROGRESSION if m in runs]
    lines.append("| query | " + " | ".join(shown) + " |")
    lines.append("|---|" + "---:|" * len(shown))
    final = runs.get("grasp") or runs.get("grasp-zs") or runs.get("fused")
    picked = 0
    for q in queries:
        if final is None or picked >= examples:
            break
        rank = _first_gold_rank(final.get(q.qid), q.answer_ids)
        if rank != 1:  # case studies: queries the full pipeline answers at rank 1
            continue
        cells = [str(_first_gold_rank(runs[m].get(q.qid), q.answer_ids) or "–") for m in shown]
        lines.append(f"| {q.text[:90]} | " + " | ".join(cells) + " |")
        picked += 1
    if sensitivity_figures:
        from grasp.lab.sensitivity import sensitivity

        lines += ["", *sensitivity(ws, out_dir)]
    from grasp.lab.calibration import confidence_section

    lines += ["", *confidence_section(ws, queries, split, runs, out_dir)]
    provenance = report_provenance(ws, split=split, limit=limit, queries_file=queries_file)
    lines += ["", f"Made by `{provenance['command']}` with {provenance['code']}; the trained artifacts it read and "
              "their checksums are in `provenance.json`."]
    text = "\n".join(lines) + "\n"
    (out_dir / "ablation.md").write_text(text)
    (out_dir / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
    _bar_chart(reports, out_dir / "ablation.png", title=f"{ws.skb.name} ({split})")
    return text


def unplanned_note(ws: Workspace, queries: list) -> list[str]:
    """With planner.kind=cache, the queries whose plan is not cached (their graph branch is empty, so every stage
    over it is measured without it): a line saying how many and how to plan them, or nothing."""
    if ws.config.planner.kind != "cache" or not queries:
        return []
    planner = ws.planner
    missing = sum(planner.cached(q.text) is None for q in queries)
    if not missing:
        return []
    line = (f"- graph: {missing} of {len(queries)} queries have no cached plan under this prompt (planner.kind=cache): "
            "their graph branch is empty; plan them with `grasp plans build` and the same settings")
    warnings.warn(line[2:], stacklevel=2)
    return [line]


def report_provenance(ws: Workspace, *, split: str, limit: int | None, queries_file: Path | None = None) -> dict:
    """What made a report: the command, the code version, the SKB, and each trained artifact it read with its
    checksum (a shipped one by its path inside the package), so that a table older than the artifacts it
    describes can be found (``tests/unit/test_docs.py``)."""
    artifacts = {}
    for name in ARTIFACT_LABELS:
        path = ws.artifact(name)
        if path is not None:
            shipped = path.resolve().is_relative_to(DATA)
            artifacts[name] = {"path": path.resolve().relative_to(DATA).as_posix() if shipped else "workspace",
                               "sha256": checksum(path)}
    sets = "".join(f" --set {key}={value}" for key, value in _changed(ws.config.model_dump(mode="json", exclude_defaults=True,
                                                                                     exclude={"cache_dir"})))
    command = (f"grasp{sets} report --skb {ws.skb.name}" + (f" --queries {queries_file}" if queries_file else "")
               + f" --split {split}" + (f" --limit {limit}" if limit else ""))
    return {"command": command, "code": code_version(), "skb": ws.skb_identity, "artifacts": artifacts}


def _changed(values: dict, prefix: str = "") -> list[tuple[str, object]]:
    """The configuration's non-default values as (dotted key, JSON value) pairs, as ``--set`` takes them."""
    out = []
    for key, value in values.items():
        if isinstance(value, dict) and value:
            out += _changed(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", json.dumps(value) if not isinstance(value, str) else value))
    return out


def _first_gold_rank(ranking, gold) -> int | None:
    return ranking.first_rank_in(gold) if ranking is not None else None


def _bar_chart(reports: list[EvalReport], path: Path, *, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    metrics = ["hit@1", "hit@5", "recall@20", "mrr"]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(reports)), 4.5))
    x = np.arange(len(reports))
    for j, m in enumerate(metrics):
        ax.bar(x + (j - 1.5) * 0.2, [100 * r.means[m] for r in reports], 0.2, label=m)
    ax.set_xticks(x, [r.method for r in reports], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("%")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
