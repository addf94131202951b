"""Exact single- and multi-source shortest paths (cost distance) on a grid that fits in memory.

Conventions (``docs/cost-distance.md``; shared with the tiled algorithm)
-----------------------------------------------------------------------
Vertices are the cells whose elevation (and friction, when given) is not NaN; arcs and their
float64 costs come from :mod:`terrain.grid.costs`. For sources ``i`` at cells ``s_i`` with
start costs ``c_i``, every reached cell ``v`` gets

* ``distance[v]``: the minimum over sources and paths of the left-fold float64 sum
  ``c_i + w_1 + w_2 + ...`` (round to nearest after each addition);
* ``(allocation[v], hops[v])``: the lexicographic minimum of ``(allocation[u], hops[u] + 1)``
  over tight arcs ``u -> v`` (``distance[u] + w == distance[v]`` exactly) and of ``(i, 0)``
  where ``v = s_i`` and ``c_i == distance[v]``: the nearest source, ties to the lower index;
* ``backlink[v]``: ``0`` at a source root, else ``k + 1`` for the lowest arc code ``k`` such
  that the neighbour ``u = v + (ARC_DR[k], ARC_DC[k])`` is a tight predecessor with
  ``(allocation[u], hops[u] + 1) == (allocation[v], hops[v])``; ``255`` where unreached.

Unreached cells (and cells beyond ``max_cost``) have distance NaN, allocation -1.

Algorithm (CPU)
---------------
Dijkstra on the implicit grid, with no graph built: the grid is copied into a frame padded
by two NaN cells, so a neighbour is ``cell + offset[k]`` without bounds checks, and a
cell that is not a vertex carries the label ``-inf`` so that no arc into it ever improves
it. The priority queue is a flat binary heap of ``(distance, label, cell)`` in preallocated
arrays with lazy deletion, ordered lexicographically by ``(distance, label)`` where
``label = allocation << 32 | hops``: a lexicographic-key Dijkstra, so that every cell is
settled once with its final distance *and* its final label, and zero-cost arcs (flats under
``absdiff``) need no second pass. Backlinks follow in one parallel pass over the cells. The
heap is written by hand because no library offers a Numba-callable, allocation-free heap
keyed by two numbers; scipy's ``dijkstra`` needs a CSR graph (about 10 times the grid's
memory) and scikit-image's ``MCP_Geometric`` is several times slower (``terrain.run bench
cost-distance``).

When every arc costs at least some ``w_lo > 0`` (``friction`` and ``tobler`` with positive
friction; :func:`bucket_plan`), a circular array of buckets of width ``w_lo / 2`` (Dinitz)
replaces the heap: no arc stays inside a bucket, so a bucket's cells are final and their
order does not matter. There every tight predecessor of a cell is settled before it, so
the backlink (the lowest code among the tight predecessors with the cell's label) is kept
during the relaxations, and the outputs follow in one parallel copy pass
(:func:`_outputs_cpu`); under ``friction`` the elevations are not even copied into the
frame. The Dijkstra itself is sequential; set-up and outputs use every core.

:func:`labels_from_distance` is the same kernel run with the distances fixed: it relaxes only
tight arcs, which gives allocation, hops and backlinks for distances computed elsewhere (the
tiled algorithm's per-tile fill).

Algorithm (GPU)
---------------
See ``_sssp.cu``: label-correcting relaxation of a compacted frontier with ``atomicMin`` on
the distance bits (non-negative float64 order like their uint64 bits), iterated on the
device; then min-label propagation of ``allocation << 32 | hops`` over tight arcs, then the
backlink pass. Every correct algorithm reaches the same least fixed point, so the GPU gives
the CPU's bits.

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
import threading
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..backend import get_backend
from ..errors import InputError
from .costs import (ARC_DC, ARC_DR, arc_codes, arc_lengths, check_friction,
                    cost_model_code)

__all__ = ["grid_sssp", "labels_from_distance", "SSSPResult", "check_sources", "PAD",
           "UNREACHED_BACKLINK", "sssp_cpu", "backlinks_cpu", "incore_bytes"]

PAD = 2  # NaN frame around the grid: knight moves reach two cells away
UNREACHED_BACKLINK = 255
_HOPS_BITS = 32
_HOPS_MASK = (1 << _HOPS_BITS) - 1
#: the CPU kernels (_sssp_cpu.py, Numba), imported where a CPU kernel runs (module __getattr__)
_CPU_KERNELS = ("sssp_cpu", "sssp_buckets_cpu", "backlinks_cpu", "_init_padded_cpu",
                "_outputs_cpu", "_max_abs_slope", "_touch_pages", "_put_cell", "_grown",
                "_heap_push", "_less", "_prefetch")


def __getattr__(name):
    """A CPU kernel (:data:`_CPU_KERNELS`), imported from ``_sssp_cpu`` on first use."""
    if name in _CPU_KERNELS:
        from . import _sssp_cpu
        return getattr(_sssp_cpu, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class SSSPResult:
    """Labels of every cell (NumPy arrays of the grid's shape) and run statistics."""

    distance: np.ndarray   # float64, NaN where unreached
    allocation: np.ndarray  # int32, -1 where unreached
    backlink: np.ndarray   # uint8, 0 at a source root, 1..16 arc code + 1, 255 unreached
    hops: np.ndarray       # int32, arcs on the labelled path, -1 where unreached (or None)
    stats: dict = field(default_factory=dict)

    @property
    def reached(self):
        """Number of reached cells."""
        return int(np.count_nonzero(self.allocation >= 0))

    def to_host(self):
        """This result with NumPy arrays: itself, or (a GPU result kept on the device,
        ``grid_sssp(on_device=True)``) a copy with its arrays downloaded.

        >>> r = SSSPResult(np.zeros((1, 2)), np.zeros((1, 2), np.int32),
        ...                np.zeros((1, 2), np.uint8), None)
        >>> r.to_host() is r
        True
        """
        arrays = (self.distance, self.allocation, self.backlink, self.hops)
        if all(a is None or isinstance(a, np.ndarray) for a in arrays):
            return self
        import cupy

        from ._sssp_gpu import download
        wanted = [cupy.ascontiguousarray(a) for a in arrays if a is not None]
        host = iter(download(cupy, wanted))
        return SSSPResult(*(None if a is None else next(host) for a in arrays),
                          stats=self.stats)


def incore_bytes(shape, has_friction=False):
    """Memory of the in-core SSSP on a grid of ``shape``: about 40 bytes a cell (padded
    elevation, distance, labels, outputs), 4 more with a friction raster.

    >>> incore_bytes((1000, 1000)), incore_bytes((1000, 1000), has_friction=True)
    (40000000, 44000000)
    """
    return int(shape[0]) * int(shape[1]) * (40 + (4 if has_friction else 0))


# ----------------------------------------------------------------------------------------
# checks


def check_sources(sources, valid, start_costs=None, name="source"):
    """Sources as ``(rows, cols, start_costs)`` arrays; :class:`InputError` if one is outside
    the grid, on a cell that is not a vertex (nodata), or has a bad start cost.

    ``valid`` is the boolean vertex mask (or just the grid shape, to skip the nodata check).
    """
    src = np.asarray(sources, dtype=np.float64)
    if src.ndim != 2 or src.shape[1] != 2 or src.shape[0] == 0:
        raise InputError(f"{name}s: expected a non-empty list of (row, col) cells")
    if not np.all(np.isfinite(src)) or np.any(src != np.round(src)):
        raise InputError(f"{name}s: cells must be whole (row, col) numbers")
    rows, cols = src[:, 0].astype(np.int64), src[:, 1].astype(np.int64)
    shape = valid.shape if hasattr(valid, "shape") else tuple(valid)
    for i, (r, c) in enumerate(zip(rows.tolist(), cols.tolist())):
        if not (0 <= r < shape[0] and 0 <= c < shape[1]):
            raise InputError(f"{name} {i} at cell (row, col) = ({r}, {c}) is outside the "
                             f"{shape[0]} x {shape[1]} grid")
        if hasattr(valid, "shape") and not valid[r, c]:
            raise InputError(f"{name} {i} at cell (row, col) = ({r}, {c}) is on nodata")
    if start_costs is None:
        costs = np.zeros(rows.size, np.float64)
    else:
        costs = np.broadcast_to(np.asarray(start_costs, np.float64), rows.shape).copy()
        if not (np.all(np.isfinite(costs)) and np.all(costs >= 0)):
            raise InputError(f"{name}s: start costs must be finite and >= 0")
    return rows, cols, costs


def _check_max_cost(max_cost):
    """The distance limit: ``max_cost``, else the largest float64, so that an arc of infinite
    cost (tobler on a cliff) never reaches a cell."""
    if max_cost is None:
        return sys.float_info.max
    m = float(max_cost)
    if not m > 0:
        raise InputError(f"max cost {max_cost!r}: must be > 0")
    return min(m, sys.float_info.max)


# ----------------------------------------------------------------------------------------
# drivers (the CPU kernels, Numba, are in _sssp_cpu.py; CUDA twins in _sssp.cu)


def _offsets(cols):
    width = cols + 2 * PAD
    return (ARC_DR * width + ARC_DC).astype(np.int64)


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


def _prepare(dem, friction, cost, connectivity, cellsize):
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
        valid = _VertexMask(z, f)
    else:
        if model == 1:
            raise InputError("cost model 'friction' needs a friction raster")
        f = None
        valid = _VertexMask(z, None)
    if (z.shape[0] + 2 * PAD) * (z.shape[1] + 2 * PAD) >= 2 ** 31:
        raise InputError(f"grid of {z.shape[0]} x {z.shape[1]} cells is too large for the "
                         f"in-core algorithm")
    return z, f, valid, model, codes, lengths


def _flat_seeds(rows, cols, costs, ncols, indices=None):
    width = ncols + 2 * PAD
    seeds = ((rows + PAD) * width + cols + PAD).astype(np.int64)
    idx = np.arange(rows.size, dtype=np.int64) if indices is None else np.asarray(indices, np.int64)
    return seeds, np.asarray(costs, np.float64), idx << _HOPS_BITS


def _unpad(a, shape):
    rows, cols = shape
    return a.reshape(rows + 2 * PAD, cols + 2 * PAD)[PAD:PAD + rows, PAD:PAD + cols]


def grid_sssp(dem, sources, start_costs=None, *, cost="absdiff", friction=None,
              connectivity=8, cellsize=(1.0, 1.0), max_cost=None, backend=None, delta=None,
              hops=True, on_distance=None, on_device=False):
    """Cost distance, allocation and backlinks from ``sources`` over a grid held in memory.

    Parameters
    ----------
    dem : (rows, cols) array
        Elevation (float32; NaN = nodata, a barrier).
    sources : sequence of (row, col)
        Source cells; the source index is the position in this list.
    start_costs : float or sequence of float, optional
        Cost already spent at each source (default 0).
    cost : {'absdiff', 'friction', 'tobler'}
    friction : (rows, cols) array, optional
        Friction per cell (NaN = barrier, >= 0); required by ``'friction'``, multiplies
        ``'tobler'``, ignored by ``'absdiff'`` except for its NaN barriers.
    connectivity : {4, 8, 16}
    cellsize : (dx, dy)
        Cell size (for arc lengths).
    max_cost : float, optional
        Cells farther than this stay unreached.
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional
    delta : float, optional
        The GPU near-far queue's bucket width (default: from a sample of the arc costs;
        ``stats["delta"]`` gives the one used, which a later query on the same grid may pass
        to skip the sampling). Any width gives the same bits; the CPU ignores it.
    hops : bool
        False: the GPU leaves the hop counts on the device (``result.hops`` is None there),
        for callers that write only distance, allocation and backlinks.
    on_distance : callable, optional
        Called with the result's ``distance`` array as soon as it is final: on the GPU
        before the labels and backlinks are computed (a writer may start on it), on the CPU
        at the end.
    on_device : bool
        True: on the GPU, the result's arrays (and the one ``on_distance`` gets) stay on the
        device as CuPy arrays, for a caller that streams them into a store
        (:func:`terrain.grid.cost_outputs.write_windows`) without a host copy of the whole
        grid; :meth:`SSSPResult.to_host` downloads them. The CPU ignores it.

    Returns
    -------
    SSSPResult

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
    z, f, valid, model, codes, lengths = _prepare(dem, friction, cost, connectivity, cellsize)
    rows, cols, costs = check_sources(sources, valid, start_costs)
    limit = _check_max_cost(max_cost)
    if be.is_gpu:
        from ._sssp_gpu import grid_sssp_gpu
        res = grid_sssp_gpu(be, z, f, valid, model, codes, lengths, rows, cols, costs, limit,
                            delta=delta, hops=hops, on_distance=on_distance,
                            on_device=on_device)
    else:
        res = _grid_sssp_cpu(z, f, valid, model, codes, lengths, rows, cols, costs, limit)
        if on_distance is not None:
            on_distance(res.distance)
    res.stats.update(seconds=time.perf_counter() - t0, backend=be.name,
                     device=be.device_name(), algorithm="in-core")
    return res


MAX_BUCKETS = 1 << 22


def bucket_plan(z, f, model, codes, lengths, start_costs, zp=None, offs=None):
    """``(inv_width, nbuckets)`` of the bucket queue, or None where the heap must be used.

    Buckets need a positive lower bound ``w_lo`` on every arc cost (width ``w_lo / 2``) and
    an upper bound ``w_hi`` so that the live buckets fit a circular array of at most
    :data:`MAX_BUCKETS`; ``absdiff`` (flats cost 0) and unbounded costs use the heap.
    """
    if model == 0:
        return None
    from ._sssp_cpu import _max_abs_slope
    used = lengths[codes]
    if f is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all NaN: no plan
            fmin, fmax = float(np.nanmin(f)), float(np.nanmax(f))
        if not (math.isfinite(fmin) and math.isfinite(fmax)):
            return None
    else:
        fmin = fmax = 1.0
    if model == 1:
        w_lo, w_hi = float(used.min()) * fmin, float(used.max()) * fmax
    else:
        smax = _max_abs_slope(zp, offs, codes, lengths, z.shape[0], z.shape[1], PAD)
        from .costs import TOBLER_A, TOBLER_S0, TOBLER_V0
        growth = TOBLER_A * (smax + TOBLER_S0)
        if not growth < 600:
            return None
        w_lo = float(used.min()) / TOBLER_V0 * fmin
        w_hi = float(used.max()) * math.exp(growth) / TOBLER_V0 * fmax
    w_lo *= 1 - 1e-9
    w_hi *= 1 + 1e-9
    if not (w_lo > 0 and math.isfinite(w_hi)):
        return None
    inv_width = 2.0 / w_lo
    spread = (float(np.max(start_costs)) - float(np.min(start_costs))) * inv_width
    span = w_hi * inv_width + spread + 4
    if span >= MAX_BUCKETS or (float(np.max(start_costs)) + z.size * w_hi) * inv_width > 2.0 ** 50:
        return None
    return inv_width, 1 << int(math.ceil(math.log2(span)))


def _grid_sssp_cpu(z, f, valid, model, codes, lengths, rows, cols, costs, limit, queue="auto"):
    from ._sssp_cpu import _outputs_cpu, sssp_buckets_cpu, sssp_cpu
    shape = z.shape
    offs = _offsets(shape[1])
    plan = None
    if queue != "heap" and model == 1:  # friction: the plan needs no padded elevations
        plan = bucket_plan(z, f, model, codes, lengths, costs)
    # the bucket queue under friction never reads elevations: no padded copy of them
    zp, fp, dist, label = _padded_state(z, f, keep_z=not (plan is not None and model == 1))
    if queue != "heap" and model == 2:
        plan = bucket_plan(z, f, model, codes, lengths, costs, zp, offs)
    seeds, seed_dist, seed_label = _flat_seeds(rows, cols, costs, shape[1])
    if plan is None:
        settled = sssp_cpu(zp, fp, f is not None, model, lengths, offs, codes, dist, label,
                           seeds, seed_dist, seed_label, False, limit)
        return _finish_cpu(zp, fp, f is not None, model, lengths, offs, codes, dist, label,
                           shape, {"settled": int(settled), "queue": "heap"})
    backlink_p = np.empty(dist.size, np.uint8)
    # The Dijkstra runs on one core (without the GIL); meanwhile another thread allocates
    # the outputs and takes their page faults (a third of the set-up time at 4096²).
    outputs = []
    prefault = threading.Thread(target=lambda: outputs.extend(_touched_outputs(shape)))
    prefault.start()
    try:
        settled = sssp_buckets_cpu(zp, fp, f is not None, model, lengths, offs, codes, dist,
                                   label, seeds, seed_dist, seed_label, limit, *plan,
                                   backlink_p)
    finally:
        prefault.join()
    backlink, distance, allocation, hops = outputs or _touched_outputs(shape)  # (if it failed)
    _outputs_cpu(dist, label, backlink_p, shape[0], shape[1], PAD, backlink, distance,
                 allocation, hops)
    return SSSPResult(distance, allocation, backlink, hops,
                      {"settled": int(settled), "queue": "buckets"})


def _touched_outputs(shape):
    """Empty ``(backlink, distance, allocation, hops)`` arrays of ``shape``, their pages
    mapped."""
    from ._sssp_cpu import _touch_pages
    arrays = (np.empty(shape, np.uint8), np.empty(shape, np.float64), np.empty(shape, np.int32),
              np.empty(shape, np.int32))
    for a in arrays:
        _touch_pages(a.reshape(-1).view(np.uint8))
    return arrays


def _finish_cpu(zp, fp, has_f, model, lengths, offs, codes, dist, label, shape, stats):
    from ._sssp_cpu import backlinks_cpu
    backlink = np.empty(shape, np.uint8)
    distance = np.empty(shape, np.float64)
    allocation = np.empty(shape, np.int32)
    hops = np.empty(shape, np.int32)
    backlinks_cpu(zp, fp, has_f, model, lengths, offs, codes, dist, label, shape[0], shape[1],
                  PAD, backlink, distance, allocation, hops)
    return SSSPResult(distance, allocation, backlink, hops, stats)


def _padded_state(z, f, keep_z=True):
    """``(zp, fp, dist, label)``: the padded flat arrays the kernels work on (``zp`` a 1-cell
    dummy unless ``keep_z``)."""
    from ._sssp_cpu import _init_padded_cpu
    n = (z.shape[0] + 2 * PAD) * (z.shape[1] + 2 * PAD)
    zp = np.empty(n if keep_z else 1, np.float32)
    fp = np.empty(n if f is not None else 1, np.float32)
    dist = np.empty(n, np.float64)
    label = np.empty(n, np.int64)
    _init_padded_cpu(z, f if f is not None else np.ones((1, 1), np.float32), f is not None,
                     keep_z, PAD, zp, fp, dist, label)
    if f is None:
        fp[0] = 1.0
    if not keep_z:
        zp[0] = 0.0
    return zp, fp, dist, label


def labels_from_distance(dem, distance, seeds, seed_labels, *, cost="absdiff", friction=None,
                         connectivity=8, cellsize=(1.0, 1.0), backend=None):
    """Allocation, hops and backlinks for given final distances (the tight-arc label pass).

    Parameters
    ----------
    dem, friction, cost, connectivity, cellsize
        As for :func:`grid_sssp`.
    distance : (rows, cols) float64
        Final distances (NaN where unreached), e.g. a tile's distances from the tiled
        algorithm.
    seeds : sequence of (row, col)
        Cells whose label is given: the sources' roots, or cells on a tile's boundary whose
        label comes from outside.
    seed_labels : sequence of (allocation, hops)
        Their labels. A seed's label is a candidate: the least fixed point over tight arcs
        inside the grid wins.

    Returns
    -------
    SSSPResult
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
    z, f, valid, model, codes, lengths = _prepare(dem, friction, cost, connectivity, cellsize)
    dist_in = np.asarray(distance, np.float64)
    if dist_in.shape != z.shape:
        raise InputError(f"distance: shape {dist_in.shape} differs from the grid's {z.shape}")
    seed_labels = np.asarray(seed_labels, np.int64).reshape(-1, 2)
    rows, cols, _ = check_sources(seeds, z.shape, None, name="seed")
    if seed_labels.shape[0] != rows.size:
        raise InputError("seeds and seed labels differ in number")
    known = valid.full() & ~np.isnan(dist_in)
    seed_d = dist_in[rows, cols]
    if be.is_gpu:
        from ._sssp_gpu import labels_from_distance_gpu
        return labels_from_distance_gpu(be, z, f, known, dist_in, model, codes, lengths, rows,
                                        cols, seed_d, seed_labels)
    from ._sssp_cpu import sssp_cpu
    shape = z.shape
    zp, fp, dist, label = _padded_state(z, f)
    _unpad(dist, shape)[...] = np.where(known, dist_in, -np.inf)
    seeds_flat, _, _ = _flat_seeds(rows, cols, seed_d, shape[1])
    seed_lab = (seed_labels[:, 0] << _HOPS_BITS) | seed_labels[:, 1]
    offs = _offsets(shape[1])
    sssp_cpu(zp, fp, f is not None, model, lengths, offs, codes, dist, label, seeds_flat,
             np.nan_to_num(seed_d, nan=-np.inf), seed_lab, True, math.inf)
    # cells whose distance no seed explains stay unreached
    dist[label == np.iinfo(np.int64).max] = -np.inf
    return _finish_cpu(zp, fp, f is not None, model, lengths, offs, codes, dist, label, shape,
                       {})
