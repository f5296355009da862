"""Evaluation: STaRK's metrics, reports, TREC files."""

from grasp.eval.evaluate import EvalReport, evaluate_run, markdown_table
from grasp.eval.metrics import DEFAULT_METRICS, hit_at_k, recall_at_k, reciprocal_rank, score_query
from grasp.eval.trec import read_run, write_qrels, write_run

__all__ = [
    "DEFAULT_METRICS", "hit_at_k", "recall_at_k", "reciprocal_rank", "score_query",
    "EvalReport", "evaluate_run", "markdown_table", "read_run", "write_run", "write_qrels",
]
