"""cost-distance outputs in the GIS toolboxes (COG GeoTIFFs, xarray/rioxarray, info) and the
SSSP certificate of ``verify`` on them: accepts our outputs, rejects corrupted ones."""

import json
import shutil
import warnings

import numpy as np
import pytest
import rasterio
import zarr

from pipelines.cost_distance import run_cost_distance
from terrain.grid.sssp import grid_sssp
from terrain.verify import verify_grid_sssp

from cli import run_main
from oracles import check_cog

ROWS, COLS, CELL = 530, 600, 20.0
TRANSFORM = rasterio.Affine(CELL, 0, 500000.0, 0, -CELL, 4100000.0)


@pytest.fixture(scope="module")
def cost_out(tmp_path_factory):
    d = tmp_path_factory.mktemp("cost")
    rng = np.random.default_rng(3)
    z = rng.integers(0, 50, (ROWS, COLS)).astype(np.float32)
    z[rng.random(z.shape) < 0.03] = -9999
    z[100, 200] = z[400, 500] = 7
    dem = d / "dem.tif"
    with rasterio.open(dem, "w", driver="GTiff", height=ROWS, width=COLS, count=1,
                       dtype="float32", crs="EPSG:32617", transform=TRANSFORM,
                       nodata=-9999) as dst:
        dst.write(z, 1)
    out = d / "dem.cost.zarr"
    s = run_cost_distance(dem, out, cells=[(100, 200), (400, 500)], tile=128,
                          backend="cpu", scheduler="synchronous", geotiff_dir=d / "tif")
    return d, out, s, np.where(z == -9999, np.nan, z)


def test_geotiffs_are_cogs_with_crs_transform_nodata_overviews(cost_out):
    d, out, s, _ = cost_out
    g = zarr.open_group(str(out), mode="r")
    want = {"distance": ("float64", None), "allocation": ("int32", -1),
            "backlink": ("uint8", 255)}
    assert sorted(s["geotiff"]) == sorted(str(d / "tif" / f"{n}.tif") for n in want)
    for name, (dtype, nodata) in want.items():
        with rasterio.open(d / "tif" / f"{name}.tif") as ds:
            assert ds.crs.to_epsg() == 32617
            assert ds.transform == TRANSFORM
            assert ds.dtypes[0] == dtype
            if nodata is None:
                assert np.isnan(ds.nodata)
            else:
                assert ds.nodata == nodata
            assert ds.overviews(1) == [2]  # 600 cells > one 512 block
            assert ds.block_shapes[0] == (512, 512)
            assert ds.descriptions[0] and ds.units[0] == g[name].attrs.get("units")
            assert ds.tags(ns="IMAGE_STRUCTURE").get("LAYOUT") == "COG"
            np.testing.assert_array_equal(ds.read(1), np.asarray(g[name][:]))
            assert ds.compression.name == "zstd"
        assert set(check_cog(d / "tif" / f"{name}.tif")) == {50000}  # ZSTD
        with rasterio.open(d / "tif" / f"{name}.tif") as ds:
            if name == "backlink":
                assert ds.tags(1)["code_1"] == "E" and ds.tags(1)["code_255"] == "unreached"


def test_store_opens_in_xarray_with_crs_and_nodata(cost_out):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("rioxarray")
    _, out, _, _ = cost_out
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "consolidated metadata" warning
        ds = xr.open_zarr(out)
    assert ds.rio.crs.to_epsg() == 32617
    assert ds.distance.rio.crs.to_epsg() == 32617
    assert ds.distance.rio.transform() == TRANSFORM
    assert ds.allocation.encoding["_FillValue"] == -1
    assert ds.backlink.encoding["_FillValue"] == 255
    assert ds.backlink.attrs["codes"]["0"] == "source"
    assert "units" not in ds.distance.attrs  # a DEM without a unit: absdiff's is not known
    assert "elevation units" in ds.distance.attrs["description"]
    raw = zarr.open_group(str(out), mode="r")
    alloc = np.asarray(raw["allocation"][:])
    np.testing.assert_array_equal(np.isnan(ds.allocation.values), alloc == -1)


def test_info_and_verify_on_a_cost_store(cost_out, capsys):
    _, out, _, _ = cost_out
    rc, text, err = run_main(capsys, "info", out, scheduler=None)
    assert rc == 0, err
    assert "crs       EPSG:32617" in text and "layer     distance: float64" in text
    assert "result    cost_distance: 2 source(s)" in text and "backlink: uint8" in text
    # a distance without a unit (this DEM's band names none) is named by its long_name, as
    # the store holds it (info printed "None")
    g = zarr.open_group(str(out), mode="r")
    assert "units" not in g["distance"].attrs
    assert f"layer     distance: float64, {g['distance'].attrs['long_name']}\n" in text, text
    rc, text, err = run_main(capsys, "verify", out, "--json", scheduler=None)
    assert rc == 0, err + text
    v = json.loads(text)
    assert v["ok"] and len(v["checks"]) == 5 and v["facts"]["windows"] == 1


def test_verify_exits_1_on_a_corrupted_store(cost_out, tmp_path, capsys):
    _, out, _, _ = cost_out
    bad = tmp_path / "bad.zarr"
    shutil.copytree(out, bad)
    g = zarr.open_group(str(bad), mode="r+", use_consolidated=False)
    d = np.asarray(g["distance"][300:301, 300:301])
    assert not np.isnan(d[0, 0])
    g["distance"][300:301, 300:301] = d - 0.5  # lowered
    rc, text, err = run_main(capsys, "verify", bad, scheduler=None)
    assert rc == 1 and "FAIL" in text and "not tight" in text, text


@pytest.mark.parametrize("key", ["route", "algorithm"])
def test_verify_reads_the_route_of_the_store_and_of_earlier_ones(cost_out, tmp_path, capsys, key):
    """A tiled run's sums differ from the certificate's in the last bits: its store is checked
    within rtol, named by its route (``algorithm`` in the stores of earlier versions)."""
    _, out, _, _ = cost_out
    store = tmp_path / "tiled.zarr"
    shutil.copytree(out, store)
    g = zarr.open_group(str(store), mode="r+", use_consolidated=False)
    run = dict(g.attrs["cost_distance"])
    assert run.pop("route") == "in-core"
    g.attrs["cost_distance"] = {**run, key: "tiled"}
    rc, text, err = run_main(capsys, "verify", store, "--json", scheduler=None)
    assert rc == 0, err + text
    assert any("(rtol 1e-10)" in c for c in json.loads(text)["checks"]), text


def _case(cost, connectivity, seed=0, max_cost=None, sources=((5, 6), (30, 20))):
    rng = np.random.default_rng(seed)
    z = rng.normal(100, 20, (41, 37)).astype(np.float32)
    if cost == "absdiff":
        z = np.round(z / 4)
    z[rng.random(z.shape) < 0.08] = np.nan
    f = rng.uniform(1, 2, z.shape).astype(np.float32) if cost != "absdiff" else None
    if f is not None:
        f[rng.random(z.shape) < 0.03] = np.nan
    for r, c in sources:
        z[r, c] = 100
        if f is not None:
            f[r, c] = 1
    kw = dict(cost=cost, friction=f, connectivity=connectivity, cellsize=(2.0, 3.0),
              max_cost=max_cost)
    r = grid_sssp(z, list(sources), [0.0, 1.5], backend="cpu", **kw)
    return z, r, kw, list(sources)


@pytest.mark.parametrize("cost,connectivity,max_cost", [
    ("absdiff", 4, None), ("absdiff", 8, 30.0), ("friction", 16, None), ("tobler", 8, 200.0)])
def test_verify_accepts_grid_sssp_in_small_windows(cost, connectivity, max_cost):
    z, r, kw, src = _case(cost, connectivity, max_cost=max_cost)
    for window in (7, 1024):  # halos across window edges
        c = verify_grid_sssp(z, r.distance, r.backlink, r.allocation, src, [0.0, 1.5],
                             window=window, **kw)
        assert c.ok, c.violation
    assert c.facts["reached"] == int(np.count_nonzero(~np.isnan(r.distance)))


def _reached_cell(r, rng, src):
    cells = np.argwhere((r.backlink > 0) & (r.backlink != 255))
    cells = [tuple(x) for x in cells.tolist() if tuple(x) not in src]
    return cells[rng.integers(len(cells))]


@pytest.mark.parametrize("corruption", ["lowered", "raised", "backlink", "allocation",
                                        "unreached", "source"])
def test_verify_rejects_corrupted_results(corruption):
    z, r, kw, src = _case("friction", 8, seed=1)
    rng = np.random.default_rng(7)
    d, b, a = r.distance.copy(), r.backlink.copy(), r.allocation.copy()
    for _ in range(5):  # several cells: each must be caught
        d, b, a = r.distance.copy(), r.backlink.copy(), r.allocation.copy()
        cell = _reached_cell(r, rng, src)
        if corruption == "lowered":
            d[cell] -= 0.25
        elif corruption == "raised":
            d[cell] += 0.25
        elif corruption == "backlink":
            b[cell] = 1 + (int(b[cell]) % 8)  # another of the 8 directions
        elif corruption == "allocation":
            a[cell] = 1 - a[cell]
        elif corruption == "unreached":
            d[cell], b[cell], a[cell] = np.nan, 255, -1
        else:
            d[src[1]] += 0.5  # above its start cost
        c = verify_grid_sssp(z, d, b, a, src, [0.0, 1.5], window=16, **kw)
        assert not c.ok, (corruption, cell)
        expect = {"lowered": "not tight|> d\\(", "raised": "> d\\(|not tight",
                  "backlink": "not tight|does not lead", "allocation": "allocation",
                  "unreached": "unreached|does not lead", "source": "start cost"}[corruption]
        assert __import__("re").search(expect, c.violation), c.violation


def test_verify_accepts_the_tiled_algorithm_within_rtol():
    """The tiled SSSP sums the same arcs in another order (last bits differ): verify accepts it
    with the relative tolerance the command uses for it."""
    from terrain.grid.sssp_tiled import tiled_sssp

    rng = np.random.default_rng(0)
    z = rng.normal(100, 20, (70, 90)).astype(np.float32)
    z[rng.random(z.shape) < 0.05] = np.nan
    f = rng.uniform(1, 2, z.shape).astype(np.float32)
    src = [(10, 10), (60, 80)]
    z[10, 10] = z[60, 80] = 100
    for cost in ("friction", "tobler"):
        r = tiled_sssp(z, src, cost=cost, friction=f, connectivity=16, tile=16,
                       start_costs=[0, 3.0], cellsize=(2.0, 3.0), backend="cpu")
        c = verify_grid_sssp(z, r.distance, r.backlink, r.allocation, src, [0, 3.0], cost=cost,
                             friction=f, connectivity=16, cellsize=(2.0, 3.0), rtol=1e-10,
                             window=32)
        assert c.ok, c.violation


def test_store_input_keeps_the_crs_and_records_the_dem(cost_out, tmp_path, capsys):
    """cost-distance of a tile store (the DEM stays there) with a friction raster: the output
    has the store's CRS, the friction layer with its _FillValue, and verifies."""
    xr = pytest.importorskip("xarray")
    pytest.importorskip("rioxarray")
    from pipelines.ingest import ingest

    d, _, _, z = cost_out
    store = ingest(d / "dem.tif", tmp_path / "dem.zarr", tile=128, scheduler="synchronous")
    fr = np.random.default_rng(1).uniform(1, 2, z.shape).astype(np.float32)
    fpath = tmp_path / "fr.tif"
    with rasterio.open(fpath, "w", driver="GTiff", height=ROWS, width=COLS, count=1,
                       dtype="float32", crs="EPSG:32617", transform=TRANSFORM) as dst:
        dst.write(fr, 1)
    out = tmp_path / "f.cost.zarr"
    run_cost_distance(store.path, out, cells=[(100, 200)], cost="friction", friction=fpath,
                      connectivity=16, max_cost=3000, tile=128, backend="cpu",
                      scheduler="synchronous")
    ds = xr.open_zarr(out)
    assert "elevation" not in ds and ds.distance.rio.crs.to_epsg() == 32617
    assert ds.friction.encoding["_FillValue"] != ds.friction.encoding["_FillValue"]  # NaN
    m = zarr.open_group(str(out), mode="r").attrs["cost_model"]
    assert m["dem"] == str(store.path) and m["friction"] == "friction"
    assert m["connectivity"] == 16 and m["max_cost"] == 3000 and m["cellsize"] == [CELL, CELL]
    rc, text, err = run_main(capsys, "verify", out, scheduler=None)
    assert rc == 0 and "within max cost 3000" in text, err + text
    # the DEM store replaced by another: verify and plot say so, instead of failing the
    # result (verify) or drawing another DEM (plot)
    ingest(d / "dem.tif", tmp_path / "other.zarr", tile=64, scheduler="synchronous")
    shutil.rmtree(store.path)
    shutil.copytree(tmp_path / "other.zarr", store.path)
    for command in (["verify", out], ["plot", out, "-o", tmp_path / "p.png"]):
        rc, text, err = run_main(capsys, *command, scheduler=None)
        assert rc == 2 and err == (f"terrain: {out}: its DEM {store.path} changed after this "
                                   "result was computed (its files differ): it needs the "
                                   "DEM it was computed from\n"), err


def test_existing_geotiffs_are_not_overwritten(cost_out, tmp_path):
    from terrain.errors import InputError

    d, _, _, _ = cost_out
    before = (d / "tif" / "distance.tif").stat().st_mtime_ns
    with pytest.raises(InputError, match="distance.tif"):
        run_cost_distance(d / "dem.tif", tmp_path / "again.zarr", cells=[(100, 200)],
                          tile=128, backend="cpu", scheduler="synchronous",
                          geotiff_dir=d / "tif")
    assert not (tmp_path / "again.zarr").exists()
    assert (d / "tif" / "distance.tif").stat().st_mtime_ns == before
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        run_cost_distance(d / "dem.tif", tmp_path / "again.zarr", cells=[(100, 200)],
                          backend="cpu", scheduler="synchronous", geotiff_dir=tmp_path / "file")


@pytest.mark.parametrize("cost,units,said", [("friction", None, "friction x CRS length units"),
                                             ("tobler", "s", "seconds of walking")])
def test_geotiffs_carry_their_cost_models_units(cost_out, tmp_path, cost, units, said):
    """The distance GeoTIFF's units are its cost model's (they were absdiff's whatever the
    model: the GeoTIFFs are written before the run's attributes)."""
    d, _, _, _ = cost_out
    run_cost_distance(d / "dem.tif", tmp_path / "c.zarr", cells=[(100, 200)], cost=cost,
                      friction=d / "dem.tif" if cost == "friction" else None, tile=128,
                      backend="cpu", scheduler="synchronous", geotiff_dir=tmp_path / "tif")
    with rasterio.open(tmp_path / "tif" / "distance.tif") as ds:
        assert ds.units == (units,)
        assert ds.descriptions[0] == ("accumulated cost from the nearest source; NaN unreached; "
                                      f"in {said}" + ds.descriptions[0].split(said)[1])
