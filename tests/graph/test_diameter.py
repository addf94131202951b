"""Exact diameter, radius, center, periphery against networkx; BFS counts; effective
diameter against scipy; CPU/GPU identity; the command line."""

import json

import networkx as nx
import numpy as np
import pytest
from scipy.sparse.csgraph import shortest_path

from backends import assert_backends_identical
from cli import run_cli as _cli
from terrain.graph.generators import grid_graph, rmat_graph
from terrain.graph import as_graph, build_csr, diameter, largest_component


def _nx_graphs():
    return {
        "random": nx.gnm_random_graph(300, 420, seed=1),
        "dense-random": nx.gnm_random_graph(120, 900, seed=2),
        "tree": nx.random_labeled_tree(200, seed=3),
        "path": nx.path_graph(57),
        "cycle-odd": nx.cycle_graph(31),
        "cycle-even": nx.cycle_graph(40),
        "grid": nx.grid_2d_graph(9, 14),
        "lollipop": nx.lollipop_graph(12, 20),
        "barbell": nx.barbell_graph(10, 7),
        "small-world": nx.connected_watts_strogatz_graph(200, 4, 0.05, seed=4),
        # long diameters (65, 72) whose bounding still takes bit-parallel batches
        "long-tree": nx.random_labeled_tree(600, seed=4),
        "long-tree-2": nx.random_labeled_tree(600, seed=6),
    }


NX_GRAPHS = _nx_graphs()


def _check_path(G, r):
    assert len(r.path) == r.diameter + 1
    assert (r.path[0], r.path[-1]) == tuple(r.endpoints)
    assert all(G.has_edge(a, b) for a, b in zip(r.path, r.path[1:]))
    assert nx.shortest_path_length(G, *r.endpoints) == r.diameter


@pytest.mark.parametrize("name", sorted(NX_GRAPHS))
def test_matches_networkx(backend, name):
    G = NX_GRAPHS[name]
    lcc = G.subgraph(max(nx.connected_components(G), key=len))
    ecc = nx.eccentricity(lcc)
    r = diameter(G, extremes=True, backend=backend)
    assert r.diameter == nx.diameter(lcc, e=ecc)
    assert r.radius == nx.radius(lcc, e=ecc)
    assert r.center == sorted(nx.center(lcc, e=ecc))
    assert r.periphery == sorted(nx.periphery(lcc, e=ecc))
    assert r.connected == nx.is_connected(G)
    assert 1 <= r.bfs_count <= lcc.number_of_nodes()
    _check_path(lcc, r)
    plain = diameter(G, backend=backend)
    assert plain.diameter == r.diameter and 1 <= plain.bfs_count <= lcc.number_of_nodes()


def test_disconnected_answers_for_largest_component():
    G = nx.disjoint_union(nx.path_graph(4), nx.path_graph(9))
    G.add_node(100)
    r = diameter(G, backend="cpu")
    assert (r.connected, r.components, r.lcc_vertices, r.vertices) == (False, 3, 9, 14)
    assert r.diameter == 8 and set(r.endpoints) == {4, 12}


def _component(graph):
    lcc, _ = largest_component(graph)
    return lcc


def test_bfs_count_far_below_n_on_large_graphs():
    for g in (_component(rmat_graph(17, 16, seed=7, backend="cpu")), grid_graph(250, 400)):
        assert g.n > 90_000
        r = diameter(g, backend="cpu")
        assert r.bfs_count < g.n / 1000, (g.name, r.bfs_count)
        # an oracle that needs no APSP: the endpoints are `diameter` apart, and no sampled
        # vertex (nor any of the path) has a larger eccentricity
        a, b = g.index_of(r.endpoints)
        rng = np.random.default_rng(0)
        probes = np.concatenate([rng.choice(g.n, 6, replace=False), [a]])
        d = shortest_path(g.to_scipy(), directed=False, unweighted=True, indices=probes)
        assert d.max() == r.diameter
        assert d[-1, b] == r.diameter


def test_effective_diameter_matches_scipy_on_the_same_sources():
    G = nx.connected_watts_strogatz_graph(500, 6, 0.1, seed=8)
    r = diameter(G, effective=40, seed=3, backend="cpu")
    sources = r.extra["effective_source_ids"]
    d = shortest_path(as_graph(G).to_scipy(), directed=False, unweighted=True, indices=sources)
    pairs = np.sort(d[d > 0])
    hist = np.bincount(pairs.astype(int))
    cum = np.cumsum(hist) / pairs.size
    k = int(np.argmax(cum >= 0.9))
    want = (k - 1) + (0.9 - cum[k - 1]) / (cum[k] - cum[k - 1])
    assert r.effective_sources == 40
    assert r.effective_diameter == pytest.approx(want)
    assert np.quantile(pairs, 0.9, method="lower") <= np.ceil(r.effective_diameter)


@pytest.mark.gpu
def test_cpu_and_gpu_identical():
    graphs = [_component(rmat_graph(13, 8, seed=9, backend="cpu")), grid_graph(60, 90),
              as_graph(NX_GRAPHS["barbell"]), as_graph(NX_GRAPHS["random"])]
    for g in graphs:
        assert_backends_identical(lambda b, g=g: diameter(g, extremes=True, effective=8,
                                                          backend=b).as_dict())


def test_cli_reports_in_file_ids(tmp_path):
    # a lollipop relabelled to sparse ids, plus a separate edge
    G = nx.lollipop_graph(5, 4)
    ids = {v: 1000 + 7 * v for v in G}
    lines = [f"{ids[a]}\t{ids[b]}" for a, b in G.edges()] + ["1 2"]
    (tmp_path / "g.txt").write_text("# lollipop\n" + "\n".join(lines) + "\n")
    code, out, err = _cli("diameter", tmp_path / "g.txt", "--all", "--json", "--backend", "cpu")
    assert code == 0, err
    r = json.loads(out)
    H = nx.relabel_nodes(G, ids)
    assert r["diameter"] == nx.diameter(H) and r["connected"] is False
    assert r["periphery"] == sorted(nx.periphery(H)) and r["center"] == sorted(nx.center(H))
    assert nx.shortest_path_length(H, *r["endpoints"]) == r["diameter"]
    code, out, err = _cli("diameter", tmp_path / "g.txt", "--backend", "cpu", "--effective", "5",
                          scheduler=None)
    assert code == 0 and "disconnected (2 components)" in out and "path: " in out, err
    assert "effective diameter (90th percentile over 5 sources)" in out


def _lollipop_file(tmp_path):
    G = nx.lollipop_graph(30, 25)
    ids = {v: 10 + 3 * v for v in G}
    path = tmp_path / "lollipop.txt"
    path.write_text("".join(f"{ids[a]} {ids[b]}\n" for a, b in G.edges()))
    return path


def _without_seconds(out):
    d = json.loads(out)
    d.pop("seconds")
    return d


def test_cli_on_an_existing_cluster_equals_a_synchronous_run(tmp_path):
    distributed = pytest.importorskip("distributed")
    path = _lollipop_file(tmp_path)
    argv = ["diameter", path, "--all", "--effective", "9", "--json", "--backend", "cpu"]
    with distributed.LocalCluster(n_workers=1, threads_per_worker=3, processes=False,
                                  protocol="tcp", dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        code, remote, err = _cli(*argv, scheduler=address)
        assert code == 0, err
        ran = set(cluster.scheduler.task_prefixes)
        assert {"graph-chunk", "graph-csr", "diameter-run"} <= ran, ran
        code, out, err = _cli("bfs", path, "--source", "7", scheduler=address)
        assert code == 2 and err.strip().endswith(f"terrain: {path}: source vertex 7 is not in "
                                                  "the graph"), err
    code, local, err = _cli(*argv)
    assert code == 0, err
    assert _without_seconds(remote) == _without_seconds(local)


def _component_cases():
    two = nx.disjoint_union(nx.gnm_random_graph(60, 90, seed=2), nx.path_graph(15))
    two.add_nodes_from(range(75, 80))
    tie = nx.disjoint_union(nx.path_graph(6), nx.cycle_graph(6))  # equal sizes: lowest wins
    return [as_graph(two), as_graph(tie), rmat_graph(12, 8, seed=3, backend="cpu"),
            grid_graph(20, 30), as_graph(nx.empty_graph(4))]


@pytest.mark.parametrize("case", range(5))
def test_components_match_scipy(backend, case):
    from scipy.sparse.csgraph import connected_components as scipy_cc
    from terrain.graph.eccentricity import component_roots_on, largest_component_on
    g = _component_cases()[case]
    roots = backend.to_numpy(component_roots_on(g.indptr, g.indices, backend))
    _, labels = scipy_cc(g.to_scipy(), directed=False)
    smallest = np.full(labels.max() + 1, g.n)
    np.minimum.at(smallest, labels, np.arange(g.n))
    assert np.array_equal(roots, smallest[labels])
    lcc, info = largest_component_on(g, backend)
    want, want_info = largest_component(g)
    assert info == want_info
    assert np.array_equal(backend.to_numpy(lcc.indptr), want.indptr)
    assert np.array_equal(backend.to_numpy(lcc.indices), want.indices)
    assert np.array_equal(lcc.id_array(), want.id_array())


def _bitwise_cases():
    rng = np.random.default_rng(11)
    u = np.concatenate([np.zeros(5000, np.int64), rng.integers(1, 5001, 3000)])
    v = np.concatenate([np.arange(1, 5001), rng.integers(1, 5001, 3000)])
    hub = build_csr(5001, u, v, name="hub")  # a row above BITWISE_HUB_MIN (GPU grid-wide pull)
    return [as_graph(nx.cycle_graph(40)), _component(rmat_graph(12, 8, seed=3, backend="cpu")),
            grid_graph(9, 14), hub, as_graph(nx.disjoint_union(nx.path_graph(5),
                                                               nx.path_graph(3)))]


@pytest.mark.parametrize("case", range(5))
def test_bitwise_bfs_equals_single_source_runs(backend, case):
    """64 sources in one bit-parallel pass: the eccentricities and the Takes-Kosters bounds
    of 64 single-source BFS (oracle: scipy's shortest_path)."""
    from terrain.graph import FrontierCore
    g = _bitwise_cases()[case]
    src = np.random.default_rng(case).choice(g.n, min(64, g.n), replace=False)
    d = shortest_path(g.to_scipy(), directed=False, unweighted=True, indices=src)
    d = np.where(np.isinf(d), -1, d).astype(np.int64)
    ecc = d.max(axis=1)
    lower = np.zeros(g.n, np.int64)
    upper = np.full(g.n, np.iinfo(np.int32).max, np.int64)
    for row, e in zip(d, ecc):
        m = row >= 0
        lower[m] = np.maximum(lower[m], np.maximum(row[m], e - row[m]))
        upper[m] = np.minimum(upper[m], e + row[m])
    core = FrontierCore(g, backend)
    got = core.bitwise_bfs(src)
    assert got.tolist() == ecc.tolist()
    lo = backend.xp.zeros(g.n, np.int32)
    up = backend.xp.full(g.n, np.iinfo(np.int32).max, np.int32)
    core.bitwise_bfs(src, got, lo, up)
    assert np.array_equal(backend.to_numpy(lo), lower)
    assert np.array_equal(backend.to_numpy(up), upper)


@pytest.mark.parametrize("name", ["cycle-odd", "grid", "lollipop", "small-world", "tree"])
def test_bit_parallel_bounding_matches_networkx(backend, name, monkeypatch):
    """The bounding with bit-parallel batches from the second BFS on: same answers."""
    import importlib
    monkeypatch.setattr(importlib.import_module("terrain.graph.eccentricity"), "SINGLE_BFS", 1)
    G = NX_GRAPHS[name]
    ecc = nx.eccentricity(G)
    r = diameter(G, extremes=True, backend=backend)
    assert (r.diameter, r.radius) == (nx.diameter(G, e=ecc), nx.radius(G, e=ecc))
    assert r.center == sorted(nx.center(G, e=ecc))
    assert r.periphery == sorted(nx.periphery(G, e=ecc))
    _check_path(G, r)
    assert r.bfs_count > 1


@pytest.mark.parametrize("name", ["small-world", "long-tree", "dense-random"])
def test_bit_parallel_two_pass_route_matches_networkx(name, monkeypatch):
    """With no room for a batch's distances (graphs over a million vertices) a second pass
    applies the bounds: the same answers, sources and searches as the one-pass route."""
    import importlib
    ecc_mod = importlib.import_module("terrain.graph.eccentricity")
    monkeypatch.setattr(ecc_mod, "SINGLE_BFS", 1)
    G = NX_GRAPHS[name]
    one = diameter(G, extremes=True, backend="cpu")
    monkeypatch.setattr(ecc_mod, "DMAT_BYTES", 0)
    two = diameter(G, extremes=True, backend="cpu")
    ecc = nx.eccentricity(G)
    assert (two.diameter, two.radius) == (nx.diameter(G, e=ecc), nx.radius(G, e=ecc))
    assert two.center == sorted(nx.center(G, e=ecc))
    assert two.periphery == sorted(nx.periphery(G, e=ecc))
    _check_path(G, two)
    if one.bfs_count == two.bfs_count:  # the same batches (batch_pays may differ by route)
        assert (one.endpoints, one.path) == (two.endpoints, two.path)


def test_distance_histogram_bit_parallel_equals_single_runs(backend):
    """The effective diameter's histogram from 64-source bit-parallel passes equals the sum
    of single-source level sizes (70 sources: a full batch and a partial one)."""
    from terrain.graph import FrontierCore
    from terrain.graph.eccentricity import _distance_histogram
    from terrain.graph.traversal import traverse
    g = _component(rmat_graph(12, 8, seed=3, backend="cpu"))
    src = np.random.default_rng(5).choice(g.n, 70, replace=False)
    core = FrontierCore(g, backend)
    want = np.zeros(32, np.int64)
    for s in src:
        sizes = traverse(core, [int(s)]).level_sizes
        want[:len(sizes)] += sizes
    got = _distance_histogram(core, src)
    assert np.array_equal(got, want[:got.size]) and not want[got.size:].any()


def _reference_bounding(g, extremes, single_bfs=8, batch=64):
    """The bounding loop as docs/graphs.md states it, in plain NumPy over scipy's BFS
    distances (the GPU loop's rules): after a first far pick, single sources alternate
    between a far pick (the
    candidate of largest upper bound; ties: farther from the last source, higher degree,
    lower number) and a central pick (of all vertices but the last source, smallest lower
    bound + distance from the last source; ties: farther, higher degree, lower number);
    after ``single_bfs`` of them, batches of k <= 64 taken in turn from the largest-upper
    and smallest-lower orders whenever ``batch_pays`` (restated: ``p (delta_lower + 1) (50 n
    + 7 arcs) < k (150 n + 3 arcs)``, one pass ``p = 1`` while ``64 n`` bytes fit
    ``DMAT_BYTES`` and the levels fit a byte, else two; and the batch takes every candidate
    left or ``2 (delta_lower + 1) < k``). After each search and pruning, the cover bound
    ``upper = min(upper, max(delta_lower, d(c, .) + max over candidates of d(c, .)))``, c the
    single source of smallest eccentricity, then the same with c the last single source, and
    pruning again when a bound fell.
    Returns (searches, diameter, source of the first largest eccentricity)."""
    n = g.n
    arcs = g.nnz

    def batch_pays(dl, k, left):
        levels = (1 if 64 * n <= (64 << 20) and 2 * dl <= 254 else 2) * (dl + 1)
        return (k >= 2 and levels < 3 * k and (k == left or 2 * (dl + 1) < k)
                and levels * (50 * n + 7 * arcs) < k * (150 * n + 3 * arcs))

    deg = g.degrees()
    lower, upper = np.zeros(n, np.int64), np.full(n, np.iinfo(np.int32).max, np.int64)
    cand = np.ones(n, bool)
    count, best, far, last, centre = 0, None, True, np.zeros(n, np.int64), None

    def order(key, descending):
        idx = np.flatnonzero(cand)
        return idx[np.lexsort((idx, -deg[idx], -key[idx] if descending else key[idx]))]

    def prune():
        dl, ru = lower.max(), upper.min()
        keep = (lower != upper) & (((upper >= dl) | (lower <= ru)) if extremes else upper > dl)
        cand[:] &= keep
        return dl

    while cand.any():
        left = int(cand.sum())
        if count < single_bfs or not batch_pays(int(lower.max()), min(left, batch), left):
            idx = np.flatnonzero(cand) if far else np.flatnonzero(last > 0)
            key = upper[idx] if far else -(lower[idx] + last[idx])
            picks = [idx[np.lexsort((idx, -deg[idx], -last[idx], -key))[0]]]
            far = far if count == 0 else not far
        else:
            a, b = order(upper, True)[:batch], order(lower, False)[:batch]
            if cand.sum() <= batch:
                picks = list(np.flatnonzero(cand))
            else:
                picks = []
                for x, y in zip(a, b):
                    for v in (x, y):
                        if v not in picks and len(picks) < batch:
                            picks.append(v)
        d = shortest_path(g.to_scipy(), directed=False, unweighted=True, indices=picks)
        d = np.atleast_2d(d).astype(np.int64)
        eccs = d.max(axis=1)
        count += len(picks)
        top = int(np.argmax(eccs))
        if best is None or eccs[top] > best[0]:
            best = (int(eccs[top]), int(picks[top]))
        for row, e in zip(d, eccs):
            lower = np.maximum(lower, np.maximum(row, e - row))
            upper = np.minimum(upper, e + row)
        if len(picks) == 1:
            last = d[0]
            if centre is None or eccs[0] < centre[0]:
                centre = (int(eccs[0]), d[0])
        dl = prune()
        if cand.any():
            fell = False
            for dist in (centre[1], last):
                tight = np.maximum(dl, dist + dist[cand].max())
                fell |= bool((tight < upper).any())
                upper = np.minimum(upper, tight)
            if fell:
                prune()
    return count, int(lower.max()), best[1]


@pytest.mark.parametrize("name", ["cycle-odd", "grid", "lollipop", "small-world", "tree",
                                  "dense-random", "barbell", "long-tree", "long-tree-2"])
@pytest.mark.parametrize("extremes", [False, True])
def test_bounding_follows_the_stated_rules(name, extremes):
    """The CPU's C loop picks the sources the stated rules pick (the GPU's loop is those
    rules over device arrays): the same number of searches, diameter and first endpoint."""
    g = as_graph(NX_GRAPHS[name])
    r = diameter(g, extremes=extremes, backend="cpu")
    count, d, source = _reference_bounding(g, extremes)
    assert (r.bfs_count, r.diameter, r.endpoints[0]) == (count, d, g.id_of(source))


def _random_graphs():
    """Small graphs of many shapes, several of them disconnected: sparse and dense random,
    forests, clustered power-law, geometric (long diameters), grids with holes."""
    rng = np.random.default_rng(23)
    for i in range(30):
        kind = i % 6
        n = int(rng.integers(20, 900))
        seed = int(rng.integers(1 << 30))
        if kind == 0:
            G = nx.gnm_random_graph(n, int(n * rng.uniform(0.6, 1.5)), seed=seed)
        elif kind == 1:
            G = nx.gnm_random_graph(n, int(n * rng.uniform(3, 20)), seed=seed)
        elif kind == 2:
            G = nx.random_labeled_tree(n, seed=seed)
            G.remove_edges_from(list(G.edges())[:int(rng.integers(0, 4))])
        elif kind == 3:
            G = nx.powerlaw_cluster_graph(n, int(rng.integers(1, 6)), 0.5, seed=seed)
        elif kind == 4:
            G = nx.random_geometric_graph(n, float(rng.uniform(1.2, 2.5)) / np.sqrt(n),
                                          seed=seed)
        else:
            G = nx.convert_node_labels_to_integers(nx.grid_2d_graph(int(rng.integers(3, 12)),
                                                                    int(rng.integers(10, 80))))
            G.remove_nodes_from(rng.choice(G.number_of_nodes(), 5, replace=False).tolist())
        yield f"{i}-{kind}-{n}", G


@pytest.mark.parametrize("name,G", list(_random_graphs()))
def test_random_graphs_match_networkx(name, G):
    """The exact diameter (and radius, center, periphery) of the largest component (ties: the
    one with the smallest vertex), from networkx graphs and from scipy matrices."""
    import scipy.sparse as sp
    comps = sorted(nx.connected_components(G), key=lambda c: (-len(c), min(c)))
    lcc = G.subgraph(comps[0])
    ecc = nx.eccentricity(lcc)
    nodes = sorted(G)
    for graph in (G, sp.csr_array(nx.to_scipy_sparse_array(G, nodelist=nodes))):
        r = diameter(graph, extremes=True, backend="cpu")
        if graph is not G:  # a matrix's vertices are its rows
            r.center, r.periphery = ([nodes[x] for x in xs] for xs in (r.center, r.periphery))
            r.endpoints, r.path = tuple(nodes[x] for x in r.endpoints), [nodes[x] for x in r.path]
        assert r.diameter == nx.diameter(lcc, e=ecc), name
        assert (r.radius, r.center, r.periphery) == (
            nx.radius(lcc, e=ecc), sorted(nx.center(lcc, e=ecc)),
            sorted(nx.periphery(lcc, e=ecc))), name
        assert (r.components, r.connected) == (len(comps), len(comps) == 1)
        _check_path(lcc, r)
        assert diameter(graph, backend="cpu").diameter == r.diameter


def test_progress_lines_say_what_the_candidates_are_left_for(capsys):
    """Once the diameter is settled, an --all run's candidates are for the radius, centre
    and periphery: the line says so (it repeated the settled bounds for minutes)."""
    from terrain.graph.eccentricity import _stderr_progress
    clock = iter(range(0, 100, 3))
    for extremes in (False, True):
        report = _stderr_progress(extremes, start=lambda: next(clock))
        report(10, 5, 9, 40)
        report(20, 8, 8, 35)
    assert capsys.readouterr().err.splitlines() == [
        "diameter: 10 BFS, 5 <= diameter <= 9, 40 candidates left",
        "diameter: 20 BFS, 8 <= diameter <= 8, 35 candidates left",
        "diameter: 10 BFS, 5 <= diameter <= 9, 40 candidates left",
        "diameter: 20 BFS, diameter 8, 35 candidates left for the radius, centre and periphery"]


def test_extremes_of_nodes_that_do_not_compare_come_in_the_graphs_order():
    """Nodes of mixed types (a str, a tuple): sorting them raised TypeError."""
    G = nx.Graph([("a", "b"), ("b", "c"), (("t", 1), "c")])
    r = diameter(G, extremes=True, backend="cpu")
    assert (r.diameter, r.center, r.periphery) == (3, ["b", "c"], ["a", ("t", 1)])
    assert r.center == nx.center(G) and r.periphery == nx.periphery(G)
