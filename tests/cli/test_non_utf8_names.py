"""Names whose bytes are not UTF-8 (``b'\\xe9'``, which Python carries as the surrogate
escape ``'\\udce9'``) are names like any other: every command writes its output under
exactly those bytes. Hashing such a name with ``str.encode`` failed, and GDAL (GeoTIFF,
GeoPackage, FlatGeobuf) takes a path only as UTF-8 text."""

import contextlib
import csv
import io
import json
import os
import shutil

import pytest

from cli import run_main, run_terrain

E9 = os.fsdecode(b"\xe9")  # '\udce9'


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A 24x24 DEM with a CRS (GeoJSON needs one), its flow and cost-distance stores, a
    graph, and a folder holding a DEM of a non-UTF-8 name."""
    d = tmp_path_factory.mktemp("inputs")
    from rasterio.crs import CRS
    assert run_terrain("synth", "--rows", "24", "--cols", "24", "-o", "dem.asc",
                       cwd=d).returncode == 0
    (d / "dem.prj").write_text(CRS.from_epsg(32633).to_wkt())
    (d / "g.txt").write_text("0 1\n1 2\n2 3\n")
    for argv in (["flow", "dem.asc", "-o", "flow.zarr"],
                 ["cost-distance", "dem.asc", "--source-cell", "2,2", "-o", "cost.zarr"]):
        proc = run_terrain(*argv, "--scheduler", "synchronous", cwd=d)
        assert proc.returncode == 0, proc.stderr
    (d / "rasters").mkdir()
    shutil.copy(d / "dem.asc", d / "rasters" / f"lat{E9}.asc")
    (d / "list.txt").write_bytes(b"rasters/lat\xe9.asc\n")
    return d


SYNC = ("--scheduler", "synchronous")

# name -> (argv with {i} for the inputs' folder, {o} for the output's, the scheduler option
# or not, the byte name written in {o}, what it holds there if a folder)
CASES = {
    "bfs": (["bfs", "{i}/g.txt", "--source", "0", "--out", f"{{o}}/b{E9}.csv"], SYNC,
            b"b\xe9.csv", None),
    "sssp": (["sssp", "{i}/g.txt", "--source", "0", "--out", f"{{o}}/s{E9}.csv"], SYNC,
             b"s\xe9.csv", None),
    "mst graph -o": (["mst", "{i}/g.txt", "-o", f"{{o}}/m{E9}.csv"], SYNC, b"m\xe9.csv", None),
    "mst graph, default name": (["mst", f"{{o}}/g{E9}.txt"], SYNC, b"g\xe9.mst.csv", None),
    "graph-ingest": (["graph-ingest", "{i}/g.txt", "-o", f"{{o}}/g{E9}.zarr"], SYNC,
                     b"g\xe9.zarr", b"zarr.json"),
    "diameter --path-out": (["diameter", "{i}/g.txt", "--path-out", f"{{o}}/d{E9}.txt"], SYNC,
                            b"d\xe9.txt", None),
    "streams geojson": (["streams", "{i}/flow.zarr", "--threshold", "4",
                         "-o", f"{{o}}/s{E9}.geojson"], (), b"s\xe9.geojson", None),
    "streams gpkg": (["streams", "{i}/flow.zarr", "--threshold", "4",
                      "-o", f"{{o}}/s{E9}.gpkg"], (), b"s\xe9.gpkg", None),
    "streams fgb": (["streams", "{i}/flow.zarr", "--threshold", "4", "-o", f"{{o}}/s{E9}.fgb"],
                    (), b"s\xe9.fgb", None),
    "watershed zarr": (["watershed", "{i}/flow.zarr", "--outlet-cell", "5,5",
                        "-o", f"{{o}}/w{E9}.zarr"], (), b"w\xe9.zarr", b"zarr.json"),
    "watershed tif": (["watershed", "{i}/flow.zarr", "--outlet-cell", "5,5",
                       "-o", f"{{o}}/w{E9}.tif"], (), b"w\xe9.tif", None),
    "plot": (["plot", "{i}/flow.zarr", "-o", f"{{o}}/p{E9}.png"], (), b"p\xe9.png", None),
    "path geojson": (["path", "{i}/cost.zarr", "--to-cell", "20,20",
                      "-o", f"{{o}}/p{E9}.geojson"], (), b"p\xe9.geojson", None),
    "path gpkg": (["path", "{i}/cost.zarr", "--to-cell", "20,20", "-o", f"{{o}}/p{E9}.gpkg"],
                  (), b"p\xe9.gpkg", None),
    "mst --geotiff": (["mst", "{i}/dem.asc", "-o", "{o}/mst.zarr",
                       "--geotiff", f"{{o}}/m{E9}.tif"], SYNC, b"m\xe9.tif", None),
    "fill --geotiff-dir": (["fill", "{i}/dem.asc", "-o", "{o}/fill.zarr",
                            "--geotiff-dir", f"{{o}}/gt{E9}", "--no-cog"], SYNC,
                           b"gt\xe9", b"filled.tif"),
    "batch of a folder": (["batch", "mst", "{i}/rasters", "-o", "{o}/out"], SYNC,
                          b"out", b"lat\xe9.mst.zarr"),
    "batch of a list": (["batch", "mst", "{i}/list.txt", "-o", "{o}/out"], SYNC,
                        b"out", b"lat\xe9.mst.zarr"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_output_of_a_non_utf8_name(inputs, tmp_path, capsys, name):
    argv, extra, written, inside = CASES[name]
    shutil.copy(inputs / "g.txt", tmp_path / f"g{E9}.txt")
    argv = [a.format(i=inputs, o=tmp_path) for a in argv]
    rc, _, err = run_main(capsys, *argv, *extra, scheduler=None)
    assert rc == 0, err
    here = os.listdir(os.fsencode(tmp_path))
    assert written in here, here
    assert not [n for n in here if b".partial-" in n or n.endswith(b".lock")], here
    if inside is not None:
        assert inside in os.listdir(os.fsencode(tmp_path) + b"/" + written)


def test_batch_manifests_record_the_name(inputs, tmp_path, capsys):
    """The CSV holds the name's bytes; the JSON its escapes, read back as the same name; a
    second run reads them as its own manifests."""
    for _ in range(2):
        rc, _, err = run_main(capsys, "batch", "mst", inputs / "rasters", "-o", tmp_path,
                              *SYNC, scheduler=None)
        assert rc == 0, err
    row, = csv.DictReader(io.StringIO((tmp_path / "manifest.csv").read_text(
        errors="surrogateescape")))
    assert row["input"] == str(inputs / "rasters" / f"lat{E9}.asc")
    assert row["output"] == str(tmp_path / f"lat{E9}.mst.zarr")
    assert b"lat\xe9.asc" in (tmp_path / "manifest.csv").read_bytes()
    doc = json.loads((tmp_path / "manifest.json").read_text())
    assert doc["files"][0]["input"] == row["input"]


def test_store_holding_a_non_utf8_name(inputs, tmp_path, capsys):
    """A file of such a name inside an input store is part of its identity like any other."""
    store = tmp_path / "dem.zarr"
    rc, _, err = run_main(capsys, "ingest", inputs / "dem.asc", "-o", store, *SYNC,
                          scheduler=None)
    assert rc == 0, err
    (store / f"note{E9}").write_text("x")
    rc, _, err = run_main(capsys, "mst", store, "-o", tmp_path / "mst.zarr", *SYNC,
                          scheduler=None)
    assert rc == 0, err


def test_non_utf8_name_from_the_shell(inputs, tmp_path):
    """The user's trial, as a process: exit 0, no traceback, the file under its bytes."""
    proc = run_terrain("bfs", inputs / "g.txt", "--source", "0", "--out", f"b{E9}.csv",
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert os.listdir(os.fsencode(tmp_path)) == [b"b\xe9.csv"]


@pytest.mark.parametrize("fails", [False, True])
def test_gdal_path_of_a_non_utf8_folder_and_name(tmp_path, fails):
    """GDAL is given UTF-8 text; the file ends under its own bytes, or nowhere on an error."""
    from terrain.io.outputs import gdal_path
    folder = tmp_path / f"d{E9}"
    folder.mkdir()
    with pytest.raises(RuntimeError) if fails else contextlib.nullcontext():
        with gdal_path(folder / f"f{E9}.tif") as path:
            path.encode()  # what rasterio and pyogrio do with it
            with open(path, "w") as f:
                f.write("x")
            if fails:
                raise RuntimeError("the writer failed")
    assert os.listdir(os.fsencode(folder)) == ([] if fails else [b"f\xe9.tif"])
