"""Shared test set-up: the ``gpu`` marker skips without a GPU; helpers live in tests/backends.py."""

import os
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from terrain.backend import gpu_available  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and CuPy")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def backend(request):
    """Each test using this fixture runs on the CPU and, where there is one, on the GPU."""
    from terrain.backend import get_backend
    return get_backend(request.param)


@pytest.fixture
def small_shards(monkeypatch):
    import terrain.tiles.store as store
    monkeypatch.setattr(store, "SHARD_TARGET_SIDE", 16)  # groups = shards of 16 cells


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def s3(tmp_path_factory):
    """A moto S3 server on 127.0.0.1 and a bucket; the storage options that reach it."""
    pytest.importorskip("moto.server")
    pytest.importorskip("s3fs")
    port = _free_port()
    cwd = tmp_path_factory.mktemp("moto")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    pytest.skip("moto server did not start")
                time.sleep(0.2)
        options = {"endpoint_url": f"http://127.0.0.1:{port}", "key": "test", "secret": "test",
                   "client_kwargs": {"region_name": "us-west-2"}}
        import s3fs
        s3fs.S3FileSystem.clear_instance_cache()
        s3fs.S3FileSystem(**options).mkdir("terrain-test")
        yield options
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def stops_on_interrupt():
    """``check(call)``: Ctrl-C reaches a C kernel that ``terrain.native.interruptible`` runs.
    ``call`` runs up to 20 times while a timer sends SIGINT 0.3 s after the kernel's thread
    appears (else after 2 s); that thread must appear, and the KeyboardInterrupt must come
    within 1.5 s of the signal, not after the whole run."""
    import signal
    import threading

    def check(call):
        fired, seen, done = [], [], threading.Event()

        def interrupt():
            t0 = time.perf_counter()
            while not done.is_set() and time.perf_counter() - t0 < 2 and not seen:
                if any(t.name == "terrain-kernel" for t in threading.enumerate()):
                    seen.append(True)
                time.sleep(0.01)
            if not done.wait(0.3):
                fired.append(time.perf_counter())
                os.kill(os.getpid(), signal.SIGINT)

        # a run started in the background by a non-interactive shell inherits SIGINT
        # ignored; a terminal's user has Python's handler, which is what this is about
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        timer = threading.Thread(target=interrupt)
        timer.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                for _ in range(20):
                    call()
        finally:
            done.set()
            timer.join()
            signal.signal(signal.SIGINT, previous)
        assert seen, "no kernel ran on terrain.native.interruptible's thread"
        assert fired and time.perf_counter() - fired[0] < 1.5

    return check


@pytest.fixture
def stopped_in_a_task():
    """``check(call)``: ``call()`` runs as a task of a stopping run does (a thread of the run's
    task threads, its stop flag set: :meth:`terrain.native.TaskStop.stopped`) and must raise
    :class:`terrain.native.Stopped`: the kernels it runs go through
    :func:`terrain.native.interruptible`, which hands them the flag and raises after them.
    A call that finishes without it ran its kernels past the stop."""
    import threading

    from terrain import native

    def check(call):
        raised = []
        run = native.TaskStop()

        def task():
            run.mark()
            try:
                call()
            except BaseException as e:  # noqa: BLE001 - what the task raised, checked below
                raised.append(e)

        with run.stopped():
            t = threading.Thread(target=task)
            t.start()
            t.join()
        assert raised and isinstance(raised[0], native.Stopped), raised

    return check
