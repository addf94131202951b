"""Synthetic fractal terrain written as an ESRI ASCII grid, streaming, of any size.

Elevations are fractal value noise (octaves of a seeded hash lattice, smoothstep-blended),
so every band of rows follows from ``(rows, cols, seed)`` alone and bands are computed in
parallel threads; memory is a few bands. Nodata comes in blobs where a low-frequency field
exceeds its ``1 - fraction`` quantile (estimated on a sample of rows). Values are written
with two decimals (or as integers), exactly: :func:`synth_rows` gives what a reader gets.
"""

import concurrent.futures
import os
import shutil
from pathlib import Path

import numba
import numpy as np

from ._memory import available_memory
from .outputs import atomic_output, check_output_free, format_bytes
from ..errors import InputError

__all__ = ["synth_rows", "write_synth", "SYNTH_NODATA", "SYNTH_GEOREF"]

SYNTH_NODATA = -9999
SYNTH_GEOREF = {"xllcorner": 500000.0, "yllcorner": 4000000.0, "cellsize": 10.0}
_BAND_ROWS = 64
_BAND_CELLS = 1 << 22   # at most this many cells a band (fewer rows for a wide grid)
_SAMPLE_CELLS = 1 << 26  # the nodata threshold's sample of rows holds at most this many cells
_MASK_SALT = 0x5EED
_MIN_CELL_BYTES = 2  # "5 ": the shortest a written cell can be
_BAND_BYTES_PER_CELL = 8 + 8 + 12  # the values and the nodata field (float64), the text


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(x):
    # splitmix64 finaliser: a well-spread 64-bit hash
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@numba.njit(cache=True, nogil=True, inline="always")
def _lattice(seed, octave, ix, iy):
    h = _mix(np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(octave))
    h = _mix(h ^ np.uint64(ix & 0xFFFFFFFF) ^ (np.uint64(iy & 0xFFFFFFFF) << np.uint64(32)))
    return (h >> np.uint64(11)) * (1.0 / 9007199254740992.0)  # [0, 1)


@numba.njit(cache=True, nogil=True, inline="always")
def _smooth(t):
    return t * t * (3.0 - 2.0 * t)


@numba.njit(cache=True, nogil=True)
def _fbm_rows(seed, row_ids, ncols, base_period, n_octaves, out):
    """Fractal value noise in [0, 1) for the rows ``row_ids`` into ``out``; octave ``o`` has
    period ``base_period / 2**o`` and amplitude ``2**-o``."""
    norm = 0.0
    for o in range(n_octaves):
        norm += 0.5 ** o
    out[:, :] = 0.0
    for o in range(n_octaves):
        period = base_period / 2.0 ** o
        amp = 0.5 ** o / norm
        n_lat = int(ncols / period) + 2
        blended = np.empty(n_lat, dtype=np.float64)
        for k in range(row_ids.shape[0]):
            y = row_ids[k] / period
            iy = int(np.floor(y))
            sy = _smooth(y - iy)
            for j in range(n_lat):
                a = _lattice(seed, o, j, iy)
                b = _lattice(seed, o, j, iy + 1)
                blended[j] = a + sy * (b - a)
            for c in range(ncols):
                x = c / period
                ix = int(x)
                sx = _smooth(x - ix)
                out[k, c] += amp * (blended[ix] + sx * (blended[ix + 1] - blended[ix]))


@numba.njit(cache=True, nogil=True)
def _format_rows(values, decimals, nodata_text, buf):
    """Rows of ``values`` (NaN: ``nodata_text``) as text with ``decimals`` into ``buf``;
    returns the bytes used."""
    scale = 10.0 ** decimals
    digits = np.empty(24, dtype=np.uint8)
    p = 0
    rows, cols = values.shape
    for r in range(rows):
        for c in range(cols):
            if c:
                buf[p] = 32
                p += 1
            v = values[r, c]
            if np.isnan(v):
                for k in range(nodata_text.shape[0]):
                    buf[p] = nodata_text[k]
                    p += 1
                continue
            q = np.int64(np.round(v * scale))
            if q < 0:
                buf[p] = 45
                p += 1
                q = -q
            n = 0
            while True:
                digits[n] = 48 + q % 10
                q //= 10
                n += 1
                if q == 0 and n > decimals:
                    break
            for k in range(n - 1, -1, -1):
                buf[p] = digits[k]
                p += 1
                if k == decimals and decimals > 0:
                    buf[p] = 46
                    p += 1
        buf[p] = 10
        p += 1
    return p


def _band_rows(cols):
    """Rows a band of a grid ``cols`` wide: 64, fewer where that would pass ``_BAND_CELLS``."""
    return max(1, min(_BAND_ROWS, _BAND_CELLS // max(int(cols), 1)))


def _sample_rows(rows, cols):
    """Rows of the nodata threshold's sample: 256, fewer where that would pass
    ``_SAMPLE_CELLS``."""
    return max(1, min(int(rows), 256, _SAMPLE_CELLS // max(int(cols), 1)))


def _check_fits(path, rows, cols, nodata=0.0):
    """Refuse before any allocation a grid whose text cannot fit on the disk, or whose band
    and nodata sample cannot fit in memory (lower bounds: a grid that fits is never refused)."""
    parent = Path(path).parent if str(Path(path).parent) else Path(".")
    need = int(rows) * int(cols) * _MIN_CELL_BYTES
    free = shutil.disk_usage(parent).free
    if need > free:
        raise InputError(f"{path}: {rows} x {cols} cells need at least {format_bytes(need)} of "
                         f"text; {format_bytes(free)} free in {parent}")
    band = _band_rows(cols) * int(cols) * _BAND_BYTES_PER_CELL
    sample = _sample_rows(rows, cols) * int(cols) * 8 * 2 if nodata > 0 else 0
    avail = available_memory()
    if band + sample > avail:
        raise InputError(f"{path}: rows of {cols} cells need at least "
                         f"{(band + sample) / 2**30:.1f} GiB of memory to write; "
                         f"{avail / 2**30:.1f} GiB available")


def _base_period(rows, cols, divisor):
    side = max(rows, cols, 2)
    return float(max(2, 1 << max(0, (side // divisor - 1).bit_length())))


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
            _fbm_rows(self.seed ^ _MASK_SALT, sample, self.cols, self.mask_period, 3, field)
            self.threshold = float(np.quantile(field, 1.0 - nodata))

    def band(self, r0, r1):
        """Values of rows ``r0:r1`` rounded as written (float64, NaN = nodata)."""
        ids = np.arange(r0, r1, dtype=np.int64)
        z = np.empty((r1 - r0, self.cols))
        octaves = max(1, int(np.log2(self.period)))  # down to a period of 2 cells
        _fbm_rows(self.seed, ids, self.cols, self.period, octaves, z)
        z -= 0.5
        z *= 1600.0  # mostly 0..1000 m, some cells below zero
        z += 500.0
        scale = 10.0 ** self.decimals
        z = np.round(z * scale) / scale
        if self.threshold is not None:
            m = np.empty_like(z)
            _fbm_rows(self.seed ^ _MASK_SALT, ids, self.cols, self.mask_period, 3, m)
            z[m > self.threshold] = np.nan
        return z

    def text(self, r0, r1):
        z = self.band(r0, r1)
        buf = np.empty((r1 - r0) * (self.cols * 12 + 1), dtype=np.uint8)
        nodata = np.frombuffer(str(SYNTH_NODATA).encode(), dtype=np.uint8)
        n = _format_rows(z, self.decimals, nodata, buf)
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
    rows, cols, seed : int
    nodata : float
        Fraction of cells, in blobs, written as ``-9999``.
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
                         available_memory() // (4 * band_bytes)))
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
