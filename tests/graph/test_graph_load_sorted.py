"""Fast paths of the weighted load: rows that come out of the scatter already
strictly increasing skip the sort and de-duplication, plain integer weights skip the
decimal scanner, the declared id range is checked and shifted in one pass. Every case is
checked against scipy.sparse (CSR of the same entries, parallel edges keeping the minimum
weight) on files in the orders Matrix Market writers use."""

import numpy as np
import pytest
import scipy.sparse as sp

from terrain.errors import InputError
from terrain.graph import build_csr, load_graph


def _min_csr(n, u, v, w):
    """Reference CSR: both directions, self loops dropped, min weight per arc, rows sorted."""
    keep = u != v
    uu = np.concatenate([u[keep], v[keep]])
    vv = np.concatenate([v[keep], u[keep]])
    ww = np.concatenate([w[keep], w[keep]])
    order = np.lexsort((ww, vv, uu))
    uu, vv, ww = uu[order], vv[order], ww[order]
    first = np.ones(uu.size, bool)
    first[1:] = (uu[1:] != uu[:-1]) | (vv[1:] != vv[:-1])
    a = sp.csr_matrix((ww[first], (uu[first], vv[first])), shape=(n, n))
    a.sort_indices()
    return a


def _write_mtx(path, n, rows, cols, w, field="integer"):
    with open(path, "w") as f:
        f.write(f"%%MatrixMarket matrix coordinate {field} symmetric\n% a comment\n")
        f.write(f"{n} {n} {rows.size}\n")
        for r, c, x in zip(rows, cols, w):
            f.write(f"{r + 1} {c + 1} {x}\n")


@pytest.mark.parametrize("order", ["row", "column", "random", "duplicates"])
def test_symmetric_mtx_in_writer_orders_equals_scipy(tmp_path, order):
    rng = np.random.default_rng(3)
    n, m = 400, 5000
    a, b = rng.integers(0, n, m), rng.integers(0, n, m)
    rows, cols = np.maximum(a, b), np.minimum(a, b)          # lower triangle
    key = np.unique(rows * n + cols)
    rows, cols = key // n, key % n                           # unique, row order
    if order == "column":
        o = np.lexsort((rows, cols))
        rows, cols = rows[o], cols[o]
    elif order == "random":
        o = rng.permutation(rows.size)
        rows, cols = rows[o], cols[o]
    elif order == "duplicates":
        extra = rng.integers(0, rows.size, 300)
        rows, cols = np.concatenate([rows, rows[extra]]), np.concatenate([cols, cols[extra]])
    w = rng.integers(-5, 1000, rows.size)
    path = tmp_path / "g.mtx"
    _write_mtx(path, n, rows, cols, w)
    g = load_graph(path)
    want = _min_csr(n, rows, cols, w)
    assert g.weights.dtype == np.int64
    assert np.array_equal(g.indptr, want.indptr)
    assert np.array_equal(g.indices, want.indices)
    assert np.array_equal(g.weights, want.data)


def test_sorted_and_unsorted_rows_mixed():
    """Some rows arrive sorted, some not, some with a repeated neighbour right after
    itself (not strictly increasing): each row is handled on its own."""
    u = np.array([0, 0, 0, 1, 3, 3, 2, 2, 4, 4])
    v = np.array([1, 2, 3, 2, 1, 0, 4, 4, 0, 1])
    w = np.array([5, 4, 3, 2, 1, 9, 7, 6, 8, 2])
    g = build_csr(5, u, v, weights=w, directed=True)
    ref = {}
    for a, b, x in zip(u, v, w):
        ref[(a, b)] = min(ref.get((a, b), x), x)
    got = {}
    for i in range(5):
        for e in range(g.indptr[i], g.indptr[i + 1]):
            got[(i, int(g.indices[e]))] = int(g.weights[e])
        assert np.all(np.diff(g.indices[g.indptr[i]:g.indptr[i + 1]]) > 0)
    assert got == ref


@pytest.mark.parametrize("token, value", [("7", 7), ("-12", -12), ("+3", 3), ("0012", 12),
                                          ("4.0", 4.0), ("2e1", 20.0)])
def test_weight_tokens_fast_and_general_paths(tmp_path, token, value):
    """Plain integers take the fast path; a sign '+', a decimal point or an exponent the
    general scanner; the results are the same as Python's int() / float()."""
    path = tmp_path / "g.txt"
    path.write_text(f"1 2 {token}\n2 3 5\n")
    g = load_graph(path)
    assert g.weights.dtype == (np.float64 if isinstance(value, float) else np.int64)
    assert g.weights[0] == value


def test_declared_range_error_names_the_line(tmp_path):
    path = tmp_path / "g.mtx"
    path.write_text("%%MatrixMarket matrix coordinate integer symmetric\n3 3 3\n2 1 4\n"
                    "3 2 5\n4 1 6\n")
    with pytest.raises(InputError, match=r"g\.mtx:5: vertex id out of the declared range"):
        load_graph(path)
    path.write_text("%%MatrixMarket matrix coordinate integer symmetric\n3 3 2\n2 1 4\n"
                    "3 0 5\n")
    with pytest.raises(InputError, match=r"g\.mtx:4: vertex id out of the declared range"):
        load_graph(path)


@pytest.mark.parametrize("big", ["4294967297", "2147483648", "999999999999999999"])
def test_ids_beyond_int32_are_range_errors_not_wrapped(tmp_path, big):
    """Ids past the declared range that would wrap to 1 or to a negative number in 32 bits
    are reported on their line (the range check and the id shift are one pass)."""
    path = tmp_path / "g.mtx"
    path.write_text("%%MatrixMarket matrix coordinate integer symmetric\n3 3 2\n2 1 4\n"
                    f"{big} 2 5\n")
    with pytest.raises(InputError, match=r"g\.mtx:4: vertex id out of the declared range"):
        load_graph(path)
    path.write_text("%%MatrixMarket matrix coordinate integer symmetric\n3 3 2\n2 1 4\n"
                    f"3 {big} 5\n")
    with pytest.raises(InputError, match=r"g\.mtx:4: vertex id out of the declared range"):
        load_graph(path)

