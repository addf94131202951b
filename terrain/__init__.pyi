# `name as name`: type checkers take a stub's imported names as its exports only in this form
__version__: str
from .api import (bfs as bfs, cost_distance as cost_distance, diameter as diameter, fill as fill,
    flow as flow, mst as mst, sssp as sssp, streams as streams, watershed as watershed)
from .backend import Backend as Backend, get_backend as get_backend, gpu_available as gpu_available
from .errors import InputError as InputError, TerrainWarning as TerrainWarning
