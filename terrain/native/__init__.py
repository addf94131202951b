"""terrain's C kernels (``kernels.c``): one shared library, loaded with ctypes.

Plain C99 with no Python API: the ASCII grid parser's kernels (:mod:`terrain.io`) and the
sparse graphs' (:mod:`terrain.graph`). ``pip install .`` compiles it into the package; a
checkout without that build compiles it on first use into a cache (:func:`load_library`).
ctypes releases the GIL around each call. C rather than Numba: a Numba kernel costs every
process more start-up than a small command's whole work (docs/architecture.md, "Design
notes").
"""

import contextlib
import ctypes
import functools
import hashlib
import importlib.machinery
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

__all__ = ["load_library", "declared", "address", "threads", "interruptible", "in_strips",
           "Stopped", "TaskStop", "task_stop", "check_stopped", "compile_library",
           "source_tag", "SOURCE", "CFLAGS", "BUILT_NAME", "PARALLEL_MIN", "parallel_kernel"]

#: the C source, and the flags it is compiled with (here and by setup.py): IEEE doubles kept
#: (no fused multiply-add, no fast-math)
SOURCE = Path(__file__).with_name("kernels.c")
CFLAGS = ("-std=c99", "-O3", "-ffp-contract=off", "-fno-fast-math", "-fPIC", "-shared")
#: module name of the library setup.py builds into the package (loaded by path, not imported)
BUILT_NAME = "_kernels"

_lib = None
_lib_lock = threading.Lock()
#: ``stop``: in a thread that runs a run's tasks, that run's flag (:class:`TaskStop`)
_task_thread = threading.local()

#: below this much work (bytes, edges, arcs, cells) a kernel runs on the calling thread: a
#: pool costs more than it shares
PARALLEL_MIN = 1 << 20


def address(a):
    """The address of a C-contiguous NumPy array's data, a kernel's pointer argument; None
    (ctypes' null pointer) for None, an array the kernel goes without.

    >>> address(None) is None
    True
    """
    return None if a is None else a.ctypes.data


def threads(work=None):
    """The CPUs this process may use (``taskset`` honoured) to run kernels on (ctypes
    releases the GIL); 1 below :data:`PARALLEL_MIN` of ``work``."""
    if work is not None and work < PARALLEL_MIN:
        return 1
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def source_tag():
    """A digest of ``kernels.c`` and :data:`CFLAGS`: a library built from anything else is
    stale. The library reports the tag it was built with (``terrain_parse_source``)."""
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(" ".join(CFLAGS).encode())
    return h.hexdigest()[:16]


def compile_library(target, tag, compiler=None):
    """Compile ``kernels.c`` into the shared library ``target``, atomically (written beside
    it, then renamed). ``compiler`` defaults to ``$CC``, else ``cc``, ``gcc`` or ``clang``.

    Raises
    ------
    RuntimeError
        No C compiler, or it failed (its message included).
    """
    target = Path(target)
    cc = compiler or os.environ.get("CC") or next(
        (c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if cc is None:
        raise RuntimeError(
            "terrain's C kernels is not built and no C compiler was found to build it "
            "(set CC, install gcc, or install terrain with pip, which builds it)")
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    argv = [*cc.split(), *CFLAGS, f'-DTERRAIN_PARSE_SOURCE="{tag}"', "-o", str(tmp),
            str(SOURCE)]
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        raise RuntimeError(f"compiling terrain's C kernels failed ({' '.join(argv)}): "
                           f"{e}") from None
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"compiling terrain's C kernels failed ({' '.join(argv)}):\n"
                           f"{proc.stdout.strip()[-2000:]}")
    os.replace(tmp, target)
    return target


def _cache_dirs():
    """Where a library compiled on first use goes, in order of preference. The shared temp
    folder's is taken only as this user's own folder that no one else may write: anyone may
    create ``/tmp/terrain-UID`` first and put a library there that this process would load."""
    dirs = [SOURCE.parent / "__pycache__"]
    if os.environ.get("TERRAIN_CACHE_DIR"):
        dirs.append(Path(os.environ["TERRAIN_CACHE_DIR"]))
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    dirs.append(Path(xdg) / "terrain")
    shared = Path(tempfile.gettempdir()) / f"terrain-{os.getuid()}"
    try:
        shared.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(shared)
    except OSError:
        return dirs
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022:
        dirs.append(shared)
    return dirs


def _built_library():
    """The library ``pip install .`` built into the package, if there is one."""
    paths = (SOURCE.with_name(BUILT_NAME + s) for s in importlib.machinery.EXTENSION_SUFFIXES)
    return next((p for p in paths if p.is_file()), None)


def _load(path, tag):
    lib = ctypes.CDLL(str(path))
    lib.terrain_parse_source.restype = ctypes.c_char_p
    if tag is not None and lib.terrain_parse_source().decode() != tag:
        return None  # built from another kernels.c (a checkout edited after its install)
    return lib


def load_library():
    """The shared library, loaded once per process (thread-safe): the one ``pip install .``
    built from this ``kernels.c``, else one compiled earlier into a cache directory (keyed by
    :func:`source_tag`), else one compiled now into the first writable cache directory.

    Raises
    ------
    RuntimeError
        The library must be compiled and cannot be (no compiler, or no writable directory).
    """
    global _lib
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        tag = source_tag() if SOURCE.is_file() else None
        built = _built_library()
        lib = _load(built, tag) if built is not None else None
        if lib is None:
            if tag is None:
                raise RuntimeError(f"terrain's C kernels: neither a built library nor "
                                   f"its source {SOURCE} is there (a broken install?)")
            name = f"_kernels-{tag}{importlib.machinery.EXTENSION_SUFFIXES[0]}"
            cached = next((d / name for d in _cache_dirs() if (d / name).is_file()), None)
            if cached is None:
                errors = []
                for d in _cache_dirs():
                    try:
                        d.mkdir(parents=True, exist_ok=True)
                        cached = compile_library(d / name, tag)
                        break
                    except PermissionError as e:
                        errors.append(f"{d}: {e.strerror}")
                    except OSError as e:
                        errors.append(f"{d}: {e}")
                if cached is None:
                    raise RuntimeError("terrain's C kernels: no writable directory to "
                                       "compile it into (" + "; ".join(errors) + ")")
            lib = _load(cached, tag)
        _lib = lib
    return _lib


def declared(signatures):
    """The library with ``signatures`` (``{name: (restype, argtypes)}``) declared on it: each
    module keeps the signatures of the kernels it calls in one table and calls through this.
    Each kernel is declared once, by its name: a table's ``id`` (how this was keyed) is
    reused by a table made after another was freed, whose kernels then went undeclared and
    took 64-bit arguments as C ints (a pointer cut to 32 bits: a crash now and then)."""
    lib = load_library()
    done = vars(lib).setdefault("_terrain_declared", set())
    if not done.issuperset(signatures):
        with _lib_lock:
            for name, (restype, argtypes) in signatures.items():
                fn = getattr(lib, name)
                fn.restype = restype
                fn.argtypes = argtypes
                done.add(name)
    return lib


def interruptible(kernel, *args):
    """``kernel(*args, stop)``: every C or Numba kernel that polls a stop flag is called
    through here. In the main thread (a command's, or the tasks' of Dask's synchronous
    scheduler) in a thread of its own while this one waits, so Ctrl-C or SIGTERM (handled in
    the main thread, which a kernel would hold for its whole run) sets ``stop`` (a one-byte
    NumPy flag the kernel polls) and the kernel returns within milliseconds; the interruption
    is then raised here. Called from another thread, the kernel runs right there on that
    thread's flag (:func:`task_stop`: its run's in a run's task thread), and :class:`Stopped`
    is raised when that was set."""
    import numpy as np

    if threading.current_thread() is not threading.main_thread():
        # signals reach the main thread only: a task's kernel polls the flag that its
        # stopping run sets while it waits for its tasks (TaskStop.stopped)
        result = kernel(*args, task_stop())
        check_stopped()
        return result
    stop = np.zeros(1, np.uint8)
    result, finished = [], threading.Event()

    def run():
        try:
            result.append(kernel(*args, stop))
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            result.append(e)
        finally:
            finished.set()

    t = threading.Thread(target=run, name="terrain-kernel", daemon=True)
    try:
        t.start()
    except RuntimeError:  # no thread could be started: no kernel runs
        raise
    except BaseException:  # a signal while start() waited for the thread: it runs all the same
        _stop_and_wait(stop, finished)
        raise
    try:
        while not finished.wait(0.05):
            pass
    except BaseException:
        _stop_and_wait(stop, finished)
        raise
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


#: held around the launches of Numba's ``parallel=True`` kernels while the threading layer
#: may take them from one thread at a time: workqueue's aborts the process (SIGABRT,
#: "Concurrent access has been detected") when a second thread launches while one runs,
#: which a run's task threads do; omp's and tbb's take concurrent launches
_one_launch = threading.Lock()
#: the layer's answer once a launch has chosen it: True (one launch at a time), False
_launches_serial = None


def parallel_kernel(kernel):
    """``kernel``, a Numba ``parallel=True`` kernel, safe to launch from several threads at
    once: under Numba's workqueue threading layer (``NUMBA_THREADING_LAYER=workqueue``, or
    the one left where neither TBB nor OpenMP loads) one launch at a time, each on all the
    layer's threads; under the others as they come. A layer Numba cannot load
    (``NUMBA_THREADING_LAYER=tbb`` without TBB) is an :class:`~terrain.errors.InputError`
    naming the variable."""
    @functools.wraps(kernel)
    def launch(*args):
        if _launches_serial is False:
            return kernel(*args)
        with _one_launch:  # the first launch chooses the layer: held until it is known
            return _launch_serial(kernel, args)
    return launch


def _launch_serial(kernel, args):
    global _launches_serial
    import numba
    try:
        result = kernel(*args)
    except ValueError as e:  # raised where Numba loads the layer (compiling, or the cache's)
        if "threading layer" not in str(e):
            raise
        from ..errors import InputError
        layer = os.environ.get("NUMBA_THREADING_LAYER", numba.config.THREADING_LAYER)
        raise InputError(f"NUMBA_THREADING_LAYER={layer}: {' '.join(str(e).split())} "
                         "(unset it for Numba's default layer)") from None
    with contextlib.suppress(ValueError):  # not chosen: none launched yet
        _launches_serial = numba.threading_layer() == "workqueue"
    return result


def in_strips(bounds, work):
    """``work(s, stop)`` for every strip ``s`` of the row ``bounds`` (``[r0, r1, ...]``), a
    thread each (the C passes release the GIL), under one stop flag that Ctrl-C sets
    (:func:`interruptible`); their results in strip order."""
    import concurrent.futures

    k = len(bounds) - 1

    def run(stop):
        if k == 1:
            return [work(0, stop)]
        with concurrent.futures.ThreadPoolExecutor(k) as pool:
            return list(pool.map(lambda s: work(s, stop), range(k)))

    return interruptible(run)


class Stopped(BaseException):
    """A task's kernel returned early because its run is stopping (:meth:`TaskStop.stopped`):
    what it computed is unfinished. A BaseException, as the signal that stopped the run."""


class TaskStop:
    """The stop flag of one run's tasks (a one-byte NumPy array, ``flag``), polled by the
    kernels and loops of the threads that run them and of no other thread: a library call in
    a thread of the caller's own, part of no run, finishes whatever run stops meanwhile.

    Examples
    --------
    >>> from concurrent.futures import ThreadPoolExecutor
    >>> stop = TaskStop()
    >>> pool = ThreadPoolExecutor(2, initializer=stop.mark)
    >>> with stop.stopped():
    ...     pool.submit(lambda: task_stop() is stop.flag).result()
    True
    >>> pool.shutdown()
    """

    def __init__(self):
        import numpy as np
        self.flag = np.zeros(1, np.uint8)

    def mark(self):
        """Make the calling thread one of the run's task threads, whose kernels poll
        ``flag``: the ``initializer`` of the pool that runs the run's tasks."""
        _task_thread.stop = self.flag

    @contextlib.contextmanager
    def stopped(self):
        """Within the block the run's task kernels and loops stop (``flag`` set): a run that
        an error or a signal ends waits for its running tasks here, milliseconds instead of
        their whole blocks; cleared after, for the next run on the same threads (a batch's
        cluster)."""
        self.flag[0] = 1
        try:
            yield
        finally:
            self.flag[0] = 0


def task_stop():
    """The stop flag (a one-byte NumPy array) that this thread's kernels poll, in threads
    that no signal reaches: in a run's task thread (:meth:`TaskStop.mark`) the run's, set
    while it stops; in any other thread one that nothing sets."""
    stop = getattr(_task_thread, "stop", None)
    if stop is None:
        import numpy as np
        stop = np.zeros(1, np.uint8)
    return stop


def check_stopped():
    """Raise :class:`Stopped` when this thread's run is stopping: called by a task after a
    kernel that polls :func:`task_stop` and between the steps of a loop."""
    stop = getattr(_task_thread, "stop", None)
    if stop is not None and stop[0]:
        raise Stopped()


def _stop_and_wait(stop, finished):
    """Set the kernel's ``stop`` flag and wait until its thread has returned, whatever
    signal comes meanwhile: the arrays it works on must outlive it (freed under a running
    kernel, they crash the process)."""
    stop[0] = 1
    while True:
        try:
            if finished.wait(0.05):
                return
        except BaseException:  # noqa: BLE001 - a second signal: the first is being raised
            continue
