"""Depression filling (terrain fill): exact against an independent priority flood and
against RichDEM (bit for bit), in core and tiled (every tile size gives the same bits).

Oracles: ``oracles.priority_flood`` (heapq, written independently), RichDEM's
``FillDepressions(epsilon=False)`` (``pip install richdem2``, skipped without it) on the
matplotlib sample DEMs and on synthetic DEMs with integer ties and nodata blobs, and
``scipy.ndimage.label`` for the depression ids.
"""

import numpy as np
import pytest
from scipy import ndimage

from terrain.hydrology import fill_depressions, fill_tiled, outlet_cells
from grids import dem
from oracles import edge_nodata, priority_flood, region_labels, richdem_fill, sample_dems


def random_case(seed, shape=None):
    rng = np.random.default_rng(seed)
    shape = shape or tuple(int(s) for s in rng.integers(1, 48, 2))
    if seed % 2:
        z = rng.integers(0, 8, shape).astype(np.float32)  # ties everywhere
    else:
        z = (rng.random(shape) * 100).astype(np.float32)
    if seed % 3 == 0:
        z[rng.random(shape) < 0.15] = np.nan
    return z


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", range(24))
def test_in_core_equals_priority_flood(seed, conn):
    z = random_case(seed)
    r = fill_depressions(z, conn, tile=4, backend="cpu")
    np.testing.assert_array_equal(r.filled, priority_flood(z, conn), strict=True)
    assert np.array_equal(r.depth, r.filled - z, equal_nan=True)



@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("strips", [1, 3])
def test_smooth_slopes_climbed_off_the_queue(conn, strips, monkeypatch):
    """Smooth hillsides, ridges and pits (most slopes climbed from the slope stack, those
    beside a lower open cell queued): the independent flood's levels, in one strip and in
    three."""
    from terrain import native
    monkeypatch.setattr(native, "threads", lambda work=None: strips)
    i, j = np.mgrid[0:61, 0:47].astype(np.float64)
    z = 40 * np.sin(i / 7) * np.cos(j / 5) + 0.5 * np.abs(i - 30) + np.abs(j - 23)
    z[20:24, 10:13] -= 60  # a deep pit on a hillside
    z[:, 30] += 25  # a ridge across every strip
    z = z.astype(np.float32)
    r = fill_depressions(z, conn, backend="cpu")
    np.testing.assert_array_equal(r.filled, priority_flood(z, conn), strict=True)
    assert (r.depth > 0).sum() > 50

@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", range(20))
def test_row_strips_fill_as_one_grid(seed, conn, monkeypatch):
    """Barnes's parallel flood: the grid cut into row strips, a thread each, gives the
    one-strip levels bit for bit (ties, nodata, named outlets with undrained cells, strips of
    two rows)."""
    from terrain import native
    rng = np.random.default_rng(seed)
    z = random_case(seed, (int(rng.integers(4, 41)), int(rng.integers(1, 41))))
    outlets = (rng.random(z.shape) < 0.01).astype(np.uint8) if seed % 4 == 3 else None
    want = priority_flood(z, conn, outlets)
    one = fill_depressions(z, conn, outlets, backend="cpu")
    for strips in (2, 3, 7):
        monkeypatch.setattr(native, "threads", lambda work=None, n=strips: n)
        r = fill_depressions(z, conn, outlets, backend="cpu")
        np.testing.assert_array_equal(r.filled, want, strict=True, err_msg=f"{strips} strips")
        for name in ("depth", "depression"):  # the layers' pass runs in strips too
            np.testing.assert_array_equal(getattr(r, name), getattr(one, name), strict=True)
        assert r.stats == {**one.stats, "times": r.stats["times"]}


@pytest.mark.parametrize("strips", [1, 2, 3])
def test_layers_take_the_memory_the_fill_is_done_with(strips, monkeypatch):
    """The DEM is never written unless ``overwrite_dem`` says so; then it holds the depth.
    The layers are those of an independent flood and scipy's labels either way (the ids in
    the strips' labels buffer, the flooded mask in the outlets')."""
    from terrain import native
    monkeypatch.setattr(native, "threads", lambda work=None: strips)
    z = random_case(5, (90, 70))
    want = priority_flood(z, 8)
    ids, _ = ndimage.label(want > np.where(np.isnan(z), np.inf, z), np.ones((3, 3)))
    for overwrite in (False, True):
        dem = z.copy()
        r = fill_depressions(dem, 8, backend="cpu", overwrite_dem=overwrite)
        np.testing.assert_array_equal(r.filled, want, strict=True)
        np.testing.assert_array_equal(r.depth, want - z, strict=True)
        np.testing.assert_array_equal(r.depression, ids.astype(np.int32), strict=True)
        assert np.shares_memory(r.depth, dem) == overwrite
        if not overwrite:
            np.testing.assert_array_equal(dem, z, strict=True)


@pytest.mark.parametrize("kind", ["random", "integer", "plateau", "holes"])
@pytest.mark.parametrize("conn", [4, 8])
def test_grids_kinds(kind, conn):
    z = dem(kind, (37, 53), seed=2)
    np.testing.assert_array_equal(fill_depressions(z, conn, backend="cpu").filled,
                                  priority_flood(z, conn), strict=True)


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", range(12))
def test_tiled_every_tile_size_same_bits(seed, conn):
    z = random_case(seed + 100, (45, 67))
    ref = fill_depressions(z, conn, backend="cpu")
    for tile, group in ((2, 1), (2, 2), (4, 1), (8, 2), (16, 1), (64, 4)):
        r = fill_tiled(z, conn, tile=tile, group_tiles=group, backend="cpu")
        for name in ("filled", "depth", "depression"):
            np.testing.assert_array_equal(getattr(r, name), getattr(ref, name), strict=True,
                                          err_msg=f"{name} tile {tile} group {group}")
        assert r.stats["flooded"] == ref.stats["flooded"]


def test_depression_ids_are_scipy_labels_in_row_major_order():
    z = random_case(7, (60, 80))
    for conn in (4, 8):
        r = fill_depressions(z, conn, backend="cpu")
        want, n = ndimage.label(r.depth > 0, np.ones((3, 3)) if conn == 8 else None)
        np.testing.assert_array_equal(r.depression, want.astype(np.int32), strict=True)
        assert r.stats["depressions"] == n


def test_a_lake_is_one_level():
    z = random_case(9, (50, 50))
    r = fill_depressions(z, 8, backend="cpu")
    for k in range(1, r.stats["depressions"] + 1):
        assert np.unique(r.filled[r.depression == k]).size == 1


def test_named_outlets_and_undrained():
    z = np.array([[9, 9, 9, 9, 9],
                  [9, 3, 9, 2, 9],
                  [9, 9, 9, 9, 9]], np.float32)
    out = np.zeros(z.shape, np.uint8)
    out[1, 3] = 1  # only this cell drains; everything else rises to 9 or cannot drain
    r = fill_depressions(z, 4, out, backend="cpu")
    np.testing.assert_array_equal(r.filled, priority_flood(z, 4, out))
    assert r.filled[1, 1] == 9 and r.filled[1, 3] == 2
    z[:, 2] = np.nan  # the left part is cut off: no outlet there
    r = fill_depressions(z, 4, out, backend="cpu")
    assert r.stats["undrained"] == 6 and r.filled[1, 1] == 3
    np.testing.assert_array_equal(r.filled, priority_flood(z, 4, out))
    t = fill_tiled(z, 4, out, tile=2, group_tiles=1, backend="cpu")
    np.testing.assert_array_equal(t.filled, r.filled)


@pytest.mark.parametrize("seed", range(6))
def test_statistics_are_the_layers_counts(seed):
    """The summary's counts and deepest cell, computed in one pass with the layers, are
    NumPy's over the returned layers (named outlets leave cells undrained)."""
    z = random_case(3 * seed, (40, 30))
    outlets = (np.random.default_rng(seed).random(z.shape) < 0.01) if seed % 2 else None
    r = fill_depressions(z, 8, outlets, backend="cpu")
    valid = ~np.isnan(z)
    assert r.stats["cells"] == np.count_nonzero(valid)
    assert r.stats["flooded"] == np.count_nonzero(r.filled > z)
    regions, _ = ndimage.label(valid, np.ones((3, 3)))  # undrained: no outlet in its region
    drained = np.unique(regions[outlet_cells(z, 8, outlets) != 0])
    assert r.stats["undrained"] == np.count_nonzero(valid & ~np.isin(regions, drained))
    assert r.stats["max_depth"] == (float(np.nanmax(r.depth)) if valid.any() else 0.0)


def test_an_interrupt_stops_the_cpu_flood_within_a_second(stops_on_interrupt):
    """The priority flood polls the stop flag Ctrl-C sets: the caller gets its
    KeyboardInterrupt within about a second, not after the flood (2-3 s at 6000², 15 s for
    221 M cells)."""
    z = np.random.default_rng(6).random((6000, 6000), dtype=np.float32)
    stops_on_interrupt(lambda: fill_depressions(z, 8, backend="cpu"))


def test_outlets_are_edge_and_nodata_neighbours():
    z = np.ones((5, 5), np.float32)
    z[2, 2] = np.nan
    assert outlet_cells(z, 4).tolist() == [[1, 1, 1, 1, 1], [1, 0, 1, 0, 1], [1, 1, 0, 1, 1],
                                           [1, 0, 1, 0, 1], [1, 1, 1, 1, 1]]
    assert outlet_cells(z, 8)[1:4, 1:4].sum() == 8


def test_empty_and_all_nodata():
    for z in (np.zeros((0, 4), np.float32), np.full((3, 3), np.nan, np.float32)):
        r = fill_depressions(z, 8, backend="cpu")
        assert r.filled.shape == z.shape and r.stats["flooded"] == 0


# -- RichDEM, bit for bit -----------------------------------------------------------------------
@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("name", ["jacksboro", "topobathy", "topobathy-sea-nodata"])
def test_richdem_sample_dems(name, conn):
    z = sample_dems()[name]
    want = richdem_fill(z, conn)
    np.testing.assert_array_equal(fill_depressions(z, conn, backend="cpu").filled, want,
                                  strict=True)
    for tile, group in ((32, 1), (64, 2), (128, 1)):
        np.testing.assert_array_equal(
            fill_tiled(z, conn, tile=tile, group_tiles=group, backend="cpu").filled, want,
            strict=True)


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", range(4))
def test_richdem_integer_ties_and_edge_nodata(seed, conn):
    rng = np.random.default_rng(seed)
    z = edge_nodata(rng.integers(0, 12, (120, 90)).astype(np.float32), rng, 0.03, conn)
    want = richdem_fill(z, conn)
    np.testing.assert_array_equal(fill_depressions(z, conn, backend="cpu").filled, want,
                                  strict=True)
    np.testing.assert_array_equal(
        fill_tiled(z, conn, tile=16, group_tiles=2, backend="cpu").filled, want, strict=True)


def test_richdem_fills_interior_holes_we_drain_into_them():
    """The one documented difference (docs/hydrology.md): RichDEM's nodata is a very low
    value reached only from the grid's edge, so a hole inside the grid is a pit it fills;
    terrain's cells beside nodata are outlets."""
    z = np.full((7, 7), 10, np.float32)
    z[1:6, 1:6] = 5
    z[0, 3] = 7
    z[3, 3] = np.nan
    ours = fill_depressions(z, 8, backend="cpu").filled
    assert ours[2, 2] == 5 and richdem_fill(z, 8)[2, 2] == 7
    np.testing.assert_array_equal(ours, priority_flood(z, 8))


@pytest.mark.parametrize("conn", [4, 8])
def test_depression_labels_are_row_major_regions(conn):
    """The flooded regions, numbered in the row-major order of their first cells (a
    plain breadth-first labelling as the oracle)."""
    from terrain.hydrology import depression_labels
    rng = np.random.default_rng(conn)
    flooded = ndimage.binary_dilation(rng.random((150, 61)) < 0.15)
    np.testing.assert_array_equal(depression_labels(flooded, conn),
                                  region_labels(flooded, conn), strict=True)


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", range(8))
def test_depression_labels_in_row_strips(seed, conn, monkeypatch):
    """Labelled in row strips, a thread each, then joined across the seams: the grid's
    row-major numbering (regions winding through several strips, and back up, included)."""
    from terrain import native
    from terrain.hydrology import depression_labels
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(2, 60)), int(rng.integers(1, 40)))
    flooded = rng.random(shape) < (0.3, 0.45, 0.6)[seed % 3]
    want = region_labels(flooded, conn)
    for strips in (2, 3, 7):
        monkeypatch.setattr(native, "threads", lambda work=None, n=strips: n)
        np.testing.assert_array_equal(depression_labels(flooded, conn), want, strict=True,
                                      err_msg=f"{strips} strips")


@pytest.mark.parametrize("backend", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("shape", [(5, 5), (300, 200)])
def test_an_infinite_elevation_is_refused_by_the_library_too(shape, backend):
    """The command line's readers refuse one; fill_depressions counted every cell, outlets
    too, as undrained (the flood's work array found none of them below inf)."""
    from terrain.errors import InputError
    z = np.zeros(shape, np.float32)
    z[shape[0] - 2, 1] = -np.inf
    with pytest.raises(InputError, match=rf"^dem: elevation -inf at cell \(row, col\) = "
                                         rf"\({shape[0] - 2}, 1\): elevations are finite"):
        fill_depressions(z, 8, backend=backend)


def test_a_stop_ends_the_tiled_fills_kernels(stopped_in_a_task):
    """The tiled fill's block reduction polls the stop flag each row (and every 65536
    vertices peeled or walked), its forest's drain levels every 65536 vertices: told to
    stop before they start they return nothing (with the flag clear: a block's edges to
    its halo; on a 200000-vertex path the running maximum of the weights, as NumPy takes
    it); and both run on :func:`terrain.native.interruptible`, so a stopping run's task
    raises Stopped after them (a stop waited for their whole blocks)."""
    from terrain.grid.mst import grid_mst
    from terrain.hydrology import _fill_cpu as K
    from terrain.hydrology.fill import FillSpec
    from terrain.hydrology.fill import _fill_leaf_up, _fill_merge, _fill_split
    from terrain.tiles.quadtree import walk_up
    H = W = 64
    zh = np.full((H + 2, W + 2), np.nan, np.float32)
    zh[1:-1, 1:-1] = np.random.default_rng(3).random((H, W), dtype=np.float32)
    zh[1:-1, -1] = 0  # the halo's column E, where the forest leaves the block
    mh = np.zeros((H + 2, W + 2), np.uint8)
    mh[1:-1, 1:-1] = 1  # a comb: each row's cells joined E, the last one to the halo
    mh[1:-2, 1] |= 2  # the first column joined S
    levels, present = np.full(H * W, np.inf, np.float32), np.ones(H * W, np.bool_)
    cp, *_, kept, _, _, _, _ = K.leaf_reduce_cpu(zh, mh, levels, present, np.zeros(1, np.uint8))
    assert cp.size == H and kept.size > 0
    stopped = K.leaf_reduce_cpu(zh, mh, levels, present, np.ones(1, np.uint8))
    assert all(a.size == 0 for a in stopped)

    n = 200_000
    w = np.random.default_rng(4).random(n - 1, dtype=np.float32)
    indptr, adj, ws = K.csr_from_edges_cpu(n, np.arange(n - 1), np.arange(1, n), w)
    src = np.full(n, np.inf, np.float32)
    src[0] = 0
    assert K.forest_dp_cpu(indptr, adj, ws, src, np.ones(1, np.uint8)).size == 0
    np.testing.assert_array_equal(K.forest_dp_cpu(indptr, adj, ws, src, np.zeros(1, np.uint8)),
                                  np.maximum.accumulate(np.concatenate([[0], w])))

    z = random_case(2, (32, 32))
    spec = FillSpec(z.shape, 8, 8, True)  # outlets read as given, not found by a C pass
    layers = {"elevation": z, "mst": grid_mst(z, 8, "max", 8, "cpu").mask,
              "outlets": outlet_cells(z, 8)}

    def read(name, r0, r1, c0, c1):
        return layers[name][r0:r1, c0:c1]

    plan = spec.plan(1)
    stopped_in_a_task(lambda: _fill_leaf_up(read, spec, None, plan.group_level, 0, 0))
    _, rest = walk_up(plan, (_fill_leaf_up, read, spec, None), (_fill_merge, spec), nout=3)
    stopped_in_a_task(lambda: _fill_split(spec, *plan.root, None, rest[plan.root][0]))


def assert_signed_zeros_kept(r, z, conn):
    """The oracle of the zeros' bits: ``filled`` is the independent flood's level, ``z``'s
    bits where it equals ``z`` (not raised), +0.0 where raised to 0; ``depth`` +0.0 where
    nothing floods."""
    from grids import assert_bits_equal
    np.testing.assert_array_equal(r.filled, priority_flood(z, conn), strict=True)
    kept = r.filled == z
    assert_bits_equal(np.where(kept, r.filled, 0), np.where(kept, z, 0))
    assert not np.signbit(r.filled[(r.filled > z) & (r.filled == 0)]).any()
    assert not np.signbit(r.depth[kept]).any()


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", range(4))
def test_signed_zeros_have_the_same_bits_on_every_route(seed, conn, monkeypatch):
    # the flood raised a +0.0 cell beside a -0.0 level to -0.0 (depth -0.0, nothing flooded),
    # the forest's drain gave a -0.0 cell +0.0: in core and tiled differed in the sign of 0
    from grids import assert_bits_equal
    from terrain import native
    z = dem("signed-zeros", (23, 29), seed)
    if seed % 2:
        z[np.random.default_rng(seed).random(z.shape) < 0.08] = np.nan
    ref = fill_depressions(z, conn, backend="cpu")
    assert_signed_zeros_kept(ref, z, conn)
    routes = {f"tile {t} group {g}": lambda t=t, g=g: fill_tiled(
        z, conn, tile=t, group_tiles=g, backend="cpu")
        for t, g in ((2, 1), (2, 2), (4, 1), (8, 2), (32, 1))}
    for strips in (2, 3):
        routes[f"{strips} strips"] = lambda n=strips: (
            monkeypatch.setattr(native, "threads", lambda work=None: n),
            fill_depressions(z, conn, backend="cpu"))[1]
    routes["hierarchy"] = lambda: fill_depressions(z, conn, hierarchy=True, backend="cpu")
    for route, fill in routes.items():
        r = fill()
        for name in ("filled", "depth"):
            assert_bits_equal(getattr(r, name), getattr(ref, name)), (route, name)
        np.testing.assert_array_equal(r.depression, ref.depression, strict=True)


@pytest.mark.parametrize("conn", [4, 8])
def test_the_epsilon_fill_keeps_the_bits_of_a_cell_it_does_not_raise(conn):
    # the next float32 after the edge's -1.4e-45 is -0.0, which a +0.0 cell beside it got
    # (not raised: depth -0.0)
    z = np.full((5, 6), 1.0, np.float32)
    z[0, 2], z[1, 2], z[2, 2] = -1.4e-45, 0.0, -0.0
    r = fill_depressions(z, conn, epsilon=True, backend="cpu")
    kept = r.filled == z
    assert kept[1, 2] and r.filled[2, 2] > 0
    np.testing.assert_array_equal(np.signbit(r.filled[kept]), np.signbit(z[kept]))
    assert not np.signbit(r.depth[kept]).any()
