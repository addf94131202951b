"""Reading elevation grids: ESRI/GRASS ASCII (terrain's parallel parser), any GDAL raster
(rasterio), and writing synthetic fractal terrain."""

from .ascii_grid import AsciiGrid, looks_like_ascii_grid, open_ascii_grid
from .raster import RasterGrid, open_raster
from .source import open_grid, read_grid
from .synth import synth_rows, write_synth

__all__ = ["AsciiGrid", "RasterGrid", "open_grid", "read_grid", "open_ascii_grid", "open_raster",
           "looks_like_ascii_grid", "synth_rows", "write_synth"]
