"""mFAR: the multi-field adaptive retriever (Li et al., ICLR 2025), reimplemented for CPU."""

from grasp.text.mfar.fields_index import FieldIndex
from grasp.text.mfar.model import FieldWeights
from grasp.text.mfar.retriever import MFARRetriever
from grasp.text.mfar.train import train

__all__ = ["FieldIndex", "FieldWeights", "MFARRetriever", "train"]
