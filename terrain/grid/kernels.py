"""Numba kernels the grid's CPU code shares: the weight of one edge (definition and NumPy twin
in :mod:`terrain.grid.edges`), apart so that NumPy code importing edges needs no Numba, and
the read of a stop flag.
"""

import math

import numba
import numpy as np
from numba.extending import intrinsic

__all__ = ["edge_weight", "stopped"]


@intrinsic
def stopped(typingctx, flag):
    """``flag[0]`` (a uint8 array: :func:`terrain.native.interruptible`) read from memory each
    time: a plain read, which nothing in the loop writes, LLVM hoists out of the loop, and
    the kernel would never see the flag set by another thread."""
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        return builder.load_atomic(ary.data, "monotonic", 1)
    return numba.types.uint8(flag), codegen


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
