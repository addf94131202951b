"""Minimum spanning forests of general graphs: total weight equals scipy's
minimum_spanning_tree, the edge set equals a reference Kruskal with the (weight, edge id)
order, disconnected graphs give forests, CPU == GPU; the mst command on graph files."""

import math

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import minimum_spanning_tree

from backends import assert_backends_identical
from cli import run_cli
from terrain.errors import InputError
from terrain.graph import as_graph
from terrain.graph.mst import minimum_spanning_forest


def _kruskal(n, u, v, w):
    """Reference: undirected simple edges (min weight per pair), ids = lexicographic (u, v)
    order with u < v, Kruskal in (weight, id) order; returns ({(u, v)}, trees)."""
    best = {}
    for a, b, x in zip(u.tolist(), v.tolist(), w.tolist()):
        if a == b:
            continue
        k = (min(a, b), max(a, b))
        best[k] = min(best.get(k, x), x)
    pairs = sorted(best)
    order = sorted(range(len(pairs)), key=lambda i: (best[pairs[i]], i))
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    chosen = set()
    for i in order:
        a, b = pairs[i]
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
            chosen.add(pairs[i])
    return chosen, n - len(chosen)


@pytest.mark.parametrize("kind", ["int", "float", "ties", "negative"])
def test_forest_equals_kruskal_and_scipy(kind):
    rng = np.random.default_rng(7)
    for seed in range(8):
        n = int(rng.integers(5, 120))
        m = int(rng.integers(n // 2, 4 * n))
        u, v = rng.integers(0, n, m), rng.integers(0, n, m)
        w = {"int": rng.integers(1, 1000, m), "float": rng.random(m) + 0.01,
             "ties": rng.integers(1, 4, m), "negative": rng.integers(-50, 50, m)}[kind]
        g = as_graph(sp.coo_matrix((w, (u, v)), shape=(n, n)))
        r = minimum_spanning_forest(g, backend="cpu")
        ref, trees = _kruskal(n, u, v, w)
        assert set(zip(r.u.tolist(), r.v.tolist())) == ref
        assert r.trees == trees
        assert np.all(r.u < r.v) and np.all(np.diff(r.edge_ids) > 0)
        if kind != "negative":   # scipy drops zero weights; negative sums stay comparable
            total = minimum_spanning_tree(g.to_scipy(weighted=True)).sum()
            if kind == "float":
                assert r.total_weight == pytest.approx(total, rel=1e-12)
            else:
                assert r.total_weight == int(total)


@pytest.mark.parametrize("backend", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_an_integer_total_beyond_int64_is_exact(backend):
    """Weights of -1e17, 5 and 1e17 on 600 edges: the forest of 199 weighs -1.6e19, beyond
    int64, where one int64 sum wrapped round to a positive total; it equals NetworkX's sum
    of Python integers."""
    G = nx.gnm_random_graph(200, 600, seed=4)
    rng = np.random.default_rng(4)
    for a, b in G.edges:
        G[a][b]["weight"] = int(rng.choice([-10 ** 17, 10 ** 17, 5]))
    want = sum(w for _, _, w in nx.minimum_spanning_tree(G).edges(data="weight"))
    assert want < -2 ** 63
    assert minimum_spanning_forest(G, backend=backend).total_weight == want


def test_disconnected_graph_and_networkx_ids():
    G = nx.Graph()
    G.add_weighted_edges_from([("a", "b", 3), ("b", "c", 1), ("a", "c", 2), ("x", "y", 5)])
    G.add_node("lonely")
    r = minimum_spanning_forest(G, backend="cpu")
    assert r.trees == 3 and r.total_weight == 8
    got = {frozenset((a, b)) for a, b in zip(r.u.tolist(), r.v.tolist())}   # nodes, as ids
    want = {frozenset(e) for e in nx.minimum_spanning_edges(G, data=False)}
    assert got == want


def test_a_file_graphs_forest_is_in_its_ids(tmp_path):
    """A DIMACS file (ids from 1) and a SNAP edge list of sparse ids: the forest's ends are
    the file's ids, the edges networkx's Kruskal takes on the same labelled graph (distinct
    weights: one forest)."""
    G = nx.connected_watts_strogatz_graph(30, 4, 0.3, seed=2)
    for k, (a, b) in enumerate(G.edges):
        G[a][b]["weight"] = k + 1
    gr = tmp_path / "g.gr"
    gr.write_text(f"p sp 30 {2 * G.number_of_edges()}\n" + "".join(
        f"a {a + 1} {b + 1} {d['weight']}\na {b + 1} {a + 1} {d['weight']}\n"
        for a, b, d in G.edges(data=True)))
    snap = tmp_path / "g.txt"
    snap.write_text("".join(f"{7 * a + 3} {7 * b + 3} {d['weight']}\n"
                            for a, b, d in G.edges(data=True)))
    for path, label in ((gr, lambda x: x + 1), (snap, lambda x: 7 * x + 3)):
        from terrain.graph import load_graph
        r = minimum_spanning_forest(load_graph(path), backend="cpu")
        H = nx.relabel_nodes(G, {x: label(x) for x in G})
        want = {frozenset(e) for e in nx.minimum_spanning_edges(H, data=False)}
        assert {frozenset((a, b)) for a, b in zip(r.u.tolist(), r.v.tolist())} == want


def test_unweighted_graph_counts_edges():
    r = minimum_spanning_forest(nx.grid_2d_graph(5, 6), backend="cpu")
    assert r.total_weight == 29 and r.trees == 1


def _typed_graph(kind, n, m, seed, hubs=0):
    """A random graph with weights of ``kind`` (each dtype's own key path) and ``hubs``
    vertices joined to a fifth of the others (rows longer than a warp)."""
    rng = np.random.default_rng(seed)
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    if hubs:
        spokes = rng.integers(0, n, (hubs, n // 5))
        u = np.concatenate([u, np.repeat(np.arange(hubs), n // 5)])
        v = np.concatenate([v, spokes.ravel()])
    k = u.size
    w = {"int32": rng.integers(-1000, 1000, k).astype(np.int32),
         "int32-ties": rng.integers(1, 4, k).astype(np.int32),
         "float32": (rng.integers(-3, 4, k) * 0.5).astype(np.float32),
         "int64-wide": rng.integers(-2**51, 2**51, k),  # too wide for w - min: a sort
         "int64": rng.integers(0, 100, k),
         "float64": rng.random(k) - 0.5,
         "unweighted": np.ones(k, bool)}[kind]
    if kind == "float32":
        w[w == 0] = np.where(rng.random(int((w == 0).sum())) < 0.5, -0.0, 0.0)
    return as_graph(sp.coo_matrix((w, (u, v)), shape=(n, n))), u, v, w


KINDS = ["int32", "int32-ties", "float32", "int64-wide", "int64", "float64", "unweighted"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_weight_dtype_with_edge_filter(kind):
    """Each key path (int32 and float32 ranks from the bits, int64 offsets or a sort,
    unweighted) on a graph dense enough for the light/heavy edge filter."""
    g, u, v, w = _typed_graph(kind, 300, 3000, 11, hubs=2)
    r = minimum_spanning_forest(g, backend="cpu")
    assert r.extra["light_threshold"] is not None and r.rounds > 1
    if kind == "unweighted":
        w = np.ones(u.size, np.int64)
    ref, trees = _kruskal(g.n, u, v, w)
    assert set(zip(r.u.tolist(), r.v.tolist())) == ref and r.trees == trees
    assert r.weight.dtype == (np.int64 if kind == "unweighted" else g.weights.dtype)
    assert r.u.dtype == r.v.dtype == g.indices.dtype and r.edge_ids.dtype == np.int32
    rows = np.repeat(np.arange(g.n), np.diff(g.indptr))
    upper = g.indices > rows  # edge ids: the arcs u < v in CSR order
    eu, ev = rows[upper], g.indices[upper]
    ew = g.weights[upper] if g.weights is not None else np.ones(g.m, np.int64)
    assert np.array_equal(eu[r.edge_ids], r.u) and np.array_equal(ev[r.edge_ids], r.v)
    assert np.array_equal(ew[r.edge_ids], r.weight)
    exact = math.fsum(r.weight.astype(np.float64).tolist()) if w.dtype.kind == "f" \
        else int(r.weight.astype(object).sum())
    assert r.total_weight == exact


def test_bench_grid_csr_is_a_valid_weighted_grid():
    from terrain.graph.generators import weighted_grid_graph
    from terrain.graph import build_csr
    g = weighted_grid_graph(5, 7, seed=1)
    rows = np.repeat(np.arange(g.n), np.diff(g.indptr))
    ref = build_csr(g.n, rows, g.indices, weights=g.weights)  # symmetric, sorted: unchanged
    assert np.array_equal(ref.indptr, g.indptr) and np.array_equal(ref.indices, g.indices)
    assert np.array_equal(ref.weights, g.weights) and g.m == 5 * 6 + 4 * 7
    assert set(np.abs(rows - g.indices).tolist()) == {1, 7}
    total = int(minimum_spanning_tree(g.to_scipy(weighted=True)).sum())
    assert minimum_spanning_forest(g, backend="cpu").total_weight == total


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["int", "float", "ties"])
def test_cpu_and_gpu_identical(kind):
    rng = np.random.default_rng(8)
    n, m = 20000, 80000
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    w = {"int": rng.integers(1, 10**6, m), "float": rng.random(m),
         "ties": rng.integers(1, 3, m)}[kind]
    g = as_graph(sp.coo_matrix((w, (u, v)), shape=(n, n)))

    def run(backend):
        r = minimum_spanning_forest(g, backend=backend)
        return r.u, r.v, r.weight, r.edge_ids, r.total_weight, r.trees, r.rounds
    assert_backends_identical(run)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_gpu_kernels_every_dtype_equal_kruskal(kind):
    """The device's extract (warp-walked hub rows), offer and join on every key path, with
    and without the edge filter: equal to the reference Kruskal and to the CPU twin."""
    for n, m, hubs in ((300, 3000, 3), (5000, 6000, 1)):
        g, u, v, w = _typed_graph(kind, n, m, 12, hubs=hubs)
        r = minimum_spanning_forest(g, backend="gpu")
        assert (r.extra["light_threshold"] is not None) == (n == 300)
        assert r.extra["device_seconds"] > 0
        ref, trees = _kruskal(n, u, v, np.ones(u.size, np.int64) if kind == "unweighted"
                              else w)
        assert set(zip(r.u.tolist(), r.v.tolist())) == ref and r.trees == trees

        def run(backend):
            x = minimum_spanning_forest(g, backend=backend)
            return x.u, x.v, x.weight, x.edge_ids, x.total_weight, x.trees, x.rounds, \
                x.extra["worklist"]
        assert_backends_identical(run)


def test_upload_wire_dtypes_from_a_weight_sample():
    """The upload's guess: the narrowest integer type a strided sample fits; none for
    floats or ranges that need the full width."""
    from terrain.graph.mst import _wire_weight_dtype
    cases = [(np.arange(1, 101, dtype=np.int32), np.uint8),
             (np.arange(-1000, 1000, dtype=np.int32), np.int16),
             (np.arange(0, 100, dtype=np.int64), np.uint8),
             (np.array([0, 2**40]), np.dtype(None)),
             (np.array([-2**31, 5], np.int64), np.int32),
             (np.array([-2**31, 5], np.int32), np.dtype(None)),
             (np.linspace(0, 1, 10), np.dtype(None)), (np.zeros(0, np.int32), np.dtype(None))]
    for w, want in cases:
        got = _wire_weight_dtype(w)
        assert (got is None) if want == np.dtype(None) else got == want, (w, got)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS + ["int32-outlier"])
def test_gpu_chunked_upload_and_graph_on_device(kind, monkeypatch):
    """The host graph's upload in many pieces (tiny slots: the ring wraps), narrowed
    (int32 indptr, weights in the type a sample fits; "int32-outlier": weights 1..3 but one
    edge of 10**6 off the sample, so the weights go again at full width), the forest back in
    pinned memory, and the same graph handed in as CuPy arrays (gathered on the device):
    every forest equals the CPU's bit for bit; the device call returns CuPy arrays, the host
    call NumPy arrays."""
    import terrain._transfer as transfer
    from terrain.backend import get_backend
    cp = get_backend("gpu").xp
    import terrain.graph.mst as mst
    g, *_ = _typed_graph(kind.replace("-outlier", "-ties"), 3000, 20000, 13, hubs=3)
    if kind == "int32-outlier":
        a = 1 + len(g.weights) // 1024 * 7  # off the sample's stride
        r = int(np.searchsorted(g.indptr, a, side="right") - 1)
        c = int(g.indices[a])
        back = g.indptr[c] + int(np.searchsorted(g.indices[g.indptr[c]:g.indptr[c + 1]], r))
        g.weights[[a, back]] = 10**6
        assert mst._wire_weight_dtype(g.weights) == np.uint8
    c = minimum_spanning_forest(g, backend="cpu")
    monkeypatch.setattr(transfer, "SLOT_BYTES", 8192)
    forests = [minimum_spanning_forest(g, backend="gpu")]
    assert set(forests[-1].extra["phase_seconds"]) == {"upload", "device", "download"}
    assert all(type(x) is np.ndarray for x in (forests[-1].u, forests[-1].edge_ids))
    on_device = (cp.asarray(g.indptr), cp.asarray(g.indices),
                 None if g.weights is None else cp.asarray(g.weights))
    d = minimum_spanning_forest(on_device)
    assert isinstance(d.edge_ids, cp.ndarray) and isinstance(d.u, cp.ndarray)
    for r in forests + [d]:
        got = [x.get() if isinstance(x, cp.ndarray) else x for x in (r.u, r.v, r.weight,
                                                                     r.edge_ids)]
        for a, b in zip(got, (c.u, c.v, c.weight, c.edge_ids)):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert (r.total_weight, r.trees, r.rounds) == (c.total_weight, c.trees, c.rounds)
        assert r.extra["worklist"] == c.extra["worklist"]


@pytest.mark.gpu
def test_gpu_graph_on_device_checked():
    """CuPy CSR input: a cupyx.scipy.sparse matrix works; unsorted rows, heads out of range,
    NaN weights and a falling indptr are InputErrors; the cpu backend refuses it."""
    import cupy as cp
    import cupyx.scipy.sparse as csp
    g, *_ = _typed_graph("float64", 500, 2000, 14)
    c = minimum_spanning_forest(g, backend="cpu")
    m = csp.csr_matrix((cp.asarray(g.weights), cp.asarray(g.indices),
                        cp.asarray(g.indptr)), shape=(g.n, g.n))
    d = minimum_spanning_forest(m)
    assert np.array_equal(d.edge_ids.get(), c.edge_ids) and d.total_weight == c.total_weight
    indptr, indices = cp.asarray(g.indptr), cp.asarray(g.indices)
    weights = cp.asarray(g.weights)
    a = int(g.indptr[np.flatnonzero(np.diff(g.indptr) >= 2)[0]])  # a row of 2+ arcs
    swapped = indices.copy()
    swapped[[a, a + 1]] = swapped[[a + 1, a]]
    wide = indices.copy()
    wide[3] = g.n
    nan = weights.copy()
    nan[5] = cp.nan
    falling = indptr.copy()
    falling[2] = falling[3] + 1
    for args, msg in (((indptr, swapped, weights), "increasing"),
                      ((indptr, wide, weights), "increasing"),
                      ((indptr, indices, nan), "NaN"), ((falling, indices), "rise")):
        with pytest.raises(InputError, match=msg):
            minimum_spanning_forest(args)
    with pytest.raises(InputError, match="gpu backend"):
        minimum_spanning_forest((indptr, indices), backend="cpu")


@pytest.mark.gpu
def test_gpu_rmat_graph_equals_scipy_total():
    """A skewed graph (RMAT-14, hubs of thousands of arcs) with int32 weights: GPU forest
    == CPU forest, total == scipy's."""
    from terrain.graph.generators import rmat_edges
    u, v = rmat_edges(14, 16, seed=3)
    w = np.random.default_rng(3).integers(1, 1000, u.size).astype(np.int32)
    g = as_graph(sp.coo_matrix((w, (u, v)), shape=(1 << 14, 1 << 14)))
    assert np.diff(g.indptr).max() > 512  # extract_long
    r = minimum_spanning_forest(g, backend="gpu")
    c = minimum_spanning_forest(g, backend="cpu")
    assert np.array_equal(r.edge_ids, c.edge_ids) and r.total_weight == c.total_weight
    assert r.total_weight == int(minimum_spanning_tree(g.to_scipy(weighted=True)).sum())


def test_mst_help_says_it_takes_graphs():
    """``mst --help`` named grids only, though the command takes every graph input bfs takes
    and writes an edge table: the help says so (and the default table's name)."""
    code, out, _ = run_cli("mst", "--help", scheduler=None)
    text = " ".join(out.split())
    assert code == 0
    assert "or a graph: edge list (SNAP), Matrix Market, DIMACS .gr, METIS .graph" in text
    assert "for a graph, the edge table (default: INPUT's name with .mst.csv)" in text


def test_mst_command_on_graph_files(tmp_path):
    rng = np.random.default_rng(9)
    ids = rng.choice(np.arange(10, 10**5), 40, replace=False)
    rows = [(int(ids[a]), int(ids[b]), int(rng.integers(1, 100)))
            for a, b in rng.integers(0, 40, (120, 2))]
    path = tmp_path / "g.txt"
    path.write_text("# u v w\n" + "".join(f"{a} {b} {x}\n" for a, b, x in rows))
    G = nx.Graph()
    for a, b, x in rows:
        if a != b and (not G.has_edge(a, b) or G[a][b]["weight"] > x):
            G.add_edge(a, b, weight=x)
    want = sum(d["weight"] for *_, d in nx.minimum_spanning_edges(G))
    code, out, err = run_cli("mst", path, "-o", tmp_path / "f.csv", "--json", "--backend",
                             "cpu")
    assert code == 0, err
    import json
    s = json.loads(out)
    assert s["total_weight"] == want and s["trees"] == nx.number_connected_components(G)
    table = np.genfromtxt(tmp_path / "f.csv", delimiter=",", names=True, dtype=np.int64)
    assert table["weight"].sum() == want
    # internal numbers follow increasing file ids, so Kruskal on the ids' ranks is the reference
    order = np.unique([x for r in rows for x in r[:2]])
    rank = {int(x): i for i, x in enumerate(order)}
    arr = np.array([(rank[a], rank[b], x) for a, b, x in rows])
    ref, _ = _kruskal(order.size, arr[:, 0], arr[:, 1], arr[:, 2])
    assert {(rank[a], rank[b]) for a, b in zip(table["u"], table["v"])} == ref
    code, out, err = run_cli("mst", path, "-o", tmp_path / "f.csv")
    assert code == 2 and "output exists" in err
    # the default output sits beside the input
    code, out, err = run_cli("mst", path, "--backend", "cpu")
    assert code == 0 and (tmp_path / "g.mst.csv").exists(), err
