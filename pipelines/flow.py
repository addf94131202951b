"""``terrain flow DEM -o flow.zarr``: depression filling, D8 flow directions and flow
accumulation into one store (layers, codes and summary: docs/hydrology.md; conventions:
:mod:`terrain.hydrology.flow`); ``terrain watershed`` and ``terrain streams`` read it.

``filled`` comes from ``terrain fill``'s pipeline (:func:`pipelines.fill.write_filled`), or
with ``--filled`` is the input copied as it is. The ``filled`` layer of a store that
``terrain fill`` wrote is not filled twice, nor copied: its shard files are hard linked into
the output (:func:`terrain.tiles.store.link_layer`; copied across file systems): the tiled
flow of an 8192² fill store wrote 144 MB instead of 273 and took 11.6 s instead of 13.3
(2-core VM). Two routes (:func:`flow_route`), the same
bits (weighted sums within float64 rounding on the tiled route):

* ``in-core`` (about :data:`IN_CORE_BYTES` a cell fit half the available memory, or the
  GPU's device holds the flow): the filled DEM read whole, directions and accumulation as
  one block, no task graph.
* ``tiled``: groups = the store's shards; directions in rounds of per-group flat passes
  until the flats' border distances settle, accumulation by the quadtree walk up and down
  (docs/hydrology.md, "Out of core"). Memory: a group's blocks per running task and the
  boundary graphs (O(perimeter)).

Stores at URLs travel to the tasks as :class:`terrain.io.remote.Location` values, which each
task opens itself (a cluster that shares nothing but the object store, docs/scale.md); a
weights raster's store is scratch beside the output (under its prefix at a URL), removed
before the output is finished.
"""

import functools
import time
from pathlib import Path

import numpy as np

from terrain.backend import get_backend, nanmax
from terrain.errors import InputError, naming
from terrain.grid.edges import check_connectivity
from terrain.hydrology import (DEGREE_STEPS, FlowSpec, accumulation_pass, check_drained,
                               direction_group, direction_pass, fill_depressions,
                               fill_fits_on_device, fill_store_attrs, FLOW_MEANINGS,
                               flow_accumulation, flow_directions, flow_fits_on_device,
                               forget_flat_states, group_totals)
from terrain.io import available_memory
from terrain.io.geotiff import geotiff_files, geotiff_paths
from terrain.io.georef import mark_raster, unit_of, warn_degrees, write_georeference
from terrain.io.outputs import output_beside
from terrain.io.remote import (as_path, check_local_outputs, command_paths, input_fingerprint,
                               is_remote, remove_tree, scratch_beside)
from terrain.io.zarr_meta import codec, open_array, open_group
from terrain.startup import trim_free_memory
from terrain.tiles import is_store
from terrain.tiles.store import (create_layer, link_layer, read_block, read_layer,
                                 shard_windows, write_block, write_layers)

from . import _plan as _plans
from ._command import CommandOutput, InputGrid, asked_route, open_input, print_summary
from ._resume import (checkpoint_at, checkpoint_folder, data_identity, drop_checkpoints,
                      run_checkpointed, run_key)
from .ingest import ingest_into, write_elevation

__all__ = ["run_flow", "flow_command", "flow_route", "default_output", "FLOW_LAYERS",
           "IN_CORE_BYTES", "write_flow_geotiffs"]

#: layer -> (dtype, fill = nodata, Blosc (cname, level, shuffle), description); the codecs
#: of the in-core route, whose writes are its last step: LZ4 encodes 2-3× faster than Zstd
#: (the 4096² flow of a filled GeoTIFF on the CPU, whole process: 2.96-3.32 s against
#: 3.29-4.25 s with the tiled route's codecs; the 40-ft flow on an H200: writes 0.84 s
#: against 1.00 s)
FLOW_LAYERS = {
    "filled": ("float32", np.float32(np.nan), ("lz4", 1, "shuffle"), FLOW_MEANINGS["filled"]),
    "direction": ("uint8", 255, ("lz4", 5, "bitshuffle"), FLOW_MEANINGS["direction"]),
    "accumulation": ("float64", np.nan, ("lz4", 5, "shuffle"), FLOW_MEANINGS["accumulation"]),
}
#: the tiled route's codecs where they differ: out of core the bytes bound the run, and Zstd
#: level 1 keeps a 10-ft flow's directions and accumulations in 0.8 and 3.5 GB against 1.6
#: and 5.5 with LZ4 level 5 (chunks of its store: 14 and 15 % of their bytes against 28 and
#: 22 %, encoded at 400-490 MB/s a core against 900-1300): the flow wrote 5.1 GB where it
#: wrote 7.5 GB with LZ4, and with its fill read and wrote 3.87× the DEM's store (2-core VM)
TILED_CODECS = {"direction": ("zstd", 1, "noshuffle"), "accumulation": ("zstd", 1, "shuffle")}
#: the layers ``--geotiff-dir`` writes
GEOTIFF_LAYERS = ("filled", "direction", "accumulation")
#: bytes a cell of the in-core route holds: filled (4) + padded codes, distances and
#: labels of the flat pass (4 x 4 + 1) + accumulation, order and in-degrees (8 + 8 + 1)
#: + written copies
IN_CORE_BYTES = 48


#: the output when none is named: ``dem.tif`` -> ``dem.flow.zarr``
default_output = functools.partial(output_beside, suffix=".flow.zarr")


def flow_route(shape, route="auto", memory_bytes=None, backend=None):
    """``"in-core"`` when the grid's working set fits, else ``"tiled"``: on a GPU whose
    device holds the grid's flow (:func:`terrain.hydrology.flow_fits_on_device`) the host
    holds the in-core fill's (:data:`pipelines.fill.IN_CORE_BYTES_PER_CELL` within 80 % of
    ``memory_bytes``, default: the available RAM); else :data:`IN_CORE_BYTES` a cell fit
    half of it. The 10-ft size (3.5·10⁹ cells) on an H200 and its host's 128 GB: in core,
    33-36 s whole process against the tiled route's 188 s, the same bits (37 s with only an
    H100's 84 GB free).

    >>> flow_route((4096, 4096), memory_bytes=8 << 30), flow_route((50220, 70520),
    ...     memory_bytes=24 << 30)
    ('in-core', 'tiled')
    """
    if asked_route(route) != "auto":
        return route
    if memory_bytes is None:
        memory_bytes = available_memory()
    cells = shape[0] * shape[1]
    if backend is not None and flow_fits_on_device(shape, backend):
        from .fill import IN_CORE_BYTES_PER_CELL as FILL_BYTES
        return "in-core" if cells * FILL_BYTES <= 0.8 * memory_bytes else "tiled"
    return "in-core" if cells * IN_CORE_BYTES <= memory_bytes // 2 else "tiled"


def _fill_store_grid(path, attrs):
    """The :class:`pipelines._command.InputGrid` of a store ``terrain fill`` wrote (its
    ``attrs``): its ``filled`` layer's grid and tiles (the inner chunks)."""
    layer = open_array(path, "filled")
    tile = int(layer.chunks[0])
    gt = list(attrs["geotransform"])
    return InputGrid(path, tuple(int(s) for s in layer.shape), tile, layer.shards[0] // tile,
                     (abs(gt[1]), abs(gt[5])), gt, attrs.get("crs"), unit_of(layer.attrs))


def _compressors(name, tiled=False):
    cname, level, shuffle = (TILED_CODECS.get(name) if tiled else None) or FLOW_LAYERS[name][2]
    return (codec("blosc", cname=cname, clevel=level, shuffle=shuffle),)


def _create(out_path, name, tile, shape, tiled=False, units=None):
    dtype, fill, _, meaning = FLOW_LAYERS[name]
    arr = create_layer(out_path, name, dtype, fill, tile, shape,
                       compressors=_compressors(name, tiled),
                       attrs={"meaning": meaning, **({"units": units} if units else {})})
    mark_raster(arr, nodata=fill)  # every layer's fill is its nodata (255 for the codes)
    return arr


def _each_shard(fn, shape, side):
    """``fn(window)`` for every shard window of the grid, on the I/O threads."""
    from concurrent.futures import ThreadPoolExecutor

    from terrain.tiles import io_threads
    with ThreadPoolExecutor(io_threads()) as pool:
        list(pool.map(fn, shard_windows(shape, side)))


def _reader(store, layer, dtype=None):
    """``read(r0, r1, c0, c1)`` of a store's layer (whole shards decoded in this thread)."""
    def read(r0, r1, c0, c1):
        a = read_block(store, layer, (r0, r1, c0, c1))
        return a if dtype is None else a.astype(dtype, copy=False)
    return read


def run_flow(input_path, output_path=None, *, tile=512, connectivity=8, outlets=None,
             weights=None, filled=False, backend=None, scheduler=None, overwrite=False,
             geotiff_dir=None, cog=True, route="auto", memory_bytes=None, resume=False):
    """Fill, flow directions and accumulation of ``input_path`` into ``output_path``.

    ``filled``: the input is already depression-filled (it is copied as ``filled``).
    ``outlets``: a raster or points file naming the outlets (default: the grid's edge and
    nodata). ``weights``: a raster on the same grid (float; NaN counts 0). ``route``:
    :func:`flow_route`. ``resume``: finish the partial output a killed run with the same
    input and options left (the tiled route: the fill's steps, the flats' settled borders
    and the directions' and accumulation's steps keep their results among its checkpoints;
    the summary's ``reused_tasks`` counts them). Returns the summary (also in the store's
    ``flow`` attribute).
    """
    from .cluster import call, open_scheduler, remote_input, runs_in_process
    from .fill import (fill_route, named_outlets, warn_outlets_on_nodata, write_filled,
                       write_outlets)
    t_start = time.perf_counter()
    be = get_backend(backend)
    inp, out = command_paths(input_path, output_path, default_output)
    check_local_outputs([inp, outlets, weights],
                        [out, *geotiff_paths(geotiff_dir, GEOTIFF_LAYERS)],
                        overwrite or resume)  # a resumed run's store may be published
    connectivity = check_connectivity(connectivity)
    fill_attrs = fill_store_attrs(inp, connectivity, outlets)
    dem_layer = "elevation" if fill_attrs is None else "filled"
    if fill_attrs is not None:  # its filled layer is the filled DEM: no fill again
        filled = True
        grid = _fill_store_grid(inp, fill_attrs)
    else:
        grid = open_input(inp, tile, tile_count=False)
    shape, tile, shard, side = grid.shape, grid.tile, grid.tiles_per_shard, grid.shard_side
    gt, crs = grid.geotransform, grid.crs
    warn_degrees(crs, inp, DEGREE_STEPS)
    cells = None if outlets is None else named_outlets(outlets, gt, shape, crs)
    if weights is not None:
        _plans.check_same_grid(weights, shape, gt, "weights raster", crs)
    spec = FlowSpec(shape, tile, int(connectivity), (abs(gt[1]), abs(gt[5])),
                    outlets is None)
    weights_tmp = None
    wall = {}
    z = None  # the elevations, when the ingest keeps them
    key = run_key("flow", [p for p in (inp, outlets, weights)
                           if p is not None and not is_remote(p)],
                  str(inp), spec, data_identity(inp), bool(filled), be.name)
    output = CommandOutput(out, key, "flow",
                           geotiffs=geotiff_files(geotiff_dir, GEOTIFF_LAYERS),
                           write_geotiffs=lambda store: write_flow_geotiffs(store, geotiff_dir,
                                                                            cog),
                           overwrite=overwrite, resume=resume)
    if done := output.finished():
        return done
    if output.steps_kept():  # the tiled route's, the only one that keeps steps
        if route == "in-core":
            raise InputError(f"{inp}: the interrupted run took the tiled route: a resumed "
                             "run finishes it there")
        chosen = "tiled"
    else:
        chosen = flow_route(shape, route, memory_bytes, be)
        if (chosen == "in-core" and route == "auto" and not filled
                and fill_route(shape, be) != "in-core"):
            chosen = "tiled"  # the in-core route fills in core too
    # on a cluster (--scheduler, a batch's): reached before any work, which runs there (the
    # tiled route's ingest too; in core the flow is one task), as mst's and cost-distance's
    on_cluster = not runs_in_process(scheduler)
    try:
        with output.partial([inp, outlets, weights], cluster=scheduler if on_cluster else None,
                            cluster_inputs=[inp, weights]) as (tmp, kept):
            reused = 0
            t0 = time.perf_counter()
            if grid.from_store:  # a fill's store too
                group = open_group(tmp, mode="a" if kept else "w-")
                write_georeference(group, shape, gt, crs)
                group.attrs.update({"geotransform": gt, "crs": crs, "source": str(inp),
                                    "tile": int(tile), "cellsize": [abs(gt[1]), abs(gt[5])]})
                dem_path = inp
            elif chosen == "in-core":  # read whole, kept for the route not to read it back
                z = write_elevation(grid.raster, tmp, tile)
                dem_path = tmp
            else:
                ingest_into(remote_input(inp), remote_input(tmp), tile,
                            partial=remote_input(tmp), label="flow-ingest")
                dem_path = tmp
            w_path = None
            if weights is not None:
                if is_store(weights):
                    w_path = as_path(weights)
                else:  # read here, ingested into scratch every task reaches
                    weights_tmp = scratch_beside(tmp, ".weights")
                    remove_tree(weights_tmp)  # a killed run's
                    # an infinite weight is refused by the flow's own check, naming it
                    ingest_into(remote_input(weights), remote_input(weights_tmp), tile,
                                label="flow-ingest", finite=False)  # (on a cluster: there)
                    w_path = weights_tmp
            # a fill store's layer as it is, its files shared (not at a URL: no links there)
            linked = fill_attrs is not None and not (is_remote(inp) or is_remote(tmp))
            if linked:
                link_layer(inp, tmp, "filled")
            there = set(open_group(tmp, mode="r").array_keys()) if kept else ()
            # the filled DEM in the elevations' unit
            units = unit_of(open_group(dem_path, mode="r")[dem_layer].attrs)
            for name in ("direction", "accumulation") if linked else FLOW_LAYERS:
                if name not in there:  # a resumed run's are kept
                    _create(tmp, name, tile, shape, tiled=chosen == "tiled",
                            units=units if name == "filled" else None)
            out_layer = None
            if cells is not None:
                write_outlets(tmp, cells, shape, tile, side)
                out_layer = "outlets"
            wall["ingest"] = time.perf_counter() - t0
            with naming("weights", weights), naming("outlets", outlets):
                if chosen == "in-core":
                    stats, times = call(_in_core, remote_input(tmp), remote_input(dem_path),
                                        dem_layer, spec, side, out_layer,
                                        w_path and remote_input(w_path),
                                        filled and inp, be, None if on_cluster else z,
                                        write_filled_layer=not linked, label="flow")
                    wall.update(times)
                else:
                    t0 = time.perf_counter()
                    # one scheduler for the fill and the flow (one cluster, one dashboard)
                    with open_scheduler(None if on_cluster else scheduler,
                                        cells=shape[0] * shape[1]):
                        if filled and not linked:  # copied as it is
                            _each_shard(lambda w: write_block(tmp, "filled", w, read_block(
                                dem_path, dem_layer, w)), shape, side)
                        elif not filled:  # asked tiled, all of it: its RSS bounded by tiles
                            write_filled(dem_path, tmp, shape, tile, connectivity, out_layer,
                                         be.name, partial=tmp,
                                         route="tiled" if route == "tiled" else "auto")
                        wall["fill"] = time.perf_counter() - t0
                        stats = _tiled(tmp, spec, shard, out_layer, w_path, wall, filled and inp)
                    reused = drop_checkpoints(tmp, kept)
            warn_outlets_on_nodata(outlets, cells, stats["outlet_cells"], dem_path, dem_layer,
                                   shape, side)
            if weights_tmp is not None:  # at a URL it lies under the output's prefix
                remove_tree(weights_tmp)
                weights_tmp = None  # gone: nothing for the finally below
            summary = {"rows": shape[0], "cols": shape[1], "connectivity": int(connectivity),
                       "cellsize": list(spec.cellsize), "tile": int(tile), "route": chosen,
                       "backend": be.name, "device": be.device_name(),
                       "filled_input": bool(filled),
                       "outlets": "grid edge and nodata" if cells is None else "named",
                       "named_outlets": 0 if cells is None else len(cells),
                       # absolute, as the DEM's source: verify reads it from anywhere
                       "weights": None if weights is None else str(
                           weights if is_remote(weights) else Path(weights).resolve()),
                       # what says it is still the raster these sums were of (verify)
                       **({"weights_fingerprint": input_fingerprint(weights)}
                          if weights is not None and not is_remote(weights) else {}),
                       **stats,
                       "reused_tasks": reused,
                       "wall_seconds": {k: round(v, 6) for k, v in wall.items()},
                       "seconds": round(time.perf_counter() - t_start, 6), "output": str(out)}
            output.publish(tmp, summary)  # the GeoTIFFs from the partial, published after it
    finally:
        if weights_tmp is not None:
            remove_tree(weights_tmp)
    summary["seconds"] = round(time.perf_counter() - t_start, 6)
    return summary


def _in_core(tmp, dem_path, dem_layer, spec, side, out_layer, w_path, filled, be, z=None,
             write_filled_layer=True):
    """The grid (``dem_layer`` of ``dem_path``) read whole (or given: ``z``); fill (unless
    ``filled``: then the input's name, refused when it is not filled), directions and
    accumulation where ``be`` computes; on the GPU the accumulation stays on the device
    until the writes. Returns the summary's counts and the steps' seconds."""
    from concurrent.futures import ThreadPoolExecutor
    t0 = time.perf_counter()
    z = read_layer(dem_path, dem_layer, np.float32) if z is None else z
    outl = None if out_layer is None else read_layer(tmp, out_layer)
    # the DEM and the outlets go up now for a fill on the device; else they stay on the
    # host (a grid beyond the device's fill, the 10-ft size on an H200, fills there), the
    # directions take them up padded and their codes come back for the writes, up again for
    # the accumulation: 3.5 GB each way at the 10-ft size, where a second copy of the DEM on
    # the device took 14 GB (flow_fits_on_device)
    if not filled and be.is_gpu and fill_fits_on_device(np.shape(z), be):
        z, outl = (None if a is None else be.asarray(a) for a in (z, outl))
    w = None if w_path is None else read_layer(w_path, "elevation", np.float64)
    t1 = time.perf_counter()
    if not filled:
        z = fill_depressions(z, spec.connectivity, outl, labels=False, tile=spec.tile,
                             backend=be, overwrite_dem=True).filled
    t2 = time.perf_counter()
    # a layer is written while the next is computed: at the 10-ft size the filled DEM (14
    # GB) and the codes (3.5 GB) while the device finds the directions and the accumulation
    with ThreadPoolExecutor(1) as writer:
        written = [writer.submit(write_layers, tmp, {"filled": z}, side)
                   ] if write_filled_layer else []
        d = flow_directions(z, spec.cellsize, spec.connectivity, outl, backend=be)
        if filled:
            check_drained(d.stats, filled)
        t3 = time.perf_counter()
        written.append(writer.submit(write_layers, tmp, {"direction": d.direction}, side))
        acc = flow_accumulation(be.asarray(d.direction), w, backend=be)
        t4 = time.perf_counter()
        write_layers(tmp, {"accumulation": acc}, side)
        for done in written:
            done.result()
    t5 = time.perf_counter()
    wall = {"read": t1 - t0, "fill": t2 - t1, "direction": t3 - t2,
            "accumulation": t4 - t3, "write": t5 - t4}
    # where the array is (np.isnan and np.all beside the device's nanmax were two more CuPy
    # kernels to load, 0.1 s of the 40-ft flow on an H200, and NumPy ufuncs, whose first call
    # on a CuPy array imports cupyx.scipy.special, 0.24 s)
    mx = nanmax(acc) if d.stats["cells"] else float("nan")
    return _stats(d.stats, mx), wall


def _stats(dstats, mx, groups=1):
    """The summary's counts; ``mx``: the largest accumulation (NaN: no valid cell)."""
    return {"cells": int(dstats["cells"]), "outlet_cells": int(dstats["outlets"]),
            "undrained_sinks": int(dstats["undrained"]), "flat_cells": int(dstats["flat_cells"]),
            "flat_passes": int(dstats["flat_passes"]),
            "flat_passes_lowered": int(dstats["flat_passes_lowered"]), "groups": groups,
            "max_accumulation": mx}


#: the tiled route's group kernels (flats, directions, accumulation) run on the CPU, one
#: group a thread, whatever the backend: a group's kernels are small, and on the device they
#: wait on launches and on one another's synchronisations (the flats' frontier rounds, the
#: labels' propagation), one thread at a time. At 16384² (64 groups of 2048²) on an H200
#: host with 16 cores: 14.4 s with the CPU's (flats 7.7, directions 1.6, accumulation 3.2 s)
#: against 84.7 s with the device's (51.3, 6.0, 25.3 s), the same bits; at the 10-ft size
#: the device's on groups of 8192² took 272.6 s against the CPU's 159.5 s on the shards. In
#: core the device takes the whole grid at once and wins (the 40-ft size: 3.1 s in the run).
GROUP_BACKEND = "cpu"


def _tiled(tmp, spec, shard, out_layer, w_path, wall, filled=None):
    """Directions and accumulation of the ``filled`` layer of ``tmp`` by groups of shards, on
    the scheduler :func:`run_flow` opened; ``filled``: the input's name when it was given
    filled (refused when it is not)."""
    import dask

    from .cluster import compute, run_as_completed, share
    from .quadtree import TaskGraph

    plan = spec.plan(shard)
    read_z = _reader(tmp, "filled", np.float32)
    read_out = None if out_layer is None else _reader(tmp, out_layer)
    t0 = time.perf_counter()
    # keys of this output's partial (named by the run's key): the same when resumed, and
    # another output's run on the same cluster has its own
    token = dask.base.tokenize(str(tmp), spec, plan.group_level)
    folder = checkpoint_folder(tmp)

    def flats():  # the flats' settled heights and borders: one checkpoint
        _, heights, passes, frames = direction_pass(
            spec, plan, read_z, read_out, GROUP_BACKEND,
            lambda *a: run_as_completed(*a, label="flow-flats"))
        return heights, frames, passes

    heights, frames, passes = run_checkpointed(
        checkpoint_at(folder, f"flow-flats-{token}"), flats)
    # the passes' blocks came and went beside the states kept for the directions: the
    # heap's free pages back, once a phase (16384²: the directions and accumulation held
    # 450-660 MB after, 650-725 before)
    trim_free_memory()
    t1 = time.perf_counter()

    def write_dir(group, settled):
        code, s = direction_group(spec, plan, group, read_z, read_out, *settled,
                                  GROUP_BACKEND)
        write_block(tmp, "direction", plan.window(plan.group_level, *group), code)
        return s

    settled = share((heights, frames))
    try:
        stats = list(compute(*[dask.delayed(run_checkpointed, pure=False)(
            checkpoint_at(folder, key), write_dir, g, settled, dask_key_name=key)
            for g in plan.groups for key in [(f"flow-direction-{token}", *g)]],
            label="flow-direction"))
    finally:
        forget_flat_states(frames)
    stats = group_totals(stats)
    if filled:
        check_drained(stats, filled)
    trim_free_memory()
    t2 = time.perf_counter()

    def write_acc(window, acc):
        write_block(tmp, "accumulation", window, acc)
        return float(np.nanmax(acc)) if np.any(~np.isnan(acc)) else float("nan")

    graph = TaskGraph("flow", token, tmp, ("flow-acc",))
    out = accumulation_pass(spec, plan, _reader(tmp, "direction"), write_acc,
                            None if w_path is None else _reader(w_path, "elevation",
                                                                np.float64),
                            GROUP_BACKEND, graph.call, what=str(tmp))
    refs = list(out.values())
    done = graph.delayed(graph.add(f"flow-acc-finish-{token}", (), list, refs))
    (maxima,) = compute(done, label="flow-accumulation")
    t3 = time.perf_counter()
    total = {**stats, **passes}
    wall.update({"flats": t1 - t0, "direction": t2 - t1, "accumulation": t3 - t2})
    maxima = np.asarray(maxima, np.float64)
    mx = float(np.nanmax(maxima)) if not np.all(np.isnan(maxima)) else float("nan")
    return {**_stats(total, mx, len(plan.groups)),
            "group_backend": GROUP_BACKEND}


def write_flow_geotiffs(store_path, directory, cog=True):
    """Stage the store's ``filled``, ``direction`` and ``accumulation`` as (Cloud-Optimized)
    GeoTIFFs for ``directory`` (:func:`terrain.io.geotiff.stage_geotiffs`). Returns the
    paths they get."""
    from terrain.io.geotiff import stage_geotiffs

    layers = {}
    for name in GEOTIFF_LAYERS:
        dtype, fill, _, meaning = FLOW_LAYERS[name]
        tags = {"meaning": meaning}
        if name == "direction":
            tags.update({"E": 1, "SE": 2, "S": 4, "SW": 8, "W": 16, "NW": 32, "N": 64,
                         "NE": 128, "outlet": 0, "nodata": 255})
        layers[name] = dict(nodata=fill, description=meaning, tags=tags,
                            resampling="nearest" if name == "direction" else "average")
    return stage_geotiffs(store_path, directory, layers, cog=cog, read=read_block)


def _format_summary(s):
    lines = [
        f"flow      {s['output']}",
        f"grid      {s['rows']} x {s['cols']}, D{s['connectivity']}, "
        f"{s['cells']} cells, route {s['route']}, backend {s['backend']}"
        + (f" (groups' kernels: {s['group_backend']})" if s.get("group_backend", s["backend"])
           != s["backend"] else ""),
        f"outlets   {s['outlet_cells']} outlet cells ({s['outlets']})"
        + (f", {s['undrained_sinks']} undrained sink cells (cut off from every named outlet "
           "by nodata)" if s.get("undrained_sinks") else ""),
        f"flats     {s['flat_cells']} flat cells resolved"
        + (f" in {s['flat_passes']} passes over {s['groups']} groups"
           f" ({s['flat_passes_lowered']} from a kept state)" if s["groups"] > 1 else ""),
        f"max acc   {s['max_accumulation']:.10g}" + (" (weighted)" if s.get("weights") else
                                                       " cells")
        if s["max_accumulation"] == s["max_accumulation"] else "max acc   none (no valid cell)",
        "wall      " + ", ".join(f"{k} {v:.2f}" for k, v in s["wall_seconds"].items()),
        f"time      {s['seconds']:.2f} s",
    ]
    if s.get("reused_tasks"):
        lines.append(f"resumed   {s['reused_tasks']} tasks reused from the interrupted run")
    if s.get("geotiff"):
        lines.append("geotiff   " + ", ".join(s["geotiff"]))
    return "\n".join(lines)


def flow_command(args):
    """``terrain flow DEM [-o OUT.zarr] [--filled] [--weights R] [--outlets F] ...``."""
    summary = run_flow(args.input, args.output, tile=args.tile, connectivity=args.connectivity,
                       outlets=args.outlets, weights=args.weights, filled=args.filled,
                       backend=args.backend, scheduler=args.scheduler,
                       overwrite=args.overwrite, geotiff_dir=args.geotiff_dir,
                       cog=not args.no_cog, route=args.route, resume=args.resume)
    print_summary(summary, args.input, args.json, _format_summary)
    return 0
