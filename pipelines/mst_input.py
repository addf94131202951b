"""The input grid of ``terrain mst`` held in this process: read once, its elevations written
as they arrive, the forest's tasks taking their blocks from memory.

:func:`pipelines.mst.mst_route` decides when: the in-core route without a scheduler, and on
the GPU an ASCII grid whose float32 elevations fit :data:`DEVICE_SHARE` of the device though
its forest does not fit in core. :func:`load_grid` reads the input once into the backend's
memory (an ASCII grid on the GPU parsed on the device; a text the device rejects is parsed
on the CPU, whose parser raises the usual one-line error); a raster's ``elevation`` is
written by :data:`WRITER_THREADS` threads as it is parsed. Group tasks take their blocks
from the :class:`HeldGrid` with :func:`held_get`; on the GPU the provisional masks go to a
second held grid on the device. Design: docs/mst.md, "Routes".
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
from terrain.io import AsciiGrid, parse_grid_on_device, pinned_empty
from terrain.tiles.store import read_block, shard_windows

from .ingest import band_stats, create_elevation, finish_elevation, write_window

__all__ = ["HeldGrid", "held_get", "held_put", "hold", "load_grid", "device_text_fits",
           "read_store", "shard_runs", "DEVICE_SHARE", "WRITER_THREADS",
           "IO_THREADS"]

#: the device's free memory the float32 grid and the provisional mask may take (the rest:
#: pieces of text, super-tiles)
DEVICE_SHARE = 0.5
#: threads writing ``elevation`` shards while the grid is parsed and its forest computed
WRITER_THREADS = 8
#: threads reading or writing a window's shards at once (a bound on their buffers)
IO_THREADS = max(1, min(16, os.cpu_count() or 1))

_GRIDS = {}  # HeldGrid.key -> array (NumPy or CuPy), while a run holds it
_ids = itertools.count()


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
def hold(array):
    """Register ``array`` for the block; yields its :class:`HeldGrid` (None for None)."""
    if array is None:
        yield None
        return
    handle = HeldGrid(f"{os.getpid()}-{next(_ids)}")
    _GRIDS[handle.key] = array
    try:
        yield handle
    finally:
        _GRIDS.pop(handle.key, None)


def _held(handle):
    z = _GRIDS.get(handle.key)
    if z is None:
        raise RuntimeError(f"{handle}: no such grid in this process (a task ran elsewhere?)")
    return z


def held_get(handle, window, backend=None, on_device=False):
    """The block ``window`` of the held grid ``handle``: NumPy, or with ``on_device`` a
    contiguous copy on the calling thread's stream (the whole grid when the window is it)."""
    z = _held(handle)
    r0, r1, c0, c1 = window
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
def load_grid(source, out_path, shape, tile, side, backend, wall):
    """The grid of ``source`` (an opened grid, or a store's path) in the backend's memory, for
    the block; a raster's ``elevation`` is written into ``out_path`` meanwhile (module
    docstring). ``wall`` gets the steps' wall seconds (and ``parsed_on`` for a text)."""
    be = get_backend(backend)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(IO_THREADS, thread_name_prefix="terrain-read") as pool, \
            ThreadPoolExecutor(WRITER_THREADS, thread_name_prefix="terrain-write") as writers:
        if not hasattr(source, "shape"):  # a tile store: read, nothing written
            z = read_store(source, shape, side, pool)
            wall["read"] = time.perf_counter() - t0
            yield z
            return
        created = pool.submit(create_elevation, out_path, source, tile)
        writes = []
        try:
            z = None
            if isinstance(source, AsciiGrid):
                z = be.select(lambda: None, lambda: _parse_on_device(
                    source, out_path, side, be, pool, writers, created, writes, wall))()
                wall["parsed_on"] = "gpu" if z is not None else "cpu"
            if z is None:  # on the host (also the CPU's message for a text the device refused)
                z = (source.read_all(pool)[0] if isinstance(source, AsciiGrid)
                     else source.read_rows(0, shape[0]))
                created.result()
                writes = [writers.submit(_write_shard, out_path, z, w)
                          for w in shard_runs(shape, side, n=WRITER_THREADS)]
            wall["read"] = time.perf_counter() - t0
            yield z
            t0 = time.perf_counter()
            stats = [f.result() for f in writes]
            wall["elevation-write-tail"] = time.perf_counter() - t0
            finish_elevation(out_path, stats)
        finally:
            for f in writes:  # after an error: the running ones end (the writers' exit)
                f.cancel()


def _write_shard(out_path, z, w):
    """The ``elevation`` shards of window ``w`` of the host grid ``z`` written; their
    statistics."""
    block = z[w[0]:w[1], w[2]:w[3]]
    write_window(out_path, block, w[0], w[2])
    return band_stats(block)


def _parse_on_device(grid, out_path, side, be, pool, writers, created, writes, wall):
    """The text parsed on the device, its ``elevation`` shards queued on ``writers`` as bands
    arrive; None when the text is not a valid grid."""
    cp = be.xp
    rows, cols = grid.shape
    zd = cp.empty((rows, cols), cp.float32)
    staging = _Staging(cp, side * side * 4)
    done = [0]

    def write(w):
        band = staging.fetch(zd[w[0]:w[1], w[2]:w[3]])
        write_window(out_path, band, w[0], w[2])
        return band_stats(band)

    def on_rows(r0, r1):
        # whole shard rows parsed (the last one at the grid's end): write them
        cp.cuda.Device().synchronize()
        created.result()
        while done[0] + side <= r1 or (r1 == rows and done[0] < rows):
            a, b = done[0], min(done[0] + side, rows)
            writes.extend(writers.submit(write, w)
                          for w in shard_windows((rows, cols), side, (a, b, 0, cols)))
            done[0] = b

    if parse_grid_on_device(grid, zd, be, pool, times=wall, on_rows=on_rows) is None:
        for f in writes:  # the host parse writes every shard again
            f.cancel()
        for f in writes:
            if not f.cancelled():
                f.exception()
        writes.clear()
        return None
    return zd
