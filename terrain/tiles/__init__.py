"""Tile store: square power-of-two tiles in a z-ordered, sharded Zarr v3 group; the quadtree
plan and walk over its tiles.

The names are loaded on first use (lazy_loader, from the stub ``__init__.pyi``).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
