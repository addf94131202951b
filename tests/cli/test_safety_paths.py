"""Paths resolved as the kernel resolves them: what is checked is what is written.

``link/..`` is the parent of the link's *target* for ``open``; collapsing ``..`` as text
before following the link once let ``-o link/../dem.asc`` replace the input ``dem.asc``.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli import ROOT, assert_one_line_error, child_env, run_terrain, snapshot

SYNC = ("--scheduler", "synchronous")


@pytest.fixture
def layout(tmp_path):
    """The issue's repro: ``e/dem.asc``, ``e/sub``, and ``w2/link -> ../e/sub``."""
    (tmp_path / "e" / "sub").mkdir(parents=True)
    (tmp_path / "w2").mkdir()
    proc = run_terrain("synth", "--rows", "30", "--cols", "40", "-o", "e/dem.asc", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (tmp_path / "w2" / "link").symlink_to("../e/sub")
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["ingest", "../e/dem.asc"],
    ["mst", "../e/dem.asc"],
    ["cost-distance", "../e/dem.asc", "--source-cell", "1,1"],
])
def test_output_through_a_symlinked_dotdot_is_the_input(layout, argv):
    before = snapshot(layout)
    proc = run_terrain(*argv, "-o", "link/../dem.asc", "--overwrite", *SYNC, cwd=layout / "w2")
    assert_one_line_error(proc, "terrain: link/../dem.asc: output is the input ../e/dem.asc")
    assert snapshot(layout) == before
    assert (layout / "e" / "dem.asc").is_file()


def test_output_through_a_symlinked_dotdot_lands_where_the_kernel_puts_it(layout):
    proc = run_terrain("ingest", "../e/dem.asc", "-o", "link/../new.zarr", *SYNC,
                       cwd=layout / "w2")
    assert proc.returncode == 0, proc.stderr
    assert (layout / "e" / "new.zarr" / "zarr.json").is_file()
    assert sorted(os.listdir(layout / "w2")) == ["link"]
    assert sorted(os.listdir(layout / "e")) == ["dem.asc", "new.zarr", "sub"]


def test_input_through_a_symlinked_dotdot(layout):
    """``link/../dem.asc`` as the input is ``e/dem.asc``: writing onto it is refused."""
    proc = run_terrain("ingest", "link/../dem.asc", "-o", "../e/dem.asc", "--overwrite", *SYNC,
                       cwd=layout / "w2")
    assert_one_line_error(proc, "terrain: ../e/dem.asc: output is the input link/../dem.asc")


def test_dotdot_after_a_missing_folder_is_one_line(layout):
    before = snapshot(layout)
    proc = run_terrain("ingest", "../e/dem.asc", "-o", "nosuch/../x.zarr", *SYNC,
                       cwd=layout / "w2")
    assert_one_line_error(proc, "terrain: nosuch/../x.zarr: cannot write there, directory ")
    assert "nosuch does not exist" in proc.stderr
    assert snapshot(layout) == before


def test_symlink_loop_is_one_line(tmp_path):
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    (tmp_path / "g.asc").write_text("ncols 2\nnrows 1\nxllcorner 0\nyllcorner 0\n"
                                    "cellsize 1\n1 2\n")
    proc = run_terrain("ingest", "g.asc", "-o", "a/x.zarr", *SYNC, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "g.asc"]


def test_real_path_follows_the_link_before_dotdot(tmp_path):
    from terrain.io.outputs import real_path
    (tmp_path / "e" / "sub").mkdir(parents=True)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "link").symlink_to("../e/sub")
    base = tmp_path.resolve()
    assert real_path(tmp_path / "w" / "link" / ".." / "f") == base / "e" / "f"
    assert real_path(tmp_path / "w" / "link" / "." / "f") == base / "e" / "sub" / "f"
    # the same answer as the kernel's
    (base / "e" / "f").write_text("x")
    assert os.path.samefile(tmp_path / "w" / "link" / ".." / "f", real_path(
        tmp_path / "w" / "link" / ".." / "f"))
    if sys.platform.startswith("linux"):
        assert real_path("/proc/self/..") == real_path("/proc")


@pytest.fixture
def home(tmp_path, monkeypatch):
    """``tmp_path/w`` holding ``g.asc``, its store and a graph; ``$HOME`` is ``tmp_path/home``."""
    (tmp_path / "home").mkdir()
    (tmp_path / "w").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    from terrain import native
    kernels = Path(native.load_library()._name)
    if kernels.parent != native.SOURCE.parent:
        # compiled on first use into a cache under the real HOME: the children find it there
        # instead of compiling it again into this one (8 CPU seconds each)
        monkeypatch.setenv("TERRAIN_CACHE_DIR", str(kernels.parent))
    for argv in (["synth", "--rows", "30", "--cols", "40", "-o", "g.asc"],
                 ["ingest", "g.asc", "-o", "g.zarr", *SYNC]):
        assert run_terrain(*argv, cwd=tmp_path / "w").returncode == 0
    (tmp_path / "w" / "e.txt").write_text("0 1 1\n1 2 1\n")
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["ingest", "g.asc", "-o", "~/q.zarr", *SYNC],
    ["synth", "--rows", "30", "--cols", "40", "-o", "~/s.asc"],
    ["mst", "g.asc", "-o", "~/m.zarr", *SYNC],
    ["fill", "g.asc", "-o", "~/f.zarr", *SYNC],
    ["flow", "g.asc", "-o", "~/w.zarr", *SYNC],
    ["cost-distance", "g.asc", "--source-cell", "1,1", "-o", "~/c.zarr", *SYNC],
    ["plot", "g.zarr", "-o", "~/p.png"],
    ["sssp", "e.txt", "--source", "1", "--out", "~/d.npy"],
])
def test_a_quoted_tilde_is_a_folder_name(home, argv):
    """A ``~`` the shell left (quoted) names the folder ``~``, as the kernel reads it: the
    output was checked under $HOME but written under ./~ (or the reverse), publishing a
    store and then failing on it, or writing into $HOME."""
    before = snapshot(home)
    proc = run_terrain(*argv, cwd=home / "w")
    assert_one_line_error(proc, "cannot write there, directory ")
    assert f"{home.resolve() / 'w' / '~'} does not exist" in proc.stderr
    assert snapshot(home) == before


def test_a_folder_named_tilde_is_read_and_written(home):
    (home / "w" / "~").mkdir()
    os.replace(home / "w" / "g.asc", home / "w" / "~" / "dem.asc")
    proc = run_terrain("ingest", "~/dem.asc", "-o", "~/dem.zarr", *SYNC, cwd=home / "w")
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(home / "w" / "~")) == ["dem.asc", "dem.zarr"]
    assert os.listdir(home / "home") == []


@pytest.mark.parametrize("name", ["-", "fifo", "null", "stdout"])
@pytest.mark.parametrize("argv", [
    ["ingest", "g.asc", *SYNC],
    ["mst", "g.asc", *SYNC],
    ["plot", "g.zarr"],
])
def test_a_stream_is_no_output(home, argv, name):
    """``-o -`` made a store folder named ``-``; ``-o /dev/stdout`` said ``cannot write in
    /proc/N/fd``, and with --overwrite, where stdout was a file, replaced the link by a
    store (``null``: a link to /dev/null, the device replaced the same way)."""
    w = home / "w"
    os.mkfifo(w / "fifo")
    (w / "null").symlink_to(os.devnull)
    (w / "stdout").symlink_to("/proc/self/fd/1")
    before = snapshot(home)
    for stdout in (subprocess.PIPE, open(home / "log", "w")):  # a pipe, a file
        proc = subprocess.run([sys.executable, "-m", "terrain.run", *argv, "-o", name,
                               "--overwrite"], cwd=w, env=child_env(), stdout=stdout,
                              stderr=subprocess.PIPE, text=True, timeout=120)
        assert_one_line_error(proc, f"terrain: {name}: outputs are files or stores, not "
                                    "streams: name a file")
        (home / "log").unlink(missing_ok=True)
    assert snapshot(home) == before


def _bound_by_modes():
    """The command prefix that lets files' modes stop this process: as root, whom no mode
    stops, the capabilities to override them dropped (skips without setpriv); else none."""
    import shutil
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("root without setpriv: no mode stops this process")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search",
            "--inh-caps=-dac_override,-dac_read_search"]


@pytest.mark.parametrize("argv", [["mst", "d/g.asc", "-o", "x.zarr"],
                                  ["fill", "d/g.asc", "-o", "x.zarr"],
                                  ["bfs", "d/g.asc", "--source", "0"]])
def test_an_input_in_a_folder_that_may_not_be_entered_is_one_line(tmp_path, argv):
    """Before: a PermissionError traceback from the first look at the input (is the path a
    folder? a graph file?), exit 1; now the one line an unreadable file gets, exit 2. As root,
    whom no mode stops, the command runs without the capability to override modes."""
    import shutil
    (tmp_path / "d").mkdir()
    shutil.copy(Path(__file__).parents[2] / "data" / "sample.asc", tmp_path / "d" / "g.asc")
    prefix = _bound_by_modes()
    (tmp_path / "d").chmod(0)
    try:
        proc = subprocess.run([*prefix, sys.executable, "-m", "terrain.run", *argv],
                              cwd=tmp_path, env=child_env(), capture_output=True, text=True)
    finally:
        (tmp_path / "d").chmod(0o755)
    assert_one_line_error(proc, "d/g.asc: cannot read (Permission denied)")
    assert not (tmp_path / "x.zarr").exists()


def test_numba_kernels_run_without_a_writable_cache_folder(tmp_path):
    """An installed package its user may not write, with HOME missing or read-only (a service
    account's): Numba found no folder to cache ``cache=True`` kernels in and refused to define
    them (``RuntimeError: cannot cache function '_mix': no locator available``, exit 1). Now
    they compile into a folder of the run, removed after, and one warning says so. The package
    is a copy in a read-only folder; as root, whom no mode stops, the command runs without the
    capability to override modes."""
    import shutil
    prefix = _bound_by_modes()
    site, tmp = tmp_path / "site", tmp_path / "tmp"
    shutil.copytree(ROOT / "terrain", site / "terrain",
                    ignore=shutil.ignore_patterns("__pycache__"))
    tmp.mkdir()
    (tmp_path / "home").mkdir(mode=0o555)  # read-only, as site is made below
    env = child_env(HOME=str(tmp_path / "home" / "missing"), TMPDIR=str(tmp))
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])  # the copy first
    for name in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME"):
        env.pop(name, None)
    argv = ["synth", "--rows", "40", "--cols", "30", "-o"]
    for path in [site, *site.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    try:
        proc = subprocess.run([*prefix, sys.executable, "-m", "terrain.run", *argv, "t.asc"],
                              cwd=tmp_path, env=env, capture_output=True, text=True)
    finally:
        for path in [site, *site.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    assert proc.returncode == 0, proc.stderr
    assert not list(site.rglob("__pycache__/*.nbi")), "the read-only copy was written"
    warnings = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "NUMBA_CACHE_DIR" in warnings[0], proc.stderr
    assert not list(tmp.glob("terrain-numba-*")), "the run's cache folder was left"
    # the same grid as a run with a cache
    assert run_terrain(*argv, "u.asc", cwd=tmp_path).returncode == 0
    assert (tmp_path / "t.asc").read_bytes() == (tmp_path / "u.asc").read_bytes()


#: where each command is stopped to take its output's folder away, in the middle of its
#: writes: (module, function, the folder's file to expect in the message, extra arguments)
FOLDER_TAKEN_AT = {
    "ingest": ("pipelines.ingest", "create_elevation", "x.zarr", []),
    "mst": ("pipelines._command", "finish_store", "x.zarr", []),
    "fill": ("pipelines._command", "finish_store", "x.zarr", []),
    "cost-distance": ("terrain.io.geotiff", "_write_one", "distance.tif",
                      ["--source-cell", "3,3"]),
}


@pytest.mark.parametrize("how", ["removed", "moved"])
@pytest.mark.parametrize("command", sorted(FOLDER_TAKEN_AT))
def test_the_outputs_folder_taken_away_mid_run_is_one_line(tmp_path, monkeypatch, capfd,
                                                           command, how):
    """``mkdir sub; ingest g.asc -o sub/x.zarr & rm -rf sub`` (or ``mv sub sub2``; also mst,
    fill, and cost-distance's --geotiff-dir sub): a 64-line traceback ending in the partial's
    FileNotFoundError (or zarr's "no Zarr group"), exit 1, and the moved folder kept the lock
    and the partial. Now one line, exit 2, and the run removes what it made there wherever
    the folder went."""
    import importlib
    import shutil

    from cli import run_main
    from terrain.io import write_synth

    module, name, shown, extra = FOLDER_TAKEN_AT[command]
    module = importlib.import_module(module)
    write_synth(tmp_path / "g.asc", 60, 80, seed=3)
    sub = tmp_path / "sub"
    sub.mkdir()
    real = getattr(module, name)

    def take_away(*args, **kwargs):
        if sub.exists():
            shutil.rmtree(sub) if how == "removed" else sub.rename(tmp_path / "sub2")
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, take_away)
    out = ["-o", tmp_path / "x.zarr", "--geotiff-dir", sub] if command == "cost-distance" \
        else ["-o", sub / "x.zarr"]
    rc, stdout, err = run_main(capfd, command, tmp_path / "g.asc", *out, *extra)
    assert (rc, stdout, "Traceback" in err) == (2, "", False), err
    assert err.strip() == (f"terrain: {sub / shown}: its folder was removed or moved while "
                           "the run wrote it; nothing written")
    assert sorted(os.listdir(tmp_path)) == ["g.asc"] + (["sub2"] if how == "moved" else [])
    if how == "moved":
        assert os.listdir(tmp_path / "sub2") == []


def _as_another_user(tmp_path, drop):
    """A shared folder (mode 1777) owned by ``nobody`` and the command prefix that runs
    terrain there as root without the capabilities ``drop`` (as another user would, whom no
    capability lets past the folder's and the files' modes); skips where it cannot."""
    import shutil
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv: files of another user")
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chown(shared, 65534, 65534)
    shared.chmod(0o1777)
    caps = ",".join(f"-{c}" for c in drop)
    return shared, ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]


def _chown_tree(path, uid):
    os.chown(path, uid, uid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(root, name), uid, uid)


def test_overwrite_of_another_users_output_in_a_sticky_folder_is_refused_first(tmp_path):
    """Root's ``mst a.asc -o rootout.zarr`` in a 1777 folder, then another user's ``mst a.asc
    -o rootout.zarr --overwrite``: the whole job ran, then ``cannot read (Operation not
    permitted)`` from the rename, and the user's partial was left. Now refused before any
    work, naming the reason; nothing left."""
    shared, prefix = _as_another_user(tmp_path, ["fowner"])
    proc = run_terrain("synth", "--rows", "30", "--cols", "40", "-o", "a.asc", cwd=shared)
    assert proc.returncode == 0, proc.stderr
    proc = run_terrain("mst", "a.asc", "-o", "rootout.zarr", *SYNC, cwd=shared)
    assert proc.returncode == 0, proc.stderr
    _chown_tree(shared / "rootout.zarr", 65534)
    before = snapshot(shared)
    proc = subprocess.run([*prefix, sys.executable, "-m", "terrain.run", "mst", "a.asc", "-o",
                           "rootout.zarr", "--overwrite", *SYNC], cwd=shared,
                          env=child_env(), capture_output=True, text=True)
    assert_one_line_error(proc, "terrain: rootout.zarr: cannot be replaced: it belongs to "
                                f"another user (nobody) in the shared (sticky) folder {shared}")
    assert proc.stdout == ""
    assert snapshot(shared) == before


def test_another_users_killed_run_in_a_sticky_folder_is_named(tmp_path, monkeypatch, capfd):
    """A run of another user killed in a shared 1777 folder left its ``.k.zarr.lock`` and
    ``.k.zarr.partial-KEY``: the same command then said ``shared: cannot write there
    (Permission denied)`` (the folder takes files; the lock is the blocker), and once the
    lock was gone ``removed .k.zarr.partial-KEY, left by an interrupted run`` of a partial
    still there. Now the lock is named as another user's; a partial that stays is said to
    stay, and refused where the run writes (a partial of other options: kept, the run goes
    on)."""
    import pipelines._command
    from cli import run_main
    from terrain.io.outputs import OtherRunsPartial

    shared, prefix = _as_another_user(tmp_path, ["dac_override", "dac_read_search", "fowner"])
    proc = run_terrain("synth", "--rows", "30", "--cols", "40", "-o", "a.asc", cwd=shared)
    assert proc.returncode == 0, proc.stderr

    def killed(*args):  # the run's partial is kept, as a killed run leaves it
        raise OtherRunsPartial("killed")
    monkeypatch.setattr(pipelines._command, "finish_store", killed)
    monkeypatch.chdir(shared)
    assert run_main(capfd, "mst", "a.asc", "-o", "k.zarr")[0] == 2
    [partial] = [p for p in os.listdir(shared) if p.startswith(".k.zarr.partial-")]
    (shared / ".k.zarr.lock").touch()
    other = shared / ".k.zarr.partial-0123456789abcdef"
    other.mkdir()
    (other / "zarr.json").write_text("{}")
    for name in (".k.zarr.lock", partial, other.name):
        _chown_tree(shared / name, 65534)

    def terrain(*argv):
        return subprocess.run([*prefix, sys.executable, "-m", "terrain.run", *argv, *SYNC],
                              cwd=shared, env=child_env(), capture_output=True, text=True)

    before = snapshot(shared)
    proc = terrain("mst", "a.asc", "-o", "k.zarr")
    assert_one_line_error(proc, f"terrain: {shared}/.k.zarr.lock: the lock of a run of "
                                "another user (nobody), left where this user may not take it "
                                "(Permission denied)")
    assert snapshot(shared) == before
    (shared / ".k.zarr.lock").unlink()  # by that user
    proc = terrain("mst", "a.asc", "-o", "k.zarr")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"terrain: {partial}: left by an interrupted run of another user (nobody), where "
        "this run writes, cannot be removed (Permission denied); nothing written")
    shutil_rmtree = __import__("shutil").rmtree
    shutil_rmtree(shared / partial)  # by that user: the run goes on, the other partial kept
    proc = terrain("mst", "a.asc", "-o", "k.zarr")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == (
        f"terrain: {other.name}: left by an interrupted run of another user (nobody), cannot "
        "be removed (Permission denied); kept")
    assert other.is_dir() and (shared / "k.zarr" / "zarr.json").is_file()


def _longest_name(folder):
    """The longest file name the file system holding ``folder`` takes (the kernel is the
    oracle: a file of that name is made and removed, one byte more is refused)."""
    most = os.pathconf(folder, "PC_NAME_MAX")
    probe = folder / ("n" * most)
    probe.touch()
    probe.unlink()
    with pytest.raises(OSError):
        (folder / ("n" * (most + 1))).touch()
    return most


@pytest.mark.parametrize("argv", [
    ["mst", "g.asc", "-o", "NAME"],
    ["ingest", "g.asc", "-o", "NAME"],
    ["bfs", "e.txt", "--source", "0", "--out", "NAME"],
    ["synth", "--rows", "3", "--cols", "4", "-o", "NAME"],
])
def test_an_output_name_with_no_room_for_its_partial_is_one_line(home, argv):
    """An output named with as many bytes as the file system takes (or a default name grown
    past it: ``LONG.asc`` -> ``LONG.mst.zarr``) left no room for ``.NAME.partial-KEY``
    beside it: ``OSError: [Errno 36] File name too long`` traceback from the first look at
    the output, or ``FOLDER: cannot write there (File name too long)`` blaming the folder.
    Now one line naming the output, nothing written; the longest name that leaves room is
    written."""
    w = home / "w"
    most = _longest_name(w)
    room = len(".") + len(".partial-") + 16  # what the partial's name adds to the output's
    suffix = {"bfs": ".npy", "synth": ".asc"}.get(argv[0], ".zarr")
    too_long = "o" * (most - len(suffix)) + suffix
    before = snapshot(home)
    proc = run_terrain(*[a.replace("NAME", too_long) for a in argv], *(
        SYNC if argv[0] in ("mst", "ingest") else ()), cwd=w)
    assert_one_line_error(proc, f"terrain: {too_long}: name too long")
    assert snapshot(home) == before
    longest = "o" * (most - room - len(suffix)) + suffix
    proc = run_terrain(*[a.replace("NAME", longest) for a in argv], *(
        SYNC if argv[0] in ("mst", "ingest") else ()), cwd=w)
    assert proc.returncode == 0, proc.stderr
    assert (w / longest).exists()


def test_a_default_output_name_grown_too_long_is_one_line(home):
    """``mst LONG.asc`` names its output ``LONG.mst.zarr``: an input name the file system
    takes can give an output name it does not."""
    w = home / "w"
    most = _longest_name(w)
    dem = "d" * (most - len(".asc")) + ".asc"
    os.replace(w / "g.asc", w / dem)
    before = snapshot(home)
    proc = run_terrain("mst", dem, *SYNC, cwd=w)
    assert_one_line_error(proc, f"terrain: {dem[:-4]}.mst.zarr: name too long")
    assert snapshot(home) == before
