from .batch import batch_command
from .cost_distance import cost_distance_command, path_command
from .fill import fill_command
from .flow import flow_command
from .graph import (bfs_command, diameter_command, graph_ingest_command, is_graph_input,
    mst_graph_command, sssp_command)
from .info import info_command
from .ingest import ingest_command, synth_command
from .mst import mst_command
from .plot import plot_command
from .verify import verify_command
from .watershed import streams_command, watershed_command
