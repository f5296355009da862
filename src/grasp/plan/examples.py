"""Worked examples for an SKB that ships none: drawn from its own train split.

Train queries are planned zero-shot (no examples in the prompt); a plan becomes an example
only if Stage 1 with that plan ranks a gold answer in the top ``max_rank``. One example per
query template (or the first ones when queries carry no template) keeps the prompt varied.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from grasp.plan.prompt import Example
from grasp.results import Query
from grasp.storage import atomic_file


def select_examples(graph_retriever, queries: Sequence[Query], *, max_examples: int = 12, max_rank: int = 10,
                    progress: bool = False) -> list[Example]:
    """Examples whose (cached or fresh) plan retrieves a gold answer within ``max_rank``."""
    chosen: list[Example] = []
    templates: set[str | None] = set()
    for q in queries:
        if len(chosen) >= max_examples:
            break
        if q.template is not None and q.template in templates:
            continue
        ranking = graph_retriever.search_query(q, max_rank)
        trace = ranking.trace  # the graph stage's GraphTrace
        if trace.plan_status not in ("valid", "repaired"):
            continue
        if not set(ranking.node_ids.tolist()) & set(q.answer_ids):
            continue
        templates.add(q.template)
        chosen.append(Example(q.qid, q.text, trace.plan))
    return chosen


def write_examples(examples: Sequence[Example], path: Path) -> None:
    with atomic_file(Path(path), "w", encoding="utf-8") as f:
        for ex in examples:
            f.write(json.dumps({"qid": ex.qid, "query": ex.query, "plan": ex.plan}, ensure_ascii=False) + "\n")
