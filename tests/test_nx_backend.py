"""The NetworkX backend: the interface object against NetworkX's own results, and real
dispatch (nx.diameter(G, backend="terrain")) through the entry points pyproject declares."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

nx = pytest.importorskip("networkx")

from terrain.nx_backend import BackendInterface as B  # noqa: E402
from terrain.nx_backend import TerrainGraph, get_info  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def graphs():
    g = nx.les_miserables_graph()
    yield "les_mis", g
    yield "grid", nx.grid_2d_graph(7, 9)
    yield "tree", nx.random_labeled_tree(60, seed=3)
    yield "gnp", nx.connected_watts_strogatz_graph(80, 4, 0.2, seed=5)
    m = nx.MultiGraph(nx.cycle_graph(9))
    m.add_edge(0, 1)
    yield "multi", m


@pytest.mark.parametrize("name,G", list(graphs()))
def test_matches_networkx(name, G):
    T = B.convert_from_nx(G)
    assert isinstance(T, TerrainGraph) and len(T) == len(G)
    assert B.can_run("diameter", (G,), {}) is True
    assert B.diameter(T) == nx.diameter(G)
    assert B.radius(T) == nx.radius(G)
    assert B.center(T) == nx.center(G)
    assert B.periphery(T) == nx.periphery(G)
    assert B.eccentricity(T) == nx.eccentricity(G)
    node = list(G)[3]
    assert B.eccentricity(T, node) == nx.eccentricity(G, node)
    assert B.eccentricity(T, list(G)[:4]) == nx.eccentricity(G, list(G)[:4])
    assert B.single_source_shortest_path_length(T, node) == \
        nx.single_source_shortest_path_length(G, node)
    assert B.single_source_shortest_path_length(T, node, cutoff=2) == \
        nx.single_source_shortest_path_length(G, node, cutoff=2)
    ours = [set(layer) for layer in B.bfs_layers(T, node)]
    assert ours == [set(layer) for layer in nx.bfs_layers(G, node)]
    two = list(G)[:2]
    assert [set(x) for x in B.bfs_layers(T, two)] == [set(x) for x in nx.bfs_layers(G, two)]


def test_disconnected_and_declined():
    G = nx.Graph([(0, 1), (2, 3)])
    T = B.convert_from_nx(G)
    for f in (B.diameter, B.radius, B.center, B.periphery, B.eccentricity):
        with pytest.raises(nx.NetworkXError, match="not connected"):
            f(T)
    with pytest.raises(nx.NetworkXError):
        nx.diameter(G)
    assert B.single_source_shortest_path_length(T, 2) == {2: 0, 3: 1}
    with pytest.raises(nx.NodeNotFound):
        B.single_source_shortest_path_length(T, 9)
    assert "undirected" in B.can_run("diameter", (nx.DiGraph([(0, 1)]),), {})
    assert "hop" in B.can_run("diameter", (G,), {"weight": "weight"})
    assert "e=" in B.can_run("radius", (G, {0: 1}), {})
    assert B.can_run("eccentricity", (G, 0), {}) is True
    P = nx.path_graph(5)
    T = B.convert_from_nx(P)
    # v as NetworkX's nbunch: a node, a container (nodes not in G skipped), not a node at all
    assert B.eccentricity(T, [1, 99]) == nx.eccentricity(P, [1, 99]) == {1: 3}
    with pytest.raises(nx.NetworkXError):
        nx.eccentricity(P, 99)
    with pytest.raises(nx.NetworkXError):
        B.eccentricity(T, 99)
    info = get_info()
    assert set(info["functions"]) >= {"diameter", "bfs_layers", "eccentricity"}
    assert all(hasattr(B, f) for f in info["functions"])


def test_round_trip():
    G = nx.petersen_graph()
    back = B.convert_to_nx(B.convert_from_nx(G, preserve_graph_attrs=True))
    assert nx.utils.graphs_equal(G, back)
    assert list(back) == list(G)


def test_dispatch_through_the_entry_points(tmp_path):
    """Declare pyproject's entry points in a dist-info directory on the path, as an install
    would, and let NetworkX dispatch to the backend in a fresh interpreter."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    eps = project["entry-points"]
    dist = tmp_path / "terrain-0.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: terrain-nx-test\nVersion: 0.0\n")
    text = ""
    for group in ("networkx.backends", "networkx.backend_info"):
        text += f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps[group].items())
    (dist / "entry_points.txt").write_text(text)
    code = ("import networkx as nx\n"
            "G = nx.grid_2d_graph(6, 11)\n"
            "print(nx.diameter(G, backend='terrain'), nx.diameter(G))\n"
            "print(sorted(nx.center(G, backend='terrain')) == sorted(nx.center(G)))\n"
            "print(dict(nx.single_source_shortest_path_length(G, (0, 0), backend='terrain')) == "
            "dict(nx.single_source_shortest_path_length(G, (0, 0))))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["15", "15", "True", "True"]
