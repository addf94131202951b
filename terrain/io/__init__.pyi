from ._buffers import BUFFERS, BufferPool
from ._memory import available_memory
from ._parse import nan_min_max
from ._parse_gpu import parse_grid_on_device, pinned_empty
from .ascii_grid import (AsciiGrid, check_geometry, float32_value, looks_like_ascii_grid,
    open_ascii_grid)
from .raster import open_raster, RasterGrid
from .remote import (check_url_output, fetch, is_remote, is_url, local_path, Location, location,
    output_at, parse_storage_options, publish, store_for, store_state, url_output,
    zarr_store)
from .source import open_grid, read_grid, read_whole
from .synth import synth_rows, write_synth
