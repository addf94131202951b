"""Kernels of the ASCII grid parser: the newline index (NumPy) and row-band parsing (Numba).

Numbers are parsed the way GDAL's ASCII readers do it (``strtod`` to a double, then a cast
to float32), bit for bit, with Clinger's exact fast path: a decimal significand ``m`` with
``m <= 2**53`` (an exact double) and a power of ten ``|e| <= 22`` (an exact double too)
gives ``m * 10**e`` or ``m / 10**-e``, one IEEE operation and therefore the correctly
rounded double that ``strtod`` returns. That covers every token with at most 15
significant digits. Other tokens (more digits, huge exponents) are marked in the output
with a NaN payload (:data:`SLOW_BITS`) and counted; the caller re-parses those with
Python's ``float`` (also correctly rounded).

The parser is a Numba loop because NumPy has no bytes-to-float parser that works on a
buffer in place. These kernels are CPU-only: ingest is I/O, not an algorithm with a GPU
twin.
"""

import numba
import numpy as np

__all__ = ["newline_positions", "parse_rows", "nan_min_max", "load_kernels", "PARSE_OK",
           "PARSE_BAD_TOKEN", "PARSE_ROW_LENGTH", "SLOW_BITS"]

PARSE_OK = 0
PARSE_BAD_TOKEN = 1
PARSE_ROW_LENGTH = 2

#: float32 bit pattern (a quiet NaN with a payload) marking cells for the slow path; nodata is
#: the canonical NaN 0x7FC00000, so the two never mix up.
SLOW_BITS = np.uint32(0x7FC0DEAD)

_POW10 = np.array([10.0 ** k for k in range(23)], dtype=np.float64)  # all exact doubles
_EXACT = np.uint64(2 ** 53)
_MAX_DIGITS = 19  # digits that always fit a uint64 significand


def newline_positions(buf, n, base):
    """``base +`` offsets just after each ``\\n`` in ``buf[:n]`` (int64 array).

    NumPy, not a loop: the comparison and ``flatnonzero`` run at memory speed with the GIL
    released, so the chunks of one file are indexed in parallel threads, and no Numba
    kernel needs loading before the first pass can start.
    """
    return np.flatnonzero(buf[:n] == 10).astype(np.int64) + (base + 1)


def load_kernels():
    """Load (from Numba's cache) or compile the parser's kernels now, with tiny inputs.

    The first Numba call of a process initialises the compiler (about half a second);
    ingest runs this in a background thread while the scheduler starts.
    """
    # writable, as the parser's buffers are: a read-only array is another specialization
    buf = np.frombuffer(bytearray(b"1 *\n\n"), dtype=np.uint8)
    out = np.empty((1, 2), dtype=np.float32)
    parse_rows(buf, np.array([0, 4], dtype=np.int64), 2, out, np.float32(0), False, True)
    nan_min_max(out)


@numba.njit(cache=True, nogil=True, inline="always")
def _is_space(c):
    # space, \t, \n, \v, \f, \r: what strtod-based readers skip
    return c == 32 or (c >= 9 and c <= 13)


@numba.njit(cache=True, nogil=True)
def parse_rows(buf, starts, ncols, out, nodata, has_nodata, star_is_nodata):
    """Parse rows of numbers into ``out`` (float32, ``len(starts) - 1`` rows × ``ncols``).

    Parameters
    ----------
    buf : uint8 array
        Text of the rows; row ``i`` is ``buf[starts[i]:starts[i + 1]]`` (newline included).
        ``buf[starts[-1]]`` must be a whitespace sentinel (the caller sets it): tokens end
        at whitespace, so the inner loops need no bounds checks.
    starts : int64 array
        Row boundaries in ``buf``.
    ncols : int
        Values a row must hold.
    out : float32 array (rows, ncols)
        Values; NaN for nodata (``== nodata`` after the float32 cast, or ``*``); cells that
        need the slow path hold the bits :data:`SLOW_BITS`.
    nodata : float32
    has_nodata, star_is_nodata : bool

    Returns
    -------
    (status, row, count, token_start, token_end, n_slow)
        ``status`` is PARSE_OK, PARSE_BAD_TOKEN (row, its column in ``count``, the token's
        byte span) or PARSE_ROW_LENGTH (row and the number of values it holds).
    """
    nan32 = np.float32(np.nan)
    slow32 = np.array([SLOW_BITS], dtype=np.uint32).view(np.float32)[0]
    n_slow = 0
    n_rows = starts.shape[0] - 1
    for r in range(n_rows):
        p = starts[r]
        end = starts[r + 1]
        orow = out[r]
        col = 0
        while True:
            while p < end and _is_space(buf[p]):
                p += 1
            if p >= end:
                break
            t0 = p
            neg = buf[p] == 45  # '-'
            if neg or buf[p] == 43:  # '+'
                p += 1
            mant = np.uint64(0)
            nd = 0          # digits folded into mant (leading zeros included)
            e10 = 0         # power of ten of mant's last digit
            exact = True    # every nonzero digit made it into mant
            n_digits = 0
            point = 0       # 1 once past the decimal point
            while True:  # the whitespace byte ending the row (or the sentinel) stops it
                d = np.int64(buf[p]) - 48
                if d >= 0 and d <= 9:
                    if nd < _MAX_DIGITS:
                        mant = mant * np.uint64(10) + np.uint64(d)
                        nd += 1
                        e10 -= point
                    else:  # beyond uint64: only zeros keep the value exact
                        e10 += 1 - point
                        exact &= d == 0
                    n_digits += 1
                elif d == -2 and point == 0:  # '.'
                    point = 1
                else:
                    break
                p += 1
            ok = n_digits > 0
            if ok and (buf[p] == 101 or buf[p] == 69):  # 'e' 'E'
                p += 1
                eneg = False
                if buf[p] == 45 or buf[p] == 43:
                    eneg = buf[p] == 45
                    p += 1
                exp = 0
                n_exp = 0
                while buf[p] >= 48 and buf[p] <= 57:
                    if exp < 100000:
                        exp = exp * 10 + np.int64(buf[p]) - 48
                    n_exp += 1
                    p += 1
                ok = n_exp > 0
                e10 += -exp if eneg else exp
            if not ok or not _is_space(buf[p]):
                while p < end and not _is_space(buf[p]):
                    p += 1
                if star_is_nodata and p - t0 == 1 and buf[t0] == 42:  # GRASS '*'
                    if col < ncols:
                        orow[col] = nan32
                    col += 1
                    continue
                return PARSE_BAD_TOKEN, r, col, t0, p, n_slow
            if col < ncols:
                if mant == 0:
                    v = -0.0 if neg else 0.0
                else:
                    while mant > _EXACT and mant % np.uint64(10) == 0:  # trailing zeros
                        mant //= np.uint64(10)
                        e10 += 1
                    if not exact or mant > _EXACT or e10 < -22 or e10 > 22:
                        orow[col] = slow32
                        n_slow += 1
                        col += 1
                        continue
                    v = np.float64(mant)
                    v = v * _POW10[e10] if e10 >= 0 else v / _POW10[-e10]
                    if neg:
                        v = -v
                f = np.float32(v)
                orow[col] = nan32 if has_nodata and f == nodata else f
            col += 1
        if col != ncols:
            return PARSE_ROW_LENGTH, r, col, 0, 0, n_slow
    return PARSE_OK, 0, 0, 0, 0, n_slow


@numba.njit(cache=True, nogil=True)
def nan_min_max(z):
    """``(NaN count, min, max)`` of a 2-D float32 array in one pass (min/max ignore NaN;
    ``inf, -inf`` when every value is NaN)."""
    n_nan = 0
    lo = np.inf
    hi = -np.inf
    for i in range(z.shape[0]):
        for j in range(z.shape[1]):
            v = z[i, j]
            if np.isnan(v):
                n_nan += 1
            else:
                lo = min(lo, v)
                hi = max(hi, v)
    return n_nan, lo, hi
