"""``terrain bench ingest``: terrain's ingest vs rasterio reading the same ASCII grid whole.

First, as a user runs them, whole processes timed from the outside (start-up, imports,
scheduler and kernel loading included): ``python -m terrain.run ingest IN -o OUT`` against
``python -c "import rasterio; rasterio.open(IN).read(1)"``, alternating, ``--repeat`` times
each, best and median printed side by side, and under each the fixed start-up of its process
alone (terrain: importing the ingest and loading the parser's C library -- plus Dask and
the scheduler's module when ``--scheduler`` is given; rasterio: its import) (peak RSS and CPU seconds from ``wait4``: on a
shared machine the CPU figure carries much less of the other processes' load). Then the in-process
figures below.

The input (fractal terrain, 2 % nodata, two decimals) is generated once into ``--workdir``
and reused. terrain's figure is the ingest with its parser loaded: with ``--scheduler``,
on that running scheduler (a long-lived Dask worker's steady state); without, the
:func:`pipelines.ingest.ingest` call the command makes (no task graph for a grid the
default scheduler runs on threads). The once-per-process costs (loading the parser's
library, scheduler start-up) are printed beside it, and the figure with them included. Each side
runs in its own child process, so each peak RSS is its own (rasterio
holds the whole grid; terrain should hold a few bands). The file is read once beforehand so
both sides find it in the page cache. The rasterio child then compares its array with the
store, cell for cell: the figures only count when the values are identical.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from .common import child_env, peak_rss_bytes, timed_child, verdict

__all__ = ["bench_ingest_command", "run_bench_ingest"]

#: docs/performance.md's floors: (rows, cols) -> whole-process speed-up over rasterio (best)
FLOORS = {(8192, 8192): 3.0, (4096, 4096): 2.0}


def _child_terrain(input_path, store_path, tile, scheduler):
    from pipelines.ingest import ingest, ingest_on_active_scheduler
    from terrain.native import load_library
    t0 = time.perf_counter()
    load_library()
    t1 = time.perf_counter()
    if not scheduler:  # what the command runs (no graph, or a LocalCluster for a big grid)
        ingest(input_path, store_path, tile, overwrite=True)
        t3 = time.perf_counter()
        return {"seconds": t3 - t1, "kernels": t1 - t0, "startup": 0.0,
                "peak_rss": peak_rss_bytes()}
    from pipelines.cluster import open_scheduler
    with open_scheduler(scheduler, quiet=True):
        t2 = time.perf_counter()
        ingest_on_active_scheduler(input_path, store_path, tile, overwrite=True)
        t3 = time.perf_counter()
    return {"seconds": t3 - t2, "kernels": t1 - t0, "startup": t2 - t1,
            "peak_rss": peak_rss_bytes()}


def _child_rasterio(input_path, store_path):
    import numpy as np
    import rasterio

    from terrain.tiles import open_store
    t0 = time.perf_counter()
    with rasterio.open(input_path) as src:
        z = src.read(1, masked=True)
    seconds = time.perf_counter() - t0
    want = np.where(np.ma.getmaskarray(z), np.float32(np.nan), z.data.astype(np.float32))
    store = open_store(store_path)
    identical = store.shape == want.shape
    for r0, r1, c0, c1 in store.shard_windows() if identical else []:
        got = store.read_window(r0, r1, c0, c1)
        identical &= bool(np.array_equal(got.view(np.uint32), want[r0:r1, c0:c1].view(np.uint32)))
    return {"seconds": seconds, "peak_rss": peak_rss_bytes(), "identical": identical}


def _run_child(*argv):
    proc = subprocess.run([sys.executable, "-m", "benchmarks.ingest", *map(str, argv)],
                          stdout=subprocess.PIPE, env=child_env(), check=True, text=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _whole_processes(src, store, tile, scheduler, repeat):
    """``terrain ingest`` and a rasterio read as whole processes, alternating, ``repeat`` each."""
    ours_argv = [sys.executable, "-m", "terrain.run", "ingest", str(src), "-o", str(store),
                 "--tile", str(tile), "--overwrite"] + (["--scheduler", scheduler] if scheduler else [])
    peer_argv = [sys.executable, "-c", "import sys, rasterio; rasterio.open(sys.argv[1]).read(1)",
                 str(src)]
    # the fixed start-up of each: imports (and, for terrain, loading the parser's library;
    # Dask only where a scheduler is named: the default path for grids up to
    # pipelines.cluster.DASHBOARD_MIN_CELLS cells does not import it)
    ours_start = [sys.executable, "-c", "import pipelines.ingest"
                  + (", pipelines.cluster, dask" if scheduler else "")  # as the command does
                  + "; from terrain.native import load_library; load_library()"]
    peer_start = [sys.executable, "-c", "import rasterio"]
    runs = {"terrain": [], "rasterio": [], "terrain start-up": [], "rasterio start-up": []}
    for _ in range(repeat):
        runs["terrain"].append(timed_child(ours_argv))
        runs["rasterio"].append(timed_child(peer_argv))
        runs["terrain start-up"].append(timed_child(ours_start))
        runs["rasterio start-up"].append(timed_child(peer_start))
    out = {}
    for key, rs in runs.items():
        secs = sorted(r[0] for r in rs)
        out[key] = {"best": secs[0], "median": secs[len(secs) // 2], "all": [r[0] for r in rs],
                    "peak_rss": max(r[1] for r in rs), "cpu": min(r[2] for r in rs)}
    return out


def _warm_page_cache(path):
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(16 << 20)
        while f.readinto(buf):
            pass


def run_bench_ingest(rows, cols, tile=512, workdir=None, scheduler=None, repeat=3):
    """Generate (once) and ingest a ``rows × cols`` grid; return the figures as a dict."""
    from terrain.io import write_synth

    workdir = Path(workdir or "bench-data")
    workdir.mkdir(parents=True, exist_ok=True)
    src = workdir / f"synth-{rows}x{cols}.asc"
    if not src.exists():
        print(f"terrain: generating {src} ...", file=sys.stderr, flush=True)
        write_synth(src, rows, cols, seed=0, nodata=0.02)
    store = workdir / f"synth-{rows}x{cols}.zarr"
    _warm_page_cache(src)
    whole = _whole_processes(src, store, tile, scheduler, repeat)
    ours = _run_child("terrain", src, store, tile, scheduler or "")
    peer = _run_child("rasterio", src, store)
    size = src.stat().st_size
    return {"rows": rows, "cols": cols, "tile": tile, "text_bytes": size,
            "cores": len(os.sched_getaffinity(0)), "scheduler": scheduler or "default",
            "whole_process": whole, "terrain": ours,
            "rasterio": peer}


def _format(r):
    mb, mcells = r["text_bytes"] / 1e6, r["rows"] * r["cols"] / 1e6
    lines = [f"ingest {r['rows']} x {r['cols']} ({mcells:.1f} Mcells, {mb:.0f} MB of text), "
             f"tile {r['tile']}, {r['cores']} cores, scheduler {r['scheduler']}",
             f"whole processes (best of {len(r['whole_process']['terrain']['all'])}, start-up "
             f"included):{'':4}{'best s':>8}{'median s':>10}{'MB/s':>8}{'peak RSS':>11}"
             f"{'CPU s':>8}"]
    w = r["whole_process"]
    for name, key in (("python -m terrain.run ingest", "terrain"),
                      ("python -c 'rasterio...read(1)'", "rasterio")):
        lines.append(f"  {name:40}{w[key]['best']:8.2f}{w[key]['median']:10.2f}"
                     f"{mb / w[key]['best']:8.1f}{w[key]['peak_rss'] / 2**20:8.0f} MB"
                     f"{w[key]['cpu']:8.2f}")
    for name, key in (("  of which start-up: imports + parser", "terrain start-up"),
                      ("  of which start-up: import rasterio", "rasterio start-up")):
        if key in w:
            lines.append(f"  {name:40}{w[key]['best']:8.2f}{w[key]['median']:10.2f}{'':8}"
                         f"{w[key]['peak_rss'] / 2**20:8.0f} MB{w[key]['cpu']:8.2f}")
    lines.append(f"  whole-process speed-up {w['rasterio']['best'] / w['terrain']['best']:.2f}x (best), "
                 f"{w['rasterio']['median'] / w['terrain']['median']:.2f}x (median)")
    how = ("the command's ingest call, parser loaded" if r["scheduler"] == "default" else
           f"on a running scheduler, parser loaded; scheduler "
           f"{'LocalCluster' if r['scheduler'] == 'local' else r['scheduler']}")
    lines.append(f"in-process (terrain: {how}):")
    lines.append(f"{'':18}{'seconds':>9}{'MB/s':>9}{'Mcells/s':>10}{'peak RSS':>11}")
    for name, key in (("terrain ingest", "terrain"), ("rasterio read", "rasterio")):
        s = r[key]["seconds"]
        lines.append(f"{name:18}{s:9.2f}{mb / s:9.1f}{mcells / s:10.1f}"
                     f"{r[key]['peak_rss'] / 2**20:8.0f} MB")
    t = r["terrain"]
    once = t["kernels"] + t["startup"]
    whole = t["seconds"] + once
    lines.append(f"speed-up {r['rasterio']['seconds'] / t['seconds']:.2f}x")
    lines.append(f"once per process, not in terrain's figure: parser library load "
                 f"{t['kernels']:.2f} s, scheduler start-up {t['startup']:.2f} s; with them "
                 f"{whole:.2f} s, {mb / whole:.1f} MB/s, "
                 f"{r['rasterio']['seconds'] / whole:.2f}x")
    return "\n".join(lines)


def bench_ingest_command(args):
    """``terrain bench ingest [--rows R] [--cols C] [--tile T] [--workdir D] [--scheduler S]``."""
    r = run_bench_ingest(args.rows, args.cols, args.tile, args.workdir, args.scheduler,
                         getattr(args, "repeat", 3))
    print(_format(r))
    w = r["whole_process"]
    floor = FLOORS.get((args.rows, args.cols))
    goals = [(f"whole process >= {floor:g}x rasterio at {args.rows} x {args.cols} (best)",
              w["rasterio"]["best"] / w["terrain"]["best"] >= floor)] if floor else []
    return verdict([("ingested values vs rasterio's read", r["rasterio"]["identical"])], goals)


if __name__ == "__main__":  # child processes of run_bench_ingest
    import argparse
    ap = argparse.ArgumentParser(prog="python -m benchmarks.ingest", description="one side of "
                                 "python -m benchmarks ingest, run by it as a child process")
    ap.add_argument("which", choices=("terrain", "rasterio"))
    ap.add_argument("rest", nargs="+", help="terrain: IN STORE TILE SCHEDULER; rasterio: IN STORE")
    args = ap.parse_args()
    which, rest = args.which, args.rest
    if which == "terrain":
        result = _child_terrain(rest[0], rest[1], int(rest[2]), rest[3] or None)
    else:
        result = _child_rasterio(rest[0], rest[1])
    print(json.dumps(result))
