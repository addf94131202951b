"""``--dry-run``: what an ``ingest``, ``mst`` or ``cost-distance`` run would do, and whether
the disk can hold it.

One planner for every command: :func:`build_plan` checks the paths (as the run does, before
any work), reads the input's header only (nothing else is read), lays out the tile store
(:func:`terrain.tiles.store.tiles_per_shard`, the quadtree levels), then asks the command's
part (:data:`PLANNERS`) for what differs: tasks, backend, the bytes a task and a worker hold,
and the bytes written to the output and to the partial output. :func:`build_plan` adds the
free space of the output's file system; :func:`dry_run_command` prints the plan and refuses
the run (exit 2) when the output's file system has less free space than the estimate.

For ``ingest`` and ``mst`` the Dask graph itself is built, not run (building writes
nothing), so their task count is the real one. ``mst``'s path (text in core, text streamed,
in core, super-tiles, tiles; with ``--gpus N``, on GPU 0 of N or spread) is the run's own
decision, :func:`pipelines.mst.mst_route`, asked the same questions (the text paths build no
task graph: 0 tasks). A command module registers its own part (:func:`register`;
``cost-distance``: :func:`pipelines.cost_distance.plan_cost_distance`).

Sizes are estimates from measured ratios, stated as such (:data:`STORED_BYTES_PER_CELL`;
synthetic fractal terrain, ``synth``, 2-core VM):

* ``elevation`` (and any raster ingested on the way, such as a friction raster):
  Blosc LZ4 keeps about 0.64 of float32 on terrain (2.6 bytes a cell; synthetic 3000²,
  2048²: 2.5; docs/benchmarks.md has 0.57 on real grids);
* ``mst`` forest mask: Blosc LZ4 after a bit shuffle keeps about 0.46 bytes a cell of the
  uint8 mask on synthetic relief (0.5 is used; zstd, the codec before, kept 0.22-0.35);
* memory per task: an ingest band task holds its band as float32 plus one text block; an
  MST group task holds its shard's elevations, mask and Borůvka's edge arrays (about 16
  bytes an edge, ``connectivity / 2`` edges a cell);
* partials: the partial output *is* the output before its rename, plus checkpoints
  (small: band statistics, and the level graphs, O(perimeter) per shard).

Examples
--------
>>> plan = build_plan("ingest", _Args(input="data/sample.asc", output="s.zarr"))
>>> plan["output"], plan["output_bytes"] > 0
('s.zarr', True)
"""

import json
import os
import shutil
from pathlib import Path

from terrain.io.outputs import partial_path
from terrain.io.outputs import check_outputs, real_path
from terrain.errors import InputError

__all__ = ["build_plan", "dry_run_command", "format_bytes", "register", "PLANNERS",
           "STORED_BYTES_PER_CELL"]

#: stored bytes a cell of each layer (module docstring: measured ratios)
STORED_BYTES_PER_CELL = {"elevation": 2.6, "mst": 0.5}
ELEVATION_BYTES_PER_CELL = STORED_BYTES_PER_CELL["elevation"]
MASK_BYTES_PER_CELL = STORED_BYTES_PER_CELL["mst"]
EDGE_BYTES = 16
TEXT_BLOCK_BYTES = 8 << 20


class _Args:
    """The options of a command line with their defaults, for calling :func:`build_plan`
    from Python (the doctests): ``_Args(input=..., source_cell=[...])``."""

    def __init__(self, **given):
        defaults = dict(output=None, overwrite=False, tile=512, connectivity=8,
                        weight="max", backend="cpu", geotiff=None, source=None,
                        source_cell=None, sources=None, start_cost=None, cost=None,
                        friction=None, max_cost=None, algorithm="auto", tile_sssp=None,
                        max_height=None, reuse=None, gpus=None, geotiff_dir=None)
        self.__dict__.update(defaults, **given)


def format_bytes(n):
    """``1536`` -> ``'1.5 KiB'``.

    >>> format_bytes(3 * 2**30)
    '3.0 GiB'
    """
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _task_count(delayed):
    from ._resume import graph_dict
    return len(graph_dict(delayed))


def _open_header(inp, tile, stores):
    """The input's grid from its header only: a dict with ``shape``, ``tile``,
    ``tiles_per_shard``, ``cellsize``, ``geotransform`` and ``from_store`` (a tile store keeps
    its own tile and shards; ``stores`` False: always read as a raster)."""
    from terrain.tiles import is_store, open_store
    from terrain.tiles.store import check_tile_size, tiles_per_shard
    if stores and is_store(inp):
        store = open_store(inp)
        return {"shape": tuple(int(s) for s in store.shape), "tile": int(store.tile),
                "tiles_per_shard": int(store.tiles_per_shard), "cellsize": store.cellsize,
                "geotransform": list(store.geotransform), "from_store": True}
    from terrain.io import open_grid
    tile = check_tile_size(tile)
    grid = open_grid(inp)
    shape = tuple(int(s) for s in grid.shape)
    return {"shape": shape, "tile": int(tile), "tiles_per_shard": tiles_per_shard(tile, shape),
            "cellsize": grid.cellsize, "geotransform": list(grid.geotransform),
            "from_store": False}


def _band_task_bytes(grid):
    """An ingest band task: a band of shard rows as float32 plus one block of text."""
    rows, cols = grid["shape"]
    return min(grid["tile"] * grid["tiles_per_shard"], rows) * cols * 4 + TEXT_BLOCK_BYTES


def _ingest_bytes(grid):
    """Stored bytes of an ingested raster (``elevation``) of ``grid``'s shape."""
    rows, cols = grid["shape"]
    return rows * cols * ELEVATION_BYTES_PER_CELL


# ----------------------------------------------------------------------------- per command
# planner(plan, grid, args, inp, out) -> dict: tasks, backend, memory_per_task_bytes,
# memory_per_worker_bytes, output_bytes, partial_extra_bytes (the plan's own keys are
# read, not changed: rows, cols, cells, shards, threads_per_worker)

def _plan_ingest(plan, grid, args, inp, out):
    from ._resume import run_key
    from .ingest import build_ingest_graph
    key = run_key("ingest", [inp], grid["tile"], None)
    from .ingest import bands_at_once
    per_task = _band_task_bytes(grid)
    return {"tasks": _task_count(build_ingest_graph(inp, partial_path(out, key), grid["tile"])),
            "backend": "cpu (text parser / GDAL)", "memory_per_task_bytes": per_task,
            # the band tasks in flight are bounded by a host budget, not the threads
            "memory_per_worker_bytes": per_task * bands_at_once(per_task,
                                                                plan["threads_per_worker"]),
            "output_bytes": _ingest_bytes(grid), "partial_extra_bytes": plan["shards"] * 64}


def _plan_mst(plan, grid, args, inp, out):
    from terrain.backend import get_backend
    from terrain.grid.mst import MSTSpec

    from ._resume import run_key
    from .mst import build_mst_graph
    shape, tile, shard = grid["shape"], grid["tile"], grid["tiles_per_shard"]
    spec = MSTSpec(shape, tile, int(args.connectivity), args.weight,
                   tuple(float(c) for c in grid["cellsize"]))
    partial = partial_path(out, run_key("mst", [inp], spec))
    upstream = None
    if not grid["from_store"]:
        from .ingest import build_ingest_graph
        upstream = build_ingest_graph(inp, partial, tile)
    graph = build_mst_graph(inp if grid["from_store"] else partial, partial, spec, shard, "cpu",
                            upstream)
    side = min(tile * shard, max(shape))
    edges = args.connectivity // 2
    per_task = max(0 if grid["from_store"] else _band_task_bytes(grid),
                   side * side * (4 + 1 + edges * EDGE_BYTES))
    out_bytes = (0 if grid["from_store"] else _ingest_bytes(grid)) + plan["cells"] * MASK_BYTES_PER_CELL
    extra = plan["shards"] * 64 + plan["shards"] * 4 * side * EDGE_BYTES * 2
    from .cluster import gpu_count, gpu_count_backend
    from .mst import mst_route
    gpus = getattr(args, "gpus", None)
    scheduler = getattr(args, "scheduler", None)
    be = get_backend(gpu_count_backend(gpus, args.backend, inp, scheduler))
    # the run's own decision (pipelines.mst.mst_route), asked the same questions
    route = mst_route(inp, spec, be, scheduler, "auto", gpu_count(gpus),
                      getattr(args, "resume", False))
    where = ""
    if route.gpus:
        where = (f", {route.gpus} GPU workers" if route.workers
                 else f", GPU 0 of {route.gpus}")
    return {"tasks": _task_count(graph) if route.graph else 0,
            "path": route.path, "route": route.describe(), "gpus_used": route.gpus_used,
            **({"note": route.note} if route.note else {}),
            "backend": be.name + where,
            "memory_per_task_bytes": per_task,
            "memory_per_worker_bytes": per_task * plan["threads_per_worker"],
            "output_bytes": out_bytes, "partial_extra_bytes": extra,
            "other_outputs_bytes": plan["cells"] * MASK_BYTES_PER_CELL
            if getattr(args, "geotiff", None) else 0}


def _mst_output(inp, args):
    from .mst import default_output
    return default_output(inp)


#: command -> (planner, default output(input, args) or None, other paths(args))
PLANNERS = {
    "ingest": (_plan_ingest, None, lambda args: ([], [])),
    "mst": (_plan_mst, _mst_output, lambda args: ([], [getattr(args, "geotiff", None)])),
}


def register(command, planner, default_output=None, paths=None):
    """Make ``command``'s ``--dry-run`` plan with ``planner(plan, grid, args, inp, out)``;
    ``default_output(inp, args)``: the output when none is given; ``paths(args)``:
    ``(inputs besides INPUT, outputs besides OUT)``."""
    PLANNERS[command] = (planner, default_output, paths or (lambda args: ([], [])))


def build_plan(command, args):
    """The plan of ``command`` (registered in :data:`PLANNERS`) for parsed ``args``, as a
    dict."""
    from terrain.tiles.store import quadtree_levels
    planner, default_output, paths = PLANNERS[command]
    inp = Path(args.input)
    out = Path(args.output) if args.output else default_output(inp, args)
    more_inputs, more_outputs = paths(args)
    check_outputs([inp, *more_inputs], [out, *more_outputs], args.overwrite)
    grid = _open_header(inp, args.tile, stores=command != "ingest")
    rows, cols = grid["shape"]
    tile, shard = grid["tile"], grid["tiles_per_shard"]
    tiles = (-(-rows // tile), -(-cols // tile))
    plan = {"command": command, "input": str(inp), "output": str(out), "rows": rows,
            "cols": cols, "cells": rows * cols, "tile": tile, "tiles": list(tiles),
            "tiles_per_shard": shard, "levels": quadtree_levels(*tiles),
            "shards": (-(-rows // (tile * shard))) * (-(-cols // (tile * shard))),
            "threads_per_worker": os.cpu_count() or 1}
    plan.update({"other_outputs_bytes": 0}, **planner(plan, grid, args, inp, out))
    plan["output_bytes"] += (rows + cols) * 8  # the store's x and y coordinates
    for key in ("memory_per_task_bytes", "memory_per_worker_bytes", "output_bytes",
                "partial_extra_bytes", "other_outputs_bytes"):
        plan[key] = int(plan[key])
    parent = real_path(out).parent
    plan.update({"disk_needed_bytes": plan["output_bytes"] + plan["partial_extra_bytes"]
                 + plan["other_outputs_bytes"],
                 "disk_free_bytes": int(shutil.disk_usage(parent).free),
                 "filesystem": str(parent)})
    return plan


def _format(p):
    b = format_bytes
    lines = [
        f"plan      {p['command']} {p['input']} -> {p['output']} (dry run: nothing written)",
        f"grid      {p['rows']} x {p['cols']} ({p['cells']} cells)",
        f"tiles     {p['tile']} a side, {p['tiles'][0]} x {p['tiles'][1]}; "
        f"{p['tiles_per_shard']} x {p['tiles_per_shard']} per shard, {p['shards']} shards; "
        f"{p['levels']} levels",
    ]
    if "path" in p:
        lines.append(f"path      {p['route']}")
    if "tasks" in p:
        lines.append(f"tasks     {p['tasks']} (backend {p['backend']})" if p["tasks"] or
                     "path" not in p else f"tasks     none: no task graph (backend {p['backend']})")
    if "algorithm" in p:
        solve = f"solve     {p['algorithm']}, backend {p['backend']}"
        if p["algorithm"] == "blocked":
            solve += f": {p['blocks']} blocks of {p['block']}², distances then labels"
        if p["algorithm"] == "tiled":
            solve += (f": {p['groups']} groups of {p['group_side']}², SSSP tiles of "
                      f"{p['tile_sssp']}, matrices up to level {p['height']} of "
                      f"{p['sssp_levels']}, {p['top_boundary_cells']} top boundary cells")
        lines.append(solve)
        lines.append("sources   " + ("read from the raster when the run starts"
                                     if p["sources"] is None else str(p["sources"])))
        lines.append("layers    " + ", ".join(p["layers"]))
    lines += [
        f"memory    about {b(p['memory_per_task_bytes'])} a task, "
        f"{b(p['memory_per_worker_bytes'])} a worker of {p['threads_per_worker']} threads",
        f"disk      about {b(p['output_bytes'])} output + {b(p['partial_extra_bytes'])} "
        + ("scratch" if "algorithm" in p else "checkpoints") + " in the partial"
        + (f" + {b(p['other_outputs_bytes'])} GeoTIFF" if p["other_outputs_bytes"] else "")
        + f"; {b(p['disk_free_bytes'])} free in {p['filesystem']}",
    ]
    return "\n".join(lines)


def dry_run_command(command, args):
    """Print the plan; raise :class:`InputError` when the disk cannot hold the output."""
    plan = build_plan(command, args)
    print(json.dumps(plan, indent=2) if getattr(args, "json", False) else _format(plan))
    if plan["disk_needed_bytes"] > plan["disk_free_bytes"]:
        raise InputError(f"{plan['output']}: needs about {format_bytes(plan['disk_needed_bytes'])}"
                         f" of disk, {plan['filesystem']} has "
                         f"{format_bytes(plan['disk_free_bytes'])} free")
    return 0
