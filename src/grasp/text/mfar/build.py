"""Building mFAR from the ``mfar`` configuration: its field index and, when trained, its weights."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grasp.config import BM25Config, MFARConfig, VectorIndexConfig
from grasp.encode.encoder import Encoder
from grasp.encode.node_vectors import NodeVectors
from grasp.skb.documents import DocumentLayout
from grasp.skb.graph import SKB
from grasp.text.mfar.fields_index import FieldIndex
from grasp.text.mfar.retriever import MFARRetriever


def build_mfar(cfg: MFARConfig, skb: SKB, layout: DocumentLayout, encoder: Encoder, index_dir: Path, *,
               bm25: BM25Config, node_vectors: NodeVectors, vector_index: VectorIndexConfig,
               progress: bool = True) -> MFARRetriever:
    """mFAR over the SKB's fields (indexes under ``index_dir``), with uniform weights (:func:`load_weights`
    loads trained ones)."""
    index = FieldIndex(skb, layout, encoder, index_dir, bm25=bm25, fields=cfg.fields, dense_fields=cfg.dense_fields,
                       node_vectors=node_vectors, max_names=cfg.max_names, vector_index=vector_index,
                       progress=progress)
    return MFARRetriever(index, depth=cfg.depth)


def untrained_prior(retriever: MFARRetriever, fields: Sequence[str]) -> bool:
    """Serve without trained weights as if only ``fields`` mattered: their BM25 and dense scorers weighted alike,
    every other (field, scorer) pair at zero (the query-conditioned part stays zero). False (and mFAR's uniform
    initialisation kept) when none of ``fields`` is active."""
    import torch

    active = [True] * retriever.index.n_fields + list(retriever.index.has_dense)
    keep = [a and name.split(":", 1)[1] in fields for name, a in zip(retriever.weight_names(), active, strict=True)]
    if not any(keep):
        return False
    with torch.no_grad():
        retriever.weights.proj.bias.copy_(torch.tensor([0.0 if k else -30.0 for k in keep]))
    return True


def load_weights(retriever: MFARRetriever, path: Path) -> None:
    """Load the field weights `grasp train mfar` saved (checked against their manifest by the caller)."""
    import torch

    from grasp.errors import ArtifactMismatchError

    try:
        retriever.weights.load_state_dict(torch.load(path, weights_only=True))
    except (RuntimeError, KeyError) as e:
        first = str(e).strip().splitlines()[0]
        raise ArtifactMismatchError(f"mFAR weights ({path}) do not fit this index: {first}") from None
    retriever.trained = True
