"""An ``--overwrite`` swap killed between its two renames: the next run finishes it or puts
the old output back, never removes the only good copy."""

import os
import signal
import subprocess
import sys

import pytest
import zarr

from cli import HEADER, ROWS, assert_one_line_error, child_env, run_terrain

from terrain.io.outputs import atomic_output

SYNC = ("--scheduler", "synchronous")

# the command line, killed (SIGKILL) right after the swap's first rename
KILLED_MID_SWAP = """
import os, signal, sys
real = os.replace
def replace(src, dst):
    real(src, dst)
    if ".old-" in os.path.basename(str(dst)):
        os.kill(os.getpid(), signal.SIGKILL)
os.replace = replace
from terrain.run import main
sys.exit(main(sys.argv[1:]))
"""


def _killed_mid_swap(*argv, cwd, signum=signal.SIGKILL):
    env = child_env()
    code = KILLED_MID_SWAP.replace("signal.SIGKILL", f"signal.{signal.Signals(signum).name}")
    return subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def store(tmp_path):
    (tmp_path / "g.asc").write_text(HEADER + ROWS)
    proc = run_terrain("ingest", "g.asc", "-o", "out.zarr", "--tile", "2", *SYNC, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return tmp_path


def _tile(path):
    return zarr.open_group(str(path), mode="r").attrs["tile"]


def test_swap_killed_between_renames_is_finished_by_the_next_run(store):
    proc = _killed_mid_swap("ingest", "g.asc", "-o", "out.zarr", "--tile", "4", "--overwrite",
                            *SYNC, cwd=store)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = sorted(os.listdir(store))
    assert "out.zarr" not in left and any(".old-" in n for n in left), left
    # a run without --overwrite: the swap is finished (the killed run's new output, whole),
    # and then that output is not replaced
    proc = run_terrain("ingest", "g.asc", "-o", "out.zarr", "--tile", "8", *SYNC, cwd=store)
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == "terrain: finished replacing out.zarr, interrupted between its two renames"
    assert lines[1].startswith("terrain: out.zarr: output exists"), proc.stderr
    assert proc.returncode == 2 and len(lines) == 2
    assert _tile(store / "out.zarr") == 4
    assert sorted(os.listdir(store)) == ["g.asc", "out.zarr"]


@pytest.mark.parametrize("signum, name", [(signal.SIGINT, "interrupt"),
                                          (signal.SIGTERM, "SIGTERM")])
def test_a_signal_during_the_swap_is_held_until_the_output_is_in_place(store, signum, name):
    """Ctrl-C or SIGTERM between the two renames: the new output goes into place, the old
    one goes, and the run says so and ends as done (it had said "interrupted", exit 130,
    with the old output left beside the new)."""
    proc = _killed_mid_swap("ingest", "g.asc", "-o", "out.zarr", "--tile", "4", "--overwrite",
                            *SYNC, cwd=store, signum=signum)
    assert proc.returncode == 0, proc.stderr
    assert (f"terrain: out.zarr: written in full (the {name} came as it was put in place)"
            in proc.stderr.splitlines())
    assert _tile(store / "out.zarr") == 4
    assert sorted(os.listdir(store)) == ["g.asc", "out.zarr"]


def test_swap_killed_between_renames_then_overwritten_again(store):
    proc = _killed_mid_swap("ingest", "g.asc", "-o", "out.zarr", "--tile", "4", "--overwrite",
                            *SYNC, cwd=store)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    proc = run_terrain("ingest", "g.asc", "-o", "out.zarr", "--tile", "8", "--overwrite", *SYNC,
                       cwd=store)
    assert proc.returncode == 0, proc.stderr
    assert _tile(store / "out.zarr") == 8
    assert sorted(os.listdir(store)) == ["g.asc", "out.zarr"]


def test_swap_without_its_new_output_puts_the_old_one_back(store):
    proc = _killed_mid_swap("ingest", "g.asc", "-o", "out.zarr", "--tile", "4", "--overwrite",
                            *SYNC, cwd=store)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    for name in os.listdir(store):
        if ".partial-" in name:
            import shutil
            shutil.rmtree(store / name)
    proc = run_terrain("ingest", "g.asc", "-o", "out.zarr", "--tile", "8", *SYNC, cwd=store)
    assert proc.stderr.startswith("terrain: restored out.zarr from .out.zarr.old-"), proc.stderr
    assert_one_line_error(type(proc)(proc.args, proc.returncode, proc.stdout,
                                     proc.stderr.split("\n", 1)[1]), "out.zarr: output exists")
    assert _tile(store / "out.zarr") == 2  # the previous good output
    assert sorted(os.listdir(store)) == ["g.asc", "out.zarr"]


def test_swap_killed_after_the_second_rename_leaves_the_new_output(tmp_path, monkeypatch):
    target = tmp_path / "out.txt"
    target.write_text("old")
    real = os.replace

    class Killed(BaseException):
        pass

    def replace(src, dst):
        real(src, dst)
        if os.path.basename(str(dst)) == "out.txt":
            raise Killed  # what a kill there leaves (nothing after it runs)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(Killed):
        with atomic_output(target, overwrite=True) as tmp:
            tmp.write_text("new")
    monkeypatch.setattr(os, "replace", real)
    notices = []
    with atomic_output(target, overwrite=True, notify=notices.append) as tmp:
        tmp.write_text("newer")
    assert notices and notices[0].startswith("removed ") and ".old-" in notices[0]
    assert target.read_text() == "newer" and sorted(os.listdir(tmp_path)) == ["out.txt"]


def test_a_replaced_output_slow_to_remove_goes_in_the_background(tmp_path, monkeypatch):
    """The output an overwrite replaced is removed for DISCARD_WAIT seconds, then by a process
    of its own: the run returns once its output is in place, and nothing of the old one
    stays (the 10-ft MST's old store took seconds to unlink)."""
    from terrain.io import outputs
    target = tmp_path / "out.zarr"
    zarr.open_group(str(target), mode="w")
    for i in range(50):
        (target / f"f{i}").write_text("old")
    spawned = []
    popen = outputs.subprocess.Popen
    monkeypatch.setattr(outputs, "DISCARD_WAIT", 0.0)
    monkeypatch.setattr(outputs.subprocess, "Popen",
                        lambda *a, **k: spawned.append(popen(*a, **k)))
    with atomic_output(target, overwrite=True) as tmp:
        tmp.mkdir()
        (tmp / "new").write_text("new")
    assert len(spawned) == 1 and sorted(os.listdir(target)) == ["new"]
    spawned[0].wait(timeout=60)
    assert sorted(os.listdir(tmp_path)) == ["out.zarr"]


def test_a_removal_cut_short_is_finished_by_the_next_run(tmp_path):
    """A replaced output whose removal was killed (``.NAME.trash-HEX``) goes with the next run
    for that output."""
    target = tmp_path / "out.txt"
    junk = tmp_path / ".out.txt.trash-0123456789ab"
    junk.mkdir()
    (junk / "x").write_text("old")
    with atomic_output(target) as tmp:
        tmp.write_text("new")
    assert target.read_text() == "new" and sorted(os.listdir(tmp_path)) == ["out.txt"]
