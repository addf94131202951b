"""Rasters GDAL reads that hold no elevations on a north-up grid: complex bands, GCP-only
georeferencing, no georeference at all (read as an ESRI grid at (0, 0) with cells of 1)."""

import warnings

import numpy as np
import pytest
import rasterio
from rasterio.control import GroundControlPoint

import terrain
from terrain.errors import InputError

from cli import run_main

xr = pytest.importorskip("xarray")


def _write(path, values, **profile):
    with warnings.catch_warnings():  # rasterio's NotGeoreferencedWarning of the writes below
        warnings.simplefilter("ignore")
        with rasterio.open(path, "w", driver="GTiff", height=values.shape[0],
                           width=values.shape[1], count=1, dtype=values.dtype.name,
                           **profile) as dst:
            dst.write(values, 1)
    return path


def _refused(capsys, tmp_path, path, message):
    out = tmp_path / "out.zarr"
    rc, _, err = run_main(capsys, "mst", path, "-o", out)
    assert rc == 2 and err == f"terrain: {path}: {message}\n", err
    assert not out.exists()
    with pytest.raises(InputError, match=f"^{path}: "):
        terrain.fill(path)


def test_a_complex_band_is_refused(tmp_path, capsys):
    z = (np.arange(12, dtype=np.float32).reshape(3, 4) + 1j).astype(np.complex64)
    path = _write(tmp_path / "cplx.tif", z, crs="EPSG:32617",
                  transform=rasterio.Affine(30, 0, 0, 0, -30, 90))
    _refused(capsys, tmp_path, path,
             "band 1 holds complex numbers (complex64): elevations are real numbers")


def test_a_raster_placed_only_by_ground_control_points_is_refused(tmp_path, capsys):
    gcps = [GroundControlPoint(0, 0, 600000, 3900000), GroundControlPoint(0, 4, 600120, 3900000),
            GroundControlPoint(3, 0, 600000, 3899910)]
    path = _write(tmp_path / "gcp.tif", np.ones((3, 4), np.float32), gcps=gcps,
                  crs="EPSG:32617")
    with rasterio.open(path) as src:
        assert src.gcps[0] and src.transform.is_identity
    _refused(capsys, tmp_path, path, "georeferenced only by ground control points (GCPs): "
             "warp it onto a grid first (gdalwarp -t_srs EPSG:xxxx gcp.tif warped.tif)")


def test_a_raster_without_georeference_is_the_ascii_grids_north_up_grid(tmp_path, capsys):
    """The same cells in an ESRI grid at (0, 0) with cells of 1 (the oracle) and in a
    GeoTIFF without a geotransform give one store; the API reads the file and the store as
    the command line does (the store was refused as south-up)."""
    rng = np.random.default_rng(3)
    z = rng.normal(100, 10, (5, 7)).astype(np.float32)
    tif = _write(tmp_path / "plain.tif", z)
    asc = tmp_path / "plain.asc"
    np.savetxt(asc, z, fmt="%.9g", header="ncols 7\nnrows 5\nxllcorner 0\nyllcorner 0\n"
               "cellsize 1", comments="")
    stores = {}
    for path in (asc, tif):
        stores[path.suffix] = tmp_path / f"{path.stem}{path.suffix}.fill.zarr"
        rc, _, err = run_main(capsys, "fill", path, "-o", stores[path.suffix])
        assert rc == 0, err
        warned = [line for line in err.splitlines() if "warning" in line]
        assert warned == ([f"terrain: warning: {tif}: not georeferenced (no geotransform): read "
                           "as a grid of cells of 1, its lower-left corner at (0, 0), without "
                           "a CRS"] if path == tif else []), err
    want, got = (xr.open_zarr(stores[k]) for k in (".asc", ".tif"))
    assert want.spatial_ref.attrs["GeoTransform"] == "0 1 0 5 0 -1"
    assert got.spatial_ref.attrs == want.spatial_ref.attrs
    for name in ("x", "y", "filled"):
        assert np.array_equal(got[name].values, want[name].values, equal_nan=True), name
    with pytest.warns(terrain.TerrainWarning, match="plain.tif: not georeferenced"):
        api = terrain.fill(tif)
    assert np.array_equal(api.filled.values, want.filled.values, equal_nan=True)
    assert np.array_equal(api.y.values, want.y.values) and "crs_wkt" not in api.spatial_ref.attrs
    flow = terrain.flow(got.filled)
    assert np.array_equal(flow.direction.values, terrain.flow(asc).direction.values)


def test_opening_a_raster_without_georeference_leaves_the_warning_filters_as_they_were(
        tmp_path):
    """rasterio's warning of a raster without a georeference was silenced by a filter added
    to the process's for good (a library call changed its caller's warnings). Now the open
    alone is filtered: the filters are as they were after opens and reads on 8 threads at
    once, and none of rasterio's warnings came out."""
    from concurrent.futures import ThreadPoolExecutor

    from terrain.io.raster import open_raster

    tif = _write(tmp_path / "plain.tif", np.arange(12, dtype=np.float32).reshape(3, 4))
    before = list(warnings.filters)

    def open_and_read(_):
        grid = open_raster(tif)
        return grid.read_rows(0, 3)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        inside = list(warnings.filters)
        with ThreadPoolExecutor(8) as pool:
            reads = list(pool.map(open_and_read, range(32)))
        assert warnings.filters == inside
    assert warnings.filters == before
    assert all(np.array_equal(r, np.arange(12, dtype=np.float32).reshape(3, 4)) for r in reads)
    said = {w.category for w in caught}
    assert rasterio.errors.NotGeoreferencedWarning not in said
    assert terrain.TerrainWarning in said  # terrain's own one-line warning


def _grid_of(tmp_path, kind, row):
    """``row`` (integers) as a one-row ESRI grid or an int32/int64 GeoTIFF."""
    if kind == "asc":
        path = tmp_path / "r.asc"
        path.write_text(f"ncols {len(row)}\nnrows 1\nxllcorner 0\nyllcorner 0\ncellsize 1\n"
                        f"NODATA_value -9999\n{' '.join(map(str, row))}\n")
        return path
    return _write(tmp_path / f"r-{kind}.tif", np.array([row], kind), crs="EPSG:32617",
                  transform=rasterio.Affine(1, 0, 0, 0, -1, 1))


def _rounding(path, kind, value):
    """terrain's warning of ``value`` at cell (0, 0), float32's rounding of it by NumPy."""
    return (f"{path}: {'int32' if kind == 'asc' else kind} values beyond 2^24 are rounded to "
            f"float32 (elevations' type): {value} at cell (0, 0) reads as "
            f"{float(np.float32(value)):.0f}")


@pytest.mark.parametrize("kind", ["asc", "int32"])
@pytest.mark.parametrize("scheduler", [None, "threads", "synchronous", "local"])
def test_ingest_says_integers_float32_rounds_once_a_file(tmp_path, capsys, kind, scheduler):
    """ingest said nothing of them (mst of the same file did): it silenced every warning
    while it read, the header's having been said before."""
    path = _grid_of(tmp_path, kind, [16777217, 7, 5])
    rc, _, err = run_main(capsys, "ingest", path, "-o", tmp_path / "a.zarr",
                          scheduler=scheduler)
    assert rc == 0, err
    warned = [line for line in err.splitlines() if "warning" in line]
    assert warned == [f"terrain: warning: {_rounding(path, kind, 16777217)}"], err


@pytest.mark.parametrize("kind, value", [("asc", 2 ** 31 - 1), ("int32", 2 ** 31 - 2),
                                         ("int64", 2 ** 63 - 1)])
def test_integers_float32_rounds_beyond_their_type_are_said_without_numpy(tmp_path, kind,
                                                                          value):
    """float32 rounds them up to 2^31 (2^63): the check cast that back to the integers'
    type, and NumPy's 'invalid value encountered in cast' came first, with a source line."""
    path = _grid_of(tmp_path, kind, [value, 7, 5])
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        z, _ = terrain.io.read_grid(path)
    assert [str(w.message) for w in got] == [_rounding(path, kind, value)]
    assert z[0, 0] == np.float32(value)


@pytest.mark.parametrize("scheduler", [None, "threads"])
def test_ingest_says_a_header_warning_once_and_not_rasterios(tmp_path, capsys, scheduler):
    """The header's warnings are said once, before the read; rasterio's own of a raster
    without a georeference (two lines, a source line) never."""
    path = tmp_path / "two.tif"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rasterio.open(path, "w", driver="GTiff", height=3, width=4, count=2,
                           dtype="float32") as dst:
            dst.write(np.ones((2, 3, 4), np.float32))
    rc, _, err = run_main(capsys, "ingest", path, "-o", tmp_path / "a.zarr", scheduler=scheduler)
    assert rc == 0, err
    assert err.splitlines() == [
        f"terrain: warning: {path}: 2 bands; reading band 1 (--band N picks another)",
        f"terrain: warning: {path}: not georeferenced (no geotransform): read as a grid of "
        "cells of 1, its lower-left corner at (0, 0), without a CRS"], err
