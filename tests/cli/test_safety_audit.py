"""The audit of docs/safety.md ("Audit"): the commands the first safety tests left
out (cost-distance in all its algorithms, path, plot, synth, batch)
refuse an output that is, holds or lies in an input, a bad place to write, an absurd size or
scheduler: one line, exit 2, before any work, nothing written or destroyed."""

import shutil

import pytest

from cli import HEADER, ROWS, assert_one_line_error, run_terrain
from cli import snapshot

SYNC = ("--scheduler", "synchronous")
CD = ("cost-distance", "good.asc", "--source-cell", "0,0")


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A 3 x 4 DEM with its mst and cost-distance stores, made once by the CLI itself."""
    d = tmp_path_factory.mktemp("stores")
    (d / "good.asc").write_text(HEADER + ROWS)
    for argv in (("mst", "good.asc", "-o", "m.zarr", *SYNC),
                 (*CD, "-o", "c.zarr", *SYNC)):
        proc = run_terrain(*argv, cwd=d)
        assert proc.returncode == 0, proc.stderr
    return d


@pytest.fixture
def workdir(tmp_path, stores):
    work = tmp_path / "w"
    shutil.copytree(stores, work, symlinks=True)
    (work / "link.asc").symlink_to("good.asc")
    (work / "existing.txt").write_text("keep me\n")
    (work / "plain").mkdir()
    (work / "plain" / "notes.txt").write_text("mine")
    return work


# argv -> expected text of the one error line
REFUSED = {
    "cd_onto_its_input": ([*CD, "-o", "good.asc", "--overwrite", *SYNC],
                          "good.asc: output is the input good.asc"),
    "cd_tiled_onto_its_input": ([*CD, "--route", "tiled", "-o", "good.asc", "--overwrite",
                                 *SYNC], "good.asc: output is the input good.asc"),
    "cd_blocked_onto_its_input": ([*CD, "--route", "blocked", "-o", "good.asc",
                                   "--overwrite", *SYNC], "good.asc: output is the input good.asc"),
    "cd_onto_a_symlink_to_its_input": ([*CD, "-o", "link.asc", "--overwrite", *SYNC],
                                       "link.asc: output is the input good.asc"),
    "cd_onto_its_friction": ([*CD, "--cost", "friction", "--friction", "m.zarr", "-o", "m.zarr",
                              "--overwrite", *SYNC], "m.zarr: output is the input m.zarr"),
    "cd_inside_its_input_store": (["cost-distance", "m.zarr", "--source-cell", "0,0", "-o",
                                   "m.zarr/c.zarr", *SYNC],
                                  "m.zarr/c.zarr: output lies inside the input m.zarr"),
    # inside a store that is no input: that store's --overwrite would remove it
    "cd_inside_another_store": ([*CD, "-o", "m.zarr/c2.zarr", *SYNC],
                                "m.zarr/c2.zarr: lies inside the store "),
    "plot_inside_another_store": (["plot", "c.zarr", "-o", "m.zarr/p.png"],
                                  "m.zarr/p.png: lies inside the store "),
    "cd_holding_its_input": (["cost-distance", "m.zarr", "--source-cell", "0,0", "-o", ".",
                              "--overwrite", *SYNC], ".: output would contain the input m.zarr"),
    "cd_exists": ([*CD, "-o", "c.zarr", *SYNC], "c.zarr: output exists (use --overwrite"),
    "cd_parent_is_a_file": ([*CD, "-o", "good.asc/c.zarr", *SYNC],
                            "good.asc/c.zarr: cannot write there,"),
    "cd_tiled_in_proc": ([*CD, "--route", "tiled", "-o", "/proc/c.zarr", *SYNC],
                         "/proc/c.zarr: cannot write in /proc"),
    "cd_geotiff_dir_in_proc": ([*CD, "-o", "c2.zarr", "--geotiff-dir", "/proc/gt", *SYNC],
                               "/proc/gt: cannot write in /proc"),
    "cd_geotiff_dir_parent_missing": ([*CD, "-o", "c2.zarr", "--geotiff-dir", "nodir/gt", *SYNC],
                                      "nodir/gt: cannot write there, directory"),
    "cd_geotiff_dir_is_the_input": ([*CD, "-o", "c2.zarr", "--geotiff-dir", "good.asc", *SYNC],
                                    "good.asc: exists and is not a directory"),
    "fill_geotiff_dir_is_a_store": (["fill", "good.asc", "-o", "f.zarr", "--geotiff-dir", "m.zarr",
                                     "--overwrite", *SYNC],
                                    "m.zarr: is a Zarr store; the GeoTIFFs need a folder"),
    "flow_geotiff_dir_is_a_store": (["flow", "good.asc", "-o", "w.zarr", "--geotiff-dir", "m.zarr",
                                     "--overwrite", *SYNC],
                                    "m.zarr: is a Zarr store; the GeoTIFFs need a folder"),
    "cd_scheduler_bogus": ([*CD, "-o", "c2.zarr", "--scheduler", "bogus"],
                           "scheduler 'bogus': not an address"),
    "cd_tile_too_big": ([*CD, "--route", "tiled", "--tile", "1048576", "-o", "c2.zarr", *SYNC],
                        "tile 1048576 is above 4096"),
    "path_onto_its_store": (["path", "--to", "1.5,1.5", "-o", "c.zarr", "--overwrite", "c.zarr"],
                            "c.zarr: output is the input c.zarr"),
    "path_inside_its_store": (["path", "--to", "1.5,1.5", "-o", "c.zarr/p.geojson", "c.zarr"],
                              "c.zarr/p.geojson: output lies inside the input c.zarr"),
    "mst_no_cog_without_geotiff": (["mst", "good.asc", "-o", "m2.zarr", "--no-cog", *SYNC],
                                   "good.asc: --no-cog applies to the GeoTIFFs of --geotiff, "
                                   "which is not given"),
    "fill_no_cog_without_geotiff_dir": (["fill", "good.asc", "-o", "f.zarr", "--no-cog"],
                                        "good.asc: --no-cog applies to the GeoTIFFs of "
                                        "--geotiff-dir, which is not given"),
    # checked against its own inputs: the options were accepted and ignored
    "verify_store_with_a_graph": (["verify", "m.zarr", "--graph", "good.asc", "--source", "0"],
                                  "m.zarr: --graph and --source name a distances file's graph"),
    "path_of_no_store": (["path", "--to-cell", "1,1", "-o", "p.geojson", "none.zarr"],
                         "none.zarr: no such file"),
    "path_of_a_dem": (["path", "--to-cell", "1,1", "-o", "p.geojson", "good.asc"],
                      "good.asc: not a cost-distance store"),
    "path_exists": (["path", "--to", "1.5,1.5", "-o", "existing.txt", "c.zarr"],
                    "existing.txt: output exists (use --overwrite"),
    "plot_onto_its_store": (["plot", "m.zarr", "-o", "m.zarr", "--overwrite"],
                            "m.zarr: output is the input m.zarr"),
    "plot_onto_the_dem": (["plot", "m.zarr", "-o", "good.asc", "--overwrite"],
                          "good.asc: output is the input good.asc"),
    "plot_cost_onto_its_store": (["plot", "c.zarr", "-o", "c.zarr", "--overwrite"],
                                 "c.zarr: output is the input c.zarr"),
    "plot_inside_its_store": (["plot", "m.zarr", "-o", "m.zarr/p.png"],
                              "m.zarr/p.png: output lies inside the input m.zarr"),
    "plot_in_proc": (["plot", "m.zarr", "-o", "/proc/p.png"], "/proc/p.png: cannot write in /proc"),
    "synth_exists": (["synth", "--rows", "3", "--cols", "3", "-o", "existing.txt"],
                     "existing.txt: output exists (use --overwrite"),
    "synth_parent_is_a_file": (["synth", "--rows", "3", "--cols", "3", "-o", "good.asc/x.asc"],
                               "good.asc/x.asc: cannot write there,"),
    "synth_onto_a_plain_directory": (["synth", "--rows", "3", "--cols", "3", "-o", "plain",
                                      "--overwrite"], "plain: is a directory but not a tile store"),
    "synth_larger_than_the_disk": (["synth", "--rows", "1000000000", "--cols", "1000000000",
                                    "-o", "huge.asc"],
                                   "huge.asc: 1000000000 x 1000000000 cells need at least"),
    "batch_outdir_holds_the_inputs": (["batch", "ingest", ".", "-o", ".", *SYNC],
                                      ".: output folder would contain the input"),
    "batch_outdir_is_a_file": (["batch", "ingest", "good.asc", "-o", "existing.txt", *SYNC],
                               "existing.txt: exists and is not a directory"),
    "batch_outdir_parent_missing": (["batch", "ingest", "good.asc", "-o", "nodir/out", *SYNC],
                                    "nodir/out: cannot create it, directory"),
    "batch_outdir_in_proc": (["batch", "ingest", "good.asc", "-o", "/proc/out", *SYNC],
                             "/proc/out: cannot create it"),
    "batch_scheduler_bogus": (["batch", "ingest", "good.asc", "-o", "out", "--scheduler", "bogus"],
                              "scheduler 'bogus': not an address"),
    "batch_scheduler_refused": (["batch", "mst", "good.asc", "-o", "out", "--scheduler",
                                 "tcp://127.0.0.1:1"],
                                "cannot reach the Dask scheduler at tcp://127.0.0.1:1"),
    "batch_tile_too_big": (["batch", "ingest", "good.asc", "-o", "out", "--tile", "1048576",
                            *SYNC], "tile 1048576 is above 4096"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_before_any_work(workdir, name):
    argv, message = REFUSED[name]
    before = snapshot(workdir)
    proc = run_terrain(*argv, cwd=workdir)
    assert_one_line_error(proc, f"terrain: {message}")
    assert snapshot(workdir) == before  # nothing written, nothing destroyed


def test_geotiff_dir_is_made_when_its_parent_exists(workdir):
    """The check above does not refuse a new --geotiff-dir: it is made, the GeoTIFFs land."""
    proc = run_terrain(*CD, "-o", "c2.zarr", "--geotiff-dir", "tifs", *SYNC, cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (workdir / "tifs").iterdir()) == \
        ["allocation.tif", "backlink.tif", "distance.tif"]
    assert (workdir / "c2.zarr" / "zarr.json").is_file()


def test_a_finished_run_exits_0_whatever_its_standard_outputs_encoding(tmp_path):
    """The run's outputs complete, then its summary failed: an encoding without the path's
    characters (``PYTHONIOENCODING=ascii``) gave a traceback and exit 1, and a rerun "output
    exists"."""
    import subprocess
    import sys

    from cli import child_env
    (tmp_path / "ñ.asc").write_text(HEADER + ROWS)
    ascii_ = subprocess.run([sys.executable, "-m", "terrain.run", "mst", "ñ.asc", "-o",
                             "ñ.zarr"], cwd=tmp_path, env=child_env(PYTHONIOENCODING="ascii"),
                            capture_output=True, text=True)
    assert ascii_.returncode == 0 and ascii_.stderr == "", ascii_.stderr
    assert "\\xf1.zarr" in ascii_.stdout
    assert (tmp_path / "ñ.zarr").is_dir()


@pytest.mark.parametrize("argv", [["info", "m.zarr"],
                                  ["mst", "g.asc", "-o", "closed.zarr", "--json"]])
def test_a_closed_standard_output_is_refused_before_any_work(tmp_path, argv):
    """``>&-`` (Python's ``sys.stdout`` is None): every command printed into nothing and
    exited 0, ``info`` saying nothing at all; one line, status 2, nothing written, as a full
    standard output is an error."""
    import os
    import subprocess
    import sys

    from cli import child_env
    (tmp_path / "g.asc").write_text(HEADER + ROWS)
    assert run_terrain("mst", "g.asc", "-o", "m.zarr", cwd=tmp_path).returncode == 0
    closed = subprocess.run([sys.executable, "-m", "terrain.run", *argv], cwd=tmp_path,
                            env=child_env(), text=True, stderr=subprocess.PIPE,
                            preexec_fn=lambda: os.close(1))
    assert_one_line_error(closed, "standard output is closed: nothing was run")
    assert not (tmp_path / "closed.zarr").exists()


@pytest.mark.parametrize("argv, message", [
    (["bfs", "g.txt", "--source", "0", "--source", "3", "--out", "d.csv"],
     "terrain bfs: error: --source given twice: several as one list, --source A,B"),
    (["sssp", "g.txt", "--source", "0", "--source", "3", "--out", "d.csv"],
     "terrain sssp: error: --source given twice"),
    (["fill", "good.asc", "--outlets", "o.csv", "--outlets", "p.csv", "-o", "f.zarr"],
     "terrain fill: error: --outlets given twice: several go in one file"),
    ([*CD, "--sources", "o.csv", "--sources", "p.csv", "-o", "c2.zarr"],
     "terrain cost-distance: error: --sources given twice"),
])
def test_an_option_of_many_given_twice_is_refused(workdir, argv, message):
    """argparse kept the last of a repeated option: ``bfs --source 0 --source 3`` ran from 3
    alone, exit 0. Several sources are one list (or one file); twice is refused."""
    (workdir / "g.txt").write_text("0 1\n1 2\n2 3\n")
    before = snapshot(workdir)
    proc = run_terrain(*argv, cwd=workdir)
    assert proc.returncode == 2 and proc.stderr.strip().startswith(message), proc.stderr
    assert proc.stderr.count("\n") == 1 and not proc.stdout
    assert snapshot(workdir) == before


@pytest.mark.parametrize("reader", ["file", "gone"])
def test_a_reader_gone_keeps_the_commands_exit_status(tmp_path, reader):
    """``terrain batch ... --json | head -1`` of a batch with failed files exited 0: the
    summary (more than stdout's buffer) met the closed pipe mid-print, and the
    BrokenPipeError ended the run as a success. The reader going away takes the rest of the
    output, not the status: 1, as with a reader that reads it all (the oracle: the same
    batch into a file), no traceback."""
    import json
    import os
    import subprocess
    import sys

    from cli import child_env
    (tmp_path / "many.lst").write_text("".join(f"missing-{i:0190d}.asc\n" for i in range(12)))
    if reader == "file":
        out = open(tmp_path / "summary.json", "w")
    else:
        read, write = os.pipe()
        os.close(read)  # no reader from the first write on
        out = os.fdopen(write, "w")
    with out:
        proc = subprocess.Popen([sys.executable, "-m", "terrain.run", "batch", "ingest",
                                 "many.lst", "-o", "out", "--json", "--scheduler", "threads"],
                                cwd=tmp_path, env=child_env(), stdout=out,
                                stderr=subprocess.PIPE, text=True)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 1, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    rows = json.loads((tmp_path / "out" / "manifest.json").read_text())
    rows = rows["files"] if isinstance(rows, dict) else rows
    assert len(rows) == 12 and all(r["status"] == "failed" for r in rows)
    if reader == "file":
        assert len((tmp_path / "summary.json").read_text()) > 8192  # past stdout's buffer
