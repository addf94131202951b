"""Edges of the grid graph of a DEM: ids, directions and the four weight models.

Edge ``(cell, d)`` belongs to its row-major-lower endpoint ``cell = row * ncols + col``,
direction E=0, S=1, SE=2, SW=3 (4-connectivity: E and S); its id is ``4 * cell + d``. A
weight is a float32 computed from the two float32 elevations in float64 with IEEE
round-to-nearest operations, rounded once (``-0.0`` becomes ``+0.0``), so CPU and GPU give
the same bits; edges are ordered by ``(weight, id)``, a total order (docs/mst.md, "The
graph"). :func:`order_bits` maps a float32 to a uint32 of the same order for packed keys.
"""

import math
from fractions import Fraction

import numpy as np

from ..errors import InputError

__all__ = ["WEIGHT_MODELS", "DIRECTIONS", "CONNECTIVITIES", "MAX_TILE", "weight_model_code",
           "check_connectivity", "check_cellsize", "horizontal_lengths", "grid_edges", "edge_keys",
           "order_bits", "edge_weights_np", "block_sides", "WeightSum", "check_weight_range"]

WEIGHT_MODELS = ("max", "absdiff", "slope", "length3d")
MAX_TILE = 1 << 15  # 4 * tile² local edge indices must fit 32 bits
_DBL_MIN = float(np.finfo(np.float64).tiny)  # the smallest normal double
CONNECTIVITIES = (4, 8)
# (drow, dcol) from the owner cell, indexed by direction
DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))
DROW = np.array([d[0] for d in DIRECTIONS], dtype=np.int64)
DCOL = np.array([d[1] for d in DIRECTIONS], dtype=np.int64)
# a cell's 8 neighbours: the directions, then their reverses (k and k + 4: one edge from its
# two ends)
NB_DROW, NB_DCOL = np.concatenate([DROW, -DROW]), np.concatenate([DCOL, -DCOL])


def weight_model_code(weight):
    """Integer code (0..3) of a weight model name; :class:`InputError` for an unknown one."""
    if weight not in WEIGHT_MODELS:
        raise InputError(f"unknown weight model {weight!r} "
                         f"(choose from {', '.join(WEIGHT_MODELS)})")
    return WEIGHT_MODELS.index(weight)


def check_connectivity(connectivity):
    """``connectivity`` as int, or :class:`InputError` unless it is 4 or 8."""
    try:
        c = int(connectivity)
        if c != float(connectivity):  # 8.5 is no connectivity, not 8
            c = None
    except (TypeError, ValueError):
        c = None
    if c not in CONNECTIVITIES:
        raise InputError(f"connectivity {connectivity!r} is not 4 or 8")
    return c


def check_cellsize(cellsize, reach=1):
    """``(|dx|, |dy|)`` of ``cellsize`` as floats, or :class:`InputError` unless both are
    positive and finite and the length of an arc ``reach`` cells along each axis (1: the
    diagonal; 2: a knight arc's bound) can be computed: no square underflows (a slope or
    cost would divide by 0 or lose its precision) or overflows."""
    try:
        dx, dy = (abs(float(cellsize[0])), abs(float(cellsize[1])))
    except (TypeError, ValueError, IndexError):
        raise InputError(f"cell size {cellsize!r}: must be two positive numbers") from None
    if not (dx > 0 and dy > 0 and math.isfinite(dx) and math.isfinite(dy)):
        raise InputError(f"cell size {cellsize!r}: must be positive and finite")
    ex, ey = reach * dx, reach * dy
    if not (dx * dx >= _DBL_MIN and dy * dy >= _DBL_MIN and math.isfinite(ex * ex + ey * ey)):
        raise InputError(f"cell size {dx!r} x {dy!r}: its square under- or overflows (the "
                         "diagonal's length cannot be computed)")
    return dx, dy


def horizontal_lengths(cellsize=(1.0, 1.0)):
    """Horizontal length of each direction (E, S, SE, SW) as float64, from ``(dx, dy)``."""
    dx, dy = check_cellsize(cellsize)
    diag = math.sqrt(dx * dx + dy * dy)
    return np.array([dx, dy, diag, diag], dtype=np.float64)


def check_weight_range(zmin, zmax, weight, cellsize=(1.0, 1.0), where="dem"):
    """:class:`InputError` when elevations from ``zmin`` to ``zmax`` can make a ``weight``
    beyond float32's range (the weights' type): an infinite weight ties with every other
    one, and the forest is then no minimum (``max`` takes an elevation itself: none).

    >>> check_weight_range(-3e38, 3e38, "max")
    >>> check_weight_range(-3e38, 3e38, "absdiff")
    Traceback (most recent call last):
    terrain.errors.InputError: dem: elevations from -3e+38 to 3e+38: absdiff weights up to 6e+38 lie beyond float32's range (3.4e+38)
    """
    model = weight_model_code(weight)
    if model == 0 or zmin is None or zmax is None:
        return
    rise = float(zmax) - float(zmin)
    hlen = horizontal_lengths(cellsize)
    top = {1: rise, 2: rise / float(hlen.min()), 3: math.hypot(float(hlen.max()), rise)}[model]
    if not top <= float(np.finfo(np.float32).max):
        raise InputError(f"{where}: elevations from {float(zmin):.6g} to {float(zmax):.6g}: "
                         f"{WEIGHT_MODELS[model]} weights up to {top:.6g} lie beyond "
                         "float32's range (3.4e+38)")


def block_sides(window, shape):
    """Bit flags of the sides of ``window`` that face other blocks (top 1, bottom 2, left 4,
    right 8): a block's boundary, where grid edges leave it.

    >>> block_sides((0, 4, 2, 6), (10, 6))
    6
    """
    r0, r1, c0, c1 = window
    return int(r0 > 0) | int(r1 < shape[0]) << 1 | int(c0 > 0) << 2 | int(c1 < shape[1]) << 3


def order_bits(w):
    """uint32 array whose unsigned order is the order of the float32 array ``w`` (no NaN).

    Examples
    --------
    >>> order_bits(np.array([-1.0, 0.0, 2.5], np.float32)).argsort().tolist()
    [0, 1, 2]
    """
    b = np.asarray(w, dtype=np.float32).view(np.uint32)
    flip = (b.view(np.int32) >> np.int32(31)).view(np.uint32)  # all ones where negative
    flip |= np.uint32(0x80000000)
    return b ^ flip


def edge_weights_np(z_owner, z_other, d, model, hlen):
    """Vectorised :func:`edge_weight` (bit-identical): float32 weights of edges in direction ``d``."""
    za = np.asarray(z_owner, np.float32)
    zb = np.asarray(z_other, np.float32)
    if model == 0:
        w = np.maximum(za, zb)
    else:
        dz = np.abs(za.astype(np.float64) - zb.astype(np.float64))
        # beyond float32: inf, which check_weight_range refuses before any output
        with np.errstate(over="ignore"):
            if model == 1:
                w = dz.astype(np.float32)
            elif model == 2:
                w = (dz / hlen[d]).astype(np.float32)
            else:
                w = np.sqrt(hlen[d] * hlen[d] + dz * dz).astype(np.float32)
    w += np.float32(0)  # -0.0 + 0.0 is +0.0 under round-to-nearest; any other w is kept
    return w


def edge_keys(z, connectivity, model, hlen, band_cells=1 << 22):
    """The keys ``order_bits(w) << 32 | 4·cell + d`` of every edge of the float32 grid ``z``
    (unsorted; sorted, they are the ``(weight, id)`` order) and its count of valid cells.

    One uint64 array of the grid's edges, filled a band of about ``band_cells`` owner cells
    at a time: the masks, weights and indices of a band, not of the grid, beside it (8 bytes
    an edge in all, where whole-grid arrays took 40). Cells < 2^30 (32-bit ids).

    >>> k, cells = edge_keys(np.array([[1, 2], [3, np.nan]], np.float32), 8, 0,
    ...                      horizontal_lengths())
    >>> sorted(int(x) & 0xFFFFFFFF for x in k), cells
    ([0, 1, 7], 3)
    """
    rows, cols = z.shape
    dirs = 2 if int(connectivity) == 4 else 4
    keys = np.empty(dirs * rows * cols, np.uint64)
    m = 0
    step = max(1, int(band_cells) // max(cols, 1))
    for r0 in range(0, rows, step):
        for d in range(dirs):
            dr, dc = DIRECTIONS[d]
            c0, c1 = max(0, -dc), cols - max(0, dc)
            r1 = min(r0 + step, rows - dr)
            if r1 <= r0 or c1 <= c0:
                continue
            a, b = z[r0:r1, c0:c1], z[r0 + dr:r1 + dr, c0 + dc:c1 + dc]
            ok = ~np.isnan(a)
            ok &= ~np.isnan(b)
            w = edge_weights_np(a[ok], b[ok], d, model, hlen)
            out = keys[m:m + w.size]
            np.left_shift(order_bits(w), np.uint64(32), out=out, dtype=np.uint64)
            ids = np.arange(r0, r1, dtype=np.uint64)[:, None] * np.uint64(4 * cols)
            ids = ids + np.arange(4 * c0 + d, 4 * c1, 4, dtype=np.uint64)
            out |= ids[ok]
            m += w.size
    return keys[:m], int(np.count_nonzero(~np.isnan(z)))


#: values one :meth:`WeightSum.add` sums per pass: mantissas below 2^24, so every partial sum of
#: a pass stays below 2^53 and float64 holds it exactly
_SUM_CHUNK = 1 << 28


class WeightSum:
    """Exact sum of float32 weights, independent of the order of the additions.

    Integer mantissas summed per binary exponent; :meth:`value` rounds the total once.

    Examples
    --------
    >>> WeightSum().add(np.array([0.1, 1e8, -1e8], np.float32)).value()
    0.10000000149011612
    """

    def __init__(self, acc=None):
        self.acc = np.zeros(256, np.int64) if acc is None else np.asarray(acc, np.int64).copy()

    def add(self, w, sign=1):
        bits = np.ascontiguousarray(w, np.float32).ravel().view(np.uint32)
        for a in range(0, bits.size, _SUM_CHUNK):
            b = bits[a:a + _SUM_CHUNK]
            e = (b >> np.uint32(23)) & np.uint32(0xFF)
            m = (b & np.uint32(0x7FFFFF)) | ((e > 0).astype(np.uint32) << np.uint32(23))
            signed = np.where(b >> np.uint32(31), -m.astype(np.float64), m.astype(np.float64))
            self.acc += int(sign) * np.bincount(e, weights=signed, minlength=256).astype(np.int64)
        return self

    def merge(self, other):
        self.acc += other.acc
        return self

    def value(self):
        total = sum(int(a) << (max(e, 1) - 1) for e, a in enumerate(self.acc.tolist()) if a)
        return float(Fraction(total, 1 << 149))


def grid_edges(dem, connectivity=8, weight="max", cellsize=(1.0, 1.0)):
    """All edges of the grid graph of ``dem``: ``(ids, owner, other, weights)``.

    A plain NumPy construction over the whole grid (memory O(cells)), for small grids and
    oracles.

    Parameters
    ----------
    dem : (rows, cols) array, NaN = nodata
    connectivity : {4, 8}
    weight : {'max', 'absdiff', 'slope', 'length3d'}
    cellsize : (dx, dy)

    Returns
    -------
    ids, owner, other : int64 arrays
    weights : float32 array

    Examples
    --------
    >>> ids, u, v, w = grid_edges(np.array([[1.0, 2.0], [3.0, np.nan]]), 8)
    >>> ids.tolist(), w.tolist()
    ([0, 1, 7], [2.0, 3.0, 3.0])
    """
    z = np.asarray(dem, dtype=np.float32)
    if z.ndim != 2:
        raise InputError(f"grid_edges: dem must be 2-D, got shape {z.shape}")
    model = weight_model_code(weight)
    hlen = horizontal_lengths(cellsize)
    rows, cols = z.shape
    valid = ~np.isnan(z)
    # one slot per edge id (4 a cell): the ids of the edges in increasing order, unsorted
    ok = np.zeros((rows, cols, 4), bool)
    w = np.zeros((rows, cols, 4), np.float32)
    for d in range(2 if check_connectivity(connectivity) == 4 else 4):
        dr, dc = DIRECTIONS[d]
        c0, c1 = max(0, -dc), cols - max(0, dc)
        if rows <= dr or c1 <= c0:
            continue
        a, b = z[:rows - dr, c0:c1], z[dr:, c0 + dc:c1 + dc]
        o = valid[:rows - dr, c0:c1] & valid[dr:, c0 + dc:c1 + dc]
        ok[:rows - dr, c0:c1, d] = o
        w[:rows - dr, c0:c1, d][o] = edge_weights_np(a[o], b[o], d, model, hlen)
    ids = np.flatnonzero(ok)
    owner, d = ids >> 2, ids & 3
    return ids, owner, owner + DROW[d] * np.int64(cols) + DCOL[d], w.reshape(-1)[ids]
