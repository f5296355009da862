"""Stage 3: rerankers (zero-shot bi-encoder, fine-tuned cross-encoder) and the final fusion."""

from grasp.rerank.base import Reranker
from grasp.rerank.bi_encoder import BiEncoderReranker
from grasp.rerank.cross_encoder import CrossEncoderReranker
from grasp.rerank.retriever import RerankedRetriever
from grasp.rerank.train import RerankTrainConfig, build_records, train_reranker

__all__ = ["Reranker", "BiEncoderReranker", "CrossEncoderReranker", "RerankedRetriever", "RerankTrainConfig",
           "build_records", "train_reranker"]
