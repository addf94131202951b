"""terrain.native: the C kernels' library is built by the install or compiled on first use into a
cache, never used when built from another source, and a missing compiler is a clear error."""

import numpy as np
import pytest

import terrain.io._parse as parse
import terrain.native as native


@pytest.fixture
def no_library(monkeypatch, tmp_path):
    """No library loaded, none built, one empty cache directory."""
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_built_library", lambda: None)
    monkeypatch.setattr(native, "_cache_dirs", lambda: [tmp_path / "cache"])
    return tmp_path / "cache"


def test_library_compiles_on_first_use_into_the_cache(no_library):
    lib = native.load_library()
    files = sorted(p.name for p in no_library.iterdir())
    assert files == [f"_kernels-{native.source_tag()}{native.importlib.machinery.EXTENSION_SUFFIXES[0]}"]
    assert lib.terrain_parse_source().decode() == native.source_tag()
    out = np.empty((1, 2), np.float32)
    parse.parse_rows(np.frombuffer(b"0.1 7e-3\n", np.uint8), [0, 9], 2, out, np.float32(0),
                     False, False)
    assert out.tolist() == [[np.float32(0.1), np.float32(7e-3)]]


def test_a_library_built_from_another_source_is_not_used(no_library, monkeypatch, tmp_path):
    stale = native.compile_library(tmp_path / "stale.so", "0123456789abcdef")
    monkeypatch.setattr(native, "_built_library", lambda: stale)
    lib = native.load_library()
    assert lib.terrain_parse_source().decode() == native.source_tag()
    assert len(list(no_library.iterdir())) == 1  # compiled afresh, beside nothing half-written


def test_no_compiler_is_an_input_error_and_a_failed_one_a_runtime_error(no_library,
                                                                       monkeypatch):
    from terrain.errors import InputError
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(native.shutil, "which", lambda name: None)
    with pytest.raises(InputError, match="no C compiler was found"):
        native.load_library()
    monkeypatch.setenv("CC", str(no_library / "no-such-cc"))
    with pytest.raises(RuntimeError, match="compiling terrain's C kernels failed"):
        native.load_library()
    assert not any(no_library.iterdir())


def test_a_signal_while_the_kernel_thread_starts_waits_for_the_kernel(monkeypatch):
    """Ctrl-C landing in ``Thread.start`` (the thread runs all the same) still stops the
    kernel and waits for it before raising: its arrays must outlive it."""
    import threading
    import time

    real_start = threading.Thread.start

    def start_then_signal(self):
        real_start(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start_then_signal)
    ran = []

    def kernel(stop):
        time.sleep(0.2)
        ran.append(int(stop[0]))

    with pytest.raises(KeyboardInterrupt):
        native.interruptible(kernel)
    assert ran == [1]  # returned, told to stop, before interruptible raised


def test_the_shared_temp_folder_is_used_only_as_this_users_own(monkeypatch, tmp_path):
    """The last-resort cache /tmp/terrain-UID: another user may create it first (or make it
    writable to all, or a link) and put a library there that this process would load."""
    import os

    monkeypatch.setattr(native.tempfile, "gettempdir", lambda: str(tmp_path))
    shared = tmp_path / f"terrain-{os.getuid()}"
    assert native._cache_dirs()[-1] == shared
    assert native._not_usable(shared, make=True) is None  # made here, 0700
    assert shared.stat().st_mode & 0o777 == 0o700
    shared.chmod(0o777)
    assert native._not_usable(shared, make=True) is not None
    shared.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    shared.symlink_to(tmp_path / "elsewhere")
    assert native._not_usable(shared, make=True) is not None
    shared.unlink()
    if os.getuid() == 0:  # another owner
        shared.mkdir(mode=0o700)
        os.chown(shared, 65534, 65534)
        assert native._not_usable(shared, make=True) is not None


def test_a_table_made_where_a_freed_one_was_gets_its_kernels_declared(monkeypatch):
    """Kernels were declared once per table ``id``: a table made after another was freed may
    take its ``id``, and its kernels went undeclared (64-bit arguments passed as C ints: a
    pointer cut to 32 bits, a crash now and then: verify's certificates crashed the
    watershed's kernel so). Every table here shares one ``id``, as such tables do."""
    import ctypes

    lib = native.load_library()
    monkeypatch.setitem(vars(lib), "_terrain_declared", set())
    kernel = lib.terrain_lf_count
    monkeypatch.setattr(kernel, "argtypes", None)
    monkeypatch.setattr(kernel, "restype", ctypes.c_int)
    monkeypatch.setattr(native, "id", lambda table: 1, raising=False)
    native.declared({"terrain_free": (None, [ctypes.c_void_p])})
    native.declared({"terrain_lf_count": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_int64])})
    assert list(kernel.argtypes) == [ctypes.c_void_p, ctypes.c_int64]
    assert kernel.restype is ctypes.c_int64


def test_a_stopping_run_stops_its_task_threads_and_no_other_thread():
    """A run that stops sets its tasks' flag while it waits for them: a library call in a
    thread of the caller's own (a web server's worker, part of no run) polled that flag too
    and raised Stopped, a BaseException that ``except Exception`` lets through. It finishes
    with scipy's distances; the same call in a thread of the run's task pool still stops."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import scipy.sparse as sp
    from scipy.sparse.csgraph import dijkstra

    from terrain.graph import as_graph
    from terrain.graph.shortest_paths import sssp

    n = 200_000  # the search polls the flag every 65536 vertices it takes
    w = np.random.default_rng(0).uniform(0.5, 2.0, n - 1)
    a = sp.coo_matrix((w, (np.arange(n - 1), np.arange(1, n))), shape=(n, n))
    g = as_graph(a, directed=True)
    expected = dijkstra(a.tocsr(), indices=0)

    def search():
        return sssp(g, 0, algorithm="dijkstra", backend="cpu").dist

    run = native.TaskStop()
    tasks = ThreadPoolExecutor(1, initializer=run.mark)
    outcome = []

    def caller():
        try:
            outcome.append(search())
        except BaseException as e:  # noqa: BLE001 - what the call raised, checked below
            outcome.append(e)

    try:
        with run.stopped():
            user = threading.Thread(target=caller)
            user.start()
            user.join()
            native.check_stopped()  # the test's own thread is none of the run's either
            with pytest.raises(native.Stopped):
                tasks.submit(search).result()
    finally:
        tasks.shutdown()
    assert isinstance(outcome[0], np.ndarray), outcome
    np.testing.assert_allclose(outcome[0], expected, rtol=1e-12)


# -- the first-use compile in a process of its own: a copy of the package without its built
# library (an install's or a checkout's alike), caches and HOME in the test's folder, and a
# stand-in compiler (``CC``) that takes a moment instead of cc's ~8 CPU seconds

def _package_copy(site):
    """The imported terrain and pipelines (wherever they are installed) copied into ``site``
    without the library ``pip install .`` built and without bytecode."""
    import shutil
    from pathlib import Path

    import pipelines
    for package in (Path(native.__file__).parents[1], Path(pipelines.__file__).parent):
        shutil.copytree(package, site / package.name,
                        ignore=shutil.ignore_patterns("__pycache__", f"{native.BUILT_NAME}*"))
    return site


def _first_use_env(tmp_path, cc):
    """The environment of a child that must compile the kernels with ``cc``: the package's
    copy first on its path, every cache folder under ``tmp_path`` (none holds a library)."""
    import os

    from cli import child_env
    site = tmp_path / "site"
    if not site.exists():
        _package_copy(site)
    env = child_env(TERRAIN_CACHE_DIR=str(tmp_path / "cache"),
                    XDG_CACHE_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path / "home"),
                    TMPDIR=str(tmp_path / "tmp"), CC=str(cc), PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return env


def _cached_name():
    """The file name of the library compiled on first use into a cache folder."""
    suffix = native.importlib.machinery.EXTENSION_SUFFIXES[0]
    return f"{native.BUILT_NAME}-{native.source_tag()}{suffix}"


def _stand_in(path, script):
    path.write_text("#!/bin/sh\n# a C compiler's stand-in: the output follows -o\n"
                    'while [ "$1" != "-o" ]; do shift; done\nout=$2\n' + script)
    path.chmod(0o755)
    return path


def _copies_the_library(path, delay=0.0):
    """A stand-in that writes the library this process loaded (built from the same
    kernels.c), half of it first, the rest after ``delay`` seconds."""
    built = native.load_library()._name
    return _stand_in(path, f'head -c 4096 "{built}" > "$out"\nsleep {delay}\n'
                           f'cat "{built}" > "$out"\n')


def _group_alive(pgid):
    """Whether a process of the group ``pgid`` is still running (zombies aside)."""
    from pathlib import Path

    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


@pytest.mark.parametrize("signum, said, status", [
    ("SIGINT", "terrain: interrupted", 130), ("SIGTERM", "terrain: terminated", 143)])
def test_a_signal_during_the_first_use_compile_leaves_nothing_behind(tmp_path, signum, said,
                                                                     status):
    """Ctrl-C or SIGTERM while the kernels compile on first use: the partial library
    (``._kernels-....so.PID....tmp``) was left in the cache folder, and the compiler's
    children (killed with the driver only, if at all) went on writing it. The command ends at
    once with its one line; the compiler's whole process group is gone, the partial with it;
    the next run compiles afresh."""
    import signal
    import subprocess
    import sys
    import time

    started = tmp_path / "started"
    # as ld does, a child of the driver writes the output late
    cc = _stand_in(tmp_path / "slow-cc", f'echo partial > "$out"\n'
                                         f'(sleep 1; echo late >> "$out") &\n'
                                         f'cut -d" " -f5 /proc/$$/stat > "{started}"\nsleep 60\n')
    (tmp_path / "g.txt").write_text("0 1\n1 2\n")
    argv = [sys.executable, "-m", "terrain.run", "bfs", "g.txt", "--source", "0"]
    env = _first_use_env(tmp_path, cc)
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (started.is_file() and started.read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(getattr(signal, signum))
        t0 = time.monotonic()
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert time.monotonic() - t0 < 5
    assert (proc.returncode, err.strip()) == (status, said)
    assert not _group_alive(int(started.read_text()))
    time.sleep(1.5)  # past the child's late write, had it lived
    assert list((tmp_path / "cache").iterdir()) == []
    site_files = sorted((tmp_path / "site").rglob("*"))

    env["CC"] = str(_copies_the_library(tmp_path / "cc"))
    again = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    name = _cached_name()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [name]
    assert sorted((tmp_path / "site").rglob("*")) == site_files  # the package not written


def test_processes_compiling_at_once_each_end_with_a_whole_library(tmp_path):
    """Two processes that find no library compile it at once, each into its own temporary
    file renamed into place: both load a whole library and run a kernel, and the cache holds
    the one library and nothing half-written."""
    import subprocess
    import sys

    starts = tmp_path / "starts"
    starts.mkdir()
    built = native.load_library()._name
    # each waits until both compilers have started: the two compiles overlap
    cc = _stand_in(tmp_path / "cc", f'touch "{starts}/$$"\n'
                                    f'for i in $(seq 100); do [ $(ls "{starts}" | wc -l) -ge 2 ]'
                                    f' && break; sleep 0.1; done\n'
                                    f'head -c 4096 "{built}" > "$out"\nsleep 0.3\n'
                                    f'cat "{built}" > "$out"\n')
    env = _first_use_env(tmp_path, cc)
    code = ("import numpy as np, terrain.io._parse as parse\n"
            "out = np.empty((1, 2), np.float32)\n"
            "parse.parse_rows(np.frombuffer(b'0.1 7e-3\\n', np.uint8), [0, 9], 2, out,"
            " np.float32(0), False, False)\n"
            "print(out.tolist())\n")
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results):
        assert p.returncode == 0, err
        assert out.strip() == str([[float(np.float32(0.1)), float(np.float32(7e-3))]])
    assert len(list(starts.iterdir())) == 2  # both compiled
    name = _cached_name()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [name]


def test_the_cache_is_the_first_writable_of_its_folders(tmp_path):
    """$TERRAIN_CACHE_DIR, else $XDG_CACHE_HOME/terrain (or ~/.cache/terrain), else
    TMPDIR's terrain-UID: a folder that cannot be written is passed over for the next; never
    the package's folder."""
    import os
    import subprocess
    import sys

    blocked = tmp_path / "a-file"  # no folder can be made under it, even by root
    blocked.write_text("")
    cc = _copies_the_library(tmp_path / "cc")
    env = _first_use_env(tmp_path, cc)
    code = "import terrain.native as n; print(n.load_library()._name)"
    name = _cached_name()
    for cache, xdg, where in [
            ("cache", "xdg", tmp_path / "cache"),
            (blocked / "cache", "xdg", tmp_path / "xdg" / "terrain"),
            (blocked / "cache", blocked / "xdg", tmp_path / "tmp" / f"terrain-{os.getuid()}")]:
        env.update(TERRAIN_CACHE_DIR=str(tmp_path / cache), XDG_CACHE_HOME=str(tmp_path / xdg))
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == str(where / name)
    env.pop("XDG_CACHE_HOME")
    env["HOME"] = str(tmp_path / "home")
    (tmp_path / "tmp" / f"terrain-{os.getuid()}" / name).unlink()
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.stdout.strip() == str(tmp_path / "home" / ".cache" / "terrain" / name)
    assert not list((tmp_path / "site").rglob(f"*{native.BUILT_NAME}*"))


def test_no_writable_cache_folder_is_one_line_naming_each(tmp_path):
    """No folder the library could be compiled into: a traceback ending in the last folder's
    error; now one line naming each folder tried and why, exit 2."""
    import os
    import subprocess
    import sys

    from cli import assert_one_line_error

    blocked = tmp_path / "a-file"
    blocked.write_text("")
    env = _first_use_env(tmp_path, _copies_the_library(tmp_path / "cc"))
    env.update(TERRAIN_CACHE_DIR=str(blocked / "cache"), XDG_CACHE_HOME=str(blocked / "xdg"))
    (tmp_path / "tmp" / f"terrain-{os.getuid()}").write_text("")  # not a folder
    (tmp_path / "g.txt").write_text("0 1\n1 2\n")
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "bfs", "g.txt", "--source", "0"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert_one_line_error(proc, "no cache folder can be written")
    for folder in (blocked / "cache", blocked / "xdg" / "terrain",
                   tmp_path / "tmp" / f"terrain-{os.getuid()}"):
        assert str(folder) in proc.stderr
    assert "TERRAIN_CACHE_DIR" in proc.stderr


def test_a_stopping_run_stops_a_compile_in_its_task_thread(tmp_path):
    """A run's task thread, which no signal reaches, compiling the kernels on first use: the
    run that stops (its flag set, :meth:`TaskStop.stopped`) waited for the whole compile.
    The task now raises Stopped within moments, the compiler's group killed, nothing left."""
    import threading
    import time

    started = tmp_path / "started"
    cc = _stand_in(tmp_path / "slow-cc", f'echo partial > "$out"\n'
                                         f'cut -d" " -f5 /proc/$$/stat > "{started}"\n'
                                         f'sleep 60\n')
    folder = tmp_path / "cache"
    folder.mkdir()
    stop, raised = native.TaskStop(), []

    def task():
        stop.mark()
        try:
            native.compile_library(folder / "k.so", native.source_tag(), compiler=str(cc))
        except BaseException as e:  # noqa: BLE001 - what the task raised is the result
            raised.append(e)

    thread = threading.Thread(target=task)
    thread.start()
    deadline = time.monotonic() + 30
    while not (started.is_file() and started.read_text().strip()):
        assert thread.is_alive() and time.monotonic() < deadline
        time.sleep(0.05)
    with stop.stopped():
        thread.join(timeout=5)
    assert not thread.is_alive()
    assert [type(e) for e in raised] == [native.Stopped]
    assert not _group_alive(int(started.read_text()))
    assert list(folder.iterdir()) == []


def test_no_compiler_on_first_use_is_one_line(tmp_path):
    """A machine without a C compiler and an install without the built library: a
    RuntimeError traceback; now one line saying what to install, exit 2."""
    import subprocess
    import sys

    from cli import assert_one_line_error

    env = _first_use_env(tmp_path, tmp_path / "no-such-cc")
    del env["CC"]
    env["PATH"] = str(tmp_path / "empty")   # no cc, gcc or clang on it
    (tmp_path / "g.txt").write_text("0 1\n1 2\n")
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "bfs", "g.txt", "--source", "0"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert_one_line_error(proc, "no C compiler was found")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
