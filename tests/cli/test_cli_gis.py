"""CLI polish: --version, help everywhere, --band/--nodata/--crs, geographic weights, info on
every store, diameter's summarised path."""

import argparse
import json

import numpy as np
import pytest
import rasterio

from pipelines.ingest import ingest
from terrain import __version__
from terrain.errors import InputError
from terrain.io import open_grid, read_grid
from terrain.run import build_parser

from cli import assert_one_line_error, run_cli, run_main, run_terrain


@pytest.fixture(scope="module")
def three_bands(tmp_path_factory):
    d = tmp_path_factory.mktemp("bands")
    z = np.arange(3 * 20 * 30, dtype=np.float32).reshape(3, 20, 30)
    z[1, 2:4, 5:9] = -5
    path = d / "m.tif"
    with rasterio.open(path, "w", driver="GTiff", height=20, width=30, count=3, dtype="float32",
                       crs="EPSG:4326", transform=rasterio.Affine(0.001, 0, 10, 0, -0.001, 50),
                       nodata=-1) as dst:
        dst.write(z)
    return path, z


def test_version():
    rc, out, _ = run_cli("--version", scheduler=None)
    assert rc == 0 and out.strip() == f"terrain {__version__}"


def test_every_option_of_every_command_has_help():
    missing = []

    def walk(parser, name):
        for a in parser._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub, p in a.choices.items():
                    walk(p, f"{name} {sub}")
            elif not isinstance(a, (argparse._HelpAction, argparse._VersionAction)) and not a.help:
                missing.append(f"{name} {'/'.join(a.option_strings) or a.dest}")

    walk(build_parser(), "terrain")
    assert missing == []
    rc, out, _ = run_cli("mst", "--help", scheduler=None)
    assert rc == 0 and "bit d" in out and "SE" in out


def test_band_choice_and_errors(three_bands, tmp_path, capsys):
    path, z = three_bands
    with pytest.warns(UserWarning, match="3 bands; reading band 1"):
        g = open_grid(path)
    assert g.band == 1
    got, _ = read_grid_band(path, 2)
    want = z[1].copy()
    want[2:4, 5:9] = -5  # -5 is not the file's nodata (-1)
    assert np.array_equal(got, want)
    with pytest.raises(InputError, match=r"m\.tif: band 4 does not exist \(the raster has 3 bands\)"):
        open_grid(path, band=4)
    rc, out, err = run_main(capsys, "ingest", path, "-o", tmp_path / "a.zarr", "--band", "4")
    assert rc == 2 and err.strip() == f"terrain: {path}: band 4 does not exist (the raster has 3 bands)"
    assert not (tmp_path / "a.zarr").exists()
    rc, out, err = run_main(capsys, "ingest", path, "-o", tmp_path / "b.zarr")
    assert rc == 0 and err.count("warning") == 1 and "3 bands; reading band 1" in err
    rc, out, err = run_main(capsys, "ingest", path, "-o", tmp_path / "c.zarr", "--band", "2",
                           "--nodata", "-5", "--crs", "EPSG:32617")
    assert rc == 0 and "warning" not in err
    store = ingest_store(tmp_path / "c.zarr")
    e = store.elevation[:]
    assert np.isnan(e[2:4, 5:9]).all() and np.isnan(e).sum() == 8
    assert store.attrs["nodata"] == -5.0
    rc, out, err = run_main(capsys, "info", tmp_path / "c.zarr", scheduler=None)
    assert rc == 0 and "crs       EPSG:32617" in out
    rc, out, err = run_main(capsys, "info", tmp_path / "c.zarr", "--json", scheduler=None)
    d = json.loads(out)
    assert d["crs_label"] == "EPSG:32617" and 'UTM zone 17N' in d["crs"]
    rc, out, err = run_main(capsys, "ingest", path, "-o", tmp_path / "d.zarr", "--crs", "EPSG:nope")
    assert rc == 2 and "not a coordinate reference system" in err
    # a code PROJ does not know: GDAL's own "ERROR 1:" line (written by C to the process's
    # stderr) stays off
    proc = run_terrain("ingest", path, "-o", tmp_path / "d.zarr", "--crs", "EPSG:999999",
                       cwd=tmp_path)
    assert_one_line_error(proc, "'EPSG:999999' is not a coordinate reference system")


def read_grid_band(path, band):
    grid = open_grid(path, band=band)
    return grid.read_rows(0, grid.shape[0]), grid


def ingest_store(path):
    from terrain.tiles import open_store
    return open_store(path)


def test_nodata_override_ascii(tmp_path):
    p = tmp_path / "g.asc"
    p.write_text("ncols 3\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\nNODATA_value -9999\n"
                 "1 2 -9999\n7 2 3\n")
    z, _ = read_grid(p)
    assert np.isnan(z).sum() == 1
    g = open_grid(p, nodata=2)
    got = g.read_rows(0, 2, g.row_starts([g.newline_offsets(a, b) for a, b in g.index_ranges()]))
    assert np.isnan(got).tolist() == [[False, True, False], [False, True, False]]
    assert got[0, 2] == -9999
    with pytest.raises(InputError, match="band 2"):
        open_grid(p, band=2)


def test_length_weights_on_a_geographic_crs(three_bands, tmp_path, capsys):
    path, _ = three_bands
    for weight in ("slope", "length3d"):
        rc, out, err = run_main(capsys, "mst", path, "-o", tmp_path / "m.zarr", "--weight", weight)
        assert rc == 2 and "geographic" in err and "EPSG:4326" in err
        assert not (tmp_path / "m.zarr").exists()
    rc, out, err = run_main(capsys, "mst", path, "-o", tmp_path / "m.zarr", "--weight", "absdiff",
                           "--backend", "cpu")
    assert rc == 0, err
    # Tobler's walking time divides a rise by a run as well
    rc, out, err = run_main(capsys, "cost-distance", path, "--source-cell", "1,1", "--cost",
                            "tobler", "-o", tmp_path / "c.zarr")
    said = [line for line in err.splitlines() if not line.startswith("terrain: warning:")]
    assert rc == 2 and len(said) == 1 and "cost 'tobler'" in said[0] and "EPSG:4326" in said[0]
    assert not (tmp_path / "c.zarr").exists()



def test_flow_and_streams_of_a_geographic_dem_warn_of_degrees(tmp_path, capsys):
    """D8 directions of a DEM in longitude/latitude are common (not refused as slope and
    cost are), but its cells are degrees: flow and streams say so in one line each (both
    were silent, the links' lengths in degrees)."""
    path = tmp_path / "geo.tif"
    z = np.random.default_rng(1).random((30, 40)).astype(np.float32) * 100
    with rasterio.open(path, "w", driver="GTiff", height=30, width=40, count=1,
                       dtype="float32", crs="EPSG:4326",
                       transform=rasterio.transform.from_origin(10, 60, 0.001, 0.001)) as dst:
        dst.write(z, 1)
    rc, out, err = run_main(capsys, "flow", path, "-o", tmp_path / "f.zarr")
    assert rc == 0 and err.startswith(f"terrain: warning: {path}: the CRS (EPSG:4326) is "
                                      "geographic: cells are in degrees, a step east"), err
    assert err.count("\n") == 1, err
    rc, out, err = run_main(capsys, "streams", tmp_path / "f.zarr", "--threshold", "5", "-o",
                            tmp_path / "s.geojson", scheduler=None)
    assert rc == 0 and err == (f"terrain: warning: {tmp_path / 'f.zarr'}: the CRS (EPSG:4326) "
                               "is geographic: cells are in degrees, so are the links' "
                               "lengths; reproject the DEM to a projected CRS for metres\n"), err
    rc, out, err = run_main(capsys, "watershed", tmp_path / "f.zarr", "--outlet-cell", "5,5",
                            "-o", tmp_path / "w.tif", scheduler=None)  # areas in degrees²
    assert rc == 0 and err == (f"terrain: warning: {tmp_path / 'f.zarr'}: the CRS (EPSG:4326) "
                               "is geographic: cells are in degrees, so are the basins' areas "
                               "and the snap distance; reproject the DEM to a projected CRS "
                               "for metres\n"), err


@pytest.mark.parametrize("affine, message", [
    ((10, 2, 500000, 2, -10, 4003000), "a rotated or sheared raster (geotransform 500000, 10, "
     "2, 4003000, 2, -10) is not supported; warp it north-up first (gdalwarp)"),
    ((10, 0, 500000, 0, 30, 3985000), "a south-up raster (its rows run north: geotransform "
     "500000, 10, 0, 3985000, 0, 30) is not supported; flip it north-up first (gdalwarp)"),
    ((-10, 0, 500300, 0, -10, 4003000), "an east-to-west raster (its columns run west: "
     "geotransform 500300, -10, 0, 4003000, 0, -10) is not supported; flip it north-up first "
     "(gdalwarp)")])
def test_a_raster_not_north_up_is_refused(tmp_path, capsys, affine, message):
    """Rows and columns are the map's axes everywhere: a rotated geotransform would put
    every output in the wrong place (190 m off in a trial), rows running north would turn
    every north into south (flow's code 64 pointing south, MST's S bits, backlinks): both
    are refused in one line."""
    path = tmp_path / "r.tif"
    with rasterio.open(path, "w", driver="GTiff", height=20, width=30, count=1,
                       dtype="float32", crs="EPSG:32617",
                       transform=rasterio.Affine(*affine)) as dst:
        dst.write(np.ones((1, 20, 30), np.float32))
    for command in (["ingest", path, "-o", tmp_path / "r.zarr"],
                    ["flow", path, "-o", tmp_path / "f.zarr"]):
        rc, out, err = run_main(capsys, *command)
        assert rc == 2 and err == f"terrain: {path}: {message}\n", err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.tif"]


def test_a_dataarray_with_y_ascending_is_refused(tmp_path, capsys):
    """The API's twin of a south-up raster: a DataArray whose y ascends is refused in one
    line; an ungeoreferenced raster (identity transform) is read as before."""
    import xarray as xr

    import terrain
    z = xr.DataArray(np.ones((4, 5), np.float32), dims=("y", "x"),
                     coords={"y": np.arange(4) * 10.0, "x": np.arange(5) * 10.0})
    with pytest.raises(terrain.InputError, match=r"^DataArray: a south-up raster .* reverse"):
        terrain.flow(z)
    assert terrain.flow(z.isel(y=slice(None, None, -1))).direction.shape == (4, 5)
    plain = tmp_path / "plain.tif"
    with rasterio.open(plain, "w", driver="GTiff", height=4, width=5, count=1,
                       dtype="float32") as dst:
        dst.write(np.ones((1, 4, 5), np.float32))
    rc, out, err = run_main(capsys, "ingest", plain, "-o", tmp_path / "p.zarr")
    assert rc == 0, err


@pytest.mark.parametrize("dims", [("y", "x"), ("lat", "lon")])
@pytest.mark.parametrize("flipped", ["rows", "columns"])
def test_a_dataarray_not_north_up_is_told_which_axis_to_reverse(dims, flipped):
    """A DataArray whose rows run north or whose columns run west is refused with the
    reversal that makes it north-up, on its own dimension (an east-to-west one was told to
    reverse y, which left it refused): that very expression makes it computable."""
    import xarray as xr

    import terrain
    from oracles import priority_flood
    z = np.random.default_rng(5).uniform(0, 9, (4, 5)).astype(np.float32)
    y, x = 4005.0 - np.arange(4) * 10.0, 5.0 + np.arange(5) * 10.0
    if flipped == "rows":
        y = y[::-1]
    else:
        x = x[::-1]
    da = xr.DataArray(z, dims=dims, coords={dims[0]: y, dims[1]: x})
    with pytest.raises(terrain.InputError) as e:
        terrain.fill(da)
    said = str(e.value)
    article = "a south-up" if flipped == "rows" else "an east-to-west"
    assert said.startswith(f"DataArray: {article} raster"), said
    fix = said[said.index("(da.isel(") + 1:said.index(") for ") + 1]
    assert fix == f"da.isel({dims[0 if flipped == 'rows' else 1]}=slice(None, None, -1))", said
    north_up = eval(fix, {"da": da})
    got = terrain.fill(north_up).filled.values
    np.testing.assert_array_equal(got, priority_flood(north_up.values))


@pytest.mark.parametrize("flipped", ["rows", "columns"])
def test_a_dataarray_of_one_column_or_row_not_north_up_is_refused(flipped):
    """A DataArray of one column whose y ascends runs north as a grid's rows would (one of
    one row whose x descends, west): its geotransform was left unknown (one coordinate on
    the other axis), so it was computed as it stood, every flow code N for S (E for W);
    refused as a grid of both is, and the reversal it names computes it."""
    import xarray as xr

    import terrain
    from oracles import priority_flood, ref_directions
    z = np.array([1, 2, 3, 7, 5], np.float32)
    steps = 10.0 * np.arange(5)  # ascending: y runs north, x east
    if flipped == "rows":
        da = xr.DataArray(z[:, None], dims=("y", "x"), coords={"y": steps, "x": [5.0]})
    else:
        da = xr.DataArray(z[None], dims=("y", "x"), coords={"y": [5.0], "x": steps[::-1]})
    assert np.diff(da.y.values if flipped == "rows" else -da.x.values).min() > 0  # the oracle
    for run in (terrain.fill, terrain.mst, terrain.flow,
                lambda d: terrain.cost_distance(d, [(0, 0)])):
        with pytest.raises(terrain.InputError) as e:
            run(da)
        article = "a south-up" if flipped == "rows" else "an east-to-west"
        assert str(e.value).startswith(f"DataArray: {article} raster"), str(e.value)
    said = str(e.value)
    north_up = eval(said[said.index("(da.isel(") + 1:said.index(") for ") + 1], {"da": da})
    want = ref_directions(priority_flood(north_up.values), (1.0, 10.0) if flipped == "rows"
                          else (10.0, 1.0))
    np.testing.assert_array_equal(terrain.flow(north_up, backend="cpu").direction.values, want)


def test_a_friction_or_weights_of_one_row_elsewhere_is_not_on_the_dems_grid():
    """A friction (weights) DataArray of one row 1000 m east of the DEM's row was taken as on
    its grid (neither had a geotransform, one coordinate on y): refused as a grid of several
    rows is; one on the DEM's coordinates is computed, its distances the oracle's."""
    import xarray as xr

    import terrain
    from oracles import csr_graph, oracle_distance
    x = 5.0 + 10.0 * np.arange(6)
    dem = xr.DataArray(np.zeros((1, 6), np.float32), dims=("y", "x"), coords={"y": [5.0], "x": x})
    f = np.random.default_rng(4).uniform(1, 3, (1, 6)).astype(np.float32)
    away = xr.DataArray(f, dims=("y", "x"), coords={"y": [5.0], "x": x + 1000})
    assert np.abs(away.x.values - dem.x.values).min() > 10  # the oracle: no column shared
    with pytest.raises(terrain.InputError, match=r"^friction \(DataArray\): not on the DEM's "):
        terrain.cost_distance(dem, [(0, 0)], friction=away)
    with pytest.raises(terrain.InputError, match=r"^weights \(DataArray\): not on the DEM's "):
        terrain.flow(dem, weights=away)
    got = terrain.cost_distance(dem, [(0, 0)], friction=away.assign_coords(x=x), backend="cpu")
    want = oracle_distance(csr_graph(dem.values, "friction", f, dx=10.0, dy=1.0), (1, 6), [(0, 0)])
    np.testing.assert_allclose(got.distance.values, want, rtol=1e-12)


def test_a_dataarray_whose_coordinates_do_not_advance_is_refused():
    """Coordinates that repeat (a step of 0) place every cell on one line: the cell size
    taken from them was 0, and without rioxarray loaded the default 1 (a cost distance of
    cells 1 apart, silently); refused, naming the dimension, as uneven ones are."""
    import xarray as xr

    import terrain
    z = np.random.default_rng(3).uniform(0, 9, (3, 4)).astype(np.float32)
    for y in ([5.0, 5.0, 5.0], [7.0, 7.0]):
        da = xr.DataArray(z[:len(y)], dims=("y", "x"), coords={"y": y, "x": 10.0 * np.arange(4)})
        assert not np.diff(da.y.values).any()  # the oracle: NumPy's steps are all 0
        for run in (terrain.fill, terrain.mst, terrain.flow,
                    lambda d: terrain.cost_distance(d, [(0, 0)], cost="friction",
                                                    friction=np.ones(d.shape, np.float32))):
            with pytest.raises(terrain.InputError, match=r"^DataArray: y coordinates do not "
                                                         r"advance \(every one is [57]\)"):
                run(da)


def test_a_dataarray_without_coordinates_is_unreferenced_with_rioxarray_loaded():
    """rioxarray gives an array without coordinates (or of one row or column) GDAL's identity
    transform, whose rows run "north": read as unreferenced, as without rioxarray, not
    refused as south-up; with y coordinates ascending it is refused still."""
    pytest.importorskip("rioxarray")
    import xarray as xr

    import terrain
    pit = np.array([[5, 5, 5], [5, 1, 5], [5, 5, 5]], np.float32)
    for da in (xr.DataArray(pit, dims=("y", "x")), xr.DataArray(pit, dims=("row", "col")),
               xr.DataArray(pit[:1], dims=("y", "x"), coords={"y": [5.0], "x": [0.5, 1.5, 2.5]}),
               xr.DataArray(pit[:1, :1], dims=("y", "x")).rio.write_crs(32633)):
        assert np.array_equal(terrain.fill(da, backend="cpu").filled.values,
                              np.full(da.shape, 5, np.float32))
        assert terrain.mst(da, backend="cpu").shape == da.shape
        assert terrain.cost_distance(da, [(0, 0)]).distance.values[0, 0] == 0
        assert terrain.flow(da, backend="cpu").direction.shape == da.shape
    up = xr.DataArray(pit, dims=("y", "x"), coords={"y": [0.5, 1.5, 2.5], "x": [0.5, 1.5, 2.5]})
    with pytest.raises(terrain.InputError, match="south-up"):
        terrain.fill(up)


def test_info_on_mst_outputs(tmp_path, capsys):
    from terrain.io import write_synth
    write_synth(tmp_path / "s.asc", 30, 40, seed=1, nodata=0.1)
    ingest(tmp_path / "s.asc", tmp_path / "s.zarr", tile=16, scheduler="threads")
    for src, out in ((tmp_path / "s.asc", tmp_path / "a.mst.zarr"),
                     (tmp_path / "s.zarr", tmp_path / "b.mst.zarr")):
        rc, _, err = run_main(capsys, "mst", src, "-o", out, "--tile", "16", "--backend", "cpu")
        assert rc == 0, err
        rc, text, err = run_main(capsys, "info", out, scheduler=None)
        assert rc == 0, err
        assert "layer     mst: uint8" in text and "result    mst:" in text and "trees" in text
        d = json.loads(run_main(capsys, "info", out, "--json", scheduler=None)[1])
        assert d["results"]["mst"]["edges"] > 0 and d["shape"] == [30, 40]
    rc, _, err = run_main(capsys, "info", tmp_path / "s.asc", scheduler=None)
    assert rc == 2 and "not a terrain" in err
    g = tmp_path / "g.txt"
    g.write_text("1 2\n2 3\n3 1\n7 8\n")
    rc, _, err = run_main(capsys, "graph-ingest", g, "-o", tmp_path / "g.zarr")
    assert rc == 0, err
    rc, text, err = run_main(capsys, "info", tmp_path / "g.zarr", scheduler=None)
    assert rc == 0 and "5 vertices, 4 undirected edges" in text, err + text


def test_diameter_prints_a_summary_of_the_path(tmp_path, capsys):
    g = tmp_path / "path.txt"
    g.write_text("".join(f"{i} {i + 1}\n" for i in range(1, 60)))
    rc, out, err = run_main(capsys, "diameter", g, "--backend", "cpu")
    assert rc == 0, err
    line = [x for x in out.splitlines() if x.startswith("path:")][0]
    assert line.startswith("path: 60 vertices: ") and " ... " in line and len(line) < 120
    rc, out, err = run_main(capsys, "diameter", g, "--backend", "cpu", "--path-out", tmp_path / "p.txt")
    assert rc == 0, err
    ids = [int(x) for x in (tmp_path / "p.txt").read_text().split()]
    assert len(ids) == 60 and {ids[0], ids[-1]} == {1, 60}
    rc, out, err = run_main(capsys, "diameter", g, "--backend", "cpu", "--path-out", tmp_path / "p.txt")
    assert rc == 2 and "exists (use --overwrite to replace it)" in err
    (tmp_path / "p.txt").write_text("old\n")  # the message's --overwrite exists (it did not)
    rc, out, err = run_main(capsys, "diameter", g, "--backend", "cpu", "--path-out",
                            tmp_path / "p.txt", "--overwrite")
    assert rc == 0 and len((tmp_path / "p.txt").read_text().split()) == 60, err
    for command in (["diameter", g, "--path-out", g, "--overwrite"],  # never over the input
                    ["mst", g, "-o", g, "--overwrite"]):
        rc, out, err = run_main(capsys, *command)
        assert rc == 2 and err == f"terrain: {g}: output is the input {g}\n", err
    assert g.read_text().startswith("1 2\n2 3\n")
    rc, out, err = run_main(capsys, "diameter", g, "--backend", "cpu", "--json")
    assert len(json.loads(out)["path"]) == 60


def test_points_on_cell_edges_take_the_cell_rasterio_indexes(tmp_path, capsys):
    """--source X,Y and the points of a CSV of sources on cell edges of a geographic float64
    GeoTIFF: each source's cell is rasterio's ``index`` of the point."""
    path = tmp_path / "geo_f64.tif"
    z = np.random.default_rng(1).random((400, 300))
    with rasterio.open(path, "w", driver="GTiff", height=400, width=300, count=1,
                       dtype="float64", crs="EPSG:4326",
                       transform=rasterio.Affine(0.001, 0, -80.0, 0, -0.0008, 35.0)) as dst:
        dst.write(z, 1)
    points = [(-79.9, 34.9), (-79.95, 34.8), (-79.801, 34.7904), (-79.999, 34.9992)]
    (tmp_path / "s.csv").write_text("x,y\n" + "".join(f"{x},{y}\n" for x, y in points[1:]))
    rc, out, err = run_main(capsys, "cost-distance", path, "--source", "%r,%r" % points[0],
                            "--sources", tmp_path / "s.csv", "-o", tmp_path / "g.zarr",
                            "--json", scheduler=None)
    assert rc == 0, err
    with rasterio.open(path) as src:
        want = [src.index(x, y) for x, y in points]
    got = [(s["row"], s["col"]) for s in json.loads(out)["sources"]]
    assert got == [tuple(int(v) for v in w) for w in want]


#: metres in a US survey foot, the unit of EPSG:2264 (NAD83 / North Carolina, ftUS)
US_FOOT = 1200 / 3937


def _dem_in_feet(path, z, band_unit):
    """``z`` on 10 m cells of EPSG:2264 (its cells in US survey feet), the band's unit
    ``band_unit`` (none: None)."""
    cell = 10 / US_FOOT
    with rasterio.open(path, "w", driver="GTiff", height=z.shape[0], width=z.shape[1], count=1,
                       dtype="float32", crs="EPSG:2264",
                       transform=rasterio.Affine(cell, 0, 1000, 0, -cell, 2000)) as dst:
        dst.write(z.astype(np.float32), 1)
        if band_unit:
            dst.set_band_unit(1, band_unit)
    return path


@pytest.mark.parametrize("band_unit", ["US survey foot", "m", None])
def test_tobler_on_a_crs_in_feet_is_refused(tmp_path, capsys, band_unit):
    """Tobler's speeds are metres per second: cells in feet (elevations in feet, in metres or
    in the CRS's unit, naming none) would give times in no unit (3.28 times the seconds);
    the command line and the Python API refuse such a DEM in one line naming it."""
    import terrain
    z = np.random.default_rng(5).random((16, 16)).astype(np.float32) * 50
    path = _dem_in_feet(tmp_path / "ft.tif", z / (US_FOOT if band_unit != "m" else 1),
                        band_unit)
    rc, _, err = run_main(capsys, "cost-distance", path, "--source-cell", "5,5", "--cost",
                          "tobler", "-o", tmp_path / "c.zarr")
    assert rc == 2 and err.count("\n") == 1, err
    assert str(path) in err and "US survey foot" in err and "metres" in err
    assert not (tmp_path / "c.zarr").exists()
    with pytest.raises(InputError, match="cost 'tobler' takes speeds in metres per second"):
        terrain.cost_distance(str(path), [(5, 5)], cost="tobler")
    # friction costs lengths in the CRS's unit, whatever it is: still run
    rc, _, err = run_main(capsys, "cost-distance", path, "--source-cell", "5,5", "--cost",
                          "friction", "--friction", path, "-o", tmp_path / "f.zarr")
    assert rc == 0, err


def test_slope_weights_with_a_rise_and_a_run_in_different_units(tmp_path, capsys):
    """A slope is unitless when the rise and the run share a unit: elevations in US survey
    feet on cells in US survey feet give the forest of the same DEM in metres; elevations
    in metres on cells in feet are refused (what the band names) for slope and length3d."""
    import zarr

    import terrain
    z = np.random.default_rng(6).random((24, 20)).astype(np.float32) * 50
    metres = tmp_path / "m.tif"
    with rasterio.open(metres, "w", driver="GTiff", height=24, width=20, count=1,
                       dtype="float32", crs="EPSG:32617",
                       transform=rasterio.Affine(10, 0, 1000, 0, -10, 2000)) as dst:
        dst.write(z, 1)
        dst.set_band_unit(1, "m")
    feet = _dem_in_feet(tmp_path / "ft.tif", z / US_FOOT, "US survey foot")
    for path in (metres, feet):
        rc, _, err = run_main(capsys, "mst", path, "-o", path.with_suffix(".zarr"), "--weight",
                              "slope", "--connectivity", "4", "--backend", "cpu")
        assert rc == 0, err
    want = zarr.open_group(str(metres.with_suffix(".zarr")), mode="r")["mst"][:]
    assert np.array_equal(zarr.open_group(str(feet.with_suffix(".zarr")), mode="r")["mst"][:],
                          want)
    mixed = _dem_in_feet(tmp_path / "mixed.tif", z, "metre")
    for weight in ("slope", "length3d"):
        rc, _, err = run_main(capsys, "mst", mixed, "-o", tmp_path / "x.zarr", "--weight",
                              weight)
        assert rc == 2 and err.count("\n") == 1, err
        assert str(mixed) in err and "a rise in metre by a run in US survey foot" in err
        assert not (tmp_path / "x.zarr").exists()
        with pytest.raises(InputError, match="a rise in metre by a run in US survey foot"):
            terrain.mst(str(mixed), weight=weight)


def _dem_in_units(path, shape, unit, seed):
    """A float32 GeoTIFF (UTM 17N, 30 m cells) whose band's unit type is ``unit``."""
    z = np.random.default_rng(seed).random(shape).astype(np.float32) * 100
    with rasterio.open(path, "w", driver="GTiff", height=shape[0], width=shape[1], count=1,
                       dtype="float32", crs="EPSG:32617",
                       transform=rasterio.Affine(30, 0, 500000, 0, -30, 4000000)) as dst:
        dst.write(z, 1)
        dst.set_band_unit(1, unit)
    return path


@pytest.mark.parametrize("cost, band, unit", [("absdiff", "ft", "ft"), ("tobler", "m", "s")])
def test_units_are_the_source_bands_or_absent(tmp_path, capsys, cost, band, unit):
    """The elevation layer's ``units`` is the source band's unit (GDAL's unit type, read by
    rasterio), none for an ASCII grid; the cost layers' a unit or none; a GeoTIFF band with a
    unit has GDAL's unit type set (read back by rasterio)."""
    path = _dem_in_units(tmp_path / "dem.tif", (60, 50), band, seed=2)
    with rasterio.open(path) as src:
        assert src.units == (band,)
    rc, _, err = run_main(capsys, "cost-distance", path, "--source-cell", "3,4", "--cost", cost,
                          "-o", tmp_path / "c.zarr", "--geotiff-dir", tmp_path / "t")
    assert rc == 0, err
    import zarr
    g = zarr.open_group(str(tmp_path / "c.zarr"), mode="r")
    assert g["elevation"].attrs["units"] == band
    assert g["distance"].attrs["units"] == unit
    assert "units" not in g["allocation"].attrs and "units" not in g["backlink"].attrs
    for name, want in (("distance", unit), ("allocation", None), ("backlink", None)):
        with rasterio.open(tmp_path / "t" / f"{name}.tif") as src:
            assert src.units == (want,), name
    ascii_path = tmp_path / "g.asc"
    ascii_path.write_text("ncols 3\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n"
                          "1 2 3\n4 5 6\n")
    assert run_main(capsys, "ingest", ascii_path, "-o", tmp_path / "a.zarr")[0] == 0
    assert "units" not in zarr.open_group(str(tmp_path / "a.zarr"), mode="r")["elevation"].attrs


@pytest.mark.parametrize("route", ["in-core", "tiled"])
def test_filled_and_depth_are_in_the_elevations_unit(tmp_path, capsys, route):
    """fill's ``filled`` and ``depth`` and flow's ``filled`` carry the DEM band's unit, in the
    store and as GDAL's unit type of their GeoTIFFs (they had none); codes, ids and counts
    have none."""
    import zarr
    path = _dem_in_units(tmp_path / "dem.tif", (40, 30), "m", seed=3)
    for command, layers in (("fill", ("filled", "depth", "depression")),
                            ("flow", ("filled", "direction", "accumulation"))):
        out, tifs = tmp_path / f"{command}.zarr", tmp_path / f"{command}-t"
        rc, _, err = run_main(capsys, command, path, "-o", out, "--route", route,
                              "--backend", "cpu", "--geotiff-dir", tifs)
        assert rc == 0, err
        g = zarr.open_group(str(out), mode="r")
        for name in layers:
            want = "m" if name in ("filled", "depth") else None
            assert g[name].attrs.get("units") == want, (command, name)
            with rasterio.open(tifs / f"{name}.tif") as src:
                assert src.units == (want,), (command, name)
    # the flow of the fill's store: its filled layer linked, with the unit
    rc, _, err = run_main(capsys, "flow", tmp_path / "fill.zarr", "-o", tmp_path / "w.zarr",
                          "--route", route, "--backend", "cpu")
    assert rc == 0, err
    assert zarr.open_group(str(tmp_path / "w.zarr"), mode="r")["filled"].attrs["units"] == "m"


def test_a_store_of_an_earlier_release_passes_on_no_placeholder_unit(tmp_path, capsys):
    """Stores written before units were units say ``units: "elevation"``: outputs made from
    one took it as a unit (``filled``, ``distance`` and their GeoTIFFs: GDAL's unit type
    "elevation"); they have none, as from a text grid."""
    import zarr

    from terrain.io.zarr_meta import open_group
    dem = _dem_in_units(tmp_path / "dem.tif", (30, 20), "m", seed=5)
    assert run_main(capsys, "ingest", dem, "-o", tmp_path / "old.zarr")[0] == 0
    open_group(tmp_path / "old.zarr", mode="r+")["elevation"].attrs["units"] = "elevation"
    for command, extra, layer in (("fill", [], "filled"),
                                  ("cost-distance", ["--source-cell", "3,4"], "distance")):
        out, tifs = tmp_path / f"{command}.zarr", tmp_path / f"{command}-t"
        rc, _, err = run_main(capsys, command, tmp_path / "old.zarr", *extra, "-o", out,
                              "--geotiff-dir", tifs)
        assert rc == 0, err
        assert "units" not in zarr.open_group(str(out), mode="r")[layer].attrs, command
        with rasterio.open(tifs / f"{layer}.tif") as src:
            assert src.units == (None,), command


def test_a_dataarray_on_no_grid_is_refused_and_float32_coordinates_are_not():
    """Coordinates that are not evenly spaced place the cells on no grid: the cell size was
    read from the first step (fill, mst) or from the ends (rioxarray's resolution: a Tobler
    cost on 17 m cells where they were 10 to 30 m apart), silently; refused, naming the
    dimension and its steps. Float32 coordinates far from 0 (a netCDF's; rounded by up to
    0.25 m at 4,000,000) are a grid: computed as the float64 ones are."""
    import xarray as xr

    import terrain
    from oracles import csr_graph, oracle_distance
    z = np.random.default_rng(7).uniform(0, 20, (5, 6)).astype(np.float32)
    x, y = 500005.0 + 10 * np.arange(6), 3999995.0 - 10 * np.arange(5)
    uneven = xr.DataArray(z, dims=("y", "x"), coords={"y": y, "x": [5., 15, 25, 40, 60, 90]})
    assert np.ptp(np.diff(uneven.x.values)) > 0  # the oracle: NumPy's steps differ
    for run in (terrain.fill, terrain.mst, terrain.flow,
                lambda da: terrain.cost_distance(da, [(0, 0)], cost="tobler")):
        with pytest.raises(terrain.InputError, match=r"^DataArray: x coordinates are not "
                                                     r"evenly spaced \(steps from 10 to 30\)"):
            run(uneven)
        with pytest.raises(terrain.InputError, match="y coordinates are not evenly spaced"):
            run(xr.DataArray(z, dims=("y", "x"), coords={"y": y[[0, 1, 2, 4, 3]], "x": x}))
    x, y = 500005.05 + 10.1 * np.arange(6), 3999994.95 - 10.1 * np.arange(5)
    rounded = xr.DataArray(z, dims=("y", "x"), coords={"y": y.astype(np.float32),
                                                       "x": x.astype(np.float32)})
    assert np.ptp(np.diff(rounded.y.values.astype(np.float64))) > 0  # float32 rounding
    pytest.importorskip("rioxarray")
    got = terrain.cost_distance(rounded.rio.write_crs("EPSG:32633"), [(2, 3)], cost="tobler")
    dx, dy = (abs(np.diff(c.values.astype(np.float64)).mean()) for c in (rounded.x, rounded.y))
    assert dx == pytest.approx(10.1, rel=0.01) and dy == pytest.approx(10.1, rel=0.01)
    want = oracle_distance(csr_graph(z, "tobler", dx=dx, dy=dy), z.shape, [(2, 3)])
    np.testing.assert_allclose(got.distance.values, want, rtol=1e-9)


@pytest.mark.parametrize("kind", ["mask band", "alpha band"])
def test_info_names_the_mask_that_made_the_nodata(tmp_path, capsys, kind):
    """A GeoTIFF whose nodata is its mask band (GDAL's internal mask) or alpha band: the
    store's ``info`` said its nodata was ``(the source's: NaN)``, a value the file never
    held; it names the band, and the cells are those GDAL masks. With ``--nodata`` the
    mask is not read, and the value is named."""
    import xarray as xr
    from rasterio.enums import ColorInterp
    z = np.random.default_rng(2).integers(1, 200, (12, 15)).astype(np.uint8)
    mask = np.full((12, 15), 255, np.uint8)
    mask[3:5, 3:7] = 0
    path = tmp_path / "m.tif"
    profile = dict(driver="GTiff", height=12, width=15, dtype="uint8", crs="EPSG:32633",
                   transform=rasterio.transform.from_origin(500000, 4000000, 10, 10))
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
        with rasterio.open(path, "w", count=1 if kind == "mask band" else 2, **profile) as d:
            d.write(z, 1)
            if kind == "mask band":
                d.write_mask(mask)
            else:
                d.write(mask, 2)
                d.colorinterp = [ColorInterp.gray, ColorInterp.alpha]
    with rasterio.open(path) as src:  # the oracle: GDAL's mask
        want = src.read(1, masked=True).astype(np.float32).filled(np.nan)
    assert np.isnan(want).sum() == 8
    rc, _, err = run_main(capsys, "ingest", path, "--band", "1", "-o", tmp_path / "s.zarr")
    assert rc == 0, err
    np.testing.assert_array_equal(xr.open_zarr(tmp_path / "s.zarr").elevation.values, want)
    rc, out, err = run_main(capsys, "info", tmp_path / "s.zarr", scheduler=None)
    assert rc == 0 and f"nodata    8 cells (4.44%), stored as NaN (the source's {kind})\n" in out
    rc, _, err = run_main(capsys, "ingest", path, "--band", "1", "--nodata", "7", "-o",
                          tmp_path / "v.zarr")
    assert rc == 0, err
    rc, out, err = run_main(capsys, "info", tmp_path / "v.zarr", scheduler=None)
    cells = int((z == 7).sum())
    assert f"nodata    {cells} cells ({100 * cells / 180:.2f}%), stored as NaN (source value " \
           "7.0)\n" in out, out


def test_info_names_an_infinite_nodata_value(tmp_path, capsys):
    """A float GeoTIFF whose nodata is -inf: its store's ``info`` said ``(the source's:
    NaN)``, since strict JSON keeps an infinity as null. The value is kept as Zarr v3 spells
    a fill value, "-Infinity", and the cells are those GDAL masks."""
    import xarray as xr
    z = np.random.default_rng(3).uniform(0, 100, (9, 11)).astype(np.float32)
    z[2:4, 5:9] = -np.inf
    path = tmp_path / "n.tif"
    with rasterio.open(path, "w", driver="GTiff", height=9, width=11, count=1,
                       dtype="float32", crs="EPSG:32633", nodata=-np.inf,
                       transform=rasterio.transform.from_origin(500000, 4000000, 10, 10)) as d:
        d.write(z, 1)
    with rasterio.open(path) as src:  # the oracle: GDAL's mask
        want = src.read(1, masked=True).filled(np.nan)
    rc, _, err = run_main(capsys, "ingest", path, "-o", tmp_path / "s.zarr")
    assert rc == 0, err
    np.testing.assert_array_equal(xr.open_zarr(tmp_path / "s.zarr").elevation.values, want)
    rc, out, err = run_main(capsys, "info", tmp_path / "s.zarr", scheduler=None)
    assert rc == 0 and ("nodata    8 cells (8.08%), stored as NaN (source value -Infinity)\n"
                        in out), out
    rc, out, err = run_main(capsys, "info", tmp_path / "s.zarr", "--json", scheduler=None)
    assert rc == 0 and json.loads(out)["nodata"] == "-Infinity"


def test_an_alpha_band_is_not_read_as_elevations(tmp_path, capsys):
    """``--band 2`` of a grey + alpha GeoTIFF read the alpha band (0 and 255) as a DEM,
    silently; refused in one line naming the band, nothing written. Band 1 is read with
    the alpha band as its mask, as GDAL reads it."""
    import xarray as xr
    from rasterio.enums import ColorInterp
    z = np.random.default_rng(4).integers(1, 200, (6, 8)).astype(np.uint8)
    alpha = np.full((6, 8), 255, np.uint8)
    alpha[0, :3] = 0
    path = tmp_path / "ga.tif"
    with rasterio.open(path, "w", driver="GTiff", height=6, width=8, count=2, dtype="uint8",
                       crs="EPSG:32633", photometric="MINISBLACK", alpha="YES",
                       transform=rasterio.transform.from_origin(500000, 4000000, 10, 10)) as d:
        d.write(np.stack([z, alpha]))
        d.colorinterp = [ColorInterp.gray, ColorInterp.alpha]
    with rasterio.open(path) as src:  # the oracle: GDAL's reading of both bands
        assert src.colorinterp[1] == ColorInterp.alpha
        want = src.read(1, masked=True).astype(np.float32).filled(np.nan)
    rc, _, err = run_main(capsys, "ingest", path, "--band", "2", "-o", tmp_path / "a.zarr")
    assert rc == 2 and err == (f"terrain: {path}: band 2 is an alpha band (the other bands' "
                               "mask), not elevations: give the band it masks\n"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ga.tif"]
    rc, _, err = run_main(capsys, "ingest", path, "--band", "1", "-o", tmp_path / "g.zarr")
    assert rc == 0, err
    np.testing.assert_array_equal(xr.open_zarr(tmp_path / "g.zarr").elevation.values, want)


def test_info_says_which_band_of_a_multiband_raster_was_read(tmp_path, capsys):
    """A store of a multi-band GeoTIFF said only ``source t.tif (gdal-gtiff)``: which band
    its elevations are (``--band 2``, or band 1 by default, warned once) was in the JSON
    header alone; the source line names it, and the elevations are that band's."""
    import xarray as xr
    bands = np.random.default_rng(6).uniform(0, 50, (3, 6, 7)).astype(np.float32)
    bands += np.array([0, 1000, 2000], np.float32)[:, None, None]
    path = tmp_path / "t.tif"
    with rasterio.open(path, "w", driver="GTiff", height=6, width=7, count=3,
                       dtype="float32", crs="EPSG:32633",
                       transform=rasterio.transform.from_origin(500000, 4000000, 10, 10)) as d:
        d.write(bands)
    for command, band in ((["ingest", path, "--band", "2", "-o", tmp_path / "b2.zarr"], 2),
                          (["mst", path, "-o", tmp_path / "b1.zarr"], 1)):
        rc, _, err = run_main(capsys, *command)
        assert rc == 0, err
        store = command[-1]
        with rasterio.open(path) as src:  # the oracle: GDAL's reading of that band
            want = src.read(band)
        np.testing.assert_array_equal(xr.open_zarr(store).elevation.values, want)
        rc, out, err = run_main(capsys, "info", store, scheduler=None)
        assert rc == 0 and f"source    t.tif (gdal-gtiff), band {band} of 3\n" in out, out


def test_a_subsampled_dataarray_is_computed_on_its_own_cells(tmp_path):
    """``da[1::3, ::2]`` of a 10 m raster keeps rioxarray's cached ``GeoTransform`` (10 m),
    which gave its cell size: Tobler costs and slopes on 10 m cells where they are 20 x
    30 m apart, and points placed by the stale transform. The coordinates give the cells."""
    rioxarray = pytest.importorskip("rioxarray")
    import terrain
    from oracles import csr_graph, mask_ids, oracle_distance, ref_kruskal
    z = np.random.default_rng(8).uniform(0, 60, (12, 15)).astype(np.float32)
    path = tmp_path / "d.tif"
    with rasterio.open(path, "w", driver="GTiff", height=12, width=15, count=1,
                       dtype="float32", crs="EPSG:32633",
                       transform=rasterio.transform.from_origin(500000, 4000000, 10, 10)) as d:
        d.write(z, 1)
    sub = rioxarray.open_rasterio(path).squeeze(drop=True).isel(y=slice(1, None, 3),
                                                                 x=slice(None, None, 2))
    dx, dy = (float(abs(np.diff(sub[c].values)).mean()) for c in ("x", "y"))  # the oracle
    assert (dx, dy) == (20.0, 30.0) and sub.rio.resolution() == (10.0, -10.0)  # cached
    zs = sub.values
    got = terrain.cost_distance(sub, [(0, 0)], cost="tobler")
    want = oracle_distance(csr_graph(zs, "tobler", dx=dx, dy=dy), zs.shape, [(0, 0)])
    np.testing.assert_allclose(got.distance.values, want, rtol=1e-12)
    forest = terrain.mst(sub, weight="slope")
    np.testing.assert_array_equal(mask_ids(forest.values),
                                  ref_kruskal(zs, 8, "slope", (dx, dy))[0])
    x, y = float(sub.x[3]), float(sub.y[2])  # a cell's centre
    got = terrain.cost_distance(sub, points=[(x, y)])
    assert (got.attrs["source_rows"], got.attrs["source_cols"]) == ([2], [3])
