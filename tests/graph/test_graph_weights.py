"""Weights end to end: loaders (SNAP, Matrix Market, DIMACS, METIS; gzip), directed arc lists,
parallel edges (minimum weight), self-loops, CSR, as_graph, the cache. Expected values come
from independent parses (Python's ``float``/``int`` per token, networkx, scipy)."""

import gzip
import re

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from terrain.errors import InputError
from terrain.graph import as_graph, build_csr, load_graph, read_graph_cache, write_graph_cache


def _write(path, text, gz=False):
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def _weighted_edges(graph):
    """{(file id, file id): weight} of the stored arcs (both directions when undirected)."""
    ids = graph.id_array()
    rows = np.repeat(np.arange(graph.n), np.diff(graph.indptr))
    py = [x.item() if hasattr(x, "item") else x for x in ids]
    return {(py[a], py[b]): graph.weights[e].item()
            for e, (a, b) in enumerate(zip(rows, graph.indices))}


def _reference(triples, directed, convert):
    """Independent expectation: minimum weight per (undirected or directed) pair."""
    out = {}
    for a, b, w in triples:
        if a == b:
            continue
        w = convert(w)
        keys = [(a, b)] if directed else [(a, b), (b, a)]
        for k in keys:
            out[k] = min(out.get(k, w), w)
    return out


FLOAT_TOKENS = ["1.5", "2e-3", "-0.25", ".5", "7.", "3.14159265358979311", "1E+2", "0.1",
                "12", "+4.75"]


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("kind", ["int", "float"])
def test_snap_third_column(tmp_path, gz, kind):
    rng = np.random.default_rng(1)
    ids = rng.choice(np.arange(3, 10**7, 97), 30, replace=False)
    triples = []
    for k in range(200):
        a, b = (int(x) for x in rng.choice(ids, 2))
        w = str(int(rng.integers(-5, 1000))) if kind == "int" else FLOAT_TOKENS[k % 10]
        triples.append((a, b, w))
    triples.append((int(ids[0]), int(ids[0]), "1"))           # a self-loop: dropped
    text = "# u v w\n" + "".join(f"{a}\t{b} {w}\n" for a, b, w in triples)
    g = load_graph(_write(tmp_path / "g.txt", text, gz))
    assert g.weights.dtype == (np.int64 if kind == "int" else np.float64)
    assert not g.directed
    assert _weighted_edges(g) == _reference(triples, False, int if kind == "int" else float)
    d = load_graph(_write(tmp_path / "g.txt", text, gz), directed=True)
    assert d.directed and _weighted_edges(d) == _reference(triples, True,
                                                            int if kind == "int" else float)


@pytest.mark.parametrize("text,line,what", [
    ("1 2 3\n2 3\n3 4 5\n", 2, "expected a numeric weight"),       # a line without
    ("1 2\n2 3\n3 4 7\n", 3, "a third column"),                    # a weight where none
    # the first line an edge, not a header of counts: unweighted, the next line is wrong
    ("1 2\n2 3 7\n", 2, "cannot parse '2 3 7': a third column, where the file's first edge "
                        "line, 1, has none"),
    ("1 2 3\n3 4 x\n", 2, "expected a numeric weight"),
    ("# w\n1 2 3\n3 4 abc\n", 3, "expected a numeric weight"),
    ("1 2 0.5\n3 4 nan\n", 2, "expected a numeric weight"),
    ("1 2 1\n3 4 inf\n5 6 2\n", 2, "expected a numeric weight"),
    ("1 2 1\n3 4 1e400\n", 2, "not a finite number")])
def test_a_bad_or_missing_weight_is_refused_at_its_line(tmp_path, text, line, what):
    """A SNAP file is weighted when its first edge line has a third column, then on every
    line (a finite number), else on none: never silently read as unweighted."""
    with pytest.raises(InputError, match=rf"g\.txt:{line}: .*{what}"):
        load_graph(_write(tmp_path / "g.txt", text))


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("field,symmetry", [("integer", "general"), ("real", "symmetric"),
                                            ("real", "general"), ("pattern", "general")])
def test_matrix_market_values(tmp_path, gz, field, symmetry):
    rng = np.random.default_rng(2)
    n = 25
    triples = []
    for k, (a, b) in enumerate(rng.integers(1, n + 1, size=(90, 2))):
        if symmetry == "symmetric" and a < b:
            a, b = b, a
        w = {"integer": str(int(rng.integers(0, 50))), "real": FLOAT_TOKENS[k % 10],
             "pattern": ""}[field]
        triples.append((int(a), int(b), w))
    text = (f"%%MatrixMarket matrix coordinate {field} {symmetry}\n{n} {n} {len(triples)}\n"
            + "".join(f"{a} {b} {w}\n" for a, b, w in triples))
    path = _write(tmp_path / "g.mtx", text, gz)
    g = load_graph(path)
    if field == "pattern":
        assert g.weights is None
        return
    convert = int if field == "integer" else float
    assert g.weights.dtype == (np.int64 if field == "integer" else np.float64)
    assert _weighted_edges(g) == _reference(triples, False, convert)
    d = load_graph(path, directed=True)
    arcs = triples + ([(b, a, w) for a, b, w in triples] if symmetry == "symmetric" else [])
    assert _weighted_edges(d) == _reference(arcs, True, convert)


@pytest.mark.parametrize("gz", [False, True])
def test_dimacs_is_directed(tmp_path, gz):
    rng = np.random.default_rng(3)
    n = 20
    triples = [(int(a), int(b), str(int(rng.integers(0, 100))))
               for a, b in rng.integers(1, n + 1, size=(70, 2))]
    text = f"c x\np sp {n} {len(triples)}\n" + "".join(f"a {a} {b} {w}\n" for a, b, w in triples)
    path = _write(tmp_path / "g.gr", text, gz)
    g = load_graph(path)
    assert g.directed and g.weights.dtype == np.int64 and g.n == n
    assert _weighted_edges(g) == _reference(triples, True, int)
    u = load_graph(path, directed=False)
    assert not u.directed and _weighted_edges(u) == _reference(triples, False, int)


@pytest.mark.parametrize("fmt", ["1", "11", "011"])
def test_metis_edge_weights(tmp_path, fmt):
    G = nx.gnm_random_graph(15, 35, seed=4)
    rng = np.random.default_rng(4)
    for a, b in G.edges():
        G[a][b]["weight"] = int(rng.integers(1, 60))
    lines = [f"{G.number_of_nodes()} {G.number_of_edges()} {fmt}"]
    for v in range(G.number_of_nodes()):
        toks = ["5"] if fmt.endswith("11") else []
        for w in sorted(G[v]):
            toks += [str(w + 1), str(G[v][w]["weight"])]
        lines.append(" ".join(toks))
    g = load_graph(_write(tmp_path / "g.graph", "\n".join(lines) + "\n"))
    expected = {(a + 1, b + 1): d["weight"] for a, b, d in G.edges(data=True)}
    expected.update({(b, a): w for (a, b), w in expected.items()})
    assert g.weights.dtype == np.int64 and _weighted_edges(g) == expected


BAD = [
    ("i.mtx", "%%MatrixMarket matrix coordinate integer general\n3 3 2\n1 2 4\n2 3 1.5\n",
     "i.mtx:4: cannot parse '2 3 1.5': expected an integer weight"),
    ("r.mtx", "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 4\n2 3\n",
     "r.mtx:4: cannot parse '2 3': expected a numeric weight"),
    ("w.gr", "p sp 3 2\na 1 2 4\na 2 3 x\n", "w.gr:3: cannot parse 'a 2 3 x': expected a numeric"),
    ("m.graph", "2 1 1\n2 1.5\n1 1.5\n", "m.graph:2: cannot parse '2 1.5': expected an integer"),
    # 19 digits: a number, too large for the integer weights these formats declare
    ("b.mtx", "%%MatrixMarket matrix coordinate integer general\n3 3 2\n1 2 4\n"
     "2 3 9223372036854775807\n", "b.mtx:4: integer weight too large in "
     "'2 3 9223372036854775807' (integer weights are below 10^18: 18 digits at most)"),
    ("b.gr", "p sp 3 2\na 1 2 4\na 2 3 1000000000000000000\n",
     "b.gr:3: integer weight too large in 'a 2 3 1000000000000000000'"),
    ("b.graph", "2 1 1\n2 1000000000000000000\n1 1000000000000000000\n",
     "b.graph:2: integer weight too large in '2 1000000000000000000'"),
]


@pytest.mark.parametrize("name,text", [
    ("e.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 {w}\n"),
    ("e.gr", "p sp 2 1\na 1 2 {w}\n"), ("e.graph", "2 1 1\n2 {w}\n1 {w}\n")])
def test_integer_weights_of_18_digits_load_exactly(tmp_path, name, text):
    """The largest integer weight these formats take, read as Python's int reads it."""
    token = "-999999999999999999" if name.endswith(".mtx") else "999999999999999999"
    g = load_graph(_write(tmp_path / name, text.format(w=token)))
    assert g.weights.dtype == np.int64 and set(g.weights.tolist()) == {int(token)}


@pytest.mark.parametrize("name,text,message", BAD, ids=[b[0] for b in BAD])
def test_bad_weights_name_the_line(tmp_path, name, text, message):
    with pytest.raises(InputError, match=re.escape(message)):
        load_graph(_write(tmp_path / name, text))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_dtype_kept_through_csr_as_graph_and_cache(tmp_path, dtype):
    rng = np.random.default_rng(5)
    n = 40
    u, v = rng.integers(0, n, 300), rng.integers(0, n, 300)
    w = rng.integers(1, 100, 300).astype(dtype) / (dtype(4) if np.dtype(dtype).kind == "f" else 1)
    w = w.astype(dtype)
    for directed in (False, True):
        g = as_graph(sp.coo_matrix((w, (u, v)), shape=(n, n)), directed=directed)
        assert g.weights.dtype == dtype and g.directed == directed
        trip = [(int(a), int(b), x) for a, b, x in zip(u, v, w)]
        assert _weighted_edges(g) == _reference(trip, directed, lambda x: x.item())
        write_graph_cache(g, tmp_path / f"g{directed}.zarr")
        back = read_graph_cache(tmp_path / f"g{directed}.zarr")
        assert back.weights.dtype == dtype and back.directed == directed
        assert np.array_equal(back.weights, g.weights)
        assert np.array_equal(back.indices, g.indices) and np.array_equal(back.indptr, g.indptr)


def test_networkx_weight_attribute_and_lcc_carry_weights():
    G = nx.Graph()
    G.add_edge("a", "b", weight=2.5)
    G.add_edge("b", "c")                     # no attribute: weighs 1, as in networkx
    G.add_edge("x", "y", weight=7.0)
    g = as_graph(G)
    assert _weighted_edges(g)[("a", "b")] == 2.5 and _weighted_edges(g)[("c", "b")] == 1
    assert as_graph(G, weight=None).weights is None
    from terrain.graph import largest_component
    lcc, _ = largest_component(g)
    assert _weighted_edges(lcc) == {k: v for k, v in _weighted_edges(g).items()
                                   if "x" not in k}
    D = nx.DiGraph([(1, 2, {"weight": 3}), (2, 1, {"weight": 5})])
    assert _weighted_edges(as_graph(D)) == {(1, 2): 3, (2, 1): 5}
    assert _weighted_edges(as_graph(D).undirected()) == {(1, 2): 3, (2, 1): 3}


def test_unsigned_weights_widen_to_int64_or_are_refused_beyond_it():
    """uint64 weights widen to int64 while they fit (the MST total equals NetworkX's on the
    same weights as Python integers); one beyond int64 would wrap round to a negative
    weight, so it is refused, naming the graph."""
    from terrain.graph import minimum_spanning_forest
    rows, cols = np.array([0, 1, 0]), np.array([1, 2, 2])
    fits = np.array([2 ** 62, 3, 2 ** 62 + 1], np.uint64)
    G = nx.Graph([(int(a), int(b), {"weight": int(x)}) for a, b, x in zip(rows, cols, fits)])
    want = sum(x for _, _, x in nx.minimum_spanning_tree(G).edges(data="weight"))
    r = minimum_spanning_forest(sp.coo_matrix((fits, (rows, cols)), shape=(3, 3)),
                                backend="cpu")
    assert r.total_weight == want
    beyond = np.array([2 ** 63 + 5, 3, 1], np.uint64)
    with pytest.raises(InputError, match=r"matrix: edge weight 9223372036854775813 is beyond "
                                         r"int64"):
        minimum_spanning_forest(sp.coo_matrix((beyond, (rows, cols)), shape=(3, 3)),
                                backend="cpu")


def test_build_csr_weighted_matches_scipy_min():
    rng = np.random.default_rng(6)
    n = 300
    u, v = rng.integers(0, n, 5000), rng.integers(0, n, 5000)
    w = rng.random(5000)
    g = build_csr(n, u, v, weights=w)
    # independent: scipy's coo -> csr with a minimum over duplicates via sorting
    keep = u != v
    uu, vv, ww = (np.concatenate([u[keep], v[keep]]), np.concatenate([v[keep], u[keep]]),
                  np.concatenate([w[keep], w[keep]]))
    order = np.lexsort((ww, vv, uu))
    uu, vv, ww = uu[order], vv[order], ww[order]
    first = np.ones(uu.size, bool)
    first[1:] = (uu[1:] != uu[:-1]) | (vv[1:] != vv[:-1])
    A = sp.csr_matrix((ww[first], (uu[first], vv[first])), shape=(n, n))
    A.sort_indices()
    assert np.array_equal(g.indptr, A.indptr) and np.array_equal(g.indices, A.indices)
    assert np.array_equal(g.weights, A.data)


def test_decimal_weights_parse_to_pythons_float_bit_for_bit():
    """Decimal weights off the parser's exact fast path (16-19 significant digits, large
    exponents, values a hair from halfway between two doubles) come out as Python's
    ``float`` of the token, bit for bit: the 128-bit rounding, ``strtod`` or the Python
    fallback, whichever takes them."""
    import math
    import random
    from decimal import Decimal, getcontext
    from terrain.graph._native import parse_pairs
    getcontext().prec = 60
    rng = random.Random(5)
    tokens = []
    for _ in range(20000):
        d = rng.random() * 10.0 ** rng.randint(-15, 20)
        mid = (Decimal(d) + Decimal(math.nextafter(d, math.inf))) / 2  # a halfway point
        tokens += ["%.17g" % d, format(mid, f".{rng.randint(14, 18)}e"),
                   "%.*g" % (rng.randint(1, 19), rng.random() * 10.0 ** rng.randint(-30, 30))]
        m = str(rng.randint(1, 10 ** rng.randint(1, 19) - 1))
        cut = rng.randint(0, len(m))
        tokens.append((m[:cut] or "0") + "." + m[cut:] + f"e{rng.randint(-25, 25)}")
    # decimals all (an integer token of up to 18 digits is an int64 weight) ...
    tokens = [("-" if rng.random() < 0.2 else "") + t + ("" if "." in t or "e" in t else ".0")
              for t in tokens]
    # ... and integers of 19 to 40 digits, read as decimals (int64 holds none of them whole)
    tokens += [("-" if rng.random() < 0.2 else "") + str(rng.randint(10 ** 18, 10 ** 40))
               for _ in range(2000)] + ["9223372036854775807", "2305843009213693952"]
    buf = np.frombuffer("".join(f"1 2 {t}\n" for t in tokens).encode(), np.uint8)
    n = len(tokens)
    u, v, w_int = (np.zeros(n, np.int64) for _ in range(3))
    w_len, w_flt = np.zeros(n, np.int32), np.zeros(n)
    assert parse_pairs(buf, ord("%"), 0, 0, -1, u, v, 3, w_int, w_len, w_flt)[:2] == (n, 0)
    from terrain.graph.loaders import _chunk_weights
    got = _chunk_weights(buf, n, w_int, w_len, w_flt)
    want = np.array([float(t) for t in tokens])
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))
    decimal = w_len < 0
    assert not np.isnan(w_flt[decimal]).any()  # none was left to Python's float
