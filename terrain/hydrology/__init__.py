"""Hydrology from the DEM: flow directions (D8/D4, flats resolved), flow accumulation,
watersheds and stream networks; depression filling (``fill``).

The names are loaded on first use (lazy_loader, from the stub ``__init__.pyi``).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
