"""What an ASCII grid's reader refuses (one line naming the file and line, nothing read past):
values float32 cannot hold, georeferences floating point cannot hold, a file cut short while
it is read; and ``synth`` refusing a grid whose rows cannot fit in memory."""

import numpy as np
import pytest

from terrain.errors import InputError
from terrain.io import open_grid, read_grid, write_synth
from grids import BEYOND_FLOAT32, esri_text


@pytest.mark.parametrize("token", BEYOND_FLOAT32)
def test_values_beyond_float32_are_refused_with_their_line(tmp_path, token):
    # GDAL clamps them to +-3.4028235e38: a different elevation, silently
    tokens = np.array([["1", "2", "3"], ["4", token, "6"], ["7", "8", "9"]], dtype=object)
    path = tmp_path / "v.asc"
    path.write_text(esri_text(tokens))
    line = open_grid(path).data_line + 1
    with pytest.raises(InputError, match=rf"v.asc:{line}: value {token} \(row 2, column 2\) "
                                         r"is beyond the float32 range"):
        read_grid(path)
    with pytest.raises(InputError, match=rf"v.asc:{line}: value"):
        open_grid(path).read_all()


@pytest.mark.parametrize("cellsize, message", [
    ("1e308", "puts the grid's extent beyond the range of floating point"),
    ("1e200", "puts the grid's extent beyond the range of floating point"),  # its square
    ("1e-320", "is too small: its square underflows"),
    ("1e-160", "is too small: its square underflows")])
def test_geometry_floating_point_cannot_hold_is_refused(tmp_path, cellsize, message):
    # cellsize 1e308 put the far corner at infinity (exit 0); 1e-320 made slopes divide by 0
    path = tmp_path / "g.asc"
    path.write_text(f"ncols 3\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize {cellsize}\n"
                    "1 2 3\n4 5 6\n")
    with pytest.raises(InputError, match=rf"g.asc:5: cell size .* {message}"):
        open_grid(path)


def test_cell_sizes_of_other_inputs_are_checked_where_the_weights_need_them():
    from terrain.grid.edges import horizontal_lengths
    with pytest.raises(InputError, match="its square under- or overflows"):
        horizontal_lengths((1e-320, 1.0))
    assert horizontal_lengths((1e-150, 1e150))[2] == pytest.approx(1e150)


def test_a_file_cut_short_while_read_is_one_error_not_a_fault(tmp_path):
    # the text was mapped: reading a page past the new end killed the process (SIGBUS)
    write_synth(tmp_path / "s.asc", 400, 300, seed=2)
    grid = open_grid(tmp_path / "s.asc")  # the header, as the run reads it first
    with open(tmp_path / "s.asc", "r+b") as f:
        f.truncate(grid.size // 2)
    with pytest.raises(InputError, match=r"s.asc: file changed while being read"):
        grid.read_all()
    starts = None
    with pytest.raises(InputError, match=r"s.asc: file changed while being read"):
        starts = grid.row_starts([grid.newline_offsets(a, b) for a, b in grid.index_ranges()])
        grid.read_rows(0, 400, starts)


def test_synth_refuses_rows_that_cannot_fit_in_memory(tmp_path, monkeypatch):
    # --rows 1 --cols 2000000000 ran 5 min and reached 15.8 GB before the kernel killed it
    import terrain.io.synth as synth
    monkeypatch.setattr(synth, "available_memory", lambda: 1 << 30)
    with pytest.raises(InputError, match=r"w.asc: rows of 100000000 cells need at least 2.6 "
                                         r"GiB of memory to write; 1.0 GiB available"):
        write_synth(tmp_path / "w.asc", 1, 100_000_000)
    assert not list(tmp_path.iterdir())
    # a wide grid that fits is written in bands of fewer rows, the same values
    monkeypatch.setattr(synth, "_BAND_CELLS", 1000)
    write_synth(tmp_path / "n.asc", 50, 300, seed=3, nodata=0.1)
    z, _ = read_grid(tmp_path / "n.asc")
    assert np.array_equal(z, synth.synth_rows(50, 300, 0, 50, seed=3, nodata=0.1),
                          equal_nan=True)


def test_a_float64_geotiff_keeps_its_nodata_and_refuses_values_beyond_float32(tmp_path):
    """GDAL's usual float64 nodata (-1.8e308) is found in the file's own type, not after a
    cast to float32 (which warned of an overflow); a value beyond float32's range that is
    no nodata is refused naming its cell, as the ASCII reader names its line."""
    import warnings
    rasterio = pytest.importorskip("rasterio")
    z = np.arange(48.0).reshape(6, 8)
    z[1:3, 2:4] = np.finfo(np.float64).min
    path = tmp_path / "d.tif"
    profile = dict(driver="GTiff", width=8, height=6, count=1, dtype="float64",
                   nodata=float(np.finfo(np.float64).min), crs="EPSG:32617",
                   transform=rasterio.transform.from_origin(500000, 4000000, 10, 10))
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(z, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # NumPy's overflow in a cast
        got, _ = read_grid(path)
    want = z.astype(np.float32)
    want[1:3, 2:4] = np.nan
    np.testing.assert_array_equal(got, want)
    z[4, 5] = 1e300
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(z, 1)
    with pytest.raises(InputError, match=r"d\.tif: value 1e\+300 at cell \(row, col\) = "
                                         r"\(4, 5\): beyond float32's range"):
        read_grid(path)
    # infinite: refused in an elevation raster, kept where it means an impassable cell
    z[4, 5] = np.inf
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(z, 1)
    with pytest.raises(InputError, match=r"d\.tif: value inf at cell \(row, col\) = \(4, 5\): "
                                         r"elevations are finite numbers"):
        read_grid(path)
    assert read_grid(path, finite=False)[0][4, 5] == np.inf


def _utm_geotiff(path, z):
    """``z`` as a float32 GeoTIFF of 10 m cells in UTM 17N at ``path``."""
    rasterio = pytest.importorskip("rasterio")
    with rasterio.open(path, "w", driver="GTiff", height=z.shape[0], width=z.shape[1], count=1,
                       dtype="float32", crs="EPSG:32617",
                       transform=rasterio.transform.from_origin(500000, 4000000, 10, 10)) as d:
        d.write(z, 1)
    return path


def test_an_infinite_friction_is_a_wall_and_an_infinite_elevation_refused(tmp_path, capsys):
    """A friction raster's +inf cells are impassable (the cost distance reads its rasters
    keeping them, its DEM too, which may be its own friction); mst refuses the same file."""
    from cli import run_main
    f = np.ones((20, 30), np.float32)
    f[5, :25] = np.inf
    path = _utm_geotiff(tmp_path / "fr.tif", f)
    for route in ("in-core", "tiled"):
        rc, _, err = run_main(capsys, "cost-distance", path, "--friction", path, "--source-cell",
                              "0,0", "-o", tmp_path / f"{route}.zarr", "--route", route)
        assert rc == 0, err
    rc, _, err = run_main(capsys, "mst", path, "-o", tmp_path / "m.zarr")
    assert rc == 2 and err.strip().endswith("fr.tif: value inf at cell (row, col) = (5, 0): "
                                            "elevations are finite numbers"), err


def test_cost_distance_refuses_an_infinite_elevation_it_would_cost(tmp_path, capsys):
    """The cost distance's DEM keeps its +inf cells only under the friction model, where
    they are its friction's walls; ``absdiff`` and ``tobler`` cost its elevations, so an
    infinite one is refused as every other command refuses it (it silently walled the cell
    off), on every algorithm and from Python; friction runs keep it, as Dijkstra does."""
    import terrain
    from cli import run_main
    from oracles import csr_graph, oracle_distance
    z = np.arange(20 * 30, dtype=np.float32).reshape(20, 30) % 7
    z[5, 3] = np.inf
    path = _utm_geotiff(tmp_path / "dem.tif", z)
    for cost in ("absdiff", "tobler"):
        for route in ("in-core", "blocked", "tiled"):
            out = tmp_path / f"{cost}-{route}.zarr"
            rc, _, err = run_main(capsys, "cost-distance", path, "--source-cell", "0,0",
                                  "--cost", cost, "--route", route, "-o", out)
            assert rc == 2 and err.strip().endswith(
                "dem.tif: value inf at cell (row, col) = (5, 3): elevations are finite "
                "numbers"), (cost, route, err)
            assert not out.exists()
        with pytest.raises(InputError, match=r"elevation inf at cell \(row, col\) = \(5, 3\)"):
            terrain.cost_distance(z, sources=[(0, 0)], cost=cost)
    out = tmp_path / "friction.zarr"
    rc, _, err = run_main(capsys, "cost-distance", path, "--friction", path, "--source-cell",
                          "0,0", "-o", out)
    assert rc == 0, err
    import xarray as xr
    want = oracle_distance(csr_graph(np.ones_like(z), "friction", friction=z, dx=10, dy=10),
                           z.shape, [(0, 0)])
    np.testing.assert_allclose(xr.open_zarr(out).distance.values, want, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64"])
def test_integers_float32_cannot_hold_are_said_once(tmp_path, dtype):
    """A pit one unit deep above 2^24 read as a flat, silently (elevations are float32):
    a warning names the file and the first such cell, once a file; exact integers none."""
    import warnings

    import rasterio
    from rasterio.transform import from_origin
    z = np.full((40, 5), 16777220, dtype)
    z[1:4, 1:4], z[2, 2], z[0, 0] = 16777217, 16777216, 16777210
    path = tmp_path / f"pit-{dtype}.tif"
    with rasterio.open(path, "w", driver="GTiff", height=40, width=5, count=1, dtype=dtype,
                       transform=from_origin(0, 400, 10, 10), blockysize=8) as dst:
        dst.write(z, 1)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        got_z, _ = read_grid(path)
    said = [str(w.message) for w in got if "2^24" in str(w.message)]
    assert said == [f"{path}: {dtype} values beyond 2^24 are rounded to float32 (elevations' "
                    "type): 16777217 at cell (1, 1) reads as 16777216"], said
    assert got_z[1, 1] == np.float32(16777217)  # what float32 holds: 16777216
    small = tmp_path / f"small-{dtype}.tif"
    with rasterio.open(small, "w", driver="GTiff", height=40, width=5, count=1, dtype=dtype,
                       transform=from_origin(0, 400, 10, 10)) as dst:
        dst.write((z - 16777000).astype(dtype), 1)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        read_grid(small)
    assert not [w for w in got if "2^24" in str(w.message)]


@pytest.mark.parametrize("weight", ["absdiff", "slope", "length3d"])
def test_weights_beyond_float32_are_refused_before_any_output(tmp_path, capsys, weight):
    """Elevations within float32 whose differences are not: the weights were inf (exit 0,
    a forest that is no minimum, which verify passed, comparing the same infinities)."""
    from cli import run_main
    import terrain
    path = tmp_path / "ov.asc"
    path.write_text("ncols 2\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n"
                    "NODATA_value -9999\n3.3e38 -3.3e38\n-1e38 -2e38\n")
    rc, out, err = run_main(capsys, "mst", path, "--weight", weight, "-o", tmp_path / "m.zarr")
    assert rc == 2 and err == (f"terrain: {path}: elevations from -3.3e+38 to 3.3e+38: "
                               f"{weight} weights up to 6.6e+38 lie beyond float32's range "
                               "(3.4e+38)\n"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ov.asc"]
    with pytest.raises(InputError, match="beyond float32's range"):
        terrain.mst(np.array([[3.3e38, -3.3e38]], np.float32), weight=weight)
    rc, _, err = run_main(capsys, "mst", path, "--weight", "max", "-o", tmp_path / "m.zarr")
    assert rc == 0, err
