"""SSSP: distances equal scipy.sparse.csgraph.dijkstra (exactly for integer weights, rel
1e-12 for real ones), canonical predecessors checked against a brute-force definition,
every algorithm identical, CPU == GPU bit for bit."""

from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from backends import assert_backends_identical
from terrain.errors import InputError
from terrain.graph import as_graph
from terrain.graph.shortest_paths import sssp

ALGS = ("dijkstra", "crauser", "delta")


def _random_graph(seed, n, m, kind, directed, zero=False):
    rng = np.random.default_rng(seed)
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    if kind == "float":
        w = rng.random(m) * 10
        if zero:
            w[rng.random(m) < 0.3] = 0.0
    elif kind == "float32":
        w = (rng.random(m) * 10).astype(np.float32)
    elif kind == "absorbed":   # sums that swallow the small weights: zero-length arcs
        w = rng.choice([1e-300, 1e-9, 1.0, 1e8], m)
    else:
        w = rng.integers(0 if zero else 1, 30, m).astype(np.int32 if kind == "int32" else np.int64)
    return as_graph(sp.coo_matrix((w, (u, v)), shape=(n, n)), directed=directed)


def _scipy(g, sources):
    return dijkstra(g.to_scipy(weighted=True).astype(np.float64), directed=g.directed,
                    indices=sources, min_only=True)


def _as_float(r):
    d = r.dist.astype(np.float64)
    if r.dist.dtype.kind == "i":
        d[r.dist < 0] = np.inf
    return d


def _brute_pred(g, dist):
    """The predecessor rule written out directly from the arcs (first pass: strictly closer
    tight tails only); returns a dict v -> smallest such u."""
    rows = np.repeat(np.arange(g.n), np.diff(g.indptr))
    w = g.weights.astype(np.float64 if g.weights.dtype.kind == "f" else np.int64)
    best = {}
    for u, v, x in zip(rows, g.indices, w):
        du, dv = dist[u], dist[v]
        reached = np.isfinite(du) if dist.dtype.kind == "f" else du >= 0
        if reached and du < dv and du + x == dv:
            best[int(v)] = min(best.get(int(v), u), u)
    return best


@pytest.mark.parametrize("kind", ["int64", "int32", "float", "float32"])
@pytest.mark.parametrize("directed", [False, True])
def test_matches_scipy_and_all_algorithms_agree(kind, directed):
    for seed in range(6):
        g = _random_graph(seed, 40 + 7 * seed, 150 + 20 * seed, kind, directed)
        sources = sorted({0, 3 * seed % g.n} if seed % 2 else {seed})
        ref = _scipy(g, sources)
        results = [sssp(g, sources, algorithm=a, backend="cpu") for a in ALGS]
        for r in results:
            d = _as_float(r)
            assert r.dist.dtype == (np.float64 if kind.startswith("float") else np.int64)
            if kind.startswith("int"):
                assert np.array_equal(d, ref)
            else:
                np.testing.assert_allclose(d, ref, rtol=1e-12)
                assert np.array_equal(np.isinf(d), np.isinf(ref))
            assert np.array_equal(r.dist, results[0].dist)
            assert np.array_equal(r.pred, results[0].pred)
        brute = _brute_pred(g, results[0].dist)
        pred = results[0].pred
        assert {v: int(pred[v]) for v in brute} == brute
        others = np.setdiff1d(np.arange(g.n), list(brute))
        assert np.all(pred[others] == -1)   # no zero weights: sources and unreached only


@pytest.mark.parametrize("kind", ["int64", "float"])
def test_zero_weights_give_an_acyclic_deterministic_forest(kind):
    for seed in range(5):
        g = _random_graph(100 + seed, 50, 220, kind, directed=seed % 2 == 1, zero=True)
        sources = [0, 7]
        results = [sssp(g, sources, algorithm=a, backend="cpu") for a in ALGS]
        ref = _scipy(g, sources)
        for r in results:
            assert np.array_equal(r.pred, results[0].pred)
            if kind == "int64":
                assert np.array_equal(_as_float(r), ref)
            else:
                np.testing.assert_allclose(_as_float(r), ref, rtol=1e-12)
        r = results[0]
        w = g.to_scipy(weighted=True).tocsr()
        reached = np.flatnonzero(r.reached)
        for v in reached:
            path = [int(v)]
            while r.pred[path[-1]] >= 0:                   # ends at a source, no cycle
                p = int(r.pred[path[-1]])
                assert r.dist[p] + w[p, path[-1]] == r.dist[path[-1]]   # tight arc
                path.append(p)
                assert len(path) <= g.n
            assert path[-1] in sources


def _canonical_pred(g, dist, sources):
    """docs/graphs.md's predecessor rule written out from the arcs: the smallest strictly
    closer tight tail; else the smallest tail one hop level closer over tight arcs inside the
    vertex's class of equal distance (zero weights, or weights absorbed in the sum), levels
    counted from the sources and the vertices with a strictly closer tail."""
    rows = np.repeat(np.arange(g.n), np.diff(g.indptr))
    arcs = list(zip(rows.tolist(), g.indices.tolist(), g.weights.astype(np.float64).tolist()))
    pred = _brute_pred(g, dist)
    level = {v: 0 for v in list(pred) + [int(s) for s in sources]}
    frontier, h = sorted(level), 0
    while frontier:
        reached_now = {}
        for u, v, x in arcs:
            if level.get(u) == h and v not in level and dist[u] == dist[v] \
                    and dist[u] + x == dist[v]:
                reached_now[v] = min(reached_now.get(v, u), u)
        level.update((v, h + 1) for v in reached_now)
        pred.update(reached_now)
        frontier, h = list(reached_now), h + 1
    return pred


@pytest.mark.parametrize("directed", [False, True])
def test_weights_absorbed_in_the_sum_still_give_a_forest_rooted_at_the_sources(directed):
    """fl(d(u) + w) == d(u) for some w > 0 (1e-300 after 1.0, 1e-9 after 1e8): the vertex
    behind such an arc sits at its tail's distance and is reached through it, so it takes a
    predecessor by the hop-level rule, as behind a zero-weight arc. Distances equal
    networkx's (the same left folds), predecessors the written-out rule, every chain tight
    and ending at a source."""
    cases = [(4, [0, 2], [2, 3], [1.0, 1e-300], [0]),
             (5, [0, 2, 3], [2, 3, 4], [1e8, 1e-9, 1e8], [0])]
    rng = np.random.default_rng(7)
    for seed in range(12):
        n, m = 30, 70
        u, v = rng.integers(0, n, m), rng.integers(0, n, m)
        w = rng.choice([1e-300, 1e-9, 1.0, 1e8, 0.0], m, p=[0.3, 0.3, 0.2, 0.15, 0.05])
        cases.append((n, u.tolist(), v.tolist(), w.tolist(), [0, 5] if seed % 3 else [0]))
    for n, u, v, w, sources in cases:
        G = (nx.DiGraph if directed else nx.Graph)()
        G.add_nodes_from(range(n))
        for a, b, x in zip(u, v, w):
            if a != b and (not G.has_edge(a, b) or x < G[a][b]["weight"]):
                G.add_edge(a, b, weight=x)
        g = as_graph(G, directed=directed)
        want = nx.multi_source_dijkstra_path_length(G, set(sources))
        canonical = None
        for algorithm in ALGS:
            r = sssp(g, sources, algorithm=algorithm, backend="cpu")
            assert {x: r.dist[x] for x in np.flatnonzero(r.reached)} == want
            if canonical is None:
                canonical = _canonical_pred(g, r.dist, sources)
            assert {x: int(r.pred[x]) for x in canonical} == canonical, algorithm
            for x in np.flatnonzero(r.reached):
                chain = [int(x)]
                while r.pred[chain[-1]] >= 0:
                    p = int(r.pred[chain[-1]])
                    assert r.dist[p] + G[p][chain[-1]]["weight"] == r.dist[chain[-1]]
                    chain.append(p)
                    assert len(chain) <= n
                assert chain[-1] in sources, (algorithm, chain)


def test_cli_sssp_names_the_predecessor_behind_an_absorbed_weight(tmp_path):
    """The 1e-9 edge vanishes into 1e8: vertex 3 is reached at 1e8 through vertex 2."""
    from cli import run_cli
    path = tmp_path / "absorbed.txt"
    path.write_text("0 2 100000000.0\n2 3 0.000000001\n3 4 100000000.0\n")
    code, _, err = run_cli("sssp", path, "--source", 0, "--out", tmp_path / "d.csv",
                           "--backend", "cpu")
    assert code == 0, err
    t = _table(tmp_path / "d.csv")
    G = nx.Graph([(0, 2, {"weight": 1e8}), (2, 3, {"weight": 1e-9}), (3, 4, {"weight": 1e8})])
    want = nx.single_source_dijkstra_path_length(G, 0)
    assert dict(zip(t["id"].tolist(), t["distance"].tolist())) == want
    assert dict(zip(t["id"].tolist(), t["predecessor"].tolist())) == {0: -1, 2: 0, 3: 2, 4: 3}


def test_networkx_ids_directed_and_unreachable():
    G = nx.DiGraph()
    G.add_weighted_edges_from([("a", "b", 2), ("b", "c", 3), ("a", "c", 6), ("d", "a", 1)])
    r = sssp(G, "a", backend="cpu")
    assert r.ids.tolist() == ["a", "b", "c", "d"] and r.sources.tolist() == ["a"]
    assert r.dist.tolist() == [0, 2, 5, -1] and r.pred.tolist() == [None, "a", "b", None]
    und = sssp(G, "a", backend="cpu", directed=False)
    assert und.dist.tolist() == [0, 2, 5, 1]
    assert nx.single_source_dijkstra_path_length(G, "a") == {"a": 0, "b": 2, "c": 5}
    f = sssp(nx.Graph([(0, 1, {"weight": 0.5}), (2, 3, {"weight": 1.0})]), 0,
             algorithm="delta", backend="cpu")
    assert f.dist.tolist() == [0.0, 0.5, np.inf, np.inf] and f.pred.tolist() == [-1, 0, -1, -1]


def test_a_file_graph_takes_and_returns_its_ids(tmp_path):
    """A DIMACS file's ids start at 1: source 1 is its first vertex (no shift), and the
    distances, predecessors and sources are the file's ids, as networkx's Dijkstra gives them
    on the same arcs; verify_sssp takes the same ids."""
    from terrain.graph import load_graph
    from terrain.verify import verify_sssp
    rng = np.random.default_rng(8)
    arcs = {(int(a), int(b)): int(rng.integers(1, 20))
            for a, b in rng.integers(1, 31, (120, 2)) if a != b}
    path = tmp_path / "g.gr"
    path.write_text(f"p sp 30 {len(arcs)}\n" + "".join(f"a {a} {b} {w}\n"
                                                       for (a, b), w in arcs.items()))
    G = nx.DiGraph()
    G.add_nodes_from(range(1, 31))
    G.add_weighted_edges_from((a, b, w) for (a, b), w in arcs.items())
    g = load_graph(path)
    r = sssp(g, 1, backend="cpu")
    assert r.ids.tolist() == list(range(1, 31)) and r.sources.tolist() == [1]
    want = nx.single_source_dijkstra_path_length(G, 1)
    assert {i: d for i, d in zip(r.ids.tolist(), r.dist.tolist()) if d >= 0} == want
    for v, p in zip(r.ids.tolist(), r.pred.tolist()):
        assert p == -1 if v == 1 or v not in want else want[p] + G[p][v]["weight"] == want[v]
    assert verify_sssp(g, r.dist, [1], weights=g.weights).ok
    with pytest.raises(InputError, match=r"source vertex 0 is not in the graph"):
        sssp(g, 0, backend="cpu")
    for bad in (1.5, "a", "1"):
        with pytest.raises(InputError, match=r"^sssp: source .* is not an integer vertex id"):
            sssp(g, bad, backend="cpu")
        with pytest.raises(InputError, match=r"^verify: source .* is not an integer vertex id"):
            verify_sssp(g, r.dist, [bad])


def test_directed_on_a_graph_loaded_undirected_is_refused(tmp_path):
    """An edge list loaded undirected has lost its arcs' directions: directed=True is
    refused, not run undirected; loaded directed it follows the arcs (networkx's
    Dijkstra on the same arcs)."""
    from terrain.graph import load_graph
    path = tmp_path / "g.txt"
    path.write_text("1 2 4\n2 3 1\n3 1 1\n")
    with pytest.raises(InputError, match=r"g\.txt: directed=True on a graph stored undirected"):
        sssp(load_graph(path), 1, directed=True, backend="cpu")
    r = sssp(load_graph(path, directed=True), 1, directed=True, backend="cpu")
    G = nx.DiGraph([(1, 2, {"weight": 4}), (2, 3, {"weight": 1}), (3, 1, {"weight": 1})])
    assert dict(zip(r.ids.tolist(), r.dist.tolist())) == nx.single_source_dijkstra_path_length(G, 1)


def test_bad_weights_and_arguments():
    g = as_graph(sp.coo_matrix(([1.0, -2.0], ([0, 1], [1, 2])), shape=(3, 3)))
    with pytest.raises(InputError, match="negative edge weight -2"):
        sssp(g, 0, backend="cpu")
    with pytest.raises(ValueError, match="algorithm"):
        sssp(nx.path_graph(3), 0, algorithm="bellman")
    with pytest.raises(InputError, match="source vertex 9 is not in the graph"):
        sssp(nx.path_graph(3), 9)


def test_unweighted_graph_weighs_one_per_edge():
    G = nx.grid_2d_graph(6, 7)
    r = sssp(G, (0, 0), backend="cpu")
    assert r.dist.tolist() == [x + y for x, y in G.nodes]


@pytest.mark.parametrize("delta", [1, 3, 1000])
def test_any_delta_gives_the_same_answer(delta):
    g = _random_graph(9, 300, 1500, "int64", directed=True)
    a = sssp(g, 0, algorithm="delta", delta=delta, backend="cpu")
    b = sssp(g, 0, algorithm="dijkstra", backend="cpu")
    assert np.array_equal(a.dist, b.dist) and np.array_equal(a.pred, b.pred)


def test_large_integer_weights_use_the_heap():
    g = _random_graph(10, 200, 900, "int64", directed=True)
    g.weights = g.weights * 10**9          # beyond Dial's bucket limit: the 4-ary heap
    r = sssp(g, 0, backend="cpu")
    assert np.array_equal(_as_float(r), _scipy(g, [0]))


def test_one_huge_weight_on_a_long_path_is_summed_exactly():
    """max weight x (n - 1) passes 2**62 where no path comes near it (one edge of 10**17 at
    the end of a path of 100 unit edges): the sum of all weights bounds every simple path,
    so the distances are int64 and exact (Python's integers as the oracle); where both
    bounds pass 2**62 the graph is refused."""
    G = nx.path_graph(102)
    for u, v in G.edges:
        G[u][v]["weight"] = 10 ** 17 if v == 101 else 1
    r = sssp(G, 0, backend="cpu")
    assert r.dist.dtype == np.int64 and r.dist.tolist() == list(range(101)) + [10 ** 17 + 100]
    for u, v in G.edges:
        G[u][v]["weight"] = 10 ** 17
    with pytest.raises(InputError, match=r"edge weights up to 100000000000000000, "
                                         r"10100000000000000000 in all, could overflow"):
        sssp(G, 0, backend="cpu")


@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("algorithm", ALGS)
def test_edges_summing_below_two_to_the_62_are_summed_exactly(directed, algorithm):
    """The edges of a 7-vertex path weigh 9e17 + 5 x 3e17 = 2.4e18 in all, below 2**62
    (4.6e18), while max weight x (n - 1) = 5.4e18 passes it: every simple path stays below
    2**62, so the searches run, exactly (NetworkX's Python integers as the oracle), whatever
    the direction (an undirected graph stores each edge as two arcs) and the algorithm
    (delta's default bucket, 128 mean weights, is itself past int64)."""
    G = (nx.DiGraph if directed else nx.Graph)()
    nx.add_path(G, range(7))
    for u, v in G.edges:
        G[u][v]["weight"] = 9 * 10 ** 17 if u == 0 else 3 * 10 ** 17
    want = nx.single_source_dijkstra_path_length(G, 0)
    r = sssp(G, 0, algorithm=algorithm, backend="cpu")
    assert r.dist.dtype == np.int64 and r.dist.tolist() == [want[v] for v in range(7)]


@pytest.mark.parametrize("delta", [None, 10 ** 19, 1e30])
def test_a_bucket_wider_than_int64_gives_the_same_answer(delta):
    """A path of edges of 1e17: the default bucket (128 mean weights over the average
    degree, 9.6e18) and a given one of 1e19 or 1e30 are past int64; any width gives the
    same answer, NetworkX's."""
    G = nx.path_graph(3)
    nx.set_edge_attributes(G, 10 ** 17, "weight")
    want = nx.single_source_dijkstra_path_length(G, 0)
    r = sssp(G, 0, algorithm="delta", delta=delta, backend="cpu")
    assert r.dist.tolist() == [want[v] for v in range(3)]


def test_float_weights_whose_sums_overflow_are_refused():
    """Two edges of 1e308: the second vertex's distance is inf, read as unreached (and the
    weighted diameter's bounds broke on it); refused where the finite weights' sum passes
    float64's range, taken where it does not (an infinite weight: an arc never taken)."""
    from terrain.graph import weighted_diameter
    A = sp.csr_array(([1e308, 1e308], ([0, 1], [1, 2])), shape=(3, 3))
    for call in (lambda: sssp(A, 0, backend="cpu"),
                 lambda: weighted_diameter(A, backend="cpu")):
        with pytest.raises(InputError, match=r"edge weights up to 1e\+308 could overflow "
                                             r"float64 path sums"):
            call()
    B = sp.csr_array(([1e307, 1e307, np.inf], ([0, 1, 0], [1, 2, 3])), shape=(4, 4))
    assert sssp(B, 0, backend="cpu").dist.tolist() == [0, 1e307, 2e307, np.inf]


def test_an_mst_total_beyond_float64_is_inf():
    from terrain.graph.mst import minimum_spanning_forest
    A = sp.csr_array(([1e308, 1e308], ([0, 1], [1, 2])), shape=(3, 3))
    assert minimum_spanning_forest(A, backend="cpu").total_weight == np.inf


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["int64", "float", "float32", "absorbed"])
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("algorithm", ["crauser", "delta", "auto"])
def test_gpu_equals_cpu_dijkstra(kind, directed, algorithm):
    for seed, zero in ((1, False), (2, True)):
        g = _random_graph(seed, 3000, 20000, kind, directed, zero=zero and kind != "float32")
        cpu = sssp(g, [0, 5], algorithm="dijkstra", backend="cpu")
        if kind == "absorbed":   # the hop-level rule is exercised
            assert np.count_nonzero(cpu.reached & (cpu.pred < 0)) == 2

        def run(backend):
            if not backend.is_gpu:
                return cpu.dist, cpu.pred
            r = sssp(g, [0, 5], algorithm=algorithm, backend=backend)
            return r.dist, r.pred
        assert_backends_identical(run)


@pytest.mark.gpu
def test_gpu_refuses_dijkstra_as_bad_input():
    # InputError: the command line's one line and exit status 2, not a traceback
    with pytest.raises(InputError, match="'dijkstra' is the CPU algorithm"):
        sssp(_random_graph(1, 50, 200, "int64", False), 0, algorithm="dijkstra", backend="gpu")


@pytest.mark.gpu
def test_gpu_grid_and_rmat_equal_cpu():
    from terrain.graph.generators import grid_graph, rmat_graph
    rng = np.random.default_rng(3)
    for g in (grid_graph(200, 300), rmat_graph(12, 8)):
        g.weights = rng.integers(1, 100, g.nnz).astype(np.int64)
        g = as_graph((g.indptr, g.indices, g.weights))   # symmetric: min of both directions
        cpu = sssp(g, 0, algorithm="dijkstra", backend="cpu")
        for algorithm in ("crauser", "delta"):
            gpu = sssp(g, 0, algorithm=algorithm, backend="gpu")
            assert np.array_equal(gpu.dist, cpu.dist) and np.array_equal(gpu.pred, cpu.pred)


# --------------------------------------------------------------------------- command line

def _table(path):
    """A table written by terrain.graph.write_table, as a dict of arrays."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npy":
        return {"distance": np.load(path)}
    if suffix == ".npz":
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    if suffix == ".parquet":
        import pyarrow.parquet as pq
        t = pq.read_table(str(path))
        return {k: t[k].to_numpy() for k in t.column_names}
    data = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    return {k: np.atleast_1d(data[k]) for k in data.dtype.names}


def test_cli_tables_in_file_ids_and_overwrite(tmp_path):
    from cli import run_cli
    rng = np.random.default_rng(4)
    ids = rng.choice(np.arange(100, 10**6), 60, replace=False)
    lines = [f"{ids[a]} {ids[b]} {rng.integers(1, 50)}" for a, b in rng.integers(0, 60, (200, 2))]
    path = tmp_path / "g.txt"
    path.write_text("\n".join(lines) + "\n")
    from terrain.graph import load_graph
    g = load_graph(path)
    src = int(g.id_of(0))
    ref = sssp(g, src, backend="cpu")
    outs = ["d.csv", "d.npz"]
    try:
        import pyarrow  # noqa: F401
        outs.append("d.parquet")
    except ImportError:
        pass
    for name in outs:
        code, out, err = run_cli("sssp", path, "--source", src, "--out", tmp_path / name,
                                 "--backend", "cpu", "--json")
        assert code == 0, err
        t = _table(tmp_path / name)
        assert t["id"].tolist() == g.id_array().tolist()
        assert t["distance"].tolist() == ref.dist.tolist()
        assert t["predecessor"].tolist() == ref.pred.tolist()   # ids, as the library's
    code, _, err = run_cli("sssp", path, "--source", src, "--out", tmp_path / "d.csv")
    assert code == 2 and err.count("\n") == 1 and "output exists" in err
    code, _, err = run_cli("sssp", path, "--source", src, "--out", tmp_path / "d.csv",
                           "--overwrite", "--algorithm", "delta", "--delta", "7")
    assert code == 0, err
    code, _, err = run_cli("sssp", path, "--source", src, "--out", tmp_path / "d.npy")
    assert code == 2 and "not 0..n-1" in err and not (tmp_path / "d.npy").exists()


def test_cli_npy_is_said_to_hold_the_distances_only(tmp_path, capsys):
    """``--out d.npy`` (ids 0..n-1) holds the distance column by row number: the summary says
    so, as bfs's does, not 'id, distance, predecessor'; the file equals scipy's distances."""
    from cli import run_main
    path = tmp_path / "g.txt"
    path.write_text("0 1 4\n1 2 1\n0 2 7\n")
    for command in ("bfs", "sssp"):
        code, out, err = run_main(capsys, command, path, "--source", 0, "--out",
                                  tmp_path / f"{command}.npy", "--backend", "cpu")
        assert code == 0, err
        assert "(the distance by row number;" in out and "predecessor;" not in out
    A = sp.csr_matrix(([4, 1, 7], ([0, 1, 0], [1, 2, 2])), shape=(3, 3))
    assert np.load(tmp_path / "sssp.npy").tolist() == dijkstra(A, directed=False,
                                                                indices=0).tolist()


def test_cli_dimacs_is_directed_and_negative_weights_fail(tmp_path):
    from cli import run_cli
    gr = tmp_path / "g.gr"
    gr.write_text("p sp 4 3\na 1 2 5\na 2 3 1\na 4 1 1\n")
    code, out, err = run_cli("sssp", gr, "--source", 1, "--json", "--backend", "cpu",
                             "--out", tmp_path / "d.csv")
    assert code == 0, err
    import json
    s = json.loads(out)
    assert s["directed"] and s["reached"] == 3 and s["max_distance"] == 6
    assert _table(tmp_path / "d.csv")["distance"].tolist() == [0, 5, 6, -1]
    bad = tmp_path / "neg.txt"
    bad.write_text("0 1 2\n1 2 -3\n")
    code, out, err = run_cli("sssp", bad, "--source", 0, "--out", tmp_path / "n.npy")
    assert code == 2 and err.strip() == f"terrain: {bad}: negative edge weight -3 (shortest " \
                                        "paths need weights >= 0)"
    assert not (tmp_path / "n.npy").exists()
    code, out, err = run_cli("sssp", bad, "--source", 0, "--directed", "--out",
                             tmp_path / "n.txt")
    assert code == 2 and "unknown output format '.txt'" in err
    dense = tmp_path / "dense.txt"
    dense.write_text("0 1 2.5\n1 2 0.5\n")
    code, out, err = run_cli("sssp", dense, "--source", 0, "--out", tmp_path / "d.npy")
    assert code == 0, err
    assert np.load(tmp_path / "d.npy").tolist() == [0.0, 2.5, 3.0]


# --------------------------------------------------------------------------- reusable solver

def test_solver_reuse_and_twins_on_a_grid_with_an_island():
    """One ShortestPaths answers many searches (state reset per run); the near-far and
    Crauser twins equal scipy on a grid with a cut-off island and zero weights."""
    from terrain.graph.generators import weighted_grid_graph
    from terrain.graph.shortest_paths import ShortestPaths
    g = weighted_grid_graph(30, 40, seed=5)
    g.weights[g.weights < 8] = 0
    col = np.repeat(np.arange(g.n), np.diff(g.indptr)) % 40
    g.weights[(col == 35) ^ (g.indices % 40 == 35)] = 0  # weights stay symmetric
    cut = ((col == 36) & (g.indices % 40 == 35)) | ((col == 35) & (g.indices % 40 == 36))
    keep = ~cut
    rows = np.repeat(np.arange(g.n), np.diff(g.indptr))[keep]
    g = as_graph((np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=g.n))]),
                  g.indices[keep], g.weights[keep]))
    solver = ShortestPaths(g, "cpu")
    for s in (0, 17, 1199, 36):
        want = _scipy(g, [s])
        for algorithm, delta in (("dijkstra", None), ("delta", 1), ("delta", 37),
                                 ("delta", None), ("crauser", None)):
            r = solver.run([s], algorithm, delta)
            d = r.dist.astype(np.float64)
            d[r.dist == solver.inf] = np.inf
            assert np.array_equal(d, want), (s, algorithm, delta)
    assert np.isinf(want).any() and np.isfinite(want).sum() > 100


@pytest.mark.gpu
@pytest.mark.parametrize("graphs,fuse", [(True, 0), (False, 0), (True, 16)])
def test_gpu_solver_reuse_equals_cpu(graphs, fuse):
    """Reused solvers, device steps replayed from CUDA graphs or launched directly, bucket
    fusion on and off: the CPU's distances and predecessors."""
    from terrain.graph.generators import geometric_graph, weighted_grid_graph
    from terrain.graph.shortest_paths import ShortestPaths
    for g in (weighted_grid_graph(120, 90, seed=2), geometric_graph(5000, 5.0, seed=3)):
        cpu = ShortestPaths(g, "cpu")
        gpu = ShortestPaths(g, "gpu")
        gpu.ops.launches.enabled = graphs  # direct launches: what runs where CuPy cannot capture
        gpu.fuse_rounds = fuse   # bucket fusion: scheduling only, the same answer
        for sources in ([0], [17, 4000], [g.n - 1]):
            want = cpu.run(sources, "dijkstra")
            for algorithm, delta in (("delta", None), ("delta", 3), ("delta", 1000),
                                     ("crauser", None)):
                got = gpu.run(sources, algorithm, delta)
                assert np.array_equal(got.dist.get(), want.dist), (algorithm, delta)
                assert np.array_equal(got.pred.get(), want.pred), (algorithm, delta)


@pytest.mark.parametrize("directed,wdtype", [(False, np.int64), (True, np.int64),
                                             (False, np.int32)])
def test_dial_blocks_and_fused_predecessors(directed, wdtype):
    """Dial's blocked buckets (many entries per bucket: weights 1..3, so blocks chain and
    freed ones are reused) with the predecessors kept while relaxing: distances equal
    scipy's, predecessors the brute-force rule and the two-pass rule of the frontier core."""
    from terrain.graph.shortest_paths import ShortestPaths
    DIAL_BLOCK = 32  # kernels.c: queue entries per block of a Dial bucket
    rng = np.random.default_rng(7)
    n, m = 3000, 30000
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    w = rng.integers(1, 4, m).astype(wdtype)
    g = as_graph(sp.coo_matrix((w, (u, v)), shape=(n, n)), directed=directed)
    assert g.weights.dtype == wdtype    # int32 weights reach the kernel as stored
    sources = [5, 17, 2999]
    solver = ShortestPaths(g, "cpu")
    r = solver.run(sources, "dijkstra")
    assert n // 3 > DIAL_BLOCK   # buckets hold many blocks
    want = _scipy(g, sources)
    assert np.array_equal(_as_float(r), want)
    brute = _brute_pred(g, r.dist)
    assert {x: int(r.pred[x]) for x in brute} == brute
    rest = np.setdiff1d(np.arange(n), list(brute))
    assert np.all(r.pred[rest] == -1)
    two_pass = solver.core.sssp_parents(r.dist, solver.weights, solver.inf,
                                        np.array(sources))
    assert np.array_equal(r.pred, two_pass)


@pytest.mark.parametrize("n", [2, 7, 8, 63, 64])
def test_dial_labels_at_the_predecessor_field_width(n):
    """Dial's packed labels (distance << bits | predecessor, bits = n.bit_length(), so the
    largest vertex number sits just below the all-ones 'no predecessor' field): distances
    equal scipy's and predecessors the brute-force rule, with the last vertex as a tail,
    the sources and unreached vertices -1; distances too long for the bits left run on
    the heap (the same answer)."""
    from types import SimpleNamespace
    from terrain.graph.shortest_paths import ShortestPaths, _dial_shift
    rng = np.random.default_rng(n)
    m = 4 * n
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    u[:2], v[:2] = n - 1, 0               # the largest vertex number relaxes vertex 0
    w = rng.integers(1, 5, m)
    g = as_graph(sp.coo_matrix((w, (u, v)), shape=(n, n)), directed=True)
    r = ShortestPaths(g, "cpu").run([n - 1], "dijkstra")
    assert np.array_equal(_as_float(sssp(g, n - 1, backend="cpu")), _scipy(g, [n - 1]))
    brute = _brute_pred(g, np.where(r.dist == (1 << 62), -1, r.dist))
    assert {x: int(r.pred[x]) for x in brute} == brute
    assert np.all(r.pred[np.setdiff1d(np.arange(n), list(brute))] == -1)
    assert _dial_shift(g, 4) == n.bit_length()
    assert _dial_shift(SimpleNamespace(n=2**24), 2**20) is None   # 2**44 > 2**38


@pytest.mark.parametrize("wdtype", [np.int32, np.int64])
def test_dial_kernel_with_int64_indices_and_empty_graphs(wdtype):
    """The C Dial kernel's int64-index variants (graphs of 2**31+ vertices) give the int32
    ones' answer, equal to scipy's; graphs without edges leave every other vertex unreached."""
    from terrain.graph import Graph
    from terrain.graph.shortest_paths import ShortestPaths
    rng = np.random.default_rng(3)
    n, m = 500, 3000
    u, v = rng.integers(0, n, m), rng.integers(0, n, m)
    g = as_graph(sp.coo_matrix((rng.integers(1, 50, m).astype(wdtype), (u, v)), shape=(n, n)))
    wide = Graph(g.indptr, g.indices.astype(np.int64), weights=g.weights)
    a = ShortestPaths(g, "cpu").run([0, 7], "dijkstra")
    b = ShortestPaths(wide, "cpu").run([0, 7], "dijkstra")
    assert np.array_equal(a.dist, b.dist) and np.array_equal(a.pred, b.pred)
    assert np.array_equal(_as_float(sssp(wide, [0, 7], backend="cpu")), _scipy(g, [0, 7]))
    empty = Graph(np.zeros(4, np.int64), np.zeros(0, np.int32), weights=np.zeros(0, wdtype))
    r = sssp(empty, [1], backend="cpu")
    assert r.dist.tolist() == [-1, 0, -1] and r.pred.tolist() == [-1, -1, -1]


def _path_graph(n, kind):
    """The directed path 0 -> 1 -> ... -> n-1, weights 1 (int64 or float64)."""
    w = np.ones(n - 1, np.float64 if kind == "float" else np.int64)
    return as_graph(sp.coo_matrix((w, (np.arange(n - 1), np.arange(1, n))), shape=(n, n)),
                    directed=True)


def _cpu_search_kernel(g, algorithm, dist, stop):
    """The CPU kernel that ``algorithm`` runs on ``g`` (int weights: Dial's queue, floats: the
    radix heap) from vertex 0 into ``dist`` (reached: finite, or >= 0), under ``stop``; its
    return code."""
    from terrain.graph import _frontier_cpu as kc
    from terrain.graph import _native
    from terrain.graph.shortest_paths import INT_INF, _dial_shift
    src = np.zeros(1, np.int64)
    w = g.weights
    inf = np.inf if w.dtype.kind == "f" else INT_INF
    dist[:] = inf
    if algorithm == "dijkstra" and w.dtype.kind == "i":
        shift = _dial_shift(g, 1)
        label = np.full(g.n, np.iinfo(np.int64).max, np.int64)
        rc = _native.dial(g.indptr, g.indices, w, src, label, 1, shift, stop)
        _native.dial_labels(label, shift, dist, None, inf)
    elif algorithm == "dijkstra":
        rc = _native.sssp_radix(g.indptr, g.indices, w, src, dist, stop)
    elif algorithm == "crauser":
        low = np.ones(g.n, w.dtype)
        rc = kc._crauser_cpu(g.indptr, g.indices, w, low, low, src.astype(g.indices.dtype),
                             dist, inf, stop)
    else:
        rc = kc._nearfar_cpu(g.indptr, g.indices, w, src.astype(g.indices.dtype), dist,
                             w.dtype.type(4), inf, w.dtype.type(0), stop)
    return rc, int(np.count_nonzero(dist != inf))


@pytest.mark.parametrize("algorithm,kind", [("dijkstra", "int"), ("dijkstra", "float"),
                                            ("crauser", "float"), ("delta", "int")])
def test_a_stop_ends_each_cpu_search_within_65536_vertices(algorithm, kind, stopped_in_a_task):
    """Every CPU search (Dial's queue, the radix heap, Crauser, near-far) polls the stop flag
    every 65536 vertices it takes: told to stop before it starts, it returns its stopped code
    having reached a fraction of a 200000-vertex path (with the flag clear: scipy's
    distances); and the searches run on :func:`terrain.native.interruptible`, so a stopping
    run's task raises Stopped after its kernel (a stop waited for the whole search)."""
    n = 200_000
    g = _path_graph(n, kind)
    dist = np.empty(n, g.weights.dtype)
    rc, reached = _cpu_search_kernel(g, algorithm, dist, np.ones(1, np.uint8))
    assert rc in (-1, -3) and reached <= 70_000, (rc, reached)
    rc, reached = _cpu_search_kernel(g, algorithm, dist, np.zeros(1, np.uint8))
    assert rc >= 0 and reached == n
    assert np.array_equal(dist.astype(np.float64), _scipy(g, [0]))
    stopped_in_a_task(lambda: sssp(g, 0, algorithm=algorithm, backend="cpu"))


def test_csv_real_distances_read_back_as_reals_when_all_are_integral(tmp_path):
    """A real-weighted graph's distances are float64: a CSV reader infers their column's type
    from its text, so integral reals are written as reals (``4.0``), as the Parquet holds."""
    pacsv = pytest.importorskip("pyarrow.csv")
    from cli import run_cli
    path = tmp_path / "g.txt"
    path.write_text("0 1 2.0\n1 2 3.0\n0 3 10.5\n3 4 0.5\n")
    code, _, err = run_cli("sssp", path, "--source", 0, "--out", tmp_path / "d.csv",
                           "--backend", "cpu")
    assert code == 0, err
    table = pacsv.read_csv(tmp_path / "d.csv")
    assert str(table.schema.field("distance").type) == "double"
    assert table["distance"].to_pylist() == [0.0, 2.0, 5.0, 10.5, 11.0]
