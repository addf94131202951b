"""Certificates: checks that a result is right without recomputing it the same way.

MST certificate (:func:`verify_grid_mst`)
-----------------------------------------
For the grid graph of a DEM (:mod:`terrain.grid.edges`: vertices = non-NaN cells, edges in
directions E, S, SE, SW, weights by one of the four models, ties broken by edge id so the
minimum spanning forest is unique) and a direction-bit mask:

1. every set bit is an edge of the graph (both ends valid, direction allowed);
2. the tree edges have no cycle (union-find), and every graph edge joins two vertices of
   the same tree, so the forest spans each connected component; hence
   ``edges = vertices - components``;
3. cycle property: for every non-tree edge ``(u, v)``, the maximum of the forest path
   ``u … v`` precedes it in the order ``(weight, id)``. With 1-3 the mask is *the* minimum
   spanning forest. The path-maximum queries are answered offline, all at once: sweep the
   edges in ``(weight, id)`` order, joining the ends of each tree edge in a union-find; the
   path maximum of a non-tree edge ``e`` precedes ``e`` exactly when its ends are already
   joined when ``e`` comes up (the forest path is unique, so they are joined iff every edge
   of that path came earlier). One sort and one near-linear pass (Numba) instead of
   ``O(V log V)`` binary-lifting tables: on 16 M cells the tables alone took 10 GB. A
   violation names the heaviest tree edge on the path (one explicit path walk).

The checks run in memory on the whole grid.

Shortest-path certificate (:func:`verify_sssp`)
-----------------------------------------------
For a graph in CSR form with non-negative arc weights (1 for BFS), distances ``d`` and the
sources: ``d(s) = 0`` for every source; ``d(v) <= d(u) + w(u, v)`` for every arc with ``u``
reached (no reached vertex has an unreached neighbour); every reached non-source vertex
has a *tight* incoming arc ``d(v) = d(u) + w(u, v)`` from a reached ``u``. Together these
prove ``d`` is the exact distance (the tight arcs form a shortest-path tree because all
weights are positive; with zero weights, a tight arc into every vertex still gives
``d >= true distance``, the inequality gives ``d <= true distance``).

Each check returns a :class:`Certificate`: ``ok``, the list of checks passed, and the
first violation found (a sentence naming the vertex or edge).

Examples
--------
>>> import numpy as np
>>> z = np.array([[1, 2], [3, 4]], np.float32)
>>> verify_grid_mst(z, np.array([[7, 0], [0, 0]], np.uint8)).ok
True
>>> c = verify_grid_mst(z, np.array([[3, 0], [0, 0]], np.uint8))
>>> c.ok, c.violation
(False, 'the forest has 2 trees but the graph has 1 connected component(s): non-tree edge (0, 0) SE joins two trees')
"""

from dataclasses import dataclass, field

import numba
import numpy as np

from .errors import InputError
from .grid.edges import (CONNECTIVITIES, DIRECTIONS, edge_weight, horizontal_lengths,
                         order_bits, weight_model_code)

__all__ = ["Certificate", "verify_grid_mst", "verify_sssp", "DIRECTION_NAMES"]

DIRECTION_NAMES = ("E", "S", "SE", "SW")


@dataclass
class Certificate:
    """Outcome of a verification: ``ok``, checks passed (text), first ``violation`` or None."""

    what: str
    checks: list = field(default_factory=list)
    violation: object = None
    facts: dict = field(default_factory=dict)

    @property
    def ok(self):
        return self.violation is None

    def fail(self, message):
        self.violation = message
        return self


# --------------------------------------------------------------------------- grid MST
# (drow, dcol) per direction E, S, SE, SW, as in terrain.grid.edges.DIRECTIONS
DROW_T = tuple(int(d[0]) for d in DIRECTIONS)
DCOL_T = tuple(int(d[1]) for d in DIRECTIONS)


@numba.njit(cache=True, nogil=True)
def _grid_edges_cpu(z, ndir, model, hlen, u, v, d, w, count_only):
    """Emit the graph edges cell by cell, directions in order (so in increasing edge id);
    with ``count_only`` just count them."""
    rows, cols = z.shape
    k = 0
    for r in range(rows):
        for c in range(cols):
            a = z[r, c]
            if np.isnan(a):
                continue
            for dd in range(ndir):
                rr = r + DROW_T[dd]
                cc = c + DCOL_T[dd]
                if rr >= rows or cc < 0 or cc >= cols:
                    continue
                b = z[rr, cc]
                if np.isnan(b):
                    continue
                if not count_only:
                    u[k] = r * cols + c
                    v[k] = rr * cols + cc
                    d[k] = dd
                    w[k] = edge_weight(a, b, dd, model, hlen)
                k += 1
    return k


def _grid_edges(z, connectivity, model, hlen):
    """All graph edges in increasing id order: (owner cell, other cell, direction, weight)."""
    ndir = 2 if connectivity == 4 else 4
    empty = np.zeros(0, np.int64)
    m = _grid_edges_cpu(z, ndir, model, hlen, empty, empty, np.zeros(0, np.int8),
                        np.zeros(0, np.float32), True)
    u, v = np.empty(m, np.int64), np.empty(m, np.int64)
    d, w = np.empty(m, np.int8), np.empty(m, np.float32)
    _grid_edges_cpu(z, ndir, model, hlen, u, v, d, w, False)
    return u, v, d, w


@numba.njit(cache=True, nogil=True)
def _find(parent, x):
    root = x
    while parent[root] != root:
        root = parent[root]
    while parent[x] != root:
        parent[x], x = root, parent[x]
    return root


@numba.njit(cache=True, nogil=True)
def _union_tree_edges(parent, u, v):
    """Union the tree edges in order; index of the first one closing a cycle, else -1."""
    for i in range(u.size):
        a, b = _find(parent, u[i]), _find(parent, v[i])
        if a == b:
            return i
        parent[a] = b
    return -1


@numba.njit(cache=True, nogil=True)
def _first_cross_edge(parent, u, v):
    """Index of the first edge whose ends lie in different trees, else -1."""
    for i in range(u.size):
        if _find(parent, u[i]) != _find(parent, v[i]):
            return i
    return -1


def _edge_order(w):
    """Edge indices sorted by (weight, id). Edges are listed in increasing id, so the index
    breaks ties like the id; one unique uint64 key per edge when the count fits 32 bits."""
    bits = order_bits(w).astype(np.uint64)
    index = np.arange(w.size, dtype=np.uint64)
    if w.size < 2**32:
        keys = np.sort((bits << np.uint64(32)) | index)  # sorting values beats argsort
        return (keys & np.uint64(0xFFFFFFFF)).astype(np.int64)
    return np.lexsort((index, bits))


@numba.njit(cache=True, nogil=True)
def _first_kruskal_violation(order, u, v, in_tree, parent, size):
    """Sweep the edges in (weight, id) order, joining the ends of tree edges (union by
    size). A non-tree edge whose ends are not yet joined has a heavier tree edge on its
    forest path: return it."""
    for k in range(order.size):
        e = order[k]
        a, b = _find(parent, u[e]), _find(parent, v[e])
        if in_tree[e]:
            if size[a] > size[b]:
                a, b = b, a
            parent[a] = b
            size[b] += size[a]
        elif a != b:
            return e
    return -1


@numba.njit(cache=True, nogil=True)
def _root_forest(n, valid, indptr, nbr, nbr_edge, up, up_edge, depth):
    """BFS every tree from its smallest vertex: parent, parent edge, depth."""
    queue = np.empty(n, np.int64)
    seen = np.zeros(n, np.bool_)
    for s in range(n):
        if not valid[s] or seen[s]:
            continue
        seen[s] = True
        up[s] = s
        up_edge[s] = -1
        depth[s] = 0
        head, tail = 0, 1
        queue[0] = s
        while head < tail:
            x = queue[head]
            head += 1
            for k in range(indptr[x], indptr[x + 1]):
                y = nbr[k]
                if not seen[y]:
                    seen[y] = True
                    up[y] = x
                    up_edge[y] = nbr_edge[k]
                    depth[y] = depth[x] + 1
                    queue[tail] = y
                    tail += 1


def _path_maximum(n, valid, u, v, in_tree, w, a, b):
    """The heaviest tree edge (in (weight, id) order) on the forest path a ... b (one query,
    by walking both ends up the rooted forest; for the violation message)."""
    tree = np.flatnonzero(in_tree)
    ends = np.concatenate([u[tree], v[tree]])
    others = np.concatenate([v[tree], u[tree]])
    edge = np.concatenate([tree, tree])
    by = np.argsort(ends, kind="stable")
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(ends, minlength=n), out=indptr[1:])
    up = np.arange(n, dtype=np.int64)
    up_edge = np.full(n, -1, np.int64)
    depth = np.zeros(n, np.int64)
    _root_forest(n, valid, indptr, others[by], edge[by], up, up_edge, depth)
    key = (lambda e: (int(order_bits(w[e:e + 1])[0]), e))  # index order = id order
    best = None
    while a != b:
        if depth[a] < depth[b]:
            a, b = b, a
        e = int(up_edge[a])
        if best is None or key(e) > key(best):
            best = e
        a = int(up[a])
    return best


def _cell(c, cols):
    return f"({int(c) // cols}, {int(c) % cols})"


def verify_grid_mst(dem, mask, connectivity=8, weight="max", cellsize=(1.0, 1.0)):
    """Check that ``mask`` is the minimum spanning forest of the grid graph of ``dem``.

    Parameters
    ----------
    dem : 2-D float array
        Elevations, NaN = nodata.
    mask : 2-D uint8 array
        Bit ``d`` of ``mask[r, c]`` set: edge ``(cell, d)`` in the forest (E=0, S=1, SE=2, SW=3).
    connectivity : {4, 8}
    weight : {'max', 'absdiff', 'slope', 'length3d'}
    cellsize : (dx, dy)

    Returns
    -------
    Certificate
        ``facts`` holds vertices, edges, trees, graph edges and the total weight.
    """
    z = np.asarray(dem, dtype=np.float32)
    m = np.asarray(mask)
    if z.ndim != 2 or m.shape != z.shape:
        raise InputError(f"verify: DEM {z.shape} and mask {m.shape} must be 2-D of one shape")
    if int(connectivity) not in CONNECTIVITIES:
        raise InputError(f"verify: connectivity {connectivity!r} is not 4 or 8")
    model = weight_model_code(weight)
    hlen = horizontal_lengths(cellsize)
    rows, cols = z.shape
    n = rows * cols
    cert = Certificate("minimum spanning forest")
    u, v, d, w = _grid_edges(z, int(connectivity), model, hlen)
    m = m.astype(np.uint8, copy=False)
    # 1. every set bit is a graph edge
    allowed = np.uint8(0x3 if int(connectivity) == 4 else 0xF)
    bits_total = int(np.unpackbits(m.reshape(-1, 1), axis=1).sum()) if m.size else 0
    in_tree = ((m.reshape(-1)[u] >> d.astype(np.uint8)) & 1).astype(bool)
    if int(in_tree.sum()) != bits_total:
        flat = m.reshape(-1)
        bad = None
        edge_set = np.zeros(n, np.uint8)
        np.bitwise_or.at(edge_set, u, (np.uint8(1) << d.astype(np.uint8)))
        stray = flat & ~edge_set
        cell = int(np.flatnonzero(stray)[0])
        bad = int(stray[cell]).bit_length() - 1
        why = ("a direction 4-connectivity does not have" if not (1 << bad) & allowed
               else "an edge the graph does not have (off the grid or at a nodata cell)")
        return cert.fail(f"mask bit {DIRECTION_NAMES[bad]} of cell {_cell(cell, cols)} is set: "
                         f"{why}")
    cert.checks.append(f"every one of the {bits_total} set bits is an edge of the "
                       f"{int(connectivity)}-connected graph")
    valid = ~np.isnan(z).reshape(-1)
    vertices = int(valid.sum())
    tu, tv = u[in_tree], v[in_tree]
    # 2. acyclic, spanning
    parent = np.arange(n, dtype=np.int64)
    cyc = _union_tree_edges(parent, tu, tv)
    if cyc >= 0:
        e = np.flatnonzero(in_tree)[cyc]
        return cert.fail(f"tree edge {_cell(u[e], cols)} {DIRECTION_NAMES[d[e]]} closes a cycle")
    edges = int(tu.size)
    trees = vertices - edges
    cert.checks.append(f"the {edges} tree edges form no cycle: a forest of {trees} trees")
    nu, nv = u[~in_tree], v[~in_tree]
    cross = _first_cross_edge(parent, nu, nv)
    if cross >= 0:
        comps = _components(n, vertices, u, v)
        e = np.flatnonzero(~in_tree)[cross]
        return cert.fail(f"the forest has {trees} trees but the graph has {comps} connected "
                         f"component(s): non-tree edge {_cell(u[e], cols)} "
                         f"{DIRECTION_NAMES[d[e]]} joins two trees")
    cert.checks.append(f"every graph edge joins two vertices of one tree: the forest spans "
                       f"each of the {trees} connected components (edges = vertices - "
                       f"components: {edges} = {vertices} - {trees})")
    # 3. cycle property, evaluated offline in the order (weight, id)
    order = _edge_order(w)
    parent = np.arange(n, dtype=np.int64)
    bad = _first_kruskal_violation(order, u, v, in_tree, parent, np.ones(n, np.int64))
    del order, parent
    if bad >= 0:
        t = _path_maximum(n, valid, u, v, in_tree, w, int(u[bad]), int(v[bad]))
        return cert.fail(
            f"cycle property fails: non-tree edge {_cell(u[bad], cols)} "
            f"{DIRECTION_NAMES[d[bad]]} (weight {float(w[bad]):.9g}) is lighter than tree edge "
            f"{_cell(u[t], cols)} {DIRECTION_NAMES[d[t]]} (weight {float(w[t]):.9g}) on the "
            "tree path between its ends")
    cert.checks.append(f"cycle property: each of the {int(nu.size)} non-tree edges is heavier, "
                       "in the order (weight, edge id), than every tree edge on the path "
                       "between its ends")
    total = float(np.sum(w[in_tree], dtype=np.float64))
    cert.facts = {"vertices": vertices, "edges": edges, "trees": trees,
                  "graph_edges": int(w.size), "total_weight": total}
    return cert


def _components(n, vertices, u, v):
    """Connected components of the graph (nodata cells are isolated: not counted)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    adj = coo_matrix((np.ones(u.size, np.int8), (u, v)), shape=(n, n))
    count = connected_components(adj, directed=False)[0]
    return int(count - (n - vertices))


# --------------------------------------------------------------------------- SSSP / BFS
@numba.njit(cache=True, nogil=True)
def _check_sssp(indptr, indices, weights, unit, dist, is_source, tol):
    """Returns (code, u, v): 0 ok; 1 d(v) > d(u) + w; 2 no tight arc into v; 3 v reached
    from u but marked unreached."""
    n = indptr.size - 1
    tight = np.zeros(n, np.bool_)
    for x in range(n):
        if is_source[x]:
            tight[x] = True
    for x in range(n):
        dx = dist[x]
        if not np.isfinite(dx):
            continue
        for k in range(indptr[x], indptr[x + 1]):
            y = indices[k]
            wk = 1.0 if unit else weights[k]
            cand = dx + wk
            dy = dist[y]
            if not np.isfinite(dy):
                return 3, x, y
            if dy > cand + tol * max(1.0, abs(cand)):
                return 1, x, y
            if abs(dy - cand) <= tol * max(1.0, abs(cand)):
                tight[y] = True
    for y in range(n):
        if np.isfinite(dist[y]) and not tight[y]:
            return 2, -1, y
    return 0, -1, -1


def verify_sssp(graph, dist, sources, weights=None, unreached=-1, rtol=0.0):
    """Check that ``dist`` holds the exact shortest-path distances from ``sources``.

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices)
        Arcs in CSR form (anything :func:`terrain.graph.as_graph` takes).
    dist : 1-D array
        Distance per vertex (internal order); ``unreached`` (or inf/NaN) where unreachable.
    sources : sequence of int
        Internal vertex numbers of the sources.
    weights : 1-D array or "data", optional
        Weight of each CSR arc (aligned with the graph's ``indices``); ``"data"``: a
        scipy.sparse ``graph``'s own values, arcs as stored; None: every arc weighs 1 (BFS).
    rtol : float
        Relative tolerance for float distances (0: exact, right for BFS and for distances
        summed in the same order as the weights).

    Returns
    -------
    Certificate

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.path_graph(4)
    >>> verify_sssp(G, [0, 1, 2, 3], [0]).ok
    True
    >>> verify_sssp(G, [0, 1, 1, 3], [0]).violation
    'vertex 3: d = 3 > d(2) + w = 1 + 1 = 2'
    """
    from .graph import as_graph

    if isinstance(weights, str) and weights == "data":
        # a weighted scipy.sparse matrix: its own arcs and weights, as they are
        csr = graph.tocsr()
        g = None
        indptr, indices = np.asarray(csr.indptr, np.int64), np.asarray(csr.indices, np.int64)
        weights = np.asarray(csr.data, np.float64)
    else:
        g = as_graph(graph)
        indptr = np.asarray(g.indptr, np.int64)
        indices = np.asarray(g.indices, np.int64)
    n = indptr.size - 1
    d = np.asarray(dist, dtype=np.float64).copy()
    if d.shape != (n,):
        raise InputError(f"verify: {d.size} distances for a graph of {n} vertices")
    d[(d == unreached) | np.isnan(d)] = np.inf
    src = np.asarray(sources, np.int64).reshape(-1)
    if src.size == 0 or (src < 0).any() or (src >= n).any():
        raise InputError(f"verify: sources {src.tolist()} must be vertices 0..{n - 1}")
    unit = weights is None
    w = np.zeros(1) if unit else np.asarray(weights, np.float64)
    if not unit and (w.shape != indices.shape or (w < 0).any() or not np.isfinite(w).all()):
        raise InputError("verify: one finite non-negative weight per arc is needed")
    label = (lambda x: str(g.id_of(int(x))) if g is not None else str(int(x)))
    fmt = (lambda x: f"{x:.17g}")
    cert = Certificate("shortest-path distances" if not unit else "BFS distances")
    for s in src:
        if d[s] != 0:
            return cert.fail(f"source {label(s)}: d = {fmt(d[s])}, not 0")
    cert.checks.append(f"d(source) = 0 for the {src.size} source(s)")
    is_source = np.zeros(n, np.bool_)
    is_source[src] = True
    code, a, b = _check_sssp(indptr, indices, w, unit, d, is_source, float(rtol))
    if code == 3:
        return cert.fail(f"vertex {label(b)} is marked unreachable but is a neighbour of "
                         f"reached vertex {label(a)}")
    if code == 1:
        wk = 1.0 if unit else w[indptr[a] + np.flatnonzero(indices[indptr[a]:indptr[a + 1]] == b)[0]]
        return cert.fail(f"vertex {label(b)}: d = {fmt(d[b])} > d({label(a)}) + w = "
                         f"{fmt(d[a])} + {fmt(wk)} = {fmt(d[a] + wk)}")
    cert.checks.append(f"d(v) <= d(u) + w(u, v) for all {indices.size} arcs from reached vertices")
    if code == 2:
        return cert.fail(f"vertex {label(b)}: d = {fmt(d[b])} but no arc into it is tight "
                         "(d(u) + w(u, v) = d(v))")
    reached = int(np.isfinite(d).sum())
    cert.checks.append(f"every one of the {reached - src.size} reached non-source vertices has "
                       "a tight incoming arc")
    cert.facts = {"vertices": n, "reached": reached,
                  "max_distance": float(d[np.isfinite(d)].max()) if reached else None}
    return cert
