"""Grid graphs of DEMs: edge ids and weights, and the exact tiled minimum spanning forest;
cost distance (grid SSSP): cost models and the in-core exact algorithm.

The names are loaded on first use (PEP 562): a submodule (``terrain.grid.cost_outputs``,
the GPU launcher of the SSSP) is imported without the MST's Numba kernels.
"""

from .._lazy import lazy_names

_WHERE = {"CONNECTIVITIES": "edges", "WEIGHT_MODELS": "edges", "WeightSum": "edges",
          "edge_endpoints": "edges", "edge_id": "edges", "grid_edges": "edges",
          "horizontal_lengths": "edges", "Changes": "merge", "LevelGraph": "merge",
          "merge_level": "merge", "MSTResult": "mst", "MSTSpec": "mst", "grid_mst": "mst",
          "reduce_forest": "reduce",
          "COST_MODELS": "costs", "arc_codes": "costs", "arc_lengths": "costs",
          "SSSPResult": "sssp", "grid_sssp": "sssp", "labels_from_distance": "sssp",
          # the blocked (out-of-core, CPU) algorithm's in-memory driver: the in-core bits
          "blocked_sssp": "sssp_blocked"}

__all__ = ["grid_mst", "MSTResult", "MSTSpec", "grid_edges", "edge_id", "edge_endpoints",
           "horizontal_lengths", "WeightSum", "WEIGHT_MODELS", "CONNECTIVITIES",
           "reduce_forest", "merge_level", "LevelGraph", "Changes"]
__all__ += ["COST_MODELS", "arc_codes", "arc_lengths", "grid_sssp", "labels_from_distance",
            "SSSPResult", "blocked_sssp"]

__getattr__, __dir__ = lazy_names(__name__, _WHERE)
