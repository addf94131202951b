"""Tiled SSSP (phases 1-3, Haverkort's hierarchy, reuse) against scipy's Dijkstra (CSR tiled_oracle)."""

import numpy as np
import pytest
from scipy.sparse.csgraph import dijkstra

from terrain.errors import InputError
from terrain.grid._tournament import tt_alloc, tt_lower, tt_pop, tt_seed
from terrain.grid.costs import ARC_DC, ARC_DR, arc_costs_np, arc_lengths, cost_model_code
from terrain.grid.sssp import grid_sssp
from terrain.grid.sssp_tiled import (TiledIndex, TiledSpec, node_boundary, tile_boundaries,
                                     tiled_sssp)
from grids import int_dem
from oracles import grid_csr, oracle_factor, tiled_oracle


# ----------------------------------------------------------------------------- tiled_oracle


def float_case(seed, shape, middle):
    """Float elevations in [0, 30) with 3 % nodata, frictions in [1, 2), and three sources:
    the first valid cell, the one at ``1 / middle`` of them, the last."""
    rng = np.random.default_rng(seed)
    z = (rng.random(shape) * 30).astype(np.float32)
    z[rng.random(z.shape) < 0.03] = np.nan
    f = (1 + rng.random(z.shape)).astype(np.float32)
    ok = np.argwhere(~np.isnan(z))
    return z, f, ok[[0, len(ok) // middle, len(ok) - 1]]


def check_exact(z, sources, tile, connectivity=8, max_height=None, start=None, f=None,
                model_name="absdiff"):
    f1 = np.ones_like(z) if f is None else f
    r = tiled_sssp(z, sources, cost=model_name, friction=f, connectivity=connectivity,
                   tile=tile, backend="cpu", max_height=max_height, start_costs=start)
    want, alloc = tiled_oracle(z, f1, sources, connectivity, 0, start)
    got = np.where(np.isnan(r.distance), np.inf, r.distance)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(r.allocation, alloc)
    check_backlinks(z, f1, r, connectivity, 0, sources, start)
    return r


def check_backlinks(z, f, r, connectivity, model, sources, start=None, rtol=0.0):
    """Backlinks end at a source and their arc costs sum to the distance."""
    lengths = arc_lengths((1.0, 1.0))
    R, C = z.shape
    start = np.zeros(len(sources)) if start is None else np.asarray(start, float)
    src_set = {tuple(s): i for i, s in reversed(list(enumerate(map(tuple, sources))))}
    reached = ~np.isnan(r.distance)
    assert np.all(r.backlink[~reached] == 255)
    for v in zip(*np.nonzero(reached)):
        cur, total, steps = v, 0.0, 0
        while r.backlink[cur] != 0:
            k = int(r.backlink[cur]) - 1
            u = (cur[0] + ARC_DR[k], cur[1] + ARC_DC[k])
            back = (k + 4) % 8 if k < 8 else 8 + (k - 8 + 4) % 8
            fac = oracle_factor(f, u[0], u[1], cur[0], cur[1], ~np.isnan(z) & ~np.isnan(f))
            total += float(arc_costs_np(z[u], z[cur], fac[0], back, model, lengths))
            assert r.allocation[u] == r.allocation[v]
            cur = u
            steps += 1
            assert steps <= R * C
        assert cur in src_set
        i = int(r.allocation[v])
        assert tuple(sources[i]) == tuple(cur) or src_set[cur] <= i
        total += start[i]
        assert total == pytest.approx(r.distance[v], rel=max(rtol, 1e-12), abs=1e-9)


# ----------------------------------------------------------------------------- tournament tree

def test_tournament_tree_pops_in_heapq_order():
    """Seeded leaves and decrease-keys pop in the order of ``(d, a, h, leaf)``."""
    rng = np.random.default_rng(1)
    n = 37
    ld = np.where(rng.random(n) < 0.3, rng.integers(0, 9, n).astype(float), np.inf)
    la = rng.integers(0, 3, n).astype(np.int32)
    lh = rng.integers(0, 5, n).astype(np.int32)
    tt = tt_alloc(n)
    tt_seed(*tt, ld, la, lh)
    keys = {i: (ld[i], int(la[i]), int(lh[i])) for i in range(n) if ld[i] < np.inf}
    for i in rng.integers(0, n, 40).tolist():  # lower some keys, insert others
        d, a, h = float(rng.integers(0, 9)), int(rng.integers(0, 3)), int(rng.integers(0, 5))
        if i not in keys or (d, a, h) < keys[i]:
            keys[i] = (d, a, h)
            tt_lower(*tt, i, d, a, h)
    want = [i for _, i in sorted((k, i) for i, k in keys.items())]
    assert [tt_pop(*tt) for _ in want] == want and tt[0][1] == np.inf
    assert len(want) > 20


# ----------------------------------------------------------------------------- phase 1

@pytest.mark.parametrize("connectivity", [4, 8, 16])
def test_phase1_equals_scipy_all_pairs(connectivity):
    rng = np.random.default_rng(2)
    shape, T = (24, 24), 8
    z = int_dem(rng, shape, nan_frac=0.08)
    f = np.ones_like(z)
    spec = TiledSpec(shape, T, connectivity)
    tiles = tile_boundaries(spec, z, f, (0, 24, 0, 24), "cpu")
    for nb in tiles:
        r0, r1, c0, c1 = nb.window
        sub = z[r0:r1, c0:c1]
        g = grid_csr(sub, np.ones_like(sub), connectivity, 0)
        loc = (nb.ids // 24 - r0) * (c1 - c0) + nb.ids % 24 - c0
        assert np.all(~np.isnan(z.reshape(-1)[nb.ids]))
        want = np.round(dijkstra(g, indices=loc)[:, loc], 6)
        np.testing.assert_array_equal(nb.dist, want)
        assert np.all(nb.hops[np.isinf(want)] == 2**31 - 1)
    middle = tiles[4]
    w = 2 if connectivity == 16 else 1
    assert middle.size == np.count_nonzero(~np.isnan(z[8:16, 8:16])) - np.count_nonzero(
        ~np.isnan(z[8 + w:16 - w, 8 + w:16 - w]))


def test_phase1_float_costs_and_hops():
    rng = np.random.default_rng(3)
    z = rng.random((16, 16)).astype(np.float32)
    f = (1 + rng.random((16, 16))).astype(np.float32)
    spec = TiledSpec((16, 16), 8, 8, "friction")
    nb = tile_boundaries(spec, z, f, (0, 16, 0, 16), "cpu")[3]
    r0, r1, c0, c1 = nb.window
    g = grid_csr(z[r0:r1, c0:c1], f[r0:r1, c0:c1], 8, 1)
    loc = (nb.ids // 16 - r0) * 8 + nb.ids % 16 - c0
    d, pred = dijkstra(g, indices=loc, return_predecessors=True)
    np.testing.assert_allclose(nb.dist, d[:, loc], rtol=1e-14)
    assert np.all(np.diag(nb.hops) == 0) and np.all(nb.hops[~np.eye(nb.size, dtype=bool)] > 0)


def test_node_boundary_equals_scipy_on_node():
    rng = np.random.default_rng(4)
    z = int_dem(rng, (32, 32), nan_frac=0.05)
    f = np.ones_like(z)
    spec = TiledSpec((32, 32), 8, 8)
    tiles = {nb.index: nb for nb in tile_boundaries(spec, z, f, (0, 32, 0, 32), "cpu")}
    node = node_boundary(spec, 1, 0, 1, [tiles[(0, 2)], tiles[(0, 3)], tiles[(1, 2)],
                                          tiles[(1, 3)]])
    assert node.window == (0, 16, 16, 32)
    sub = z[0:16, 16:32]
    g = grid_csr(sub, np.ones_like(sub), 8, 0)
    loc = (node.ids // 32) * 16 + node.ids % 32 - 16
    np.testing.assert_array_equal(node.dist, np.round(dijkstra(g, indices=loc)[:, loc], 6))
    # only the left and bottom sides face other nodes
    assert set(((node.ids // 32 == 15) | (node.ids % 32 == 16)).tolist()) == {True}


# ----------------------------------------------------------------------------- full algorithm

@pytest.mark.parametrize("tile,connectivity", [(4, 4), (8, 8), (16, 4), (32, 8)])
def test_exact_integer_costs(tile, connectivity):
    rng = np.random.default_rng(tile * 10 + connectivity)
    z = int_dem(rng, (45, 38), nan_frac=0.05)
    ok = np.argwhere(~np.isnan(z))
    sources = ok[rng.choice(len(ok), 3, replace=False)]
    check_exact(z, sources, tile, connectivity)


@pytest.mark.parametrize("tile", [64, 1024])
def test_exact_big_tiles_small_grid(tile):
    rng = np.random.default_rng(5)
    z = int_dem(rng, (70, 90))
    check_exact(z, [(0, 0), (69, 89)], tile, 8)


def test_connectivity_16_exact():
    rng = np.random.default_rng(6)
    z = int_dem(rng, (30, 27), nan_frac=0.05)
    ok = np.argwhere(~np.isnan(z))
    check_exact(z, ok[[0, len(ok) // 2]], 8, 16)
    check_exact(z, ok[[0, len(ok) // 2]], 4, 16, max_height=0)


def test_sources_on_tile_corners_and_edges():
    rng = np.random.default_rng(7)
    z = int_dem(rng, (40, 40))
    # corners of 8x8 tiles, a tile edge, duplicates (lowest index wins)
    sources = [(7, 7), (8, 8), (7, 8), (16, 3), (8, 8), (39, 39)]
    r = check_exact(z, sources, 8, 8)
    assert r.allocation[8, 8] == 1 and r.backlink[8, 8] == 0


@pytest.mark.parametrize("max_height", [0, 2, 9])
def test_height_cap_does_not_change_result(max_height):
    rng = np.random.default_rng(8)
    z = int_dem(rng, (50, 61), nan_frac=0.03)
    ok = np.argwhere(~np.isnan(z))
    sources = ok[[5, len(ok) - 7]]
    r = check_exact(z, sources, 4, 8, max_height=max_height)
    ref = tiled_sssp(z, sources, tile=64, backend="cpu")
    np.testing.assert_array_equal(r.distance, ref.distance)
    np.testing.assert_array_equal(r.allocation, ref.allocation)
    np.testing.assert_array_equal(r.backlink, ref.backlink)


@pytest.mark.parametrize("group_tiles,max_height", [(1, 3), (2, 0), (4, 1), (8, None),
                                                    (16, 0)])
def test_groups_and_height_equal_in_core(group_tiles, max_height):
    from terrain.grid.sssp import grid_sssp
    rng = np.random.default_rng(14)
    z = int_dem(rng, (37, 43), nan_frac=0.04)
    ok = np.argwhere(~np.isnan(z))
    sources = ok[[2, len(ok) // 2, len(ok) - 3]]
    r = tiled_sssp(z, sources, tile=4, backend="cpu", max_height=max_height,
                   group_tiles=group_tiles)
    ref = grid_sssp(z, sources, backend="cpu")
    for name in ("distance", "allocation", "backlink", "hops"):
        np.testing.assert_array_equal(getattr(r, name), getattr(ref, name), err_msg=name)
    assert isinstance(r, type(ref)) and r.reached == ref.reached


@pytest.mark.parametrize("connectivity", [4, 8, 16])
def test_equals_in_core_integer_and_float(connectivity):
    from terrain.grid.sssp import grid_sssp
    rng = np.random.default_rng(15 + connectivity)
    z = int_dem(rng, (41, 35), nan_frac=0.05)
    f = (1 + rng.random(z.shape)).astype(np.float32)
    ok = np.argwhere(~np.isnan(z))
    sources = ok[[0, len(ok) // 3, len(ok) - 1]]
    r = tiled_sssp(z, sources, tile=8, connectivity=connectivity, backend="cpu",
                   start_costs=[0, 3, 1])
    ref = grid_sssp(z, sources, start_costs=[0, 3, 1], connectivity=connectivity,
                    backend="cpu")
    for name in ("distance", "allocation", "backlink"):
        np.testing.assert_array_equal(getattr(r, name), getattr(ref, name), err_msg=name)
    r = tiled_sssp(z, sources, cost="friction", friction=f, tile=8,
                   connectivity=connectivity, backend="cpu")
    ref = grid_sssp(z, sources, cost="friction", friction=f, connectivity=connectivity,
                    backend="cpu")
    np.testing.assert_array_equal(np.isnan(r.distance), np.isnan(ref.distance))
    np.testing.assert_allclose(r.distance, ref.distance, rtol=1e-12)


def test_nodata_barrier_splits_grid():
    rng = np.random.default_rng(9)
    z = int_dem(rng, (33, 33))
    z[:, 16] = np.nan  # a wall: the right half is unreachable
    z[5, 20] = np.nan
    r = check_exact(z, [(3, 3)], 8, 8)
    assert np.all(np.isnan(r.distance[:, 16:]))
    assert np.all(r.allocation[:, 16:] == -1) and np.all(r.backlink[:, 16:] == 255)
    assert np.all(~np.isnan(r.distance[:, :16]))


def test_tile_without_boundary_cells():
    # tile (1, 1) of 4 x 4 is nodata but for one interior cell: its boundary is empty
    rng = np.random.default_rng(16)
    z = int_dem(rng, (12, 12))
    z[4:8, 4:8] = np.nan
    z[5, 5] = 3
    r = check_exact(z, [(0, 0), (11, 3)], 4, 8, max_height=0)
    assert np.isnan(r.distance[5, 5]) and r.backlink[5, 5] == 255
    check_exact(z, [(5, 5), (0, 0)], 4, 8, max_height=1)


def test_start_costs_and_max_cost():
    rng = np.random.default_rng(10)
    z = int_dem(rng, (20, 20))
    check_exact(z, [(2, 2), (17, 17)], 8, 8, start=[5.0, 0.0])
    r = tiled_sssp(z, [(2, 2)], tile=8, backend="cpu", max_cost=10)
    full, _ = tiled_oracle(z, np.ones_like(z), [(2, 2)], 8, 0)
    want = np.where(full > 10, np.nan, full)
    np.testing.assert_array_equal(r.distance, want)
    assert np.all(r.backlink[np.isnan(want)] == 255)


@pytest.mark.parametrize("model_name,model", [("friction", 1), ("tobler", 2)])
def test_float_costs_close_to_scipy(model_name, model):
    rng = np.random.default_rng(11)
    z = (rng.random((37, 29)) * 20).astype(np.float32)
    f = (1 + rng.random((37, 29))).astype(np.float32)
    f[rng.random(f.shape) < 0.04] = np.nan
    ok = np.argwhere(~np.isnan(f))
    sources = ok[[3, len(ok) // 3]]
    r = tiled_sssp(z, sources, cost=model_name, friction=f, tile=8, backend="cpu")
    g = grid_csr(z, f, 8, model)
    d = dijkstra(g, indices=[a * 29 + b for a, b in sources]).min(axis=0).reshape(z.shape)
    got = np.where(np.isnan(r.distance), np.inf, r.distance)
    assert np.array_equal(np.isinf(got), np.isinf(d))
    fin = np.isfinite(d)
    np.testing.assert_allclose(got[fin], d[fin], rtol=1e-12)
    check_backlinks(z, f, r, 8, model, sources, rtol=1e-12)


def test_reuse_gives_same_result():
    rng = np.random.default_rng(12)
    z = int_dem(rng, (40, 44), nan_frac=0.04)
    ok = np.argwhere(~np.isnan(z))
    first = tiled_sssp(z, ok[[0]], tile=8, backend="cpu", max_height=1)
    arrays = first.index.to_arrays()
    for sources in (ok[[1, 50]], ok[[len(ok) - 1]]):
        fresh = tiled_sssp(z, sources, tile=8, backend="cpu", max_height=1)
        again = tiled_sssp(z, sources, tile=8, backend="cpu", reuse=arrays)
        assert again.stats["reused"] and again.stats["times"]["index"] == 0.0
        for name in ("distance", "allocation", "backlink"):
            np.testing.assert_array_equal(getattr(again, name), getattr(fresh, name))
    idx = TiledIndex.from_arrays(arrays)
    assert sorted(idx.nodes) == sorted(first.index.nodes)
    other = z.copy()
    other[np.isnan(other)] = 0
    other[0:8, 7] += 1  # a boundary cell of a tile changes
    with pytest.raises(InputError, match="reuse"):
        tiled_sssp(other, ok[[0]], tile=8, backend="cpu", reuse=arrays)
    with pytest.raises(InputError, match="reuse"):
        tiled_sssp(z, ok[[0]], tile=16, backend="cpu", reuse=arrays)


def test_bad_input():
    z = np.zeros((10, 10), np.float32)
    z[1, 1] = np.nan
    with pytest.raises(InputError, match="nodata"):
        tiled_sssp(z, [(1, 1)], tile=4)
    with pytest.raises(InputError, match="outside"):
        tiled_sssp(z, [(10, 1)], tile=4)
    with pytest.raises(InputError, match="power of two"):
        tiled_sssp(z, [(0, 0)], tile=6)
    with pytest.raises(InputError, match="max cost"):
        tiled_sssp(z, [(0, 0)], tile=4, max_cost=0)
    with pytest.raises(InputError, match="friction"):
        tiled_sssp(z, [(0, 0)], tile=4, cost="friction")
    with pytest.raises(InputError, match="negative"):
        tiled_sssp(z, [(0, 0)], tile=4, cost="friction", friction=-np.ones_like(z))


# ----------------------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.parametrize("tile,connectivity,model_name", [(8, 8, "absdiff"), (16, 4, "absdiff"),
                                                          (32, 16, "tobler"),
                                                          (64, 8, "friction")])
def test_gpu_identical(tile, connectivity, model_name):
    from backends import assert_backends_identical
    z, f, sources = float_case(13, (150, 133), middle=2)

    def run(backend):
        r = tiled_sssp(z, sources, cost=model_name, friction=f, connectivity=connectivity,
                       tile=tile, backend=backend)
        tiles = tile_boundaries(TiledSpec(z.shape, tile, connectivity, model_name), z, f,
                                (0, 150, 0, 133), backend)
        return (r.distance, r.allocation, r.backlink, [t.dist for t in tiles],
                [t.hops for t in tiles])
    assert_backends_identical(run)


@pytest.mark.gpu
@pytest.mark.parametrize("tile,connectivity,model_name", [(4, 8, "absdiff"), (8, 16, "tobler")])
def test_gpu_hierarchy_identical(tile, connectivity, model_name):
    """The node merges inside a group (``nodes_boundary``: ``graphs_pairs`` on the GPU) give
    the CPU's matrices bit for bit, and so the same labels."""
    from backends import assert_backends_identical
    z, f, sources = float_case(21, (70, 61), middle=3)

    def run(backend):
        r = tiled_sssp(z, sources, cost=model_name, friction=f, connectivity=connectivity,
                       tile=tile, backend=backend, max_height=2, group_tiles=8)
        keys = sorted(k for k in r.index.nodes if k[0] > 0)
        assert keys  # levels 1 and 2 were merged inside the groups
        return (r.distance, r.allocation, r.backlink,
                [r.index.nodes[k].dist for k in keys], [r.index.nodes[k].hops for k in keys])
    assert_backends_identical(run)


def test_shared_pass_sizes():
    """Phase 1's shared-memory kernel takes tiles up to 16 (its arc table and labels fit a
    block's 48 KB); larger tiles keep the kernel with a queue per thread."""
    from terrain.grid.sssp_tiled import SHARED_BYTES, shared_pass
    for T, K in ((4, 8), (8, 16), (16, 4), (16, 8), (16, 16)):
        S, threads = shared_pass(T, K)
        assert S >= 1 and 8 * T * T * K + 12 * S * T * T <= SHARED_BYTES
        assert threads % 32 == 0 and threads >= min(T * T, 256)
    assert shared_pass(32, 8) is None and shared_pass(64, 4) is None


@pytest.mark.gpu
@pytest.mark.parametrize("tile,connectivity,model_name", [(16, 8, "absdiff"), (16, 16, "tobler"),
                                                          (8, 8, "friction"), (4, 4, "tobler")])
def test_phase1_shared_kernel_equals_queue_kernel_and_cpu(tile, connectivity, model_name):
    """``boundary_pairs_shared`` (label correcting in shared memory) gives the matrices of
    the queue kernel and of the CPU's Dijkstra bit for bit, float costs and nodata
    included (ties in distance with different hop counts: integer elevations)."""
    from terrain.backend import get_backend
    from terrain.grid._tiled_cpu import boundary_pairs_cpu
    from terrain.grid._tiled_gpu import boundary_pairs_gpu
    from terrain.grid._tiled_graphs import _batch_frames, _tile_batch
    be = get_backend("gpu")
    for seed, integer in ((5, False), (6, True)):
        z, f, _ = float_case(seed, (75, 69), middle=2)
        if integer:
            z = np.where(np.isnan(z), z, np.floor(z / 10)).astype(np.float32)
        spec = TiledSpec(z.shape, tile, connectivity, model_name)
        zb, fb, wins = _tile_batch(spec, z, f, (0, 75, 0, 69))
        count, ids, bidx, _ = _batch_frames(spec, zb, fb, wins)
        bmax = ids.shape[1]
        cpu_d = np.full((len(wins), bmax, bmax), np.inf)
        cpu_h = np.full((len(wins), bmax, bmax), 2**31 - 1, np.int32)
        boundary_pairs_cpu(zb, fb, bidx, count, spec.codes, spec.model, spec.lengths, cpu_d,
                           cpu_h, np.zeros(1, np.uint8))
        sd, sh = boundary_pairs_gpu(be, zb, fb, bidx, count, spec.codes, spec.model,
                                    spec.lengths, kernel="shared")
        qd, qh = boundary_pairs_gpu(be, zb, fb, bidx, count, spec.codes, spec.model,
                                    spec.lengths, kernel="queue")
        for got_d, got_h in ((sd, sh), (qd, qh)):
            np.testing.assert_array_equal(got_d, cpu_d)
            np.testing.assert_array_equal(got_h, cpu_h)


@pytest.mark.gpu
@pytest.mark.parametrize("tile,connectivity,model_name", [(16, 8, "absdiff"), (8, 16, "tobler"),
                                                          (16, 4, "friction")])
def test_phase3_shared_kernel_equals_queue_kernel_and_cpu(tile, connectivity, model_name):
    """``windows_shared`` (phase 3, label correcting in shared memory) gives the labels of
    the queue kernel and of the CPU's Dijkstra bit for bit: halo seeds with allocations and
    hops, a source inside, ties in distance (integer elevations), nodata."""
    from terrain.backend import get_backend
    from terrain.grid.costs import arc_codes, arc_lengths, cost_model_code
    from terrain.grid._tiled_cpu import windows_dijkstra_cpu
    from terrain.grid._tiled_gpu import windows_dijkstra_gpu
    be = get_backend("gpu")
    rng = np.random.default_rng(tile + connectivity)
    w = 2 if connectivity == 16 else 1
    H = W = tile + 2 * w
    n = 40
    z = rng.integers(0, 5, (n, H, W)).astype(np.float32)
    z[rng.random(z.shape) < 0.06] = np.nan
    f = (1 + rng.random((n, H, W))).astype(np.float32)
    inner = np.zeros((n, H, W), bool)
    inner[:, w:w + tile, w:w + tile] = True
    inner &= ~np.isnan(z)
    ld = np.where(~inner & ~np.isnan(z) & (rng.random(z.shape) < 0.5),
                  rng.integers(0, 9, z.shape).astype(float), np.inf).reshape(n, -1)
    la = np.where(ld < np.inf, rng.integers(0, 3, ld.shape), 2**31 - 1).astype(np.int32)
    lh = np.where(ld < np.inf, rng.integers(0, 20, ld.shape), 2**31 - 1).astype(np.int32)
    src = rng.integers(0, H * W, n)
    ok = inner.reshape(n, -1)[np.arange(n), src]
    ld[np.arange(n)[ok], src[ok]], la[np.arange(n)[ok], src[ok]] = 1.0, 7
    lh[np.arange(n)[ok], src[ok]] = 0
    args = (z, f, inner, arc_codes(connectivity), cost_model_code(model_name),
            arc_lengths((1.0, 1.0)))
    want = [a.copy() for a in (ld, la, lh)]
    windows_dijkstra_cpu(*args, *want, np.zeros(1, np.uint8))
    kernels = ("shared", "queue") if 8 * H * W * len(args[3]) + 16 * H * W <= 48 << 10 \
        else ("queue",)
    for kern in kernels:
        got = [a.copy() for a in (ld, la, lh)]
        windows_dijkstra_gpu(be, *args, *got, kernel=kern)
        for g, wnt in zip(got, want):
            np.testing.assert_array_equal(g, wnt, err_msg=kern)


@pytest.mark.parametrize("seed", range(3))
def test_knight_arcs_passing_between_cells_of_other_tiles(seed):
    """Small tiles, nodata and steep friction: many knight arcs cross a tile corner and pass
    between cells of a third tile (boundary cells, or nodata that stops them); the distances
    and allocations of the in-core algorithm."""
    from terrain.grid.sssp import grid_sssp
    from terrain.grid.sssp_tiled import tiled_sssp
    rng = np.random.default_rng(seed)
    z = (rng.random((37, 29)) * 50).astype(np.float32)
    z[rng.random(z.shape) < 0.15] = np.nan
    f = np.exp(rng.normal(0, 1.5, z.shape)).astype(np.float32)
    src = [tuple(int(x) for x in np.argwhere(~np.isnan(z))[0])]
    for cost in ("friction", "tobler"):
        kw = dict(cost=cost, friction=f, connectivity=16, cellsize=(10.0, 7.0))
        ref = grid_sssp(z, src, backend="cpu", **kw)
        for tile, height in ((4, None), (8, 1)):
            got = tiled_sssp(z, src, tile=tile, max_height=height, backend="cpu", **kw)
            np.testing.assert_array_equal(np.isnan(got.distance), np.isnan(ref.distance))
            np.testing.assert_allclose(got.distance, ref.distance, rtol=1e-12, equal_nan=True)
            np.testing.assert_array_equal(got.allocation, ref.allocation)


# ----------------------------------------------------------------------------- zero-cost arcs

#: friction of a 10 x 13 grid whose tile-4 run (8-connected) wrote the 2-cycle (7, 4) <-> (8, 4)
CYCLE_FRICTION = [[1, 0, 1, 2, 0, 1, 1, 2, 2, 0, 0, 0, 2], [0, 2, 2, 1, 0, 0, 1, 2, 2, 0, 2, 0, 0],
                  [0, 1, 1, 0, 1, 0, 0, 0, 1, 0, 2, 2, 2], [2, 2, 1, 0, 1, 0, 1, 1, 1, 0, 2, 1, 1],
                  [1, 0, 2, 2, 1, 2, 2, 2, 1, 2, 0, 0, 1], [0, 1, 1, 2, 1, 2, 2, 2, 2, 0, 1, 1, 1],
                  [1, 0, 1, 1, 1, 1, 1, 0, 0, 2, 0, 0, 2], [2, 0, 2, 2, 0, 2, 1, 1, 0, 1, 1, 0, 0],
                  [1, 1, 1, 2, 0, 1, 1, 1, 2, 1, 2, 1, 2], [2, 1, 2, 2, 2, 1, 2, 0, 1, 1, 1, 1, 2]]


def check_hops_fall(r):
    """Every backlink goes to a reached neighbour whose ``(hops, distance)`` is
    lexicographically lower (so no walk can cycle), and code 0 exactly at hops 0."""
    R, C = r.distance.shape
    for v in zip(*np.nonzero(~np.isnan(r.distance))):
        b = int(r.backlink[v])
        assert (b == 0) == (r.hops[v] == 0), (v, b, r.hops[v])
        if 0 < b < 255:
            u = (v[0] + ARC_DR[b - 1], v[1] + ARC_DC[b - 1])
            assert 0 <= u[0] < R and 0 <= u[1] < C and not np.isnan(r.distance[u])
            assert (r.hops[u], r.distance[u]) < (r.hops[v], r.distance[v]), (
                v, u, r.hops[v], r.hops[u], r.distance[v], r.distance[u])


def test_zero_friction_tiles_write_no_backlink_cycle():
    """Zero-friction cells make zero-cost arcs, whose ties the hops break; a boundary cell's
    phase-2 label adds a matrix segment in another float association than phase 3's sums, so
    a tile that recomputed its boundary cells saw them below or above what its neighbours saw:
    (7, 4) pointed south and (8, 4) north. Now hops fall along every backlink."""
    f = np.array(CYCLE_FRICTION, np.float32)
    z = np.ones_like(f)
    src = [(0, 0), (9, 12)]
    want = grid_sssp(z, src, cost="friction", friction=f, connectivity=8, backend="cpu")
    r = tiled_sssp(z, src, cost="friction", friction=f, connectivity=8, tile=4,
                   backend="cpu", group_tiles=2)
    np.testing.assert_allclose(r.distance, want.distance, rtol=1e-12)
    np.testing.assert_array_equal(r.allocation, want.allocation)
    check_hops_fall(r)
    assert (r.backlink[7, 4], r.backlink[8, 4]) == (8, 7)  # the in-core run's
    check_backlinks(z, f, r, 8, cost_model_code("friction"), src)


def _corner_sources_run(seed, largest):
    """A random grid of at most ``largest`` cells a side, a third of its cells of friction 0,
    sources at two corners: ``(z, f, sources, in-core result, tiled result)`` (8-connected,
    tiles of 4, groups of 2 tiles)."""
    rng = np.random.default_rng(seed)
    R, C = rng.integers(6, largest, 2)
    z = np.ones((R, C), np.float32)
    f = rng.choice([0.0, 1.0, 2.0], (R, C)).astype(np.float32)
    src = [(0, 0), (int(R - 1), int(C - 1))]
    want = grid_sssp(z, src, cost="friction", friction=f, connectivity=8, backend="cpu")
    r = tiled_sssp(z, src, cost="friction", friction=f, connectivity=8, tile=4,
                   backend="cpu", group_tiles=2)
    np.testing.assert_allclose(r.distance, want.distance, rtol=1e-12)
    check_hops_fall(r)
    return z, f, src, want, r


@pytest.mark.parametrize("seed", [66, 82, 95, 100, 125, 3, 7])
def test_zero_friction_random_tiles_match_in_core_without_cycles(seed):
    """Random grids with a third of the cells of friction 0, 8-connected, tiles of 4, groups
    of 2 tiles: distances within 1e-12 of the in-core run, the same allocation, hops falling
    along every backlink; each walk ends at its own source (seeds whose tiles wrote cycles)."""
    z, f, src, want, r = _corner_sources_run(seed, 20)
    np.testing.assert_array_equal(r.allocation, want.allocation)
    check_backlinks(z, f, r, 8, cost_model_code("friction"), src)


def backlink_cycle(back):
    """A cell whose backlink walk never ends (None when every walk ends at code 0 or 255)."""
    R, C = back.shape
    for v in zip(*np.nonzero((back != 0) & (back != 255))):
        cur, steps = v, 0
        while back[cur] not in (0, 255):
            k = int(back[cur]) - 1
            cur = (cur[0] + ARC_DR[k], cur[1] + ARC_DC[k])
            steps += 1
            if steps > R * C:
                return v
    return None


@pytest.mark.parametrize("seed", [15, 31])
def test_zero_friction_corner_sources_write_no_backlink_cycle(seed):
    """Grids whose tiled run wrote 2-cycles through zero-cost diagonals ((11, 4) <-> (12, 3)
    for seed 15) while boundary cells were recomputed in their own tile: no walk cycles, no
    reached cell lacks a backlink, and (hops, distance) falls along every backlink."""
    r = _corner_sources_run(seed, 14)[-1]
    assert backlink_cycle(r.backlink) is None
    assert not np.any((r.backlink == 255) & ~np.isnan(r.distance))


def test_zero_friction_random_sweep_no_cycle_no_missing_backlink():
    """50 random grids, a third of the cells of friction 0, 1-3 random sources, 8-connected,
    tiles of 4, groups of 2 tiles: distances within 1e-12 of the in-core run, no backlink
    walk cycles and every reached cell has a backlink. Seed 129 left (10, 7), a boundary cell
    whose phase-2 label had no neighbour of its allocation with fewer hops, at 255 (its
    neighbours of equal hops lay below it in distance)."""
    for seed in range(100, 150):
        rng = np.random.default_rng(seed)
        R, C = rng.integers(6, 18, 2)
        z = np.ones((R, C), np.float32)
        f = rng.choice([0.0, 1.0, 2.0], (R, C)).astype(np.float32)
        src = list(dict.fromkeys((int(rng.integers(R)), int(rng.integers(C)))
                                 for _ in range(1 + seed % 3)))
        want = grid_sssp(z, src, cost="friction", friction=f, connectivity=8, backend="cpu")
        r = tiled_sssp(z, src, cost="friction", friction=f, connectivity=8, tile=4,
                       backend="cpu", group_tiles=2)
        np.testing.assert_allclose(r.distance, want.distance, rtol=1e-12, err_msg=str(seed))
        assert backlink_cycle(r.backlink) is None, seed
        assert not np.any((r.backlink == 255) & ~np.isnan(r.distance)), seed
        check_hops_fall(r)
