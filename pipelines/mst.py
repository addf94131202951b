"""``terrain mst``: the grid minimum spanning forest of a DEM.

:func:`mst_route` is the one planner (:func:`run_mst` and ``--dry-run`` ask it the same
questions); each route wins its regime (docs/mst.md, "Routes"):

``in-core`` (the grid fits the backend's whole-grid kernel; no Dask unless ``--scheduler``
or ``--resume``), ``super-tiles`` (GPU: groups as large as the device holds) and ``tiled``
(CPU: tile batches per shard). :func:`build_mst_graph` runs the walks of
:func:`terrain.grid.mst.mst_walks` as tasks, each group reading its block from the store (or
the held grid) and writing its mask there: ``mst-prepare`` → ``mst-group`` → ``mst-merge`` →
``mst-expand`` → ``mst-write`` → ``mst-finish``.
"""

import contextlib
import functools
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from terrain.backend import get_backend
from terrain.errors import InputError, naming
from terrain.grid.edges import check_weight_range
from terrain.grid.merge import apply_changes
from terrain.grid.mst import MST_NODATA, MSTSpec, finish_stats, mst_walks, super_tile_side
from terrain.grid.mst_device import fits_in_core
from terrain.io import AsciiGrid
from terrain.io.georef import check_weight_units, write_georeference
from terrain.io.outputs import output_beside, staged_path
from terrain.io.remote import check_local_outputs, command_paths, input_fingerprints, is_remote
from terrain.io.zarr_meta import open_group
from terrain.tiles import is_store, open_store
from terrain.tiles.quadtree import call_now
from terrain.tiles.store import (create_layer, read_block, result_compressors, shard_windows,
                                 tiles_per_shard, write_block)

from . import _plan as _plans
from ._command import CommandOutput, open_input, print_summary
from .cluster import cluster_active
from ._resume import data_identity, drop_checkpoints, run_key, steps_kept
from .mst_input import (IO_THREADS, GridRejected, HeldGrid, device_text_fits, held_get,
                        held_put, held_wait, hold, load_grid, shard_runs)

__all__ = ["build_mst_graph", "run_mst", "mst_command", "default_output", "write_geotiff",
           "mst_route", "MSTRoute"]

# tasks whose results are checkpointed in the partial output (``--resume``)
CHECKPOINTED = ("mst-prepare", "mst-group", "mst-merge", "mst-write")

#: text the device parse holds beside the grid while it streams: two pieces and an index
TEXT_DEVICE_BYTES = 3 * (512 << 20)


@dataclass(frozen=True)
class MSTRoute:
    """Where ``terrain mst`` runs (:func:`mst_route`).

    Attributes
    ----------
    path : str
        ``"in-core"``, ``"super-tiles"`` or ``"tiled"``.
    graph : bool
        A Dask task graph runs it (else this process, the grid held in memory).
    device_text : bool
        Super-tiles whose groups read the ASCII text parsed onto the device.
    """

    path: str
    graph: bool = True
    device_text: bool = False

    @property
    def held(self):
        """True when the input grid is read into this process first."""
        return not self.graph or self.device_text

    def describe(self):
        """One line for ``--dry-run``.

        >>> MSTRoute("in-core", graph=False).describe()
        'in-core in this process'
        """
        how = (" in this process" if not self.graph
               else ", the text parsed on the device" if self.device_text else "")
        return self.path + how


def mst_route(spec, be, text=False, scheduler=None, in_core="auto", resume=False, free=None,
              cluster_active=False):
    """The route of ``terrain mst``: the one decision :func:`run_mst` takes and ``--dry-run``
    prints (module docstring: which route wins where).

    Parameters
    ----------
    spec : MSTSpec
    be : terrain.backend.Backend
    text : bool
        The input is an ESRI/GRASS ASCII grid.
    scheduler : str or None
        ``--scheduler``: any given runs a task graph.
    in_core : {"auto", "groups", False}
        "auto" takes the in-core route when the grid fits; "groups" forces super-tiles (on
        the CPU: shard-sized ones, for the tests); False forces tile batches.
    resume : bool
        A resumed run's partial output holds an interrupted run's steps: the task graph
        (whose checkpoints they are) finishes them.
    free : int, optional
        Free bytes of the device; None: asked of it.
    cluster_active : bool
        A cluster is already active (a batch's).

    Returns
    -------
    MSTRoute

    Examples
    --------
    >>> from terrain.backend import Backend
    >>> gpu = Backend("gpu", None)  # the device's facts are given, not asked
    >>> mst_route(MSTSpec((1000, 1000), 512), gpu, text=True, free=80 << 30).describe()
    'in-core in this process'
    >>> mst_route(MSTSpec((50220, 70520), 512), gpu, text=True, free=80 << 30).describe()
    'super-tiles, the text parsed on the device'
    >>> mst_route(MSTSpec((8192, 8192), 512), Backend("cpu", None)).path
    'tiled'
    """
    if in_core not in ("auto", "groups", False):
        raise InputError(f"mst: in_core {in_core!r} is not 'auto', 'groups' or False")
    if free is None:
        free = be.free_bytes()
    local = scheduler is None and not resume and not cluster_active
    room = free - (TEXT_DEVICE_BYTES if text and local else 0)
    if in_core == "auto" and fits_in_core(spec.shape, be, free=room):
        path = "in-core"
    elif in_core is False:
        path = "tiled"
    else:
        path = "super-tiles" if in_core == "groups" else be.select("tiled", "super-tiles")
    device_text = be.select(False, local and text and path == "super-tiles"
                            and device_text_fits(spec.shape, free))
    return MSTRoute(path, not (local and path == "in-core"), device_text)


#: the output when none is named: ``neuse40.asc`` -> ``neuse40.mst.zarr``
default_output = functools.partial(output_beside, suffix=".mst.zarr")


def _prepare(out_path, spec, geo, upstream):
    """Create the ``mst`` array (and, for a store input, the georeference) in the output."""
    del upstream  # only orders this task after the ingest
    group = open_group(out_path, mode="a")
    if "x" not in group:
        gt = geo["geotransform"]
        write_georeference(group, spec.shape, gt, geo.get("crs"))
        group.attrs.update({"geotransform": list(gt), "crs": geo.get("crs"),
                            "source": geo.get("source")})
    # kept when there: a resumed run's mask holds the edges of groups that do not run again;
    # LZ4 after a bit shuffle (docs/mst.md, "Output"), which the whole-shard reader and
    # writer handle with the GIL released
    create_layer(group, "mst", "uint8", 0, spec.tile, spec.shape,
                 compressors=result_compressors("codes"),
                 attrs={"bits": "bit d set: edge (cell, d) in the forest; d: E=0, S=1, SE=2, "
                                "SW=3"}, keep=True)
    return out_path if is_remote(out_path) else str(out_path)


_pool_lock = threading.Lock()
_pools = {}


def _each(fn, windows):
    """``[fn(w) for w in windows]``, on this process's I/O pool when there are several."""
    if len(windows) <= 1:
        return [fn(w) for w in windows]
    with _pool_lock:
        if "io" not in _pools:
            from concurrent.futures import ThreadPoolExecutor
            _pools["io"] = ThreadPoolExecutor(IO_THREADS, thread_name_prefix="terrain-io")
    return list(_pools["io"].map(fn, windows))


def _runs(shape, side, window):
    """``window``'s runs of shards: one a row of shards, or about one an I/O thread for the grid."""
    r0, r1, c0, c1 = window
    whole = (r1 - r0, c1 - c0) == tuple(shape)
    return shard_runs(shape, side, window, None if whole else -(-(r1 - r0) // side))


def _read(path, layer, window, side, shape, dtype):
    """Cells ``window`` of ``layer`` (shards of ``side`` cells), a run a thread."""
    r0, r1, c0, c1 = window
    out = np.empty((r1 - r0, c1 - c0), dtype)
    _each(lambda w: read_block(path, layer, w, out=out[w[0] - r0:w[1] - r0, w[2] - c0:w[3] - c0]),
          _runs(shape, side, window))
    return out


def _write(path, layer, window, side, shape, values):
    """Write ``values`` into ``window`` of ``layer``, a run a thread."""
    r0, c0 = window[0], window[2]
    _each(lambda w: write_block(path, layer, w, values[w[0] - r0:w[1] - r0, w[2] - c0:w[3] - c0]),
          _runs(shape, side, window))


def _slot(name, count):
    """This process's semaphore ``name`` of ``count`` holders (None: no bound)."""
    if count is None:
        return contextlib.nullcontext()
    with _pool_lock:
        if (name, count) not in _pools:
            _pools[(name, count)] = threading.BoundedSemaphore(count)
        return _pools[(name, count)]


@contextlib.contextmanager
def _group_slot(dem, in_flight, window):
    """:func:`terrain.grid.mst.mst_walks`'s ``slot``: a group of a held grid waits for its
    rows, then holds one of the ``in_flight`` super-tiles a process runs at once (None: no
    bound)."""
    if isinstance(dem, HeldGrid):
        held_wait(dem, window[1])  # before its slot: a group waiting for its rows holds none
    with _slot("super-tiles", in_flight):
        yield


def _read_group(dem, spec, backend, side, window, on_device):
    """:func:`terrain.grid.mst.mst_walks`'s ``read``: a group's elevations from the held
    grid (on the device when ``on_device``) or the store (shards of ``side`` cells); bytes
    of the store read (a held grid's are none)."""
    if isinstance(dem, HeldGrid):
        return held_get(dem, window, get_backend(backend), on_device=on_device), 0
    z = _read(dem, "elevation", window, side, spec.shape, np.float32)
    return z, z.nbytes


def _keep_mask(out_path, spec, backend, side, device_mask, window, mask):
    """:func:`terrain.grid.mst.mst_walks`'s ``keep``: a group's provisional mask written to
    ``mst`` (shards of ``side`` cells) or put in ``device_mask``; bytes of the store
    written."""
    if device_mask is None:
        _write(out_path, "mst", window, side, spec.shape, mask)
        return mask.nbytes
    held_put(device_mask, window, mask, get_backend(backend))
    return 0


#: write tasks reading and writing mask shards at once in a process: their buffers, not
#: the scheduler's thread count (the cores), bound the RSS of the write phase
WRITE_SLOTS = 16


def _write_changes(out_path, spec, side, device_mask, win, changes):
    """:func:`terrain.grid.mst.mst_walks`'s ``apply``: a group's changes applied to its
    provisional mask: only the shards a change reaches are rewritten (with ``device_mask``:
    the whole group, once)."""
    times = {"read": 0.0, "expand": 0.0, "write": 0.0}
    lock = threading.Lock()

    def one(part):
        w, ch = part
        t0 = time.perf_counter()
        mask = (held_get(device_mask, w) if device_mask is not None
                else read_block(out_path, "mst", w))
        t1 = time.perf_counter()
        apply_changes(mask, w[0], w[2], spec.shape[1], ch)
        t2 = time.perf_counter()
        write_block(out_path, "mst", w, mask)
        with lock:
            times["read"] += t1 - t0
            times["expand"] += t2 - t1
            times["write"] += time.perf_counter() - t2
        return mask.nbytes

    with _slot("write", WRITE_SLOTS):
        nbytes = sum(_each(one, _changes_by_window(spec, side, win, changes,
                                                   device_mask is not None)))
    return {"times": times, "read_bytes": nbytes if device_mask is None else 0,
            "written_bytes": nbytes}


def _changes_by_window(spec, side, win, changes, every=False):
    """``[(window, its changes)]``: the shards of ``win`` holding a changed cell, row-major, or
    with ``every`` the whole of ``win`` in runs of shards."""
    if len(changes.added) + len(changes.dropped) == 0 and not every:
        return []
    ncols = spec.shape[1]
    ra, ca = np.divmod(np.asarray(changes.added, np.int64) >> 2, ncols)
    rd, cd = np.divmod(np.asarray(changes.dropped, np.int64) >> 2, ncols)
    if every:
        wins = _runs(spec.shape, side, win)
    else:
        touched = np.unique(np.concatenate([ra // side * (-(-ncols // side)) + ca // side,
                                            rd // side * (-(-ncols // side)) + cd // side]))
        wins = [w for w in shard_windows(spec.shape, side, win)
                if w[0] // side * (-(-ncols // side)) + w[2] // side in touched]

    def inside(r, c, w):
        return (r >= w[0]) & (r < w[1]) & (c >= w[2]) & (c < w[3])

    return [(w, changes.take(inside(ra, ca, w), inside(rd, cd, w))) for w in wins]


def _finish(out_path, spec, stats, meta):
    """Sum the walks' statistics into the output's attributes; return the summary."""
    t = finish_stats(stats)
    summary = {"total_weight": t["total_weight"], "edges": t["edges"],
               "trees": t["vertices"] - t["edges"], "vertices": t["vertices"],
               "rows": spec.shape[0], "cols": spec.shape[1], "tile": spec.tile,
               "levels": spec.levels, "connectivity": spec.connectivity, "weight": spec.weight,
               **meta, "phase_seconds": {p: round(v, 6) for p, v in t["times"].items()},
               **{k: t[k] for k in ("read_bytes", "written_bytes", "graph_bytes")}}
    open_group(out_path, mode="r+").attrs.update({"mst": summary})
    return summary


def _groups(spec, shard_tiles, be, in_core, free=None):
    """``(group tiles, super-tile, in flight)``: the whole grid as one super-tile when it fits
    in core (``in_core`` "auto", or "whole"); else on the GPU (or with "groups") super-tiles
    sized from the device; else the store's shards as tile batches."""
    if in_core == "whole" or (in_core == "auto" and fits_in_core(spec.shape, be, free=free)):
        return 1 << (spec.levels - 1), True, 1
    if in_core is False:
        return shard_tiles, False, None
    return be.select(lambda: (shard_tiles, in_core == "groups", None),
                     lambda: super_tile_group_tiles(spec, shard_tiles, be, free))()


#: host bytes the super-tile groups in flight may hold together: the peak RSS does not grow
#: with the cores
SUPER_TILE_HOST_BUDGET = 2 << 30
#: the most super-tiles in flight: they overlap one group's reads and writes with the
#: others' device work; the cap keeps the RSS independent of the core count
SUPER_TILES_IN_FLIGHT = 8


def super_tile_group_tiles(spec, shard_tiles, backend, free=None):
    """``(tiles a side, True, in flight)`` of the GPU's super-tile groups: a power-of-two
    multiple of the shard, as large as :func:`terrain.grid.mst.super_tile_side` allows with
    one group in flight per task thread and :data:`SUPER_TILE_HOST_BUDGET` shared by all,
    but at least one group per task thread. The forest is the same."""
    in_flight = max(1, min(SUPER_TILES_IN_FLIGHT, os.cpu_count() or 1))
    g = super_tile_side(spec, backend, in_flight, SUPER_TILE_HOST_BUDGET,
                        min_tiles=shard_tiles, free=free)
    side = spec.tile * g
    while g > shard_tiles and (-(-spec.shape[0] // side)) * (-(-spec.shape[1] // side)) < in_flight:
        g //= 2
        side //= 2
    return g, True, in_flight


def _dem_shard_side(dem):
    """The shard side of a tile store's ``elevation`` (None for a held grid, or a store
    written later in the graph)."""
    if isinstance(dem, HeldGrid) or not is_store(dem):
        return None
    store = open_store(dem)
    return store.tiles_per_shard * store.tile


def _walk(call, dem, out_path, spec, group_tiles, backend, upstream, geo, in_core,
          device_mask=None, free=None):
    """:func:`terrain.grid.mst.mst_walks` with its steps made by ``call``
    (:func:`terrain.tiles.quadtree.call_now` in this process, or a :class:`TaskGraph`'s),
    each group reading its block from ``dem`` and its mask kept in ``out_path``'s ``mst``
    (or ``device_mask``); returns what the finish step returns."""
    be = get_backend(backend)
    group_tiles, super_tile, in_flight = _groups(spec, group_tiles, be, in_core, free)
    plan = spec.plan(group_tiles)
    prepared = call(_prepare, out_path, spec, geo or {}, upstream, key=("prepare",))
    mask_side = spec.tile * tiles_per_shard(spec.tile, spec.shape)
    dem_side = _dem_shard_side(dem) or mask_side
    stats = mst_walks(
        spec, plan, functools.partial(_read_group, dem, spec, be.name, dem_side),
        functools.partial(_keep_mask, out_path, spec, be.name, mask_side, device_mask),
        functools.partial(_write_changes, out_path, spec, mask_side, device_mask),
        call=call, after=prepared, backend=be.name, super_tiles=super_tile,
        whole=True,  # a group that is the whole grid: the route found that it fits
        slot=functools.partial(_group_slot, dem, in_flight if super_tile else None))
    g = plan.group_level
    path = ("in-core" if super_tile and len(plan.groups) == 1 and g == spec.levels - 1
            else "super-tiles" if super_tile else "tiled")
    meta = {"backend": be.name, "group_tiles": 1 << g, "path": path}
    return call(_finish, prepared, spec, stats, meta, key=("finish",))


def build_mst_graph(dem_path, out_path, spec, group_tiles, backend="cpu", upstream=None,
                    geo=None, in_core="auto", partial=None, device_mask=None, free=None):
    """Dask graph computing the forest of the DEM ``dem_path`` (a tile store, possibly
    ``out_path`` itself, or a :class:`~pipelines.mst_input.HeldGrid`) into ``out_path``;
    computing it returns the summary (also stored in the ``mst`` attribute).

    ``group_tiles``: tiles a side of a group (the store's shard); ``upstream``: what runs
    first; ``geo``: the georeference to copy; ``in_core``: as :func:`mst_route`; ``partial``:
    the checkpoints' partial output; ``device_mask``: a held device grid for the masks;
    ``free``: the device's free bytes (None: asked).
    """
    import dask

    from .quadtree import TaskGraph
    if in_core not in ("auto", "groups", False):
        raise InputError(f"build_mst_graph: in_core {in_core!r} is not 'auto', 'groups' or False")
    # out_path names the run, the spec and device (the group side) what a group covers
    token = dask.base.tokenize(str(dem_path), str(out_path), spec, in_core, free is None)
    graph = TaskGraph("mst", token, partial, CHECKPOINTED if partial is not None else ())
    return graph.delayed(_walk(graph.call, dem_path, out_path, spec, group_tiles, backend,
                               upstream, geo, in_core, device_mask, free))


def _check_geotiff_name(path):
    if path is not None and Path(path).suffix.lower() not in (".tif", ".tiff"):
        raise InputError(f"{path}: a GeoTIFF is written there; name it .tif or .tiff")


def run_mst(input_path, output_path=None, tile=512, connectivity=8, weight="max", backend=None,
            scheduler=None, overwrite=False, geotiff=None, in_core="auto",
            resume=False, cog=True):
    """Compute the forest of ``input_path`` (raster or tile store) into ``output_path``.

    Returns the summary dict. See ``terrain mst --help``; ``in_core`` picks the route
    (:func:`mst_route`); ``resume`` finishes the partial output a killed run of the same input
    and options left (the summary's ``reused_tasks`` counts the tasks not run again).

    Examples
    --------
    >>> run_mst("data/sample.asc", "sample.mst.zarr", scheduler="threads")  # doctest: +SKIP
    """
    t_start = time.perf_counter()
    be = get_backend(backend)
    inp, out = command_paths(input_path, output_path, default_output)
    began = input_fingerprints([inp])  # before its header is read
    grid = open_input(inp, tile)
    # (a resumed run may find the store published and its GeoTIFF not: checked later)
    check_local_outputs([inp], [out, geotiff], overwrite or resume)
    _check_geotiff_name(geotiff)
    check_weight_units(weight, grid.crs, inp, units=grid.units)
    try:
        spec = MSTSpec(grid.shape, grid.tile, int(connectivity), weight,
                       tuple(float(c) for c in grid.cellsize))
    except InputError as e:
        raise InputError(f"{inp}: {e}") from None
    key = _run_key(inp, spec)

    def stage_geotiff(store):
        write_geotiff(store, staged_path(geotiff), cog=cog, shown=geotiff)
        return str(geotiff)
    output = CommandOutput(out, key, "mst", geotiffs=[geotiff] if geotiff else [],
                           write_geotiffs=stage_geotiff, overwrite=overwrite, resume=resume)
    route = mst_route(spec, be, isinstance(grid.raster, AsciiGrid), scheduler, in_core,
                      output.steps_kept(), cluster_active=cluster_active())
    if done := output.finished():
        return done
    source = inp if grid.from_store else grid.raster
    with output.partial([inp], began=began) as (tmp, kept):
        wall = {}
        if route.held:
            summary = _run_held(route, source, grid.geo(), tmp, spec, grid.tiles_per_shard,
                                be, wall)
        else:
            summary = _run_graph(route, source, inp, grid.geo(), tmp, spec,
                                 grid.tiles_per_shard, be, in_core, scheduler)
        reused = drop_checkpoints(tmp, kept)
        _check_weights(inp, tmp, spec)
        if "parsed_on" in wall:
            summary["parse"] = wall.pop("parsed_on")
        if wall:
            summary["wall_seconds"] = {k: round(v, 6) for k, v in wall.items()}
        summary.update(seconds=round(time.perf_counter() - t_start, 6), output=str(out),
                       device=be.device_name(), reused_tasks=reused)
        output.publish(tmp, summary)
    return summary


def _check_weights(inp, tmp, spec):
    """Before the output is published: elevations whose differences make a weight beyond
    float32's range (:func:`terrain.grid.edges.check_weight_range`), by the DEM's range as
    its ingest recorded it (in the input store, or the output's own elevation)."""
    if spec.weight == "max":
        return
    stats = (open_store(inp).attrs if is_store(inp) else open_group(tmp).attrs).get("stats")
    if stats:
        check_weight_range(stats.get("min"), stats.get("max"), spec.weight, spec.cellsize,
                           str(inp))


def _rows_first(key):
    """The held route's ready order (:func:`pipelines.cluster.compute`): merges and the rest
    first, then the groups row by row. Dask's own order walks the quadtree (Morton order)
    while the rows of a grid being parsed arrive top to bottom: no thread then waits for
    far rows while near ones have arrived."""
    if isinstance(key, tuple) and str(key[0]).startswith("mst-group-"):
        return (1, key[1], key[2])
    return (0, 0, 0)


def _run_held(route, source, geo, tmp, spec, shard, be, wall):
    """The routes that read the input into this process first (:mod:`pipelines.mst_input`);
    a text the device's parser rejects is read again, on the CPU."""
    try:
        return _run_held_once(route, source, geo, tmp, spec, shard, be, wall, True)
    except GridRejected:
        wall.clear()
        return _run_held_once(route, source, geo, tmp, spec, shard, be, wall, False)


def _run_held_once(route, source, geo, tmp, spec, shard, be, wall, on_device):
    side = spec.tile * shard
    store_geo = geo if not hasattr(source, "shape") else None
    with load_grid(source, tmp, spec.shape, spec.tile, side, be, wall, on_device) as (
            z, arrival), hold(z, arrival) as dem:
        t0 = time.perf_counter()
        if not route.graph:
            summary = _walk(call_now, dem, tmp, spec, shard, be.name, None, store_geo,
                            "whole")
            wall["forest"] = time.perf_counter() - t0
            return summary
        from .cluster import compute, open_scheduler
        with hold(be.xp.zeros(spec.shape, np.uint8)) as mask, open_scheduler("threads"):
            # the groups are sized while the parse still holds its pieces on the device
            free = None if arrival is None else be.free_bytes() - TEXT_DEVICE_BYTES
            graph = build_mst_graph(dem, tmp, spec, shard, be.name, None, store_geo,
                                    "groups", device_mask=mask, free=free)
            # a failed run stops the parse: no task waits for rows that no longer come
            (summary,) = compute(graph, label="mst", ready_order=_rows_first,
                                 on_failure=None if arrival is None else arrival.stop)
        wall["forest"] = time.perf_counter() - t0
    return summary


def _run_graph(route, source, inp, geo, tmp, spec, shard, be, in_core, scheduler):
    """The task-graph routes: the store's groups (a raster ingested into it first)."""
    from .cluster import compute, open_scheduler, remote_input
    # one device's work needs no cluster: the GPU's routes run on threads by default
    # an output at a URL: the workers see only the stores (a raster is read here)
    local = not is_remote(tmp)
    with open_scheduler(scheduler if scheduler is not None else be.select(None, "threads"),
                        cells=spec.shape[0] * spec.shape[1], inputs=[inp] if local else []):
        # the paths as the workers of a cluster given by address must see them
        inp, tmp = remote_input(inp), remote_input(tmp)
        upstream = None
        if hasattr(source, "shape"):  # a raster: ingested into the output in the same graph
            from .ingest import build_ingest_graph
            upstream = build_ingest_graph(inp, tmp, spec.tile, partial=tmp)
            dem, store_geo = tmp, None
        else:
            dem, store_geo = inp, geo
        graph = build_mst_graph(dem, tmp, spec, shard, be.name, upstream, store_geo,
                                in_core, partial=tmp)
        (summary,) = compute(graph, label="mst")
    return summary


MST_BAND_DESCRIPTION = ("MST edges: bit d set = the forest holds the edge from this cell in "
                        f"direction d (1 = E, 2 = S, 4 = SE, 8 = SW); {MST_NODATA} = nodata cell")


def write_geotiff(store_path, tif_path, overwrite=False, cog=True, shown=None):
    """Write the ``mst`` mask of an output store as a uint8 (Cloud-Optimized) GeoTIFF.

    Nodata cells of the DEM (the output's ``elevation``, else the source store's) are
    :data:`terrain.grid.mst.MST_NODATA`,
    so they never read as 0 (a valid cell owning no edge); see :mod:`terrain.io.geotiff`.
    ``run_mst`` stages it (:func:`terrain.io.outputs.staged_path`), its name checked before;
    ``shown``: the name an error gives it in place of the staged ``tif_path``.
    """
    from terrain.io.geotiff import write_geotiff as write_layer

    group = open_group(store_path, mode="r")
    valid = None
    if "elevation" in group:
        valid = (store_path, "elevation")
    elif group.attrs.get("source") and is_store(group.attrs["source"]):
        valid = (group.attrs["source"], "elevation")
    with naming(str(tif_path), shown):
        return write_layer(store_path, "mst", tif_path, read=read_block, cog=cog,
                           nodata=MST_NODATA, valid_from=valid,
                           description=MST_BAND_DESCRIPTION, resampling="nearest",
                           tags={"E": 1, "S": 2, "SE": 4, "SW": 8, "nodata": MST_NODATA},
                           overwrite=overwrite)


def _format_summary(s):
    t = s["phase_seconds"]
    return "\n".join([
        f"mst       {s['output']}",
        f"grid      {s['rows']} x {s['cols']}, {s['connectivity']}-connected, weight {s['weight']}",
        f"forest    {s['edges']} edges, {s['trees']} trees, {s['vertices']} vertices",
        f"weight    {s['total_weight']:.10g}",
        f"tiles     {s['tile']} a side, {s['levels']} levels, backend {s['backend']} "
        f"({s['device']}), {s.get('path', 'tiled')} path",
        "phases    " + ", ".join(f"{p} {v:.2f}" for p, v in t.items()) + " (task seconds)",
        f"bytes     read {s['read_bytes']}, written {s['written_bytes']}, "
        f"level graphs {s['graph_bytes']}",
        f"time      {s['seconds']:.2f} s",
    ] + ([f"resumed   {s['reused_tasks']} tasks reused from the interrupted run"]
         if s.get("reused_tasks") else [])
      + ([f"geotiff   {s['geotiff']}"] if s.get("geotiff") else []))


def _run_key(inp, spec):
    """The run's key (:func:`pipelines._resume.run_key`): its partial output's name."""
    return run_key("mst", [] if is_remote(inp) else [inp], str(inp), spec, data_identity(inp))


def mst_command(args):
    """``terrain mst INPUT [-o OUT.zarr] [--tile N] [--connectivity 4|8] [--weight W] ...``."""
    if getattr(args, "dry_run", False):
        return _plans.dry_run_command("mst", args)
    summary = run_mst(args.input, args.output, tile=args.tile, connectivity=args.connectivity,
                      weight=args.weight, backend=args.backend, scheduler=args.scheduler,
                      overwrite=args.overwrite, geotiff=args.geotiff,
                      resume=getattr(args, "resume", False),
                      cog=not getattr(args, "no_cog", False))
    print_summary(summary, args.input, args.json, _format_summary)
    return 0


def _plan(plan, grid, args, inp, out):
    """``mst --dry-run``: the route (:func:`mst_route`), its tasks and memory."""
    from terrain.io.outputs import partial_path

    shape, tile, shard = grid.shape, grid.tile, grid.tiles_per_shard
    spec = MSTSpec(shape, tile, int(args.connectivity), args.weight,
                   tuple(float(c) for c in grid.cellsize))
    scheduler = getattr(args, "scheduler", None)
    be = get_backend(args.backend)
    text = isinstance(grid.raster, AsciiGrid)
    free = be.free_bytes()
    key = _run_key(inp, spec)
    route = mst_route(spec, be, text, scheduler, "auto",
                      getattr(args, "resume", False) and steps_kept(out, key), free,
                      cluster_active())
    tasks = 0
    if route.graph and not route.device_text:
        partial = partial_path(out, key)
        upstream = None
        if not grid.from_store:
            from .ingest import build_ingest_graph
            upstream = build_ingest_graph(inp, partial, tile)
        tasks = _plans.task_count(build_mst_graph(inp if grid.from_store else partial,
                                                  partial, spec, shard, be, upstream,
                                                  free=free))
    side = min(tile * shard, max(shape))
    edges = args.connectivity // 2
    per_task = max(0 if grid.from_store else _plans.band_task_bytes(grid),
                   side * side * (4 + 1 + edges * _plans.EDGE_BYTES))
    out_bytes = ((0 if grid.from_store else _plans.ingest_bytes(grid))
                 + plan["cells"] * _plans.MASK_BYTES_PER_CELL)
    extra = plan["shards"] * 64 + plan["shards"] * 4 * side * _plans.EDGE_BYTES * 2
    return {"tasks": tasks, "path": route.path, "route": route.describe(),
            "backend": be.name,
            "memory_per_task_bytes": per_task,
            "memory_per_worker_bytes": per_task * plan["threads_per_worker"],
            "output_bytes": out_bytes, "partial_extra_bytes": extra,
            "other_outputs_bytes": plan["cells"] * _plans.MASK_BYTES_PER_CELL
            if getattr(args, "geotiff", None) else 0}


_plans.register("mst", _plan, lambda inp, args: default_output(inp),
                lambda args: ([], [getattr(args, "geotiff", None)]))
