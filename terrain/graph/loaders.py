"""Read sparse graphs from text: SNAP edge lists, Matrix Market, DIMACS ``.gr``, METIS ``.graph``.

Reading (``.gz`` too) makes an :class:`EdgeList` in three plain functions a scheduler can run
as tasks: :func:`plan_graph_file` (the header; a bad one fails before any parsing), one
:func:`parse_graph_chunk` per byte range (the C scanner, GIL released) and
:func:`edges_from_chunks` (line numbers, the first error in file order, SNAP relabelling).
Formats, ids, weights, bounds and error messages: docs/graphs.md ("Formats").
"""

import dataclasses
import gzip
import mmap
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError, warn, where
from ..io import available_memory
from ..io.outputs import check_input_file
from . import _native

__all__ = ["EdgeList", "EdgeChunk", "GraphFilePlan", "read_graph_file", "detect_format",
           "plan_graph_file", "read_whole_file", "parse_graph_chunk", "edges_from_chunks",
           "FORMATS", "DEFAULT_CHUNK_BYTES"]

FORMATS = ("snap", "mtx", "dimacs", "metis")
DEFAULT_CHUNK_BYTES = 64 << 20

(_ERR_NONE, _ERR_TOKEN, _ERR_FEW, _ERR_NEG, _ERR_TAG, _ERR_BIG, _ERR_RANGE, _ERR_LINES,
 _ERR_WEIGHT, _ERR_WEIGHT_INT, _ERR_EXTRA, _ERR_INFINITE, _ERR_WEIGHT_BIG,
 _ERR_EMPTY) = range(14)
_LF = 10  # newline byte
_HEAD_BYTES = 1 << 16       # first read of the head; grows while the header runs past it
_SCAN_BYTES = 1 << 16       # read size while looking for the newline that ends a chunk
_GZIP_RATIO = 4             # guessed text : gzip size ratio, to size a gzip file's chunks

# per format: comment bytes, line tag, what the tag means (edge-list formats)
_SCANNER = {"snap": (ord("#"), ord("%"), 0, ""), "mtx": (ord("%"), 0, 0, ""),
            "dimacs": (ord("c"), 0, ord("a"), "an arc line 'a U V W'")}


@dataclass
class EdgeList:
    """Edges as 0-based endpoint arrays, before any symmetrising or de-duplication.

    Attributes
    ----------
    u, v : ndarray of int64
        Endpoints, ``0 <= u, v < n``.
    n : int
    ids : ndarray of int64 or None
        ``ids[i]`` is vertex ``i``'s id in the file; None means ``id_base + i``.
    id_base : int
    source, fmt : str
        File name (for messages) and one of :data:`FORMATS`.
    weights : ndarray or None
        Edge weights as read: int64 when every token is an integer, else float64 (correctly
        rounded); None when unweighted.
    directed, symmetric : bool
        Arcs are directed (DIMACS ``.gr``); Matrix Market ``symmetric`` (an entry is both).
    """

    u: np.ndarray
    v: np.ndarray
    n: int
    ids: object = None
    id_base: int = 0
    source: str = ""
    fmt: str = ""
    weights: object = None
    directed: bool = False
    symmetric: bool = False


@dataclass(frozen=True)
class GraphFilePlan:
    """What :func:`parse_graph_chunk` needs to parse one chunk of a graph file.

    Made by :func:`plan_graph_file`; small, picklable, holds no file data.

    Attributes
    ----------
    compressed : bool
        Gzip: chunks slice the bytes of :func:`read_whole_file` instead of reading by range.
    length : int or None
        Bytes of the (decompressed) file; None for a gzip file longer than its head.
    body, header_lines : int
        Offset of the first byte after the header, and the newlines before it.
    n, id_base : int
        Declared vertex count (0 for SNAP: the ids that occur); 1 for ``1..n`` formats.
    declared : tuple or None
        ``(lo, hi_u, hi_v)``: the id range the header declares (Matrix Market, DIMACS).
    entries, size_line : int
        Matrix Market: the declared entry count (-1 otherwise) and the size line's number.
    metis : tuple or None
        ``(edges, tokens skipped per line, edge weights present)``.
    wmode, sep : int
        Weight column (:func:`terrain.graph._native.parse_pairs`); ``ord(",")`` or 0.
    counts : tuple or None
        SNAP: ``(a, b, line, next line, its text)``, a first line that may be a header of
        counts, and the content line after it.
    memory : int
        Bytes the reading may take (larger sizes are refused before they are allocated).
    """

    path: str
    fmt: str
    compressed: bool
    length: object
    body: int
    header_lines: int
    chunks: int
    n: int = 0
    id_base: int = 0
    declared: object = None
    entries: int = -1
    size_line: int = 0
    metis: object = None
    wmode: int = 0
    directed: bool = False
    symmetric: bool = False
    sep: int = 0
    counts: object = None
    memory: int = 0

    def nominal_range(self, index, length):
        """Byte range ``[a, b)`` of chunk ``index`` before line alignment (``length``: the
        file's bytes)."""
        if not 0 <= index < self.chunks:
            raise ValueError(f"GraphFilePlan.nominal_range: chunk {index} of {self.chunks}")
        body = min(self.body, length)
        span = length - body
        return body + span * index // self.chunks, body + span * (index + 1) // self.chunks


@dataclass
class EdgeChunk:
    """What :func:`parse_graph_chunk` returns for one chunk: its edges, in file order.

    Attributes
    ----------
    u, v : ndarray of int64
        Endpoints, already 0-based for the 1-based formats (SNAP ids are relabelled later).
    newlines : int
        Newlines in the chunk's bytes (line numbers of the chunks after it).
    error, range_error, weight_error : tuple or None
        ``(newlines before the line, message)`` of the first unparseable line, id out of
        range, record without a (finite) weight.
    w : ndarray or None
        Weights of the chunk's records; 0 where a SNAP line has none.
    weighted : int
        Records that carry a weight.
    """

    u: np.ndarray
    v: np.ndarray
    newlines: int
    error: object = None
    range_error: object = None
    w: object = None
    weighted: int = 0
    weight_error: object = None


def _cannot_read(path, e):
    if isinstance(e, FileNotFoundError):
        return InputError(f"{path}: no such file")
    return InputError(f"{path}: cannot read ({e})")


#: bytes a vertex and an edge record cost while a graph is read, built and traversed: the
#: CSR (row offsets, degrees, block counters; both arcs of an edge) and a traversal's labels
#: and queues per vertex; the two endpoints, a weight and the CSR's arcs per record
BYTES_PER_VERTEX = 48
BYTES_PER_RECORD = 48


def _gb(x):
    return f"{x / 1e9:.1f} GB" if x >= 1e9 else f"{x / 1e6:.1f} MB"


def _too_big(path, what, need, memory, line=None):
    at = where(path, line) if line else str(path)
    return InputError(f"{at}: {what}: about {_gb(need)} to hold, more than the "
                      f"{_gb(memory)} of memory available")


def _check_regular(path):
    """An existing regular file or directory (a cache); FIFOs and devices are refused."""
    check_input_file(path)
    try:
        os.stat(path)
    except OSError as e:
        raise _cannot_read(path, e) from None


def _check_text(path, head):
    """Refuse binary data (a raster, an archive) before any line of it is echoed."""
    sample = head[:4096]
    if sample.size == 0:
        return
    control = np.count_nonzero((sample < 32) & (sample != 9) & (sample != 10)
                               & (sample != 13))
    if control and (np.count_nonzero(sample == 0) or control > sample.size // 100):
        raise InputError(f"{path}: not a text graph file (binary data: a raster or an "
                         "archive?); graphs are read from SNAP edge lists, Matrix Market, "
                         "DIMACS .gr or METIS text, optionally gzip-compressed")


def _read_head(path, compressed, size):
    """``(head, whole)``: the first ``size`` bytes, cut after the last newline unless whole."""
    try:
        opener = gzip.open if compressed else open
        with opener(path, "rb") as f:
            data = f.read(size)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise _cannot_read(path, e) from None
    head = np.frombuffer(data, dtype=np.uint8)
    if head.shape[0] < size:
        return head, True
    nl = np.flatnonzero(head == _LF)
    return head[:int(nl[-1]) + 1 if nl.size else 0], False


def read_whole_file(plan):
    """The whole (decompressed) file of ``plan`` as a uint8 array, which a gzip file's
    chunks slice; a gzip stream whose text and records would pass ``plan.memory`` stops
    with an :class:`InputError`.
    """
    path = Path(plan.path)
    if not plan.compressed:
        try:
            return np.frombuffer(path.read_bytes(), dtype=np.uint8)
        except OSError as e:
            raise _cannot_read(path, e) from None
    parts, size, lines = [], 0, 0
    try:
        with gzip.open(path, "rb") as f:
            while block := f.read(1 << 24):
                parts.append(block)
                size += len(block)
                lines += block.count(b"\n")
                need = size + lines * BYTES_PER_RECORD
                if need > plan.memory:
                    raise _too_big(path, f"decompresses to more than {size} bytes of "
                                   f"{lines}+ lines", need, plan.memory)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise _cannot_read(path, e) from None
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def _line_text(buf, pos, width=60):
    end = pos
    n = buf.shape[0]
    while end < n and buf[end] != _LF and end - pos < width:
        end += 1
    text = bytes(buf[pos:end]).decode("utf-8", "replace").rstrip("\r")
    return "".join(c if c.isprintable() or c == "\t" else "?" for c in text)


_MESSAGES = {
    _ERR_TOKEN: "cannot parse {text!r}: expected integer vertex ids",
    _ERR_FEW: "cannot parse {text!r}: expected two vertex ids",
    _ERR_NEG: "negative vertex id in {text!r}",
    _ERR_TAG: "cannot parse {text!r}: expected {what}",
    _ERR_BIG: "vertex id too large in {text!r} (ids are below 10^18: 18 digits at most)",
    _ERR_RANGE: "vertex id out of the declared range {lo}..{n} in {text!r}",
    _ERR_LINES: "more adjacency lines or entries than the header declares: {text!r}",
    _ERR_WEIGHT: "cannot parse {text!r}: expected a numeric weight after the two vertex "
                 "ids{rule}",
    _ERR_WEIGHT_INT: "cannot parse {text!r}: expected an integer weight",
    _ERR_EXTRA: "cannot parse {text!r}: a third column, where the file's first edge line has "
                "none (an edge list is weighted on every line or on none)",
    _ERR_INFINITE: "weight in {text!r} is not a finite number{rule}",
    _ERR_WEIGHT_BIG: "integer weight too large in {text!r} (integer weights are below "
                     "10^18: 18 digits at most)",
    _ERR_EMPTY: "cannot parse {text!r}: an empty field (a separator at the start or end of "
                "the line, or two with nothing between them)",
}
_SNAP_RULE = " (the first edge line has one, so every edge line needs a finite number there)"


def _chunk_error(buf, code, pos, **kw):
    kw.setdefault("rule", "")
    text = _line_text(buf, pos)
    return _native.newline_count(buf, pos), _MESSAGES[code].format(text=text, **kw)


class _MoreHeader(Exception):
    """The head read so far ends before the header does: read more of it."""


def _header_lines(buf, start=0):
    """Yield ``(line_start, next_start, text)`` for lines from ``start`` (header parsing)."""
    n = buf.shape[0]
    pos = start
    while pos < n:
        rest = buf[pos:pos + (1 << 16)]
        hits = np.flatnonzero(rest == _LF)
        nl = pos + int(hits[0]) if hits.size else min(n, pos + rest.shape[0])
        text = bytes(buf[pos:nl]).decode("utf-8", "replace").strip()
        yield pos, nl + 1, text
        pos = nl + 1


def _first_content_line(lines, lineno, comment, whole):
    """``(line number, tokens, next offset)`` of the first non-blank, non-comment line;
    ``(last line number, None, None)`` if none; :class:`_MoreHeader` if the head ends first."""
    for _, nxt, text in lines:
        lineno += 1
        if text and not text.startswith(comment):
            return lineno, text.split(), nxt
    if not whole:
        raise _MoreHeader
    return lineno, None, None


def _line_start(read, x, body, length):
    """Offset of the first line that starts at or after ``x``; ``read(lo, hi)``: the bytes."""
    if x <= body:
        return body
    pos = x - 1
    while pos < length:
        block = read(pos, min(pos + _SCAN_BYTES, length))
        hits = np.flatnonzero(block == _LF)
        if hits.size:
            return pos + int(hits[0]) + 1
        pos += block.shape[0]
    return length


def _chunk_bytes(plan, index, data):
    """The bytes chunk ``index`` owns: the lines that start in its nominal range."""
    if plan.compressed:
        if data is None:
            raise ValueError("parse_graph_chunk: a gzip file's chunks need its bytes "
                             "(read_whole_file(plan))")
        length = data.shape[0]
        a, b = plan.nominal_range(index, length)
        body = min(plan.body, length)
        read = (lambda lo, hi: data[lo:hi])
        return data[_line_start(read, a, body, length):_line_start(read, b, body, length)]
    length = plan.length
    a, b = plan.nominal_range(index, length)
    body = min(plan.body, length)
    try:
        with open(plan.path, "rb") as f:
            try:
                # mapped, not read: the parser reads the page cache in place (a copy's page
                # faults cost as much as the parse); the array keeps the mapping alive
                data = np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ),
                                     np.uint8)
            except (OSError, ValueError):
                data = None  # not mappable (empty, a pipe): read the range
            if data is not None and data.shape[0] == length:
                read = (lambda lo, hi: data[lo:hi])
            else:
                def read(lo, hi):
                    f.seek(lo)
                    return np.frombuffer(f.read(hi - lo), dtype=np.uint8)
            start, end = _line_start(read, a, body, length), _line_start(read, b, body, length)
            return read(start, end)
    except OSError as e:
        raise _cannot_read(plan.path, e) from None


def _float_tokens(buf, starts, lengths):
    """The numbers at ``buf[starts[i]:starts[i] + lengths[i]]`` as correctly rounded float64."""
    if starts.size == 0:
        return np.zeros(0, np.float64)
    width = int(lengths.max())
    cols = np.arange(width, dtype=np.int64)
    idx = np.minimum(starts[:, None] + cols, buf.shape[0] - 1)
    text = np.where(cols < lengths[:, None], buf[idx], 0).astype(np.uint8)
    return np.ascontiguousarray(text).view(f"S{width}").ravel().astype(np.float64)


def _chunk_weights(buf, k, w_int, w_len, w_flt, copy=True):
    """The weights of a parsed chunk's ``k`` records (``w_int`` itself unless ``copy``)."""
    lens = w_len[:k]
    floats = np.flatnonzero(lens < 0)
    if floats.size == 0:
        return w_int[:k].copy() if copy else w_int[:k]
    w = w_int[:k].astype(np.float64)
    w[floats] = w_flt[floats]
    slow = floats[np.isnan(w[floats])]
    w[slow] = _float_tokens(buf, w_int[slow], -lens[slow].astype(np.int64))
    return w


def _parse_pairs_chunk(plan, buf, out=None):
    """Parse an edge-list chunk, into ``out = (newlines, u, v, w_int)`` (slices at least
    its :func:`terrain.graph._native.lf_count` long) or fresh arrays."""
    comment_a, comment_b, tag, what = _SCANNER[plan.fmt]
    weighted = plan.wmode >= 2
    if out is None:
        newlines = _native.newline_count(buf)
        u = np.empty(newlines + 1, np.int64)
        v = np.empty(newlines + 1, np.int64)
        w_int = np.empty(newlines + 1 if weighted else 1, np.int64)
        limit = -1
    else:
        newlines, u, v, w_int = out
        limit = u.shape[0]  # never past the slice, whatever the count said
    cap = u.shape[0] if weighted else 1
    w_len = np.zeros(cap, np.int32)
    w_flt = np.empty(cap if plan.wmode == 3 else 1, np.float64)
    k, err, pos = _native.parse_pairs(buf, comment_a, comment_b, tag, limit, u, v, plan.wmode,
                                      w_int, w_len, w_flt, plan.sep)
    u, v = u[:k], v[:k]
    w = None
    if weighted:
        w = _chunk_weights(buf, k, w_int, w_len, w_flt, copy=out is None)
        if plan.fmt == "mtx" and plan.wmode == 3 and w.dtype != np.float64:
            w = w.astype(np.float64)  # a "real" file: floats whatever the tokens look like
    rule = _SNAP_RULE if plan.fmt == "snap" else ""
    if err != _ERR_NONE:
        return EdgeChunk(u, v, newlines, _chunk_error(buf, err, pos, what=what, rule=rule),
                         None, w, k)

    def line_of(index):
        # the line of record ``index``: parse again up to it
        dummy = np.empty(index + 1, np.int64)
        _, _, pos = _native.parse_pairs(buf, comment_a, comment_b, tag, index + 1, dummy,
                                        dummy.copy(), 0, dummy, np.zeros(1, np.int32),
                                        np.zeros(1), plan.sep)
        return pos

    range_error = weight_error = None
    if plan.declared is not None:
        lo, hi_u, hi_v = plan.declared
        bad = _native.shift_ids(u, v, lo, hi_u, hi_v)
        if bad >= 0:
            range_error = _chunk_error(buf, _ERR_RANGE, line_of(bad), lo=lo,
                                       n=max(hi_u, hi_v))
    if w is not None and w.dtype.kind == "f" and not np.isfinite(w).all():
        bad = int(np.flatnonzero(~np.isfinite(w))[0])  # a decimal past the float range
        weight_error = _chunk_error(buf, _ERR_INFINITE, line_of(bad), rule=rule)
    return EdgeChunk(u, v, newlines, None, range_error, w, k, weight_error)


def _parse_metis_chunk(plan, buf):
    edges, skip, edge_weights = plan.metis
    n = plan.n
    u = np.empty(2 * edges, np.int64)
    v = np.empty(2 * edges, np.int64)
    w = np.zeros(2 * edges if edge_weights else 1, np.int64)
    k, err, pos, lines = _native.parse_metis(buf, n, skip, edge_weights, u, v, w)
    newlines = _native.newline_count(buf)
    error = None
    if err != _ERR_NONE:
        error = _chunk_error(buf, err, pos, lo=1, n=n)
    elif lines < n:
        error = (newlines, f"the file ends after {lines} of the {n} vertex lines the header "
                           "declares")
    if not edge_weights:
        return EdgeChunk(u[:k], v[:k], newlines, error)
    return EdgeChunk(u[:k], v[:k], newlines, error, None, w[:k], k)


def _is_number(token):
    try:
        float(token)
    except ValueError:
        return False
    return True


def _snap_header(path, head, whole, counts=True):
    """A SNAP edge list: comma-separated if its first line holds a comma (a row of column
    names skipped); weighted if its first edge line has a third column; with ``counts`` (the
    format detected, not named), a first line of two integers is a candidate header of
    counts (:func:`_counts_header` decides)."""
    start = 3 if bytes(head[:3]) == b"\xef\xbb\xbf" else 0  # a UTF-8 byte order mark
    lines = _header_lines(head, start)
    lineno, tokens, nxt = _first_content_line(lines, 0, ("#", "%"), whole)
    if tokens is None:
        return {"wmode": 1, "body": start}
    sep = ord(",") if "," in " ".join(tokens) else 0
    split = (lambda toks: " ".join(toks).replace(",", " ").split()) if sep else list
    # a line with an empty field ("1,2,", "1,,2") is no header: the scanner refuses it
    empty = (lambda toks: "" in (f.strip() for f in " ".join(toks).split(","))) if sep \
        else (lambda toks: False)
    line = tokens
    tokens = split(tokens)
    out = {"wmode": 1, "sep": sep, "body": start}
    if sep and not all(map(_is_number, tokens)):  # a CSV header row of column names
        out["body"] = nxt
        lineno, line, nxt = _first_content_line(lines, lineno, ("#", "%"), whole)
        tokens = split(line or [])
    # ids of more than 18 digits are refused as ids (the parser's), not read as counts
    if counts and len(tokens) == 2 and all(t.isdigit() and len(t) <= 18 for t in tokens) \
            and not empty(line):
        first = (int(tokens[0]), int(tokens[1]), lineno)
        out["body"] = nxt
        lineno, tokens, _ = _first_content_line(lines, lineno, ("#", "%"), whole)
        # the line after: where a file whose first line is an edge goes wrong if weighted
        out["counts"] = (*first, lineno, " ".join(tokens or []))
        tokens = split(tokens or [])
    out["wmode"] = 3 if len(tokens) >= 3 else 1
    return out


def _mtx_header(path, head, whole):
    lines = _header_lines(head)
    first = next(lines, None)
    if first is None and not whole:
        raise _MoreHeader
    if first is None or not first[2].lower().startswith("%%matrixmarket"):
        raise InputError(f"{where(path, 1)}: missing Matrix Market header "
                         "'%%MatrixMarket matrix coordinate ...'")
    banner = first[2].lower().split()
    if len(banner) < 5 or banner[1] != "matrix" or banner[2] != "coordinate":
        raise InputError(f"{where(path, 1)}: only 'matrix coordinate' Matrix Market files are "
                         f"graphs, not {first[2]!r}")
    if banner[3] not in ("pattern", "integer", "real", "complex"):
        raise InputError(f"{where(path, 1)}: unknown field {banner[3]!r}")
    lineno, size, body = _first_content_line(lines, 1, "%", whole)
    if size is None:
        raise InputError(f"{where(path, lineno)}: missing the size line 'ROWS COLS ENTRIES'")
    try:
        rows, cols, nnz = (int(t) for t in size[:3])
        if len(size) != 3 or min(rows, cols, nnz) < 0:
            raise ValueError
    except ValueError:
        raise InputError(f"{where(path, lineno)}: cannot parse size line {' '.join(size)!r}: "
                         "expected 'ROWS COLS ENTRIES'") from None
    symmetry = banner[4] if len(banner) > 4 else "general"
    if symmetry not in ("general", "symmetric", "skew-symmetric", "hermitian"):
        raise InputError(f"{where(path, 1)}: unknown symmetry {symmetry!r}")
    wmode = {"integer": 2, "real": 3}.get(banner[3], 0)
    if symmetry == "skew-symmetric" and wmode:  # a_ji = -a_ij: no one weight per edge
        raise InputError(f"{where(path, 1)}: a skew-symmetric matrix's mirrored entries are "
                         "the negatives of those given: an edge of a graph has one weight "
                         "(write it as 'general' with both entries)")
    symmetric = symmetry != "general"
    return {"body": body, "n": max(rows, cols), "id_base": 1, "declared": (1, rows, cols),
            "entries": nnz, "size_line": lineno, "wmode": wmode, "symmetric": symmetric}


def _dimacs_header(path, head, whole):
    lineno, header, body = _first_content_line(_header_lines(head), 0, "c", whole)
    if header is None or header[0] != "p":
        raise InputError(f"{where(path, max(lineno, 1))}: missing DIMACS "
                         "header 'p sp NODES ARCS'")
    try:
        n, m = (int(t) for t in header[2:4])
        if len(header) != 4 or n < 0 or m < 0:
            raise ValueError
    except ValueError:
        raise InputError(f"{where(path, lineno)}: cannot parse DIMACS header "
                         f"{' '.join(header)!r}: expected 'p sp NODES ARCS'") from None
    return {"body": body, "n": n, "id_base": 1, "declared": (1, n, n), "wmode": 2,
            "directed": True, "entries": m, "size_line": lineno}


def _metis_header(path, head, whole):
    lineno, header, body = _first_content_line(_header_lines(head), 0, "%", whole)
    if not header:
        raise InputError(f"{where(path, max(lineno, 1))}: missing METIS header 'NODES EDGES "
                         "[FMT [NCON]]'")
    try:
        n, m = (int(t) for t in header[:2])
        fmt = header[2].zfill(3) if len(header) > 2 else "000"
        ncon = int(header[3]) if len(header) > 3 else 1
        if len(header) > 4 or n < 0 or m < 0 or len(fmt) != 3 or set(fmt) - {"0", "1"} \
                or ncon < 0:
            raise ValueError
    except ValueError:
        raise InputError(f"{where(path, lineno)}: cannot parse METIS header "
                         f"{' '.join(header)!r}: expected 'NODES EDGES [FMT [NCON]]'") from None
    skip = (fmt[0] == "1") + (ncon if fmt[1] == "1" else 0)
    # every edge is in the lists of both its ends: 2 m entries
    return {"body": body, "n": n, "id_base": 1, "metis": (m, skip, fmt[2] == "1"),
            "entries": 2 * m, "size_line": lineno}


_HEADERS = {"snap": _snap_header, "mtx": _mtx_header, "dimacs": _dimacs_header,
            "metis": _metis_header}


def detect_format(path):
    """One of :data:`FORMATS` for ``path``, from its name and first lines (docs/graphs.md,
    "Formats": "recognised by")."""
    name = Path(path).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix == "mtx":
        return "mtx"
    if suffix == "gr":
        return "dimacs"
    if suffix in ("graph", "metis"):
        return "metis"
    try:
        opener = gzip.open if Path(path).name.endswith(".gz") else open
        with opener(path, "rb") as f:
            head = f.read(4096)
    except (OSError, EOFError, zlib.error):
        return "snap"
    for raw in head.splitlines():
        text = raw.decode("utf-8", "replace").strip()
        if text.lower().startswith("%%matrixmarket"):
            return "mtx"
        if text.startswith("p sp") or text.startswith("p "):
            return "dimacs"
        if text and not text.startswith(("#", "%", "c")):
            break
    return "snap"


def plan_graph_file(path, fmt="auto", *, chunk_bytes=DEFAULT_CHUNK_BYTES, memory=None):
    """Read the header of a graph file and cut its body into chunks (step 1 of 3).

    Reads only the head: bad headers, unknown formats and unreadable files fail here.

    Parameters
    ----------
    path : str or Path
    fmt : {'auto', 'snap', 'mtx', 'dimacs', 'metis'}
    chunk_bytes : int
        Nominal chunk size (METIS: one chunk; gzip: estimated from the compressed size).
    memory : int, optional
        Bytes the reading may take (default: the available memory).

    Returns
    -------
    GraphFilePlan

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.gr")
    >>> _ = open(p, "w").write("c x\\np sp 3 2\\na 1 2 5\\na 2 3 5\\n")
    >>> plan = plan_graph_file(p, chunk_bytes=8)
    >>> plan.fmt, plan.n, plan.body, plan.header_lines, plan.chunks
    ('dimacs', 3, 13, 2, 2)
    """
    path = Path(path)
    _check_regular(path)
    detected = fmt in (None, "auto")
    if detected:
        fmt = detect_format(path)
    if fmt not in FORMATS:
        raise InputError(f"{path}: unknown graph format {fmt!r} (choose from {', '.join(FORMATS)})")
    chunk_bytes = int(chunk_bytes)
    if chunk_bytes < 1:
        raise ValueError(f"plan_graph_file: chunk_bytes must be >= 1, got {chunk_bytes}")
    compressed = path.name.endswith(".gz")
    memory = int(memory or available_memory())
    size = _HEAD_BYTES
    while True:
        head, whole = _read_head(path, compressed, size)
        _check_text(path, head)
        try:
            header = (_snap_header(path, head, whole, counts=detected) if fmt == "snap"
                      else _HEADERS[fmt](path, head, whole))
            break
        except _MoreHeader:
            size *= 4
    if whole:
        length = head.shape[0]
    elif compressed:
        length = None
    else:
        try:
            length = path.stat().st_size
        except OSError as e:
            raise _cannot_read(path, e) from None
    body = header.pop("body", 0)
    body = min(body, length) if length is not None else body
    header_lines = _native.newline_count(head, body)
    _check_declared(path, header, header_lines, body, length, compressed, memory)
    if fmt == "metis":
        chunks = 1
    elif length is not None:
        chunks = max(1, -(-(length - body) // chunk_bytes))
    else:
        chunks = max(1, -(-(path.stat().st_size * _GZIP_RATIO) // chunk_bytes))
    return GraphFilePlan(str(path), fmt, compressed, length, body, header_lines, chunks,
                         memory=memory, **header)


#: the most a gzip stream expands (deflate's limit is about 1032 : 1)
_GZIP_MAX_RATIO = 1032


def _check_declared(path, header, header_lines, body, length, compressed, memory):
    """Refuse declared vertices, entries and METIS lines the file cannot hold or the memory
    cannot take, before anything of their size is allocated."""
    line = header.get("size_line") or header_lines
    n = header.get("n", 0)
    if n * BYTES_PER_VERTEX > memory:
        raise _too_big(path, f"declares {n} vertices", n * BYTES_PER_VERTEX, memory, line)
    if length is not None:
        room = length - body
    else:
        room = os.stat(path).st_size * (_GZIP_MAX_RATIO if compressed else 1)
    entries = header.get("entries", -1)
    if header.get("metis"):
        edges = header["metis"][0]
        if n > room + 1 or 2 * edges > room:  # a line end per vertex, a digit per entry
            raise InputError(f"{where(path, line)}: the header declares {n} vertex lines and "
                             f"{edges} edges, more than the {room} bytes after it can hold")
        entries = 2 * edges
    elif entries * 4 > room + 1:  # "1 1" and a line end per entry (the last may lack it)
        raise InputError(f"{where(path, line)}: the size line declares {entries} entries, "
                         f"more than the {room} bytes after it can hold")
    if entries * BYTES_PER_RECORD > memory:
        raise _too_big(path, f"declares {entries} entries", entries * BYTES_PER_RECORD,
                       memory, line)


def parse_graph_chunk(plan, index, data=None):
    """Parse chunk ``index`` of the file ``plan`` describes (step 2 of 3), independently of
    every other chunk.

    Parameters
    ----------
    plan : GraphFilePlan
    index : int
        ``0 <= index < plan.chunks``.
    data : ndarray of uint8, optional
        The whole decompressed file (:func:`read_whole_file`); required for a gzip file.

    Returns
    -------
    EdgeChunk
        Errors are recorded, not raised: only :func:`edges_from_chunks` knows line numbers.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.txt")
    >>> _ = open(p, "w").write("10 20 1\\n20 30 1\\n30 x 1\\n")
    >>> plan = plan_graph_file(p, chunk_bytes=8)
    >>> [(c.u.tolist(), c.error) for c in (parse_graph_chunk(plan, j) for j in range(3))]
    [([10], None), ([20], None), ([], (0, "cannot parse '30 x 1': expected integer vertex ids"))]
    """
    buf = _chunk_bytes(plan, int(index), data)
    if plan.fmt == "metis":
        return _parse_metis_chunk(plan, buf)
    return _parse_pairs_chunk(plan, buf)


def _relabel_snap(path, us, vs, in_place=False):
    """Relabel the chunks' SNAP ids to ``0..n-1`` (increasing id order), joined in file
    order (``in_place``: one array each, relabelled where it is)."""
    m = sum(x.size for x in us)
    us = [np.ascontiguousarray(x, np.int64) for x in us]
    vs = [np.ascontiguousarray(y, np.int64) for y in vs]
    parts = _native.threads(m)
    pool = ThreadPoolExecutor(parts) if parts > 1 else None

    def run(fn, *arrays):
        # the C loops release the GIL: each array cut into one slice per thread
        size = arrays[0].shape[0]
        cuts = [size * t // parts for t in range(parts + 1)] if pool else [0, size]
        jobs = [(fn, [a[lo:hi] for a in arrays]) for lo, hi in zip(cuts, cuts[1:])]
        return list((pool.map if pool else map)(lambda job: job[0](*job[1]), jobs))

    try:
        hi = max(max(run(_native.max_id, x, y)) for x, y in zip(us, vs))
        if hi < max(1 << 26, 8 * m):
            # dense enough: a presence array relabels in O(m), no sort of 2m ids
            present = np.zeros(hi + 1, np.uint8)
            for x in us + vs:
                run(lambda part: _native.mark_present(part, present), x)
            ids = np.flatnonzero(present).astype(np.int64)
            table = np.cumsum(present, dtype=np.int64)
            table -= 1
            if in_place:
                (u,), (v,) = us, vs
            else:
                u, v = np.empty(m, np.int64), np.empty(m, np.int64)
            offset = 0
            for x, y in zip(us, vs):
                for src, dst in ((x, u), (y, v)):
                    run(lambda a, b: _native.relabel(a, table, b), src,
                        dst[offset:offset + x.size])
                offset += x.size
    finally:
        if pool is not None:
            pool.shutdown()
    if hi >= max(1 << 26, 8 * m):
        ids, inverse = np.unique(np.concatenate(us + vs), return_inverse=True)
        u, v = inverse[:m].astype(np.int64), inverse[m:].astype(np.int64)
    dense = ids.size and ids[0] == 0 and ids[-1] == ids.size - 1
    return EdgeList(u, v, int(ids.size), None if dense else ids, 0, str(path), "snap")


def edges_from_chunks(plan, chunks, joined=None):
    """Join the parsed chunks of ``plan`` into an :class:`EdgeList` (step 3 of 3): the first
    error in file order raised with its line number, edges in file order, SNAP ids relabelled.

    Parameters
    ----------
    plan : GraphFilePlan
    chunks : sequence of EdgeChunk
        All ``plan.chunks`` of them, in order.
    joined : tuple, optional
        ``(u, v, w_int)``: arrays the chunks were parsed into, one slice each, in order
        (:func:`read_graph_file`); used in place of a concatenation, relabelled in place.

    Returns
    -------
    EdgeList

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.txt")
    >>> _ = open(p, "w").write("# tiny\\n10 20\\n20 30\\n")
    >>> plan = plan_graph_file(p, chunk_bytes=4)
    >>> e = edges_from_chunks(plan, [parse_graph_chunk(plan, j) for j in range(plan.chunks)])
    >>> e.n, e.u.tolist(), e.v.tolist(), e.ids.tolist()
    (3, [0, 1], [1, 2], [10, 20, 30])
    """
    chunks = list(chunks)
    if len(chunks) != plan.chunks:
        raise ValueError(f"edges_from_chunks: {len(chunks)} chunks given, the plan has "
                         f"{plan.chunks}")
    if plan.counts is not None:
        chunks, joined = _counts_header(plan, chunks), None
    first_line = np.cumsum([plan.header_lines] + [c.newlines for c in chunks[:-1]]) + 1
    for attr in ("error", "range_error", "weight_error"):
        for line, chunk in zip(first_line, chunks):
            err = getattr(chunk, attr)
            if err is not None:
                raise InputError(f"{where(plan.path, int(line) + err[0])}: {err[1]}")
    m = sum(c.u.size for c in chunks)
    if plan.entries >= 0 and m != plan.entries:
        if plan.fmt == "metis":
            said = (f"the header declares {plan.entries // 2} edges ({plan.entries} adjacency "
                    f"entries: each edge is in the lists of both its ends), the lists hold {m}")
        elif plan.fmt == "dimacs":
            said = f"the header declares {plan.entries} arcs, the file has {m}"
        else:
            said = f"the size line declares {plan.entries} entries, the file has {m}"
        raise InputError(f"{where(plan.path, plan.size_line)}: {said}")
    if m == 0:
        raise InputError(f"{plan.path}: empty graph (no edges)")
    if joined is not None and joined[0].size != m:
        joined = None  # not one slice per chunk after all: concatenate
    weights = _join_weights(chunks, m, None if joined is None else joined[2])
    if joined is not None:
        us, vs = [joined[0]], [joined[1]]
    else:
        us, vs = [c.u for c in chunks], [c.v for c in chunks]
    if plan.fmt == "snap":
        edges = _relabel_snap(plan.path, us, vs, in_place=joined is not None)
    else:
        u, v = (np.concatenate(x) if len(x) > 1 else x[0] for x in (us, vs))
        edges = EdgeList(u, v, plan.n, None, plan.id_base, plan.path, plan.fmt)
    return dataclasses.replace(edges, weights=weights, directed=plan.directed,
                               symmetric=plan.symmetric)


def _counts_header(plan, chunks):
    """The chunks of a SNAP file whose first line ``a b`` may be a header of counts
    (docs/graphs.md, "A header of counts"): its edge lines only if it is, else that line put
    back first as an edge (an :class:`InputError` in a weighted file). The lines after the
    counted edges are not read: a warning names the first (a typo there would otherwise
    cut the graph short unseen)."""
    a, b, line, after, text = plan.counts
    stop = next((j for j, c in enumerate(chunks) if c.error is not None), len(chunks))
    kept = chunks[:stop + 1]
    edges = sum(c.u.size for c in kept)
    top = max((max(int(c.u.max()), int(c.v.max())) for c in kept if c.u.size), default=0)
    if edges and ((edges == a and top <= b) or (edges == b and top <= a)):
        counted = f"{edges} edge lines" if edges > 1 else "1 edge line"
        if stop < len(chunks):
            at = plan.header_lines + sum(c.newlines for c in chunks[:stop]) + 1 \
                + kept[stop].error[0]
            warn(f"{where(plan.path, at)}: not read, nor any line after it: line "
                 f"{line}, '{a} {b}', is a header of counts, and the {counted} it "
                 "counts end here")
            kept[stop] = dataclasses.replace(kept[stop], error=None)
        else:  # an edge list whose first edge happens to fit: said, never silent
            warn(f"{where(plan.path, line)}: '{a} {b}' read as a header of counts "
                 f"({counted} follow, their ids up to {b if edges == a else a}), not "
                 "as an edge; the format 'snap' reads it as an edge")
        return kept
    note = (f" (a SNAP edge list: its first line {a} {b} would be a header of counts if "
            f"exactly {a} or {b} edge lines with ids up to the other count followed it)")
    if plan.wmode != 1:  # the first line is an edge without a weight: the next one is wrong
        raise InputError(f"{where(plan.path, after)}: cannot parse {text!r}: a third column, "
                         f"where the file's first edge line, {line}, has none{note}")
    first = EdgeChunk(np.array([a], np.int64), np.array([b], np.int64), 0)
    return [first] + list(chunks)


def _join_weights(chunks, m, joined=None):
    """The weights of all records in file order, or None; float64 if any chunk is decimal;
    ``joined``: the integer array the chunks' weights are slices of (used as is)."""
    if any(c.w is None for c in chunks) or sum(c.weighted for c in chunks) != m:
        return None
    ws = [c.w for c in chunks]
    if joined is not None and joined.size == m and all(w.dtype == joined.dtype for w in ws):
        return joined
    if any(w.dtype.kind == "f" for w in ws):
        ws = [w.astype(np.float64, copy=False) for w in ws]
    return np.concatenate(ws) if len(ws) > 1 else ws[0]


def read_graph_file(path, fmt="auto", *, chunk_bytes=DEFAULT_CHUNK_BYTES, workers=None,
                    memory=None):
    """Read a graph file into an :class:`EdgeList`: the three steps in one call, the chunks
    on a thread pool.

    Parameters
    ----------
    path : str or Path
        SNAP edge list, Matrix Market (``.mtx``), DIMACS (``.gr``) or METIS (``.graph``),
        optionally ``.gz``.
    fmt : {'auto', 'snap', 'mtx', 'dimacs', 'metis'}
        ``auto`` uses :func:`detect_format`.
    chunk_bytes : int
        Size of the chunks parsed in parallel (edge-list formats).
    workers : int, optional
        Parser threads (default: all cores; 1: sequential, no pool).
    memory : int, optional
        Bytes the reading may take (default: the available memory); larger files are
        refused before anything of their size is allocated.

    Returns
    -------
    EdgeList

    Raises
    ------
    InputError
        ``FILE:LINE: ...`` for anything unparseable or out of range.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.txt")
    >>> _ = open(p, "w").write("# tiny\\n10 20\\n20 30\\n")
    >>> e = read_graph_file(p)
    >>> e.n, e.u.tolist(), e.v.tolist(), e.ids.tolist()
    (3, [0, 1], [1, 2], [10, 20, 30])
    """
    plan = plan_graph_file(path, fmt, chunk_bytes=chunk_bytes, memory=memory)
    workers = int(workers or _native.threads(plan.length))
    if workers > 1 and plan.chunks < workers and plan.length and plan.fmt != "metis":
        # a file smaller than workers x chunk_bytes: cut it so that every worker parses
        span = plan.length - plan.body
        plan = plan_graph_file(path, plan.fmt, chunk_bytes=max(1 << 20, -(-span // workers)),
                               memory=plan.memory)
    data = read_whole_file(plan) if plan.compressed else None
    pool = (ThreadPoolExecutor(max_workers=min(workers, plan.chunks))
            if workers > 1 and plan.chunks > 1 else None)
    run = map if pool is None else pool.map
    try:
        if plan.fmt == "metis":
            return edges_from_chunks(plan, [parse_graph_chunk(plan, 0, data)])
        # each chunk parses straight into its slice of one array, sized by its line feeds;
        # slices left short (comment or blank lines) are closed up afterwards
        bufs = [_chunk_bytes(plan, j, data) for j in range(plan.chunks)]
        newlines = list(run(_native.lf_count, bufs))
        caps = [n + int(b.shape[0] > 0 and b[-1] != 10) for n, b in zip(newlines, bufs)]
        offsets = np.cumsum([0] + caps)
        total = int(offsets[-1])
        if total * BYTES_PER_RECORD > plan.memory:
            raise _too_big(path, f"{total} lines", total * BYTES_PER_RECORD, plan.memory)
        weighted = plan.wmode >= 2
        u, v = np.empty(total, np.int64), np.empty(total, np.int64)
        w = np.empty(total if weighted else 1, np.int64)

        def parse(j):
            a, b = int(offsets[j]), int(offsets[j + 1])
            return _parse_pairs_chunk(plan, bufs[j], (newlines[j], u[a:b], v[a:b],
                                                      w[a:b] if weighted else w))

        chunks = list(run(parse, range(plan.chunks)))
        del bufs, data  # the file's mapping goes: its pages leave the resident set
    finally:
        if pool is not None:
            pool.shutdown()
    at = 0
    for j, c in enumerate(chunks):
        k, a = c.u.shape[0], int(offsets[j])
        if a != at:  # close the gap: move the chunk down (the arrays' views with it)
            u[at:at + k], v[at:at + k] = u[a:a + k], v[a:a + k]
            c.u, c.v = u[at:at + k], v[at:at + k]
            if weighted:
                w[at:at + k] = w[a:a + k]
                if c.w is not None and c.w.dtype == w.dtype and c.w.base is not None:
                    c.w = w[at:at + k]
        at += k
    return edges_from_chunks(plan, chunks, (u[:at], v[:at], w[:at] if weighted else None))
