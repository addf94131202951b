"""Weighted eccentricities by Takes-Kosters bounding with Dijkstra: diameter, radius, center
and periphery equal networkx's (``weight=``) on random graphs with random weights."""

import json

import networkx as nx
import numpy as np
import pytest

from cli import run_cli
from terrain.graph.diameter import weighted_diameter


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
