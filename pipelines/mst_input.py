"""The input grid of ``terrain mst`` held in this process: read once, its elevations written
as they arrive, the forest's tasks taking their blocks from memory.

:func:`pipelines.mst.mst_route` decides when: the in-core route without a scheduler, and on
the GPU an ASCII grid whose float32 elevations fit :data:`DEVICE_SHARE` of the device though
its forest does not fit in core. :func:`load_grid` reads the input once into the backend's
memory; a raster's ``elevation`` is written by :data:`WRITER_THREADS` threads as it is
parsed. An ASCII grid on the GPU is parsed on the device by a thread of its own while the
forest's tasks run: a task waits (:func:`held_wait`) only for the rows of its block
(:class:`Arrival`), so from a disk the groups' forests run while the rest of the text is
read. A text the device rejects stops the run with :class:`GridRejected`; the caller then
parses it on the CPU, whose parser raises the usual one-line error. Group tasks take their
blocks from the :class:`HeldGrid` with :func:`held_get`; on the GPU the provisional masks go
to a second held grid on the device. Design: docs/mst.md, "Routes".
"""

import contextlib
import itertools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from terrain.backend import get_backend
from terrain.grid.mst import thread_stream
from terrain.io import AsciiGrid, parse_grid_on_device, pinned_empty, read_whole
from terrain.tiles.store import read_block, shard_windows

from .ingest import band_stats, create_elevation, finish_elevation, write_window

__all__ = ["HeldGrid", "Arrival", "GridRejected", "held_get", "held_put", "held_wait", "hold",
           "load_grid", "device_text_fits", "read_store", "shard_runs", "DEVICE_SHARE",
           "WRITER_THREADS", "IO_THREADS"]

#: the device's free memory the float32 grid and the provisional mask may take (the rest:
#: pieces of text, super-tiles)
DEVICE_SHARE = 0.5
#: threads writing ``elevation`` shards while the grid is parsed and its forest computed
WRITER_THREADS = 8
#: threads reading or writing a window's shards at once (a bound on their buffers)
IO_THREADS = max(1, min(16, os.cpu_count() or 1))

_GRIDS = {}  # HeldGrid.key -> array (NumPy or CuPy), while a run holds it
_ARRIVALS = {}  # HeldGrid.key -> Arrival, for a grid still being parsed
_ids = itertools.count()


class GridRejected(Exception):
    """The device's parser rejected the text: parse it on the CPU (for its error, or its
    grid) and run again."""


class _Stopped(Exception):
    """The run stopped before the parse ended: the parse stops too."""


class Arrival:
    """The rows of a grid parsed so far, for tasks that start before the parse ends.

    >>> a = Arrival()
    >>> a.advance(4); a.wait(4); a.rows
    4
    >>> a.fail(ValueError("bad text")); a.wait(3)  # rows that arrived are still there
    >>> a.wait(5)
    Traceback (most recent call last):
    ValueError: bad text
    """

    def __init__(self):
        self.rows = 0
        self.error = None
        self._cond = threading.Condition()

    def advance(self, rows):
        """Rows ``[0, rows)`` hold their values; raises :class:`_Stopped` once the run failed."""
        with self._cond:
            if self.error is not None:
                raise _Stopped()
            self.rows = max(self.rows, int(rows))
            self._cond.notify_all()

    def fail(self, error):
        """No more rows will come: waiters for them raise ``error`` (the first one given)."""
        with self._cond:
            if self.error is None:
                self.error = error
            self._cond.notify_all()

    def stop(self):
        """No more rows are wanted (the run failed): waiters raise, and the parse stops at
        its next piece."""
        self.fail(_Stopped())

    def wait(self, rows):
        """Return once rows ``[0, rows)`` arrived; raise the parse's error if they never will."""
        with self._cond:
            while self.rows < rows and self.error is None:
                self._cond.wait(1.0)  # a timeout: a signal to the main thread gets through
            if self.rows < rows:
                raise self.error


class HeldGrid:
    """A handle, in a task graph, on a grid held in this process (:data:`_GRIDS`): its ``str``
    names it, pickling copies the key only (a plain class: Dask walks into dataclasses).

    >>> str(HeldGrid("1-0")), HeldGrid("1-0") == HeldGrid("1-0")
    ('held-grid:1-0', True)"""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = str(key)

    def __str__(self):
        return f"held-grid:{self.key}"

    __repr__ = __str__

    def __eq__(self, other):
        return isinstance(other, HeldGrid) and other.key == self.key

    def __hash__(self):
        return hash(("HeldGrid", self.key))

    def __reduce__(self):
        return (HeldGrid, (self.key,))


@contextlib.contextmanager
def hold(array, arrival=None):
    """Register ``array`` for the block (with the :class:`Arrival` of its rows while it is
    parsed); yields its :class:`HeldGrid` (None for None)."""
    if array is None:
        yield None
        return
    handle = HeldGrid(f"{os.getpid()}-{next(_ids)}")
    _GRIDS[handle.key] = array
    if arrival is not None:
        _ARRIVALS[handle.key] = arrival
    try:
        yield handle
    finally:
        _GRIDS.pop(handle.key, None)
        _ARRIVALS.pop(handle.key, None)


def _held(handle):
    z = _GRIDS.get(handle.key)
    if z is None:
        raise RuntimeError(f"{handle}: no such grid in this process (a task ran elsewhere?)")
    return z


def held_wait(handle, rows):
    """Return once rows ``[0, rows)`` of the held grid ``handle`` hold their values."""
    arrival = _ARRIVALS.get(handle.key)
    if arrival is not None:
        arrival.wait(rows)


def held_get(handle, window, backend=None, on_device=False):
    """The block ``window`` of the held grid ``handle`` (once its rows arrived): NumPy, or
    with ``on_device`` a contiguous copy on the calling thread's stream (the whole grid when
    the window is it)."""
    r0, r1, c0, c1 = window
    held_wait(handle, r1)
    z = _held(handle)
    if isinstance(z, np.ndarray):
        return z[r0:r1, c0:c1]
    be = get_backend(backend or "gpu")
    with thread_stream(be):
        whole = (r1 - r0, c1 - c0) == tuple(z.shape)
        block = z if whole and on_device else z[r0:r1, c0:c1].copy()
        return block if on_device else block.get()


def held_put(handle, window, block, backend=None):
    """Copy the host array ``block`` into ``window`` of the held grid ``handle`` (done when
    this returns)."""
    z = _held(handle)
    r0, r1, c0, c1 = window
    if isinstance(z, np.ndarray):
        z[r0:r1, c0:c1] = block
        return
    be = get_backend(backend or "gpu")
    stream = thread_stream(be)
    with stream:
        z[r0:r1, c0:c1] = be.xp.asarray(block)
    stream.synchronize()


def device_text_fits(shape, free):
    """Whether the float32 elevations and the uint8 provisional mask of a grid of ``shape``
    fit :data:`DEVICE_SHARE` of ``free`` device bytes.

    >>> device_text_fits((50220, 70520), 80 << 30)
    True
    """
    return 5 * int(shape[0]) * int(shape[1]) <= DEVICE_SHARE * free


class _Staging:
    """One pinned host buffer per thread (and a stream), for device -> host copies of shards:
    a pinned copy runs at the bus's speed, a pageable one at a fraction of it."""

    def __init__(self, cp, nbytes):
        self.cp, self.nbytes = cp, int(nbytes)
        self.local = threading.local()

    def fetch(self, window):
        """``window`` (a 2-D device view) as a NumPy array in this thread's pinned buffer."""
        cp, loc = self.cp, self.local
        if not hasattr(loc, "buf"):
            loc.buf = pinned_empty(cp, self.nbytes)
            loc.stream = cp.cuda.Stream(non_blocking=True)
        with loc.stream:
            dense = cp.ascontiguousarray(window)
            out = loc.buf[: dense.nbytes].view(dense.dtype).reshape(dense.shape)
            dense.get(stream=loc.stream, out=out)
        loc.stream.synchronize()
        return out


def shard_runs(shape, side, window=None, n=None):
    """``window`` (default the grid; aligned to shards of ``side`` cells) cut into about
    ``n`` (default :data:`IO_THREADS`) rectangles of whole shards, runs along a row of
    shards: one read or write each, which opens the array once (a shard a call would open it
    a shard at a time).

    >>> runs = shard_runs((5000, 5000), 2048)
    >>> sum((b - a) * (d - c) for a, b, c, d in runs), all(c % 2048 == 0 for *_, c, _ in runs)
    (25000000, True)
    >>> shard_runs((5, 7), 4, n=1), shard_runs((5, 7), 4, n=4)
    ([(0, 4, 0, 7), (4, 5, 0, 7)], [(0, 4, 0, 4), (0, 4, 4, 7), (4, 5, 0, 4), (4, 5, 4, 7)])
    """
    wins = shard_windows(shape, side, window)
    per_run = -(-len(wins) // (n or IO_THREADS))
    out = []
    for w in wins:
        last = out[-1] if out else None
        if (last is not None and last[0] == w[0] and last[3] == w[2]
                and -(-(last[3] - last[2]) // side) < per_run):
            out[-1] = (last[0], last[1], last[2], w[3])
        else:
            out.append(w)
    return out


def read_store(path, shape, side, pool):
    """The ``elevation`` of the tile store ``path`` as one float32 array, its shards of
    ``side`` cells read and decoded by ``pool``."""
    z = np.empty(shape, np.float32)
    list(pool.map(lambda w: read_block(path, "elevation", w, out=z[w[0]:w[1], w[2]:w[3]]),
                  shard_runs(shape, side)))
    return z


@contextlib.contextmanager
def load_grid(source, out_path, shape, tile, side, backend, wall, on_device=True):
    """The grid of ``source`` (an opened grid, or a store's path) in the backend's memory, for
    the block, as ``(z, arrival)``: an ASCII grid on the GPU (unless ``on_device`` is False)
    is parsed on the device while the block runs, ``arrival`` the :class:`Arrival` of its
    rows (its rejection raises :class:`GridRejected` in and out of the block); else ``z`` is
    whole and ``arrival`` None. A raster's ``elevation`` is written into ``out_path``
    meanwhile (module docstring). ``wall`` gets the steps' wall seconds (and ``parsed_on``
    for a text)."""
    be = get_backend(backend)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(IO_THREADS, thread_name_prefix="terrain-read") as pool, \
            ThreadPoolExecutor(WRITER_THREADS, thread_name_prefix="terrain-write") as writers:
        if not hasattr(source, "shape"):  # a tile store: read, nothing written
            z = read_store(source, shape, side, pool)
            wall["read"] = time.perf_counter() - t0
            yield z, None
            return
        created = pool.submit(create_elevation, out_path, source, tile)
        writes = []
        try:
            if on_device and isinstance(source, AsciiGrid) and be.select(False, True):
                wall["parsed_on"] = "gpu"
                with _device_parse(source, out_path, side, be, pool, writers, created, writes,
                                   wall, t0) as parsed:
                    created.result()  # the store the block's steps write into
                    yield parsed
            else:
                wall["parsed_on"] = "cpu"
                z = read_whole(source, pool)
                created.result()
                writes.extend(writers.submit(_write_shard, out_path, z, w)
                              for w in shard_runs(shape, side, n=WRITER_THREADS))
                wall["read"] = time.perf_counter() - t0
                yield z, None
            t0 = time.perf_counter()
            stats = [f.result() for f in writes]
            wall["elevation-write-tail"] = time.perf_counter() - t0
            finish_elevation(out_path, stats)
        finally:
            for f in writes:  # after an error: the running ones end (the writers' exit)
                f.cancel()


@contextlib.contextmanager
def _device_parse(grid, out_path, side, be, pool, writers, created, writes, wall, t0):
    """``(zd, arrival)`` at once, the text parsed into ``zd`` on the device by a thread of its
    own; the block's end waits for the parse (stopped at its next piece if the block
    failed)."""
    cp = be.xp
    zd = cp.empty(grid.shape, cp.float32)
    arrival = Arrival()
    device = cp.cuda.Device()

    def parse():
        try:
            with device:
                z = _parse_on_device(grid, zd, out_path, side, be, pool, writers, created,
                                     writes, wall, arrival)
        except BaseException as e:
            arrival.fail(e)
            raise
        if z is None:
            arrival.fail(GridRejected(f"{grid.path}: not a grid the device's parser reads"))
        wall["read"] = time.perf_counter() - t0
        return z

    with ThreadPoolExecutor(1, thread_name_prefix="terrain-parse") as parser:
        parsing = parser.submit(parse)
        try:
            yield zd, arrival
        except BaseException:
            arrival.stop()
            with contextlib.suppress(BaseException):
                parsing.result()
            raise
        if parsing.result() is None:
            raise arrival.error


def _write_shard(out_path, z, w):
    """The ``elevation`` shards of window ``w`` of the host grid ``z`` written; their
    statistics."""
    block = z[w[0]:w[1], w[2]:w[3]]
    write_window(out_path, block, w[0], w[2])
    return band_stats(block)


def _parse_on_device(grid, zd, out_path, side, be, pool, writers, created, writes, wall,
                     arrival):
    """The text parsed into ``zd`` on the device, its ``elevation`` shards queued on
    ``writers`` and ``arrival`` advanced as bands arrive; None when the text is not a valid
    grid."""
    cp = be.xp
    rows, cols = grid.shape
    staging = _Staging(cp, side * side * 4)
    done = [0]

    def write(w):
        band = staging.fetch(zd[w[0]:w[1], w[2]:w[3]])
        write_window(out_path, band, w[0], w[2])
        return band_stats(band)

    def on_rows(r0, r1):
        # the parse's kernels ran on this thread's stream (the forest's on their own)
        cp.cuda.get_current_stream().synchronize()
        arrival.advance(r1)
        created.result()
        while done[0] + side <= r1 or (r1 == rows and done[0] < rows):  # whole shard rows
            a, b = done[0], min(done[0] + side, rows)
            writes.extend(writers.submit(write, w)
                          for w in shard_windows((rows, cols), side, (a, b, 0, cols)))
            done[0] = b

    return parse_grid_on_device(grid, zd, be, pool, times=wall, on_rows=on_rows)
