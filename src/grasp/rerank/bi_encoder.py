"""The zero-shot default: cosine between the query and the serialized candidate, by the encoder.

No pretrained cross-encoder can be had offline and a fresh classification head is random, so
the untrained reranker that works is the bi-encoder over the reranker's own candidate text
(type, fields and 1-hop neighbours), which differs from the dense retriever's document."""

from __future__ import annotations

import numpy as np

from grasp.encode.encoder import Encoder
from grasp.rerank.base import VectorReranker


class BiEncoderReranker(VectorReranker):
    name = "bi-encoder"

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder

    @property
    def document_encoder(self) -> Encoder:
        return self.encoder

    def query_vector(self, query: str) -> np.ndarray:
        return np.asarray(self.encoder.encode_queries([query])[0], dtype=np.float32)
