"""The fill certificate (terrain.verify.verify_fill): it accepts every fill terrain makes
and rejects corrupted ones; ``terrain verify`` on fill stores."""

import numpy as np
import pytest

from cli import run_main
from grids import write_asc
from terrain.hydrology import fill_depressions
from terrain.verify import verify_fill


def dem(seed, shape=(30, 40), integer=True):
    rng = np.random.default_rng(seed)
    z = (rng.integers(0, 9, shape) if integer else rng.random(shape) * 50).astype(np.float32)
    z[rng.random(shape) < 0.05] = np.nan
    return z


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", range(4))
def test_accepts_fills(seed, conn):
    z = dem(seed, integer=bool(seed % 2))
    r = fill_depressions(z, conn, backend="cpu")
    c = verify_fill(z, r.filled, conn, None, r.depth, r.depression)
    assert c.ok, c.violation
    e = fill_depressions(z, conn, epsilon=True, backend="cpu")
    assert verify_fill(z, e.filled, conn, epsilon=True).ok


def test_rejects_corruptions():
    z = dem(1)
    r = fill_depressions(z, 8, backend="cpu")
    lake = np.argwhere(r.depth > 0)[0]
    dry = np.argwhere((r.depth == 0) & ~np.isnan(z))
    inner = [p for p in dry if 0 < p[0] < z.shape[0] - 1 and 0 < p[1] < z.shape[1] - 1
             and not np.isnan(z[p[0] - 1:p[0] + 2, p[1] - 1:p[1] + 2]).any()][0]
    cases = {"raised above its spill": (tuple(inner), lambda v: v + 1, "above its spill"),
             "a lake cell lowered": (tuple(lake), lambda v: v - 0.5, "spill level"),
             "below the DEM": (tuple(inner), lambda v: v - 1, "below its elevation"),
             "nodata filled": (tuple(np.argwhere(np.isnan(z))[0]), lambda v: 3.0, "nodata")}
    for name, (cell, change, words) in cases.items():
        f = r.filled.copy()
        f[cell] = change(f[cell])
        c = verify_fill(z, f, 8)
        assert not c.ok and words in c.violation, (name, c.violation)
    # a whole flat lake left unfilled: locally each cell is at its spill level, but it
    # holds water: the drainage search finds it
    z2 = np.full((5, 5), 9, np.float32)
    z2[1:4, 1:4] = 2
    c = verify_fill(z2, z2, 8)
    assert not c.ok and "no path" in c.violation
    c = verify_fill(z2, np.where(np.isnan(z2), z2, 9).astype(np.float32), 8, epsilon=True)
    assert not c.ok and "does not drain" in c.violation
    d = r.depth.copy()
    d[lake[0], lake[1]] += 1
    assert "depth" in verify_fill(z, r.filled, 8, None, d).violation
    lab = r.depression.copy()
    lab[lab == 1] = 7
    assert "depression id" in verify_fill(z, r.filled, 8, None, r.depth, lab).violation


def test_flat_lake_left_at_its_level_is_caught_by_drainage():
    # a flat-bottomed closed basin exactly at one level: locally minimal, but it is a pit
    z = np.full((5, 5), 9, np.float32)
    z[1:4, 1:4] = 9
    z[2, 2] = 9
    z[0, 2] = 3  # the outlet is low: the basin must drain... it is flat at 9: fine
    assert verify_fill(z, z, 8).ok
    z = np.full((6, 6), 9, np.float32)
    z[2:4, 2:4] = 4
    f = z.copy()
    f[2:4, 2:4] = 4  # unfilled flat pit: each cell's lowest neighbour is 4 -> local check ok
    c = verify_fill(z, f, 8)
    assert not c.ok and "no path" in c.violation


@pytest.mark.parametrize("options", [(), ("--epsilon",), ("--min-depth", "2"),
                                     ("--connectivity", "4", "--min-area", "3")])
def test_verify_command_on_fill_stores(tmp_path, capsys, options):
    write_asc(tmp_path / "dem.asc", dem(5))
    rc, _, se = run_main(capsys, "fill", tmp_path / "dem.asc", "-o", tmp_path / "f.zarr",
                         *options)
    assert rc == 0, se
    rc, so, se = run_main(capsys, "verify", tmp_path / "f.zarr", scheduler=None)
    assert rc == 0, so + se
    assert "every cell drains" in so


def test_verify_command_rejects_a_corrupted_store(tmp_path, capsys):
    import zarr
    write_asc(tmp_path / "dem.asc", dem(6))
    assert run_main(capsys, "fill", tmp_path / "dem.asc", "-o", tmp_path / "f.zarr")[0] == 0
    g = zarr.open_group(str(tmp_path / "f.zarr"), mode="r+")
    f = g["filled"][:]
    depth = g["depth"][:]
    r, c = np.argwhere(depth > 0)[0]
    f[r, c] += 5
    g["filled"][:] = f
    rc, so, _ = run_main(capsys, "verify", tmp_path / "f.zarr", scheduler=None)
    assert rc == 1 and "FAIL" in so
    del g["depth"]  # a layer gone: the store is damaged (a KeyError's traceback before)
    rc, so, se = run_main(capsys, "verify", tmp_path / "f.zarr", scheduler=None)
    assert rc == 2 and se.strip().endswith("f.zarr: a fill store without its depth layer "
                                           "(the store is damaged)"), se


def slope_cell(z, conn):
    """The first cell (row-major) off the edge and away from nodata (no outlet) with a
    neighbour lower than it (scipy's minimum filter over the neighbours): no pit, so no
    kept depression's sink."""
    from scipy import ndimage
    foot = np.ones((3, 3), bool) if conn == 8 else ndimage.generate_binary_structure(2, 1)
    foot[1, 1] = False
    low = ndimage.minimum_filter(np.where(np.isnan(z), np.inf, z), footprint=foot,
                                 mode="constant", cval=np.inf)
    inner = ~ndimage.maximum_filter(np.isnan(z), footprint=foot, mode="constant", cval=True)
    return tuple(np.argwhere(~np.isnan(z) & inner & (low < z))[0])


@pytest.mark.parametrize("conn", [4, 8])
def test_a_sink_that_is_no_pit_is_rejected(conn):
    """A kept pit drains as an outlet: a sinks layer with one more cell (one on a slope)
    certified the store as long as the filled DEM did not change."""
    z = dem(7)
    r = fill_depressions(z, conn, min_depth=2, backend="cpu")
    sinks = np.zeros(z.shape, np.uint8)
    sinks.ravel()[r.sinks] = 1
    assert sinks.any() and verify_fill(z, r.filled, conn, sinks=sinks).ok
    on_slope = sinks.copy()
    on_slope[slope_cell(z, conn)] = 1
    c = verify_fill(z, r.filled, conn, sinks=on_slope)
    assert not c.ok and "is no pit" in c.violation, c.violation
    on_edge = sinks.copy()
    on_edge[0, 0] = 1  # the grid's edge drains already
    c = verify_fill(z, r.filled, conn, sinks=on_edge)
    assert not c.ok and "lies on an outlet" in c.violation, c.violation


def test_verify_command_rejects_a_sink_added_by_hand(tmp_path, capsys):
    import zarr
    write_asc(tmp_path / "dem.asc", dem(5))
    assert run_main(capsys, "fill", tmp_path / "dem.asc", "-o", tmp_path / "f.zarr",
                    "--min-depth", "2")[0] == 0
    g = zarr.open_group(str(tmp_path / "f.zarr"), mode="r+")
    sinks = g["sinks"][:]
    sinks[slope_cell(g["filled"][:], 8)] = 1  # the DEM's nodata: the filled DEM's
    g["sinks"][:] = sinks
    rc, so, _ = run_main(capsys, "verify", tmp_path / "f.zarr", scheduler=None)
    assert rc == 1 and "is no pit" in so, so


def test_outlets_and_cut_off_cells_keep_their_elevation():
    z = np.array([[5, 5, 5, np.nan, 9], [5, 1, 5, np.nan, 2], [5, 5, 5, np.nan, 9]],
                 np.float32)
    outlets = np.zeros(z.shape, bool)
    outlets[0, 0] = True  # the one named outlet: the part right of the nodata reaches none
    r = fill_depressions(z, 8, outlets, backend="cpu")
    assert verify_fill(z, r.filled, 8, outlets).ok
    f = r.filled.copy()
    f[0, 0] += 1
    assert "outlet (0, 0): filled 6" in verify_fill(z, f, 8, outlets).violation
    f = r.filled.copy()
    f[1, 4] = 9
    assert "(1, 4) reaches no outlet but was raised" in verify_fill(z, f, 8, outlets).violation
