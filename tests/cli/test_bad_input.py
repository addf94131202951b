"""Every bad input: one line on stderr naming the file (and line), exit 2, nothing written."""

import os
from pathlib import Path

import pytest
from cli import HEADER, ROWS, SAMPLE, assert_one_line_error, run_terrain

ROOT = Path(__file__).resolve().parents[2]


# name -> (file content or a marker, expected message after "terrain: <file>")
CASES = {
    "missing": (None, ": no such file"),
    "directory": ("<dir>", ": is a directory"),
    "empty": ("", ": empty file"),
    "blank": ("  \n\n", ": empty file"),
    "missing_key": (HEADER.replace("nrows 3\n", "") + ROWS, ":6: header lacks 'nrows'"),
    "missing_cellsize": (HEADER.replace("cellsize 1\n", "") + ROWS, ":6: header lacks 'cellsize'"),
    # a file that ends in its header: the key it lacks named at its last line, not past it
    "header_only": ("ncols 5\nnrows 5\nxllcorner 0\n", ":3: header lacks 'cellsize'"),
    "header_only_unended": ("ncols 5\nnrows 5\nxllcorner 0", ":3: header lacks 'cellsize'"),
    "unknown_key": (HEADER.replace("cellsize", "cellsiz") + ROWS,
                    ":5: unknown ESRI header key 'cellsiz'"),
    "repeated_key": (HEADER + "NCOLS 4\n" + ROWS, ":7: repeated header key 'ncols' (first on line 1)"),
    "grass_unknown_key": ("north: 3\nsouth: 0\neast: 4\nwest: 0\nrows: 3\ncols: 4\nnul: *\n" + ROWS,
                          ":7: unknown GRASS header key 'nul'"),
    "non_numeric": (HEADER + "1 2 3 4\n5 6 abc 8\n9 10 11 12\n",
                    ":8: non-numeric token 'abc' (row 2, column 3)"),
    "star_in_esri": (HEADER + "1 2 3 4\n5 6 7 8\n9 * 11 12\n", ":9: non-numeric token '*'"),
    # a first data row starting with inf was blamed as a header key (nan: nodata)
    "inf_first": (HEADER + "-inf 2 3 4\n5 6 7 8\n9 10 11 12\n",
                  ":7: value -inf (row 1, column 1) is infinite: elevations are finite numbers"),
    "Inf_first": (HEADER + "Inf 2 3 4\n5 6 7 8\n9 10 11 12\n",
                  ":7: value Inf (row 1, column 1) is infinite: elevations are finite numbers"),
    "bad_exponent": (HEADER + "1 2 3 4\n5 6 7 8e\n9 10 11 12\n", ":8: non-numeric token '8e'"),
    "too_few": (HEADER + "1 2 3 4\n5 6 7\n9 10 11 12\n", ":8: row 2 has 3 values, expected ncols=4"),
    "too_many": (HEADER + "1 2 3 4\n5 6 7 8\n9 10 11 12 13\n",
                 ":9: row 3 has 5 values, expected ncols=4"),
    "truncated": (HEADER + "1 2 3 4\n5 6 7 8\n", ":8: file ends after 2 of nrows=3 rows"),
    "extra_rows": (HEADER + ROWS + "13 14 15 16\n", ":10: more data rows than nrows=3"),
    "rows_zero": (HEADER.replace("nrows 3", "nrows 0") + ROWS,
                  ":2: nrows must be a positive integer, got '0'"),
    "cols_negative": (HEADER.replace("ncols 4", "ncols -4") + ROWS,
                      ":1: ncols must be a positive integer, got '-4'"),
    "cellsize_nan": (HEADER.replace("cellsize 1", "cellsize nan") + ROWS,
                     ":5: cellsize must be a finite positive number, got 'nan'"),
    "cellsize_inf": (HEADER.replace("cellsize 1", "cellsize inf") + ROWS,
                     ":5: cellsize must be a finite positive number, got 'inf'"),
    "cellsize_zero": (HEADER.replace("cellsize 1", "cellsize 0") + ROWS,
                      ":5: cellsize must be a finite positive number, got '0'"),
    "cellsize_negative": (HEADER.replace("cellsize 1", "cellsize -2.5") + ROWS,
                          ":5: cellsize must be a finite positive number, got '-2.5'"),
    "grass_inverted": ("north: 0\nsouth: 3\neast: 4\nwest: 0\nrows: 3\ncols: 4\n" + ROWS,
                       ":1: cell size (north - south) / rows must be finite and positive"),
    "not_a_raster": (b"\x00\x01binary\xff" * 50, ": not a grid terrain or GDAL can read"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_grid_file(tmp_path, name):
    content, message = CASES[name]
    src = tmp_path / (f"{name}.tif" if name == "not_a_raster" else f"{name}.asc")
    if content == "<dir>":
        src.mkdir()
    elif isinstance(content, bytes):
        src.write_bytes(content)
    elif content is not None:
        src.write_text(content)
    proc = run_terrain("ingest", src.name, "-o", "out.zarr", "--tile", "2",
                       "--scheduler", "synchronous", cwd=tmp_path)
    assert_one_line_error(proc, f"terrain: {src.name}{message}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ([src.name] if content is not None
                                                          else [])


def test_data_error_on_the_local_cluster_names_the_line(tmp_path):
    """Raised inside a Dask task on the LocalCluster (``--scheduler local``: the default
    runs a grid this small on threads), still one error line (after the dashboard notice),
    and the partial store is gone."""
    rows = [" ".join(str(r * 10 + c) for c in range(4)) for r in range(40)]
    rows[33] = "1 2 3 x4"
    src = tmp_path / "late.asc"
    src.write_text(HEADER.replace("nrows 3", "nrows 40") + "\n".join(rows) + "\n")
    proc = run_terrain("ingest", src.name, "-o", "out.zarr", "--tile", "4", "--scheduler", "local",
                       cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "Dask dashboard" in proc.stderr
    lines = [x for x in proc.stderr.strip().splitlines() if "Dask dashboard" not in x]
    assert lines == ["terrain: late.asc:40: non-numeric token 'x4' (row 34, column 4)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["late.asc"]


def test_output_exists_without_overwrite(tmp_path):
    src = tmp_path / "g.asc"
    src.write_text(HEADER + ROWS)
    (tmp_path / "out.zarr").mkdir()
    (tmp_path / "out.zarr" / "keep").write_text("old")
    proc = run_terrain("ingest", "g.asc", "-o", "out.zarr", "--scheduler", "synchronous",
                       cwd=tmp_path)
    assert_one_line_error(proc, "terrain: out.zarr: output exists (use --overwrite to replace it)")
    assert (tmp_path / "out.zarr" / "keep").read_text() == "old"
    proc = run_terrain("synth", "--rows", "3", "--cols", "3", "-o", "g.asc", cwd=tmp_path)
    assert_one_line_error(proc, "terrain: g.asc: output exists")
    assert src.read_text() == HEADER + ROWS


@pytest.mark.parametrize("command", [["ingest"], ["mst"], ["fill"], ["flow"],
                                     ["cost-distance", "--source-cell", "1,1"]])
def test_a_store_named_as_another_format_is_refused(tmp_path, command):
    """``-o out.tif`` made a folder named out.tif; with ``--overwrite`` it replaced such a
    file with one (the run and its dry run refuse it alike)."""
    (tmp_path / "g.asc").write_text(HEADER + ROWS)
    (tmp_path / "st.json").write_text("{}")
    runs = [("out.tif", ".tif", []), ("st.json", ".json", ["--overwrite"])]
    if command[0] not in ("fill", "flow"):  # the commands with a dry run
        runs.append(("out.tif", ".tif", ["--dry-run"]))
    for out, suffix, more in runs:
        proc = run_terrain(command[0], "g.asc", *command[1:], "-o", out, *more,
                           "--scheduler", "synchronous", cwd=tmp_path)
        stem = out[:-len(suffix)]
        assert_one_line_error(proc, f"terrain: {out}: the output is a Zarr store (a folder), "
                                    f"not a {suffix} file: name it {stem}.zarr")
    assert not (tmp_path / "out.tif").exists() and (tmp_path / "st.json").read_text() == "{}"


@pytest.mark.parametrize("argv, message", [
    (["ingest", "g.asc", "-o", "o.zarr", "--tile", "300"], "300 is not a power of two"),
    (["ingest", "g.asc", "-o", "o.zarr", "--tile", "1"], "1 is not a power of two"),
    (["mst", "g.asc", "--backend", "tpu"], "unknown backend 'tpu'"),
    (["synth", "--rows", "0", "--cols", "5", "-o", "s.asc"], "0 is not a positive integer"),
])
def test_bad_options(tmp_path, argv, message):
    (tmp_path / "g.asc").write_text(HEADER + ROWS)
    proc = run_terrain(*argv, cwd=tmp_path)
    assert_one_line_error(proc, message)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.asc"]


def test_info_on_a_non_store(tmp_path):
    (tmp_path / "g.asc").write_text(HEADER + ROWS)
    for target, message in (("g.asc", "g.asc: not a terrain tile store"),
                            ("nothing.zarr", "nothing.zarr: no such file or directory")):
        assert_one_line_error(run_terrain("info", target, cwd=tmp_path), f"terrain: {message}")


# ----------------------------------------------------------------------------- what users hit

FIFO_COMMANDS = {
    "ingest": ["ingest", "f.asc", "-o", "x.zarr"],
    "mst": ["mst", "f.asc", "-o", "x.zarr"],
    "cost-distance": ["cost-distance", "f.asc", "--source-cell", "1,1", "-o", "c.zarr"],
    "graph-ingest": ["graph-ingest", "f.asc", "-o", "g.zarr"],
    "bfs --out": ["bfs", "f.asc", "--source", "1", "--out", "d.npy"],
    "plot": ["plot", "f.asc", "-o", "p.png"],
    "plot --source": ["plot", "f.asc", "--source", "1", "-o", "p.png"],
    "verify": ["verify", "f.npy", "--graph", "g.txt", "--source", "1"],
    "verify --graph": ["verify", "d.npy", "--graph", "f.asc", "--source", "1"],
}


@pytest.mark.parametrize("name", sorted(FIFO_COMMANDS))
def test_a_fifo_as_input_is_refused_not_waited_on(tmp_path, name):
    """A FIFO (or a device) as an input: refused at once instead of hanging on its read."""
    import os
    import subprocess
    import numpy as np
    os.mkfifo(tmp_path / "f.asc")
    os.mkfifo(tmp_path / "f.npy")
    (tmp_path / "g.txt").write_text("1 2\n")
    np.save(tmp_path / "d.npy", np.zeros(2, np.int64))
    argv = FIFO_COMMANDS[name]
    try:
        proc = run_terrain(*argv, cwd=tmp_path, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{name}: waited on the FIFO")
    fifo = "f.npy" if argv[1] == "f.npy" else "f.asc"
    assert_one_line_error(proc, f"terrain: {fifo}: not a regular file (a FIFO)")


def test_a_device_as_input_is_refused(tmp_path):
    proc = run_terrain("cost-distance", "/dev/zero", "--source-cell", "1,1", "-o", "c.zarr",
                       cwd=tmp_path, timeout=60)
    assert_one_line_error(proc, "terrain: /dev/zero: not a regular file (a device)")


def test_a_device_given_to_ingest_is_refused(tmp_path):
    proc = run_terrain("ingest", "/dev/zero", "-o", "x.zarr", cwd=tmp_path, timeout=60)
    assert_one_line_error(proc, "terrain: /dev/zero: not a regular file (a device)")


@pytest.mark.parametrize("argv", [["bfs", "f.asc", "--source", "1"],
                                  ["sssp", "f.asc", "--source", "1"], ["diameter", "f.asc"]])
def test_a_fifo_as_a_graph_without_an_output(tmp_path, argv):
    import os
    import subprocess
    os.mkfifo(tmp_path / "f.asc")
    try:
        proc = run_terrain(*argv, cwd=tmp_path, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("waited on the FIFO")
    assert_one_line_error(proc, "terrain: f.asc: not a regular file (a FIFO)")


def test_a_fifo_given_to_info(tmp_path):
    import os
    import subprocess
    os.mkfifo(tmp_path / "f.asc")
    try:
        proc = run_terrain("info", "f.asc", cwd=tmp_path, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("waited on the FIFO")
    assert_one_line_error(proc, "terrain: f.asc: not a regular file (a FIFO)")


@pytest.mark.parametrize("argv", [["mst", "/dev/stdin", "-o", "x.zarr"],
                                  ["ingest", "/dev/stdin", "-o", "x.zarr"],
                                  ["cost-distance", "/dev/stdin", "--source-cell", "1,1",
                                   "-o", "c.zarr"],
                                  ["info", "/dev/stdin"], ["diameter", "/dev/stdin"],
                                  ["bfs", "/dev/stdin", "--source", "1"],
                                  ["graph-ingest", "/dev/stdin", "-o", "g.zarr"]])
def test_a_pipe_as_dev_stdin_is_refused_as_a_fifo(tmp_path, argv):
    """``cat dem.asc | terrain mst /dev/stdin``: the path is a link (``/proc/self/fd/0``)
    to the pipe, which no path names (``pipe:[N]``). It passed the FIFO check and met a
    reader: ``/dev/stdin: empty file`` (the pipe's size is 0), ``cannot read (File or
    stream is not seekable.)``, ``not a terrain tile store``. Now the FIFO's line, as for a
    named FIFO; the oracle: the kernel's own stat of the child's standard input."""
    import os
    import stat
    import subprocess
    import sys
    from cli import child_env
    read, write = os.pipe()
    assert stat.S_ISFIFO(os.fstat(read).st_mode)
    os.close(write)  # the run reads nothing: it may not wait on the pipe
    with os.fdopen(read) as pipe:
        proc = subprocess.run([sys.executable, "-m", "terrain.run", *argv], cwd=tmp_path,
                              stdin=pipe, env=child_env(), capture_output=True, text=True,
                              timeout=60)
    assert_one_line_error(proc, "terrain: /dev/stdin: not a regular file (a FIFO)")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("argv", [["mst", "-", "-o", "x.zarr"], ["ingest", "-", "-o", "x.zarr"],
                                  ["fill", "-", "-o", "f.zarr"], ["verify", "-"],
                                  ["bfs", "-", "--source", "1"],
                                  ["cost-distance", "dem.asc", "--sources", "-", "-o", "c.zarr"]])
def test_a_dash_for_standard_input_is_refused_as_a_stream(tmp_path, argv):
    """``zcat dem.asc.gz | terrain mst - -o x.zarr``: ``-`` is the Unix name of standard
    input, which the readers took for a file of that name: ``-: no such file``. Now one line
    saying standard input is not read, as ``/dev/stdin`` is refused; a file named ``-`` is
    still read as a file (the second run)."""
    import shutil
    shutil.copy(SAMPLE, tmp_path / "dem.asc")
    proc = run_terrain(*argv, cwd=tmp_path, timeout=60)
    assert_one_line_error(proc, "terrain: -: standard input is not read")
    assert sorted(os.listdir(tmp_path)) == ["dem.asc"]
    if argv[0] == "mst":
        shutil.copy(SAMPLE, tmp_path / "-")
        assert run_terrain(*argv, cwd=tmp_path, timeout=120).returncode == 0


# GeoJSON sources (terrain/io/points.py): each bad document one line naming the file
GEOJSON = {
    "coordinates_string": {"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": "abc"}}]},
    "coordinates_missing": {"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Point"}}]},
    "coordinates_null": {"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": None}}]},
    "coordinates_nan": {"type": "FeatureCollection", "features": [
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": [float("nan"), 1.0]}}]},
    "features_5": {"type": "FeatureCollection", "features": 5},
    "deep_nesting": None,  # 100000 nested arrays
}


@pytest.mark.parametrize("name", sorted(GEOJSON))
def test_bad_geojson_sources(tmp_path, name):
    import json
    from cli import SAMPLE
    (tmp_path / "dem.asc").write_bytes(SAMPLE.read_bytes())
    path = tmp_path / f"{name}.geojson"
    if GEOJSON[name] is None:
        path.write_text('{"type": "FeatureCollection", "features": [{"type": "Feature", '
                        '"geometry": {"type": "Point", "coordinates": '
                        + "[" * 100000 + "]" * 100000 + "}}]}")
    else:
        path.write_text(json.dumps(GEOJSON[name]))
    proc = run_terrain("cost-distance", "dem.asc", "--sources", path.name, "-o", "c.zarr",
                       "--scheduler", "synchronous", cwd=tmp_path, timeout=120)
    assert_one_line_error(proc, f"terrain: {path.name}:")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["dem.asc", path.name])


def test_truncated_geotiff_in_a_batch_says_why(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    import json
    import numpy as np
    from rasterio.transform import from_origin
    (tmp_path / "r").mkdir()
    z = np.random.default_rng(0).random((600, 700)).astype("float32")
    with rasterio.open(tmp_path / "r" / "a.tif", "w", driver="GTiff", height=600, width=700,
                       count=1, dtype="float32", transform=from_origin(0, 600, 1, 1),
                       compress="deflate", tiled=True) as dst:
        dst.write(z, 1)
    data = (tmp_path / "r" / "a.tif").read_bytes()
    (tmp_path / "r" / "t.tif").write_bytes(data[:len(data) // 3])
    (tmp_path / "r" / "a.tif").unlink()
    for scheduler in ("synchronous", "local"):  # local: the error crosses the task graph's
        # serialization (rasterio's errors in its context did not unpickle: a repr came back)
        proc = run_terrain("batch", "mst", "r/*", "-o", f"out-{scheduler}", "--scheduler",
                           scheduler, cwd=tmp_path, timeout=300)
        assert proc.returncode == 1, proc.stderr
        manifest = tmp_path / f"out-{scheduler}" / "manifest.json"
        row, = json.loads(manifest.read_text())["files"]
        assert row["error"].startswith("r/t.tif: read failed ("), row["error"]
        assert "See previous exception" not in row["error"], row["error"]
        assert "TIFFReadEncodedTile" in row["error"] or "IReadBlock" in row["error"], row
    proc = run_terrain("ingest", "r/t.tif", "-o", "t.zarr", "--scheduler", "local",
                       cwd=tmp_path, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and lines[-1].startswith("terrain: r/t.tif: read failed ("), \
        proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "t.zarr").exists()


# ------------------------------------------------- sources a new user types (issue 22 section 5)

@pytest.mark.parametrize("argv, expected", [
    (["--source", "nan,nan"], "terrain: source 'nan,nan': coordinates must be finite numbers"),
    # a negative first number is the value, not an option ("expected one argument" before)
    (["--source-cell", "-1,5"], "terrain: dem.asc: source cell (-1, 5) is outside the raster"),
    (["--source", "-5.5,2"], "terrain: dem.asc: source (-5.5, 2.0) is outside the raster "
     "(300 x 400 cells: x 500000 to 504000, y 4000000 to 4003000)"),
    (["--sources", "pts.gpkg"], "terrain: pts.gpkg: not a vector file OGR reads ("),
])
def test_bad_sources_are_one_line(tmp_path, argv, expected):
    from cli import SAMPLE
    (tmp_path / "dem.asc").write_bytes(SAMPLE.read_bytes())
    (tmp_path / "pts.gpkg").write_bytes(b"SQLite format 3\0")
    proc = run_terrain("cost-distance", "dem.asc", *argv, "-o", "c.zarr", cwd=tmp_path,
                       timeout=120)
    assert_one_line_error(proc, expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dem.asc", "pts.gpkg"]


def test_library_nan_points_are_an_input_error(tmp_path):
    import numpy as np
    import terrain
    from terrain.errors import InputError
    from cli import SAMPLE
    with pytest.raises(InputError, match=r"source \(nan, nan\): coordinates must be finite"):
        terrain.cost_distance(SAMPLE, points=[(np.nan, np.nan)], backend="cpu")



def test_a_file_of_comments_only_is_an_empty_graph_not_a_grid(tmp_path, capsys):
    """``mst c.txt`` of ``# ...`` lines only was read as a grid: `unknown ESRI header key
    '#'`; no grid format has comment lines, an edge list does."""
    from cli import run_main
    (tmp_path / "c.txt").write_text("# a comment\n% another\n\n")
    for command in ("mst", "bfs"):
        extra = ["--source", "0"] if command == "bfs" else []
        rc, _, err = run_main(capsys, command, tmp_path / "c.txt", *extra, scheduler=None)
        assert rc == 2 and err == f"terrain: {tmp_path / 'c.txt'}: empty graph (no edges)\n", err


@pytest.mark.parametrize("command", [["ingest"], ["mst"], ["fill"],
                                     ["cost-distance", "--source-cell", "0,0"]])
def test_a_gdal_virtual_path_is_named_as_one(tmp_path, command):
    """``/vsigzip/g.asc.gz``, which GDAL reads, was ``no such file``, as if misspelt: said to
    be a GDAL virtual file system terrain does not read, in one line, nothing written; the
    file decompressed is read as GDAL reads the virtual path."""
    import gzip

    import numpy as np
    import rasterio
    import xarray as xr
    (tmp_path / "g.asc.gz").write_bytes(gzip.compress((HEADER + ROWS).encode()))
    virtual = f"/vsigzip/{tmp_path}/g.asc.gz"
    with rasterio.open(virtual) as src:  # the oracle: GDAL reads it
        want = src.read(1, masked=True).astype(np.float32).filled(np.nan)
    name, *options = command
    proc = run_terrain(name, virtual, *options, "-o", "out.zarr", cwd=tmp_path)
    assert_one_line_error(proc, f"terrain: /vsigzip{tmp_path}/g.asc.gz: GDAL's virtual file "
                                "systems (/vsigzip/, /vsizip/, /vsicurl/, ...) are not read: "
                                "give the file's own path (a compressed grid decompressed "
                                "first)")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.asc.gz"]
    (tmp_path / "g.asc").write_bytes(gzip.decompress((tmp_path / "g.asc.gz").read_bytes()))
    proc = run_terrain("ingest", "g.asc", "-o", "g.zarr", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(xr.open_zarr(tmp_path / "g.zarr").elevation.values, want)
