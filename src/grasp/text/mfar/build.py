"""Building mFAR from the ``mfar`` configuration: its field index and, when trained, its weights."""

from __future__ import annotations

from pathlib import Path

from grasp.config import BM25Config, MFARConfig
from grasp.encode.encoder import Encoder
from grasp.encode.node_vectors import NodeVectors
from grasp.skb.documents import DocumentLayout
from grasp.skb.graph import SKB
from grasp.text.mfar.fields_index import FieldIndex
from grasp.text.mfar.retriever import MFARRetriever


def build_mfar(cfg: MFARConfig, skb: SKB, layout: DocumentLayout, encoder: Encoder, index_dir: Path, *,
               bm25: BM25Config, node_vectors: NodeVectors, dtype: str, weights: Path | None = None,
               progress: bool = True) -> MFARRetriever:
    """mFAR over the SKB's fields (indexes under ``index_dir``), with the field weights saved at
    ``weights`` when given (`grasp train mfar`), else uniform."""
    index = FieldIndex(skb, layout, encoder, index_dir, bm25=bm25, fields=cfg.fields, dense_fields=cfg.dense_fields,
                       node_vectors=node_vectors, max_names=cfg.max_names, dtype=dtype, progress=progress)
    retriever = MFARRetriever(index, depth=cfg.depth)
    if weights is not None:
        import torch

        retriever.weights.load_state_dict(torch.load(weights, weights_only=True))
        retriever.trained = True
    return retriever
