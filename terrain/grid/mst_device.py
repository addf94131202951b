"""In-core minimum spanning forest of a whole grid: Borůvka on the GPU, Kruskal on the CPU.

When the grid fits in memory, tiling only costs. Both twins compute the unique forest of the
``(weight, id)`` order of :mod:`terrain.grid.edges`, so their masks and exact total weights
are the tiled path's, bit for bit. GPU (:func:`device_mst`, ``_mst_device.cu``): per round
lightest edge per active cell (``atomicMin`` on ``order_bits(w) << 32 | edge id``), hooking,
path halving, relabelling, with no CSR. CPU (:func:`host_mst`): the same keys sorted and
Kruskal's union-find in C, no Numba. :func:`fits_in_core` says whether a grid takes this path;
:func:`in_core_mst` runs the backend's twin. Steps and reasons: docs/mst.md.
"""

import ctypes
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import native
from ..backend import get_backend
from ..errors import InputError
from .edges import WeightSum, edge_keys

__all__ = ["device_mst", "host_mst", "in_core_mst", "InCoreForest", "fits_in_core",
           "MAX_CELLS", "HOST_MAX_CELLS", "BYTES_PER_CELL", "REDUCE_BYTES_PER_CELL"]

MAX_CELLS = 1 << 30  # edge ids 4·cell + d must fit 32 bits of the key
#: cells of the largest grid the CPU takes in core (32 bytes a cell of keys; docs/mst.md)
HOST_MAX_CELLS = 1 << 21
# z (4), comp (4), parent (4), best (8), active (1), mask (1)
BYTES_PER_CELL = 22
#: device bytes :func:`terrain.grid.reduce.reduce_block_device` adds a cell (alive, degree, end)
REDUCE_BYTES_PER_CELL = 6
_BLOCK = 256
_MAX_ROUNDS = 64  # Borůvka at least halves the supervertices with edges each round


@dataclass
class InCoreForest:
    """The forest of :func:`in_core_mst`: the backend's direction-bit ``mask``, its exact
    ``weight_sum``, counts, Borůvka's ``rounds`` (1 on the CPU) and on the GPU each cell's
    supervertex ``labels`` (-1 nodata)."""

    mask: object
    weight_sum: WeightSum
    edges: int
    vertices: int
    rounds: int
    labels: object = None

    @property
    def total_weight(self):
        return self.weight_sum.value()

    @property
    def trees(self):
        return self.vertices - self.edges


def fits_in_core(shape, backend=None, free=None):
    """True when the grid of ``shape`` takes :func:`in_core_mst` on ``backend``: on the device
    :data:`BYTES_PER_CELL` a cell of at most :data:`MAX_CELLS` (:meth:`Backend.fits`, within
    ``free`` bytes when given); on the CPU up to :data:`HOST_MAX_CELLS` cells.

    >>> fits_in_core((1448, 1448), "cpu"), fits_in_core((2048, 2048), "cpu")
    (True, False)
    """
    be = get_backend(backend)
    return be.select(lambda: int(shape[0]) * int(shape[1]) <= HOST_MAX_CELLS,
                     lambda: be.fits(shape, BYTES_PER_CELL, max_cells=MAX_CELLS, free=free))()


def in_core_mst(z, connectivity=8, model=0, hlen=(1.0, 1.0, 1.0, 1.0), backend=None):
    """Minimum spanning forest of the whole grid ``z`` by the backend's twin (same bits)."""
    be = get_backend(backend)
    return be.select(host_mst, device_mst)(z, connectivity, model, hlen, be)


_KRUSKAL_SIGNATURES = {"terrain_grid_kruskal": (
    ctypes.c_int64, [ctypes.c_void_p] + [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 3)}


def host_mst(z, connectivity=8, model=0, hlen=(1.0, 1.0, 1.0, 1.0), backend="cpu"):
    """:func:`device_mst`'s CPU twin: Kruskal in ``(weight, id)`` order over at most
    :data:`HOST_MAX_CELLS` cells.

    >>> f = host_mst(np.array([[1, 2], [3, 4]], np.float32))
    >>> f.mask.tolist(), f.total_weight, f.edges
    ([[7, 0], [0, 0]], 9.0, 3)
    """
    del backend
    z = np.ascontiguousarray(z, np.float32)
    if z.ndim != 2:
        raise InputError(f"host_mst: z must be 2-D, got shape {z.shape}")
    rows, cols = (int(s) for s in z.shape)
    n = rows * cols
    if n > HOST_MAX_CELLS:
        raise InputError(f"host_mst: {rows} x {cols} cells exceed {HOST_MAX_CELLS} (the tiled "
                         "path takes larger grids)")
    keys, vertices = edge_keys(z, connectivity, model, np.asarray(hlen, np.float64))
    keys.sort()
    mask = np.zeros((rows, cols), np.uint8)
    chosen = np.empty(max(n - 1, 1), np.uint64)
    parent = np.empty(max(n, 1), np.int32)
    k = int(native.declared(_KRUSKAL_SIGNATURES).terrain_grid_kruskal(
        keys.ctypes.data, keys.size, n, cols, parent.ctypes.data, mask.ctypes.data,
        chosen.ctypes.data)) if n else 0
    bits = (chosen[:k] >> np.uint64(32)).astype(np.uint32)
    bits = np.where(bits & np.uint32(0x80000000), bits ^ np.uint32(0x80000000), ~bits)
    return InCoreForest(mask, WeightSum().add(bits.view(np.float32)), k, vertices, 1)


def device_mst(z, connectivity=8, model=0, hlen=(1.0, 1.0, 1.0, 1.0), backend="gpu",
               seeds=None):
    """Minimum spanning forest of the whole grid of ``z`` on the GPU.

    With ``seeds`` the seeded cells start as *one* supervertex (every tree holds at most one
    seed): the depression fill seeds its outlets.

    ``z``: float32 (NaN = nodata), at most :data:`MAX_CELLS` cells; ``model`` and ``hlen``
    as :func:`terrain.grid.edges.weight_model_code` and ``horizontal_lengths`` give them. The
    :class:`InCoreForest`'s mask stays on the device.

    >>> f = device_mst(np.array([[1, 2], [3, 4]], np.float32))  # doctest: +SKIP
    >>> f.mask.get().tolist(), f.total_weight, f.edges  # doctest: +SKIP
    ([[7, 0], [0, 0]], 9.0, 3)
    """
    be = get_backend(backend)
    if not be.is_gpu:
        raise InputError("device_mst: the GPU's in-core forest needs the gpu backend "
                         "(host_mst is its CPU twin)")
    cp = be.xp
    if z.ndim != 2:
        raise InputError(f"device_mst: z must be 2-D, got shape {z.shape}")
    rows, cols = (int(s) for s in z.shape)
    n = rows * cols
    if n > MAX_CELLS:
        raise InputError(f"device_mst: {rows} x {cols} cells exceed {MAX_CELLS} (32-bit edge ids)")
    mask32 = cp.zeros(max(-(-n // 4), 1), cp.uint32)
    mask = mask32.view(cp.uint8)[:n].reshape(rows, cols)
    if n == 0:
        return InCoreForest(mask, WeightSum(), 0, 0, 0)
    mod = be.cuda_module(Path(__file__).with_name("_mst_device.cu"))
    zd = cp.ascontiguousarray(cp.asarray(z, dtype=cp.float32))
    comp = cp.empty(n, cp.int32)
    parent = cp.empty(n, cp.int32)
    active = cp.empty(n, cp.uint8)
    best = cp.empty(n, cp.uint64)
    flags = cp.zeros(_MAX_ROUNDS, cp.int32)
    hl = cp.asarray(np.asarray(hlen, np.float64))
    conn8 = np.int32(1 if int(connectivity) == 8 else 0)
    r, c, nn = np.int32(rows), np.int32(cols), np.int32(n)
    grid, block = ((n + _BLOCK - 1) // _BLOCK,), (_BLOCK,)
    mod.get_function("mst_init")(grid, block, (zd, comp, parent, active, best, nn))
    if seeds is not None:  # one supervertex, rooted at the first seed (parent[root] = root)
        seeded = (cp.asarray(seeds).ravel() != 0) & (comp >= 0)
        if bool(seeded.any()):
            comp[seeded] = cp.argmax(seeded).astype(cp.int32)
    k_min, k_hook = mod.get_function("mst_min_edge"), mod.get_function("mst_hook")
    k_jump, k_relabel = mod.get_function("mst_jump"), mod.get_function("mst_relabel")
    rounds = 0
    for rnd in range(_MAX_ROUNDS):
        k_min(grid, block, (zd, comp, active, best, r, c, conn8, np.int32(model), hl))
        k_hook(grid, block, (comp, best, parent, mask32, flags[rnd:], r, c))
        k_jump(grid, block, (comp, parent, nn))
        k_relabel(grid, block, (comp, parent, best, nn))
        rounds = rnd + 1
        if not int(flags[rnd].get()):  # the round's one host read
            break
    else:  # pragma: no cover - Borůvka needs at most log2(n) + 1 rounds
        raise RuntimeError("device_mst: no convergence")
    acc = cp.zeros(256, cp.uint64)
    counts = cp.zeros(2, cp.uint64)
    mod.get_function("mst_weight_sum")(grid, block, (zd, mask32, acc, counts, r, c,
                                                     np.int32(model), hl))
    acc_h = acc.get().view(np.int64)
    edges, vertices = (int(x) for x in counts.get())
    return InCoreForest(mask, WeightSum(acc_h), edges, vertices, rounds, comp)
