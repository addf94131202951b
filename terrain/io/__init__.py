"""Reading elevation grids: ESRI/GRASS ASCII (terrain's parallel parser), any GDAL raster
(rasterio), and writing synthetic fractal terrain.

The names are loaded on first use (PEP 562): reading an ASCII header needs neither Numba,
zarr nor rasterio, so ``terrain mst`` can start moving a text grid to the GPU while those
import.
"""

import importlib

_WHERE = {"AsciiGrid": "ascii_grid", "looks_like_ascii_grid": "ascii_grid",
          "open_ascii_grid": "ascii_grid", "RasterGrid": "raster", "open_raster": "raster",
          "open_grid": "source", "read_grid": "source", "synth_rows": "synth",
          "write_synth": "synth"}

__all__ = ["AsciiGrid", "RasterGrid", "open_grid", "read_grid", "open_ascii_grid", "open_raster",
           "looks_like_ascii_grid", "synth_rows", "write_synth"]


def __getattr__(name):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_WHERE))
