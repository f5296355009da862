"""GRASP where its users already are: thin layers over :class:`grasp.Searcher` for PyTerrier (a ``Transformer``),
LangChain and LlamaIndex (their ``BaseRetriever``). Each needs its library (``pip install
'grasp-retrieval[pyterrier]'``, ``[langchain]``, ``[llamaindex]``) and is imported from its own module, so that
importing :mod:`grasp` never imports them."""

from __future__ import annotations

from typing import Any

from grasp.api import Searcher, SearchResult


def hit_metadata(result: SearchResult, rank: int) -> dict[str, Any]:
    """What an application framework's document carries about one hit: node id, name and type, its score and rank,
    its rank in each stage, and the plan the graph stage executed (where it ran and the result was explained)."""
    hit = result.hits[rank]
    graph = result.traces.get("graph")
    return {"node_id": hit.node_id, "name": hit.name, "type": hit.type, "score": hit.score, "rank": hit.rank,
            "stage_ranks": dict(hit.stage_ranks), "method": result.method,
            "plan": getattr(graph, "plan", None)}


def documents(searcher: Searcher, query: str, k: int) -> list[tuple[str, float, dict[str, Any]]]:
    """(text, score, metadata) of each of the top ``k`` nodes for ``query``: what both retrievers return, shaped
    for their frameworks. The text is the node's document (name, type and fields) as the KB's layout renders it."""
    result = searcher.search(query, k, explain=True)
    return [(searcher.document(h.node_id), h.score, hit_metadata(result, i)) for i, h in enumerate(result.hits)]
