"""Reading and writing queries with gold answers: the open format's ``qa/queries.jsonl``
(the :class:`~grasp.results.Query` shape lives beside :class:`~grasp.results.Ranking`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from grasp.errors import FormatError
from grasp.inputs import query_problem
from grasp.results import Query
from grasp.skb.graph import SKB
from grasp.skb.textio import iter_json_objects


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
        if (problem := query_problem(text)) is not None:
            raise FormatError(problem, file=path, line=lineno, field="query")
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


def load_queries(path: Path | str) -> list[Query]:
    """Queries from a ``queries.jsonl`` file, or from a STaRK QA folder (``stark_qa/stark_qa.csv`` with
    ``split/*.index``, as STaRK publishes them): what ``--queries`` accepts."""
    path = Path(path)
    if path.is_dir():
        from grasp.skb.stark import read_stark_qa

        return read_stark_qa(path)
    return read_queries(path)


def default_queries_path(skb: SKB) -> Path:
    """The SKB's ``qa/queries.jsonl``; for a STaRK processed folder without one, a STaRK QA folder ``qa/``
    beside it (``stark_qa/`` and ``split/``), when there is one."""
    own = Path(skb.source) / "qa" / "queries.jsonl"
    beside = Path(skb.source).parent / "qa"
    if not own.exists() and "stark_dataset" in skb.meta and (beside / "stark_qa").is_dir():
        return beside
    return own


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


def check_answers(queries: list[Query], skb: SKB, path: Path | str) -> list[Query]:
    """The queries, once every gold answer is checked to be a candidate node of ``skb``; else the
    first bad answer as a :class:`FormatError` naming the file, the query and the field."""
    for q in queries:
        bad = [a for a in q.answer_ids if not 0 <= a < skb.num_nodes]
        if bad:
            raise FormatError(f"query {q.qid}: answer id {bad[0]} is not a node", file=path, field="answer_ids")
        non_cand = [a for a in q.answer_ids if not skb.candidate_mask[a]]
        if non_cand:
            raise FormatError(f"query {q.qid}: answer {non_cand[0]} is not of a candidate type", file=path,
                              field="answer_ids")
    return queries
