"""Independent oracles the tests compare with: Kruskal with terrain's tie-break order, scipy's
Dijkstra on a CSR of the grid, Python's own float parsing."""

import math

import numba
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import dijkstra

from terrain.grid.costs import ARC_DC, ARC_DR, arc_codes, arc_costs_np, arc_lengths


def ref_edges(z, conn, weight, cellsize=(1.0, 1.0)):
    """All grid edges (ids, u, v, float32 w), written independently of terrain.grid.edges."""
    rows, cols = z.shape
    dx, dy = cellsize
    diag = math.sqrt(dx * dx + dy * dy)
    steps = [(0, 1, dx), (1, 0, dy), (1, 1, diag), (1, -1, diag)][: 2 if conn == 4 else 4]
    ids, us, vs, ws = [], [], [], []
    for d, (dr, dc, h) in enumerate(steps):
        r = np.arange(rows - dr)[:, None]
        c = np.arange(max(0, -dc), cols - max(0, dc))[None, :]
        r, c = np.broadcast_arrays(r, c)
        r, c = r.ravel(), c.ravel()
        a, b = z[r, c].astype(np.float64), z[r + dr, c + dc].astype(np.float64)
        ok = ~(np.isnan(a) | np.isnan(b))
        a, b, r, c = a[ok], b[ok], r[ok], c[ok]
        if weight == "max":
            w = np.maximum(a, b)
        elif weight == "absdiff":
            w = np.abs(a - b)
        elif weight == "slope":
            w = np.abs(a - b) / h
        else:
            w = np.sqrt(h * h + (a - b) ** 2)
        w = w.astype(np.float32) + np.float32(0)  # -0.0 -> +0.0
        u = r.astype(np.int64) * cols + c
        ids.append(4 * u + d)
        us.append(u)
        vs.append((r + dr).astype(np.int64) * cols + c + dc)
        ws.append(w)
    return (np.concatenate(ids), np.concatenate(us), np.concatenate(vs),
            np.concatenate(ws).astype(np.float32))


@numba.njit(cache=True)
def _union_find_keep(order, u, v, n):
    parent = np.arange(n)
    keep = np.zeros(order.shape[0], np.bool_)
    for e in order:
        a, b = u[e], v[e]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a != b:
            parent[a] = b
            keep[e] = True
    return keep


_FLT_MAX = float(np.finfo(np.float32).max)


KS = {4: [0, 2, 4, 6], 8: list(range(8)), 16: list(range(16))}


def knight_between(dr, dc):
    """The two cells a knight move ``(dr, dc)`` passes between, as offsets from its tail
    (GRASS r.cost -k): ``(dr/2, 0), (dr/2, dc)`` when ``|dr| = 2``, else ``(0, dc/2), (dr,
    dc/2)``."""
    if abs(dr) == 2:
        return (dr // 2, 0), (dr // 2, dc)
    return (0, dc // 2), (dr, dc // 2)


def oracle_arcs(valid, f, dr, dc):
    """Tails ``(ru, cu)``, heads ``(rv, cv)`` and float64 friction factors of the arcs of step
    ``(dr, dc)`` between vertices (``valid``), from the definition: a knight arc exists only
    when the two cells it passes between are vertices, and its factor is the mean of the
    frictions of the four cells ``((f_u + f_v) + (f_a + f_b)) / 4``; any other arc's is
    ``(f_u + f_v) / 2``."""
    R, C = valid.shape
    r, c = np.mgrid[0:R, 0:C]
    r2, c2 = r + dr, c + dc
    inside = (r2 >= 0) & (r2 < R) & (c2 >= 0) & (c2 < C)
    a = inside & valid
    a[inside] &= valid[r2[inside], c2[inside]]
    ru, cu, rv, cv = r[a], c[a], r2[a], c2[a]
    f64 = f.astype(np.float64)
    fu, fv = f64[ru, cu], f64[rv, cv]
    if abs(dr) + abs(dc) < 3:
        return ru, cu, rv, cv, (fu + fv) / 2
    (ra, ca), (rb, cb) = knight_between(dr, dc)
    keep = valid[ru + ra, cu + ca] & valid[ru + rb, cu + cb]
    ru, cu, rv, cv, fu, fv = ru[keep], cu[keep], rv[keep], cv[keep], fu[keep], fv[keep]
    return ru, cu, rv, cv, ((fu + fv) + (f64[ru + ra, cu + ca] + f64[ru + rb, cu + cb])) / 4


def oracle_factor(f, ra, ca, rb, cb, valid=None):
    """The friction factor of the one arc ``(ra, ca) -> (rb, cb)`` (as :func:`oracle_arcs`)
    as a 1-element array (as the ``z[r:r + 1, c]`` its callers pass to :func:`oracle_cost`);
    NaN for a knight arc passing between cells that are not ``valid`` (default: non-NaN
    ``f``)."""
    f64 = f.astype(np.float64)
    valid = ~np.isnan(f) if valid is None else valid
    total = f64[ra, ca] + f64[rb, cb]
    dr, dc = rb - ra, cb - ca
    if abs(dr) + abs(dc) < 3:
        return np.array([total / 2])
    (r1, c1), (r2, c2) = knight_between(dr, dc)
    if not (valid[ra + r1, ca + c1] and valid[ra + r2, ca + c2]):
        return np.array([math.nan])
    return np.array([(total + (f64[ra + r1, ca + c1] + f64[ra + r2, ca + c2])) / 4])


def grid_csr(z, f, connectivity, model, cellsize=(1.0, 1.0)):
    """The directed grid graph as a scipy CSR matrix, built independently with NumPy (the
    costs' bits: :func:`terrain.grid.costs.arc_costs_np` from the factors of
    :func:`oracle_arcs`)."""
    R, C = z.shape
    valid = ~np.isnan(z) & ~np.isnan(f)
    lengths = arc_lengths(cellsize)
    rows, cols, vals = [], [], []
    for k in arc_codes(connectivity):
        ru, cu, rv, cv, fac = oracle_arcs(valid, f, int(ARC_DR[k]), int(ARC_DC[k]))
        u = ru * C + cu
        v = rv * C + cv
        w = arc_costs_np(z[ru, cu], z[rv, cv], fac, k, model, lengths)
        rows.append(u)
        cols.append(v)
        # scipy drops explicit zeros from a sparse matrix: keep them as a tiny positive that
        # we map back (absdiff has zero arcs on flats)
        vals.append(np.where(w == 0, 1e-300, w))
    n = R * C
    return csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(n, n))


def mask_ids(mask):
    cell, d = np.nonzero(mask.ravel()[:, None] & (1 << np.arange(4))[None, :])
    return np.sort(4 * cell.astype(np.int64) + d)


def ref_kruskal(z, conn=8, weight="max", cellsize=(1.0, 1.0)):
    ids, u, v, w = ref_edges(z, conn, weight, cellsize)
    keep = _union_find_keep(np.lexsort((ids, w)), u, v, z.size)
    return np.sort(ids[keep]), w[keep]


def parse_oracle(tokens, nodata=None, star=False):
    """float32 of each token as GDAL reads it: the correctly rounded double (Python's
    ``float``), saturated at +-FLT_MAX, cast; nodata (and GRASS ``*``) as NaN: an integer
    equal to it, another number whose float32 GDAL's float32 nodata test takes."""
    def one(t):
        if star and t == "*":
            return np.float32(np.nan)
        v = np.float32(min(max(float(t), -_FLT_MAX), _FLT_MAX))
        if nodata is None:
            return v
        if not any(c in t for c in ".eE"):  # GDAL's Int32 grid: the integer itself
            return np.float32(np.nan) if int(t) == nodata else v
        nd = np.float32(nodata)  # GDAL's float32 test (ARE_REAL_EQUAL), in float32
        near = v == nd or abs(v - nd) < np.float32(2 ** -23) * abs(v + nd) * np.float32(2)
        return np.float32(np.nan) if near else v
    return np.array([[one(t) for t in row] for row in tokens], dtype=np.float32)


DC = [1, 1, 0, -1, -1, -1, 0, 1, 2, 2, 1, -1, -2, -2, -1, 1]


DR = [0, 1, 1, 1, 0, -1, -1, -1, -1, 1, 2, 2, 1, -1, -2, -2]


def csr_graph(z, model="absdiff", friction=None, conn=8, dx=1.0, dy=1.0):
    """Directed CSR graph of the grid (vertices: non-NaN cells), built with NumPy only."""
    rows, cols = z.shape
    f = np.ones_like(z) if friction is None else friction.astype(np.float32)
    valid = ~np.isnan(z) & ~np.isnan(f)
    src, dst, wts = [], [], []
    for k in KS[conn]:
        ru, cu, rv, cv, fmean = oracle_arcs(valid, f, DR[k], DC[k])
        w = oracle_cost(model, z[ru, cu], z[rv, cv], fmean, DR[k], DC[k], dx, dy)
        src.append(ru * cols + cu)
        dst.append(rv * cols + cv)
        wts.append(w)
    n = rows * cols
    g = sp.csr_array((np.concatenate(wts), (np.concatenate(src), np.concatenate(dst))),
                     shape=(n, n))
    return g


def oracle_cost(model, zu, zv, fmean, dr, dc, dx=1.0, dy=1.0):
    """The documented formulas, with NumPy on float64 (vectorised over arcs; ``fmean`` the
    arcs' friction factors, :func:`oracle_arcs`)."""
    zu, zv = zu.astype(np.float64), zv.astype(np.float64)
    length = math.hypot(dc * dx, dr * dy)
    if model == "absdiff":
        return np.abs(zv - zu)
    if model == "friction":
        return length * fmean
    slope = (zv - zu) / length
    speed = 6000.0 / 3600.0 * np.exp(-3.5 * np.abs(slope + 0.05))
    return length / speed * fmean


def oracle_distance(g, shape, sources, start_costs=None):
    """Multi-source distances: a super source with arcs of the start costs."""
    n = g.shape[0]
    start = np.zeros(len(sources)) if start_costs is None else np.asarray(start_costs, float)
    idx = [r * shape[1] + c for r, c in sources]
    g = g.tocoo()
    big = sp.csr_array((np.concatenate([g.data, start]),
                        (np.concatenate([g.row, np.full(len(idx), n)]),
                         np.concatenate([g.col, idx]))), shape=(n + 1, n + 1))
    d = dijkstra(big, indices=n)[:n]
    return np.where(np.isinf(d), np.nan, d).reshape(shape)


def tiled_oracle(z, f, sources, connectivity, model, start=None, cellsize=(1.0, 1.0)):
    g = grid_csr(z, f, connectivity, model, cellsize)
    ids = [r * z.shape[1] + c for r, c in sources]
    d = dijkstra(g, directed=True, indices=ids)
    if start is not None:
        d = d + np.asarray(start, float)[:, None]
    d = np.where(d < 1e-200, 0.0, d) if model == 0 else d
    best = d.min(axis=0)
    # integer costs: the tiny stand-ins for zero arcs vanish on rounding
    if model == 0:
        best = np.round(best, 6)
    alloc = np.where(np.isfinite(best), np.argmin(d, axis=0), -1)
    return best.reshape(z.shape), alloc.reshape(z.shape)


# ------------------------------------------------------------------------------------------
# hydrology: depression filling, D8/D4 directions with Barnes flats, accumulation

# neighbour k = E, SE, S, SW, W, NW, N, NE: ESRI code 1 << k
HDR = (0, 1, 1, 1, 0, -1, -1, -1)
HDC = (1, 1, 0, -1, -1, -1, 0, 1)


def _hks(conn):
    return range(0, 8, 1 if conn == 8 else 2)


def priority_flood(z, conn=8, outlets=None):
    """Depression filling by priority flood (Barnes, Lehman & Mulla 2014; RichDEM's
    ``FillDepressions(epsilon=False)``), written independently with heapq: the seeds are the
    outlets (default: cells on the grid's edge or beside nodata in ``conn``; else the
    non-zero cells of ``outlets``), each popped cell raises its unvisited neighbours to at
    least its own level; cells never reached keep their elevation."""
    import heapq
    z = np.asarray(z, np.float32)
    R, C = z.shape
    ks = range(0, 8, 1 if conn == 8 else 2)
    out = z.copy()
    seen = np.isnan(z)
    heap = []
    for r in range(R):
        for c in range(C):
            if seen[r, c]:
                continue
            if outlets is not None:
                seed = bool(outlets[r, c])
            else:
                seed = any(not (0 <= r + HDR[k] < R and 0 <= c + HDC[k] < C)
                           or np.isnan(z[r + HDR[k], c + HDC[k]]) for k in ks)
            if seed:
                heapq.heappush(heap, (float(z[r, c]), r, c))
                seen[r, c] = True
    while heap:
        level, r, c = heapq.heappop(heap)
        for k in ks:
            rr, cc = r + HDR[k], c + HDC[k]
            if 0 <= rr < R and 0 <= cc < C and not seen[rr, cc]:
                seen[rr, cc] = True
                out[rr, cc] = max(out[rr, cc], np.float32(level))
                heapq.heappush(heap, (float(out[rr, cc]), rr, cc))
    return out


def ref_directions(z, cellsize=(1.0, 1.0), conn=8, outlets=None):
    """D8/D4 codes as docs/hydrology.md defines them, written plainly: steepest distance-
    weighted drop (first in code order on ties); outlets; flats (connected cells without a
    lower neighbour) routed by Barnes et al. (2014)'s mask ``2 T + (H - A)`` with deques,
    a drain lowest, ties cardinal first then code order; 0 for a flat without a drain."""
    from collections import deque
    z = np.asarray(z, np.float32)
    R, C = z.shape
    dx, dy = cellsize
    dist = [dx, math.hypot(dx, dy), dy, math.hypot(dx, dy)] * 2
    code = np.full((R, C), 255, np.int64)
    FL = -1
    ks = list(_hks(conn))

    def nbrs(r, c):
        for k in ks:
            rr, cc = r + HDR[k], c + HDC[k]
            if 0 <= rr < R and 0 <= cc < C and not np.isnan(z[rr, cc]):
                yield k, rr, cc

    for r in range(R):
        for c in range(C):
            if np.isnan(z[r, c]):
                continue
            if outlets is not None and outlets[r, c]:
                code[r, c] = 0
                continue
            best, bk = 0.0, -1
            for k, rr, cc in nbrs(r, c):
                drop = (float(z[r, c]) - float(z[rr, cc])) / dist[k]
                if drop > best:
                    best, bk = drop, k
            boundary = len(list(nbrs(r, c))) < len(ks)
            if bk >= 0:
                code[r, c] = 1 << bk
            elif outlets is None and boundary:
                code[r, c] = 0
            else:
                code[r, c] = FL
    INFD = 10**12
    A = np.full((R, C), INFD, np.int64)
    T = np.full((R, C), INFD, np.int64)
    for which, D in ((0, A), (1, T)):
        q = deque()
        for r in range(R):
            for c in range(C):
                if code[r, c] != FL:
                    continue
                for k, rr, cc in nbrs(r, c):
                    if (which == 0 and z[rr, cc] > z[r, c]) or (
                            which == 1 and code[rr, cc] != FL and z[rr, cc] == z[r, c]):
                        D[r, c] = 1
                        q.append((r, c))
                        break
        while q:
            r, c = q.popleft()
            for k, rr, cc in nbrs(r, c):
                if code[rr, cc] == FL and D[rr, cc] > D[r, c] + 1:
                    D[rr, cc] = D[r, c] + 1
                    q.append((rr, cc))
    label = np.zeros((R, C), np.int64)
    height = [0]
    for r in range(R):
        for c in range(C):
            if code[r, c] != FL or label[r, c]:
                continue
            height.append(0)
            n = len(height) - 1
            label[r, c] = n
            q = deque([(r, c)])
            while q:
                a, b = q.popleft()
                if A[a, b] < INFD:
                    height[n] = max(height[n], A[a, b])
                for k, rr, cc in nbrs(a, b):
                    if code[rr, cc] == FL and not label[rr, cc]:
                        label[rr, cc] = n
                        q.append((rr, cc))

    def mask(r, c, h):
        return 2 * T[r, c] + (h - A[r, c] if A[r, c] < INFD else 0)

    out = code.copy()
    for r in range(R):
        for c in range(C):
            if code[r, c] != FL:
                continue
            if T[r, c] >= INFD:
                out[r, c] = 0
                continue
            h = height[label[r, c]]
            best, bk = mask(r, c, h), None
            cands = []
            for k, rr, cc in nbrs(r, c):
                if code[rr, cc] == FL:
                    cands.append((mask(rr, cc, h), k % 2, k))
                elif z[rr, cc] == z[r, c]:
                    cands.append((-1, k % 2, k))
            m, _, k = min(cands)
            assert m < best
            out[r, c] = 1 << k
    return out.astype(np.uint8)


def ref_accumulation(direction, weights=None):
    """``1 (or the weight) + the accumulation of the cells draining in``, by recursion in
    topological order over a networkx DiGraph; NaN at nodata (255)."""
    import networkx as nx
    d = np.asarray(direction)
    R, C = d.shape
    g = nx.DiGraph()
    valid = d != 255
    g.add_nodes_from(np.flatnonzero(valid).tolist())
    for k in range(8):
        m = d == (1 << k)
        r, c = np.nonzero(m)
        g.add_edges_from(zip((r * C + c).tolist(), ((r + HDR[k]) * C + c + HDC[k]).tolist()))
    acc = np.full(R * C, np.nan)
    w = np.ones(R * C) if weights is None else np.nan_to_num(
        np.asarray(weights, np.float64).ravel())
    for v in nx.topological_sort(g):
        s = w[v]
        preds = sorted(g.predecessors(v), key=lambda u: _k_from(u, v, C))
        for u in preds:
            s += acc[u]
        acc[v] = s
    return acc.reshape(R, C)


def _k_from(u, v, C):
    """The neighbour index k of ``u`` seen from ``v`` (the order the inflows are summed)."""
    dr, dc = u // C - v // C, u % C - v % C
    return [k for k in range(8) if (HDR[k], HDC[k]) == (dr, dc)][0]


def region_labels(mask, conn=8):
    """Connected regions of ``mask`` numbered 1, 2, ... in the row-major order of their
    first cell (0 elsewhere): a breadth-first flood from each unlabelled cell in scan
    order, plain Python (small grids only)."""
    from collections import deque
    mask = np.asarray(mask, bool)
    H, W = mask.shape
    nbrs = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1)
            if (dr or dc) and (conn == 8 or dr == 0 or dc == 0)]
    out = np.zeros((H, W), np.int32)
    nxt = 0
    for i in range(H):
        for j in range(W):
            if not mask[i, j] or out[i, j]:
                continue
            nxt += 1
            out[i, j] = nxt
            q = deque([(i, j)])
            while q:
                r, c = q.popleft()
                for dr, dc in nbrs:
                    rr, cc = r + dr, c + dc
                    if 0 <= rr < H and 0 <= cc < W and mask[rr, cc] and not out[rr, cc]:
                        out[rr, cc] = nxt
                        q.append((rr, cc))
    return out


def richdem_fill(z, conn=8, epsilon=False):
    """RichDEM's ``FillDepressions`` of ``z`` (NaN = nodata, given to RichDEM as -9999, a
    value below every elevation as RichDEM requires), NaN again on nodata; skips the test
    where RichDEM (``pip install richdem2``) is missing."""
    import contextlib
    import io
    import pytest
    rd = pytest.importorskip("richdem")
    a = rd.rdarray(np.where(np.isnan(z), -9999, z).astype(np.float32), no_data=-9999)
    with contextlib.redirect_stdout(io.StringIO()):  # "no geotransform" warnings
        f = rd.FillDepressions(a, epsilon=epsilon, topology="D8" if conn == 8 else "D4")
    return np.where(np.isnan(z), np.nan, np.asarray(f)).astype(np.float32)


def edge_nodata(z, rng, frac, conn):
    """``z`` with nodata blobs that touch the grid's edge (through ``conn``-neighbours):
    where RichDEM's nodata convention (a very low value reached from the edge) and
    terrain's (cells beside nodata drain) agree."""
    from scipy import ndimage
    blobs = ndimage.binary_dilation(rng.random(z.shape) < frac)
    lab, _ = ndimage.label(blobs, np.ones((3, 3)) if conn == 8 else None)
    edge = np.unique(np.concatenate([lab[0], lab[-1], lab[:, 0], lab[:, -1]]))
    z = np.array(z, np.float32)
    z[np.isin(lab, edge[edge > 0])] = np.nan
    return z


def sample_dems():
    """The real DEMs matplotlib ships (``jacksboro_fault_dem.npz``, ``topobathy.npz``; the
    latter also with the sea as nodata): name -> float32 array."""
    import matplotlib.cbook as cbook
    jack = np.load(cbook.get_sample_data("jacksboro_fault_dem.npz", asfileobj=False))
    topo = np.load(cbook.get_sample_data("topobathy.npz", asfileobj=False))["topo"]
    topo = np.asarray(topo, np.float32)
    return {"jacksboro": jack["elevation"].astype(np.float32), "topobathy": topo,
            "topobathy-sea-nodata": np.where(topo < 0, np.nan, topo).astype(np.float32)}


def _hierarchy_canon(leaves, kids, level, parent, spill):
    """A depression hierarchy in a form that ties cannot change: the pits (cell, pit
    elevation, spill elevation), and for every merge the set of pits it joins, at its level,
    merges at one level taken together and a merge that spills outside at its own level
    left out (at equal levels the order of merges is arbitrary)."""
    def pits(k):
        if k in kids:
            return pits(kids[k][0]) | pits(kids[k][1])
        return {leaves[k][0]} if k in leaves else set()
    tops = set()
    for k in kids:
        if not pits(kids[k][0]) or not pits(kids[k][1]):
            continue
        t = k
        while parent.get(t) in kids and level[parent[t]] == level[k]:
            t = parent[t]
        if spill.get(t) == level[k] and parent.get(t) not in kids:
            continue
        tops.add((level[k], frozenset(pits(t))))
    return sorted(leaves.values()), tops


def richdem_hierarchy(z):
    """RichDEM's ``get_depression_hierarchy`` (D8) of ``z`` with the ocean a ring around it
    (lower than every cell), in :func:`_hierarchy_canon`'s form (pits of zero depth,
    which RichDEM makes on flats depending on its queue order, left out)."""
    import contextlib
    import io
    import pytest
    rd = pytest.importorskip("richdem")
    R, C = z.shape
    zp = np.full((R + 2, C + 2), -1e9, np.float64)
    zp[1:-1, 1:-1] = z
    labels = rd.get_new_depression_hierarchy_labels(zp.shape)
    with contextlib.redirect_stdout(io.StringIO()):
        deps, _ = rd.get_depression_hierarchy(rd.rdarray(zp, no_data=-9999), labels)
    none = rd.depression_hierarchy.NO_VALUE
    leaves, kids, level, parent, spill = {}, {}, {}, {}, {}
    for k, d in enumerate(deps):
        if k == 0:
            continue
        if d.lchild == none:
            if d.pit_elev != d.out_elev:
                cell = (d.pit_cell // (C + 2) - 1, d.pit_cell % (C + 2) - 1)
                leaves[k] = (cell, float(d.pit_elev), float(d.out_elev))
        else:
            kids[k] = (d.lchild, d.rchild)
            level[k], spill[k] = float(deps[d.lchild].out_elev), float(d.out_elev)
            parent[d.lchild] = parent[d.rchild] = k
    return _hierarchy_canon(leaves, kids, level, parent, spill)


def hierarchy_canon(h):
    """terrain's hierarchy table (:func:`terrain.hydrology.depression_hierarchy`) in
    :func:`_hierarchy_canon`'s form."""
    leaves, kids, level, parent, spill = {}, {}, {}, {}, {}
    for k in range(h["id"].shape[0]):
        i = k + 1
        if h["left"][k] == 0:
            leaves[i] = ((int(h["pit_row"][k]), int(h["pit_col"][k])),
                         float(h["pit_elevation"][k]), float(h["spill_elevation"][k]))
        else:
            kids[i] = (int(h["left"][k]), int(h["right"][k]))
            level[i] = float(h["spill_elevation"][h["left"][k] - 1])
            spill[i] = float(h["spill_elevation"][k])
            parent[kids[i][0]] = parent[kids[i][1]] = i
    return _hierarchy_canon(leaves, kids, level, parent, spill)


@numba.njit(cache=True)
def _seeded_kruskal(order, u, v, n, first, seeded):
    parent = np.arange(n)
    for c in range(n):
        if seeded[c]:
            parent[c] = first
    keep = np.zeros(order.shape[0], np.bool_)
    for e in order:
        a, b = u[e], v[e]
        while parent[a] != a:
            a = parent[a]
        while parent[b] != b:
            b = parent[b]
        if a != b:
            if b == first:  # the outlets' set keeps its root
                a, b = b, a
            parent[b] = a
            keep[e] = True
    labels = np.empty(n, np.int64)
    for c in range(n):
        r = c
        while parent[r] != r:
            r = parent[r]
        labels[c] = r
    return keep, labels


def seeded_forest(z, conn, outlet):
    """The minimum spanning forest (weight max, ``(weight, id)`` order) of the grid with
    the outlets contracted into one vertex, by Kruskal: what the GPU's seeded Borůvka makes
    (``device_mst(seeds=...)``). Returns ``(mask, labels)``: the direction-bit mask and each
    cell's supervertex (the outlets' trees labelled by their last cell, as the device may
    label them by a cell that is not an outlet)."""
    z = np.asarray(z, np.float32)
    ids, u, v, w = ref_edges(z, conn, "max")
    order = np.lexsort((ids, w))
    seeded = (np.asarray(outlet).ravel() != 0)
    first = int(np.argmax(seeded)) if seeded.any() else -1
    keep, labels = _seeded_kruskal(order, u, v, z.size, first, seeded)
    mask = np.zeros(z.size, np.uint8)
    np.bitwise_or.at(mask, ids[keep] >> 2, (1 << (ids[keep] & 3)).astype(np.uint8))
    if first >= 0:  # as on the device, the seeded set may end labelled by any of its cells
        labels = np.where(labels == first, np.flatnonzero(labels == first).max(), labels)
    labels = np.where(np.isnan(z.ravel()), -1, labels)
    return mask.reshape(z.shape), labels


def check_cog(path, block=512):
    """Assert that ``path`` is laid out as a Cloud-Optimized GeoTIFF, read by tifffile (not
    GDAL, which wrote it): GDAL's ghost header says ``LAYOUT=IFDS_BEFORE_DATA``; the full
    resolution IFD comes first, then its overviews, each half the size of the one before,
    all tiled ``block`` × ``block``; every IFD lies before every tile; the tiles of a
    smaller overview lie before those of a larger one and the full resolution comes last.
    Returns the TIFF compression codes of the pages."""
    import tifffile

    with open(path, "rb") as f:
        head = f.read(512)
    assert b"LAYOUT=IFDS_BEFORE_DATA" in head and b"BLOCK_ORDER=ROW_MAJOR" in head, path
    with tifffile.TiffFile(path) as tif:
        pages = list(tif.pages)
        assert not pages[0].is_reduced and all(p.is_reduced for p in pages[1:]), path
        for big, small in zip(pages, pages[1:]):
            assert small.shape == tuple(-(-s // 2) for s in big.shape), path
        assert all((p.tilelength, p.tilewidth) == (block, block) for p in pages), path
        spans = [(min(o for o in p.dataoffsets if o), max(p.dataoffsets)) for p in pages]
        assert max(p.offset for p in pages) < min(lo for lo, _ in spans), path
        for (lo_big, _), (_, hi_small) in zip(spans, spans[1:]):
            assert hi_small < lo_big, path
        return [int(p.compression) for p in pages]
