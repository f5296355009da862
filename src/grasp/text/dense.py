"""Dense retrieval: cosine between the query and each candidate's full-document embedding."""

from __future__ import annotations

from collections.abc import Sequence

from grasp.encode.node_vectors import NodeVectors
from grasp.progress import announce
from grasp.results import Query, Ranking, Run
from grasp.retriever import Retriever


class DenseRetriever(Retriever):
    """Single-vector dense baseline over doc-mode embeddings of every candidate type."""

    name = "dense"

    def __init__(self, vectors: NodeVectors) -> None:
        self.vectors = vectors
        self.candidate_types = list(vectors.skb.schema.candidate_types)
        for t in self.candidate_types:  # build (or load) every index now, not on the first query
            vectors.index("doc", t)

    def batch_search(self, queries: Sequence[Query], k: int = 100, *, progress: bool = False) -> Run:
        run = Run(self.name)
        if not queries:
            return run
        announce("dense", "encoding the query and searching the document vectors")
        q = self.vectors.encoder.encode_queries([x.text for x in queries], progress=progress)
        ids, scores = self.vectors.search(q, "doc", self.candidate_types, k)
        for query, i, s in zip(queries, ids, scores, strict=True):
            keep = i >= 0
            run.add(Ranking(query.qid, i[keep], s[keep], stage=self.name))
        return run
