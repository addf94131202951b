"""The Python API: terrain.mst on NumPy, xarray (rioxarray georeference), Dask, paths;
terrain.bfs/diameter on SciPy and NetworkX graphs."""

import numpy as np
import pytest
import rasterio

import terrain
from terrain.errors import InputError
from terrain.grid.mst import grid_mst

xr = pytest.importorskip("xarray")

GT = (600000.0, 30.0, 0.0, 3900000.0, 0.0, -30.0)


def dem(seed=0, shape=(40, 33)):
    rng = np.random.default_rng(seed)
    z = rng.normal(300, 40, shape).astype(np.float32)
    z[5:9, 3:7] = np.nan
    return z


def test_numpy_and_dask_inputs():
    da = pytest.importorskip("dask.array")
    z = dem()
    want = grid_mst(z, connectivity=4, weight="absdiff", tile=16, backend="cpu")
    got = terrain.mst(z, 4, "absdiff", tile=16, backend="cpu")
    assert got.dims == ("y", "x") and got.dtype == np.uint8 and got.name == "mst"
    assert np.array_equal(got.values, want.mask)
    assert got.attrs["edges"] == want.edges and got.attrs["total_weight"] == want.total_weight
    lazy = terrain.mst(da.from_array(z, chunks=16), 4, "absdiff", tile=16, backend="cpu")
    assert np.array_equal(lazy.values, want.mask)


def test_rioxarray_dataarray_keeps_georeference(tmp_path):
    rioxarray = pytest.importorskip("rioxarray")
    z = dem(1)
    path = tmp_path / "dem.tif"
    filled = np.where(np.isnan(z), -9999, z).astype(np.float32)
    with rasterio.open(path, "w", driver="GTiff", height=z.shape[0], width=z.shape[1], count=1,
                       dtype="float32", crs="EPSG:32617", transform=rasterio.Affine.from_gdal(*GT),
                       nodata=-9999) as dst:
        dst.write(filled, 1)
    da = rioxarray.open_rasterio(path)  # (band, y, x), nodata -9999 not masked
    f = terrain.mst(da, weight="slope", backend="cpu")
    want = grid_mst(z, weight="slope", tile=512, backend="cpu", cellsize=(30.0, 30.0))
    assert np.array_equal(f.values, want.mask)
    assert f.rio.crs.to_epsg() == 32617
    assert tuple(f.rio.transform().to_gdal()) == GT
    assert np.array_equal(f.x.values, da.x.values)
    # masked input (nodata as NaN) gives the same; the path gives the same too
    masked = rioxarray.open_rasterio(path, masked=True)
    assert np.array_equal(terrain.mst(masked, weight="slope", backend="cpu").values, want.mask)
    from_path = terrain.mst(path, weight="slope", backend="cpu")
    assert np.array_equal(from_path.values, want.mask)
    assert from_path.rio.crs.to_epsg() == 32617 and tuple(from_path.rio.transform().to_gdal()) == GT
    # the result writes as a georeferenced raster
    from_path.rio.to_raster(tmp_path / "f.tif")
    with rasterio.open(tmp_path / "f.tif") as src:
        assert src.crs.to_epsg() == 32617 and np.array_equal(src.read(1), want.mask)


def test_store_path_and_geographic_refusal(tmp_path):
    from pipelines.ingest import ingest
    z = dem(2)
    path = tmp_path / "geo.tif"
    with rasterio.open(path, "w", driver="GTiff", height=z.shape[0], width=z.shape[1], count=1,
                       dtype="float32", crs="EPSG:4326",
                       transform=rasterio.Affine(0.001, 0, 10, 0, -0.001, 50)) as dst:
        dst.write(z, 1)
    store = ingest(path, tmp_path / "geo.zarr", tile=16, scheduler="threads")
    f = terrain.mst(store.path, backend="cpu")
    assert np.array_equal(f.values, grid_mst(z, tile=16, backend="cpu").mask)
    assert f.attrs["grid_mapping"] == "spatial_ref" and "WGS 84" in f.spatial_ref.attrs["crs_wkt"]
    with pytest.raises(InputError, match="geographic"):
        terrain.mst(store.path, weight="length3d", backend="cpu")
    with pytest.raises(InputError, match="cost 'tobler'.*geographic"):
        terrain.cost_distance(store.path, [(1, 1)], cost="tobler", backend="cpu")
    with pytest.raises(InputError, match="2-D"):
        terrain.mst(np.zeros((2, 2, 2)), backend="cpu")


def test_graph_inputs():
    nx = pytest.importorskip("networkx")
    sp = pytest.importorskip("scipy.sparse")
    G = nx.grid_2d_graph(5, 8)
    r = terrain.diameter(G, extremes=True, backend="cpu")
    assert r.diameter == nx.diameter(G) and r.radius == nx.radius(G)
    A = nx.to_scipy_sparse_array(nx.convert_node_labels_to_integers(G))
    assert terrain.diameter(A, backend="cpu").diameter == nx.diameter(G)
    d = terrain.bfs(A, 0, backend="cpu").dist
    want = nx.single_source_shortest_path_length(nx.convert_node_labels_to_integers(G), 0)
    assert d.tolist() == [want[i] for i in range(len(want))]


def test_cost_distance_on_every_input_kind(tmp_path):
    """terrain.cost_distance: NumPy, Dask, rioxarray DataArray (CRS and coords kept), GeoTIFF
    path and tile store give grid_sssp's result; sources as cells or map points."""
    rioxarray = pytest.importorskip("rioxarray")
    da = pytest.importorskip("dask.array")
    from pipelines.ingest import ingest
    from terrain.grid.sssp import grid_sssp

    z = dem(4)
    rng = np.random.default_rng(4)
    fr = rng.uniform(1, 3, z.shape).astype(np.float32)
    want = grid_sssp(z, [(20, 20), (2, 30)], [0.0, 5.0], cost="tobler", friction=fr,
                     connectivity=16, cellsize=(30.0, 30.0), max_cost=4000, backend="cpu")

    def same(ds):
        if isinstance(ds, terrain.api.CostDistance):  # not an xarray input: NumPy arrays
            ds = ds.to_xarray()
        for name in ("distance", "allocation", "backlink"):
            np.testing.assert_array_equal(ds[name].values, getattr(want, name))
        assert ds.attrs["reached_cells"] == int(np.count_nonzero(~np.isnan(want.distance)))
        assert ds.distance.attrs["units"].startswith("seconds")
        assert ds.backlink.attrs["codes"]["9"] == "ENE"

    kw = dict(start_costs=[0.0, 5.0], cost="tobler", connectivity=16, max_cost=4000,
              backend="cpu")
    same(terrain.cost_distance(z, [(20, 20), (2, 30)], friction=fr, cellsize=(30, 30), **kw))
    same(terrain.cost_distance(da.from_array(z, chunks=16), [(20, 20), (2, 30)],
                               friction=da.from_array(fr, chunks=16), cellsize=(30, 30), **kw))
    path = tmp_path / "dem.tif"
    prof = dict(driver="GTiff", height=z.shape[0], width=z.shape[1], count=1, dtype="float32",
                crs="EPSG:32617", transform=rasterio.Affine.from_gdal(*GT), nodata=-9999)
    with rasterio.open(path, "w", **prof) as dst:
        dst.write(np.where(np.isnan(z), -9999, z).astype(np.float32), 1)
    fpath = tmp_path / "fr.tif"
    with rasterio.open(fpath, "w", **prof) as dst:
        dst.write(fr, 1)
    arr = rioxarray.open_rasterio(path)
    x, y = GT[0] + 30.5 * GT[1], GT[3] + 2.5 * GT[5]  # centre of cell (2, 30)
    ds = terrain.cost_distance(arr, [(20, 20)], points=[(x, y)],
                               friction=rioxarray.open_rasterio(fpath), **kw)
    same(ds)
    assert ds.rio.crs.to_epsg() == 32617 and ds.distance.rio.crs.to_epsg() == 32617
    assert tuple(ds.distance.rio.transform().to_gdal()) == GT
    assert np.array_equal(ds.x.values, arr.x.values) and ds.attrs["sources"][1] == [2, 30]
    same(terrain.cost_distance(path, [(20, 20), (2, 30)], friction=fpath, **kw))
    store = ingest(path, tmp_path / "dem.zarr", tile=16, scheduler="threads")
    from_store = terrain.cost_distance(store.path, [(20, 20)], points=[(x, y)], friction=fpath,
                                       **kw)
    same(from_store)
    assert from_store.to_xarray().rio.crs.to_epsg() == 32617
    with pytest.raises(InputError, match="georeferenced"):
        terrain.cost_distance(z, points=[(1.0, 2.0)], backend="cpu")
    with pytest.raises(InputError, match="outside"):
        terrain.cost_distance(path, points=[(0.0, 0.0)], backend="cpu")
    with pytest.raises(InputError, match="friction has"):
        terrain.cost_distance(z, [(20, 20)], cost="friction", friction=fr[:5], backend="cpu")


def test_sssp_on_matrices_and_networkx_graphs():
    """terrain.sssp: a SciPy matrix gives arrays by row number (scipy's dijkstra as the
    oracle); a NetworkX graph gives dicts keyed by its nodes (NetworkX's Dijkstra)."""
    nx = pytest.importorskip("networkx")
    sp = pytest.importorskip("scipy.sparse")
    from scipy.sparse.csgraph import dijkstra

    rng = np.random.default_rng(7)
    G = nx.gnm_random_graph(50, 90, seed=7)
    for a, b in G.edges:
        G.add_edge(a, b, weight=int(rng.integers(1, 30)))
    G = nx.relabel_nodes(G, {v: f"v{v}" for v in G})
    for src in (["v0"], ["v0", "v9"]):
        r = terrain.sssp(G, src, backend="cpu")
        want = nx.multi_source_dijkstra_path_length(G, set(src))
        assert r.dist == want and r.sources == sorted(src, key=list(G).index)
        for v, u in r.pred.items():   # each predecessor is a tight neighbour
            assert r.dist[u] + G.edges[u, v]["weight"] == r.dist[v]
        assert set(r.pred) == set(r.dist) - set(src)
    A = nx.to_scipy_sparse_array(nx.convert_node_labels_to_integers(G), dtype=np.float64)
    A = sp.csr_array(A * 0.37)
    r = terrain.sssp(A, 3, backend="cpu")
    want = dijkstra(A, directed=False, indices=3)
    assert np.array_equal(r.dist, want)
    reached = np.isfinite(want)
    assert (r.pred[reached & (np.arange(50) != 3)] >= 0).all()
    assert "sssp" in terrain.__all__
    with pytest.raises(InputError):
        terrain.sssp(G, "nowhere", backend="cpu")


def test_outlets_as_cells_or_raster_give_one_answer():
    """``fill`` and ``flow`` take outlets as cells or as a raster on the DEM's grid (its
    non-zero cells; NaN is not an outlet) and refuse cells off the grid and rasters of
    another shape."""
    z = np.array([[5, 5, 5, 5], [5, 1, 2, 5], [5, 5, 3, 5], [5, 4, 5, 5]], np.float32)
    raster = np.zeros(z.shape, np.float32)
    raster[1, 1] = 1
    raster[0, 0] = np.nan
    for op in (terrain.fill, terrain.flow):
        by_cells, by_raster = (op(z, outlets=o, backend="cpu") for o in ([(1, 1)], raster))
        assert by_cells.filled.values.tolist() == by_raster.filled.values.tolist()
        assert float(by_cells.filled.values[1, 1]) == 1.0  # the pit drains: not filled
        with pytest.raises(InputError, match=r"outlet cell \(4, 0\) is outside the grid"):
            op(z, outlets=[(4, 0)], backend="cpu")
        with pytest.raises(InputError, match="outlets have 3 x 3 cells, the DEM 4 x 4"):
            op(z, outlets=np.zeros((3, 3)), backend="cpu")
