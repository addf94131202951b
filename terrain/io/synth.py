"""Synthetic fractal terrain written as an ESRI ASCII grid, streaming, of any size.

Elevations are fractal value noise (:mod:`terrain.io._synth`): octaves of a seeded hash
lattice, so every band of rows is computed from ``(rows, cols, seed)`` alone, in parallel
threads, and written in order; memory is a few bands whatever the grid size. Nodata comes in
blobs: cells where a second, low-frequency noise field exceeds its ``1 - fraction``
quantile (estimated on a sample of rows, so the threshold does not need the whole grid).

Values are written with two decimals (``--integer``: as integers), so the text is exact:
:func:`synth_rows` gives the values a reader must get back.
"""

import concurrent.futures
import os
import shutil
from pathlib import Path

import numpy as np

from .outputs import atomic_output, check_output_free
from ..errors import InputError
from ._synth import fbm_rows, format_rows

__all__ = ["synth_rows", "write_synth", "SYNTH_NODATA", "SYNTH_GEOREF"]

SYNTH_NODATA = -9999
SYNTH_GEOREF = {"xllcorner": 500000.0, "yllcorner": 4000000.0, "cellsize": 10.0}
_BAND_ROWS = 64
_BAND_CELLS = 1 << 22   # at most this many cells a band (fewer rows for a wide grid)
_SAMPLE_CELLS = 1 << 26  # the nodata threshold's sample of rows holds at most this many cells
_MASK_SALT = 0x5EED
_MIN_CELL_BYTES = 2  # "5 ": the shortest a written cell can be
_BAND_BYTES_PER_CELL = 8 + 8 + 12  # the values and the nodata field (float64), the text


def _memory_available():
    """Bytes of memory a new allocation can take without swapping (``MemAvailable``)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _band_rows(cols):
    """Rows a band of a grid ``cols`` wide: 64, fewer where that would pass ``_BAND_CELLS``."""
    return max(1, min(_BAND_ROWS, _BAND_CELLS // max(int(cols), 1)))


def _sample_rows(rows, cols):
    """Rows of the nodata threshold's sample: 256, fewer where that would pass
    ``_SAMPLE_CELLS``."""
    return max(1, min(int(rows), 256, _SAMPLE_CELLS // max(int(cols), 1)))


def _check_fits(path, rows, cols, nodata=0.0):
    """Refuse at once (before any allocation) a grid whose text cannot fit on the disk, or
    whose one band (and the nodata threshold's sample) cannot fit in memory.

    The estimates are lower bounds, so a grid that would fit is never refused.
    """
    if rows <= 0 or cols <= 0:
        raise InputError(f"synth: rows and cols must be positive, got {rows} x {cols}")
    parent = Path(path).parent if str(Path(path).parent) else Path(".")
    need = int(rows) * int(cols) * _MIN_CELL_BYTES
    free = shutil.disk_usage(parent).free
    if need > free:
        raise InputError(f"{path}: {rows} x {cols} cells need at least {need / 2**30:.1f} GiB "
                         f"of text; {free / 2**30:.1f} GiB free in {parent}")
    band = _band_rows(cols) * int(cols) * _BAND_BYTES_PER_CELL
    sample = _sample_rows(rows, cols) * int(cols) * 8 * 2 if nodata > 0 else 0
    avail = _memory_available()
    if band + sample > avail:
        raise InputError(f"{path}: rows of {cols} cells need at least "
                         f"{(band + sample) / 2**30:.1f} GiB of memory to write; "
                         f"{avail / 2**30:.1f} GiB available")


def _base_period(rows, cols, divisor):
    side = max(rows, cols, 2)
    return float(max(2, 1 << max(0, (side // divisor - 1).bit_length())))


def _octaves(base_period):
    return max(1, int(np.log2(base_period)))  # down to a period of 2 cells


class _Terrain:
    """The parameters shared by all bands of one synthetic grid."""

    def __init__(self, rows, cols, seed, nodata, integer):
        if rows <= 0 or cols <= 0:
            raise InputError(f"synth: rows and cols must be positive, got {rows} x {cols}")
        if not 0.0 <= nodata < 1.0:
            raise InputError(f"synth: nodata fraction must be in [0, 1), got {nodata}")
        self.rows, self.cols, self.seed = int(rows), int(cols), int(seed) & 0xFFFFFFFF
        self.integer = bool(integer)
        self.decimals = 0 if integer else 2
        self.period = _base_period(rows, cols, 2)
        self.mask_period = _base_period(rows, cols, 8)
        self.threshold = None
        if nodata > 0:
            sample = np.unique(np.linspace(0, rows - 1, _sample_rows(rows, cols)).astype(np.int64))
            field = np.empty((sample.size, self.cols))
            fbm_rows(self.seed ^ _MASK_SALT, sample, self.cols, self.mask_period, 3, field)
            self.threshold = float(np.quantile(field, 1.0 - nodata))

    def band(self, r0, r1):
        """Values of rows ``r0:r1`` rounded as written (float64, NaN = nodata)."""
        ids = np.arange(r0, r1, dtype=np.int64)
        z = np.empty((r1 - r0, self.cols))
        fbm_rows(self.seed, ids, self.cols, self.period, _octaves(self.period), z)
        z -= 0.5
        z *= 1600.0  # mostly 0..1000 m, some cells below zero
        z += 500.0
        scale = 10.0 ** self.decimals
        z = np.round(z * scale) / scale
        if self.threshold is not None:
            m = np.empty_like(z)
            fbm_rows(self.seed ^ _MASK_SALT, ids, self.cols, self.mask_period, 3, m)
            z[m > self.threshold] = np.nan
        return z

    def text(self, r0, r1):
        z = self.band(r0, r1)
        buf = np.empty((r1 - r0) * (self.cols * 12 + 1), dtype=np.uint8)
        nodata = np.frombuffer(str(SYNTH_NODATA).encode(), dtype=np.uint8)
        n = format_rows(z, self.decimals, nodata, buf)
        return buf[:n]

    def header(self):
        g = SYNTH_GEOREF
        return (f"ncols {self.cols}\nnrows {self.rows}\nxllcorner {g['xllcorner']}\n"
                f"yllcorner {g['yllcorner']}\ncellsize {g['cellsize']}\n"
                f"NODATA_value {SYNTH_NODATA}\n").encode()


def synth_rows(rows, cols, r0, r1, seed=0, nodata=0.0, integer=False):
    """The float32 values (NaN = nodata) rows ``r0:r1`` of a synthetic grid hold.

    Exactly what a correct reader returns for the file :func:`write_synth` writes.

    Examples
    --------
    >>> synth_rows(300, 400, 0, 2, seed=1).shape
    (2, 400)
    """
    return _Terrain(rows, cols, seed, nodata, integer).band(r0, r1).astype(np.float32)


def write_synth(path, rows, cols, seed=0, nodata=0.0, integer=False, overwrite=False,
                workers=None):
    """Write a ``rows × cols`` fractal terrain as an ESRI ASCII grid, streaming.

    Parameters
    ----------
    path : str or Path
        Output file (appears atomically).
    rows, cols : int
    seed : int
    nodata : float
        Fraction of cells, in blobs, written as ``-9999`` (0 for none).
    integer : bool
        Integer elevations (many ties) instead of two decimals.
    workers : int, optional
        Threads computing bands (default: all cores).

    Returns
    -------
    int
        Bytes written.

    Examples
    --------
    >>> write_synth("dem.asc", 300, 400, seed=1, nodata=0.05)   # doctest: +SKIP
    """
    check_output_free(path, overwrite)  # before the size check: its directory must exist
    _check_fits(path, rows, cols, nodata)
    terrain = _Terrain(rows, cols, seed, nodata, integer)
    step = _band_rows(cols)
    band_bytes = step * int(cols) * _BAND_BYTES_PER_CELL
    # bands computed or waiting: two a worker, as many as half the memory holds (at least 1)
    workers = max(1, min(workers or os.cpu_count() or 1,
                         _memory_available() // (4 * band_bytes)))
    bands = [(r, min(r + step, terrain.rows)) for r in range(0, terrain.rows, step)]
    written = 0
    with atomic_output(Path(path), overwrite) as tmp:
        with open(tmp, "wb") as f, concurrent.futures.ThreadPoolExecutor(workers) as pool:
            f.write(terrain.header())
            pending = []
            for band in bands:
                pending.append(pool.submit(terrain.text, *band))
                if len(pending) > 2 * workers:  # bounded look-ahead: memory stays a few bands
                    written += f.write(pending.pop(0).result())
            for fut in pending:
                written += f.write(fut.result())
    return written
