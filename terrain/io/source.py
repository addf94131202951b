"""One entry point for every elevation grid terrain reads: ESRI and GRASS ASCII grids go to
terrain's own parser (:mod:`terrain.io.ascii_grid`), everything else to rasterio.
"""

import dataclasses
import math
from pathlib import Path

from ..errors import InputError, warn
from .ascii_grid import AsciiGrid, check_readable_file, looks_like_ascii_grid, open_ascii_grid
from .georef import crs_wkt
from .raster import RasterGrid, nodata_value, open_raster

__all__ = ["open_grid", "read_grid", "read_whole", "ASCII_SUFFIXES"]

ASCII_SUFFIXES = (".asc", ".grd", ".txt", ".arx", ".grass")


def open_grid(path, *, band=None, nodata=None, crs=None, finite=True):
    """Open an elevation grid (ESRI/GRASS ASCII or any raster GDAL reads).

    Parameters
    ----------
    path : str or Path
    band : int, optional
        Raster band to read (from 1; default 1, a multi-band raster warns).
    nodata : float, optional
        Cells equal to this value are nodata, instead of the file's own nodata value.
    crs : str, optional
        Assign this CRS (``EPSG:xxxx``, WKT, …) instead of the file's own.
    finite : bool
        An infinite value in a raster is refused (an elevation is finite); False keeps it (a
        friction's +inf: an impassable cell). ASCII grids refuse every value beyond float32.

    Returns
    -------
    AsciiGrid or RasterGrid

    Raises
    ------
    InputError
        Missing file, a directory, an empty file, a bad header, a file GDAL cannot read.

    Examples
    --------
    >>> grid = open_grid("data/sample.asc")
    >>> grid.shape
    (300, 400)
    """
    path = Path(path)
    check_readable_file(path)
    if path.suffix.lower() == ".gz":
        raise InputError(f"{path}: a gzip-compressed grid: decompress it first (gunzip -k "
                         f"{path.name})")
    if (path.suffix.lower() in ASCII_SUFFIXES and not _binary(path)) \
            or looks_like_ascii_grid(path):
        grid = open_ascii_grid(path)
        if band is not None and int(band) != 1:
            raise InputError(f"{path}: band {band} does not exist (an ASCII grid has 1 band)")
    else:
        grid = open_raster(path, band)
    changes = {}
    if nodata is not None:
        value = float(nodata)
        if math.isinf(value):
            raise InputError(f"{path}: nodata {nodata!r} must be a number (or nan)")
        changes["nodata"] = None if math.isnan(value) else value  # NaN: nodata as it is
        if "mask" in grid.header:  # the file's mask no longer read
            changes["header"] = {k: v for k, v in grid.header.items() if k != "mask"}
        if isinstance(grid, RasterGrid) and changes["nodata"] is None:
            changes["file_mask"] = False  # the file's nodata value: a value like any other
        elif isinstance(grid, RasterGrid):
            changes["file_mask"] = False
            kind = grid.header["dtype"]
            if nodata_value(kind, value) is None:
                warn(f"{path}: nodata {value:g} is no {kind} value: no cell is "
                     "nodata by it")
    if crs is not None:
        changes["crs"] = crs_wkt(crs, what=str(path))
    if not finite and isinstance(grid, RasterGrid):
        changes["finite"] = False
    return dataclasses.replace(grid, **changes) if changes else grid


def _binary(path):
    """Whether the file's head holds a NUL byte: a raster (a GeoTIFF named ``.asc``) that
    GDAL reads by its contents, as it reads every other."""
    try:
        with open(path, "rb") as f:
            return b"\x00" in f.read(512)
    except OSError:
        return False  # the ASCII reader says why


def read_grid(path, finite=True):
    """Read a whole grid into memory: ``(float32 array with NaN nodata, grid)``
    (``finite``: :func:`open_grid`'s).

    Examples
    --------
    >>> import numpy as np
    >>> z, grid = read_grid("data/sample.asc")
    >>> z.shape, z.dtype, int(np.isnan(z).sum())
    ((300, 400), dtype('float32'), 5972)
    """
    grid = open_grid(path, finite=finite)
    return read_whole(grid), grid


def read_whole(grid, pool=None):
    """An opened grid (:func:`open_grid`'s) read whole into memory: float32, NaN nodata; an
    ASCII grid parsed on ``pool`` (default: its own threads).

    Examples
    --------
    >>> read_whole(open_grid("data/sample.asc")).shape
    (300, 400)
    """
    if isinstance(grid, AsciiGrid):
        return grid.read_all(pool)[0]
    return grid.read_rows(0, grid.shape[0])
