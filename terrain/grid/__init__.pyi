# `name as name`: type checkers take a stub's imported names as its exports only in this form
from ._costs_cpu import arc_cost as arc_cost
from ._boruvka import boruvka_tiles as boruvka_tiles
from .cost_outputs import least_cost_paths as least_cost_paths
from .costs import arc_codes as arc_codes, arc_lengths as arc_lengths, COST_MODELS as COST_MODELS
from .edges import (CONNECTIVITIES as CONNECTIVITIES, check_cellsize as check_cellsize,
    grid_edges as grid_edges, horizontal_lengths as horizontal_lengths,
    WEIGHT_MODELS as WEIGHT_MODELS, WeightSum as WeightSum)
from .merge import Changes as Changes, LevelGraph as LevelGraph
from .mst import grid_mst as grid_mst, GridMSTResult as GridMSTResult, MSTSpec as MSTSpec
from .reduce import reduce_forest as reduce_forest
from .sssp import (grid_sssp as grid_sssp, GridSSSPResult as GridSSSPResult,
    labels_from_distance as labels_from_distance)
from .sssp_blocked import blocked_sssp as blocked_sssp
