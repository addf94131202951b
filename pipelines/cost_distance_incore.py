"""``cost-distance`` in core: the grid held whole (:func:`terrain.grid.sssp.grid_sssp`), its
layers written shard by shard: ``prepare`` (the layers), ``solve`` (the distances handed to a
pool of writers the moment they are final), ``write`` per shard window, ``finish``. On the
GPU the layers stay on the device and the writers copy them off tile by tile. The tasks run
in this process with no task graph unless the run is on a cluster
(:func:`pipelines.cluster.runs_in_process`); there they form a Dask graph that writes the
same bytes (docs/cost-distance.md).

``--reuse STORE`` of an in-core run's store links STORE's ``elevation`` and ``friction``
layers into the output once the input's fingerprint, grid and cost model match
(:func:`check_incore_reuse`); the GPU's bucket width is STORE's.
"""

import concurrent.futures
import math
import time

import numpy as np

from terrain.backend import get_backend
from terrain.errors import InputError
from terrain.grid.cost_outputs import LAYERS
from terrain.grid.costs import check_friction
from terrain.grid.sssp import padded_grid
from terrain.io import open_grid
from terrain.io.remote import input_fingerprint, is_remote
from terrain.io.zarr_meta import open_group
from terrain.startup import trim_free_memory
from terrain.tiles import io_threads, release_buffers
from terrain.tiles.store import read_layer, shard_layouts, write_windows

from .cluster import runs_in_process
from .cost_distance_store import prepare_layers, summary_base
from .ingest import build_ingest_graph, write_elevation

__all__ = ["run_incore", "build_incore_graph",
           "reusable_kind", "check_incore_reuse", "reuse_attributes", "RUN_ATTRS"]

#: attributes of one run, not of the raster (left behind when a store's DEM is linked)
RUN_ATTRS = ("cost_distance", "cost_model", "cost_reuse")


class _DistanceWriter:
    """Writes the ``distance`` layer as soon as the solve has the distances, on ``pool`` (the
    run's writers, shared with the other layers' writes: one writer a core, whose encoding
    buffers are what the writes hold beside the grids; a pool of its own without one);
    :meth:`wait` returns each shard window's ``(start, end)``."""

    def __init__(self, out_path, windows, pool=None):
        self.out_path, self.windows = out_path, windows or []
        self.pool, self.own, self.futures = pool, pool is None, []

    def _one(self, distance, window, layouts):
        t0 = time.perf_counter()
        write_windows(self.out_path, {"distance": distance}, [window], layouts=layouts)
        return t0, time.perf_counter()

    def start(self, distance):
        layouts = shard_layouts(self.out_path, ["distance"])  # once, not per window
        if self.own:
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
            if self.own:
                self.pool.shutdown(wait=True, cancel_futures=True)
                self.pool = None

    def stop(self):
        """After a failure: no write runs on (their own errors are not news then)."""
        for fut in self.futures:
            fut.cancel()
        try:
            self.wait()
        except Exception:  # noqa: BLE001 - the failure being handled is the one to report
            pass


def _solve(dem_path, friction_src, spec, sources, start_costs, backend, prepared,
           writer=None, ingested=None):
    """The solve task: reads the grid, solves, returns ``(result, friction or None)``; the
    distances written as soon as known (with ``writer``: left running for the caller).
    ``ingested``: ``{store: elevations}`` this process just wrote, not read back."""
    from terrain.grid.sssp import grid_sssp

    t0 = time.perf_counter()
    ingested = ingested or {}

    def layer(store, name):
        held = ingested.get(str(store)) if name == "elevation" else None
        return held if held is not None else read_layer(store, name, np.float32)

    z = layer(dem_path, "elevation")
    f = None
    if friction_src is not None:
        same = (str(friction_src[0]), friction_src[1]) == (str(dem_path), "elevation")
        f = z if same else layer(friction_src[0], friction_src[1])
        if not spec.get("friction_checked"):
            f = check_friction(f, name=str(spec["friction_path"]))
    t_read = time.perf_counter() - t0
    if hasattr(prepared, "result"):  # in process: the layers, created beside the read
        prepared.result()
    del prepared
    # what the reads or the ingest left, before the solve's grids and the writers' buffers:
    # the shard readers' and writers' reusable buffers (40-ft store on an H200 host, 16
    # readers: the writes after the solve peaked at 2.75 GB with them; 4096² ingest on the
    # 2-core VM: 7.5 MB), and GDAL's block cache of a raster read
    release_buffers()
    trim_free_memory()
    # the friction grid is written after the solve unless the output links it from the
    # elevation layer: else the solve may keep its labels in it
    keep_f = bool(spec.get("write_friction", True) and not spec.get("friction_from"))
    own = writer is None
    writer = _DistanceWriter(spec["out_path"], spec["windows"]) if own else writer
    on_device = bool(spec.get("on_device"))
    try:
        res = grid_sssp(z, sources, start_costs, cost=spec["cost"], friction=f,
                        connectivity=spec["connectivity"], cellsize=spec["cellsize"],
                        max_cost=spec["max_cost"], stops=spec.get("stops"), backend=backend,
                        delta=spec.get("near_far_delta"), hops=False,
                        on_distance=writer.start, on_device=on_device,
                        overwrite_friction=not keep_f)
        if not on_device:
            res = res.to_host()
    except InputError as e:
        writer.stop()
        # a source on the friction's nodata: the friction's file named
        named = spec.get("friction_path") if getattr(e, "raster", None) == "friction" else None
        raise InputError(f"{named or spec['input']}: {e}", item=e.item) from None
    except BaseException:
        writer.stop()
        raise
    res.stats["early_writes"] = writer.wait() if own else []
    res.stats["read_seconds"] = t_read
    return res, (f if keep_f else None)


def _write(out_path, solved, windows, layouts=None):
    """A write task: ``windows`` of every layer the solve did not write itself
    (``layouts``: :func:`terrain.tiles.store.shard_layouts` of them, or None)."""
    res, f = solved
    t0 = time.perf_counter()
    layers = {name: getattr(res, name) for name in LAYERS if name != "distance"}
    if f is not None:
        layers["friction"] = f
    write_windows(out_path, layers, windows, layouts=layouts)
    return t0, time.perf_counter()


def _finish(solved, writes, meta):
    """The finish task: the summary (:func:`pipelines.cost_distance.run_cost_distance` writes
    it into the store's attributes)."""
    res, _ = solved
    d = res.distance
    if "reached_cells" in res.stats:  # counted on the device already
        reached, max_d = res.stats["reached_cells"], res.stats["max_distance"]
    else:  # a band of rows at a time: no grid-sized mask at the run's peak
        bands = [d[r0:r0 + 256] for r0 in range(0, d.shape[0], 256)]
        counts = [int(np.count_nonzero(~np.isnan(b))) for b in bands]
        reached = sum(counts)
        max_d = max(float(np.nanmax(b)) for b, n in zip(bands, counts) if n) if reached else None
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
    if "target_distance" in res.stats:  # stop cells: the distance the run stopped at
        summary["stop_distance"] = float(res.stats["target_distance"])
    if res.stats.get("delta") is not None and math.isfinite(res.stats["delta"]):
        summary["near_far_delta"] = float(res.stats["delta"])  # inf (one bucket) is the default
    return summary


def _arguments(out_path, spec, windows, backend, friction_store):
    """What the tasks take: the solve's spec, the friction's ``(store, layer)`` or None, the
    summary's fixed entries and whether the output gets a ``friction`` layer."""
    friction_src = None
    if friction_store is not None:
        friction_src = (tuple(friction_store) if isinstance(friction_store, (tuple, list))
                        else (friction_store, "elevation"))
    with_friction = friction_store is not None and spec.get("write_friction", True)
    # a friction surface given as the DEM: the output's elevation layer holds the friction's
    # cells already (one ingest, one array), so its friction layer is that layer linked, not
    # written again (4096²: 64 MB of grid freed before the writes, 0.1-0.2 CPU s less)
    if (with_friction and friction_src[1] == "elevation" and not is_remote(out_path)
            and str(friction_src[0]) == str(out_path)):
        spec = dict(spec, friction_from="elevation")
    # a store at a URL stays a Location: the tasks open it with its options
    spec = dict(spec, windows=list(windows),
                out_path=out_path if is_remote(out_path) else str(out_path))
    return spec, friction_src, summary_base(spec, backend), with_friction


def build_incore_graph(dem_path, out_path, spec, sources, start_costs, windows,
                       backend="cpu", upstream=None, geo=None, friction_store=None):
    """The in-core run's tasks as a Dask graph (for a cluster); a Delayed summary."""
    import dask
    token = dask.base.tokenize(str(dem_path), str(out_path), time.time_ns())
    name = (lambda stage: f"cost-{stage}-{token}")
    spec, friction_src, meta, with_friction = _arguments(out_path, spec, windows, backend,
                                                         friction_store)
    prepared = dask.delayed(prepare_layers, pure=False)(
        out_path, spec["shape"], spec["tile"], geo or {}, with_friction, upstream,
        spec.get("friction_from"), dask_key_name=name("prepare"))
    solved = dask.delayed(_solve, pure=False)(dem_path, friction_src, spec, sources,
                                              start_costs, backend, prepared,
                                              dask_key_name=name("solve"))
    writes = [dask.delayed(_write, pure=False)(out_path, solved, [w],
                                               dask_key_name=(name("write"), i))
              for i, w in enumerate(windows)]
    return dask.delayed(_finish, pure=False)(solved, writes, meta,
                                             dask_key_name=name("finish"))


def run_incore(dem_path, out_path, spec, sources, start_costs, windows, backend="cpu",
               ingests=(), geo=None, friction_store=None, scheduler=None):
    """The in-core run (module docstring): in this process, or as a graph on a cluster.
    ``ingests``: ``(raster, store, infinite values kept)`` ingested first (in process: read
    whole and written on threads, :func:`pipelines.ingest.write_elevation`, no Dask).
    Returns the summary; in process, its ``wall_seconds`` give each step."""
    if not runs_in_process(scheduler):
        from . import cluster
        upstream = [build_ingest_graph(src, dst, spec["tile"], finite=not walls)
                    for src, dst, walls in ingests]
        graph = build_incore_graph(dem_path, out_path, spec, sources, start_costs, windows,
                                   backend, upstream, geo, friction_store)
        with cluster.open_scheduler(scheduler):
            (summary,) = cluster.compute(graph, label="cost-distance")
        return summary
    wall = {}
    t0 = time.perf_counter()
    # read into the in-core SSSP's padded grid: the solve takes it without a copy
    ingested = {str(dst): write_elevation(grid, dst, spec["tile"], out=padded_grid(grid.shape))
                for src, dst, walls in ingests for grid in [open_grid(src, finite=not walls)]}
    if ingests:
        wall["ingest"] = time.perf_counter() - t0
    spec, friction_src, meta, with_friction = _arguments(out_path, spec, windows, backend,
                                                         friction_store)
    if get_backend(backend).is_gpu:
        spec["on_device"] = True  # the writers copy the layers off the device tile by tile
    pool = concurrent.futures.ThreadPoolExecutor(io_threads(), thread_name_prefix="terrain-cost")
    # the distances' writes run on while the other layers are written, on the same threads
    writer = _DistanceWriter(out_path, spec["windows"], pool)
    try:
        t1 = time.perf_counter()
        prepared = pool.submit(prepare_layers, out_path, spec["shape"], spec["tile"], geo or {},
                               with_friction, None, spec.get("friction_from"))
        solved = _solve(dem_path, friction_src, spec, sources, start_costs, backend, prepared,
                        writer=writer, ingested=ingested)
        del ingested
        t2 = time.perf_counter()
        layouts = shard_layouts(out_path, list(LAYERS) + ["friction"] * (solved[1] is not None))
        writes = [pool.submit(_write, out_path, solved, [w], layouts) for w in windows]
        writes = [f.result() for f in writes]
        solved[0].stats["early_writes"] = writer.wait()
        t3 = time.perf_counter()
    except BaseException:  # nothing may write into the partial output after this
        pool.shutdown(wait=True, cancel_futures=True)
        writer.stop()
        raise
    pool.shutdown(wait=True)
    summary = _finish(solved, writes, meta)
    wall.update({"read + solve": t2 - t1, "writes after the solve": t3 - t2,
                 "finish": time.perf_counter() - t3})
    summary["path"] = "in-process"
    summary["wall_seconds"] = {k: round(v, 6) for k, v in wall.items()}
    return summary


def reuse_attributes(spec, inp, friction, geotransform, dem, delta):
    """The ``cost_reuse`` attribute: what a later ``--reuse`` query checks and takes."""
    ru = spec.get("reuse_incore")
    return {"route": "in-core",
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
        group = open_group(path, mode="r")
        if "sssp_index" in group:
            return "tiled"
        if isinstance(group.attrs.get("cost_reuse"), dict):
            return "in-core"
    except Exception:  # noqa: BLE001 - not a store of ours: said below
        pass
    raise InputError(f"{path}: not a cost-distance store that can be reused")


def check_incore_reuse(path, spec, inp, friction, geotransform):
    """What an in-core ``--reuse`` takes from the earlier run's store ``path``;
    :class:`InputError` unless that run had the same input, friction, grid and cost."""
    group = open_group(path, mode="r")
    got = dict(group.attrs["cost_reuse"])
    if spec["route"] != "in-core":
        raise InputError(f"{path}: holds an in-core run's inputs; this run is {spec['route']}"
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
