"""Grid graphs of DEMs: edge ids and weights, and the exact tiled minimum spanning forest."""

from .edges import (CONNECTIVITIES, WEIGHT_MODELS, WeightSum, edge_endpoints, edge_id,
                    grid_edges, horizontal_lengths)
from .merge import Changes, LevelGraph, merge_level
from .mst import MSTResult, MSTSpec, grid_mst
from .reduce import reduce_forest

__all__ = ["grid_mst", "MSTResult", "MSTSpec", "grid_edges", "edge_id", "edge_endpoints",
           "horizontal_lengths", "WeightSum", "WEIGHT_MODELS", "CONNECTIVITIES",
           "reduce_forest", "merge_level", "LevelGraph", "Changes"]
