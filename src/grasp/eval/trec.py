"""TREC run and qrels files: ``qid Q0 docno rank score tag`` and ``qid 0 docno relevance``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from grasp.errors import FormatError
from grasp.results import Query, Ranking, Run
from grasp.storage import atomic_file


def write_run(run: Run, path: Path | str, *, tag: str | None = None) -> None:
    tag = tag or run.name or "grasp"
    with atomic_file(Path(path), "w", encoding="utf-8") as f:
        for qid, ranking in run.items():
            for rank, (nid, score) in enumerate(zip(ranking.node_ids.tolist(), ranking.scores.tolist(), strict=True), 1):
                f.write(f"{qid} Q0 {nid} {rank} {score:.6f} {tag}\n")


def read_run(path: Path | str, name: str | None = None) -> Run:
    path = Path(path)
    rows: dict[str, list[tuple[int, float]]] = {}
    tag = None
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise FormatError(f"expected 6 columns 'qid Q0 docno rank score tag', got {len(parts)}", file=path, line=lineno)
            qid, _, docno, _, score, tag = parts
            try:
                rows.setdefault(qid, []).append((int(docno), float(score)))
            except ValueError:
                raise FormatError("docno must be an integer node id and score a number", file=path, line=lineno) from None
    run = Run(name or tag or path.stem)
    for qid, items in rows.items():
        ids = np.array([i for i, _ in items], dtype=np.int64)
        scores = np.array([s for _, s in items], dtype=np.float64)
        run.add(Ranking.from_scores(qid, ids, scores, stage=run.name))
    return run


def write_qrels(queries: Sequence[Query], path: Path | str) -> None:
    with atomic_file(Path(path), "w", encoding="utf-8") as f:
        for q in queries:
            for a in q.answer_ids:
                f.write(f"{q.qid} 0 {a} 1\n")
