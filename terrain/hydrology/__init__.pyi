from ._fill_gpu import fill_fits_on_device
from ._flow_gpu import flow_fits_on_device
from ._neighbours import direction_codes
from .fill import (depression_hierarchy, depression_labels, fill_depressions, fill_tiled,
    fill_walks, FILL_MEANINGS, FillResult, FillSpec, HIERARCHY_COLUMNS, kept_pits, LAKE_LABELS,
    LeafBlock, outlet_cells, SINKS_MEANING)
from .flow import (accumulation_pass, check_drained, DEGREE_STEPS, direction_group, direction_pass,
    fill_store_attrs, flow_accumulation, flow_directions, FLOW_MEANINGS, FlowDirections, FlowSpec,
    forget_flat_states, group_totals, NotFilled)
from .watershed import snap_outlets, stream_links, watershed
