"""The eight neighbours in ESRI code order (E, SE, S, SW, W, NW, N, NE: neighbour ``k`` has
code ``1 << k``; D4 takes the even ``k``) as row and column offsets: the one table of the
fill's and the flow's kernels on both backends (no Numba here: the GPU paths import it)."""

import numpy as np

__all__ = ["NB_DR", "NB_DC"]

NB_DR = np.array([0, 1, 1, 1, 0, -1, -1, -1], np.int64)
NB_DC = np.array([1, 1, 0, -1, -1, -1, 0, 1], np.int64)
