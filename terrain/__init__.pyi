from .api import bfs, cost_distance, diameter, fill, flow, mst, sssp
from .backend import Backend, get_backend, gpu_available
from .errors import InputError, TerrainWarning
