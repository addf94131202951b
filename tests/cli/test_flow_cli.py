"""``terrain flow`` as a user runs it: bad input is one line naming the file, exit 2, and
nothing written; a filled DEM goes through to a verified store."""

import numpy as np

from cli import run_cli
from grids import dem, write_asc
from oracles import priority_flood


def _one_line(rc, err, expected):
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err and expected in lines[0], err


def test_bad_inputs(tmp_path):
    rc, _, err = run_cli("flow", tmp_path / "missing.asc", "--filled", "-o", tmp_path / "o.zarr")
    _one_line(rc, err, "missing.asc")
    bad = tmp_path / "bad.asc"
    bad.write_text("ncols 2\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n1 2\n3 x\n")
    rc, _, err = run_cli("flow", bad, "--filled", "-o", tmp_path / "o.zarr")
    _one_line(rc, err, "bad.asc")
    assert not (tmp_path / "o.zarr").exists()
    z = priority_flood(dem("random", (20, 30), 0))
    asc = write_asc(tmp_path / "f.asc", z)
    small = write_asc(tmp_path / "w.asc", np.ones((5, 5), np.float32))
    rc, _, err = run_cli("flow", asc, "--filled", "--weights", small, "-o", tmp_path / "o.zarr")
    _one_line(rc, err, "w.asc: weights raster has 5 x 5 cells, the DEM 20 x 30")
    rc, _, err = run_cli("cost-distance", asc, "--friction", small, "--source-cell", "1,1",
                         "-o", tmp_path / "c.zarr")
    _one_line(rc, err, "w.asc: friction raster has 5 x 5 cells, the DEM 20 x 30")
    rc, _, err = run_cli("flow", asc, "--filled", "-o", asc)
    _one_line(rc, err, "f.asc")
    (tmp_path / "o.csv").write_text("x,y\n-5,-5\n")
    rc, _, err = run_cli("flow", asc, "--filled", "--outlets", tmp_path / "o.csv",
                         "-o", tmp_path / "o.zarr")
    _one_line(rc, err, "outside")
    assert not (tmp_path / "o.zarr").exists()


def test_flow_then_verify(tmp_path):
    z = priority_flood(dem("integer", (40, 30), 2))
    asc = write_asc(tmp_path / "f.asc", z)
    rc, out, err = run_cli("flow", asc, "--filled", "-o", tmp_path / "f.zarr")
    assert rc == 0, err
    rc, _, err = run_cli("flow", asc, "--filled", "-o", tmp_path / "f.zarr")
    _one_line(rc, err, "exists")
    rc, out, _ = run_cli("verify", tmp_path / "f.zarr", scheduler=None)
    assert rc == 0 and "verified" in out


def test_a_dem_given_filled_that_is_not_is_refused(tmp_path):
    z = dem("random", (40, 30), 3)
    asc = write_asc(tmp_path / "pits.asc", z)
    for route in ("in-core", "tiled"):
        rc, _, err = run_cli("flow", asc, "--filled", "--route", route, "--tile", "8",
                             "-o", tmp_path / "o.zarr")
        _one_line(rc, err, "pits.asc: not depression-filled: ")
        assert "cells drain nowhere" in err and "(without --filled, flow fills" in err
        assert not (tmp_path / "o.zarr").exists()
    rc, _, err = run_cli("flow", asc, "-o", tmp_path / "o.zarr")
    assert rc == 0, err


def test_cells_cut_off_from_the_named_outlets_are_counted_and_verified(tmp_path):
    """Named outlets, and a region that a ring of nodata cuts off from all of them: the
    region's sinks drain nowhere (0, as the reference's flats without a drain); the summary
    counts them and ``verify`` certifies the store (it failed its own output before)."""
    import json

    from grids import CS, XLL, YLL
    from oracles import ref_directions
    rng = np.random.default_rng(3)
    z = (100 + rng.integers(0, 20, (40, 40))).astype(np.float32)
    z[10:30, 10] = z[10:30, 29] = z[10, 10:30] = z[29, 10:30] = np.nan
    z[20, 20] = 50
    asc = write_asc(tmp_path / "ring.asc", z)
    (tmp_path / "o.csv").write_text(f"x,y\n{XLL + 0.5 * CS},{YLL + 0.5 * CS}\n")  # cell (39, 0)
    outl = np.zeros(z.shape, bool)
    outl[39, 0] = True
    want = ref_directions(priority_flood(z, outlets=outl), cellsize=(CS, CS), outlets=outl)
    inside = np.zeros(z.shape, bool)
    inside[11:29, 11:29] = True
    sinks = int(np.count_nonzero((want == 0) & inside))
    assert sinks > 1 and np.count_nonzero(want == 0) == sinks + 1
    for route in ("in-core", "tiled"):
        out = tmp_path / f"{route}.zarr"
        rc, text, err = run_cli("flow", asc, "--outlets", tmp_path / "o.csv", "--route", route,
                                "--tile", "8", "-o", out, "--json")
        assert rc == 0, err
        s = json.loads(text)
        assert (s["outlet_cells"], s["undrained_sinks"]) == (1, sinks), s
        import zarr
        np.testing.assert_array_equal(zarr.open_group(str(out), mode="r")["direction"][...],
                                      np.where(np.isnan(z), 255, want))
        rc, text, err = run_cli("verify", out, scheduler=None)
        assert rc == 0 and "verified" in text, text + err
        assert f"the {sinks} sinks of cells cut off from every named outlet" in text


def test_outlets_that_all_lie_on_nodata_are_refused_naming_their_file(tmp_path):
    """A point on nodata was dropped, leaving no outlet: the whole grid undrained, exit 0."""
    z = dem("random", (20, 30), 4)
    z[5:9, 10:15] = np.nan
    asc = write_asc(tmp_path / "d.asc", z)
    # cell (6, 12), nodata: x = 1000 + 12.5 * 10, y = 2000 + (20 - 6.5) * 10
    (tmp_path / "o.csv").write_text("x,y\n1125,2135\n")
    for command in ("fill", "flow"):
        rc, _, err = run_cli(command, asc, "--outlets", tmp_path / "o.csv", "-o",
                             tmp_path / "o.zarr")
        _one_line(rc, err, "o.csv: all 1 outlet cells lie on the DEM's nodata: nothing "
                           "would drain")
        assert not (tmp_path / "o.zarr").exists()


def test_outlets_some_of_which_lie_on_nodata_are_said_in_a_warning(tmp_path):
    """Two of three outlet points on nodata drain nothing: the run goes on from the third,
    and a warning says how many and where the first lies (rasterio's index of the points
    and its mask of the DEM are the oracle), on both routes."""
    import rasterio
    z = dem("random", (20, 30), 4)
    z[5:9, 10:15] = z[15, 3] = np.nan
    asc = write_asc(tmp_path / "d.asc", z)
    points = [(1045, 2175), (1125, 2135), (1035, 2045)]  # cells (2, 4), (6, 12), (15, 3)
    (tmp_path / "o.csv").write_text("x,y\n" + "".join(f"{x},{y}\n" for x, y in points))
    with rasterio.open(asc) as ds:
        cells = [ds.index(x, y) for x, y in points]
        valid = ds.read_masks(1) > 0
    lost = sorted(c for c in cells if not valid[c])
    assert len(lost) == 2
    for command in ("fill", "flow"):
        for route in ("in-core", "tiled"):
            rc, _, err = run_cli(command, asc, "--outlets", tmp_path / "o.csv", "--route", route,
                                 "--tile", "8", "-o", tmp_path / f"{command}-{route}.zarr")
            assert rc == 0, err
            assert (f"o.csv: 2 of its 3 outlet cells lie on the DEM's nodata and drain nothing "
                    f"(the first at row {lost[0][0]}, column {lost[0][1]})") in err, err


def test_the_apis_outlet_raster_some_on_nodata_is_said_in_a_warning():
    """``terrain.fill(dem, outlets=mask)`` (and ``flow``) with two of three outlet cells on
    nodata dropped them silently, where the command line warns; now the same warning, the
    first by row-major order (the oracle: NumPy's NaNs of the DEM under the mask), and the
    filled DEM is the flood from the third alone."""
    import warnings

    import terrain
    from terrain.errors import TerrainWarning
    z = dem("random", (20, 30), 4)
    z[5:9, 10:15] = z[15, 3] = np.nan
    mask = np.zeros(z.shape, bool)
    mask[2, 4] = mask[6, 12] = mask[15, 3] = True
    lost = np.argwhere(mask & np.isnan(z))
    for run in (terrain.fill, terrain.flow):
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            result = run(z, outlets=mask, backend="cpu")
        texts = [str(w.message) for w in said if issubclass(w.category, TerrainWarning)]
        assert texts == [f"outlets: {len(lost)} of its 3 outlet cells lie on the DEM's nodata "
                         f"and drain nothing (the first at row {lost[0][0]}, column "
                         f"{lost[0][1]})"], texts
        if run is terrain.fill:
            filled = np.asarray(result["filled"])
    kept = np.zeros(z.shape, np.uint8)
    kept[2, 4] = 1
    assert np.array_equal(filled, priority_flood(z, 8, kept), equal_nan=True)


def _strict_json(text):
    """``text`` parsed as RFC 8259 JSON: NaN and Infinity refused, as JavaScript refuses them."""
    import json

    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def test_json_of_an_all_nodata_dem_is_strict(tmp_path, capsys):
    from cli import run_main
    asc = write_asc(tmp_path / "sea.asc", np.full((2, 3), np.nan, np.float32))
    out_store = tmp_path / "sea.flow.zarr"
    rc, out, err = run_main(capsys, "flow", asc, "-o", out_store, "--json")
    assert rc == 0, err
    assert _strict_json(out)["max_accumulation"] is None
    for argv in (("info", out_store, "--json"), ("verify", out_store, "--json")):
        rc, out, err = run_main(capsys, *argv, scheduler=None)
        assert rc == 0, err
        _strict_json(out)
    _strict_json((out_store / "zarr.json").read_text())
    rc, out, err = run_main(capsys, "info", out_store, scheduler=None)
    assert rc == 0 and "max accumulation nan" in out, (out, err)
    folder = tmp_path / "tiles"
    folder.mkdir()
    write_asc(folder / "sea.asc", np.full((2, 3), np.nan, np.float32))
    rc, out, err = run_main(capsys, "batch", "flow", folder, "-o", tmp_path / "b", "--json",
                            scheduler="threads")
    assert rc == 0, err
    _strict_json(out)
    _strict_json((tmp_path / "b" / "manifest.json").read_text())
