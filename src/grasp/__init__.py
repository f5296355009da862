"""GRASP: graph-planned, fused and reranked retrieval over semi-structured knowledge bases.

The public API is a handful of verbs and shapes::

    from grasp import Searcher
    searcher = Searcher.open("path/to/skb")            # Searcher.demo(): the bundled demo KB
    result = searcher.search("python library for parsing yaml", k=10)
    result.hits[0].stage_ranks, result.traces["graph"].cypher, result.to_dataframe()

    from grasp import Workspace, methods                # lower level: one retriever per method
    ws = Workspace.open("path/to/skb")
    ranking = methods.retriever(ws, "bm25").search("python library for parsing yaml", k=10)
"""

from grasp.api import Hit, Searcher, SearchResult, prepare, results_to_dataframe, results_to_run
from grasp.config import GraspConfig, load_config
from grasp.errors import FormatError, GraspError, InputError
from grasp.eval import EvalReport, evaluate_run, markdown_table, read_run, write_run
from grasp.methods import METHODS
from grasp.results import Query, Ranking, Run, StageTrace
from grasp.retriever import Retriever
from grasp.skb import SKB, load_skb, read_queries, write_skb
from grasp.workspace import Workspace

__version__ = "0.1.0"

__all__ = [
    "Searcher", "SearchResult", "Hit", "prepare", "results_to_dataframe", "results_to_run", "InputError",
    "GraspConfig", "load_config", "GraspError", "FormatError", "EvalReport", "evaluate_run",
    "markdown_table", "read_run", "write_run", "METHODS", "Workspace", "Ranking", "Run", "StageTrace",
    "Retriever", "SKB", "Query", "load_skb", "read_queries", "write_skb", "__version__",
]
