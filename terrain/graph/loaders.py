"""Read sparse graphs from text: SNAP edge lists, Matrix Market, DIMACS ``.gr``, METIS ``.graph``.

Every reader returns an :class:`EdgeList` — 0-based endpoint arrays ``u``, ``v`` plus the
vertex count and the map back to the file's own ids — that :func:`terrain.graph.csr.build_csr`
turns into a CSR. Gzip-compressed files (``.gz``) are read the same way.

Algorithm. The file is read into one byte buffer. A small Python pass reads the header
(Matrix Market banner and size line, DIMACS ``p sp`` line, METIS ``n m [fmt [ncon]]``
line); the body is parsed by a Numba byte scanner (``_parse_pairs``), which needs no
Python object per line. For edge-list formats the body is cut at line boundaries into
chunks of ``chunk_bytes`` that threads parse concurrently (the scanner releases the GIL), so
big files parse at several hundred MB/s per core. METIS adjacency lists are numbered by
line, so that body is scanned in one pass (still Numba). ``numpy.loadtxt`` or
``pandas.read_csv`` would either be slow, add a dependency, or lose the line numbers the
error messages need; hence the hand-written scanner.

Ids. SNAP files may use any non-negative ids (sparse, 0- or 1-based): the vertices are the
ids that occur, relabelled to ``0..n-1`` in increasing id order. The other formats declare
``n`` and number vertices ``1..n``; every declared vertex exists, isolated or not.
Edge weights and values are read past and ignored: these are unweighted graphs.

Errors (:class:`terrain.errors.InputError`) start with ``FILE:LINE`` and name the problem:
an unparseable line, a negative id, an id out of the declared range, a missing header, or
no edges at all.
"""

import gzip
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from ..errors import InputError, where

__all__ = ["EdgeList", "read_graph_file", "detect_format", "FORMATS"]

FORMATS = ("snap", "mtx", "dimacs", "metis")

_ERR_NONE, _ERR_TOKEN, _ERR_FEW, _ERR_NEG, _ERR_TAG, _ERR_BIG, _ERR_RANGE, _ERR_LINES = range(8)
_SP, _TAB, _CR, _LF = 32, 9, 13, 10


@dataclass
class EdgeList:
    """Edges as 0-based endpoint arrays, before any symmetrising or de-duplication.

    Attributes
    ----------
    u, v : ndarray of int64
        Endpoints, ``0 <= u, v < n``.
    n : int
        Number of vertices.
    ids : ndarray of int64 or None
        ``ids[i]`` is vertex ``i``'s id in the file; None means ``id_base + i``.
    id_base : int
        Offset of the file's ids when ``ids`` is None (1 for the 1-based formats).
    source : str
        File name, for messages.
    fmt : str
        One of :data:`FORMATS`.
    """

    u: np.ndarray
    v: np.ndarray
    n: int
    ids: object = None
    id_base: int = 0
    source: str = ""
    fmt: str = ""


# --------------------------------------------------------------------------- Numba scanners

@numba.njit(nogil=True, cache=True)
def _parse_pairs(buf, start, end, comment_a, comment_b, tag, limit, out_u, out_v):
    """Parse lines ``[tag] a b [ignored...]`` of ``buf[start:end]`` into ``out_u``, ``out_v``.

    Lines whose first non-blank byte is ``comment_a`` or ``comment_b`` and blank lines are
    skipped. With ``tag`` != 0 every other line must start with that byte (DIMACS ``a``).
    Stops after ``limit`` records (``limit < 0``: no limit). Returns ``(count, error,
    line_start)``: on error, ``line_start`` is the offending line's first byte; without
    error it is the first byte of the last record's line.
    """
    i = start
    k = 0
    last = -1
    while i < end:
        if limit >= 0 and k >= limit:
            break
        ls = i
        while i < end and (buf[i] == _SP or buf[i] == _TAB):
            i += 1
        if i >= end:
            break
        c = buf[i]
        if c == _LF or c == _CR or c == comment_a or c == comment_b:
            while i < end and buf[i] != _LF:
                i += 1
            i += 1
            continue
        if tag != 0:
            if c != tag:
                return k, _ERR_TAG, ls
            i += 1
            if i < end and buf[i] != _SP and buf[i] != _TAB:
                return k, _ERR_TAG, ls
        a = np.int64(0)
        for t in range(2):
            while i < end and (buf[i] == _SP or buf[i] == _TAB):
                i += 1
            if i >= end or buf[i] == _LF or buf[i] == _CR:
                return k, _ERR_FEW, ls
            neg = False
            if buf[i] == 45:  # '-'
                neg = True
                i += 1
            val = np.int64(0)
            nd = 0
            while i < end and buf[i] >= 48 and buf[i] <= 57:
                val = val * 10 + (buf[i] - 48)
                i += 1
                nd += 1
            if nd == 0 or (i < end and buf[i] != _SP and buf[i] != _TAB
                           and buf[i] != _CR and buf[i] != _LF):
                return k, _ERR_TOKEN, ls
            if nd > 18:
                return k, _ERR_BIG, ls
            if neg:
                return k, _ERR_NEG, ls
            if t == 0:
                a = val
            else:
                out_u[k] = a
                out_v[k] = val
        k += 1
        last = ls
        while i < end and buf[i] != _LF:
            i += 1
        i += 1
    return k, _ERR_NONE, last


@numba.njit(nogil=True, cache=True)
def _parse_metis_body(buf, start, n, skip_before, edge_weights, out_u, out_v):
    """Parse ``n`` METIS adjacency lines starting at ``buf[start]``.

    ``skip_before`` tokens (vertex size and weights) open each line; with ``edge_weights``
    every neighbour is followed by a weight token. Neighbours are 1-based and must lie in
    ``1..n``. ``%`` lines are comments; blank lines are vertices without neighbours.
    Returns ``(count, error, line_start, lines_read)``.
    """
    end = buf.shape[0]
    i = start
    k = 0
    line = 0
    cap = out_u.shape[0]
    while i < end and line < n:
        ls = i
        while i < end and (buf[i] == _SP or buf[i] == _TAB):
            i += 1
        if i < end and buf[i] == 37:  # '%'
            while i < end and buf[i] != _LF:
                i += 1
            i += 1
            continue
        tok = 0
        while True:
            while i < end and (buf[i] == _SP or buf[i] == _TAB or buf[i] == _CR):
                i += 1
            if i >= end or buf[i] == _LF:
                break
            neg = False
            if buf[i] == 45:
                neg = True
                i += 1
            val = np.int64(0)
            nd = 0
            dot = False
            while i < end and ((buf[i] >= 48 and buf[i] <= 57) or buf[i] == 46):
                if buf[i] == 46:
                    dot = True
                else:
                    val = val * 10 + (buf[i] - 48)
                    nd += 1
                i += 1
            if nd == 0 or (i < end and buf[i] != _SP and buf[i] != _TAB
                           and buf[i] != _CR and buf[i] != _LF):
                return k, _ERR_TOKEN, ls, line
            is_neighbour = tok >= skip_before and (not edge_weights or (tok - skip_before) % 2 == 0)
            if is_neighbour:
                if dot or nd > 18:
                    return k, _ERR_TOKEN, ls, line
                if neg:
                    return k, _ERR_NEG, ls, line
                if val < 1 or val > n:
                    return k, _ERR_RANGE, ls, line
                if k >= cap:
                    return k, _ERR_LINES, ls, line
                out_u[k] = line
                out_v[k] = val - 1
                k += 1
            tok += 1
        i += 1
        line += 1
    # anything after the n vertex lines must be blank or a comment
    while i < end:
        ls = i
        while i < end and (buf[i] == _SP or buf[i] == _TAB or buf[i] == _CR):
            i += 1
        if i >= end:
            break
        if buf[i] == 37:
            while i < end and buf[i] != _LF:
                i += 1
        elif buf[i] != _LF:
            return k, _ERR_LINES, ls, line + 1
        i += 1
    return k, _ERR_NONE, -1, line


# --------------------------------------------------------------------------- helpers

def _read_bytes(path):
    path = Path(path)
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read()
        else:
            data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (OSError, EOFError, gzip.BadGzipFile) as e:
        raise InputError(f"{path}: cannot read ({e})") from None
    return np.frombuffer(data, dtype=np.uint8)


def _line_number(buf, pos):
    return int(np.count_nonzero(buf[:pos] == _LF)) + 1


def _line_text(buf, pos, width=60):
    end = pos
    n = buf.shape[0]
    while end < n and buf[end] != _LF and end - pos < width:
        end += 1
    return bytes(buf[pos:end]).decode("utf-8", "replace").rstrip("\r")


_MESSAGES = {
    _ERR_TOKEN: "cannot parse {text!r}: expected integer vertex ids",
    _ERR_FEW: "cannot parse {text!r}: expected two vertex ids",
    _ERR_NEG: "negative vertex id in {text!r}",
    _ERR_TAG: "cannot parse {text!r}: expected {what}",
    _ERR_BIG: "vertex id too large in {text!r}",
    _ERR_RANGE: "vertex id out of the declared range 1..{n} in {text!r}",
    _ERR_LINES: "more adjacency lines or entries than the header declares: {text!r}",
}


def _raise(path, buf, code, pos, **kw):
    text = _line_text(buf, pos)
    msg = _MESSAGES[code].format(text=text, **kw)
    raise InputError(f"{where(path, _line_number(buf, pos))}: {msg}")


def _header_lines(buf, start=0):
    """Yield ``(line_start, next_start, text)`` for lines from ``start`` (header parsing)."""
    data = buf
    n = data.shape[0]
    pos = start
    while pos < n:
        rest = data[pos:pos + (1 << 16)]
        hits = np.flatnonzero(rest == _LF)
        nl = pos + int(hits[0]) if hits.size else min(n, pos + rest.shape[0])
        text = bytes(data[pos:nl]).decode("utf-8", "replace").strip()
        yield pos, nl + 1, text
        pos = nl + 1


def _first_content_line(lines, lineno, comment):
    """``(line number, tokens, next offset)`` of the first non-blank line of ``lines`` that
    does not start with ``comment``; ``(last line number, None, None)`` if there is none."""
    for _, nxt, text in lines:
        lineno += 1
        if text and not text.startswith(comment):
            return lineno, text.split(), nxt
    return lineno, None, None


def _chunk_bounds(buf, start, chunk_bytes):
    n = buf.shape[0]
    bounds = [start]
    pos = start
    while pos < n:
        nxt = pos + chunk_bytes
        if nxt >= n:
            break
        rest = np.flatnonzero(buf[nxt:nxt + (1 << 20)] == _LF)
        if rest.size == 0:
            break  # a megabyte without a newline: leave it to one chunk
        nxt += int(rest[0]) + 1
        bounds.append(nxt)
        pos = nxt
    bounds.append(n)
    return bounds


def _parse_pairs_parallel(path, buf, start, comment_a, comment_b, tag, what, chunk_bytes,
                          workers):
    """Parse the body in line-aligned chunks on a thread pool; concatenate in file order."""
    bounds = _chunk_bounds(buf, start, chunk_bytes)

    def work(j):
        s, e = bounds[j], bounds[j + 1]
        cap = int(np.count_nonzero(buf[s:e] == _LF)) + 1
        u = np.empty(cap, np.int64)
        v = np.empty(cap, np.int64)
        k, err, pos = _parse_pairs(buf, s, e, comment_a, comment_b, tag, -1, u, v)
        return u[:k], v[:k], err, pos

    chunks = len(bounds) - 1
    if chunks == 1:
        results = [work(0)]
    else:
        with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
            results = list(pool.map(work, range(chunks)))
    for _, _, err, pos in results:
        if err != _ERR_NONE:
            _raise(path, buf, err, pos, what=what)
    u = np.concatenate([r[0] for r in results]) if chunks > 1 else results[0][0]
    v = np.concatenate([r[1] for r in results]) if chunks > 1 else results[0][1]
    return u, v, bounds, [len(r[0]) for r in results]


def _entry_line(buf, bounds, counts, index, comment_a, comment_b, tag):
    """Byte offset of the line holding record ``index`` (for range errors)."""
    for j, c in enumerate(counts):
        if index < c:
            dummy = np.empty(index + 1, np.int64)
            _, _, pos = _parse_pairs(buf, bounds[j], bounds[j + 1], comment_a, comment_b, tag,
                                     index + 1, dummy, dummy.copy())
            return pos
        index -= c
    return 0


def _check_range(path, buf, bounds, counts, u, v, lo, hi_u, hi_v, comment_a, comment_b, tag):
    bad = np.flatnonzero((u < lo) | (u > hi_u) | (v < lo) | (v > hi_v)) if u.size else []
    if len(bad):
        pos = _entry_line(buf, bounds, counts, int(bad[0]), comment_a, comment_b, tag)
        n = max(hi_u, hi_v)
        raise InputError(f"{where(path, _line_number(buf, pos))}: vertex id out of the declared "
                         f"range {lo}..{n} in {_line_text(buf, pos)!r}")


def _nonempty(path, u):
    if u.size == 0:
        raise InputError(f"{path}: empty graph (no edges)")


# --------------------------------------------------------------------------- formats

def _read_snap(path, buf, chunk_bytes, workers):
    u, v, _, _ = _parse_pairs_parallel(path, buf, 0, ord("#"), ord("%"), 0, "", chunk_bytes,
                                       workers)
    _nonempty(path, u)
    hi = int(max(u.max(), v.max()))
    if hi < max(1 << 26, 8 * u.size):
        # dense enough: a presence array relabels in O(m) (np.unique would sort 2m ids)
        present = np.zeros(hi + 1, bool)
        present[u] = True
        present[v] = True
        ids = np.flatnonzero(present).astype(np.int64)
        relabel = np.cumsum(present, dtype=np.int64) - 1
        u, v = relabel[u], relabel[v]
    else:
        ids, inverse = np.unique(np.concatenate([u, v]), return_inverse=True)
        u, v = inverse[:u.size].astype(np.int64), inverse[u.size:].astype(np.int64)
    if ids.size and ids[0] == 0 and ids[-1] == ids.size - 1:
        return EdgeList(u, v, int(ids.size), None, 0, str(path), "snap")
    return EdgeList(u, v, int(ids.size), ids, 0, str(path), "snap")


def _read_mtx(path, buf, chunk_bytes, workers):
    lines = _header_lines(buf)
    first = next(lines, None)
    if first is None or not first[2].lower().startswith("%%matrixmarket"):
        raise InputError(f"{where(path, 1)}: missing Matrix Market header "
                         "'%%MatrixMarket matrix coordinate ...'")
    banner = first[2].lower().split()
    if len(banner) < 5 or banner[1] != "matrix" or banner[2] != "coordinate":
        raise InputError(f"{where(path, 1)}: only 'matrix coordinate' Matrix Market files are "
                         f"graphs, not {first[2]!r}")
    if banner[3] not in ("pattern", "integer", "real", "complex"):
        raise InputError(f"{where(path, 1)}: unknown field {banner[3]!r}")
    lineno, size, body = _first_content_line(lines, 1, "%")
    if size is None:
        raise InputError(f"{where(path, lineno)}: missing the size line 'ROWS COLS ENTRIES'")
    try:
        rows, cols, nnz = (int(t) for t in size[:3])
        if len(size) != 3 or min(rows, cols, nnz) < 0:
            raise ValueError
    except ValueError:
        raise InputError(f"{where(path, lineno)}: cannot parse size line {' '.join(size)!r}: "
                         "expected 'ROWS COLS ENTRIES'") from None
    u, v, bounds, counts = _parse_pairs_parallel(path, buf, body, ord("%"), 0, 0, "",
                                                 chunk_bytes, workers)
    _check_range(path, buf, bounds, counts, u, v, 1, rows, cols, ord("%"), 0, 0)
    if u.size != nnz:
        raise InputError(f"{where(path, lineno)}: the size line declares {nnz} entries, "
                         f"the file has {u.size}")
    _nonempty(path, u)
    return EdgeList(u - 1, v - 1, max(rows, cols), None, 1, str(path), "mtx")


def _read_dimacs(path, buf, chunk_bytes, workers):
    lineno, header, body = _first_content_line(_header_lines(buf), 0, "c")
    if header is None or header[0] != "p":
        raise InputError(f"{where(path, max(lineno, 1))}: missing DIMACS "
                         "header 'p sp NODES ARCS'")
    try:
        if len(header) != 4:
            raise ValueError
        n, m = int(header[2]), int(header[3])
        if n < 0 or m < 0:
            raise ValueError
    except ValueError:
        raise InputError(f"{where(path, lineno)}: cannot parse DIMACS header "
                         f"{' '.join(header)!r}: expected 'p sp NODES ARCS'") from None
    u, v, bounds, counts = _parse_pairs_parallel(path, buf, body, ord("c"), 0, ord("a"),
                                                 "an arc line 'a U V W'", chunk_bytes, workers)
    _check_range(path, buf, bounds, counts, u, v, 1, n, n, ord("c"), 0, ord("a"))
    _nonempty(path, u)
    return EdgeList(u - 1, v - 1, n, None, 1, str(path), "dimacs")


def _read_metis(path, buf):
    lineno, header, body = _first_content_line(_header_lines(buf), 0, "%")
    if not header:
        raise InputError(f"{where(path, max(lineno, 1))}: missing METIS header 'NODES EDGES "
                         "[FMT [NCON]]'")
    try:
        if len(header) not in (2, 3, 4):
            raise ValueError
        n, m = int(header[0]), int(header[1])
        fmt = header[2].zfill(3) if len(header) > 2 else "000"
        ncon = int(header[3]) if len(header) > 3 else 1
        if n < 0 or m < 0 or len(fmt) != 3 or set(fmt) - {"0", "1"} or ncon < 0:
            raise ValueError
    except ValueError:
        raise InputError(f"{where(path, lineno)}: cannot parse METIS header "
                         f"{' '.join(header)!r}: expected 'NODES EDGES [FMT [NCON]]'") from None
    skip = (fmt[0] == "1") + (ncon if fmt[1] == "1" else 0)
    u = np.empty(2 * m, np.int64)
    v = np.empty(2 * m, np.int64)
    k, err, pos, lines = _parse_metis_body(buf, body, n, skip, fmt[2] == "1", u, v)
    if err != _ERR_NONE:
        _raise(path, buf, err, pos, n=n)
    if lines < n:
        raise InputError(f"{where(path, _line_number(buf, buf.shape[0]))}: the file ends after "
                         f"{lines} of the {n} vertex lines the header declares")
    _nonempty(path, u[:k])
    return EdgeList(u[:k], v[:k], n, None, 1, str(path), "metis")


def detect_format(path):
    """Guess the format of ``path`` from its name and first lines.

    Returns one of :data:`FORMATS`. ``.mtx`` / ``%%MatrixMarket`` → mtx; ``.gr`` or a
    ``p sp`` line → dimacs; ``.graph`` / ``.metis`` → metis; anything else → snap.
    """
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
    except (OSError, EOFError):
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


def read_graph_file(path, fmt="auto", *, chunk_bytes=64 << 20, workers=None):
    """Read a graph file into an :class:`EdgeList`.

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
        Parser threads (default: all cores).

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
    path = Path(path)
    if fmt in (None, "auto"):
        fmt = detect_format(path)
    if fmt not in FORMATS:
        raise InputError(f"{path}: unknown graph format {fmt!r} (choose from {', '.join(FORMATS)})")
    buf = _read_bytes(path)
    if fmt == "snap":
        return _read_snap(path, buf, chunk_bytes, workers)
    if fmt == "mtx":
        return _read_mtx(path, buf, chunk_bytes, workers)
    if fmt == "dimacs":
        return _read_dimacs(path, buf, chunk_bytes, workers)
    return _read_metis(path, buf)
