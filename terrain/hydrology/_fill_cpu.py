"""The CPU kernels (Numba) of depression filling: outlets, the forest of a block as a
graph, the drain pass (min over sources of the path maximum, on a forest), the reduction
of a block's forest to its ports, and the labels of the flooded regions.

Conventions (:mod:`terrain.hydrology.fill` explains the algorithm):

* A *halo block* is a window of the grid with one cell more on every side (cells outside
  the grid: NaN elevation, mask 0); the kernels work on its inner cells, numbered
  ``i * W + j`` (the *local* ids), and look at the halo only to find outlets (a NaN
  neighbour) and the forest edges that leave the block.
* The forest is the grid MST's direction-bit mask (:mod:`terrain.grid.mst`): bit 1 E,
  2 S, 4 SE, 8 SW of the owning cell. An edge weighs ``max(z_u, z_v)`` (float32, exact).
* A *source* value ``src[v]`` is the level at which ``v`` drains for sure (an outlet's
  elevation, a port's final level), ``inf`` for none.
"""

import numba
import numpy as np

__all__ = ["outlets_cpu", "block_forest_cpu", "forest_dp_cpu", "forest_reduce_cpu",
           "csr_from_edges_cpu", "flooded_labels_cpu", "NB_DR", "NB_DC"]

# neighbour k = E, SE, S, SW, W, NW, N, NE (cyclic order; the cardinal ones are even k)
NB_DR = np.array([0, 1, 1, 1, 0, -1, -1, -1], np.int64)
NB_DC = np.array([1, 1, 0, -1, -1, -1, 0, 1], np.int64)
INF = np.float32(np.inf)


@numba.njit(cache=True, nogil=True, inline="always")
def _forest_dirs(mh, i, j):
    """Bit k set when the forest holds the edge from halo cell ``(i, j)`` to its neighbour
    ``k`` (E, SE, S, SW, W, NW, N, NE); ``(i, j)`` must have all 8 neighbours in ``mh``."""
    m = mh[i, j]
    b = 0
    if m & 1:
        b |= 1
    if m & 4:
        b |= 2
    if m & 2:
        b |= 4
    if m & 8:
        b |= 8
    if mh[i, j - 1] & 1:
        b |= 16
    if mh[i - 1, j - 1] & 4:
        b |= 32
    if mh[i - 1, j] & 2:
        b |= 64
    if mh[i - 1, j + 1] & 8:
        b |= 128
    return b


@numba.njit(cache=True, nogil=True)
def outlets_cpu(zh, step, out):
    """``out[i, j] = 1`` for the inner cells of the halo block ``zh`` that are not NaN and
    have a NaN neighbour (``step`` 1: the 8 neighbours, 2: the 4 cardinal ones): cells on
    the grid's edge (the halo outside the grid is NaN) or beside nodata."""
    H, W = out.shape
    for i in range(H):
        for j in range(W):
            out[i, j] = 0
            if np.isnan(zh[i + 1, j + 1]):
                continue
            for k in range(0, 8, step):
                if np.isnan(zh[i + 1 + NB_DR[k], j + 1 + NB_DC[k]]):
                    out[i, j] = 1
                    break


@numba.njit(cache=True, nogil=True)
def block_forest_cpu(zh, mh):
    """The forest inside a halo block as a graph, and the forest edges leaving it.

    Returns ``indptr`` (int64, ``n + 1``), ``adj`` (int32 local ids), ``w`` (float32
    weights) of the edges between inner cells, and the crossing edges: ``cp`` (int32 local
    id inside), ``cq`` (int64 halo index ``hi * (W + 2) + hj`` outside), ``cw``."""
    H, W = zh.shape[0] - 2, zh.shape[1] - 2
    n = H * W
    deg = np.zeros(n + 1, np.int64)
    ncross = 0
    for i in range(H):
        for j in range(W):
            b = _forest_dirs(mh, i + 1, j + 1)
            if b == 0:
                continue
            for k in range(8):
                if b & (1 << k):
                    ii, jj = i + NB_DR[k], j + NB_DC[k]
                    if 0 <= ii < H and 0 <= jj < W:
                        deg[i * W + j + 1] += 1
                    else:
                        ncross += 1
    indptr = np.cumsum(deg)
    fill = indptr[:-1].copy()
    adj = np.empty(indptr[n], np.int32)
    w = np.empty(indptr[n], np.float32)
    cp = np.empty(ncross, np.int32)
    cq = np.empty(ncross, np.int64)
    cw = np.empty(ncross, np.float32)
    q = 0
    for i in range(H):
        for j in range(W):
            b = _forest_dirs(mh, i + 1, j + 1)
            if b == 0:
                continue
            zv = zh[i + 1, j + 1]
            for k in range(8):
                if b & (1 << k):
                    ii, jj = i + NB_DR[k], j + NB_DC[k]
                    zu = zh[ii + 1, jj + 1]
                    wt = zv if zv >= zu else zu
                    if 0 <= ii < H and 0 <= jj < W:
                        v = i * W + j
                        adj[fill[v]] = ii * W + jj
                        w[fill[v]] = wt
                        fill[v] += 1
                    else:
                        cp[q] = i * W + j
                        cq[q] = (ii + 1) * (W + 2) + jj + 1
                        cw[q] = wt
                        q += 1
    return indptr, adj, w, cp, cq, cw


@numba.njit(cache=True, nogil=True)
def csr_from_edges_cpu(n, eu, ev, ew):
    """The undirected graph of edges ``(eu, ev, ew)`` on vertices ``0..n-1`` as CSR
    (``indptr`` int64, ``adj`` int32, ``w`` float32)."""
    m = eu.shape[0]
    deg = np.zeros(n + 1, np.int64)
    for e in range(m):
        deg[eu[e] + 1] += 1
        deg[ev[e] + 1] += 1
    indptr = np.cumsum(deg)
    fill = indptr[:-1].copy()
    adj = np.empty(2 * m, np.int32)
    w = np.empty(2 * m, np.float32)
    for e in range(m):
        a, b = eu[e], ev[e]
        adj[fill[a]] = b
        w[fill[a]] = ew[e]
        fill[a] += 1
        adj[fill[b]] = a
        w[fill[b]] = ew[e]
        fill[b] += 1
    return indptr, adj, w


@numba.njit(cache=True, nogil=True)
def forest_dp_cpu(indptr, adj, w, src):
    """``f[v] = min over sources s in v's tree of max(path maximum v..s, src[s])`` on a
    forest (CSR), ``inf`` in a tree without a source.

    Two passes over each tree in BFS order from its first vertex: up, every vertex's best
    source below it (``g``); down, the best over the whole tree. O(V)."""
    n = src.shape[0]
    f = np.empty(n, np.float32)
    g = src.copy()
    seen = np.zeros(n, np.bool_)
    order = np.empty(n, np.int32)
    parent = np.empty(n, np.int32)
    pw = np.empty(n, np.float32)
    for s in range(n):
        if seen[s]:
            continue
        seen[s] = True
        if indptr[s + 1] == indptr[s]:  # alone
            f[s] = g[s]
            continue
        head = 0
        tail = 1
        order[0] = s
        parent[s] = -1
        while head < tail:
            v = order[head]
            head += 1
            for e in range(indptr[v], indptr[v + 1]):
                u = adj[e]
                if not seen[u]:
                    seen[u] = True
                    parent[u] = v
                    pw[u] = w[e]
                    order[tail] = u
                    tail += 1
        for t in range(tail - 1, 0, -1):  # up
            v = order[t]
            x = g[v] if g[v] >= pw[v] else pw[v]
            p = parent[v]
            if x < g[p]:
                g[p] = x
        f[s] = g[s]
        for t in range(1, tail):  # down
            v = order[t]
            x = f[parent[v]]
            if pw[v] > x:
                x = pw[v]
            f[v] = x if x < g[v] else g[v]
    return f


@numba.njit(cache=True, nogil=True)
def forest_reduce_cpu(indptr, adj, w, d, port, present):
    """Reduce a forest with sources to its ports: what the levels above need.

    ``d[v]``: the best level at which ``v`` drains inside the block (a source value);
    ``port[v]``: ``v`` has a forest edge leaving the block; ``present[v]``: ``v`` is a
    vertex (not nodata).

    1. Dead ends (non-port vertices of degree 1) are peeled, repeatedly; each hands its
       drain level to its neighbour: ``d[y] = min(d[y], max(w, d[x]))``. Trees without a
       port vanish whole (they are final inside the block).
    2. What remains has ports as leaves; the vertices kept are the ports and the branch
       vertices (degree >= 3). Each maximal path through degree-2 non-ports becomes one
       edge between its ends weighing the path's maximum, and every inner vertex's drain
       level reaches both ends over its part of the path.

    Minimax paths between kept vertices and to the sources are preserved exactly.
    Returns ``kept`` (int32 local ids, ascending), their new ``dk`` and the edges ``ka``,
    ``kb`` (indices into ``kept``), ``kw``.
    """
    n = d.shape[0]
    dd = d.copy()
    deg = np.zeros(n, np.int64)
    for v in range(n):
        deg[v] = indptr[v + 1] - indptr[v]
    removed = np.zeros(n, np.bool_)
    stack = np.empty(2 * n, np.int32)  # a vertex is pushed at degree 1 and again at 0
    top = 0
    for v in range(n):
        if not present[v]:
            removed[v] = True
        elif not port[v] and deg[v] <= 1:
            stack[top] = v
            top += 1
    while top > 0:
        top -= 1
        x = stack[top]
        removed[x] = True
        for e in range(indptr[x], indptr[x + 1]):
            y = adj[e]
            if removed[y]:
                continue
            val = dd[x] if dd[x] >= w[e] else w[e]
            if val < dd[y]:
                dd[y] = val
            deg[y] -= 1
            if not port[y] and deg[y] == 1:
                stack[top] = y
                top += 1
            elif not port[y] and deg[y] == 0:  # the last vertex of a closed tree
                stack[top] = y
                top += 1
    index = np.full(n, -1, np.int32)
    nk = 0
    for v in range(n):
        if not removed[v] and (port[v] or deg[v] >= 3):
            index[v] = nk
            nk += 1
    kept = np.empty(nk, np.int32)
    dk = np.empty(nk, np.float32)
    for v in range(n):
        if index[v] >= 0:
            kept[index[v]] = v
    ka = np.empty(nk, np.int32)  # a forest on the kept vertices: fewer edges than them
    kb = np.empty(nk, np.int32)
    kw = np.empty(nk, np.float32)
    m = 0
    for t in range(nk):
        a = kept[t]
        best = dd[a]
        for e in range(indptr[a], indptr[a + 1]):
            prev = a
            cur = adj[e]
            if removed[cur]:
                continue
            mx = w[e]
            while index[cur] < 0:  # an inner vertex of a path: degree 2, not a port
                val = dd[cur] if dd[cur] >= mx else mx
                if val < best:
                    best = val
                nxt = -1
                nw = mx
                for f in range(indptr[cur], indptr[cur + 1]):
                    y = adj[f]
                    if y != prev and not removed[y]:
                        nxt = y
                        nw = w[f]
                        break
                if nw > mx:
                    mx = nw
                prev = cur
                cur = nxt
            if a < cur:
                ka[m] = t
                kb[m] = index[cur]
                kw[m] = mx
                m += 1
        dk[t] = best
    return kept, dk, ka[:m], kb[:m], kw[:m]


@numba.njit(cache=True, nogil=True)
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@numba.njit(cache=True, nogil=True)
def flooded_labels_cpu(flooded, step):
    """Connected components of the ``flooded`` cells (``step`` 1: 8-connected, 2: 4-),
    numbered 1, 2, ... in the row-major order of their first cell; 0 elsewhere (int32).
    Union-find with the smaller index as root, so a root is its component's first cell."""
    H, W = flooded.shape
    n = H * W
    parent = np.arange(n).astype(np.int64)
    for i in range(H):
        for j in range(W):
            if not flooded[i, j]:
                continue
            v = i * W + j
            for k in range(4, 8, step):  # W, NW, N, NE: the neighbours already seen
                ii, jj = i + NB_DR[k], j + NB_DC[k]
                if 0 <= ii < H and 0 <= jj < W and flooded[ii, jj]:
                    a = _find(parent, v)
                    b = _find(parent, ii * W + jj)
                    if a < b:
                        parent[b] = a
                    elif b < a:
                        parent[a] = b
    out = np.zeros((H, W), np.int32)
    ids = np.zeros(n, np.int32)
    nxt = 0
    for i in range(H):
        for j in range(W):
            if not flooded[i, j]:
                continue
            v = i * W + j
            r = _find(parent, v)
            if r == v:
                nxt += 1
                ids[v] = nxt
            out[i, j] = ids[r]
    return out


@numba.njit(cache=True, nogil=True)
def first_cells_cpu(labels, nlab):
    """Local id (row-major in the block) of the first cell of each label 1..nlab."""
    H, W = labels.shape
    first = np.full(nlab + 1, -1, np.int64)
    for i in range(H):
        for j in range(W):
            lab = labels[i, j]
            if lab > 0 and first[lab] < 0:
                first[lab] = i * W + j
    return first


@numba.njit(cache=True, nogil=True)
def union_across_cpu(cells, keys, child, ncols, step):
    """Join the components of flooded border cells of a node's children that touch across
    the separators: ``cells`` (sorted global ids), ``keys`` (their component's key, the
    global id of its first cell), ``child`` (which child reported the cell). Returns the
    resolved key of every cell (the smallest key of its joined component)."""
    m = cells.shape[0]
    uk = np.unique(keys)
    parent = np.arange(uk.shape[0])
    kidx = np.searchsorted(uk, keys)
    for a in range(m):
        r = cells[a] // ncols
        c = cells[a] - r * ncols
        for k in range(0, 8, step):
            rr, cc = r + NB_DR[k], c + NB_DC[k]
            if rr < 0 or cc < 0 or cc >= ncols:
                continue
            nb = rr * ncols + cc
            b = np.searchsorted(cells, nb)
            if b < m and cells[b] == nb and child[b] != child[a]:
                x = _find(parent, kidx[a])
                y = _find(parent, kidx[b])
                if x < y:
                    parent[y] = x
                elif y < x:
                    parent[x] = y
    out = np.empty(m, np.int64)
    for a in range(m):
        out[a] = uk[_find(parent, kidx[a])]
    return out
