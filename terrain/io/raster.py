"""Rasters GDAL reads (GeoTIFF, …) through rasterio, a band of rows at a time, each read on
its own dataset (GDAL handles are not shared between threads); masked cells become NaN,
values float32.
"""

import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError, warn
from .georef import check_north_up, unplaced_geotransform, warn_unreferenced

__all__ = ["Grid", "RasterGrid", "open_raster", "warn_rounded"]


@dataclass(frozen=True)
class Grid:
    """What every grid file describes: ``path``, ``shape``, ``geotransform`` (GDAL order),
    ``nodata``, ``crs`` (WKT) and ``header`` (what the file says)."""

    path: Path
    shape: tuple
    geotransform: tuple
    nodata: object
    crs: object
    header: dict = field(hash=False)

    @property
    def cellsize(self):
        return (abs(self.geotransform[1]), abs(self.geotransform[5]))


@dataclass(frozen=True)
class RasterGrid(Grid):
    """A raster's :class:`Grid`; :meth:`read_rows` reads band ``band`` (from 1), nodata
    being the file's mask (``file_mask``) or else only cells equal to ``nodata`` and NaN; a
    value beyond float32's range is refused, and an infinite one unless ``finite`` is
    False."""

    band: int = 1
    file_mask: bool = True
    #: the band's scale and offset: elevations are ``stored * scale + offset`` (GDAL's
    #: unscaled values, what QGIS shows; nodata is found among the stored values)
    scale: float = 1.0
    offset: float = 0.0
    #: an infinite value refused (elevations); False where it means something (a friction's
    #: +inf: an impassable cell)
    finite: bool = True
    #: the values' unit where the band names one (GDAL's unit type: "m", "ft"; ESRI and GRASS
    #: text grids never do)
    units: object = None

    def read_rows(self, r0, r1, starts=None, out=None):
        """Rows ``r0:r1`` of :attr:`band` as float32, nodata cells NaN (``starts`` is ignored),
        into ``out`` when given (rows contiguous). Read in pieces of whole blocks of about
        :data:`READ_BYTES`, each on a dataset of its own: GDAL's block cache keeps every block
        read until the dataset closes (a band of 2048 rows of a 4096² float32 GeoTIFF held
        32 MB more), and a float32 band goes straight into ``out``."""
        import rasterio

        rows, cols = self.shape
        if not 0 <= r0 <= r1 <= rows:
            raise ValueError(f"read_rows: rows {r0}:{r1} outside 0:{rows}")
        if out is None:
            out = np.empty((r1 - r0, cols), np.float32)
        a, reason = r0, None
        try:
            while a < r1:
                with _opened(rasterio, self.path) as src:
                    b = min(r1, a + _piece_rows(src, self.band, cols))
                    self._read_piece(src, a, b, out[a - r0:b - r0])
                a = b
        except rasterio.errors.RasterioError as e:
            # rasterio's own message says "See previous exception": GDAL's reason is the cause
            reason = str(e.__cause__ or e).strip()
        if reason is not None:  # raised outside the handler: a task's error then carries no
            # rasterio error, which does not unpickle (a cluster handed back a repr of both)
            raise InputError(f"{self.path}: read failed ({reason})")
        return out

    def _read_piece(self, src, a, b, out):
        """Rows ``a:b`` of the open dataset ``src`` into ``out``, nodata NaN."""
        from rasterio.windows import Window

        window = Window(0, a, out.shape[1], b - a)
        if np.dtype(src.dtypes[self.band - 1]) == out.dtype:
            src.read(self.band, window=window, out=out)
            given = out
        else:  # nodata found in the file's own type (float64's -1.8e308 is none of float32's)
            given = src.read(self.band, window=window)
        if self.file_mask:
            mask = src.read_masks(self.band, window=window) == 0
        else:
            value = nodata_value(given.dtype, self.nodata)
            mask = None if value is None else given == value
        stored = given
        if (self.scale, self.offset) != (1.0, 0.0):
            with np.errstate(over="ignore", invalid="ignore"):  # nodata: NaN below
                given = stored.astype(np.float64) * self.scale + self.offset
        bad = None  # a finite float32 number (NaN: nodata), or with finite False, infinite
        if given.dtype.kind == "f" and given.dtype.itemsize > 4:
            bad = np.abs(given) > np.finfo(np.float32).max  # NaN: False, inf: True
        elif given.dtype.kind == "f" and not np.isfinite(given).all():  # one pass, mostly
            bad = np.isinf(given)
        if bad is not None:
            if not self.finite:
                bad &= ~np.isinf(given)
            if mask is not None:
                bad &= ~mask
        if bad is not None and bad.any():
            r, c = (int(v) for v in np.argwhere(bad)[0])
            v = float(given[r, c])
            why = ("beyond float32's range (3.4028235e38)" if np.isfinite(v)
                   else "elevations are finite numbers")
            raise InputError(f"{self.path}: value {v!r} at cell (row, col) = ({a + r}, {c}): "
                             f"{why}")
        if given is not out:
            with np.errstate(over="ignore"):  # nodata only, set to NaN below
                out[...] = given
            if given is stored:
                warn_rounded(self.path, given, out, mask, a, once=True)
        if mask is not None and mask.any():
            out[mask] = np.nan


#: the rasters whose rounding was said (once a file, not once a piece)
_ROUNDED = set()
_ROUNDED_LOCK = threading.Lock()


def warn_rounded(where, given, out, mask=None, row0=0, once=False):
    """A warning where integers of ``given`` (32 or 64 bits) are not float32 values (beyond
    2^24 in magnitude) in ``out``, its float32 copy (``mask``: the cells left out, nodata):
    elevations are float32, and a pit of one unit above 16777216 would read as a flat.
    ``once``: at most once for ``where`` (a file read in pieces)."""
    if given.dtype.kind not in "iu" or given.dtype.itemsize < 4 or (once and str(where)
                                                                      in _ROUNDED):
        return
    # float32 rounds the type's largest integers up to 2^31 (2^32, 2^63, 2^64), which no cast
    # takes back (NumPy warns of an invalid cast): those are lost, the others compared exactly
    over = out >= 2.0 ** (8 * given.dtype.itemsize - (given.dtype.kind == "i"))
    lost = over | (np.where(over, 0, out).astype(given.dtype) != given)  # nodata: NaN after
    if mask is not None:
        lost &= ~mask
    if not lost.any():
        return
    if once:  # tested again as it is marked: the pieces are read on several threads
        with _ROUNDED_LOCK:
            if str(where) in _ROUNDED:
                return
            _ROUNDED.add(str(where))
    r, c = (int(v) for v in np.argwhere(lost)[0])
    warn(f"{where}: {given.dtype} values beyond 2^24 are rounded to float32 "
         f"(elevations' type): {int(given[r, c])} at cell ({row0 + r}, {c}) reads as "
         f"{float(out[r, c]):.0f}")


def nodata_value(dtype, nodata):
    """``nodata`` as a value of ``dtype``, or None when no value of that type equals it (a
    nodata of 1e40 for int16 cells, 0.5 for integers): then no cell is nodata by it.

    >>> nodata_value(np.dtype("int16"), -32768.0), nodata_value(np.dtype("int16"), 1e40)
    (np.int16(-32768), None)
    """
    if nodata is None:
        return None
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        if np.isfinite(nodata) and abs(nodata) > np.finfo(dtype).max:
            return None
        return dtype.type(nodata)
    if not float(nodata).is_integer():
        return None
    info = np.iinfo(dtype)
    return dtype.type(int(nodata)) if info.min <= nodata <= info.max else None


#: bytes of a raster's band a read takes at once (whole blocks, at least one row of them)
READ_BYTES = 8 << 20


def _piece_rows(src, band, cols):
    """Rows of whole blocks (at least one row of them) of about :data:`READ_BYTES`."""
    block = max(1, int(src.block_shapes[band - 1][0]))
    row = cols * np.dtype(src.dtypes[band - 1]).itemsize * block
    return block * max(1, READ_BYTES // max(1, row))


#: held around the opens of :func:`_opened`: each saves and restores the process's warning
#: filters, and two threads' blocks that interleave restore each other's (the filter of one
#: left in place for good, or one thread's open unfiltered)
_OPEN_LOCK = threading.Lock()


def _opened(rasterio, path):
    """``rasterio.open(path)`` for reading, without rasterio's two-line warning that the
    raster has no georeference: such a raster is read as such (:func:`_georeference` warns
    once), which rasterio would say again on every open. Filtered within the open only
    (rasterio warns there and nowhere else), the caller's filters as they were."""
    with _OPEN_LOCK, warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=rasterio.errors.NotGeoreferencedWarning)
        return rasterio.open(path)


def _georeference(src, path):
    """``(geotransform, crs WKT or None)`` of an open raster. GDAL gives a raster without a
    geotransform the identity, whose rows run "north" (a south-up grid): it is read instead
    as an ASCII grid with its lower-left corner at (0, 0) and cells of 1 is, north-up, no
    CRS, and warned. A raster placed only by ground control points or RPCs is refused: its
    cells lie on no grid until warped."""
    if not src.transform.is_identity:
        gt = tuple(float(v) for v in src.transform.to_gdal())
        check_north_up(gt, path)
        return gt, src.crs.to_wkt() if src.crs else None
    if src.gcps[0] or src.rpcs:
        how = "ground control points (GCPs)" if src.gcps[0] else "RPCs"
        raise InputError(f"{path}: georeferenced only by {how}: warp it onto a grid first "
                         f"(gdalwarp -t_srs EPSG:xxxx {path.name} warped.tif)")
    warn_unreferenced(path)
    return unplaced_geotransform(src.height), None


def open_raster(path, band=None):
    """Open a raster with rasterio and describe it (no pixels are read).

    Parameters
    ----------
    path : str or Path
    band : int, optional
        From 1. Default 1; a raster of several bands then warns once.

    Returns
    -------
    RasterGrid

    Raises
    ------
    InputError
        When GDAL cannot open the file as a raster or it lacks the band.

    Examples
    --------
    >>> r = open_raster("dem.tif")      # doctest: +SKIP
    >>> r.read_rows(0, 16).shape        # doctest: +SKIP
    (16, 1024)
    """
    import rasterio

    path = Path(path)
    try:
        with _opened(rasterio, path) as src:
            if src.count < 1:
                raise InputError(f"{path}: raster has no bands")
            if band is None:
                if src.count > 1:
                    warn(f"{path}: {src.count} bands; reading band 1")
                band = 1
            band = int(band)
            if not 1 <= band <= src.count:
                raise InputError(f"{path}: band {band} does not exist (the raster has "
                                 f"{src.count} band{'s' if src.count > 1 else ''})")
            if src.colorinterp[band - 1] == rasterio.enums.ColorInterp.alpha:
                raise InputError(f"{path}: band {band} is an alpha band (the other bands' "
                                 "mask), not elevations: give the band it masks")
            if "complex" in src.dtypes[band - 1]:  # NumPy would drop the imaginary parts
                raise InputError(f"{path}: band {band} holds complex numbers "
                                 f"({src.dtypes[band - 1]}): elevations are real numbers")
            gt, crs = _georeference(src, path)
            header = {"driver": src.driver, "dtype": src.dtypes[band - 1], "count": src.count,
                      "band": band, "description": src.descriptions[band - 1],
                      "width": src.width, "height": src.height, "tags": dict(src.tags())}
            nodata = src.nodatavals[band - 1]
            nodata = None if nodata is None else float(nodata)
            flags = src.mask_flag_enums[band - 1]  # GDAL's mask: its band before any nodata
            if rasterio.enums.MaskFlags.alpha in flags:
                header["mask"] = "alpha band"
            elif rasterio.enums.MaskFlags.per_dataset in flags:
                header["mask"] = "mask band"
            scale, offset = float(src.scales[band - 1]), float(src.offsets[band - 1])
            if not (np.isfinite(scale) and np.isfinite(offset) and scale != 0):
                raise InputError(f"{path}: band {band}'s scale {scale:g} and offset "
                                 f"{offset:g} give no elevations")
            if (scale, offset) != (1.0, 0.0):
                header.update(scale=scale, offset=offset)
            return RasterGrid(path=path, shape=(src.height, src.width), geotransform=gt,
                              nodata=nodata, crs=crs, header=header, band=band, scale=scale,
                              offset=offset, units=src.units[band - 1] or None)
    except rasterio.errors.RasterioIOError:
        raise InputError(f"{path}: not a grid terrain or GDAL can read") from None
