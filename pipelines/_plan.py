"""``--dry-run``: what a command's run would do, and whether the disk can hold it.

One planner for every command that writes a store. A command module registers its part with
:func:`register`; this module imports no command module. :func:`build_plan` checks the
paths as the run does, reads the input's header only, lays out the tile store, asks the
command's part for tasks, backend, memory and bytes written, and adds the free space of the
output's file system; :func:`dry_run_command` prints the plan and refuses the run (exit 2)
when the disk cannot hold it. Graph commands build their graph (building writes nothing),
so task counts are real. Sizes are estimates from measured ratios
(:data:`STORED_BYTES_PER_CELL`; docs/scale.md, "Dry runs").

Examples
--------
>>> import argparse, pipelines.ingest  # registers its part
>>> plan = build_plan("ingest", argparse.Namespace(input="data/sample.asc", output="s.zarr",
...                                                tile=512, overwrite=False))
>>> plan["output"], plan["output_bytes"] > 0
('s.zarr', True)
"""

import os
import shutil
from pathlib import Path

from terrain.io.outputs import (check_outputs, check_store_name, format_bytes, json_text,
                                 real_path)
from terrain.errors import InputError

from ._command import open_input

__all__ = ["build_plan", "dry_run_command", "register", "PLANNERS",
           "STORED_BYTES_PER_CELL", "task_count", "band_task_bytes", "ingest_bytes",
           "check_same_grid"]

#: stored bytes a cell of each layer (module docstring: measured ratios)
STORED_BYTES_PER_CELL = {"elevation": 2.6, "mst": 0.5}
ELEVATION_BYTES_PER_CELL = STORED_BYTES_PER_CELL["elevation"]
MASK_BYTES_PER_CELL = STORED_BYTES_PER_CELL["mst"]
EDGE_BYTES = 16
#: a worker process's own memory before its work: Python, NumPy, GDAL, Dask and zarr
#: imported (131-138 MiB peak RSS of those imports alone, 2-core VM); with it the tiled
#: cost distance's plan at 2048² says 630 MiB where the run peaked at 640
PROCESS_BYTES = 140 << 20
TEXT_BLOCK_BYTES = 8 << 20


def task_count(delayed):
    """The number of tasks of a Dask graph (built, not run)."""
    from ._resume import graph_dict
    return len(graph_dict(delayed))


def check_same_grid(path, shape, geotransform, what, crs=None):
    """:class:`InputError` unless the raster ``path`` (a friction or weights raster: ``what``)
    has the DEM's ``shape``, ``geotransform`` and (where both say one) ``crs``."""
    import numpy as np

    from terrain.io.georef import crs_label, same_crs
    header = open_input(path)
    if not same_crs(header.crs, crs):
        raise InputError(f"{path}: {what}'s CRS {crs_label(header.crs)} is not the DEM's "
                         f"{crs_label(crs)}")
    fshape, fgt = header.shape, header.geotransform
    if tuple(fshape) != tuple(shape):
        raise InputError(f"{path}: {what} has {fshape[0]} x {fshape[1]} cells, the DEM "
                         f"{shape[0]} x {shape[1]}")
    if not np.allclose(np.asarray(fgt, float), np.asarray(geotransform, float), rtol=1e-9,
                       atol=1e-9 * max(abs(float(geotransform[1])), 1e-300)):
        raise InputError(f"{path}: {what}'s georeference {list(fgt)} differs from the DEM's "
                         f"{list(geotransform)}")


def band_task_bytes(grid):
    """An ingest band task: a band of shard rows as float32 plus one block of text."""
    rows, cols = grid.shape
    return min(grid.shard_side, rows) * cols * 4 + TEXT_BLOCK_BYTES


def ingest_bytes(grid):
    """Stored bytes of an ingested raster (``elevation``) of ``grid``'s shape."""
    rows, cols = grid.shape
    return rows * cols * ELEVATION_BYTES_PER_CELL


#: command -> (planner, default output(input, args) or None, other paths(args)); filled by
#: :func:`register`
PLANNERS = {}


def register(command, planner, default_output=None, paths=None):
    """Make ``command``'s ``--dry-run`` plan with ``planner(plan, grid, args, inp, out)``
    (``grid``: the input's :class:`pipelines._command.InputGrid`), which returns a dict:
    tasks, backend, memory_per_task_bytes, memory_per_worker_bytes (its tasks' and caches':
    the process's own :data:`PROCESS_BYTES` are added), output_bytes, partial_extra_bytes
    (the plan's own keys are read, not changed: rows, cols, cells, shards,
    threads_per_worker). ``default_output(inp, args)``: the output when none
    is given; ``paths(args)``: ``(inputs besides INPUT, outputs besides OUT)``."""
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
    check_store_name(out)  # as the run does
    grid = open_input(inp, args.tile, stores=command != "ingest")
    rows, cols = grid.shape
    tile, shard = grid.tile, grid.tiles_per_shard
    tiles = (-(-rows // tile), -(-cols // tile))
    plan = {"command": command, "input": str(inp), "output": str(out), "rows": rows,
            "cols": cols, "cells": rows * cols, "tile": tile, "tiles": list(tiles),
            "tiles_per_shard": shard, "levels": quadtree_levels(*tiles),
            "shards": (-(-rows // (tile * shard))) * (-(-cols // (tile * shard))),
            "threads_per_worker": os.cpu_count() or 1}
    plan.update({"other_outputs_bytes": 0}, **planner(plan, grid, args, inp, out))
    plan["output_bytes"] += (rows + cols) * 8  # the store's x and y coordinates
    plan["memory_per_worker_bytes"] += PROCESS_BYTES
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
    if p["command"] == "cost-distance":
        solve = f"solve     {p['route']}, backend {p['backend']}"
        if p["route"] == "blocked":
            solve += f": {p['blocks']} blocks of {p['block']}², distances then labels"
        if p["route"] == "tiled":
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
        + ("scratch" if p["command"] == "cost-distance" else "checkpoints") + " in the partial"
        + (f" + {b(p['other_outputs_bytes'])} GeoTIFF" if p["other_outputs_bytes"] else "")
        + f"; {b(p['disk_free_bytes'])} free in {p['filesystem']}",
    ]
    return "\n".join(lines)


def dry_run_command(command, args):
    """Print the plan; raise :class:`InputError` when the disk cannot hold the output."""
    plan = build_plan(command, args)
    print(json_text(plan, indent=2) if getattr(args, "json", False) else _format(plan))
    if plan["disk_needed_bytes"] > plan["disk_free_bytes"]:
        raise InputError(f"{plan['output']}: needs about {format_bytes(plan['disk_needed_bytes'])}"
                         f" of disk, {plan['filesystem']} has "
                         f"{format_bytes(plan['disk_free_bytes'])} free")
    return 0
