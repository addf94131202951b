"""Reading elevation grids: ESRI/GRASS ASCII (terrain's parallel parser), any GDAL raster
(rasterio), and writing synthetic fractal terrain.

The names are loaded on first use (lazy_loader, from the stub ``__init__.pyi``).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
