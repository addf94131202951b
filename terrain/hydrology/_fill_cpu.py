"""The CPU kernels (Numba) of the tiled depression filling: a block's forest as a graph,
the drain pass over a graph, the reduction of a block's forest to its ports, the joins of
flooded regions across block borders.

A *halo block* is a window with one more cell on every side (NaN elevation, mask 0 outside
the grid); its inner cells have local ids ``i * W + j``. The forest is the grid MST's mask
(bit 1 E, 2 S, 4 SE, 8 SW); an edge weighs ``max(z_u, z_v)``. ``src[v]``: the level at
which ``v`` surely drains (``inf``: none). docs/hydrology.md has the algorithm.
"""

import numba
import numpy as np

from ..native.flag import stopped

from ._neighbours import NB_DC, NB_DR

__all__ = ["leaf_reduce_cpu", "forest_dp_cpu", "forest_reduce_cpu", "csr_from_edges_cpu",
           "first_cells_cpu", "union_across_cpu"]


@numba.njit(cache=True, nogil=True, inline="always")
def _forest_dirs(mh, i, j):
    """Bit k set when the forest holds the edge from halo cell ``(i, j)`` to neighbour k."""
    m = mh[i, j]  # own bits 1 E, 2 S, 4 SE, 8 SW; the W, NW, N, NE edges are the neighbours'
    return ((m & 1) | ((m & 4) >> 1) | ((m & 2) << 1) | (m & 8) | ((mh[i, j - 1] & 1) << 4)
            | ((mh[i - 1, j - 1] & 4) << 3) | ((mh[i - 1, j] & 2) << 5)
            | ((mh[i - 1, j + 1] & 8) << 4))


@numba.njit(cache=True, nogil=True)
def csr_from_edges_cpu(n, eu, ev, ew):
    """The undirected graph of edges ``(eu, ev, ew)`` on vertices ``0..n-1`` as CSR."""
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
def forest_dp_cpu(indptr, adj, w, src, stop):
    """``f[v] = min over sources s in v's tree of max(path maximum v..s, src[s])`` on a
    CSR forest (``inf``: no source): an up and a down pass over each tree in BFS order.
    Once ``stop[0]`` is set (polled every 65536 vertices:
    :func:`terrain.native.interruptible`) it returns an empty array."""
    n = src.shape[0]
    visited = 0
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
            visited += 1
            if (visited & 0xFFFF) == 0 and stopped(stop):
                return np.empty(0, np.float32)
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
def _peel_start(d, deg, port, present):
    """The reductions' peeling state: levels ``dd`` (a copy of ``d``), ``removed`` (nodata
    from the start) and the stack of the first dead ends, with its top."""
    n = d.shape[0]
    dd = d.copy()
    removed = np.zeros(n, np.bool_)
    stack = np.empty(2 * n, np.int32)  # a vertex is pushed at degree 1 and again at 0
    top = 0
    for v in range(n):
        if not present[v]:
            removed[v] = True
        elif not port[v] and deg[v] <= 1:
            stack[top] = v
            top += 1
    return dd, removed, stack, top


@numba.njit(cache=True, nogil=True)
def _kept(removed, port, deg):
    """After peeling: ``index`` (the kept number of a vertex, -1 if not kept) and ``kept``
    (ascending): the ports and the branch points that remain; then the arrays of their
    levels and of the edges between them, to be filled."""
    n = removed.shape[0]
    index = np.full(n, -1, np.int32)
    nk = 0
    for v in range(n):
        if not removed[v] and (port[v] or deg[v] >= 3):
            index[v] = nk
            nk += 1
    kept = np.empty(nk, np.int32)
    for v in range(n):
        if index[v] >= 0:
            kept[index[v]] = v
    # a forest on the kept vertices: fewer edges than them
    return (index, kept, np.empty(nk, np.float32), np.empty(nk, np.int32),
            np.empty(nk, np.int32), np.empty(nk, np.float32))


@numba.njit(cache=True, nogil=True)
def forest_reduce_cpu(indptr, adj, w, d, port, present):
    """Reduce a forest with drain levels ``d`` to its ports (``port``: has an edge leaving
    the block; ``present``: not nodata), keeping minimax paths exact: dead ends peeled,
    degree-2 paths contracted (docs/hydrology.md). Returns ``kept`` (ascending), their
    levels ``dk`` and the edges ``ka``, ``kb`` (indices into ``kept``), ``kw``."""
    n = d.shape[0]
    deg = np.empty(n, np.uint8)  # at most a vertex's degree in the grid's forest, 8
    for v in range(n):
        deg[v] = indptr[v + 1] - indptr[v]
    dd, removed, stack, top = _peel_start(d, deg, port, present)
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
            if not port[y] and deg[y] <= 1:  # at 0: the last vertex of a closed tree
                stack[top] = y
                top += 1
    index, kept, dk, ka, kb, kw = _kept(removed, port, deg)
    m = 0
    for t in range(kept.shape[0]):
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
def _no_reduction():
    """:func:`leaf_reduce_cpu`'s result when it was stopped: no edges, no vertex kept."""
    i32, f32 = np.empty(0, np.int32), np.empty(0, np.float32)
    return i32, np.empty(0, np.int64), f32, i32, f32, i32[:0], i32[:0], f32[:0]


@numba.njit(cache=True, nogil=True)
def leaf_reduce_cpu(zh, mh, d, present, stop):
    """:func:`forest_reduce_cpu` of a halo block's forest read from its mask bits in place:
    no CSR is built (at 2048² 0.11 s where building the CSR and reducing it took 0.39 s, and
    14 bytes a cell instead of 66). The same results in the same order (arcs in neighbour
    order, as the CSR held them). Returns the edges leaving the block ``cp`` (local id
    inside), ``cq`` (halo index ``hi * (W + 2) + hj`` outside), ``cw``, then
    :func:`forest_reduce_cpu`'s ``kept``, ``dk``, ``ka``, ``kb``, ``kw``. Once ``stop[0]``
    is set (polled each row, and every 65536 vertices peeled or walked:
    :func:`terrain.native.interruptible`) it returns no edges and no vertex kept."""
    H, W = zh.shape[0] - 2, zh.shape[1] - 2
    n = H * W
    step = np.empty(8, np.int64)  # neighbour k of inner cell v is v + step[k]
    for k in range(8):
        step[k] = NB_DR[k] * W + NB_DC[k]
    bits = np.empty(n, np.uint8)  # the forest's arcs to neighbours inside the block
    deg = np.empty(n, np.uint8)
    port = np.zeros(n, np.bool_)
    ncross = 0
    for i in range(H):
        if stopped(stop):
            return _no_reduction()
        border_row = i == 0 or i == H - 1
        for j in range(W):
            b = _forest_dirs(mh, i + 1, j + 1)
            v = i * W + j
            if b != 0 and (border_row or j == 0 or j == W - 1):
                inside = 0
                for k in range(8):
                    if b & (1 << k):
                        if 0 <= i + NB_DR[k] < H and 0 <= j + NB_DC[k] < W:
                            inside |= 1 << k
                        else:
                            ncross += 1
                port[v] = inside != b
                b = inside
            bits[v] = b
            c = 0
            while b:
                b &= b - 1
                c += 1
            deg[v] = c
    cp = np.empty(ncross, np.int32)
    cq = np.empty(ncross, np.int64)
    cw = np.empty(ncross, np.float32)
    q = 0
    for i in range(H):  # the border cells in row-major order
        for j in range(0, W, 1 if (i == 0 or i == H - 1) else max(W - 1, 1)):
            if not port[i * W + j]:
                continue
            b = _forest_dirs(mh, i + 1, j + 1)
            zv = zh[i + 1, j + 1]
            for k in range(8):
                ii, jj = i + NB_DR[k], j + NB_DC[k]
                if b & (1 << k) and not (0 <= ii < H and 0 <= jj < W):
                    zu = zh[ii + 1, jj + 1]
                    cp[q] = i * W + j
                    cq[q] = (ii + 1) * (W + 2) + jj + 1
                    cw[q] = zv if zv >= zu else zu
                    q += 1
    dd, removed, stack, top = _peel_start(d, deg, port, present)
    steps = 0
    while top > 0:
        steps += 1
        if (steps & 0xFFFF) == 0 and stopped(stop):
            return _no_reduction()
        top -= 1
        x = stack[top]
        removed[x] = True
        zx = zh[x // W + 1, x % W + 1]
        for k in range(8):
            y = x + step[k]
            if not (bits[x] & (1 << k)) or removed[y]:
                continue
            # forest_reduce_cpu's peel step, written out: as a call it took 0.07 of 0.12 s
            zy = zh[y // W + 1, y % W + 1]
            wt = zx if zx >= zy else zy
            val = dd[x] if dd[x] >= wt else wt
            if val < dd[y]:
                dd[y] = val
            deg[y] -= 1
            if not port[y] and deg[y] <= 1:  # at 0: the last vertex of a closed tree
                stack[top] = y
                top += 1
    index, kept, dk, ka, kb, kw = _kept(removed, port, deg)
    m = 0
    for t in range(kept.shape[0]):
        a = kept[t]
        best = dd[a]
        za = zh[a // W + 1, a % W + 1]
        for k in range(8):
            cur = a + step[k]
            if not (bits[a] & (1 << k)) or removed[cur]:
                continue
            prev = a
            zc = zh[cur // W + 1, cur % W + 1]
            mx = za if za >= zc else zc
            while index[cur] < 0:  # an inner vertex of a path: degree 2, not a port
                steps += 1
                if (steps & 0xFFFF) == 0 and stopped(stop):
                    return _no_reduction()
                val = dd[cur] if dd[cur] >= mx else mx
                if val < best:
                    best = val
                nxt = -1
                for f in range(8):
                    y = cur + step[f]
                    if bits[cur] & (1 << f) and y != prev and not removed[y]:
                        nxt = y
                        break
                zn = zh[nxt // W + 1, nxt % W + 1]
                wt = zc if zc >= zn else zn
                if wt > mx:
                    mx = wt
                prev, cur, zc = cur, nxt, zn
            if a < cur:
                ka[m] = t
                kb[m] = index[cur]
                kw[m] = mx
                m += 1
        dk[t] = best
    return cp, cq, cw, kept, dk, ka[:m], kb[:m], kw[:m]


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
    """Join the children's border regions touching across the separators; returns each
    cell's smallest key of its joined region."""
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
