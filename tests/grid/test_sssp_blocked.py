"""The blocked out-of-core SSSP (terrain.grid.sssp_blocked): equal to the in-core algorithm bit
for bit (distance, allocation, backlink), and its distances to scipy's Dijkstra."""

import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.csgraph

from terrain.errors import InputError
from terrain.grid.costs import ARC_DC, ARC_DR, arc_codes, arc_costs_np, arc_lengths
from terrain.grid.sssp import grid_sssp
from terrain.grid.sssp_blocked import BlockPlan, blocked_sssp


def _same(a, b):
    assert a.distance.dtype == b.distance.dtype == np.float64
    assert np.array_equal(np.isnan(a.distance), np.isnan(b.distance))
    fin = ~np.isnan(b.distance)
    assert np.array_equal(a.distance[fin].view(np.uint64), b.distance[fin].view(np.uint64))
    assert np.array_equal(a.allocation, b.allocation)
    assert np.array_equal(a.backlink, b.backlink)


def _both(dem, sources, side, **kw):
    ref = grid_sssp(dem, sources, backend="cpu", **kw)
    got = blocked_sssp(dem, sources, side=side, **kw)
    _same(got, ref)
    return got, ref


def _rng_dem(rows, cols, seed, integer=False, nodata=0.0):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, 20, (rows, cols)).astype(np.float32) if integer else \
        (rng.random((rows, cols)) * 50).astype(np.float32)
    if nodata:
        z[rng.random((rows, cols)) < nodata] = np.nan
    return z


@pytest.mark.parametrize("connectivity", [4, 8, 16])
@pytest.mark.parametrize("cost", ["absdiff", "friction", "tobler"])
def test_equal_to_in_core(cost, connectivity):
    rng = np.random.default_rng(connectivity)
    z = _rng_dem(70, 53, 1, integer=cost == "absdiff")
    f = (1 + rng.random(z.shape)).astype(np.float32)
    kw = dict(cost=cost, connectivity=connectivity, cellsize=(30.0, 30.0))
    if cost != "absdiff":
        kw["friction"] = f
    srcs = [(35, 26), (0, 0), (69, 52), (16, 16)]  # centre, corners, a block corner
    got, _ = _both(z, srcs, 16, start_costs=[0.0, 5.0, 1.5, 40.0], **kw)
    assert got.stats["stage1"]["visits"] >= got.stats["blocks"]


@pytest.mark.parametrize("side", [4, 5, 16, 33, 64, 100])
def test_block_sides_and_ties(side):
    """Flat friction: many equal-cost paths and exact ties between sources (allocation to
    the lower index, backlinks by the lowest code); sides that do not divide the grid."""
    z = np.zeros((67, 45), np.float32)
    f = np.ones_like(z)
    f[20:40, 10] = 3.0
    _both(z, [(10, 10), (10, 30), (50, 22), (16, 32)], side, cost="friction", friction=f)


def test_nodata_barrier_splits_grid():
    z = _rng_dem(60, 60, 3, integer=True, nodata=0.05)
    z[:, 30] = np.nan  # a wall: the right half is unreached
    z[5, 5] = 1.0
    got, _ = _both(z, [(5, 5)], 16, cost="absdiff", connectivity=8)
    assert np.isnan(got.distance[:, 31:]).all()
    assert (got.backlink[:, 31:] == 255).all() and (got.allocation[:, 31:] == -1).all()


def test_knight_moves_do_not_pass_one_cell_walls():
    z = np.ones((48, 48), np.float32)
    f = np.ones_like(z)
    f[:, 16] = np.nan  # a one-cell wall on a block edge: a knight arc passes between nodata
    got, _ = _both(z, [(8, 3)], 16, cost="friction", friction=f, connectivity=16)
    assert np.isnan(got.distance[:, 16:]).all() and np.isfinite(got.distance[:, :16]).all()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("side", [4, 5])
def test_knight_arcs_passing_between_cells_of_a_third_block(seed, side):
    """Small blocks, steep friction and nodata: many knight arcs cross a block corner and
    pass between cells of a block solved only later (the driver then rechecks them)."""
    rng = np.random.default_rng(seed)
    z = _rng_dem(23, 19, seed, nodata=0.15)
    f = np.exp(rng.normal(0, 1.5, z.shape)).astype(np.float32)
    src = tuple(int(x) for x in np.argwhere(~np.isnan(z))[0])
    for cost in ("friction", "tobler"):
        _both(z, [src], side, cost=cost, friction=f, connectivity=16, cellsize=(10.0, 7.0))


def test_max_cost_and_float_dem():
    z = _rng_dem(90, 70, 5)
    got, _ = _both(z, [(45, 35), (3, 60)], 32, cost="tobler", connectivity=8,
                   cellsize=(10.0, 10.0), max_cost=400.0)
    assert np.isnan(got.distance).any() and np.nanmax(got.distance) <= 400.0


def test_multi_source_same_cell_and_batch():
    z = _rng_dem(40, 40, 7)
    f = np.full(z.shape, 1.5, np.float32)
    ref = grid_sssp(z, [(20, 20), (20, 20), (0, 39)], cost="friction", friction=f,
                    backend="cpu")
    for batch in (1, 3, 8):
        got = blocked_sssp(z, [(20, 20), (20, 20), (0, 39)], cost="friction", friction=f,
                           side=8, batch=batch)
        _same(got, ref)
    assert set(np.unique(got.allocation).tolist()) == {0, 2}


def test_distances_equal_scipy_dijkstra():
    """An independent oracle: the same graph as a CSR matrix, multi-source = min."""
    z = _rng_dem(50, 41, 11, integer=True, nodata=0.03)
    srcs = [(25, 20), (2, 3)]
    for s in srcs:
        z[s] = 3.0
    rows, cols = z.shape
    lengths = arc_lengths((1.0, 1.0))
    us, vs, ws = [], [], []
    rr, cc = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    for k in arc_codes(8):
        r2, c2 = rr + ARC_DR[k], cc + ARC_DC[k]
        ok = (r2 >= 0) & (r2 < rows) & (c2 >= 0) & (c2 < cols)
        a, b = rr[ok], cc[ok]
        c, d = r2[ok], c2[ok]
        good = ~np.isnan(z[a, b]) & ~np.isnan(z[c, d])
        a, b, c, d = a[good], b[good], c[good], d[good]
        w = arc_costs_np(z[a, b], z[c, d], 1.0, k, 0, lengths)
        us.append(a * cols + b), vs.append(c * cols + d), ws.append(w + 0.0)
    u, v, w = (np.concatenate(x) for x in (us, vs, ws))
    # scipy takes a stored 0 for "no arc": zero-cost arcs (flats) cost 1e-300 there, which
    # leaves every integer distance below 1 + 1e-290 of the exact one (rounded away below)
    n = rows * cols
    g = scipy.sparse.csr_matrix((w + 1e-300, (u, v)), shape=(n, n))
    ref = scipy.sparse.csgraph.dijkstra(g, indices=[r * cols + c for r, c in srcs],
                                        min_only=True).reshape(rows, cols)
    got = blocked_sssp(z, srcs, cost="absdiff", connectivity=8, side=12)
    ref[np.isinf(ref)] = np.nan
    assert np.nanmax(np.abs(ref - np.round(ref))) < 1e-200
    assert np.array_equal(got.distance, np.round(ref), equal_nan=True)


def test_plan_and_bad_input():
    p = BlockPlan((9, 9), 4)
    assert p.blocks == (3, 3) and p.neighbours(0, 0) == [(0, 1), (1, 0), (1, 1)]
    assert p.hrows.tolist() == list(range(9))
    with pytest.raises(InputError, match="block side"):
        BlockPlan((9, 9), 3)
    with pytest.raises(InputError, match="nodata"):
        blocked_sssp(np.full((8, 8), np.nan, np.float32), [(1, 1)], side=4)


@pytest.mark.parametrize("cost", ["friction", "tobler"])
def test_tight_labels_buckets_equal_heap(cost):
    """The label stage's bucket kernel gives the heap's least fixed point (``sssp_cpu`` with
    ``fixed``) from the same final distances, seeds and starting labels: seeds that are not
    tight (ignored), ties between sources (the lower label wins), labels already lower than
    what a seed offers (kept), nodata."""
    from terrain.grid._sssp_cpu import (_NO_TARGETS, bucket_plan, padded_state,
                                        sssp_buckets_cpu, sssp_cpu)
    from terrain.grid._sssp_frame import offsets
    rng = np.random.default_rng(9)
    z = _rng_dem(40, 33, 4, nodata=0.04)
    f = np.where(rng.random(z.shape) < 0.5, 1.0, 2.0).astype(np.float32)  # many ties
    model, codes, lengths = (1 if cost == "friction" else 2), arc_codes(16), arc_lengths((30, 30))
    zp, fp, dist, label = padded_state(z, f)
    offs = offsets(z.shape[1])
    cells = np.flatnonzero(dist == np.inf)[[5, 300, 700, 1100]]
    costs = np.array([0.0, 4.0, 4.0, 1.0])
    sssp_cpu(zp, fp, True, model, lengths, offs, codes, dist, label, cells, costs,
             np.zeros(4, np.int64), False, np.inf, _NO_TARGETS, 0,
             np.zeros(1, np.uint8))  # distances only
    dist[~np.isfinite(dist)] = -np.inf
    plan = bucket_plan(z, f, model, codes, lengths, costs, zp, offs)
    assert plan is not None
    start = np.full(dist.size, np.iinfo(np.int64).max, np.int64)
    start[cells[3] + 1] = 7  # a label lower than any path gives: kept
    # and a seed that is not tight (start cost 50 next to a source of cost 0): ignored,
    # though it offers the lowest label
    cells, costs = np.append(cells, cells[0] + 1), np.append(costs, 50.0)
    seed_l = np.array([1, 2, 3, 4, 0], np.int64) << 32
    want, got = start.copy(), start.copy()
    n_heap = sssp_cpu(zp, fp, True, model, lengths, offs, codes, dist, want, cells, costs,
                      seed_l, True, np.inf, _NO_TARGETS, 0, np.zeros(1, np.uint8))
    n_buckets = sssp_buckets_cpu(zp, fp, True, model, lengths, offs, codes, dist, got, cells,
                                 costs, seed_l, True, np.inf, *plan,
                                 np.empty(dist.size, np.uint8), _NO_TARGETS, 0,
                                 np.zeros(1, np.uint8))
    assert np.array_equal(got, want)
    assert got[cells[3] + 1] == 7 and n_buckets <= n_heap
    reached = want[dist > -np.inf] != np.iinfo(np.int64).max
    assert reached.mean() > 0.9 and set(np.unique(want[dist > -np.inf] >> 32)) >= {1, 2, 4}
    assert want[cells[4]] >> 32 == 1
