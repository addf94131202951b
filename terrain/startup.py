"""Process set-up shared by the command line and the worker processes it starts.

What a terrain process does to itself around its work; nothing here changes a result:

* signals: :func:`terminate_raises` turns SIGTERM (and SIGHUP, the terminal or the batch
  system gone, unless ignored) into :class:`Terminated`, so every
  ``finally`` and :func:`terrain.io.outputs.atomic_output` clean-up runs as for Ctrl-C, and
  :func:`raise_if_stopped` raises a stop whose exception a callback from C dropped;
  :func:`signals_held` keeps both out of the renames that put an output in place (and
  out of imports that must not stop halfway, :func:`raise_held` raising them after);
* malloc arenas: :func:`bound_malloc_arenas` fixes glibc's arena count before the thread
  pools start (``terrain.run.main``, :func:`pipelines.cluster.open_scheduler`), so the peak
  RSS does not follow the thread count; :func:`fixed_mmap_threshold` serves the blocked cost
  distance, whose block arrays come and go at every visit;
* Numba's cache: :func:`numba_cache_for_run` gives the kernels a folder of this run where
  no lasting cache folder is writable;
* quick exit: :func:`quick_exit` ends the command line's process without teardown.

Figures: docs/architecture.md, "Design notes".
"""

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

__all__ = ["MALLOC_ARENAS", "Terminated", "bound_malloc_arenas", "fixed_mmap_threshold",
           "trim_free_memory", "quick_exit", "terminate_raises", "raise_if_stopped",
           "stop_set_aside", "signals_held", "raise_held", "printable_streams",
           "numba_cache_for_run"]


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived (``signum``; a BaseException, like KeyboardInterrupt:
    ``except Exception`` blocks do not swallow it)."""

    def __init__(self, signum=signal.SIGTERM):
        super().__init__(signum)
        self.signum = signum


def _stops():
    """The signals that stop a run: SIGINT, SIGTERM and SIGHUP, unless the process was
    started with SIGHUP ignored (``nohup``: the run goes on after its terminal is gone)."""
    hangup = signal.getsignal(signal.SIGHUP) != signal.SIG_IGN
    return (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hangup else ())


def _stop_exception(signum):
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


#: the stop signals received within :func:`terminate_raises`, in order: the exception a
#: handler raises inside a callback from C (Numba's compiler calls back into Python through
#: ctypes) is printed and dropped there, and the work goes on, so what must not follow a
#: stop (an output put in place) asks :func:`raise_if_stopped`
_received = []


def _raise_stop(signum, frame):
    _received.append(signum)
    raise _stop_exception(signum)


def raise_if_stopped():
    """Raise the first stop signal received within :func:`terminate_raises` (none outside
    it): for one whose exception a callback from C dropped."""
    if _received:
        raise _stop_exception(_received[0])


@contextlib.contextmanager
def stop_set_aside():
    """Within the block, a stop already received does not refuse outputs
    (:func:`raise_if_stopped`): for the record of what a stopped run finished (a batch's
    manifest), written as it stops."""
    held = _received[:]
    _received.clear()
    try:
        yield
    finally:
        _received[:0] = held


@contextlib.contextmanager
def terminate_raises():
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread and
    SIGINT KeyboardInterrupt, as Python's own handler does; each is recorded
    (:func:`raise_if_stopped`)."""
    try:
        previous = {s: signal.signal(s, _raise_stop) for s in _stops()}
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    _received.clear()
    try:
        yield
    finally:
        _received.clear()
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def signals_held():
    """Within the block, SIGINT, SIGTERM and SIGHUP are recorded, not raised: the block
    yields the list of their names (``"interrupt"``, ``"SIGTERM"``) as they arrive, and the caller,
    whose block ran to its end, says what came. For steps that must not stop halfway (an
    output's renames into place); outside the main thread signals are left alone.

    >>> with signals_held() as came:
    ...     signal.raise_signal(signal.SIGINT)
    >>> came
    ['interrupt']
    """
    came = []

    def hold(signum, frame):
        came.append("interrupt" if signum == signal.SIGINT else signal.Signals(signum).name)

    try:
        previous = {s: signal.signal(s, hold) for s in _stops()}
    except ValueError:  # not the main thread
        yield came
        return
    try:
        yield came
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def raise_held(came):
    """Raise the first stop :func:`signals_held` held (``came``), if any: for a step that
    must not stop halfway, after which the run stops."""
    if came:
        raise _stop_exception(signal.SIGINT if came[0] == "interrupt"
                              else signal.Signals[came[0]])


MALLOC_ARENAS = 8
_M_ARENA_MAX = -8  # glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_done = []


def bound_malloc_arenas(arenas=None):
    """Limit glibc's malloc arenas to ``arenas`` (default ``$TERRAIN_MALLOC_ARENAS``, else
    :data:`MALLOC_ARENAS`; 0: glibc's default). Returns the limit set, or None when nothing
    was done (not glibc, 0, or already set).

    >>> bound_malloc_arenas(0) is None
    True
    """
    if arenas is None:
        if _done:
            return None
        text = os.environ.get("TERRAIN_MALLOC_ARENAS", "")
        arenas = int(text) if text.strip().isdigit() else MALLOC_ARENAS
    if arenas <= 0 or not _mallopt(_M_ARENA_MAX, arenas):
        return None
    _done.append(arenas)
    return arenas


def fixed_mmap_threshold(nbytes=1 << 20):
    """Serve every allocation of ``nbytes`` or more from ``mmap`` for the rest of the
    process, so freed blocks go back to the system (glibc's threshold otherwise grows to
    the largest block freed). Returns True when set (glibc only).

    >>> isinstance(fixed_mmap_threshold(), bool)
    True
    """
    return _mallopt(_M_MMAP_THRESHOLD, nbytes)


def trim_free_memory():
    """Give the heap's free pages back to the system (glibc's ``malloc_trim``): a large
    transient read leaves them in the process (GDAL's block cache of a 4096² GeoTIFF, freed
    when the file is closed: 67 MB of RSS). Returns True when done (glibc only).

    >>> isinstance(trim_free_memory(), bool)
    True
    """
    if not _glibc():
        return False
    return bool(ctypes.CDLL(None).malloc_trim(ctypes.c_size_t(0)))


def _glibc():
    """Whether this process runs on glibc (whose malloc the functions here tune)."""
    try:
        return sys.platform.startswith("linux") and bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (AttributeError, OSError, ValueError):
        return False


def _mallopt(param, value):
    """glibc's ``mallopt(param, value)``; False off glibc or when it refuses."""
    if not _glibc():
        return False
    try:
        libc = ctypes.CDLL(None)
        return libc.mallopt(ctypes.c_int(param), ctypes.c_int(int(value))) == 1
    except (AttributeError, OSError, ValueError):
        return False


#: the Numba cache folder of this run (:func:`numba_cache_for_run`), removed as it ends
_run_cache = []


def numba_cache_for_run():
    """Where no lasting cache folder is writable, point Numba at a private temporary one for
    this process and its children (``NUMBA_CACHE_DIR``; before Numba's import, which reads
    it). Numba caches a ``cache=True`` kernel beside its source (``__pycache__``), else in
    ``~/.cache/numba``, and refuses to define the kernel when neither is writable: a service
    account's run of an installed package (no write access to it, HOME missing or read-only).
    The folder goes as the process ends (:func:`quick_exit`, or at exit), and then, if a
    kernel was compiled into it, one warning says so. Returns the folder, or None."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return None
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for lasting in (Path(__file__).parent / "__pycache__", Path(xdg) / "numba"):
        try:  # as Numba tests it
            lasting.mkdir(parents=True, exist_ok=True)
            tempfile.TemporaryFile(dir=lasting).close()
            return None
        except OSError:
            continue
    try:
        folder = tempfile.mkdtemp(prefix="terrain-numba-")
    except OSError:  # no temporary folder either: Numba says what it lacks
        return None
    os.environ["NUMBA_CACHE_DIR"] = folder
    _run_cache.append(folder)
    atexit.register(_end_run_cache)
    return folder


def _end_run_cache():
    """Remove this run's Numba cache folder; say once if kernels were compiled into it."""
    while _run_cache:
        folder = _run_cache.pop()
        if any(files for _, _, files in os.walk(folder)):
            print("terrain: warning: Numba's kernels were compiled for this run only: no cache "
                  "folder is writable (the package's, ~/.cache/numba); set NUMBA_CACHE_DIR to "
                  "a writable folder to keep them", file=sys.stderr)
        shutil.rmtree(folder, ignore_errors=True)


def quick_exit(status):
    """End the process now with ``status``, skipping the interpreter's teardown (Numba's and
    CuPy's pools, the CUDA context, zarr's event loop): the command line calls it once its
    outputs are complete and renamed. Only the standard streams are flushed, after this run's
    Numba cache folder is removed."""
    _end_run_cache()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # None: started with the descriptor closed (>&-)
                stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say
            pass
    os._exit(status)


def printable_streams():
    """Let stdout and stderr write any text: a character their encoding lacks (a path's
    ``ñ`` under ``PYTHONIOENCODING=ascii`` or a C locale) is escaped, not an error after
    the outputs are complete."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError, OSError):  # not a text stream of its own
            pass
