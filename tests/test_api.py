"""The Python API: terrain.mst on NumPy, xarray (rioxarray georeference), Dask, paths;
terrain.bfs/diameter on SciPy and NetworkX graphs."""

import json

import networkx as nx
import numpy as np
import pytest
import rasterio
import scipy.sparse as sp

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


def with_nodata(mask, z):
    """A forest's bits as ``terrain.mst`` (and ``--geotiff``) gives them: MST_NODATA (255)
    on the DEM's nodata cells."""
    return np.where(np.isnan(z), 255, mask)


def test_numpy_and_dask_inputs():
    da = pytest.importorskip("dask.array")
    z = dem()
    want = grid_mst(z, connectivity=4, weight="absdiff", tile=16, backend="cpu")
    got = terrain.mst(z, 4, "absdiff", tile=16, backend="cpu")
    assert got.dims == ("y", "x") and got.dtype == np.uint8 and got.name == "mst"
    assert np.array_equal(got.values, with_nodata(want.mask, z))
    assert got.attrs["_FillValue"] == 255
    assert got.attrs["edges"] == want.edges and got.attrs["total_weight"] == want.total_weight
    lazy = terrain.mst(da.from_array(z, chunks=16), 4, "absdiff", tile=16, backend="cpu")
    assert np.array_equal(lazy.values, with_nodata(want.mask, z))


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
    want = with_nodata(want.mask, z)
    assert np.array_equal(f.values, want)
    assert f.rio.crs.to_epsg() == 32617
    assert tuple(f.rio.transform().to_gdal()) == GT
    assert np.array_equal(f.x.values, da.x.values)
    # masked input (nodata as NaN) gives the same; the path gives the same too
    masked = rioxarray.open_rasterio(path, masked=True)
    assert np.array_equal(terrain.mst(masked, weight="slope", backend="cpu").values, want)
    from_path = terrain.mst(path, weight="slope", backend="cpu")
    assert np.array_equal(from_path.values, want)
    assert from_path.rio.crs.to_epsg() == 32617 and tuple(from_path.rio.transform().to_gdal()) == GT
    # the result writes as a georeferenced raster
    from_path.rio.to_raster(tmp_path / "f.tif")
    with rasterio.open(tmp_path / "f.tif") as src:
        assert src.crs.to_epsg() == 32617 and np.array_equal(src.read(1), want)
        assert src.nodata == 255


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
    assert np.array_equal(f.values, with_nodata(grid_mst(z, tile=16, backend="cpu").mask, z))
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


def test_diameter_by_weights_as_networkx_weight():
    """``terrain.diameter(G, weighted=True)`` is NetworkX's ``weight="weight"`` diameter,
    radius and center (a NetworkX graph and its matrix alike); without it, hops."""
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(5)
    G = nx.connected_watts_strogatz_graph(40, 4, 0.3, seed=5)
    for u, v in G.edges:
        G[u][v]["weight"] = int(rng.integers(1, 30))
    r = terrain.diameter(G, weighted=True, extremes=True, backend="cpu")
    assert (r.diameter, r.radius) == (nx.diameter(G, weight="weight"),
                                      nx.radius(G, weight="weight"))
    assert r.center == sorted(nx.center(G, weight="weight"))
    A = nx.to_scipy_sparse_array(G, weight="weight")
    assert terrain.diameter(A, weighted=True, backend="cpu").diameter == r.diameter
    assert terrain.diameter(G, backend="cpu").diameter == nx.diameter(G)


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
        assert ds.distance.attrs["units"] == "s"
        assert ds.backlink.attrs["flag_meanings"].split()[9] == "ENE"  # CF's, as netCDF takes

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
    assert np.array_equal(ds.x.values, arr.x.values) and ds.attrs["source_rows"][1] == 2
    assert ds.attrs["source_cols"][1] == 30
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
    with pytest.raises(InputError, match=r"^friction: 5 x 33 cells, the DEM 40 x 33$"):
        terrain.cost_distance(z, [(20, 20)], cost="friction", friction=fr[:5], backend="cpu")


def test_lon_lat_points_on_a_dem_without_a_crs_are_not_told_to_be_reprojected(tmp_path):
    """A DEM GDAL reads without a CRS has none to reproject points into: the hint for points
    that look like longitude/latitude said to give them as files "whose points are
    reprojected", as the command line's did."""
    z = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "dem.tif"
    with rasterio.open(path, "w", driver="GTiff", height=3, width=4, count=1, dtype="float32",
                       transform=rasterio.Affine(10.0, 0, 1000.0, 0, -10.0, 2030.0)) as dst:
        dst.write(z, 1)
    with rasterio.open(path) as ds:
        assert ds.crs is None
    with pytest.raises(InputError, match=r"outside the raster .* the raster has no CRS to "
                                         r"reproject it into"):
        terrain.cost_distance(path, points=[(-79.7, 35.3)], backend="cpu")


def test_cost_distance_takes_its_points_from_a_file_reprojected(tmp_path):
    """``points=`` a points file: read as the command line's ``--sources`` (a GeoJSON in
    longitude/latitude, reprojected into the DEM's UTM), where only (x, y) pairs were taken
    and the hint for lon/lat points offered files. The oracle for the cells: the cell centres
    sent to lon/lat by rasterio.warp, and the same run from those cells."""
    from rasterio.warp import transform
    z = np.random.default_rng(5).uniform(0, 50, (20, 30)).astype(np.float32)
    path = tmp_path / "dem.tif"
    gt = rasterio.Affine(30.0, 0, 500000.0, 0, -30.0, 4000000.0)
    with rasterio.open(path, "w", driver="GTiff", height=20, width=30, count=1,
                       dtype="float32", crs="EPSG:32617", transform=gt) as dst:
        dst.write(z, 1)
    cells = [(3, 4), (15, 22)]
    xs, ys = zip(*(gt * (c + 0.5, r + 0.5) for r, c in cells))
    lon, lat = transform("EPSG:32617", "EPSG:4326", xs, ys)
    pts = tmp_path / "s.geojson"
    pts.write_text(json.dumps({"type": "MultiPoint",
                               "coordinates": [[a, b] for a, b in zip(lon, lat)]}))
    got = terrain.cost_distance(path, points=pts, backend="cpu")
    want = terrain.cost_distance(path, cells, backend="cpu")
    np.testing.assert_array_equal(got.distance, want.distance)
    np.testing.assert_array_equal(got.allocation, want.allocation)
    with pytest.raises(InputError, match=r"nowhere\.csv: no such file"):
        terrain.cost_distance(path, points=str(tmp_path / "nowhere.csv"), backend="cpu")


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
        with pytest.raises(InputError, match="^outlets: 3 x 3 cells, the DEM 4 x 4$"):
            op(z, outlets=np.zeros((3, 3)), backend="cpu")


def test_flow_of_a_filled_dem_is_a_copy_and_weights_stay_float64():
    z = np.array([[3, 2, 1], [3, 2, 1]], np.float32)
    ds = terrain.flow(z, filled=True, backend="cpu")
    ds.filled.values[0, 0] = -1
    assert z[0, 0] == 3  # the input untouched
    w = np.array([[16777217.0, 0.1, 0.1]] * 2)
    acc = terrain.flow(z, filled=True, weights=w, backend="cpu").accumulation.values
    from terrain.hydrology import flow_accumulation
    want = flow_accumulation(ds.direction.values, w, backend="cpu")
    assert acc.tolist() == want.tolist() and acc[0, 2] > 16777217.1  # float32: 16777216.x


def test_bfs_of_a_networkx_graph_is_in_its_nodes():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(3)
    for seed in range(5):
        G = nx.gnm_random_graph(40, 60, seed=seed)
        G = nx.relabel_nodes(G, {v: f"n{int(rng.integers(1000))}-{v}" for v in G})
        src = list(G)[seed]
        r = terrain.bfs(G, src, backend="cpu")
        want = nx.single_source_shortest_path_length(G, src)
        assert r.dist == want and r.sources == [src]
        assert list(r.dist.values()) == sorted(r.dist.values())
        assert set(r.pred) == set(want) - {src}
        assert all(G.has_edge(v, p) and want[p] == want[v] - 1 for v, p in r.pred.items())


def test_a_file_graphs_sources_and_results_are_its_ids(tmp_path):
    """terrain.bfs / terrain.sssp of a DIMACS file (ids from 1): source 1 is the file's
    vertex 1, and the result names vertices by the file's ids, as networkx's searches of
    the same arcs do."""
    from terrain.graph import load_graph
    path = tmp_path / "g.gr"
    arcs = [(1, 2, 4), (2, 3, 1), (1, 3, 7), (3, 4, 2), (5, 4, 1)]
    path.write_text(f"p sp 5 {len(arcs)}\n" + "".join(f"a {u} {v} {w}\n" for u, v, w in arcs))
    G = nx.DiGraph()
    G.add_weighted_edges_from(arcs)
    g = load_graph(path)
    r = terrain.sssp(g, 1, backend="cpu")
    want = nx.single_source_dijkstra_path_length(G, 1)
    assert {v: d for v, d in zip(r.ids.tolist(), r.dist.tolist()) if d >= 0} == want
    assert r.pred.tolist() == [-1, 1, 2, 3, -1] and r.sources.tolist() == [1]
    b = terrain.bfs(g, [5], backend="cpu")
    hops = nx.single_source_shortest_path_length(G.to_undirected(), 5)
    assert dict(zip(b.ids.tolist(), b.dist.tolist())) == hops
    assert b.pred.tolist() == [3, 3, 4, 5, -1]   # the smallest id a hop closer


def test_empty_grids_flow_as_they_fill():
    z = np.zeros((0, 3), np.float32)
    ds = terrain.flow(z, backend="cpu")
    assert ds.direction.shape == ds.accumulation.shape == (0, 3)
    assert ds.attrs["cells"] == 0 and terrain.fill(z, backend="cpu").filled.shape == (0, 3)


def test_dataarray_georeference_in_attributes():
    """``transform`` and ``crs`` attributes (xarray.open_rasterio's) when rioxarray is not
    there and the coordinates do not say."""
    z = dem(1, (6, 5))
    X = xr.DataArray(z, dims=("y", "x"), attrs={"transform": (30, 0, 1000, 0, -20, 5000),
                                                 "crs": "EPSG:32633"})
    assert terrain.flow(X, backend="cpu").attrs["cellsize"] == [30.0, 20.0]
    r = terrain.cost_distance(X, points=[(1045, 4975)], backend="cpu")
    assert (r.attrs["source_rows"], r.attrs["source_cols"]) == ([1], [1])
    assert r.attrs["cellsize"] == [30.0, 20.0]
    X = X.copy()  # not the accessor rioxarray (where imported) cached on the first
    X.attrs["crs"] = "EPSG:4326"
    with pytest.raises(InputError, match="^DataArray: weight 'slope' needs cell sizes"):
        terrain.mst(X, weight="slope", backend="cpu")


@pytest.mark.parametrize("call,message", [
    (lambda z: terrain.flow(np.array([["a", "b"]])), "^dem: a raster must hold real numbers"),
    (lambda z: terrain.mst(z.astype(complex)), "^dem: a raster must hold real numbers, got "
                                               "dtype complex128"),
    (lambda z: terrain.mst([[1, 2], [3]]), "^dem: a raster must be a rectangular array"),
    (lambda z: terrain.mst(xr.DataArray(np.zeros((2, 2, 2)))), "^DataArray: a raster must be 2-D"),
    (lambda z: terrain.mst(z, cellsize=(-1, 1)), r"^cellsize \(-1, 1\): must be a positive"),
    (lambda z: terrain.flow(z, cellsize="x"), "^cellsize 'x': must be a positive"),
    (lambda z: terrain.cost_distance(z, [(0, 0)], start_costs=[1, 2]),
     "^sources: 2 start costs for 1 sources"),
    (lambda z: terrain.cost_distance(z, [(0, 0)], start_costs="x"),
     "^sources: start costs must be numbers"),
    (lambda z: terrain.fill(np.ones((3, 2), np.float32), outlets=np.array([(1, 1), (0, 0),
                                                                           (2, 0)])),
     "could be cells or a mask"),
    # start costs from a raster's values (the command line's --start-values), stops as map
    # points (--stop): the sources' raster and the DEM's georeference they need
    (lambda z: terrain.cost_distance(z, [(0, 0)], points=np.ones(z.shape), start_values=True,
                                     start_costs=[1, 2]),
     r"^start_costs \[1, 2\]: with start_values, one number >= 0"),
    (lambda z: terrain.cost_distance(z, [(0, 0)], start_values=True),
     "^start costs from values need a raster of sources"),
    (lambda z: terrain.cost_distance(z, points=np.ones((2, 2)), start_values=True),
     "^points: 2 x 2 cells, the DEM 8 x 9"),
    (lambda z: terrain.cost_distance(z, points="s.tif", start_values=True),
     "^dem: a file of sources needs a georeferenced DEM"),
    (lambda z: terrain.cost_distance(z, [(0, 0)], start_values="yes"),
     "^start_values 'yes': must be True or False"),
    (lambda z: terrain.cost_distance(z, [(0, 0)], stop_points=[(1.5, 2.5)]),
     "^dem: map points as stops need a georeferenced DEM"),
    (lambda z: terrain.watershed(z, [(0, 0)]),
     "^flow: expected terrain.flow's Dataset or a flow store, got ndarray"),
    (lambda z: terrain.watershed(terrain.flow(z, backend="cpu").drop_vars("accumulation"),
                                 [(0, 0)], snap=30),
     "^flow: snapping needs its accumulation"),
    (lambda z: terrain.diameter(nx.path_graph(9), effective=-3),
     "^effective -3: the sources to sample"),
    # each raster named as the parameter it was given as
    (lambda z: terrain.cost_distance(z, [(0, 0)], friction=-np.ones(z.shape)),
     r"^friction: negative friction -1.0 at cell \(row, col\) = \(0, 0\)"),
    (lambda z: terrain.cost_distance(z, [(0, 0)], friction=np.array([["a"] * 9] * 8)),
     "^friction: a raster must hold real numbers"),
    (lambda z: terrain.flow(z, weights=np.ones((2, 2))), "^weights: 2 x 2 cells, the DEM 8 x 9"),
    (lambda z: terrain.fill(z, outlets={"a": 1}), "^outlets: a raster must hold real numbers"),
    # the library's errors for arguments of the wrong kind, not NumPy's or xarray's
    (lambda z: terrain.fill(z, min_area="x"), "^fill: min_area 'x' must be a whole number"),
    (lambda z: terrain.fill(z, min_area=2.5), "^fill: min_area 2.5 must be a whole number"),
    (lambda z: terrain.fill(z, min_depth="x"), "^fill: min_depth 'x' must be a number >= 0"),
    (lambda z: terrain.fill(z, outlets=[(0, 0, 0)]), "^outlets: expected \\(row, col\\) cells"),
    (lambda z: terrain.fill(z, outlets=[None]), "^outlets: expected \\(row, col\\) cells"),
    (lambda z: terrain.fill(z, outlets=[(1.7, 1.2)]), "^outlets: cells must be whole"),
    (lambda z: terrain.fill(xr.Dataset({"a": xr.DataArray(z)})), r"^dem: an xarray Dataset .*"
                                                                 r"\(ds\['a'\]\)"),
    (lambda z: terrain.fill(z, tile=3), "^tile 3 is not a power of two"),
    (lambda z: terrain.mst(z, tile="a"), "^tile 'a' is not an integer"),
    (lambda z: terrain.fill(z, 8.5), "^connectivity 8.5 is not 4 or 8"),
    # 8.5 is no connectivity, not 8: the flow of a filled DEM and the certificates refuse it
    (lambda z: terrain.flow(z, connectivity=8.5, filled=True), "^connectivity 8.5 is not 4 or 8"),
    (lambda z: terrain.flow(z[:0], connectivity=8.5, filled=True),  # no cell: refused alike
     "^connectivity 8.5 is not 4 or 8"),
    (lambda z: __import__("terrain.verify").verify.verify_grid_mst(z, np.ones(z.shape, bool),
                                                                   8.5),
     "^connectivity 8.5 is not 4 or 8"),
    (lambda z: __import__("terrain.verify").verify.verify_flow(z, np.zeros(z.shape, np.uint8),
                                                               connectivity=8.5),
     "^connectivity 8.5 is not 4 or 8"),
    (lambda z: __import__("terrain.verify").verify.verify_fill(z, z, 8.5),
     "^connectivity 8.5 is not 4 or 8"),
    (lambda z: terrain.cost_distance(z, [(0, 0)], max_cost="x"), "^max cost 'x': must be > 0"),
    (lambda z: terrain.cost_distance(z, [(0, 0)], max_cost=[1]), r"^max cost \[1\]: must be"),
    (lambda z: terrain.cost_distance(z, [(2 ** 70, 0)]),
     r"^source 0 at cell \(row, col\) = \(1180591620717411303424, 0\) is outside the 8 x 9 "),
    (lambda z: terrain.bfs(__import__("scipy.sparse").sparse.eye(3, format="csr"), 5),
     r"^matrix: source vertex 5 is not in the graph$"),
    (lambda z: terrain.sssp(__import__("scipy.sparse").sparse.eye(3, format="csr"), 5),
     r"^matrix: source vertex 5 is not in the graph$"),
    # a source is an id of the graph: 1.5 was read as 1, "2" as 2
    (lambda z: terrain.bfs(__import__("scipy.sparse").sparse.eye(3, format="csr"), 1.5),
     r"^bfs: source 1\.5 is not an integer vertex id \(the ids of matrix are integers\)$"),
    (lambda z: terrain.sssp(__import__("networkx").path_graph(3), "2"),
     r"^sssp: source '2' is not an integer vertex id"),
    # a dense array is no graph: what is accepted is said
    (lambda z: terrain.bfs(np.ones((3, 3)), 0),
     r"^graph: a dense 2-D array is not a graph: give a terrain Graph, a scipy\.sparse matrix, "
     r"a networkx graph or \(indptr, indices\[, weights\]\)"),
    (lambda z: terrain.diameter(__import__("networkx").path_graph(3), progress="x"),
     r"^progress 'x': must be True, False or a callable"),
    (lambda z: terrain.diameter(__import__("networkx").path_graph(3), weighted=True,
                                progress="x"), r"^progress 'x': must be True, False"),
    (lambda z: terrain.diameter(__import__("networkx").path_graph(3), effective=2, seed="a"),
     r"^seed 'a': the effective diameter's sample seed, a whole number >= 0$"),
    (lambda z: terrain.diameter(__import__("networkx").path_graph(3), effective=2, seed=-1),
     r"^seed -1: the effective diameter's sample seed"),
    # water leaves at a cell of the grid; elevations are finite float32 numbers
    (lambda z: terrain.fill(np.array([[np.nan, 1], [1, 1]], np.float32), outlets=[(0, 0)]),
     r"^dem: outlet cell \(0, 0\) is on nodata"),
    (lambda z: terrain.fill(np.full((2, 2), 1e300)),
     r"^dem: elevation 1e\+300 at cell \(row, col\) = \(0, 0\): beyond float32's range"),
    (lambda z: terrain.mst(np.array([[0, np.inf]], np.float32)),
     r"^dem: elevation inf at cell \(row, col\) = \(0, 1\): elevations are finite"),
    (lambda z: terrain.mst(xr.DataArray(np.array([[0, -np.inf]]))),
     r"^DataArray: elevation -inf at cell"),
    # rows along x would turn every step (cell sizes, codes, map points)
    (lambda z: terrain.flow(xr.DataArray(z, dims=("x", "y"))),
     r"^DataArray: dims \('x', 'y'\): rows run along y.*da.transpose\('y', 'x'\)"),
    # a flag given as a string is truthy: "no" ran the epsilon fill
    (lambda z: terrain.fill(z, epsilon="no"), "^epsilon 'no': must be True or False"),
    (lambda z: terrain.fill(z, hierarchy=1), "^hierarchy 1: must be True or False"),
    (lambda z: terrain.flow(z, filled="no"), "^filled 'no': must be True or False"),
    (lambda z: terrain.sssp(__import__("scipy.sparse").sparse.eye(3, format="csr"), 0,
                            directed="no"), "^directed 'no': must be True or False"),
    (lambda z: terrain.bfs(__import__("networkx").path_graph(3), 0, predecessors="no"),
     "^predecessors 'no': must be True or False"),
    (lambda z: terrain.diameter(__import__("networkx").path_graph(3), weighted="no"),
     "^weighted 'no': must be True or False"),
    (lambda z: terrain.diameter(__import__("networkx").path_graph(3), extremes="yes"),
     "^extremes 'yes': must be True or False"),
    # a graph file's path, which the command line takes, named with the reader to use
    (lambda z: terrain.bfs("g.txt", 0), r"^g\.txt: a path, not a graph: read the file with "
                                       r"terrain\.graph\.load_graph\(path\)"),
    (lambda z: terrain.diameter(__import__("pathlib").Path("g.gr")), r"^g\.gr: a path, not"),
    # as the command line's diameter --weighted --effective K: said, not a TypeError
    (lambda z: terrain.diameter(__import__("networkx").path_graph(3), weighted=True,
                                effective=5), "^effective does not combine with weighted: "),
    (lambda z: terrain.diameter(__import__("networkx").path_graph(3), weighted=True, seed=1),
     "^seed does not combine with weighted: "),
    # a graph given to a raster operation (the command line's mst takes either) is named as
    # one, not as a 1-D or object array
    (lambda z: terrain.mst(__import__("networkx").path_graph(5)),
     r"^dem: a graph \(Graph\), not a raster: .*minimum_spanning_forest\(graph\)"),
    (lambda z: terrain.mst(__import__("scipy.sparse").sparse.eye(3, format="csr")),
     r"^dem: a graph \((csr_matrix|csr_array)\), not a raster"),
    (lambda z: terrain.fill(__import__("terrain.graph").graph.as_graph(
        __import__("networkx").path_graph(3))), r"^dem: a graph \(Graph\), not a raster"),
    (lambda z: terrain.cost_distance(z, [(0, 0)], friction=__import__("networkx").path_graph(3)),
     r"^friction: a graph \(Graph\), not a raster"),
])
def test_bad_arguments_are_the_librarys_errors(call, message):
    with pytest.raises(InputError, match=message):
        call(dem(2, (8, 9)))


def test_cell_size_as_one_number():
    z = dem(2, (8, 9))
    a = terrain.mst(z, weight="slope", cellsize=2, backend="cpu").attrs["total_weight"]
    assert a == terrain.mst(z, weight="slope", cellsize=(2, 2),
                            backend="cpu").attrs["total_weight"]


def test_watershed_cells_must_be_whole_and_the_snap_radius_not_negative():
    from terrain.hydrology import snap_outlets, watershed
    d = np.array([[1, 1, 0]], np.uint8)
    with pytest.raises(InputError, match=r"^outlet cell \(0.5, 1\): cells must be whole"):
        watershed(d, [(0.5, 1)])
    with pytest.raises(InputError, match=r"^snap radius -1: must be a number >= 0"):
        snap_outlets(np.ones((1, 3)), [(0, 0)], -1)
    with pytest.raises(InputError, match=r"^outlet cell \(0, 9\) is outside the grid"):
        snap_outlets(np.ones((1, 3)), [(0, 9)], 1)
    assert watershed(d, [(0, 2.0)]).tolist() == [[1, 1, 1]]


def test_a_dataarrays_nodata_and_the_results_nodata_need_no_rioxarray(tmp_path):
    """``attrs={"nodata": -9999}`` was nodata only once rioxarray was imported (a -9999
    elevation drained its neighbours otherwise); the results carried no nodata, so a
    GeoTIFF written from them by rioxarray marked none (255 read as a direction)."""
    import subprocess
    import sys

    from cli import child_env
    code = """
import numpy as np, xarray as xr, terrain, sys
z = np.array([[-9999, 5, 4], [6, 5, 3], [6, 4, 2]], np.float32)
da = xr.DataArray(z, dims=("y", "x"), coords={"y": [25., 15, 5], "x": [5., 15, 25]},
                  attrs={"nodata": -9999.0})
ds = terrain.flow(da)
print(int(ds.direction.values[0, 0]), float(ds.accumulation.max()),
      "rioxarray" in sys.modules)
"""
    got = [subprocess.run([sys.executable, "-c", ("import rioxarray\n" if rio else "") + code],
                          env=child_env(), capture_output=True, text=True) for rio in (0, 1)]
    assert [g.stdout.split() for g in got] == [["255", "8.0", "False"], ["255", "8.0", "True"]], \
        [g.stderr for g in got]
    pytest.importorskip("rioxarray")  # its accessor, on the results below
    z = np.arange(36, dtype=np.float32).reshape(6, 6)
    z[2, 3] = np.nan
    da = _xr_raster(z)
    ds = terrain.flow(da)
    assert ds.direction.rio.nodata == 255 and np.isnan(ds.accumulation.rio.nodata)
    ds.direction.rio.to_raster(tmp_path / "d.tif")
    with rasterio.open(tmp_path / "d.tif") as src:
        assert src.nodata == 255 and src.read(1)[2, 3] == 255
    cd = terrain.cost_distance(da, points=[(505.0, 995.0)])
    assert cd.allocation.rio.nodata == -1 and cd.backlink.rio.nodata == 255
    assert np.isnan(cd.distance.rio.nodata)


def _xr_raster(z):
    import xarray as xr
    rows, cols = z.shape
    return xr.DataArray(z, dims=("y", "x"), coords={"y": 1000.0 - 10 * np.arange(rows) - 5,
                                                    "x": 500.0 + 10 * np.arange(cols) + 5})


def _utm(values):
    import rioxarray  # noqa: F401  (the .rio accessor)
    rows, cols = values.shape
    return xr.DataArray(values, dims=("y", "x"),
                        coords={"y": 4000000 - 20 * np.arange(rows) - 10.0,
                                "x": 500000 + 10 * np.arange(cols) + 5.0}).rio.write_crs(32633)


def test_a_raster_beside_the_dem_must_lie_on_its_grid():
    pytest.importorskip("rioxarray")
    d = _utm(dem(3, (6, 8)))
    moved = d.assign_coords(x=d.x + 1000)
    with pytest.raises(InputError, match=r"^friction \(DataArray\): not on the DEM's grid: its "
                                         r"geotransform \(501000, 10, 0, 4000000, 0, -20\)"):
        terrain.cost_distance(d, [(0, 0)], friction=moved + 1)
    with pytest.raises(InputError, match=r"^weights \(DataArray\): not on the DEM's grid"):
        terrain.flow(d, weights=moved)
    with pytest.raises(InputError, match=r"^outlets \(DataArray\): not on the DEM's grid"):
        terrain.fill(d, outlets=moved > 0)
    with pytest.raises(InputError, match=r"its CRS \(EPSG:4326\) is not the DEM's "
                                         r"\(EPSG:32633\): reproject it first"):
        terrain.cost_distance(d, [(0, 0)], friction=(d + 1).rio.write_crs(4326))
    # on the grid (or without a georeference of its own): taken
    same = terrain.cost_distance(d, [(0, 0)], friction=d * 0 + 2).distance.values
    plain = terrain.cost_distance(d, [(0, 0)], friction=np.full(d.shape, 2.0)).distance.values
    assert np.array_equal(same, plain, equal_nan=True) and plain[0, 1] == 20.0


def test_one_band_as_rasterio_reads_it():
    """``src.read()`` gives (1, rows, cols): refused where a DataArray's band=1 was taken."""
    z = dem(3, (7, 9))
    assert np.array_equal(terrain.fill(z[None]).filled.values, terrain.fill(z).filled.values,
                          equal_nan=True)
    with pytest.raises(InputError, match=r"^dem: a raster must be 2-D, got shape \(2, 7, 9\)"):
        terrain.fill(np.stack([z, z]))


def test_a_masked_array_is_nodata_where_masked():
    z = dem(5, (7, 9))
    z[3, 4] = -9999
    masked = np.ma.masked_equal(z, -9999)
    nan = np.where(z == -9999, np.nan, z).astype(np.float32)
    assert np.array_equal(terrain.fill(masked).filled.values, terrain.fill(nan).filled.values,
                          equal_nan=True)
    assert terrain.mst(masked).attrs["vertices"] == np.count_nonzero(~np.isnan(nan)) == 54
    assert np.isnan(terrain.cost_distance(masked, [(0, 0)]).distance[3, 4])
    assert masked.data[3, 4] == -9999  # the input untouched


def test_integers_that_float32_rounds_are_said_at_the_callers_line():
    z = np.array([[16777217, 16777216, 16777217]] * 2 + [[16777218, 16777217, 16777218]],
                 np.int32)
    with pytest.warns(UserWarning, match=r"^dem: int32 values beyond 2\^24 are rounded to "
                                         r"float32 .*16777217 at cell \(0, 0\) reads as "
                                         r"16777216") as got:
        terrain.fill(z)
    assert got[0].filename == __file__  # the caller's line, not the library's


def test_a_given_cell_size_is_the_callers_units():
    pytest.importorskip("rioxarray")
    g = _utm(dem(4, (6, 8))).rio.write_crs(4326)
    with pytest.raises(InputError, match="geographic"):
        terrain.mst(g, weight="slope")
    forest = terrain.mst(g, weight="slope", cellsize=(30, 30))
    same = terrain.mst(g.values, weight="slope", cellsize=(30, 30))
    assert np.array_equal(forest.values, same.values)
    with pytest.warns(UserWarning, match="geographic: cells are in degrees, a step east"):
        terrain.flow(g)


def test_kept_depressions_pits_and_cost_codes_as_xarray_holds_them():
    z = np.array([[5, 5, 5, 5, 5], [5, 1, 1, 1, 5], [5, 1, 0, 1, 4], [5, 5, 5, 5, 5]],
                 np.float32)
    kept = terrain.fill(z, min_depth=2)
    assert kept.sinks.values.tolist() == (z == 0).astype(int).tolist()
    assert "sinks" not in terrain.fill(z)
    ds = terrain.cost_distance(xr.DataArray(z, dims=("y", "x")), [(0, 0)])
    attrs = ds.backlink.attrs
    assert "codes" not in attrs and attrs["flag_meanings"].split()[:3] == ["source", "E", "SE"]
    assert attrs["flag_values"].tolist()[:3] == [0, 1, 2] and attrs["flag_values"][-1] == 255


def test_cf_scale_and_offset_of_a_dataarray_are_applied_once(tmp_path):
    """An int16 band of decimetres (scale 0.1, offset 50) opened by rioxarray holds the
    stored integers with ``scale_factor``/``add_offset`` in its attributes: it is read as
    ``stored × scale + offset`` (nodata found among the stored values), as the file's path
    is; decoded (``mask_and_scale=True``) it is taken as it is, not scaled twice."""
    rioxarray = pytest.importorskip("rioxarray")
    rng = np.random.default_rng(7)
    stored = rng.integers(0, 2000, (12, 15)).astype(np.int16)
    stored[4, 5] = -32768
    path = tmp_path / "dm.tif"
    with rasterio.open(path, "w", driver="GTiff", height=12, width=15, count=1, dtype="int16",
                       nodata=-32768, crs="EPSG:32617",
                       transform=rasterio.Affine.from_gdal(*GT)) as dst:
        dst.write(stored, 1)
        dst.scales, dst.offsets = (0.1,), (50.0,)
    z = (stored * 0.1 + 50).astype(np.float32)
    z[4, 5] = np.nan
    want = terrain.fill(z)
    friction = stored.astype(np.float64) * 0.001 + 0.5
    friction[4, 5] = np.nan
    want_cd = terrain.cost_distance(z, [(0, 0)], friction=friction, cellsize=30).distance
    raw = rioxarray.open_rasterio(path).squeeze("band", drop=True)
    decoded = rioxarray.open_rasterio(path, mask_and_scale=True).squeeze("band", drop=True)
    plain = xr.DataArray(stored, dims=("y", "x"),
                         attrs={"scale_factor": 0.1, "add_offset": 50, "_FillValue": -32768})
    assert raw.dtype == np.int16 and raw.attrs["scale_factor"] == 0.1
    assert decoded.encoding["scale_factor"] == 0.1
    for da in (raw, plain, path):
        got = terrain.fill(da)
        assert np.array_equal(got.filled.values, want.filled.values, equal_nan=True), da
        assert got.attrs["max_depth"] == want.attrs["max_depth"]
    # xarray decodes in float32 (a last bit may differ); scaled again, 10 times too deep
    got = terrain.fill(decoded)
    assert np.allclose(got.filled.values, want.filled.values, rtol=1e-6, equal_nan=True)
    low = decoded.copy()  # its encoding's _FillValue is a stored value, masked already
    low.values[0, 0] = -32768
    assert terrain.fill(low).filled.values[0, 0] == -32768
    per_100 = raw.copy(data=raw.values)  # a friction of the same band: elevation / 100
    per_100.attrs.update(scale_factor=0.001, add_offset=0.5)
    got = terrain.cost_distance(raw, [(0, 0)], friction=per_100).distance.values
    assert np.allclose(got, want_cd, equal_nan=True, rtol=1e-12)
    assert np.array_equal(terrain.flow(raw, weights=per_100).accumulation.values,
                          terrain.flow(z, weights=friction).accumulation.values,
                          equal_nan=True)
    with pytest.raises(InputError, match=r"^DataArray: its scale_factor 0 and add_offset 50 "):
        terrain.fill(plain.assign_attrs(scale_factor=0))


_ENGINES = [e for e, module in (("netcdf4", "netCDF4"), ("h5netcdf", "h5netcdf"),
                                ("scipy", "scipy")) if __import__("importlib.util").util
            .find_spec(module)]


@pytest.mark.parametrize("engine", _ENGINES)
def test_every_result_round_trips_through_netcdf(tmp_path, engine):
    """Every raster result writes with ``to_netcdf`` and reads back with its values and
    attributes (cost distance's sources were nested lists, which netCDF refuses). netCDF3
    (the scipy engine) has no unsigned bytes: xarray refuses a uint8 layer holding 128 or
    more (flow codes, backlinks) there, so those layers go to netCDF4 only."""
    z = dem(6, (12, 15))
    da = _xr_raster(z)
    results = {"mst": terrain.mst(da).to_dataset(), "fill": terrain.fill(da),
               "kept": terrain.fill(da, min_depth=1, hierarchy=True),
               "flow": terrain.flow(da, outlets=[(0, 0)]),
               "cost": terrain.cost_distance(da, [(0, 0), (11, 14)], start_costs=[0, 1],
                                             stops=[(2, 9)], max_cost=1e9),
               "cost_numpy": terrain.cost_distance(z, [(3, 4)]).to_xarray()}
    assert results["cost"].attrs["source_rows"] == [0, 11]
    assert results["cost"].attrs["source_cols"] == [0, 14]
    for name, ds in results.items():
        if engine == "scipy":
            ds = ds.drop_vars([k for k, v in ds.data_vars.items()
                               if v.dtype == np.uint8 and int(v.max()) >= 128])
        path = tmp_path / f"{name}.nc"
        ds.to_netcdf(path, engine=engine)
        with xr.open_dataset(path, engine=engine, mask_and_scale=False) as back:
            assert set(back.data_vars) == set(ds.data_vars), name
            for key, value in ds.attrs.items():
                got = back.attrs[key]
                assert (got == value if isinstance(value, str) else np.array_equal(
                    np.atleast_1d(got), np.atleast_1d(value), equal_nan=True)), (name, key)
            for k, v in ds.data_vars.items():
                assert np.array_equal(back[k].values, v.values, equal_nan=True), (name, k)
                fill = v.attrs.get("_FillValue")
                if fill is not None:
                    assert np.array_equal(back[k].attrs["_FillValue"], fill, equal_nan=True)


def test_results_in_the_elevations_unit_carry_it(tmp_path):
    """filled and depth (fill), filled (flow) and an absdiff distance take the DEM's unit:
    a raster band's unit type, a DataArray's ``units``; they had none. Codes, ids, counts and
    a friction distance have none."""
    import rasterio
    xr = pytest.importorskip("xarray")
    path = tmp_path / "dem.tif"
    z = np.random.default_rng(4).random((20, 24)).astype(np.float32) * 30
    with rasterio.open(path, "w", driver="GTiff", height=20, width=24, count=1,
                       dtype="float32", crs="EPSG:32617",
                       transform=rasterio.Affine(30, 0, 500000, 0, -30, 4000000)) as dst:
        dst.write(z, 1)
        dst.set_band_unit(1, "ft")
    da = xr.DataArray(z, dims=("y", "x"), attrs={"units": "ft"},
                      coords={"y": 4000000 - 15 - 30 * np.arange(20.0),
                              "x": 500015 + 30 * np.arange(24.0)})
    for dem in (str(path), da):
        f = terrain.fill(dem, backend="cpu")
        assert f.filled.attrs["units"] == f.depth.attrs["units"] == "ft"
        assert "units" not in f.depression.attrs
        w = terrain.flow(dem, backend="cpu")
        assert w.filled.attrs["units"] == "ft"
        assert "units" not in w.direction.attrs and "units" not in w.accumulation.attrs
        for friction, want in ((None, "ft"), (np.ones_like(z), None)):
            c = terrain.cost_distance(dem, [(3, 4)], friction=friction, backend="cpu")
            if not hasattr(c, "data_vars"):  # a path's: NumPy layers, their attributes apart
                c = c.to_xarray()
            assert c.distance.attrs.get("units") == want


def _unplaced_raster(path, z, **kwargs):
    """``z`` written without a geotransform (GDAL then warns that it is not georeferenced)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        with rasterio.open(path, "w", driver="GTiff", height=z.shape[0], width=z.shape[1],
                           count=1, dtype="float32", **kwargs) as dst:
            dst.write(z, 1)
    return path


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
def test_a_dataarray_placed_only_by_ground_control_points_is_refused_as_its_file(tmp_path):
    """rioxarray keeps a GCP raster's points and CRS in ``spatial_ref`` (its geotransform
    GDAL's identity): refused as the file is, not taken as a grid of cells of 1 in the
    points' CRS."""
    rioxarray = pytest.importorskip("rioxarray")
    from rasterio.control import GroundControlPoint
    gcps = [GroundControlPoint(r, c, 500000 + 10 * c, 4000200 - 10 * r)
            for r in (0, 20) for c in (0, 15)]
    path = _unplaced_raster(tmp_path / "gcp.tif", dem(2, (20, 15)), gcps=gcps,
                            crs="EPSG:32617")
    with pytest.raises(InputError, match="georeferenced only by ground control points"):
        terrain.fill(path)  # the oracle: the file's refusal
    da = rioxarray.open_rasterio(path).rename("z")
    for call in (terrain.mst, terrain.fill, lambda d: terrain.cost_distance(d, [(0, 0)])):
        with pytest.raises(InputError, match=r"^DataArray 'z': georeferenced only by ground "
                           r"control points \(GCPs\): warp it onto a grid first"):
            call(da)
    warped = da.rio.reproject(da.rio.crs)  # the way the message gives
    assert terrain.fill(warped, backend="cpu").rio.crs.to_epsg() == 32617


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
def test_a_dataarray_of_a_raster_without_geotransform_is_its_files_grid(tmp_path):
    """rioxarray reads a raster without a geotransform on GDAL's identity (y ascending, the
    rows "running north"): read as its path is, the north-up grid of cells of 1 at (0, 0)
    without a CRS, warned once (the path's results the oracle), not refused as south-up; an
    array without coordinates stays unreferenced and unwarned."""
    import warnings
    rioxarray = pytest.importorskip("rioxarray")
    GRID_MAPPING_NAME = "spatial_ref"
    z = dem(3, (12, 9))
    path = _unplaced_raster(tmp_path / "plain.tif", z)
    want = terrain.fill(path, backend="cpu")
    for da in (rioxarray.open_rasterio(path), rioxarray.open_rasterio(path).squeeze()):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", terrain.TerrainWarning)
            got = terrain.fill(da, backend="cpu")
        said = [str(w.message) for w in caught if issubclass(w.category, terrain.TerrainWarning)]
        assert said == ["DataArray: not georeferenced (no geotransform): read as a grid of "
                        "cells of 1, its lower-left corner at (0, 0), without a CRS"]
        assert np.array_equal(got.filled.values, want.filled.values, equal_nan=True)
        # the input's own labels kept: the usual depth by arithmetic pairs each cell with itself
        assert np.array_equal((got.filled - da.squeeze()).values, want.depth.values,
                              equal_nan=True)
        assert GRID_MAPPING_NAME not in got.coords  # no transform, no CRS claimed
    mine = terrain.cost_distance(rioxarray.open_rasterio(path), points=[(8.5, 0.5)],
                                 friction=path, backend="cpu")
    theirs = terrain.cost_distance(path, points=[(8.5, 0.5)], friction=path, backend="cpu")
    assert mine.attrs["source_rows"] == theirs.attrs["source_rows"] == [11]
    assert np.array_equal(mine.distance.values, theirs.distance, equal_nan=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", terrain.TerrainWarning)
        bare = terrain.fill(xr.DataArray(z, dims=("y", "x")), backend="cpu")
    assert np.array_equal(bare.filled.values, want.filled.values, equal_nan=True)


@pytest.mark.parametrize("call, option, said", [
    (lambda: terrain.sssp(sp.csr_array(np.ones((2, 3))), 0),
     None, "matrix: an adjacency matrix must be square, got 2 x 3"),
    (lambda: terrain.bfs((np.array([0, 1, 2]), np.array([1, 7])), 0),
     None, "arrays: indices must be vertex numbers 0..1"),
    (lambda: terrain.sssp((np.array([0, 1, 2]), np.array([1, 0]), np.array([1.0])), 0),
     None, r"arrays: \(1,\) weights for 2 indices"),
    (lambda: terrain.bfs((np.array([0.0, 1.0]), np.array([0])), 0),
     None, "arrays: indptr and indices must be integer arrays"),
    (lambda: terrain.sssp(nx.Graph([(0, 1, {"weight": "far"})]), 0),
     None, "networkx graph: edge weights must be integers or real numbers"),
    (lambda: terrain.sssp(nx.path_graph(3), 0, algorithm="bellman"),
     "algorithm", "algorithm 'bellman': not one of auto, dijkstra, crauser, delta"),
    (lambda: terrain.diameter(nx.path_graph(3), weighted=True,
                              algorithm="bellman"),
     "algorithm", "algorithm 'bellman': not one of"),
    (lambda: terrain.sssp(nx.path_graph(3), 0, algorithm="delta",
                          delta="wide"),
     "delta", "delta must be a number > 0, got 'wide'"),
    (lambda: terrain.cost_distance(dem(), 3), "sources",
     "sources: expected a list of \\(row, col\\) cells, got 3"),
    (lambda: terrain.cost_distance(
        xr.DataArray(dem(), dims=("y", "x"), coords={"y": 5.0 + 10 * np.arange(40)[::-1],
                                                     "x": 5.0 + 10 * np.arange(33)}),
        points=5),
     "points", "points: expected a list of \\(x, y\\) points or a points file, got 5"),
])
def test_bad_arguments_are_input_errors_that_name_them(call, option, said):
    """What a caller got wrong is an InputError (a ValueError) naming the argument: a graph
    of the wrong shape or weights, an unknown algorithm, a number where a list belongs. They
    were ValueErrors naming internal functions (``as_graph:``, ``build_csr:``), a TypeError
    (``'int' object is not iterable``), or, for the weighted diameter's algorithm, a crash
    deep in the search (``int() argument must be ... not 'NoneType'``)."""
    with pytest.raises(InputError, match=said) as e:
        call()
    assert e.value.option == option


def test_an_interrupt_that_numba_wraps_reaches_the_caller_as_itself(monkeypatch):
    """Ctrl-C handled while Numba boxes a kernel's result surfaces as ``SystemError:
    CPUDispatcher(...) returned a result with an exception set`` (its cause the
    KeyboardInterrupt, through Numba's unpickling; seen in ``mst`` of a 2500 x 2500 grid
    interrupted near its end): a notebook's or service's ``except KeyboardInterrupt``
    missed it. The API raises the KeyboardInterrupt itself, and the process's next call
    computes the same forest."""
    import terrain.grid.mst as grid

    z = dem(3, (64, 48))
    want = terrain.mst(z, backend="cpu").values
    solve = grid.in_core_mst

    def boxed(*args):  # the chain Numba makes of a signal during the boxing
        try:
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as stop:
                raise SystemError("<function _numba_unpickle> returned a result with an "
                                  "exception set") from stop
        except SystemError as e:
            raise SystemError("CPUDispatcher(<function _reduce_tile_cpu>) returned a "
                              "result with an exception set") from e

    monkeypatch.setattr(grid, "in_core_mst", boxed)
    with pytest.raises(KeyboardInterrupt):
        terrain.mst(z, backend="cpu")
    monkeypatch.setattr(grid, "in_core_mst", solve)
    again = terrain.mst(z, backend="cpu")
    assert np.array_equal(again.values, want)
    assert again.attrs["total_weight"] == grid_mst(z, backend="cpu").total_weight


@pytest.mark.parametrize("call, name", [
    (lambda A, G: terrain.sssp(A, 2, directed="no"), "directed"),
    (lambda A, G: terrain.sssp(A, 2, predecessors="no"), "predecessors"),
    (lambda A, G: terrain.bfs(A, 2, predecessors="false"), "predecessors"),
    (lambda A, G: terrain.diameter(G, weighted="no"), "weighted"),
    (lambda A, G: terrain.diameter(G, extremes="no"), "extremes"),
])
def test_a_true_or_false_graph_option_given_as_a_string_is_refused(call, name):
    """``directed="no"`` (a string, which is truthy) ran the directed search, and
    ``weighted="no"`` the weighted diameter, silently: refused as ``fill``'s ``epsilon``
    is. True, False, NumPy's booleans and None (the default) are taken as before, the
    searches equal SciPy's."""
    from scipy.sparse.csgraph import dijkstra

    A = sp.csr_array(np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]], np.float64))
    G = nx.Graph([(0, 1, {"weight": 5}), (1, 2, {"weight": 1})])
    with pytest.raises(InputError, match=f"{name} '(no|false)': must be True or False"):
        call(A, G)
    for directed in (None, False, np.False_, True, np.True_):
        got = terrain.sssp(A, 2, directed=directed, backend="cpu").dist
        assert np.array_equal(got, dijkstra(A, directed=bool(directed), indices=2))
    assert terrain.diameter(G, weighted=np.True_).diameter == nx.diameter(G, weight="weight")
def _utm_dem(tmp_path, z):
    """``z`` as a GeoTIFF in UTM 17N (cells of 30 m; NaN = nodata) and its Affine."""
    path = tmp_path / "dem.tif"
    gt = rasterio.Affine(30.0, 0, 500000.0, 0, -30.0, 4000000.0)
    with rasterio.open(path, "w", driver="GTiff", height=z.shape[0], width=z.shape[1],
                       count=1, dtype="float32", crs="EPSG:32617", transform=gt,
                       nodata=-9999) as dst:
        dst.write(np.where(np.isnan(z), -9999, z).astype(np.float32), 1)
    return path, gt


def test_outlets_from_a_points_file_as_the_command_line_reads_them(tmp_path):
    """``fill``/``flow`` ``outlets=`` a points file (CSV x,y in the DEM's CRS; GeoJSON in
    longitude/latitude, reprojected), as ``--outlets gauges.csv``: the run of the cells the
    points fall in (their centres placed by rasterio's Affine, sent to lon/lat by
    rasterio.warp), where the file was read as a raster ("not a grid terrain or GDAL can
    read"). A point on nodata drains nothing and is said, as the command line says it."""
    from rasterio.warp import transform
    z = dem(3, (24, 30))
    path, gt = _utm_dem(tmp_path, z)
    cells = [(0, 12), (23, 4), (10, 29)]
    xs, ys = zip(*(gt @ (c + 0.5, r + 0.5) for r, c in cells))
    csv = tmp_path / "gauges.csv"
    csv.write_text("x,y\n" + "".join(f"{x},{y}\n" for x, y in zip(xs, ys)))
    lon, lat = transform("EPSG:32617", "EPSG:4326", xs, ys)
    gj = tmp_path / "gauges.geojson"
    gj.write_text(json.dumps({"type": "MultiPoint",
                              "coordinates": [[a, b] for a, b in zip(lon, lat)]}))
    for op in (terrain.fill, terrain.flow):
        want = op(path, outlets=cells, backend="cpu")
        for f in (csv, gj, str(csv)):
            got = op(path, outlets=f, backend="cpu")
            for name in want.data_vars:
                np.testing.assert_array_equal(got[name].values, want[name].values)
    on_nodata = gt @ (5 + 0.5, 6 + 0.5)  # cell (6, 5): nodata (dem's hole)
    csv.write_text(f"x,y\n{xs[0]},{ys[0]}\n{on_nodata[0]},{on_nodata[1]}\n")
    with pytest.warns(terrain.TerrainWarning, match=r"gauges\.csv: 1 of its 2 outlet cells lie "
                      r"on the DEM's nodata and drain nothing \(the first at row 6, column 5\)"):
        got = terrain.fill(path, outlets=csv, backend="cpu")
    np.testing.assert_array_equal(got.filled.values,
                                  terrain.fill(path, outlets=cells[:1], backend="cpu").filled)


def test_sources_from_a_raster_file_as_the_command_line_reads_them(tmp_path):
    """``cost_distance(points=RASTER)``: its non-zero cells that are not nodata are the
    sources, in row-major order, as ``--sources sources.tif``, where the raster was read as
    a CSV (``sources.tif: ... expected x,y numbers``). Oracle: SciPy's Dijkstra from those
    cells on the friction graph (cells of 30 m, friction 1: the step lengths)."""
    from scipy.sparse import coo_array
    from scipy.sparse.csgraph import dijkstra
    z = np.full((12, 15), 100.0, np.float32)
    path, gt = _utm_dem(tmp_path, z)
    src = np.zeros(z.shape, np.float32)
    src[9, 2], src[1, 11] = 4, 1
    spath = tmp_path / "sources.tif"
    with rasterio.open(path) as d:
        prof = d.profile
    with rasterio.open(spath, "w", **{**prof, "nodata": None}) as dst:
        dst.write(src, 1)
    got = terrain.cost_distance(path, points=spath, cost="friction",
                                friction=np.ones(z.shape, np.float32), backend="cpu")
    assert (got.attrs["source_rows"], got.attrs["source_cols"]) == ([1, 9], [11, 2])
    R, C = z.shape
    rows, cols, w = [], [], []
    for r in range(R):
        for c in range(C):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                if 0 <= r + dr < R and 0 <= c + dc < C:
                    rows.append(r * C + c)
                    cols.append((r + dr) * C + c + dc)
                    w.append(30.0 * np.hypot(dr, dc))
    g = coo_array((w, (rows, cols)), shape=(R * C, R * C)).tocsr()
    want, _, nearest = dijkstra(g, directed=False, indices=[1 * C + 11, 9 * C + 2],
                                min_only=True, return_predecessors=True)
    np.testing.assert_allclose(got.distance.ravel(), want, rtol=1e-12)


def test_a_directed_search_asked_by_a_string_is_refused_not_run():
    """``sssp(A, s, directed="no")`` ran the directed search (a string is truthy): refused.
    The undirected search's distances are SciPy's ``dijkstra(directed=False)``."""
    sp = pytest.importorskip("scipy.sparse")
    from scipy.sparse.csgraph import dijkstra
    A = sp.csr_array(np.triu(np.ones((4, 4)), 1))  # arcs i -> j > i only
    with pytest.raises(InputError, match="^directed 'no': must be True or False"):
        terrain.sssp(A, 3, directed="no", backend="cpu")
    np.testing.assert_array_equal(terrain.sssp(A, 3, directed=np.False_, backend="cpu").dist,
                                  dijkstra(A, directed=False, indices=3))


def test_stops_from_a_file_as_the_command_line_reads_them(tmp_path):
    """``cost_distance(stops=FILE)``: points (a CSV of x,y) or a raster's non-zero cells, as
    ``--stops FILE``, where only cells were taken (a path was read as a list of characters).
    Oracle: the unstopped run, whose distance at the stop cell is the stop distance and
    whose distances the stopped run keeps up to it; a stop on nodata names its line."""
    z = dem(4, (20, 26))
    path, gt = _utm_dem(tmp_path, z)
    full = terrain.cost_distance(path, [(2, 3)], backend="cpu")
    stop = (12, 20)
    x, y = gt @ (stop[1] + 0.5, stop[0] + 0.5)
    csv = tmp_path / "stops.csv"
    csv.write_text(f"x,y\n{x},{y}\n")
    raster = tmp_path / "stops.tif"
    mask = np.zeros(z.shape, np.float32)
    mask[stop] = 1
    with rasterio.open(path) as d:
        prof = d.profile
    with rasterio.open(raster, "w", **{**prof, "nodata": None}) as dst:
        dst.write(mask, 1)
    for given in (csv, raster, [stop]):
        got = terrain.cost_distance(path, [(2, 3)], stops=given, backend="cpu")
        assert (got.attrs["stop_rows"], got.attrs["stop_cols"]) == ([12], [20])
        assert got.attrs["stop_distance"] == full.distance[stop]
        kept = ~np.isnan(got.distance)
        assert kept.sum() < (~np.isnan(full.distance)).sum()
        np.testing.assert_array_equal(got.distance[kept], full.distance[kept])
        assert np.nanmax(got.distance) <= full.distance[stop]
    on_nodata = gt @ (5 + 0.5, 6 + 0.5)  # cell (6, 5): the DEM's hole
    csv.write_text(f"x,y\n{x},{y}\n{on_nodata[0]},{on_nodata[1]}\n")
    with pytest.raises(InputError, match=r"stop 1 \(.*stops\.csv:3\) at cell \(row, col\) = "
                                         r"\(6, 5\) is on nodata"):
        terrain.cost_distance(path, [(2, 3)], stops=csv, backend="cpu")


def test_least_cost_paths_of_an_api_result_are_the_path_commands(tmp_path, capsys):
    """``least_cost_paths`` on :func:`terrain.cost_distance`'s arrays (the command line's
    ``path``, which only a store could feed): each path a chain of the grid's arcs from its
    source to the target whose costs sum to the target's distance, which NetworkX's Dijkstra
    on the same graph (absdiff: |dz| a step, 8 neighbours) gives; the same cells as
    ``terrain path STORE --to-cell`` writes for the store of the same run."""
    nx = pytest.importorskip("networkx")
    from cli import run_main
    from terrain.grid.cost_outputs import least_cost_paths
    z = dem(6, (14, 17))
    r = terrain.cost_distance(z, [(1, 1), (12, 15)], backend="cpu")
    targets = [(13, 0), (0, 16), (7, 8)]
    paths = least_cost_paths(r.backlink, r.distance, r.allocation, targets)
    G = nx.Graph()
    R, C = z.shape
    for a in range(R):
        for b in range(C):
            for da_, db in ((0, 1), (1, 0), (1, 1), (1, -1)):
                u, v = (a, b), (a + da_, b + db)
                if 0 <= v[0] < R and 0 <= v[1] < C and not np.isnan(z[u]) and not np.isnan(z[v]):
                    G.add_edge(u, v, weight=abs(float(z[u]) - float(z[v])))
    want = nx.multi_source_dijkstra_path_length(G, {(1, 1), (12, 15)})
    for t, p in zip(targets, paths):
        assert p["cells"][-1] == t and p["cells"][0] in ((1, 1), (12, 15))
        assert p["source"] == [(1, 1), (12, 15)].index(p["cells"][0])
        steps = sum(G.edges[u, v]["weight"] for u, v in zip(p["cells"], p["cells"][1:]))
        assert p["cost"] == pytest.approx(steps, abs=1e-3) and p["cost"] == pytest.approx(
            want[t], abs=1e-3)
    with pytest.raises(InputError, match=r"^target 0 at cell \(row, col\) = \(6, 5\) is not "
                                         "reached from any source"):
        least_cost_paths(r.backlink, r.distance, r.allocation, [(6, 5)])  # the DEM's hole
    with pytest.raises(InputError, match=r"^target 1 at cell \(row, col\) = \(-1, 0\) is not "
                                         r"a cell of the 14 x 17 grid"):
        least_cost_paths(r.backlink, r.distance, r.allocation, [(0, 0), (-1, 0)])
    # the command line's path of the same run's store: the same cells
    path = tmp_path / "dem.asc"
    with open(path, "w") as f:
        f.write(f"ncols {C}\nnrows {R}\nxllcorner 0\nyllcorner 0\ncellsize 1\n"
                "NODATA_value -9999\n")
        np.savetxt(f, np.where(np.isnan(z), -9999, z), fmt="%.9g")
    store = tmp_path / "c.zarr"
    assert run_main(capsys, "cost-distance", path, "--source-cell", "1,1", "--source-cell",
                    "12,15", "-o", store, "--backend", "cpu")[0] == 0
    out = tmp_path / "p.gpkg"
    ends = [a for t in targets for a in ("--to-cell", f"{t[0]},{t[1]}")]
    assert run_main(capsys, "path", store, *ends, "-o", out, scheduler=None)[0] == 0
    from terrain.io.points import ogr_lines
    lines, costs, _ = ogr_lines(out)
    for line, p in zip(lines, paths):  # cell centres of the grid at (0, 0), cells of 1
        assert [(R - 0.5 - y, x - 0.5) for x, y in line.tolist()] == p["cells"]


def test_an_outlets_raster_on_its_own_grid_is_read_as_the_command_line_reads_it(tmp_path,
                                                                               capsys):
    """``fill(dem, outlets="coarse.tif")`` of a raster with cells twice the DEM's: its
    non-zero cells mapped through their centres, as ``fill --outlets coarse.tif`` maps them,
    where it was refused (``150 x 200 cells, the DEM ...``). Oracle: the run from the cells
    rasterio's Affine puts those centres in, and the command line's store."""
    from cli import run_main
    z = dem(7, (24, 30))
    path, gt = _utm_dem(tmp_path, z)
    coarse = np.zeros((12, 15), np.float32)
    coarse[0, 7] = coarse[11, 2] = 1
    cgt = rasterio.Affine(60.0, 0, 500000.0, 0, -60.0, 4000000.0)
    cpath = tmp_path / "coarse.tif"
    with rasterio.open(cpath, "w", driver="GTiff", height=12, width=15, count=1,
                       dtype="float32", crs="EPSG:32617", transform=cgt) as dst:
        dst.write(coarse, 1)
    cells = [tuple(int(v) for v in rasterio.transform.rowcol(gt, *(cgt @ (c + 0.5, r + 0.5))))
             for r, c in ((0, 7), (11, 2))]
    assert cells == [(1, 15), (23, 5)]  # the centre of a coarse cell: a corner of four
    for op in (terrain.fill, terrain.flow):
        got, want = (op(path, outlets=o, backend="cpu") for o in (cpath, cells))
        for name in want.data_vars:
            np.testing.assert_array_equal(got[name].values, want[name].values)
    out = tmp_path / "c.fill.zarr"
    assert run_main(capsys, "fill", path, "--outlets", cpath, "-o", out, "--backend", "cpu")[0] == 0
    import zarr
    np.testing.assert_array_equal(np.asarray(zarr.open_group(out, mode="r")["filled"][:]),
                                  terrain.fill(path, outlets=cpath, backend="cpu").filled.values)


def test_flow_of_a_fill_store_takes_its_filled_layer_as_the_command_line_does(tmp_path,
                                                                            capsys):
    """``terrain.flow("dem.fill.zarr")`` of an epsilon fill's store: its ``filled`` layer,
    as ``terrain flow dem.fill.zarr`` takes it, where the store's elevation was filled again
    (flats routed anew: other directions in thousands of cells of the sample). Oracles: the
    command line's store, and the flow certificate on the epsilon-filled elevations; a fill
    that kept depressions is refused as the command refuses it."""
    import zarr
    from cli import run_main
    from terrain.verify import verify_flow
    z = np.round(dem(8, (30, 36)) / 25) * 25  # coarse steps: flats to route
    path, _ = _utm_dem(tmp_path, z)
    store, flowed = tmp_path / "e.fill.zarr", tmp_path / "e.flow.zarr"
    assert run_main(capsys, "fill", path, "--epsilon", "-o", store, "--backend", "cpu")[0] == 0
    assert run_main(capsys, "flow", store, "-o", flowed, "--backend", "cpu")[0] == 0
    got = terrain.flow(store, backend="cpu")
    want = zarr.open_group(flowed, mode="r")
    for name in ("filled", "direction", "accumulation"):
        np.testing.assert_array_equal(got[name].values, np.asarray(want[name][:]))
    eps = np.asarray(zarr.open_group(store, mode="r")["filled"][:])
    np.testing.assert_array_equal(got.filled.values, eps)
    assert verify_flow(eps, got.direction.values, got.accumulation.values,
                       cellsize=(30.0, 30.0)).ok
    assert not np.array_equal(got.direction.values, terrain.flow(path, backend="cpu").direction)
    kept = tmp_path / "k.fill.zarr"
    assert run_main(capsys, "fill", path, "--min-area", "2", "-o", kept, "--backend", "cpu")[0] == 0
    with pytest.raises(InputError, match="its fill kept the depressions of at least a minimum "
                                         "area unfilled"):
        terrain.flow(kept, backend="cpu")


def test_layers_say_what_they_hold_as_the_stores_layers_do(tmp_path, capsys):
    """Each layer of ``terrain.fill`` and ``terrain.flow`` carries the ``meaning`` its
    store's layer carries (``xr.open_zarr`` of the command's output), where the API's flow
    said it under ``description`` and the fill in other words."""
    import zarr
    from cli import run_main
    path, _ = _utm_dem(tmp_path, dem(9, (12, 14)))
    for command, op in (("fill", terrain.fill), ("flow", terrain.flow)):
        out = tmp_path / f"d.{command}.zarr"
        assert run_main(capsys, command, path, "-o", out, "--backend", "cpu")[0] == 0
        store, ds = zarr.open_group(out, mode="r"), op(path, backend="cpu")
        for name in ds.data_vars:
            assert ds[name].attrs["meaning"] == store[name].attrs["meaning"], name
            assert "description" not in ds[name].attrs
