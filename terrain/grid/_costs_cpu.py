"""The Numba twins of :func:`terrain.grid.costs.arc_costs_np`, ``arc_factor_np`` and
``exp_det_np`` (and of ``_costs.cuh``), the same bits, and :func:`window_arc_factor`, an
arc's existence and friction factor on a window of cells; apart from
:mod:`terrain.grid.costs` so the GPU never imports Numba.
"""

import math

import numba
import numpy as np

from .costs import (ARC_DC, ARC_DR, EXP_COEF, EXP_MAX, EXP_MIN, INV_LN2, KNIGHT_MID, LN2_HI,
                    LN2_LO, TOBLER_A, TOBLER_S0, TOBLER_V0)

__all__ = ["arc_cost", "exp_det", "pair_factor", "quad_factor", "window_arc_factor"]

_C = EXP_COEF


@numba.njit(cache=True, nogil=True, inline="always")
def exp_det(x):
    """``exp(x)`` in float64 with the same bits on every backend.

    >>> exp_det(1.0) == float(__import__("terrain.grid.costs").grid.costs.exp_det_np(1.0))
    True
    """
    if x != x:
        return x
    if x > EXP_MAX:
        return math.inf
    if x < EXP_MIN:
        return 0.0
    k = math.floor(x * INV_LN2 + 0.5)
    r = (x - k * LN2_HI) - k * LN2_LO
    p = _C[13]
    p = p * r + _C[12]
    p = p * r + _C[11]
    p = p * r + _C[10]
    p = p * r + _C[9]
    p = p * r + _C[8]
    p = p * r + _C[7]
    p = p * r + _C[6]
    p = p * r + _C[5]
    p = p * r + _C[4]
    p = p * r + _C[3]
    p = p * r + _C[2]
    p = p * r + _C[1]
    p = p * r + _C[0]
    return math.ldexp(p, int(k))


@numba.njit(cache=True, nogil=True, inline="always")
def pair_factor(fu, fv):
    """Friction factor of a rook or diagonal arc: ``(f_u + f_v) * 0.5``."""
    return (np.float64(fu) + np.float64(fv)) * 0.5


@numba.njit(cache=True, nogil=True, inline="always")
def quad_factor(fu, fv, fa, fb):
    """Friction factor of a knight arc: ``((f_u + f_v) + (f_a + f_b)) * 0.25``, ``a, b`` the
    cells it passes between."""
    return ((np.float64(fu) + np.float64(fv)) + (np.float64(fa) + np.float64(fb))) * 0.25


@numba.njit(cache=True, nogil=True, inline="always")
def window_arc_factor(z, f, has_f, ur, uc, k):
    """``(exists, factor)`` of arc ``k`` from cell ``(ur, uc)`` of the 2-D window ``z, f``
    (``f`` read only when ``has_f``; NaN = nodata), its two ends being vertices: a knight arc
    exists only when the two cells it passes between are vertices of the window too."""
    vr = ur + ARC_DR[k]
    vc = uc + ARC_DC[k]
    fu = f[ur, uc] if has_f else np.float32(1.0)
    fv = f[vr, vc] if has_f else np.float32(1.0)
    if k < 8:
        return True, pair_factor(fu, fv)
    ka = KNIGHT_MID[k - 8, 0]
    kb = KNIGHT_MID[k - 8, 1]
    ar = ur + ARC_DR[ka]
    ac = uc + ARC_DC[ka]
    br = ur + ARC_DR[kb]
    bc = uc + ARC_DC[kb]
    H, W = z.shape
    if ar < 0 or ar >= H or ac < 0 or ac >= W or br < 0 or br >= H or bc < 0 or bc >= W:
        return False, 0.0
    za = z[ar, ac]
    zb = z[br, bc]
    fa = f[ar, ac] if has_f else np.float32(1.0)
    fb = f[br, bc] if has_f else np.float32(1.0)
    if za != za or zb != zb or fa != fa or fb != fb:
        return False, 0.0
    return True, quad_factor(fu, fv, fa, fb)


@numba.njit(cache=True, nogil=True, inline="always")
def arc_cost(zu, zv, factor, k, model, lengths):
    """Cost (float64) of arc ``k`` from ``u`` to ``v`` with friction factor ``factor``:
    :func:`terrain.grid.costs.arc_costs_np` for one arc."""
    if model == 0:
        return abs(np.float64(zv) - np.float64(zu))
    length = lengths[k]
    if model == 1:
        return length * factor
    s = (np.float64(zv) - np.float64(zu)) / length
    e = exp_det(TOBLER_A * abs(s + TOBLER_S0))
    return ((length * e) / TOBLER_V0) * factor
