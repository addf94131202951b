"""``python -m benchmarks scale``: the tiled MST of a store on a Dask cluster of N worker
processes started here (``dask scheduler`` + N ``dask worker``, one thread each, each in its
own empty folder), the points docs/scale.md's model is checked against.

Prints one row per N: wall seconds, the workers' CPU seconds (user+sys, from the workers
themselves), the task seconds of each phase and the bytes read and written, as JSON lines.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import verdict

ROOT = Path(__file__).resolve().parents[1]


def _worker_cpu():
    t = os.times()
    return t.user + t.system


def _worker_peak_rss_mb():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_on_cluster(store, workers, tile_dir, run=0):
    """Run ``terrain mst STORE`` on a fresh cluster of ``workers`` processes; its row."""
    from distributed import Client
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    bindir = Path(sys.executable).parent
    sched_file = Path(tile_dir) / f"scheduler-{run}.json"
    procs = [subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file)],
                              cwd=tile_dir, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    try:
        while not sched_file.exists():
            time.sleep(0.1)
        time.sleep(0.5)
        for i in range(workers):
            cwd = tempfile.mkdtemp(prefix=f"worker{i}-", dir=tile_dir)
            procs.append(subprocess.Popen(
                [str(bindir / "dask"), "worker", "--scheduler-file", str(sched_file), "--nthreads",
                 "1", "--nworkers", "1", "--no-dashboard", "--local-directory", cwd],
                cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        client = Client(scheduler_file=str(sched_file))
        client.wait_for_workers(workers, timeout=120)
        address = client.scheduler.address
        cpu0 = sum(client.run(_worker_cpu).values())
        out = Path(tile_dir) / f"m{run}.zarr"
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(store), "-o", str(out),
                               "--backend", "cpu", "--json", "--scheduler", address],
                              env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode:
            raise SystemExit(proc.stderr)
        cpu = sum(client.run(_worker_cpu).values()) - cpu0
        rss = max(client.run(_worker_peak_rss_mb).values())
        client.close()
        doc = json.loads(proc.stdout)
        return {"workers": workers, "cells": doc["rows"] * doc["cols"], "tile": doc["tile"],
                "wall_s": round(wall, 2), "worker_cpu_s": round(cpu, 2),
                "worker_peak_rss_mb": round(rss),
                "task_s": {k: round(v, 2) for k, v in doc["phase_seconds"].items()},
                "read_bytes": doc["read_bytes"], "written_bytes": doc["written_bytes"],
                "graph_bytes": doc["graph_bytes"], "path": doc["path"],
                "edges": doc["edges"], "total_weight": doc["total_weight"]}
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def bench_scale_command(args):
    from terrain.io import write_synth
    from terrain.run import main
    with tempfile.TemporaryDirectory(prefix="terrain-scale-") as d:
        asc = Path(d) / "g.asc"
        write_synth(asc, args.rows, args.cols, seed=args.seed)
        store = Path(d) / "g.zarr"
        if main(["ingest", str(asc), "-o", str(store), "--tile", str(args.tile),
                 "--scheduler", "threads"]):
            raise SystemExit("ingest failed")
        asc.unlink()
        forests = set()
        for run, n in enumerate(args.workers):
            row = run_on_cluster(store, n, d, run)
            forests.add((row["edges"], row["total_weight"]))
            print(json.dumps(row), flush=True)
    return verdict([("forests (edges, total weight) on every number of workers",
                     len(forests) == 1)] if len(args.workers) > 1 else [],
                   unchecked="one number of workers: give two to compare their forests")


def add_arguments(p):
    p.add_argument("--rows", type=int, default=3000)
    p.add_argument("--cols", type=int, default=3000)
    p.add_argument("--tile", type=int, default=256)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
