"""Certificates: checks that a result is right without recomputing it the same way.

Each check returns a :class:`Certificate`: ``ok``, the checks passed, and the first violation
(a sentence naming the vertex or edge). The MST check is the cycle property, offline by one
sorted union-find sweep (docs/gis.md, "verify"); the SSSP check: ``d(s) = 0``, no arc
relaxes, every reached vertex has a tight incoming arc.

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

import math
from dataclasses import dataclass, field

import numba
import numpy as np

from .errors import InputError
from .grid import arc_cost, window_arc_factor
from .grid.costs import ARC_DC as ARC_DC_T, ARC_DR as ARC_DR_T
from .grid.edges import CONNECTIVITIES, grid_edges, order_bits

__all__ = ["Certificate", "verify_grid_mst", "verify_sssp", "verify_grid_sssp", "verify_fill",
           "verify_flow", "DIRECTION_NAMES"]

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
    """Edge indices sorted by (weight, id) (edges come in id order: the index breaks ties)."""
    bits = order_bits(w).astype(np.uint64)
    index = np.arange(w.size, dtype=np.uint64)
    if w.size < 2**32:
        keys = np.sort((bits << np.uint64(32)) | index)  # sorting values beats argsort
        return (keys & np.uint64(0xFFFFFFFF)).astype(np.int64)
    return np.lexsort((index, bits))


@numba.njit(cache=True, nogil=True)
def _first_kruskal_violation(order, u, v, in_tree, parent, size):
    """Sweep the edges in (weight, id) order joining tree edges' ends: the first non-tree
    edge with unjoined ends, and the tree edge that later joins them (its path's heaviest),
    or (-1, -1)."""
    bad = -1
    for k in range(order.size):
        e = order[k]
        a, b = _find(parent, u[e]), _find(parent, v[e])
        if in_tree[e]:
            if size[a] > size[b]:
                a, b = b, a
            parent[a] = b
            size[b] += size[a]
            if bad >= 0 and _find(parent, u[bad]) == _find(parent, v[bad]):
                return bad, e
        elif a != b and bad < 0:
            bad = e
    return bad, -1


def _cell(c, cols):
    return f"({int(c) // cols}, {int(c) % cols})"


def verify_grid_mst(dem, mask, connectivity=8, weight="max", cellsize=(1.0, 1.0)):
    """Check that ``mask`` is the minimum spanning forest of the grid graph of ``dem``.

    Parameters
    ----------
    dem : 2-D float array
        Elevations, NaN = nodata.
    mask : 2-D uint8 array
        Bit ``d`` of ``mask[r, c]``: edge ``(cell, d)`` in the forest (E=0, S=1, SE=2, SW=3).
    connectivity : {4, 8}
    weight : {'max', 'absdiff', 'slope', 'length3d'}
    cellsize : (dx, dy)

    Returns
    -------
    Certificate
    """
    z = np.asarray(dem, dtype=np.float32)
    m = np.asarray(mask)
    if z.ndim != 2 or m.shape != z.shape:
        raise InputError(f"verify: DEM {z.shape} and mask {m.shape} must be 2-D of one shape")
    if int(connectivity) not in CONNECTIVITIES:
        raise InputError(f"verify: connectivity {connectivity!r} is not 4 or 8")
    rows, cols = z.shape
    n = rows * cols
    cert = Certificate("minimum spanning forest")
    ids, u, v, w = grid_edges(z, int(connectivity), weight, cellsize)
    d = (ids & 3).astype(np.int8)
    del ids
    m = m.astype(np.uint8, copy=False)
    # 1. every set bit is a graph edge
    allowed = np.uint8(0x3 if int(connectivity) == 4 else 0xF)
    bits_total = int(np.unpackbits(m.reshape(-1, 1), axis=1).sum()) if m.size else 0
    in_tree = ((m.reshape(-1)[u] >> d.astype(np.uint8)) & 1).astype(bool)
    if int(in_tree.sum()) != bits_total:
        edge_set = np.zeros(n, np.uint8)
        np.bitwise_or.at(edge_set, u, (np.uint8(1) << d.astype(np.uint8)))
        stray = m.reshape(-1) & ~edge_set
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
    bad, t = _first_kruskal_violation(order, u, v, in_tree, parent, np.ones(n, np.int64))
    del order, parent
    if bad >= 0:
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
    """(code, u, v): 0 ok; 1 d(v) > d(u) + w; 2 no tight arc into v; 3 v unreached."""
    n = indptr.size - 1
    tight = is_source.copy()
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
    graph : anything :func:`terrain.graph.as_graph` takes
    dist : 1-D array
        Distance per vertex (internal order); ``unreached`` (or inf/NaN) where unreachable.
    sources : sequence of int
        Internal vertex numbers of the sources.
    weights : 1-D array or "data", optional
        Weight of each CSR arc; ``"data"``: a scipy.sparse ``graph``'s own values; None: 1.
    rtol : float
        Relative tolerance for float distances (0: exact).

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


# --------------------------------------------------------------------------- grid cost distance
HALO = 2  # the longest arc (a knight move) spans 2 cells

_GRID_SSSP_CODES = {
    1: "nodata cell ({r}, {c}) is labelled (distance {d}, backlink {b}, allocation {a})",
    2: "unreached cell ({r}, {c}) has backlink {b} and allocation {a} (want 255 and -1)",
    3: "reached cell ({r}, {c}) (distance {d}) has backlink {b} and allocation {a}",
    4: "cell ({r}, {c}) is a backlink root (code 0) with distance {d} and allocation {a}, but "
       "source {a} is not there with that start cost",
    5: "cell ({r}, {c}): backlink {b} does not lead to a reached cell of the graph",
    6: "cell ({r}, {c}): backlink {b} is not tight: d = {d} but d(predecessor) + w = {x}",
    7: "cell ({r}, {c}): allocation {a} differs from its predecessor's ({x}) along backlink {b}",
    8: "cell ({r2}, {c2}): d = {d2} > d({r}, {c}) + w = {x}",
    9: "cell ({r2}, {c2}) is unreached but a neighbour of reached cell ({r}, {c}) at "
       "d + w = {x} (within the max cost)",
}


@numba.njit(cache=True, nogil=True)
def _check_cost_window(z, f, has_f, d, b, a, h, model, lengths, codes, src_r, src_c, start,
                       limit, rtol, r0, c0, rows, cols, out):
    """Checks of one window's cells; the first violation into ``out``; its code or 0."""
    nr, nc = z.shape
    one = np.float32(1.0)
    nk = codes.size
    nsrc = src_r.size
    for i in range(h, nr - h):
        for j in range(h, nc - h):
            zv = z[i, j]
            fv = f[i, j] if has_f else one
            dv = d[i, j]
            bv = b[i, j]
            av = a[i, j]
            valid = zv == zv and fv == fv
            reached = dv == dv
            code = 0
            x = 0.0
            if not valid:
                if reached or bv != 255 or av != -1:
                    code = 1
            elif not reached:
                if bv != 255 or av != -1:
                    code = 2
            elif bv == 255 or av < 0 or av >= nsrc:
                code = 3
            elif bv == 0:
                if src_r[av] != r0 + i - h or src_c[av] != c0 + j - h or dv != start[av]:
                    code = 4
            else:
                k = bv - 1
                allowed = False
                for q in range(nk):
                    if codes[q] == k:
                        allowed = True
                if not allowed:
                    code = 5
                else:
                    pi = i + ARC_DR_T[k]
                    pj = j + ARC_DC_T[k]
                    zu = z[pi, pj]
                    fu = f[pi, pj] if has_f else one
                    du = d[pi, pj]
                    if not (zu == zu and fu == fu and du == du):
                        code = 5
                    else:
                        ku = (k & 8) | ((k + 4) & 7)  # the arc u -> v
                        ok, fac = window_arc_factor(z, f, has_f, pi, pj, ku)
                        if not ok:  # a knight arc passing between nodata cells
                            code = 5
                        else:
                            x = du + arc_cost(zu, zv, fac, ku, model, lengths)
                            if not abs(dv - x) <= rtol * max(1.0, abs(x)):
                                code = 6
                            elif a[pi, pj] != av:
                                code = 7
                                x = a[pi, pj]
            if code != 0:
                out[0], out[1], out[2], out[3] = code, r0 + i - h, c0 + j - h, 0
                out[4] = x
                return code
            if not (valid and reached):
                continue
            # every arc out of this reached cell: d(w) <= d(v) + w(v, w)
            for q in range(nk):
                k = codes[q]
                ti = i + ARC_DR_T[k]
                tj = j + ARC_DC_T[k]
                zt = z[ti, tj]
                ft = f[ti, tj] if has_f else one
                if not (zt == zt and ft == ft):
                    continue
                ok, fac = window_arc_factor(z, f, has_f, i, j, k)
                if not ok:
                    continue  # a knight arc between nodata cells
                w = arc_cost(zv, zt, fac, k, model, lengths)
                if not w < math.inf:
                    continue  # never taken (tobler on a cliff, infinite friction)
                x = dv + w
                dt = d[ti, tj]
                if dt != dt:
                    if x <= limit:
                        code = 9
                elif dt > x + rtol * max(1.0, abs(x)):
                    code = 8
                if code != 0:
                    out[0], out[1], out[2], out[3] = code, r0 + i - h, c0 + j - h, k
                    out[4] = x
                    return code
    return 0


def _halo_window(array, r0, r1, c0, c1, h, fill, dtype):
    """``array[r0-h:r1+h, c0-h:c1+h]`` with ``fill`` outside the grid (reads one window)."""
    from .hydrology.flow import padded_window
    return padded_window(lambda a0, a1, b0, b1: np.asarray(array[a0:a1, b0:b1]),
                         array.shape, (r0, r1, c0, c1), h, fill, dtype)


def verify_grid_sssp(dem, distance, backlink, allocation, sources, start_costs=None, *,
                     cost="absdiff", friction=None, connectivity=8, cellsize=(1.0, 1.0),
                     max_cost=None, rtol=0.0, window=1024):
    """Certificate that ``distance`` / ``backlink`` / ``allocation`` are a cost-distance result.

    The arrays (NumPy or zarr) are read one window at a time with a halo of :data:`HALO`
    cells. Checks: sources ``d <= start``, backlink roots are their sources; no arc out of
    a reached cell relaxes (nor reaches an unreached cell within ``max_cost``); fill values
    at nodata and unreached cells; each backlink is a tight arc from a cell of the same
    allocation (equality within ``rtol``; 0 = exact). With zero-cost arcs a cycle of tight
    backlinks is not excluded.

    Returns
    -------
    Certificate

    Examples
    --------
    >>> from terrain.grid.sssp import grid_sssp
    >>> z = np.array([[1, 2, 4], [1, 1, 3]], np.float32)
    >>> r = grid_sssp(z, [(0, 0)], backend="cpu")
    >>> verify_grid_sssp(z, r.distance, r.backlink, r.allocation, [(0, 0)]).ok
    True
    >>> d = r.distance.copy(); d[1, 2] -= 1
    >>> verify_grid_sssp(z, d, r.backlink, r.allocation, [(0, 0)]).violation
    'cell (1, 2): backlink 5 is not tight: d = 1 but d(predecessor) + w = 2'
    """
    from .grid.costs import arc_codes, arc_lengths, cost_model_code
    from .grid.sssp import check_max_cost

    model = cost_model_code(cost)
    codes = arc_codes(connectivity)
    lengths = arc_lengths(cellsize)
    limit = check_max_cost(max_cost)
    shape = tuple(int(s) for s in distance.shape)
    for name, arr in (("dem", dem), ("backlink", backlink), ("allocation", allocation),
                      ("friction", friction)):
        if arr is not None and tuple(arr.shape) != shape:
            raise InputError(f"verify: {name} has shape {tuple(arr.shape)}, the distances "
                             f"{shape}")
    src = np.asarray(sources, np.int64).reshape(-1, 2)
    if src.shape[0] == 0:
        raise InputError("verify: no sources")
    start = (np.zeros(src.shape[0]) if start_costs is None
             else np.broadcast_to(np.asarray(start_costs, np.float64), (src.shape[0],)).copy())
    fmt = (lambda v: f"{float(v):.17g}")
    cert = Certificate("cost distance (grid SSSP)")
    for i, (r, c) in enumerate(src.tolist()):
        if not (0 <= r < shape[0] and 0 <= c < shape[1]):
            return cert.fail(f"source {i} at cell ({r}, {c}) is outside the grid")
        ds = float(distance[r, c])
        if start[i] <= limit and not ds <= start[i] + rtol * max(1.0, start[i]):
            return cert.fail(f"source {i} at cell ({r}, {c}): d = {fmt(ds)}, above its start "
                             f"cost {fmt(start[i])}")
    cert.checks.append(f"d(source) <= start cost for the {src.shape[0]} source(s)")
    from .tiles.store import shard_windows
    h = HALO
    out = np.zeros(5, np.float64)
    rows, cols = shape
    reached, top = 0, -math.inf
    windows = shard_windows(shape, max(1, int(window)))
    for r0, r1, c0, c1 in windows:
        z = _halo_window(dem, r0, r1, c0, c1, h, np.nan, np.float32)
        f = (_halo_window(friction, r0, r1, c0, c1, h, np.nan, np.float32)
             if friction is not None else np.ones((1, 1), np.float32))
        d = _halo_window(distance, r0, r1, c0, c1, h, np.nan, np.float64)
        b = _halo_window(backlink, r0, r1, c0, c1, h, 255, np.uint8)
        a = _halo_window(allocation, r0, r1, c0, c1, h, -1, np.int32)
        code = _check_cost_window(z, f, friction is not None, d, b, a, h, model, lengths,
                                  codes, src[:, 0].copy(), src[:, 1].copy(), start, limit,
                                  float(rtol), r0, c0, rows, cols, out)
        if code:
            return cert.fail(_cost_violation(out, d, b, a, r0 - h, c0 - h, fmt))
        core = d[h:-h, h:-h]
        n = int(np.count_nonzero(~np.isnan(core)))
        reached += n
        if n:
            top = max(top, float(np.nanmax(core)))
    nk = codes.size
    cert.checks.append(f"nodata and unreached cells carry NaN / 255 / -1; every backlink root "
                       f"is its source")
    cert.checks.append(f"d(v) <= d(u) + w(u, v) for every arc ({nk} per cell) out of the "
                       f"{reached} reached cells; no reachable cell left unreached"
                       + (f" within max cost {max_cost:g}" if max_cost is not None else ""))
    cert.checks.append("every reached non-source cell's backlink is a tight arc "
                       "(d(v) = d(u) + w(u, v)) from a cell of the same allocation"
                       + (f" (rtol {rtol:g})" if rtol else " (exact)"))
    cert.facts = {"reached": reached, "windows": len(windows),
                  "max_distance": top if reached else None}
    return cert


def _cost_violation(out, d, b, a, rr0, cc0, fmt):
    code, r, c, k = (int(v) for v in out[:4])
    i, j = r - rr0, c - cc0
    fields = {"r": r, "c": c, "d": fmt(d[i, j]), "b": int(b[i, j]), "a": int(a[i, j]),
              "x": fmt(out[4]) if code != 7 else int(out[4])}
    if code in (8, 9):
        from .grid.costs import ARC_DC, ARC_DR
        r2, c2 = r + int(ARC_DR[k]), c + int(ARC_DC[k])
        fields.update(r2=r2, c2=c2, d2=fmt(d[r2 - rr0, c2 - cc0]))
    return _GRID_SSSP_CODES[code].format(**fields)


# --------------------------------------------------------------------------- flow
_FLOW_WHY = {
    1: "holds a value that is not an ESRI D8 code (1, 2, 4, ..., 128; 0 outlet; 255 nodata)",
    2: "is nodata (255) on a cell with an elevation, or has a direction on a nodata cell",
    3: "points off the grid or to a nodata cell",
    4: "climbs: its downstream neighbour is higher on the filled DEM",
    5: "is not the steepest descent (distance-weighted, first in code order on ties)",
    6: "has no lower neighbour but leaves its flat (the neighbour is lower or higher)",
    7: "is an outlet (0) but neither a named outlet nor a cell without a lower neighbour "
       "beside the grid's edge or nodata (an undrained sink)",
    8: "should be an outlet (0): a named outlet, or a cell without a lower neighbour beside "
       "the grid's edge or nodata",
    9: "is a diagonal, which D4 does not have",
    10: "never reaches an outlet: the directions hold a cycle upstream of or through it",
    11: "accumulation is not its weight plus the accumulation of the cells draining into it",
    12: "accumulation is not NaN exactly at the nodata cells",
}


@numba.njit(cache=True)
def _check_flow(z, d, outl, has_out, edge_outlets, step, dist):
    """(violation, cell) of the direction checks; (0, -1) when they all hold."""
    R, C = z.shape
    for r in range(R):
        for c in range(C):
            v = d[r, c]
            cell = r * C + c
            nan = np.isnan(z[r, c])
            if v == 255 or nan:
                if not (v == 255 and nan):
                    return 2, cell
                continue
            k = -1
            if v != 0:
                for q in range(8):
                    if v == (1 << q):
                        k = q
                if k < 0:
                    return 1, cell
                if step == 2 and k % 2 == 1:
                    return 9, cell
            best = 0.0
            bk = -1
            boundary = False
            for q in range(0, 8, step):
                rr = r + ARC_DR_T[q]
                cc = c + ARC_DC_T[q]
                if rr < 0 or rr >= R or cc < 0 or cc >= C or np.isnan(z[rr, cc]):
                    boundary = True
                    continue
                drop = (np.float64(z[r, c]) - np.float64(z[rr, cc])) / dist[q]
                if drop > best:
                    best = drop
                    bk = q
            named = has_out and outl[r, c] != 0
            must_out = named or (edge_outlets and boundary and bk < 0)
            if v == 0:
                if not must_out:
                    return 7, cell
                continue
            if must_out:
                return 8, cell
            rr = r + ARC_DR_T[k]
            cc = c + ARC_DC_T[k]
            if rr < 0 or rr >= R or cc < 0 or cc >= C or np.isnan(z[rr, cc]):
                return 3, cell
            if z[rr, cc] > z[r, c]:
                return 4, cell
            if bk >= 0 and k != bk:
                return 5, cell
            if bk < 0 and z[rr, cc] != z[r, c]:
                return 6, cell
    return 0, -1


@numba.njit(cache=True)
def _check_accumulation(d, acc, w, has_w, rtol):
    R, C = d.shape
    for r in range(R):
        for c in range(C):
            if d[r, c] == 255:
                if not np.isnan(acc[r, c]):
                    return 12, r * C + c
                continue
            s = w[r, c] if has_w else 1.0
            if has_w and np.isnan(s):
                s = 0.0
            for q in range(8):
                rr = r + ARC_DR_T[q]
                cc = c + ARC_DC_T[q]
                if 0 <= rr < R and 0 <= cc < C and d[rr, cc] == (1 << ((q + 4) & 7)):
                    s += acc[rr, cc]
            a = acc[r, c]
            if np.isnan(a):
                return 12, r * C + c
            if rtol == 0.0:
                if a != s:
                    return 11, r * C + c
            elif abs(a - s) > rtol * max(abs(a), abs(s)):
                return 11, r * C + c
    return 0, -1


def verify_flow(filled, direction, accumulation=None, weights=None, *, connectivity=8,
                cellsize=(1.0, 1.0), outlets=None, rtol=0.0):
    """Check flow directions (and accumulation) on a filled DEM.

    Directions: ESRI codes, 255 exactly at nodata, none climbs, steepest descents, flats
    stay at their elevation, 0 exactly at the outlets, no cycle (Kahn). Accumulation: NaN
    exactly at nodata, each cell its weight plus its inflows (equal bits, or within ``rtol``).

    Returns
    -------
    Certificate

    Examples
    --------
    >>> z = np.array([[3, 2, 1]], np.float32)
    >>> d = np.array([[1, 1, 0]], np.uint8)
    >>> verify_flow(z, d, np.array([[1.0, 2.0, 3.0]])).ok
    True
    >>> verify_flow(z, np.array([[1, 16, 0]], np.uint8)).violation
    'direction of cell (0, 1) climbs: its downstream neighbour is higher on the filled DEM'
    """
    z = np.ascontiguousarray(filled, np.float32)
    d = np.ascontiguousarray(direction)
    if z.ndim != 2 or d.shape != z.shape:
        raise InputError(f"verify: filled DEM {z.shape} and directions {d.shape} must be 2-D "
                         "of one shape")
    if int(connectivity) not in (4, 8):
        raise InputError(f"verify: connectivity {connectivity!r} is not 4 or 8")
    d = d.astype(np.uint8)
    step = 1 if int(connectivity) == 8 else 2
    dx, dy = (float(v) for v in cellsize)
    diag = math.sqrt(dx * dx + dy * dy)
    dist = np.array([dx, diag, dy, diag, dx, diag, dy, diag], np.float64)
    has_out = outlets is not None
    outl = (np.ascontiguousarray(np.asarray(outlets) != 0, np.uint8) if has_out
            else np.zeros((1, 1), np.uint8))
    cert = Certificate("flow directions" + ("" if accumulation is None else " and accumulation"))
    cols = z.shape[1]
    why, cell = _check_flow(z, d, outl, has_out, outlets is None, step, dist)
    if why:
        return cert.fail(f"direction of cell {_cell(cell, cols)} {_FLOW_WHY[why]}")
    valid = int(np.count_nonzero(d != 255))
    outl_n = int(np.count_nonzero(d == 0))
    cert.checks.append(f"the {valid} codes are ESRI D{connectivity} codes, 255 exactly at "
                       "nodata; none climbs on the filled DEM; descents are the steepest, "
                       "flats drain within their elevation")
    cert.checks.append(f"0 exactly at the {outl_n} outlets (" + (
        "the named cells" if has_out else "cells without a lower neighbour beside the "
        "grid's edge or nodata") + "): no undrained sink")
    from .hydrology.watershed import downstream_order
    # the valid cells Kahn's order never reaches: on or below a cycle
    _, lost, order = downstream_order(np.ascontiguousarray(d, np.uint8))
    lost[order] = False
    if lost.any():
        return cert.fail(f"direction of cell {_cell(np.argmax(lost), cols)} {_FLOW_WHY[10]}")
    cert.checks.append("in-degree order reaches every cell: no cycle, every path ends at an "
                       "outlet")
    cert.facts = {"cells": valid, "outlets": outl_n}
    if accumulation is not None:
        acc = np.ascontiguousarray(accumulation, np.float64)
        if acc.shape != z.shape:
            raise InputError(f"verify: accumulation {acc.shape} and DEM {z.shape} differ")
        has_w = weights is not None
        w = (np.ascontiguousarray(weights, np.float64) if has_w
             else np.zeros((1, 1), np.float64))
        why, cell = _check_accumulation(d, acc, w, has_w, float(rtol))
        if why:
            return cert.fail(f"cell {_cell(cell, cols)}: {_FLOW_WHY[why]}")
        cert.checks.append("accumulation = " + ("weight" if has_w else "1") + " + the "
                           "accumulation of the cells draining in, at every cell" +
                           (" (equal bits)" if rtol == 0 else f" (within {rtol:g})"))
        cert.facts["max_accumulation"] = float(np.nanmax(acc)) if valid else float("nan")
    return cert


@numba.njit(cache=True, nogil=True)
def _fill_local_cpu(z, f, outlet, cut_off, step, strict):
    """First cell breaking the local checks and which (1 lowered, 2 outlet changed, 3 not at
    its spill level, 4 no lower neighbour (strict), 5 cut off but changed); -1 when none."""
    H, W = z.shape
    for i in range(H):
        for j in range(W):
            zc = z[i, j]
            if np.isnan(zc):
                continue
            fc = f[i, j]
            c = i * W + j
            if not fc >= zc:
                return c, 1
            if outlet[i, j]:
                if fc != zc:
                    return c, 2
                continue
            if cut_off[i, j]:
                if fc != zc:
                    return c, 5
                continue
            low = np.float32(np.inf)
            for k in range(0, 8, step):
                ii, jj = i + ARC_DR_T[k], j + ARC_DC_T[k]
                if 0 <= ii < H and 0 <= jj < W and not np.isnan(z[ii, jj]):
                    if f[ii, jj] < low:
                        low = f[ii, jj]
            if strict:
                if not low < fc:
                    return c, 4
            else:
                want = zc if zc >= low else low
                if fc != want:
                    return c, 3
    return -1, 0


@numba.njit(cache=True, nogil=True)
def _drains_cpu(z, f, outlet, step):
    """The cells with a path to an outlet on which ``f`` never rises (searched upwards)."""
    H, W = z.shape
    seen = np.zeros((H, W), np.bool_)
    stack = np.empty(H * W, np.int64)
    top = 0
    for i in range(H):
        for j in range(W):
            if outlet[i, j] and not np.isnan(z[i, j]):
                seen[i, j] = True
                stack[top] = i * W + j
                top += 1
    while top > 0:
        top -= 1
        c = stack[top]
        i, j = c // W, c % W
        for k in range(0, 8, step):
            ii, jj = i + ARC_DR_T[k], j + ARC_DC_T[k]
            if 0 <= ii < H and 0 <= jj < W and not seen[ii, jj] and not np.isnan(z[ii, jj]) \
                    and f[ii, jj] >= f[i, j]:
                seen[ii, jj] = True
                stack[top] = ii * W + jj
                top += 1
    return seen


def verify_fill(dem, filled, connectivity=8, outlets=None, depth=None, depression=None,
                epsilon=False):
    """Certificate that ``filled`` is the depression fill of ``dem`` (docs/hydrology.md).

    ``outlets``: the named outlets' mask (default: the grid's edge and nodata);
    ``epsilon``: the epsilon fill's certificate.

    >>> z = np.array([[5, 5, 5], [5, 1, 5], [5, 4, 5]], np.float32)
    >>> verify_fill(z, np.array([[5, 5, 5], [5, 4, 5], [5, 4, 5]], np.float32)).ok
    True
    >>> verify_fill(z, np.array([[5, 5, 5], [5, 5, 5], [5, 4, 5]], np.float32)).violation
    'cell (1, 1): filled 5 is above its spill level 4 (max of its elevation 1 and its lowest neighbour)'
    """
    from .hydrology import depression_labels, outlet_cells
    z = np.ascontiguousarray(np.asarray(dem, np.float32))
    f = np.ascontiguousarray(np.asarray(filled, np.float32))
    conn = int(connectivity)
    if conn not in CONNECTIVITIES:
        raise InputError(f"connectivity {connectivity!r} is not 4 or 8")
    cert = Certificate(f"{'epsilon ' if epsilon else ''}depression fill, {conn}-connected")
    if f.shape != z.shape:
        return cert.fail(f"filled has {f.shape[0]} x {f.shape[1]} cells, the DEM "
                         f"{z.shape[0]} x {z.shape[1]}")
    if not np.array_equal(np.isnan(f), np.isnan(z)):
        r, c = np.argwhere(np.isnan(f) != np.isnan(z))[0]
        return cert.fail(f"cell ({r}, {c}): nodata in one of the DEM and the filled DEM only")
    cert.checks.append("the filled DEM has the DEM's nodata")
    out = outlet_cells(z, conn, outlets)
    step = 1 if conn == 8 else 2
    valid = ~np.isnan(z)
    parts = depression_labels(valid, conn)  # connected parts of the grid
    drains = np.zeros(int(parts.max(initial=0)) + 1, np.bool_)
    drains[parts[out != 0]] = True
    cut_off = valid & ~drains[parts]
    cell, kind = _fill_local_cpu(z, f, out, cut_off, step, bool(epsilon))
    if cell >= 0:
        r, c = divmod(int(cell), z.shape[1])
        zc, fc = float(z[r, c]), float(f[r, c])
        if kind == 3:
            low = min((float(f[r + dr, c + dc]) for dr, dc in zip(ARC_DR_T[:8:step],
                                                                   ARC_DC_T[:8:step])
                       if 0 <= r + dr < z.shape[0] and 0 <= c + dc < z.shape[1]
                       and not np.isnan(z[r + dr, c + dc])), default=math.inf)
            spill = max(zc, low)
            where = "above" if fc > spill else "below"
            return cert.fail(f"cell ({r}, {c}): filled {fc:.9g} is {where} its spill level "
                             f"{spill:.9g} (max of its elevation {zc:.9g} and its lowest "
                             "neighbour)")
        return cert.fail({1: f"cell ({r}, {c}): filled {fc:.9g} is below its elevation {zc:.9g}",
                          2: f"outlet ({r}, {c}): filled {fc:.9g}, elevation {zc:.9g}",
                          4: f"cell ({r}, {c}): no neighbour lower than {fc:.9g} (it does "
                             "not drain)",
                          5: f"cell ({r}, {c}) reaches no outlet but was raised from "
                             f"{zc:.9g} to {fc:.9g}"}[kind])
    cert.checks.append("no cell lowered; the outlets keep their elevation")
    cert.checks.append("every cell drains to a lower neighbour" if epsilon else
                       "no cell above its spill level: filled = max(elevation, lowest "
                       "neighbour's filled)")
    seen = _drains_cpu(z, f, out, step)
    lost = valid & ~cut_off & ~seen
    if lost.any():
        r, c = np.argwhere(lost)[0]
        return cert.fail(f"cell ({r}, {c}): no path on the filled DEM leads down to an "
                         "outlet (it lies in a depression)")
    cert.checks.append("every cell drains to an outlet on the filled DEM")
    if depth is not None:
        d = np.asarray(depth, np.float32)
        if not np.array_equal(d, (f - z).astype(np.float32), equal_nan=True):
            r, c = np.argwhere(~((d == f - z) | (np.isnan(d) & np.isnan(z))))[0]
            return cert.fail(f"cell ({r}, {c}): depth {float(d[r, c]):.9g} is not filled - "
                             "elevation")
        cert.checks.append("depth = filled - elevation")
    if depression is not None:
        want = depression_labels((f - z) > 0, conn)
        got = np.asarray(depression)
        if not np.array_equal(got, want):
            r, c = np.argwhere(got != want)[0]
            return cert.fail(f"cell ({r}, {c}): depression id {int(got[r, c])}, the flooded "
                             f"regions give {int(want[r, c])}")
        cert.checks.append("depression ids: the flooded regions in row-major order")
    cert.facts = {"cells": int(valid.sum()), "outlets": int(np.count_nonzero(out)),
                  "flooded": int(np.count_nonzero((f - z) > 0)),
                  "cut_off": int(np.count_nonzero(cut_off))}
    return cert
