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
from terrain.graph import Graph, as_graph, bfs, build_csr


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
        nb = graph.neighbors(a)
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


@pytest.mark.parametrize("direction", ["auto", "top-down", "bottom-up"])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_distances_match_scipy(backend, name, direction):
    g = GRAPHS[name]
    rng = np.random.default_rng(len(name))
    for sources in ([0], [int(rng.integers(g.n))], sorted(rng.choice(g.n, 3, replace=False))):
        r = bfs(g, sources, backend=backend, direction=direction)
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
    with pytest.raises(ValueError, match="bfs: source 8 is not a vertex"):
        bfs(nx.to_scipy_sparse_array(nx.path_graph(8)), 8, backend="cpu")
    with pytest.raises(ValueError, match="direction"):
        bfs(nx.path_graph(3), 0, backend="cpu", direction="sideways")


def _as_int64(graph):
    """The same graph with int64 indices (the kernels' other instantiation)."""
    return Graph(graph.indptr, graph.indices.astype(np.int64), name=graph.name)


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ["hybrid", "fused", "balanced", "two-phase"])
@pytest.mark.parametrize("direction", ["auto", "top-down", "bottom-up"])
def test_cpu_and_gpu_identical(variant, direction):
    rmat = rmat_graph(14, 16, seed=5, backend="cpu")  # hubs: CTA- and warp-wide gathering
    graphs = [rmat, _as_int64(rmat), grid_graph(200, 300), GRAPHS["disconnected"]]
    for g in graphs:
        for sources in ([int(np.argmax(g.degrees()))], [1, 7, g.n - 1]):
            def run(b, g=g, sources=sources):
                r = bfs(g, sources, backend=b, direction=direction, variant=variant)
                return r.dist, r.pred, r.stats.level_sizes, r.stats.level_edges
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
@pytest.mark.parametrize("loop", ["graph", "device", "host"])
@pytest.mark.parametrize("direction", ["auto", "top-down", "bottom-up"])
def test_gpu_level_loops_match_cpu(loop, direction):
    """The device-driven level loop (replayed CUDA graph or direct launches) and the host
    loop give the CPU's labels and level statistics, on one core reused across sources."""
    from terrain.graph import FrontierCore
    from terrain.graph.traversal import traverse
    rmat = rmat_graph(14, 16, seed=5, backend="cpu")
    tunings = ([(1, 2048, False), (4, 64, False), (8, 2048, False), (32, 256, False),
                (1, 512, True), (1, 64, True)] if loop != "host" else [(1, 512, False)])
    for g in (_hub_graph(), rmat, _as_int64(rmat), GRAPHS["path"], GRAPHS["disconnected"]):
        gpu, cpu = FrontierCore(g, "gpu"), FrontierCore(g, "cpu")
        for sources in ([0], [int(np.argmax(g.degrees()))], [1, 7, g.n - 1], [g.n // 2]):
            want = traverse(cpu, sources, direction=direction)
            assert np.array_equal(cpu.dist, _oracle(g, sources))
            for lanes, hub_min, fused in tunings:
                gpu.bottomup_lanes, gpu.hub_min, gpu.fused_steps = lanes, hub_min, fused
                got = traverse(gpu, sources, direction=direction, loop=loop)
                assert np.array_equal(gpu.backend.to_numpy(gpu.dist), cpu.dist), \
                    (g.name, sources, lanes, hub_min, fused)
                assert got.level_sizes == want.level_sizes
                assert got.level_edges == want.level_edges
                if direction != "auto":
                    assert set(got.operators) <= ({"bottom-up"} if direction == "bottom-up"
                                                  else {"fused", "balanced"})


def test_degree_ordered_rows_permute_each_row_by_decreasing_degree():
    """The bottom-up step's optional adjacency (``bottomup_rows='degree'``): every row holds
    the same neighbours, listed by decreasing degree."""
    from terrain.graph.frontier import _degree_ordered_rows
    for g in (rmat_graph(10, 8, seed=2, backend="cpu"), GRAPHS["disconnected"], GRAPHS["star"]):
        got = _degree_ordered_rows(np, g.indptr, g.indices)
        deg = g.degrees()
        for v in range(g.n):
            row = got[g.indptr[v]:g.indptr[v + 1]]
            assert np.array_equal(np.sort(row), g.neighbors(v))
            assert np.all(np.diff(deg[row]) <= 0), v
    empty = build_csr(3, np.array([], np.int64), np.array([], np.int64))
    assert _degree_ordered_rows(np, empty.indptr, empty.indices).size == 0


@pytest.mark.gpu
@pytest.mark.parametrize("loop", ["graph", "device"])
def test_gpu_level_loop_tunings_match_cpu(loop):
    """Degree-ordered bottom-up rows, occupancy-sized grids, Beamer thresholds and more
    sources than the graph copies from pinned memory: the CPU's labels and statistics."""
    import importlib
    from terrain.graph import FrontierCore
    from terrain.graph.traversal import traverse
    bfs_module = importlib.import_module("terrain.graph.traversal")  # (the package exports bfs())
    rmat = rmat_graph(14, 16, seed=5, backend="cpu")
    rng = np.random.default_rng(4)
    saved = bfs_module.DEVICE_ALPHA, bfs_module.DEVICE_BETA, bfs_module.DEVICE_HINT_ROUND
    try:
        for g in (_hub_graph(), rmat, _as_int64(rmat), GRAPHS["disconnected"]):
            gpu, cpu = FrontierCore(g, "gpu"), FrontierCore(g, "cpu")
            many = sorted(rng.choice(g.n, min(100, g.n), replace=False).tolist())
            for sources in ([int(np.argmax(g.degrees()))], [1, 7, g.n - 1], many, [0]):
                want = traverse(cpu, sources)
                for i, (rows, occupancy, lanes, ilp, unroll, fused, alpha, beta) in enumerate((
                        ("degree", False, 1, 0, 1, False, 30, 24),
                        ("id", True, 1, 0, 4, False, 30, 24),
                        ("degree", True, 8, 0, 1, False, 14, 24),
                        ("degree", True, 1, 4, 1, False, 100, 96),
                        ("id", False, 1, 2, 1, False, 30, 24),
                        ("id", False, 1, 4, 1, True, 30, 24),
                        ("id", True, 1, 8, 1, True, 14, 12),
                        ("id", False, 1, 0, 2, False, 30, 24),
                        ("id", False, 1, 4, 1, 3, 30, 24), ("id", False, 1, 0, 1, 3, 14, 24))):
                    gpu.bottomup_rows, gpu.occupancy_grids = rows, occupancy
                    gpu.bottomup_lanes, gpu.bottomup_ilp, gpu.bottomup_unroll = lanes, ilp, unroll
                    gpu.fused_steps, gpu.step_launches = fused is True, 3 if fused == 3 else 4
                    gpu.hub_grid = 2 * (i % 3)
                    bfs_module.DEVICE_ALPHA, bfs_module.DEVICE_BETA = alpha, beta
                    bfs_module.DEVICE_HINT_ROUND = 1 + 3 * (i % 2)  # exact hints: more launches
                    got = traverse(gpu, sources, loop=loop)
                    assert np.array_equal(gpu.backend.to_numpy(gpu.dist), cpu.dist), \
                        (g.name, len(sources), rows, occupancy, lanes, ilp, unroll, fused,
                         alpha, beta)
                    assert got.level_sizes == want.level_sizes
                    assert got.level_edges == want.level_edges
    finally:
        bfs_module.DEVICE_ALPHA, bfs_module.DEVICE_BETA, bfs_module.DEVICE_HINT_ROUND = saved
