"""Queries with gold answers: the open format's ``qa/queries.jsonl``."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from grasp.errors import FormatError
from grasp.skb.textio import iter_json_objects


@dataclass
class Query:
    """One query. ``qid`` is the query id as a string (TREC runs need strings)."""

    qid: str
    text: str
    answer_ids: list[int] = field(default_factory=list)
    split: str | None = None
    template: str | None = None

    def to_json(self) -> dict:
        out: dict = {"id": _id_value(self.qid), "query": self.text, "answer_ids": list(self.answer_ids)}
        if self.template is not None:
            out["template"] = self.template
        if self.split is not None:
            out["split"] = self.split
        return out


def _id_value(qid: str) -> int | str:
    return int(qid) if qid.lstrip("-").isdigit() else qid


def read_queries(path: Path | str) -> list[Query]:
    """Read a queries.jsonl file, checking every line; errors name the file, line and field."""
    path = Path(path)
    if not path.exists():
        raise FormatError("queries file not found", file=path)
    queries: list[Query] = []
    seen: dict[str, int] = {}
    for lineno, rec in iter_json_objects(path):
        qid = rec.get("id")
        if not isinstance(qid, (int, str)) or isinstance(qid, bool) or qid == "":
            raise FormatError("missing or invalid query id", file=path, line=lineno, field="id")
        qid = str(qid)
        if qid in seen:
            raise FormatError(f"duplicate query id {qid} (first on line {seen[qid]})", file=path, line=lineno, field="id")
        seen[qid] = lineno
        text = rec.get("query")
        if not isinstance(text, str) or not text.strip():
            raise FormatError("missing or empty query text", file=path, line=lineno, field="query")
        answers = rec.get("answer_ids", [])
        if not isinstance(answers, list) or not all(isinstance(a, int) and not isinstance(a, bool) for a in answers):
            raise FormatError("must be a list of integer node ids", file=path, line=lineno, field="answer_ids")
        split = rec.get("split")
        template = rec.get("template")
        for name, value in (("split", split), ("template", template)):
            if value is not None and not isinstance(value, str):
                raise FormatError("must be a string", file=path, line=lineno, field=name)
        queries.append(Query(qid, text, answers, split, template))
    return queries


def write_queries(queries: Iterable[Query], path: Path | str) -> None:
    """Write queries.jsonl (atomically)."""
    from grasp.storage import atomic_file

    with atomic_file(Path(path), "w", encoding="utf-8") as f:
        for q in queries:
            f.write(json.dumps(q.to_json(), ensure_ascii=False) + "\n")


def select_queries(queries: list[Query], split: str | None = None, limit: int | None = None) -> list[Query]:
    """Keep one split (any name) and then the first ``limit`` queries in file order."""
    if split is not None:
        queries = [q for q in queries if q.split == split]
    if limit is not None:
        queries = queries[:limit]
    return queries
