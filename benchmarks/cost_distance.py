"""``python -m benchmarks cost-distance``: our in-core exact SSSP against the peers, one run.

The grid: friction uniform random in [1, 2] (seeded), elevation 0, one source in the centre,
8-connected, cell size 1, ``--cost friction`` (the r.cost / ``MCP_Geometric`` convention).
Timed, each on the same arrays:

* terrain: :func:`terrain.grid.sssp.grid_sssp` (distance, allocation and backlinks; Numba
  compiled beforehand on a small grid) on the chosen backend;
* scikit-image ``MCP_Geometric`` (construction + ``find_costs``);
* scipy ``dijkstra`` with its CSR build (all 8 arc directions with NumPy) included; skipped
  above 4096² cells (its CSR and work arrays need about 40 GB there);
* xarray-spatial ``cost_distance`` when importable (it prints "not installed" otherwise).

Every peer's distances are compared with ours (largest relative difference). Besides wall
seconds the table gives CPU seconds of this process (``time.process_time``, all threads):
on a shared machine they say what each implementation costs when the wall clock does not.
Our phases (``stats["phases"]``: upload, distance, labels, backlinks, download on the GPU)
follow the table.

``--whole-process`` measures the command a user runs instead: the DEM of ``terrain synth
--rows R --cols C --seed S --nodata 0.02`` (the Neuse 40-ft size by default, 12555 x 17630)
is written straight into a tile store (:func:`synthetic_dem_store`, what ``ingest`` of the
ASCII grid gives, without the text), then ``python -m terrain.run cost-distance STORE
--source-cell <centre> --cost absdiff`` runs as a child process, timed from its start to its
exit (imports, CUDA compilation, read, solve and write included); its JSON summary gives the
phases. A second child runs the same on Dask's ``threads`` scheduler (the task graph), a
third queries the first one's output with ``--reuse`` from two other cells, and a fourth does
that on ``threads`` too; ``--repeat N`` runs the four N times. The default scheduler takes
the in-process path there (``pipelines.cost_distance_incore.run_incore``); its summary's
``wall_seconds`` (start-up, imports, the start-up thread's steps, solve, writes) are printed.
No peer runs at that size (scikit-image would take tens of minutes, xarray-spatial
holds the grid in one chunk), so that mode prints ours only.

``--peers`` times what a GIS user runs instead, GeoTIFF in and GeoTIFF out, as whole
processes beside GRASS r.cost and a scikit-image script (:mod:`benchmarks.cost_distance_peers`).
"""

import concurrent.futures
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from terrain.backend import get_backend
from terrain.grid.costs import ARC_DC, ARC_DR, arc_codes, arc_lengths

from .common import MAX_REL_DIFF, friction_grid, peak_rss_bytes, verdict

__all__ = ["bench_cost_distance_command", "friction_grid", "scipy_cost_distance",
           "synthetic_dem", "synthetic_dem_store", "whole_process"]

SCIPY_MAX_CELLS = 4096 * 4096


def scipy_cost_distance(friction, source, connectivity=8):
    """Distances by scipy: build the CSR of the friction graph, then ``dijkstra``."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra

    rows, cols = friction.shape
    f = friction.astype(np.float64)
    lengths = arc_lengths((1.0, 1.0))
    idx = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
    src, dst, w = [], [], []
    for k in arc_codes(connectivity).tolist():
        dr, dc = int(ARC_DR[k]), int(ARC_DC[k])
        r0, r1 = max(0, -dr), rows - max(0, dr)
        c0, c1 = max(0, -dc), cols - max(0, dc)
        a = idx[r0:r1, c0:c1]
        b = idx[r0 + dr:r1 + dr, c0 + dc:c1 + dc]
        src.append(a.ravel())
        dst.append(b.ravel())
        w.append((lengths[k] * ((f[r0:r1, c0:c1] + f[r0 + dr:r1 + dr, c0 + dc:c1 + dc]) * 0.5))
                 .ravel())
    g = sp.csr_array((np.concatenate(w), (np.concatenate(src), np.concatenate(dst))),
                     shape=(rows * cols, rows * cols))
    d = dijkstra(g, indices=source[0] * cols + source[1])
    return d.reshape(rows, cols)


def _rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    both = np.isfinite(a) & np.isfinite(b)
    if (np.isfinite(a) != np.isfinite(b)).any():
        return math.inf
    return float(np.max(np.abs(a[both] - b[both]) / np.maximum(np.abs(b[both]), 1e-300)))


class _Clock:
    """Wall and process CPU seconds since creation."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self):
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def synthetic_dem(rows, cols, seed=1, nodata=0.02, r0=0, r1=None, workers=None):
    """Rows ``r0:r1`` of the DEM ``terrain synth`` writes (float32, NaN nodata), bands of
    rows computed in threads."""
    from terrain.io.synth import _Terrain
    terrain = _Terrain(rows, cols, seed, nodata, False)
    r1 = rows if r1 is None else r1
    out = np.empty((r1 - r0, cols), np.float32)
    bands = [(r, min(r + 256, r1)) for r in range(r0, r1, 256)]

    def band(b):
        out[b[0] - r0:b[1] - r0] = terrain.band(*b)

    with concurrent.futures.ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:
        list(pool.map(band, bands))
    return out


def synthetic_dem_store(path, rows, cols, seed=1, nodata=0.02, tile=512):
    """A tile store holding :func:`synthetic_dem` with ``synth``'s georeference (reused when
    it exists with that shape); returns its path."""
    import shutil

    from terrain.io.synth import SYNTH_GEOREF
    from terrain.tiles import is_store, open_store
    from terrain.tiles.store import create_store
    path = Path(path)
    if is_store(path) and open_store(path).shape == (rows, cols):
        return path
    tmp = path.with_name(path.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    g = SYNTH_GEOREF
    gt = (g["xllcorner"], g["cellsize"], 0.0, g["yllcorner"] + rows * g["cellsize"], 0.0,
          -g["cellsize"])
    from pipelines.ingest import default_compressors
    store = create_store(tmp, (rows, cols), tile, geotransform=gt, source="bench-synth",
                         compressors=default_compressors())
    band = tile * store.tiles_per_shard
    for r0 in range(0, rows, band):
        r1 = min(r0 + band, rows)
        store.elevation[r0:r1, :] = synthetic_dem(rows, cols, seed, nodata, r0, r1)
    os.replace(tmp, path)
    return path


def whole_process(args):
    """``--whole-process``: synthesise the store, then time ``cost-distance`` on it."""
    rows, cols = args.rows, args.cols
    work = Path(args.workdir or "/tmp/terrain-bench-cost")
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    store = synthetic_dem_store(work / f"synth-{rows}x{cols}-s{args.seed}.zarr", rows, cols,
                                seed=args.seed)
    t_synth = time.perf_counter() - t0
    src = (rows // 2, cols // 2)
    out = work / "out.cost.zarr"
    others = [(rows // 4, cols // 4), (3 * rows // 4, 3 * cols // 4)]
    runs = [("fresh", [src], None, out, None),
            ("fresh, threads", [src], None, work / "fresh2.cost.zarr", "threads"),
            ("--reuse query", others, out, work / "query.cost.zarr", None),
            ("--reuse query, threads", others, out, work / "query.cost.zarr", "threads")]
    runs = runs * max(1, getattr(args, "repeat", 1) or 1)
    print(f"cost-distance whole process: {rows} x {cols} cells (synth seed {args.seed}, nodata "
          f"0.02), cost {args.cost}; a fresh run from source cell {src[0]},{src[1]}, then a "
          f"--reuse query of its store from two other cells")
    print(f"store synthesised in {t_synth:.2f} s (not timed below)")
    print(f"{'implementation':36s} {'wall s':>8s}  inside the run")
    answers = {"fresh": set(), "--reuse query": set()}  # every scheduler, every repeat
    for label, cells, reuse, target, scheduler in runs:
        cmd = [sys.executable, "-m", "terrain.run", "cost-distance", str(store), "-o",
               str(target), "--cost", args.cost, "--json", "--overwrite",
               "--backend", args.backend or "auto"]
        if scheduler:
            cmd += ["--scheduler", scheduler]
        for r, c in cells:
            cmd += ["--source-cell", f"{r},{c}"]
        if reuse is not None:
            cmd += ["--reuse", str(reuse)]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
            return proc.returncode
        s = json.loads(proc.stdout)
        name = f"terrain {label} ({s['route']})"
        print(f"{name:36s} {wall:8.2f}  "
              f"run {s['seconds']:.2f} s: read {s['read_seconds']:.2f}, solve "
              f"{s['solve_seconds']:.2f}, write {s.get('write_wall_seconds', 0.0):.2f} (wall; "
              f"{s['write_seconds']:.2f} task s); device {s.get('device')}")
        if s.get("phases"):
            print("  solve phases: " + ", ".join(f"{k} {v:.3f} s"
                                                 for k, v in s["phases"].items()))
        if s.get("wall_seconds"):
            print(f"  steps ({s.get('path', 'task graph')}): " + ", ".join(
                f"{k} {v:.3f} s" for k, v in s["wall_seconds"].items()))
        answers[label.split(",")[0]].add((s["reached_cells"], s["max_distance"]))
        print(f"  reached {s['reached_cells']} cells, max distance {s['max_distance']}, queue "
              f"{s.get('queue')}" + (f", reused: {', '.join(s['reused']) or 'nothing'}"
                                     if reuse is not None else ""))
    for name in ("scikit-image MCP_Geometric", "xarray-spatial cost_distance"):
        print(f"{name:36s} {'-':>8s}  not run at this size (whole-process mode)")
    return verdict((f"{kind} runs' reached cells and max distance, default vs threads "
                    "scheduler", len(seen) == 1) for kind, seen in answers.items())


def bench_cost_distance_command(args):
    from terrain.grid.sssp import grid_sssp

    if getattr(args, "peers", False):
        from .cost_distance_peers import bench_cost_peers
        args.repeat = args.repeat or 3
        return bench_cost_peers(args)
    if getattr(args, "whole_process", False):
        args.repeat = args.repeat or 1
        return whole_process(args)

    rows, cols = args.rows, args.cols
    be = get_backend(args.backend)
    fr = friction_grid(rows, cols, args.seed)
    z = np.zeros((rows, cols), np.float32)
    src = (rows // 2, cols // 2)
    small = friction_grid(64, 64)
    grid_sssp(np.zeros_like(small), [(32, 32)], cost="friction", friction=small, backend=be)

    results = []
    clock = _Clock()
    ours = grid_sssp(z, [src], cost="friction", friction=fr, backend=be)
    t_ours, c_ours = clock.read()
    results.append((f"terrain in-core ({be.name}, {ours.stats.get('queue')})", (t_ours, c_ours),
                    None))
    rss_ours = peak_rss_bytes()

    try:
        from skimage.graph import MCP_Geometric
    except ImportError:
        results.append(("scikit-image MCP_Geometric", None, "not installed"))
    else:
        clock = _Clock()
        mcp = MCP_Geometric(fr.astype(np.float64), fully_connected=True)
        cum, _ = mcp.find_costs([src])
        results.append(("scikit-image MCP_Geometric", clock.read(), _rel(cum, ours.distance)))
        del mcp, cum

    if rows * cols > SCIPY_MAX_CELLS:
        results.append(("scipy dijkstra (CSR build incl.)", None,
                        f"skipped above {SCIPY_MAX_CELLS} cells (memory)"))
    else:
        clock = _Clock()
        d = scipy_cost_distance(fr, src)
        results.append(("scipy dijkstra (CSR build incl.)", clock.read(), _rel(d, ours.distance)))
        del d

    try:
        import xarray as xr
        from xrspatial import cost_distance
    except ImportError:
        results.append(("xarray-spatial cost_distance", None, "not installed"))
    else:
        raster = np.zeros((rows, cols), np.float64)
        raster[src] = 1
        coords = {"y": np.arange(rows, dtype=np.float64)[::-1], "x": np.arange(cols, dtype=np.float64)}
        clock = _Clock()
        xs = cost_distance(xr.DataArray(raster, dims=("y", "x"), coords=coords),
                           xr.DataArray(fr.astype(np.float64), dims=("y", "x"), coords=coords))
        xd = np.asarray(xs.values)
        results.append(("xarray-spatial cost_distance", clock.read(), _rel(xd, ours.distance)))

    print(f"cost-distance bench: {rows} x {cols} cells, friction U[1,2] (seed {args.seed}), "
          f"one source at the centre, 8-connected; device {be.device_name()}")
    print(f"{'implementation':36s} {'wall s':>8s} {'x ours':>7s} {'CPU s':>8s} {'x ours':>7s} "
          f"{'Mcells/s':>9s}  max rel. diff vs ours")
    checks, goals = [], []
    for name, secs, diff in results:
        if secs is None:
            print(f"{name:36s} {'-':>8s} {'-':>7s} {'-':>8s} {'-':>7s} {'-':>9s}  {diff}")
            continue
        wall, cpu = secs
        note = "-" if diff is None else f"{diff:.1e}"
        print(f"{name:36s} {wall:8.2f} {wall / t_ours:7.2f} {cpu:8.2f} {cpu / c_ours:7.2f} "
              f"{rows * cols / wall / 1e6:9.2f}  {note}")
        if diff is not None:
            checks.append((f"distances vs {name} (max rel. diff {note})", diff <= MAX_REL_DIFF))
            if be.name == "cpu" and not name.startswith("xarray"):
                goals.append((f"cpu >= 5x {name}", wall / t_ours >= 5))
    if ours.stats.get("phases"):
        print("terrain phases: " + ", ".join(f"{k} {v:.3f} s"
                                             for k, v in ours.stats["phases"].items()))
    print(f"reached {ours.reached} cells, max distance {np.nanmax(ours.distance):.6f}; "
          f"peak RSS after terrain {rss_ours / 2**30:.2f} GiB, at the end "
          f"{peak_rss_bytes() / 2**30:.2f} GiB")
    return verdict(checks, goals)
