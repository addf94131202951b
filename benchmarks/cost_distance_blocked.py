"""``python -m benchmarks.cost_distance_blocked``: the out-of-core CPU cost distance
(``cost-distance --route blocked``) against the in-core command, whole processes.

The grid of the issue's CPU benchmark: friction uniform random in [1, 2] (seeded), elevation
0, ``--cost friction``, 8-connected, one source in the centre; the DEM and the friction are
written once into tile stores (512² tiles, shards as ``ingest`` makes them) under
``--workdir``. Each run is ``python -m terrain.run cost-distance`` in a child process
(``--scheduler threads``, ``--memory`` as given), which reports its own wall and CPU
seconds, peak RSS (``ru_maxrss``) and bytes read and written (``rchar``/``wchar`` of
``/proc/self/io``: every byte through a system call, page cache or not). The table gives
them beside the stores' sizes: "r + w / stores" divides the bytes by the input stores (DEM
and friction) plus the output store. The in-core run (``--in-core``) is the peer: the same
command holding the grid; ``--compare`` checks that both stores hold the same bits.
The blocked run's summary gives its rounds and block visits per stage.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from .common import child_env, verdict

__all__ = ["main", "make_stores"]

_CHILD = r"""
import json, resource, sys, time
from terrain.run import main
t0, c0 = time.perf_counter(), time.process_time()
rc = main(sys.argv[1:])
io = dict(l.split(": ") for l in open("/proc/self/io").read().split("\n") if l)
print("BENCH " + json.dumps({"rc": rc, "wall": time.perf_counter() - t0,
      "cpu": time.process_time() - c0,
      "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
      "read": int(io["rchar"]), "written": int(io["wchar"])}), file=sys.stderr)
sys.exit(rc)
"""


def _du(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def make_stores(work, n, seed=0):
    """``(dem, friction)`` tile stores of ``n`` x ``n`` cells under ``work`` (kept)."""
    from terrain.tiles import is_store
    from terrain.tiles.store import create_store

    from pipelines.ingest import default_compressors
    gt = (0.0, 1.0, 0.0, float(n), 0.0, -1.0)
    out = []
    for name in ("dem", "friction"):
        p = Path(work) / f"{name}-{n}.zarr"
        out.append(p)
        if is_store(p):
            continue
        tmp = p.with_name(p.name + ".partial")
        st = create_store(tmp, (n, n), 512, geotransform=gt, source="bench-blocked",
                          compressors=default_compressors())
        band = 512 * st.tiles_per_shard
        rng = np.random.default_rng(seed)
        for r0 in range(0, n, band):
            r1 = min(r0 + band, n)
            st.elevation[r0:r1, :] = (np.zeros((r1 - r0, n), np.float32) if name == "dem" else
                                      rng.uniform(1.0, 2.0, (r1 - r0, n)).astype(np.float32))
        os.replace(tmp, p)
    return out


def _run(dem, friction, out, n, algorithm, memory):
    cmd = [sys.executable, "-c", _CHILD, "cost-distance", str(dem), "--cost", "friction",
           "--friction", str(friction), "--source-cell", f"{n // 2},{n // 2}", "-o", str(out),
           "--overwrite", "--route", algorithm, "--scheduler", "threads", "--json"]
    if memory:
        cmd += ["--memory", memory]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=child_env())
    line = [x for x in proc.stderr.splitlines() if x.startswith("BENCH ")]
    if proc.returncode != 0 or not line:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(proc.returncode or 1)
    return json.loads(line[-1][6:]), json.loads(proc.stdout)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cost_distance_blocked",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, action="append", help="grid side (repeatable)")
    ap.add_argument("--memory", default="1.5GB", help="the blocked run's --memory")
    ap.add_argument("--in-core", action="store_true", help="also run the in-core command")
    ap.add_argument("--compare", action="store_true", help="compare the two stores' bits")
    ap.add_argument("--workdir", default="/tmp/terrain-bench-blocked")
    ap.add_argument("--keep", action="store_true", help="keep the stores")
    args = ap.parse_args(argv)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    print(f"{'grid':>7s} {'run':10s} {'wall s':>7s} {'CPU s':>7s} {'peak RSS':>9s} "
          f"{'r + w':>9s} {'stores':>9s} {'r+w/stores':>10s}  visits (stage 1, 2; blocks)")
    checks = []
    for n in args.size or [2048]:
        dem, fr = make_stores(work, n)
        inputs = _du(dem) + _du(fr)
        runs = (["in-core"] if args.in_core else []) + ["blocked"]
        outs = {}
        for alg in runs:
            out = work / f"out-{n}-{alg}.zarr"
            m, s = _run(dem, fr, out, n, alg, args.memory if alg == "blocked" else None)
            stores = inputs + _du(out)
            outs[alg] = out
            st = s.get("stage_stats") or {}
            visits = (f"{st['stage1']['visits']}, {st['stage2']['visits']}; {s['blocks']} "
                      f"of {s['block']}², max {s['max_block_visits']}" if st else "")
            print(f"{n:>6d}² {alg:10s} {m['wall']:7.1f} {m['cpu']:7.1f} "
                  f"{m['rss'] / 1e9:7.2f} GB {(m['read'] + m['written']) / 1e9:6.2f} GB "
                  f"{stores / 1e9:6.2f} GB {(m['read'] + m['written']) / stores:10.2f}  {visits}",
                  flush=True)
        if args.compare and len(outs) == 2:
            import zarr
            a, b = (zarr.open_group(str(p), mode="r") for p in outs.values())
            same = all(np.array_equal(np.asarray(a[k][:]).view(np.uint8),
                                      np.asarray(b[k][:]).view(np.uint8))
                       for k in ("distance", "allocation", "backlink"))
            print(f"{n:>6d}² blocked == in-core bit for bit: {same}")
            checks.append((f"{n}² blocked store vs in-core store, bit for bit", same))
        if not args.keep:
            import shutil
            for p in [dem, fr, *outs.values()]:
                shutil.rmtree(p, ignore_errors=True)
    return verdict(checks, unchecked="give --in-core --compare to compare the stores")


if __name__ == "__main__":
    sys.exit(main())
