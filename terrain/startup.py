"""Process set-up shared by the command line and the worker processes it starts.

One module holds what a terrain process does to itself around its work: signals, the malloc
arenas, and the quick exit of the command line. Nothing here changes a result.

**Signals.** SIGTERM as an exception, so that a terminated run cleans up like an interrupted one.

Python turns SIGINT (Ctrl-C) into :class:`KeyboardInterrupt`; :func:`terminate_raises`
turns SIGTERM into :class:`Terminated` the same way, in the main thread, so every
``finally`` and :func:`terrain.io.outputs.atomic_output` cleanup runs (the partial output is
removed) and the command line prints one line instead of dying silently.

**Quick exit.** :func:`quick_exit` ends the command line's process without the interpreter's
teardown, once the command's outputs are complete.

**Malloc arenas.** A fixed number of glibc malloc arenas, so the peak RSS does not follow the thread count.

Why: glibc gives each thread that allocates its own arena, up to 8 per core. Our buffers
above a few MB (shards, masks, level graphs) first come from ``mmap`` and go back on
``free``, but every such ``free`` raises glibc's mmap threshold to that size (up to 32 MB),
so later buffers of that size come from the arenas, where freed memory stays with the
arena that gave it. With a fixed number of buffers in flight (semaphores bound the
super-tiles, the write tasks, the shard buffers), the memory kept by arenas still grew
with the threads: each thread's arena held its last buffers. Measured (a model of the task
threads, 8 buffers of 1-17 MB in flight, 2-core VM): peak RSS 548 MB with 8 threads and 730
MB with 64; with 8 arenas 539 and 563 MB, at the same speed. (Fixing the mmap threshold
instead bounds it too, but each buffer is then faulted in anew: 4-6x slower there.)

:func:`bound_malloc_arenas` sets ``M_ARENA_MAX`` through ``mallopt`` at run time (what the
``MALLOC_ARENA_MAX`` environment variable does at start-up); it only affects arenas made
afterwards, so it runs before the thread pools start (``terrain.run.main``,
:func:`pipelines.cluster.open_scheduler`). ``$TERRAIN_MALLOC_ARENAS`` changes the count,
``0`` leaves glibc's default. Other C libraries: nothing is done.

:func:`fixed_mmap_threshold` is the other knob, for the blocked cost distance
(:mod:`pipelines.cost_distance_blocked`), whose block arrays are allocated and freed at
every visit: it pins ``M_MMAP_THRESHOLD`` so that they always come from ``mmap`` and go
back to the system when freed (docs/cost-distance.md, "Design notes": 1.61 → 0.99 GB peak RSS
at 16384²).
"""

import contextlib
import ctypes
import os
import signal
import sys

__all__ = ["MALLOC_ARENAS", "Terminated", "bound_malloc_arenas", "fixed_mmap_threshold",
           "quick_exit", "terminate_raises"]


class Terminated(BaseException):
    """SIGTERM arrived (a BaseException, like KeyboardInterrupt: ``except Exception``
    blocks do not swallow it)."""


def _raise_terminated(signum, frame):
    raise Terminated()


@contextlib.contextmanager
def terminate_raises():
    """Within the block, SIGTERM raises :class:`Terminated` in the main thread."""
    try:
        previous = signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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
    process (glibc's threshold otherwise grows to the largest block freed, up to 32 MiB,
    and later blocks of that size come from the arenas, where freed memory stays).
    Returns True when set (glibc only).

    >>> isinstance(fixed_mmap_threshold(), bool)
    True
    """
    return _mallopt(_M_MMAP_THRESHOLD, nbytes)


def _mallopt(param, value):
    """glibc's ``mallopt(param, value)``; False off glibc or when it refuses."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return False
        libc = ctypes.CDLL(None)
        return libc.mallopt(ctypes.c_int(param), ctypes.c_int(int(value))) == 1
    except (AttributeError, OSError, ValueError):
        return False


def quick_exit(status):
    """End the process now with ``status``, skipping the interpreter's teardown.

    The command line calls it once a command has returned: its outputs are complete, closed
    and renamed into place, and nothing of its runs on, so tearing down the modules (Numba's
    and CuPy's pools, the CUDA context, zarr's event loop) is work with no effect but time.
    Only the standard streams are flushed.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more to say
            pass
    os._exit(status)
