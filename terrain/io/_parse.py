"""Kernels of the ASCII grid parser: the newline index and row parsing (C, via ctypes).

Numbers are parsed as GDAL does (``strtod``, then a float32 cast), bit for bit, with
Clinger's exact fast path; other tokens are marked :data:`SLOW_BITS` for the caller to
re-parse with Python's ``float``. The kernels live in :mod:`terrain.native` (NumPy has no
in-place bytes-to-float parser) and run without the GIL; ``_parse.cu`` is the GPU twin.

>>> import numpy as np
>>> text = np.frombuffer(b"1.5 -2 -9999\\n3e2 * 7\\n", dtype=np.uint8)
>>> out = np.empty((2, 3), dtype=np.float32)
>>> status, row, count, t0, t1, n_slow, rounded, stats = parse_rows(
...     text, np.array([0, 13, 21]), 3, out, -9999.0, True, True)
>>> status == PARSE_OK, out.tolist()
(True, [[1.5, -2.0, nan], [300.0, nan, 7.0]])
>>> stats, nan_min_max(out)
((2, -2.0, 300.0), (2, -2.0, 300.0))
"""

import ctypes

import numpy as np

from .. import native
from ..native import address as _ptr

__all__ = ["newline_offsets", "parse_rows", "nan_min_max", "load_library",
           "PARSE_OK", "PARSE_BAD_TOKEN", "PARSE_ROW_LENGTH", "SLOW_BITS"]

PARSE_OK = 0
PARSE_BAD_TOKEN = 1
PARSE_ROW_LENGTH = 2

#: float32 bit pattern (a quiet NaN with a payload) marking cells for the slow path; nodata is
#: the canonical NaN 0x7FC00000, so the two never mix up.
SLOW_BITS = np.uint32(0x7FC0DEAD)


_i64, _vp = ctypes.c_int64, ctypes.c_void_p


def newline_offsets(text, base=0, expected=None):
    """``base +`` offsets just after each ``\\n`` in ``text`` (a 1-D uint8 array), int64,
    by ``memchr`` without the GIL; ``expected`` guesses the count (too low: a second pass).

    >>> import numpy as np
    >>> newline_offsets(np.frombuffer(b"ab\\ncd\\n\\ne", dtype=np.uint8), 100).tolist()
    [103, 106, 107]
    """
    lib = load_library()
    text = _bytes_array(text, "newline_offsets")
    cap = max(16, int(expected if expected is not None else text.size // 64 + 16))
    while True:
        out = np.empty(cap, dtype=np.int64)
        n = lib.terrain_newlines(_ptr(text), text.size, int(base), _ptr(out), cap)
        if n <= cap:
            return out[:n] if 2 * n >= cap else out[:n].copy()
        cap = n


def _bytes_array(buf, who):
    buf = np.asarray(buf)
    if buf.dtype != np.uint8 or buf.ndim != 1 or not buf.flags.c_contiguous:
        raise ValueError(f"{who}: the text must be a contiguous 1-D uint8 array")
    return buf


_SIGNATURES = {
    "terrain_parse_rows": (ctypes.c_int, [_vp, _vp, _i64, _i64, _vp, _i64, ctypes.c_double,
                                          ctypes.c_int, ctypes.c_int, _vp, _vp]),
    "terrain_newlines": (_i64, [_vp, _i64, _i64, _vp, _i64]),
    "terrain_nan_min_max": (None, [_vp, _i64, _i64, _i64, _vp, _vp, _vp]),
}


def load_library():
    """The C kernels' library with the parser's functions declared."""
    return native.declared(_SIGNATURES)



def parse_rows(buf, starts, ncols, out, nodata, has_nodata, star_is_nodata):
    """Parse rows of numbers into ``out`` (float32, ``len(starts) - 1`` rows × ``ncols``).

    Parameters
    ----------
    buf : uint8 array (1-D, contiguous; read-only is fine)
        Text of the rows; row ``i`` is ``buf[starts[i]:starts[i + 1]]``, nothing else read.
    starts : int64 array
        Row boundaries in ``buf`` (non-decreasing).
    ncols : int
    out : float32 array (rows, ncols)
        Rows may be strided; NaN for nodata; slow-path cells hold :data:`SLOW_BITS`.
    nodata : float
        An integer token equal to it is nodata, another number whose float32 GDAL's float32
        nodata test takes (within about 4 units in the last place of ``float32(nodata)``).
    has_nodata, star_is_nodata : bool

    Returns
    -------
    (status, row, count, token_start, token_end, n_slow, rounded, stats)
        ``status`` is PARSE_OK, PARSE_BAD_TOKEN (row, column in ``count``, the token's span)
        or PARSE_ROW_LENGTH (row, its value count); ``rounded``: ``(row, column)`` of the
        first integer that float32 rounds, or None; ``stats``: :func:`nan_min_max` of
        ``out``, counted during the parse (valid when OK and ``n_slow`` is 0).
    """
    lib = load_library()
    buf = _bytes_array(buf, "parse_rows")
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    n_rows = starts.shape[0] - 1
    if (out.dtype != np.float32 or out.ndim != 2 or out.shape != (n_rows, ncols)
            or (ncols > 1 and out.strides[1] != 4) or out.strides[0] % 4):
        raise ValueError(f"parse_rows: out must be float32 {(n_rows, ncols)} with contiguous "
                         f"rows, got {out.dtype} {out.shape}")
    if not out.flags.writeable:
        raise ValueError("parse_rows: out is read-only")
    if n_rows <= 0:
        return PARSE_OK, 0, 0, 0, 0, 0, None, (0, np.inf, -np.inf)
    if starts[0] < 0 or starts[-1] > buf.size or (n_rows > 1 and (np.diff(starts) < 0).any()):
        raise ValueError("parse_rows: starts must be non-decreasing offsets inside buf")
    result = np.zeros(7, dtype=np.int64)
    minmax = np.zeros(2, dtype=np.float64)
    status = lib.terrain_parse_rows(_ptr(buf), _ptr(starts), n_rows, ncols, _ptr(out),
                                    out.strides[0] // 4, float(nodata), bool(has_nodata),
                                    bool(star_is_nodata), _ptr(result), _ptr(minmax))
    if status < 0:
        raise MemoryError("parse_rows: no memory for a copy of the last row")
    row, count, t0, t1, n_slow, n_nan, rounded = (int(v) for v in result)
    rounded = divmod(rounded, ncols) if rounded >= 0 else None
    return (status, row, count, t0, t1, n_slow, rounded,
            (n_nan, float(minmax[0]), float(minmax[1])))


def nan_min_max(z):
    """``(NaN count, min, max)`` of a 2-D float32 array in one pass (min/max ignore NaN;
    ``inf, -inf`` when every value is NaN)."""
    lib = load_library()
    z = np.asarray(z)
    if z.dtype != np.float32 or z.ndim != 2:
        raise ValueError(f"nan_min_max: z must be 2-D float32, got {z.dtype} {z.shape}")
    if z.shape[1] > 1 and z.strides[1] != 4 or z.strides[0] % 4:
        z = np.ascontiguousarray(z)
    n_nan, lo, hi = ctypes.c_int64(), ctypes.c_double(), ctypes.c_double()
    lib.terrain_nan_min_max(_ptr(z), z.shape[0], z.shape[1], z.strides[0] // 4,
                            ctypes.byref(n_nan), ctypes.byref(lo), ctypes.byref(hi))
    return n_nan.value, lo.value, hi.value
