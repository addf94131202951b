# `name as name`: type checkers take a stub's imported names as its exports only in this form
from ._buffers import BUFFERS as BUFFERS, BufferPool as BufferPool
from ._memory import available_memory as available_memory
from ._parse import nan_min_max as nan_min_max
from ._parse_gpu import parse_grid_on_device as parse_grid_on_device, pinned_empty as pinned_empty
from .ascii_grid import (AsciiGrid as AsciiGrid, check_geometry as check_geometry,
    float32_value as float32_value, looks_like_ascii_grid as looks_like_ascii_grid,
    open_ascii_grid as open_ascii_grid)
from .raster import open_raster as open_raster, RasterGrid as RasterGrid
from .remote import (check_url_output as check_url_output, fetch as fetch, is_remote as is_remote,
    is_url as is_url, local_path as local_path, Location as Location, location as location,
    output_at as output_at, parse_storage_options as parse_storage_options, publish as publish,
    store_for as store_for, store_state as store_state, url_output as url_output,
    zarr_store as zarr_store)
from .source import open_grid as open_grid, read_grid as read_grid, read_whole as read_whole
from .synth import synth_rows as synth_rows, write_synth as write_synth
