"""``terrain cost-distance`` and ``terrain path`` end to end: outputs against scipy, bad input."""

import json
import shutil
import subprocess

import numpy as np
import pytest
import zarr

from cli import gdal_lines, run_cli, run_main
from oracles import DR, DC, csr_graph, oracle_cost, oracle_distance
from grids import CS, XLL, YLL, random_dem, write_asc


def xy(row, col, rows):
    """Map coordinates of a cell centre (ESRI grid: yll is the lower edge)."""
    return XLL + (col + 0.5) * CS, YLL + (rows - row - 0.5) * CS


@pytest.fixture
def dem(tmp_path):
    return random_dem(tmp_path, 0, (45, 37), 30, [(3, 4), (40, 30)], 5)


def test_cost_distance_matches_scipy_and_path_walks_back(dem, tmp_path):
    z, path = dem
    out = tmp_path / "out.zarr"
    x, y = xy(40, 30, z.shape[0])
    rc, so, se = run_cli("cost-distance", path, "--source-cell", "3,4", "--source", f"{x},{y}",
                         "-o", out, "--tile", 16, "--json")
    assert rc == 0, se
    summary = json.loads(so)
    # sources are numbered: --source points first, then --source-cell cells, then --sources
    srcs = [(40, 30), (3, 4)]
    assert [(s["row"], s["col"]) for s in summary["sources"]] == srcs
    assert summary["route"] == "in-core" and summary["cost"] == "absdiff"
    g = zarr.open_group(str(out), mode="r")
    dist = np.asarray(g["distance"][:])
    ref = oracle_distance(csr_graph(z), z.shape, srcs)
    np.testing.assert_array_equal(dist, ref)
    assert summary["reached_cells"] == int(np.count_nonzero(~np.isnan(ref)))
    assert summary["max_distance"] == np.nanmax(ref)
    assert g["distance"].chunks == (16, 16) and g["backlink"].dtype == np.uint8
    assert g["allocation"].dtype == np.int32
    assert (np.asarray(g["backlink"][:])[np.isnan(ref)] == 255).all()
    np.testing.assert_array_equal(np.asarray(g["elevation"][:]), z)
    assert np.asarray(g["x"][:])[0] == XLL + CS / 2

    # least-cost paths to three points (the DEM has no CRS: FlatGeobuf and GeoPackage, in
    # the grid's coordinates; GeoJSON, which is longitude/latitude, is refused)
    targets = [(20, 20), (44, 0), (40, 30)]
    targets = [t for t in targets if not np.isnan(ref[t])]
    geo = tmp_path / "p.fgb"
    args = []
    for r, c in targets:
        args += ["--to", "%r,%r" % xy(r, c, z.shape[0])]
    rc, so, se = run_cli("path", out, *args, "-o", geo, scheduler=None)
    assert rc == 0, se
    lines, fields, crs = gdal_lines(geo)
    assert crs is None and len(lines) == len(targets)
    alloc = np.asarray(g["allocation"][:])
    for i, ((r, c), coords) in enumerate(zip(targets, lines)):
        cells = [(round(z.shape[0] - (yy - YLL) / CS - 0.5), round((xx - XLL) / CS - 0.5))
                 for xx, yy in coords]
        if cells[0] == cells[-1] and len(cells) == 2:
            cells = cells[:1]
        assert cells[-1] == (r, c) and cells[0] in srcs
        assert fields["source"][i] == alloc[r, c] == srcs.index(cells[0])
        total = 0.0
        for (ra, ca), (rb, cb) in zip(cells, cells[1:]):
            assert (rb - ra, cb - ca) in list(zip(DR[:8], DC[:8]))
            total += oracle_cost("absdiff", z[ra:ra + 1, ca], z[rb:rb + 1, cb], None,
                                 rb - ra, cb - ca)[0]
        assert total == fields["cost"][i] == dist[r, c]

    # the same ends given as cells (after the points), as a GeoPackage: the same lines
    args = [a for r, c in targets for a in ("--to-cell", f"{r},{c}")]
    rc, so, se = run_cli("path", out, *args, "-o", tmp_path / "q.gpkg", scheduler=None)
    assert rc == 0, se
    by_cell, back, crs = gdal_lines(tmp_path / "q.gpkg")
    assert crs is None and list(back) == ["cost", "source", "to", "cells"]
    assert [a.tolist() for a in by_cell] == [a.tolist() for a in lines]
    assert list(back["to"]) == [f"cell {r},{c}" for r, c in targets]

    # and from a points file (x,y in the grid's coordinates: the store has no CRS), after
    # an end given as a cell: the same lines, named by the file and their number in it
    t = tmp_path / "t.csv"
    t.write_text("x,y\n" + "".join("%r,%r\n" % xy(r, c, z.shape[0]) for r, c in targets[1:]))
    rc, so, se = run_cli("path", out, "--to-cell", "%d,%d" % targets[0], "--targets", t, "-o",
                         tmp_path / "r.gpkg", scheduler=None)
    assert rc == 0 and se == "", se
    by_file, back, _ = gdal_lines(tmp_path / "r.gpkg")
    assert [a.tolist() for a in by_file] == [a.tolist() for a in lines]
    assert list(back["to"]) == ["cell %d,%d" % targets[0]] + [
        f"t.csv {n}" for n in range(1, len(targets))]


def test_friction_cost_and_sources_file(dem, tmp_path):
    z, path = dem
    rng = np.random.default_rng(1)
    fr = rng.uniform(1, 3, z.shape).round(2).astype(np.float32)
    fr[10, :20] = np.nan  # a friction barrier
    fpath = write_asc(tmp_path / "friction.asc", fr)
    csv = tmp_path / "src.csv"
    csv.write_text("x,y\n%r,%r\n" % xy(3, 4, z.shape[0]))
    out = tmp_path / "f.zarr"
    rc, so, se = run_cli("cost-distance", path, "--sources", csv, "--cost", "friction",
                         "--friction", fpath, "--connectivity", 16, "-o", out, "--tile", 32)
    assert rc == 0, se
    assert "reached" in so
    g = zarr.open_group(str(out), mode="r")
    fz = np.where(np.isnan(z), np.nan, np.asarray(g["friction"][:]))
    fz[np.isnan(fr)] = np.nan
    ref = oracle_distance(csr_graph(np.zeros_like(z) + np.where(np.isnan(fz), np.nan, 0),
                                    "friction", fz, 16, CS, CS), z.shape, [(3, 4)])
    np.testing.assert_allclose(np.asarray(g["distance"][:]), ref, rtol=1e-12, equal_nan=True)
    assert not list(tmp_path.glob(".*friction*"))  # the friction ingest left nothing


def test_an_input_that_is_its_own_friction_gives_a_copys_bits(tmp_path):
    """A friction surface given as the input and as --friction is read and ingested once (one
    array for both) and gives the bits of the run given a copy of it as the friction."""
    rng = np.random.default_rng(4)
    fr = rng.uniform(1, 3, (40, 33)).round(2).astype(np.float32)
    fr[7, 3:25] = np.nan
    path = write_asc(tmp_path / "fr.asc", fr)
    shutil.copy(path, tmp_path / "copy.asc")
    outs = {}
    for name, friction in (("same", path), ("copy", tmp_path / "copy.asc")):
        outs[name] = tmp_path / f"{name}.zarr"
        rc, _, se = run_cli("cost-distance", path, "--source-cell", "20,16", "--cost",
                            "friction", "--friction", friction, "-o", outs[name], "--tile", 16)
        assert rc == 0, se
    a, b = (zarr.open_group(str(outs[k]), mode="r") for k in ("same", "copy"))
    for layer in ("distance", "allocation", "backlink", "friction", "elevation"):
        assert np.array_equal(np.asarray(a[layer][:]), np.asarray(b[layer][:]), equal_nan=True)
    assert np.isfinite(np.asarray(a["distance"][:])).sum() > 1000
    # the same run's friction layer is its elevation layer's shard files linked, under the
    # friction's attributes
    elevation, friction = outs["same"] / "elevation", outs["same"] / "friction"
    shards = sorted(p.relative_to(elevation) for p in elevation.rglob("*")
                    if p.is_file() and p.name.isdigit())
    assert shards and all((elevation / p).stat().st_ino == (friction / p).stat().st_ino
                          for p in shards)
    assert a["friction"].attrs["long_name"] == "friction" == b["friction"].attrs["long_name"]
    rc, so, se = run_cli("verify", outs["same"], scheduler=None)
    assert rc == 0, se


def test_geojson_and_raster_sources_and_max_cost(dem, tmp_path):
    z, path = dem
    gj = tmp_path / "s.geojson"
    gj.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": list(xy(40, 30, 45))},
         "properties": {}}]}))
    srcr = np.zeros(z.shape, np.float32)
    srcr[3, 4] = 1
    rpath = write_asc(tmp_path / "src.asc", srcr)
    out = tmp_path / "m.zarr"
    rc, so, se = run_cli("cost-distance", path, "--sources", rpath, "--max-cost", 40,
                         "--start-cost", 2, "-o", out, "--json", "--geotiff-dir", tmp_path / "tif")
    assert rc == 0, se
    s = json.loads(so)
    assert s["sources"][0]["row"] == 3 and s["sources"][0]["start_cost"] == 2.0
    d = np.asarray(zarr.open_group(str(out), mode="r")["distance"][:])
    ref = oracle_distance(csr_graph(z), z.shape, [(3, 4)], [2.0])
    ref[ref > 40] = np.nan
    np.testing.assert_array_equal(d, ref)
    import rasterio
    with rasterio.open(tmp_path / "tif" / "distance.tif") as ds:
        np.testing.assert_array_equal(ds.read(1), d)
    out2 = tmp_path / "g.zarr"
    rc, so, se = run_cli("cost-distance", path, "--sources", gj, "-o", out2, "--json")
    assert rc == 0, se
    assert [(s["row"], s["col"]) for s in json.loads(so)["sources"]] == [(40, 30)]
    import struct

    import pyogrio.raw  # a GeoPackage of the point, without a CRS: the raster's
    gpkg = tmp_path / "s.gpkg"
    point = np.array([struct.pack("<BI2d", 1, 1, *xy(40, 30, 45))], object)
    pyogrio.raw.write(str(gpkg), point, [], [], driver="GPKG", geometry_type="Point")
    rc, so, se = run_cli("cost-distance", path, "--sources", gpkg, "-o", tmp_path / "k.zarr",
                         "--json")
    assert rc == 0, se
    assert [(s["row"], s["col"]) for s in json.loads(so)["sources"]] == [(40, 30)]


@pytest.mark.parametrize("algorithm", ["in-core", "blocked", "tiled"])
def test_start_values_from_the_sources_raster(dem, tmp_path, algorithm):
    """``--start-values``: every non-nodata cell of the sources raster starts at its value
    (0 included), a source cell given beside them at ``--start-cost``."""
    z, path = dem
    srcr = np.full(z.shape, np.nan, np.float32)
    srcr[3, 4], srcr[40, 30], srcr[20, 20] = 0.0, 37.5, 4.0
    srcr[np.isnan(z)] = np.nan  # sources on cells of the DEM
    rpath = write_asc(tmp_path / "src.asc", srcr)
    out = tmp_path / "v.zarr"
    rc, so, se = run_cli("cost-distance", path, "--sources", rpath, "--start-values",
                         "--source-cell", "10,10", "--start-cost", 1.5, "--route", algorithm,
                         "--tile", 16, "-o", out, "--json", "--backend", "cpu")
    assert rc == 0, se
    got = {(s["row"], s["col"]): s["start_cost"] for s in json.loads(so)["sources"]}
    assert got == {(10, 10): 1.5, (3, 4): 0.0, (20, 20): 4.0, (40, 30): 37.5}
    ref = oracle_distance(csr_graph(z), z.shape, list(got), list(got.values()))
    d = np.asarray(zarr.open_group(str(out), mode="r")["distance"][:])
    if algorithm == "tiled":  # sums in another order
        np.testing.assert_allclose(d, ref, rtol=1e-12, equal_nan=True)
    else:
        np.testing.assert_array_equal(d, ref)


def test_start_values_and_stop_points_through_the_api_are_the_commands(dem, tmp_path):
    """``terrain.cost_distance(path, cells, points=RASTER, start_values=True,
    stop_points=[(x, y)])`` is ``cost-distance --source-cell ... --sources RASTER
    --start-values --stop X,Y``: the same sources, start costs, stop cells and layers (the
    raster as a file, and as an array on the DEM's grid). Oracle: SciPy's Dijkstra from a
    super source with arcs of the start costs, cut beyond the stop's distance."""
    import terrain
    z, path = dem
    srcr = np.full(z.shape, np.nan, np.float32)
    srcr[3, 4], srcr[40, 30], srcr[20, 20] = 0.0, 37.5, 4.0
    rpath = write_asc(tmp_path / "src.asc", srcr)
    stop = (30, 8)
    assert not np.isnan(z[stop])
    x, y = xy(*stop, z.shape[0])
    out = tmp_path / "v.zarr"
    rc, so, se = run_cli("cost-distance", path, "--source-cell", "10,10", "--start-cost", 1.5,
                         "--sources", rpath, "--start-values", "--stop", f"{x},{y}", "-o", out,
                         "--json", "--backend", "cpu")
    assert rc == 0, se
    summary = json.loads(so)
    g = zarr.open_group(str(out), mode="r")
    sources = [(10, 10), (3, 4), (20, 20), (40, 30)]
    spent = [1.5, 0.0, 4.0, 37.5]
    ref = oracle_distance(csr_graph(z), z.shape, sources, spent)
    far = ref[stop]
    ref[ref > far] = np.nan
    for raster in (rpath, srcr):
        got = terrain.cost_distance(path, [(10, 10)], points=raster, start_values=True,
                                    start_costs=1.5, stop_points=[(x, y)], backend="cpu")
        assert list(zip(got.attrs["source_rows"], got.attrs["source_cols"])) == sources
        assert got.attrs["start_costs"] == spent == [s["start_cost"]
                                                     for s in summary["sources"]]
        assert (got.attrs["stop_rows"], got.attrs["stop_cols"]) == ([stop[0]], [stop[1]])
        assert got.attrs["stop_distance"] == summary["stop_distance"] == far
        for name in ("distance", "allocation", "backlink"):
            np.testing.assert_array_equal(got[name], np.asarray(g[name][:]), err_msg=name)
        np.testing.assert_array_equal(got.distance, ref)


def test_stop_cells_end_the_run_and_verify(dem, tmp_path):
    """``--stop``/``--stop-cell``/``--stops``: cells beyond the farthest stop unreached (the
    scipy distances cut there), recorded, and ``verify`` accepts the store."""
    z, path = dem
    csv = tmp_path / "stops.csv"
    csv.write_text("x,y\n%r,%r\n" % xy(20, 12, z.shape[0]))
    out = tmp_path / "s.zarr"
    x, y = xy(10, 9, z.shape[0])
    for cell in ((10, 9), (20, 12), (12, 5)):
        assert not np.isnan(z[cell])
    rc, so, se = run_cli("cost-distance", path, "--source-cell", "3,4", "--stop", f"{x},{y}",
                         "--stop-cell", "12,5", "--stops", csv, "-o", out, "--json",
                         "--backend", "cpu")
    assert rc == 0, se
    s = json.loads(so)
    assert [(t["row"], t["col"]) for t in s["stops"]] == [(10, 9), (12, 5), (20, 12)]
    ref = oracle_distance(csr_graph(z), z.shape, [(3, 4)])
    far = max(ref[10, 9], ref[12, 5], ref[20, 12])
    assert s["stop_distance"] == far
    ref[ref > far] = np.nan
    g = zarr.open_group(str(out), mode="r")
    np.testing.assert_array_equal(np.asarray(g["distance"][:]), ref)
    assert g.attrs["cost_model"]["max_cost"] == far
    rc, so, se = run_cli("verify", out, scheduler=None)
    assert rc == 0, so + se


@pytest.mark.skipif(shutil.which("grass") is None, reason="needs GRASS GIS (grass on PATH)")
def test_start_values_equal_grass_r_cost_r(tmp_path):
    """Against GRASS ``r.cost -r`` (start costs from the start raster): friction costs on a
    1 m grid (r.cost counts in cells) give the same distances."""
    import rasterio
    rng = np.random.default_rng(5)
    fr = (1 + rng.random((40, 50))).astype(np.float32)
    start = np.full(fr.shape, -9999, np.float32)
    start[5, 5], start[30, 40], start[20, 10] = 0, 12.25, 3
    kw = dict(driver="GTiff", height=40, width=50, count=1, dtype="float32", crs="EPSG:32617",
              transform=rasterio.Affine(1, 0, 1000, 0, -1, 2000), nodata=-9999)
    for name, a in (("fr", fr), ("start", start)):
        with rasterio.open(tmp_path / f"{name}.tif", "w", **kw) as dst:
            dst.write(a, 1)
    subprocess.run(["grass", "-c", str(tmp_path / "fr.tif"), str(tmp_path / "loc"), "-e"],
                   check=True, capture_output=True)
    script = ("r.in.gdal -o input=fr.tif output=fr --q && r.in.gdal -o input=start.tif "
              "output=start --q && g.region raster=fr && r.cost -r input=fr start_raster=start "
              "output=cost --q && r.out.gdal input=cost output=grass.tif type=Float64 --q")
    subprocess.run(["grass", str(tmp_path / "loc" / "PERMANENT"), "--exec", "bash", "-c",
                    script], check=True, capture_output=True, cwd=tmp_path)
    out = tmp_path / "c.zarr"
    rc, so, se = run_cli("cost-distance", tmp_path / "fr.tif", "--friction", tmp_path / "fr.tif",
                         "--sources", tmp_path / "start.tif", "--start-values", "-o", out,
                         "--backend", "cpu")
    assert rc == 0, se
    with rasterio.open(tmp_path / "grass.tif") as ds:
        grass = ds.read(1)
    d = np.asarray(zarr.open_group(str(out), mode="r")["distance"][:])
    np.testing.assert_allclose(d, grass, rtol=1e-12)


@pytest.mark.parametrize("case", ["nodata", "outside", "cell-outside", "shape", "georef",
                                  "negative", "max-cost", "no-friction", "exists",
                                  "geotiff-file", "geotiff-exists", "start-values-points",
                                  "start-value-negative", "stop-blocked", "stop-nodata",
                                  "memory-in-core", "memory-tiled", "memory-under-a-byte",
                                  "memory-beyond-machines"])
def test_bad_input_one_line_exit_2_nothing_written(dem, tmp_path, case):
    z, path = dem
    out = tmp_path / "bad.zarr"
    nan_cell = tuple(int(v) for v in np.argwhere(np.isnan(z))[0])
    args = ["--source-cell", "3,4"]
    if case == "nodata":
        args = ["--source-cell", "%d,%d" % nan_cell]
    elif case == "outside":
        args = ["--source", f"{XLL - 5},{YLL + 5}"]
    elif case == "cell-outside":
        args = ["--source-cell", "45,0"]
    elif case == "shape":
        args += ["--cost", "friction", "--friction",
                 write_asc(tmp_path / "f.asc", np.ones((44, 37), np.float32))]
    elif case == "georef":
        args += ["--cost", "friction", "--friction",
                 write_asc(tmp_path / "f.asc", np.ones(z.shape, np.float32), xll=XLL + 10)]
    elif case == "negative":
        f = np.ones(z.shape, np.float32)
        f[30, 30] = -1
        args += ["--cost", "friction", "--friction", write_asc(tmp_path / "f.asc", f)]
    elif case == "max-cost":
        args += ["--max-cost", "0"]
    elif case == "stop-blocked":  # one queue to stop: the in-core algorithm's
        args += ["--stop-cell", "5,5", "--route", "blocked"]
    elif case == "memory-in-core":  # a budget with nothing to choose or bound
        args += ["--route", "in-core", "--memory", "100MB"]
    elif case == "memory-tiled":  # the tiled algorithm's memory is its tiles': not bounded
        args += ["--route", "tiled", "--memory", "100MB"]
    elif case == "memory-under-a-byte":  # int() made 0.5B a budget of 0 bytes
        args += ["--route", "blocked", "--memory", "0.5B"]
    elif case == "memory-beyond-machines":
        args += ["--route", "blocked", "--memory", "1e20GB"]
    elif case == "stop-nodata":
        args += ["--stop-cell", "%d,%d" % nan_cell]
    elif case == "start-values-points":  # values need a raster of them
        (tmp_path / "s.csv").write_text("x,y\n%r,%r\n" % xy(3, 4, z.shape[0]))
        args = ["--sources", tmp_path / "s.csv", "--start-values"]
    elif case == "start-value-negative":
        srcr = np.full(z.shape, np.nan, np.float32)
        srcr[3, 4] = -2
        args = ["--sources", write_asc(tmp_path / "s.asc", srcr), "--start-values"]
    elif case == "no-friction":
        args += ["--cost", "friction"]
    elif case == "exists":
        out.mkdir()
    elif case == "geotiff-file":  # --geotiff-dir names a file
        (tmp_path / "tif").write_text("x")
        args += ["--geotiff-dir", tmp_path / "tif"]
    elif case == "geotiff-exists":  # one of the GeoTIFFs is there already
        (tmp_path / "tif").mkdir()
        (tmp_path / "tif" / "allocation.tif").write_text("x")
        args += ["--geotiff-dir", tmp_path / "tif"]
    rc, so, se = run_cli("cost-distance", path, *args, "-o", out)
    assert rc == 2
    lines = se.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("terrain: "), se
    assert "Traceback" not in se
    if case == "start-value-negative":
        assert "s.asc: start cost -2.0 at cell (row, col) = (3, 4)" in lines[0], se
    if case == "memory-tiled":
        assert lines[0].endswith("bounds the blocked one; this run is tiled"), se
    if case in ("memory-under-a-byte", "memory-beyond-machines"):
        assert "a budget from 1 kB to 1 EiB" in lines[0], se
    if case.startswith("geotiff"):  # the run and its dry run refuse alike
        want = ("tif: exists and is not a directory" if case == "geotiff-file"
                else "allocation.tif")
        assert want in lines[0], se
        rc, so, dry = run_cli("cost-distance", path, *args, "-o", out, "--dry-run")
        assert rc == 2 and dry == se, dry
        assert (tmp_path / "tif").is_file() or [p.name for p in (tmp_path / "tif").iterdir()] \
            == ["allocation.tif"]
    if case == "exists":
        assert list(out.iterdir()) == []
    else:
        assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_path_bad_input(dem, tmp_path):
    z, path = dem
    out = tmp_path / "c.zarr"
    rc, _, se = run_cli("cost-distance", path, "--source-cell", "3,4", "--max-cost", 5, "-o", out)
    assert rc == 0, se
    d = np.asarray(zarr.open_group(str(out), mode="r")["distance"][:])
    far = tuple(int(v) for v in np.argwhere(np.isnan(d) & ~np.isnan(z))[0])
    for ends in (["--to", "%r,%r" % xy(*far, z.shape[0])], ["--to", f"{XLL - 1},{YLL}"],
                 ["--to-cell", f"{z.shape[0]},0"], ["--targets", tmp_path / "none.csv"], []):
        rc, _, se = run_cli("path", out, *ends, "-o", tmp_path / "p.gpkg", scheduler=None)
        assert rc == 2 and se.startswith("terrain: ") and len(se.strip().splitlines()) == 1, se
        assert not (tmp_path / "p.gpkg").exists()
    assert "no path ends given" in se
    # GeoJSON is longitude/latitude (RFC 7946): a store without a CRS has none to give (its
    # "unknown" crs member read as WGS 84 by GDAL), refused before any path is walked
    rc, _, se = run_cli("path", out, "--to-cell", "3,5", "-o", tmp_path / "p.geojson",
                        scheduler=None)
    assert rc == 2 and se == (f"terrain: {tmp_path / 'p.geojson'}: GeoJSON positions are "
                              "longitude/latitude (RFC 7946), and the paths have no CRS to "
                              "reproject from: write a GeoPackage (.gpkg) or FlatGeobuf (.fgb), "
                              "which keep the grid's coordinates, or give the DEM a CRS\n"), se
    assert not (tmp_path / "p.geojson").exists()
    rc, _, se = run_cli("path", out, "--to-cell", "3,5", "-o", tmp_path / "p.shp",
                        scheduler=None)
    assert rc == 2 and "p.shp: paths are written as GeoJSON (.geojson), GeoPackage" in se, se




def test_lon_lat_given_to_a_raster_without_a_crs_is_not_told_to_be_reprojected(dem, tmp_path,
                                                                               capsys):
    """``--source``, ``--stop`` and ``path --to`` that look like longitude/latitude, on a
    DEM GDAL reads without a CRS: the hint offered files whose points are reprojected, which
    a raster without a CRS cannot take (a sources file says so already)."""
    import rasterio
    z, path = dem
    with rasterio.open(path) as ds:
        assert ds.crs is None
    lon_lat = "-79.6888,35.2927"
    out = tmp_path / "c.zarr"
    no_crs = ("(it looks like longitude/latitude, and the raster has no CRS to reproject it "
              "into: give points in the raster's own coordinates)\n")
    for args in (["--source", lon_lat], ["--source-cell", "3,4", "--stop", lon_lat]):
        rc, _, se = run_main(capsys, "cost-distance", path, *args, "-o", out)
        assert rc == 2 and se.endswith(no_crs), se
    rc, _, se = run_main(capsys, "cost-distance", path, "--source-cell", "3,4", "-o", out)
    assert rc == 0, se
    rc, _, se = run_main(capsys, "path", out, "--to", lon_lat, "-o", tmp_path / "p.gpkg",
                         scheduler=None)
    assert rc == 2 and se.endswith(no_crs), se



def test_paths_in_a_local_crs_are_refused_as_geojson_and_kept_in_a_geopackage(tmp_path, capsys):
    """A DEM in a local (engineering) CRS, which has no longitude/latitude: ``path -o
    p.geojson`` was a traceback from PROJ; now one line, nothing written, and a GeoPackage
    keeps that CRS (pyproj, the oracle, finds no way to WGS 84 either)."""
    import rasterio
    from pyproj import CRS, Transformer
    from pyproj.exceptions import ProjError
    local = CRS.from_wkt('LOCAL_CS["site grid",UNIT["metre",1],AXIS["Easting",EAST],'
                         'AXIS["Northing",NORTH]]')
    with pytest.raises(ProjError):
        Transformer.from_crs(local, "EPSG:4326", always_xy=True)
    transform = rasterio.Affine(30.0, 0.0, 1000.0, 0.0, -20.0, 2000.0)
    dem = tmp_path / "site.tif"
    with rasterio.open(dem, "w", driver="GTiff", width=6, height=5, count=1, dtype="float32",
                       crs=local.to_wkt(), transform=transform) as ds:
        ds.write(np.arange(30, dtype=np.float32).reshape(5, 6), 1)
    out = tmp_path / "site.cost.zarr"
    rc, _, se = run_main(capsys, "cost-distance", dem, "--source-cell", "0,0", "-o", out)
    assert rc == 0, se
    rc, _, se = run_main(capsys, "path", out, "--to-cell", "4,5", "-o", tmp_path / "p.geojson",
                         scheduler=None)
    assert rc == 2 and se.startswith("terrain: ") and len(se.splitlines()) == 1, se
    assert "cannot be reprojected" in se and "GeoPackage (.gpkg)" in se, se
    assert not (tmp_path / "p.geojson").exists()
    rc, _, se = run_main(capsys, "path", out, "--to-cell", "4,5", "-o", tmp_path / "p.gpkg",
                         scheduler=None)
    assert rc == 0, se
    lines, _, crs = gdal_lines(tmp_path / "p.gpkg")
    assert CRS.from_user_input(crs) == local
    assert tuple(lines[0][-1]) == transform @ (5.5, 4.5)  # the target's cell centre



def test_a_friction_raster_means_friction(dem, tmp_path, capsys):
    """``--friction`` without ``--cost``: the friction model (absdiff ignored the raster)."""
    from cli import run_main
    z, path = dem
    fr = np.random.default_rng(2).uniform(1, 3, z.shape).round(2).astype(np.float32)
    fpath = write_asc(tmp_path / "friction.asc", fr)
    rc, so, se = run_main(capsys, "cost-distance", path, "--source-cell", "3,4", "--friction",
                          fpath, "-o", tmp_path / "f.zarr", "--backend", "cpu")
    assert rc == 0, se
    assert "cost friction" in so
    g = zarr.open_group(str(tmp_path / "f.zarr"), mode="r")
    fz = np.where(np.isnan(z), np.nan, fr)
    ref = oracle_distance(csr_graph(np.where(np.isnan(fz), np.nan, 0), "friction", fz, 8, CS, CS),
                          z.shape, [(3, 4)])
    np.testing.assert_allclose(np.asarray(g["distance"][:]), ref, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("extra, said", [
    (["--max-height", "2"], "a height cap applies to the tiled algorithm only; this run is "
                            "in-core"),
    (["--tile-sssp", "32", "--max-height", "2"], "an SSSP tile side and a height cap apply to "
                                                 "the tiled algorithm only"),
])
def test_tiled_options_on_another_algorithm_are_refused(dem, tmp_path, capsys, extra, said):
    from cli import run_main
    _, path = dem
    rc, _, se = run_main(capsys, "cost-distance", path, "--source-cell", "3,4", "--route",
                         "in-core", *extra, "-o", tmp_path / "c.zarr")
    lines = se.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith(f"terrain: {path}: {said}"), se
    assert not (tmp_path / "c.zarr").exists()


@pytest.mark.parametrize("dx", [1e200, 1e-300])
@pytest.mark.parametrize("algorithm", ["in-core", "blocked", "tiled"])
def test_a_cell_size_whose_square_under_or_overflows_is_refused(tmp_path, capsys, dx,
                                                                algorithm):
    # a GeoTIFF may say it (an ASCII header's check refuses it): 1e200 left reachable cells
    # unreached, 1e-300 made east steps cost 0, exit 0; terrain mst refused the same file
    import rasterio
    from rasterio.transform import from_origin

    from cli import run_main
    path, out = tmp_path / "dem.tif", tmp_path / "c.zarr"
    with rasterio.open(path, "w", driver="GTiff", height=3, width=3, count=1, dtype="float32",
                       transform=from_origin(0, 3, dx, 1.0)) as ds:
        ds.write(np.ones((1, 3, 3), np.float32))
    said = f"terrain: {path}: cell size {dx!r} x 1.0: its square under- or overflows"
    for argv in (["cost-distance", path, "--source-cell", "0,0", "--route", algorithm],
                 ["mst", path, "--weight", "slope"]):
        rc, _, se = run_main(capsys, *argv, "-o", out)
        lines = se.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and lines[0].startswith(said), se
        assert not out.exists()


def test_store_at_a_url_needs_its_output_named():
    """A DEM store at a URL (a Location, as a cluster that shares nothing is given it) has no
    output name to derive: one line, before anything is read."""
    from pipelines.cost_distance import run_cost_distance
    from terrain.errors import InputError
    from terrain.io.remote import Location
    with pytest.raises(InputError, match="needs its output named"):
        run_cost_distance(Location("memory://no-output/dem.zarr"), None, cells=["1,1"])


def test_friction_in_another_crs_or_in_degrees_is_refused(tmp_path):
    import rasterio
    z = np.random.default_rng(4).random((20, 30)).astype(np.float32)

    def tif(name, crs):
        with rasterio.open(tmp_path / name, "w", driver="GTiff", height=20, width=30, count=1,
                           dtype="float32", crs=crs,
                           transform=rasterio.Affine(0.001, 0, -78, 0, -0.001, 36)) as dst:
            dst.write(z + 1, 1)
        return tmp_path / name

    out = tmp_path / "c.zarr"
    for dem, friction, said in (
            (tif("d.tif", "EPSG:32617"), tif("f.tif", "EPSG:32618"),
             "f.tif: friction raster's CRS EPSG:32618 is not the DEM's EPSG:32617"),
            (tif("g.tif", "EPSG:4326"), tif("fg.tif", "EPSG:4326"),
             "g.tif: cost 'friction' needs cell sizes in a linear unit, but the CRS "
             "(EPSG:4326) is geographic")):
        rc, _, se = run_cli("cost-distance", dem, "--source-cell", "3,4", "--friction",
                            friction, "-o", out)
        assert rc == 2 and se.count("\n") == 1 and said in se, se
        assert not out.exists()


def test_the_route_is_chosen_by_route_as_fill_and_flow_say(tmp_path, capsys):
    """``cost-distance --algorithm blocked`` chose what ``fill``, ``flow`` and ``batch`` call
    ``--route``, its summary saying ``algorithm`` where theirs say ``route``: ``--route``
    now, in the summary, the plan, ``batch``'s manifest and the pipeline's keyword; the old
    flag is an unknown option. (``sssp --algorithm`` picks an algorithm and stays.)"""
    import inspect

    from cli import HEADER, ROWS, run_main
    from pipelines.cost_distance import run_cost_distance
    from pipelines.flow import run_flow
    (tmp_path / "g.asc").write_text(HEADER + ROWS)
    cd = ["cost-distance", tmp_path / "g.asc", "--source-cell", "0,0", "--backend", "cpu"]
    rc, _, err = run_cli(*cd, "-o", tmp_path / "old.zarr", "--algorithm", "blocked")
    assert rc == 2 and "unrecognized arguments: --algorithm blocked" in err, err
    assert not (tmp_path / "old.zarr").exists()
    for route in ("blocked", "in-core"):
        rc, out, err = run_main(capsys, *cd, "-o", tmp_path / f"{route}.zarr", "--route", route,
                                "--json")
        assert rc == 0 and json.loads(out)["route"] == route, err
        rc, out, err = run_main(capsys, *cd, "-o", tmp_path / "plan.zarr", "--route", route,
                                "--json", "--dry-run")
        assert rc == 0 and json.loads(out)["route"] == route, err
    rc, out, err = run_main(capsys, "batch", "cost-distance", tmp_path / "g.asc", "-o",
                            tmp_path / "out", "--source-cell", "0,0", "--route", "blocked",
                            "--backend", "cpu", "--json")
    assert rc == 0 and json.loads(out)[0]["summary"]["route"] == "blocked", err
    rc, _, err = run_main(capsys, "batch", "flow", tmp_path / "g.asc", "-o", tmp_path / "fl",
                          "--route", "blocked")
    assert (rc, err.strip()) == (2, "terrain: batch flow: the blocked route is "
                                    "cost-distance's; flow runs in core or tiled")
    assert "route" in inspect.signature(run_flow).parameters
    assert "route" in inspect.signature(run_cost_distance).parameters
    s = run_cost_distance(tmp_path / "g.asc", tmp_path / "api.zarr", cells=[(0, 0)],
                          route="blocked", backend="cpu", scheduler="synchronous")
    assert s["route"] == "blocked"
