"""``terrain mst`` refusing what it cannot do well (one line, exit 2, nothing written), resuming a
tile store's interrupted run, and a small job starting little besides its work."""

import json
import subprocess
import sys

import numpy as np
import pytest
import zarr

from cli import SAMPLE, assert_one_line_error, child_env, run_main, run_terrain, snapshot
from grids import small_shards_case
from oracles import mask_ids, ref_kruskal
from terrain.io.outputs import OtherRunsPartial


@pytest.fixture
def work(tmp_path):
    (tmp_path / "dem.asc").write_bytes(SAMPLE.read_bytes())
    return tmp_path


def test_geotiff_named_otherwise_is_refused(work):
    # a TIFF was written under out.png
    before = snapshot(work)
    proc = run_terrain("mst", "dem.asc", "--geotiff", "out.png", cwd=work)
    assert_one_line_error(proc, "out.png: a GeoTIFF is written there; name it .tif or .tiff")
    assert snapshot(work) == before


def test_grid_options_on_a_graph_file_are_refused(work, capsys):
    (work / "karate.txt").write_text("0 1\n0 2\n1 2\n2 3\n")
    rc, _, err = run_main(capsys, "mst", work / "karate.txt", "--connectivity", "4",
                          "--weight", "slope", scheduler=None)
    assert rc == 2 and err.strip().endswith(
        "karate.txt: a graph file: --connectivity, --weight apply to grids only")
    rc, out, err = run_main(capsys, "mst", work / "karate.txt", scheduler=None)
    assert rc == 0, err  # without them: the graph's forest
    assert (work / "karate.mst.csv").is_file()


@pytest.mark.parametrize("name, text", [
    ("c.txt", "1,2,3\n2,3,4\n"),                                # SNAP with commas
    ("c2.csv", "source,target,weight\n1,2,3\n2,3,4\n"),        # a row of column names
    ("k.txt", "1 2 3 100\n2 3 4 101\n"),                        # KONECT: a timestamp after
    ("d.txt", "c a DIMACS file\np sp 3 2\na 1 2 3\na 2 3 4\n"),   # DIMACS without .gr
])
def test_edge_lists_the_loader_reads_are_graphs_to_mst(work, capsys, name, text):
    """``mst FILE`` takes every edge list the graph commands read as a graph (it took these
    for grids: "no header (expected ESRI 'ncols ...'"), and computes the same forest."""
    (work / name).write_text(text)
    rc, out, err = run_main(capsys, "mst", work / name, "-o", work / "f.csv", scheduler=None)
    assert rc == 0, err
    assert (work / "f.csv").read_text().splitlines() == ["u,v,weight", "1,2,3", "2,3,4"]


def test_a_gzip_grid_is_a_grid_and_a_gzip_edge_list_a_graph(work, capsys):
    """A gzip-compressed ESRI grid went to the graph reader (`cannot parse 'ncols 17':
    expected integer vertex ids`): its head, decompressed, says it is a grid, which is
    refused in one line naming what to do; a gzip edge list stays a graph."""
    import gzip
    (work / "dem.asc.gz").write_bytes(gzip.compress(SAMPLE.read_bytes()))
    for command in ("mst", "ingest"):
        proc = run_terrain(command, "dem.asc.gz", "-o", "x.zarr", cwd=work)
        assert_one_line_error(proc, "terrain: dem.asc.gz: a gzip-compressed grid: decompress "
                                    "it first (gunzip -k dem.asc.gz)")
    (work / "g.txt.gz").write_bytes(gzip.compress(b"1 2 3\n2 3 4\n"))
    rc, out, err = run_main(capsys, "mst", work / "g.txt.gz", "-o", work / "f.csv",
                            scheduler=None)
    assert rc == 0, err
    assert (work / "f.csv").read_text().splitlines() == ["u,v,weight", "1,2,3", "2,3,4"]


def test_a_directory_input_says_what_it_is(work):
    # "output lies inside the input" was said of `mst . -o x.zarr`
    proc = run_terrain("mst", ".", "-o", "x.zarr", cwd=work)
    assert_one_line_error(proc, ".: is a directory, not a grid file or a tile store")
    assert not (work / "x.zarr").exists()


@pytest.mark.parametrize("header, extra, message", [
    ("cellsize 1e308", [], "dem.asc:5: cell size 1e+308 x 1e+308 puts the grid's extent "),
    ("cellsize 1e-320", ["--weight", "slope"], "dem.asc:5: cell size 1e-320 x 1e-320 is too "
                                               "small"),
    (None, [], "dem.asc:7: value 1e400 (row 1, column 3) is beyond the float32 range")])
def test_what_floating_point_cannot_hold_is_refused(work, header, extra, message):
    text = SAMPLE.read_text()
    if header:
        text = text.replace("cellsize 10.0", header, 1)
    else:
        lines = text.split("\n")
        row = lines[6].split(" ")
        row[2] = "1e400"
        lines[6] = " ".join(row)
        text = "\n".join(lines)
    (work / "dem.asc").write_text(text)
    before = snapshot(work)
    proc = run_terrain("mst", "dem.asc", "--backend", "cpu", *extra, cwd=work)
    assert_one_line_error(proc, message)
    assert snapshot(work) == before


def _interrupted_store_run(tmp_path, monkeypatch):
    """A tile store and the partial output of an ``mst --resume``-able run of it killed in
    its write phase (the group checkpoints written, the process gone)."""
    z, store, spec, out, geo = small_shards_case(tmp_path, monkeypatch, 7, 2)
    code = f"""
import os, sys
import terrain.tiles.store as store_mod
store_mod.SHARD_TARGET_SIDE = 32
import pipelines.mst as mst
def die(*a, **k):
    os._exit(9)
mst._write_changes = die
mst.run_mst({str(tmp_path / 'in.zarr')!r}, {str(tmp_path / 'm.zarr')!r}, backend="cpu",
            scheduler="synchronous", in_core=False)
"""
    env = child_env()
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 9, proc.stderr
    (partial,) = tmp_path.glob(".m.zarr.partial-*")
    assert list((partial / ".terrain-checkpoints").glob("mst-group-*"))
    return z, partial


def test_store_input_resumes_its_interrupted_run(tmp_path, monkeypatch):
    # `mst STORE --resume` failed ("is a directory, not a grid file") and removed the partial
    from pipelines.mst import run_mst
    z, partial = _interrupted_store_run(tmp_path, monkeypatch)
    s = run_mst(tmp_path / "in.zarr", tmp_path / "m.zarr", backend="cpu",
                scheduler="synchronous", in_core=False, resume=True)
    assert s["reused_tasks"] > 0 and not partial.exists()
    want, _ = ref_kruskal(z, 8, "max")
    assert np.array_equal(mask_ids(zarr.open_array(str(tmp_path / "m.zarr"), path="mst")[:]),
                          want)


def test_store_rewritten_in_place_does_not_resume_a_stale_partial(tmp_path, monkeypatch):
    # the run key hashed the root zarr.json only: new data resumed the old data's partial
    from pipelines.mst import run_mst
    from terrain.tiles import open_store
    z, partial = _interrupted_store_run(tmp_path, monkeypatch)
    store = open_store(tmp_path / "in.zarr", mode="r+")
    z2 = z[::-1].copy()
    for (r0, r1, c0, c1) in store.shard_windows():
        store.elevation[r0:r1, c0:c1] = z2[r0:r1, c0:c1]
    # the old partial is not this input's: a resume is refused, the partial kept
    with pytest.raises(OtherRunsPartial, match="another version of the input"):
        run_mst(tmp_path / "in.zarr", tmp_path / "m.zarr", backend="cpu",
                scheduler="synchronous", in_core=False, resume=True)
    assert partial.is_dir()
    s = run_mst(tmp_path / "in.zarr", tmp_path / "m.zarr", backend="cpu",
                scheduler="synchronous", in_core=False)  # starting over removes it
    assert s["reused_tasks"] == 0 and not partial.exists()
    want, _ = ref_kruskal(z2, 8, "max")
    assert np.array_equal(mask_ids(zarr.open_array(str(tmp_path / "m.zarr"), path="mst")[:]),
                          want)


def test_a_small_job_starts_neither_numba_nor_dask(tmp_path):
    # in core on the CPU: the C parser and Kruskal in C; no task graph, no JIT
    code = ("import sys, json; from terrain.run import main; "
            f"main(['mst', {str(SAMPLE)!r}, '-o', 's.zarr', '--backend', 'cpu', '--json']); "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'numba', 'dask', 'distributed', 'scipy', 'rasterio'})))")
    env = child_env()
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert json.loads(lines[-1]) == []
    summary = json.loads("\n".join(lines[:-1]))
    assert summary["path"] == "in-core" and summary["parse"] == "cpu"
    want, _ = ref_kruskal(zarr.open_array(str(tmp_path / "s.zarr"), path="elevation")[:])
    assert np.array_equal(mask_ids(zarr.open_array(str(tmp_path / "s.zarr"), path="mst")[:]),
                          want)


@pytest.mark.parametrize("in_core", ["auto", False])
def test_input_replaced_after_its_header_is_told_as_changed(tmp_path, monkeypatch, in_core):
    # a parse error of the new file's rows at the old header's offsets was the message
    import pipelines.mst as mst
    from grids import replaced_after_its_header, write_asc
    from terrain.errors import InputError
    dem = write_asc(tmp_path / "dem.asc", np.arange(30 * 40, dtype=np.float32).reshape(30, 40))
    replaced_after_its_header(monkeypatch, mst, "open_input", dem)
    with pytest.raises(InputError, match="dem.asc: changed while this run read it"):
        mst.run_mst(dem, tmp_path / "m.zarr", tile=16, backend="cpu", scheduler="synchronous",
                    in_core=in_core)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dem.asc"]


def test_a_partial_of_other_code_is_not_resumed(tmp_path, monkeypatch):
    """Before: a partial left by another release was resumed with what that code had read
    and computed (an upgrade's nodata rule and CRS undone, exit 0); the run key holds the
    code's identity, so the resume is refused and the partial kept."""
    import pipelines._resume as resume
    from pipelines.mst import run_mst
    z, partial = _interrupted_store_run(tmp_path, monkeypatch)
    monkeypatch.setattr(resume, "code_identity", lambda: "another release")  # the run key's
    with pytest.raises(OtherRunsPartial, match="other code of terrain"):
        run_mst(tmp_path / "in.zarr", tmp_path / "m.zarr", backend="cpu",
                scheduler="synchronous", in_core=False, resume=True)
    assert partial.is_dir()


def test_every_store_says_which_terrain_wrote_it(tmp_path, capsys):
    """Outputs of one release could not be told from another's (an operator upgrading found
    no way to find those to redo): every store records ``written_by`` (the version and the
    code's digest), which ``info`` shows."""
    from pathlib import Path

    from cli import run_main
    from terrain.io.outputs import code_identity, written_by
    sample = Path(__file__).parents[2] / "data" / "sample.asc"
    for command, extra in (("mst", []), ("fill", []), ("cost-distance", ["--source-cell", "5,5"])):
        out = tmp_path / f"{command}.zarr"
        assert run_main(capsys, command, sample, *extra, "-o", out, scheduler=None)[0] == 0
        said = zarr.open_group(str(out), mode="r").attrs["written_by"]
        assert said == written_by() and code_identity()[:12] in said and said.startswith(
            "terrain ")
        rc, text, _ = run_main(capsys, "info", out, scheduler=None)
        assert rc == 0 and f"written   by {said}" in text
