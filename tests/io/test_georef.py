"""Georeferenced stores: xarray/rioxarray see CRS, transform and nodata; consolidated metadata."""

import warnings

import numpy as np
import pytest
import rasterio

from pipelines.ingest import ingest
from pipelines.mst import run_mst
from terrain.io.georef import crs_label, crs_wkt, is_geographic
from terrain.errors import InputError
from terrain.tiles import open_store

from grids import GT, write_utm_tif

xr = pytest.importorskip("xarray")
rioxarray = pytest.importorskip("rioxarray")


@pytest.fixture(scope="module")
def utm_tif(tmp_path_factory):
    """A 70 x 45 float32 GeoTIFF in EPSG:32617 with a nodata block."""
    d = tmp_path_factory.mktemp("georef")
    z = np.random.default_rng(5).normal(300, 50, (70, 45)).astype(np.float32)
    z[10:20, 5:9] = -32768
    return write_utm_tif(d / "dem.tif", z)


def open_quietly(path):
    """xr.open_zarr, failing on any warning (a missing consolidated metadata warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return xr.open_zarr(path)


def check_georeferenced(da, crs_epsg, transform):
    assert da.rio.crs is not None and da.rio.crs.to_epsg() == crs_epsg
    assert tuple(da.rio.transform().to_gdal()) == pytest.approx(transform)
    assert "spatial_ref" in da.coords


def test_ingested_store_is_rioxarray_ready(utm_tif, tmp_path):
    store = ingest(utm_tif, tmp_path / "dem.zarr", tile=16, scheduler="threads")
    ds = open_quietly(store.path)
    check_georeferenced(ds.elevation, 32617, GT)
    check_georeferenced(ds, 32617, GT)
    assert np.isnan(ds.elevation.rio.nodata)
    with rasterio.open(utm_tif) as src:
        want = src.read(1, masked=True).filled(np.nan)
    got = ds.elevation.values
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)])
    # what rioxarray would write from it is what GDAL read
    out = tmp_path / "back.tif"
    ds.elevation.rio.to_raster(out)
    with rasterio.open(out) as src:
        assert src.crs.to_epsg() == 32617 and src.transform.to_gdal() == GT


def test_mst_output_is_rioxarray_ready(utm_tif, tmp_path):
    dem = ingest(utm_tif, tmp_path / "dem.zarr", tile=16, scheduler="threads")
    for source, out in ((utm_tif, tmp_path / "a.mst.zarr"), (dem.path, tmp_path / "b.mst.zarr")):
        run_mst(source, out, tile=16, scheduler="synchronous", backend="cpu")
        ds = open_quietly(out)
        check_georeferenced(ds.mst, 32617, GT)
        assert ds.mst.dtype == np.uint8  # no _FillValue: 0 is a valid mask value
        assert ds.mst.rio.nodata is None
        assert "mst" in ds.attrs


def test_store_without_crs_still_has_its_transform(tmp_path):
    from terrain.io import write_synth
    write_synth(tmp_path / "s.asc", 20, 30, seed=2)
    store = ingest(tmp_path / "s.asc", tmp_path / "s.zarr", tile=16, scheduler="threads")
    da = open_quietly(store.path).elevation
    assert da.rio.crs is None
    assert tuple(da.rio.transform().to_gdal()) == pytest.approx(store.geotransform)


def test_crs_helpers():
    assert crs_label(crs_wkt("EPSG:4326")) == "EPSG:4326"
    assert crs_label(crs_wkt(32617)) == "EPSG:32617"
    assert is_geographic(crs_wkt("EPSG:4326")) and not is_geographic(crs_wkt("EPSG:3857"))
    assert not is_geographic(None)
    with pytest.raises(InputError, match="not a coordinate reference system"):
        crs_wkt("EPSG:99999999")
    assert crs_wkt(None) is None


def test_store_opens_after_a_layer_is_added(utm_tif, tmp_path):
    """Consolidated metadata is a snapshot: terrain's reader must not depend on it."""
    import zarr
    store = ingest(utm_tif, tmp_path / "dem.zarr", tile=16, scheduler="threads")
    g = zarr.open_group(str(store.path), mode="a")
    g.create_array("extra", shape=store.shape, dtype="float32", dimension_names=("y", "x"))
    s = open_store(store.path)
    assert "extra" in set(s.group.array_keys())


def test_flow_and_watershed_layers_declare_their_nodata(utm_tif, tmp_path):
    """Integer layers whose fill value is nodata say so (``_FillValue``): xarray masks the
    D8 codes' 255 and the watershed labels' -1 as GDAL does in their GeoTIFFs."""
    from pipelines.flow import run_flow
    from pipelines.watershed import run_watershed
    run_flow(utm_tif, tmp_path / "f.zarr", backend="cpu")
    ds = open_quietly(tmp_path / "f.zarr")
    assert ds.direction.encoding["_FillValue"] == 255
    assert int(ds.direction.isnull().sum()) == 40  # the nodata block, masked
    x, y = GT[0] + 30 * 20.5, GT[3] - 30 * 40.5
    run_watershed(tmp_path / "f.zarr", tmp_path / "w.zarr", points=[(x, y)])
    w = open_quietly(tmp_path / "w.zarr").watershed
    assert w.encoding["_FillValue"] == -1 and int(w.isnull().sum()) == 40
