"""GeoTIFF outputs: COG layout, overviews, CRS/transform/nodata, band descriptions, streaming."""

import numpy as np
import pytest
import rasterio
import zarr

from pipelines.ingest import ingest
from pipelines.mst import run_mst
from terrain.errors import InputError
from terrain.io.geotiff import overview_factors, write_geotiff
from terrain.io.georef import finish_store, write_georeference
from terrain.tiles.store import read_block

from cli import run_main
from grids import GT, write_utm_tif


@pytest.fixture(scope="module")
def dem_tif(tmp_path_factory):
    """1100 x 700 float32 GeoTIFF, EPSG:32617, a nodata block: big enough for overviews."""
    d = tmp_path_factory.mktemp("geotiff")
    z = np.random.default_rng(7).normal(300, 50, (1100, 700)).astype(np.float32)
    z[100:180, 50:90] = -32768
    return write_utm_tif(d / "dem.tif", z)


@pytest.fixture(scope="module")
def mst_store(dem_tif, tmp_path_factory):
    out = tmp_path_factory.mktemp("mst") / "dem.mst.zarr"
    run_mst(dem_tif, out, tile=128, connectivity=4, scheduler="synchronous", backend="cpu")
    return out


def test_mst_cog(mst_store, dem_tif, tmp_path):
    """The COG's pixels are the store's: read by the shard reader itself (both layers are in
    its layout), 512² windows cutting the 2048² shards."""
    from pipelines.mst import write_geotiff as write_mst_geotiff
    from terrain.tiles import read_layout
    assert all(read_layout(mst_store / name) is not None for name in ("mst", "elevation"))
    tif = tmp_path / "mst.tif"
    write_mst_geotiff(mst_store, tif)
    mask = zarr.open_group(str(mst_store), mode="r")["mst"][:]
    with rasterio.open(dem_tif) as src:
        dem_nodata = src.read_masks(1) == 0
    with rasterio.open(tif) as src:
        assert src.crs.to_epsg() == 32617 and src.transform.to_gdal() == GT
        assert src.nodata == 255 and src.dtypes[0] == "uint8"
        assert src.block_shapes[0] == (512, 512)
        assert src.overviews(1) == [2, 4]
        assert src.tags(ns="IMAGE_STRUCTURE").get("LAYOUT") == "COG"
        assert "bit d set" in src.descriptions[0]
        assert src.tags(1)["SE"] == "4"
        got = src.read(1)
        # nodata cells of the DEM are 255, every other cell holds the mask's bits
        assert np.array_equal(got == 255, dem_nodata)
        assert np.array_equal(got[~dem_nodata], mask[~dem_nodata])
        assert (mask[~dem_nodata] == 0).any()  # valid zeros exist: 0 could not be nodata
        ov = src.read(1, out_shape=(1100 // 4 + 1, 700 // 4 + 1))
        assert ov.shape == (276, 176)


def test_mst_cli_geotiff_from_a_store(dem_tif, tmp_path, capsys):
    store = ingest(dem_tif, tmp_path / "dem.zarr", tile=128, scheduler="threads")
    tif = tmp_path / "m.tif"
    rc, out, err = run_main(capsys, "mst", store.path, "-o", tmp_path / "m.zarr", "--connectivity", "4",
                           "--geotiff", tif, "--backend", "cpu")
    assert rc == 0, err
    with rasterio.open(tif) as src:
        assert src.nodata == 255 and (src.read(1) == 255).sum() == 80 * 40
        assert src.crs.to_epsg() == 32617


def test_float_layer_rioxarray_round_trip(tmp_path):
    rioxarray = pytest.importorskip("rioxarray")
    rows, cols = 600, 530
    g = zarr.open_group(str(tmp_path / "d.zarr"), mode="w", zarr_format=3)
    a = g.create_array("distance", shape=(rows, cols), dtype="float32", chunks=(256, 256),
                       fill_value=np.float32("nan"), dimension_names=("y", "x"))
    vals = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    vals[:50, :60] = np.nan
    a[:] = vals
    write_georeference(g, (rows, cols), GT, "EPSG:32617")
    finish_store(tmp_path / "d.zarr")
    tif = write_geotiff(tmp_path / "d.zarr", "distance", tmp_path / "d.tif", read=read_block,
                        description="cost distance", resampling="average")
    da = rioxarray.open_rasterio(tif, masked=True).squeeze()
    assert da.rio.crs.to_epsg() == 32617
    assert tuple(da.rio.transform().to_gdal()) == GT
    assert np.array_equal(np.isnan(da.values), np.isnan(vals))
    assert np.array_equal(da.values[~np.isnan(vals)], vals[~np.isnan(vals)])
    with rasterio.open(tif) as src:
        assert src.overviews(1) == [2] and np.isnan(src.nodata)
        assert src.descriptions[0] == "cost distance"
        overview = src.read(1, out_shape=(rows // 2, cols // 2))
    # an "average" overview: the mean of each 2 x 2 block's valid cells, NaN where none is
    blocks = vals.reshape(rows // 2, 2, cols // 2, 2)
    valid = (~np.isnan(blocks)).sum(axis=(1, 3))
    with np.errstate(invalid="ignore"):
        want = np.nansum(blocks.astype(np.float64), axis=(1, 3)) / valid
    assert np.allclose(overview, want, rtol=1e-6, equal_nan=True)
    # plain tiled GTiff too, and never over an existing file
    with pytest.raises(InputError, match="exists"):
        write_geotiff(tmp_path / "d.zarr", "distance", tif, read=read_block)
    plain = write_geotiff(tmp_path / "d.zarr", "distance", tmp_path / "p.tif", read=read_block,
                          cog=False)
    with rasterio.open(plain) as src:
        assert src.overviews(1) == [] and src.block_shapes[0] == (512, 512)
        assert "LAYOUT" not in src.tags(ns="IMAGE_STRUCTURE")
        assert np.array_equal(src.read(1), vals, equal_nan=True)
    with pytest.raises(InputError, match="no array"):
        write_geotiff(tmp_path / "d.zarr", "nope", tmp_path / "n.tif", read=read_block)
    assert not (tmp_path / "n.tif").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.tif", "d.zarr", "p.tif"]


@pytest.mark.parametrize("command", ["mst", "flow"])
def test_no_cog_writes_plain_tiled_geotiffs_without_overviews(dem_tif, tmp_path, capsys,
                                                              command):
    """``--no-cog``: what GDAL reads as a plain tiled GeoTIFF (no overviews, no COG layout),
    the same cells, georeference and band metadata as the COG written without it."""
    files = {}
    for kind, extra in (("cog", []), ("plain", ["--no-cog"])):
        if command == "mst":
            tif = tmp_path / f"{kind}.tif"
            args = ["mst", dem_tif, "-o", tmp_path / f"{kind}.zarr", "--geotiff", tif]
            files[kind] = [tif]
        else:
            args = ["flow", dem_tif, "-o", tmp_path / f"{kind}.zarr",
                    "--geotiff-dir", tmp_path / kind]
            files[kind] = [tmp_path / kind / f"{n}.tif"
                           for n in ("filled", "direction", "accumulation")]
        rc, _, err = run_main(capsys, *args, *extra, "--backend", "cpu")
        assert rc == 0, err
    for cog, plain in zip(files["cog"], files["plain"]):
        with rasterio.open(cog) as a, rasterio.open(plain) as b:
            assert a.overviews(1) and a.tags(ns="IMAGE_STRUCTURE")["LAYOUT"] == "COG"
            assert b.overviews(1) == [] and "LAYOUT" not in b.tags(ns="IMAGE_STRUCTURE")
            assert b.block_shapes[0] == (512, 512) and b.compression.name == "zstd"
            assert (b.crs, b.transform, b.dtypes, b.descriptions, b.tags(1), b.units) == \
                (a.crs, a.transform, a.dtypes, a.descriptions, a.tags(1), a.units)
            assert np.array_equal(a.read(1), b.read(1), equal_nan=True)
            assert a.nodata == b.nodata or (np.isnan(a.nodata) and np.isnan(b.nodata))


def test_overview_factors():
    assert overview_factors((512, 512)) == []
    assert overview_factors((513, 10)) == [2]
    assert overview_factors((5000, 10)) == [2, 4, 8, 16]
