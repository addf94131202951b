"""Watersheds and stream links against path walking and a networkx Strahler order; the
commands' GeoTIFF, GeoJSON (RFC 7946 lon/lat) and GeoPackage (the DEM's CRS) outputs."""

import contextlib
import json
import shutil
import subprocess

import networkx as nx
import numpy as np
import pytest

from cli import gdal_lines, run_main
from grids import GT, dem, write_asc, write_utm_tif
from oracles import HDC, HDR, check_cog, priority_flood, ref_accumulation
from terrain.hydrology import (flow_accumulation, flow_directions, stream_links, watershed)


def _flow(seed=0, shape=(50, 40)):
    f = priority_flood(dem("random", shape, seed))
    d = flow_directions(f, backend="cpu").direction
    return f, d, flow_accumulation(d, backend="cpu")


def _path(d, r, c):
    out = [(r, c)]
    while d[r, c] not in (0, 255):
        k = int(d[r, c]).bit_length() - 1
        r, c = r + HDR[k], c + HDC[k]
        out.append((r, c))
    return out


def test_watershed_labels_the_first_outlet_on_each_path():
    f, d, acc = _flow()
    big = np.argsort(acc.ravel())[::-1]
    a = divmod(int(big[0]), d.shape[1])
    b = divmod(int(big[len(big) // 50]), d.shape[1])
    labels = watershed(d, [a, b])
    for r in range(d.shape[0]):
        for c in range(d.shape[1]):
            path = _path(d, r, c)
            want = next((n for cell in path for n, o in ((1, a), (2, b)) if cell == o), 0)
            assert labels[r, c] == want
    assert (labels == 1).sum() == acc[a] - ((labels == 2).sum() if b in _path(d, *b) and a in
                                            _path(d, *b) else 0)


def test_strahler_order_against_networkx():
    f, d, acc = _flow(seed=2, shape=(80, 70))
    links = stream_links(d, acc, 15)
    stream = acc >= 15
    g = nx.DiGraph()
    C = d.shape[1]
    for r, c in zip(*np.nonzero(stream)):
        g.add_node(r * C + c)
        p = _path(d, r, c)
        if len(p) > 1 and stream[p[1]]:
            g.add_edge(r * C + c, p[1][0] * C + p[1][1])
    order = {}
    for v in nx.topological_sort(g):
        ups = [order[u] for u in g.predecessors(v)]
        order[v] = 1 if not ups else max(ups) + (ups.count(max(ups)) >= 2)
    cells = set()
    starts = {link["cells"][0] for link in links}
    for link in links:
        r, c = link["cells"][0]
        assert link["order"] == order[r * C + c]
        # a link ends at the confluence that starts the next one (an outlet's too)
        ends_at_start = len(link["cells"]) > 1 and link["cells"][-1] in starts
        own = link["cells"][:-1] if ends_at_start else link["cells"]
        last = link["cells"][-1]
        assert link["outlet"] == (d[last] == 0)
        for r, c in own:
            assert order[r * C + c] == link["order"]
            assert (r, c) not in cells
            cells.add((r, c))
    assert cells == {(int(r), int(c)) for r, c in zip(*np.nonzero(stream))}


@pytest.fixture
def utm_flow(tmp_path, capsys):
    f = priority_flood(dem("random", (60, 50), 3))
    tif = write_utm_tif(tmp_path / "f.tif", f)
    rc, _, err = run_main(capsys, "flow", tif, "--filled", "-o", tmp_path / "f.zarr",
                          scheduler="threads")
    assert rc == 0, err
    return tmp_path / "f.zarr"


def test_a_geopackage_of_two_runs_is_the_same_bytes_with_source_date_epoch(
        utm_flow, tmp_path, capsys, monkeypatch):
    """A GeoPackage records when it was written: two runs of one job differed in those bytes
    alone; ``SOURCE_DATE_EPOCH`` (the reproducible-builds convention) now pins that time,
    as it pins a PDF's or SVG's date."""
    import sqlite3
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "946684800")  # 2000-01-01
    for name in ("a", "b"):
        rc, _, err = run_main(capsys, "streams", utm_flow, "--threshold", "20", "-o",
                              tmp_path / f"{name}.gpkg", scheduler=None)
        assert rc == 0, err
    assert (tmp_path / "a.gpkg").read_bytes() == (tmp_path / "b.gpkg").read_bytes()
    with contextlib.closing(sqlite3.connect(tmp_path / "a.gpkg")) as db:
        (when,) = db.execute("select last_change from gpkg_contents").fetchone()
    assert when.startswith("2000-01-01T00:00:00")


def test_streams_geojson_is_lon_lat_and_geopackage_keeps_the_crs(utm_flow, tmp_path, capsys):
    from pyproj import Transformer
    rc, out, err = run_main(capsys, "streams", utm_flow, "--threshold", "20", "-o",
                            tmp_path / "s.geojson", scheduler=None)
    assert rc == 0, err
    doc = json.loads((tmp_path / "s.geojson").read_text())
    first = doc["features"][0]
    x, y = first["geometry"]["coordinates"][0]
    assert -81 < x < -79 and 35 < y < 36  # UTM 17N near 600 km E, 3900 km N
    assert {"order", "upstream", "cells", "length"} <= set(first["properties"])
    import pyogrio
    for suffix in (".gpkg", ".fgb"):
        rc, out, err = run_main(capsys, "streams", utm_flow, "--threshold", "20", "-o",
                                tmp_path / f"s{suffix}", scheduler=None)
        assert rc == 0, err
        info = pyogrio.read_info(tmp_path / f"s{suffix}", layer="streams")
        assert info["features"] == len(doc["features"]) and info["crs"] == "EPSG:32617"
        assert info["geometry_type"] == "LineString"
        assert list(info["fields"]) == ["order", "upstream", "outlet", "cells", "length"]
        # one file, not OGR's folder for a name without the suffix (the partial's), no
        # warning, and replaced by a run with --overwrite
        assert (tmp_path / f"s{suffix}").is_file() and not err
        rc, out, err = run_main(capsys, "streams", utm_flow, "--threshold", "40", "-o",
                                tmp_path / f"s{suffix}", "--overwrite", scheduler=None)
        assert rc == 0 and not err, err
        assert pyogrio.read_info(tmp_path / f"s{suffix}")["features"] < len(doc["features"])
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("s.")) == [
        "s.fgb", "s.geojson", "s.gpkg"]
    if shutil.which("ogrinfo"):  # the system's GDAL reads it too
        info = subprocess.run(["ogrinfo", "-so", str(tmp_path / "s.gpkg"), "streams"],
                              capture_output=True, text=True).stdout
        assert f"Feature Count: {len(doc['features'])}" in info and "32617" in info
    back = Transformer.from_crs(4326, 32617, always_xy=True).transform(x, y)
    assert abs(back[0] - GT[0]) < 50 * 30 and abs(back[1] - GT[3]) < 60 * 30


@pytest.mark.parametrize("threshold", [1, 4, 20])
def test_every_stream_cell_lies_on_a_link_line(utm_flow, tmp_path, capsys, threshold):
    """A link of one cell (an outlet that is a source or a confluence: at threshold 1 every
    edge cell) was left out of the output. Against NumPy: one line per link head (a stream
    cell with no stream inflow or two or more), the lines' cell centres are every stream
    cell; a link of one cell runs from its centre to the grid's edge, where its water
    leaves (two distinct points, half a cell long)."""
    import zarr
    g = zarr.open_group(str(utm_flow), mode="r")
    d, acc = g["direction"][:], g["accumulation"][:]
    stream = (d != 255) & (acc >= threshold)
    R, C = d.shape
    ins = np.zeros(d.shape, np.int64)
    for k in range(8):
        rr, cc = np.nonzero(stream & (d == 1 << k))
        np.add.at(ins, (rr + HDR[k], cc + HDC[k]), stream[rr + HDR[k], cc + HDC[k]])
    heads = stream & (ins != 1)
    rc, out, err = run_main(capsys, "streams", utm_flow, "--threshold", str(threshold), "-o",
                            tmp_path / "s.gpkg", "--json", scheduler=None)
    assert rc == 0, err
    lines, field, _ = gdal_lines(tmp_path / "s.gpkg")
    assert len(lines) == json.loads(out)["links"] == heads.sum()
    x0, dx, _, y0, _, dy = GT
    covered, firsts = set(), set()
    for i, xy in enumerate(lines):
        col, row = (xy[:, 0] - x0) / dx - 0.5, (xy[:, 1] - y0) / dy - 0.5
        centre = (np.abs(col - np.round(col)) < 1e-9) & (np.abs(row - np.round(row)) < 1e-9)
        cells = list(zip(np.round(row[centre]).astype(int), np.round(col[centre]).astype(int)))
        covered.update(cells)
        firsts.add(cells[0])
        assert centre[0] and len({tuple(p) for p in xy}) == len(xy) >= 2
        assert field["length"][i] == pytest.approx(np.hypot(*np.diff(xy, axis=0).T).sum())
        if field["cells"][i] == 1:
            (r, c), (x, y) = cells[0], xy[1]
            assert len(xy) == 2 and field["outlet"][i] and d[r, c] == 0
            assert x in (x0, x0 + C * dx) or y in (y0, y0 + R * dy)  # on the grid's edge
            assert field["length"][i] == pytest.approx(abs(dx) / 2)
    assert covered == set(zip(*np.nonzero(stream)))
    assert firsts == set(zip(*np.nonzero(heads)))
    if threshold == 1:  # every cell a stream: sources on the edge are outlets
        assert (field["cells"] == 1).sum() > 0


def test_links_into_an_outlet_confluence_end_at_the_outlet(tmp_path, capsys):
    """A tilted plane draining to its corner: the links meeting at the outlet cell end at an
    outlet (all said False, as the outlet's own link of one cell, not written, was the one
    that did), and the order there (two order-2 streams meeting: 3) is the network's, on the
    outlet's own link of one cell, drawn from its centre to the east side of the corner."""
    import pyogrio
    r, c = np.mgrid[0:6, 0:6]
    tif = write_utm_tif(tmp_path / "corner.tif", (20.0 - r - c).astype(np.float32))
    assert run_main(capsys, "flow", tif, "-o", tmp_path / "f.zarr")[0] == 0
    rc, out, err = run_main(capsys, "streams", tmp_path / "f.zarr", "--threshold", "3", "-o",
                            tmp_path / "s.gpkg", "--json", scheduler=None)
    assert rc == 0, err
    summary = json.loads(out)
    lines, field, _ = gdal_lines(tmp_path / "s.gpkg")
    assert int(np.sum(field["outlet"])) >= 3 and summary["links"] == len(lines)
    assert summary["max_order"] == 3 and field["order"].max() == 3
    (own,) = np.flatnonzero(field["cells"] == 1)  # the outlet's link: to the grid's corner side
    assert field["order"][own] == 3 and field["outlet"][own]
    np.testing.assert_allclose(lines[own], [[GT[0] + 5.5 * 30, GT[3] - 5.5 * 30],
                                            [GT[0] + 6 * 30, GT[3] - 5.5 * 30]])
    # no links at all: the layer keeps its fields
    rc, out, err = run_main(capsys, "streams", tmp_path / "f.zarr", "--threshold", "1e9", "-o",
                            tmp_path / "none.gpkg", "--json", scheduler=None)
    assert rc == 0 and json.loads(out)["links"] == 0, err
    info = pyogrio.read_info(tmp_path / "none.gpkg")
    assert info["features"] == 0 and list(info["fields"]) == [
        "order", "upstream", "outlet", "cells", "length"]


def test_outlets_on_one_cell_and_damaged_directions_are_said(utm_flow, tmp_path, capsys):
    """One outlet given twice left its second label empty, silently; a cycle in the
    directions was said by ``streams`` without the store's name (``watershed`` named it)."""
    rc, out, err = run_main(capsys, "watershed", utm_flow, "--outlet-cell", "30,20",
                            "--outlet-cell", "30,20", "-o", tmp_path / "w.tif", "--json",
                            scheduler=None)
    assert rc == 0 and [o["cells"] > 0 for o in json.loads(out)["outlets"]] == [True, False]
    assert err == ("terrain: warning: outlets 1 and 2 lie on one cell (30, 20): label 2 is "
                   "left empty\n"), err
    import zarr
    shutil.copytree(utm_flow, tmp_path / "cycle.zarr")
    g = zarr.open_group(str(tmp_path / "cycle.zarr"), mode="r+")
    d = g["direction"][:]
    d[5, 15], d[5, 16] = 1, 16  # east, then back west
    g["direction"][:] = d
    g["accumulation"][5:7, 15:17] = 1e6
    from terrain.io.outputs import seal_store
    seal_store(tmp_path / "cycle.zarr")
    for argv in (["streams", tmp_path / "cycle.zarr", "--threshold", "2", "-o",
                  tmp_path / "s.geojson"],
                 ["watershed", tmp_path / "cycle.zarr", "--outlet-cell", "5,15", "-o",
                  tmp_path / "c.tif"]):
        rc, _, err = run_main(capsys, *argv, scheduler=None)
        assert rc == 2 and err == (f"terrain: {tmp_path / 'cycle.zarr'}: direction: the flow "
                                   "directions hold a cycle\n"), err


def test_watershed_command(utm_flow, tmp_path, capsys):
    import rasterio
    import zarr
    acc = zarr.open_group(str(utm_flow))["accumulation"][:]
    r, c = np.unravel_index(np.nanargmax(acc), acc.shape)
    x, y = GT[0] + (c + 0.5) * 30, GT[3] - (r + 0.5) * 30
    rc, out, err = run_main(capsys, "watershed", utm_flow, "--outlet", f"{x},{y}", "-o",
                            tmp_path / "w.tif", "--json", scheduler=None)
    assert rc == 0, err
    s = json.loads(out)
    assert s["outlets"][0]["cells"] == acc[r, c]
    with rasterio.open(tmp_path / "w.tif") as src:
        assert src.crs.to_epsg() == 32617 and (src.read(1) == 1).sum() == acc[r, c]
        assert src.nodata == -1 and src.descriptions[0].startswith("watershed label")
    check_cog(tmp_path / "w.tif")  # through the one GeoTIFF writer
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    rc, _, err = run_main(capsys, "watershed", utm_flow, "--outlet", "0,0", "-o",
                          tmp_path / "x.tif", scheduler=None)
    assert rc == 2 and "outside" in err and not (tmp_path / "x.tif").exists()
    for snap in ("-5", "nan"):
        rc, _, err = run_main(capsys, "watershed", utm_flow, "--outlet", f"{x},{y}", "--snap",
                              snap, "-o", tmp_path / "x.tif", scheduler=None)
        assert rc == 2 and err == (f"terrain: snap distance {float(snap):g}: must be a number "
                                   "of map units >= 0\n") and not (tmp_path / "x.tif").exists()
    # the same outlet as a cell, after a second one given by its point
    rc, out, err = run_main(capsys, "watershed", utm_flow, "--outlet", f"{x + 30},{y}",
                            "--outlet-cell", f"{r},{c}", "-o", tmp_path / "w2.zarr", "--json",
                            scheduler=None)
    assert rc == 0, err
    s2 = json.loads(out)
    assert [(o["label"], o["row"], o["col"]) for o in s2["outlets"]] == [
        (1, int(r), int(c) + 1), (2, int(r), int(c))]
    labels = zarr.open_group(str(tmp_path / "w2.zarr"))["watershed"][:]
    assert (labels > 0).sum() == acc[r, c]
    rc, _, err = run_main(capsys, "watershed", utm_flow, "--outlet-cell", "60,0", "-o",
                          tmp_path / "y.tif", scheduler=None)
    assert rc == 2 and "outlet cell (60, 0) is outside the raster" in err
    d = zarr.open_group(str(utm_flow))["direction"]
    d[5, 7] = 255  # a nodata cell
    rc, _, err = run_main(capsys, "watershed", utm_flow, "--outlet-cell", "5,7", "-o",
                          tmp_path / "y.tif", scheduler=None)
    assert rc == 2 and err == (f"terrain: {utm_flow}: outlet 1 at cell (row, col) = (5, 7) "
                               "is on nodata\n")
    # of gauges in a file, the error names which one lies there: its label (the file's
    # order) and its place in the file, a CSV file's line or a GeoJSON feature
    with rasterio.open(tmp_path / "w.tif") as src:
        xs, ys = src.xy([5, 9, 5], [9, 7, 7])  # cell centres, the third on nodata
        assert src.index(xs[2], ys[2]) == (5, 7)
    (tmp_path / "g.csv").write_text("x,y\n" + "".join(f"{a},{b}\n" for a, b in zip(xs, ys)))
    (tmp_path / "g.geojson").write_text(json.dumps({
        "type": "FeatureCollection", "crs": {"type": "name", "properties": {"name": "EPSG:32617"}},
        "features": [{"type": "Feature", "properties": {}, "geometry": {
            "type": "Point", "coordinates": [a, b]}} for a, b in zip(xs, ys)]}))
    for name, place in (("g.csv", "g.csv:4"), ("g.geojson", "g.geojson feature 3")):
        rc, _, err = run_main(capsys, "watershed", utm_flow, "--outlets", tmp_path / name,
                              "-o", tmp_path / "y.tif", scheduler=None)
        assert rc == 2 and err == (f"terrain: {utm_flow}: outlet 3 ({tmp_path / place}) at "
                                   "cell (row, col) = (5, 7) is on nodata\n")
        assert not (tmp_path / "y.tif").exists()
    rc, out, err = run_main(capsys, "info", tmp_path / "w2.zarr", scheduler=None)
    assert rc == 0 and out.splitlines()[0] == f"store     {tmp_path / 'w2.zarr'} (result store)"


def test_watershed_refuses_a_cycle_a_bad_code_and_a_path_off_the_grid():
    from terrain.errors import InputError
    cycle = np.array([[1, 4], [64, 16]], np.uint8)  # E, S / N, W: a loop of four cells
    with pytest.raises(InputError, match="cycle"):
        watershed(cycle, [(0, 0)])
    with pytest.raises(InputError, match=r"cell \(0, 1\) holds no D8 code"):
        watershed(np.array([[0, 3]], np.uint8), [(0, 0)])
    with pytest.raises(InputError, match=r"cell \(0, 1\) holds no D8 code"):
        stream_links(np.array([[0, 1]], np.uint8), np.ones((1, 2)), 1)  # east off the grid


def test_directions_as_xarray_reads_the_store_keep_their_nodata(tmp_path, capsys):
    """``xr.open_zarr`` masks the direction layer's 255 as NaN (float32): the cast to uint8
    made every nodata cell an outlet (label 0 for -1, accumulation 1 for NaN, a violation
    of ``verify_flow``), and values that are no code (257, 1.5) were wrapped or truncated
    into codes."""
    import xarray as xr

    from terrain.errors import InputError
    z = priority_flood(dem("holes", (30, 40), 5))
    rc, _, err = run_main(capsys, "flow", write_asc(tmp_path / "h.asc", z), "--filled",
                          "-o", tmp_path / "h.zarr", scheduler="threads")
    assert rc == 0, err
    masked = xr.open_zarr(tmp_path / "h.zarr").direction
    d = xr.open_zarr(tmp_path / "h.zarr", mask_and_scale=False).direction.values
    assert masked.dtype.kind == "f" and np.isnan(masked.values).any() and (d == 255).any()
    big = np.argsort(np.where(d == 255, -1, ref_accumulation(d)).ravel())[::-1]
    outlets = [divmod(int(i), d.shape[1]) for i in big[:3]]
    labels = watershed(masked, outlets)
    for r in range(d.shape[0]):
        for c in range(d.shape[1]):
            want = -1 if d[r, c] == 255 else next(
                (n for p in _path(d, r, c) for n, o in enumerate(outlets, 1) if p == o), 0)
            assert labels[r, c] == want, (r, c)
    np.testing.assert_array_equal(flow_accumulation(masked, backend="cpu"),
                                  ref_accumulation(d))
    from terrain.verify import verify_flow  # the certificate reads them alike
    store = xr.open_zarr(tmp_path / "h.zarr")
    assert verify_flow(store.filled.values, masked.values, store.accumulation.values).ok
    for bad, shown in ((257, "257"), (1.5, "1.5"), (-1, "-1")):
        wrong = d.astype(np.float64)
        wrong[2, 3] = bad
        for call in (lambda: watershed(wrong, outlets),
                     lambda: flow_accumulation(wrong, backend="cpu"),
                     lambda: stream_links(wrong, np.ones(d.shape), 1),
                     lambda: verify_flow(store.filled.values, wrong)):
            with pytest.raises(InputError, match=rf"direction: cell \(2, 3\) holds {shown}"):
                call()


@pytest.mark.parametrize("threshold", [float("nan"), 0, -5, float("inf"), "many"])
def test_stream_links_refuse_a_threshold_that_is_no_positive_number(threshold):
    """As the command line does (--threshold): a NaN threshold gave no link, quietly, and
    -5 every cell a stream, through the API (run_streams, stream_links)."""
    from terrain.errors import InputError
    d, acc = np.array([[1, 0]], np.uint8), np.array([[1.0, 2.0]])
    with pytest.raises(InputError, match="is not a positive number") as e:
        stream_links(d, acc, threshold)
    assert e.value.option == "threshold"
    assert len(stream_links(d, acc, 1)) == 1


def test_streams_process_imports_no_numba(utm_flow, tmp_path):
    from cli import imported_after
    _, imported = imported_after(
        [["streams", utm_flow, "--threshold", "20", "-o", tmp_path / "s.geojson"]],
        ("numba", "scipy"))
    assert imported == "[]"


def test_stream_links_read_the_accumulation_a_band_at_a_time(monkeypatch):
    """Bands of a few rows, from a zarr array: the same links as from one NumPy band."""
    import importlib
    import zarr
    from terrain.errors import InputError
    ws = importlib.import_module("terrain.hydrology.watershed")
    f, d, acc = _flow(seed=2, shape=(80, 70))
    want = stream_links(d, acc, 15)
    stored = zarr.create_array(store={}, shape=acc.shape, chunks=(16, 16), dtype=acc.dtype)
    stored[:] = acc
    monkeypatch.setattr(ws, "_STREAM_BAND_CELLS", 3 * 70 + 5)
    assert stream_links(d, stored, 15) == want
    hole = d.copy()
    r, c = want[0]["cells"][0]
    hole[r + 1, c] = 255  # the cell below a stream's source becomes nodata
    hole[r, c] = 4  # which now flows into it
    with pytest.raises(InputError, match=rf"cell \({r}, {c}\) holds no D8 code or leads off "
                       "the grid or to nodata"):
        stream_links(hole, acc, 15)


def test_watershed_of_many_nested_outlets_against_walked_paths():
    """Outlets along one another's paths and a cell named twice (it keeps its first label):
    every cell's label is that of the first outlet on its walked path."""
    f, d, acc = _flow(seed=4, shape=(45, 38))
    rng = np.random.default_rng(4)
    big = np.argsort(acc.ravel())[::-1]
    picks = [divmod(int(i), d.shape[1]) for i in big[rng.choice(200, 7, replace=False)]]
    outlets = picks + [picks[2]]
    labels = watershed(d, outlets)
    label_of = {}
    for n, cell in enumerate(outlets, start=1):
        label_of.setdefault(cell, n)
    for r in range(d.shape[0]):
        for c in range(d.shape[1]):
            if d[r, c] == 255:
                assert labels[r, c] == -1
                continue
            want = next((label_of[p] for p in _path(d, r, c) if p in label_of), 0)
            assert labels[r, c] == want, (r, c)


def test_streams_of_a_dem_without_a_crs_are_no_geojson(tmp_path, capsys):
    """GeoJSON is longitude/latitude (RFC 7946): a DEM without a CRS gave grid coordinates
    with a crs member "unknown (grid coordinates)", which GDAL reads as WGS 84 (as it reads a
    file without one), so every GIS placed the streams near (0, 0) degrees. Refused before
    any work, one line naming the output; a GeoPackage or FlatGeobuf keeps the grid's
    coordinates, without a CRS, as GDAL reads them."""
    import pyogrio
    f = priority_flood(dem("random", (30, 20), 5))
    write_asc(tmp_path / "d.asc", f, xll=1000.0, yll=2000.0, cs=10.0)
    assert run_main(capsys, "flow", tmp_path / "d.asc", "-o", tmp_path / "f.zarr")[0] == 0
    rc, out, err = run_main(capsys, "streams", tmp_path / "f.zarr", "--threshold", "5", "-o",
                            tmp_path / "s.geojson", scheduler=None)
    assert rc == 2 and not out and err == (
        f"terrain: {tmp_path / 's.geojson'}: GeoJSON positions are longitude/latitude "
        "(RFC 7946), and the streams have no CRS to reproject from: write a GeoPackage (.gpkg) "
        "or FlatGeobuf (.fgb), which keep the grid's coordinates, or give the DEM a CRS\n"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.asc", "f.zarr"]
    for suffix in (".gpkg", ".fgb"):
        rc, out, err = run_main(capsys, "streams", tmp_path / "f.zarr", "--threshold", "5",
                                "-o", tmp_path / f"s{suffix}", "--json", scheduler=None)
        assert rc == 0 and not err, err
        lines, _, crs = gdal_lines(tmp_path / f"s{suffix}")
        assert crs is None and pyogrio.read_info(tmp_path / f"s{suffix}")["crs"] is None
        xy = np.concatenate(lines)
        assert (xy[:, 0] >= 1000).all() and (xy[:, 0] <= 1200).all()  # the grid's own
        assert (xy[:, 1] >= 2000).all() and (xy[:, 1] <= 2300).all()  # coordinates
        assert json.loads(out)["coordinates"] == "the grid's coordinates (the DEM has no CRS)"


def test_streams_need_no_pyproj(utm_flow, tmp_path, capsys, monkeypatch):
    """pyproj is no dependency (a user's install lacks it): the streams of a DEM with a CRS
    are written without it, GeoJSON reprojected and a GeoPackage in the DEM's CRS."""
    import sys
    monkeypatch.setitem(sys.modules, "pyproj", None)  # ``import pyproj`` raises ImportError
    for suffix in (".geojson", ".gpkg"):
        rc, out, err = run_main(capsys, "streams", utm_flow, "--threshold", "20", "-o",
                                tmp_path / f"s{suffix}", scheduler=None)
        assert rc == 0, err
    x, y = json.loads((tmp_path / "s.geojson").read_text())["features"][0]["geometry"][
        "coordinates"][0]
    assert -81 < x < -79 and 35 < y < 36


@pytest.mark.parametrize("cellsize", [(10.0, 30.0), (30.0, 10.0), (5.0, 5.0)])
def test_snap_measures_in_map_units_on_cells_not_square(cellsize):
    """An outlet snaps to the cell of largest accumulation whose centre lies within the
    radius in map units (rows dy apart, columns dx), ties row-major: against every cell."""
    from terrain.hydrology import snap_outlets
    rng = np.random.default_rng(7)
    acc = rng.integers(1, 50, (40, 50)).astype(np.float64)
    acc[rng.random(acc.shape) < 0.1] = np.nan
    dx, dy = cellsize
    rr, cc = np.mgrid[0:40, 0:50]
    for r, c, radius in [(20, 25, 31.0), (0, 0, 95.0), (39, 49, 61.0), (10, 3, 0.0)]:
        near = (((rr - r) * dy) ** 2 + ((cc - c) * dx) ** 2 <= radius ** 2) & ~np.isnan(acc)
        want = (r, c) if not near.any() else divmod(int(np.argmax(np.where(near, acc,
                                                                              -np.inf))), 50)
        assert snap_outlets(acc, [(r, c)], radius, cellsize) == [want], (r, c, radius)


def test_a_stream_that_ends_above_its_outlet_is_no_outlets_link():
    """Negative weights (losses) drop the accumulation below the threshold on the way: the
    stream ends there, mid-slope, and its last link was flagged ``outlet``."""
    d = np.array([[1, 1, 1, 1, 0]], np.uint8)  # all east to the outlet at the end
    w = np.array([[5.0, 5.0, -9.0, 1.0, 1.0]])
    acc = flow_accumulation(d, w, backend="cpu")  # 5, 10, 1, 2, 3
    (link,) = stream_links(d, acc, 4)
    assert link["cells"] == [(0, 0), (0, 1)] and link["outlet"] is False
    (whole,) = stream_links(d, flow_accumulation(d, backend="cpu"), 1)
    assert whole["cells"][-1] == (0, 4) and whole["outlet"] is True


def test_the_api_watershed_is_the_commands(utm_flow, tmp_path, capsys):
    """``terrain.watershed`` of the flow store, and of :func:`terrain.flow`'s Dataset, labels
    as ``terrain watershed`` does: map points, then cells, snapped alike; a file of points
    as ``--outlets``. Oracle: each cell's D8 path walked down to its first outlet."""
    import rasterio
    import zarr

    import terrain
    g = zarr.open_group(str(utm_flow), mode="r")
    d, acc = g["direction"][:], g["accumulation"][:]
    r, c = np.unravel_index(np.nanargmax(acc), acc.shape)
    x, y = GT[0] + (c + 1.5) * 30, GT[3] - (r + 0.5) * 30  # a cell off the largest: snapped
    csv = tmp_path / "o.csv"
    csv.write_text(f"x,y\n{GT[0] + 20.5 * 30},{GT[3] - 30.5 * 30}\n")
    ds = terrain.flow(tmp_path / "f.tif", filled=True, backend="cpu")
    np.testing.assert_array_equal(ds.direction.values, d)
    for name, cli, api in (
            ("a", ["--outlet", f"{x},{y}", "--outlet-cell", "10,10", "--snap", "45"],
             dict(outlets=[(10, 10)], points=[(x, y)], snap=45)),
            ("b", ["--outlets", csv], dict(points=csv))):
        rc, out, err = run_main(capsys, "watershed", utm_flow, *cli, "-o",
                                tmp_path / f"{name}.tif", "--json", scheduler=None)
        assert rc == 0, err
        said = [(o["row"], o["col"]) for o in json.loads(out)["outlets"]]
        with rasterio.open(tmp_path / f"{name}.tif") as src:
            want = src.read(1)
        for given in (utm_flow, ds):
            got = terrain.watershed(given, **api)
            assert list(zip(got.attrs["outlet_rows"], got.attrs["outlet_cols"])) == said
            assert got.dtype == np.int32 and got.attrs["_FillValue"] == -1
            np.testing.assert_array_equal(got.values, want)
            assert got.attrs["basin_cells"] == [int((want == n).sum())
                                                for n in range(1, len(said) + 1)]
        label = {cell: n for n, cell in reversed(list(enumerate(said, start=1)))}
        walked = np.full(d.shape, -1, np.int32)
        for i, j in zip(*np.nonzero(d != 255)):
            walked[i, j] = next((label[p] for p in _path(d, i, j) if p in label), 0)
        np.testing.assert_array_equal(want, walked)
        # snapped within 45 m (the 3 x 3 cells around; the largest first in row order)
        k = int(np.nanargmax(acc[9:12, 9:12]))
        assert said == ([(r, c), (9 + k // 3, 9 + k % 3)] if name == "a" else [(30, 20)])


def test_the_api_streams_are_the_commands(utm_flow, tmp_path, capsys):
    """``terrain.streams`` of the flow store, and of :func:`terrain.flow`'s Dataset: the
    lines and fields that ``terrain streams`` writes to a GeoPackage (read back by
    pyogrio, its WKB unpacked here), in the DEM's CRS. Oracle for the order: the networkx
    Strahler test above; here each line's length is the sum of its steps."""
    import struct

    from pyogrio.raw import read

    import terrain
    rc, _, err = run_main(capsys, "streams", utm_flow, "--threshold", "20", "-o",
                          tmp_path / "s.gpkg", scheduler=None)
    assert rc == 0, err
    meta, _, geometry, values = read(tmp_path / "s.gpkg")
    fields = dict(zip(meta["fields"], values))
    lines = []
    for wkb in geometry:
        wkb = bytes(wkb)
        (n,) = struct.unpack_from("<I", wkb, 5)
        assert wkb[0] == 1 and struct.unpack_from("<I", wkb, 1)[0] == 2  # a LineString
        lines.append(np.frombuffer(wkb, "<f8", 2 * n, 9).reshape(n, 2))
    ds = terrain.flow(tmp_path / "f.tif", filled=True, backend="cpu")
    for given in (utm_flow, ds):
        got = terrain.streams(given, 20)
        assert len(got) == len(lines) > 3
        for i, s in enumerate(got):
            np.testing.assert_array_equal(np.array(s["coords"]), lines[i])
            for name in ("order", "upstream", "outlet", "cells", "length"):
                assert s[name] == fields[name][i], (i, name)
            steps = np.diff(np.array(s["coords"]), axis=0)
            assert np.isclose(s["length"], np.hypot(*steps.T).sum(), rtol=1e-12)
    with pytest.raises(terrain.InputError, match="^flow: a stream network needs its "
                                                 "accumulation"):
        terrain.streams(ds.drop_vars("accumulation"), 20)
