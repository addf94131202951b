"""terrain: fast, exact, out-of-core graph algorithms on elevation grids and sparse graphs.

The library (I/O, tiles, kernels, algorithms) lives here; ``pipelines`` composes Dask task
graphs from it and ``terrain.run`` is the command line. The names are loaded on first use
(lazy_loader, from the stub ``__init__.pyi``): ``import terrain`` stays light.
"""

import lazy_loader

__version__ = "0.1.0"

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
