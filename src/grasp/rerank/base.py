"""The reranker interface: (query, candidate documents) -> one relevance score per candidate."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np


class Reranker(ABC):
    name: str = "reranker"

    @abstractmethod
    def score(self, query: str, documents: Sequence[str]) -> np.ndarray:
        """Relevance of each document to the query (higher is better)."""
