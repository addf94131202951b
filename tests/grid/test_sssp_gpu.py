"""The GPU in-core SSSP's queue (near-far, terrain/grid/_sssp_gpu.py): its bucket-width rule
on the CPU, and CPU == GPU bit for bit for every bucket width and both GPU queues (gpu)."""

import math

import numpy as np
import pytest

from backends import assert_backends_identical
from terrain.grid.costs import arc_codes, arc_lengths
from terrain.grid._sssp_gpu import mean_arc_cost, near_far_delta
from terrain.grid.sssp import check_max_cost, check_sources, grid_sssp, prepare_grid


def test_mean_arc_cost_is_the_mean_over_all_arcs_of_a_small_grid():
    rng = np.random.default_rng(0)
    z = rng.uniform(0, 10, (7, 9)).astype(np.float32)
    z[3, 4] = np.nan
    codes = arc_codes(8)
    lengths = arc_lengths((1.0, 1.0))
    costs = []  # every arc, by brute force (the lattice covers the whole grid here)
    for r in range(7):
        for c in range(9):
            for k, (dr, dc) in enumerate([(0, 1), (1, 1), (1, 0), (1, -1), (0, -1), (-1, -1),
                                          (-1, 0), (-1, 1)]):
                r2, c2 = r + dr, c + dc
                if 0 <= r2 < 7 and 0 <= c2 < 9:
                    w = abs(float(z[r2, c2]) - float(z[r, c]))
                    if math.isfinite(w):
                        costs.append(w)
    assert mean_arc_cost(z, None, 0, codes, lengths) == pytest.approx(np.mean(costs), rel=1e-12)


def test_mean_arc_cost_friction_and_empty_sample():
    f = np.full((5, 5), 2.0, np.float32)
    z = np.zeros((5, 5), np.float32)
    m = mean_arc_cost(z, f, 1, arc_codes(4), arc_lengths((3.0, 3.0)))
    assert m == pytest.approx(6.0)  # length 3 x mean friction 2, every rook arc
    assert math.isnan(mean_arc_cost(np.full((2, 2), np.nan, np.float32), None, 0, arc_codes(8),
                                    arc_lengths((1.0, 1.0))))


def test_near_far_delta_rule():
    assert near_far_delta(1.0, 8, factor=1.0) == 4.0  # 32 / 8 * mean
    assert near_far_delta(1.0, 16, factor=2.0) == 4.0
    assert near_far_delta(0.0, 8) == math.inf  # all flat: one bucket
    assert near_far_delta(math.nan, 8) == math.inf
    assert near_far_delta(math.inf, 8) == math.inf
    assert near_far_delta(1e-300, 8, factor=1e-300) == math.inf  # underflow: one bucket


def _case(seed, cost, conn, shape=(60, 80), flat=False):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 2 if flat else 6, shape).astype(np.float32)
    if not flat:
        z += rng.uniform(0, 1, shape).astype(np.float32) * (seed % 2)
    z[rng.random(shape) < 0.12] = np.nan
    fr = rng.uniform(1, 2, shape).astype(np.float32)
    valid = np.argwhere(~np.isnan(z))
    sources = [tuple(valid[i]) for i in (3, len(valid) // 3, len(valid) - 2)]
    return z, fr if cost != "absdiff" else None, sources


@pytest.mark.gpu
@pytest.mark.parametrize("queue, factor", [("near-far", None), ("near-far", 1e-6),
                                           ("near-far", 0.3), ("near-far", math.inf),
                                           ("steps", None),
                                           ("steps", 1e-6)])
@pytest.mark.parametrize("cost, conn", [("absdiff", 8), ("friction", 4), ("tobler", 16)])
def test_gpu_queues_equal_cpu(queue, factor, cost, conn):
    from terrain.backend import get_backend
    from terrain.grid._sssp_gpu import GpuOps

    z, fr, sources = _case(5, cost, conn, flat=(cost == "absdiff"))
    starts = [0.0, 1.5, 0.25]
    cpu = grid_sssp(z, sources, starts, cost=cost, friction=fr, connectivity=conn,
                    cellsize=(2.0, 1.5), max_cost=150.0, backend="cpu")
    zz, f, valid, model, codes, lengths = prepare_grid(z, fr, cost, conn, (2.0, 1.5))
    rows, cols, costs = check_sources(sources, valid, starts)
    delta = None
    if factor is not None:
        delta = near_far_delta(mean_arc_cost(zz, f, model, codes, lengths), len(codes), factor)
        if factor == math.inf:
            delta = math.inf
    # "steps": near-far with one launch a step instead of the persistent kernels
    gpu = GpuOps(get_backend("gpu")).solve(zz, f, model, codes, lengths, rows, cols, costs,
                                           check_max_cost(150.0), delta=delta,
                                           persistent=queue != "steps")
    for name in ("distance", "allocation", "backlink", "hops"):
        a, b = getattr(cpu, name), getattr(gpu, name)
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), name


@pytest.mark.gpu
@pytest.mark.parametrize("persistent, graph", [(True, False), (False, True), (False, False)])
def test_gpu_near_far_large_frontiers_equal_cpu(persistent, graph):
    """A grid wide enough for many blocks per step, absdiff with flats (zero costs), one
    source in the middle and one at a corner; the persistent kernels, and one launch a step
    with and without the captured CUDA graph."""
    from terrain.backend import get_backend
    from terrain.grid._sssp_gpu import GpuOps

    rng = np.random.default_rng(11)
    z = (rng.integers(0, 4, (300, 700)) * 0.5).astype(np.float32)
    z[rng.random(z.shape) < 0.05] = np.nan
    z[150, 350] = z[0, 0] = 1.0
    sources = [(150, 350), (0, 0)]
    cpu = grid_sssp(z, sources, backend="cpu")
    zz, f, valid, model, codes, lengths = prepare_grid(z, None, "absdiff", 8, (1.0, 1.0))
    rows, cols, costs = check_sources(sources, valid, None)
    gpu = GpuOps(get_backend("gpu")).solve(zz, f, model, codes, lengths, rows, cols, costs,
                                           check_max_cost(None), use_graph=graph,
                                           persistent=persistent)
    if persistent:
        assert gpu.stats["launches"] == 1 and gpu.stats["label_launches"] == 1
    else:
        assert gpu.stats["graph"] == graph
    for name in ("distance", "allocation", "backlink", "hops"):
        assert np.array_equal(getattr(cpu, name), getattr(gpu, name), equal_nan=True), name


@pytest.mark.gpu
def test_gpu_grid_sssp_reports_phases():
    z, _, sources = _case(2, "absdiff", 8)

    def run(backend):
        r = grid_sssp(z, sources, cost="absdiff", backend=backend)
        if backend == "gpu":
            assert r.stats["queue"] == "near-far"
            assert set(r.stats["phases"]) >= {"upload", "distance", "labels", "backlinks",
                                              "download"}
            assert r.stats["reached_cells"] == np.count_nonzero(~np.isnan(r.distance))
            assert r.stats["max_distance"] == np.nanmax(r.distance)
        return r.distance, r.allocation, r.backlink, r.hops

    assert_backends_identical(run)


@pytest.mark.gpu
def test_download_through_pinned_stages_equals_asnumpy():
    import cupy as cp

    from terrain.grid._sssp_gpu import download

    big = cp.arange(40_000_003, dtype=cp.float64) * 0.5  # 320 MB: many stages, a short tail
    small = cp.arange(1001, dtype=cp.uint8)
    ints = cp.arange(-5, 3_000_000, dtype=cp.int32)
    out = download(cp, (big, small, ints))
    for dev, host in zip((big, small, ints), out):
        assert host.dtype == dev.dtype and np.array_equal(host, cp.asnumpy(dev))
    (only,) = download(cp, (small,))  # below the staging threshold: plain copies
    assert np.array_equal(only, cp.asnumpy(small))


@pytest.mark.gpu
@pytest.mark.parametrize("cost, conn, max_cost", [("absdiff", 8, None), ("tobler", 16, 40.0)])
def test_gpu_early_distances_and_no_hops_equal_cpu(cost, conn, max_cost):
    """``on_distance`` gets the final distances before the labels (the array the result
    holds), ``hops=False`` leaves the hops on the device; the rest is the CPU's bits."""
    z, fr, sources = _case(7, cost, conn)
    seen = []
    cpu = grid_sssp(z, sources, cost=cost, friction=fr, connectivity=conn, max_cost=max_cost,
                    backend="cpu", on_distance=seen.append)
    gpu = grid_sssp(z, sources, cost=cost, friction=fr, connectivity=conn, max_cost=max_cost,
                    backend="gpu", on_distance=seen.append, hops=False, delta=0.7)
    assert len(seen) == 2 and seen[0] is cpu.distance and seen[1] is gpu.distance
    assert gpu.hops is None and "distance_out" in gpu.stats["phases"]
    assert gpu.stats["delta"] == 0.7
    for name in ("distance", "allocation", "backlink"):
        a, b = getattr(cpu, name), getattr(gpu, name)
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True), name


@pytest.mark.gpu
@pytest.mark.parametrize("hops", [False, True])
def test_gpu_results_kept_on_the_device_equal_cpu(hops):
    """``on_device=True``: the result's arrays (and ``on_distance``'s) are CuPy arrays of
    the grid's shape, the CPU's bits; ``to_host`` downloads them."""
    import cupy as cp
    z, fr, sources = _case(5, "tobler", 16)
    seen = []
    cpu = grid_sssp(z, sources, cost="tobler", friction=fr, connectivity=16, backend="cpu")
    gpu = grid_sssp(z, sources, cost="tobler", friction=fr, connectivity=16, backend="gpu",
                    on_distance=seen.append, hops=hops, on_device=True)
    assert len(seen) == 1 and seen[0] is gpu.distance
    host = gpu.to_host()
    assert (gpu.hops is None) == (not hops) == (host.hops is None)
    for name in ("distance", "allocation", "backlink") + (("hops",) if hops else ()):
        a, d, h = getattr(cpu, name), getattr(gpu, name), getattr(host, name)
        assert isinstance(d, cp.ndarray) and isinstance(h, np.ndarray), name
        assert d.shape == h.shape == a.shape and a.dtype == d.dtype == h.dtype, name
        assert np.array_equal(a, h, equal_nan=True), name
    assert host.to_host() is host
