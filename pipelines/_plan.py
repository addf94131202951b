"""``--dry-run``: what a command's run would do, and whether the disk can hold it.

One planner for every command that writes a store. A command module registers its part with
:func:`register` (its ``plan(plan, grid, args, inp, out)`` function, its default output and
its other paths); this module imports no command module. :func:`build_plan` checks the paths
(as the run does, before any work), reads the input's header only (nothing else is read),
lays out the tile store (:func:`terrain.tiles.store.tiles_per_shard`, the quadtree levels),
then asks the command's part for what differs: tasks, backend, the bytes a task and a worker
hold, and the bytes written to the output and to the partial output. :func:`build_plan` adds
the free space of the output's file system; :func:`dry_run_command` prints the plan and
refuses the run (exit 2) when the output's file system has less free space than the estimate.

Commands whose run is a Dask graph build it, not run it (building writes nothing), so their
task count is the real one; ``mst``'s route is the run's own decision
(:func:`pipelines.mst.mst_route`, asked the same questions).

Sizes are estimates from measured ratios, stated as such (:data:`STORED_BYTES_PER_CELL`;
synthetic fractal terrain, ``synth``):

* ``elevation`` (and any raster ingested on the way, such as a friction raster):
  Blosc LZ4 keeps about 0.64 of float32 on terrain (2.6 bytes a cell; synthetic 3000²,
  2048²: 2.5; about 0.57 on real grids);
* ``mst`` forest mask: Blosc LZ4 after a bit shuffle keeps about 0.46 bytes a cell of the
  uint8 mask on synthetic relief (0.5 is used; zstd, the codec before, kept 0.22-0.35);
* cost-distance layers (2048², one source and 50 sources): ``distance`` 2.5-2.8 bytes a
  cell with ``absdiff``, 6.0 with ``tobler`` (6.5 is used); ``backlink`` 0.27-0.42 (0.5);
  ``allocation`` 0.02-0.06 (0.1); ``friction`` is taken at its raw 4 bytes (unmeasured);
* the tiled index (``sssp_index``): its arrays' raw size follows from the geometry
  (:class:`pipelines.cost_distance_tiled.IndexStore`: per node ``12 B²`` bytes of
  matrices for ``B`` boundary cells, plus ids, elevations and frictions); zstd keeps 0.26
  of it (1024², tile 16, height 0: 46.4 MB of 180.9 MB; 0.3 is used); the run's final
  labels (``sssp_labels``, 16 bytes a boundary cell, removed at the end) at their raw size;
* memory per task: an ingest band task holds its band as float32 plus one text block; an
  MST group task holds its shard's elevations, mask and Borůvka's edge arrays (about 16
  bytes an edge, ``connectivity / 2`` edges a cell); the in-core cost-distance solve holds
  :func:`pipelines.cost_distance.incore_bytes` (while ``threads`` write tasks hold a shard
  window of the three result layers each); the tiled tasks follow the memory bound of
  docs/cost-distance-tiled.md (a group's phase 1 and the levels inside it, ``2 · 192`` bytes
  a cell a level; a merge above the groups ``2 · 192 S²``; a fill task its shard's layers
  and one group's phase 3, ~115 bytes a cell; the top Dijkstra, alone, ~250 bytes a top
  boundary cell plus its page cache);
* partials: the partial output *is* the output before its rename, plus checkpoints
  (small: band statistics, and the level graphs, O(perimeter) per shard) and, for
  cost-distance, a friction raster's hidden ingest store and the tiled run's labels.

Examples
--------
>>> plan = build_plan("cost-distance", _Args(input="data/sample.asc", source_cell=["3,4"]))
>>> plan["algorithm"], plan["output"], plan["output_bytes"] > 0
('in-core', 'data/sample.cost.zarr', True)
"""

import json
import os
import shutil
from pathlib import Path

from terrain.io.outputs import partial_path
from terrain.io.outputs import check_outputs, real_path
from terrain.errors import InputError

__all__ = ["build_plan", "dry_run_command", "format_bytes", "register", "PLANNERS",
           "STORED_BYTES_PER_CELL", "task_count", "band_task_bytes", "ingest_bytes"]

#: stored bytes a cell of each layer (module docstring: measured ratios)
STORED_BYTES_PER_CELL = {"elevation": 2.6, "mst": 0.5, "distance": 6.5, "backlink": 0.5,
                         "allocation": 0.1, "friction": 4.0}
ELEVATION_BYTES_PER_CELL = STORED_BYTES_PER_CELL["elevation"]
MASK_BYTES_PER_CELL = STORED_BYTES_PER_CELL["mst"]
EDGE_BYTES = 16
TEXT_BLOCK_BYTES = 8 << 20
INDEX_STORED_FRACTION = 0.3   # zstd on the tiled index's arrays
TILED_MATRIX_BYTES_PER_CELL = 192   # a level's boundary matrices, a cell (cost-distance-tiled.md)
TILED_FILL_BYTES_PER_CELL = 115     # a group's phase 3 (~30 MB for 512²)
TILED_TOP_BYTES_PER_VERTEX = 250    # the top Dijkstra, a top boundary cell


class _Args:
    """The options of a command line with their defaults, for calling :func:`build_plan`
    from Python (the doctests): ``_Args(input=..., source_cell=[...])``."""

    def __init__(self, **given):
        defaults = dict(output=None, overwrite=False, tile=512, connectivity=8,
                        weight="max", backend="cpu", geotiff=None, source=None,
                        source_cell=None, sources=None, start_cost=None, cost="absdiff",
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


def task_count(delayed):
    """The number of tasks of a Dask graph (built, not run)."""
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


def band_task_bytes(grid):
    """An ingest band task: a band of shard rows as float32 plus one block of text."""
    rows, cols = grid["shape"]
    return min(grid["tile"] * grid["tiles_per_shard"], rows) * cols * 4 + TEXT_BLOCK_BYTES


def ingest_bytes(grid):
    """Stored bytes of an ingested raster (``elevation``) of ``grid``'s shape."""
    rows, cols = grid["shape"]
    return rows * cols * ELEVATION_BYTES_PER_CELL


#: command -> (planner, default output(input, args) or None, other paths(args)); filled by
#: :func:`register`
PLANNERS = {}


def register(command, planner, default_output=None, paths=None):
    """Make ``command``'s ``--dry-run`` plan with ``planner(plan, grid, args, inp, out)``,
    which returns a dict: tasks, backend, memory_per_task_bytes, memory_per_worker_bytes,
    output_bytes, partial_extra_bytes (the plan's own keys are read, not changed: rows, cols,
    cells, shards, threads_per_worker). ``default_output(inp, args)``: the output when none
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


# ------------------------------------------------------------------------------ cost-distance
# (the cost-distance branch moves this part into its own modules, registered like mst's)

RESULT_LAYERS = ("distance", "backlink", "allocation")


def _layers_bytes(cells, names):
    """Stored bytes of the layers ``names`` over ``cells`` cells (estimates)."""
    return sum(cells * STORED_BYTES_PER_CELL[n] for n in names)


def _result_raw_bytes():
    """Bytes a cell of the three result layers in memory (their dtypes: 13)."""
    import numpy as np

    from terrain.grid.cost_outputs import LAYERS
    return sum(np.dtype(LAYERS[n][0]).itemsize for n in RESULT_LAYERS)


def _tiled_part(spec, backend, threads):
    """The tiled algorithm's geometry, memory and index bytes (module docstring)."""
    from terrain.tiles.quadtree import QuadtreePlan

    from .cost_distance_tiled import (TOP_CACHE_BYTES, IndexStore, solve_spec,
                                      top_cache_bytes_gpu)
    tspec = solve_spec(spec)
    group = int(spec["group_side"])
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
    cache = top_cache_bytes_gpu() if backend == "gpu" else TOP_CACHE_BYTES
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


def _plan_cost_distance(plan, grid, args, inp, out):
    from terrain.backend import get_backend
    from terrain.tiles import is_store

    from .cluster import gpu_count, gpu_count_backend
    from .cost_distance import (check_cost_options, check_incore_reuse, choose_algorithm,
                                incore_bytes, resolve_sources, reusable_kind,
                                _check_friction_grid)
    friction, reuse = args.friction, getattr(args, "reuse", None)
    connectivity = check_cost_options(args.cost, friction, args.connectivity, args.max_cost,
                                      args.start_cost)
    gpus = getattr(args, "gpus", None)
    be = get_backend(gpu_count_backend(gpus, args.backend, inp,
                                       getattr(args, "scheduler", None)))
    shape, gt, cells = grid["shape"], grid["geotransform"], plan["cells"]
    sources_file = args.sources
    points_file = sources_file is not None and Path(sources_file).suffix.lower() in (
        ".csv", ".txt", ".json", ".geojson")
    if sources_file is not None and not Path(sources_file).exists():
        raise InputError(f"{sources_file}: no such file")
    sources = None  # a raster of sources is counted when the run reads it
    if args.source or args.source_cell or points_file or sources_file is None:
        sources = len(resolve_sources(gt, shape, args.source or (), args.source_cell or (),
                                      sources_file if points_file else None,
                                      label=f"{inp}: "))
    if friction is not None:
        _check_friction_grid(friction, shape, gt)
    reuse_kind = None if reuse is None else reusable_kind(reuse)
    spec = {"shape": shape, "tile": grid["tile"], "tiles_per_shard": grid["tiles_per_shard"],
            "cost": args.cost, "connectivity": connectivity,
            "cellsize": (abs(gt[1]), abs(gt[5])),
            "algorithm": choose_algorithm(shape, friction is not None, algorithm=(
                "tiled" if reuse_kind == "tiled" else args.algorithm), backend=be.name,
                memory_bytes=_memory_bytes(getattr(args, "memory", None)))}
    threads = plan["threads_per_worker"]
    ingested = [] if grid["from_store"] else ["elevation"]
    linked = []
    if reuse_kind == "in-core":  # the earlier run's ingested DEM and friction: hard links
        ru = check_incore_reuse(reuse, spec, inp, friction, gt)
        linked = (["elevation"] if ru["dem_in_store"] else []) + (["friction"] if ru["friction"]
                                                                  else [])
        ingested = []
    part = {"algorithm": spec["algorithm"], "sources": sources,
            "backend": be.name + ("" if gpus is None else f", GPU 0 of {gpu_count(gpus)}"
                                  if spec["algorithm"] == "in-core" else f", {gpus} GPU workers")}
    layers = list(RESULT_LAYERS)
    if friction is not None and "friction" not in linked:
        layers.append("friction")
    # a friction raster (not a store) is ingested into a hidden store beside the output
    friction_ingest = (friction is not None and "friction" not in linked
                       and not is_store(friction))
    per_task = band_task_bytes(grid) if ingested or friction_ingest else 0
    worker = per_task * threads
    out_bytes = _layers_bytes(cells, layers) + sum(ingest_bytes(grid) for _ in ingested)
    extra = ingest_bytes(grid) if friction_ingest else 0
    if spec["algorithm"] == "tiled":
        from .cost_distance_tiled import tiled_spec
        tiled_spec(spec, getattr(args, "tile_sssp", None), getattr(args, "max_height", None),
                   reuse)
        tiled = _tiled_part(spec, be.name, threads)
        per_task = max(per_task, tiled.pop("memory_per_task_bytes"))
        worker = max(worker, tiled.pop("memory_per_worker_bytes"))
        out_bytes += tiled["index_bytes"]
        extra += tiled["labels_bytes"]
        part.update(tiled)
    elif spec["algorithm"] == "blocked":
        from .cost_distance import _blocked_spec
        from .cost_distance_blocked import block_task_bytes, cache_bytes
        spec["input"] = str(inp)
        _blocked_spec(spec, _memory_bytes(getattr(args, "memory", None)), reuse, be.name)
        side = spec["block"]
        blocks = (-(-shape[0] // side)) * (-(-shape[1] // side))
        # the driver's bands: 4 rows a block row, 4 columns a block column, 24 bytes a cell
        bands = 24 * 4 * ((-(-shape[0] // side)) * shape[1] + (-(-shape[1] // side)) * shape[0])
        per_task = max(per_task, block_task_bytes(side))
        worker = max(worker, bands + threads * block_task_bytes(side)
                     + cache_bytes(side, spec["memory_bytes"], threads, bands))
        extra += 16 * cells  # the blocks' distances and labels in the scratch directory
        part.update({"block": side, "blocks": blocks})
    else:
        side = grid["tile"] * grid["tiles_per_shard"]
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


def _memory_bytes(memory):
    from .cost_distance import _memory_bytes as parse
    return parse(memory)


def _cost_distance_output(inp, args):
    from .cost_distance import default_output
    return default_output(inp)


def _cost_distance_paths(args):
    """(inputs besides INPUT, outputs besides OUT) of a cost-distance run."""
    from .cost_distance import geotiff_paths
    tifs = geotiff_paths(getattr(args, "geotiff_dir", None))
    return [args.friction, args.sources, getattr(args, "reuse", None)], tifs


register("cost-distance", _plan_cost_distance, _cost_distance_output, _cost_distance_paths)
