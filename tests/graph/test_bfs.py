"""BFS against scipy.sparse.csgraph.shortest_path; predecessors; CPU/GPU identity."""

import json
import subprocess
import sys

import networkx as nx
import numpy as np
import pytest
from scipy.sparse.csgraph import shortest_path

from backends import assert_backends_identical
from terrain.graph.generators import grid_graph, rmat_graph
from terrain.errors import InputError
from terrain.graph import FrontierCore, Graph, as_graph, bfs, build_csr, load_graph, traverse


def _oracle(graph, sources):
    d = shortest_path(graph.to_scipy(), directed=False, unweighted=True, indices=sources)
    d = np.atleast_2d(d).min(axis=0)
    return np.where(np.isinf(d), -1, d).astype(np.int32)


def _check_pred(graph, dist, pred, sources):
    reached = dist > 0
    assert np.all(pred[~reached] == -1)
    v = np.flatnonzero(reached)
    p = pred[v].astype(np.int64)
    assert np.all(dist[p] == dist[v] - 1)
    # p is a neighbour of v, and the smallest-numbered one a level closer
    for a, b in zip(v[:200], p[:200]):
        nb = graph.indices[graph.indptr[a]:graph.indptr[a + 1]]
        assert b in nb and b == nb[dist[nb] == dist[a] - 1].min()
    assert np.all(dist[sources] == 0)


def _graphs():
    rng = np.random.default_rng(0)
    two = nx.disjoint_union(nx.gnm_random_graph(60, 90, seed=2), nx.path_graph(15))
    two.add_nodes_from(range(75, 80))  # isolated vertices
    return {
        "random": as_graph(nx.gnm_random_graph(400, 900, seed=1)),
        "grid": grid_graph(23, 31),
        "path": as_graph(nx.path_graph(300)),
        "star": as_graph(nx.star_graph(500)),
        "disconnected": as_graph(two),
        "rmat": rmat_graph(11, 16, seed=3, backend="cpu"),
        "multi-edge": build_csr(50, rng.integers(0, 50, 400), rng.integers(0, 50, 400)),
    }


GRAPHS = _graphs()


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_distances_match_scipy(backend, name):
    g = GRAPHS[name]
    rng = np.random.default_rng(len(name))
    for sources in ([0], [int(rng.integers(g.n))], sorted(rng.choice(g.n, 3, replace=False))):
        r = bfs(g, sources, backend=backend)
        want = _oracle(g, sources)
        assert np.array_equal(r.dist, want), (name, sources)
        _check_pred(g, r.dist, r.pred, sources)
        assert r.stats.reached == np.count_nonzero(want >= 0)
        assert r.stats.edges == int(g.degrees()[want >= 0].sum())
        assert r.stats.eccentricity == want.max()


def test_friendly_layer_networkx_nodes_and_errors():
    G = nx.relabel_nodes(nx.cycle_graph(8), {i: f"v{i}" for i in range(8)})
    r = bfs(G, "v0", backend="cpu")
    assert r.dist.tolist() == [0, 1, 2, 3, 4, 3, 2, 1]
    assert r.pred.tolist() == [None, "v0", "v1", "v2", "v3", "v6", "v7", "v0"]
    assert r.sources.tolist() == ["v0"] and r.ids.tolist() == list(G)
    with pytest.raises(InputError, match=r"^matrix: source vertex 8 is not in the graph$"):
        bfs(nx.to_scipy_sparse_array(nx.path_graph(8)), 8, backend="cpu")
    for bad in (0.5, 1.0, "1", "a", True):
        with pytest.raises(InputError, match=r"^bfs: source .* is not an integer vertex id"):
            bfs(nx.to_scipy_sparse_array(nx.path_graph(3)), bad, backend="cpu")
    with pytest.raises(InputError, match=r"^graph: a dense 2-D array is not a graph: give a "
                                         r"terrain Graph, a scipy\.sparse matrix"):
        bfs(np.ones((3, 3)), 0, backend="cpu")


def _file_graphs(tmp_path):
    """The same graph as a DIMACS file (ids 1..n), a SNAP edge list of sparse ids and a
    networkx graph of those ids: ``(oracle networkx graph, graph, id of its vertex 0)``."""
    G = nx.connected_watts_strogatz_graph(40, 4, 0.3, seed=5)   # every vertex in an edge
    ids = np.random.default_rng(1).choice(10**6, size=40, replace=False)
    gr = tmp_path / "g.gr"
    gr.write_text(f"p sp 40 {2 * G.number_of_edges()}\n" + "".join(
        f"a {u + 1} {v + 1} 1\na {v + 1} {u + 1} 1\n" for u, v in G.edges))
    snap = tmp_path / "g.txt"
    snap.write_text("".join(f"{ids[u]} {ids[v]}\n" for u, v in G.edges))
    by_file_id = nx.relabel_nodes(G, {i: int(ids[i]) for i in G})
    return [(nx.relabel_nodes(G, {i: i + 1 for i in G}), load_graph(gr)),
            (by_file_id, load_graph(snap)), (by_file_id, by_file_id)]


def test_sources_and_results_are_the_graphs_own_ids(tmp_path):
    """DIMACS ids from 1, sparse SNAP ids and networkx nodes: the sources are those ids (no
    shift by one), and the result names vertices by them, as networkx's BFS does on the
    same graph with the same labels."""
    for H, graph in _file_graphs(tmp_path):
        nodes = sorted(H)
        sources = [nodes[3], nodes[17]]
        r = bfs(graph, sources, backend="cpu")
        want = nx.multi_source_dijkstra_path_length(H, sources)
        assert dict(zip(r.ids.tolist(), r.dist.tolist())) == want
        assert sorted(r.sources.tolist()) == sorted(sources)
        for v, p, d in zip(r.ids.tolist(), r.pred.tolist(), r.dist.tolist()):
            if d > 0:
                assert H.has_edge(v, p) and want[p] == d - 1
            else:
                assert p == -1
        with pytest.raises(InputError, match=r"source vertex 0 is not in the graph"):
            bfs(graph, [nodes[0], 0] if 0 not in H else [-5], backend="cpu")
        with pytest.raises(InputError, match=r"^bfs: source 1\.5 is not an integer vertex id"):
            bfs(graph, 1.5, backend="cpu")


def test_both_directions_run():
    """Beamer's rule takes the low-diameter graphs bottom-up on their big levels and the
    long ones top-down only (the operators the CPU's level loop recorded)."""
    rmat = GRAPHS["rmat"]
    assert "bottom-up" in bfs(rmat, int(np.argmax(rmat.degrees())), backend="cpu").stats.operators
    assert set(bfs(GRAPHS["path"], 0, backend="cpu").stats.operators) == {"top-down"}


def _as_int64(graph):
    """The same graph with int64 indices (the kernels' other instantiation)."""
    return Graph(graph.indptr, graph.indices.astype(np.int64), name=graph.name)


@pytest.mark.gpu
@pytest.mark.parametrize("route", ["planned", "device", "batched"])
def test_cpu_and_gpu_identical(route):
    """Both of the GPU's level loops (and the one the planner picks) give the CPU's
    distances, predecessors and level statistics."""
    rmat = rmat_graph(14, 16, seed=5, backend="cpu")  # hubs: CTA- and warp-wide gathering
    graphs = [rmat, _as_int64(rmat), grid_graph(200, 300), GRAPHS["disconnected"]]
    for g in graphs:
        for sources in ([int(np.argmax(g.degrees()))], [1, 7, g.n - 1]):
            def run(b, g=g, sources=sources):
                if route == "planned" or not b.is_gpu:
                    r = bfs(g, sources, backend=b)
                    return r.dist, r.pred, r.stats.level_sizes, r.stats.level_edges
                core = FrontierCore(g, b)
                sizes, degs, _ = core.ops.levels(np.unique(sources), route)
                return (b.to_numpy(core.dist), g.ids_of(b.to_numpy(core.parents())), sizes,
                        degs)   # bfs() gives predecessors as ids
            dist = assert_backends_identical(run)[0]
            assert np.array_equal(dist, _oracle(g, sources))


def test_cli_on_the_default_local_cluster(tmp_path):
    """``bfs --scheduler local`` as a Dask graph on the LocalCluster it starts: distances in
    file-id order (without ``--scheduler`` it runs in-process, without Dask)."""
    G = nx.relabel_nodes(nx.gnm_random_graph(60, 100, seed=9), lambda v: 3 * v + 5)
    path = tmp_path / "g.txt"
    path.write_bytes(("# g\r\n" + "".join(f"{a} {b}\r\n" for a, b in G.edges())).encode())
    out = tmp_path / "d.npz"   # ids 5, 8, ...: a bare .npy would lose them
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "bfs", str(path), "--source",
                           "5,50", "--out", str(out), "--json", "--backend", "cpu",
                           "--scheduler", "local"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Dask dashboard" in proc.stderr
    g = as_graph(G.subgraph([v for v in G if G.degree(v)]))  # file ids: vertices with edges
    order = np.argsort(g.id_array())
    want = _oracle(g, list(g.index_of([5, 50])))[order]
    with np.load(out) as table:
        assert np.array_equal(table["distance"], want)
        assert np.array_equal(table["id"], np.sort(g.id_array()))
    summary = json.loads(proc.stdout)
    assert summary["sources"] == [5, 50] and summary["reached"] == np.count_nonzero(want >= 0)


def _hub_graph():
    """Hubs above the device loop's HUB_MIN (lists spread over the whole grid) beside small
    rows, plus a long tail (more levels than the counter ring has slots)."""
    rng = np.random.default_rng(11)
    u = [np.zeros(6000, np.int64), np.full(3000, 1), np.full(2500, 2)]
    v = [np.arange(1, 6001), rng.integers(3, 9000, 3000), rng.integers(3, 9000, 2500)]
    u.append(rng.integers(3, 9000, 4000))
    v.append(rng.integers(3, 9000, 4000))
    tail = np.arange(9000, 9150)
    u.append(np.concatenate([[5], tail[:-1]]))
    v.append(tail)
    return build_csr(9150, np.concatenate(u), np.concatenate(v), name="hubs")


@pytest.mark.gpu
@pytest.mark.parametrize("route", ["device", "batched"])
def test_gpu_level_loops_match_cpu(route):
    """The device loop (replayed CUDA graph, hub lists over the grid, launches of 8 and more
    levels) and the batched loop give the CPU's labels and level statistics, on one core
    reused across sources (more levels than the counter ring has slots, more sources than
    the device loop copies inside its graph)."""
    rmat = rmat_graph(14, 16, seed=5, backend="cpu")
    rng = np.random.default_rng(4)
    for g in (_hub_graph(), rmat, _as_int64(rmat), GRAPHS["path"], GRAPHS["disconnected"],
              grid_graph(40, 300)):
        gpu, cpu = FrontierCore(g, "gpu"), FrontierCore(g, "cpu")
        many = sorted(rng.choice(g.n, min(100, g.n), replace=False).tolist())
        for sources in ([0], [int(np.argmax(g.degrees()))], [1, 7, g.n - 1], [g.n // 2], many):
            want = traverse(cpu, sources)
            assert np.array_equal(cpu.dist, _oracle(g, sources))
            sizes, degs, _ = gpu.ops.levels(np.unique(sources), route)
            assert np.array_equal(gpu.backend.to_numpy(gpu.dist), cpu.dist), (g.name, sources)
            assert sizes == want.level_sizes and degs == want.level_edges


@pytest.mark.gpu
def test_planner_routes():
    """Road-like graphs without hubs take the batched loop, the others the device loop."""
    assert FrontierCore(grid_graph(50, 60), "gpu").ops.route() == "batched"
    assert FrontierCore(GRAPHS["path"], "gpu").ops.route() == "batched"
    assert FrontierCore(rmat_graph(12, 16, seed=1, backend="cpu"), "gpu").ops.route() == "device"
    assert FrontierCore(_hub_graph(), "gpu").ops.route() == "device"   # sparse, but hubs


def test_networkx_nodes_that_are_tuples():
    """A grid's nodes are tuples: ``(2, 3)`` is one source (as sssp takes it), a list of them
    several; they were split into their coordinates ("source vertex 2 is not in the graph",
    an unhashable list). Distances as NetworkX's multi-source BFS gives them."""
    G = nx.grid_2d_graph(5, 6)
    nodes = list(G)
    for sources in ((2, 3), [(0, 0), (4, 5)], [(1, 1)]):
        many = sources if isinstance(sources, list) else [sources]
        want = nx.multi_source_dijkstra_path_length(G, many)
        r = bfs(G, sources, backend="cpu")
        assert {nodes[v]: int(d) for v, d in enumerate(r.dist)} == want
        assert sorted(r.sources.tolist()) == sorted(many)
