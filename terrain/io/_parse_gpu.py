"""Parsing an ASCII grid's data section on the GPU (the CUDA twin of :mod:`terrain.io._parse`).

1. The data section goes to the device in pieces of whole lines (:func:`piece_bounds`),
   copied by a pool through per-thread pinned buffers and streams while the device parses
   the previous piece and the kernel reads the next ahead (:func:`_prefetch`); a ``\\n``
   after each piece ends its last token.
2. ``count_starts`` / ``write_starts`` (``_parse.cu``) find every token and line start
   (two-pass stream compaction); the host checks the row structure as
   :meth:`AsciiGrid.row_starts` does, so token ``k`` is cell ``k``.
3. ``parse_tokens``: one thread per token, the CPU kernel's exact fast path, so every float32
   is the CPU's bit for bit; other tokens are finished on the host as on the CPU.

Bad text is not reported here: :func:`parse_grid_on_device` returns None and the caller
parses on the CPU, whose :class:`~terrain.errors.InputError` names file and line (design
note: docs/gis.md, "ASCII grids").
"""

import contextlib
import os
import threading
import time
from pathlib import Path

import numpy as np

from ..backend import get_backend

__all__ = ["parse_grid_on_device", "piece_bounds", "pinned_empty", "COPY_BYTES",
           "PIECE_BYTES"]

COPY_BYTES = 8 << 20   # text read and copied to the device per task
#: text per piece of :func:`parse_grid_on_device` (two on the device at once, with an index)
PIECE_BYTES = 512 << 20
_SEG = 64              # bytes per thread in count_starts / write_starts (_parse.cu's SEG)
_BLOCK = 256
_NO_BAD = np.iinfo(np.int64).max


def pinned_empty(cp, nbytes):
    """A NumPy uint8 array of ``nbytes`` in page-locked host memory (``cp``: the backend's
    CuPy): a copy to or from the device through it runs at the bus's speed."""
    mem = cp.cuda.alloc_pinned_memory(int(nbytes))
    return np.frombuffer(mem, np.uint8, int(nbytes))


def _copy_range_to_device(grid, cp, pool, start, size, text):
    """Copy ``size`` bytes of the file from ``start`` into ``text[:size]``, a ``\n`` sentinel
    after; each pool thread alternates two pinned buffers and streams (read one, copy other)."""
    text[size:size + 1] = 10
    local = threading.local()
    fd = os.open(grid.path, os.O_RDONLY)
    # the pool's reads walk the range in order: a doubled read-ahead keeps the disk busy
    # (the 24.7 GB 10-ft text from disk on an H200 host, this pattern without the parse:
    # 11.7-13.8 s with it against 13.2-15.8 s without, three rounds; dd 11.4-16.1 s)
    os.posix_fadvise(fd, start, size, os.POSIX_FADV_SEQUENTIAL)
    used = []

    def copy(a):
        n = min(COPY_BYTES, size - a)
        if not hasattr(local, "ring"):
            local.ring = [(pinned_empty(cp, COPY_BYTES),
                           cp.cuda.Stream(non_blocking=True)) for _ in range(2)]
            local.turn = 0
            used.append(local.ring)
        buf, stream = local.ring[local.turn]
        local.turn ^= 1
        stream.synchronize()  # this buffer's previous copy is done
        got = os.preadv(fd, [memoryview(buf)[:n]], start + a)
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
    cp.cuda.get_current_stream().synchronize()  # the sentinel (the copies: above)


def _parse_piece(grid, mod, cp, text, size, base, first_row, out, times):
    """Index and parse one piece (whole lines from grid row ``first_row``, file offset
    ``base``) into ``out``; the piece's line count, or None when it is not a valid grid."""
    rows, cols = grid.shape
    t1 = time.perf_counter()
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
    n_lines_piece = n_bounds - 1
    data_rows = max(0, min(rows - first_row, n_lines_piece))
    if n_tok != data_rows * cols:  # also: no token on a line after the grid's rows
        return None
    if data_rows:
        per_row = cp.diff(cp.searchsorted(starts[:n_tok], lines[: data_rows + 1]))
        # extremes, not ``per_row == cols``: CuPy sends an array-scalar operator through
        # NumPy's ufunc, whose first call imports cupyx.scipy.special into the process
        if cp.stack([per_row.min(), per_row.max()]).get().tolist() != [cols, cols]:
            return None
        del per_row
    del lines
    cp.cuda.get_current_stream().synchronize()  # for the times (not the other threads' work)
    t2 = time.perf_counter()
    times["index"] = times.get("index", 0.0) + t2 - t1
    if n_tok:
        flat = out.reshape(-1)[first_row * cols: first_row * cols + n_tok]
        n_slow = cp.zeros(1, cp.uint64)
        first_bad = cp.full(2, _NO_BAD, cp.int64)  # a bad token, an integer float32 rounds
        nodata = np.float64(grid.nodata if grid.nodata is not None else 0.0)
        mod.get_function("parse_tokens")(
            (-(-n_tok // _BLOCK),), (_BLOCK,),
            (text, starts, np.int64(n_tok), flat, nodata, np.int32(grid.nodata is not None),
             np.int32(grid.dialect == "grass"), n_slow, first_bad, first_bad[1:]))
        bad, rounded = (int(v) for v in first_bad.get())
        if bad != _NO_BAD:
            return None
        if rounded != _NO_BAD:
            row, col = divmod(first_row * cols + rounded, cols)
            grid.warn_rounded(row, col, _token_at(grid, int(starts[rounded].get()) + base))
        if int(n_slow.get()[0]) and not _finish_slow(grid, cp, flat, starts, base, first_row):
            return None
    times["parse"] = times.get("parse", 0.0) + time.perf_counter() - t2
    return n_lines_piece


def _finish_slow(grid, cp, flat, starts, base, first_row):
    """Cells marked SLOW_BITS finished by ``AsciiGrid.slow_value``, as on the CPU; False
    when a value is beyond float32 (the CPU parser then says where)."""
    from ..errors import InputError
    from ._parse import SLOW_BITS

    idx = cp.flatnonzero(flat.view(cp.uint32) == SLOW_BITS)
    offsets = (starts[idx] + base).get()
    values = np.empty(len(offsets), np.float32)
    cols = grid.shape[1]
    fd = os.open(grid.path, os.O_RDONLY)
    try:
        for i, (k, off) in enumerate(zip(idx.get().tolist(), offsets)):
            try:
                values[i] = grid.slow_value(_token_at(grid, int(off), fd),
                                            *divmod(first_row * cols + k, cols))
            except InputError:
                return False
    finally:
        os.close(fd)
    flat[idx] = cp.asarray(values)
    return True


def _token_at(grid, offset, fd=None):
    """The token (bytes) at file offset ``offset`` of the grid (``fd``: the file, open)."""
    if fd is None:
        with open(grid.path, "rb") as f:
            return _token_at(grid, offset, f.fileno())
    want = 512
    while True:  # a token longer than ``want`` bytes: read more
        piece = os.pread(fd, want, offset)
        token = piece.split(None, 1)[0]
        if len(token) < len(piece) or len(piece) < want:
            return token
        want *= 2


def _prefetch(path, a, b):
    """Ask the kernel to read bytes ``[a, b)`` of the file into the page cache, in the
    background. The pool's reads alone kept the disk less busy inside a run, whose forest
    tasks share the process's threads, than by themselves: the 10-ft text (24.7 GB) from
    disk on an H200 host was read by 17.1-17.7 s into ``mst`` against 12.5-13.8 s alone.
    With the next piece prefetched: 20.6-21.8 s against 23.2-25.6 s whole process
    (interleaved runs; ``dd`` read the file in 12.7-14.1 s there)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, a, b - a, os.POSIX_FADV_WILLNEED)
    finally:
        os.close(fd)


def piece_bounds(grid, piece_bytes=PIECE_BYTES):
    """File offsets ``[data_offset, ..., size]`` cutting the data section into pieces of
    whole lines of about ``piece_bytes``; reads a few bytes at each bound, not the text.

    >>> import tempfile
    >>> from terrain.io import open_grid, write_synth
    >>> path = os.path.join(tempfile.mkdtemp(), "s.asc")
    >>> _ = write_synth(path, 60, 80, seed=1)
    >>> g = open_grid(path)
    >>> b = piece_bounds(g, 10000)
    >>> b[0] == g.data_offset, b[-1] == g.size, len(b) > 2
    (True, True, True)
    """
    bounds = [grid.data_offset]
    fd = os.open(grid.path, os.O_RDONLY)
    try:
        while grid.size - bounds[-1] > piece_bytes:
            at, want, cut = bounds[-1] + piece_bytes, 1 << 16, None
            while at < grid.size:
                chunk = os.pread(fd, want, at)
                k = chunk.find(b"\n")
                if k >= 0:
                    cut = at + k + 1
                    break
                if not chunk:
                    break
                at += len(chunk)
                want = min(want * 2, 64 << 20)
            if cut is None or cut >= grid.size:
                break
            bounds.append(cut)
    finally:
        os.close(fd)
    bounds.append(grid.size)
    return bounds


def parse_grid_on_device(grid, out, backend="gpu", pool=None, times=None, on_rows=None,
                         piece_bytes=None):
    """Parse the ASCII grid ``grid`` into ``out`` on the device (module docstring); device
    memory beyond ``out`` is two pieces and one index; every value is the CPU's, bit for bit.

    Parameters
    ----------
    grid : AsciiGrid
    out : (rows, cols) float32 CuPy array
    backend : str or Backend (the GPU)
    pool : concurrent.futures.Executor, optional
        Threads reading the file (default: ``os.cpu_count()`` of them).
    times : dict, optional
        Gets the seconds of "copy" (waiting for pieces), "index" and "parse".
    on_rows : callable, optional
        ``on_rows(r0, r1)`` in this thread once rows ``r0:r1`` of ``out`` hold their values.
    piece_bytes : int, optional

    Returns
    -------
    ``out``, or None when the text is not a valid grid (parse it on the CPU for the error).
    """
    from concurrent.futures import ThreadPoolExecutor

    be = get_backend(backend)
    cp = be.xp
    mod = be.cuda_module(Path(__file__).with_name("_parse.cu"))
    rows, cols = grid.shape
    if tuple(out.shape) != (rows, cols):
        raise ValueError(f"parse_grid_on_device: out {out.shape} is not the grid's {grid.shape}")
    times = {} if times is None else times
    bounds = piece_bounds(grid, piece_bytes or PIECE_BYTES)
    pieces = list(zip(bounds[:-1], bounds[1:]))
    longest = max((b - a for a, b in pieces), default=0)
    texts = [cp.empty(longest + 1, cp.uint8) for _ in range(min(2, len(pieces)))]
    own = None
    if pool is None:
        pool = own = ThreadPoolExecutor(os.cpu_count() or 1)
    first_row = 0
    try:
        with ThreadPoolExecutor(1) as feeder:  # orders the copies; the pool does them
            def copy(k):
                a, b = pieces[k]
                if k + 1 < len(pieces):  # the disk reads the next piece while this one is copied
                    _prefetch(grid.path, *pieces[k + 1])
                _copy_range_to_device(grid, cp, pool, a, b - a, texts[k % 2])

            pending = feeder.submit(copy, 0) if pieces else None
            for k, (a, b) in enumerate(pieces):
                t0 = time.perf_counter()
                pending.result()
                times["copy"] = times.get("copy", 0.0) + time.perf_counter() - t0
                # the other buffer is free: the previous piece's parse has returned
                pending = feeder.submit(copy, k + 1) if k + 1 < len(pieces) else None
                try:
                    lines = _parse_piece(grid, mod, cp, texts[k % 2], b - a, a, first_row,
                                         out, times)
                except BaseException:
                    if pending is not None:
                        pending.cancel()
                        with contextlib.suppress(BaseException):
                            pending.result()
                    raise
                if lines is None:
                    if pending is not None:
                        with contextlib.suppress(BaseException):
                            pending.result()
                    return None
                done = min(rows, first_row + lines)
                if on_rows is not None and done > first_row:
                    on_rows(first_row, done)
                first_row += lines
    finally:
        if own is not None:
            own.shutdown()
    if first_row < rows:
        return None
    return out
