"""Synthetic graphs for tests and benchmarks, and writers of their edge-list files.

Graph500's RMAT graphs, 4-neighbour grid graphs, random geometric graphs, built on NumPy or
CuPy (``xp``) straight into :class:`terrain.graph.Graph`; :func:`write_int_rows` writes
SNAP / Matrix Market bodies fast enough for 100-million-edge inputs.
"""

import numpy as np

from terrain.backend import get_backend

from . import _native
from .csr import Graph, build_csr

__all__ = ["rmat_edges", "rmat_graph", "grid_graph", "weighted_grid_graph", "geometric_graph",
           "weighted_rmat_graph", "write_int_rows"]

#: Graph500's RMAT initiator probabilities a, b, c (d = 1 - a - b - c)
RMAT_ABC = (0.57, 0.19, 0.19)


def rmat_edges(scale, edge_factor, seed=1, xp=np):
    """Graph500 Kronecker/RMAT edge list: ``edge_factor * 2**scale`` edges on ``2**scale``
    vertices, labels permuted. ``xp`` is numpy or cupy (the GPU draws much faster)."""
    a, b, c = RMAT_ABC
    m = edge_factor << scale
    rs = xp.random.RandomState(seed)
    u = xp.zeros(m, xp.int64)
    v = xp.zeros(m, xp.int64)
    ab, c_norm, a_norm = a + b, c / (1.0 - (a + b)), a / (a + b)
    for bit in range(scale):
        ii = _uniform(rs, m, xp) > ab
        jj = _uniform(rs, m, xp) > a_norm + (c_norm - a_norm) * ii
        u += ii.astype(xp.int64) << bit
        v += jj.astype(xp.int64) << bit
    perm = rs.permutation(1 << scale)
    return perm[u], perm[v]


def _uniform(rs, m, xp):
    return rs.random_sample(m) if xp is np else rs.random_sample(m, dtype=xp.float32)


def rmat_graph(scale, edge_factor, seed=1, backend=None, tuple_degrees=False):
    """:class:`terrain.graph.Graph` of a Graph500 RMAT graph (undirected, simple); with
    ``tuple_degrees`` also the generated tuples per first end (Graph500's edge count)."""
    b = get_backend(backend)
    u, v = rmat_edges(scale, edge_factor, seed, b.xp)
    g = build_csr(1 << scale, b.to_numpy(u), b.to_numpy(v), name=f"rmat-{scale}-{edge_factor}")
    if tuple_degrees:
        return g, b.to_numpy(b.xp.bincount(u, minlength=1 << scale))
    return g


def grid_graph(rows, cols):
    """4-neighbour ``rows x cols`` grid; vertex ``r * cols + c``."""
    idx = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
    u = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    v = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return build_csr(rows * cols, u, v, name=f"grid-{rows}x{cols}")


def weighted_grid_graph(rows, cols, seed=1, xp=np):
    """4-neighbour ``rows x cols`` grid (vertex ``r * cols + c``) with random integer weights
    1..100 per edge, its CSR written directly on ``xp`` (rows sorted: up, left, right, down)."""
    n = rows * cols
    rs = xp.random.RandomState(seed)
    horiz = rs.randint(1, 101, (rows, max(cols - 1, 0))).astype(xp.int32)
    vert = rs.randint(1, 101, (max(rows - 1, 0), cols)).astype(xp.int32)
    nb = xp.full((rows, cols, 4), -1, xp.int64)
    wt = xp.zeros((rows, cols, 4), xp.int32)
    idx = xp.arange(n, dtype=xp.int64).reshape(rows, cols)
    nb[1:, :, 0], wt[1:, :, 0] = idx[:-1, :], vert           # up
    nb[:, 1:, 1], wt[:, 1:, 1] = idx[:, :-1], horiz          # left
    nb[:, :-1, 2], wt[:, :-1, 2] = idx[:, 1:], horiz         # right
    nb[:-1, :, 3], wt[:-1, :, 3] = idx[1:, :], vert          # down
    keep = (nb >= 0).reshape(n, 4)
    indptr = xp.zeros(n + 1, xp.int64)
    xp.cumsum(keep.sum(axis=1), out=indptr[1:])
    indices = nb.reshape(n, 4)[keep].astype(xp.int32)
    weights = wt.reshape(n, 4)[keep]
    to_host = (lambda a: a) if xp is np else xp.asnumpy
    return Graph(to_host(indptr), to_host(indices), name=f"grid-{rows}x{cols}",
                 weights=to_host(weights))


def geometric_graph(n, degree=6.0, seed=1, xp=np):
    """Random geometric graph: ``n`` points uniform in the unit square, an edge between
    points closer than ``r = sqrt(degree / (pi n))``, weight ``ceil(100 * length / r)`` in
    1..100 (a metric, road-like graph); built on ``xp`` by binning points into cells of
    side ``r``."""
    rs = xp.random.RandomState(seed)
    r = float(np.sqrt(degree / (np.pi * n)))
    side = max(1, int(1.0 / r))
    x, y = rs.random_sample(n), rs.random_sample(n)
    cell = (xp.minimum((y * side).astype(xp.int64), side - 1) * side
            + xp.minimum((x * side).astype(xp.int64), side - 1))
    order = xp.argsort(cell)
    x, y, cell = x[order], y[order], cell[order]        # vertex ids follow the cells
    counts = xp.bincount(cell, minlength=side * side)
    start = xp.zeros(side * side + 1, xp.int64)
    xp.cumsum(counts, out=start[1:])
    most = int(counts.max())
    cy, cx = cell // side, cell % side
    pts = xp.arange(n, dtype=xp.int64)
    us, vs, ws = [], [], []
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            ny, nx_ = cy + dy, cx + dx
            ok = (ny >= 0) & (ny < side) & (nx_ >= 0) & (nx_ < side)
            c2 = xp.where(ok, ny * side + nx_, 0)
            first, cnt = start[c2], xp.where(ok, counts[c2], 0)
            for j in range(most):
                has = cnt > j
                p = pts[has]
                q = first[has] + j
                length = xp.hypot(x[p] - x[q], y[p] - y[q])
                close = (length < r) & (p != q)
                us.append(p[close])
                vs.append(q[close])
                ws.append(xp.maximum(1, xp.ceil(100.0 * length[close] / r)).astype(xp.int32))
    u, v, w = xp.concatenate(us), xp.concatenate(vs), xp.concatenate(ws)
    order = xp.argsort(u * n + v)                         # both directions are there already
    return _sorted_arcs_graph(xp, n, u[order], v[order], w[order], f"geometric-{n}-{degree:g}")


def weighted_rmat_graph(scale, edge_factor, seed=1, xp=np):
    """Graph500 RMAT graph with random integer weights 1..100 per edge, its CSR built on
    ``xp`` as :func:`terrain.graph.build_csr` would (parallel edges keep the minimum)."""
    n = 1 << scale
    u, v = rmat_edges(scale, edge_factor, seed, xp)
    w = xp.random.RandomState(seed + 1).randint(1, 101, u.size).astype(xp.int64)
    keep = u != v
    u, v, w = u[keep], v[keep], w[keep]
    u, v, w = xp.concatenate([u, v]), xp.concatenate([v, u]), xp.concatenate([w, w])
    order = xp.argsort((u * n + v) * 128 + w)              # by arc, then weight
    key = (u * n + v)[order]
    first = xp.ones(key.size, bool)
    first[1:] = key[1:] != key[:-1]                        # the lightest of each arc
    sel = order[first]
    return _sorted_arcs_graph(xp, n, u[sel], v[sel], w[sel].astype(xp.int32),
                              f"rmat-{scale}-{edge_factor}")


def _sorted_arcs_graph(xp, n, u, v, w, name):
    """The host :class:`Graph` of arcs ``(u, v)`` sorted by ``u`` (weights ``w``)."""
    indptr = xp.zeros(n + 1, xp.int64)
    xp.cumsum(xp.bincount(u, minlength=n), out=indptr[1:])
    to_host = (lambda a: a) if xp is np else xp.asnumpy
    return Graph(to_host(indptr), to_host(v.astype(xp.int32)), name=name, weights=to_host(w))


def write_int_rows(path, columns, header="", sep="\t"):
    """Write equal-length non-negative integer ``columns`` as text, one row per line
    (``header`` first), formatted by C (``numpy.savetxt`` is far slower).

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.mtx")
    >>> write_int_rows(p, [np.array([2, 3]), np.array([1, 1]), np.array([7, 40])], "3 3 2\\n",
    ...                sep=" ")
    >>> open(p).read()
    '3 3 2\\n2 1 7\\n3 1 40\\n'
    """
    with open(path, "wb") as f:
        f.write(header.encode())
        for block in _native.format_rows(columns, sep):
            f.write(block)
