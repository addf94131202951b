"""Parsing an ASCII grid's data section on the GPU (the CUDA twin of :mod:`terrain.io._parse`).

Algorithm
---------
1. The data section is copied to the device in ``COPY_BYTES`` pieces, by a thread pool:
   each thread reads its piece into a pinned buffer of its own and copies it on a stream of
   its own, so reading the page cache and the transfers overlap. One ``\\n`` is appended
   as the sentinel that ends the last token.
2. ``count_starts`` / ``write_starts`` (``_parse.cu``) find the offsets of every token
   start and every line start (two-pass stream compaction, an exclusive scan between).
3. The host checks the row structure from those offsets -- ``nrows`` lines (only blanks
   after them), ``ncols`` tokens on each -- exactly as :meth:`AsciiGrid.row_starts` and
   ``parse_rows`` do, so token ``k`` is cell ``k``.
4. ``parse_tokens``: one thread per token, the CPU kernel's digit loop and exact fast path
   (Clinger: at most 2^53 times or divided by an exact power of ten), so every float32 is
   the CPU's bit for bit; tokens outside the fast path are finished on the host with Python's
   correctly rounded ``float``, as on the CPU.

Anything wrong with the text (a bad token, a short row, too few lines) is not reported
here: :func:`parse_grid_on_device` returns None and the caller parses on the CPU, which
raises the CPU parser's :class:`~terrain.errors.InputError` (file, line, token), so the
messages are the same whichever backend ran.

Why by hand: no GPU library parses whitespace-separated text into a dense grid with
strtod's exact rounding (cuDF's CSV reader needs one delimiter and parses floats with its
own, inexact, algorithm).
"""

import os
import threading
import time
from pathlib import Path

import numpy as np

from ..backend import get_backend

__all__ = ["parse_grid_on_device", "parse_device_bytes", "copy_text_to_device", "COPY_BYTES"]

COPY_BYTES = 8 << 20   # text read and copied to the device per task
_SEG = 64              # bytes per thread in count_starts / write_starts (_parse.cu's SEG)
_BLOCK = 256
_NO_BAD = np.iinfo(np.int64).max
_FLT_MAX = float(np.finfo(np.float32).max)


def parse_device_bytes(grid):
    """Device memory :func:`parse_grid_on_device` needs for ``grid`` at its peak."""
    text = grid.size - grid.data_offset + 1
    cells = grid.shape[0] * grid.shape[1]
    segs = text // _SEG + 1
    return text + 12 * cells + 24 * segs


def _copy_to_device(grid, cp, pool):
    """The data section plus a ``\n`` sentinel, as a CuPy uint8 array.

    Each pool thread owns two pinned buffers of ``COPY_BYTES``, each with its stream, and
    alternates between them: it reads a piece into one while the other's copy to the
    device is still running.
    """
    import cupyx

    size = grid.size - grid.data_offset
    text = cp.empty(size + 1, cp.uint8)
    text[size:] = 10
    local = threading.local()
    fd = os.open(grid.path, os.O_RDONLY)
    used = []

    def copy(a):
        n = min(COPY_BYTES, size - a)
        if not hasattr(local, "ring"):
            local.ring = [(cupyx.empty_pinned(COPY_BYTES, np.uint8),
                           cp.cuda.Stream(non_blocking=True)) for _ in range(2)]
            local.turn = 0
            used.append(local.ring)
        buf, stream = local.ring[local.turn]
        local.turn ^= 1
        stream.synchronize()  # this buffer's previous copy is done
        got = os.preadv(fd, [memoryview(buf)[:n]], grid.data_offset + a)
        if got != n:
            from ..errors import InputError
            raise InputError(f"{grid.path}: file changed while being read")
        text[a:a + n].set(buf[:n], stream=stream)

    try:
        for _ in pool.map(copy, range(0, size, COPY_BYTES)):
            pass
        for ring in used:
            for _, stream in ring:
                stream.synchronize()
    finally:
        os.close(fd)
    return text


def copy_text_to_device(grid, backend="gpu", max_fraction=1.0):
    """The data section of ``grid`` on the device (a pool of ``os.cpu_count()`` threads), or
    None when it would take more than ``max_fraction`` of the device's free memory."""
    from concurrent.futures import ThreadPoolExecutor

    cp = get_backend(backend).xp
    free, _ = cp.cuda.runtime.memGetInfo()
    if grid.size - grid.data_offset + 1 > max_fraction * free:
        return None
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        return _copy_to_device(grid, cp, pool)


def parse_grid_on_device(grid, backend="gpu", pool=None, times=None, text=None):
    """Parse the ASCII grid ``grid`` (:class:`~terrain.io.AsciiGrid`) into device memory.

    Parameters
    ----------
    grid : AsciiGrid
    backend : str or Backend
        Must be the GPU.
    pool : concurrent.futures.Executor, optional
        Threads reading the file (default: a pool of ``os.cpu_count()``).
    times : dict, optional
        Filled with the seconds of each step ("copy", "index", "parse").
    text : CuPy uint8 array, optional
        The data section already on the device (:func:`copy_text_to_device`).

    Returns
    -------
    (rows, cols) float32 CuPy array, NaN = nodata, or None when the text is not a valid grid
    (parse it on the CPU for the error).
    """
    from concurrent.futures import ThreadPoolExecutor

    be = get_backend(backend)
    cp = be.xp
    mod = be.cuda_module(Path(__file__).with_name("_parse.cu"))
    rows, cols = grid.shape
    times = {} if times is None else times
    t0 = time.perf_counter()
    if text is not None:
        times["copy"] = 0.0  # copied at start-up (pipelines.mst_start)
    elif pool is None:
        with ThreadPoolExecutor(os.cpu_count() or 1) as own:
            text = _copy_to_device(grid, cp, own)
    else:
        text = _copy_to_device(grid, cp, pool)
    t1 = time.perf_counter()
    times.setdefault("copy", t1 - t0)
    size = text.size - 1
    nseg = max(-(-size // _SEG), 1)
    n_starts = cp.zeros(nseg, cp.int32)
    n_lines = cp.zeros(nseg, cp.int32)
    launch = ((-(-nseg // _BLOCK),), (_BLOCK,))
    mod.get_function("count_starts")(*launch, (text, np.int64(size), n_starts, n_lines))
    start_off = cp.cumsum(n_starts, dtype=cp.int64)
    line_off = cp.cumsum(n_lines, dtype=cp.int64)
    n_tok, n_nl = (int(x) for x in cp.stack([start_off[-1], line_off[-1]]).get())
    start_off -= n_starts
    line_off -= n_lines
    del n_starts, n_lines
    starts = cp.empty(max(n_tok, 1), cp.int64)
    lines = cp.empty(n_nl + 2, cp.int64)
    lines[0] = 0
    mod.get_function("write_starts")(*launch, (text, np.int64(size), start_off, line_off,
                                               starts, lines[1:]))
    del start_off, line_off
    # the row structure, as AsciiGrid.row_starts and parse_rows see it
    n_bounds = n_nl + 1
    if int(lines[n_nl].get()) != size:  # a last line without a newline
        lines[n_bounds] = size
        n_bounds += 1
    if n_bounds - 1 < rows or n_tok != rows * cols:
        return None
    per_row = cp.diff(cp.searchsorted(starts[:n_tok], lines[: rows + 1]))
    if not bool(cp.all(per_row == cols)):
        return None
    del lines, per_row
    cp.cuda.Device().synchronize()
    t2 = time.perf_counter()
    times["index"] = t2 - t1
    out = cp.empty((rows, cols), cp.float32)
    n_slow = cp.zeros(1, cp.uint64)
    first_bad = cp.full(1, _NO_BAD, cp.int64)
    nodata = np.float32(grid.nodata if grid.nodata is not None else 0.0)
    mod.get_function("parse_tokens")(
        (-(-n_tok // _BLOCK),), (_BLOCK,),
        (text, starts, np.int64(n_tok), out, nodata, np.int32(grid.nodata is not None),
         np.int32(grid.dialect == "grass"), n_slow, first_bad))
    if int(first_bad.get()[0]) != _NO_BAD:
        return None
    if int(n_slow.get()[0]):
        _finish_slow(grid, cp, out, starts)
    cp.cuda.Device().synchronize()
    times["parse"] = time.perf_counter() - t2
    return out


def _finish_slow(grid, cp, out, starts):
    """Cells marked SLOW_BITS: Python's correctly rounded ``float`` of their tokens, saturated
    at +-FLT_MAX, nodata to NaN (what ``_fix_slow`` does on the CPU)."""
    from ._parse import SLOW_BITS

    flat = out.reshape(-1)
    idx = cp.flatnonzero(flat.view(cp.uint32) == SLOW_BITS)
    offsets = (starts[idx] + grid.data_offset).get()
    values = np.empty(len(offsets), np.float32)
    nodata = np.float32(grid.nodata) if grid.nodata is not None else None
    fd = os.open(grid.path, os.O_RDONLY)
    try:
        for i, off in enumerate(offsets):
            want = 512
            while True:  # a token longer than ``want`` bytes: read more
                piece = os.pread(fd, want, int(off))
                token = piece.split(None, 1)[0]
                if len(token) < len(piece) or len(piece) < want:
                    break
                want *= 2
            v = np.float32(min(max(float(token), -_FLT_MAX), _FLT_MAX))
            values[i] = np.nan if nodata is not None and v == nodata else v
    finally:
        os.close(fd)
    flat[idx] = cp.asarray(values)
