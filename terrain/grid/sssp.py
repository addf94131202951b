"""Exact single- and multi-source shortest paths (cost distance) on a grid that fits in memory.

Every reached cell gets ``distance``, ``(allocation, hops)`` and ``backlink``: canonical
labels, the same for every backend and algorithm (docs/cost-distance.md, "Labels"). CPU:
Dijkstra on the implicit padded grid (a bucket queue when every arc costs more than zero,
else a radix heap); GPU: near-far, then min-label propagation over tight arcs; both reach
the same least fixed point. The kernels are one table (``CpuOps``/``GpuOps``).

Examples
--------
>>> import numpy as np
>>> dem = np.array([[0, 1, 3], [0, 5, 3]], np.float32)
>>> r = grid_sssp(dem, [(0, 0)], cost="absdiff", connectivity=4, backend="cpu")
>>> r.distance.tolist()
[[0.0, 1.0, 3.0], [0.0, 5.0, 3.0]]
>>> r.backlink.tolist()
[[0, 5, 5], [7, 5, 7]]
"""

import math
import sys
import time

import numpy as np

from ..backend import get_backend
from ..errors import InputError
from ._sssp_frame import PAD, UNREACHED_BACKLINK, GridSSSPResult, flat_seeds, padded_grid
from .costs import arc_codes, arc_lengths, check_friction, cost_model_code

__all__ = ["grid_sssp", "labels_from_distance", "GridSSSPResult", "check_sources", "on_nodata",
           "check_max_cost", "prepare_grid", "incore_bytes", "padded_grid", "PAD",
           "UNREACHED_BACKLINK"]


def incore_bytes(shape, has_friction=False):
    """Memory of the in-core SSSP: about 40 bytes a cell, 4 more with a friction raster.

    >>> incore_bytes((1000, 1000)), incore_bytes((1000, 1000), has_friction=True)
    (40000000, 44000000)
    """
    return int(shape[0]) * int(shape[1]) * (40 + (4 if has_friction else 0))


def _ops(be):
    """The kernel table of backend ``be``: ``CpuOps`` or ``GpuOps``
    (:meth:`terrain.backend.Backend.kernel_table`)."""
    def cpu():
        from ._sssp_cpu import CpuOps
        return CpuOps

    def gpu():
        from ._sssp_gpu import GpuOps
        return GpuOps
    return be.kernel_table(cpu, gpu)


def on_nodata(name, i, r, c, barrier=False, path=None):
    """The refusal of source (or stop: ``name``) ``i`` at cell ``(r, c)`` on nodata: the DEM's,
    or (``barrier``) the friction raster's where the DEM has a value; ``path``: the file the
    message starts with. Its :class:`InputError` says which raster in ``raster`` (``"dem"``,
    ``"friction"``), for a caller that names the files, and which cell in ``item``, for one
    that knows where it came from (:func:`terrain.errors.naming_items`)."""
    where = "a barrier (nodata) of the friction raster" if barrier else "nodata"
    error = InputError(f"{f'{path}: ' if path else ''}{name} {i} at cell (row, col) = "
                       f"({r}, {c}) is on {where}", item=(name, i))
    error.raster = "friction" if barrier else "dem"
    return error


def check_sources(sources, valid, start_costs=None, name="source", dem=None):
    """Sources as ``(rows, cols, start_costs)`` arrays; :class:`InputError` if one is outside
    the grid, on nodata (``valid``: vertex mask, or just the shape; ``dem``, the elevations,
    tell the DEM's nodata from the friction's: :func:`on_nodata`) or has a bad start cost."""
    try:
        src = np.asarray(sources, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name}s: expected a list of (row, col) cells") from None
    if src.ndim != 2 or src.shape[1] != 2 or src.shape[0] == 0:
        raise InputError(f"{name}s: expected a non-empty list of (row, col) cells")
    if not np.all(np.isfinite(src)) or np.any(src != np.round(src)):
        raise InputError(f"{name}s: cells must be whole (row, col) numbers")
    shape = valid.shape if hasattr(valid, "shape") else tuple(valid)
    # whole numbers as Python ints (exact at any size): the range is checked before a cast
    for i, (r, c) in enumerate((int(a), int(b)) for a, b in src.tolist()):
        if not (0 <= r < shape[0] and 0 <= c < shape[1]):
            raise InputError(f"{name} {i} at cell (row, col) = ({r}, {c}) is outside the "
                             f"{shape[0]} x {shape[1]} grid")
        if hasattr(valid, "shape") and not valid[r, c]:
            raise on_nodata(name, i, r, c, dem is not None and not np.isnan(dem[r, c]))
    rows, cols = src[:, 0].astype(np.int64), src[:, 1].astype(np.int64)
    if start_costs is None:
        costs = np.zeros(rows.size, np.float64)
    else:
        try:
            given = np.asarray(start_costs, np.float64)
        except (TypeError, ValueError):
            raise InputError(f"{name}s: start costs must be numbers, got "
                             f"{start_costs!r}") from None
        if given.size not in (1, rows.size):
            raise InputError(f"{name}s: {given.size} start costs for {rows.size} {name}s "
                             f"(one a {name}, or one for all)")
        costs = np.broadcast_to(given.reshape(-1)[:rows.size], rows.shape).copy()
        if not (np.all(np.isfinite(costs)) and np.all(costs >= 0)):
            raise InputError(f"{name}s: start costs must be finite and >= 0")
    return rows, cols, costs


def check_max_cost(max_cost):
    """The distance limit: ``max_cost``, else the largest float64 (an infinite arc never
    reaches a cell)."""
    if max_cost is None:
        return sys.float_info.max
    try:
        m = float(max_cost)
    except (TypeError, ValueError):
        m = math.nan
    if not m > 0:
        raise InputError(f"max cost {max_cost!r}: must be > 0")
    return min(m, sys.float_info.max)


class _VertexMask:
    """Whether a cell is a vertex, looked up cell by cell (no pass over the grid)."""

    def __init__(self, z, f):
        self.z, self.f, self.shape = z, f, z.shape

    def __getitem__(self, rc):
        ok = not np.isnan(self.z[rc])
        return ok and (self.f is None or not np.isnan(self.f[rc]))

    def full(self):
        m = ~np.isnan(self.z)
        return m if self.f is None else m & ~np.isnan(self.f)


def prepare_grid(dem, friction, cost, connectivity, cellsize):
    """The checked inputs of a solve: ``(z, f, valid, model, codes, lengths)``."""
    z = np.asarray(dem)
    if z.ndim != 2 or z.size == 0:
        raise InputError(f"elevation grid: expected a non-empty 2-D array, got shape {z.shape}")
    z = z.astype(np.float32, copy=False)
    model = cost_model_code(cost)
    codes = arc_codes(connectivity)
    lengths = arc_lengths(cellsize)
    if friction is not None:
        f = check_friction(friction)
        if f.shape != z.shape:
            raise InputError(f"friction raster: shape {f.shape} differs from the elevation "
                             f"grid's {z.shape}")
    else:
        if model == 1:
            raise InputError("cost model 'friction' needs a friction raster")
        f = None
    if (z.shape[0] + 2 * PAD) * (z.shape[1] + 2 * PAD) >= 2 ** 31:
        raise InputError(f"grid of {z.shape[0]} x {z.shape[1]} cells is too large for the "
                         f"in-core algorithm")
    return z, f, _VertexMask(z, f), model, codes, lengths


def grid_sssp(dem, sources, start_costs=None, *, cost="absdiff", friction=None,
              connectivity=8, cellsize=(1.0, 1.0), max_cost=None, stops=None, backend=None,
              delta=None, hops=True, on_distance=None, on_device=False,
              overwrite_friction=False):
    """Cost distance, allocation and backlinks from ``sources`` over a grid held in memory.

    Parameters
    ----------
    dem : (rows, cols) float32 array
        Elevation (NaN = nodata, a barrier).
    sources : sequence of (row, col)
        Source cells, indexed by their position.
    start_costs : float or sequence of float, optional
        Cost already spent at each source (default 0).
    cost : {'absdiff', 'friction', 'tobler'}
    friction : (rows, cols) array, optional
        Friction per cell (>= 0, NaN = barrier); required by ``'friction'``, multiplies
        ``'tobler'``.
    connectivity : {4, 8, 16}
    cellsize : (dx, dy)
    max_cost : float, optional
        Cells farther than this stay unreached.
    stops : sequence of (row, col), optional
        Stop cells (GRASS ``r.cost`` stop points): once every one is reached, cells farther
        than the farthest of them stay unreached, as with ``max_cost`` equal to that distance
        (``stats["target_distance"]``); the CPU's queue ends there. A stop that cannot be
        reached leaves every cell reached.
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional
    delta : float, optional
        The GPU near-far bucket width (default: sampled; ``stats["delta"]`` gives the one
        used). Any width gives the same bits; the CPU ignores it.
    hops : bool
        False: no hop counts (``result.hops`` is None; the GPU's stay on the device).
    on_distance : callable, optional
        Called with ``distance`` as soon as it is final (on the GPU before the labels).
    on_device : bool
        True: on the GPU the result's arrays stay on the device (see
        :meth:`GridSSSPResult.to_host`).
    overwrite_friction : bool
        True: a ``friction`` read into :func:`padded_grid` may be overwritten (on the CPU
        it then holds the labels, one grid less: 4 bytes a cell), as SciPy's
        ``overwrite_a``. Other arrays are never written.

    Returns
    -------
    GridSSSPResult

    Examples
    --------
    >>> import numpy as np
    >>> r = grid_sssp(np.ones((3, 3), np.float32), [(1, 1)], cost="friction",
    ...               friction=np.ones((3, 3), np.float32), backend="cpu")
    >>> r.distance[0].tolist(), int(r.backlink[0, 0])
    ([1.4142135623730951, 1.0, 1.4142135623730951], 2)
    """
    t0 = time.perf_counter()
    be = get_backend(backend)
    z, f, valid, model, codes, lengths = prepare_grid(dem, friction, cost, connectivity,
                                                      cellsize)
    rows, cols, costs = check_sources(sources, valid, start_costs, dem=z)
    targets = None
    if stops is not None:
        srows, scols, _ = check_sources(stops, valid, name="stop", dem=z)
        targets = flat_seeds(srows, scols, np.zeros(srows.size), z.shape[1])[0]
    res = _ops(be).solve(z, f, model, codes, lengths, rows, cols, costs,
                         check_max_cost(max_cost), delta=delta, hops=hops, targets=targets,
                         on_distance=on_distance, on_device=on_device,
                         overwrite_friction=overwrite_friction)
    res.stats.update(seconds=time.perf_counter() - t0, backend=be.name,
                     device=be.device_name(), algorithm="in-core")
    return res


def labels_from_distance(dem, distance, seeds, seed_labels, *, cost="absdiff", friction=None,
                         connectivity=8, cellsize=(1.0, 1.0), backend=None):
    """Allocation, hops and backlinks for given final distances (the tight-arc label pass).

    Parameters
    ----------
    dem, friction, cost, connectivity, cellsize
        As for :func:`grid_sssp`.
    distance : (rows, cols) float64
        Final distances (NaN where unreached).
    seeds : sequence of (row, col)
        Cells whose label is given (sources, or a tile's boundary cells).
    seed_labels : sequence of (allocation, hops)
        Their candidate labels (the least fixed point over tight arcs wins).

    Returns
    -------
    GridSSSPResult
        With ``distance`` as given (NaN where no seed reaches over tight arcs).

    Examples
    --------
    >>> import numpy as np
    >>> dem = np.array([[0, 1, 3]], np.float32)
    >>> r = grid_sssp(dem, [(0, 0), (0, 2)], backend="cpu")
    >>> l = labels_from_distance(dem, r.distance, [(0, 0), (0, 2)], [(0, 0), (1, 0)])
    >>> l.allocation.tolist(), l.backlink.tolist()
    ([[0, 0, 1]], [[0, 5, 0]])
    """
    be = get_backend(backend)
    z, f, valid, model, codes, lengths = prepare_grid(dem, friction, cost, connectivity,
                                                      cellsize)
    dist_in = np.asarray(distance, np.float64)
    if dist_in.shape != z.shape:
        raise InputError(f"distance: shape {dist_in.shape} differs from the grid's {z.shape}")
    seed_labels = np.asarray(seed_labels, np.int64).reshape(-1, 2)
    rows, cols, _ = check_sources(seeds, z.shape, None, name="seed")
    if seed_labels.shape[0] != rows.size:
        raise InputError("seeds and seed labels differ in number")
    known = valid.full() & ~np.isnan(dist_in)
    return _ops(be).labels(z, f, known, dist_in, model, codes, lengths, rows, cols,
                           dist_in[rows, cols], seed_labels)
