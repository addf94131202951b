"""``terrain mst``: the grid minimum spanning forest of a DEM as one Dask graph.

Dask strategy
-------------
The library (:mod:`terrain.grid.mst`) supplies the phases; this module wires them:

1. ``mst-ingest`` (raster input only): :func:`pipelines.ingest.build_ingest_graph` writes
   the tile store *into the output store itself* (the temporary directory of
   :func:`terrain._atomic.atomic_output`), so the result holds the DEM and its forest.
2. ``mst-prepare``: creates the ``mst`` array (uint8, chunks = tiles, shards = the DEM's).
3. ``mst-group``: one task per shard of the store (a quadtree node of ``k × k`` tiles): reads
   the shard once, runs Borůvka on all its tiles (one batch = one GPU launch per round),
   reduces each tile forest and merges the shard's quadtree levels. It writes the tile
   forests as the shard's provisional mask (a writer owns whole shards) and returns the
   shard's reduced graph (up) and its changes (down), as separate outputs.
4. ``mst-merge``: one task per quadtree node above the shards, up to the root.
5. ``mst-expand``: top down, one task per node: routes its own and its ancestors' changes
   to its four children.
6. ``mst-write``: one task per shard: reads its provisional mask, applies the changes, writes.
7. ``mst-finish``: sums the statistics and writes them into the store's attributes.

Level graphs are task results held by Dask (O(perimeter) per node, written once); each
shard of the DEM is read once and each shard of the mask written, read and written once.
The bytes are counted: logical (uncompressed) bytes of the DEM read and of the mask written
and read, and the bytes of the level graphs and changes passed between tasks.
"""

import json
import time
from pathlib import Path

import dask
import numpy as np
import zarr

from terrain._atomic import atomic_output, check_output_free
from terrain.backend import get_backend
from terrain.grid.edges import WeightSum
from terrain.grid.merge import Changes, apply_changes, split_changes
from terrain.grid.mst import (PHASES, MSTSpec, QuadtreePlan, finish_stats, group_forest,
                               merge_node)
from terrain.tiles import is_store, open_store
from terrain.tiles.store import tiles_per_shard, write_coordinates

from .cluster import compute, open_scheduler

__all__ = ["build_mst_graph", "run_mst", "mst_command", "default_output", "write_geotiff"]


def default_output(input_path):
    """``INPUT``'s name with ``.mst.zarr`` (``neuse40.asc`` -> ``neuse40.mst.zarr``)."""
    p = Path(input_path)
    return p.with_name((p.stem if p.suffix else p.name) + ".mst.zarr")


def _prepare(out_path, spec, tile_shard, geo, upstream):
    """Create the ``mst`` array (and, for a store input, the georeference) in the output."""
    del upstream  # only orders this task after the ingest
    group = zarr.open_group(store=str(out_path), mode="a", zarr_format=3)
    if "x" not in group:
        gt = geo["geotransform"]
        write_coordinates(group, spec.shape, gt)
        group.attrs.update({"geotransform": list(gt), "crs": geo.get("crs"),
                            "source": geo.get("source")})
    side = spec.tile * tile_shard
    arr = group.create_array("mst", shape=spec.shape, dtype="uint8",
                             chunks=(spec.tile, spec.tile), shards=(side, side), fill_value=0,
                             dimension_names=("y", "x"),
                             compressors=(zarr.codecs.ZstdCodec(level=1),),
                             config={"write_empty_chunks": False})
    arr.attrs.update({"bits": "bit d set: edge (cell, d) in the forest; d: E=0, S=1, SE=2, SW=3"})
    return str(out_path)


def _group_task(dem_path, out_path, spec, level, i, j, backend, key_bits, prepared):
    t0 = time.perf_counter()
    win = spec.window(level, i, j)
    z = np.asarray(zarr.open_array(store=str(dem_path), path="elevation", mode="r")
                   [win[0]:win[1], win[2]:win[3]], dtype=np.float32)
    g = group_forest(spec, z, win, level, backend, time.perf_counter() - t0, key_bits)
    t0 = time.perf_counter()
    zarr.open_array(store=str(prepared), path="mst", mode="r+")[win[0]:win[1], win[2]:win[3]] = g.mask
    g.times["write"] = time.perf_counter() - t0
    stats = {"times": g.times, "read_bytes": z.nbytes, "written_bytes": g.mask.nbytes,
             "graph_bytes": g.graph.nbytes + g.changes.nbytes, "forest_sum": g.forest_sum.acc,
             "forest_edges": g.forest_edges, "vertices": g.vertices}
    return g.graph, g.changes, stats


def _merge_task(spec, k, i, j, *children):
    graph, changes, seconds = merge_node(spec, k, i, j, list(children))
    stats = {"times": {"merge": seconds}, "graph_bytes": graph.nbytes + changes.nbytes}
    return graph, changes, stats


def _expand_task(spec, k, i, j, incoming, own):
    t0 = time.perf_counter()
    parts = split_changes(Changes.concat([incoming, own]), spec.window(k, i, j),
                          spec.tile << (k - 1), spec.shape[1])
    return tuple(parts) + ({"times": {"expand": time.perf_counter() - t0}},)


def _write_task(out_path, spec, level, i, j, incoming, own):
    win = spec.window(level, i, j)
    t0 = time.perf_counter()
    arr = zarr.open_array(store=str(out_path), path="mst", mode="r+")
    mask = np.asarray(arr[win[0]:win[1], win[2]:win[3]], dtype=np.uint8)
    t1 = time.perf_counter()
    apply_changes(mask, win[0], win[2], spec.shape[1], Changes.concat([incoming, own]))
    t2 = time.perf_counter()
    arr[win[0]:win[1], win[2]:win[3]] = mask
    t3 = time.perf_counter()
    return {"times": {"read": t1 - t0, "expand": t2 - t1, "write": t3 - t2},
            "read_bytes": mask.nbytes, "written_bytes": mask.nbytes}


def _finish(out_path, spec, group_stats, node_stats, all_changes, writes, meta):
    """Sum the statistics; store them in the output's attributes; return the summary."""
    times = {p: 0.0 for p in PHASES}
    totals = {"read_bytes": 0, "written_bytes": 0, "graph_bytes": 0}
    fsum, fedges, verts = WeightSum(), 0, 0
    for s in list(group_stats) + list(node_stats) + list(writes):
        for p, v in s.get("times", {}).items():
            times[p] += v
        for key in totals:
            totals[key] += int(s.get(key, 0))
        if "forest_sum" in s:
            fsum.merge(WeightSum(s["forest_sum"]))
            fedges += s["forest_edges"]
            verts += s["vertices"]
    total, edges = finish_stats(fsum, fedges, Changes.concat(all_changes))
    summary = {"total_weight": total, "edges": int(edges), "trees": int(verts - edges),
               "vertices": int(verts), "rows": spec.shape[0], "cols": spec.shape[1],
               "tile": spec.tile, "levels": spec.levels, "connectivity": spec.connectivity,
               "weight": spec.weight, **meta,
               "phase_seconds": {p: round(v, 6) for p, v in times.items()}, **totals}
    zarr.open_group(store=str(out_path), mode="r+").attrs.update({"mst": summary})
    return summary


def build_mst_graph(dem_path, out_path, spec, group_tiles, backend="cpu", upstream=None,
                    geo=None, key_bits="auto"):
    """Dask graph computing the forest of the DEM in store ``dem_path`` into ``out_path``.

    Parameters
    ----------
    dem_path : path of the tile store holding ``elevation`` (may equal ``out_path``)
    out_path : path of the output store (an existing group, or created by ``upstream``)
    spec : MSTSpec
    group_tiles : int
        Tiles a side per group task: the store's shard.
    backend : str
        Backend name each task resolves.
    upstream : Delayed, optional
        What must run first (the ingest).
    geo : dict, optional
        ``geotransform``/``crs``/``source`` to copy when the output has no coordinates.
    key_bits : {"auto", 32, 64}
        Borůvka's packed key width (:func:`terrain.grid._boruvka.boruvka_tiles`).

    Returns
    -------
    dask.delayed.Delayed
        Computing it returns the summary dict (also stored in the ``mst`` attribute).
    """
    token = dask.base.tokenize(str(dem_path), str(out_path), spec, time.time_ns())
    name = (lambda stage: f"mst-{stage}-{token}")
    plan = QuadtreePlan.build(spec, group_tiles)
    shard = tiles_per_shard(spec.tile, spec.shape)
    prepared = dask.delayed(_prepare, pure=False)(out_path, spec, shard, geo or {}, upstream,
                                                  dask_key_name=name("prepare"))
    g = plan.group_level
    up, own, stats = {}, {}, []
    for (i, j) in plan.groups:
        graph, changes, s = dask.delayed(_group_task, nout=3, pure=False)(
            dem_path, out_path, spec, g, i, j, backend, key_bits, prepared,
            dask_key_name=(name("group"), i, j))
        up[(g, i, j)], own[(g, i, j)] = graph, changes
        stats.append(s)
    node_stats = []
    for k in sorted(plan.levels):
        for (i, j) in plan.levels[k]:
            kids = [up.pop((k - 1,) + c) if c is not None else None for c in plan.children(k, i, j)]
            graph, changes, s = dask.delayed(_merge_task, nout=3)(
                spec, k, i, j, *kids, dask_key_name=(name(f"merge{k}"), i, j))
            up[(k, i, j)], own[(k, i, j)] = graph, changes
            node_stats.append(s)
    pending = {}
    for k in sorted(plan.levels, reverse=True):
        for (i, j) in plan.levels[k]:
            out = dask.delayed(_expand_task, nout=5)(
                spec, k, i, j, pending.pop((k, i, j), None), own[(k, i, j)],
                dask_key_name=(name(f"expand{k}"), i, j))
            for q, c in enumerate(plan.children(k, i, j)):
                if c is not None:
                    pending[(k - 1,) + c] = out[q]
            node_stats.append(out[4])
    writes = [dask.delayed(_write_task, pure=False)(
                  prepared, spec, g, i, j, pending.pop((g, i, j), None), own[(g, i, j)],
                  dask_key_name=(name("write"), i, j))
              for (i, j) in plan.groups]
    meta = {"backend": backend, "group_tiles": 1 << g, "key_bits": key_bits}
    return dask.delayed(_finish, pure=False)(prepared, spec, stats, node_stats, list(own.values()),
                                             writes, meta, dask_key_name=name("finish"))


def run_mst(input_path, output_path=None, tile=512, connectivity=8, weight="max", backend=None,
            scheduler=None, overwrite=False, geotiff=None, key_bits="auto"):
    """Compute the forest of ``input_path`` (raster or tile store) into ``output_path``.

    Returns the summary dict. See ``terrain mst --help``; ``key_bits`` picks Borůvka's key
    width (:func:`terrain.grid._boruvka.boruvka_tiles`, "auto" on the command line).

    Examples
    --------
    >>> run_mst("data/sample.asc", "sample.mst.zarr", scheduler="threads")  # doctest: +SKIP
    """
    t_start = time.perf_counter()
    be = get_backend(backend)
    inp = Path(input_path)
    out = Path(output_path) if output_path else default_output(inp)
    check_output_free(out, overwrite)
    if geotiff:
        check_output_free(geotiff, overwrite)
    if is_store(inp):
        store = open_store(inp)
        shape, tile, cellsize = store.shape, store.tile, store.cellsize
        geo = {"geotransform": list(store.geotransform), "crs": store.attrs.get("crs"),
               "source": str(inp)}
        shard = store.tiles_per_shard
    else:
        from terrain.io import open_grid
        grid = open_grid(inp)
        shape, cellsize = grid.shape, grid.cellsize
        geo = None
        shard = tiles_per_shard(tile, shape)
    spec = MSTSpec(tuple(int(s) for s in shape), int(tile), int(connectivity), weight,
                   tuple(float(c) for c in cellsize))
    with atomic_output(out, overwrite) as tmp:
        if is_store(inp):
            zarr.open_group(store=str(tmp), mode="w-", zarr_format=3)
            dem_path, upstream = inp, None
        else:
            from .ingest import build_ingest_graph
            upstream = build_ingest_graph(inp, tmp, tile)
            dem_path = tmp
        graph = build_mst_graph(dem_path, tmp, spec, shard, be.name, upstream, geo, key_bits)
        with open_scheduler(scheduler):
            (summary,) = compute(graph, label="mst")
        summary["seconds"] = round(time.perf_counter() - t_start, 6)
        summary["output"] = str(out)
        summary["device"] = be.device_name()
        zarr.open_group(store=str(tmp), mode="r+").attrs.update({"mst": summary})
    if geotiff:
        write_geotiff(out, geotiff, overwrite)
        summary["geotiff"] = str(geotiff)
    return summary


def write_geotiff(store_path, tif_path, overwrite=False):
    """Write the ``mst`` mask of an output store as a uint8 GeoTIFF, shard by shard."""
    import rasterio
    from rasterio.transform import Affine

    group = zarr.open_group(store=str(store_path), mode="r")
    arr = group["mst"]
    rows, cols = arr.shape
    gt = group.attrs.get("geotransform") or [0.0, 1.0, 0.0, float(rows), 0.0, -1.0]
    crs = group.attrs.get("crs")
    side = arr.shards[0] if arr.shards else arr.chunks[0]
    with atomic_output(tif_path, overwrite) as tmp:
        profile = {"driver": "GTiff", "height": max(rows, 1), "width": max(cols, 1), "count": 1,
                   "dtype": "uint8", "transform": Affine.from_gdal(*gt), "compress": "deflate",
                   "tiled": True, "blockxsize": 256, "blockysize": 256}
        if crs:
            profile["crs"] = crs
        with rasterio.open(tmp, "w", **profile) as dst:
            for r0 in range(0, rows, side):
                for c0 in range(0, cols, side):
                    block = np.asarray(arr[r0:r0 + side, c0:c0 + side])
                    dst.write(block, 1, window=rasterio.windows.Window(c0, r0, block.shape[1],
                                                                       block.shape[0]))


def _format_summary(s):
    t = s["phase_seconds"]
    return "\n".join([
        f"mst       {s['output']}",
        f"grid      {s['rows']} x {s['cols']}, {s['connectivity']}-connected, weight {s['weight']}",
        f"forest    {s['edges']} edges, {s['trees']} trees, {s['vertices']} vertices",
        f"weight    {s['total_weight']:.10g}",
        f"tiles     {s['tile']} a side, {s['levels']} levels, backend {s['backend']} "
        f"({s['device']})",
        "phases    " + ", ".join(f"{p} {v:.2f}" for p, v in t.items()) + " (task seconds)",
        f"bytes     read {s['read_bytes']}, written {s['written_bytes']}, "
        f"level graphs {s['graph_bytes']}",
        f"time      {s['seconds']:.2f} s",
    ] + ([f"geotiff   {s['geotiff']}"] if s.get("geotiff") else []))


def mst_command(args):
    """``terrain mst INPUT [-o OUT.zarr] [--tile N] [--connectivity 4|8] [--weight W] ...``."""
    from .graph import mst_graph_if_graph  # a graph file: the general-graph forest
    if (status := mst_graph_if_graph(args)) is not None:
        return status
    summary = run_mst(args.input, args.output, tile=args.tile, connectivity=args.connectivity,
                      weight=args.weight, backend=args.backend, scheduler=args.scheduler,
                      overwrite=args.overwrite, geotiff=args.geotiff)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(_format_summary(summary))
    return 0
