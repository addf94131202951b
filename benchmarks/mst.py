"""``terrain bench mst``: terrain's grid MST against scipy's ``minimum_spanning_tree``, one run.

A synthetic DEM (smooth relief plus noise, generated shard by shard so that memory stays at
a shard) is written into a tile store under ``--workdir`` (reused when present). Then:

* terrain: the ``mst`` pipeline, store -> written mask, on the CPU and, when present, the GPU
  (``--backend`` picks one); Mcells/s, per-phase task seconds, bytes read and written;
* tile Borůvka alone (the CPU's tiled path) on one shard's tiles (edges/s, warm);
* scipy: ``grid_edges`` -> ``csr_matrix`` -> ``minimum_spanning_tree`` on the whole grid
  (building the sparse matrix included; skipped with ``--no-scipy``), and its total weight
  next to ours as a check;
* peak RSS (``ru_maxrss``) after terrain's runs and after scipy's;
* without ``--scheduler``: the pipeline on the in-process LocalCluster (the default for big
  grids) and on Dask's ``threads`` scheduler, both warm, alternating three times, the best
  of each side by side: wall seconds and task seconds (docs/architecture.md, "The default scheduler").
"""

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from terrain.backend import get_backend, gpu_available
from terrain.errors import InputError
from terrain.grid import boruvka_tiles
from terrain.grid.edges import grid_edges, horizontal_lengths, weight_model_code
from terrain.tiles import create_store, is_store, open_store

from .common import peak_rss_bytes, verdict
from .mst_ecl import relief
from pipelines.mst import run_mst

__all__ = ["bench_mst_command", "synthetic_store"]


def synthetic_store(path, rows, cols, tile, seed=0):
    """Write (or reuse) a synthetic DEM tile store at ``path``; returns the TileStore."""
    path = Path(path)
    if is_store(path):
        s = open_store(path)
        if s.shape == (rows, cols) and s.tile == tile:
            return s
        shutil.rmtree(path)
    tmp = path.with_name(path.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    store = create_store(tmp, (rows, cols), tile, geotransform=(0, 10.0, 0, rows * 10.0, 0, -10.0),
                         source="bench-synthetic")
    for (r0, r1, c0, c1) in store.shard_windows():
        store.elevation[r0:r1, c0:c1] = relief(r0, r1, c0, c1, seed)
    os.replace(tmp, path)
    return open_store(path)


def _dir_bytes(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def _shard_batch(store):
    """The first shard's tiles as a (B, T, T) batch (NaN-padded)."""
    r0, r1, c0, c1 = store.shard_windows()[0]
    T = store.tile
    z = np.full((-(-(r1 - r0) // T) * T, -(-(c1 - c0) // T) * T), np.nan, np.float32)
    z[: r1 - r0, : c1 - c0] = store.read_window(r0, r1, c0, c1)
    nr, nc = z.shape[0] // T, z.shape[1] // T
    return np.ascontiguousarray(z.reshape(nr, T, nc, T).transpose(0, 2, 1, 3).reshape(-1, T, T))


def _boruvka_rate(store, connectivity):
    """Edges/s of tile Borůvka (the CPU's tiled path) on one shard's tiles, warm."""
    batch = _shard_batch(store)
    edges = sum(len(grid_edges(t, connectivity)[0]) for t in batch)
    hlen = horizontal_lengths(store.cellsize)

    def run():
        return boruvka_tiles(batch, connectivity, weight_model_code("max"), hlen, "cpu")

    run()  # compiled or loaded from the cache
    reps, t0 = 0, time.perf_counter()
    while reps < 3 or time.perf_counter() - t0 < 0.5:
        run()
        reps += 1
    dt = (time.perf_counter() - t0) / reps
    return edges / dt, len(batch), dt


def _scheduler_report(store, out, connectivity, backend, rounds=3):
    """The pipeline on Dask's threads scheduler and on the in-process LocalCluster, warm,
    alternating ``rounds`` times (so that a shared machine's load falls on both); the best
    round of each by wall seconds."""
    runs = {}
    for _ in range(rounds):
        for sched in ("threads", "local"):
            t0 = time.perf_counter()
            s = run_mst(store.path, out, connectivity=connectivity, backend=backend,
                        scheduler=sched, overwrite=True)
            r = {"seconds": time.perf_counter() - t0,
                 "task_seconds": sum(s["phase_seconds"].values()),
                 "phase_seconds": s["phase_seconds"]}
            if sched not in runs or r["seconds"] < runs[sched]["seconds"]:
                runs[sched] = r
    from pipelines.cluster import open_scheduler
    t0 = time.perf_counter()
    with open_scheduler("local", quiet=True):
        runs["local"]["startup_seconds"] = time.perf_counter() - t0
    th, lc = runs["threads"], runs["local"]
    print(f"  scheduler: LocalCluster {lc['seconds']:.2f} s wall (its start-up included: "
          f"{lc['startup_seconds']:.2f} s alone once distributed is imported), "
          f"{lc['task_seconds']:.2f} task s | threads {th['seconds']:.2f} s wall, "
          f"{th['task_seconds']:.2f} task s | LocalCluster/threads {lc['seconds'] / th['seconds']:.2f}x "
          f"wall, {lc['task_seconds'] / th['task_seconds']:.2f}x task s")
    print(f"    best of {rounds} alternating rounds; task s by phase, LocalCluster | threads: " + ", ".join(
        f"{p} {lc['phase_seconds'][p]:.2f} | {th['phase_seconds'][p]:.2f}" for p in lc["phase_seconds"]))
    return runs


def _own_scheduler(cells):
    """The scheduler terrain takes by itself for a grid of ``cells`` (the command line's
    default): ``threads`` up to the dashboard's size, else the LocalCluster."""
    from pipelines.cluster import DASHBOARD_MIN_CELLS
    return "threads" if cells <= DASHBOARD_MIN_CELLS else "local"


def _scipy_mst(store, connectivity):
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import minimum_spanning_tree

    t0 = time.perf_counter()
    z = store.read_window(0, store.shape[0], 0, store.shape[1])
    _, u, v, w = grid_edges(z, connectivity)
    # scipy drops explicit zeros: shift weights to >= 1 (same forest: every forest of the
    # graph has the same number of edges) and shift back
    shift = 1.0 - float(w.min()) if w.size and w.min() <= 0 else 0.0
    n = z.size
    del z
    g = csr_matrix((w.astype(np.float64) + shift, (u, v)), shape=(n, n))
    del u, v, w
    t = minimum_spanning_tree(g)
    dt = time.perf_counter() - t0
    total = float(t.data.sum()) - shift * t.nnz
    return dt, total, int(t.nnz)


def bench_mst_command(args):
    """``terrain bench mst [--rows R] [--cols C] [--tile N] [--connectivity 4|8] ...``.

    ``--peer ecl --ecl-source DIR`` runs :func:`benchmarks.mst_ecl.bench_mst_ecl` instead
    (the in-core GPU path against ECL-MST).
    """
    if getattr(args, "peer", "scipy") == "ecl":
        from .mst_ecl import bench_mst_ecl
        if not args.ecl_source:
            raise InputError("bench mst: --peer ecl needs --ecl-source DIR")
        return bench_mst_ecl(args)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.gettempdir()) / "terrain-bench"
    workdir.mkdir(parents=True, exist_ok=True)
    rows, cols, tile, conn = args.rows, args.cols, args.tile, args.connectivity
    t0 = time.perf_counter()
    store = synthetic_store(workdir / f"mst-{rows}x{cols}-t{tile}.zarr", rows, cols, tile)
    gen = time.perf_counter() - t0
    cells = rows * cols
    store_bytes = _dir_bytes(store.path / "elevation")
    print(f"bench mst: {rows} x {cols} = {cells / 1e6:.1f} Mcells, tile {tile}, "
          f"{conn}-connected, weight max; store {store_bytes / 1e6:.1f} MB on disk "
          f"({4 * cells / 1e6:.1f} MB float32) [{gen:.1f} s to make or reuse]")
    if args.backend:
        backends = [get_backend(args.backend).name]
    else:
        backends = ["cpu"] + (["gpu"] if gpu_available() else [])
    record = {"rows": rows, "cols": cols, "tile": tile, "connectivity": conn,
              "store_bytes": store_bytes, "runs": {}}
    totals = {}
    for name in backends:
        be = get_backend(name)
        out = workdir / f"mst-{rows}x{cols}-t{tile}.{name}.mst.zarr"
        t0 = time.perf_counter()
        s = run_mst(store.path, out, connectivity=conn, backend=name,
                    scheduler=args.scheduler, overwrite=True)
        dt = time.perf_counter() - t0
        rate, ntiles, bdt = _boruvka_rate(store, conn)
        totals[name] = s["total_weight"]
        io = s["read_bytes"] + s["written_bytes"]
        print(f"terrain {name:4s} ({be.device_name()}): {dt:7.2f} s store->written MST, "
              f"{cells / dt / 1e6:8.2f} Mcells/s; tile Boruvka {rate / 1e9:.3f} G edges/s "
              f"({ntiles} tiles in {bdt * 1e3:.1f} ms)")
        print("  phases (task s): " + ", ".join(f"{p} {v:.2f}" for p, v in s["phase_seconds"].items()))
        print(f"  bytes read {s['read_bytes'] / 1e6:.1f} MB + written {s['written_bytes'] / 1e6:.1f} MB"
              f" = {io / max(4 * cells, 1):.2f}x the float32 DEM, "
              f"{io / max(store_bytes, 1):.2f}x the store on disk; level graphs "
              f"{s['graph_bytes'] / 1e6:.1f} MB")
        print(f"  forest: {s['edges']} edges, {s['trees']} trees, weight {s['total_weight']:.10g}")
        record["runs"][name] = {"seconds": dt, "mcells_per_s": cells / dt / 1e6,
                                "boruvka_edges_per_s": rate, "device": be.device_name(), **s}
        if not args.scheduler:
            record["runs"][name]["schedulers"] = _scheduler_report(store, out, conn, name)
        shutil.rmtree(out, ignore_errors=True)
    def same(a, b):  # float totals summed in another order
        return abs(a - b) <= 1e-6 * max(1.0, abs(a))

    checks = [("forest total weight, cpu vs gpu", same(totals["cpu"], totals["gpu"]))] \
        if len(totals) == 2 else []
    goals = []
    rss_ours = peak_rss_bytes() / 2**20
    print(f"peak RSS after terrain: {rss_ours:.0f} MB")
    record["peak_rss_mb_terrain"] = rss_ours
    if not args.no_scipy:
        dt, total, nnz = _scipy_mst(store, conn)
        rss = peak_rss_bytes() / 2**20
        # terrain's figure: its best warm run on the scheduler it picks for this size (the
        # first run above pays the kernels' first load, and a cluster's start if it took one)
        cpu = record["runs"].get("cpu")
        warm = (cpu or {}).get("schedulers", {}).get(_own_scheduler(cells))
        ours = warm["seconds"] if warm else cpu["seconds"] if cpu else None
        print(f"scipy minimum_spanning_tree (csr build included): {dt:7.2f} s, "
              f"{cells / dt / 1e6:8.2f} Mcells/s; weight {total:.10g} ({nnz} edges)"
              + (f"; terrain cpu ({'best warm run' if warm else 'the run above'}) is "
                 f"{dt / ours:.1f}x faster" if ours else ""))
        print(f"peak RSS after scipy: {rss:.0f} MB")
        record.update({"scipy_seconds": dt, "scipy_total_weight": total,
                       "peak_rss_mb_scipy": rss})
        checks += [(f"forest total weight, terrain {name} vs scipy",
                    same(total, t)) for name, t in totals.items()]
        if ours:
            goals.append(("terrain cpu >= 5x scipy", dt / ours >= 5))
    if os.environ.get("TERRAIN_BENCH_JSON"):
        Path(os.environ["TERRAIN_BENCH_JSON"]).write_text(json.dumps(record, indent=2, default=str))
    return verdict(checks, goals)
