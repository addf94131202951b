from ._fill_gpu import fill_fits_on_device
from ._flow_gpu import flow_fits_on_device
from .fill import (depression_hierarchy, depression_labels, fill_depressions, fill_leaf_down,
    fill_leaf_up, fill_merge, fill_split, fill_tiled, FillResult, FillSpec,
    HIERARCHY_COLUMNS, kept_pits, label_border, label_count, label_ids, label_merge,
    label_numbering, label_split, LabelBorder, LeafBlock, outlet_cells, PortGraph, read_halo,
    SINKS_MEANING)
from .flow import (accumulation_pass, check_drained, DEGREE_STEPS, direction_group, direction_pass,
    flow_accumulation, flow_directions, FlowDirections, FlowSpec, forget_flat_states,
    group_totals, NotFilled)
from .watershed import snap_outlets, stream_links, watershed
