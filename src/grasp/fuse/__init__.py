"""Stage 2 fusion: static, plan-conditioned (dynamic) and confidence-weighted reciprocal-rank fusion, their grid
search, and the evidence-based plan confidence."""

from grasp.fuse.confidence import PlanConfidence, ShapePrior, confidence_weight, evidence, fit_confidence
from grasp.fuse.dynamic import bucket_of, graph_weight
from grasp.fuse.grid import FusionTable, GridResult, search_confidence, search_dynamic, search_static
from grasp.fuse.rrf import dynamic_rrf, fuse_pair, static_rrf, weighted_rrf

__all__ = ["bucket_of", "graph_weight", "FusionTable", "GridResult", "search_confidence", "search_dynamic",
           "search_static", "dynamic_rrf", "fuse_pair", "static_rrf", "weighted_rrf", "PlanConfidence", "ShapePrior",
           "confidence_weight", "evidence", "fit_confidence"]
