"""``terrain batch``: mixed formats on one scheduler, a manifest, bad files do not stop the rest."""

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from cli import assert_one_line_error, child_env, run_killed, run_terrain

from terrain.io import read_grid

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample.asc"
GRASS = "north: 3\nsouth: 0\neast: 4\nwest: 0\nrows: 3\ncols: 4\n1 2 3 4\n5 6 7 8\n9 10 11 12\n"


@pytest.fixture
def rasters(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    from rasterio.transform import Affine
    d = tmp_path / "rasters"
    d.mkdir()
    (d / "a.asc").write_bytes(SAMPLE.read_bytes())
    z, grid = read_grid(SAMPLE)
    with rasterio.open(d / "b.tif", "w", driver="GTiff", width=z.shape[1], height=z.shape[0],
                       count=1, dtype="float32", nodata=np.nan,
                       transform=Affine.from_gdal(*grid.geotransform)) as dst:
        dst.write(z, 1)
    (d / "c.grass").write_text(GRASS)
    (d / "broken.asc").write_text("ncols 4\nnrows 3\nxllcorner 0\nyllcorner 0\ncellsize 1\n"
                                  "1 2 3 4\n5 6 x 8\n9 10 11 12\n")
    return d


def _manifest(outdir):
    doc = json.loads((outdir / "manifest.json").read_text())
    with open(outdir / "manifest.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["input"] for r in table] == [r["input"] for r in doc["files"]]
    assert [r["status"] for r in table] == [r["status"] for r in doc["files"]]
    return {Path(r["input"]).name: r for r in doc["files"]}


def test_batch_mst_mixed_formats_one_bad_file(tmp_path, rasters):
    proc = run_terrain("batch", "mst", "rasters/*", "-o", "out", "--tile", "64", "--backend",
                       "cpu", "--scheduler", "local", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # one file failed
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("terrain: Dask dashboard at")  # one cluster for the batch
    assert sum("Dask dashboard" in x for x in lines) == 1
    assert any("[3/4] rasters/broken.asc: failed" in x for x in lines), lines
    rows = _manifest(tmp_path / "out")
    assert {k: r["status"] for k, r in rows.items()} == {
        "a.asc": "done", "b.tif": "done", "broken.asc": "failed", "c.grass": "done"}
    assert rows["broken.asc"]["error"] == \
        "rasters/broken.asc:7: non-numeric token 'x' (row 2, column 3)"
    assert not (tmp_path / "out" / "broken.mst.zarr").exists()
    # the ASCII grid and the GeoTIFF of the same data give the same forest
    a = zarr.open_group(str(tmp_path / "out" / "a.mst.zarr"), mode="r")
    b = zarr.open_group(str(tmp_path / "out" / "b.mst.zarr"), mode="r")
    assert np.array_equal(a["mst"][:], b["mst"][:])
    assert a.attrs["mst"]["total_weight"] == b.attrs["mst"]["total_weight"]
    assert rows["c.grass"]["summary"]["edges"] == 11  # 3 x 4 cells, connected: 12 - 1

    # rerun: finished files are skipped, the broken one is tried again (and fails again)
    (rasters / "broken.asc").write_text(GRASS)
    proc = run_terrain("batch", "mst", "rasters/*", "-o", "out", "--tile", "64", "--backend",
                       "cpu", "--scheduler", "synchronous", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = _manifest(tmp_path / "out")
    assert {k: r["status"] for k, r in rows.items()} == {
        "a.asc": "skipped", "b.tif": "skipped", "broken.asc": "done", "c.grass": "skipped"}
    # an input changed since: run again, its output exists, and the refusal says why
    import os
    os.utime(rasters / "a.asc", ns=(1, 10**18))
    proc = run_terrain("batch", "mst", "rasters/*", "-o", "out", "--tile", "64", "--backend",
                       "cpu", "--scheduler", "synchronous", cwd=tmp_path)
    assert proc.returncode == 1 and _manifest(tmp_path / "out")["a.asc"]["error"] == (
        "out/a.mst.zarr: output exists; its input changed since the earlier batch made it "
        "(use --overwrite to replace it)")


def test_batch_ingest_from_a_directory_and_a_manifest_file(tmp_path, rasters):
    (rasters / "broken.asc").unlink()
    (tmp_path / "list.lst").write_text("# two of them\nrasters/a.asc\n\nrasters/c.grass\n")
    proc = run_terrain("batch", "ingest", "list.lst", "-o", "out", "--tile", "64",
                       "--scheduler", "threads", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [Path(r["input"]).name for r in json.loads(proc.stdout)] == ["a.asc", "c.grass"]
    proc = run_terrain("batch", "ingest", "rasters", "-o", "out", "--tile", "64",
                       "--scheduler", "threads", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = _manifest(tmp_path / "out")
    assert {k: r["status"] for k, r in rows.items()} == {
        "a.asc": "skipped", "b.tif": "done", "c.grass": "skipped"}
    z = zarr.open_group(str(tmp_path / "out" / "b.zarr"), mode="r")["elevation"][:]
    ref, _ = read_grid(SAMPLE)
    assert np.asarray(z).tobytes() == ref.tobytes()


def test_a_glob_leaves_out_the_rasters_companion_files(tmp_path):
    """``dir/*`` matched a GeoTIFF's GDAL mask (a TIFF: it ran as a DEM), its overviews and
    metadata, and an ASCII grid's .prj (a failed row): the rasters alone are inputs."""
    import rasterio
    from pipelines.batch import expand_inputs
    d = tmp_path / "rasters"
    d.mkdir()
    (d / "dem.asc").write_bytes(SAMPLE.read_bytes())
    (d / "dem.prj").write_text('PROJCS["x"]')
    z = np.arange(12, dtype=np.float32).reshape(3, 4)
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=False):
        with rasterio.open(d / "a.tif", "w", driver="GTiff", height=3, width=4, count=1,
                           dtype="float32") as ds:
            ds.write(z, 1)
            ds.write_mask(np.array(z > 2, np.uint8) * 255)
    with rasterio.open(d / "a.tif.msk") as ds:  # GDAL's mask beside it: a raster it opens
        assert ds.count == 1
    for name in ("a.tif.aux.xml", "a.tif.ovr", "b.TFW"):
        (d / name).write_text("x")
    assert sorted(p.name for p in expand_inputs([str(d / "*")])) == ["a.tif", "dem.asc"]


def test_batch_with_nothing_to_do_is_one_line(tmp_path):
    proc = run_terrain("batch", "ingest", "none/*.asc", "-o", "out", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "terrain: none/*.asc: no such file, directory or matching files"
    assert list(tmp_path.iterdir()) == []


def test_default_scheduler_follows_each_files_grid(tmp_path, rasters, monkeypatch):
    """Without --scheduler each file runs on the scheduler its grid would have alone:
    threads up to DASHBOARD_MIN_CELLS (no cluster's start: 1000 grids of 20 x 20 took 58 s
    on one, 31 s without), the in-process cluster past it, started once by the first large
    file and kept for the later ones; small files between run beside it on threads. The
    batch's largest file put every file on a cluster. A file its reader refuses is no grid.
    The oracle: rasterio's shapes of the files."""
    import rasterio

    import pipelines.batch as batch
    import pipelines.cluster as cluster
    from argparse import Namespace
    from terrain.io import write_synth
    for f in sorted(rasters.iterdir()):
        if f.name != "broken.asc":
            with rasterio.open(f) as r:
                assert batch._cells(f) == r.width * r.height, f
    assert batch._cells(tmp_path / "missing.asc") == 0
    for name, rows in (("big1", 30), ("small", 10), ("big2", 30)):
        write_synth(tmp_path / f"{name}.asc", rows, 20, seed=rows)
    monkeypatch.setattr(cluster, "DASHBOARD_MIN_CELLS", 200)  # 10 x 20 below, 30 x 20 past
    started, on_cluster = [], {}
    opened = cluster.open_scheduler

    def counting(spec=None, **kwargs):
        if spec == cluster.LOCAL_CLUSTER:
            started.append(spec)
        return opened(spec, **kwargs)
    monkeypatch.setattr(cluster, "open_scheduler", counting)
    run, suffix = batch.RUNNERS["ingest"]

    def noting(inp, out, args, scheduler):
        on_cluster[Path(inp).stem] = cluster.cluster_active()
        return run(inp, out, args, scheduler)
    monkeypatch.setitem(batch.RUNNERS, "ingest", (noting, suffix))
    inputs = [str(tmp_path / f"{name}.asc") for name in ("big1", "small", "big2")]
    args = Namespace(tile=16, overwrite=False)
    rows = batch.run_batch("ingest", inputs, tmp_path / "out", args, None, lambda m: None)
    assert [r["status"] for r in rows] == ["done"] * 3, rows
    assert on_cluster == {"big1": True, "small": False, "big2": True}
    assert started == ["local"] and not cluster.cluster_active()
    rows = batch.run_batch("ingest", inputs, tmp_path / "out", args, None, lambda m: None)
    assert [r["status"] for r in rows] == ["skipped"] * 3  # no file to run: no cluster
    assert started == ["local"]
    monkeypatch.undo()
    proc = run_terrain("batch", "ingest", "rasters/a.asc", "rasters/b.tif", "-o", "out",
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "dashboard" not in proc.stderr
    assert [r["status"] for r in _manifest(tmp_path / "out").values()] == ["done", "done"]


CD_SOURCES = ("--source", "502005,4001505", "--source-cell", "10,390")


def _layers(store, names=("distance", "allocation", "backlink")):
    g = zarr.open_group(str(store), mode="r")
    return {name: np.asarray(g[name][:]) for name in names}


def test_batch_cost_distance_mixed_formats_one_bad_file(tmp_path, rasters):
    (rasters / "c.grass").unlink()  # a 3 x 4 grid does not hold the map source
    lines = SAMPLE.read_text().splitlines(keepends=True)
    lines[200] = lines[200].replace(" ", " x ", 1)  # broken: a bad token on the grid's row 195
    (rasters / "broken.asc").write_text("".join(lines))
    args = ("batch", "cost-distance", "rasters/*", "-o", "out", *CD_SOURCES, "--cost", "tobler",
            "--connectivity", "16", "--backend", "cpu", "--tile", "64", "--scheduler", "local")
    proc = run_terrain(*args, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr  # one file failed
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert sum("Dask dashboard" in x for x in lines) == 1  # one cluster for the batch
    assert any("[3/3] rasters/broken.asc: failed" in x for x in lines), lines
    rows = _manifest(tmp_path / "out")
    assert {k: r["status"] for k, r in rows.items()} == {
        "a.asc": "done", "b.tif": "done", "broken.asc": "failed"}
    assert rows["broken.asc"]["error"].startswith("rasters/broken.asc:201: "), rows
    assert rows["a.asc"]["output"] == "out/a.cost.zarr"
    assert rows["a.asc"]["summary"]["sources"] == 2
    assert not (tmp_path / "out" / "broken.cost.zarr").exists()
    # the same as single-file runs, for the ESRI grid and the GeoTIFF alike
    proc = run_terrain("cost-distance", "rasters/a.asc", "-o", "single.zarr", *CD_SOURCES,
                       "--cost", "tobler", "--connectivity", "16", "--backend", "cpu",
                       "--tile", "64", "--scheduler", "threads", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    single = _layers(tmp_path / "single.zarr")
    assert np.isfinite(single["distance"]).sum() > 1000
    assert set(np.unique(single["allocation"])) >= {0, 1}
    for name in ("a", "b"):
        got = _layers(tmp_path / "out" / f"{name}.cost.zarr")
        for layer, ref in single.items():
            np.testing.assert_array_equal(got[layer], ref, strict=True)

    # rerun: the finished files are skipped, the broken one is tried again
    (rasters / "broken.asc").write_bytes(SAMPLE.read_bytes())
    proc = run_terrain(*args, "--scheduler", "threads", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = _manifest(tmp_path / "out")
    assert {k: r["status"] for k, r in rows.items()} == {
        "a.asc": "skipped", "b.tif": "skipped", "broken.asc": "done"}
    with open(tmp_path / "out" / "manifest.csv", newline="") as f:
        table = {Path(r["input"]).name: r for r in csv.DictReader(f)}
    assert table["broken.asc"]["output"] == "out/broken.cost.zarr"
    assert float(table["broken.asc"]["seconds"]) > 0 and table["broken.asc"]["error"] == ""
    # other sources: not skipped; the outputs exist, so without --overwrite every file fails
    proc = run_terrain(*args[:5], "--source-cell", "0,0", "--backend", "cpu", "--tile", "64",
                       "--scheduler", "threads", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    rows = _manifest(tmp_path / "out")
    assert {r["status"] for r in rows.values()} == {"failed"}
    # the refusal says what differs from the earlier batch, and how to replace the output
    assert rows["a.asc"]["error"].startswith(
        "out/a.cost.zarr: output exists; the earlier batch made it with other options (")
    assert rows["a.asc"]["error"].endswith("(use --overwrite to replace it)")
    np.testing.assert_array_equal(_layers(tmp_path / "out" / "a.cost.zarr")["distance"],
                                  single["distance"])  # nothing overwritten
    # the outputs are still the first batch's: run as then, they are skipped (the failed
    # run's record had replaced theirs, and every file then failed as existing)
    proc = run_terrain(*args, "--scheduler", "threads", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert {r["status"] for r in _manifest(tmp_path / "out").values()} == {"skipped"}


def test_batch_cost_distance_checks_shared_options_first(tmp_path, rasters):
    for extra, expected in [((), "no sources given"),
                            (("--source", "1,x"), "expected two numbers"),
                            (("--source-cell", "1,1", "--cost", "friction"),
                             "needs a friction raster"),
                            (("--source-cell", "1,1", "--max-cost", "0"), "must be > 0"),
                            (("--source-cell", "1,1", "--stop-cell", "2,2", "--route",
                              "blocked"), "stop cells need the in-core algorithm, not the "
                                          "blocked one"),
                            (("--source-cell", "1,1", "--route", "in-core", "--memory",
                              "30MB"), "a memory budget picks the algorithm")]:
        proc = run_terrain("batch", "cost-distance", "rasters/*", "-o", "out", *extra,
                           cwd=tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and expected in proc.stderr
        assert not (tmp_path / "out").exists()



def test_batch_refuses_the_options_of_other_commands(tmp_path, capsys):
    """An option only another command takes would be ignored: refused in one line, before
    any folder is made."""
    from cli import run_main
    for what, extra, flag, owners in [
            ("fill", ("--weight", "slope"), "--weight", "mst"),
            ("flow", ("--friction", "f.tif"), "--friction", "cost-distance"),
            ("ingest", ("--connectivity", "4"), "--connectivity",
             "mst, cost-distance, fill and flow"),
            ("mst", ("--filled",), "--filled", "flow"),
            ("fill", ("--source", "1,2", "--max-cost", "5"), "--source", "cost-distance")]:
        rc, _, err = run_main(capsys, "batch", what, tmp_path / "*.tif", "-o",
                              tmp_path / "out", *extra)
        assert rc == 2 and err == f"terrain: batch {what}: {flag} is an option of batch " \
            f"{owners}\n"
    assert list(tmp_path.iterdir()) == []


FLOW = ("filled", "direction", "accumulation")


def test_batch_flow_weights_per_input_and_shared_outlets(tmp_path, rasters, capsys):
    """``batch flow --weights 'rain/{stem}.asc' --outlets o.csv``: each DEM its own weights,
    every DEM the same outlet; each output the layers of its own ``flow`` run."""
    from cli import run_main
    z, _ = read_grid(SAMPLE)
    (rasters / "broken.asc").unlink()
    (rasters / "c.grass").unlink()
    rain = tmp_path / "rain"
    rain.mkdir()
    head = "".join(SAMPLE.read_text().splitlines(keepends=True)[:6])
    for stem, value in (("a", "2"), ("b", "0.5")):
        (rain / f"{stem}.asc").write_text(head + "\n".join(
            " ".join([value] * z.shape[1]) for _ in range(z.shape[0])) + "\n")
    (tmp_path / "o.csv").write_text("x,y\n501005,4002505\n")
    proc = run_terrain("batch", "flow", "rasters/*", "-o", "out", "--weights", "rain/{stem}.asc",
                       "--outlets", "o.csv", "--backend", "cpu", "--scheduler", "threads",
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = _manifest(tmp_path / "out")
    assert {k: r["status"] for k, r in rows.items()} == {"a.asc": "done", "b.tif": "done"}
    for stem, name in (("a", "a.asc"), ("b", "b.tif")):
        rc, _, err = run_main(capsys, "flow", rasters / name, "-o", tmp_path / f"{stem}.zarr",
                              "--weights", rain / f"{stem}.asc", "--outlets", tmp_path / "o.csv",
                              "--backend", "cpu", scheduler="threads")
        assert rc == 0, err
        got, want = (_layers(path, FLOW) for path in (tmp_path / "out" / f"{stem}.flow.zarr",
                                                       tmp_path / f"{stem}.zarr"))
        for layer in FLOW:
            np.testing.assert_array_equal(got[layer], want[layer])
        assert np.count_nonzero(got["direction"] == 0) == 1  # the one named outlet
    a, b = (_layers(tmp_path / "out" / f"{s}.flow.zarr", FLOW)["accumulation"] for s in "ab")
    np.testing.assert_array_equal(a, 4 * b)  # weights 2 and 0.5 on the same grid

def test_batch_cost_distance_friction_per_input(tmp_path, rasters):
    """``{stem}`` picks each DEM's own friction raster; a source outside one raster fails
    that file only."""
    z, _ = read_grid(SAMPLE)
    fdir = tmp_path / "fr"
    fdir.mkdir()
    (fdir / "a.asc").write_bytes(SAMPLE.read_bytes())  # friction = the elevations
    head = "".join(SAMPLE.read_text().splitlines(keepends=True)[:6])
    body = "\n".join(  # friction 2 everywhere
        " ".join(["2"] * z.shape[1]) for _ in range(z.shape[0]))
    (fdir / "b.asc").write_text(head + body + "\n")
    (rasters / "broken.asc").unlink()
    proc = run_terrain("batch", "cost-distance", "rasters/*", "-o", "out", "--cost",
                       "friction", "--friction", "fr/{stem}.asc", "--source-cell", "150,200",
                       "--source", "501005,4002505", "--backend", "cpu", "--scheduler",
                       "threads", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    rows = _manifest(tmp_path / "out")
    assert {k: r["status"] for k, r in rows.items()} == {
        "a.asc": "done", "b.tif": "done", "c.grass": "failed"}
    assert rows["c.grass"]["error"].startswith("rasters/c.grass: source")  # outside it
    b = _layers(tmp_path / "out" / "b.cost.zarr")["distance"]
    a = _layers(tmp_path / "out" / "a.cost.zarr")["distance"]
    # friction 2 on 10 m cells: a straight step costs 20
    assert b[150, 201] == 20.0 and b[151, 200] == 20.0
    assert a[150, 201] == 10.0 * ((float(z[150, 200]) + float(z[150, 201])) * 0.5)


def test_batch_geotiffs_in_a_folder_per_file(tmp_path, rasters):
    """``--geotiff-dir DIR``: each file's COGs in DIR/<stem>/ (``{stem}`` places them
    elsewhere), the layers of its store; a rerun asking for them where the first did not
    is not skipped as done."""
    rasterio = pytest.importorskip("rasterio")
    (rasters / "broken.asc").unlink()
    (rasters / "c.grass").unlink()
    common = ["--source-cell", "150,200", "--backend", "cpu", "--scheduler", "threads"]
    _ok("batch", "cost-distance", "rasters/*", "-o", "out", *common, cwd=tmp_path)
    proc = run_terrain("batch", "cost-distance", "rasters/*", "-o", "out", "--geotiff-dir",
                       "gt", *common, cwd=tmp_path)  # other parameters: the stores are there
    assert proc.returncode == 1 and "out/a.cost.zarr: output exists" in proc.stderr
    _ok("batch", "cost-distance", "rasters/*", "-o", "out", "--geotiff-dir", "gt", *common,
        "--overwrite", cwd=tmp_path)
    assert {k: r["status"] for k, r in _manifest(tmp_path / "out").items()} == {
        "a.asc": "done", "b.tif": "done"}
    for stem in ("a", "b"):
        layers = _layers(tmp_path / "out" / f"{stem}.cost.zarr")
        for name, want in layers.items():
            with rasterio.open(tmp_path / "gt" / stem / f"{name}.tif") as ds:
                np.testing.assert_array_equal(ds.read(1), want)
    _ok("batch", "fill", "rasters/*", "-o", "fills", "--geotiff-dir", "f-{stem}",
        "--backend", "cpu", cwd=tmp_path)
    assert sorted(p.name for p in (tmp_path / "f-a").iterdir()) == [
        "depression.tif", "depth.tif", "filled.tif"]
    # a template whose folders' parent is missing: refused once, before any file runs
    proc = run_terrain("batch", "fill", "rasters/*", "-o", "fills2", "--geotiff-dir",
                       "none/{stem}", "--backend", "cpu", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("does not exist") == 1 and "none/a" in proc.stderr, proc.stderr
    assert not (tmp_path / "fills2").exists() and not (tmp_path / "none").exists()


# ----------------------------------------------------------------------------- what users hit


def _two_folders(tmp_path):
    """``d1/a.asc`` and ``d2/a.asc``: the same name, different data."""
    from terrain.io import write_synth
    for name, seed in (("d1", 1), ("d2", 2)):
        (tmp_path / name).mkdir()
        write_synth(tmp_path / name / "a.asc", 40, 50, seed=seed)


def test_same_file_names_in_two_folders_get_two_outputs(tmp_path):
    _two_folders(tmp_path)
    proc = run_terrain("batch", "ingest", "d1/a.asc", "d2/a.asc", "-o", "out", "--tile", "16",
                       "--overwrite", "--scheduler", "synchronous", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "out" / "manifest.json").read_text())
    outs = [Path(r["output"]) for r in doc["files"]]
    assert len(set(outs)) == 2 and all((tmp_path / o).exists() for o in outs), outs
    for row, folder in zip(doc["files"], ("d1", "d2")):
        z, _ = read_grid(tmp_path / folder / "a.asc")
        got = zarr.open_group(str(tmp_path / row["output"]), mode="r")["elevation"][:]
        assert np.array_equal(got, z), folder
    # the same names on a rerun (stable), so the files are skipped
    proc = run_terrain("batch", "ingest", "d1/a.asc", "d2/a.asc", "-o", "out", "--tile", "16",
                       "--scheduler", "synchronous", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    again = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [r["output"] for r in again["files"]] == [r["output"] for r in doc["files"]]
    assert [r["status"] for r in again["files"]] == ["skipped", "skipped"]


def test_a_name_taken_for_a_clash_of_stems_is_no_other_files_output(tmp_path):
    """``a.asc`` beside ``a.tif`` took ``a.asc.ingest.zarr``, the name of ``a.asc.asc``'s
    own: with --overwrite the second replaced the first's result (both 'done')."""
    from terrain.io import write_synth
    d = tmp_path / "d"
    d.mkdir()
    write_synth(d / "a.asc", 30, 40, seed=1)
    write_synth(d / "a.asc.asc", 30, 40, seed=2)
    (d / "a.tif").write_bytes(b"")  # a third file whose stem is a's (refused: empty)
    proc = run_terrain("batch", "ingest", "d", "-o", "out", "--tile", "16", "--overwrite",
                       "--scheduler", "synchronous", cwd=tmp_path)
    rows = {Path(r["input"]).name: r
            for r in json.loads((tmp_path / "out" / "manifest.json").read_text())["files"]}
    assert rows["a.asc"]["output"] != rows["a.asc.asc"]["output"], rows
    for name in ("a.asc", "a.asc.asc"):
        assert rows[name]["status"] == "done", proc.stderr
        got = zarr.open_group(str(tmp_path / rows[name]["output"]), mode="r")["elevation"][:]
        assert np.array_equal(got, read_grid(d / name)[0]), name


def test_a_second_batch_into_the_folder_does_not_replace_the_firsts_outputs(tmp_path):
    _two_folders(tmp_path)
    first = run_terrain("batch", "ingest", "d1/a.asc", "-o", "out", "--tile", "16",
                        "--scheduler", "synchronous", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = (tmp_path / "out" / "a.zarr" / "elevation" / "c" / "0" / "0").read_bytes()
    proc = run_terrain("batch", "ingest", "d2/a.asc", "-o", "out", "--tile", "16", "--overwrite",
                       "--scheduler", "synchronous", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert ("[1/1] d2/a.asc: failed: out/a.zarr: holds the result of "
            f"{(tmp_path / 'd1' / 'a.asc').resolve()} from an earlier batch") in proc.stderr
    assert (tmp_path / "out" / "a.zarr" / "elevation" / "c" / "0" / "0").read_bytes() == before
    doc = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [r["input"] for r in doc["earlier"]] == ["d1/a.asc"]  # its owner stays known
    # the first batch's input itself may still be redone
    proc = run_terrain("batch", "ingest", "d1/a.asc", "-o", "out", "--tile", "16", "--overwrite",
                       "--scheduler", "synchronous", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_two_batches_at_once_into_one_folder(tmp_path):
    from terrain.io.outputs import hold_lock
    (tmp_path / "g.asc").write_text(GRASS)
    (tmp_path / "out").mkdir()
    with hold_lock(tmp_path / "out" / "batch"):  # what a running batch holds
        proc = run_terrain("batch", "ingest", "g.asc", "-o", "out", "--tile", "2",
                           "--scheduler", "synchronous", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == ("terrain: out: another terrain batch is writing "
                                   "into this folder")
    assert os.listdir(tmp_path / "out") == []


def test_a_folder_that_takes_no_lock_file_is_one_line(tmp_path):
    """A read-only OUTDIR gave hold_lock's PermissionError traceback (as root, whom no mode
    stops, a directory where the lock file goes stands for it)."""
    (tmp_path / "g.asc").write_text(GRASS)
    (tmp_path / "out" / ".batch.lock").mkdir(parents=True)
    proc = run_terrain("batch", "ingest", "g.asc", "-o", "out", "--tile", "2",
                       "--scheduler", "synchronous", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == "terrain: out: cannot write there (Is a directory)"
    if os.geteuid() != 0:
        (tmp_path / "ro").mkdir(mode=0o555)
        proc = run_terrain("batch", "ingest", "g.asc", "-o", "ro", "--tile", "2",
                           "--scheduler", "synchronous", cwd=tmp_path)
        assert proc.stderr.strip() == "terrain: ro: cannot write there (Permission denied)"


def test_a_folder_that_cannot_be_listed_is_one_line(tmp_path, monkeypatch, capsys):
    """``batch mst unr -o bo`` with ``unr`` mode 311 (searchable, not listable): the
    PermissionError traceback of its listing before, exit 1. Where the tests run as root,
    whom no mode stops, the listing is refused as the kernel refuses it."""
    from cli import run_main
    (tmp_path / "unr").mkdir()
    (tmp_path / "unr" / "g.asc").write_text(GRASS)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "unr").chmod(0o311)
    if os.geteuid() == 0:
        listdir = os.listdir

        def refused(path="."):
            if Path(path) == Path("unr"):
                raise PermissionError(13, "Permission denied", os.fspath(path))
            return listdir(path)
        monkeypatch.setattr(os, "listdir", refused)
    rc, _, err = run_main(capsys, "batch", "mst", "unr", "-o", "bo")
    (tmp_path / "unr").chmod(0o755)
    assert (rc, err) == (2, "terrain: unr: cannot read (Permission denied)\n")
    assert sorted(os.listdir(tmp_path)) == ["unr"]


def _ok(*argv, cwd):
    proc = run_terrain(*argv, cwd=cwd, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Warning" not in proc.stderr


@pytest.mark.gpu
def test_batch_mst_on_the_gpu_equals_one_run(tmp_path):
    _ok("batch", "mst", SAMPLE, "-o", tmp_path / "out", "--backend", "gpu", cwd=tmp_path)
    (out,) = (tmp_path / "out").glob("*.mst.zarr")
    assert zarr.open_group(str(out), mode="r").attrs["mst"]["path"] == "in-core"
    _ok("mst", SAMPLE, "-o", tmp_path / "one.zarr", "--backend", "gpu", "--scheduler", "threads",
        cwd=tmp_path)
    a = zarr.open_array(str(out), path="mst", mode="r")[:]
    b = zarr.open_array(str(tmp_path / "one.zarr"), path="mst", mode="r")[:]
    assert a.tobytes() == b.tobytes()


@pytest.mark.gpu
def test_batch_cost_distance_on_the_gpu_equals_each_run(tmp_path):
    rasters = tmp_path / "in"
    rasters.mkdir()
    for seed in (1, 2):
        _ok("synth", "--rows", "120", "--cols", "90", "--seed", seed, "-o",
            rasters / f"d{seed}.asc", cwd=tmp_path)
    _ok("batch", "cost-distance", rasters, "-o", tmp_path / "out", "--source-cell", "5,5",
        "--backend", "gpu", "--tile", "32", cwd=tmp_path)
    for seed in (1, 2):
        _ok("cost-distance", rasters / f"d{seed}.asc", "-o", tmp_path / f"ref{seed}.zarr",
            "--source-cell", "5,5", "--tile", "32", "--backend", "gpu", "--scheduler", "threads",
            cwd=tmp_path)
        a = _layers(tmp_path / "out" / f"d{seed}.cost.zarr")
        b = _layers(tmp_path / f"ref{seed}.zarr")
        for n in a:
            assert a[n].tobytes() == b[n].tobytes(), (seed, n)
    rows = _manifest(tmp_path / "out")
    assert sorted(rows) == ["d1.asc", "d2.asc"]
    assert {r["status"] for r in rows.values()} == {"done"}


def test_a_users_own_manifest_file_is_not_replaced(tmp_path):
    """``manifest.json`` / ``.csv`` in OUTDIR that are not a batch's (a user's notes) were
    replaced silently; refused now, before any file runs, unless ``--overwrite``."""
    from terrain.io import write_synth
    write_synth(tmp_path / "a.asc", 20, 30, seed=1)
    out = tmp_path / "out"
    out.mkdir()
    for name, text in (("manifest.csv", "my precious data\n"), ("manifest.json", '{"mine": 1}')):
        (out / name).write_text(text)
        proc = run_terrain("batch", "ingest", "a.asc", "-o", "out", "--tile", "16",
                           "--scheduler", "synchronous", cwd=tmp_path)
        assert_one_line_error(proc, f"terrain: out/{name}: not a batch's manifest")
        assert (out / name).read_text() == text and sorted(os.listdir(out)) == [name]
        (out / name).unlink()
    _ok("batch", "ingest", "a.asc", "-o", "out", "--tile", "16", cwd=tmp_path)
    _ok("batch", "ingest", "a.asc", "-o", "out", "--tile", "16", cwd=tmp_path)  # its own
    (out / "manifest.json").write_text("notes, not json")
    _ok("batch", "ingest", "a.asc", "-o", "out", "--tile", "16", "--overwrite", cwd=tmp_path)
    assert json.loads((out / "manifest.json").read_text())["command"] == "ingest"


def test_an_interrupted_batch_keeps_the_records_of_the_files_it_did_not_reach(tmp_path):
    """A finished batch, a new file that sorts first, the rerun killed after it: the rows
    of the files it had not reached said 'pending', and the next rerun failed each of them
    with 'output exists' (their outputs good). They keep the earlier batch's rows now, and
    an input spelt another way (absolute) is the same file."""
    from terrain.io import write_synth
    d = tmp_path / "d"
    d.mkdir()
    for name, seed in (("b.asc", 1), ("c.asc", 2)):
        write_synth(d / name, 20, 30, seed=seed)
    argv = ("batch", "ingest", "d", "-o", "out", "--tile", "16", "--scheduler", "synchronous")
    assert run_terrain(*argv, cwd=tmp_path).returncode == 0
    write_synth(d / "a.asc", 20, 30, seed=3)
    # killed as b's output is checked, a's row recorded
    run_killed([a.replace("d", str(d)).replace("out", str(tmp_path / "out")) if a in ("d", "out")
                else a for a in argv], "pipelines.batch", "_damage", 1)
    rows = _manifest(tmp_path / "out")
    assert [rows[n]["status"] for n in ("b.asc", "c.asc")] == ["done", "done"]
    proc = run_terrain(*argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in _manifest(tmp_path / "out").values()] == ["skipped"] * 3
    proc = run_terrain("batch", "ingest", str(d), "-o", "out", "--tile", "16", "--scheduler",
                       "synchronous", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in _manifest(tmp_path / "out").values()] == ["skipped"] * 3


def test_many_files_rewrite_the_manifest_a_few_times_not_once_a_file(tmp_path, monkeypatch,
                                                                     capsys):
    """1200 missing inputs took 169 s: the whole manifest was rewritten after every file, a
    write that grows with the number of files. Each file's row goes to the journal as it
    finishes now; the manifest is rewritten a few times, and at the end holds every row."""
    import pipelines.batch as batch
    from cli import run_main
    n = 300
    (tmp_path / "list.lst").write_text("".join(f"nowhere/m{i:03d}.asc\n" for i in range(n)))
    writes, write = [], batch._write_manifest
    monkeypatch.setattr(batch, "_write_manifest",
                        lambda *a, **k: (writes.append(len(a[2])), write(*a, **k)))
    rc, _, err = run_main(capsys, "batch", "ingest", tmp_path / "list.lst", "-o",
                          tmp_path / "out")
    assert rc == 1, err
    assert 2 <= len(writes) < n // 10, len(writes)
    rows = _manifest(tmp_path / "out")
    assert sorted(rows) == [f"m{i:03d}.asc" for i in range(n)]
    assert all(r["status"] == "failed" and "no such file" in r["error"] for r in rows.values())
    assert sorted(os.listdir(tmp_path / "out")) == ["manifest.csv", "manifest.json"]


def test_a_folder_per_file_is_checked_without_comparing_every_file_with_every_other(
        tmp_path, monkeypatch, capsys):
    """``--geotiff-dir 'gt/{stem}'``: each file's folder was checked against every input,
    each resolved again (1000 files: 67 s before the first ran). The paths resolved grow
    with the number of files now, not with its square."""
    import pipelines.batch as batch
    from cli import run_main
    n = 200
    (tmp_path / "list.lst").write_text("".join(f"nowhere/m{i:03d}.asc\n" for i in range(n)))
    (tmp_path / "gt").mkdir()
    resolved, real_path = [], batch.real_path
    monkeypatch.setattr(batch, "real_path", lambda p: (resolved.append(p), real_path(p))[1])
    rc, _, err = run_main(capsys, "batch", "fill", tmp_path / "list.lst", "-o",
                          tmp_path / "out", "--geotiff-dir", tmp_path / "gt" / "{stem}")
    assert rc == 1, err
    assert len(_manifest(tmp_path / "out")) == n
    assert len(resolved) < 20 * n, len(resolved)


def _batch_stopped_in_file(argv, nth, stop):
    """The batch ``argv`` run in a child whose ``nth`` file's ingest first runs ``stop`` (a
    statement: a kill, a signal), the manifest never rewritten between its first and last
    writes; the finished process."""
    code = f"""
import os, signal
import pipelines.batch as batch, pipelines.ingest as ingest_mod
batch.REWRITE_RATIO = float("inf")
ingest, calls = ingest_mod.ingest, []
def ingest_or_stop(*a, **k):
    calls.append(1)
    if len(calls) == {nth}:
        {stop}
    return ingest(*a, **k)
ingest_mod.ingest = ingest_or_stop
from terrain.run import main
raise SystemExit(main({argv!r}))
"""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(), timeout=300)


def test_a_killed_batch_keeps_the_row_of_every_file_it_finished(tmp_path):
    """SIGKILLed in its fifth file, the manifest not rewritten since the first: the rerun
    skips the four files the journal recorded and runs the rest, into the stores a batch
    that was not killed makes."""
    from terrain.io import write_synth
    d = tmp_path / "d"
    d.mkdir()
    for i in range(7):
        write_synth(d / f"g{i}.asc", 20, 30, seed=i)
    argv = ["batch", "ingest", str(d), "-o", str(tmp_path / "out"), "--tile", "16",
            "--scheduler", "synchronous"]
    proc = _batch_stopped_in_file(argv, 5, "os._exit(9)")
    assert proc.returncode == 9, proc.stderr
    assert {r["status"] for r in _manifest(tmp_path / "out").values()} == {"pending"}
    proc = run_terrain(*argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = _manifest(tmp_path / "out")
    assert [rows[f"g{i}.asc"]["status"] for i in range(7)] == ["skipped"] * 4 + ["done"] * 3
    whole = ["batch", "ingest", str(d), "-o", str(tmp_path / "whole"), "--tile", "16",
             "--scheduler", "synchronous"]
    assert run_terrain(*whole, cwd=tmp_path).returncode == 0
    for i in range(7):
        a = zarr.open_group(tmp_path / "out" / f"g{i}.zarr", mode="r")["elevation"][...]
        b = zarr.open_group(tmp_path / "whole" / f"g{i}.zarr", mode="r")["elevation"][...]
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_a_batch_stopped_by_a_signal_records_every_file_it_finished(tmp_path, signum):
    """Stopped in its fourth file, the manifest not rewritten since the first: it is written
    as the batch stops (the stop refused every output, the manifest's too, leaving the rows
    in the journal only), and the rerun runs the files not done."""
    from terrain.io import write_synth
    for i in range(6):
        write_synth(tmp_path / f"g{i}.asc", 20, 30, seed=i)
    argv = ["batch", "ingest", *(str(tmp_path / f"g{i}.asc") for i in range(6)), "-o",
            str(tmp_path / "out"), "--tile", "16", "--scheduler", "synchronous"]
    proc = _batch_stopped_in_file(argv, 4, f"os.kill(os.getpid(), signal.{signum})")
    assert proc.returncode not in (0, 1, 2), proc.stderr
    rows = _manifest(tmp_path / "out")
    assert [rows[f"g{i}.asc"]["status"] for i in range(6)] == ["done"] * 3 + ["pending"] * 3
    assert sorted(os.listdir(tmp_path / "out")) == ["g0.zarr", "g1.zarr", "g2.zarr",
                                                   "manifest.csv", "manifest.json"]
    proc = run_terrain(*argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = _manifest(tmp_path / "out")
    assert [rows[f"g{i}.asc"]["status"] for i in range(6)] == ["skipped"] * 3 + ["done"] * 3


def test_a_damaged_output_is_not_skipped_as_done(tmp_path):
    """A shard of an earlier batch's output deleted: the rerun said 'skipped (done by an
    earlier run)'; it fails, saying what is missing, and --overwrite redoes it."""
    from terrain.io import write_synth
    write_synth(tmp_path / "a.asc", 40, 50, seed=1)
    argv = ("batch", "ingest", "a.asc", "-o", "out", "--tile", "16", "--scheduler",
            "synchronous")
    assert run_terrain(*argv, cwd=tmp_path).returncode == 0
    shard = sorted((tmp_path / "out" / "a.zarr" / "elevation" / "c").rglob("*"))[-1]
    shard.unlink()
    proc = run_terrain(*argv, cwd=tmp_path)
    assert proc.returncode == 1
    row = _manifest(tmp_path / "out")["a.asc"]
    assert row["status"] == "failed" and "is missing (the store is damaged): --overwrite " \
        "redoes it" in row["error"], row
    assert run_terrain(*argv, "--overwrite", cwd=tmp_path).returncode == 0
    assert shard.exists()


def test_a_batch_killed_in_its_first_file_leaves_every_file_pending(tmp_path):
    """Killed as its first file's run returned, before its row: no manifest at all, though
    files not reached are recorded 'pending'. It is written before the first file starts."""
    from terrain.io import write_synth
    for name, seed in (("a.asc", 1), ("b.asc", 2)):
        write_synth(tmp_path / name, 20, 30, seed=seed)
    run_killed(["batch", "ingest", str(tmp_path / "a.asc"), str(tmp_path / "b.asc"), "-o",
                str(tmp_path / "out"), "--tile", "16", "--scheduler", "synchronous"],
               "pipelines.ingest", "ingest", 1)
    rows = _manifest(tmp_path / "out")
    assert {n: r["status"] for n, r in rows.items()} == {"a.asc": "pending", "b.asc": "pending"}
    proc = run_terrain("batch", "ingest", "a.asc", "b.asc", "-o", "out", "--tile", "16",
                       "--scheduler", "synchronous", cwd=tmp_path)
    assert proc.returncode == 1  # a's output is there, unrecorded: not replaced
    assert {n: r["status"] for n, r in _manifest(tmp_path / "out").items()} == {
        "a.asc": "failed", "b.asc": "done"}


def test_a_folders_broken_links_and_stores_each_get_a_row(tmp_path, rasters):
    """A link to nowhere and a tile store in an input folder were left out without a word;
    each is an input now: the link fails with its reader's line, the store runs (mst takes
    stores) or fails saying why (ingest does not)."""
    (rasters / "broken.asc").unlink()
    (rasters / "dangling.asc").symlink_to("nowhere.asc")
    proc = run_terrain("ingest", rasters / "a.asc", "-o", rasters / "s.zarr", "--tile", "64",
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = run_terrain("batch", "mst", "rasters", "-o", "out", "--tile", "64", "--scheduler",
                       "synchronous", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    rows = _manifest(tmp_path / "out")
    assert {n: r["status"] for n, r in rows.items()} == {
        "a.asc": "done", "b.tif": "done", "c.grass": "done", "dangling.asc": "failed",
        "s.zarr": "done"}
    assert rows["dangling.asc"]["error"] == "rasters/dangling.asc: no such file"
    masks = [np.asarray(zarr.open_group(str(tmp_path / rows[n]["output"]), mode="r")["mst"][:])
             for n in ("s.zarr", "a.asc")]
    assert masks[0].tobytes() == masks[1].tobytes()  # the store's forest is its source's
    proc = run_terrain("batch", "ingest", "rasters", "-o", "out2", "--tile", "64",
                       "--scheduler", "synchronous", cwd=tmp_path)
    rows = _manifest(tmp_path / "out2")
    assert rows["s.zarr"]["status"] == "failed" and "s.zarr" in rows["s.zarr"]["error"]


def test_the_api_names_no_flags(tmp_path):
    """run_batch (the Python API) tells a refusal as the library does, naming the parameter
    (overwrite); the flag (--overwrite) is the command line's
    (test_batch_mst_mixed_formats_one_bad_file)."""
    import pipelines.batch as batch
    from argparse import Namespace
    from terrain.errors import InputError
    from terrain.io import write_synth
    write_synth(tmp_path / "a.asc", 20, 30, seed=1)
    out = tmp_path / "out"
    args = Namespace(tile=16, overwrite=False)
    said = []
    batch.run_batch("ingest", [str(tmp_path / "a.asc")], out, args, "synchronous", said.append)
    os.utime(tmp_path / "a.asc", ns=(1, 10**18))
    rows = batch.run_batch("ingest", [str(tmp_path / "a.asc")], out, args, "synchronous",
                           said.append)
    assert rows[0]["error"] == (f"{out / 'a.zarr'}: output exists; its input changed since the "
                                "earlier batch made it"), rows
    (out / "manifest.json").write_text("notes, not json")
    with pytest.raises(InputError, match="another folder, or overwrite to replace it$") as e:
        batch.run_batch("ingest", [str(tmp_path / "a.asc")], out, args, "synchronous",
                        said.append)
    assert e.value.option == "overwrite"


def test_a_files_refusal_in_a_row_reads_as_the_command_says_it(tmp_path):
    """The row of a file a command refuses carries the command line's hint, as the command
    run on that file alone prints it (it had the library's message only)."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.asc").write_bytes(SAMPLE.read_bytes())  # not depression-filled
    alone = run_terrain("flow", "d/a.asc", "-o", "x.zarr", "--filled", cwd=tmp_path)
    said = alone.stderr.strip().removeprefix("terrain: ")
    assert alone.returncode == 2 and said.endswith("(without --filled, flow fills the DEM "
                                                   "first)"), alone.stderr
    proc = run_terrain("batch", "flow", "d/*", "-o", "out", "--filled", "--scheduler",
                       "synchronous", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert _manifest(tmp_path / "out")["a.asc"]["error"] == said.replace("x.zarr", "out/a.zarr")


def test_batch_checks_its_output_folder_before_it_starts_a_scheduler(tmp_path, monkeypatch):
    """A folder it cannot create was refused after the scheduler started (its dashboard
    line printed first)."""
    import pipelines.batch as batch
    from argparse import Namespace
    from terrain.errors import InputError
    started = []
    monkeypatch.setattr(batch, "open_scheduler", lambda *a, **k: started.append(a) or
                        pytest.fail("scheduler started"))
    made = Path.mkdir

    def refused(self, *a, **k):
        if self.name == "bo":
            raise PermissionError(13, "Permission denied")
        return made(self, *a, **k)
    monkeypatch.setattr(Path, "mkdir", refused)
    with pytest.raises(InputError, match="bo: cannot create it \\(Permission denied\\)"):
        batch.run_batch("ingest", [str(SAMPLE)], tmp_path / "bo",
                        Namespace(tile=64, overwrite=False), scheduler="local")
    assert started == [] and list(tmp_path.iterdir()) == []


def _listings_of(outdir, monkeypatch):
    """The listings of ``outdir`` made from now on (``os.scandir``, which ``glob`` and
    ``Path.glob`` list a folder by too), as a list that grows."""
    listed, scandir = [], os.scandir

    def counting(path="."):
        if not isinstance(path, int) and Path(path).resolve() == outdir.resolve():
            listed.append(path)
        return scandir(path)
    monkeypatch.setattr(os, "scandir", counting)
    return listed


def test_a_batch_lists_its_output_folder_once_a_file(tmp_path, monkeypatch):
    """Each file's run looked for its leftovers (partials, replaced outputs, unfinished
    swaps) with a glob a kind, and the batch for each output with a stat: three listings of
    the whole folder a file, quadratic in a batch of thousands. One listing a file now, and
    a rerun that skips every file lists it as often whatever their number; its summary says
    how many an earlier run did."""
    import pipelines.batch as batch
    from argparse import Namespace
    from terrain.io import write_synth
    monkeypatch.setattr(batch, "REWRITE_RATIO", 10**9)  # the manifest written twice only
    for i in range(6):
        write_synth(tmp_path / f"g{i}.asc", 20, 30, seed=i)
    counts, reruns = {}, {}
    for n in (3, 6):
        out = tmp_path / f"out{n}"
        out.mkdir()
        args = Namespace(tile=16, overwrite=False)
        inputs = [str(tmp_path / f"g{i}.asc") for i in range(n)]
        listed = _listings_of(out, monkeypatch)
        rows = batch.run_batch("ingest", inputs, out, args, "synchronous", lambda m: None)
        assert [r["status"] for r in rows] == ["done"] * n
        counts[n] = len(listed)
        listed.clear()
        said = []
        rows = batch.run_batch("ingest", inputs, out, args, "synchronous", said.append)
        assert [r["status"] for r in rows] == ["skipped"] * n
        reruns[n] = len(listed)
        assert said[-1].startswith(f"batch ingest: {n} of {n} done ({n} by an earlier run), "
                                   "0 failed, in "), said[-1]
    assert counts[6] - counts[3] == 3, counts  # one listing a file
    assert reruns[6] == reruns[3], reruns
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "out6").iterdir()) == sorted(
        [f"g{i}.zarr" for i in range(6)] + ["manifest.csv", "manifest.json"])


#: a worker's preload whose ingest of a file named ``slow*`` takes ten minutes, saying it
#: started with ``MARKER``: a long task of a batch's file
SLOW_INGEST = """
import os, time
import pipelines.ingest as m

MARKER = {marker!r}
# the worker may run a preload twice: the wrapper wraps the real function once
real = getattr(m.create_elevation, "__wrapped__", m.create_elevation)

def task(store_path, *a, **k):
    if "slow" in os.path.basename(str(store_path)):
        os.close(os.open(MARKER, os.O_CREAT | os.O_WRONLY))
        time.sleep(600)
    return real(store_path, *a, **k)

task.__wrapped__ = real
m.create_elevation = task
"""


@pytest.mark.slow
@pytest.mark.parametrize("signum, status, said", [("SIGTERM", 143, "terminated"),
                                                  ("SIGINT", 130, "interrupted")])
def test_a_batch_on_a_cluster_stops_within_seconds(tmp_path, signum, status, said):
    """SIGTERM or Ctrl-C while a file's task runs long on a cluster given by address: the
    batch waited up to a minute for it; it waits STOP_WAIT seconds, then exits 143 (130),
    the files done before kept and recorded, no partial output left."""
    import signal
    import time

    from cli import dask_cluster, stop_processes
    from pipelines.cluster import STOP_WAIT
    from terrain.io import write_synth
    for name in ("a", "b", "slow"):
        write_synth(tmp_path / f"{name}.asc", 20, 30, seed=len(name))
    marker = tmp_path / "started"
    preload = tmp_path / "slow_ingest.py"
    preload.write_text(SLOW_INGEST.format(marker=str(marker)))
    address, procs = dask_cluster(tmp_path, "c", preload=preload)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "terrain.run", "batch", "ingest", "a.asc", "b.asc",
             "slow.asc", "-o", "out", "--tile", "16", "--scheduler", address],
            cwd=tmp_path, env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        t0 = time.monotonic()
        while not marker.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() - t0 < 120, "the slow file's task did not start"
            time.sleep(0.05)
        os.kill(proc.pid, getattr(signal, signum))
        signalled = time.monotonic()
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        waited = time.monotonic() - signalled
    finally:
        stop_processes(procs)
    assert proc.returncode == status, err
    assert err.strip().splitlines()[-1] == f"terrain: {said}", err
    assert STOP_WAIT <= 5 and waited < 10, waited
    assert sorted(os.listdir(tmp_path / "out")) == ["a.zarr", "b.zarr", "manifest.csv",
                                                   "manifest.json"]
    rows = _manifest(tmp_path / "out")
    assert {n: r["status"] for n, r in rows.items()} == {
        "a.asc": "done", "b.asc": "done", "slow.asc": "pending"}
