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
