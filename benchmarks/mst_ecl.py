"""``terrain bench mst --peer ecl``: the in-core GPU grid MST against ECL-MST on the same grid.

ECL-MST (Fallin, Gonzalez, Seo, Burtscher, SC'23; public BSD code) is the fastest published
GPU MST. It is built from its source directory (``--ecl-source DIR``, holding
``ECL-MST_10.cu`` and ``ECLgraph.h``; the source never enters this repository) with ``nvcc``
into a temporary directory. Two edits to the temporary copy only: CUDA 13 removed
``cudaDeviceProp::clockRate`` and ``memoryClockRate`` (its banner prints them: replaced by
``0.0``), and one line printing the total weight of its forest, so both weights are printed.

For each side (``--sides``, default 4096 and 8192): an integer DEM (the synthetic relief of
``bench mst`` rounded) is written as ECL's binary CSR ``.egr`` (int32 nodes, int32 arcs,
int32 nindex[nodes + 1], int32 nlist[arcs], int32 eweight[arcs]; every undirected edge both
ways, 8-connected, weight ``max(z_u, z_v)``). ECL-MST runs on it; its ``Dev+: T s`` line is its
GPU time with the CSR already on the device. It then checks itself against a serial Kruskal
for minutes: the process is killed once the figures are read. Beside it:

* ours, device: :func:`terrain.grid.mst_device.device_mst` with the DEM already on the device,
  timed with CUDA events (mask and exact weight sum included), best of 5 warm runs;
* ours, whole call: ``grid_mst(dem, backend="gpu")`` from a host DEM to a host mask;
* the tiled (out-of-core) path on the GPU, ``in_core=False``, for comparison (once).
"""

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numba
import numpy as np

from terrain.backend import get_backend
from terrain.errors import InputError
from terrain.grid.edges import DIRECTIONS
from terrain.grid.mst import grid_mst
from terrain.grid.mst_device import device_mst

from .common import verdict

__all__ = ["bench_mst_ecl", "write_egr", "build_ecl", "relief"]

# the grid's 8 neighbours: terrain's edge directions, then their reverses
_NB_DR = np.array([dr for dr, _ in DIRECTIONS] + [-dr for dr, _ in DIRECTIONS], np.int64)
_NB_DC = np.array([dc for _, dc in DIRECTIONS] + [-dc for _, dc in DIRECTIONS], np.int64)


@numba.njit(cache=True, parallel=True)
def _grid_csr(z, nindex, nlist, eweight):
    rows, cols = z.shape
    for r in numba.prange(rows):
        for c in range(cols):
            k = nindex[r * cols + c]
            for q in range(8):
                rr, cc = r + _NB_DR[q], c + _NB_DC[q]
                if 0 <= rr < rows and 0 <= cc < cols:
                    nlist[k] = rr * cols + cc
                    eweight[k] = max(z[r, c], z[rr, cc])
                    k += 1


def write_egr(z, path):
    """Write the 8-connected grid graph of the integer DEM ``z`` (no nodata) as ECL's ``.egr``.

    Returns the number of arcs (twice the edges).

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.egr")
    >>> write_egr(np.array([[1, 2], [3, 4]], np.int32), p)
    12
    >>> np.fromfile(p, np.int32)[:7].tolist()  # nodes, arcs, nindex
    [4, 12, 0, 3, 6, 9, 12]
    """
    z = np.ascontiguousarray(z, np.int32)
    rows, cols = z.shape
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    deg = np.zeros((rows, cols), np.int64)
    for q in range(8):
        rr, cc = r + _NB_DR[q], c + _NB_DC[q]
        deg += ((rr >= 0) & (rr < rows) & (cc >= 0) & (cc < cols))
    nindex = np.zeros(rows * cols + 1, np.int64)
    np.cumsum(deg.ravel(), out=nindex[1:])
    arcs = int(nindex[-1])
    if arcs >= 2**31:
        raise InputError(f"write_egr: {arcs} arcs exceed ECL's int32 counts")
    nlist = np.empty(arcs, np.int32)
    eweight = np.empty(arcs, np.int32)
    _grid_csr(z, nindex, nlist, eweight)
    with open(path, "wb") as f:
        np.array([rows * cols, arcs], np.int32).tofile(f)
        nindex.astype(np.int32).tofile(f)
        nlist.tofile(f)
        eweight.tofile(f)
    return arcs


_WEIGHT_LINE = (
    '  {unsigned long long terrain_w = 0; for (int j = 0; j < g.edges; j++) '
    'if (gpuMSTedges[j]) terrain_w += g.eweight[j]; '
    'printf("MST weight: %llu\\n", terrain_w); fflush(stdout);}\n')


def build_ecl(source_dir, build_dir, arch="sm_90"):
    """Build ECL-MST from ``source_dir`` into ``build_dir`` (a patched temporary copy).

    Returns ``(executable, prints_weight)``.
    """
    src = Path(source_dir) / "ECL-MST_10.cu"
    if not src.is_file():
        raise InputError(f"{src}: ECL-MST source not found")
    text = src.read_text()
    text = text.replace("deviceProp.clockRate * 0.001", "0.0")
    text = text.replace("deviceProp.memoryClockRate * 0.001", "0.0")
    anchor = "  // run CPU code and compare result\n"
    patched = anchor in text
    text = text.replace(anchor, _WEIGHT_LINE + anchor, 1)
    build_dir = Path(build_dir)
    (build_dir / "ECL-MST_10.cu").write_text(text)
    for h in Path(source_dir).glob("*.h"):
        shutil.copy(h, build_dir / h.name)
    exe = build_dir / "ecl-mst"
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).is_file():
        raise InputError("bench mst --peer ecl: nvcc not found (ECL-MST is built from source)")
    done = subprocess.run([nvcc, "-O3", f"-arch={arch}", "ECL-MST_10.cu", "-o", str(exe)],
                          cwd=build_dir, capture_output=True, text=True)
    if done.returncode:
        raise InputError(f"{src}: nvcc failed: {done.stderr.strip()[-500:]}")
    return exe, patched


def run_ecl(exe, egr, prints_weight=True, timeout=600):
    """Run ECL-MST on ``egr`` until its GPU time and forest weight are printed, then kill it.

    Returns ``(dev_seconds, weight or None, gpu_line)``.
    """
    proc = subprocess.Popen([str(exe), str(egr)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    dev = weight = None
    gpu = ""
    t0 = time.perf_counter()
    try:
        for line in proc.stdout:
            if line.startswith("GPU:"):
                gpu = line.strip()
            m = re.match(r"Dev[+-]:\s+([0-9.eE+-]+) s", line)
            if m:
                dev = float(m.group(1))
            m = re.match(r"MST weight: (\d+)", line)
            if m:
                weight = int(m.group(1))
            if dev is not None and (weight is not None or not prints_weight):
                break
            if time.perf_counter() - t0 > timeout:
                break
    finally:
        proc.kill()  # its serial self-check takes minutes on these graphs
        proc.wait()
    if dev is None:
        raise RuntimeError(f"ECL-MST printed no Dev line for {egr}")
    return dev, weight, gpu


def relief(r0, r1, c0, c1, seed):
    """Smooth relief + noise over rows r0:r1, cols c0:c1 (continuous across blocks)."""
    y = np.arange(r0, r1, dtype=np.float64)[:, None]
    x = np.arange(c0, c1, dtype=np.float64)[None, :]
    z = (500 + 200 * np.sin(x / 311.0) * np.cos(y / 487.0) + 60 * np.sin((x + 2 * y) / 53.0)
         + 15 * np.cos((3 * x - y) / 17.0))
    rng = np.random.default_rng([seed, r0, c0])
    z += rng.normal(0.0, 2.0, z.shape)
    return z.astype(np.float32)


def _integer_dem(side, seed=0):
    return np.round(relief(0, side, 0, side, seed)).astype(np.float32)


def _device_seconds(z_dev, be, reps=5):
    cp = be.xp
    device_mst(z_dev, 8, 0, np.ones(4), be)  # compile, warm
    best = None
    for _ in range(reps):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        f = device_mst(z_dev, 8, 0, np.ones(4), be)
        end.record()
        end.synchronize()
        dt = cp.cuda.get_elapsed_time(start, end) / 1e3
        best = dt if best is None else min(best, dt)
    return best, f


def bench_mst_ecl(args):
    """``terrain bench mst --peer ecl --ecl-source DIR [--sides 4096,8192]``."""
    be = get_backend("gpu")
    cp = be.xp
    sides = [int(s) for s in str(args.sides).split(",") if s.strip()]
    checks, goals = [], []
    with tempfile.TemporaryDirectory(prefix="terrain-ecl-") as tmp:
        t0 = time.perf_counter()
        exe, prints_weight = build_ecl(args.ecl_source, tmp)
        print(f"bench mst --peer ecl: built ECL-MST in {time.perf_counter() - t0:.1f} s "
              f"(device {be.device_name()})")
        for side in sides:
            z = _integer_dem(side)
            egr = Path(tmp) / f"grid{side}.egr"
            t0 = time.perf_counter()
            arcs = write_egr(z.astype(np.int32), egr)
            made = time.perf_counter() - t0
            ecl_s, ecl_w, gpu = run_ecl(exe, egr, prints_weight)
            os.remove(egr)
            z_dev = cp.asarray(z)
            dev_s, f = _device_seconds(z_dev, be)
            del z_dev
            t0 = time.perf_counter()
            r = grid_mst(z, 8, "max", backend=be)
            call_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            r = grid_mst(z, 8, "max", backend=be)
            call_s = min(call_s, time.perf_counter() - t0)
            t0 = time.perf_counter()
            tiled = grid_mst(z, 8, "max", backend=be, in_core=False)
            tiled_s = time.perf_counter() - t0
            same = np.array_equal(tiled.mask, r.mask) and tiled.total_weight == r.total_weight
            print(f"{side}^2 ({side * side / 1e6:.1f} M vertices, {arcs // 2 / 1e6:.1f} M edges; "
                  f".egr written in {made:.1f} s)")
            print(f"  ECL-MST     GPU {ecl_s * 1e3:9.2f} ms (CSR on the device)   weight "
                  f"{ecl_w if ecl_w is not None else 'n/a'}   [{gpu}]")
            print(f"  terrain     GPU {dev_s * 1e3:9.2f} ms (DEM on the device)   weight "
                  f"{f.total_weight:.0f}   {f.rounds} rounds; "
                  f"{ecl_s / dev_s:.1f}x ECL-MST's speed")
            print(f"  terrain grid_mst call (host DEM -> host mask): {call_s * 1e3:.1f} ms, "
                  f"path {r.path}; tiled path (in_core=False) {tiled_s:.2f} s, same forest: "
                  f"{same}")
            checks.append((f"{side}^2 tiled vs in-core forest", same))
            if ecl_w is not None:
                checks.append((f"{side}^2 total weight vs ECL-MST's", ecl_w == f.total_weight))
            goals.append((f"{side}^2 terrain's in-core GPU MST faster than ECL-MST", dev_s < ecl_s))
    return verdict(checks, goals)
