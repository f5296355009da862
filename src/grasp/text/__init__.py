"""Text retrievers, the graph stage's partners: BM25, single-vector dense, and mFAR (multi-field BM25 +
dense, Stage 2's dense branch)."""

from grasp.text.bm25 import BM25Retriever
from grasp.text.dense import DenseRetriever

__all__ = ["BM25Retriever", "DenseRetriever"]
