"""The Numba twins of :func:`terrain.grid.costs.arc_costs_np` and ``exp_det_np`` (and of
``_costs.cuh``), the same bits; apart from :mod:`terrain.grid.costs` so the GPU never imports
Numba.
"""

import math

import numba
import numpy as np

from .costs import (EXP_COEF, EXP_MAX, EXP_MIN, INV_LN2, LN2_HI, LN2_LO, TOBLER_A, TOBLER_S0,
                    TOBLER_V0)

__all__ = ["arc_cost", "exp_det"]

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
def arc_cost(zu, zv, fu, fv, k, model, lengths):
    """Cost (float64) of arc ``k`` from ``u`` to ``v``: :func:`terrain.grid.costs.arc_costs_np`
    for one arc."""
    if model == 0:
        return abs(np.float64(zv) - np.float64(zu))
    fmean = (np.float64(fu) + np.float64(fv)) * 0.5
    length = lengths[k]
    if model == 1:
        return length * fmean
    s = (np.float64(zv) - np.float64(zu)) / length
    e = exp_det(TOBLER_A * abs(s + TOBLER_S0))
    return ((length * e) / TOBLER_V0) * fmean
