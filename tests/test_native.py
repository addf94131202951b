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


def test_no_compiler_is_a_clear_runtime_error(no_library, monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(native.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="no C compiler was found"):
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
    monkeypatch.delenv("TERRAIN_CACHE_DIR", raising=False)
    shared = tmp_path / f"terrain-{os.getuid()}"
    assert native._cache_dirs()[-1] == shared  # made here, 0700
    assert shared.stat().st_mode & 0o777 == 0o700
    shared.chmod(0o777)
    assert shared not in native._cache_dirs()
    shared.rmdir()
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    shared.symlink_to(tmp_path / "elsewhere")
    assert shared not in native._cache_dirs()
    shared.unlink()
    if os.getuid() == 0:  # another owner
        shared.mkdir(mode=0o700)
        os.chown(shared, 65534, 65534)
        assert shared not in native._cache_dirs()



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
