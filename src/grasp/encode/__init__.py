"""Encoders, the on-disk embedding store and vector indexes."""

from grasp.encode.encoder import Encoder, OpenAIEmbeddingEncoder, SentenceTransformerEncoder, build_encoder
from grasp.encode.index import ExactIndex, FaissIndex, VectorIndex
from grasp.encode.node_vectors import NodeVectors
from grasp.encode.store import EmbeddingStore

__all__ = [
    "Encoder", "SentenceTransformerEncoder", "OpenAIEmbeddingEncoder", "build_encoder",
    "ExactIndex", "FaissIndex", "VectorIndex", "NodeVectors", "EmbeddingStore",
]
