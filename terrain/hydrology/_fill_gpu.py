"""The GPU's depression fill in core: the seeded forest, Euler tours and pointer jumping.

:func:`terrain.grid.mst_device.device_mst` with ``seeds`` starts all outlets in one
supervertex, so every tree of the forest holds one outlet and a cell's level is the path
maximum to its root: Euler tours (Tarjan & Vishkin, ranked by Wyllie's pointer jumping)
name each cell's parent, pointer jumping then takes the maxima in ``log2(depth)`` rounds
(docs/hydrology.md, "On the GPU"). The kernels are ``_fill.cu``'s; each has its Numba twin
here (``*_twin``, the same steps over every thread in a loop), which the tests run on the
CPU against the CPU's drain pass. Device memory: :data:`BYTES_PER_CELL`.
"""

from pathlib import Path

import numba
import numpy as np

from ..backend import get_backend
from ..errors import InputError

__all__ = ["device_levels", "fits_on_device", "BYTES_PER_CELL", "euler_levels_twin"]

#: device bytes a cell takes at the peak (the tours; the Borůvka's arrays are freed by then):
#: among them the DEM (4 B), adjacency and degrees (5), arc offsets (4), two arcs a cell
#: with two successor and two rank buffers (32), parents and values twice (16)
BYTES_PER_CELL = 4 + 1 + 1 + 5 + 4 + 32 + 16 + 4
_BLOCK = 256
_MAX_ROUNDS = 64

FD_R = np.array([0, 1, 1, 1, 0, -1, -1, -1], np.int64)
FD_C = np.array([1, 1, 0, -1, -1, -1, 0, 1], np.int64)


def fits_on_device(shape, backend=None, headroom=0.9):
    """True when the in-core fill of a grid of ``shape`` fits the device's free memory (and
    the Borůvka's cell limit)."""
    from ..grid.mst_device import BYTES_PER_CELL as MST_BYTES, MAX_CELLS, free_device_bytes
    be = get_backend(backend)
    n = int(shape[0]) * int(shape[1])
    if not be.is_gpu or n > MAX_CELLS:
        return False
    return max(BYTES_PER_CELL, MST_BYTES + 1) * n <= headroom * free_device_bytes(be)


def device_levels(z, outlet, connectivity, backend="gpu"):
    """The levels of every cell (CuPy float32, ``inf`` where undrained) of DEM ``z`` with
    outlet mask ``outlet``, on the device (module docstring)."""
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
    return val.reshape(rows, cols)


def _roots(xp, outlet, labels):
    """The cells the tours start from: the outlets, and the label cell of each supervertex
    holding none (the seeded supervertex may have hooked onto another one, so its label
    need not be an outlet: a supervertex with an outlet is rooted at its outlets only)."""
    n = outlet.shape[0]
    has = xp.zeros(n + 1, dtype=bool)
    has[labels[outlet]] = True
    return outlet | ((labels == xp.arange(n, dtype=labels.dtype)) & ~has[:n])


# -- the Numba twins: the kernels' steps, thread by thread ----------------------------------

@numba.njit(cache=True)
def _popc(b):
    c = 0
    while b:
        c += b & 1
        b >>= 1
    return c


@numba.njit(cache=True)
def _arc_of(nb, base, v, k):
    return base[v] + _popc(nb[v] & ((1 << k) - 1))


@numba.njit(cache=True)
def fill_adjacency_twin(mask, nb, deg, rows, cols):
    for v in range(rows * cols):
        r, c = v // cols, v % cols
        m = mask[v]
        b = 0
        if m & 1:
            b |= 1
        if m & 4:
            b |= 2
        if m & 2:
            b |= 4
        if m & 8:
            b |= 8
        if c > 0 and (mask[v - 1] & 1):
            b |= 16
        if r > 0 and c > 0 and (mask[v - cols - 1] & 4):
            b |= 32
        if r > 0 and (mask[v - cols] & 2):
            b |= 64
        if r > 0 and c + 1 < cols and (mask[v - cols + 1] & 8):
            b |= 128
        nb[v] = b
        deg[v] = _popc(b)


@numba.njit(cache=True)
def fill_succ_twin(nb, base, is_root, succ, rows, cols):
    for v in range(rows * cols):
        b = nb[v]
        if not b:
            continue
        a = base[v]
        for k in range(8):
            if not (b & (1 << k)):
                continue
            u = v + FD_R[k] * cols + FD_C[k]
            bu = nb[u]
            j = (k + 4) & 7
            kk = j
            for t in range(1, 9):
                kk = (j + t) & 7
                if bu & (1 << kk):
                    break
            first = 0
            while not (bu & (1 << first)):
                first += 1
            succ[a] = -1 if (is_root[u] and kk == first) else _arc_of(nb, base, u, kk)
            a += 1


@numba.njit(cache=True)
def fill_rank_twin(nxt, rank, nxt2, rank2, arcs):
    flag = 0
    for a in range(arcs):
        s = nxt[a]
        if s < 0:
            nxt2[a] = s
            rank2[a] = rank[a]
            continue
        rank2[a] = rank[a] + rank[s]
        ss = nxt[s]
        nxt2[a] = ss
        if ss >= 0:
            flag = 1
    return flag


@numba.njit(cache=True)
def fill_parent_twin(nb, base, rank, is_root, outlet, z, parent, val, rows, cols):
    inf = np.float32(np.inf)
    for v in range(rows * cols):
        parent[v] = v
        zv = z[v]
        if np.isnan(zv):
            val[v] = inf
            continue
        b = nb[v]
        if is_root[v] or not b:
            val[v] = zv if outlet[v] else inf
            continue
        for k in range(8):
            if not (b & (1 << k)):
                continue
            u = v + FD_R[k] * cols + FD_C[k]
            if rank[_arc_of(nb, base, u, (k + 4) & 7)] > rank[_arc_of(nb, base, v, k)]:
                parent[v] = u
                zu = z[u]
                val[v] = zv if zv >= zu else zu
                break


@numba.njit(cache=True)
def fill_jump_twin(P, val, P2, val2, n):
    flag = 0
    for v in range(n):
        p = P[v]
        a, b = val[v], val[p]
        val2[v] = a if a >= b else b
        pp = P[p]
        P2[v] = pp
        if pp != p:
            flag = 1
    return flag


def euler_levels_twin(z, mask, outlet, labels):
    """:func:`device_levels`' steps after the forest, on the CPU with the kernels' twins:
    ``mask`` a forest in which every tree holds at most one outlet, ``labels`` a cell of
    each tree (its supervertex label). The tests run it against the CPU's drain pass."""
    z = np.ascontiguousarray(z, np.float32)
    rows, cols = z.shape
    n = rows * cols
    flat = np.ascontiguousarray(mask).ravel()
    od = np.ascontiguousarray(outlet, np.uint8).ravel()
    is_root = _roots(np, od != 0, np.asarray(labels).ravel()).astype(np.uint8)
    nb = np.empty(n, np.uint8)
    deg = np.empty(n, np.int32)
    fill_adjacency_twin(flat, nb, deg, rows, cols)
    base = (np.cumsum(deg) - deg).astype(np.int32)
    arcs = int(deg.sum())
    succ = np.empty(max(arcs, 1), np.int32)
    fill_succ_twin(nb, base, is_root, succ, rows, cols)
    nxt, rank = succ[:arcs].copy(), (succ[:arcs] >= 0).astype(np.int32)
    nxt2, rank2 = np.empty_like(nxt), np.empty_like(rank)
    for _ in range(_MAX_ROUNDS):
        more = fill_rank_twin(nxt, rank, nxt2, rank2, arcs)
        nxt, nxt2, rank, rank2 = nxt2, nxt, rank2, rank
        if not more:
            break
    parent = np.empty(n, np.int32)
    val = np.empty(n, np.float32)
    fill_parent_twin(nb, base, rank, is_root, od, z.ravel(), parent, val, rows, cols)
    p2, v2 = np.empty_like(parent), np.empty_like(val)
    for _ in range(_MAX_ROUNDS):
        more = fill_jump_twin(parent, val, p2, v2, n)
        parent, p2, val, v2 = p2, parent, v2, val
        if not more:
            break
    return val.reshape(rows, cols)
