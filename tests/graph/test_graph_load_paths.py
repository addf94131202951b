"""The in-process loading path (line feeds counted per chunk, every chunk parsed into its slice
of one array, SNAP ids relabelled in place; CSR by edge blocks in parallel, radix row sorts
carrying weights, in-place compaction) against a Python line parser and the Dask path's
per-chunk arrays, on every edge-list format with tricky whitespace, comments, CRLF, lines
without a final newline, gzip, integer and decimal weights; and the ``bfs`` command without
``--scheduler`` importing neither Dask nor Zarr."""

import gzip
import subprocess
import sys
import zlib

import numpy as np
import pytest

from terrain.graph import build_csr, edges_from_chunks, parse_graph_chunk, plan_graph_file
from terrain.graph.loaders import read_graph_file

_BLANKS = ["", " ", "\t", " \t "]


def _tricky_text(rng, fmt, weights, m=300):
    """``(text, [(u, v, w_text or None)])``: ``fmt`` records with random runs of spaces and
    tabs around every token, comment and blank lines anywhere, LF and CRLF line ends mixed,
    and no newline after the last line."""
    comment = {"snap": "#", "mtx": "%", "dimacs": "c"}[fmt]
    records, lines = [], []
    n = 40
    for _ in range(m):
        r = rng.random()
        if r < 0.08:
            lines.append(str(rng.choice(_BLANKS)) + (comment + " note\t x" if r < 0.05 else ""))
            continue
        a, b = (int(x) for x in rng.integers(1, n + 1, 2))
        w = None
        if weights == "int":
            w = str(int(rng.integers(0 if fmt == "dimacs" else -9, 99)))
        elif weights == "float":
            w = rng.choice([repr(float(rng.integers(-80, 80)) / 16), "2.5e-1", "-1E2", "7"])
        sep = lambda: str(rng.choice([" ", "\t", "  ", " \t"]))  # noqa: E731
        tokens = ([ "a"] if fmt == "dimacs" else []) + [str(a), str(b)] + ([w] if w else [])
        line = str(rng.choice(_BLANKS)) + sep().join(tokens) + str(rng.choice(_BLANKS))
        lines.append(line)
        records.append((a, b, w))
    body = "".join(line + ("\r\n" if rng.random() < 0.3 else "\n") for line in lines[:-1])
    body += lines[-1]  # no final newline
    if fmt == "mtx":
        field = {"int": "integer", "float": "real", None: "pattern"}[weights]
        head = f"%%MatrixMarket matrix coordinate {field} general\n% c\n{n} {n} {len(records)}\n"
    elif fmt == "dimacs":
        head = f"c test\np sp {n} {len(records)}\n"
    else:
        head = "# test\n"
    return head + body, records


def _python_edges(records, fmt, weights):
    """(u, v, w) as the loaders must read them: 0-based for the declared formats."""
    base = 0 if fmt == "snap" else 1
    u = np.array([a - base for a, _, _ in records], np.int64)
    v = np.array([b - base for _, b, _ in records], np.int64)
    if weights is None:
        return u, v, None
    floaty = weights == "float" and fmt != "dimacs"
    w = np.array([float(x) if floaty else int(x) for _, _, x in records])
    return u, v, w


@pytest.mark.parametrize("fmt,weights", [("snap", None), ("snap", "int"), ("snap", "float"),
                                         ("mtx", None), ("mtx", "int"), ("mtx", "float"),
                                         ("dimacs", "int")])
@pytest.mark.parametrize("gz", [False, True])
def test_in_process_path_matches_python_and_dask_chunks(tmp_path, fmt, weights, gz):
    rng = np.random.default_rng(zlib.crc32(f"{fmt}{weights}{gz}".encode()))
    text, records = _tricky_text(rng, fmt, weights)
    suffix = {"snap": ".txt", "mtx": ".mtx", "dimacs": ".gr"}[fmt]
    path = tmp_path / ("g" + suffix + (".gz" if gz else ""))
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    want_u, want_v, want_w = _python_edges(records, fmt, weights)
    for chunk_bytes, workers in ((1 << 20, 1), (53, 1), (37, 2), (211, 3)):
        e = read_graph_file(path, chunk_bytes=chunk_bytes, workers=workers)
        ids = e.ids if e.ids is not None else np.arange(e.n) + e.id_base
        assert ids[e.u].tolist() == (want_u + (0 if fmt == "snap" else 1)).tolist()
        assert ids[e.v].tolist() == (want_v + (0 if fmt == "snap" else 1)).tolist()
        if want_w is None:
            assert e.weights is None
        else:
            assert e.weights.tolist() == want_w.tolist()
            assert e.weights.dtype.kind == want_w.dtype.kind
        # the Dask path: every chunk parsed on its own into fresh arrays, then joined
        plan = plan_graph_file(path, chunk_bytes=chunk_bytes)
        data = None
        if plan.compressed:
            from terrain.graph import read_whole_file
            data = read_whole_file(plan)
        d = edges_from_chunks(plan, [parse_graph_chunk(plan, j, data)
                                     for j in range(plan.chunks)])
        assert d.n == e.n and np.array_equal(d.u, e.u) and np.array_equal(d.v, e.v)
        assert (d.weights is None) == (e.weights is None)
        if d.weights is not None:
            assert np.array_equal(d.weights, e.weights) and d.weights.dtype == e.weights.dtype


def test_error_line_numbers_in_the_in_process_path(tmp_path):
    path = tmp_path / "g.txt"
    path.write_bytes(b"# h\r\n1 2\r\n\r\n  \t\r\n3 4\r\n# x\r\n5 z\r\n6 7\r\n")
    from terrain.errors import InputError
    for chunk_bytes, workers in ((1 << 20, 1), (7, 2), (3, 3)):
        with pytest.raises(InputError, match=r"g.txt:7: cannot parse '5 z'"):
            read_graph_file(path, chunk_bytes=chunk_bytes, workers=workers)


@pytest.mark.parametrize("weighted", [None, "int", "float"])
def test_build_csr_radix_rows_and_int32_input(weighted):
    """Rows past 16384 entries (11-bit radix digits), past 32 (8-bit digits), short rows
    (insertion sort), with weights carried through the radix passes; int32 and int64
    endpoint arrays give the same graph, equal to a lexsort oracle."""
    rng = np.random.default_rng(11)
    n = 30000
    u = np.concatenate([np.zeros(20000, np.int64), np.full(500, 7), rng.integers(0, n, 9000)])
    v = np.concatenate([rng.integers(0, n, 20500), rng.integers(0, n, 9000)])
    w = None
    if weighted == "int":
        w = rng.integers(-5, 5, u.size).astype(np.int32)
    elif weighted == "float":
        w = rng.integers(-40, 40, u.size) / 8.0
    a, b = np.concatenate([u, v]), np.concatenate([v, u])
    ww = None if w is None else np.concatenate([w, w])
    keep = a != b
    a, b = a[keep], b[keep]
    assert np.bincount(a).max() > 16384  # a row sorted with 11-bit digits
    key = np.lexsort(((ww[keep] if w is not None else np.zeros(a.size)), b, a))
    a, b = a[key], b[key]
    first = np.ones(a.size, bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    indptr = np.concatenate([[0], np.cumsum(np.bincount(a[first], minlength=n))])
    for uu, vv in ((u, v), (u.astype(np.int32), v.astype(np.int32))):
        g = build_csr(n, uu, vv, weights=w)
        assert g.indptr.tolist() == indptr.tolist()
        assert g.indices.tolist() == b[first].tolist()
        if w is not None:
            assert g.weights.tolist() == ww[keep][key][first].tolist()
            assert g.weights.dtype == w.dtype


def test_bfs_without_scheduler_imports_no_dask(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("# g\n1 2\n2 3\n3 1\n4 5\n")
    code = ("import sys, terrain.run as r; rc = r.main(['bfs', sys.argv[1], '--source', '1', "
            "'--backend', 'cpu']); print(sorted(m for m in ('dask', 'distributed', 'zarr') "
            "if m in sys.modules)); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "reached 3 of 5 vertices" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "[]"
    assert "Dask dashboard" not in proc.stderr


def _decimal_tokens(rng, count):
    """Decimal weights of every shape: short and long mantissas (past the 15 digits of the
    fast path), leading and trailing zeros, exponents in and out of 1e±22, signs."""
    out = []
    for _ in range(count):
        digits = "".join(str(d) for d in rng.integers(0, 10, int(rng.integers(1, 22))))
        point = int(rng.integers(0, len(digits) + 1))
        body = digits[:point] + "." + digits[point:]
        if rng.random() < 0.2:
            body = "0.000" + digits
        if rng.random() < 0.4:
            body += rng.choice(["e", "E"]) + str(rng.choice(["", "-", "+"])) + \
                str(int(rng.integers(0, 40)))
        out.append(str(rng.choice(["", "-", "+"])) + body)
    return out


@pytest.mark.parametrize("fmt", ["snap", "mtx"])
def test_decimal_weights_round_like_python_float(tmp_path, fmt):
    rng = np.random.default_rng(5 if fmt == "snap" else 6)
    tokens = _decimal_tokens(rng, 3000)
    lines = [f"{1 + j % 50} {1 + (7 * j) % 50} {t}" for j, t in enumerate(tokens)]
    head = ("%%MatrixMarket matrix coordinate real general\n50 50 3000\n" if fmt == "mtx"
            else "")
    path = tmp_path / ("g.mtx" if fmt == "mtx" else "g.txt")
    path.write_text(head + "\n".join(lines) + "\n")
    want = np.array([float(t) for t in tokens])
    for workers in (1, 2):
        e = read_graph_file(path, chunk_bytes=4096, workers=workers)
        assert e.weights.dtype == np.float64
        assert np.array_equal(e.weights.view(np.int64), want.view(np.int64))  # bit for bit


def test_line_feed_count_across_its_blocks():
    """The 32-byte-step line-feed count (the slices' sizes in the in-process path) against
    ``bytes.count`` on lengths around its 32-byte steps and 255-step folds, dense and sparse."""
    from terrain.graph._native import lf_count
    rng = np.random.default_rng(3)
    for length in (0, 1, 31, 32, 33, 255 * 32 - 1, 255 * 32, 255 * 32 + 1, 2 * 255 * 32 + 45,
                   70001):
        for p in (0.0, 0.05, 1.0):
            buf = np.where(rng.random(length) < p, 10, rng.integers(11, 256, length))
            buf = buf.astype(np.uint8)
            assert lf_count(buf) == buf.tobytes().count(b"\n")
            if length > 3:  # an unaligned start
                assert lf_count(buf[3:]) == buf[3:].tobytes().count(b"\n")
