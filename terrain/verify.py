"""Certificates: checks that a result is right without recomputing it the same way.

Each check returns a :class:`Certificate`: ``ok``, the checks passed, and the first violation
(a sentence naming the vertex or edge). The MST check is the cycle property, offline by one
sorted union-find sweep (docs/gis.md, "verify"); the SSSP check: ``d(s) = 0``, no arc
relaxes, every reached vertex has a tight incoming arc. The passes are C
(``terrain_cert_*``, ``terrain_mst_cert_*``; the cost distance's with the solve's own arc
costs), so a certificate loads neither Numba nor SciPy.

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

import ctypes
import math
from dataclasses import dataclass, field

import numpy as np

from . import native
from .errors import InputError
from .grid.costs import ARC_DC, ARC_DR
from .grid.edges import (DIRECTIONS, WeightSum, check_connectivity, edge_keys, edge_weights_np,
                         horizontal_lengths, weight_model_code)

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
_MST_CERT_SIGNATURES = {
    "terrain_mst_cert_forest": (None, [ctypes.c_void_p] * 2 + [ctypes.c_int64] * 2 +
                                [ctypes.c_int] + [ctypes.c_void_p] * 2),
    "terrain_mst_cert_order": (None, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p] +
                               [ctypes.c_int64] * 2 + [ctypes.c_void_p] * 2),
}
_CHECK_SIGNATURES = {
    "terrain_cert_flow": (ctypes.c_int64, [ctypes.c_void_p] * 4 + [ctypes.c_int] * 3 +
                          [ctypes.c_void_p] + [ctypes.c_int64] * 2 + [ctypes.c_void_p]),
    "terrain_cert_accumulation": (ctypes.c_int64, [ctypes.c_void_p] * 3 + [ctypes.c_int] +
                                  [ctypes.c_double] + [ctypes.c_int64] * 2 +
                                  [ctypes.c_void_p]),
    "terrain_cert_fill_local": (ctypes.c_int64, [ctypes.c_void_p] * 4 + [ctypes.c_int] * 2 +
                                [ctypes.c_int64] * 2 + [ctypes.c_void_p]),
    "terrain_cert_drains": (ctypes.c_int64, [ctypes.c_void_p] * 3 + [ctypes.c_int] +
                            [ctypes.c_int64] * 2 + [ctypes.c_void_p]),
    "terrain_cert_cost_window": (ctypes.c_int64, [ctypes.c_void_p] * 2 + [ctypes.c_int] +
                                 [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3 +
                                 [ctypes.c_int] + [ctypes.c_void_p] * 3 + [ctypes.c_int64] +
                                 [ctypes.c_void_p] * 3 + [ctypes.c_int64] +
                                 [ctypes.c_double] * 2 + [ctypes.c_int64] * 2 +
                                 [ctypes.c_void_p]),
    "terrain_cert_sssp": (ctypes.c_int64, [ctypes.c_void_p] * 3 + [ctypes.c_int] +
                          [ctypes.c_void_p] * 2 + [ctypes.c_double, ctypes.c_int64,
                                                   ctypes.c_void_p]),
}

_CERT_SIGNATURES = {**_MST_CERT_SIGNATURES, **_CHECK_SIGNATURES}


def _checks():
    """The C library with the certificates' passes declared."""
    return native.declared(_CERT_SIGNATURES)


def _cell(c, cols):
    return f"({int(c) // cols}, {int(c) % cols})"


def verify_grid_mst(dem, mask, connectivity=8, weight="max", cellsize=(1.0, 1.0)):
    """Check that ``mask`` is the minimum spanning forest of the grid graph of ``dem``.

    Four checks, each a pass of C over the grid (``terrain_mst_cert_*``): every set bit is an
    edge of the graph; the tree edges close no cycle; every non-tree edge joins two cells of
    one tree; and the cycle property, as one sweep of the graph's edges in ``(weight, id)``
    order. It holds one array beside the inputs, the edges' sorted keys (8 bytes an edge),
    and the union-find's parents: about 41 bytes a cell in all.

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
    z = np.ascontiguousarray(dem, dtype=np.float32)
    m = np.asarray(mask)
    if z.ndim != 2 or m.shape != z.shape:
        raise InputError(f"verify: DEM {z.shape} and mask {m.shape} must be 2-D of one shape")
    connectivity = check_connectivity(connectivity)
    model, hlen = weight_model_code(weight), horizontal_lengths(cellsize)
    rows, cols = z.shape
    n = rows * cols
    if n >= 1 << 30:
        raise InputError(f"verify: {rows} x {cols} cells: the forest's certificate takes grids "
                         "of fewer than 2^30 cells (32-bit edge ids)")
    m = np.ascontiguousarray(m.astype(np.uint8, copy=False))
    lib = _checks()
    parent = np.empty(max(n, 1), np.int32)
    out = np.zeros(7, np.int64)
    lib.terrain_mst_cert_forest(z.ctypes.data, m.ctypes.data, rows, cols, connectivity,
                                parent.ctypes.data, out.ctypes.data)
    fault, cell, d, bits_total, vertices, edges, comps = (int(x) for x in out)
    cert = Certificate("minimum spanning forest")
    if fault == 1:
        if d >= 4:
            return cert.fail(f"mask value {int(m.flat[cell])} of cell {_cell(cell, cols)} sets "
                             "a bit beyond the four directions E, S, SE, SW")
        why = ("a direction 4-connectivity does not have" if d >= connectivity // 2
               else "an edge the graph does not have (off the grid or at a nodata cell)")
        return cert.fail(f"mask bit {DIRECTION_NAMES[d]} of cell {_cell(cell, cols)} is set: "
                         f"{why}")
    cert.checks.append(f"every one of the {bits_total} set bits is an edge of the "
                       f"{connectivity}-connected graph")
    if fault == 2:
        return cert.fail(f"tree edge {_cell(cell, cols)} {DIRECTION_NAMES[d]} closes a cycle")
    trees = vertices - edges
    cert.checks.append(f"the {edges} tree edges form no cycle: a forest of {trees} trees")
    if fault == 3:
        return cert.fail(f"the forest has {trees} trees but the graph has {comps} connected "
                         f"component(s): non-tree edge {_cell(cell, cols)} "
                         f"{DIRECTION_NAMES[d]} joins two trees")
    cert.checks.append(f"every graph edge joins two vertices of one tree: the forest spans "
                       f"each of the {trees} connected components (edges = vertices - "
                       f"components: {edges} = {vertices} - {trees})")
    keys, _ = edge_keys(z, connectivity, model, hlen)
    keys.sort()
    lib.terrain_mst_cert_order(keys.ctypes.data, keys.size, m.ctypes.data, n, cols,
                               parent.ctypes.data, out.ctypes.data)
    graph_edges = int(keys.size)
    del keys, parent
    bad, heavy = int(out[0]), int(out[1])

    def edge(e):
        c, k = e >> 2, e & 3
        dr, dc = DIRECTIONS[k]
        w = edge_weights_np(z.flat[c:c + 1], z.flat[c + dr * cols + dc:c + dr * cols + dc + 1],
                            k, model, hlen)
        return f"{_cell(c, cols)} {DIRECTION_NAMES[k]} (weight {float(w[0]):.9g})"

    if bad >= 0:
        return cert.fail(f"cycle property fails: non-tree edge {edge(bad)} is lighter than "
                         f"tree edge {edge(heavy)} on the tree path between its ends")
    cert.checks.append(f"cycle property: each of the {graph_edges - edges} non-tree edges is "
                       "heavier, in the order (weight, edge id), than every tree edge on the "
                       "path between its ends")
    total = WeightSum()
    for k in range(connectivity // 2):
        dr, dc = DIRECTIONS[k]
        c0, c1 = max(0, -dc), cols - max(0, dc)
        tree = (m[:rows - dr, c0:c1] >> np.uint8(k)) & np.uint8(1) == 1
        total.add(edge_weights_np(z[:rows - dr, c0:c1][tree],
                                  z[dr:, c0 + dc:c1 + dc][tree], k, model, hlen))
    cert.facts = {"vertices": vertices, "edges": edges, "trees": trees,
                  "graph_edges": graph_edges, "total_weight": total.value()}
    return cert


# --------------------------------------------------------------------------- SSSP / BFS
def verify_sssp(graph, dist, sources, weights=None, unreached=-1, rtol=0.0):
    """Check that ``dist`` holds the exact shortest-path distances from ``sources``.

    Parameters
    ----------
    graph : anything :func:`terrain.graph.as_graph` takes
    dist : 1-D array
        Distance per vertex (internal order); ``unreached`` (or inf/NaN) where unreachable.
    sources : vertex or sequence of vertices
        The graph's own ids of the sources (file ids, networkx nodes, row numbers), as
        :func:`terrain.graph.sssp` takes them.
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
    from .graph import Graph, as_graph

    if isinstance(weights, str) and weights == "data":
        # a weighted scipy.sparse matrix: its own arcs and weights, as they are
        csr = graph.tocsr()
        g = None
        indptr, indices = np.asarray(csr.indptr, np.int64), np.asarray(csr.indices, np.int64)
        weights = np.asarray(csr.data, np.float64)
        src = Graph(indptr, indices, name="matrix").source_vertices(sources, "verify")
    else:
        g = as_graph(graph)
        indptr = np.asarray(g.indptr, np.int64)
        indices = np.asarray(g.indices, np.int64)
        src = g.source_vertices(sources, "verify")
    n = indptr.size - 1
    d = np.asarray(dist, dtype=np.float64).copy()
    if d.shape != (n,):
        raise InputError(f"verify: {d.size} distances for a graph of {n} vertices")
    d[(d == unreached) | np.isnan(d)] = np.inf
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
    indptr, indices, w = (np.ascontiguousarray(x) for x in (indptr, indices, w))
    is_source = np.zeros(n, np.uint8)
    is_source[src] = 1
    uv = np.zeros(2, np.int64)
    code = _checks().terrain_cert_sssp(
        indptr.ctypes.data, indices.ctypes.data, w.ctypes.data, unit, d.ctypes.data,
        is_source.ctypes.data, float(rtol), n, uv.ctypes.data)
    if code < 0:
        raise MemoryError("verify: no memory for the tight arcs' marks")
    a, b = (int(x) for x in uv)
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
    allocation (equality within ``rtol``; 0 = exact); no walk along the backlinks cycles
    (tight arcs of zero cost could close one: those are followed, window by window).

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
    lib, has_f = _checks(), friction is not None
    lengths, codes = (np.ascontiguousarray(x, t) for x, t in ((lengths, np.float64),
                                                              (codes, np.int64)))
    src_r, src_c = np.ascontiguousarray(src[:, 0]), np.ascontiguousarray(src[:, 1])
    start = np.ascontiguousarray(start, np.float64)
    h = HALO
    out = np.zeros(5, np.float64)
    rows, cols = shape
    reached, top = 0, -math.inf
    level = []  # backlinks along arcs of zero cost: the only ones a cycle can be made of
    windows = shard_windows(shape, max(1, int(window)))
    for r0, r1, c0, c1 in windows:
        z = _halo_window(dem, r0, r1, c0, c1, h, np.nan, np.float32)
        f = (_halo_window(friction, r0, r1, c0, c1, h, np.nan, np.float32)
             if friction is not None else np.ones((1, 1), np.float32))
        d = _halo_window(distance, r0, r1, c0, c1, h, np.nan, np.float64)
        b = _halo_window(backlink, r0, r1, c0, c1, h, 255, np.uint8)
        a = _halo_window(allocation, r0, r1, c0, c1, h, -1, np.int32)
        offs = np.ascontiguousarray(ARC_DR * z.shape[1] + ARC_DC)
        code = lib.terrain_cert_cost_window(
            z.ctypes.data, f.ctypes.data, has_f, d.ctypes.data, b.ctypes.data, a.ctypes.data,
            *z.shape, h, model, lengths.ctypes.data, offs.ctypes.data, codes.ctypes.data,
            codes.size, src_r.ctypes.data, src_c.ctypes.data, start.ctypes.data, src.shape[0],
            limit, float(rtol), r0, c0, out.ctypes.data)
        if code:
            return cert.fail(_cost_violation(out, d, b, a, r0 - h, c0 - h, fmt))
        core = d[h:-h, h:-h]
        level.append(_level_backlinks(d, b, h, r0, c0, cols))
        n = int(np.count_nonzero(~np.isnan(core)))
        reached += n
        if n:
            top = max(top, float(np.nanmax(core)))
    nk = codes.size
    cert.checks.append("nodata and unreached cells carry NaN / 255 / -1; every backlink root "
                       "is its source")
    cert.checks.append(f"d(v) <= d(u) + w(u, v) for every arc ({nk} per cell) out of the "
                       f"{reached} reached cells; no reachable cell left unreached"
                       + (f" within max cost {max_cost:g}" if max_cost is not None else ""))
    cert.checks.append("every reached non-source cell's backlink is a tight arc "
                       "(d(v) = d(u) + w(u, v)) from a cell of the same allocation"
                       + (f" (rtol {rtol:g})" if rtol else " (exact)"))
    # a tight backlink may close a cycle through zero-cost arcs (d equal all round): walk
    # those backlinks' paths once
    looped = _backlink_cycle(*(np.concatenate(x) for x in zip(*level)))
    if looped >= 0:
        return cert.fail(f"cell {_cell(looped, cols)}: its backlinks close a cycle and never "
                         "reach a source")
    cert.checks.append("following the backlinks from every reached cell ends at a source: "
                       "no cycle")
    cert.facts = {"reached": reached, "windows": len(windows),
                  "max_distance": top if reached else None}
    return cert


def _level_backlinks(d, b, h, r0, c0, cols):
    """``(cells, predecessors)`` (row-major in the grid of ``cols`` columns) of a window's
    backlinks whose predecessor has the cell's own distance: arcs of zero cost, the only
    ones a cycle of tight backlinks can be made of (its distances cannot rise all round).
    ``d``, ``b``: the window's distances and backlinks with a halo of ``h`` cells, its core
    at ``(r0, c0)``."""
    core_b, core_d = b[h:-h, h:-h], d[h:-h, h:-h]
    cells, preds = [], []
    for code in np.flatnonzero(np.bincount(core_b.ravel(), minlength=17)[1:17]) + 1:
        i, j = np.nonzero(core_b == code)
        pi, pj = i + ARC_DR[code - 1], j + ARC_DC[code - 1]
        same = d[pi + h, pj + h] == core_d[i, j]
        cells.append((i[same] + r0) * cols + j[same] + c0)
        preds.append((pi[same] + r0) * cols + pj[same] + c0)
    empty = np.zeros(0, np.int64)
    return (np.concatenate(cells).astype(np.int64) if cells else empty,
            np.concatenate(preds).astype(np.int64) if preds else empty)


def _backlink_cycle(cells, preds):
    """A cell on a cycle of the backlinks ``cells[i] -> preds[i]``, or -1: pointer doubling
    over these few (a path that leaves them reaches the sink)."""
    m = cells.size
    if m == 0:
        return -1
    order = np.argsort(cells)
    cells, preds = cells[order], preds[order]
    at = np.minimum(np.searchsorted(cells, preds), m - 1)
    nxt = np.append(np.where(cells[at] == preds, at, m), m)
    for _ in range(max(1, m.bit_length())):
        nxt = nxt[nxt]
    bad = np.flatnonzero(nxt[:m] != m)
    return int(cells[nxt[bad[0]]]) if bad.size else -1


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
       "beside the grid's edge or nodata, nor one cut off from every named outlet (an "
       "undrained sink)",
    8: "should be an outlet (0): a named outlet, or a cell without a lower neighbour beside "
       "the grid's edge or nodata",
    9: "is a diagonal, which D4 does not have",
    10: "never reaches an outlet: the directions hold a cycle upstream of or through it",
    11: "accumulation is not its weight plus the accumulation of the cells draining into it",
    12: "accumulation is not NaN exactly at the nodata cells",
}


def verify_flow(filled, direction, accumulation=None, weights=None, *, connectivity=8,
                cellsize=(1.0, 1.0), outlets=None, rtol=0.0):
    """Check flow directions (and accumulation) on a filled DEM.

    Directions: ESRI codes, 255 exactly at nodata, none climbs, steepest descents, flats
    stay at their elevation, 0 exactly at the outlets, no cycle (each path walked down
    once). Accumulation: NaN exactly at nodata, each cell its weight plus its inflows (equal
    bits, or within ``rtol``).

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
    from .hydrology import direction_codes
    z = np.ascontiguousarray(filled, np.float32)
    d = direction_codes(direction)  # NaN (xarray's masked layer) is nodata, as 255
    if z.ndim != 2 or d.shape != z.shape:
        raise InputError(f"verify: filled DEM {z.shape} and directions {d.shape} must be 2-D "
                         "of one shape")
    connectivity = check_connectivity(connectivity)
    step = 1 if connectivity == 8 else 2
    dx, dy = (float(v) for v in cellsize)
    diag = math.sqrt(dx * dx + dy * dy)
    dist = np.array([dx, diag, dy, diag, dx, diag, dy, diag], np.float64)
    has_out = outlets is not None
    outl = (np.ascontiguousarray(np.asarray(outlets) != 0, np.uint8) if has_out
            else np.zeros((1, 1), np.uint8))
    # with named outlets, nodata may cut cells off from all of them: their sinks drain nowhere
    cut = (_cut_off(~np.isnan(z), connectivity, outl) if has_out
           else np.zeros(z.shape, np.bool_))
    cert = Certificate("flow directions" + ("" if accumulation is None else " and accumulation"))
    cols = z.shape[1]
    at = ctypes.c_int64()
    why = _checks().terrain_cert_flow(z.ctypes.data, d.ctypes.data, outl.ctypes.data,
                                      cut.view(np.uint8).ctypes.data, has_out,
                                      outlets is None, step, dist.ctypes.data, *z.shape,
                                      ctypes.byref(at))
    cell = at.value
    if why:
        return cert.fail(f"direction of cell {_cell(cell, cols)} {_FLOW_WHY[why]}")
    valid = int(np.count_nonzero(d != 255))
    outl_n = int(np.count_nonzero(d == 0))
    cert.checks.append(f"the {valid} codes are ESRI D{connectivity} codes, 255 exactly at "
                       "nodata; none climbs on the filled DEM; descents are the steepest, "
                       "flats drain within their elevation")
    sinks = int(np.count_nonzero((d == 0) & cut))
    cert.checks.append(f"0 exactly at the {outl_n - sinks} outlets (" + (
        "the named cells" if has_out else "cells without a lower neighbour beside the "
        "grid's edge or nodata") + ")" + (
        f" and the {sinks} sinks of cells cut off from every named outlet by nodata"
        if sinks else ": no undrained sink"))
    from .hydrology.watershed import cycle_cell
    looped = cycle_cell(d)  # every path walked down once
    if looped >= 0:
        return cert.fail(f"direction of cell {_cell(looped, cols)} {_FLOW_WHY[10]}")
    cert.checks.append("every cell's path ends at an outlet" + (" or such a sink" if sinks
                                                                  else "") + ": no cycle")
    cert.facts = {"cells": valid, "outlets": outl_n - sinks, "undrained_sinks": sinks}
    if accumulation is not None:
        acc = np.ascontiguousarray(accumulation, np.float64)
        if acc.shape != z.shape:
            raise InputError(f"verify: accumulation {acc.shape} and DEM {z.shape} differ")
        has_w = weights is not None
        w = (np.ascontiguousarray(weights, np.float64) if has_w
             else np.zeros((1, 1), np.float64))
        why = _checks().terrain_cert_accumulation(d.ctypes.data, acc.ctypes.data, w.ctypes.data,
                                                  has_w, float(rtol), *z.shape, ctypes.byref(at))
        cell = at.value
        if why:
            return cert.fail(f"cell {_cell(cell, cols)}: {_FLOW_WHY[why]}")
        cert.checks.append("accumulation = " + ("weight" if has_w else "1") + " + the "
                           "accumulation of the cells draining in, at every cell" +
                           (" (equal bits)" if rtol == 0 else f" (within {rtol:g})"))
        cert.facts["max_accumulation"] = float(np.nanmax(acc)) if valid else float("nan")
    return cert


def _cut_off(valid, connectivity, outlets):
    """The valid cells whose connected part of the grid (in ``connectivity``) holds no cell
    of the mask ``outlets``: no path reaches an outlet from them."""
    from .hydrology import depression_labels
    parts = depression_labels(valid, connectivity)
    drains = np.zeros(int(parts.max(initial=0)) + 1, np.bool_)
    drains[parts[np.asarray(outlets) != 0]] = True
    return valid & ~drains[parts]


def verify_fill(dem, filled, connectivity=8, outlets=None, depth=None, depression=None,
                epsilon=False, sinks=None):
    """Certificate that ``filled`` is the depression fill of ``dem`` (docs/hydrology.md).

    ``outlets``: the named outlets' mask (default: the grid's edge and nodata);
    ``sinks``: the pits of the depressions a ``min_depth``/``min_area`` fill kept (its
    ``sinks`` layer), each a pit of the DEM (no neighbour lower, no outlet), which drain as
    outlets;
    ``depth``, ``depression``: the layers to check too, arrays or anything NumPy reads (a
    zarr array is read when its check comes, and freed after it); ``epsilon``: the epsilon
    fill's certificate.

    >>> z = np.array([[5, 5, 5], [5, 1, 5], [5, 4, 5]], np.float32)
    >>> verify_fill(z, np.array([[5, 5, 5], [5, 4, 5], [5, 4, 5]], np.float32)).ok
    True
    >>> verify_fill(z, np.array([[5, 5, 5], [5, 5, 5], [5, 4, 5]], np.float32)).violation
    'cell (1, 1): filled 5 is above its spill level 4 (max of its elevation 1 and its lowest neighbour)'
    """
    from .hydrology import depression_labels, outlet_cells
    z = np.ascontiguousarray(np.asarray(dem, np.float32))
    f = np.ascontiguousarray(np.asarray(filled, np.float32))
    conn = check_connectivity(connectivity)
    cert = Certificate(f"{'epsilon ' if epsilon else ''}depression fill, {conn}-connected")
    if f.shape != z.shape:
        return cert.fail(f"filled has {f.shape[0]} x {f.shape[1]} cells, the DEM "
                         f"{z.shape[0]} x {z.shape[1]}")
    valid = ~np.isnan(z)
    if not np.array_equal(np.isnan(f), ~valid):
        r, c = np.argwhere(np.isnan(f) == valid)[0]
        return cert.fail(f"cell ({r}, {c}): nodata in one of the DEM and the filled DEM only")
    cert.checks.append("the filled DEM has the DEM's nodata")
    out = outlet_cells(z, conn, outlets)
    step = 1 if conn == 8 else 2
    if sinks is not None:
        kept = np.asarray(sinks) != 0
        if kept.shape != z.shape:
            return cert.fail(f"sinks has {kept.shape[0]} x {kept.shape[1]} cells, the DEM "
                             f"{z.shape[0]} x {z.shape[1]}")
        rs, cs = np.nonzero(kept)  # a fill may keep millions: checked as arrays
        off = ~valid[rs, cs] | out[rs, cs]  # an outlet drains: no depression's pit
        if off.any():
            r, c = rs[off][0], cs[off][0]
            return cert.fail(f"sink ({r}, {c}) lies on " + ("an outlet" if valid[r, c]
                                                            else "nodata"))
        for dr, dc in zip(ARC_DR[:8:step], ARC_DC[:8:step]):
            rr, cc = rs + dr, cs + dc
            inside = (rr >= 0) & (rr < z.shape[0]) & (cc >= 0) & (cc < z.shape[1])
            lower = np.flatnonzero(inside)[z[rr[inside], cc[inside]] < z[rs[inside], cs[inside]]]
            if lower.size:
                i = lower[0]
                return cert.fail(f"sink ({rs[i]}, {cs[i]}) at {float(z[rs[i], cs[i]]):.9g} is "
                                 f"no pit: its neighbour ({rr[i]}, {cc[i]}) lies lower, at "
                                 f"{float(z[rr[i], cc[i]]):.9g}")
        cert.checks.append(f"the {int(np.count_nonzero(kept))} sinks are pits of the DEM "
                           "(no neighbour lower, no outlet); they drain")
        out = out | kept
    cut_off = _cut_off(valid, conn, out)
    lib, at = _checks(), ctypes.c_int64()
    out = np.ascontiguousarray(out, np.uint8)
    kind = lib.terrain_cert_fill_local(z.ctypes.data, f.ctypes.data, out.ctypes.data,
                                       cut_off.view(np.uint8).ctypes.data, step, bool(epsilon),
                                       *z.shape, ctypes.byref(at))
    if kind:
        cell = at.value
        r, c = divmod(int(cell), z.shape[1])
        zc, fc = float(z[r, c]), float(f[r, c])
        if kind == 3:
            low = min((float(f[r + dr, c + dc]) for dr, dc in zip(ARC_DR[:8:step],
                                                                   ARC_DC[:8:step])
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
    seen = np.empty(z.shape, np.bool_)
    if lib.terrain_cert_drains(z.ctypes.data, f.ctypes.data, out.ctypes.data, step, *z.shape,
                               seen.view(np.uint8).ctypes.data) < 0:
        raise MemoryError("verify: no memory for the drainage search")
    lost = valid & ~cut_off & ~seen
    del seen
    if lost.any():
        r, c = np.argwhere(lost)[0]
        return cert.fail(f"cell ({r}, {c}): no path on the filled DEM leads down to an "
                         "outlet (it lies in a depression)")
    cert.checks.append("every cell drains to an outlet on the filled DEM")
    raised = f - z  # float32, NaN at nodata
    if depth is not None:
        d = np.asarray(depth, np.float32)
        if not np.array_equal(d, raised, equal_nan=True):
            r, c = np.argwhere(~((d == raised) | (np.isnan(d) & np.isnan(z))))[0]
            return cert.fail(f"cell ({r}, {c}): depth {float(d[r, c]):.9g} is not filled - "
                             "elevation")
        del d
        cert.checks.append("depth = filled - elevation")
    flooded = raised > 0
    del raised
    if depression is not None:
        want = depression_labels(flooded, conn)
        got = np.asarray(depression)
        if not np.array_equal(got, want):
            r, c = np.argwhere(got != want)[0]
            return cert.fail(f"cell ({r}, {c}): depression id {int(got[r, c])}, the flooded "
                             f"regions give {int(want[r, c])}")
        del got, want
        cert.checks.append("depression ids: the flooded regions in row-major order")
    cert.facts = {"cells": int(np.count_nonzero(valid)), "outlets": int(np.count_nonzero(out)),
                  "flooded": int(np.count_nonzero(flooded)),
                  "cut_off": int(np.count_nonzero(cut_off))}
    return cert
