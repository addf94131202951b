"""Minimum spanning forests of general graphs: total weight equals scipy's
minimum_spanning_tree, the edge set equals a reference Kruskal with the (weight, edge id)
order, disconnected graphs give forests, CPU == GPU; the mst command on graph files."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import minimum_spanning_tree

from backends import assert_backends_identical
from cli import run_cli
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


def test_disconnected_graph_and_networkx_ids():
    G = nx.Graph()
    G.add_weighted_edges_from([("a", "b", 3), ("b", "c", 1), ("a", "c", 2), ("x", "y", 5)])
    G.add_node("lonely")
    r = minimum_spanning_forest(G, backend="cpu")
    assert r.trees == 3 and r.total_weight == 8
    ids = list(G.nodes)
    got = {frozenset((ids[a], ids[b])) for a, b in zip(r.u, r.v)}
    want = {frozenset(e) for e in nx.minimum_spanning_edges(G, data=False)}
    assert got == want


def test_unweighted_graph_counts_edges():
    r = minimum_spanning_forest(nx.grid_2d_graph(5, 6), backend="cpu")
    assert r.total_weight == 29 and r.trees == 1


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
        return r.u, r.v, r.weight, r.edge_ids, r.total_weight, r.trees
    assert_backends_identical(run)


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
