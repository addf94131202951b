# `name as name`: type checkers take a stub's imported names as its exports only in this form
from .batch import batch_command as batch_command
from .cost_distance import (cost_distance_command as cost_distance_command,
    path_command as path_command)
from .fill import fill_command as fill_command
from .flow import flow_command as flow_command
from .graph import (bfs_command as bfs_command, diameter_command as diameter_command,
    graph_ingest_command as graph_ingest_command, is_graph_input as is_graph_input,
    mst_graph_command as mst_graph_command, sssp_command as sssp_command)
from .info import info_command as info_command
from .ingest import ingest_command as ingest_command, synth_command as synth_command
from .mst import mst_command as mst_command
from .plot import plot_command as plot_command
from .verify import verify_command as verify_command
from .watershed import streams_command as streams_command, watershed_command as watershed_command
