"""fill's options: epsilon (RichDEM's Priority-Flood+epsilon, bit for bit), the depression
hierarchy (RichDEM's get_depression_hierarchy: the same pits and merge levels), the
persistence simplification (min_depth / min_area) against a priority flood with the kept
pits as outlets."""

import numpy as np
import pytest

from terrain.hydrology import depression_hierarchy, fill_depressions, kept_pits, outlet_cells
from terrain.grid import grid_mst
from grids import dem
from oracles import (edge_nodata, hierarchy_canon, priority_flood, richdem_fill,
                     richdem_hierarchy, sample_dems)


def rand(seed, integer):
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(2, 60)), int(rng.integers(2, 60)))
    if integer:
        return rng.integers(0, 10, shape).astype(np.float32)
    return (rng.random(shape) * 50).astype(np.float32)


# -- epsilon ------------------------------------------------------------------------------------
@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", range(8))
def test_epsilon_is_richdem(seed, conn):
    z = rand(seed, seed % 2)
    np.testing.assert_array_equal(fill_depressions(z, conn, epsilon=True, backend="cpu").filled,
                                  richdem_fill(z, conn, epsilon=True), strict=True)
    z = edge_nodata(z, np.random.default_rng(seed), 0.05, conn)
    np.testing.assert_array_equal(fill_depressions(z, conn, epsilon=True, backend="cpu").filled,
                                  richdem_fill(z, conn, epsilon=True), strict=True)


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("name", ["jacksboro", "topobathy", "topobathy-sea-nodata"])
def test_epsilon_sample_dems(name, conn):
    z = sample_dems()[name]
    np.testing.assert_array_equal(fill_depressions(z, conn, epsilon=True, backend="cpu").filled,
                                  richdem_fill(z, conn, epsilon=True), strict=True)


def test_epsilon_drains_every_cell():
    """Every cell that is not an outlet has a strictly lower neighbour, also beside an
    inner nodata hole (where RichDEM itself leaves pits)."""
    z = rand(3, True)
    z[10:13, 10:13] = np.nan
    f = fill_depressions(z, 8, epsilon=True, backend="cpu").filled
    exact = fill_depressions(z, 8, backend="cpu").filled
    out = outlet_cells(z, 8)
    R, C = z.shape
    for r in range(R):
        for c in range(C):
            if np.isnan(z[r, c]) or out[r, c]:
                continue
            nb = f[max(r - 1, 0):r + 2, max(c - 1, 0):c + 2]
            assert np.nanmin(nb) < f[r, c], (r, c)
    assert np.all((f >= exact) | np.isnan(z))


# -- hierarchy ----------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(30))
def test_hierarchy_is_richdem(seed):
    z = rand(seed + 50, False)
    h = depression_hierarchy(z, grid_mst(z, 8, tile=16, backend="cpu").mask,
                             outlet_cells(z, 8), 8)
    assert hierarchy_canon(h) == richdem_hierarchy(z)


def test_hierarchy_columns_and_volume():
    z = np.array([[9, 9, 9, 9, 9], [9, 1, 5, 2, 9], [9, 9, 9, 9, 9]], np.float32)
    r = fill_depressions(z, 4, hierarchy=True, backend="cpu")
    h = r.hierarchy
    assert h["pit_elevation"].tolist() == [1, 2, 1] and h["spill_elevation"].tolist() == [5, 5, 9]
    assert h["parent"].tolist() == [3, 3, 0] and h["left"].tolist() == [0, 0, 1]
    assert h["cells"].tolist() == [1, 1, 3]  # the saddle at 5 is in neither (depth 0)
    assert h["volume"][2] == float(np.nansum(r.depth))  # the top depression holds it all


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", [31, 33, 36, 37, 38, 39])  # 10 to 225 depressions
def test_hierarchy_cells_are_those_below_the_spill_level(seed, conn):
    """A depression's cells: those the pits of its leaves reach through cells below its
    spill level (an independent count with scipy's labels). The saddle at the spill level
    was counted or not by the order among equal weights (511 of 1026 pits differed from
    RichDEM by one)."""
    from scipy import ndimage
    z = rand(seed, seed % 2)
    z[3:6, 20:24] = np.nan
    h = fill_depressions(z, conn, hierarchy=True, backend="cpu").hierarchy
    structure = ndimage.generate_binary_structure(2, 1 if conn == 4 else 2)
    assert len(h["cells"]) > 5

    def leaves(row):
        kids = [int(h[side][row]) - 1 for side in ("left", "right") if h[side][row]]
        return [row] if not kids else [leaf for k in kids for leaf in leaves(k)]

    for row in range(len(h["cells"])):
        labels, _ = ndimage.label(z < h["spill_elevation"][row], structure)
        pits = {int(labels[h["pit_row"][k], h["pit_col"][k]]) for k in leaves(row)}
        assert h["cells"][row] == np.count_nonzero(np.isin(labels, list(pits))), row


# -- persistence simplification -----------------------------------------------------------------
@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", range(6))
def test_min_depth_area_is_a_flood_from_the_kept_pits(seed, conn):
    z = rand(seed + 7, seed % 2)
    for d, a in ((0.0, None), (3.0, None), (None, 5), (2.0, 3), (1e9, None)):
        r = fill_depressions(z, conn, min_depth=d, min_area=a, hierarchy=True, backend="cpu")
        pits = kept_pits(r.hierarchy, d, a)
        out = outlet_cells(z, conn)
        out.ravel()[pits] = 1
        np.testing.assert_array_equal(r.filled, priority_flood(z, conn, out), strict=True)
        if d == 0.0 and a is None:  # every depression kept: nothing fills but zero-depth pits
            assert r.stats["flooded"] == 0 or r.stats["kept_pits"] > 0
        if d == 1e9:
            np.testing.assert_array_equal(r.filled, priority_flood(z, conn), strict=True)



@pytest.mark.parametrize("named", [False, True])
def test_epsilon_with_min_depth_drains_to_the_kept_pits(named):
    """Epsilon and persistence together: the kept pits stay at their elevation and every
    other cell drains, strictly downhill, to them or to an outlet; no cell lies below the
    exact fill from the same pits."""
    z = rand(9, False)
    z[5:8, 20:23] = np.nan
    out = outlet_cells(z, 8)
    r = fill_depressions(z, 8, out if named else None, epsilon=True, min_depth=2.0,
                         backend="cpu")
    exact = fill_depressions(z, 8, out if named else None, min_depth=2.0, backend="cpu")
    pits = r.sinks
    assert pits.size > 0 and np.array_equal(pits, exact.sinks)
    assert np.array_equal(r.filled.ravel()[pits], z.ravel()[pits])
    drains = out.copy()
    drains.ravel()[pits] = 1
    f = np.where(np.isnan(z), np.inf, r.filled)
    R, C = z.shape
    for i in range(R):
        for j in range(C):
            if np.isnan(z[i, j]) or drains[i, j]:
                continue
            assert f[max(i - 1, 0):i + 2, max(j - 1, 0):j + 2].min() < f[i, j], (i, j)
    assert np.all((r.filled >= exact.filled) | np.isnan(z))
    assert not np.array_equal(r.filled, fill_depressions(z, 8, epsilon=True, backend="cpu").filled)

@pytest.mark.parametrize("conn", [4, 8])
def test_min_area_and_depth_do_not_depend_on_the_grids_orientation(conn):
    """Two pits that meet each other and the drained side at one level: whether a parent
    of both exists in the hierarchy is the order of equal weights, a node that ends at the
    level its children met is no depression of its own, so the kept pits (and the filled
    DEM) are the same in all eight orientations of the grid. Pits of distinct elevations
    (ties between pits keep the first in row-major order, as documented)."""
    from scipy import ndimage

    def orient(a, k):
        a = np.rot90(a, k % 4)
        return np.fliplr(a) if k >= 4 else a

    def back(a, k):
        return np.rot90(np.fliplr(a) if k >= 4 else a, -(k % 4))

    z0 = np.array([[9, 9, 9, 9, 9, 9], [9, 1, 2, 1.5, 2, 0], [9, 9, 9, 9, 9, 9]], np.float32)
    cases = [(z0, dict(min_area=2))]
    for seed in range(12):
        z = np.random.default_rng(seed).integers(0, 6, (9, 11)).astype(np.float32)
        pits = ndimage.minimum_filter(z, 3, mode="nearest") == z
        z[pits] -= (np.arange(pits.sum()) + 1) * 1e-3  # distinct pits, tied spill levels
        cases += [(z, dict(min_area=3)), (z, dict(min_area=10)), (z, dict(min_depth=1.5))]
    for z, kw in cases:
        want = fill_depressions(z, conn, backend="cpu", **kw).filled
        for k in range(1, 8):
            got = fill_depressions(np.ascontiguousarray(orient(z, k)), conn, backend="cpu",
                                   **kw).filled
            np.testing.assert_array_equal(back(got, k), want, err_msg=f"{kw} {k}")
    assert fill_depressions(z0, conn, min_area=2, backend="cpu").filled[1].tolist() == \
        [9, 2, 2, 2, 2, 0]  # neither pit's depression holds two cells below its spill


def test_min_depth_keeps_the_elder_pit():
    # two pits (1 and 2) merge at 5 and spill at 9: depth 8 for pit 1, 3 for pit 2
    z = np.array([[9, 9, 9, 9, 9], [9, 1, 5, 2, 9], [9, 9, 9, 9, 9]], np.float32)
    r = fill_depressions(z, 4, min_depth=4, backend="cpu")
    assert r.filled[1].tolist() == [9, 1, 5, 5, 9]  # pit 2 fills to the saddle, pit 1 drains
    r = fill_depressions(z, 4, min_depth=9, backend="cpu")
    assert r.filled[1].tolist() == [9, 9, 9, 9, 9]


@pytest.mark.parametrize("kw", [dict(min_depth=1e9), dict(min_depth=2), dict(min_area=1)])
def test_a_region_cut_off_from_the_outlets_keeps_no_pit(kw):
    """An island of valid cells inside nodata, with the outlets named elsewhere, drains
    nowhere: its root never spills, so none of its pits is kept (its eldest had an infinite
    depth): it stays undrained, as the plain fill leaves it."""
    n = np.nan
    z = np.array([[5] * 8, [5, n, n, n, n, n, n, 5], [5, n, 9, 9, 9, 9, n, 5],
                  [5, n, 9, 1, 6, 3, n, 5], [5, n, 9, 9, 9, 9, n, 5],
                  [5, n, n, n, n, n, n, 5], [4, 5, 5, 5, 5, 5, 5, 5]], np.float32)
    out = np.zeros(z.shape, np.uint8)
    out[6, 0] = 1
    plain = fill_depressions(z, 8, out, backend="cpu")
    r = fill_depressions(z, 8, out, backend="cpu", **kw)
    np.testing.assert_array_equal(r.filled, plain.filled, strict=True)
    assert r.stats["undrained"] == plain.stats["undrained"] == 12
    assert r.stats["kept_pits"] == 0 and r.sinks.size == 0


def test_without_labels_the_same_filled_dem():
    """``labels=False`` (what ``flow`` asks for) leaves the depressions unnumbered and every
    other layer as with them: the oracle's priority flood."""
    z = dem("holes", (40, 53), 3)
    for conn in (8, 4):
        r = fill_depressions(z, conn, labels=False, backend="cpu")
        full = fill_depressions(z, conn, backend="cpu")
        assert r.depression is None and r.stats["depressions"] is None
        np.testing.assert_array_equal(r.filled, priority_flood(z, conn))
        np.testing.assert_array_equal(r.depth, full.depth)
        assert full.stats["depressions"] > 0


def test_an_epsilon_step_above_float32s_largest_value_is_refused():
    """A rim at float32's largest value (often undeclared nodata): its next step is inf,
    which read as undrained (the pit kept, exit 0, and verify failing the store)."""
    from terrain.errors import InputError
    top = np.finfo(np.float32).max
    z = np.full((6, 6), top, np.float32)
    z[2:4, 2:4] = 1
    with pytest.raises(InputError, match=r"^dem: the epsilon fill would raise cells above "
                                         r"float32's largest value \(3.4028235e\+38\), as at "
                                         r"cell \(row, col\) = \(1, 1\)"):
        fill_depressions(z, 8, epsilon=True, backend="cpu")
    assert fill_depressions(z, 8, backend="cpu").filled[2, 2] == top  # the plain fill's
