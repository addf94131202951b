"""Ingest: terrain's ASCII parser against rasterio/GDAL (the oracle), GeoTIFF, synth, the graph."""

import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
import pytest
import rasterio

import terrain.io.ascii_grid as ascii_grid
from pipelines.ingest import build_ingest_graph, ingest
from terrain.io import open_grid, read_grid, synth_rows, write_synth
from terrain.tiles import open_store
from grids import (assert_bits_equal, esri_text, grass_text, random_values, with_nodata,
                   replaced_after_its_header, write_asc)

ROOT = Path(__file__).resolve().parents[2]


def gdal_read(path):
    """rasterio's reading of band 1: float32, masked cells NaN."""
    with rasterio.open(path) as src:
        m = src.read(1, masked=True)
        return np.where(np.ma.getmaskarray(m), np.float32(np.nan), m.data.astype(np.float32))


def store_array(path):
    store = open_store(path)
    return store.read_window(0, store.shape[0], 0, store.shape[1])


@pytest.fixture
def small_blocks(monkeypatch):
    """Tiny parse blocks and index chunks so a small file crosses every boundary."""
    monkeypatch.setattr(ascii_grid, "BLOCK_BYTES", 301)
    monkeypatch.setattr(ascii_grid, "INDEX_CHUNK_BYTES", 97)


@pytest.mark.parametrize("kind", ["int", "decimal", "scientific", "long"])
@pytest.mark.parametrize("shape, tile", [((37, 53), 16), ((64, 32), 8)])
def test_esri_matches_rasterio(tmp_path, kind, shape, tile, small_blocks):
    rng = np.random.default_rng([len(kind), *shape])
    path = tmp_path / "g.asc"
    path.write_text(esri_text(with_nodata(rng, random_values(rng, shape, kind))))
    ingest(path, tmp_path / "g.zarr", tile=tile, scheduler="threads")
    want = gdal_read(path)
    assert np.isnan(want).any()
    assert_bits_equal(store_array(tmp_path / "g.zarr"), want)


@pytest.mark.parametrize("sep, eol, center", [("\t", "\r\n", False), ("  \t ", "\n", True),
                                              (" ", "\r\n", True)])
def test_esri_separators_and_line_endings(tmp_path, sep, eol, center):
    rng = np.random.default_rng(7)
    tokens = with_nodata(rng, random_values(rng, (21, 19), "decimal"), text="-3.5e3")
    path = tmp_path / "g.asc"
    path.write_bytes(esri_text(tokens, sep=sep, eol=eol, nodata="-3500", center=center).encode())
    z, grid = read_grid(path)
    assert_bits_equal(z, gdal_read(path))
    with rasterio.open(path) as src:
        np.testing.assert_allclose(grid.geotransform, src.transform.to_gdal())


def test_case_insensitive_keys_and_no_trailing_newline(tmp_path):
    path = tmp_path / "g.asc"
    path.write_text("NCOLS 3\nNRows 2\nXLLCORNER 0\nyllCorner 0\nCELLSIZE 1\n"
                    "1 2 3\n-4.5 +5e1 .25")
    z, grid = read_grid(path)
    assert grid.header["ncols"] == "3"
    assert_bits_equal(z, gdal_read(path))


def test_first_data_row_longer_than_the_header_probe(tmp_path, monkeypatch):
    monkeypatch.setattr(ascii_grid, "_HEADER_PROBE", 100)
    rng = np.random.default_rng(9)
    tokens = random_values(rng, (3, 40), "decimal")
    path = tmp_path / "wide.asc"
    path.write_text(esri_text(tokens, nodata=None))
    z, grid = read_grid(path)
    assert grid.data_line == 6
    assert_bits_equal(z, gdal_read(path))


def test_dx_dy_header(tmp_path):
    path = tmp_path / "g.asc"
    path.write_text("ncols 2\nnrows 2\nxllcorner 10\nyllcorner 20\ndx 2\ndy 3\n1 2\n3 4\n")
    z, grid = read_grid(path)
    assert grid.geotransform == (10.0, 2.0, 0.0, 26.0, 0.0, -3.0)
    assert_bits_equal(z, np.array([[1, 2], [3, 4]], np.float32))


@pytest.mark.parametrize("null", ["-9999", None])
def test_grass_ascii(tmp_path, null, small_blocks):
    rng = np.random.default_rng(3)
    values = random_values(rng, (29, 41), "decimal")
    holes = rng.random(values.shape) < 0.1
    written = values.astype(np.float64).astype(np.float32)
    written[holes] = np.nan
    stars = values.copy()
    stars[holes] = "*"
    path = tmp_path / "stars.grass"
    path.write_text(grass_text(stars, null=null))
    ingest(path, tmp_path / "g.zarr", tile=16, scheduler="threads")
    # GDAL 3.10 reads '*' as 0 (null: line or not): compare with what was written
    assert_bits_equal(store_array(tmp_path / "g.zarr"), written)
    store = open_store(tmp_path / "g.zarr")
    assert store.geotransform == (300.0, 2.0, 0.0, 4058.0, 0.0, -2.0)
    assert store.attrs["source_format"] == "grass-ascii"
    if null:  # the null value itself is nodata for GDAL too
        tokens = values.copy()
        tokens[holes] = null
        path = tmp_path / "null.grass"
        path.write_text(grass_text(tokens, null=null))
        z, _ = read_grid(path)
        assert_bits_equal(z, gdal_read(path))
        assert_bits_equal(z, written)


def test_geotiff_through_rasterio(tmp_path):
    rng = np.random.default_rng(5)
    z = rng.normal(300, 50, (70, 45)).astype(np.float32)
    z[10:20, 5:9] = -32768
    path = tmp_path / "dem.tif"
    with rasterio.open(path, "w", driver="GTiff", height=70, width=45, count=1, dtype="float32",
                       crs="EPSG:32617", transform=rasterio.Affine(30, 0, 600000, 0, -30, 3900000),
                       nodata=-32768, tiled=True, blockxsize=16, blockysize=16) as dst:
        dst.write(z, 1)
    store = ingest(path, tmp_path / "dem.zarr", tile=16, scheduler="threads")
    want = z.copy()
    want[10:20, 5:9] = np.nan
    assert_bits_equal(store_array(store.path), want)
    assert "32617" in store.attrs["crs"] or "UTM zone 17N" in store.attrs["crs"]
    assert store.geotransform == (600000.0, 30.0, 0.0, 3900000.0, 0.0, -30.0)
    assert store.attrs["nodata"] == -32768.0
    assert store.attrs["stats"]["nodata_cells"] == 40


@pytest.mark.parametrize("header", ["NODATA_value nan\n", "NODATA_value -9999\n", ""])
def test_nan_tokens_and_a_nan_nodata_value_are_nodata(tmp_path, header):
    """'nan' among the values (numpy.savetxt writes it) and 'NODATA_value nan' were refused;
    a NaN is nodata, as the stores hold it (GDAL 3.10 reads 'nan' as NaN in a grid of
    floats, as 0 in a grid of integers, and '-NaN' as 0: docs/gis.md, "ASCII grids")."""
    path = tmp_path / "n.asc"
    path.write_text("ncols 3\nnrows 3\nxllcorner 0\nyllcorner 0\ncellsize 1\n" + header
                    + "1 2 3\n4 nan 6\n-NaN 8 -9999\n")
    last = np.nan if "-9999" in header else -9999
    want = np.array([[1, 2, 3], [4, np.nan, 6], [np.nan, 8, last]], np.float32)
    assert_bits_equal(read_grid(path)[0], want)
    if header == "NODATA_value nan\n":  # where GDAL reads a NaN, the same NaN
        with rasterio.open(path) as src:
            assert np.isnan(src.read(1)[1, 1])
    store = ingest(path, tmp_path / "n.zarr", scheduler="threads", nodata="nan")
    z = store_array(store.path)  # the option: NaN cells nodata, -9999 a value
    assert np.isnan(z[1, 1]) and z[2, 2] == -9999


def test_a_bands_scale_and_offset_give_the_elevations(tmp_path):
    """int16 decimetres above 100 m (scale 0.1, offset 100): the stored integers were read
    as elevations, depths and costs 10 times too large; nodata is a stored value."""
    raw = np.random.default_rng(6).integers(0, 1000, (20, 30)).astype(np.int16)
    raw[3, 4] = -9999
    path = tmp_path / "scaled.tif"
    with rasterio.open(path, "w", driver="GTiff", height=20, width=30, count=1, dtype="int16",
                       crs="EPSG:32617", transform=rasterio.Affine(30, 0, 6e5, 0, -30, 4e6),
                       nodata=-9999) as dst:
        dst.write(raw, 1)
        dst.scales, dst.offsets = (0.1,), (100.0,)
    with rasterio.open(path) as src:  # GDAL's unscaled values, as QGIS shows them
        want = (src.read(1, masked=True).astype(np.float64) * 0.1 + 100).astype(np.float32)
    z, grid = read_grid(path)
    assert_bits_equal(z, want.filled(np.nan))
    assert grid.header["scale"] == 0.1 and grid.header["offset"] == 100.0
    store = ingest(path, tmp_path / "s.zarr", tile=16, scheduler="threads")
    assert_bits_equal(store_array(store.path), want.filled(np.nan))


def test_synth_bands_are_independent_and_exact(tmp_path, small_blocks):
    path = tmp_path / "s.asc"
    write_synth(path, 90, 70, seed=4, nodata=0.2)
    whole = synth_rows(90, 70, 0, 90, seed=4, nodata=0.2)
    assert_bits_equal(synth_rows(90, 70, 33, 61, seed=4, nodata=0.2), whole[33:61])
    assert 0.1 < np.isnan(whole).mean() < 0.3
    z, _ = read_grid(path)
    assert_bits_equal(z, whole)
    assert_bits_equal(gdal_read(path), whole)
    ints = tmp_path / "i.asc"
    write_synth(ints, 20, 30, seed=4, integer=True)
    zi, _ = read_grid(ints)
    assert np.array_equal(zi, np.round(zi)) and len(np.unique(zi)) < zi.size


def test_graph_returns_store_path_and_runs_in_a_bigger_graph(tmp_path):
    target = tmp_path / "s.zarr"
    graph = build_ingest_graph(ROOT / "data" / "sample.asc", target, tile=64)
    assert not target.exists()  # building writes nothing
    downstream = dask.delayed(lambda p: open_store(p).shape)(graph)
    assert dask.compute(downstream, scheduler="threads")[0] == (300, 400)


def test_cli_ingest_sample_matches_rasterio(tmp_path):
    out = tmp_path / "sample.zarr"
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "ingest", "data/sample.asc",
                           "-o", str(out), "--tile", "128"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert_bits_equal(store_array(out), gdal_read(ROOT / "data" / "sample.asc"))
    info = subprocess.run([sys.executable, "-m", "terrain.run", "info", str(out)],
                          capture_output=True, text=True)
    assert info.returncode == 0, info.stderr
    want = gdal_read(ROOT / "data" / "sample.asc")
    assert f"{int(np.isnan(want).sum())} cells" in info.stdout
    assert f"{np.nanmax(want):.6g}" in info.stdout and "300 rows x 400 cols" in info.stdout


def test_open_grid_reports_shape_without_reading_data(tmp_path):
    grid = open_grid(ROOT / "data" / "sample.asc")
    assert grid.shape == (300, 400) and grid.dialect == "esri" and grid.nodata == -9999.0


@pytest.mark.parametrize("kind", ["decimal", "scientific", "long"])
def test_read_all_on_a_pool_matches_rasterio(tmp_path, kind, small_blocks):
    from concurrent.futures import ThreadPoolExecutor

    from pipelines.ingest import band_stats
    rng = np.random.default_rng(len(kind))
    path = tmp_path / "g.asc"
    path.write_text(esri_text(with_nodata(rng, random_values(rng, (41, 29), kind))))
    seen = []
    with ThreadPoolExecutor(3) as pool:
        z, stats = open_grid(path).read_all(pool, on_block=lambda a, b: seen.append((a, b)))
    want = gdal_read(path)
    assert_bits_equal(z, want)
    assert sorted(seen)[0][0] == 0 and sorted(seen)[-1][1] == 41 and len(seen) > 2
    n_nan, lo, hi = band_stats(want)
    assert sum(s[0] for s in stats) == n_nan
    assert min(s[1] for s in stats) == lo and max(s[2] for s in stats) == hi


@pytest.mark.parametrize("eol, tail", [("\n", ""), ("\r\n", "\r\n"), ("\n", "\n\n")])
def test_newline_index_equals_numpy(tmp_path, eol, tail):
    from terrain.io._parse import newline_offsets
    rng = np.random.default_rng(7)
    path = tmp_path / "l.asc"
    path.write_text(esri_text(random_values(rng, (23, 40), "decimal"), eol=eol).rstrip() + tail)
    grid = open_grid(path)
    data = np.fromfile(path, dtype=np.uint8)
    want = np.flatnonzero(data == 10) + 1
    want = want[want > grid.data_offset]
    want = (want if want[-1] == data.size else np.append(want, data.size))[:23]
    for chunk in (1, 7, 97, 1 << 20):
        got = grid.row_starts([grid.newline_offsets(a, b) for a, b in grid.index_ranges(chunk)])
        assert np.array_equal(got, np.append(grid.data_offset, want)) and len(got) == 24
    for guess in (0, 3, 10 ** 4):  # a low guess of the count takes the second pass
        got = newline_offsets(data[5:], 5, expected=guess)
        assert np.array_equal(got, np.flatnonzero(data[5:] == 10) + 6)


def test_band_tasks_in_flight_follow_the_host_budget_not_the_threads(tmp_path, monkeypatch):
    """The ingest's band tasks of one process hold at most BAND_HOST_BUDGET of bands at
    once (at least two), whatever the scheduler's threads: the RSS does not follow the cores."""
    import threading
    import time
    import pipelines.ingest as ing
    write_synth(tmp_path / "g.asc", 9000, 6, seed=2)  # five bands of 2048 rows
    monkeypatch.setattr(ing, "BAND_HOST_BUDGET", 1)  # every band is over it: two at once
    running, most = [0], [0]
    lock = threading.Lock()
    real = ing._ingest_band_now

    def counting(*args):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        try:
            return real(*args)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(ing, "_ingest_band_now", counting)
    graph = build_ingest_graph(tmp_path / "g.asc", tmp_path / "g.zarr", tile=64)
    with dask.config.set(num_workers=8):
        dask.compute(graph, scheduler="threads")
    assert most[0] == 2
    want, _ = read_grid(tmp_path / "g.asc")
    assert_bits_equal(open_store(tmp_path / "g.zarr").read_window(0, 9000, 0, 6), want)


@pytest.mark.parametrize("scheduler", [None, "synchronous"])
def test_input_replaced_after_its_header_is_told_as_changed(tmp_path, monkeypatch, scheduler):
    # its rows, read at the old header's offsets, were blamed as malformed ("row N has M
    # values, expected ncols=...") when the replacement came before the output's check
    import pipelines.ingest as ingest_module
    from terrain.errors import InputError
    dem = write_asc(tmp_path / "dem.asc", np.arange(30 * 40, dtype=np.float32).reshape(30, 40))
    replaced_after_its_header(monkeypatch, ingest_module, "open_grid", dem)
    with pytest.raises(InputError, match="changed while this run read it"):
        ingest(dem, tmp_path / "e.zarr", tile=16, scheduler=scheduler)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dem.asc"]


@pytest.mark.parametrize("damaged", ["band", "create"])
def test_a_resumed_ingest_counts_the_tasks_it_did_not_run(tmp_path, monkeypatch, damaged):
    """A killed ingest's partial with one checkpoint emptied (what a power cut leaves): that
    task runs again, and with the store's creation every band after it. The count of
    reused tasks is the checkpointed tasks that did not run (counted as they run), not the
    checkpoint files found: it counted the damaged ones and those made stale."""
    import pipelines.ingest as ingest_mod
    from cli import run_killed
    monkeypatch.setattr("terrain.tiles.store.SHARD_TARGET_SIDE", 64)
    write_synth(tmp_path / "g.asc", 300, 90, seed=4)  # 5 bands of 64 rows at tile 16
    argv = ["ingest", tmp_path / "g.asc", "--tile", "16", "--scheduler", "synchronous"]
    run_killed([*argv, "-o", tmp_path / "e.zarr"], "pipelines.ingest", "_ingest_band", 4,
               shard_side=64)
    (partial,) = tmp_path.glob(".e.zarr.partial-*")
    kept = sorted((partial / ".terrain-checkpoints").glob(f"ingest-{damaged}-*.npz"))
    kept[0].write_bytes(b"")
    ran = []
    for step in ("_ingest_band", "create_elevation"):
        real = getattr(ingest_mod, step)
        monkeypatch.setattr(ingest_mod, step, lambda *a, real=real, **k: ran.append(1) or
                            real(*a, **k))
    fresh = ingest(tmp_path / "g.asc", tmp_path / "f.zarr", tile=16, scheduler="synchronous")
    tasks, ran[:] = len(ran), []
    resumed = ingest(tmp_path / "g.asc", tmp_path / "e.zarr", tile=16, scheduler="synchronous",
                     resume=True)
    assert fresh.reused_tasks == 0 and tasks == 6
    assert resumed.reused_tasks == tasks - len(ran) == (3 if damaged == "band" else 0)
    assert_bits_equal(store_array(tmp_path / "e.zarr"), store_array(tmp_path / "f.zarr"))
