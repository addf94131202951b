"""Reading elevation grids: ESRI/GRASS ASCII (terrain's parallel parser), any GDAL raster
(rasterio), and writing synthetic fractal terrain.

The names are loaded on first use (PEP 562): reading an ASCII header needs neither Numba,
zarr nor rasterio, so ``terrain mst`` can start moving a text grid to the GPU while those
import.
"""

from .._lazy import lazy_names

_WHERE = {"AsciiGrid": "ascii_grid", "looks_like_ascii_grid": "ascii_grid",
          "open_ascii_grid": "ascii_grid", "RasterGrid": "raster", "open_raster": "raster",
          "open_grid": "source", "read_grid": "source", "synth_rows": "synth",
          "write_synth": "synth"}

__all__ = ["AsciiGrid", "RasterGrid", "open_grid", "read_grid", "open_ascii_grid", "open_raster",
           "looks_like_ascii_grid", "synth_rows", "write_synth"]


__getattr__, __dir__ = lazy_names(__name__, _WHERE)
