"""Weighted eccentricities by Takes-Kosters bounding with Dijkstra: diameter, radius, center
and periphery equal networkx's (``weight=``) on random graphs with random weights."""

import json

import networkx as nx
import numpy as np
import pytest

from cli import run_cli, run_main
from terrain.graph.eccentricity import weighted_diameter


def _random_weighted(seed, kind):
    rng = np.random.default_rng(seed)
    G = nx.gnm_random_graph(int(rng.integers(10, 60)), int(rng.integers(15, 150)), seed=seed)
    for a, b in G.edges():
        G[a][b]["weight"] = (float(rng.random() * 10) if kind == "float"
                             else int(rng.integers(0 if kind == "zero" else 1, 25)))
    return G


@pytest.mark.parametrize("kind", ["int", "zero", "float"])
def test_matches_networkx(kind):
    for seed in range(12):
        G = _random_weighted(seed, kind)
        H = G.subgraph(max(nx.connected_components(G), key=lambda c: (len(c), -min(c)))).copy()
        if H.number_of_nodes() < 2:
            continue
        r = weighted_diameter(G, extremes=True, backend="cpu")
        assert r.lcc_vertices == H.number_of_nodes()
        D, R = nx.diameter(H, weight="weight"), nx.radius(H, weight="weight")
        if kind == "float":
            assert r.diameter == pytest.approx(D, rel=1e-12)
            assert r.radius == pytest.approx(R, rel=1e-12)
        else:
            assert (r.diameter, r.radius) == (D, R)
            assert r.center == sorted(nx.center(H, weight="weight"))
            assert r.periphery == sorted(nx.periphery(H, weight="weight"))
        a, b = r.endpoints
        assert nx.dijkstra_path_length(H, a, b) == pytest.approx(r.diameter, rel=1e-12)
        assert r.path[0] == a and r.path[-1] == b
        assert nx.path_weight(H, r.path, "weight") == pytest.approx(r.diameter, rel=1e-12)
        assert r.bfs_count <= H.number_of_nodes()
        alone = weighted_diameter(G, backend="cpu")
        assert alone.diameter == r.diameter and alone.bfs_count <= H.number_of_nodes()


def test_eccentricities_past_two_to_the_61_are_exact():
    """A path whose edges weigh 9e17 + 5 x 3e17 = 2.4e18 (below 2**62, the searches' bound):
    eccentricities pass 2**61, where the bounds once started, and the diameter, radius,
    center and periphery still equal NetworkX's (Python integers)."""
    G = nx.path_graph(7)
    for u, v in G.edges:
        G[u][v]["weight"] = 9 * 10 ** 17 if u == 0 else 3 * 10 ** 17
    r = weighted_diameter(G, extremes=True, backend="cpu")
    assert (r.diameter, r.radius) == (nx.diameter(G, weight="weight"),
                                      nx.radius(G, weight="weight"))
    assert r.center == sorted(nx.center(G, weight="weight"))
    assert r.periphery == sorted(nx.periphery(G, weight="weight"))


def test_bounding_saves_searches_on_a_grid():
    rng = np.random.default_rng(3)
    G = nx.grid_2d_graph(30, 30)
    for a, b in G.edges():
        G[a][b]["weight"] = int(rng.integers(1, 10))
    r = weighted_diameter(G, backend="cpu")
    assert r.diameter == nx.diameter(G, weight="weight")
    ecc = max(nx.single_source_dijkstra_path_length(G, r.endpoints[0]).values())
    assert r.diameter == ecc and r.bfs_count < 100


def test_cli_weighted(tmp_path):
    G = _random_weighted(5, "int")
    H = G.subgraph(max(nx.connected_components(G), key=len))
    path = tmp_path / "g.txt"
    path.write_text("".join(f"{a + 100} {b + 100} {d['weight']}\n"
                            for a, b, d in G.edges(data=True)))
    code, out, err = run_cli("diameter", path, "--weighted", "--all", "--json",
                             "--backend", "cpu")
    assert code == 0, err
    s = json.loads(out)
    assert s["diameter"] == nx.diameter(H, weight="weight")
    assert s["center"] == sorted(x + 100 for x in nx.center(H, weight="weight"))
    code, out, err = run_cli("diameter", path, "--weighted", "--effective", "3")
    assert code == 2 and "--weighted" in err


def test_endpoints_and_path_across_weights_absorbed_in_the_sum(tmp_path):
    """A 1e-9 edge between two 1e8 edges vanishes in the sum: the path from the farthest
    pair still runs end to end (networkx's periphery), weighing the diameter exactly (the
    same left fold), on random graphs with absorbed weights too and on the command line."""
    chain = nx.Graph([(0, 2, {"weight": 1e8}), (2, 3, {"weight": 1e-9}),
                      (3, 4, {"weight": 1e8})])
    graphs = [chain]
    rng = np.random.default_rng(12)
    for seed in range(20):
        G = nx.gnm_random_graph(int(rng.integers(4, 30)), int(rng.integers(6, 60)), seed=seed)
        for a, b in G.edges():
            G[a][b]["weight"] = float(rng.choice([1e-300, 1e-9, 1.0, 1e8]))
        graphs.append(G)
    for G in graphs:
        H = G.subgraph(max(nx.connected_components(G), key=lambda c: (len(c), -min(c))))
        if H.number_of_nodes() < 2:
            continue
        r = weighted_diameter(G, extremes=True, backend="cpu")
        assert r.diameter == nx.diameter(H, weight="weight")
        assert set(r.endpoints) <= set(nx.periphery(H, weight="weight"))
        assert (r.path[0], r.path[-1]) == r.endpoints
        assert nx.path_weight(H, r.path, "weight") == r.diameter
    path = tmp_path / "absorbed.txt"
    path.write_text("0 2 100000000.0\n2 3 0.000000001\n3 4 100000000.0\n")
    code, out, err = run_cli("diameter", path, "--weighted", "--json", "--backend", "cpu")
    assert code == 0, err
    s = json.loads(out)
    assert sorted(s["endpoints"]) == [0, 4] and s["diameter"] == 2e8
    assert s["path"] in ([0, 2, 3, 4], [4, 3, 2, 0])


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["int", "float"])
def test_cpu_and_gpu_identical(kind):
    from backends import assert_backends_identical
    rng = np.random.default_rng(11)
    G = nx.connected_watts_strogatz_graph(400, 6, 0.1, seed=11)
    for a, b in G.edges():
        G[a][b]["weight"] = float(rng.random()) if kind == "float" else int(rng.integers(1, 50))
    assert_backends_identical(lambda backend: weighted_diameter(G, extremes=True,
                                                                backend=backend).as_dict())


# --------------------------------------------------------------------------- hold-out style

def _snap_family(name, rng):
    """A small graph shaped like one SNAP family (no network: generated here)."""
    if name == "collaboration":         # ca-GrQc-like: clustered, heavy-tailed, many parts
        G = nx.powerlaw_cluster_graph(260, 2, 0.4, seed=int(rng.integers(1 << 30)))
        G.add_edges_from([(300, 301), (301, 302)])   # a small separate component
    elif name == "road":                # roadNet-like: planar grid with missing streets
        G = nx.convert_node_labels_to_integers(nx.grid_2d_graph(14, 18))
        drop = [e for e in G.edges() if rng.random() < 0.15]
        G.remove_edges_from(drop)
    elif name == "email":               # email-Enron-like: a hub-dominated core and a fringe
        G = nx.barabasi_albert_graph(220, 2, seed=int(rng.integers(1 << 30)))
        G.add_edges_from((220 + i, int(rng.integers(0, 220))) for i in range(40))
    else:                               # p2p-Gnutella-like: sparse random, low clustering
        G = nx.gnm_random_graph(300, 420, seed=int(rng.integers(1 << 30)))
    return G


def _write_snap(path, G, rng):
    """SNAP text: comment header, tab-separated, sparse random ids, each undirected edge
    listed in both directions, some pairs listed again with a larger weight (the loader
    keeps the minimum). Returns the id map."""
    ids = rng.choice(np.arange(1, 10**7), G.number_of_nodes() + 5, replace=False)
    node_id = {v: int(ids[i]) for i, v in enumerate(sorted(G.nodes()))}
    lines = ["# Undirected graph: hold-out style test file",
             f"# Nodes: {G.number_of_nodes()} Edges: {G.number_of_edges()}",
             "# FromNodeId\tToNodeId\tWeight"]
    for a, b, d in G.edges(data=True):
        w = d["weight"]
        lines.append(f"{node_id[a]}\t{node_id[b]}\t{w}")
        lines.append(f"{node_id[b]}\t{node_id[a]}\t{w}")
        if rng.random() < 0.1:
            lines.append(f"{node_id[a]}\t{node_id[b]}\t{w + int(rng.integers(1, 20))}")
    order = rng.permutation(len(lines) - 3) + 3
    path.write_text("\n".join(lines[:3] + [lines[i] for i in order]) + "\n")
    return node_id


@pytest.mark.parametrize("family", ["collaboration", "road", "email", "p2p"])
def test_snap_files_with_random_integer_weights_match_networkx(tmp_path, capsys, family):
    """``diameter --weighted --all`` on SNAP-style files (random integer weights 1..100)
    equals networkx's weighted diameter, radius, center and periphery of the largest
    component, computed from the edge records independently."""
    rng = np.random.default_rng(sum(map(ord, family)))
    G = _snap_family(family, rng)
    for a, b in G.edges():
        G[a][b]["weight"] = int(rng.integers(1, 101))
    path = tmp_path / f"{family}.txt"
    node_id = _write_snap(path, G, rng)
    H = G.subgraph(max(nx.connected_components(G), key=len)).copy()
    code, out, err = run_main(capsys, "diameter", path, "--weighted", "--all", "--json",
                              "--backend", "cpu")
    assert code == 0, err
    s = json.loads(out)
    assert s["diameter"] == nx.diameter(H, weight="weight")
    assert s["radius"] == nx.radius(H, weight="weight")
    assert s["center"] == sorted(node_id[v] for v in nx.center(H, weight="weight"))
    assert s["periphery"] == sorted(node_id[v] for v in nx.periphery(H, weight="weight"))
    back = {i: v for v, i in node_id.items()}
    walk = [back[i] for i in s["path"]]
    assert nx.path_weight(H, walk, "weight") == s["diameter"]
    assert s["connected"] == nx.is_connected(G)


@pytest.mark.gpu
def test_snap_file_gpu_equals_cpu(tmp_path):
    rng = np.random.default_rng(7)
    G = _snap_family("road", rng)
    for a, b in G.edges():
        G[a][b]["weight"] = int(rng.integers(1, 101))
    path = tmp_path / "road.txt"
    _write_snap(path, G, rng)
    answers = []
    for backend in ("cpu", "gpu"):
        code, out, err = run_cli("diameter", path, "--weighted", "--all", "--json",
                                 "--backend", backend)
        assert code == 0, err
        answers.append(json.loads(out))
    for key in ("diameter", "radius", "center", "periphery", "endpoints", "path"):
        assert answers[0][key] == answers[1][key], key


def test_an_infinite_edge_joins_nothing():
    """An edge of infinite weight is never taken (as in the searches): the diameter is that
    of the largest component without it, as NetworkX answers for that component (which,
    given the infinite edge, answers inf)."""
    G = nx.path_graph(6)
    for u, v in G.edges:
        G[u][v]["weight"] = float(u + 1)
    G[1][2]["weight"] = np.inf  # cuts {0, 1} from {2, 3, 4, 5}
    r = weighted_diameter(G, extremes=True, backend="cpu")
    H = G.subgraph([2, 3, 4, 5])
    assert r.lcc_vertices == 4
    assert (r.diameter, r.radius) == (nx.diameter(H, weight="weight"),
                                      nx.radius(H, weight="weight"))
    assert r.center == sorted(nx.center(H, weight="weight"))
