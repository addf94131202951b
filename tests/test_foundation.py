"""Backend switch, atomic outputs, Morton codes, the CLI's usage errors."""

import errno
import importlib
import os
import signal
import subprocess
import sys
import warnings

import numpy as np
import pytest

from backends import assert_backends_identical, assert_identical
from cli import child_env
from terrain.io.outputs import atomic_output
from terrain.backend import count_nonzero, get_backend, gpu_available, nanmax
from terrain.errors import InputError
from terrain.tiles import morton_encode, morton_order


def test_cpu_backend_is_numpy():
    assert get_backend("cpu").xp is np
    assert get_backend("CPU").name == "cpu"


def test_auto_backend_matches_device_presence(monkeypatch):
    monkeypatch.delenv("TERRAIN_BACKEND", raising=False)
    assert get_backend().name == ("gpu" if gpu_available() else "cpu")


def test_env_var_chooses_backend(monkeypatch):
    monkeypatch.setenv("TERRAIN_BACKEND", "cpu")
    assert get_backend().name == "cpu"
    monkeypatch.setenv("TERRAIN_BACKEND", "tpu")
    with pytest.raises(InputError, match="TERRAIN_BACKEND: unknown backend 'tpu'"):
        get_backend()


def test_auto_keeps_small_work_on_the_cpu_without_asking_for_a_device(monkeypatch):
    """``auto`` with a small job takes the CPU and never loads CuPy; a large one, or an
    explicit choice, is resolved as before."""
    import terrain.backend as tb
    monkeypatch.delenv("TERRAIN_BACKEND", raising=False)
    asked = []
    monkeypatch.setattr(tb, "_cupy", lambda: asked.append(1))  # "no device", and counted
    assert get_backend("auto", work=tb.GPU_MIN_WORK - 1).name == "cpu"
    assert get_backend(None, work=10).name == "cpu" and not asked
    assert get_backend("auto", work=tb.GPU_MIN_WORK).name == "cpu" and asked
    monkeypatch.setenv("TERRAIN_BACKEND", "gpu")
    with pytest.raises(InputError):
        get_backend(None, work=10)  # TERRAIN_BACKEND=gpu is a choice, not auto


def test_gpu_backend_without_device_is_an_input_error():
    if gpu_available():
        pytest.skip("a GPU is present")
    with pytest.raises(InputError, match="gpu backend"):
        get_backend("gpu")


@pytest.mark.gpu
def test_harness_compares_backends():
    got = assert_backends_identical(lambda b: b.to_numpy(b.xp.arange(10, dtype=np.int32) * 3))
    assert got.tolist() == list(range(0, 30, 3))


@pytest.mark.gpu
def test_gpu_asarray_through_the_pinned_ring():
    """A NumPy array beyond a megabyte goes up through the pinned ring: the same values,
    dtype and C layout as CuPy's copy, for a strided view too; a dtype change is CuPy's."""
    be = get_backend("gpu")
    rng = np.random.default_rng(0)
    big = rng.random((700, 900)).astype(np.float32)   # 2.5 MB
    flags = rng.random((1500, 1500)) < 0.5             # bool, 2.25 MB
    long = rng.uniform(0, 1, 40_000_003).astype(np.float32)  # 160 MB: many pieces, a tail
    long[::7] = np.nan
    ints = np.arange(-5, 3_000_000, dtype=np.int32).reshape(-1, 5)
    for a in (big, big[::2, 1:], big.T, flags, big[:3], long, ints):
        got = be.asarray(a)
        assert got.dtype == a.dtype and got.shape == a.shape and got.flags.c_contiguous
        np.testing.assert_array_equal(got.get(), a)
    wide = be.asarray(big, np.float64)
    assert wide.dtype == np.float64 and (wide.get() == big).all()


def test_counts_and_maxima_on_the_host():
    a = np.array([[1.0, np.nan, 3.0], [np.nan] * 3])
    assert nanmax(a) == 3.0 and count_nonzero(a == 1.0) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an all-NaN grid is NaN, not a warning
        assert np.isnan(nanmax(a[1:])) and np.isnan(nanmax(a[:0]))


@pytest.mark.gpu
def test_gpu_counts_and_maxima_as_numpy():
    """``count_nonzero`` and ``nanmax`` on the device (rows first) give NumPy's, for views
    of padded grids, all-NaN rows, an all-NaN grid and an empty one."""
    be = get_backend("gpu")
    rng = np.random.default_rng(1)
    a = rng.random((300, 400))
    a[rng.random(a.shape) < 0.3] = np.nan
    a[5] = np.nan
    d = be.asarray(a)
    for host, dev in ((a, d), (a[2:-2, 3:-1], d[2:-2, 3:-1]), (a[::3], d[::3])):
        assert nanmax(dev) == np.nanmax(host)
        assert count_nonzero(dev > 0.5) == np.count_nonzero(host > 0.5)
        assert count_nonzero(dev.ravel() > 0.5) == np.count_nonzero(host > 0.5)
    assert np.isnan(nanmax(be.xp.full((3, 4), np.nan))) and np.isnan(nanmax(d[:0]))
    assert count_nonzero(d[:0]) == 0


def test_assert_identical_catches_differences():
    assert_identical({"a": np.array([1.0, np.nan])}, {"a": np.array([1.0, np.nan])})
    with pytest.raises(AssertionError):
        assert_identical(np.array([1, 2], np.int32), np.array([1, 2], np.int64))
    with pytest.raises(AssertionError):
        assert_identical((1, np.array([0.0])), (1, np.array([-1e-30])))


def test_morton_roundtrip_and_order():
    rng = np.random.default_rng(0)
    r, c = rng.integers(0, 2**20, 1000), rng.integers(0, 2**20, 1000)
    bits = [sum(((int(a) >> b & 1) << 2 * b) | ((int(d) >> b & 1) << 2 * b + 1)
                for b in range(20)) for a, d in zip(r, c)]  # row bits even, column bits odd
    assert morton_encode(r, c).tolist() == bits
    order = morton_order(4, 4)
    # the four children of each 2x2 quadrant are consecutive
    for q in range(4):
        block = order[4 * q: 4 * q + 4]
        assert len({(int(a) // 2, int(b) // 2) for a, b in block}) == 1


def test_atomic_output_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.zarr"
    with pytest.raises(RuntimeError):
        with atomic_output(target) as tmp:
            tmp.mkdir()
            (tmp / "x").write_text("half")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    with atomic_output(target) as tmp:
        tmp.write_text("done")
    assert target.read_text() == "done"
    with pytest.raises(InputError, match="output exists"):
        with atomic_output(target):
            pass
    with atomic_output(target, overwrite=True) as tmp:
        tmp.write_text("again")
    assert target.read_text() == "again"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.zarr"]



def test_an_output_that_used_up_the_open_files_leaves_nothing(tmp_path):
    """A run whose descriptors ran out (``ulimit -n``) while it wrote a store: removing the
    partial, four folders deep, needs descriptors too, and left it whole."""
    code = """if True:
        import os, resource, sys
        from terrain.io.outputs import atomic_output
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        held = []
        try:
            with atomic_output("out.zarr") as tmp:
                for layer in ("a", "b"):
                    os.makedirs(tmp / layer / "c" / "0")
                    (tmp / layer / "c" / "0" / "0").write_bytes(b"shard")
                while True:  # every descriptor taken, as a run's files, threads and locks do
                    held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError as e:
            print(e.strerror)
        print(sorted(os.listdir(".")))
    """
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=child_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [os.strerror(errno.EMFILE), "[]"]


def test_a_resumed_output_says_it_resumes_only_a_partial_with_finished_steps(tmp_path):
    """A run killed before its first step's end leaves a partial without checkpoints: a
    resumed run starts over there, and says so, not that it resumes it."""
    import shutil

    from terrain.io.outputs import CHECKPOINT_DIR, partial_path
    target = tmp_path / "out.zarr"
    for steps, said in ((0, "removed"), (1, "resuming from")):
        partial = partial_path(target, "k1")
        (partial / CHECKPOINT_DIR).mkdir(parents=True)
        for i in range(steps):
            (partial / CHECKPOINT_DIR / f"step{i}.npz").write_bytes(b"")
        notices = []
        with atomic_output(target, key="k1", resume=True, notify=notices.append) as tmp:
            assert (tmp / CHECKPOINT_DIR).is_dir() == bool(steps)
            tmp.mkdir(exist_ok=True)
            (tmp / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
        assert notices == [f"{said} {partial}, left by an interrupted run"]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.zarr"]
        shutil.rmtree(target)

@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_a_callback_from_c_dropped_publishes_nothing(tmp_path, signum):
    """A signal whose exception is raised inside a callback from C (Numba's compiler calls
    back through ctypes) is printed and dropped there, and the work goes on: the output is
    not put in place, the stop is raised instead (the command line then exits 143 / 130)."""
    import ctypes

    from terrain.startup import Terminated, terminate_raises
    callback = ctypes.CFUNCTYPE(None)(lambda: signal.raise_signal(signum))
    target = tmp_path / "out.txt"
    with terminate_raises():
        with pytest.raises(Terminated if signum == signal.SIGTERM else KeyboardInterrupt):
            with atomic_output(target) as tmp:
                tmp.write_text("half")
                callback()  # the handler's exception is dropped inside the callback
                tmp.write_text("done, as far as this code knows")
    assert list(tmp_path.iterdir()) == []
    with terminate_raises(), atomic_output(target) as tmp:  # a new command: no stop
        tmp.write_text("done")
    assert target.read_text() == "done"


@pytest.mark.parametrize("argv, message", [
    (["mst", "x.asc", "--backend", "quantum"], "unknown backend 'quantum'"),
    (["ingest", "x.asc", "-o", "y.zarr", "--tile", "300"], "300 is not a power of two"),
    (["mst", "x.asc", "--connectivity", "6"], "invalid choice: 6"),
    (["mst", "x.asc", "--weight", "heaviest"], "invalid choice: 'heaviest'"),
])
def test_usage_errors_are_one_line_exit_2(argv, message):
    proc = subprocess.run([sys.executable, "-m", "terrain.run", *argv], capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("package", ["terrain", "terrain.grid", "terrain.graph",
                                     "terrain.hydrology", "terrain.tiles", "terrain.io",
                                     "pipelines"])
def test_every_name_a_stub_exports_exists(package):
    """The lazy packages' stubs (``__init__.pyi``) name only what their modules define: a
    name left there by a removal would import fine and fail on first use."""
    mod = importlib.import_module(package)
    assert [name for name in mod.__all__ if not hasattr(mod, name)] == []


def test_the_cpu_device_counts_the_cpus_the_process_may_use():
    """The summary's ``device`` said the machine's cores under ``taskset -c 0``, where the
    kernels run on one."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here")
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
            "from terrain.backend import get_backend; print(get_backend('cpu').device_name())")
    proc = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip().endswith(" x1"), proc
