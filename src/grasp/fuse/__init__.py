"""Stage 2 fusion: static and plan-conditioned (dynamic) reciprocal-rank fusion, and their grid search."""

from grasp.fuse.dynamic import bucket_of, graph_weight
from grasp.fuse.grid import FusionTable, GridResult, search_dynamic, search_static
from grasp.fuse.rrf import dynamic_rrf, fuse_pair, static_rrf

__all__ = ["bucket_of", "graph_weight", "FusionTable", "GridResult", "search_dynamic", "search_static",
           "dynamic_rrf", "fuse_pair", "static_rrf"]
