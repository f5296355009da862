"""mFAR: the multi-field adaptive retriever (Li et al., ICLR 2025), reimplemented for CPU."""

from grasp.dense.mfar.fields_index import FieldIndex
from grasp.dense.mfar.model import FieldWeights
from grasp.dense.mfar.retriever import MFARRetriever
from grasp.dense.mfar.train import TrainConfig, train

__all__ = ["FieldIndex", "FieldWeights", "MFARRetriever", "TrainConfig", "train"]
