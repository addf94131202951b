"""``terrain cost-distance``: accumulated cost, allocation and backlinks from sources, as one
Dask graph; ``terrain path``: least-cost paths traced along the backlinks.

Dask strategy
-------------
1. ``cost-ingest`` (raster input): :func:`pipelines.ingest.build_ingest_graph` writes the
   DEM's tile store *into the output store itself* (the temporary directory of
   :func:`terrain.io.outputs.atomic_output`); a friction raster is ingested the same way into a
   hidden store beside it, removed when the run ends.
2. ``cost-prepare``: creates the layers ``distance`` (float64, NaN), ``backlink`` (uint8,
   255), ``allocation`` (int32, -1) and ``friction`` (float32, NaN) with
   :func:`terrain.tiles.store.create_layer` (chunks = tiles, shards = the DEM's).
3. ``cost-solve``: the algorithm :func:`choose_algorithm` picks: the in-core exact SSSP
   (:func:`terrain.grid.sssp.grid_sssp`, one task holding the grid), or, when the grid does
   not fit (or ``algorithm="tiled"``), the tiled algorithm's own graph
   (:mod:`pipelines.cost_distance_tiled`: per-shard tasks on the quadtree walk, replacing
   steps 3-5).
4. ``cost-write``: one task per shard window writes that window of every layer (a writer
   owns whole shards; Blosc compresses without the GIL, so the tasks run in parallel).
5. ``cost-finish``: the summary into the store's attributes (``cost_distance``).

Several GPUs (``--gpus N|all``, :func:`pipelines.cluster.open_scheduler`: one worker process
per GPU): the tiled algorithm's group tasks (phase 1, the sources up, the labels down) are
spread over the GPU workers in Z-order runs of groups, its fill tasks (phase 3 and the
writes) in runs of shards (:func:`pipelines.cost_distance_tiled.spread_over_workers`); a grid
that fits one device (the in-core algorithm) is solved in this process on GPU 0 of the N,
with no workers (as ``mst``'s route: worker processes cost 2.7 s and 3.6 GB more at the Neuse
40-ft size on 4 H200s), and the summary says so (``gpus_used``: 1, ``note``); inside a
batch's GPU cluster it is solved on the first GPU worker, where its write tasks run too.
The ingest tasks of a raster input go to any worker. The result is the same bits as on one
GPU.

No task graph on the default scheduler (:func:`in_process_applies`: no ``--scheduler``, no
active cluster, the in-core algorithm): :func:`run_in_process` calls the same
task functions in this process (steps 1-5; a raster input's ingest graph on Dask's
threads). The in-core solve is one task holding the whole grid, so a LocalCluster's
dashboard would show one bar, and its start (about 1.1 s on the GPU hosts: importing
``distributed`` and the dashboard, starting the loop) was a quarter of a ``--reuse``
query; the store is the graph's byte for byte. On the GPU,
:mod:`pipelines.cost_distance_start` readies the device during the imports, and from a tile
store (or a ``--reuse`` store holding the DEM) reads the DEM and solves in a thread of its
own meanwhile; :func:`_solve` takes that result only for its own call
(:func:`pipelines.cost_distance_start.take_early_solve`). ``--scheduler
threads|local|ADDRESS`` runs the graph.

``--reuse STORE`` of an in-core run's store (its ``cost_reuse`` attribute): step 1 is
replaced by hard links to STORE's ``elevation`` and ``friction`` layers
(:func:`terrain.tiles.store.link_layer`) once the input's fingerprint, grid and cost model
are checked (:func:`check_incore_reuse`); the friction is not checked again and the GPU's
bucket width is STORE's. A tiled run's store goes to :mod:`pipelines.cost_distance_tiled`.

Bad input is found before anything runs where the headers suffice (sources outside the
raster, a friction raster of another shape or georeference, ``--max-cost <= 0``); a source
on nodata or a negative friction is found when the data are read, and the atomic output
then leaves nothing behind.
"""

import json
import math
import os
import shutil
import time
from pathlib import Path

import numpy as np
import zarr

from terrain.io.outputs import atomic_output
from terrain.io.outputs import check_outputs
from terrain.backend import get_backend
from terrain.errors import InputError
from terrain.grid.cost_outputs import (BACKLINK_CODES, LAYERS, io_threads, layer_attributes,
                                      layer_compressors, read_layer, shard_layouts,
                                      write_windows)
from terrain.grid.costs import arc_codes, check_friction, cost_model_code
from terrain.grid.sssp import incore_bytes  # the in-core rule, shared with the start-up
from terrain.io.georef import finish_store, mark_raster, write_georeference
from terrain.io.points import cell_centre, map_to_cell, raster_source_cells, read_points
from terrain.tiles import is_store, open_store
from terrain.tiles.store import create_layer, link_layer, tiles_per_shard

# Dask (pipelines.cluster, the graph) is imported where a graph is built or run: the
# in-process path from a tile store needs none of it (0.1-0.2 s of start-up)

__all__ = ["run_cost_distance", "cost_distance_command", "path_command", "trace_paths",
           "choose_algorithm", "default_output", "resolve_sources", "LAYERS",
           "pin_to_gpu_workers", "input_fingerprint", "reusable_kind", "check_incore_reuse",
           "reuse_attributes", "incore_bytes", "check_cost_options",
           "in_process_applies", "run_in_process", "geotiff_paths", "GEOTIFF_LAYERS"]

# the layers --geotiff-dir writes, one GeoTIFF each
GEOTIFF_LAYERS = ("distance", "allocation", "backlink")


def default_output(input_path):
    """``INPUT``'s name with ``.cost.zarr`` (``dem.tif`` -> ``dem.cost.zarr``)."""
    p = Path(input_path)
    return p.with_name((p.stem if p.suffix else p.name) + ".cost.zarr")


def choose_algorithm(shape, has_friction=False, memory_bytes=None, algorithm="auto",
                     backend="cpu"):
    """``"in-core"`` when the grid's working set fits in memory, else ``"blocked"`` on the
    CPU (:mod:`pipelines.cost_distance_blocked`) and ``"tiled"`` on the GPU.

    The in-core SSSP needs about 40 bytes a cell (padded elevation, friction, distance,
    labels, outputs) plus its queue; it takes the grid when that is under half the memory
    (``memory_bytes``, else the free device memory with ``backend="gpu"``, else the
    available RAM). ``algorithm`` other than ``"auto"`` is returned as it is.

    >>> choose_algorithm((1000, 1000), memory_bytes=10**9), choose_algorithm(
    ...     (10**5, 10**5), memory_bytes=10**9), choose_algorithm(
    ...     (10**5, 10**5), memory_bytes=10**9, backend="gpu")
    ('in-core', 'blocked', 'tiled')
    """
    if algorithm not in ("auto", "in-core", "tiled", "blocked"):
        raise InputError(f"algorithm {algorithm!r}: expected auto, in-core, tiled or blocked")
    if algorithm != "auto":
        return algorithm
    need = incore_bytes(shape, has_friction)
    if memory_bytes is None and backend == "gpu":
        try:
            import cupy
            memory_bytes = cupy.cuda.Device().mem_info[0]
        except Exception:
            memory_bytes = None
    if memory_bytes is None:
        try:
            import psutil
            memory_bytes = psutil.virtual_memory().available
        except Exception:  # no psutil: assume it fits
            return "in-core"
    if need <= memory_bytes // 2:
        return "in-core"
    return "tiled" if backend == "gpu" else "blocked"


def _parse_pair(text, what, cast=float):
    try:
        a, b = (cast(v.strip()) for v in str(text).split(","))
    except ValueError:
        raise InputError(f"{what} {text!r}: expected two numbers A,B") from None
    return a, b


def resolve_sources(geotransform, shape, points=(), cells=(), sources_file=None, label=""):
    """Source cells ``[(row, col), ...]`` in order: ``points`` (map X,Y), then ``cells``
    (ROW,COL), then the cells of ``sources_file`` (a raster, a tile store, CSV or GeoJSON)."""
    out = []
    for p in points:
        x, y = _parse_pair(p, "source") if isinstance(p, str) else p
        out.append(map_to_cell(x, y, geotransform, shape, what=f"{label}source"))
    for c in cells:
        r, k = _parse_pair(c, "source cell", int) if isinstance(c, str) else c
        if not (0 <= r < shape[0] and 0 <= k < shape[1]):
            raise InputError(f"{label}source cell ({r}, {k}) is outside the raster "
                             f"({shape[0]} x {shape[1]} cells)")
        out.append((int(r), int(k)))
    if sources_file is not None:
        path = Path(sources_file)
        suffix = path.suffix.lower()
        if suffix in (".csv", ".txt", ".json", ".geojson") and not is_store(path):
            for x, y in read_points(path):
                out.append(map_to_cell(x, y, geotransform, shape, what=f"{path}: source"))
        elif is_store(path):
            st = open_store(path)
            out.extend(raster_source_cells(st.read_window(0, st.shape[0], 0, st.shape[1]),
                                           st.geotransform, geotransform, shape, path))
        else:
            from terrain.io import read_grid
            values, grid = read_grid(path)
            out.extend(raster_source_cells(values, grid.geotransform, geotransform, shape, path))
    if not out:
        raise InputError(f"{label}no sources given")
    return out


def _check_friction_grid(friction_path, shape, geotransform):
    if is_store(friction_path):
        st = open_store(friction_path)
        fshape, fgt = st.shape, st.geotransform
    else:
        from terrain.io import open_grid
        g = open_grid(friction_path)
        fshape, fgt = g.shape, g.geotransform
    if tuple(fshape) != tuple(shape):
        raise InputError(f"{friction_path}: friction raster has {fshape[0]} x {fshape[1]} "
                         f"cells, the DEM {shape[0]} x {shape[1]}")
    if not np.allclose(np.asarray(fgt, float), np.asarray(geotransform, float), rtol=1e-9,
                       atol=1e-9 * max(abs(float(geotransform[1])), 1e-300)):
        raise InputError(f"{friction_path}: friction raster's georeference {list(fgt)} differs "
                         f"from the DEM's {list(geotransform)}")


# ------------------------------------------------------------------------------------------
# tasks


def _prepare(out_path, shape, tile, geo, with_friction, upstream):
    del upstream  # orders this task after the ingests
    group = zarr.open_group(store=str(out_path), mode="a", zarr_format=3,
                            use_consolidated=False)
    if "x" not in group:
        group.attrs.update({"geotransform": list(geo["geotransform"]), "crs": geo.get("crs"),
                            "source": geo.get("source"), "tile": tile,
                            "cellsize": [abs(geo["geotransform"][1]),
                                         abs(geo["geotransform"][5])]})
    # CF georeference (idempotent: an ingested DEM already wrote x, y, spatial_ref)
    write_georeference(group, shape, geo["geotransform"], geo.get("crs"))
    for name, attrs in layer_attributes(geo.get("cost", "absdiff")).items():
        dtype, fill, _ = LAYERS.get(name, ("float32", np.nan, None))
        if name == "friction" and not with_friction:
            continue
        arr = create_layer(group, name, dtype, fill, tile, shape,
                           compressors=layer_compressors(name), attrs=attrs)
        mark_raster(arr, nodata=fill)  # grid_mapping and _FillValue (xarray masks it)
    return str(out_path)


def _read_full(path, layer="elevation"):
    from .cost_distance_start import take_early_read
    early = take_early_read(path, layer)  # read during the start-up, when the same bytes
    return read_layer(path, layer, np.float32) if early is None else early


def _solve(dem_path, friction_src, spec, sources, start_costs, backend, prepared,
           writer=None):
    """The cost-solve task: reads the grid, runs the chosen algorithm, returns the result.

    ``friction_src``: ``(store, layer)`` of the friction raster, or None. In core, the
    distances are written as soon as they are known (:class:`_EarlyWriter`), and the task
    waits for those writes; with ``writer`` (the in-process path's) it leaves them running
    (``stats["early_writes"]`` is then empty until the caller has waited). ``spec["on_device"]``
    (the in-process path on the GPU): the result's layers are CuPy arrays."""
    t0 = time.perf_counter()
    z = _read_full(dem_path)
    f = None
    if friction_src is not None:
        f = read_layer(friction_src[0], friction_src[1], np.float32)
        if not spec.get("friction_checked"):
            f = check_friction(f, name=str(spec["friction_path"]))
    t_read = time.perf_counter() - t0
    if hasattr(prepared, "result"):  # in process: the layers, created beside the read
        prepared.result()
    del prepared
    from .cost_distance_start import wait_for_start_up
    wait_for_start_up()  # the device's start-up thread, when the command started one
    if spec["algorithm"] != "in-core":
        from terrain.grid.sssp_tiled import tiled_sssp  # the tiled algorithm's seam
        res = tiled_sssp(z, sources, start_costs, cost=spec["cost"], friction=f,
                         connectivity=spec["connectivity"], cellsize=spec["cellsize"],
                         max_cost=spec["max_cost"], backend=backend, tile=spec["tile"])
    else:
        from terrain.grid.sssp import grid_sssp

        from .cost_distance_start import take_early_solve
        own = writer is None
        writer = _EarlyWriter(spec.get("out_path"), spec.get("windows")) if own else writer
        on_device = bool(spec.get("on_device"))
        early = None if f is not None else take_early_solve(  # the start-up's, same call
            z, sources, start_costs, spec["cost"], spec["connectivity"], spec["cellsize"],
            spec["max_cost"], spec.get("near_far_delta"), on_device=on_device)
        try:
            res = None if early is None else _take_early_solve(
                early, writer.start if spec.get("windows") else None)
            if res is None:
                res = grid_sssp(z, sources, start_costs, cost=spec["cost"], friction=f,
                                connectivity=spec["connectivity"], cellsize=spec["cellsize"],
                                max_cost=spec["max_cost"], backend=backend,
                                delta=spec.get("near_far_delta"), hops=False,
                                on_distance=writer.start if spec.get("windows") else None,
                                on_device=on_device)
            if not on_device:
                res = res.to_host()
        except InputError as e:
            writer.stop()
            raise InputError(f"{spec['input']}: {e}") from None
        except BaseException:
            writer.stop()
            raise
        if own:
            done = writer.wait()
            if done:
                res.stats["early_writes"] = done
        elif writer.pool is not None:  # started: the write tasks leave the distances out
            res.stats["early_writes"] = []
    res.stats["read_seconds"] = t_read
    return res, (f if spec.get("write_friction", True) else None)


def _take_early_solve(early, on_distance):
    """The result of the start-up thread's solve (:func:`pipelines.cost_distance_start.
    take_early_solve`), its distances handed to ``on_distance`` as soon as they are known;
    None where it failed before them (the command's own call then says why)."""
    distance = early.distance()
    if distance is None:
        try:
            early.result()
        except BaseException:  # noqa: BLE001 - the command's own solve meets it again
            pass
        return None
    if on_distance is not None:
        on_distance(distance)
    return early.result()


class _EarlyWriter:
    """Writes the ``distance`` layer from a pool of threads as soon as the solve has the
    distances (``grid_sssp(on_distance=...)``): on the GPU while the labels and backlinks
    are computed and downloaded. :meth:`wait` returns each shard window's ``(start, end)``
    (and raises what a write raised)."""

    def __init__(self, out_path, windows):
        self.out_path, self.windows = out_path, windows or []
        self.pool, self.futures = None, []

    def _one(self, distance, window, layouts):
        t0 = time.perf_counter()
        write_windows(self.out_path, {"distance": distance}, [window], layouts=layouts)
        return t0, time.perf_counter()

    def start(self, distance):
        import concurrent.futures
        layouts = shard_layouts(self.out_path, ["distance"])  # once, not per window
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max(1, min(io_threads(), len(self.windows))))
        self.futures = [self.pool.submit(self._one, distance, w, layouts)
                        for w in self.windows]

    def wait(self):
        if self.pool is None:
            return []
        try:
            return [fut.result() for fut in self.futures]
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def stop(self):
        """After a failure: no write runs on (their own errors are not news then)."""
        try:
            self.wait()
        except Exception:  # noqa: BLE001 - the failure being handled is the one to report
            pass


def _write(out_path, solved, windows, layouts=None):
    """The cost-write task: ``windows`` of every layer the solve did not write itself
    (``layouts``: :func:`terrain.grid.cost_outputs.shard_layouts` of them, or None)."""
    res, f = solved
    t0 = time.perf_counter()
    layers = {name: getattr(res, name) for name in LAYERS
              if not (name == "distance" and "early_writes" in res.stats)}
    if f is not None:
        layers["friction"] = f
    if layouts is not None and not set(layers) <= set(layouts):
        layouts = None
    write_windows(out_path, layers, windows, layouts=layouts)
    return t0, time.perf_counter()


def _finish(out_path, solved, writes, meta):
    res, _ = solved
    d = res.distance
    if "reached_cells" in res.stats:  # counted on the device already
        reached, max_d = res.stats["reached_cells"], res.stats["max_distance"]
    else:
        reached = int(np.count_nonzero(~np.isnan(d)))
        max_d = float(np.nanmax(d)) if reached else None
    writes = list(writes) + list(res.stats.get("early_writes", []))
    summary = dict(meta)
    summary.update({
        "reached_cells": reached,
        "max_distance": max_d,
        "solve_seconds": round(res.stats.get("seconds", 0.0), 6),
        "read_seconds": round(res.stats.get("read_seconds", 0.0), 6),
        "write_seconds": round(float(sum(t1 - t0 for t0, t1 in writes)), 6),
        "write_wall_seconds": round(max(t1 for _, t1 in writes) - min(t0 for t0, _ in writes)
                                    if writes else 0.0, 6),
        "queue": res.stats.get("queue"),
        "phases": res.stats.get("phases"),
        "device": res.stats.get("device"),
    })
    if res.stats.get("delta") is not None and math.isfinite(res.stats["delta"]):
        summary["near_far_delta"] = float(res.stats["delta"])  # inf (one bucket) is the default
    group = zarr.open_group(store=str(out_path), mode="r+")
    group.attrs.update({"cost_distance": summary})
    return summary


def _task_arguments(out_path, spec, windows, backend, friction_store):
    """What the tasks take, for the graph and the in-process path alike: the solve's spec,
    the friction's ``(store, layer)`` or None, the summary's fixed entries and whether the
    output gets a ``friction`` layer."""
    friction_src = None
    if friction_store is not None:
        friction_src = (tuple(friction_store) if isinstance(friction_store, (tuple, list))
                        else (friction_store, "elevation"))
    with_friction = friction_store is not None and spec.get("write_friction", True)
    if spec["algorithm"] == "in-core":  # the solve writes the distances itself
        spec = dict(spec, windows=list(windows), out_path=str(out_path))
    meta = {k: spec[k] for k in ("cost", "connectivity", "max_cost", "algorithm", "tile")}
    meta.update({"rows": spec["shape"][0], "cols": spec["shape"][1], "backend": backend})
    return spec, friction_src, meta, with_friction


def build_cost_distance_graph(dem_path, out_path, spec, sources, start_costs, windows,
                              backend="cpu", upstream=None, geo=None, friction_store=None):
    """Dask graph computing the cost distance of the DEM in ``dem_path`` into ``out_path``.

    Returns a Delayed whose value is the summary dict.
    """
    import dask
    token = dask.base.tokenize(str(dem_path), str(out_path), time.time_ns())
    name = (lambda stage: f"cost-{stage}-{token}")
    spec, friction_src, meta, with_friction = _task_arguments(out_path, spec, windows, backend,
                                                              friction_store)
    prepared = dask.delayed(_prepare, pure=False)(
        out_path, spec["shape"], spec["tile"], geo or {}, with_friction, upstream,
        dask_key_name=name("prepare"))
    solved = dask.delayed(_solve, pure=False)(dem_path, friction_src, spec, sources,
                                              start_costs, backend, prepared,
                                              dask_key_name=name("solve"))
    # one task per shard window: the threads compress in parallel (Blosc releases the GIL)
    writes = [dask.delayed(_write, pure=False)(out_path, solved, [w],
                                               dask_key_name=(name("write"), i))
              for i, w in enumerate(windows)]
    return dask.delayed(_finish, pure=False)(out_path, solved, writes, meta,
                                             dask_key_name=name("finish"))


def in_process_applies(algorithm, scheduler=None):
    """True when a run takes the in-process path (module docstring): the in-core algorithm,
    no ``scheduler`` asked for, no cluster active (a batch's). A GPU count does not change
    it: a grid the in-core algorithm takes fits one device, and GPU 0 solves it here.

    >>> in_process_applies("in-core"), in_process_applies("in-core", "threads")
    (True, False)
    >>> in_process_applies("tiled")
    False
    """
    import sys
    cluster = sys.modules.get("pipelines.cluster")  # not imported: no cluster is active
    return (algorithm == "in-core" and scheduler is None
            and (cluster is None or cluster._active_client is None))


def run_in_process(dem_path, out_path, spec, sources, start_costs, windows, backend="cpu",
                   upstream=None, geo=None, friction_store=None):
    """The in-core run without a task graph: the same task functions as
    :func:`build_cost_distance_graph`, called here (module docstring), so the store is the
    graph's byte for byte. A raster input's ingest graph (``upstream``) runs on Dask's
    threads first. The layers are created on a pool thread while the solve reads the grid;
    the distances are written from the moment the solve has them, the other layers' shard
    windows by the pool once the solve is done. Returns the summary, its ``wall_seconds``
    the wall seconds of each step (and of the start-up:
    :func:`pipelines.cost_distance_start.startup_seconds`). On the GPU the solve's outputs
    stay on the device and the writers copy them off shard by shard into small pinned
    tiles (``grid_sssp(on_device=True)``, :func:`terrain.grid.cost_outputs.write_windows`):
    no host array of the grid's size but the DEM and a friction raster (issue 11)."""
    import concurrent.futures

    wall = {}
    t0 = time.perf_counter()
    if upstream:
        from . import cluster
        with cluster.open_scheduler("threads"):
            cluster.compute(*upstream, label="cost-ingest")
        wall["ingest"] = time.perf_counter() - t0
    spec, friction_src, meta, with_friction = _task_arguments(out_path, spec, windows, backend,
                                                              friction_store)
    from .cost_distance_start import outputs_on_device
    if backend == "gpu" and spec["algorithm"] == "in-core" and outputs_on_device():
        spec = dict(spec, on_device=True)  # the layers written off the device (issue 11)
    pool = concurrent.futures.ThreadPoolExecutor(io_threads(),
                                                 thread_name_prefix="terrain-cost")
    # the distances' writes run on while the other layers are written (not waited for
    # in between: the writes are not CPU-bound, and one set fills the other's gaps)
    writer = _EarlyWriter(out_path, spec["windows"])
    try:
        t1 = time.perf_counter()
        prepared = pool.submit(_prepare, out_path, spec["shape"], spec["tile"], geo or {},
                               with_friction, None)
        solved = _solve(dem_path, friction_src, spec, sources, start_costs, backend, prepared,
                        writer=writer)
        t2 = time.perf_counter()
        layouts = shard_layouts(out_path, list(LAYERS) + ["friction"] * (solved[1] is not None))
        writes = [pool.submit(_write, out_path, solved, [w], layouts) for w in windows]
        writes = [f.result() for f in writes]
        if "early_writes" in solved[0].stats:
            solved[0].stats["early_writes"] = writer.wait()
        t3 = time.perf_counter()
    except BaseException:  # nothing may write into the partial output after this
        pool.shutdown(wait=True, cancel_futures=True)
        writer.stop()
        raise
    pool.shutdown(wait=True)
    summary = _finish(out_path, solved, writes, meta)
    t4 = time.perf_counter()
    wall.update({"read + solve": t2 - t1, "writes after the solve": t3 - t2,
                 "finish": t4 - t3})
    from .cost_distance_start import startup_seconds
    summary["path"] = "in-process"
    summary["wall_seconds"] = {**startup_seconds(),
                               **{k: round(v, 6) for k, v in wall.items()}}
    return summary


def pin_to_gpu_workers(graph, algorithm, workers):
    """``graph`` (a ``cost-distance`` Delayed) with its tasks placed on the GPU ``workers``
    (module docstring): tiled, the groups and shards spread over them
    (:func:`pipelines.cost_distance_tiled.spread_over_workers`); in core, the graph's own
    tasks (not the ingests) on the first. Without ``workers``, ``graph`` itself."""
    if not workers:
        return graph
    token = str(graph.key).rsplit("-", 1)[1]  # cost-[tiled-]finish-TOKEN
    if algorithm == "tiled":
        from .cost_distance_tiled import spread_over_workers
        return spread_over_workers(graph, token, workers)
    from .quadtree import pin_tasks

    def on_first(key):
        return workers[0] if (key if isinstance(key, str) else key[0]).endswith(token) else None
    return pin_tasks(graph, on_first, f"cost-graph-{token}")


def run_cost_distance(input_path, output_path=None, *, points=(), cells=(), sources_file=None,
                      start_cost=None, cost="absdiff", friction=None, connectivity=8,
                      max_cost=None, tile=512, backend=None, scheduler=None, overwrite=False,
                      geotiff_dir=None, algorithm="auto", tile_sssp=None, max_height=None,
                      reuse=None, gpus=None, memory=None):
    """Cost distance from sources over a DEM (raster or tile store) into ``output_path``.

    ``gpus`` (``"N"`` or ``"all"``): one worker process per GPU (module docstring).
    ``memory`` (bytes or a size such as ``"1.5GB"``): the memory budget that chooses the
    algorithm and sizes the blocked algorithm's blocks (default: the available RAM).
    Returns the summary dict (also in the output's ``cost_distance`` attribute).
    """
    t_start = time.perf_counter()
    if gpus is not None:
        from .cluster import gpu_count_backend  # here: an in-core run needs no Dask
        backend = gpu_count_backend(gpus, backend, input_path, scheduler)
    be = get_backend(backend)
    connectivity = check_cost_options(cost, friction, connectivity, max_cost, start_cost)
    inp = Path(input_path)
    out = Path(output_path) if output_path else default_output(inp)
    # the output may not be (or hold, or lie in) the DEM, the friction raster, the sources
    # file or the reused store: --overwrite would replace the input (issue 11)
    inputs = [inp, friction, sources_file, reuse]
    check_outputs(inputs, [out, *geotiff_paths(geotiff_dir)], overwrite)
    if is_store(inp):
        store = open_store(inp)
        shape, tile = store.shape, store.tile
        gt = list(store.geotransform)
        geo = {"geotransform": gt, "crs": store.attrs.get("crs"), "source": str(inp)}
        shard = store.tiles_per_shard
    else:
        from terrain.io import open_grid
        grid = open_grid(inp)
        shape, gt = grid.shape, list(grid.geotransform)
        geo = {"geotransform": gt, "crs": grid.crs, "source": str(inp)}
        shard = tiles_per_shard(tile, shape)
    geo["cost"] = cost
    shape = tuple(int(s) for s in shape)
    srcs = resolve_sources(gt, shape, points, cells, sources_file, label=f"{inp}: ")
    if start_cost is None:
        costs = None
    else:
        costs = np.broadcast_to(np.asarray(start_cost, np.float64), (len(srcs),)).copy()
    if friction is not None:
        _check_friction_grid(friction, shape, gt)
    reuse_kind = None if reuse is None else reusable_kind(reuse)
    memory_bytes = _memory_bytes(memory)
    spec = {"shape": shape, "tile": int(tile), "tiles_per_shard": shard, "cost": cost,
            "connectivity": connectivity, "cellsize": (abs(gt[1]), abs(gt[5])),
            "max_cost": None if max_cost is None else float(max_cost),
            "algorithm": choose_algorithm(shape, friction is not None, algorithm=(
                "tiled" if reuse_kind == "tiled" else algorithm), backend=be.name,
                memory_bytes=memory_bytes),
            "input": str(inp), "friction_path": None if friction is None else str(friction)}
    if spec["algorithm"] == "blocked":
        _blocked_spec(spec, memory_bytes, reuse, be.name)
    if reuse_kind == "in-core":
        spec["reuse_incore"] = check_incore_reuse(reuse, spec, inp, friction, gt)
        spec.update(near_far_delta=spec["reuse_incore"]["near_far_delta"],
                    friction_checked=True, write_friction=False)
    if spec["algorithm"] == "tiled":
        from .cluster import gpu_count
        from .cost_distance_tiled import tiled_spec
        tiled_spec(spec, tile_sssp, max_height, reuse, backend=be.name,
                   devices=gpu_count(gpus) or 1)
    if spec["algorithm"] == "tiled":
        try:
            import terrain.grid.sssp_tiled  # noqa: F401
        except ImportError:
            raise InputError(f"{inp}: {shape[0]} x {shape[1]} cells do not fit in memory and "
                             f"the tiled algorithm is not available") from None
    friction_tmp = None
    try:
        with atomic_output(out, overwrite, inputs=inputs) as tmp:
            friction_tmp = Path(tmp).with_name(Path(tmp).name + ".friction")
            summary = _run_graph(inp, tmp, friction_tmp, friction, tile, spec, srcs, costs,
                                 shard, shape, be, geo, scheduler, gpus=gpus)
            summary["sources"] = [
                {"index": i, "row": r, "col": c, "x": cell_centre(r, c, gt)[0],
                 "y": cell_centre(r, c, gt)[1],
                 "start_cost": 0.0 if costs is None else float(costs[i])}
                for i, (r, c) in enumerate(srcs)]
            summary["seconds"] = round(time.perf_counter() - t_start, 6)
            summary["output"] = str(out)
            dem = "elevation" if dem_in_output(tmp) else str(inp)
            model_attrs = cost_model_attributes(spec, srcs, costs, friction is not None, dem)
            attrs = {"cost_distance": summary, "cost_model": model_attrs}
            if spec["algorithm"] == "in-core":
                attrs["cost_reuse"] = reuse_attributes(spec, inp, friction, gt, dem,
                                                       summary.get("near_far_delta"))
                if spec.get("reuse_incore"):
                    summary["reuse"] = str(reuse)
                    summary["reused"] = spec["reuse_incore"]["reused"]
            zarr.open_group(store=str(tmp), mode="r+", use_consolidated=False).attrs.update(
                attrs)
            finish_store(tmp)
            if geotiff_dir:  # from the partial: a failing GeoTIFF leaves no store behind
                summary["geotiff"] = write_geotiffs(tmp, geotiff_dir, overwrite)
    finally:
        if friction_tmp is not None:
            shutil.rmtree(friction_tmp, ignore_errors=True)
    return summary


def _memory_bytes(memory):
    """The ``memory`` budget in bytes (None: not given)."""
    if memory is None:
        return None
    from .cost_distance_blocked import parse_memory
    return parse_memory(memory)


def _blocked_spec(spec, memory_bytes, reuse, backend):
    """Complete ``spec`` for the blocked algorithm (in place): its block side
    (:func:`pipelines.cost_distance_blocked.block_side`); CPU only, no ``--reuse``."""
    from .cost_distance_blocked import block_side
    if backend != "cpu":
        raise InputError(f"{spec['input']}: the blocked algorithm runs on the CPU only")
    if reuse is not None:
        raise InputError(f"{spec['input']}: the blocked algorithm keeps no index to reuse")
    if memory_bytes is None:
        try:
            import psutil
            memory_bytes = psutil.virtual_memory().available
        except Exception:  # noqa: BLE001 - no psutil: no budget, the largest blocks
            memory_bytes = None
    spec["block"] = block_side(spec["tile"], spec["tile"] * spec["tiles_per_shard"],
                               spec["shape"], memory_bytes, os.cpu_count() or 1)
    spec["memory_bytes"] = memory_bytes


def dem_in_output(path):
    """True when the output store holds the DEM (``elevation``: a raster input was ingested)."""
    return "elevation" in zarr.open_group(store=str(path), mode="r", use_consolidated=False)


def cost_model_attributes(spec, sources, start_costs, has_friction, dem):
    """What ``verify`` needs to recompute every arc cost: the store's ``cost_model`` attribute.

    ``dem`` is ``"elevation"`` (the layer of this store) or the path of the tile store the
    distances were computed from; ``friction`` names this store's friction layer or is None.
    """
    return {"cost": spec["cost"], "connectivity": int(spec["connectivity"]),
            "cellsize": [float(v) for v in spec["cellsize"]],
            "max_cost": spec["max_cost"],
            "sources": [[int(r), int(c)] for r, c in sources],
            "start_costs": [0.0] * len(sources) if start_costs is None
            else [float(v) for v in start_costs],
            "dem": dem, "friction": "friction" if has_friction else None}


def _run_graph(inp, tmp, friction_tmp, friction, tile, spec, srcs, costs, shard, shape, be,
               geo, scheduler, gpus=None):
    """Build the graph (ingests included) and compute it; returns the summary. On the GPU
    with Dask's local schedulers (this process's threads) the in-core solve's outputs stay
    on the device, as on the in-process path (:func:`run_in_process`)."""
    upstream = []
    ru = spec.get("reuse_incore")
    if ru is not None:  # the earlier run's checked inputs, linked into this output
        group = zarr.open_group(store=str(tmp), mode="w-", zarr_format=3)
        dem_path = inp
        if ru["dem_in_store"]:
            link_layer(ru["store"], tmp, "elevation")
            keep = {k: v for k, v in ru["store_attrs"].items() if k not in _RUN_ATTRS}
            group.attrs.update(keep)
            dem_path = tmp
        if ru["friction"]:
            link_layer(ru["store"], tmp, "friction")
        friction_store = (tmp, "friction") if ru["friction"] else None
    else:
        if is_store(inp):
            zarr.open_group(store=str(tmp), mode="w-", zarr_format=3)
            dem_path = inp
        else:
            from .ingest import build_ingest_graph
            upstream.append(build_ingest_graph(inp, tmp, tile))
            dem_path = tmp
        friction_store = None
        if friction is not None:
            if is_store(friction):
                friction_store = Path(friction)
            else:
                from .ingest import build_ingest_graph
                friction_store = friction_tmp
                upstream.append(build_ingest_graph(friction, friction_store, tile))
    windows = _shard_windows(shape, tile, shard)
    if spec["algorithm"] == "blocked":
        from .cost_distance_blocked import run_blocked
        return run_blocked(dem_path, tmp, spec, srcs, costs, friction_store, upstream, geo,
                           scheduler, be.name)
    if in_process_applies(spec["algorithm"], scheduler):
        summary = run_in_process(dem_path, tmp, spec, srcs, costs, windows, be.name, upstream,
                                 geo, friction_store)
        if gpus is not None:  # as mst's route: a grid that fits one GPU runs on GPU 0 of N
            from .cluster import gpu_count
            n = gpu_count(gpus)
            summary.update(gpus=n, gpus_used=1, note=f"fits one GPU: in core on GPU 0 of {n}")
        return summary
    from . import cluster
    if (be.is_gpu and spec["algorithm"] == "in-core" and gpus is None
            and scheduler in cluster.LOCAL_SCHEDULERS):
        from .cost_distance_start import outputs_on_device
        if outputs_on_device():  # this process's threads write: off the device (issue 11)
            spec = dict(spec, on_device=True)
    if spec["algorithm"] == "tiled":
        from .cost_distance_tiled import build_cost_distance_tiled
        graph = build_cost_distance_tiled(dem_path, tmp, spec, srcs, costs, be.name, upstream,
                                          geo, friction_store)
    else:
        graph = build_cost_distance_graph(dem_path, tmp, spec, srcs, costs, windows, be.name,
                                          upstream, geo, friction_store)
    with cluster.open_scheduler(scheduler, gpus=gpus):
        workers = cluster.active_gpu_workers()  # --gpus (here or the batch's): one per GPU
        graph = pin_to_gpu_workers(graph, spec["algorithm"], workers)
        (summary,) = cluster.compute(graph, label="cost-distance")
    if workers:  # the in-core solve holds the grid on one device
        summary.update(gpus=len(workers),
                       gpus_used=len(workers) if spec["algorithm"] == "tiled" else 1)
    return summary


def _shard_windows(shape, tile, shard):
    side = tile * shard
    return [(r, min(r + side, shape[0]), c, min(c + side, shape[1]))
            for r in range(0, shape[0], side) for c in range(0, shape[1], side)]


# ------------------------------------------------------------------------------------------
# --reuse of an in-core run

#: attributes of one run, not of the raster (left behind when a store's DEM is linked)
_RUN_ATTRS = ("cost_distance", "cost_model", "cost_reuse")


def input_fingerprint(path):
    """What says that a raster (a file, or a tile store's ``elevation``) is unchanged: a hash
    of the size and modification time of each of its files.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "a.asc")
    >>> _ = open(p, "w").write("x")
    >>> input_fingerprint(p) == input_fingerprint(p)
    True
    """
    import hashlib
    p = Path(path)
    if p.is_dir():
        files = [p / "zarr.json"] + sorted(f for f in (p / "elevation").rglob("*") if f.is_file())
    else:
        files = [p]
    entries = []
    for f in files:
        st = f.stat()
        entries.append([str(f.relative_to(p)) if p.is_dir() else f.name, st.st_size,
                        st.st_mtime_ns])
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


def reuse_attributes(spec, inp, friction, geotransform, dem, delta):
    """The ``cost_reuse`` attribute of an in-core run's store: what a later ``--reuse`` query
    checks (the input's and friction's fingerprints, grid, cost model) and takes (the DEM,
    the checked friction layer, the GPU queue's bucket width)."""
    ru = spec.get("reuse_incore")
    return {"algorithm": "in-core",
            "input": ru["input"] if ru else input_fingerprint(inp),
            "friction": None if friction is None else (
                ru["friction_fingerprint"] if ru else input_fingerprint(friction)),
            "shape": [int(v) for v in spec["shape"]],
            "geotransform": [float(v) for v in geotransform],
            "cost": spec["cost"], "connectivity": int(spec["connectivity"]),
            "cellsize": [float(v) for v in spec["cellsize"]],
            "dem": dem, "near_far_delta": None if delta is None else float(delta)}


def reusable_kind(path):
    """``"tiled"`` (the store holds a tiled index) or ``"in-core"`` (an in-core run's
    ``cost_reuse`` attribute); :class:`InputError` for anything else."""
    try:
        group = zarr.open_group(store=str(path), mode="r", use_consolidated=False)
        if "sssp_index" in group:
            return "tiled"
        if isinstance(group.attrs.get("cost_reuse"), dict):
            return "in-core"
    except Exception:
        pass
    raise InputError(f"{path}: not a cost-distance store that can be reused")


def check_incore_reuse(path, spec, inp, friction, geotransform):
    """What an in-core ``--reuse`` query takes from the earlier run's store ``path``;
    :class:`InputError` unless that run had the same input (fingerprint), friction, grid,
    cost, connectivity and cell size."""
    group = zarr.open_group(store=str(path), mode="r", use_consolidated=False)
    got = dict(group.attrs["cost_reuse"])
    if spec["algorithm"] != "in-core":
        raise InputError(f"{path}: holds an in-core run's inputs; this run is {spec['algorithm']}"
                         " (a tiled run reuses a tiled run's store)")
    want = {"input": input_fingerprint(inp),
            "friction": None if friction is None else input_fingerprint(friction),
            "shape": [int(v) for v in spec["shape"]],
            "geotransform": [float(v) for v in geotransform],
            "cost": spec["cost"], "connectivity": int(spec["connectivity"]),
            "cellsize": [float(v) for v in spec["cellsize"]]}
    diff = [k for k in want if got.get(k) != want[k]]
    if diff:
        what = {"input": f"input {inp} does not match the one it was computed from (size or "
                         f"modification time)",
                "friction": "friction raster does not match"}
        raise InputError(f"{path}: cannot reuse: " + "; ".join(
            what.get(k, f"{k} {got.get(k)} (this run: {want[k]})") for k in diff))
    dem_in_store = got.get("dem") == "elevation"
    if dem_in_store and "elevation" not in group:
        raise InputError(f"{path}: cannot reuse: its 'elevation' layer is missing")
    has_f = friction is not None
    if has_f and "friction" not in group:
        raise InputError(f"{path}: cannot reuse: its 'friction' layer is missing")
    reused = (["ingested DEM"] if dem_in_store else []) + (
        ["checked friction"] if has_f else []) + (
        ["near-far bucket width"] if got.get("near_far_delta") is not None else [])
    return {"store": str(path), "dem_in_store": dem_in_store, "friction": has_f,
            "friction_fingerprint": want["friction"], "input": want["input"],
            "near_far_delta": got.get("near_far_delta"),
            "store_attrs": dict(group.attrs), "reused": reused}


def geotiff_paths(directory):
    """The files :func:`write_geotiffs` would write into ``directory`` that it must not find
    there; when it does not exist yet, the directory itself (it is made then: its parent
    must exist and be writable, checked with the outputs); none when it is not given;
    :class:`InputError` when it is not a directory.

    >>> [p.name for p in geotiff_paths(".")]
    ['distance.tif', 'allocation.tif', 'backlink.tif']
    >>> [str(p) for p in geotiff_paths("no-such-dir")]
    ['no-such-dir']
    """
    if not directory:
        return []
    folder = Path(directory)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{directory}: exists and is not a directory")
    return [folder / f"{name}.tif" for name in GEOTIFF_LAYERS] if folder.is_dir() else [folder]


def write_geotiffs(store_path, directory, overwrite=False, cog=True):
    """Write ``distance``, ``allocation`` and ``backlink`` of a cost store as Cloud-Optimized
    GeoTIFFs ``DIR/<layer>.tif`` (:func:`terrain.io.geotiff.write_geotiff`: overviews, nodata,
    band descriptions; each appears atomically). Nodata: distance NaN, allocation -1,
    backlink 255 (the layers' fill values). Returns the paths written."""
    from terrain.io.geotiff import write_geotiff

    group = zarr.open_group(store=str(store_path), mode="r", use_consolidated=False)
    cost = (group.attrs.get("cost_model") or {}).get("cost", "absdiff")
    attrs = layer_attributes(cost)
    directory = Path(directory)
    directory.mkdir(exist_ok=True)  # its parent was checked with the outputs
    written = []
    for name in GEOTIFF_LAYERS:
        _, fill, _ = LAYERS[name]
        a = attrs[name]
        tags = {"units": a["units"]}
        if name == "backlink":
            tags.update({f"code_{k}": v for k, v in BACKLINK_CODES.items()})
        target = directory / f"{name}.tif"
        write_geotiff(store_path, name, target, cog=cog, nodata=fill,
                      description=f"{a['long_name']}: {a['description']}", tags=tags,
                      resampling="average" if name == "distance" else "nearest",
                      overwrite=overwrite)
        written.append(str(target))
    return written


def _format_summary(s):
    md = s["max_distance"]
    return "\n".join([
        f"cost-distance {s['output']}",
        f"grid      {s['rows']} x {s['cols']}, {s['connectivity']}-connected, cost {s['cost']}"
        + (f", max cost {s['max_cost']:g}" if s.get("max_cost") else ""),
        f"sources   {len(s['sources'])}",
        f"reached   {s['reached_cells']} cells, max distance "
        + ("-" if md is None else f"{md:.10g}"),
        f"algorithm {s['algorithm']} ({s.get('queue')}), backend {s['backend']} ({s['device']})",
        f"time      {s['seconds']:.2f} s (solve {s['solve_seconds']:.2f} s, read "
        f"{s['read_seconds']:.2f} s, write {s['write_seconds']:.2f} s)",
    ] + (["phases    " + ", ".join(f"{k} {v:.2f} s" for k, v in s["phases"].items())]
         if s.get("phases") else [])
      + ([f"blocks    {s['blocks']} of {s['block']}², solved "
          f"{s['stage_stats']['stage1']['visits']} times for the distances, "
          f"{s['stage_stats']['stage2']['visits']} for the labels"]
         if s.get("stage_stats") else [])
      + ([f"gpus      {s['note']}" if s.get("note")
          else f"gpus      {s['gpus_used']} of {s['gpus']} GPU workers"] if s.get("gpus") else [])
      + ([f"geotiff   {', '.join(s['geotiff'])}"] if s.get("geotiff") else []))


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
    model = cost_model_code(cost)
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


def cost_distance_command(args):
    """``terrain cost-distance INPUT --source X,Y ... [-o OUT.zarr] ...``."""
    if getattr(args, "dry_run", False):  # the plan (pipelines/_plan.py), nothing written
        from ._plan import dry_run_command
        return dry_run_command("cost-distance", args)
    summary = run_cost_distance(
        args.input, args.output, points=args.source or (), cells=args.source_cell or (),
        sources_file=args.sources, start_cost=args.start_cost, cost=args.cost,
        friction=args.friction, connectivity=args.connectivity, max_cost=args.max_cost,
        tile=args.tile, backend=args.backend, scheduler=args.scheduler,
        overwrite=args.overwrite, geotiff_dir=args.geotiff_dir,
        algorithm=getattr(args, "algorithm", "auto"), tile_sssp=getattr(args, "tile_sssp", None),
        max_height=getattr(args, "max_height", None), reuse=getattr(args, "reuse", None),
        gpus=getattr(args, "gpus", None), memory=getattr(args, "memory", None))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(_format_summary(summary))
    return 0


# ------------------------------------------------------------------------------------------
# least-cost paths


def trace_paths(store_path, cells):
    """Least-cost paths from ``cells`` back to their sources along the backlinks.

    Reads only the tiles the walk passes through (one tile of each layer at a time).
    Returns a list of dicts ``{"cells": [(row, col), ...] from the source to the cell,
    "cost": distance, "source": allocation}``; :class:`InputError` for an unreached cell.
    """
    from terrain.grid.costs import ARC_DC, ARC_DR
    group = zarr.open_group(store=str(store_path), mode="r")
    for name in LAYERS:
        if name not in group:
            raise InputError(f"{store_path}: not a cost-distance store (no {name!r} layer)")
    back, dist, alloc = group["backlink"], group["distance"], group["allocation"]
    tile = back.chunks[0]
    cache = {}

    def tile_of(r, c):
        key = (r // tile, c // tile)
        if key not in cache:
            if len(cache) > 64:
                cache.clear()
            r0, c0 = key[0] * tile, key[1] * tile
            cache[key] = np.asarray(back[r0:r0 + tile, c0:c0 + tile])
        return cache[key], key[0] * tile, key[1] * tile

    out = []
    limit = back.shape[0] * back.shape[1]
    for r, c in cells:
        d = float(dist[r, c])
        if math.isnan(d):
            raise InputError(f"{store_path}: cell ({r}, {c}) is not reached from any source")
        path = [(r, c)]
        while True:
            t, r0, c0 = tile_of(r, c)
            code = int(t[r - r0, c - c0])
            if code == 0:
                break
            if code == 255 or len(path) > limit:
                raise InputError(f"{store_path}: broken backlink at cell ({r}, {c})")
            r, c = r + int(ARC_DR[code - 1]), c + int(ARC_DC[code - 1])
            path.append((r, c))
        path.reverse()
        out.append({"cells": path, "cost": d, "source": int(alloc[path[-1][0], path[-1][1]])})
    return out


def path_command(args):
    """``terrain path COSTSTORE --to X,Y [--to ...] -o path.geojson``."""
    store = Path(args.store)
    if not is_store(store):
        raise InputError(f"{store}: not a cost-distance store")
    out = Path(args.output)
    check_outputs([store], [out], args.overwrite)
    group = zarr.open_group(store=str(store), mode="r")
    if "backlink" not in group:
        raise InputError(f"{store}: not a cost-distance store (no 'backlink' layer)")
    shape = group["backlink"].shape
    gt = group.attrs.get("geotransform") or [0.0, 1.0, 0.0, float(shape[0]), 0.0, -1.0]
    targets = [map_to_cell(*_parse_pair(t, "--to"), gt, shape, what=f"{store}: target")
               for t in args.to]
    paths = trace_paths(store, targets)
    features = []
    for (text, p) in zip(args.to, paths):
        coords = [list(cell_centre(r, c, gt)) for r, c in p["cells"]]
        if len(coords) == 1:
            coords = coords * 2  # a LineString needs two positions
        features.append({"type": "Feature",
                         "geometry": {"type": "LineString", "coordinates": coords},
                         "properties": {"cost": p["cost"], "source": p["source"],
                                        "to": text, "cells": len(p["cells"])}})
    doc = {"type": "FeatureCollection", "features": features}
    crs = group.attrs.get("crs")
    with atomic_output(out, args.overwrite, inputs=[store]) as tmp:
        Path(tmp).write_text(json.dumps(doc))
    print(f"path      {out}: {len(features)} path(s)"
          + "".join(f"\n  to {f['properties']['to']}: cost {f['properties']['cost']:.10g}, "
                    f"source {f['properties']['source']}, {f['properties']['cells']} cells"
                    for f in features)
          + ("" if not crs else ""))
    return 0
