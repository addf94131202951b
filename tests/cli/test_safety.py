"""Nothing lost or destroyed: bad paths and options are one line (exit 2) before any work,
outputs never replace inputs, partial outputs of killed runs are found, signals clean up."""

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from cli import HEADER, ROWS, assert_one_line_error, child_env, run_terrain

from terrain.io.outputs import atomic_output, hold_lock
from terrain.errors import InputError
from cli import SAMPLE, snapshot
from grids import write_huge_sparse_tif

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "good.asc").write_bytes(SAMPLE.read_bytes())
    (tmp_path / "g.txt").write_text("1 2\n2 3\n3 4\n")
    (tmp_path / "existing.txt").write_text("keep me\n")
    (tmp_path / "link.asc").symlink_to("good.asc")
    os.link(tmp_path / "good.asc", tmp_path / "hard.asc")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "in.asc").write_text(HEADER + ROWS)
    data = "".join(f"{i} {i * 7 % 1000}\n" for i in range(5000)).encode()
    z = bytearray(gzip.compress(data))
    z[12] ^= 0xFF  # inside the deflate stream: zlib.error, not a CRC or header error
    (tmp_path / "bad.txt.gz").write_bytes(bytes(z))
    (tmp_path / "huge.asc").write_text(HEADER.replace("ncols 4", "ncols 1000000000")
                                       .replace("nrows 3", "nrows 1000000000") + ROWS * 2000)
    return tmp_path


SYNC = ("--scheduler", "synchronous")

# argv -> expected text of the one error line
REFUSED = {
    "ingest_onto_its_input": (["ingest", "good.asc", "-o", "good.asc", "--overwrite", *SYNC],
                              "good.asc: output is the input good.asc"),
    "mst_onto_its_input": (["mst", "good.asc", "-o", "good.asc", "--overwrite", *SYNC],
                           "good.asc: output is the input good.asc"),
    "output_via_symlink": (["ingest", "good.asc", "-o", "link.asc", "--overwrite", *SYNC],
                           "link.asc: output is the input good.asc"),
    "output_via_hard_link": (["ingest", "good.asc", "-o", "hard.asc", "--overwrite", *SYNC],
                             "hard.asc: output is the input good.asc"),
    "output_via_relative_path": (["mst", "good.asc", "-o", "sub/../good.asc", "--overwrite", *SYNC],
                                 "sub/../good.asc: output is the input good.asc"),
    "output_contains_input": (["ingest", "sub/in.asc", "-o", "sub", "--overwrite", *SYNC],
                              "sub: output would contain the input sub/in.asc"),
    "bfs_out_exists": (["bfs", "g.txt", "--source", "1", "--out", "existing.txt", *SYNC],
                       "existing.txt: output exists (use --overwrite"),
    "bfs_out_is_input": (["bfs", "g.txt", "--source", "1", "--out", "g.txt", "--overwrite", *SYNC],
                         "g.txt: output is the input g.txt"),
    "output_in_proc": (["ingest", "good.asc", "-o", "/proc/out.zarr", *SYNC],
                       "/proc/out.zarr: cannot write in /proc"),
    "parent_is_a_file": (["ingest", "good.asc", "-o", "good.asc/out.zarr", *SYNC],
                         "good.asc/out.zarr: cannot write there,"),
    "parent_missing": (["mst", "good.asc", "-o", "nodir/out.zarr", *SYNC],
                       "nodir/out.zarr: cannot write there, directory"),
    "geotiff_in_proc": (["mst", "good.asc", "-o", "m.zarr", "--geotiff", "/proc/x.tif", *SYNC],
                        "/proc/x.tif: cannot write in /proc"),
    "geotiff_is_the_store": (["mst", "good.asc", "-o", "m.zarr", "--geotiff", "m.zarr", *SYNC],
                             "m.zarr: named twice as an output"),
    "bfs_out_in_proc": (["bfs", "g.txt", "--source", "1", "--out", "/proc/d.npy", *SYNC],
                        "/proc/d.npy: cannot write in /proc"),
    "graph_ingest_onto_input": (["graph-ingest", "g.txt", "-o", "g.txt", "--overwrite", *SYNC],
                                "g.txt: output is the input g.txt"),
    "overwrite_a_plain_directory": (["ingest", "good.asc", "-o", "sub2", "--overwrite", *SYNC],
                                    "sub2: is a directory but not a tile store"),
    "scheduler_bogus": (["ingest", "good.asc", "-o", "o.zarr", "--scheduler", "bogus"],
                        "scheduler 'bogus': not an address"),
    "scheduler_refused": (["mst", "good.asc", "-o", "o.zarr", "--scheduler", "tcp://127.0.0.1:1"],
                          "cannot reach the Dask scheduler at tcp://127.0.0.1:1"),
    "gzip_corrupt_deflate": (["bfs", "bad.txt.gz", "--source", "1", *SYNC],
                             "bad.txt.gz: cannot read (Error -3 while decompressing"),
    "gzip_corrupt_graph_ingest": (["graph-ingest", "bad.txt.gz", "-o", "c.zarr", *SYNC],
                                  "bad.txt.gz: cannot read (Error -3 while decompressing"),
    "tile_too_big": (["ingest", "good.asc", "-o", "o.zarr", "--tile", "1048576", *SYNC],
                     "tile 1048576 is above 4096"),
    "header_bigger_than_file": (["ingest", "huge.asc", "-o", "o.zarr", *SYNC],
                                "huge.asc:1: header claims 1000000000 x 1000000000"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_before_any_work(workdir, name):
    argv, message = REFUSED[name]
    if name == "overwrite_a_plain_directory":
        (workdir / "sub2").mkdir()
        (workdir / "sub2" / "notes.txt").write_text("mine")
    before = snapshot(workdir)
    t0 = time.monotonic()
    proc = run_terrain(*argv, cwd=workdir)
    seconds = time.monotonic() - t0
    assert_one_line_error(proc, f"terrain: {message}")
    assert snapshot(workdir) == before  # nothing written, nothing destroyed
    assert seconds < 15, f"took {seconds:.1f} s"


def test_geotiff_failing_late_leaves_no_store(tmp_path, monkeypatch):
    """The GeoTIFF is written from the partial store: when it fails, neither output exists."""
    import pipelines.mst as mst

    def broken(*args, **kwargs):
        raise InputError("x.tif: disk full (simulated)")

    monkeypatch.setattr(mst, "write_geotiff", broken)
    with pytest.raises(InputError, match="disk full"):
        mst.run_mst(SAMPLE, tmp_path / "m.zarr", tile=64, backend="cpu", scheduler="synchronous",
                    geotiff=tmp_path / "x.tif")
    assert list(tmp_path.iterdir()) == []


def test_overwrite_replaces_an_output_not_an_input(workdir):
    proc = run_terrain("ingest", "good.asc", "-o", "o.zarr", "--tile", "64", *SYNC, cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    proc = run_terrain("ingest", "good.asc", "-o", "o.zarr", "--tile", "128", "--overwrite", *SYNC,
                       cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    assert zarr.open_group(str(workdir / "o.zarr"), mode="r").attrs["tile"] == 128
    assert not [p for p in os.listdir(workdir) if p.startswith(".")]


def test_stale_partial_of_a_dead_run_is_removed_with_a_notice(tmp_path):
    stale = tmp_path / ".out.zarr.partial-0123456789abcdef"
    stale.mkdir()
    (stale / "zarr.json").write_text("{}")
    (tmp_path / "g.asc").write_text(HEADER + ROWS)
    proc = run_terrain("ingest", "g.asc", "-o", "out.zarr", "--tile", "2", *SYNC, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    notices = proc.stderr.strip().splitlines()
    assert notices == [f"terrain: removed {stale.name}, left by an interrupted run"], proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["g.asc", "out.zarr"]


def test_a_live_run_holds_its_output(tmp_path):
    target = tmp_path / "out.zarr"
    with hold_lock(target):
        with pytest.raises(InputError, match="another terrain run is writing this output"):
            with atomic_output(target):
                pass
    with atomic_output(target) as tmp:
        tmp.mkdir()
    assert sorted(os.listdir(tmp_path)) == ["out.zarr"]


def test_dashboard_listens_on_localhost_by_default(tmp_path):
    proc = run_terrain("ingest", str(SAMPLE), "-o", "o.zarr", "--tile", "64",
                       "--scheduler", "local", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = proc.stderr.strip().splitlines()[0]
    assert line.startswith("terrain: Dask dashboard at http://127.0.0.1:"), line


# ----------------------------------------------------------------------------- killed runs

@pytest.fixture(scope="module")
def big_grid(tmp_path_factory):
    """A grid big enough that a run is still going a second after it starts (2 x 2 shards)."""
    from terrain.io import write_synth
    path = tmp_path_factory.mktemp("big") / "big.asc"
    write_synth(path, 2600, 2600, seed=3, nodata=0.02)
    return path


def _start(argv, cwd):
    env = child_env()
    # SIGINT and SIGHUP as a terminal gives them: a test run started in the background by a
    # non-interactive shell (nohup, `&` in a CI script) passes them ignored to its children,
    # and a program started with SIGHUP ignored rightly keeps ignoring it (terrain does)
    def as_a_terminal_gives_them():
        for s in (signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)
    return subprocess.Popen([sys.executable, "-m", "terrain.run", *map(str, argv)], cwd=cwd,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_a_terminal_gives_them)


def _wait_for(pattern, folder, proc, timeout=90):
    """Wait until a path matching ``pattern`` exists under ``folder`` (the run is mid-way)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        found = list(Path(folder).glob(pattern))
        if found:
            return found
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    raise AssertionError(f"no {pattern} after {timeout} s")


@pytest.mark.slow
@pytest.mark.parametrize("sig, status, word", [(signal.SIGTERM, 143, "terminated"),
                                               (signal.SIGINT, 130, "interrupted"),
                                               (signal.SIGHUP, 129, "hung up")])
def test_signal_mid_run_cleans_up(tmp_path, big_grid, sig, status, word):
    proc = _start(["mst", big_grid, "-o", "m.zarr", "--tile", "256", "--backend", "cpu"], tmp_path)
    _wait_for(".m.zarr.partial-*/.terrain-checkpoints/ingest-band-*", tmp_path, proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    assert "Traceback" not in err and "never retrieved" not in err, err
    lines = [x for x in err.strip().splitlines() if "Dask dashboard" not in x]
    assert lines == [f"terrain: {word}"], err
    assert os.listdir(tmp_path) == []


def test_a_run_started_with_sighup_ignored_goes_on_after_it(tmp_path):
    """``nohup terrain ...``: the hangup of the terminal it was started from is not a stop
    (SIGHUP is a stop only where it was not ignored at the start)."""
    from terrain.io import write_synth
    write_synth(tmp_path / "d.asc", 64, 64, seed=3)
    code = ("import os, signal, sys; from terrain.run import main; "
            "signal.signal(signal.SIGHUP, signal.SIG_IGN); "
            "import terrain.startup as st; real = st.terminate_raises\n"
            "import contextlib\n"
            "@contextlib.contextmanager\n"
            "def hung_up_inside():\n"
            "    with real():\n"
            "        os.kill(os.getpid(), signal.SIGHUP)\n"
            "        yield\n"
            "import terrain.run as run; run.terminate_raises = hung_up_inside\n"
            "sys.exit(main(['fill', 'd.asc', '-o', 'f.zarr']))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "hung up" not in proc.stderr, proc.stderr
    assert (tmp_path / "f.zarr").is_dir()


@pytest.mark.slow
@pytest.mark.parametrize("rows, cols, options", [
    # the tiled index's Dijkstras of a 512-cell group's boundary graphs run for minutes on a
    # loaded machine in a task thread, which no signal reaches: they poll the flag that the
    # stopping run sets
    (1024, 1024, ["--scheduler", "threads"]),
    # the synchronous scheduler runs the tasks in the main thread, where a kernel held off
    # the signal for its whole call (the boundary Dijkstras of a 512² SSSP tile: minutes):
    # it runs in a thread of its own, the main thread waiting
    (512, 1024, ["--scheduler", "synchronous", "--tile-sssp", "512"])],
    ids=["threads", "synchronous"])
def test_a_signal_stops_the_running_tasks_kernels(tmp_path, rows, cols, options):
    # the process ends within a second or two, not after the kernels
    from terrain.io import write_synth
    tiled = ["--route", "tiled", "--backend", "cpu"]
    # the kernels compiled first (a first use compiles them: seconds the stop would wait for)
    write_synth(tmp_path / "w.asc", 64, 64, seed=3)
    warm = run_terrain("cost-distance", "w.asc", "--source-cell", "32,32", *tiled, "-o",
                       "w.zarr", "--scheduler", "synchronous", cwd=tmp_path, timeout=300)
    assert warm.returncode == 0, warm.stderr
    shutil.rmtree(tmp_path / "w.zarr")
    (tmp_path / "w.asc").unlink()
    write_synth(tmp_path / "d.asc", rows, cols, seed=3, nodata=0.02)
    proc = _start(["cost-distance", "d.asc", "--source-cell", f"{rows // 2},{cols // 2}",
                   *tiled, *options, "-o", "c.zarr"], tmp_path)
    _wait_for(".c.zarr.partial-*/sssp_index", tmp_path, proc)
    time.sleep(1.5)  # the groups' index tasks under way
    proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("still running 10 s after SIGTERM") from None
    assert proc.returncode == 143, err
    assert time.monotonic() - t0 < 10
    assert err.strip().splitlines() == ["terrain: terminated"], err
    assert os.listdir(tmp_path) == ["d.asc"]


def _mst_arrays(path):
    g = zarr.open_group(str(path), mode="r")
    return {k: np.asarray(g[k][:]) for k in ("elevation", "mst")}, dict(g.attrs["mst"])


@pytest.mark.slow
def test_sigkill_then_resume_is_bit_identical_and_reuses_tasks(tmp_path, big_grid):
    argv = ["mst", big_grid, "--tile", "256", "--backend", "cpu", "--json",
            "--scheduler", "threads"]
    proc = _start(argv + ["-o", "m.zarr"], tmp_path)
    _wait_for(".m.zarr.partial-*/.terrain-checkpoints/mst-group-*", tmp_path, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    partial, = tmp_path.glob(".m.zarr.partial-*")
    done = len(list((partial / ".terrain-checkpoints").glob("*.npz")))
    assert done >= 4  # create, bands, prepare, a group at least

    resumed = _start(argv + ["-o", "m.zarr", "--resume"], tmp_path)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert f"terrain: resuming from {partial.name}, left by an interrupted run" in err
    summary = json.loads(out)
    assert summary["reused_tasks"] >= done
    assert sorted(os.listdir(tmp_path)) == ["m.zarr"]  # no partial, no lock file
    assert not (tmp_path / "m.zarr" / ".terrain-checkpoints").exists()

    fresh = _start(argv + ["-o", "fresh.zarr"], tmp_path)
    out, err = fresh.communicate(timeout=120)
    assert fresh.returncode == 0, err
    assert json.loads(out).get("reused_tasks", 0) == 0
    a, sa = _mst_arrays(tmp_path / "m.zarr")
    b, sb = _mst_arrays(tmp_path / "fresh.zarr")
    for k in a:
        assert a[k].tobytes() == b[k].tobytes(), k
    for k in ("total_weight", "edges", "trees", "vertices"):
        assert sa[k] == sb[k]


@pytest.mark.slow
def test_ingest_resume_after_sigkill(tmp_path, big_grid):
    # --scheduler: by default a grid this small is ingested without a task graph, and so
    # without checkpoints (pipelines.ingest_start); --resume then starts over
    proc = _start(["ingest", big_grid, "-o", "e.zarr", "--tile", "256", "--scheduler", "threads"],
                  tmp_path)
    _wait_for(".e.zarr.partial-*/.terrain-checkpoints/ingest-band-*", tmp_path, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    resumed = _start(["ingest", big_grid, "-o", "e.zarr", "--tile", "256", "--resume"], tmp_path)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert "tasks reused from the interrupted run" in out, out
    z = np.asarray(zarr.open_group(str(tmp_path / "e.zarr"), mode="r")["elevation"][:])
    from terrain.io import read_grid
    ref, _ = read_grid(big_grid)
    assert z.tobytes() == ref.tobytes()
    assert sorted(os.listdir(tmp_path)) == ["e.zarr"]


def test_resume_refuses_another_runs_partial_and_keeps_it(tmp_path):
    # --resume removed a partial of other options ("removed ..., left by an interrupted
    # run") and started over: the killed run's work lost though the user asked to keep it
    other = tmp_path / ".m.zarr.partial-0123456789abcdef"
    (other / ".terrain-checkpoints").mkdir(parents=True)
    (other / ".terrain-checkpoints" / "ingest-band-0.npz").write_bytes(b"kept")
    before = snapshot(tmp_path)
    proc = run_terrain("mst", SAMPLE, "-o", "m.zarr", "--backend", "cpu", "--resume",
                       cwd=tmp_path)
    assert_one_line_error(proc, f"m.zarr: the partial output {other.name} was left by a run "
                                "with other options, another version of the input or other "
                                "code of terrain")
    assert "without --resume to start over" in proc.stderr
    assert snapshot(tmp_path) == before
    proc = run_terrain("mst", SAMPLE, "-o", "m.zarr", "--backend", "cpu", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"removed {other.name}, left by an interrupted run" in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["m.zarr"]


# ----------------------------------------------------------------------------- dry run

def test_dry_run_prints_the_plan_and_writes_nothing(workdir):
    before = snapshot(workdir)
    proc = run_terrain("mst", "good.asc", "-o", "m.zarr", "--tile", "64", "--dry-run", "--json",
                       cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert (plan["rows"], plan["cols"], plan["tiles"], plan["levels"]) == (300, 400, [5, 7], 4)
    # a grid this small runs in core, in this process: no task graph
    assert plan["path"] == "in-core" and plan["tasks"] == 0
    assert plan["backend"] in ("cpu", "gpu")
    assert 0 < plan["disk_needed_bytes"] < plan["disk_free_bytes"]
    assert plan["memory_per_task_bytes"] > 300 * 400 * 4
    assert snapshot(workdir) == before and proc.stderr == ""


def test_dry_run_refuses_when_the_disk_cannot_hold_the_output(tmp_path):
    write_huge_sparse_tif(tmp_path / "huge.tif")
    before = snapshot(tmp_path)
    proc = run_terrain("ingest", "huge.tif", "-o", "h.zarr", "--dry-run", cwd=tmp_path)
    assert_one_line_error(proc, "terrain: h.zarr: needs about 2.6 TiB of disk,")
    assert "1048576 x 1048576" in proc.stdout
    assert snapshot(tmp_path) == before
