"""In-core minimum spanning forest of a whole grid on the GPU (no tiles, no CSR).

When the grid and its working arrays fit in the device's free memory, tiling only costs:
host-side reduction and merges, 512² tiles, round trips between phases. This module runs
Borůvka on the whole grid at once (``_mst_device.cu``; its header comment gives the steps):
per round one pass per step over the grid -- lightest edge per active cell offered to its
supervertex with ``atomicMin`` on a packed 64-bit key ``order_bits(w) << 32 | edge id``,
hooking with the mutual-pair rule, pointer jumping by path halving, relabelling -- with
weights computed from ``z`` on the fly, cells whose neighbours all share their supervertex
deactivated for good (ECL-MST's edge filtering, Fallin et al. SC'23, here without a
worklist), the forest's mask written on the device and its total weight summed there exactly
in :class:`terrain.grid.edges.WeightSum`'s layout. The host reads one flag per round.

The key orders edges by ``(weight, id)`` with the global id ``4·cell + d``, the order of
the tiled path, so the forest is the same unique forest, bit for bit, and so is the total
weight. Ids take 32 bits up to 2^30 cells (:data:`MAX_CELLS`); beyond that, or when the
grid does not fit (:func:`fits_on_device`), :func:`terrain.grid.mst.grid_mst` -- the one
dispatch point -- takes the tiled path. There is no CPU twin of the whole-grid kernel: the
CPU keeps the tiled path (Borůvka per tile in Numba, sequential reductions and merges),
which is the better CPU algorithm; the tests compare this path with it.

Written by hand because no library offers an implicit-grid MST: cuGraph and ECL-MST need a
CSR (16× the memory traffic of the DEM) and neither breaks ties by our edge ids.
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..backend import get_backend
from ..errors import InputError
from .edges import WeightSum

__all__ = ["device_mst", "DeviceForest", "fits_on_device", "device_bytes", "MAX_CELLS",
           "BYTES_PER_CELL"]

MAX_CELLS = 1 << 30  # edge ids 4·cell + d must fit 32 bits of the key
# z (4), comp (4), parent (4), best (8), active (1), mask (1)
BYTES_PER_CELL = 22
_BLOCK = 256
_MAX_ROUNDS = 64  # Borůvka at least halves the supervertices with edges each round


@dataclass
class DeviceForest:
    """The forest of :func:`device_mst`.

    Attributes
    ----------
    mask : (rows, cols) uint8 CuPy array
        Bit ``d`` of a cell set when its edge in direction ``d`` is in the forest.
    weight_sum : WeightSum
        The forest's exact total weight.
    edges, vertices, rounds : int
    labels : (rows * cols,) int32 CuPy array
        Each cell's supervertex (a cell of its tree; -1 nodata).
    """

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


def device_bytes(shape):
    """Device memory :func:`device_mst` needs for a grid of ``shape`` (input included).

    >>> device_bytes((4096, 4096)) / 2**20
    352.0
    """
    return BYTES_PER_CELL * int(shape[0]) * int(shape[1])


def fits_on_device(shape, backend=None, headroom=0.9, per_cell=BYTES_PER_CELL, copies=1,
                   free=None):
    """True when a grid of ``shape`` can take the in-core path on ``backend``'s device:
    at most :data:`MAX_CELLS` cells and ``copies`` times ``per_cell`` bytes a cell (default:
    :func:`device_bytes`) within ``headroom`` of the device's free memory (CuPy's pool counts
    as free; ``free``: that many bytes instead, e.g. as other processes' devices report it).
    Always False on the CPU.

    >>> fits_on_device((10, 10), "cpu")
    False
    """
    be = get_backend(backend)
    n = int(shape[0]) * int(shape[1])
    if not be.is_gpu or n > MAX_CELLS:
        return False
    if free is None:
        free = free_device_bytes(be)
    return copies * per_cell * n <= headroom * free


def free_device_bytes(backend=None):
    """Free memory on the backend's device (CUDA's free plus CuPy's pool's free blocks)."""
    be = get_backend(backend)
    if not be.is_gpu:
        return 0
    cp = be.xp
    free, _ = cp.cuda.runtime.memGetInfo()
    return int(free) + int(cp.get_default_memory_pool().free_bytes())


def device_mst(z, connectivity=8, model=0, hlen=(1.0, 1.0, 1.0, 1.0), backend="gpu",
               seeds=None):
    """Minimum spanning forest of the whole grid of ``z`` on the GPU.

    With ``seeds`` (a mask of the grid's shape) the seeded cells start as *one* supervertex:
    the forest is then the minimum spanning forest of the grid with those cells contracted
    into one vertex (no edge between two seeds; every tree holds at most one seed). The
    depression fill seeds its outlets (:mod:`terrain.hydrology._fill_gpu`).

    Parameters
    ----------
    z : (rows, cols) float32 array (NumPy or CuPy), NaN = nodata
        At most :data:`MAX_CELLS` cells.
    connectivity : {4, 8}
    model : int
        Weight model code (:func:`terrain.grid.edges.weight_model_code`).
    hlen : (4,) float64
        Horizontal lengths (:func:`terrain.grid.edges.horizontal_lengths`).
    backend : str or Backend
        Must be the GPU.
    seeds : (rows, cols) array, optional
        Cells (non-zero, not nodata) that start in one supervertex.

    Returns
    -------
    DeviceForest
        The mask stays on the device.

    Examples
    --------
    >>> f = device_mst(np.array([[1, 2], [3, 4]], np.float32))  # doctest: +SKIP
    >>> f.mask.get().tolist(), f.total_weight, f.edges  # doctest: +SKIP
    ([[7, 0], [0, 0]], 9.0, 3)
    """
    be = get_backend(backend)
    if not be.is_gpu:
        raise InputError("device_mst: the in-core grid MST needs the gpu backend")
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
        return DeviceForest(mask, WeightSum(), 0, 0, 0)
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
    return DeviceForest(mask, WeightSum(acc_h), edges, vertices, rounds, comp)
