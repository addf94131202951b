# `name as name`: type checkers take a stub's imported names as its exports only in this form
from ._fill_gpu import fill_fits_on_device as fill_fits_on_device
from ._flow_gpu import flow_fits_on_device as flow_fits_on_device
from ._neighbours import direction_codes as direction_codes
from .fill import (depression_hierarchy as depression_hierarchy,
    depression_labels as depression_labels, fill_depressions as fill_depressions,
    fill_tiled as fill_tiled, fill_walks as fill_walks, FILL_MEANINGS as FILL_MEANINGS, FillResult as FillResult,
    FillSpec as FillSpec, HIERARCHY_COLUMNS as HIERARCHY_COLUMNS, kept_pits as kept_pits,
    LAKE_LABELS as LAKE_LABELS, LeafBlock as LeafBlock, outlet_cells as outlet_cells,
    SINKS_MEANING as SINKS_MEANING)
from .flow import (accumulation_pass as accumulation_pass, check_drained as check_drained,
    DEGREE_STEPS as DEGREE_STEPS, direction_group as direction_group,
    direction_pass as direction_pass, fill_store_attrs as fill_store_attrs, flow_accumulation as flow_accumulation,
    flow_directions as flow_directions, FLOW_MEANINGS as FLOW_MEANINGS, FlowDirections as FlowDirections, FlowSpec as FlowSpec,
    forget_flat_states as forget_flat_states, group_totals as group_totals, NotFilled as NotFilled)
from .watershed import (WATERSHED_MEANING as WATERSHED_MEANING, label_outlets as label_outlets,
    read_flow_store as read_flow_store, snap_outlets as snap_outlets,
    stream_lines as stream_lines, stream_links as stream_links, watershed as watershed)
