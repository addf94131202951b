"""Hydrology from the DEM: exact depression filling from the grid's minimum spanning forest
(``fill``), in core or tiled, on the CPU or the GPU; flow directions, accumulation,
watersheds and streams. The names load on first use (lazy_loader stub).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
