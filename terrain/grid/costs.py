"""Arc costs of the directed grid graph used by cost distance (SSSP): tables and cost models.

Arc ``k`` goes from ``(r, c)`` to ``(r + ARC_DR[k], c + ARC_DC[k])`` (codes 0-7: E, SE, S,
SW, W, NW, N, NE; 8-15 the knight moves ENE ... NNE); connectivity 4 uses {0, 2, 4, 6}, 8
uses 0-7, 16 uses 0-15. An arc joins two vertices (cells whose elevation, and friction when
given, are not nodata). A knight arc is costed as GRASS ``r.cost -k`` costs it: it touches
four cells, its two ends and the two cells it passes between (:data:`KNIGHT_MID`), exists
only when all four are vertices, and its friction factor is their mean
``((f_u + f_v) + (f_a + f_b)) * 0.25``; any other arc's is ``(f_u + f_v) * 0.5``
(:func:`arc_factor_np`). Costs (``absdiff``, ``friction``, ``tobler``) are float64 from
float32 inputs, one IEEE operation at a time in the order written, with our own ``exp_det``
(Cody-Waite reduction, degree-13 Taylor polynomial: libm and CUDA differ in the last bit):
the NumPy (:func:`arc_costs_np`), Numba (``_costs_cpu.py``), C (``terrain/native/kernels.c``)
and CUDA (``_costs.cuh``) twins give the same bits. An arc of infinite cost is never taken.
Definitions: docs/cost-distance.md.

Examples
--------
>>> arc_codes(4).tolist()
[0, 2, 4, 6]
>>> lengths = arc_lengths((1.0, 1.0))
>>> float(arc_costs_np(0, 0, arc_factor_np(1, 2), 1, 1, lengths))
2.121320343559643
>>> float(arc_costs_np(0, 0, arc_factor_np(1, 2, 3, 4), 8, 1, lengths))  # sqrt(5) * 10 / 4
5.5901699437494745
"""

import math

import numpy as np

from ..errors import InputError
from .edges import check_cellsize

__all__ = ["COST_MODELS", "ARC_CONNECTIVITIES", "ARC_DR", "ARC_DC", "ARC_NAMES", "KNIGHT_MID",
           "arc_codes", "arc_lengths", "cost_model_code", "check_friction", "knight_mid",
           "arc_factor_np", "arc_costs_np", "exp_det_np",
           "TOBLER_V0", "TOBLER_A", "TOBLER_S0", "EXP_COEF", "EXP_MAX", "EXP_MIN", "INV_LN2",
           "LN2_HI", "LN2_LO"]

COST_MODELS = ("absdiff", "friction", "tobler")
ARC_CONNECTIVITIES = (4, 8, 16)  # the arcs of the cost models (16: knight moves too)
ARC_DR = np.array([0, 1, 1, 1, 0, -1, -1, -1, -1, 1, 2, 2, 1, -1, -2, -2], dtype=np.int64)
ARC_DC = np.array([1, 1, 0, -1, -1, -1, 0, 1, 2, 2, 1, -1, -2, -2, -1, 1], dtype=np.int64)
ARC_NAMES = ("E", "SE", "S", "SW", "W", "NW", "N", "NE",
             "ENE", "ESE", "SSE", "SSW", "WSW", "WNW", "NNW", "NNE")
#: The two cells knight arc ``k`` (8-15) passes between, as the codes of the arcs from its
#: tail to them (row ``k - 8``): the rook neighbour on its long axis, then the diagonal one
#: (NNW from ``(r, c)``: N ``(r - 1, c)`` and NW ``(r - 1, c - 1)``).
KNIGHT_MID = np.array([[0, 7], [0, 1], [2, 1], [2, 3], [4, 3], [4, 5], [6, 5], [6, 7]],
                      dtype=np.int64)

TOBLER_V0 = 6000.0 / 3600.0  # m/s on flat ground going slightly downhill (s = -0.05)
TOBLER_A = 3.5
TOBLER_S0 = 0.05

# exp_det: exp(x) = 2**k * exp(r), r = x - k*ln2 (ln2 split so that k*LN2_HI is exact)
INV_LN2 = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01
LN2_LO = 1.90821492927058770002e-10
EXP_MAX = 709.782712893384  # above: +inf
EXP_MIN = -745.1332191019411  # below: 0
EXP_COEF = tuple(1.0 / math.factorial(n) for n in range(14))  # 1/0! .. 1/13!


def arc_codes(connectivity):
    """The arc codes ``k`` used by ``connectivity`` (4, 8 or 16), as an int64 array.

    Examples
    --------
    >>> arc_codes(16).size
    16
    """
    try:
        c = int(connectivity)
    except (TypeError, ValueError):
        c = None
    if c not in ARC_CONNECTIVITIES or str(connectivity).strip() not in ("4", "8", "16"):
        raise InputError(f"connectivity {connectivity!r}: must be 4, 8 or 16")
    if c == 4:
        return np.array([0, 2, 4, 6], dtype=np.int64)
    return np.arange(c, dtype=np.int64)


def arc_lengths(cellsize=(1.0, 1.0)):
    """Horizontal length ``L_k`` of each of the 16 arcs (float64[16]) from ``(dx, dy)``.

    Examples
    --------
    >>> arc_lengths((2.0, 1.0))[:3].tolist()
    [2.0, 2.23606797749979, 1.0]
    """
    # the knight arcs span two cells along an axis: (2 dx)² + dy² must be computable
    dx, dy = check_cellsize(cellsize, reach=2)
    ex = (ARC_DC.astype(np.float64) * dx) ** 2
    ey = (ARC_DR.astype(np.float64) * dy) ** 2
    return np.sqrt(ex + ey)


def knight_mid(k):
    """``((dr_a, dc_a), (dr_b, dc_b))``: the cells knight arc ``k`` passes between, from its
    tail.

    >>> knight_mid(14)  # NNW: N and NW
    ((-1, 0), (-1, -1))
    """
    a, b = KNIGHT_MID[int(k) - 8]
    return (int(ARC_DR[a]), int(ARC_DC[a])), (int(ARC_DR[b]), int(ARC_DC[b]))


def cost_model_code(model):
    """Integer code (0, 1, 2) of a cost model name; :class:`InputError` for an unknown one."""
    if model not in COST_MODELS:
        raise InputError(f"cost model {model!r}: unknown (choose from {', '.join(COST_MODELS)})")
    return COST_MODELS.index(model)


def check_friction(friction, name="friction raster"):
    """``friction`` as float32, or :class:`InputError` if it has a negative value (NaN: a
    barrier; ``+inf``: every arc at the cell impassable)."""
    f = np.asarray(friction, dtype=np.float32)
    # fmin skips NaN without nanmin's all-NaN warning, whose silencing (catch_warnings)
    # is not thread-safe: calls on several threads left an "ignore" filter behind
    if f.size == 0 or not np.fmin.reduce(f, axis=None) < 0:
        return f
    with np.errstate(invalid="ignore"):
        bad = f < 0
    if bad.any():
        idx = np.argwhere(bad)[0].tolist()
        raise InputError(f"{name}: negative friction {float(f[tuple(idx)])!r} at cell "
                         f"(row, col) = {tuple(idx)}")
    return f


def exp_det_np(x):
    """``exp(x)`` with the same bits on every backend (module docstring), vectorised."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        k = np.floor(x * INV_LN2 + 0.5)
        k = np.where(np.isfinite(k), k, 0.0)
        r = (x - k * LN2_HI) - k * LN2_LO
        p = np.full_like(x, EXP_COEF[13])
        for n in range(12, -1, -1):
            p = p * r + EXP_COEF[n]
        out = np.ldexp(p, k.astype(np.int64).clip(-2000, 2000))
    out = np.where(x > EXP_MAX, np.inf, out)
    out = np.where(x < EXP_MIN, 0.0, out)
    return np.where(np.isnan(x), x, out)


def arc_factor_np(fu, fv, fa=None, fb=None):
    """Friction factor (float64) of an arc, vectorised: ``(f_u + f_v) * 0.5`` from its ends,
    or with the frictions ``fa, fb`` of the two cells a knight arc passes between
    ``((f_u + f_v) + (f_a + f_b)) * 0.25`` (all 1 without a friction raster).

    >>> float(arc_factor_np(1, 2)), float(arc_factor_np(1, 2, 3, 6))
    (1.5, 3.0)
    """
    def f64(x):
        return np.asarray(x, np.float32).astype(np.float64)
    if fa is None:
        return (f64(fu) + f64(fv)) * 0.5
    return ((f64(fu) + f64(fv)) + (f64(fa) + f64(fb))) * 0.25


def arc_costs_np(zu, zv, factor, k, model, lengths):
    """Cost (float64) of arc ``k`` (scalar or array) from ``u`` to ``v`` with friction factor
    ``factor`` (:func:`arc_factor_np`; unused by ``absdiff``), vectorised."""
    zu = np.asarray(zu, np.float32).astype(np.float64)
    zv = np.asarray(zv, np.float32).astype(np.float64)
    if model == 0:
        return np.abs(zv - zu)
    factor = np.asarray(factor, np.float64)
    length = np.asarray(lengths, np.float64)[np.asarray(k, np.int64)]
    if model == 1:
        return length * factor
    with np.errstate(over="ignore", invalid="ignore"):
        s = (zv - zu) / length
        e = exp_det_np(TOBLER_A * np.abs(s + TOBLER_S0))
        return ((length * e) / TOBLER_V0) * factor
