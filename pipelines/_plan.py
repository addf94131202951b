"""``--dry-run``: what an ``ingest`` or ``mst`` run would do, and whether the disk can hold it.

The plan is built from the same pieces the run uses: the input's header (nothing else is
read), the tile store layout (:func:`terrain.tiles.store.tiles_per_shard`), and the Dask
graph itself, built but not run (building writes nothing), so the task count is the real
one. Sizes are estimates from measured ratios, stated as such:

* elevation store: Blosc LZ4 keeps about 0.64 of float32 on terrain (2.6 bytes a cell;
  synthetic 3000², docs/benchmarks.md has 0.57 on real grids);
* forest mask: Blosc LZ4 after a bit shuffle keeps about 0.46 bytes a cell of the uint8
  mask on synthetic relief (0.5 is used; zstd, the codec before, kept 0.22-0.35);
* memory per task: an ingest band task holds its band as float32 plus one text block; an
  MST group task holds its shard's elevations, mask and Borůvka's edge arrays (about 16
  bytes an edge, ``connectivity / 2`` edges a cell);
* partials: the partial output *is* the output before its rename, plus checkpoints
  (small: band statistics, and the level graphs, O(perimeter) per shard).

The run is refused (exit 2) when the output's file system has less free space than the
estimate.
"""

import json
import os
import shutil
from pathlib import Path

from terrain._atomic import partial_path
from terrain._paths import check_outputs, real_path
from terrain.errors import InputError

__all__ = ["build_plan", "dry_run_command", "format_bytes"]

ELEVATION_BYTES_PER_CELL = 2.6
MASK_BYTES_PER_CELL = 0.5
EDGE_BYTES = 16
TEXT_BLOCK_BYTES = 8 << 20


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


def build_plan(command, args):
    """The plan of ``command`` (``"ingest"`` or ``"mst"``) for parsed ``args``, as a dict."""
    from terrain.tiles import is_store, open_store
    from terrain.tiles.store import check_tile_size, quadtree_levels, tiles_per_shard

    from ._resume import run_key
    inp = Path(args.input)
    out = Path(args.output) if args.output else None
    if command == "mst" and out is None:
        from .mst import default_output
        out = default_output(inp)
    check_outputs([inp], [out, getattr(args, "geotiff", None)], args.overwrite)
    from_store = command == "mst" and is_store(inp)
    if from_store:
        store = open_store(inp)
        shape, tile, cellsize = store.shape, store.tile, store.cellsize
        shard = store.tiles_per_shard
    else:
        from terrain.io import open_grid
        tile = check_tile_size(args.tile)
        grid = open_grid(inp)
        shape, cellsize = grid.shape, grid.cellsize
        shard = tiles_per_shard(tile, shape)
    rows, cols = shape
    cells = rows * cols
    tiles = (-(-rows // tile), -(-cols // tile))
    side = min(tile * shard, max(rows, cols))
    threads = os.cpu_count() or 1
    plan = {"command": command, "input": str(inp), "output": str(out), "rows": rows,
            "cols": cols, "cells": cells, "tile": tile, "tiles": list(tiles),
            "tiles_per_shard": shard, "levels": quadtree_levels(*tiles),
            "shards": (-(-rows // (tile * shard))) * (-(-cols // (tile * shard)))}
    out_bytes = 0 if from_store else cells * ELEVATION_BYTES_PER_CELL
    band_task = min(tile * shard, rows) * cols * 4 + TEXT_BLOCK_BYTES
    per_task = 0 if from_store else band_task
    checkpoints = plan["shards"] * 64
    if command == "ingest":
        from .ingest import build_ingest_graph
        key = run_key("ingest", [inp], tile, None)
        plan["tasks"] = _task_count(build_ingest_graph(inp, partial_path(out, key), tile))
        plan["backend"] = "cpu (text parser / GDAL)"
    else:
        from terrain.backend import get_backend
        from terrain.grid.mst import MSTSpec

        from .mst import build_mst_graph
        spec = MSTSpec(tuple(int(s) for s in shape), int(tile), int(args.connectivity),
                       args.weight, tuple(float(c) for c in cellsize))
        partial = partial_path(out, run_key("mst", [inp], spec))
        upstream = None
        if not from_store:
            from .ingest import build_ingest_graph
            upstream = build_ingest_graph(inp, partial, tile)
        graph = build_mst_graph(inp if from_store else partial, partial, spec, shard, "cpu",
                                upstream)
        plan["tasks"] = _task_count(graph)
        plan["backend"] = get_backend(args.backend).name
        out_bytes += cells * MASK_BYTES_PER_CELL
        edges = args.connectivity // 2
        per_task = max(per_task, side * side * (4 + 1 + edges * EDGE_BYTES))
        checkpoints += plan["shards"] * 4 * side * EDGE_BYTES * 2
    out_bytes += (rows + cols) * 8
    parent = real_path(out).parent
    free = shutil.disk_usage(parent).free
    plan.update({
        "memory_per_task_bytes": int(per_task), "threads_per_worker": threads,
        "memory_per_worker_bytes": int(per_task * threads),
        "output_bytes": int(out_bytes), "partial_extra_bytes": int(checkpoints),
        "disk_needed_bytes": int(out_bytes + checkpoints), "disk_free_bytes": int(free),
        "filesystem": str(parent),
    })
    if command == "mst" and getattr(args, "geotiff", None):
        plan["disk_needed_bytes"] += int(cells * MASK_BYTES_PER_CELL)
    return plan


def _format(p):
    b = format_bytes
    return "\n".join([
        f"plan      {p['command']} {p['input']} -> {p['output']} (dry run: nothing written)",
        f"grid      {p['rows']} x {p['cols']} ({p['cells']} cells)",
        f"tiles     {p['tile']} a side, {p['tiles'][0]} x {p['tiles'][1]}; "
        f"{p['tiles_per_shard']} x {p['tiles_per_shard']} per shard, {p['shards']} shards; "
        f"{p['levels']} levels",
        f"tasks     {p['tasks']} (backend {p['backend']})",
        f"memory    about {b(p['memory_per_task_bytes'])} a task, "
        f"{b(p['memory_per_worker_bytes'])} a worker of {p['threads_per_worker']} threads",
        f"disk      about {b(p['output_bytes'])} output + {b(p['partial_extra_bytes'])} "
        f"checkpoints in the partial; {b(p['disk_free_bytes'])} free in {p['filesystem']}",
    ])


def dry_run_command(command, args):
    """Print the plan; raise :class:`InputError` when the disk cannot hold the output."""
    plan = build_plan(command, args)
    print(json.dumps(plan, indent=2) if getattr(args, "json", False) else _format(plan))
    if plan["disk_needed_bytes"] > plan["disk_free_bytes"]:
        raise InputError(f"{plan['output']}: needs about {format_bytes(plan['disk_needed_bytes'])}"
                         f" of disk, {plan['filesystem']} has "
                         f"{format_bytes(plan['disk_free_bytes'])} free")
    return 0
