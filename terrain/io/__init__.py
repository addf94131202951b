"""Grids and points in and out: ESRI/GRASS ASCII (terrain's parallel parser), any GDAL raster
(rasterio), points and lines, (Cloud-Optimized) GeoTIFF outputs, the stores' georeference and
metadata, stores at URLs, synthetic fractal terrain; outputs written atomically, never over an
input (``outputs``); the available memory.

The names are loaded on first use (lazy_loader, from the stub ``__init__.pyi``).
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
