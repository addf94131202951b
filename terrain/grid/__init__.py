"""Grid graphs of DEMs: edge ids and weights, and the exact tiled minimum spanning forest."""

from .edges import (CONNECTIVITIES, WEIGHT_MODELS, WeightSum, edge_endpoints, edge_id,
                    grid_edges, horizontal_lengths)
from .merge import Changes, LevelGraph, merge_level
from .mst import MSTResult, MSTSpec, grid_mst
from .reduce import reduce_forest

__all__ = ["grid_mst", "MSTResult", "MSTSpec", "grid_edges", "edge_id", "edge_endpoints",
           "horizontal_lengths", "WeightSum", "WEIGHT_MODELS", "CONNECTIVITIES",
           "reduce_forest", "merge_level", "LevelGraph", "Changes"]

# cost distance (grid SSSP): cost models and the in-core exact algorithm
from .costs import COST_MODELS, arc_codes, arc_lengths  # noqa: E402
from .sssp import SSSPResult, grid_sssp, labels_from_distance  # noqa: E402

__all__ += ["COST_MODELS", "arc_codes", "arc_lengths", "grid_sssp", "labels_from_distance",
            "SSSPResult"]

# the blocked (out-of-core, CPU) algorithm's in-memory driver: the in-core bits
from .sssp_blocked import blocked_sssp  # noqa: E402

__all__ += ["blocked_sssp"]
