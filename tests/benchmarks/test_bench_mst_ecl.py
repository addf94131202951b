"""The ECL-MST benchmark's graph writer: the .egr holds the same graph (scipy agrees)."""

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import minimum_spanning_tree

from benchmarks.mst_ecl import write_egr
from terrain.grid import grid_mst


def test_egr_is_the_8_connected_grid_with_max_weights(tmp_path):
    z = np.random.default_rng(2).integers(1, 9, (23, 17)).astype(np.int32)
    arcs = write_egr(z, tmp_path / "g.egr")
    raw = np.fromfile(tmp_path / "g.egr", np.int32)
    nodes, m = raw[:2]
    assert nodes == z.size and m == arcs == 2 * (23 * 16 + 22 * 17 + 2 * 22 * 16)
    nindex = raw[2:3 + nodes]
    nlist = raw[3 + nodes:3 + nodes + m]
    w = raw[3 + nodes + m:]
    assert w.size == m
    u = np.repeat(np.arange(nodes), np.diff(nindex))
    g = csr_matrix((w.astype(np.float64), (u, nlist)), shape=(nodes, nodes))
    assert (g != g.T).nnz == 0  # every edge both ways, same weight
    zf = z.ravel()
    assert np.array_equal(w, np.maximum(zf[u], zf[nlist]))
    total = minimum_spanning_tree(g).sum()
    assert total == grid_mst(z.astype(np.float32), 8, "max", tile=8, backend="cpu").total_weight
