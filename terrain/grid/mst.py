"""Exact minimum spanning forest of a DEM's grid graph, in core or tile by tile.

Tiled: each group's tile forests (Borůvka, :mod:`terrain.grid._boruvka`) or its whole forest
(a super-tile, the in-core kernel) are reduced (:mod:`terrain.grid.reduce`), merged up the
quadtree (:func:`terrain.grid.merge.merge_level`) and the merges' changes routed back down to
the masks, along the walks of :mod:`terrain.tiles.quadtree`: :func:`mst_walks`, the one
sequence that :func:`grid_mst` runs in memory and ``pipelines/mst.py`` as Dask tasks. The
total order ``(weight, id)`` and the exact :class:`WeightSum` make the forest and its weight
identical for every tile size, schedule and backend. :func:`grid_mst` is
the one dispatch point; the backends' kernels are paired in :class:`_CpuOps`/:class:`_GpuOps`.
See docs/mst.md.
"""

import contextlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import native
from ..backend import array_backend, get_backend
from ..errors import InputError
from ..tiles.quadtree import QuadtreePlan, TiledGrid, call_now, walk_down, walk_up
from ..tiles.store import TileStore, check_tile_size, is_store, open_store, shard_windows
from .edges import (MAX_TILE, WeightSum, block_sides, check_connectivity, horizontal_lengths,
                    weight_model_code)
from .merge import Changes, LevelGraph, apply_changes, merge_level, split_changes
from .mst_device import (BYTES_PER_CELL, MAX_CELLS, REDUCE_BYTES_PER_CELL, fits_in_core,
                         in_core_mst)

__all__ = ["grid_mst", "MSTSpec", "GridMSTResult", "mst_walks",
           "finish_stats", "super_tile_side", "super_tile_fits", "thread_stream", "PHASES",
           "MST_NODATA"]

#: a nodata cell of the DEM in a forest raster for the user (the ``--geotiff`` COG, the
#: API's DataArray): every bit set, which no cell's edges are (at most E, S, SE and SW:
#: 15), so that nodata never reads as 0, a cell that owns no edge
MST_NODATA = 255

PHASES = ("read", "boruvka", "reduce", "merge", "expand", "write")
IN_CORE = ("auto", True, False, "groups")
#: device bytes a cell of a super-tile takes: its forest (:func:`device_mst`) and reduction
SUPER_TILE_BYTES_PER_CELL = BYTES_PER_CELL + REDUCE_BYTES_PER_CELL
#: host bytes a super-tile group holds per cell: elevations (4) and mask (1), and about as
#: much again while Zarr decodes and encodes them
SUPER_TILE_HOST_BYTES_PER_CELL = 10


@dataclass(frozen=True)
class MSTSpec(TiledGrid):
    """What is computed: grid shape, tile side, connectivity, weight model and cell size."""

    shape: tuple
    tile: int
    connectivity: int = 8
    weight: str = "max"
    cellsize: tuple = (1.0, 1.0)

    def __post_init__(self):
        check_connectivity(self.connectivity)
        weight_model_code(self.weight)
        object.__setattr__(self, "tile", check_tile_size(  # frozen: an int from here
            self.tile, MAX_TILE, "4 × tile² local edge indices must fit 32 bits"))
        horizontal_lengths(self.cellsize)

    @property
    def model(self):
        return weight_model_code(self.weight)

    @property
    def hlen(self):
        return horizontal_lengths(self.cellsize)


@dataclass
class GroupResult:
    """What a group hands on: its mask, its node's graph and its changes."""

    window: tuple
    mask: np.ndarray
    graph: LevelGraph
    changes: Changes
    forest_sum: WeightSum
    forest_edges: int
    vertices: int
    times: dict = field(default_factory=dict)


def _merge_node(spec, level, i, j, children):
    """Merge the children's graphs of node ``(level, i, j)``: ``(graph, changes, seconds)``."""
    t0 = time.perf_counter()
    half = spec.tile << (level - 1)
    graph, changes, _ = merge_level(spec.window(level, i, j), half, children, spec.shape,
                                    spec.connectivity, spec.model, spec.hlen)
    return graph, changes, time.perf_counter() - t0


def _merge_step(spec, k, i, j, *children):
    """The walk's merge step: ``(graph, changes, stats)`` of node ``(k, i, j)``."""
    graph, changes, seconds = _merge_node(spec, k, i, j, list(children))
    stats = {"times": {"merge": seconds}, "graph_bytes": graph.nbytes + changes.nbytes}
    return graph, changes, stats


def _expand_step(spec, k, i, j, incoming, own):
    """The walk's top-down node step: node ``(k, i, j)``'s incoming and own changes split
    among its four children, then ``stats``."""
    t0 = time.perf_counter()
    parts = split_changes(Changes.concat([incoming, own]), spec.window(k, i, j),
                          spec.tile << (k - 1), spec.shape[1])
    return tuple(parts) + ({"times": {"expand": time.perf_counter() - t0}},)


def group_forest(spec, z_block, window, group_level, backend=None, read_seconds=0.0,
                 in_core=False):
    """Tile forests, reductions and in-group merges of one group: a :class:`GroupResult`.

    ``z_block``: the elevations (NaN = nodata) of ``window``, the group's block aligned to
    ``tile << group_level``; ``read_seconds``: the time spent reading it. With ``in_core``
    the group is one super-tile (``z_block`` may lie on the device): its forest comes whole
    from the in-core kernel and is reduced once; both ways give the same final forest.

    >>> spec = MSTSpec((2, 3), tile=2)
    >>> g = group_forest(spec, np.arange(6, dtype=np.float32).reshape(2, 3), (0, 2, 0, 3), 1, "cpu")
    >>> g.forest_edges + len(g.changes.added) - len(g.changes.dropped)
    5
    """
    be = get_backend(backend)
    ops = be.select(_CPU_OPS, _GPU_OPS)
    r0, r1, c0, c1 = window
    if not (in_core and array_backend(z_block).is_gpu):
        z_block = np.asarray(z_block, np.float32)
    if tuple(z_block.shape) != (r1 - r0, c1 - c0):
        raise InputError(f"group_forest: block shape {z_block.shape} does not match {window}")
    times = {p: 0.0 for p in PHASES}
    times["read"] = read_seconds
    if in_core:
        return ops.super_tile(spec, z_block, tuple(int(x) for x in window), be, times)
    return _tile_batches(spec, z_block, tuple(window), group_level, times)


def _tile_batches(spec, z_block, window, group_level, times):
    """:func:`group_forest` of a group as a batch of tiles."""
    from ._boruvka import boruvka_tiles  # Numba: the tiled path's (in core needs none)
    from .reduce import reduce_tile
    T = spec.tile
    r0, r1, c0, c1 = window
    nt_r, nt_c = -(-(r1 - r0) // T), -(-(c1 - c0) // T)
    padded = np.full((nt_r * T, nt_c * T), np.nan, np.float32)
    padded[: r1 - r0, : c1 - c0] = z_block
    batch = padded.reshape(nt_r, T, nt_c, T).transpose(0, 2, 1, 3).reshape(nt_r * nt_c, T, T)
    t0 = time.perf_counter()
    masks = boruvka_tiles(batch, spec.connectivity, spec.model, spec.hlen, "cpu")
    times["boruvka"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    forest_sum = WeightSum()
    forest_edges = 0
    graphs = {}
    model, hlen = spec.model, spec.hlen
    for t, win in enumerate(shard_windows(spec.shape, T, window)):
        native.check_stopped()  # a group's tiles: seconds under load
        a, b, w, rep, forest_w = reduce_tile(masks[t], batch[t], win, spec.shape, model, hlen)
        forest_sum.add(forest_w)
        forest_edges += forest_w.shape[0]
        graphs[divmod(t, nt_c)] = _level_graph(
            spec, win, batch[t][: win[1] - win[0], : win[3] - win[2]], a, b, w, rep, T)
    times["reduce"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    # the group's own levels: the same walk on the group's block, tiles as leaves
    gi, gj = r0 // (T << group_level), c0 // (T << group_level)
    inner = QuadtreePlan.build((r1 - r0, c1 - c0), T, 1, nlevels=group_level + 1)

    def merge(k, i, j, *kids):
        g, ch, _ = _merge_node(spec, k, (gi << (group_level - k)) + i,
                               (gj << (group_level - k)) + j, kids)
        return g, ch

    graph, own = walk_up(inner, lambda k, i, j: (graphs[(i, j)], None), merge)
    changes = [r[0] for node, r in own.items() if node[0] > 0]
    times["merge"] = time.perf_counter() - t0
    mask = masks.reshape(nt_r, nt_c, T, T).transpose(0, 2, 1, 3).reshape(nt_r * T, nt_c * T)
    mask = np.ascontiguousarray(mask[: r1 - r0, : c1 - c0])
    return GroupResult(window, mask, graph, Changes.concat(changes), forest_sum,
                       forest_edges, int(np.count_nonzero(~np.isnan(z_block))), times)


def _level_graph(spec, window, z_block, a, b, w, rep, width=None):
    """A block's reduced forest (local ids, ``width`` a row: default the block's) as a
    :class:`LevelGraph` (global ids)."""
    r0, r1, c0, c1 = window
    C, ncols = width or c1 - c0, spec.shape[1]
    return LevelGraph.from_block(window, z_block, (r0 + a // C) * ncols + c0 + a % C,
                                 (r0 + b // C) * ncols + c0 + b % C, w, rep)


_NO_EDGES = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32),
             np.zeros(0, np.int64))


class _CpuOps:
    """The grid MST's CPU kernels (the whole-block forest: the C Kruskal)."""

    @staticmethod
    def super_tile(spec, z_block, window, be, times):
        """:func:`group_forest` of a group taken whole, on the host."""
        t0 = time.perf_counter()
        forest = in_core_mst(z_block, spec.connectivity, spec.model, spec.hlen, be)
        times["boruvka"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        parts = _NO_EDGES
        if block_sides(window, spec.shape):  # the whole grid has no boundary: nothing goes up
            from .reduce import reduce_tile
            parts = reduce_tile(forest.mask, z_block, window, spec.shape, spec.model,
                                spec.hlen)[:4]
        graph = _level_graph(spec, window, z_block, *parts)
        times["reduce"] = time.perf_counter() - t0
        return GroupResult(window, forest.mask, graph, Changes(), forest.weight_sum,
                           forest.edges, forest.vertices, times)


class _GpuOps:
    """The grid MST's GPU kernels: whole-block forest and reduction on the device."""

    @staticmethod
    def super_tile(spec, z_block, window, be, times):
        """:func:`group_forest` of a group taken whole, on this thread's stream (a worker's
        threads overlap on the device)."""
        cp = be.xp
        t0 = time.perf_counter()
        with thread_stream(be):
            zd = cp.asarray(z_block)
            forest = in_core_mst(zd, spec.connectivity, spec.model, spec.hlen, be)
            mask = forest.mask.get()
            t1 = time.perf_counter()
            parts = _NO_EDGES
            if block_sides(window, spec.shape):
                from .reduce import reduce_block_device
                parts = reduce_block_device(forest.mask, zd, window, spec.shape, spec.model,
                                            spec.hlen, be)
        times["boruvka"] = t1 - t0
        times["reduce"] = time.perf_counter() - t1
        graph = _level_graph(spec, window, z_block, *parts)
        return GroupResult(window, mask, graph, Changes(), forest.weight_sum, forest.edges,
                           forest.vertices, times)


_CPU_OPS, _GPU_OPS = _CpuOps(), _GpuOps()
_streams = threading.local()


def thread_stream(backend):
    """This thread's non-blocking CUDA stream on the current device (made once)."""
    cp = get_backend(backend).xp
    stream = getattr(_streams, "stream", None)
    if stream is None:
        stream = _streams.stream = cp.cuda.Stream(non_blocking=True)
    return stream


@dataclass
class GridMSTResult:
    """The forest as a direction-bit mask (bit ``d`` of ``mask[r, c]``: edge ``(cell, d)``)
    and its statistics; ``path``: "in-core" or "tiled"."""

    mask: np.ndarray
    total_weight: float
    edges: int
    trees: int
    vertices: int
    tile: int
    levels: int
    connectivity: int
    weight: str
    times: dict
    path: str = "tiled"


def _group_step(read, keep, spec, backend, super_tiles, whole, slot, after, level, i, j):
    """The walk's leaf step, up: a group's forest (:func:`group_forest`), its provisional
    mask given to ``keep``; ``(graph, changes, stats)`` (``after``: what runs first)."""
    del after
    be = get_backend(backend)
    win = spec.window(level, i, j)
    shape = (win[1] - win[0], win[3] - win[2])
    # the whole grid found to fit by the caller needs no reduction: nothing goes up
    in_core = super_tiles and ((whole and shape == spec.shape) or super_tile_fits(shape, be))
    with slot(win) if slot is not None else contextlib.nullcontext():
        t0 = time.perf_counter()
        z, read_bytes = read(win, in_core)
        g = group_forest(spec, z, win, level, be, time.perf_counter() - t0, in_core)
        t0 = time.perf_counter()
        written_bytes = keep(win, g.mask)
        g.times["write"] = time.perf_counter() - t0
    stats = {"times": g.times, "read_bytes": read_bytes, "written_bytes": written_bytes,
             "graph_bytes": g.graph.nbytes + g.changes.nbytes, "forest_sum": g.forest_sum.acc,
             "forest_edges": g.forest_edges, "vertices": g.vertices}
    return g.graph, g.changes, stats


def _write_step(apply, spec, after, level, i, j, incoming, own):
    """The walk's leaf step, down: the changes that reached a group (its ancestors' and its
    own) given to ``apply``; its statistics (``after``: what runs first)."""
    del after
    changes = Changes.concat([incoming, own])
    stats = apply(spec.window(level, i, j), changes)
    # every change reaches exactly one group: the sums here add up to the forest's
    changes_sum = WeightSum().add(changes.added_w).add(changes.dropped_w, sign=-1)
    stats.update(changes_sum=changes_sum.acc,
                 changes_edges=len(changes.added) - len(changes.dropped))
    return stats


def mst_walks(spec, plan, read, keep, apply, call=call_now, after=None, backend=None,
              super_tiles=False, whole=False, slot=None):
    """The tiled forest along the quadtree walks of ``plan`` (docs/mst.md, "The algorithm
    as implemented"): each group's forest, its provisional mask given to ``keep``, merged up
    to the root; then the merges' changes routed down, each group's given to ``apply``. The
    one sequence of both drivers, :func:`grid_mst` in memory and ``pipelines.mst`` (as
    tasks, or in its process), which differ in ``call`` and in how a group's block is read
    and where its mask goes.

    Parameters
    ----------
    spec : MSTSpec
    plan : terrain.tiles.quadtree.QuadtreePlan
    read : callable
        ``read(window, on_device)``: ``(block, bytes read from a store)``, the group's
        elevations (NaN = nodata); ``on_device``: the group is taken whole, its block may
        lie on the device.
    keep : callable
        ``keep(window, mask)``: keeps a group's provisional mask; returns the bytes it wrote
        to a store.
    apply : callable
        ``apply(window, changes)``: applies the :class:`~terrain.grid.merge.Changes` that
        reached a group to the mask ``keep`` kept; returns its statistics (``times`` by
        phase, ``read_bytes``, ``written_bytes``).
    call : callable
        Runs each step (:func:`terrain.tiles.quadtree.call_now`) or schedules it (the
        pipeline's ``TaskGraph.call``); keys ``(stage, i, j)``, stages ``group``,
        ``merge{k}``, ``expand{k}``, ``write``.
    after : optional
        What the groups' steps run after (a task of the pipeline's).
    backend : {'cpu', 'gpu'} or Backend, optional
    super_tiles : bool
        Each group is taken whole when it fits (:func:`super_tile_fits`), else as a batch of
        tiles.
    whole : bool
        The caller found that the whole grid fits in core: with ``super_tiles``, a group
        that is the whole grid is taken whole (it needs no reduction).
    slot : callable, optional
        ``slot(window)``: the context a group's read, forest and ``keep`` run in (the
        pipeline's bound on the super-tiles a process holds at once).

    Returns
    -------
    list
        Every step's statistics, for :func:`finish_stats`: the groups', the merges', the
        expands', the writes'.
    """
    g = plan.group_level
    _, rest = walk_up(plan, (_group_step, read, keep, spec, backend, super_tiles, whole, slot,
                             after), (_merge_step, spec), call, nout=3,
                      names=("group", "merge"))
    own = {node: r[:1] for node, r in rest.items()}
    node_rest, writes = walk_down(plan, (_expand_step, spec), (_write_step, apply, spec, after),
                                  call, extra=own, node_nout=5, names=("expand", "write"))
    return ([rest[(g,) + ij][1] for ij in plan.groups]
            + [r[1] for node, r in rest.items() if node[0] > g]
            + [r[0] for r in node_rest.values()] + [writes[(g,) + ij] for ij in plan.groups])


def finish_stats(stats):
    """The forest's totals from the statistics of :func:`mst_walks`: ``total_weight``,
    ``edges``, ``vertices``, ``times`` (seconds by phase, :data:`PHASES`) and the bytes
    ``read_bytes``, ``written_bytes`` and ``graph_bytes``.

    >>> finish_stats([{"forest_sum": WeightSum().add(np.float32([1.5, 2])).acc,
    ...                "forest_edges": 2, "vertices": 4, "read_bytes": 16}])["total_weight"]
    3.5
    """
    times = {p: 0.0 for p in PHASES}
    out = {"read_bytes": 0, "written_bytes": 0, "graph_bytes": 0}
    total, edges, vertices = WeightSum(), 0, 0
    for s in stats:
        for p, v in s.get("times", {}).items():
            times[p] += v
        for key in out:
            out[key] += int(s.get(key, 0))
        if "forest_sum" in s:
            total.merge(WeightSum(s["forest_sum"]))
            edges += s["forest_edges"]
            vertices += s["vertices"]
        if "changes_sum" in s:
            total.merge(WeightSum(s["changes_sum"]))
            edges += s["changes_edges"]
    return {"total_weight": total.value(), "edges": int(edges), "vertices": int(vertices),
            "times": times, **out}


def grid_mst(dem_or_store, connectivity=8, weight="max", tile=512, backend=None, cellsize=None,
             group_tiles=None, in_core="auto"):
    """Minimum spanning forest of the grid graph of a DEM.

    The one dispatch point: *in core* (the whole grid at once) when the grid fits the
    backend's kernel (:func:`terrain.grid.mst_device.fits_in_core`), else *tiled* (super-tile
    groups on the GPU, tile batches on the CPU). Both give the same forest.

    Parameters
    ----------
    dem_or_store : 2-D array (NumPy, or CuPy on the GPU), TileStore or path of a tile store
        Elevations, NaN = nodata. A store gives its own tile size and cell size.
    connectivity : {4, 8}
    weight : {'max', 'absdiff', 'slope', 'length3d'}
    tile : int
        Tile side (a power of two) for an array input.
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional
    cellsize : (dx, dy), optional
        Cell size for ``slope`` and ``length3d`` (default: the store's, or 1).
    group_tiles : int, optional
        Tiles a side processed together (default: the store's shard, or 4; on the GPU's
        super-tiles: sized from the device).
    in_core : {"auto", True, False, "groups"}
        "auto": in core when the grid fits, else tiled; True: in core or an error; False:
        tiled with tile batches; "groups": tiled with each group taken whole.

    Returns
    -------
    GridMSTResult
        ``path`` says which path ran ("in-core" or "tiled").

    Examples
    --------
    >>> r = grid_mst(np.array([[1, 2], [3, 4]], np.float32), tile=2, backend="cpu")
    >>> r.mask.tolist(), r.total_weight, r.edges, r.trees, r.path
    ([[7, 0], [0, 0]], 9.0, 3, 1, 'in-core')
    """
    t_start = time.perf_counter()
    store = None
    if isinstance(dem_or_store, TileStore):
        store = dem_or_store
    elif isinstance(dem_or_store, (str, Path)):
        if not is_store(dem_or_store):
            raise InputError(f"{dem_or_store}: not a terrain tile store")
        store = open_store(dem_or_store)
    be = get_backend(backend)
    if in_core not in IN_CORE:
        raise InputError(f"grid_mst: in_core {in_core!r} is not one of {IN_CORE}")
    if store is not None:
        shape, tile = store.shape, store.tile
        cellsize = cellsize or store.cellsize
        group_tiles = group_tiles or store.tiles_per_shard
    else:
        dem = dem_or_store
        if not array_backend(dem).is_gpu:
            dem = np.asarray(dem, dtype=np.float32)
        if dem.ndim != 2:
            raise InputError(f"grid_mst: the DEM must be 2-D, got shape {dem.shape}")
        shape = dem.shape
    spec = MSTSpec(tuple(int(s) for s in shape), tile, check_connectivity(connectivity),
                   weight, tuple(cellsize or (1.0, 1.0)))
    fits = fits_in_core(spec.shape, be)
    if in_core is True and not fits:
        raise InputError(f"grid_mst: {spec.shape[0]} x {spec.shape[1]} cells do not fit the "
                         f"{be.name} backend's in-core path")
    if in_core is True or (in_core == "auto" and fits):
        t0 = time.perf_counter()
        z = store.read_window(0, spec.shape[0], 0, spec.shape[1]) if store is not None else dem
        return _grid_mst_in_core(spec, z, be, t_start, time.perf_counter() - t0)
    super_tiles = in_core == "groups" or (be.is_gpu and in_core == "auto")
    if super_tiles and group_tiles is None:
        group_tiles = super_tile_side(spec, be)
    if store is None:
        dem = be.to_numpy(dem)
    mask = np.zeros(spec.shape, np.uint8)
    if 0 in spec.shape:
        return GridMSTResult(mask, 0.0, 0, 0, 0, spec.tile, spec.levels, spec.connectivity,
                             weight, {p: 0.0 for p in PHASES})

    def read(window, on_device):
        del on_device  # the host's block: a group taken whole copies it to the device itself
        if store is not None:
            z = store.read_window(*window)
            return z, z.nbytes
        return dem[window[0]:window[1], window[2]:window[3]], 0

    def keep(window, block):
        mask[window[0]:window[1], window[2]:window[3]] = block
        return 0

    def apply(window, changes):
        t0 = time.perf_counter()
        r0, r1, c0, c1 = window
        apply_changes(mask[r0:r1, c0:c1], r0, c0, spec.shape[1], changes)
        return {"times": {"expand": time.perf_counter() - t0}}

    t = finish_stats(mst_walks(spec, spec.plan(group_tiles or 4), read, keep, apply,
                               backend=be, super_tiles=super_tiles, whole=fits))
    times = t["times"]
    times["total"] = time.perf_counter() - t_start
    return GridMSTResult(mask, t["total_weight"], t["edges"], t["vertices"] - t["edges"],
                         t["vertices"], spec.tile, spec.levels, spec.connectivity, weight,
                         times)


def super_tile_fits(shape, backend=None, in_flight=1, free=None):
    """True when ``in_flight`` super-tiles of ``shape`` fit the in-core kernel together (the
    device's free memory, or ``free`` bytes; the CPU's cell bound)."""
    be = get_backend(backend)
    return be.select(
        lambda: fits_in_core((int(shape[0]) * in_flight, int(shape[1])), be),
        lambda: be.fits(shape, in_flight * SUPER_TILE_BYTES_PER_CELL, max_cells=MAX_CELLS,
                        free=free))()


def super_tile_side(spec, backend=None, in_flight=1, host_bytes=None, min_tiles=1, free=None):
    """Tiles a side per super-tile group: the largest power of two whose block fits the
    in-core kernel (and ``host_bytes`` of host buffers) ``in_flight`` times over; at least
    ``min_tiles``, at most the whole grid. Larger means fewer tasks and smaller boundaries.

    >>> super_tile_side(MSTSpec((5000, 5000), 512), "cpu", min_tiles=4)
    4
    """
    g = max(1, int(min_tiles))
    while g < (1 << (spec.levels - 1)):
        side = spec.tile * 2 * g
        if not super_tile_fits((side, side), backend, in_flight, free):
            break
        if host_bytes is not None and (in_flight * side * side * SUPER_TILE_HOST_BYTES_PER_CELL
                                       > host_bytes):
            break
        g *= 2
    return g


def _grid_mst_in_core(spec, z, be, t_start, read_seconds):
    """:func:`grid_mst` of a grid that fits in core, whole (``z`` on host or device)."""
    times = {p: 0.0 for p in PHASES}
    times["read"] = read_seconds
    t0 = time.perf_counter()
    forest = in_core_mst(be.asarray(z, np.float32), spec.connectivity, spec.model, spec.hlen,
                         be)
    mask = be.to_numpy(forest.mask)
    times["boruvka"] = time.perf_counter() - t0
    times["total"] = time.perf_counter() - t_start
    return GridMSTResult(mask, forest.total_weight, forest.edges, forest.trees,
                         forest.vertices, spec.tile, spec.levels, spec.connectivity,
                         spec.weight, times, "in-core")
