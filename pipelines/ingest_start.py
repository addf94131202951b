"""Start-up of ``terrain ingest``: a small ASCII grid starts parsing before the heavy imports.

``terrain.run`` dispatches ``ingest`` here. A grid that the default scheduler would run on
threads (an ESRI/GRASS ASCII grid of at most :data:`THREADS_MAX_CELLS` cells, no
``--scheduler``, ``--resume`` or ``--dry-run``) is ingested without a task graph
(:func:`pipelines.ingest.ingest_in_threads`): parsed whole into memory on a thread pool
(:func:`parse_whole_grid`), then written shard by shard on the same pool. Its parse starts
here, as soon as the header is read (numpy and the parser's C library are all it needs), and
runs on the pool's threads -- the C kernels release the GIL -- while this thread imports
zarr and the store code. On two cores that import is about as long as the parse of a
100 MB grid, which it would otherwise precede. Dask is not imported at all on that path:
the job is a few dozen tasks of tens of milliseconds, and the threads scheduler would only
add its import and per-task overhead (docs/benchmarks.md, "Whole-process ``ingest``").

Anything unusual (not an ASCII grid, a bad header, an existing output without
``--overwrite``) starts nothing here: the command then reads the file itself and reports it.
"""

import os
import sys
import threading

import numpy as np

__all__ = ["ingest_command", "import_ingest", "NOT_FOR_INGEST", "parse_whole_grid", "band_stats", "start_parse",
           "take_started_parse", "StartedParse", "THREADS_MAX_CELLS"]

#: grids up to this many cells run on threads under the default scheduler: the value of
#: :data:`pipelines.cluster.DASHBOARD_MIN_CELLS` (not imported from there: that module
#: imports Dask; tests/test_ingest.py checks that the two agree)
THREADS_MAX_CELLS = 1 << 26

_lock = threading.Lock()
_started = []  # parses started by ingest_command, until taken or the command ends


def band_stats(z):
    """``(nodata cells, min, max)`` of a float32 block (min/max ignore NaN), Python scalars."""
    from terrain.io._parse import nan_min_max

    nan, lo, hi = nan_min_max(z)
    return int(nan), float(lo), float(hi)


def parse_whole_grid(grid, pool, out=None, on_block=None):
    """Parse a whole ASCII grid into ``out`` (float32, NaN = nodata) on a thread pool.

    The newline index runs as one task per ``INDEX_CHUNK_BYTES`` and the parse as one task
    per ``BLOCK_BYTES`` of text (so every core has work whatever the shard size); the
    kernels release the GIL. ``on_block(r0, r1)``, when given, runs in the worker right
    after rows ``r0:r1`` are parsed (e.g. to start their copy to the device).

    Returns
    -------
    (out, stats)
        ``stats``: :func:`band_stats` of each block, in row order.
    """
    from terrain.io.ascii_grid import BLOCK_BYTES

    rows, cols = grid.shape
    if out is None:
        out = np.empty((rows, cols), dtype=np.float32)
    pieces = list(pool.map(lambda ab: grid.newline_offsets(*ab), grid.index_ranges()))
    starts = grid.row_starts(pieces)
    row_bytes = max(1.0, float(starts[-1] - starts[0]) / max(rows, 1))
    block = max(1, int(BLOCK_BYTES // row_bytes))
    text = grid.text()  # one map for every block

    def parse(r0):
        r1 = min(r0 + block, rows)
        _, stats = grid.read_rows_stats(r0, r1, starts, out=out[r0:r1], text=text)
        if on_block is not None:
            on_block(r0, r1)
        return stats

    stats = list(pool.map(parse, range(0, rows, block)))
    return out, stats


class StartedParse:
    """:func:`parse_whole_grid` of ``grid`` running on a pool of its own (one thread per
    core), driven from a background thread. :meth:`result` waits for it; the pool stays
    open for the caller's writes until :meth:`close`."""

    def __init__(self, grid):
        from concurrent.futures import ThreadPoolExecutor

        self.grid = grid
        self.pool = ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="terrain-ingest")
        self._out = self._error = None
        self._driver = threading.Thread(target=self._run, name="terrain-ingest-parse",
                                        daemon=True)
        self._driver.start()

    def _run(self):
        try:
            self._out = parse_whole_grid(self.grid, self.pool)
        except BaseException as e:  # handed to the caller of result()
            self._error = e

    def result(self):
        """``(z, stats)`` of :func:`parse_whole_grid`; its exception, if it raised one."""
        self._driver.join()
        if self._error is not None:
            raise self._error
        return self._out

    def close(self):
        """Cancel what has not started, wait for what has, release the pool."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        self._driver.join()
        self._out = None


def start_parse(grid):
    """Start parsing ``grid`` now (:class:`StartedParse`)."""
    return StartedParse(grid)


def take_started_parse(grid):
    """The parse of ``grid`` that :func:`ingest_command` started, once, or None."""
    with _lock:
        for i, started in enumerate(_started):
            if started.grid == grid:
                return _started.pop(i)
    return None


def _wanted(args):
    if (getattr(args, "scheduler", None) is not None or getattr(args, "resume", False)
            or getattr(args, "dry_run", False)
            or any(getattr(args, k, None) is not None for k in ("band", "nodata", "crs"))):
        return None
    from terrain.io.outputs import check_outputs
    from terrain.io.ascii_grid import looks_like_ascii_grid, open_ascii_grid

    if not looks_like_ascii_grid(args.input):
        return None
    grid = open_ascii_grid(args.input)
    if grid.shape[0] * grid.shape[1] > THREADS_MAX_CELLS:
        return None
    check_outputs([args.input], [args.output], args.overwrite)
    return grid


#: what zarr imports where it is installed and the graph-free ingest never uses: CuPy, for
#: zarr's GPU buffers (half a second and 160 MB on a GPU host), and fsspec, to recognise
#: remote stores and ``FSMap`` arguments (with ssl, socket, ...: ~0.04 CPU s on the 2-core
#: VM, ``import numpy, zarr`` best of 10 0.42 -> 0.38); the ingest opens local directories
NOT_FOR_INGEST = ("cupy", "fsspec")


def import_ingest(hide_cupy=True):
    """Import :mod:`pipelines.ingest` (and zarr) and return it.

    With ``hide_cupy`` (the graph-free path runs nothing on a GPU and writes a local store)
    the modules of :data:`NOT_FOR_INGEST` are hidden while zarr loads, unless something
    imported them or zarr already. They stay importable afterwards; zarr, in this process,
    then has no GPU buffers and takes no fsspec mapping as a store (local paths only).
    """
    hidden = [name for name in NOT_FOR_INGEST if name not in sys.modules]
    if not hide_cupy or "zarr" in sys.modules:
        hidden = []
    for name in hidden:
        sys.modules[name] = None  # an import of it raises ImportError; find_spec gives None
    try:
        from . import ingest
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    return ingest


def ingest_command(args):
    """``terrain ingest``: :func:`pipelines.ingest.ingest_command`, the parse started first."""
    try:
        grid = _wanted(args)
    except Exception:  # a bad input or output: the command says so
        grid = None
    switch = sys.getswitchinterval()
    if grid is not None:
        with _lock:
            _started.append(start_parse(grid))
        # while this thread imports (pure Python, holding the GIL), a parse thread that
        # needs the GIL for a moment between two C calls gets it within 1 ms, not 5
        sys.setswitchinterval(min(switch, 0.001))
    try:
        command = import_ingest(hide_cupy=grid is not None).ingest_command
        sys.setswitchinterval(switch)
        return command(args)
    finally:
        sys.setswitchinterval(switch)
        with _lock:
            left, _started[:] = list(_started), []
        for started in left:  # not taken (the command failed before): stop it
            started.close()
