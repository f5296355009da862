"""Knowledge-base layer: schema, in-memory graph, readers/writers, documents, queries."""

from __future__ import annotations

from pathlib import Path

from grasp.errors import FormatError
from grasp.results import Query
from grasp.skb.graph import SKB, Adjacency
from grasp.skb.open_format import is_open_format, read_skb, write_skb
from grasp.skb.queries import (
    check_answers,
    default_queries_path,
    load_queries,
    read_queries,
    select_queries,
    write_queries,
)
from grasp.skb.schema import NodeTypeSpec, RelationSpec, Schema
from grasp.skb.stark import is_stark_processed, read_stark_qa, read_stark_skb


def load_skb(path: Path | str, *, stark_dataset: str | None = None) -> SKB:
    """Load an SKB from an open-format directory or a STaRK processed directory.

    STaRK directories contain pickles, which can execute code: only pass directories you trust.
    """
    path = Path(path)
    if not path.exists():
        raise FormatError("knowledge base directory not found", file=path)
    if is_open_format(path):
        return read_skb(path)
    if is_stark_processed(path):
        return read_stark_skb(path, stark_dataset)
    raise FormatError("neither an open-format SKB (schema.json) nor a STaRK processed directory (node_info.pkl)", file=path)


__all__ = [
    "SKB", "Adjacency", "Schema", "NodeTypeSpec", "RelationSpec", "Query",
    "load_skb", "read_skb", "write_skb", "read_stark_skb", "read_stark_qa",
    "read_queries", "load_queries", "default_queries_path", "write_queries", "select_queries", "check_answers",
]
