"""Numba kernels of the synthetic terrain writer: seeded fractal value noise and number formatting.

Value noise: each octave has a lattice of period ``P`` cells whose node values come from a
hash of (seed, octave, lattice x, lattice y), so any row is computed from the seed alone and
bands are reproducible independently. A row of one octave first blends the two lattice rows
around it (smoothstep weight), then each cell blends the two lattice columns around it:
about two hashes per cell over all octaves.

These kernels are CPU-only (synthetic input generation, no GPU twin needed).
"""

import numba
import numpy as np

__all__ = ["fbm_rows", "format_rows"]

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
def fbm_rows(seed, row_ids, ncols, base_period, n_octaves, out):
    """Fractal value noise in [0, 1) for the rows ``row_ids`` (out: float64, rows × ncols).

    Octave ``o`` has period ``base_period / 2**o`` and amplitude ``2**-o``.
    """
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
def format_rows(values, decimals, nodata_text, buf):
    """Write rows of ``values`` (float64, NaN = nodata) as text into ``buf``; return bytes used.

    Each value is rounded to ``decimals`` (0 writes integers), separated by one space, rows
    end with ``\\n``; NaN writes ``nodata_text`` (uint8 array).
    """
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
