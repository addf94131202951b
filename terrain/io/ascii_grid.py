"""ESRI and GRASS ASCII grids: header parsing and a streaming, parallel row-band parser.

The header is validated eagerly, key by key (every error names the file and line). The data
is parsed in two passes over independent byte ranges (parallel, bounded memory):
:meth:`AsciiGrid.newline_offsets` finds line starts, :meth:`AsciiGrid.row_starts` joins them
into rows, :meth:`AsciiGrid.read_rows` parses a band of rows (:mod:`terrain.io._parse`) into
float32, NaN nodata, bit for bit GDAL's values (design note: docs/gis.md, "ASCII grids").

>>> grid = open_ascii_grid("data/sample.asc")   # header only: nothing else is read yet
>>> grid.shape, grid.nodata
((300, 400), -9999.0)
"""

import math
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from .outputs import check_input_file
from .raster import Grid

__all__ = ["AsciiGrid", "open_ascii_grid", "looks_like_ascii_grid", "float32_value",
           "check_geometry", "ESRI_KEYS", "GRASS_KEYS", "BLOCK_BYTES", "INDEX_CHUNK_BYTES",
           "FLOAT32_MAX"]

ESRI_KEYS = ("ncols", "nrows", "xllcorner", "xllcenter", "yllcorner", "yllcenter", "cellsize",
             "dx", "dy", "nodata_value")
GRASS_KEYS = ("north", "south", "east", "west", "rows", "cols", "null", "type", "multiplier")
GRASS_TYPES = ("int", "float", "double")

BLOCK_BYTES = 8 << 20         # text parsed per task when a whole grid is parsed on a pool
INDEX_CHUNK_BYTES = 32 << 20  # bytes scanned for newlines per index task
_HEADER_PROBE = 1 << 16       # a header longer than this is not a grid header
_DBL_MIN = float(np.finfo(np.float64).tiny)  # the smallest normal double
#: the largest float32 (GDAL clamps values beyond it; they are refused here)
FLOAT32_MAX = float(np.finfo(np.float32).max)
_buffers = threading.local()  # each thread's text buffer (bytes read with pread)


def _buffer(nbytes):
    """This thread's text buffer, at least ``nbytes`` long (grown, never shrunk)."""
    buf = getattr(_buffers, "buf", None)
    if buf is None or buf.size < nbytes:
        buf = _buffers.buf = np.empty(max(int(nbytes), BLOCK_BYTES), np.uint8)
    return buf


@dataclass(frozen=True)
class AsciiGrid(Grid):
    """A validated ASCII grid header (:class:`~terrain.io.raster.Grid`; ``crs`` from a
    ``.prj`` beside it, ``*`` nodata too in GRASS grids), its ``dialect`` ('esri' or
    'grass'), the byte offset and 1-based line of its first data row (``data_offset``,
    ``data_line``) and the file ``size``."""

    dialect: str
    data_offset: int = 0
    data_line: int = 1
    size: int = 0

    def index_ranges(self, chunk_bytes=INDEX_CHUNK_BYTES):
        """Byte ranges ``(a, b)`` covering the data section, for :meth:`newline_offsets`."""
        return [(a, min(a + chunk_bytes, self.size))
                for a in range(self.data_offset, self.size, chunk_bytes)]

    def newline_offsets(self, a, b):
        """File offsets just after each newline in ``[a, b)`` (int64), scanned in blocks with
        ``memchr`` (the GIL released), so the ranges of one file index in parallel."""
        from ._parse import newline_offsets

        rows = max(self.shape[0], 1)
        per_byte = rows / max(self.size - self.data_offset, 1)
        parts = []
        for p in range(a, b, BLOCK_BYTES):
            q = min(p + BLOCK_BYTES, b)
            parts.append(newline_offsets(self.read_bytes(p, q), p, int((q - p) * per_byte) + 16))
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def read_bytes(self, a, b, out=None):
        """Bytes ``[a, b)`` of the file (this thread's buffer, or ``out``) read with ``pread``;
        :class:`InputError` when the file was cut short since its header was read."""
        n = b - a
        view = (_buffer(n) if out is None else out)[:n]
        fd = os.open(self.path, os.O_RDONLY)
        try:
            got = 0
            while got < n:
                k = os.preadv(fd, [memoryview(view)[got:]], a + got)
                if k <= 0:
                    raise InputError(f"{self.path}: file changed while being read (it ends "
                                     f"at byte {a + got}, its header was read at "
                                     f"{self.size} bytes)")
                got += k
        finally:
            os.close(fd)
        return view

    def row_starts(self, pieces):
        """Byte boundaries of the ``nrows`` data rows from the :meth:`newline_offsets` of
        :meth:`index_ranges`; :class:`InputError` for too few or too many rows."""
        nrows = self.shape[0]
        bounds = np.concatenate([np.array([self.data_offset], dtype=np.int64), *pieces])
        if bounds[-1] != self.size:
            bounds = np.append(bounds, np.int64(self.size))  # last line without newline
        n_lines = len(bounds) - 1
        if n_lines < nrows:
            line = self.data_line + max(n_lines - 1, 0)
            raise InputError(f"{self.path}:{line}: file ends after {n_lines} of "
                             f"{self._rows_key}={nrows} rows{self._layout_hint()}")
        if n_lines > nrows:
            self._check_only_space_after(int(bounds[nrows]), self.data_line + nrows)
        return np.ascontiguousarray(bounds[: nrows + 1], dtype=np.int64)

    def _check_only_space_after(self, offset, line):
        with open(self.path, "rb") as f:
            f.seek(offset)
            while True:
                block = f.read(1 << 20)
                if not block:
                    return
                stripped = block.lstrip()
                if stripped:
                    skipped = block[: len(block) - len(stripped)]
                    line += skipped.count(b"\n")
                    raise InputError(f"{self.path}:{line}: more data rows than "
                                     f"{self._rows_key}={self.shape[0]}"
                                     f"{self._layout_hint()}")
                line += block.count(b"\n")

    def _layout_hint(self):
        """After a row-count or value-count error: when the data section holds exactly
        ``nrows x ncols`` values (counted here, on the error's path, for files of up to
        :data:`HINT_BYTES`), a note that they are not one row a line, which GDAL reads and
        terrain does not (its parser splits the rows by their line ends, in parallel). Data
        lines ending with a carriage return alone raise :data:`LONE_CR` instead."""
        end = self.size if self.size <= HINT_BYTES else self.data_offset + (1 << 20)
        with open(self.path, "rb") as f:
            f.seek(self.data_offset)
            data = f.read(end - self.data_offset)
        lone = re.search(rb"\r(?!\n)", data)
        if lone:
            line = self.data_line + data.count(b"\n", 0, lone.start())
            raise InputError(f"{self.path}:{line}: {LONE_CR}")
        if self.size > HINT_BYTES:
            return ""
        values = len(data.split())
        if values != self.shape[0] * self.shape[1]:
            return ""
        return (f" (its {values} values are all there, but not one row of "
                f"{self._cols_key}={self.shape[1]} values a line with no blank line between: "
                "GDAL reads such a file; convert it with gdal_translate)")

    @property
    def _rows_key(self):
        return "nrows" if self.dialect == "esri" else "rows"

    @property
    def _cols_key(self):
        return "ncols" if self.dialect == "esri" else "cols"

    def read_rows(self, r0, r1, starts, out=None):
        """Data rows ``r0:r1`` as float32 (NaN = nodata), into ``out`` when given."""
        return self.read_rows_stats(r0, r1, starts, out)[0]

    def read_rows_stats(self, r0, r1, starts, out=None):
        """:meth:`read_rows`, and ``(nodata cells, min, max)`` of the rows read (NaN ignored;
        ``inf, -inf`` when every cell is nodata), counted during the parse."""
        nrows, ncols = self.shape
        if not 0 <= r0 <= r1 <= nrows:
            raise ValueError(f"read_rows: rows {r0}:{r1} outside 0:{nrows}")
        if out is None:
            out = np.empty((r1 - r0, ncols), dtype=np.float32)
        elif out.shape != (r1 - r0, ncols) or out.dtype != np.float32:
            raise ValueError(f"read_rows: out must be float32 {(r1 - r0, ncols)}, got "
                             f"{out.dtype} {out.shape}")
        nan, lo, hi = 0, math.inf, -math.inf
        if r1 == r0:
            return out, (nan, lo, hi)
        starts = np.asarray(starts, dtype=np.int64)
        row_bytes = max(1.0, float(starts[r1] - starts[r0]) / (r1 - r0))
        step = max(1, int(BLOCK_BYTES // row_bytes))
        for a in range(r0, r1, step):
            b = min(a + step, r1)
            base = int(starts[a])
            text = self.read_bytes(base, int(starts[b]))
            n, l, h = self._parse_text(text, starts[a:b + 1] - base, a, out[a - r0:b - r0])
            nan, lo, hi = nan + n, min(lo, l), max(hi, h)
        return out, (nan, lo, hi)

    def _parse_text(self, text, local, r0, out):
        """Parse rows ``r0...`` of ``text`` (spans ``local``) into ``out``; their stats."""
        from ._parse import PARSE_OK, nan_min_max, parse_rows

        nodata = self.nodata if self.nodata is not None else 0.0
        status, row, count, t0, t1, n_slow, rounded, stats = parse_rows(
            text, local, self.shape[1], out, nodata, self.nodata is not None,
            self.dialect == "grass")
        if status != PARSE_OK:
            self._raise_parse_error(status, r0 + row, count, text[t0:t1])
        if rounded is not None:
            r, c = rounded
            self.warn_rounded(r0 + r, c, bytes(text[local[r]:local[r + 1]]).split()[c])
        if n_slow:
            self._fix_slow(text, local, out, r0)
            stats = nan_min_max(out)
        return stats

    def read_all(self, pool=None, out=None, on_block=None):
        """The whole grid parsed into ``out`` (float32, NaN = nodata) on a thread pool, the
        text read once in blocks of whole lines that the pool parses without the GIL.
        ``on_block(r0, r1)`` runs in the worker once rows ``r0:r1`` are parsed (e.g. to start
        their copy to a device). Errors: :meth:`row_starts`' and :meth:`read_rows`'.

        Returns
        -------
        (out, stats)
            ``stats``: ``(nodata cells, min, max)`` of each block, in row order.

        Examples
        --------
        >>> z, stats = open_ascii_grid("data/sample.asc").read_all()
        >>> z.shape, sum(s[0] for s in stats)
        ((300, 400), 5972)
        """
        import queue
        from concurrent.futures import ThreadPoolExecutor

        from ._parse import newline_offsets

        if pool is None:
            with ThreadPoolExecutor(os.cpu_count() or 1) as own:
                return self.read_all(own, out, on_block)
        rows, cols = self.shape
        if out is None:
            out = np.empty((rows, cols), dtype=np.float32)
        free = queue.Queue()
        for _ in range(getattr(pool, "_max_workers", 2) + 1):
            free.put(np.empty(BLOCK_BYTES, np.uint8))

        def parse(buf, local, r0):
            try:
                r1 = r0 + len(local) - 1
                stats = self._parse_text(buf, local, r0, out[r0:r1])
                if on_block is not None:
                    on_block(r0, r1)
                return stats
            finally:
                free.put(buf)

        futures, row, pos, carry = [], 0, self.data_offset, b""
        try:
            while row < rows:
                if pos >= self.size and not carry:
                    line = self.data_line + max(row - 1, 0)
                    raise InputError(f"{self.path}:{line}: file ends after {row} of "
                                     f"{self._rows_key}={rows} rows{self._layout_hint()}")
                buf = free.get()
                want = min(max(BLOCK_BYTES, 2 * len(carry)), len(carry) + self.size - pos)
                if buf.size < want:
                    buf = np.empty(want, np.uint8)  # a line longer than a block
                buf[:len(carry)] = np.frombuffer(carry, np.uint8)
                got = want - len(carry)
                self.read_bytes(pos, pos + got, out=buf[len(carry):want])
                pos += got
                data = buf[:want]
                ends = newline_offsets(data, 0, want // max(1, (self.size - self.data_offset)
                                                           // rows) + 16)
                if pos >= self.size and (not ends.size or ends[-1] != want):
                    ends = np.append(ends, want)  # the last line, without a newline
                ends = ends[: rows - row]
                if not ends.size:  # no whole line yet: read on
                    carry = bytes(data)
                    free.put(buf)
                    continue
                local = np.concatenate([[0], ends]).astype(np.int64)
                futures.append(pool.submit(parse, buf, local, row))
                row += len(ends)
                carry = bytes(data[ends[-1]:])
            if carry.strip():
                raise InputError(f"{self.path}:{self.data_line + rows}: more data rows than "
                                 f"{self._rows_key}={rows}{self._layout_hint()}")
            if pos < self.size:
                self._check_only_space_after(pos, self.data_line + rows + carry.count(b"\n"))
            return out, [f.result() for f in futures]
        finally:
            for f in futures:  # after an error: the parses still running end first
                f.cancel()
            for f in futures:
                if not f.cancelled():
                    f.exception()

    def _fix_slow(self, text, local, out, r0):
        """Exact values (Python's correctly rounded ``float``) for cells the kernel marked as
        beyond its fast path; a value beyond float32 is refused with its line."""
        from ._parse import SLOW_BITS

        marked = out.view(np.uint32) == SLOW_BITS
        for r in np.flatnonzero(marked.any(axis=1)):
            tokens = bytes(text[local[r]: local[r + 1]]).split()
            for c in np.flatnonzero(marked[r]):
                out[r, c] = self.slow_value(tokens[c], r0 + r, c)

    def slow_value(self, token, row, col):
        """The float32 of a token beyond the kernels' fast path (NaN when nodata, by their
        rule: an integer equal to the nodata, another number GDAL's float32 nodata test
        takes), as they give it; :class:`InputError` beyond float32, unless the token is the
        nodata itself (``NODATA_value -1e39``: its cells are nodata, as GDAL masks them)."""
        text = bytes(token).decode("latin-1")
        if self.nodata is not None and _number(text) and float(text) == self.nodata:
            return np.float32(np.nan)
        f = float32_value(token, f"{self.path}:{self.data_line + row}",
                          f"(row {row + 1}, column {col + 1})")
        integral = not any(c in token for c in b".eE")
        if self.nodata is not None and (int(token) == self.nodata if integral
                                        else gdal_nodata_equal(f, self.nodata)):
            return np.float32(np.nan)
        if integral and int(f) != int(token):
            self.warn_rounded(row, col, token)
        return f

    def warn_rounded(self, row, col, token):
        """:func:`~terrain.io.raster.warn_rounded`, once a file, for the integer ``token`` of
        cell ``(row, col)``, which float32 rounds (GDAL reads a grid of integers as Int32)."""
        from .raster import warn_rounded

        v = int(token)
        if abs(v) >= 2 ** 63:  # no integer type holds it for the message
            return
        given = np.zeros((1, col + 1), np.int32 if abs(v) < 2 ** 31 else np.int64)
        given[0, col] = v  # the cells before it are 0, exact
        warn_rounded(self.path, given, given.astype(np.float32), row0=row, once=True)

    def _raise_parse_error(self, status, row, count, token):
        from ._parse import PARSE_BAD_TOKEN

        line = self.data_line + row
        if status == PARSE_BAD_TOKEN:
            text = bytes(token[:40]).decode("latin-1")
            where = f"(row {row + 1}, column {count + 1})"
            if _number(text) and math.isinf(float(text)):  # GDAL clamps it to +-FLT_MAX
                raise InputError(f"{self.path}:{line}: value {text} {where} is infinite: "
                                 "elevations are finite numbers")
            raise InputError(f"{self.path}:{line}: non-numeric token {text!r} {where}")
        raise InputError(f"{self.path}:{line}: row {row + 1} has {count} values, expected "
                         f"{self._cols_key}={self.shape[1]}{self._layout_hint()}")


def gdal_nodata_equal(f, nodata):
    """GDAL's test of the float32 ``f`` against ``nodata`` cast to float32 (ARE_REAL_EQUAL
    of gdal_priv.h, in float32 arithmetic, as the C and CUDA parsers do it): equal, or within
    2^-22 of their sum, about 4 units in the last place.

    >>> gdal_nodata_equal(np.float32(-9999.00390625), -9999.0)   # 4 steps away
    True
    >>> gdal_nodata_equal(np.float32(-9999.0048828125), -9999.0) # 5
    False
    """
    with np.errstate(over="ignore"):
        nd = np.float32(nodata)
        return bool(f == nd or abs(f - nd) < np.float32(2.0 ** -23) * abs(f + nd) * np.float32(2))


def float32_value(token, where, detail=""):
    """The float32 of a number token (bytes) as strtod then a float32 cast give it, or
    :class:`InputError` (``where``: ``file:line``) when it is not a number or beyond float32.

    >>> float(float32_value(b"0.1", "x:1"))
    0.10000000149011612
    >>> float32_value(b"1e39", "x:3", "(row 1, column 2)")
    Traceback (most recent call last):
    terrain.errors.InputError: x:3: value 1e39 (row 1, column 2) is beyond the float32 range (±3.4028235e+38)
    """
    text = bytes(token).decode("latin-1")
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"{where}: non-numeric token {text[:40]!r} {detail}".rstrip()) from None
    with np.errstate(over="ignore"):
        f = np.float32(v)
    if not np.isfinite(f):
        raise InputError(f"{where}: value {text[:40]} {detail} is beyond the float32 range "
                         f"(±{FLOAT32_MAX:.8g})".replace("  ", " "))
    return f


#: the largest file whose values a layout error counts (:meth:`AsciiGrid._layout_hint`)
HINT_BYTES = 256 << 20
#: the error of lines that end with a carriage return alone
LONE_CR = ("its lines end with a carriage return alone (classic Mac OS): make them line feeds "
           "first (tr '\\r' '\\n')")


#: the bytes at a grid's end searched for DOS end-of-file marks (:func:`_eof_marks`)
_TAIL_PROBE = 4096


def _eof_marks(tail):
    """Bytes to drop from the end of ``tail``, a file's last bytes: a DOS end-of-file mark
    (Ctrl-Z, 0x1A) and what follows it when that is only more marks and whitespace (a
    newline after it, several of them), which GDAL reads past.

    >>> _eof_marks(b"3 4\\n\\x1a\\n"), _eof_marks(b"3 4\\n\\x1a\\x1a"), _eof_marks(b"3 4\\n")
    (2, 2, 0)
    """
    end = re.search(rb"\x1a[\x1a\s]*\Z", tail)
    return 0 if end is None else len(tail) - end.start()


def looks_like_ascii_grid(path):
    """True when the file starts (after blanks) with an ESRI or GRASS header key."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return False
    words = head.lstrip().split(None, 1)
    if not words:
        return False
    key = words[0].split(b":")[0].decode("latin-1").lower()
    return key in ESRI_KEYS or key in GRASS_KEYS


def open_ascii_grid(path):
    """Read and validate the header of an ESRI or GRASS ASCII grid.

    Parameters
    ----------
    path : str or Path

    Returns
    -------
    AsciiGrid

    Raises
    ------
    InputError
        Missing or unreadable file, empty file, missing, unknown, repeated or invalid header
        keys; the message starts with ``path:line``.

    Examples
    --------
    >>> g = open_ascii_grid("data/sample.asc")
    >>> g.shape, g.cellsize
    ((300, 400), (10.0, 10.0))
    """
    path = Path(path)
    size = check_readable_file(path)
    with open(path, "rb") as f:
        f.seek(max(0, size - _TAIL_PROBE))
        size -= _eof_marks(f.read())
        f.seek(0)
        head = f.read(min(_HEADER_PROBE, size))
    if not head.strip():
        raise InputError(f"{path}: empty file")
    if b"\x00" in head[:512]:  # a binary file named as a text grid: the reader says why
        raise InputError(f"{path}: not an ESRI or GRASS ASCII grid (binary data)")
    first_line = head.split(b"\n", 1)[0]
    if b"\r" in first_line.rstrip(b"\r"):
        raise InputError(f"{path}: {LONE_CR}")
    entries, data_offset, data_line = _split_header(path, head, size)
    if not entries:
        raise InputError(f"{path}:1: no header (expected ESRI 'ncols ...' or GRASS 'north: ...')")
    grass = ":" in entries[0][1] or entries[0][2].startswith(":")
    keys = _collect_keys(path, entries, grass)
    if grass:
        shape, gt, nodata = _grass_georef(path, keys, data_line)
    else:
        shape, gt, nodata = _esri_georef(path, keys, data_line)
    if nodata is not None and math.isnan(nodata):  # what GDAL reads: NaN cells are nodata,
        nodata = None                              # as they are without one
    crs, divisor = _prj_crs(path)
    if divisor != 1:  # as GDAL does
        gt = tuple(v / divisor for v in gt)
    size_key = ("east" if grass else "dx" if "dx" in keys else "cellsize")
    check_geometry(gt, shape, f"{path}:{keys[size_key][1]}")
    _check_size_fits(path, keys, shape, size - data_offset, grass)
    header = {k: v for k, (v, _) in keys.items()}
    return AsciiGrid(path=path, dialect="grass" if grass else "esri", shape=shape,
                     geotransform=gt, nodata=nodata, crs=crs, header=header,
                     data_offset=data_offset, data_line=data_line, size=size)


def check_geometry(geotransform, shape, where):
    """Refuse a georeference floating point cannot hold: an extent beyond the double range,
    or a cell size whose square under- or overflows (slopes divide by the diagonal).
    ``where`` starts the message (``file:line``).

    >>> check_geometry((0.0, 1e-320, 0.0, 5.0, 0.0, -1e-320), (2, 2), "g.asc:5")
    Traceback (most recent call last):
    terrain.errors.InputError: g.asc:5: cell size 1e-320 x 1e-320 is too small: its square underflows
    """
    x0, dx, _, y0, _, dy = (float(v) for v in geotransform)
    dx, dy = abs(dx), abs(dy)
    rows, cols = shape
    if not (dx * dx >= _DBL_MIN and dy * dy >= _DBL_MIN):
        raise InputError(f"{where}: cell size {dx!r} x {dy!r} is too small: its square "
                         "underflows")
    corners = (x0, y0, x0 + cols * dx, y0 - rows * dy)
    if not (math.isfinite(dx * dx + dy * dy) and all(math.isfinite(v) for v in corners)):
        raise InputError(f"{where}: cell size {dx!r} x {dy!r} puts the grid's extent beyond "
                         "the range of floating point")


def _check_size_fits(path, keys, shape, data_bytes, grass):
    """Refuse at once a header that claims more cells than the data section has bytes
    (every value takes at least one); :meth:`AsciiGrid.row_starts` finds the rest."""
    cells = shape[0] * shape[1]
    if data_bytes < cells:  # the line of the larger claim
        line = keys[("cols" if grass else "ncols") if shape[1] >= shape[0]
                    else ("rows" if grass else "nrows")][1]
        raise InputError(f"{path}:{line}: header claims {shape[0]} x {shape[1]} = {cells} cells "
                         f"but the file holds {data_bytes} bytes of data (at least one per cell)")


def check_readable_file(path):
    """The size of the grid file ``path``; :class:`InputError` when it is missing, a
    directory, a FIFO or a device, unreadable or empty."""
    check_input_file(path)  # a FIFO or a device (or ``-``): refused before any read
    if not path.exists():
        if str(path).startswith("/vsi"):  # as gdalinfo takes it: no such folder here
            raise InputError(f"{path}: GDAL's virtual file systems (/vsigzip/, /vsizip/, "
                             "/vsicurl/, ...) are not read: give the file's own path (a "
                             "compressed grid decompressed first)")
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a grid file")
    try:
        size = path.stat().st_size
        with open(path, "rb"):
            pass
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    if size == 0:
        raise InputError(f"{path}: empty file")
    return size


def _split_header(path, head, size):
    """Header lines as ``(lineno, raw_key, rest)``, plus the data's byte offset and line;
    the header ends at the first line that starts (after blanks) like a number or ``*``, or
    with a word that is one (``nan``, ``inf``)."""
    entries = []
    pos = 3 if head.startswith(b"\xef\xbb\xbf") else 0  # a UTF-8 byte order mark
    lineno = 1
    while True:
        first = pos
        while first < len(head) and head[first] in b" \t\r\v\f":
            first += 1
        if first < len(head) and chr(head[first]) in "0123456789+-.*":
            return entries, pos, lineno
        nl = head.find(b"\n", pos)
        token = head[first:nl if nl >= 0 else len(head)].split(None, 1)[:1]
        if token and _number(token[0]):  # nan or inf: a data row, which the values refuse
            return entries, pos, lineno
        if nl < 0:
            if len(head) < size:
                raise InputError(f"{path}:{lineno}: header line too long or not a grid header")
            nl = len(head)
        stripped = head[pos:nl].strip()
        if stripped:
            parts = stripped.decode("latin-1").split(None, 1)
            entries.append((lineno, parts[0], parts[1] if len(parts) > 1 else ""))
        if nl >= len(head):
            # header only: no data lines; what the header lacks is named at the file's
            # last line (a line past the end would name none)
            return entries, size, lineno if pos < len(head) else max(lineno - 1, 1)
        pos = nl + 1
        lineno += 1


def _number(token):
    try:
        float(token)
    except ValueError:
        return False
    return True


def _shown(text, limit=40):
    """``text`` quoted for a message, cut to ``limit`` characters (a header line may be a
    whole file's)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _collect_keys(path, entries, grass):
    """lower-case key -> (value text, line), checking unknown and repeated keys."""
    allowed = GRASS_KEYS if grass else ESRI_KEYS
    keys = {}
    for lineno, raw, rest in entries:
        if grass:
            key, sep, value = f"{raw} {rest}".partition(":")
            key, value = key.strip().lower(), value.strip()
            if not sep:
                raise InputError(f"{path}:{lineno}: expected 'key: value' in a GRASS header, "
                                 f"got {_shown(raw)}")
        else:
            key, value = raw.lower(), rest.strip()
        if key not in allowed:
            kind = "GRASS" if grass else "ESRI"
            raise InputError(f"{path}:{lineno}: unknown {kind} header key {_shown(key)}")
        if key in keys:
            raise InputError(f"{path}:{lineno}: repeated header key {key!r} "
                             f"(first on line {keys[key][1]})")
        if "\r" in value:
            raise InputError(f"{path}:{lineno}: {LONE_CR}")
        if not value or len(value.split()) != 1:
            raise InputError(f"{path}:{lineno}: header key {key!r} needs one value, got "
                             f"{_shown(value)}")
        keys[key] = (value, lineno)
    return keys


def _key_value(path, keys, key, data_line, kind):
    """Header ``key`` as ``kind`` ('count', 'number' or 'size'); InputError naming its line."""
    if key not in keys:
        raise InputError(f"{path}:{data_line}: header lacks {key!r}")
    value, line = keys[key]
    convert, valid, what = {
        "count": (int, lambda v: v > 0, "a positive integer"),
        "number": (float, math.isfinite, "a finite number"),
        "nodata": (float, lambda v: not math.isinf(v), "a number (or nan)"),
        "size": (float, lambda v: math.isfinite(v) and v > 0, "a finite positive number"),
    }[kind]
    try:
        v = convert(value)
    except ValueError:
        v = None
    if v is None or not valid(v):
        raise InputError(f"{path}:{line}: {key} must be {what}, got {value!r}")
    return v


def _one_of(path, keys, names, data_line):
    present = [k for k in names if k in keys]
    if not present:
        raise InputError(f"{path}:{data_line}: header lacks {' or '.join(map(repr, names))}")
    if len(present) > 1:
        line = max(keys[k][1] for k in present)
        raise InputError(f"{path}:{line}: header has both {present[0]!r} and {present[1]!r}")
    return present[0]


def _esri_georef(path, keys, data_line):
    ncols = _key_value(path, keys, "ncols", data_line, "count")
    nrows = _key_value(path, keys, "nrows", data_line, "count")
    if "cellsize" in keys and ("dx" in keys or "dy" in keys):
        line = max(keys[k][1] for k in ("cellsize", "dx", "dy") if k in keys)
        raise InputError(f"{path}:{line}: header has both 'cellsize' and 'dx'/'dy'")
    if "cellsize" in keys or not ("dx" in keys or "dy" in keys):
        dx = dy = _key_value(path, keys, "cellsize", data_line, "size")
    else:
        dx = _key_value(path, keys, "dx", data_line, "size")
        dy = _key_value(path, keys, "dy", data_line, "size")
    xkey = _one_of(path, keys, ("xllcorner", "xllcenter"), data_line)
    ykey = _one_of(path, keys, ("yllcorner", "yllcenter"), data_line)
    x0 = _key_value(path, keys, xkey, data_line, "number")
    y0 = _key_value(path, keys, ykey, data_line, "number")
    if xkey == "xllcenter":
        x0 -= dx / 2
    if ykey == "yllcenter":
        y0 -= dy / 2
    nodata = (_key_value(path, keys, "nodata_value", data_line, "nodata")
              if "nodata_value" in keys else None)
    return (nrows, ncols), (x0, dx, 0.0, y0 + nrows * dy, 0.0, -dy), nodata


def _grass_georef(path, keys, data_line):
    rows = _key_value(path, keys, "rows", data_line, "count")
    cols = _key_value(path, keys, "cols", data_line, "count")
    north, south, east, west = (_key_value(path, keys, k, data_line, "number")
                                for k in ("north", "south", "east", "west"))
    dx, dy = (east - west) / cols, (north - south) / rows
    for name, v, k in (("east - west", dx, "east"), ("north - south", dy, "north")):
        if not (math.isfinite(v) and v > 0):
            raise InputError(f"{path}:{keys[k][1]}: cell size ({name}) / "
                             f"{'cols' if k == 'east' else 'rows'} must be finite and positive, "
                             f"got {v!r}")
    if "type" in keys and keys["type"][0].lower() not in GRASS_TYPES:
        value, line = keys["type"]
        raise InputError(f"{path}:{line}: type must be one of {', '.join(GRASS_TYPES)}, "
                         f"got {value!r}")
    if "multiplier" in keys and keys["multiplier"][0] not in ("1", "1.0"):
        value, line = keys["multiplier"]
        raise InputError(f"{path}:{line}: multiplier {value}: r.in.ascii multiplies the values "
                         "by it and GDAL ignores it, so the elevations depend on the reader; "
                         "multiply them into the file first (r.mapcalc, gdal_calc)")
    # 'null: *' (r.in.ascii's default) says what '*' says anyway: no nodata value
    nodata = (_key_value(path, keys, "null", data_line, "nodata")
              if "null" in keys and keys["null"][0] != "*" else None)
    return (rows, cols), (west, dx, 0.0, north, 0.0, -dy), nodata


def _prj_crs(path):
    """``(WKT, divisor)`` of a ``.prj`` (else ``.PRJ``) beside the grid, as GDAL reads it, or
    ``(None, 1)``; GDAL divides the georeference of a grid in geographic seconds (``Units DS``)
    by ``divisor`` 3600."""
    prj = next((p for p in (path.with_suffix(".prj"), path.with_suffix(".PRJ")) if p.is_file()),
               None)
    if prj is None:
        return None, 1
    from rasterio.crs import CRS
    try:
        return CRS.from_user_input(prj.read_text(errors="replace").strip()).to_wkt(), 1
    except Exception:  # not WKT, EPSG or PROJ: GDAL's ESRI reader may know it (old style)
        return _esri_prj_crs(prj)


def _esri_prj_crs(prj):
    """:func:`_prj_crs` of a ``.prj`` that only GDAL's ESRI reader takes (the old style's
    ``Projection GEOGRAPHIC`` / ``Units DD`` lines): read by GDAL beside a one-cell grid (GDAL
    scans a whole grid to type it, and rasterio has no other route to that reader)."""
    import shutil
    import tempfile

    import rasterio

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe.asc"
        probe.write_text("ncols 1\nnrows 1\nxllcorner 0\nyllcorner 0\ncellsize 1\n0\n")
        try:
            shutil.copyfile(prj, probe.with_suffix(".prj"))
            with rasterio.open(probe) as src:
                crs, cell = src.crs, src.transform.a
        except Exception:  # an unreadable .prj only loses the CRS, as in GDAL
            return None, 1
    return (None, 1) if crs is None else (crs.to_wkt(), round(1 / cell))
