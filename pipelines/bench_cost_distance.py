"""``terrain bench cost-distance``: our in-core exact SSSP against the peers, one run.

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
"""

import math
import time

import numpy as np

from terrain.backend import get_backend
from terrain.grid.costs import ARC_DC, ARC_DR, arc_codes, arc_lengths

from ._bench import peak_rss_bytes

__all__ = ["bench_cost_distance_command", "friction_grid", "scipy_cost_distance"]

SCIPY_MAX_CELLS = 4096 * 4096


def friction_grid(rows, cols, seed=0):
    """The benchmark's friction: uniform in [1, 2], float32."""
    return np.random.default_rng(seed).uniform(1.0, 2.0, (rows, cols)).astype(np.float32)


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


def bench_cost_distance_command(args):
    from terrain.grid.sssp import grid_sssp

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
                    "-"))
    rss_ours = peak_rss_bytes()

    try:
        from skimage.graph import MCP_Geometric
    except ImportError:
        results.append(("scikit-image MCP_Geometric", None, "not installed"))
    else:
        clock = _Clock()
        mcp = MCP_Geometric(fr.astype(np.float64), fully_connected=True)
        cum, _ = mcp.find_costs([src])
        results.append(("scikit-image MCP_Geometric", clock.read(),
                        f"{_rel(cum, ours.distance):.1e}"))
        del mcp, cum

    if rows * cols > SCIPY_MAX_CELLS:
        results.append(("scipy dijkstra (CSR build incl.)", None,
                        f"skipped above {SCIPY_MAX_CELLS} cells (memory)"))
    else:
        clock = _Clock()
        d = scipy_cost_distance(fr, src)
        results.append(("scipy dijkstra (CSR build incl.)", clock.read(),
                        f"{_rel(d, ours.distance):.1e}"))
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
        results.append(("xarray-spatial cost_distance", clock.read(),
                        f"{_rel(xd, ours.distance):.1e}"))

    print(f"cost-distance bench: {rows} x {cols} cells, friction U[1,2] (seed {args.seed}), "
          f"one source at the centre, 8-connected; device {be.device_name()}")
    print(f"{'implementation':36s} {'wall s':>8s} {'x ours':>7s} {'CPU s':>8s} {'x ours':>7s} "
          f"{'Mcells/s':>9s}  max rel. diff vs ours")
    for name, secs, note in results:
        if secs is None:
            print(f"{name:36s} {'-':>8s} {'-':>7s} {'-':>8s} {'-':>7s} {'-':>9s}  {note}")
        else:
            wall, cpu = secs
            print(f"{name:36s} {wall:8.2f} {wall / t_ours:7.2f} {cpu:8.2f} {cpu / c_ours:7.2f} "
                  f"{rows * cols / wall / 1e6:9.2f}  {note}")
    print(f"reached {ours.reached} cells, max distance {np.nanmax(ours.distance):.6f}; "
          f"peak RSS after terrain {rss_ours / 2**30:.2f} GiB, at the end "
          f"{peak_rss_bytes() / 2**30:.2f} GiB")
    return 0
