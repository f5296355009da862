"""Text retrievers: BM25 and single-vector dense (mFAR joins them in Stage 2)."""

from grasp.dense.bm25 import BM25Retriever
from grasp.dense.dense import DenseRetriever

__all__ = ["BM25Retriever", "DenseRetriever"]
