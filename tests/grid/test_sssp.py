"""In-core grid SSSP (terrain.grid.sssp) against independent oracles: scipy.sparse.csgraph
dijkstra on a CSR graph built here, scikit-image MCP_Geometric, and backlink walks."""

import math

import numpy as np
import pytest

from backends import assert_backends_identical
from terrain.errors import InputError
from terrain.grid._sssp_cpu import CpuOps
from terrain.grid.sssp import grid_sssp, labels_from_distance, prepare_grid
from oracles import DC, DR, KS, csr_graph, oracle_cost, oracle_distance, oracle_factor

# the arc table, written out again here (independent of terrain.grid.costs)


def int_dem(rows, cols, seed, nan_frac=0.0, high=20):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, high, (rows, cols)).astype(np.float32)
    if nan_frac:
        z[rng.random((rows, cols)) < nan_frac] = np.nan
    return z


def walk_backlinks(res, model, z, f=None, conn=8):
    """Follow backlinks from every reached cell; check each path ends at a source and its arc
    costs (oracle formulas) sum, left to right from the source, to the cell's distance."""
    f = np.ones_like(z) if f is None else f
    valid = ~np.isnan(z) & ~np.isnan(f)
    rows, cols = z.shape
    worst = 0.0
    for r0 in range(rows):
        for c0 in range(cols):
            if np.isnan(res.distance[r0, c0]):
                assert res.backlink[r0, c0] == 255 and res.allocation[r0, c0] == -1
                continue
            path = [(r0, c0)]
            r, c = r0, c0
            while res.backlink[r, c] != 0:
                k = int(res.backlink[r, c]) - 1
                assert k in KS[conn]
                r, c = r + DR[k], c + DC[k]
                assert res.allocation[r, c] == res.allocation[r0, c0]
                path.append((r, c))
                assert len(path) <= rows * cols
            assert res.hops[r0, c0] == len(path) - 1
            path.reverse()
            d = res.distance[path[0]]  # the source's own distance (its start cost)
            for (ra, ca), (rb, cb) in zip(path, path[1:]):
                w = oracle_cost(model, z[ra:ra + 1, ca], z[rb:rb + 1, cb],
                                oracle_factor(f, ra, ca, rb, cb, valid), rb - ra, cb - ca)[0]
                d = d + w
            worst = max(worst, abs(d - res.distance[r0, c0]) / max(1.0, d))
    return worst


@pytest.mark.parametrize("conn", [4, 8])
def test_integer_absdiff_equals_scipy_exactly(conn):
    z = int_dem(37, 29, conn)
    sources = [(0, 0), (20, 14), (36, 28)]
    res = grid_sssp(z, sources, cost="absdiff", connectivity=conn, backend="cpu")
    ref = oracle_distance(csr_graph(z, "absdiff", conn=conn), z.shape, sources)
    np.testing.assert_array_equal(res.distance, ref)
    assert res.distance.dtype == np.float64 and res.allocation.dtype == np.int32
    assert res.backlink.dtype == np.uint8
    assert walk_backlinks(res, "absdiff", z, conn=conn) == 0.0


def lexicographic_labels(g, shape, sources, start_costs):
    """The canonical labels by their definition: Dijkstra in Python (heapq) on ``(distance,
    source index, hops)`` over the oracle's CSR graph (explicit zero arcs kept)."""
    import heapq
    n = g.shape[0]
    best = [(math.inf, 0, 0)] * n
    heap = []
    for i, ((r, c), d0) in enumerate(zip(sources, start_costs)):
        key = (float(d0), i, 0)
        if key < best[r * shape[1] + c]:
            best[r * shape[1] + c] = key
            heapq.heappush(heap, (*key, r * shape[1] + c))
    while heap:
        d, a, h, u = heapq.heappop(heap)
        if (d, a, h) != best[u]:
            continue
        for e in range(g.indptr[u], g.indptr[u + 1]):
            v, key = int(g.indices[e]), (d + float(g.data[e]), a, h + 1)
            if key < best[v]:
                best[v] = key
                heapq.heappush(heap, (*key, v))
    alloc = np.array([a if d < math.inf else -1 for d, a, _ in best]).reshape(shape)
    hops = np.array([h if d < math.inf else -1 for d, _, h in best]).reshape(shape)
    return alloc, hops


@pytest.mark.parametrize("conn", [4, 8, 16])
def test_heap_labels_are_the_lexicographic_least(conn):
    """On plateaus of zero-cost arcs (absdiff on integer heights) with sources tied in
    start cost, the heap's allocation and hops are the least (source index, hops) among
    the shortest paths: a heapq Dijkstra on those keys says which."""
    z = int_dem(41, 47, 10 + conn, nan_frac=0.04, high=3)
    rng = np.random.default_rng(conn)
    valid = np.argwhere(~np.isnan(z))
    sources = [tuple(valid[i]) for i in rng.choice(len(valid), 5, replace=False)]
    starts = [0.0, 1.0, 0.0, 2.0, 1.0]
    res = grid_sssp(z, sources, starts, cost="absdiff", connectivity=conn, backend="cpu")
    assert res.stats["queue"] == "heap"
    g = csr_graph(z, "absdiff", conn=conn).tocsr()
    alloc, hops = lexicographic_labels(g, z.shape, sources, starts)
    np.testing.assert_array_equal(res.allocation, alloc)
    np.testing.assert_array_equal(res.hops, hops)
    np.testing.assert_array_equal(res.distance, oracle_distance(g, z.shape, sources, starts))


def test_allocation_is_argmin_of_per_source_runs():
    z = int_dem(31, 33, 5, nan_frac=0.05, high=6)  # many ties
    rng = np.random.default_rng(2)
    valid = np.argwhere(~np.isnan(z))
    sources = [tuple(valid[i]) for i in rng.choice(len(valid), 6, replace=False)]
    sources.append(sources[2])  # a source listed twice: the lower index owns the cell
    res = grid_sssp(z, sources, backend="cpu")
    g = csr_graph(z, "absdiff")
    per = np.stack([oracle_distance(g, z.shape, [s]) for s in sources])
    best = np.nanmin(np.where(np.isnan(per), np.inf, per), axis=0)
    reached = np.isfinite(best)
    np.testing.assert_array_equal(res.distance[reached], best[reached])
    alloc = np.argmax(per == best, axis=0)  # first (lowest) index attaining the minimum
    np.testing.assert_array_equal(res.allocation[reached], alloc[reached])
    assert (res.allocation[~reached] == -1).all()
    assert 6 not in res.allocation
    assert walk_backlinks(res, "absdiff", z) == 0.0


def test_start_costs_and_max_cost():
    z = int_dem(25, 40, 9)
    sources, start = [(3, 3), (20, 30)], [7.0, 0.0]
    res = grid_sssp(z, sources, start, backend="cpu")
    ref = oracle_distance(csr_graph(z), z.shape, sources, start)
    np.testing.assert_array_equal(res.distance, ref)
    assert res.distance[3, 3] == 7.0 or res.allocation[3, 3] == 1
    capped = grid_sssp(z, sources, start, max_cost=30, backend="cpu")
    keep = ref <= 30
    np.testing.assert_array_equal(capped.distance[keep], ref[keep])
    assert np.isnan(capped.distance[~keep]).all() and (capped.backlink[~keep] == 255).all()
    np.testing.assert_array_equal(capped.allocation[keep], res.allocation[keep])
    np.testing.assert_array_equal(capped.backlink[keep], res.backlink[keep])


@pytest.mark.parametrize("cost, queue", [("absdiff", "heap"), ("friction", "buckets"),
                                         ("friction", "heap"), ("tobler", "heap")])
def test_stop_cells_end_the_solve_at_the_farthest(cost, queue):
    """Stops: the cells within the farthest stop's distance (scipy's), labelled as a run
    capped at that distance, the rest unreached; the queue ends early."""
    z = int_dem(60, 70, 4, nan_frac=0.05)
    sources, stops = [(30, 35), (5, 60)], [(40, 40), (20, 30), (40, 40)]
    for cell in sources + stops:
        z[cell] = 3
    fr = np.random.default_rng(4).uniform(1, 2, z.shape).astype(np.float32)
    f = None if cost == "absdiff" else fr
    prep = prepare_grid(z, f, cost, 8, (1.0, 1.0))
    rows, cols = zip(*sources)

    def solve(**kw):
        return CpuOps().solve(*prep[:2], *prep[3:], np.array(rows), np.array(cols),
                              np.zeros(2), math.inf, queue=queue, **kw)
    full = solve()
    from terrain.grid._sssp_frame import flat_seeds
    targets = flat_seeds(*map(np.array, zip(*stops)), np.zeros(3), z.shape[1])[0]
    got = solve(targets=targets)
    assert got.stats["queue"] == queue
    ref = oracle_distance(csr_graph(z, cost, f), z.shape, sources)
    far = got.stats["target_distance"]  # tobler: scipy's exp differs in the last bits
    assert far == pytest.approx(max(ref[c] for c in stops), rel=1e-13)
    assert got.stats["settled"] < full.stats["settled"]
    near = ~np.isnan(got.distance)
    np.testing.assert_allclose(got.distance[near], ref[near], rtol=1e-13)
    assert (got.distance[near] <= far).all() and not (ref[~near] < far * (1 - 1e-13)).any()
    assert (got.backlink[~near] == 255).all() and (got.allocation[~near] == -1).all()
    capped = grid_sssp(z, sources, cost=cost, friction=f, max_cost=far, backend="cpu")
    for name in ("distance", "allocation", "backlink", "hops"):
        np.testing.assert_array_equal(getattr(got, name), getattr(capped, name), err_msg=name)
    # through grid_sssp; a stop no path reaches leaves every cell reached
    z[0:3, 0:3] = np.nan
    z[1, 1] = 3
    walled = grid_sssp(z, sources, cost=cost, friction=f, stops=stops + [(1, 1)],
                       backend="cpu")
    assert "target_distance" not in walled.stats
    np.testing.assert_array_equal(
        walled.distance, grid_sssp(z, sources, cost=cost, friction=f, backend="cpu").distance)


def test_nodata_barrier_splits_the_grid():
    z = int_dem(20, 20, 3).astype(np.float32)
    z[:, 9] = np.nan  # a wall one cell thick: no knight arc passes between nodata cells
    res = grid_sssp(z, [(10, 2)], connectivity=16, backend="cpu")
    assert np.isnan(res.distance[:, 9:]).all() and (res.allocation[:, 9:] == -1).all()
    assert (res.backlink[:, 9:] == 255).all()
    ref = oracle_distance(csr_graph(z, conn=16), z.shape, [(10, 2)])
    np.testing.assert_array_equal(res.distance, ref)


@pytest.mark.parametrize("conn", [8, 16])
def test_friction_float_costs_equal_scipy(conn):
    rng = np.random.default_rng(conn)
    z = np.zeros((30, 26), np.float32)
    fr = rng.uniform(0.5, 3, z.shape).astype(np.float32)
    fr[rng.random(z.shape) < 0.05] = np.nan
    sources = [(15, 13), (0, 25)]
    if np.isnan(fr[sources[0]]) or np.isnan(fr[sources[1]]):
        fr[15, 13] = fr[0, 25] = 1.0
    res = grid_sssp(z, sources, cost="friction", friction=fr, connectivity=conn, backend="cpu")
    ref = oracle_distance(csr_graph(z, "friction", fr, conn), z.shape, sources)
    np.testing.assert_allclose(res.distance, ref, rtol=1e-12, equal_nan=True)
    assert walk_backlinks(res, "friction", z, fr, conn) < 1e-12
    # the bucket queue and the heap give the same bits
    zz, f, valid, model, codes, lengths = prepare_grid(z, fr, "friction", conn, (1, 1))
    heap = CpuOps().solve(zz, f, model, codes, lengths, np.array([15, 0]),
                          np.array([13, 25]), np.zeros(2), math.inf, queue="heap")
    assert res.stats["queue"] == "buckets" and heap.stats["queue"] == "heap"
    for name in ("distance", "allocation", "backlink", "hops"):
        np.testing.assert_array_equal(getattr(res, name), getattr(heap, name), strict=True)


@pytest.mark.parametrize("conn", [4, 8, 16])
def test_bucket_queue_backlinks_equal_the_heap_under_ties(conn):
    """The bucket queue keeps backlinks during the relaxations; with friction 1 and 2 many
    cells have several tight predecessors (and sources tie): the heap's separate backlink
    pass is the reference, bit for bit, and the backlink walks sum to the distances."""
    rng = np.random.default_rng(100 + conn)
    z = np.zeros((37, 41), np.float32)
    fr = rng.integers(1, 3, z.shape).astype(np.float32)
    fr[rng.random(z.shape) < 0.08] = np.nan
    sources = [(0, 0), (36, 40), (18, 20), (0, 40), (36, 0)]
    for s in sources:
        fr[s] = 1.0
    starts = [0.0, 0.0, 3.0, 1.0, 0.0]
    res = grid_sssp(z, sources, starts, cost="friction", friction=fr, connectivity=conn,
                    backend="cpu")
    zz, f, valid, model, codes, lengths = prepare_grid(z, fr, "friction", conn, (1, 1))
    rows, cols = np.array(sources).T
    heap = CpuOps().solve(zz, f, model, codes, lengths, rows, cols, np.array(starts),
                          math.inf, queue="heap")
    assert res.stats["queue"] == "buckets" and heap.stats["queue"] == "heap"
    for name in ("distance", "allocation", "backlink", "hops"):
        np.testing.assert_array_equal(getattr(res, name), getattr(heap, name), strict=True)
    # ties really happen: many reached cells have two tight predecessors with their label
    ties = 0
    for r0, c0 in zip(*np.nonzero(res.hops > 0)):
        tight = 0
        for k in KS[conn]:
            r, c = r0 + DR[k], c0 + DC[k]
            if not (0 <= r < z.shape[0] and 0 <= c < z.shape[1]) or np.isnan(res.distance[r, c]):
                continue
            w = oracle_cost("friction", z[r:r + 1, c], z[r0:r0 + 1, c0],
                            oracle_factor(fr, r, c, r0, c0), -DR[k], -DC[k])[0]
            tight += (res.distance[r, c] + w == res.distance[r0, c0]
                      and res.allocation[r, c] == res.allocation[r0, c0]
                      and res.hops[r, c] + 1 == res.hops[r0, c0])
        ties += tight >= 2
    assert ties > 20
    assert walk_backlinks(res, "friction", z, fr, conn) < 1e-12
    ref = oracle_distance(csr_graph(z, "friction", fr, conn), z.shape, sources, starts)
    np.testing.assert_allclose(res.distance, ref, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("queue", ["auto", "heap"])
@pytest.mark.parametrize("cost", ["friction", "absdiff"])
def test_int32_labels_and_a_padded_grid_give_the_int64_bits(monkeypatch, cost, queue):
    """The CPU's int32 labels (label_layout: allocation and hops in 30 bits) order cells as
    the int64 ones do, ties included, and a grid read into padded_grid (taken without a
    copy) solves as a plain array; labels_from_distance too."""
    import terrain.grid._sssp_cpu as cpu
    from terrain.grid._sssp_frame import framed, label_layout
    from terrain.grid.sssp import padded_grid

    rng = np.random.default_rng(7)
    z = int_dem(29, 33, 3, nan_frac=0.05, high=4)
    fr = rng.integers(1, 3, z.shape).astype(np.float32)
    fr[np.isnan(z)] = np.nan
    sources = [(0, 0), (28, 32), (14, 16)]
    for s in sources:
        z[s], fr[s] = 1.0, 1.0
    fg = padded_grid(fr.shape)
    fg[...] = fr
    assert framed(fg) is not None and label_layout(3, z.size)[0] == np.int32

    def run(friction, overwrite=False):
        zz, f, _, model, codes, lengths = prepare_grid(z, friction, cost, 8, (1, 1))
        rows, cols = np.array(sources).T
        return CpuOps().solve(zz, f if cost == "friction" else None, model, codes, lengths,
                              rows, cols, np.zeros(3), math.inf, queue=queue,
                              overwrite_friction=overwrite)

    narrow, framed_run = run(fr), run(fg)
    np.testing.assert_array_equal(fg, fr)  # not given to overwrite: read only
    # given to overwrite, the bucket queue keeps its labels in the friction's grid
    fg_own = padded_grid(fr.shape)
    fg_own[...] = fr
    overwritten = run(fg_own, overwrite=True)
    assert np.array_equal(fg_own, fr, equal_nan=True) == (narrow.stats["queue"] == "heap")
    monkeypatch.setattr(cpu, "label_layout", lambda *_: (np.int64, 32))
    wide = run(fr)
    assert narrow.stats["queue"] == ("heap" if cost == "absdiff" else queue.replace(
        "auto", "buckets"))
    for name in ("distance", "allocation", "backlink", "hops"):
        for other in (framed_run, overwritten, wide):
            np.testing.assert_array_equal(getattr(narrow, name), getattr(other, name),
                                          strict=True)
    # the tight-arc label pass from seeds with hops of their own, in both widths
    f = fr if cost == "friction" else None
    seeds = list(zip(*np.nonzero(narrow.hops == 3)))[:20]
    labels = [(narrow.allocation[s], narrow.hops[s]) for s in seeds]
    wide = labels_from_distance(z, narrow.distance, seeds, labels, cost=cost, friction=f)
    monkeypatch.undo()
    again = labels_from_distance(z, narrow.distance, seeds, labels, cost=cost, friction=f)
    assert np.count_nonzero(again.hops > 3) > 20
    for name in ("distance", "allocation", "hops", "backlink"):
        np.testing.assert_array_equal(getattr(again, name), getattr(wide, name), strict=True)


@pytest.mark.parametrize("conn", [4, 8])
def test_friction_equals_skimage_mcp_geometric(conn):
    graph = pytest.importorskip("skimage.graph")
    rng = np.random.default_rng(7)
    fr = rng.uniform(1, 2, (40, 35)).astype(np.float32)
    dx = 2.5
    res = grid_sssp(np.zeros_like(fr), [(20, 17)], cost="friction", friction=fr,
                    connectivity=conn, cellsize=(dx, dx), backend="cpu")
    mcp = graph.MCP_Geometric(fr.astype(np.float64), fully_connected=(conn == 8),
                              sampling=(dx, dx))
    cum, _ = mcp.find_costs([(20, 17)])
    np.testing.assert_allclose(res.distance, cum, rtol=1e-9)


def test_tobler_is_anisotropic_and_equals_scipy_on_the_directed_graph():
    rng = np.random.default_rng(11)
    z = np.cumsum(rng.normal(0, 1, (24, 30)), axis=1).astype(np.float32)
    res = grid_sssp(z, [(12, 0)], cost="tobler", cellsize=(10, 10), backend="cpu")
    g = csr_graph(z, "tobler", dx=10, dy=10)
    ref = oracle_distance(g, z.shape, [(12, 0)])
    np.testing.assert_allclose(res.distance, ref, rtol=1e-12)
    assert (g != g.T).nnz > 0  # d(a->b) != d(b->a)
    back = grid_sssp(z, [(12, 29)], cost="tobler", cellsize=(10, 10), backend="cpu")
    assert back.distance[12, 0] != res.distance[12, 29]
    assert res.stats["queue"] == "buckets"
    # the heap gives the same bits
    zz, f, valid, model, codes, lengths = prepare_grid(z, None, "tobler", 8, (10, 10))
    heap = CpuOps().solve(zz, f, model, codes, lengths, np.array([12]), np.array([0]),
                          np.zeros(1), math.inf, queue="heap")
    np.testing.assert_array_equal(res.distance, heap.distance)
    np.testing.assert_array_equal(res.backlink, heap.backlink)


def test_labels_from_distance_reproduces_the_labels():
    z = int_dem(30, 30, 4, nan_frac=0.1, high=4)
    z[0, 0] = z[29, 29] = z[0, 29] = 1
    sources = [(0, 0), (29, 29), (0, 29)]
    res = grid_sssp(z, sources, backend="cpu")
    lab = labels_from_distance(z, res.distance, sources, [(i, 0) for i in range(3)],
                               backend="cpu")
    for name in ("distance", "allocation", "backlink", "hops"):
        np.testing.assert_array_equal(getattr(lab, name), getattr(res, name))


@pytest.mark.parametrize("bad, match", [
    (dict(sources=[(5, 40)]), "outside"),
    (dict(sources=[(-1, 0)]), "outside"),
    (dict(sources=[(2, 2)]), "nodata"),
    (dict(sources=[(1.5, 2)]), "whole"),
    (dict(sources=[]), "non-empty"),
    (dict(start_costs=[-1.0]), "start costs"),
    (dict(max_cost=0), "max cost"),
    (dict(stops=[(2, 2)]), "stop 0 at cell .* is on nodata"),
    (dict(stops=[(0, 10)]), "stop 0 at cell .* is outside"),
    (dict(connectivity=6), "connectivity"),
    (dict(cost="slope"), "cost model"),
    (dict(cost="friction"), "friction raster"),
    (dict(cost="friction", friction=np.ones((3, 3))), "shape"),
    (dict(cost="friction", friction=-np.ones((10, 10))), "negative"),
])
def test_bad_input(bad, match):
    z = np.ones((10, 10), np.float32)
    z[2, 2] = np.nan
    kw = dict(sources=[(0, 0)])
    kw.update(bad)
    with pytest.raises(InputError, match=match):
        grid_sssp(z, kw.pop("sources"), backend="cpu", **kw)


@pytest.mark.gpu
@pytest.mark.parametrize("cost, conn", [("absdiff", 4), ("absdiff", 8), ("friction", 8),
                                        ("tobler", 16)])
def test_gpu_equals_cpu(cost, conn):
    rng = np.random.default_rng(3)
    z = rng.integers(0, 5, (70, 90)).astype(np.float32)
    z[rng.random(z.shape) < 0.1] = np.nan
    fr = rng.uniform(1, 2, z.shape).astype(np.float32)
    valid = np.argwhere(~np.isnan(z))
    sources = [tuple(valid[i]) for i in (0, len(valid) // 2, len(valid) - 1)]

    def run(backend, **kw):
        r = grid_sssp(z, sources, [0.0, 2.0, 1.0], cost=cost, connectivity=conn,
                      friction=fr if cost != "absdiff" else None, cellsize=(2.0, 3.0),
                      max_cost=200.0, backend=backend, **kw)
        return r.distance, r.allocation, r.backlink, r.hops, r.stats.get("target_distance")

    assert_backends_identical(run)
    stops = [tuple(valid[i]) for i in (len(valid) // 3, len(valid) // 4)]
    assert_backends_identical(lambda backend: run(backend, stops=stops))


@pytest.mark.gpu
def test_gpu_labels_from_distance_equals_cpu():
    z = int_dem(50, 60, 8, nan_frac=0.1, high=3)
    z[0, 0] = z[49, 59] = 1
    sources = [(0, 0), (49, 59)]
    res = grid_sssp(z, sources, backend="cpu")

    def run(backend):
        r = labels_from_distance(z, res.distance, sources, [(0, 0), (1, 0)], backend=backend)
        return r.distance, r.allocation, r.backlink, r.hops

    assert_backends_identical(run)


def test_infinite_arc_costs_are_never_taken():
    z = np.array([[0, 0, 3e4, 3e4], [0, 0, 3e4, 3e4]], np.float32)  # a cliff: tobler cost inf
    res = grid_sssp(z, [(0, 0)], cost="tobler", backend="cpu")
    assert res.stats["queue"] == "heap"
    assert np.isfinite(res.distance[:, :2]).all()
    assert np.isnan(res.distance[:, 2:]).all() and (res.allocation[:, 2:] == -1).all()
    assert (res.backlink[:, 2:] == 255).all() and (res.hops[:, 2:] == -1).all()


@pytest.mark.parametrize("cost", ["absdiff", "friction"])  # the heap and the bucket queue
def test_an_interrupt_stops_the_cpu_solve_within_a_second(cost, stops_on_interrupt):
    """Ctrl-C (or SIGTERM, which terrain turns into an exception the same way) is noticed by
    the C solve between rounds: the caller gets its KeyboardInterrupt within about a
    second, not after the whole solve (a 6000² in-core run took 100 s to stop)."""
    rng = np.random.default_rng(5)
    z = rng.random((3000, 3000), dtype=np.float32)
    f = (1 + rng.random((3000, 3000), dtype=np.float32)) if cost == "friction" else None
    stops_on_interrupt(lambda: grid_sssp(z, [(1500, 1500)], cost=cost, friction=f,
                                         backend="cpu"))


def test_a_stop_ends_the_cpu_solves_row_passes(stopped_in_a_task):
    """The passes over rows around the C solve (the padded state, the backlinks, the
    outputs, the largest slope) poll the stop flag each row: a stopping run's task raises
    Stopped having written none of their cells (a stop waited for whole passes over the
    grid), where with the flag clear they write every one."""
    from terrain.grid import _sssp_cpu as S
    from terrain.grid._sssp_frame import PAD, offsets, unpad
    from terrain.grid.costs import arc_codes, arc_lengths
    from terrain.native import address
    z = np.random.default_rng(2).random((300, 200), dtype=np.float32)
    rows, cols = z.shape
    n = (rows + 2 * PAD) * (cols + 2 * PAD)
    zp, fp, dist, label = S.padded_state(z, None)
    codes, lengths, offs = arc_codes(8), arc_lengths(), offsets(cols)
    init_dist, init_label = np.full(n, 7.0), np.zeros(n, np.int64)

    def init():
        S._by_rows(S._lib().terrain_sssp_init, rows + 2 * PAD, n, address(z), cols, None, 0, 0,
                   rows, cols, PAD, None, None, address(init_dist), address(init_label), 8)
    backlink = np.full(rows * cols, 77, np.uint8)

    def backlinks():
        S.backlinks_cpu(zp, fp, False, 1, lengths, offs, codes, dist, label, rows, cols, PAD,
                        backlink, None, None, None)
    allocation = np.full(n, 77, np.int32)
    out_dist, out_backlink = dist.copy(), np.full(n, 77, np.uint8)

    def outputs():
        S._outputs_cpu(out_dist, label, 32, out_backlink, rows, cols, allocation, None)
    for run, written in ((init, init_dist), (backlinks, backlink),
                         (outputs, unpad(allocation, z.shape))):
        before = written.copy()
        stopped_in_a_task(run)
        np.testing.assert_array_equal(written, before)
        run()
        assert not np.any(written == before)

    def max_slope(stop):
        return S._lib().terrain_sssp_max_slope(
            address(zp), address(offs), address(codes), codes.size, address(lengths), cols,
            PAD, 0, rows, address(np.full(1, stop, np.uint8)))
    assert max_slope(1) == -1.0  # no slope is negative
    assert max_slope(0) >= float(np.max(np.abs(np.diff(z, axis=1))))  # one arc's, at least


def _knight_grid(**nodata):
    """3 x 2 cells: a knight arc SSE from u = (0, 0) to v = (2, 1) passes between a = (1, 0)
    and b = (1, 1); the corners off the way cost 100."""
    f = np.array([[1, 100], [4, 5], [100, 2]], np.float32)
    for name, cell in (("a", (1, 0)), ("b", (1, 1))):
        if nodata.get(name):
            f[cell] = np.nan
    return np.zeros_like(f), f


def _knight_solvers(z, f, cost="friction"):
    """The distance and backlink at v = (2, 1) from every CPU solver and the certificate."""
    from terrain.grid.sssp_blocked import blocked_sssp
    from terrain.grid.sssp_tiled import tiled_sssp
    from terrain.verify import verify_grid_sssp
    kw = dict(cost=cost, friction=f if cost != "absdiff" else None, connectivity=16)
    zz, ff, _, model, codes, lengths = prepare_grid(z, kw["friction"], cost, 16, (1, 1))
    heap = CpuOps().solve(zz, ff, model, codes, lengths, np.array([0]), np.array([0]),
                          np.zeros(1), math.inf, queue="heap")
    out = []
    for res in (grid_sssp(z, [(0, 0)], backend="cpu", **kw), heap,
                blocked_sssp(z, [(0, 0)], side=4, **kw),
                tiled_sssp(z, [(0, 0)], tile=2, backend="cpu", **kw)):
        assert verify_grid_sssp(z, res.distance, res.backlink, res.allocation, [(0, 0)],
                                **kw).ok
        out.append((float(res.distance[2, 1]), int(res.backlink[2, 1])))
    assert len(set(out)) == 1, out
    return out[0]


def test_knight_arc_costs_the_four_cells_it_touches():
    """GRASS r.cost -k: the knight arc's friction factor is the mean of its two ends and the
    two cells it passes between; it beats the rook-diagonal paths through a and b."""
    z, f = _knight_grid()
    d, back = _knight_solvers(z, f)
    assert d == math.sqrt(5.0) * ((1.0 + 2.0) + (4.0 + 5.0)) * 0.25
    assert back == 15  # NNW (code 14) back to u
    ref = oracle_distance(csr_graph(z, "friction", f, 16), z.shape, [(0, 0)])
    assert ref[2, 1] == pytest.approx(d, rel=1e-15)


@pytest.mark.parametrize("cell", ["a", "b"])
def test_knight_arc_passing_a_nodata_cell_does_not_exist(cell):
    z, f = _knight_grid(**{cell: True})
    d, back = _knight_solvers(z, f)
    if cell == "a":  # through b: diagonal, then south
        assert (d, back) == (math.sqrt(2.0) * ((1.0 + 5.0) * 0.5) + (5.0 + 2.0) * 0.5, 7)
    else:  # through a: south, then diagonal
        assert (d, back) == ((1.0 + 4.0) * 0.5 + math.sqrt(2.0) * ((4.0 + 2.0) * 0.5), 6)
    # absdiff: a flat knight arc would cost 0; the cell it passes stops it all the same
    z = np.where(np.isnan(f), np.nan, np.where(f > 2, 10, 0)).astype(np.float32)
    assert _knight_solvers(z, f, "absdiff")[0] == 20.0


def test_labels_past_2_to_the_23_in_the_frictions_memory_are_not_read_as_friction():
    """The bucket queue keeps its labels in the friction's memory (int32: allocation << hop
    bits | hops): a cell settled in the current bucket, above the cell being settled, holds a
    settled mark there. Read as a friction, a mark of a label of 2^23 or more (here a second
    source's, on a grid of more than 2^22 cells) is a finite negative number, which had made
    distances of -1.7e38. Oracles: the octile distance of uniform friction, and the least of
    single-source runs (whose labels stay below 2^23)."""
    rows, cols = 2049, 2048
    sources = [(0, 0), (rows - 1, cols - 2)]
    f = np.ones((rows, cols), np.float32)
    r = grid_sssp(f, sources, cost="friction", friction=f, backend="cpu")
    assert r.stats["queue"] == "buckets"
    rr, cc = np.mgrid[0:rows, 0:cols]
    octile = np.full((rows, cols), np.inf)
    for sr, sc in sources:
        dr, dc = np.abs(rr - sr), np.abs(cc - sc)
        octile = np.minimum(octile, np.maximum(dr, dc) + (math.sqrt(2) - 1) * np.minimum(dr, dc))
    np.testing.assert_allclose(r.distance, octile, rtol=1e-12)
    fr = np.random.default_rng(3).uniform(0.5, 2.0, (rows, cols)).astype(np.float32)
    both = grid_sssp(fr, sources, cost="friction", friction=fr, backend="cpu")
    each = [grid_sssp(fr, [s], cost="friction", friction=fr, backend="cpu").distance
            for s in sources]
    np.testing.assert_array_equal(both.distance, np.minimum(*each))
    np.testing.assert_array_equal(both.allocation, (each[1] < each[0]).astype(np.int32))


def test_certificate_refuses_a_cycle_of_tight_backlinks():
    """Two cells joined by a zero-cost arc (friction 0 at both) are each other's tight
    predecessor with one allocation: every per-cell check passes both backlinks, the walk
    from either never reaches a source."""
    from terrain.verify import verify_grid_sssp
    f = np.array([[1, 1, 1, 1], [1, 0, 0, 1], [1, 1, 1, 1]], np.float32)
    z = np.zeros_like(f)
    kw = dict(cost="friction", friction=f, connectivity=8)
    r = grid_sssp(z, [(0, 0)], backend="cpu", **kw)
    assert verify_grid_sssp(z, r.distance, r.backlink, r.allocation, [(0, 0)], **kw).ok
    assert r.distance[1, 1] == r.distance[1, 2] and r.backlink[1, 2] == 5  # W, to (1, 1)
    b = r.backlink.copy()
    b[1, 1] = 1  # E, to (1, 2): tight (a zero-cost arc), the same allocation
    c = verify_grid_sssp(z, r.distance, b, r.allocation, [(0, 0)], **kw)
    assert not c.ok
    assert c.violation == "cell (1, 1): its backlinks close a cycle and never reach a source"


SQUARE_UNDER_OR_OVERFLOWS = r"^cell size .*: its square under- or overflows"


@pytest.mark.parametrize("cellsize", [(1e200, 1.0), (1.0, 1e200), (1e-300, 1.0), (1.0, 1e-170),
                                      (1e154, 1.0)])  # the knight arc's (2 dx)² overflows
def test_a_cell_size_whose_square_under_or_overflows_is_refused_by_every_algorithm(cellsize):
    # (1e200, 1) left reachable cells unreached (NaN, a NumPy warning); (1e-300, 1) made the
    # east arcs cost 0: refused as terrain.mst refuses them, by one check
    import warnings

    import terrain
    from terrain.grid.sssp_blocked import blocked_sssp
    from terrain.grid.sssp_tiled import tiled_sssp
    z, f = np.ones((4, 5), np.float32), np.ones((4, 5), np.float32)
    kw = dict(cost="friction", friction=f, cellsize=cellsize, backend="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused before any arithmetic warns
        for solve in (grid_sssp, blocked_sssp, tiled_sssp, terrain.cost_distance):
            with pytest.raises(InputError, match=SQUARE_UNDER_OR_OVERFLOWS):
                solve(z, [(0, 0)], **kw)
    if cellsize[0] < 1e154:  # the MST's arcs are one cell long: the same refusal, up to 2x
        with pytest.raises(InputError, match=SQUARE_UNDER_OR_OVERFLOWS):
            terrain.mst(z, weight="slope", cellsize=cellsize, backend="cpu")


def test_cell_sizes_at_the_edge_of_the_range_are_computed():
    # the knight arc's (2 dx)² + dy² still finite, every square normal: a friction-1 cost is
    # the length walked, dx a step east, 2 dy two steps south
    import terrain
    from terrain.grid.sssp_blocked import blocked_sssp
    from terrain.grid.sssp_tiled import tiled_sssp
    z, f = np.ones((4, 5), np.float32), np.ones((4, 5), np.float32)
    for dx, dy in ((6e153, 1.0), (1.0, 1e-150)):
        for solve in (grid_sssp, blocked_sssp, tiled_sssp, terrain.cost_distance):
            d = solve(z, [(0, 0)], cost="friction", friction=f, cellsize=(dx, dy),
                      connectivity=16, backend="cpu").distance
            assert d[0, 1] == dx and d[2, 0] == 2 * dy and np.isfinite(d).all(), (solve, d)
