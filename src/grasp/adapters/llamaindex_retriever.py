"""LlamaIndex: GRASP as a ``BaseRetriever`` returning ``NodeWithScore`` s (a ``TextNode`` per KB node: its document as
text, the node id as id, name, type, rank, each stage's rank and the plan as metadata).

::

    from grasp import Searcher
    from grasp.adapters.llamaindex_retriever import GraspLlamaIndexRetriever
    retriever = GraspLlamaIndexRetriever(Searcher.demo(), k=5)
    retriever.retrieve("python packages that parse yaml")
"""

from __future__ import annotations

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as e:  # pragma: no cover - said to the user
    from grasp.errors import ConfigError

    raise ConfigError("the LlamaIndex adapter needs llama-index-core: pip install 'grasp-retrieval[llamaindex]'") from e

from grasp.adapters import documents
from grasp.api import Searcher
from grasp.inputs import check_k


class GraspLlamaIndexRetriever(BaseRetriever):
    """A :class:`~grasp.Searcher` as a LlamaIndex retriever."""

    def __init__(self, searcher: Searcher, k: int = 10, **kwargs) -> None:
        super().__init__(**kwargs)
        self.searcher, self.k = searcher, check_k(k)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(id_=str(meta["node_id"]), text=text, metadata=meta), score=score)
                for text, score, meta in documents(self.searcher, query_bundle.query_str, self.k)]
