"""Per-phase timings of the tiled SSSP (``terrain.grid.sssp_tiled``) beside the in-core one.

``python -m benchmarks.sssp_tiled --size 1024 --tile 16 --heights 0,1`` prints one JSON
line per measurement: phase 1 alone (:func:`tile_boundaries` on the whole grid), then for each
height cap a full run (index = phase 1 + bottom-up matrices, sources up, top + down, phase 3)
and a second query with two new sources reusing the index; finally the in-core
:func:`grid_sssp` on the same grid and whether the distances are equal. The DEM is random
integers 0..99 with ``absdiff`` (integer costs: the two algorithms must agree bit for bit),
8-connected, one source in the centre. Compilation is done before timing.

``--pipeline`` measures the out-of-core command instead (``cost-distance --route
tiled``, :mod:`pipelines.cost_distance_tiled`) on a tile store of the same DEM: a fresh run
(one source in the centre) and a ``--reuse`` query (two other sources), each in its own
process, with its wall time, peak RSS (``ru_maxrss``), bytes read and written
(``/proc/self/io``: ``rchar``/``wchar``, every byte through ``read``/``write``, page cache
included) against the output store's size on disk, the top Dijkstra's paging and the
command's own seconds by stage (``stage_seconds``); ``--group-side`` fixes the GPU's group
side (else sized from the device).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from terrain.grid.sssp import grid_sssp
from terrain.grid.sssp_tiled import TiledSpec, tile_boundaries, tiled_sssp

from .common import peak_rss_bytes, verdict


def _io():
    out = {}
    with open("/proc/self/io") as f:
        for line in f:
            k, v = line.split(":")
            out[k.strip()] = int(v)
    return out


def _dir_bytes(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def int_store(path, n, tile=512, seed=0):
    """A tile store of random integers 0..99 (float32), ``n x n``, made once per path."""
    from terrain.tiles.store import create_store, is_store, open_store
    path = Path(path)
    if is_store(path) and open_store(path).shape == (n, n):
        return path
    shutil.rmtree(path, ignore_errors=True)
    tmp = path.with_name(path.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    store = create_store(tmp, (n, n), tile, geotransform=(0, 1.0, 0, float(n), 0, -1.0),
                         source="bench-sssp-tiled")
    for (r0, r1, c0, c1) in store.shard_windows():
        rng = np.random.default_rng([seed, r0, c0])
        store.elevation[r0:r1, c0:c1] = rng.integers(0, 100, (r1 - r0, c1 - c0)).astype(
            np.float32)
    os.replace(tmp, path)
    return path


def _one(job):
    """One command run in this process (a child of :func:`pipeline`): a JSON line."""
    from pipelines.cost_distance import run_cost_distance
    tiled_sssp(np.zeros((64, 64), np.float32), [(3, 3)], tile=16, backend=job["backend"])
    if job.get("group_side"):  # a measurement: this group side instead of the device's
        import pipelines.cost_distance_tiled as cdt
        sizing, side = cdt.gpu_sizing, int(job["group_side"])
        cdt.gpu_sizing = lambda *a, **k: dict(sizing(*a, **k), group_side=side, by="bench")
    import resource

    def cpu_s():
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime
    io0, t0, c0 = _io(), time.perf_counter(), cpu_s()
    s = run_cost_distance(job["store"], job["out"], cells=[tuple(c) for c in job["cells"]],
                          route="tiled", tile_sssp=job["tile"], max_height=job["height"],
                          backend=job["backend"], scheduler=job["scheduler"], overwrite=True,
                          reuse=job["reuse"])
    wall, io1 = time.perf_counter() - t0, _io()
    print(json.dumps({"wall_s": round(wall, 2), "cpu_s": round(cpu_s() - c0, 2),
                      "peak_rss_bytes": peak_rss_bytes(),
                      "read_bytes": io1["rchar"] - io0["rchar"],
                      "written_bytes": io1["wchar"] - io0["wchar"],
                      "summary": {k: s.get(k) for k in (
                          "height", "groups", "group_side", "reached_cells", "max_distance",
                          "top_vertices", "top_pages", "top_page_loads", "top_seconds",
                          "solve_seconds", "write_seconds", "stage_seconds", "top_split",
                          "sizing")}}),
          flush=True)
    return 0


def pipeline(a):
    """Fresh run and ``--reuse`` query of the out-of-core command, each in a child process."""
    n = a.size
    work = Path(a.workdir or tempfile.gettempdir()) / "terrain-bench-sssp-tiled"
    work.mkdir(parents=True, exist_ok=True)
    store = int_store(work / f"int-{n}.zarr", n)
    dem_bytes = _dir_bytes(store)
    height = None if a.heights == "None" else int(a.heights.split(",")[0])
    runs = {"fresh": ([(n // 2, n // 2)], None), "reuse": ([(1, 1), (n - 2, 5)], "fresh")}
    outs = {}
    for name, (cells, reuse) in runs.items():
        out = work / f"{name}-{n}.zarr"
        outs[name] = out
        job = {"store": str(store), "out": str(out), "cells": cells, "tile": a.tile,
               "height": height, "backend": a.backend, "scheduler": a.scheduler,
               "reuse": None if reuse is None else str(outs[reuse]),
               "group_side": a.group_side}
        r = subprocess.run([sys.executable, "-m", "benchmarks.sssp_tiled", "--one",
                            json.dumps(job)], capture_output=True, text=True)
        if r.returncode:
            print(r.stderr[-3000:], file=sys.stderr)
            return r.returncode
        rec = json.loads(r.stdout.strip().splitlines()[-1])
        store_bytes = _dir_bytes(out)
        index_bytes = _dir_bytes(out / "sssp_index") if (out / "sssp_index").exists() else 0
        if reuse is not None:  # the query's store: its output and the index it read
            index_bytes = _dir_bytes(outs[reuse] / "sssp_index")
            store_bytes += index_bytes
        io = rec["read_bytes"] + rec["written_bytes"]
        rec.update({"run": name, "size": n, "tile": a.tile, "dem_store_bytes": dem_bytes,
                    "store_bytes": store_bytes, "index_bytes": index_bytes,
                    "io_over_store": round(io / max(store_bytes, 1), 2),
                    "io_over_store_and_dem": round(io / max(store_bytes + dem_bytes, 1), 2)})
        print(json.dumps(rec), flush=True)
    if not a.keep:
        for out in outs.values():
            shutil.rmtree(out, ignore_errors=True)
    return verdict([], unchecked="the command's runs alone: without --pipeline the library's "
                   "tiled distances are compared with grid_sssp's")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--tile", type=int, default=16)
    p.add_argument("--heights", default="0", help="comma-separated caps ('None': default)")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--pipeline", action="store_true",
                   help="the out-of-core command (fresh + --reuse) instead of the library")
    p.add_argument("--scheduler", default="threads")
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true", help="keep the output stores")
    p.add_argument("--group-side", type=int, default=None,
                   help="--pipeline on the GPU: this group side instead of the device's")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.one:
        return _one(json.loads(a.one))
    if a.pipeline:
        return pipeline(a)
    n, tile = a.size, a.tile
    heights = [None if h == "None" else int(h) for h in a.heights.split(",")]
    z = np.random.default_rng(0).integers(0, 100, (n, n)).astype(np.float32)
    tiled_sssp(z[:64, :64], [(3, 3)], tile=16, backend=a.backend)  # compile
    spec = TiledSpec((n, n), tile, 8)
    t = time.perf_counter()
    tile_boundaries(spec, z, np.ones_like(z), (0, n, 0, n), a.backend)
    phase1 = round(time.perf_counter() - t, 2)
    print(json.dumps({"size": n, "tile": tile, "phase1_alone_s": phase1}), flush=True)
    r = None
    for h in heights:
        r = tiled_sssp(z, [(n // 2, n // 2)], tile=tile, backend=a.backend, max_height=h)
        t = time.perf_counter()
        r2 = tiled_sssp(z, [(1, 1), (n - 2, 5)], tile=tile, backend=a.backend, reuse=r.index)
        print(json.dumps({"size": n, "tile": tile, "height": r.stats["height"],
                          "times_s": {k: round(v, 2) for k, v in r.stats["times"].items()},
                          "reuse_query_s": round(time.perf_counter() - t, 2),
                          "reuse_times_s": {k: round(v, 2) for k, v in r2.stats["times"].items()},
                          "peak_rss_bytes": peak_rss_bytes()}), flush=True)
    t = time.perf_counter()
    ref = grid_sssp(z, [(n // 2, n // 2)], backend=a.backend)
    print(json.dumps({"in_core_grid_sssp_s": round(time.perf_counter() - t, 2)}), flush=True)
    return verdict([("tiled distances (the last height) vs grid_sssp's",
                     r is None or np.array_equal(ref.distance, r.distance))])


if __name__ == "__main__":
    raise SystemExit(main())
