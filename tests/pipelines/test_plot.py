"""Pictures: PNGs of the requested size; the forest drawn only when zoomed in enough."""

import json

import numpy as np
import pytest

from terrain.plot import hillshade, mst_segments, read_for_picture

from cli import run_main

mpl_image = pytest.importorskip("matplotlib.image")


@pytest.fixture(scope="module")
def mst_out(tmp_path_factory):
    from pipelines.mst import run_mst
    from terrain.io import write_synth
    d = tmp_path_factory.mktemp("plot")
    write_synth(d / "s.asc", 120, 160, seed=3, nodata=0.05)
    run_mst(d / "s.asc", d / "s.mst.zarr", tile=32, scheduler="synchronous", backend="cpu")
    return d / "s.mst.zarr"


def test_plot_sizes_and_level_of_detail(mst_out, tmp_path, capsys):
    rc, out, err = run_main(capsys, "plot", mst_out, "-o", tmp_path / "a.png", "--size", "320x240",
                           scheduler=None)
    assert rc == 0, err
    assert mpl_image.imread(tmp_path / "a.png").shape[:2] == (240, 320)
    assert "forest not drawn" in out
    rc, out, err = run_main(capsys, "plot", mst_out, "-o", tmp_path / "b.png", "--size", "500x400",
                           "--window", "10:50,20:70", scheduler=None)
    assert rc == 0, err
    img = mpl_image.imread(tmp_path / "b.png")
    assert img.shape[:2] == (400, 500)
    assert "forest edges drawn" in out
    # the forest is drawn in red: many strongly red pixels
    red = (img[..., 0] > 0.55) & (img[..., 1] < 0.2) & (img[..., 2] < 0.25)
    assert red.sum() > 1000
    rc, out, err = run_main(capsys, "plot", mst_out, "-o", tmp_path / "b.png", scheduler=None)
    assert rc == 2 and "exists" in err
    rc, out, err = run_main(capsys, "plot", mst_out, "-o", tmp_path / "c.png", "--size", "big",
                           scheduler=None)
    assert rc == 2 and "WIDTHxHEIGHT" in err and not (tmp_path / "c.png").exists()


def test_level_of_detail_reads_a_strided_sample():
    z = np.arange(10000.0).reshape(100, 100)
    v, stride, win = read_for_picture(z, (10, 20), window=(0, 100, 0, 50))
    assert stride == 5 and v.shape == (20, 10) and v[1, 1] == z[5, 5]


def test_hillshade_faces_the_light():
    """Light from the north-west: slopes facing north or west are brighter than their opposites."""
    steps = np.arange(20.0)
    faces_south = np.add.outer(-steps, np.zeros(20))  # row numbers grow to the south
    faces_east = np.add.outer(np.zeros(20), -steps)
    mean = (lambda z: hillshade(z)[5:15, 5:15].mean())
    assert mean(-faces_south) > mean(faces_south)
    assert mean(-faces_east) > mean(faces_east)
    flat = hillshade(np.zeros((5, 5)))
    assert np.allclose(flat, np.sin(np.radians(45)))


def test_segments_follow_the_bits():
    m = np.zeros((3, 3), np.uint8)
    m[1, 1] = 4 | 8  # SE and SW
    segs = mst_segments(m)
    assert segs.tolist() == [[[1.5, 1.5], [2.5, 2.5]], [[1.5, 1.5], [0.5, 2.5]]]


def test_bfs_levels_picture(tmp_path, capsys):
    nx = pytest.importorskip("networkx")
    G = nx.grid_2d_graph(12, 20)
    G = nx.convert_node_labels_to_integers(G, first_label=1)
    g = tmp_path / "g.txt"
    g.write_text("".join(f"{u} {v}\n" for u, v in G.edges()))
    rc, out, err = run_main(capsys, "plot", g, "--source", "1", "-o", tmp_path / "l.png",
                            "--size", "600x400", "--backend", "cpu", scheduler=None)
    assert rc == 0, err
    # levels as networkx's bfs_layers (and terrain bfs's summary) count them: 31, not 30
    assert f"{len(list(nx.bfs_layers(G, 1)))} levels, 240 vertices reached" in out
    assert mpl_image.imread(tmp_path / "l.png").shape[:2] == (400, 600)
    rc, out, err = run_main(capsys, "plot", g, "--source", "999", "-o", tmp_path / "m.png",
                            "--backend", "cpu", scheduler=None)
    assert rc == 2 and "999" in err and not (tmp_path / "m.png").exists()


def test_a_graph_without_sources_is_told_to_give_them(tmp_path, capsys):
    """A graph file or cache without ``--source`` was refused as "not a terrain store" (or
    listed as a store holding ids, indices, indptr); an empty ``--source`` ran as none given:
    both say what plot draws of a graph, as bfs says of an empty ``--source``."""
    g = tmp_path / "g.txt"
    g.write_text("1 2\n2 3\n")
    cache = tmp_path / "g.zarr"
    assert run_main(capsys, "graph-ingest", g, "-o", cache, scheduler=None)[0] == 0
    for graph in (g, cache):
        rc, _, err = run_main(capsys, "plot", graph, "-o", tmp_path / "p.png", scheduler=None)
        assert rc == 2 and err.strip() == (f"terrain: {graph}: a graph: plot draws the frontier "
                                           "sizes of its BFS from the vertices given with "
                                           "--source S[,S...]")
        rc, _, err = run_main(capsys, "plot", graph, "--source", "", "-o", tmp_path / "p.png",
                              scheduler=None)
        assert rc == 2 and err.strip() == "terrain: --source: no vertex given"
    assert not (tmp_path / "p.png").exists()


def test_cost_distance_picture_with_contours_and_paths(tmp_path, capsys):
    """plot COSTSTORE: the distance map over the hillshade, contours, the least-cost paths of
    ``terrain path`` drawn (blue pixels along them); a store without the DEM points to it."""
    from pipelines.cost_distance import run_cost_distance
    from pipelines.ingest import ingest
    from terrain.io import write_synth
    from terrain.plot import _nice_levels

    write_synth(tmp_path / "s.asc", 120, 160, seed=5, nodata=0.02)
    ingest(tmp_path / "s.asc", tmp_path / "s.zarr", tile=32, scheduler="synchronous")
    out = tmp_path / "c.zarr"
    run_cost_distance(tmp_path / "s.zarr", out, cells=[(60, 40)], cost="tobler", tile=32,
                      backend="cpu", scheduler="synchronous")
    import zarr
    gt = zarr.open_group(str(out), mode="r").attrs["geotransform"]
    to = f"{gt[0] + gt[1] * 150.5},{gt[3] + gt[5] * 110.5}"
    rc, _, err = run_main(capsys, "path", out, "--to", to, "-o", tmp_path / "p.gpkg",
                          scheduler=None)
    assert rc == 0, err
    rc, text, err = run_main(capsys, "plot", out, "--paths", tmp_path / "p.gpkg", "-o",
                             tmp_path / "c.png", "--size", "640x480", scheduler=None)
    assert rc == 0, err
    assert "1 path(s)" in text and "contour levels" in text and "no DEM" not in text
    img = mpl_image.imread(tmp_path / "c.png")
    assert img.shape[:2] == (480, 640)
    blue = (img[..., 0] < 0.1) & (img[..., 1] > 0.5) & (img[..., 2] > 0.9)  # the path colour
    assert blue.sum() > 100
    rc, text, err = run_main(capsys, "plot", out, "-o", tmp_path / "d.png", "--size", "300x200",
                             "--window", "40:80,20:60", scheduler=None)
    assert rc == 0, err
    assert mpl_image.imread(tmp_path / "d.png").shape[:2] == (200, 300)
    rc, _, err = run_main(capsys, "plot", tmp_path / "s.zarr", "--paths", tmp_path / "p.gpkg",
                          "-o", tmp_path / "e.png", scheduler=None)
    assert rc == 2 and "cost-distance store" in err and not (tmp_path / "e.png").exists()
    assert _nice_levels(0, 95) == [10, 20, 30, 40, 50, 60, 70, 80, 90]
    # the DEM lives in the tile store the cost store names: verify finds it there too
    rc, text, err = run_main(capsys, "verify", out, scheduler=None)
    assert rc == 0 and "verified" in text, err + text


# ----------------------------------------------------------------------------- what users hit


def test_a_huge_picture_is_refused_at_once(mst_out, tmp_path, capsys):
    import time
    t0 = time.monotonic()
    rc, _, err = run_main(capsys, "plot", mst_out, "-o", tmp_path / "p.png", "--size",
                          "100000x100000", scheduler=None)
    assert rc == 2 and time.monotonic() - t0 < 5
    assert err.strip() == ("terrain: picture size 100000 x 100000: at most 16384 pixels a "
                           "side and 16,777,216 in all")
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("name, magic", [("p.jpg", b"\xff\xd8\xff"), ("p.JPEG", b"\xff\xd8\xff"),
                                         ("p.png", b"\x89PNG"), ("p.pdf", b"%PDF")])
def test_the_picture_is_what_its_name_says(mst_out, tmp_path, capsys, name, magic):
    rc, _, err = run_main(capsys, "plot", mst_out, "-o", tmp_path / name, "--size", "200x160",
                          scheduler=None)
    assert rc == 0, err
    assert (tmp_path / name).read_bytes()[:len(magic)] == magic


def test_an_svg_of_two_runs_is_the_same_bytes(mst_out, tmp_path, capsys, monkeypatch):
    """Its clip paths were named at random: two runs of one plot wrote other bytes (the
    date: ``SOURCE_DATE_EPOCH``, as matplotlib reads it)."""
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "946684800")
    for name in ("a", "b"):
        rc, _, err = run_main(capsys, "plot", mst_out, "-o", tmp_path / f"{name}.svg",
                              "--size", "200x150", scheduler=None)
        assert rc == 0, err
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()


def test_an_unknown_picture_format_is_refused(mst_out, tmp_path, capsys):
    rc, _, err = run_main(capsys, "plot", mst_out, "-o", tmp_path / "p.bmpx", scheduler=None)
    assert rc == 2 and err.startswith(f"terrain: {tmp_path / 'p.bmpx'}: a picture's name ends "
                                      "with its format: .jpeg, .jpg, .pdf, .png")
    assert list(tmp_path.iterdir()) == []
    # a TIFF picture without a georeference, which a GIS takes for a GeoTIFF
    rc, _, err = run_main(capsys, "plot", mst_out, "-o", tmp_path / "p.tif", scheduler=None)
    assert rc == 2 and "p.tif: a picture has no georeference" in err
    assert list(tmp_path.iterdir()) == []


def _colour_bar(img):
    """The columns of a vertical colour bar: a band at least 8 pixels wide whose rows are
    each one colour and which holds many colours from top to bottom."""
    rgb = img[..., :3].astype(float)
    h, w = rgb.shape[:2]
    for x in range(w // 2, w - 8):
        band = rgb[h // 5:4 * h // 5, x:x + 8]
        if band.std(axis=1).max() < 0.02 and len(np.unique(band[:, 0].round(3), axis=0)) > 40:
            return x
    return None


def test_dem_and_mst_pictures_have_a_colour_bar(mst_out, tmp_path, capsys):
    rc, out, err = run_main(capsys, "plot", mst_out, "-o", tmp_path / "a.png", "--size",
                            "600x480", scheduler=None)
    assert rc == 0, err
    assert _colour_bar(mpl_image.imread(tmp_path / "a.png")) is not None
    # an overview says why the forest is not drawn
    assert "forest not drawn at this scale" in out


def test_paths_in_lon_lat_are_drawn_where_they_lie(tmp_path, capsys):
    """``terrain path`` writes RFC 7946 longitude/latitude for a store with a CRS: plot
    reprojects them into the store's CRS (drawn raw, they fell off the picture)."""
    from grids import GT, write_utm_tif
    from pipelines.cost_distance import run_cost_distance
    z = (np.add.outer(np.arange(90.0), np.arange(120.0)) % 17).astype(np.float32) + 100
    write_utm_tif(tmp_path / "u.tif", z)
    out = tmp_path / "c.zarr"
    run_cost_distance(tmp_path / "u.tif", out, cells=[(10, 10)], backend="cpu",
                      scheduler="synchronous")
    to = f"{GT[0] + GT[1] * 100.5},{GT[3] + GT[5] * 80.5}"
    rc, _, err = run_main(capsys, "path", out, "--to", to, "-o", tmp_path / "p.geojson",
                          scheduler=None)
    assert rc == 0, err
    x, y = json.loads((tmp_path / "p.geojson").read_text())["features"][0]["geometry"][
        "coordinates"][0]
    assert -81 < x < -79 and 35 < y < 36  # longitude/latitude
    rc, text, err = run_main(capsys, "plot", out, "--paths", tmp_path / "p.geojson", "-o",
                             tmp_path / "c.png", "--size", "480x360", scheduler=None)
    assert rc == 0 and "1 path(s)" in text, err
    img = mpl_image.imread(tmp_path / "c.png")
    blue = (img[..., 0] < 0.1) & (img[..., 1] > 0.5) & (img[..., 2] > 0.9)  # the path colour
    assert blue.sum() > 100
    # the same path written as GeoPackage and FlatGeobuf (the store's CRS) draws the same
    for name in ("p.gpkg", "p.fgb"):
        rc, _, err = run_main(capsys, "path", out, "--to", to, "-o", tmp_path / name,
                              scheduler=None)
        assert rc == 0, err
        rc, text, err = run_main(capsys, "plot", out, "--paths", tmp_path / name, "-o",
                                 tmp_path / f"{name}.png", "--size", "480x360", scheduler=None)
        assert rc == 0 and "1 path(s)" in text, err
        other = mpl_image.imread(tmp_path / f"{name}.png")
        assert np.abs(other - img).max() < 0.02, name  # the geojson's lon/lat round trip


def test_a_graphs_options_on_a_stores_picture_are_refused(tmp_path, capsys):
    from pipelines.cost_distance import run_cost_distance
    from grids import write_asc
    path = write_asc(tmp_path / "g.asc", np.ones((20, 30), np.float32))
    run_cost_distance(path, tmp_path / "c.zarr", cells=[(1, 1)], backend="cpu",
                      scheduler="synchronous")
    for extra, said in ((["--backend", "cpu"], "--backend applies"),
                        (["--format", "mtx"], "--format applies"),
                        (["--backend", "cpu", "--format", "snap"], "--backend and --format apply")):
        rc, _, err = run_main(capsys, "plot", tmp_path / "c.zarr", "-o", tmp_path / "p.png",
                              *extra, scheduler=None)
        assert rc == 2 and err == (f"terrain: {tmp_path / 'c.zarr'}: {said} to a graph's BFS "
                                   "levels (with --source) only\n"), err
        assert not (tmp_path / "p.png").exists()


def test_block_max_keeps_what_a_strided_sample_drops():
    rng = np.random.default_rng(4)
    a = rng.random((53, 71))
    a[rng.random(a.shape) < 0.2] = np.nan
    a[:7, :9] = np.nan  # a block of NaN stays NaN
    from terrain.plot import read_block_max
    for stride, window in ((1, (0, 53, 0, 71)), (3, (0, 53, 0, 71)), (4, (2, 50, 5, 70)),
                           (7, (0, 53, 0, 71))):
        r0, r1, c0, c1 = window
        got = read_block_max(a, stride, window)
        want = np.array([[np.nanmax(a[r:min(r + stride, r1), c:min(c + stride, c1)])
                          if np.isfinite(a[r:min(r + stride, r1), c:min(c + stride, c1)]).any()
                          else np.nan for c in range(c0, c1, stride)]
                         for r in range(r0, r1, stride)])
        assert np.array_equal(got, want, equal_nan=True), stride
        assert got.shape == a[r0:r1:stride, c0:c1:stride].shape


def _blue(img):
    """The map's blue pixels (left of its colour bar, which is blue too)."""
    rgb = img[..., :3].astype(float)[:, :_colour_bar(img)]
    return (rgb[..., 2] > rgb[..., 0] + 0.15) & (rgb[..., 2] > rgb[..., 1] + 0.05)


def test_fill_and_flow_pictures_show_depressions_and_streams(tmp_path, capsys):
    """plot FILLSTORE colours the flooded cells blue (none on a DEM without depressions);
    plot FLOWSTORE colours by accumulation, its range the store's."""
    import zarr
    from terrain.io import write_synth
    write_synth(tmp_path / "s.asc", 150, 200, seed=8, nodata=0.02)
    for cmd, out in (("fill", "f.zarr"), ("flow", "w.zarr")):
        rc, _, err = run_main(capsys, cmd, tmp_path / "s.asc", "-o", tmp_path / out,
                              "--backend", "cpu")
        assert rc == 0, err
    depth = zarr.open_group(str(tmp_path / "f.zarr"), mode="r")["depth"][:]
    rc, text, err = run_main(capsys, "plot", tmp_path / "f.zarr", "-o", tmp_path / "f.png",
                             "--size", "500x400", scheduler=None)
    assert rc == 0, err
    assert f"to {np.nanmax(depth):.4g} deep" in text
    img = mpl_image.imread(tmp_path / "f.png")
    assert img.shape[:2] == (400, 500) and _colour_bar(img) is not None
    flooded = float((depth > 0).mean())
    assert flooded > 0.02 and _blue(img).sum() > 0.3 * flooded * 0.6 * 400 * 500
    acc = zarr.open_group(str(tmp_path / "w.zarr"), mode="r")["accumulation"][:]
    rc, text, err = run_main(capsys, "plot", tmp_path / "w.zarr", "-o", tmp_path / "w.png",
                             "--size", "500x400", scheduler=None)
    assert rc == 0, err
    assert f"flow accumulation {np.nanmin(acc):.4g} to {np.nanmax(acc):.4g}" in text
    assert _blue(mpl_image.imread(tmp_path / "w.png")).sum() > 1000
    # a plane tilted to the south-east: nothing floods, nothing is blue
    rows, cols = np.mgrid[0:60, 0:80]
    (tmp_path / "plane.asc").write_text(
        "ncols 80\nnrows 60\nxllcorner 0\nyllcorner 0\ncellsize 10\nNODATA_value -9999\n"
        + "\n".join(" ".join(f"{v:.1f}" for v in row) for row in 500.0 - rows - cols) + "\n")
    rc, _, err = run_main(capsys, "fill", tmp_path / "plane.asc", "-o", tmp_path / "p.zarr",
                          "--backend", "cpu")
    assert rc == 0, err
    rc, text, err = run_main(capsys, "plot", tmp_path / "p.zarr", "-o", tmp_path / "p.png",
                             "--size", "600x480", scheduler=None)
    assert rc == 0 and "no depression in view" in text, err
    assert _blue(mpl_image.imread(tmp_path / "p.png")).sum() == 0


def _longest_dark_run(img, axis):
    """The longest run of dark pixels along ``axis`` (1: rows, 0: columns): an axes' side."""
    dark = img[..., :3].max(axis=2) < 0.2
    lines = dark if axis == 1 else dark.T
    best = 0
    for line in lines:
        edges = np.flatnonzero(np.diff(np.concatenate([[0], line.astype(np.int8), [0]])))
        if edges.size:
            best = max(best, int((edges[1::2] - edges[::2]).max()))
    return best


def test_cells_that_are_not_square_are_drawn_in_map_units(tmp_path, capsys):
    """Cells of 10 x 30 m (20 rows, 30 columns: 300 m across, 600 m up): the map is twice
    as tall as wide, as a GIS draws it (it was drawn nearly square)."""
    import matplotlib.image
    import rasterio
    from rasterio.transform import from_origin
    z = (np.random.default_rng(1).random((20, 30)) * 50).astype(np.float32)
    with rasterio.open(tmp_path / "ns.tif", "w", driver="GTiff", height=20, width=30, count=1,
                       dtype="float32", transform=from_origin(5e5, 4e6, 10, 30),
                       crs="EPSG:32633") as dst:
        dst.write(z, 1)
    assert run_main(capsys, "fill", tmp_path / "ns.tif", "-o", tmp_path / "f.zarr",
                    scheduler=None)[0] == 0
    rc, _, err = run_main(capsys, "plot", tmp_path / "f.zarr", "-o", tmp_path / "p.png",
                          "--size", "600x600", scheduler=None)
    assert rc == 0, err
    img = matplotlib.image.imread(tmp_path / "p.png")
    across, up = _longest_dark_run(img, 1), _longest_dark_run(img, 0)
    assert 1.9 < up / across < 2.1, (across, up)


def test_a_store_without_anything_to_draw_says_what_it_holds(tmp_path, capsys):
    """A watershed's store (labels, no DEM, no source) was refused as "the DEM is not in this
    store and its source None is not a tile store"; it says what it holds and what plot
    draws."""
    from pathlib import Path
    sample = Path(__file__).parents[2] / "data" / "sample.asc"
    assert run_main(capsys, "flow", sample, "-o", tmp_path / "w.zarr", scheduler=None)[0] == 0
    rc, _, err = run_main(capsys, "watershed", tmp_path / "w.zarr", "--outlet-cell", "150,200",
                          "-o", tmp_path / "ws.zarr", scheduler=None)
    assert rc == 0, err
    rc, _, err = run_main(capsys, "plot", tmp_path / "ws.zarr", "-o", tmp_path / "p.png",
                          scheduler=None)
    assert rc == 2 and err.strip() == (f"terrain: {tmp_path / 'ws.zarr'}: holds watershed: plot "
                                       "draws a DEM, a forest, a cost distance, a fill or a "
                                       "flow")
    assert not (tmp_path / "p.png").exists()
