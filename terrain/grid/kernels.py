"""Numba kernels the grid's CPU code shares: the weight of one edge (definition and NumPy twin
in :mod:`terrain.grid.edges`), apart so that NumPy code importing edges needs no Numba.
"""

import math

import numba
import numpy as np

__all__ = ["edge_weight"]


@numba.njit(cache=True, nogil=True, inline="always")
def edge_weight(z_owner, z_other, d, model, hlen):
    """Weight of the edge (float32) from two float32 elevations (:mod:`terrain.grid.edges`)."""
    if model == 0:
        w = np.float32(z_owner if z_owner >= z_other else z_other)
    else:
        dz = abs(np.float64(z_owner) - np.float64(z_other))
        if model == 1:
            w = np.float32(dz)
        elif model == 2:
            w = np.float32(dz / hlen[d])
        else:
            h = hlen[d]
            w = np.float32(math.sqrt(h * h + dz * dz))
    if w == 0:
        w = np.float32(0.0)  # -0.0 and +0.0 get the same bits
    return w
