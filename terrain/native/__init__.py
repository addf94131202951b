"""terrain's C kernels (``kernels.c``): one shared library, loaded with ctypes.

Plain C99 with no Python API: the ASCII grid parser's kernels (:mod:`terrain.io`) and the
sparse graphs' (:mod:`terrain.graph`). ``pip install .`` compiles it into the package; a
checkout without that build compiles it on first use into a cache folder, never into the
package (:func:`load_library`). ctypes releases the GIL around each call. C rather than
Numba: a Numba kernel costs every process more start-up than a small command's whole work
(docs/architecture.md, "Design notes").
"""

import contextlib
import ctypes
import functools
import hashlib
import importlib.machinery
import os
import secrets
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
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


#: seconds a compile may run before it is stopped (about 8 CPU seconds; far more on a
#: loaded machine)
COMPILE_TIMEOUT = 300


def compile_library(target, tag, compiler=None):
    """Compile ``kernels.c`` into the shared library ``target``, atomically: written to a
    temporary file of its own beside it, then renamed, so that processes compiling at once
    each put a whole library in place and none loads a part. ``compiler`` defaults to
    ``$CC``, else ``cc``, ``gcc`` or ``clang``.

    The compiler runs in a process group of its own, which is killed whole when the compile
    is stopped (Ctrl-C, SIGTERM, a stopping run's task, :data:`COMPILE_TIMEOUT`): its
    children (``cc1``, ``as``, ``ld``) outlive a kill of the driver alone and would go on
    writing. The temporary file is then removed.

    Raises
    ------
    InputError
        No C compiler.
    RuntimeError
        The compiler failed (its message included) or ran too long.
    OSError
        The temporary file cannot be made beside ``target`` (a folder not writable).
    """
    target = Path(target)
    cc = compiler or os.environ.get("CC") or next(
        (c for c in ("cc", "gcc", "clang") if shutil.which(c)), None)
    if cc is None:  # the machine's setup, not a fault of terrain's: one line, no traceback
        from ..errors import InputError
        raise InputError(
            "terrain's C kernels are not built and no C compiler was found to build them "
            "(set CC, install gcc, or install terrain with pip, which builds them)")
    check_stopped()  # a task thread that waited for another's compile of a stopping run
    _remove_abandoned(target.parent)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}."
                           f"{secrets.token_hex(4)}.tmp")
    # made here, first: a folder that cannot be written is an OSError, not a compiler's
    # failure; the mode a linker would give its output (umask applied)
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755))
    argv = [*cc.split(), *CFLAGS, f'-DTERRAIN_PARSE_SOURCE="{tag}"', "-o", str(tmp),
            str(SOURCE)]
    failed = f"compiling terrain's C kernels failed ({' '.join(argv)})"
    try:
        # its output to a file: waited for in short steps (where signals and a run's stop
        # get in), a pipe left unread would fill and stall the compiler
        with tempfile.TemporaryFile() as said:
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=said,
                                        stderr=subprocess.STDOUT, process_group=0)
            except OSError as e:
                raise RuntimeError(f"{failed}: {e}") from None
            try:
                _wait_for_compiler(proc, failed)
            except BaseException:
                _kill_group(proc)
                raise
            if proc.returncode != 0:
                said.seek(0)
                output = said.read().decode(errors="replace")
                raise RuntimeError(f"{failed}:\n{output.strip()[-2000:]}")
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def _wait_for_compiler(proc, failed):
    """Wait for the compiler ``proc``: in steps of 50 ms, between which a signal's exception
    (Ctrl-C's, :class:`~terrain.startup.Terminated`) is raised in the main thread, and in a
    run's task thread :class:`Stopped` once the run stops (no signal reaches that thread)."""
    deadline = time.monotonic() + COMPILE_TIMEOUT
    while True:
        try:
            proc.wait(timeout=0.05)
            return
        except subprocess.TimeoutExpired:
            pass
        check_stopped()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{failed}: still running after {COMPILE_TIMEOUT} s")


def _kill_group(proc):
    """Kill the compiler's whole process group and wait (up to a second) until none of it is
    left, whatever signal comes meanwhile: a child still writing would put the partial
    library back after it is removed."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        try:
            proc.wait(timeout=0.05)
            os.killpg(proc.pid, 0)  # children reaped by init until the group is gone
            time.sleep(0.01)
        except subprocess.TimeoutExpired:
            continue
        except OSError:  # ProcessLookupError: the group is gone
            return
        except BaseException:  # noqa: BLE001 - a second signal: the first is being raised
            continue


def _remove_abandoned(folder):
    """Remove the temporary files of compiles long over in ``folder``: a process killed
    outright (SIGKILL, or SIGTERM where nothing handles it) leaves its compiler's partial
    library. Any compile in progress is younger than :data:`COMPILE_TIMEOUT`."""
    cutoff = time.time() - 2 * COMPILE_TIMEOUT
    for path in folder.glob(f".{BUILT_NAME}*.tmp"):
        with contextlib.suppress(OSError):
            if path.lstat().st_mtime < cutoff:
                path.unlink()


def _cache_dirs():
    """Where a library compiled on first use goes, in order of preference:
    ``$TERRAIN_CACHE_DIR``; else the user's cache (``$XDG_CACHE_HOME/terrain`` or
    ``~/.cache/terrain``); else ``terrain-UID`` in the temporary folder. Never the package's
    own folder: an install or a checkout is not written by running it (it may be read-only,
    or shared by users of other compilers)."""
    dirs = []
    if os.environ.get("TERRAIN_CACHE_DIR"):
        dirs.append(Path(os.environ["TERRAIN_CACHE_DIR"]))
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    dirs.append(Path(xdg) / "terrain")
    dirs.append(_shared_dir())
    return dirs


def _shared_dir():
    return Path(tempfile.gettempdir()) / f"terrain-{os.getuid()}"


def _not_usable(folder, make):
    """None where a library may be loaded from ``folder`` (``make``: and compiled into it,
    the folder made if missing), else why not. The shared temporary folder's only as this
    user's own folder that no one else may write: anyone may create ``/tmp/terrain-UID``
    first and put a library there that this process would load."""
    shared = folder == _shared_dir()
    try:
        if make:
            if shared:
                folder.mkdir(mode=0o700, exist_ok=True)
            else:
                folder.mkdir(parents=True, exist_ok=True)
        if not shared:
            return None
        st = os.lstat(folder)
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022:
        return None
    return "not this user's own folder that only it may write"


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


def _cached_library(tag):
    """The library compiled from this ``kernels.c`` into the first cache folder that holds
    it, else compiled now into the first one that can be written (:func:`_cache_dirs`)."""
    name = f"{BUILT_NAME}-{tag}{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    folders = _cache_dirs()
    for folder in folders:
        if (folder / name).is_file() and _not_usable(folder, make=False) is None:
            with contextlib.suppress(OSError):  # not a library: compiled again over it
                lib = _load(folder / name, tag)
                if lib is not None:
                    return lib
    tried = []
    for folder in folders:
        why = _not_usable(folder, make=True)
        if why is None:
            try:
                path = compile_library(folder / name, tag)
            except OSError as e:  # the folder's (its temporary file, the rename)
                why = e.strerror or str(e)
            else:
                return _load(path, tag)
        tried.append(f"{folder} ({why})")
    from ..errors import InputError
    raise InputError("terrain's C kernels must be compiled on first use and no cache folder "
                     "can be written: " + "; ".join(tried)
                     + " (set TERRAIN_CACHE_DIR to a writable folder)")


def load_library():
    """The shared library, loaded once per process (thread-safe): the one ``pip install .``
    built from this ``kernels.c``, else one compiled earlier into a cache folder (keyed by
    :func:`source_tag`), else one compiled now into the first writable cache folder
    (:func:`_cache_dirs`).

    Raises
    ------
    RuntimeError
        The library must be compiled and the compiler failed.
    InputError
        The library must be compiled and there is no compiler, or no cache folder can be
        written (each named).
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
            lib = _cached_library(tag)
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
