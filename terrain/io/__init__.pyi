from .ascii_grid import AsciiGrid, looks_like_ascii_grid, open_ascii_grid
from .raster import open_raster, RasterGrid
from .source import open_grid, read_grid
from .synth import synth_rows, write_synth
