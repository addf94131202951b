from ._costs_cpu import arc_cost
from ._boruvka import boruvka_tiles
from .cost_outputs import least_cost_paths
from .costs import arc_codes, arc_lengths, COST_MODELS
from .edges import (CONNECTIVITIES, check_cellsize, grid_edges, horizontal_lengths, WEIGHT_MODELS,
                    WeightSum)
from .merge import Changes, LevelGraph
from .mst import grid_mst, GridMSTResult, MSTSpec
from .reduce import reduce_forest
from .sssp import grid_sssp, GridSSSPResult, labels_from_distance
from .sssp_blocked import blocked_sssp
