"""LangChain: GRASP as a ``BaseRetriever`` returning ``Document`` s (page content: the node's document; metadata:
node id, name, type, score, rank, each stage's rank, the plan).

::

    from grasp import Searcher
    from grasp.adapters.langchain_retriever import GraspRetriever
    retriever = GraspRetriever(searcher=Searcher.demo(), k=5)
    retriever.invoke("python packages that parse yaml")
"""

from __future__ import annotations

from typing import Any

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as e:  # pragma: no cover - said to the user
    from grasp.errors import ConfigError

    raise ConfigError("the LangChain adapter needs langchain-core: pip install 'grasp-retrieval[langchain]'") from e

from pydantic import ConfigDict, Field

from grasp.adapters import documents
from grasp.inputs import MAX_K


class GraspRetriever(BaseRetriever):
    """A :class:`~grasp.Searcher` as a LangChain retriever."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    searcher: Any = Field(description="a grasp.Searcher")
    k: int = Field(10, ge=1, le=MAX_K, description="documents returned per query")

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [Document(page_content=text, metadata=meta, id=str(meta["node_id"]))
                for text, _, meta in documents(self.searcher, query, self.k)]
