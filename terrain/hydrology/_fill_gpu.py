"""The GPU's depression fill in core: the outlet-seeded forest (every tree holds one
outlet), Euler tours naming each cell's parent, pointer jumping for the path maxima to the
roots (docs/hydrology.md, "On the GPU"). The kernels are ``_fill.cu``'s; their Numba twins
are in tests/hydrology/test_fill_gpu.py. Device memory: :data:`BYTES_PER_CELL`.
"""

from pathlib import Path

import numpy as np

from ..backend import get_backend
from ..errors import InputError

__all__ = ["device_levels", "fill_fits_on_device", "BYTES_PER_CELL"]

#: device bytes a cell takes at the peak, during the tours (docs/hydrology.md, "On the GPU")
BYTES_PER_CELL = 4 + 1 + 1 + 5 + 4 + 32 + 16 + 4
_BLOCK = 256
_MAX_ROUNDS = 64


def fill_fits_on_device(shape, backend=None, headroom=0.9):
    """True when the in-core fill of a grid of ``shape`` fits the device (:meth:`Backend.fits`):
    the larger of its bytes a cell and its seeded forest's (:func:`device_mst`'s and the
    seeds' byte), within the forest's cells."""
    from ..grid.mst_device import BYTES_PER_CELL as MST_BYTES, MAX_CELLS
    return get_backend(backend).fits(shape, max(BYTES_PER_CELL, MST_BYTES + 1), headroom,
                                     MAX_CELLS)


def device_levels(z, outlet, connectivity, backend="gpu"):
    """Every cell's level (CuPy float32, ``inf``: undrained) of ``z``, on the device."""
    from ..grid.mst_device import device_mst
    be = get_backend(backend)
    if not be.is_gpu:
        raise InputError("device_levels: the device fill needs the gpu backend")
    cp = be.xp
    zd = cp.ascontiguousarray(be.asarray(z, cp.float32))
    rows, cols = (int(s) for s in zd.shape)
    n = rows * cols
    if n == 0:
        return cp.zeros((rows, cols), cp.float32)
    od = cp.ascontiguousarray(cp.asarray(outlet, dtype=cp.uint8))
    hlen = np.ones(4, np.float64)
    forest = device_mst(zd, connectivity, 0, hlen, be, seeds=od)
    mask, labels = forest.mask, forest.labels
    is_root = _roots(cp, od.ravel() != 0, labels).astype(cp.uint8)
    del labels
    mod = be.cuda_module(Path(__file__).with_name("_fill.cu"))
    grid, block = ((n + _BLOCK - 1) // _BLOCK,), (_BLOCK,)
    r, c = np.int32(rows), np.int32(cols)
    nb = cp.empty(n, cp.uint8)
    deg = cp.empty(n, cp.int32)
    mod.get_function("fill_adjacency")(grid, block, (mask, nb, deg, r, c))
    del mask
    base = cp.cumsum(deg, dtype=cp.int32)
    arcs = int(base[-1].get())
    base -= deg
    del deg
    succ = cp.empty(max(arcs, 1), cp.int32)
    mod.get_function("fill_succ")(grid, block, (nb, base, is_root, succ, r, c))
    rank = (succ >= 0).astype(cp.int32)
    nxt2, rank2 = cp.empty_like(succ), cp.empty_like(rank)
    flags = cp.zeros(_MAX_ROUNDS, cp.int32)
    agrid = ((max(arcs, 1) + _BLOCK - 1) // _BLOCK,)
    k_rank = mod.get_function("fill_rank")
    nxt = succ
    for rnd in range(_MAX_ROUNDS):
        k_rank(agrid, block, (nxt, rank, nxt2, rank2, flags[rnd:], np.int32(arcs)))
        nxt, nxt2 = nxt2, nxt
        rank, rank2 = rank2, rank
        if not int(flags[rnd].get()):
            break
    else:  # pragma: no cover - a tour of 2^63 arcs
        raise RuntimeError("device_levels: list ranking did not converge")
    del nxt, nxt2, rank2
    parent = cp.empty(n, cp.int32)
    val = cp.empty(n, cp.float32)
    mod.get_function("fill_parent")(grid, block, (nb, base, rank, is_root, od.ravel(),
                                                  zd.ravel(), parent, val, r, c))
    del nb, base, rank, is_root
    p2, v2 = cp.empty_like(parent), cp.empty_like(val)
    flags[:] = 0
    k_jump = mod.get_function("fill_jump")
    for rnd in range(_MAX_ROUNDS):
        k_jump(grid, block, (parent, val, p2, v2, flags[rnd:], np.int32(n)))
        parent, p2 = p2, parent
        val, v2 = v2, val
        if not int(flags[rnd].get()):
            break
    else:  # pragma: no cover
        raise RuntimeError("device_levels: pointer jumping did not converge")
    return val.reshape(rows, cols)


def _roots(xp, outlet, labels):
    """The tours' start cells: the outlets, and the label cell of each supervertex holding
    none (a supervertex with an outlet is rooted at its outlets only)."""
    n = outlet.shape[0]
    has = xp.zeros(n + 1, dtype=bool)
    has[labels[outlet]] = True
    return outlet | ((labels == xp.arange(n, dtype=labels.dtype)) & ~has[:n])
