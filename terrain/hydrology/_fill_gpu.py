"""The GPU's depression fill in core: the outlet-seeded forest (every tree holds one
outlet), Euler tours naming each cell's parent, pointer jumping for the path maxima to the
roots (docs/hydrology.md, "On the GPU"). The kernels are ``_fill.cu``'s; their Numba twins
are in tests/hydrology/test_fill_gpu.py. Device memory: :data:`BYTES_PER_CELL`.
"""

from pathlib import Path

import numpy as np

from ..backend import get_backend
from ..errors import InputError

__all__ = ["device_levels", "fits_on_device", "flood_strip", "strip_cells", "BYTES_PER_CELL"]

#: device bytes a cell takes at the peak, during the tours (docs/hydrology.md, "On the GPU")
BYTES_PER_CELL = 4 + 1 + 1 + 5 + 4 + 32 + 16 + 4
_BLOCK = 256
_MAX_ROUNDS = 64


def fits_on_device(shape, backend=None, headroom=0.9):
    """True when the in-core fill of a grid of ``shape`` fits the device."""
    from ..grid.mst_device import BYTES_PER_CELL as MST_BYTES, MAX_CELLS, free_device_bytes
    be = get_backend(backend)
    n = int(shape[0]) * int(shape[1])
    if not be.is_gpu or n > MAX_CELLS:
        return False
    return max(BYTES_PER_CELL, MST_BYTES + 1) * n <= headroom * free_device_bytes(be)


def strip_cells(cols, backend=None, headroom=0.9):
    """The most cells (whole rows of ``cols``) of a strip :func:`flood_strip` takes: at
    most the forest's :data:`~terrain.grid.mst_device.MAX_CELLS`, within ``headroom`` of
    the device's free memory."""
    from ..grid.mst_device import BYTES_PER_CELL as MST_BYTES, MAX_CELLS, free_device_bytes
    be = get_backend(backend)
    per_cell = max(BYTES_PER_CELL, MST_BYTES + 1) + 1  # and the strip's own outlets
    n = min(MAX_CELLS, int(headroom * free_device_bytes(be)) // per_cell)
    return max(2 * cols, n - n % cols)


def device_levels(z, outlet, connectivity, backend="gpu", roots=False):
    """Every cell's level (CuPy float32, ``inf``: undrained) of ``z``, on the device; with
    ``roots`` also the cell (int32, row-major) at the root of its tree: the outlet it
    drains to."""
    from ..grid.mst_device import device_mst
    be = get_backend(backend)
    if not be.is_gpu:
        raise InputError("device_levels: the device fill needs the gpu backend")
    cp = be.xp
    zd = cp.ascontiguousarray(cp.asarray(z, dtype=cp.float32))
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
    val = val.reshape(rows, cols)
    return (val, parent.reshape(rows, cols)) if roots else val


def flood_strip(z, outlet, seams, connectivity, level, label=None, backend="gpu"):
    """One row strip of a grid flooded on the device, from its ``outlet`` cells and, as
    ``seams`` says (bit 1: its first row, bit 2: its last), from the cells of the rows it
    shares with the strips beside it: what ``terrain_flood_grid`` does for a strip on the
    CPU (:func:`terrain.hydrology.fill._flood_levels` joins the strips).

    ``z``, ``outlet``: the strip on the host; its levels (``inf``: nodata or drained by
    nothing) are written into ``level`` and, with seams, its cells' labels into ``label``
    (0 none, 1 an outlet, 2 + j cell j of its first row, 2 + cols + j of its last; the
    kernels' comment in ``_fill.cu``). Returns ``None`` without seams, else the least spill
    between each pair of labels that meet: ``(keys lo << 32 | hi, levels)`` on the host."""
    from .._transfer import to_device, to_host
    be = get_backend(backend)
    cp = be.xp
    rows, cols = (int(s) for s in z.shape)
    zd, od = cp.empty((rows, cols), cp.float32), cp.empty((rows, cols), cp.uint8)
    to_device(cp, [z, outlet], [zd, od]).wait()  # through pinned memory: 3-4× pageable's
    seeds = od
    if seams:
        seeds = od.copy()
        valid = ~cp.isnan(zd)
        if seams & 1:
            seeds[0] |= valid[0]
        if seams & 2:
            seeds[-1] |= valid[-1]
        del valid
    val, root = device_levels(zd, seeds, connectivity, be, roots=True)
    del zd, seeds
    if not seams:
        to_host(cp, [val], out=[level])
        return None
    n = rows * cols
    mod = be.cuda_module(Path(__file__).with_name("_fill.cu"))
    grid, block, r, c = ((n + _BLOCK - 1) // _BLOCK,), (_BLOCK,), np.int32(rows), np.int32(cols)
    lab = cp.empty(n, cp.int32)
    mod.get_function("fill_strip_labels")(grid, block, (root, val, od, lab, r, c,
                                                       np.int32(seams)))
    del root, od
    count = cp.zeros(1, cp.uint64)
    cap = 1 << 20
    while True:  # the pairs where labels meet: a run again with room for all, if need be
        keys, w = cp.empty(cap, cp.uint64), cp.empty(cap, cp.float32)
        mod.get_function("fill_strip_spills")(grid, block, (lab, val, r, c,
                                                           np.int32(connectivity), keys, w,
                                                           count, np.uint64(cap)))
        m = int(count.get()[0])
        if m <= cap:
            break
        cap, count[...] = m, 0
    to_host(cp, [val, lab], out=[level, label])
    return least_spills(cp, keys[:m], w[:m])


def least_spills(xp, keys, levels):
    """``(keys, levels)`` with each key once, at its least level (NumPy or CuPy): keys
    numbered by ``unique``, then one sort of number << 32 | the level's bits in float
    order, the first of each number kept.

    >>> least_spills(np, np.array([5, 3, 5], np.uint64), np.array([2, -1, -7], np.float32))
    (array([3, 5], dtype=uint64), array([-1., -7.], dtype=float32))
    """
    if keys.size == 0:
        return np.empty(0, np.uint64), np.empty(0, np.float32)
    unique, number = xp.unique(keys, return_inverse=True)
    bits = levels.view(xp.uint32)
    ordered = xp.where(bits >> 31, ~bits, bits | np.uint32(1 << 31))  # unsigned: float order
    both = xp.sort((number.astype(xp.uint64) << np.uint64(32)) | ordered.astype(xp.uint64))
    first = xp.ones(both.shape, bool)
    first[1:] = (both[1:] >> np.uint64(32)) != (both[:-1] >> np.uint64(32))
    least = (both[first] & np.uint64(0xFFFFFFFF)).astype(xp.uint32)
    least = xp.where(least >> 31, least & np.uint32(0x7FFFFFFF), ~least).astype(xp.uint32)
    got = (unique, least.view(xp.float32))
    return tuple(a.get() if hasattr(a, "get") else a for a in got)


def _roots(xp, outlet, labels):
    """The tours' start cells: the outlets, and the label cell of each supervertex holding
    none (a supervertex with an outlet is rooted at its outlets only)."""
    n = outlet.shape[0]
    has = xp.zeros(n + 1, dtype=bool)
    has[labels[outlet]] = True
    return outlet | ((labels == xp.arange(n, dtype=labels.dtype)) & ~has[:n])
