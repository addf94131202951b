"""``terrain cost-distance``: accumulated cost, allocation and backlinks from sources; ``terrain
path``: least-cost paths traced along the backlinks.

One command, three algorithms (routes, :func:`cost_distance_route`): ``in-core``
(:mod:`pipelines.cost_distance_incore`) wherever the grid fits, the fastest; else
``blocked`` (:mod:`pipelines.cost_distance_blocked`) on the CPU and ``tiled``
(:mod:`pipelines.cost_distance_tiled`, a reusable index) on the GPU. A raster input is
ingested into the output store itself (a friction raster into a hidden store beside it); the
output appears atomically, its GeoTIFFs written from the partial. Bad input is found before
anything runs where the headers suffice, else when the data are read, and then nothing is
left behind. Routes and checks: docs/cost-distance.md.
"""

import functools
import math
import time
from pathlib import Path

import numpy as np

from terrain.backend import get_backend
from terrain.errors import InputError, naming_items
from terrain.grid.cost_outputs import LAYERS, least_cost_paths
from terrain.grid.costs import arc_codes, arc_lengths, cost_model_code
from terrain.grid.sources import is_points_file, resolve_sources
from terrain.grid.sssp import incore_bytes
from terrain.io import available_memory
from terrain.io.georef import check_weight_units, finish_store, unplaced_geotransform
from terrain.io.outputs import check_outputs, output_beside, same_file
from terrain.io.remote import (as_path, check_local_outputs, command_paths, input_fingerprint,
                               is_remote, output_at, remove_tree, scratch_beside)
from terrain.io.points import cell_centre
from terrain.io.zarr_meta import open_group
from terrain.tiles import is_store
from terrain.tiles.store import link_layer, shard_windows

from . import _plan as _plans
from ._command import ROUTES as COMMAND_ROUTES
from ._command import CommandOutput, asked_route, open_input, print_summary
from ._resume import data_identity, drop_checkpoints, run_key
from .cost_distance_incore import (RUN_ATTRS, check_incore_reuse, reusable_kind,
                                   reuse_attributes, run_incore)
from .cost_distance_store import (cost_model_attributes, dem_in_output, geotiff_files,
                                  geotiff_paths, write_geotiffs)

__all__ = ["run_cost_distance", "cost_distance_command", "path_command", "trace_paths",
           "cost_distance_route", "default_output", "check_cost_options", "resolve_cost",
           "plan_cost_distance", "ROUTES"]

ROUTES = (*COMMAND_ROUTES, "blocked")


#: the output when none is named: ``dem.tif`` -> ``dem.cost.zarr``
default_output = functools.partial(output_beside, suffix=".cost.zarr")


def cost_distance_route(shape, has_friction=False, memory_bytes=None, route="auto",
                        backend="cpu"):
    """``"in-core"`` when the grid's working set (:func:`terrain.grid.sssp.incore_bytes`) is
    under half the memory (``memory_bytes``, else the free device or host memory), else
    ``"blocked"`` on the CPU and ``"tiled"`` on the GPU; another ``route`` as it is.

    >>> cost_distance_route((1000, 1000), memory_bytes=10**9), cost_distance_route(
    ...     (10**5, 10**5), memory_bytes=10**9)
    ('in-core', 'blocked')"""
    if asked_route(route, ROUTES) != "auto":
        return route
    be = get_backend(backend)
    need = incore_bytes(shape, has_friction)
    if memory_bytes is None:
        memory_bytes = be.select(available_memory, be.free_bytes)()
    if need <= memory_bytes // 2:
        return "in-core"
    return be.select("blocked", "tiled")


def resolve_cost(cost, friction):
    """The cost model: ``cost``, or where it is not given ``friction`` with a friction
    raster (a friction raster means friction) and ``absdiff`` without.

    >>> resolve_cost(None, "fr.tif"), resolve_cost(None, None), resolve_cost("tobler", "fr.tif")
    ('friction', 'absdiff', 'tobler')
    """
    if cost is None:
        return "friction" if friction is not None else "absdiff"
    return cost


def check_cost_options(cost, friction, connectivity, max_cost, start_cost=None):
    """The options a cost-distance run (or a batch of them, or a dry run) checks before it
    reads any data: :class:`InputError` for an unknown cost model or connectivity, ``friction``
    missing for the ``friction`` model, ``max_cost <= 0``, a negative or infinite
    ``start_cost`` (a number or one a source). Returns the arcs a cell (4, 8 or 16).

    >>> check_cost_options("absdiff", None, 8, None)
    8
    >>> check_cost_options("friction", None, 8, None)
    Traceback (most recent call last):
    terrain.errors.InputError: cost model 'friction' needs a friction raster
    """
    model = cost_model_code(resolve_cost(cost, friction))
    arcs = int(arc_codes(connectivity).size)
    if model == 1 and friction is None:
        raise InputError("cost model 'friction' needs a friction raster")
    if max_cost is not None and not float(max_cost) > 0:
        raise InputError(f"max cost {max_cost}: must be > 0")
    if start_cost is not None:
        costs = np.asarray(start_cost, np.float64)
        if not (np.all(np.isfinite(costs)) and np.all(costs >= 0)):
            raise InputError(f"start cost {start_cost}: must be finite and >= 0")
    return arcs


def _check_route_options(route, tile_sssp, max_height, inp):
    """Options of the tiled route given to another: refused, not ignored."""
    given = [name for name, v in (("an SSSP tile side", tile_sssp), ("a height cap", max_height))
             if v is not None]
    if given and route != "tiled":
        verb = "applies" if len(given) == 1 else "apply"
        raise InputError(f"{inp}: {' and '.join(given)} {verb} to the tiled algorithm only; "
                         f"this run is {route}")


def parse_memory(text):
    """Bytes from ``"1.5GB"``, ``"800MB"``, ``"2GiB"`` or a plain number (None: None).

    >>> parse_memory("1.5GB"), parse_memory("512MiB"), parse_memory(2000)
    (1500000000, 536870912, 2000)
    """
    if text is None:
        return None
    s = str(text).strip().upper().replace(" ", "")
    number = s.rstrip("KMGTIB")
    units = {"": 1, "B": 1, "K": 10 ** 3, "KB": 10 ** 3, "KIB": 1 << 10, "M": 10 ** 6,
             "MB": 10 ** 6, "MIB": 1 << 20, "G": 10 ** 9, "GB": 10 ** 9, "GIB": 1 << 30,
             "T": 10 ** 12, "TB": 10 ** 12, "TIB": 1 << 40}
    try:
        v = float(number) * units[s[len(number):]]
    except (ValueError, KeyError):
        v = -1.0
    if not (v > 0 and np.isfinite(v)):
        raise InputError(f"memory {text!r}: expected a size such as 1.5GB or 800MB")
    if not 1000 <= v <= (1 << 60):  # 0.5B held no cell; 1e20GB is no machine's
        raise InputError(f"memory {text!r}: a budget from 1 kB to 1 EiB")
    return int(v)


def _make_spec(inp, grid, cost, connectivity, backend, friction=None, max_cost=None,
               route="auto", tile_sssp=None, max_height=None, reuse=None, memory=None):
    """The run's spec for the header ``grid`` after every check that needs no data."""
    shape, gt = grid.shape, grid.geotransform
    try:  # before any algorithm reads data: each computes the arcs' lengths from it
        arc_lengths((gt[1], gt[5]))
    except InputError as e:
        raise InputError(f"{inp}: {e}") from None
    if friction is not None:
        _plans.check_same_grid(friction, shape, gt, "friction raster", grid.crs)
    reuse_kind = None if reuse is None else reusable_kind(reuse)
    if reuse_kind == "tiled" and route not in ("auto", "tiled"):  # asked: never switched
        raise InputError(f"{reuse}: holds a tiled run's index; this run is {route} (an "
                         "in-core run reuses an in-core run's store)")
    memory_bytes = parse_memory(memory)
    spec = {"shape": shape, "tile": grid.tile, "tiles_per_shard": grid.tiles_per_shard,
            "cost": cost, "connectivity": connectivity, "cellsize": (abs(gt[1]), abs(gt[5])),
            "max_cost": None if max_cost is None else float(max_cost),
            "route": cost_distance_route(shape, friction is not None, route=(
                "tiled" if reuse_kind == "tiled" else route), backend=backend,
                memory_bytes=memory_bytes),
            "input": str(inp), "friction_path": None if friction is None else str(friction)}
    _check_route_options(spec["route"], tile_sssp, max_height, inp)
    if memory_bytes is not None and route in ("in-core", "tiled"):  # nothing it bounds
        raise InputError(f"{inp}: a memory budget picks the algorithm or bounds the blocked "
                         f"one; this run is {route}")
    if spec["route"] == "blocked":
        from .cost_distance_blocked import blocked_spec
        blocked_spec(spec, available_memory() if memory_bytes is None else memory_bytes,
                     reuse, backend)
    if reuse_kind == "in-core":
        spec["reuse_incore"] = check_incore_reuse(reuse, spec, inp, friction, gt)
        spec.update(near_far_delta=spec["reuse_incore"]["near_far_delta"],
                    friction_checked=True, write_friction=False)
    if spec["route"] == "tiled":
        from .cost_distance_tiled import tiled_spec
        # what an index is of (a reuse is refused for other rasters): the fingerprints of
        # the inputs as given, a store at a URL with its options
        spec["fingerprints"] = [input_fingerprint(inp), None if friction is None
                                else input_fingerprint(friction)]
        tiled_spec(spec, tile_sssp, max_height, reuse, backend=backend)
    return spec


def run_cost_distance(input_path, output_path=None, *, points=(), cells=(), sources_file=None,
                      start_cost=None, start_values=False, cost=None, friction=None,
                      connectivity=8, max_cost=None, tile=512, backend=None, scheduler=None,
                      overwrite=False, geotiff_dir=None, route="auto", tile_sssp=None,
                      max_height=None, reuse=None, memory=None, stop_points=(), stop_cells=(),
                      stops_file=None, resume=False):
    """Cost distance from sources over a DEM (raster or tile store) into ``output_path``.

    ``cost`` None: ``friction`` with a friction raster, else ``absdiff``. ``start_values``:
    the raster ``sources_file``'s values are the start costs
    (:func:`terrain.grid.sources.resolve_sources`).
    ``stop_points``, ``stop_cells``, ``stops_file``: stop cells, given as the sources are
    (:func:`terrain.grid.sssp.grid_sssp`'s ``stops``; the in-core algorithm). ``memory`` (bytes
    or a size such as ``"1.5GB"``): the memory budget that chooses the algorithm and bounds
    the blocked algorithm's blocks, block cache and GeoTIFF writers (default: the available
    RAM). ``resume``: finish the partial output that a killed run with the same input,
    sources and options left: its ingested bands, and on the tiled algorithm on the CPU its
    index once whole (phases 1 and 2), are not computed again; the rest runs again (the
    summary's ``reused_tasks`` counts what was not). Returns the summary dict (also in
    the output's ``cost_distance`` attribute).

    Process-wide settings: the blocked algorithm serves allocations of 1 MiB and more from
    ``mmap`` for the rest of the process (glibc's ``mallopt``: its blocks come and go at
    every visit, and their memory goes back to the system), and a Dask cluster fixes
    glibc's malloc arenas (:mod:`terrain.startup`); a long-lived process that runs it keeps
    both (its own large temporary arrays then page-fault afresh each time).
    """
    t_start = time.perf_counter()
    be = get_backend(backend)
    cost = resolve_cost(cost, friction)
    connectivity = check_cost_options(cost, friction, connectivity, max_cost, start_cost)
    inp, out = command_paths(input_path, output_path, default_output)
    # the output may not be (or hold, or lie in) the DEM, the friction raster, the sources
    # file or the reused store: --overwrite would replace the input (at URLs: url_output)
    inputs = [inp, friction, sources_file, stops_file, reuse]
    # (a resumed run may find the store published and its GeoTIFFs not: checked later)
    check_local_outputs(inputs, [out, *geotiff_paths(geotiff_dir)], overwrite or resume)
    grid = open_input(inp, tile)
    check_weight_units(cost, grid.crs, inp, kind="cost", units=grid.units)
    gt, geo = grid.geotransform, {**grid.geo(), "cost": cost}
    srcs, costs, origins = resolve_sources(gt, grid.shape, points, cells, sources_file,
                                           label=f"{inp}: ", crs=grid.crs,
                                           start_cost=start_cost, start_values=start_values)
    spec = _make_spec(inp, grid, cost, connectivity, be.name, friction, max_cost, route,
                      tile_sssp, max_height, reuse, memory)
    stops, stop_origins = _stop_cells(spec, gt, stop_points, stop_cells, stops_file,
                                      f"{inp}: ", grid.crs)
    if spec.get("reuse_incore") and (is_remote(out) or is_remote(reuse)):
        raise InputError(f"{reuse}: an in-core run's store is reused by linking its layers "
                         "into the output: both must be local")
    friction_tmp = None
    key = run_key("cost-distance", [p for p in inputs if p is not None and not is_remote(p)],
                  str(inp), data_identity(inp), cost, connectivity, max_cost, tile, tile_sssp,
                  max_height, spec["route"], be.name, _digest(srcs, costs, stops))
    output = CommandOutput(out, key, "cost_distance", geotiffs=geotiff_files(geotiff_dir),
                           write_geotiffs=lambda store: write_geotiffs(
                               store, geotiff_dir, memory=spec.get("memory_bytes")),
                           overwrite=overwrite, resume=resume)
    if done := output.finished():
        return done
    try:
        with output.partial(inputs) as (tmp, kept):
            # a friction raster's store: scratch, removed before the output is finished (at
            # a URL it lies under the output's prefix: consolidated and published otherwise;
            # a killed run's is ingested again)
            friction_tmp = scratch_beside(tmp, ".friction")
            remove_tree(friction_tmp)
            if kept and spec["route"] == "tiled" and spec.get("reuse") is None:
                from .cost_distance_tiled import resume_index
                resume_index(spec, tmp, tile_sssp, max_height, be.name)
            # a source or stop on nodata, refused by whichever algorithm runs: named by its
            # place in its points file too
            with naming_items("source", origins), naming_items("stop", stop_origins):
                summary = _run(inp, tmp, friction_tmp, friction, spec, srcs, costs, be.name,
                               geo, scheduler, resumed=bool(kept))
            remove_tree(friction_tmp)
            summary["reused_tasks"] = (summary.get("reused_tasks", 0)
                                       + drop_checkpoints(tmp, kept))
            summary["resumed"] = bool(kept)
            summary["sources"] = [
                {"index": i, "row": r, "col": c, **dict(zip("xy", cell_centre(r, c, gt))),
                 "start_cost": 0.0 if costs is None else float(costs[i])}
                for i, (r, c) in enumerate(srcs)]
            if stops:
                summary["stops"] = [{"row": r, "col": c,
                                     **dict(zip("xy", cell_centre(r, c, gt)))}
                                    for r, c in stops]
            summary["output"] = str(out)
            dem = "elevation" if dem_in_output(tmp) else geo["source"]
            attrs = {"cost_distance": summary,
                     "cost_model": cost_model_attributes(spec, srcs, costs, friction is not None,
                                                         dem)}
            if "stop_distance" in summary:  # what verify checks: a run to that max cost
                attrs["cost_model"]["max_cost"] = summary["stop_distance"]
            if spec["route"] == "in-core":
                attrs["cost_reuse"] = reuse_attributes(spec, inp, friction, gt, dem,
                                                       summary.get("near_far_delta"))
                if spec.get("reuse_incore"):
                    summary["reuse"] = str(reuse)
                    summary["reused"] = spec["reuse_incore"]["reused"]
            if output.geotiffs:  # from the partial, published after it (a failure: neither)
                t0 = time.perf_counter()
                output.write_geotiffs(tmp, summary)
                summary["geotiff_seconds"] = round(time.perf_counter() - t0, 6)
            summary["seconds"] = round(time.perf_counter() - t_start, 6)
            open_group(tmp, mode="r+").attrs.update(attrs)
            finish_store(tmp)
    finally:
        if friction_tmp is not None:
            remove_tree(friction_tmp)
    return summary


def _check_stops(spec, given, label):
    """Only the in-core solve has one queue to stop: stops ``given`` to another algorithm are
    refused (before any data is read: a dry run checks this alone)."""
    if given and spec["route"] != "in-core":
        raise InputError(f"{label}stop cells need the in-core algorithm, and this grid takes "
                         f"the {spec['route']} one (a max cost bounds it instead)")


def _stop_cells(spec, gt, points, cells, path, label, crs):
    """``(cells, origins)`` of the stops (:func:`terrain.grid.sources.resolve_sources`), the
    cells put in ``spec``; ``([], [])`` without any."""
    _check_stops(spec, points or cells or path, label)
    if not (points or cells or path):
        return [], []
    spec["stops"], _, origins = resolve_sources(gt, spec["shape"], points, cells, path,
                                                label=label, crs=crs, what="stop")
    return spec["stops"], origins


def _digest(srcs, costs, stops):
    """A hash of the sources, their start costs and the stop cells (a run's key)."""
    import hashlib
    h = hashlib.sha256(np.asarray(srcs, np.int64).tobytes())
    h.update(b"-" if costs is None else np.asarray(costs, np.float64).tobytes())
    h.update(np.asarray(stops or [], np.int64).tobytes())
    return h.hexdigest()


def _run(inp, tmp, friction_tmp, friction, spec, srcs, costs, backend, geo, scheduler,
         resumed=False):
    """The ingests (or the reused store's links), then the chosen algorithm's pipeline; returns
    its summary (``resumed``: ``tmp`` holds a killed run's checkpoints). A cluster given by
    address is opened here, before any graph is built, and every path made absolute (a
    worker resolves a relative one in its own folder). An output at a URL: the workers open
    the stores at their URLs, and this process reads the rasters (DEM, friction) that are
    ingested (:func:`pipelines.ingest.build_ingest_graph`)."""
    from . import cluster
    if scheduler is not None and scheduler not in cluster.LOCAL_SCHEDULERS + (
            cluster.LOCAL_CLUSTER,):
        seen = [p for p in (inp, friction)  # what the workers read at a path themselves
                if p is not None and (not is_remote(tmp) or is_store(p))]
        with cluster.open_scheduler(scheduler, cells=math.prod(spec["shape"]), inputs=seen):
            inp, tmp, friction_tmp = (as_path(cluster.remote_input(p))
                                      for p in (inp, tmp, friction_tmp))
            if friction is not None:
                friction = cluster.remote_input(friction)
            # the routes find the cluster active (scheduler None: the active one)
            return _run(inp, tmp, friction_tmp, friction, spec, srcs, costs, backend, geo, None,
                        resumed)
    # (raster, store, infinite values kept) to ingest before the solve: a friction's +inf is
    # a wall; the DEM's only where it is its friction's values too (elevations are finite)
    ingests, tile = [], spec["tile"]
    dem_walls = spec["cost"] == "friction"
    ru = spec.get("reuse_incore")
    if ru is not None:  # the earlier run's checked inputs, linked into this output
        group = open_group(tmp, mode="w-")
        dem_path = inp
        if ru["dem_in_store"]:
            link_layer(ru["store"], tmp, "elevation")
            group.attrs.update({k: v for k, v in ru["store_attrs"].items()
                                if k not in RUN_ATTRS})
            dem_path = tmp
        if ru["friction"]:
            link_layer(ru["store"], tmp, "friction")
        friction_store = (tmp, "friction") if ru["friction"] else None
    else:
        if is_store(inp):
            open_group(tmp, mode="a" if resumed else "w-")
            dem_path = inp
        else:
            ingests.append((inp, tmp, dem_walls))
            dem_path = tmp
        friction_store = None
        if friction is not None:
            if is_store(friction):
                friction_store = as_path(friction)
            elif (spec["route"] in ("in-core", "blocked") and not is_remote(inp)
                  and same_file(friction, inp)):
                # the input is its own friction (a friction surface): one read and ingest,
                # one array for both (in core at 4096²: 0.5 CPU s and 67 MB less; blocked:
                # one ingest, each block read once)
                friction_store = (dem_path, "elevation")
            else:
                friction_store = friction_tmp
                ingests.append((friction, friction_store, True))
    if spec["route"] != "in-core":
        from .ingest import build_ingest_graph
        # the DEM's bands keep their results in the partial (a friction raster's scratch
        # store is ingested again by a resumed run)
        upstream = [build_ingest_graph(src, dst, tile, partial=tmp if dst == tmp else None,
                                       finite=not walls)
                    for src, dst, walls in ingests]
    if spec["route"] == "blocked":
        from .cost_distance_blocked import run_blocked
        return run_blocked(dem_path, tmp, spec, srcs, costs, friction_store, upstream, geo,
                           scheduler)
    if spec["route"] == "tiled":
        from .cost_distance_tiled import build_cost_distance_tiled
        graph = build_cost_distance_tiled(dem_path, tmp, spec, srcs, costs, backend, upstream,
                                          geo, friction_store)
        with cluster.open_scheduler(scheduler, cells=math.prod(spec["shape"])):
            (summary,) = cluster.compute(graph, label="cost-distance")
        return summary
    windows = shard_windows(spec["shape"], tile * spec["tiles_per_shard"])
    return run_incore(dem_path, tmp, spec, srcs, costs, windows, backend, ingests, geo,
                      friction_store, scheduler)


def _format_summary(s):
    md = s["max_distance"]
    return "\n".join([
        f"cost-distance {s['output']}",
        f"grid      {s['rows']} x {s['cols']}, {s['connectivity']}-connected, cost {s['cost']}"
        + (f", max cost {s['max_cost']:g}" if s.get("max_cost") else ""),
        f"sources   {len(s['sources'])}"
        + (f", {len(s['stops'])} stop cells" if s.get("stops") else "")
        + (f" (all reached at {s['stop_distance']:.10g})" if "stop_distance" in s else ""),
        f"reached   {s['reached_cells']} cells, max distance "
        + ("-" if md is None else f"{md:.10g}"),
        f"route     {s['route']} ({s.get('queue')}), backend {s['backend']} ({s['device']})",
        f"time      {s['seconds']:.2f} s (solve {s['solve_seconds']:.2f} s, read "
        f"{s['read_seconds']:.2f} s, write {s['write_seconds']:.2f} s"
        + (f", GeoTIFFs {s['geotiff_seconds']:.2f} s" if s.get("geotiff_seconds") else "")
        + ")",
    ] + (["phases    " + ", ".join(f"{k} {v:.2f} s" for k, v in s["phases"].items())]
         if s.get("phases") else [])
      + ([f"blocks    {s['blocks']} of {s['block']}², solved "
          f"{s['stage_stats']['stage1']['visits']} times for the distances, "
          f"{s['stage_stats']['stage2']['visits']} for the labels"]
         if s.get("stage_stats") else [])
      + ([f"resumed   {s['reused_tasks']} tasks reused from the interrupted run"
          + (" (its index)" if s.get("resumed_index") else "")] if s.get("resumed") else [])
      + ([f"geotiff   {', '.join(s['geotiff'])}"] if s.get("geotiff") else []))


def cost_distance_command(args):
    """``terrain cost-distance INPUT --source X,Y ... [-o OUT.zarr] ...``."""
    if getattr(args, "dry_run", False):  # the plan (pipelines/_plan.py), nothing written
        from ._plan import dry_run_command
        return dry_run_command("cost-distance", args)
    summary = run_cost_distance(
        args.input, args.output, points=args.source or (), cells=args.source_cell or (),
        sources_file=args.sources, start_cost=args.start_cost,
        start_values=args.start_values, cost=args.cost,
        friction=args.friction, connectivity=args.connectivity, max_cost=args.max_cost,
        tile=args.tile, backend=args.backend, scheduler=args.scheduler,
        overwrite=args.overwrite, geotiff_dir=args.geotiff_dir,
        route=args.route, tile_sssp=getattr(args, "tile_sssp", None),
        max_height=getattr(args, "max_height", None), reuse=getattr(args, "reuse", None),
        memory=getattr(args, "memory", None), stop_points=args.stop or (),
        stop_cells=args.stop_cell or (), stops_file=args.stops, resume=args.resume)
    print_summary(summary, args.input, args.json, _format_summary)
    return 0


#: stored bytes a cell of each layer (Blosc LZ4 on synthetic terrain, 2048², one and 50
#: sources: distance 2.5-2.8 with absdiff, 6.0 with tobler; backlink 0.27-0.42; allocation
#: 0.02-0.06; friction taken at its raw 4 bytes)
LAYER_STORED_BYTES = {"distance": 6.5, "backlink": 0.5, "allocation": 0.1, "friction": 4.0}
RESULT_LAYERS = ("distance", "backlink", "allocation")
INDEX_STORED_FRACTION = 0.3         # zstd on the tiled index's arrays
TILED_MATRIX_BYTES_PER_CELL = 192   # a level's boundary matrices, a cell (cost-distance-tiled.md)
TILED_FILL_BYTES_PER_CELL = 115     # a group's phase 3
TILED_TOP_BYTES_PER_VERTEX = 250    # the top Dijkstra, a top boundary cell


def _layers_bytes(cells, names):
    return sum(cells * LAYER_STORED_BYTES[n] for n in names)


def _result_raw_bytes():
    """Bytes a cell of the three result layers in memory (their dtypes: 13)."""
    return sum(np.dtype(LAYERS[n][0]).itemsize for n in RESULT_LAYERS)


def _tiled_plan(spec, backend, threads):
    """The tiled algorithm's geometry, memory and index bytes (docs/cost-distance-tiled.md)."""
    from terrain.grid.sssp_tiled_store import IndexStore, store_ops

    from .cost_distance_tiled import solve_spec
    tspec = solve_spec(spec)
    group = int(spec["group_side"])
    from terrain.tiles import QuadtreePlan
    g = QuadtreePlan.build(tspec.shape, tspec.tile, max(1, group // tspec.tile)).group_level
    index = IndexStore("", tspec, g)  # its geometry only: nothing is opened
    height = tspec.height
    index_raw = labels_raw = 0
    for k in range(height + 1):
        nr, nc = index.shape(k)
        b = index.bpad(k)
        index_raw += nr * nc * (12 * b * b + (8 + 4 + 4) * b + 4)
        labels_raw += nr * nc * 16 * b
    nr, nc = index.shape(height)
    top_cells = nr * nc * index.bpad(height)
    cache = store_ops(backend).top_cache_bytes()
    rows, cols = tspec.shape

    def block(side):  # cells of a block of ``side`` a side, clipped to the grid
        return min(side, rows) * min(side, cols)
    group_task = 2 * TILED_MATRIX_BYTES_PER_CELL * (min(height, g) + 1) * block(group)
    merge_task = (2 * TILED_MATRIX_BYTES_PER_CELL * block(tspec.tile << height)
                  if height > g else 0)
    fill_task = (_result_raw_bytes() * block(int(spec["shard_side"]))
                 + TILED_FILL_BYTES_PER_CELL * block(group))
    per_task = max(group_task, merge_task, fill_task)
    top = TILED_TOP_BYTES_PER_VERTEX * top_cells + cache
    return {"tile_sssp": tspec.tile, "group_side": group, "height": height,
            "sssp_levels": tspec.levels,
            "groups": (-(-tspec.shape[0] // group)) * (-(-tspec.shape[1] // group)),
            "top_boundary_cells": int(top_cells), "memory_per_task_bytes": per_task,
            "memory_per_worker_bytes": max(per_task * threads, top),
            "index_raw_bytes": int(index_raw),
            "index_bytes": int(index_raw * INDEX_STORED_FRACTION) if spec["reuse"] is None else 0,
            "labels_bytes": int(labels_raw)}


def plan_cost_distance(plan, grid, args, inp, out):
    """What a cost-distance run would do (``--dry-run``): its algorithm, sources, backend,
    memory a task and a worker, and the bytes it writes; only headers and points are read."""
    friction, reuse = args.friction, getattr(args, "reuse", None)
    cost = resolve_cost(args.cost, friction)
    connectivity = check_cost_options(cost, friction, args.connectivity, args.max_cost,
                                      args.start_cost)
    be = get_backend(args.backend)
    shape, gt, cells = grid.shape, grid.geotransform, plan["cells"]
    sources_file = args.sources
    if sources_file is not None and not Path(sources_file).exists():
        raise InputError(f"{sources_file}: no such file")
    points_file = sources_file is not None and is_points_file(sources_file)
    sources = None  # a raster of sources is counted when the run reads it
    if args.source or args.source_cell or points_file or sources_file is None:
        sources = len(resolve_sources(gt, shape, args.source or (), args.source_cell or (),
                                      sources_file if points_file else None,
                                      label=f"{inp}: ", crs=grid.crs)[0])
    spec = _make_spec(inp, grid, cost, connectivity, be.name, friction, args.max_cost,
                      args.route, getattr(args, "tile_sssp", None),
                      getattr(args, "max_height", None), reuse, getattr(args, "memory", None))
    _check_stops(spec, args.stop or args.stop_cell or args.stops, f"{inp}: ")
    threads = plan["threads_per_worker"]
    ingested = [] if grid.from_store else ["elevation"]
    linked = []
    ru = spec.get("reuse_incore")
    if ru is not None:  # the earlier run's ingested DEM and friction: hard links
        linked = ["elevation"] * ru["dem_in_store"] + ["friction"] * ru["friction"]
        ingested = []
    part = {"route": spec["route"], "sources": sources, "cost": cost,
            "backend": be.name}
    layers = list(RESULT_LAYERS)
    if friction is not None and "friction" not in linked:
        layers.append("friction")
    # a friction raster (not a store) is ingested into a hidden store beside the output
    friction_ingest = friction is not None and "friction" not in linked and not is_store(friction)
    per_task = _plans.band_task_bytes(grid) if ingested or friction_ingest else 0
    worker = per_task * threads
    ingest_bytes = _plans.ingest_bytes(grid)
    out_bytes = _layers_bytes(cells, layers) + ingest_bytes * len(ingested)
    extra = ingest_bytes if friction_ingest else 0
    if spec["route"] == "tiled":
        tiled = _tiled_plan(spec, be.name, threads)
        per_task = max(per_task, tiled.pop("memory_per_task_bytes"))
        worker = max(worker, tiled.pop("memory_per_worker_bytes"))
        out_bytes += tiled["index_bytes"]
        extra += tiled["labels_bytes"]
        part.update(tiled)
    elif spec["route"] == "blocked":
        from .cost_distance_blocked import block_cache_bytes, block_task_bytes, cache_bytes
        side = spec["block"]
        blocks = (-(-shape[0] // side)) * (-(-shape[1] // side))
        # the driver's bands: 4 rows a block row, 4 columns a block column, 24 bytes a cell
        bands = 24 * 4 * ((-(-shape[0] // side)) * shape[1] + (-(-shape[1] // side)) * shape[0])
        per_task = max(per_task, block_task_bytes(side))
        # no more tasks at once than blocks, no more cached than every block (a budget of
        # the free memory is an upper bound, not what a small grid fills)
        worker = max(worker, bands + min(threads, blocks) * block_task_bytes(side)
                     + min(cache_bytes(side, spec["memory_bytes"], threads, bands),
                           blocks * block_cache_bytes(side)))
        extra += 16 * cells  # the blocks' distances and labels in the scratch directory
        part.update({"block": side, "blocks": blocks})
    else:
        side = grid.shard_side
        solve = incore_bytes(shape, friction is not None)
        per_task = max(per_task, solve)
        window = min(side, shape[0]) * min(side, shape[1])  # a write task's shard window
        worker = max(worker, solve + threads * _result_raw_bytes() * window)
    part.update({"memory_per_task_bytes": per_task, "memory_per_worker_bytes": worker,
                 "output_bytes": out_bytes, "partial_extra_bytes": extra,
                 "layers": ingested + linked + layers,
                 # --geotiff-dir: the result layers again, as GeoTIFFs
                 "other_outputs_bytes": _layers_bytes(cells, RESULT_LAYERS)
                 if getattr(args, "geotiff_dir", None) else 0})
    return part


def _plan_paths(args):
    """(inputs besides INPUT, outputs besides OUT) of a cost-distance run."""
    tifs = geotiff_paths(getattr(args, "geotiff_dir", None))
    return [args.friction, args.sources, getattr(args, "reuse", None)], tifs


_plans.register("cost-distance", plan_cost_distance, lambda inp, args: default_output(inp),
                _plan_paths)


def trace_paths(store_path, cells):
    """Least-cost paths from ``cells`` back to their sources along the backlinks of the
    cost-distance store ``store_path`` (:func:`terrain.grid.cost_outputs.least_cost_paths`,
    which reads only the tiles the walk passes through)."""
    group = open_group(store_path, mode="r")
    for name in LAYERS:
        if name not in group:
            raise InputError(f"{store_path}: not a cost-distance store (no {name!r} layer)")
    return least_cost_paths(group["backlink"], group["distance"], group["allocation"], cells,
                            where=str(store_path))


def path_command(args):
    """``terrain path COSTSTORE --to X,Y [--to-cell ROW,COL ...] [--targets FILE]
    -o PATH.geojson|.gpkg|.fgb``:
    the least-cost paths as LineStrings: GeoJSON (RFC 7946: longitude/latitude, WGS 84;
    refused for a store without a CRS), or GeoPackage or FlatGeobuf in the store's CRS."""
    from terrain.io.points import path_format, write_paths
    store = Path(args.store)
    if not is_store(store):
        raise InputError(f"{store}: " + ("not a cost-distance store" if store.exists()
                                          else "no such file"))
    out = Path(args.output)
    targets_file = getattr(args, "targets", None)
    if targets_file is not None and not Path(targets_file).exists():
        raise InputError(f"{targets_file}: no such file")
    inputs = [store] + ([targets_file] if targets_file is not None else [])
    check_outputs(inputs, [out], args.overwrite)
    with output_at(out, args.overwrite, inputs=inputs) as tmp:  # it reads them
        group = open_group(store, mode="r")
        if "backlink" not in group:
            raise InputError(f"{store}: not a cost-distance store (no 'backlink' layer)")
        crs = group.attrs.get("crs")
        fmt = path_format(out, crs)  # refused before any work
        shape = group["backlink"].shape
        gt = group.attrs.get("geotransform") or unplaced_geotransform(shape[0])
        points, cells = args.to or [], args.to_cell or []
        if not points and not cells and targets_file is None:
            raise InputError(f"{store}: no path ends given")
        targets, _, origins = resolve_sources(gt, shape, points, cells, targets_file,
                                              label=f"{store}: ", crs=crs, what="target")
        with naming_items("target", origins):
            paths = trace_paths(store, targets)
        lines = [[cell_centre(r, c, gt) for r, c in p["cells"]] for p in paths]
        ends = [*points, *(f"cell {c}" for c in cells),
                *(f"{Path(targets_file).name} {n}"
                  for n in range(1, len(targets) - len(points) - len(cells) + 1))]
        props = [{"cost": p["cost"], "source": p["source"], "to": text, "cells": len(p["cells"])}
                 for text, p in zip(ends, paths)]
        write_paths(tmp, lines, props, crs=crs, fmt=fmt, what=str(store), name=out)
    print(f"path      {out}: {len(paths)} path(s)"
          + ("" if crs else "; coordinates: the grid's (the store has no CRS)")
          + "".join(f"\n  to {p['to']}: cost {p['cost']:.10g}, source {p['source']}, "
                    f"{p['cells']} cells" for p in props))
    return 0
