"""The eight neighbours in ESRI code order (E, SE, S, SW, W, NW, N, NE: neighbour ``k`` has
code ``1 << k``; D4 takes the even ``k``) as row and column offsets: the one table of the
fill's and the flow's kernels on both backends (no Numba here: the GPU paths import it);
and :func:`direction_codes`, how the functions that take directions read them."""

import numpy as np

from ..errors import InputError

__all__ = ["NB_DR", "NB_DC", "direction_codes"]

NB_DR = np.array([0, 1, 1, 1, 0, -1, -1, -1], np.int64)
NB_DC = np.array([1, 1, 0, -1, -1, -1, 0, 1], np.int64)


def direction_codes(direction, xp=np):
    """``direction`` as C-contiguous uint8 codes (``xp``: NumPy or CuPy). An array of
    another type is read value for value: NaN is nodata (255), as xarray gives a flow store's
    ``direction`` layer, masking its ``_FillValue``; any other value that is not a whole
    number from 0 to 255 is an :class:`InputError` naming its cell (a cast made NaN an
    outlet, 257 a 1 and 1.5 a 1).

    >>> direction_codes(np.array([[1.0, np.nan], [0.0, 64.0]])).tolist()
    [[1, 255], [0, 64]]
    """
    d = xp.asarray(direction)
    if d.dtype != np.uint8:
        if d.dtype.kind == "f":
            d = xp.where(xp.isnan(d), 255, d)
        bad = (d < 0) | (d > 255)
        if d.dtype.kind == "f":
            bad |= d != xp.floor(d)
        if bool(bad.any()):
            i = int(xp.argmax(bad.ravel()))
            cell = tuple(int(v) for v in np.unravel_index(i, d.shape))
            raise InputError(f"direction: cell {cell} holds {d.ravel()[i].item()!r}, not a "
                             "D8 code (a whole number 0-255; 255 or NaN: nodata)")
    return xp.ascontiguousarray(d, np.uint8)
