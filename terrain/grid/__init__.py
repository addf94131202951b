"""Grid graphs of DEMs: edge ids and weights, and the exact tiled minimum spanning forest;
cost distance (grid SSSP): cost models and the in-core exact algorithm.

The names are loaded on first use (lazy_loader, from the stub ``__init__.pyi``).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
