from .flow import (accumulation_pass, code_offsets, D8_CODES, direction_group, direction_pass,
    EdgeSummary, flow_accumulation, flow_directions, FlowDirections, FlowSpec, NODATA, OUTLET,
    padded_window)
from .watershed import snap_outlets, stream_links, watershed
