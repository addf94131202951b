"""terrain: fast, exact, out-of-core graph algorithms on elevation grids and sparse graphs.

The library (I/O, tiles, kernels, algorithms) lives here; ``pipelines`` composes Dask task
graphs from it and ``terrain.run`` is the command line.
"""

from .backend import Backend, get_backend, gpu_available
from .errors import InputError

__version__ = "0.1.0"

__all__ = ["Backend", "get_backend", "gpu_available", "InputError", "__version__",
           "mst", "cost_distance", "bfs", "diameter", "sssp"]

# The Python API (terrain/api.py) is imported on first use: `import terrain` stays light
# for the command line.
_API = ("mst", "cost_distance", "bfs", "diameter", "sssp")


def __getattr__(name):
    if name in _API:
        from . import api
        return getattr(api, name)
    raise AttributeError(f"module 'terrain' has no attribute {name!r}")
