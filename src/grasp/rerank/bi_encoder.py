"""The zero-shot default: cosine between the query and the serialized candidate, by the encoder.

No pretrained cross-encoder can be had offline and a fresh classification head is random, so
the untrained reranker that works is the bi-encoder over the reranker's own candidate text
(type, fields and 1-hop neighbours), which differs from the dense retriever's document."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from grasp.encode.encoder import Encoder
from grasp.rerank.base import DocumentVectorCache, Reranker


class BiEncoderReranker(Reranker):
    name = "bi-encoder"

    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.documents = DocumentVectorCache(lambda texts: np.asarray(encoder.encode(texts), dtype=np.float32))

    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        if not documents:
            return np.zeros(0)
        q = self.encoder.encode_queries([query])[0]
        return self.documents(list(documents)) @ q
