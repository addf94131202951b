"""The CPU kernels (Numba) of depression filling: a block's forest as a graph, the
drain pass over a graph, the reduction of a block's forest to its ports, the joins of flooded regions
across block borders, the hierarchy and RichDEM's epsilon fill.

A *halo block* is a window with one more cell on every side (NaN elevation, mask 0 outside
the grid); its inner cells have local ids ``i * W + j``. The forest is the grid MST's mask
(bit 1 E, 2 S, 4 SE, 8 SW); an edge weighs ``max(z_u, z_v)``. ``src[v]``: the level at
which ``v`` surely drains (``inf``: none). docs/hydrology.md has the algorithm.
"""

import numba
import numpy as np

from ._neighbours import NB_DC, NB_DR

__all__ = ["leaf_reduce_cpu", "forest_dp_cpu",
           "forest_reduce_cpu", "csr_from_edges_cpu", "first_cells_cpu", "union_across_cpu",
           "forest_edges_cpu", "hierarchy_cpu", "epsilon_fill_cpu"]


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
def forest_dp_cpu(indptr, adj, w, src):
    """``f[v] = min over sources s in v's tree of max(path maximum v..s, src[s])`` on a
    CSR forest (``inf``: no source): an up and a down pass over each tree in BFS order."""
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
def leaf_reduce_cpu(zh, mh, d, present):
    """:func:`forest_reduce_cpu` of a halo block's forest read from its mask bits in place:
    no CSR is built (at 2048² 0.11 s where building the CSR and reducing it took 0.39 s, and
    14 bytes a cell instead of 66). The same results in the same order (arcs in neighbour
    order, as the CSR held them). Returns the edges leaving the block ``cp`` (local id
    inside), ``cq`` (halo index ``hi * (W + 2) + hj`` outside), ``cw``, then
    :func:`forest_reduce_cpu`'s ``kept``, ``dk``, ``ka``, ``kb``, ``kw``."""
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
    while top > 0:
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


@numba.njit(cache=True, nogil=True)
def forest_edges_cpu(mask, step):
    """The forest's edges ``(u, v, id)`` from its mask, ``id = 4 u + d`` (the MST's ids)."""
    H, W = mask.shape
    m = 0
    for i in range(H):
        for j in range(W):
            b = mask[i, j]
            while b:
                m += b & 1
                b >>= 1
    u = np.empty(m, np.int64)
    v = np.empty(m, np.int64)
    ids = np.empty(m, np.int64)
    dr = (0, 1, 1, 1)
    dc = (1, 0, 1, -1)
    q = 0
    for i in range(H):
        for j in range(W):
            b = mask[i, j]
            for d in range(4):
                if b & (1 << d):
                    u[q] = i * W + j
                    v[q] = (i + dr[d]) * W + j + dc[d]
                    ids[q] = 4 * u[q] + d
                    q += 1
    return u, v, ids


@numba.njit(cache=True, nogil=True)
def hierarchy_cpu(z, eu, ev, ew, drained0):
    """The depression hierarchy: Kruskal over the forest's edges (given sorted), outlets
    drained from the start (docs/hydrology.md). Rows of float64: ``pit``, ``pit_z``,
    ``spill``, ``parent``, ``left``, ``right``, ``cells``, ``volume`` per node."""
    n = z.shape[0]
    parent = np.arange(n)
    size = np.ones(n, np.int64)
    sumz = z.astype(np.float64)
    pit = np.arange(n)
    node = np.full(n, -1, np.int64)
    drained = drained0.copy()
    # the nodes' columns (pit, pit_z, spill, parent, left, right, cells, volume) as float64,
    # exact for each: float32 levels, and ids and counts below 2^53
    nodes = np.empty((16, 8), np.float64)
    k = 0
    for e in range(eu.shape[0]):
        a = _find(parent, eu[e])
        b = _find(parent, ev[e])
        if a == b:
            continue
        level = ew[e]
        ids = np.empty(2, np.int64)
        deep = np.zeros(2, np.bool_)
        for t in range(2):
            x = a if t == 0 else b
            deep[t] = (not drained[x]) and z[pit[x]] < level
            if deep[t] and node[x] < 0:  # a new leaf
                if k == nodes.shape[0]:
                    nodes = np.concatenate((nodes, nodes))
                nodes[k] = 0.0
                nodes[k, 0], nodes[k, 1], nodes[k, 2] = pit[x], z[pit[x]], np.inf
                k += 1
                node[x] = k
            ids[t] = node[x]
        new = -1
        spills = (deep[0] and deep[1]) or drained[a] or drained[b]
        if spills:  # each deep side ends here: it merges with the other, or drains
            for t in range(2):
                if deep[t]:
                    x = a if t == 0 else b
                    q = ids[t] - 1
                    nodes[q, 2] = level
                    nodes[q, 6] = size[x]
                    nodes[q, 7] = size[x] * np.float64(level) - sumz[x]
        if deep[0] and deep[1]:
            if k == nodes.shape[0]:
                nodes = np.concatenate((nodes, nodes))
            k += 1
            new = k
            nodes[k - 1] = 0.0
            nodes[k - 1, 2], nodes[k - 1, 4], nodes[k - 1, 5] = np.inf, ids[0], ids[1]
            nodes[ids[0] - 1, 3] = k
            nodes[ids[1] - 1, 3] = k
        elif deep[0] and not spills:
            new = ids[0]  # a depression swallowing a shallow component
        elif deep[1] and not spills:
            new = ids[1]
        # union (the smaller pit (z, cell) is the pit of the union)
        pa, pb = pit[a], pit[b]
        low = pa if (z[pa] < z[pb] or (z[pa] == z[pb] and pa < pb)) else pb
        if size[a] < size[b]:
            a, b = b, a
        parent[b] = a
        size[a] += size[b]
        sumz[a] += sumz[b]
        pit[a] = low
        dr = drained[a] or drained[b]
        drained[a] = dr
        if new >= 1 and deep[0] and deep[1]:
            nodes[new - 1, 0] = low
            nodes[new - 1, 1] = z[low]
        node[a] = -1 if dr else new
    for x in range(n):  # depressions that never drain (no outlet reachable)
        if parent[x] == x and node[x] >= 1:
            nodes[node[x] - 1, 6] = size[x]
            nodes[node[x] - 1, 7] = np.nan
    return nodes[:k]


# libstdc++'s binary heap step for step: RichDEM's queue compares z only, so its order
# among equal elevations (which decides the epsilon fill's ulps) is this heap's.

@numba.njit(cache=True, nogil=True, inline="always")
def _sift_up(hz, hc, hole, top, vz, vc):
    parent = (hole - 1) // 2
    while hole > top and hz[parent] > vz:
        hz[hole] = hz[parent]
        hc[hole] = hc[parent]
        hole = parent
        parent = (hole - 1) // 2
    hz[hole] = vz
    hc[hole] = vc


@numba.njit(cache=True, nogil=True)
def _std_push(hz, hc, size, vz, vc):
    _sift_up(hz, hc, size, 0, vz, vc)
    return size + 1


@numba.njit(cache=True, nogil=True)
def _std_pop(hz, hc, size):
    """std::pop_heap: the top into slot ``size - 1``; returns the new size."""
    last = size - 1
    if last > 0:
        vz, vc = hz[last], hc[last]
        hz[last], hc[last] = hz[0], hc[0]
        n = last  # __adjust_heap(first, 0, n, value)
        hole = 0
        child = 0
        while child < (n - 1) // 2:
            child = 2 * (child + 1)
            if hz[child] > hz[child - 1]:
                child -= 1
            hz[hole] = hz[child]
            hc[hole] = hc[child]
            hole = child
        if (n & 1) == 0 and child == (n - 2) // 2:
            child = 2 * (child + 1)
            hz[hole] = hz[child - 1]
            hc[hole] = hc[child - 1]
            hole = child - 1
        _sift_up(hz, hc, hole, 0, vz, vc)
    return last


@numba.njit(cache=True, nogil=True)
def epsilon_fill_cpu(z, seeds, seed_nodata, ndr, ndc, named):
    """RichDEM's ``PriorityFloodEpsilon_Barnes2014`` step for step (its ulps): a heap of
    cells at their elevation and a FIFO of cells raised to the next float32. ``seeds`` in
    RichDEM's order, nodata ones (``seed_nodata``) at -inf; with ``named`` outlets nodata is
    never entered. ``ndr``/``ndc``: RichDEM's neighbour order. Unreached cells: ``inf``."""
    H, W = z.shape
    n = H * W
    zf = z.ravel()
    e = np.full(n, np.inf, np.float32)
    closed = np.zeros(n, np.bool_)
    hz = np.empty(seeds.shape[0] + n + 1, np.float32)
    hc = np.empty(seeds.shape[0] + n + 1, np.int64)
    qz = np.empty(n + 1, np.float32)
    qc = np.empty(n + 1, np.int64)
    size = 0
    head = 0
    tail = 0
    inf = np.float32(np.inf)
    ninf = np.float32(-np.inf)
    for t in range(seeds.shape[0]):
        c = seeds[t]
        v = ninf if seed_nodata[t] else zf[c]
        if not seed_nodata[t]:
            e[c] = zf[c]
        closed[c] = True
        size = _std_push(hz, hc, size, v, c)
    while size > 0 or head < tail:
        if head < tail and size > 0 and hz[0] == qz[head]:
            size = _std_pop(hz, hc, size)
            cz, c = hz[size], hc[size]
        elif head < tail:
            cz, c = qz[head], qc[head]
            head += 1
        else:
            size = _std_pop(hz, hc, size)
            cz, c = hz[size], hc[size]
        i = c // W
        j = c - i * W
        nxt = np.nextafter(cz, inf)
        for k in range(ndr.shape[0]):
            ii, jj = i + ndr[k], j + ndc[k]
            if ii < 0 or ii >= H or jj < 0 or jj >= W:
                continue
            u = ii * W + jj
            if closed[u]:
                continue
            zu = zf[u]
            if np.isnan(zu):
                if named:
                    continue
                closed[u] = True
                qz[tail] = ninf
                qc[tail] = u
                tail += 1
                continue
            closed[u] = True
            if zu <= nxt:
                e[u] = nxt
                qz[tail] = nxt
                qc[tail] = u
                tail += 1
            else:
                e[u] = zu
                size = _std_push(hz, hc, size, zu, u)
    return e
