"""verify: certificates accept our results and reject corrupted ones."""

import numpy as np
import pytest
import zarr

from terrain.grid.mst import grid_mst
from terrain.verify import verify_grid_mst, verify_sssp

from cli import run_main


def dem(rows, cols, seed, holes=0.1, integer=False):
    rng = np.random.default_rng(seed)
    z = rng.normal(100, 30, (rows, cols)).astype(np.float32)
    if integer:
        z = np.round(z / 10).astype(np.float32)  # many ties: the id breaks them
    z[rng.random((rows, cols)) < holes] = np.nan
    return z


@pytest.mark.parametrize("connectivity,weight", [(8, "max"), (4, "absdiff"), (8, "slope"),
                                                  (4, "length3d")])
def test_accepts_grid_mst(connectivity, weight):
    for seed in range(3):
        z = dem(37, 29, seed, integer=seed == 1)
        r = grid_mst(z, connectivity=connectivity, weight=weight, tile=8, backend="cpu",
                     cellsize=(2.0, 3.0))
        c = verify_grid_mst(z, r.mask, connectivity, weight, (2.0, 3.0))
        assert c.ok, c.violation
        assert c.facts["edges"] == r.edges and c.facts["trees"] == r.trees
        assert c.facts["total_weight"] == pytest.approx(r.total_weight, rel=1e-9)
        assert len(c.checks) == 4


def test_rejects_flipped_bits():
    z = dem(30, 30, 4)
    r = grid_mst(z, tile=8, backend="cpu")
    rng = np.random.default_rng(0)
    rows, cols = np.nonzero(r.mask)
    for k in rng.choice(rows.size, 10, replace=False):
        m = r.mask.copy()
        bit = int(m[rows[k], cols[k]]).bit_length() - 1
        m[rows[k], cols[k]] ^= np.uint8(1 << bit)  # drop a tree edge: two trees where one was
        c = verify_grid_mst(z, m)
        assert not c.ok and "joins two trees" in c.violation
    # add a non-tree edge: a cycle
    m = r.mask.copy()
    ok_cells = np.argwhere(~np.isnan(z[:-1, :-1]) & ~np.isnan(z[1:, 1:]) & ((m[:-1, :-1] & 4) == 0))
    i, j = ok_cells[0]
    m[i, j] |= 4
    c = verify_grid_mst(z, m)
    assert not c.ok and "closes a cycle" in c.violation
    # a bit on a nodata cell, and a diagonal bit under 4-connectivity
    m = r.mask.copy()
    hole = np.argwhere(np.isnan(z))[0]
    m[tuple(hole)] |= 1
    assert "nodata" in verify_grid_mst(z, m).violation
    r4 = grid_mst(z, connectivity=4, tile=8, backend="cpu")
    m = r4.mask.copy()
    m[ok_cells[1][0], ok_cells[1][1]] |= 4
    assert "4-connectivity" in verify_grid_mst(z, m, connectivity=4).violation


def test_rejects_a_spanning_tree_that_is_not_minimum():
    """Swap a tree edge for a heavier non-tree edge that reconnects: still a spanning forest,
    so only the cycle property (path maxima) can catch it."""
    z = dem(12, 14, 9, holes=0.0)
    r = grid_mst(z, connectivity=4, tile=4, backend="cpu")
    rows, cols = z.shape
    # drop the tree edge E of (r0, c0) and add a non-tree edge that reconnects the two halves
    found = 0
    for (r0, c0) in np.argwhere(r.mask & 1):
        m = r.mask.copy()
        m[r0, c0] &= np.uint8(~1 & 0xFF)
        for (r1, c1) in np.argwhere((m & 2) == 0):
            if r1 + 1 >= rows:
                continue
            m2 = m.copy()
            m2[r1, c1] |= 2
            c = verify_grid_mst(z, m2, connectivity=4)
            if c.violation and "cycle property" in c.violation:
                found += 1
                break
        if found >= 3:
            break
    assert found >= 3


def test_cycle_property_names_the_heaviest_tree_edge_on_the_path():
    # non-tree edge (0, 2) S (weight 8); its tree path holds (0, 0) E and (0, 1) E, both of
    # weight 9: the heavier in (weight, id) order is (0, 1) E
    z = np.array([[1, 9, 8], [2, 3, 7]], np.float32)
    m = np.array([[3, 1, 0], [1, 1, 0]], np.uint8)
    assert verify_grid_mst(z, m, connectivity=4).violation == (
        "cycle property fails: non-tree edge (0, 2) S (weight 8) is lighter than tree edge "
        "(0, 1) E (weight 9) on the tree path between its ends")


_STEPS = {"E": (0, 1), "S": (1, 0), "SE": (1, 1), "SW": (1, -1)}


def _grid_graph(z, connectivity, weight):
    """networkx graph of the grid, each edge with its id and its rank in (weight, id) order."""
    nx = pytest.importorskip("networkx")
    from terrain.grid.edges import grid_edges
    ids, u, v, w = grid_edges(z, connectivity, weight)
    rank = np.empty(ids.size, np.int64)
    rank[np.lexsort((ids, w))] = np.arange(ids.size)
    g = nx.Graph()
    g.add_nodes_from(np.flatnonzero(~np.isnan(z.ravel())).tolist())
    for e, a, b, k in zip(ids.tolist(), u.tolist(), v.tolist(), rank.tolist()):
        g.add_edge(a, b, id=e, rank=k)
    return g


def _mask_of(tree, shape):
    m = np.zeros(shape, np.uint8)
    for _, _, d in tree.edges(data=True):
        m.flat[d["id"] >> 2] |= np.uint8(1 << (d["id"] & 3))
    return m


@pytest.mark.parametrize("connectivity,weight", [(8, "max"), (4, "slope")])
def test_other_spanning_forests_fail_at_a_pair_the_tree_path_confirms(connectivity, weight):
    """The minimum spanning forest under the (weight, id) order is unique (networkx's over the
    ranks): every other spanning forest (networkx's over random weights) fails the cycle
    property at a non-tree edge lighter than the heaviest tree edge of its tree path, which
    networkx walks."""
    import re
    nx = pytest.importorskip("networkx")
    z = dem(11, 13, 5, holes=0.15, integer=True)
    cols = z.shape[1]
    g = _grid_graph(z, connectivity, weight)
    want = _mask_of(nx.minimum_spanning_tree(g, weight="rank"), z.shape)
    assert verify_grid_mst(z, want, connectivity, weight).ok
    rng = np.random.default_rng(1)
    failed = 0
    for _ in range(6):
        for a, b in g.edges:
            g.edges[a, b]["r"] = float(rng.random())
        other = nx.minimum_spanning_tree(g, weight="r")
        c = verify_grid_mst(z, _mask_of(other, z.shape), connectivity, weight)
        if (_mask_of(other, z.shape) == want).all():
            assert c.ok
            continue
        failed += 1
        hit = re.fullmatch(r"cycle property fails: non-tree edge \((\d+), (\d+)\) (\w+) .* "
                           r"tree edge \((\d+), (\d+)\) (\w+) .*", c.violation)
        assert hit, c.violation
        ends = []
        for r0, c0, d in (hit.groups()[:3], hit.groups()[3:]):
            u = int(r0) * cols + int(c0)
            ends.append((u, u + _STEPS[d][0] * cols + _STEPS[d][1]))
        path = nx.shortest_path(other, *ends[0])
        on_path = {frozenset(p) for p in zip(path, path[1:])}
        assert frozenset(ends[1]) in on_path
        assert g.edges[ends[1]]["rank"] == max(g.edges[tuple(p)]["rank"] for p in on_path)
        assert g.edges[ends[0]]["rank"] < g.edges[ends[1]]["rank"]
    assert failed >= 5


def test_two_trees_message_counts_the_components_as_scipy_does():
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components
    from terrain.grid.edges import grid_edges
    z = dem(25, 21, 2, holes=0.35)
    r = grid_mst(z, tile=8, backend="cpu")
    _, u, v, _ = grid_edges(z, 8)
    n = z.size
    comps = connected_components(coo_matrix((np.ones(u.size), (u, v)), shape=(n, n)),
                                 directed=False)[0] - int(np.isnan(z).sum())
    m = r.mask.copy()
    cell = tuple(np.argwhere(m)[0])
    dropped = int(m[cell]).bit_count()
    m[cell] = 0
    c = verify_grid_mst(z, m)
    assert c.violation.startswith(f"the forest has {r.trees + dropped} trees but the graph has "
                                  f"{comps} connected component(s)"), c.violation


def test_a_mask_value_beyond_the_four_directions_is_named():
    z = dem(6, 7, 1, holes=0.0)
    m = grid_mst(z, tile=4, backend="cpu").mask.copy()
    m[2, 3] |= np.uint8(32)
    assert verify_grid_mst(z, m).violation == (
        f"mask value {int(m[2, 3])} of cell (2, 3) sets a bit beyond the four directions E, S, "
        "SE, SW")


def test_the_forest_certificate_holds_its_keys_not_edge_arrays():
    """About 41 bytes a cell (the edges' sorted keys, parents, DEM and mask) and a band's
    transients: edge arrays of the whole grid took over 300."""
    import tracemalloc
    z = dem(512, 512, 3, holes=0.02)
    r = grid_mst(z, backend="cpu")
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        assert verify_grid_mst(z, r.mask).ok
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 85 * z.size, peak / z.size


def test_accepts_bfs_and_rejects_a_lowered_distance():
    nx = pytest.importorskip("networkx")
    from terrain.graph import bfs
    G = nx.grid_2d_graph(9, 7)
    G.add_nodes_from([("a", 1), ("b", 2)])  # unreachable
    G.add_edge(("a", 1), ("b", 2))
    H = nx.convert_node_labels_to_integers(G)
    r = bfs(H, [0, 5], backend="cpu")
    assert verify_sssp(H, r.dist, r.sources).ok
    d = r.dist.copy()
    d[30] -= 1
    c = verify_sssp(H, d, r.sources)
    assert not c.ok
    d = r.dist.copy()
    d[-2:] = 50  # an unreachable component marked reached
    assert "no arc into it is tight" in verify_sssp(H, d, r.sources).violation
    d = r.dist.copy()
    d[0] = 1
    assert "source" in verify_sssp(H, d, r.sources).violation
    d = r.dist.copy()
    d[1] = -1  # a neighbour of source 0 marked unreached
    assert "is marked unreachable but is a neighbour of reached vertex" in \
        verify_sssp(H, d, r.sources).violation


def test_accepts_dijkstra_distances():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    from scipy.sparse.csgraph import dijkstra
    rng = np.random.default_rng(3)
    a = scipy_sparse.random(60, 60, density=0.08, random_state=4, format="csr")
    a = (a + a.T).tocsr()
    a.data = rng.integers(1, 9, a.data.size).astype(np.float64)
    d = dijkstra(a, indices=0)
    assert verify_sssp(a, d, [0], weights="data", unreached=np.inf).ok
    reached = np.flatnonzero(np.isfinite(d) & (d > 0))
    d[reached[0]] -= 0.5
    assert not verify_sssp(a, d, [0], weights="data").ok


def test_verify_cli_on_mst_output_and_bfs_result(tmp_path, capsys):
    from terrain.io import write_synth
    write_synth(tmp_path / "s.asc", 40, 50, seed=3, nodata=0.1)
    out = tmp_path / "s.mst.zarr"
    rc, _, err = run_main(capsys, "mst", tmp_path / "s.asc", "-o", out, "--tile", "16", "--backend", "cpu")
    assert rc == 0, err
    rc, text, err = run_main(capsys, "verify", out, scheduler=None)
    assert rc == 0, err
    assert "cycle property" in text and text.count("ok ") >= 4
    m = zarr.open_group(str(out), mode="r+", use_consolidated=False)["mst"]
    mask = m[:]
    r, c = np.argwhere(mask)[5]
    mask[r, c] ^= np.uint8(1 << (int(mask[r, c]).bit_length() - 1))
    m[:] = mask
    rc, text, err = run_main(capsys, "verify", out, scheduler=None)
    assert rc == 1 and "FAIL" in text
    # BFS result: distances file + graph
    g = tmp_path / "g.txt"
    g.write_text("# path\n0 1\n1 2\n2 3\n4 5\n")  # ids 0..n-1: .npy holds them by position
    rc, _, err = run_main(capsys, "bfs", g, "--source", "1", "--out", tmp_path / "d.npy", "--backend", "cpu")
    assert rc == 0, err
    rc, text, err = run_main(capsys, "verify", tmp_path / "d.npy", "--graph", g, "--source", "1",
                            scheduler=None)
    assert rc == 0, err + text
    d = np.load(tmp_path / "d.npy")
    d[3] = 1
    np.save(tmp_path / "bad.npy", d)
    rc, text, err = run_main(capsys, "verify", tmp_path / "bad.npy", "--graph", g, "--source", "1",
                            scheduler=None)
    assert rc == 1 and "FAIL" in text
    rc, text, err = run_main(capsys, "verify", tmp_path / "d.npy", scheduler=None)
    assert rc == 2 and "--graph" in err


def test_verify_imports_no_numba(tmp_path):
    """The certificates' passes are C: checking a small result costs no JIT's start; the
    layers are read by the shard reader, without zarr's import (a fill store's depth and
    depression too: 8192², 2.09 GB peak RSS against 2.39 through zarr)."""
    from cli import imported_after
    from terrain.io import write_synth
    write_synth(tmp_path / "s.asc", 30, 40, seed=2, nodata=0.05)
    stores = {c: tmp_path / f"s.{c}.zarr" for c in ("mst", "fill", "flow", "cost-distance")}
    imported_after([[c, tmp_path / "s.asc", "-o", p, "--backend", "cpu"]
                    + (["--source-cell", "5,5"] if c == "cost-distance" else [])
                    for c, p in stores.items()], ())
    out, imported = imported_after([["verify", p] for p in stores.values()],
                                   ("numba", "scipy", "zarr"))
    assert imported == "[]" and out.count("verified") == 4, out
