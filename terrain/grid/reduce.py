"""Reduce a block's spanning forest to what the levels above still need (thesis §2, obs. 3-4).

*Boundary* vertices lie on a side of the block that is not the grid's border. Dead ends
(non-boundary degree-1 vertices, peeled repeatedly) are final and stay in the block's mask.
Every maximal path of non-boundary degree-2 vertices becomes one edge weighted by the path's
maximum, its *representative* the path's largest ``(weight, id)`` edge: if the level above
drops the contracted edge, exactly the representative leaves the forest. Contracted edges
order as their representatives, so the order stays total. Numba on the host;
:func:`reduce_block_device` (``_reduce.cu``) on the device, equal bit for bit and in order
(docs/mst.md).
"""

from pathlib import Path

import numba
import numpy as np

from ..errors import InputError

from .edges import NB_DCOL, NB_DROW, block_sides
from .kernels import edge_weight

__all__ = ["reduce_forest", "reduce_tile", "reduce_block_device", "kruskal_keep"]


@numba.njit(cache=True, nogil=True)
def _reduce_forest_cpu(n, eu, ev, ew, erep, boundary):
    m = eu.shape[0]
    deg = np.zeros(n + 1, np.int64)
    for e in range(m):
        deg[eu[e] + 1] += 1
        deg[ev[e] + 1] += 1
    start = np.cumsum(deg)
    fill = start[:-1].copy()
    adj = np.empty(2 * m, np.int64)
    for e in range(m):
        adj[fill[eu[e]]] = e
        fill[eu[e]] += 1
        adj[fill[ev[e]]] = e
        fill[ev[e]] += 1
    degree = (start[1:] - start[:-1]).copy()
    alive = np.ones(m, np.bool_)
    # 1. peel dead ends
    stack = np.empty(n, np.int64)
    top = 0
    for v in range(n):
        if degree[v] == 1 and not boundary[v]:
            stack[top] = v
            top += 1
    n_dead = 0
    while top > 0:
        top -= 1
        v = stack[top]
        if degree[v] != 1:
            continue
        for k in range(start[v], start[v + 1]):
            e = adj[k]
            if alive[e]:
                alive[e] = False
                n_dead += 1
                o = ev[e] if eu[e] == v else eu[e]
                degree[v] = 0
                degree[o] -= 1
                if degree[o] == 1 and not boundary[o]:
                    stack[top] = o
                    top += 1
                break
    # 2. contract degree-2 paths between kept vertices
    out_a = np.empty(m, np.int64)
    out_b = np.empty(m, np.int64)
    out_w = np.empty(m, np.float32)
    out_rep = np.empty(m, np.int64)
    n_out = 0
    visited = np.zeros(m, np.bool_)
    for v in range(n):
        if degree[v] == 0 or (degree[v] == 2 and not boundary[v]):
            continue
        for k in range(start[v], start[v + 1]):
            e = adj[k]
            if not alive[e] or visited[e]:
                continue
            visited[e] = True
            bw, brep = ew[e], erep[e]
            cur = ev[e] if eu[e] == v else eu[e]
            while degree[cur] == 2 and not boundary[cur]:
                nxt = -1
                for kk in range(start[cur], start[cur + 1]):
                    f = adj[kk]
                    if alive[f] and f != e:
                        nxt = f
                        break
                e = nxt
                visited[e] = True
                if ew[e] > bw or (ew[e] == bw and erep[e] > brep):
                    bw, brep = ew[e], erep[e]
                cur = ev[e] if eu[e] == cur else eu[e]
            out_a[n_out] = v
            out_b[n_out] = cur
            out_w[n_out] = bw
            out_rep[n_out] = brep
            n_out += 1
    return out_a[:n_out], out_b[:n_out], out_w[:n_out], out_rep[:n_out], n_dead


@numba.njit(cache=True, nogil=True)
def kruskal_keep(order, u, v, n):
    """Kruskal's forest of the edges ``(u, v)`` taken in ``order``: True for the kept ones."""
    parent = np.arange(n)
    keep = np.zeros(order.shape[0], np.bool_)
    for k in range(order.shape[0]):
        e = order[k]
        a = u[e]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        b = v[e]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a != b:
            parent[a] = b
            keep[e] = True
    return keep


def reduce_forest(n, eu, ev, ew, erep, boundary):
    """Remove dead ends and contract degree-2 paths of a forest.

    Parameters
    ----------
    n : int
        Number of vertices (ids ``0..n-1``).
    eu, ev : int64 arrays
        Edge endpoints; the edges must form a forest.
    ew : float32 array
        Edge weights.
    erep : int64 array
        Global id of each edge's representative original edge (itself for a grid edge).
    boundary : bool array of length n

    Returns
    -------
    a, b, w, rep : arrays of the reduced forest's edges (contracted paths included)
    n_dead : int
        Number of input edges peeled as dead ends.

    Examples
    --------
    A path 0-1-2-3 with boundary ends 0 and 3 becomes one edge, and the branch 1-4 dies:

    >>> a, b, w, rep, dead = reduce_forest(
    ...     5, np.array([0, 1, 2, 1]), np.array([1, 2, 3, 4]),
    ...     np.array([5, 7, 6, 9], np.float32), np.array([10, 11, 12, 13]),
    ...     np.array([True, False, False, True, False]))
    >>> a.tolist(), b.tolist(), w.tolist(), rep.tolist(), dead
    ([0], [3], [7.0], [11], 1)
    """
    eu, ev = np.ascontiguousarray(eu, np.int64), np.ascontiguousarray(ev, np.int64)
    ew, erep = np.ascontiguousarray(ew, np.float32), np.ascontiguousarray(erep, np.int64)
    boundary = np.ascontiguousarray(boundary, np.bool_)
    if not (eu.shape == ev.shape == ew.shape == erep.shape) or boundary.shape != (n,):
        raise InputError("reduce_forest: edge arrays and boundary must match n")
    return _reduce_forest_cpu(int(n), eu, ev, ew, erep, boundary)


@numba.njit(cache=True, nogil=True, inline="always")
def _incident(alive, R, C, r, c, k):
    """Owner (row, col) of the k-th possible edge at (r, c) if it is alive, else (-1, -1)."""
    d = k & 3
    if k < 4:
        orow, ocol = r, c
        rr, cc = r + NB_DROW[k], c + NB_DCOL[k]
    else:
        orow, ocol = r + NB_DROW[k], c + NB_DCOL[k]
        rr, cc = orow, ocol
    if rr < 0 or rr >= R or cc < 0 or cc >= C or orow < 0 or ocol < 0 or orow >= R or ocol >= C:
        return -1, -1
    if alive[orow, ocol] & (1 << d):
        return orow, ocol
    return -1, -1


@numba.njit(cache=True, nogil=True)
def _reduce_tile_cpu(mask, z, h, w, bnd, r0, c0, ncols, model, hlen):
    """reduce_forest on a tile mask (neighbours by direction bits); ``bnd``: which sides
    (top, bottom, left, right) of the ``h × w`` valid part face other tiles."""
    R, C = mask.shape
    alive = mask.copy()
    deg = np.zeros((R, C), np.int32)
    m = 0
    for r in range(R):
        for c in range(C):
            b = mask[r, c]
            if b == 0:
                continue
            for d in range(4):
                if b & (1 << d):
                    deg[r, c] += 1
                    deg[r + NB_DROW[d], c + NB_DCOL[d]] += 1
                    m += 1
    forest_w = np.empty(m, np.float32)
    k = 0
    for r in range(R):
        for c in range(C):
            b = mask[r, c]
            for d in range(4):
                if b & (1 << d):
                    forest_w[k] = edge_weight(z[r, c], z[r + NB_DROW[d], c + NB_DCOL[d]], d,
                                              model, hlen)
                    k += 1

    def boundary(r, c):
        return ((r == 0 and bnd[0]) or (r == h - 1 and bnd[1]) or (c == 0 and bnd[2])
                or (c == w - 1 and bnd[3]))

    stack = np.empty(R * C, np.int64)
    top = 0
    for r in range(R):
        for c in range(C):
            if deg[r, c] == 1 and not boundary(r, c):
                stack[top] = r * C + c
                top += 1
    while top > 0:
        top -= 1
        r, c = divmod(stack[top], C)
        if deg[r, c] != 1:
            continue
        for kk in range(8):
            orow, ocol = _incident(alive, R, C, r, c, kk)
            if orow >= 0:
                d = kk & 3
                alive[orow, ocol] &= np.uint8(~(1 << d) & 0xFF)
                rr, cc = (r + NB_DROW[kk], c + NB_DCOL[kk])
                deg[r, c] = 0
                deg[rr, cc] -= 1
                if deg[rr, cc] == 1 and not boundary(rr, cc):
                    stack[top] = rr * C + cc
                    top += 1
                break
    visited = np.zeros((R, C), np.uint8)
    out_a = np.empty(m, np.int64)
    out_b = np.empty(m, np.int64)
    out_w = np.empty(m, np.float32)
    out_rep = np.empty(m, np.int64)
    n_out = 0
    for r in range(R):
        for c in range(C):
            if deg[r, c] == 0 or (deg[r, c] == 2 and not boundary(r, c)):
                continue
            for kk in range(8):
                orow, ocol = _incident(alive, R, C, r, c, kk)
                if orow < 0:
                    continue
                d = kk & 3
                if visited[orow, ocol] & (1 << d):
                    continue
                visited[orow, ocol] |= np.uint8(1 << d)
                cur_r, cur_c = r + NB_DROW[kk], c + NB_DCOL[kk]
                bw = edge_weight(z[orow, ocol], z[orow + NB_DROW[d], ocol + NB_DCOL[d]], d, model,
                                 hlen)
                brep = 4 * ((r0 + orow) * ncols + c0 + ocol) + d
                while deg[cur_r, cur_c] == 2 and not boundary(cur_r, cur_c):
                    for k2 in range(8):
                        o2r, o2c = _incident(alive, R, C, cur_r, cur_c, k2)
                        if o2r < 0:
                            continue
                        d2 = k2 & 3
                        if visited[o2r, o2c] & (1 << d2):
                            continue
                        visited[o2r, o2c] |= np.uint8(1 << d2)
                        ew = edge_weight(z[o2r, o2c], z[o2r + NB_DROW[d2], o2c + NB_DCOL[d2]], d2,
                                         model, hlen)
                        eid = 4 * ((r0 + o2r) * ncols + c0 + o2c) + d2
                        if ew > bw or (ew == bw and eid > brep):
                            bw, brep = ew, eid
                        cur_r, cur_c = cur_r + NB_DROW[k2], cur_c + NB_DCOL[k2]
                        break
                out_a[n_out] = r * C + c
                out_b[n_out] = cur_r * C + cur_c
                out_w[n_out] = bw
                out_rep[n_out] = brep
                n_out += 1
    return out_a[:n_out], out_b[:n_out], out_w[:n_out], out_rep[:n_out], forest_w


def reduce_tile(mask, z, window, shape, model, hlen):
    """Reduce one tile's forest, its NaN-padded ``(T, T)`` direction-bit ``mask`` (see
    :func:`reduce_forest`; ``window``: the tile's clipped cells in the grid of ``shape``).
    Returns ``(a, b, w, rep, forest_w)``: the reduced edges (local ids, ``T`` a row) and the
    weights of every edge of the tile's forest."""
    r0, r1, c0, c1 = window
    bnd = np.array([r0 > 0, r1 < shape[0], c0 > 0, c1 < shape[1]], np.bool_)
    return _reduce_tile_cpu(np.ascontiguousarray(mask, np.uint8), np.ascontiguousarray(z, np.float32),
                            r1 - r0, c1 - c0, bnd, r0, c0, int(shape[1]), int(model),
                            np.asarray(hlen, np.float64))


def reduce_block_device(mask, z, window, shape, model, hlen, backend="gpu"):
    """:func:`reduce_tile` of a whole block whose forest (``mask``, left unchanged) and
    elevations lie on the device, not padded (local ids row-major in the block): ``(a, b, w,
    rep)`` as NumPy arrays, bit-identical to the host's and in the same order."""
    from ..backend import get_backend
    be = get_backend(backend)
    if not be.is_gpu:
        raise InputError("reduce_block_device: needs the gpu backend (reduce_tile on the CPU)")
    cp = be.xp
    R, C = (int(s) for s in mask.shape)
    r0, r1, c0, c1 = (int(x) for x in window)
    if (R, C) != (r1 - r0, c1 - c0) or tuple(z.shape) != (R, C):
        raise InputError(f"reduce_block_device: mask {mask.shape} and z {z.shape} do not match "
                         f"window {window}")
    n = R * C
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32),
             np.zeros(0, np.int64))
    if n == 0:
        return empty
    mod = be.cuda_module(Path(__file__).with_name("_reduce.cu"))
    alive = cp.zeros(-(-n // 4), cp.uint32)
    alive.view(cp.uint8)[:n] = cp.ascontiguousarray(mask).ravel()
    zd = cp.ascontiguousarray(z, dtype=cp.float32)
    deg = cp.empty(n, cp.int32)
    dead_end = cp.empty(n, cp.uint8)
    dims = (np.int32(R), np.int32(C), np.int32(block_sides(window, shape)))
    grid, block = ((n + 255) // 256,), (256,)
    mod.get_function("reduce_degree")(grid, block, (alive, deg, dead_end) + dims)
    mod.get_function("reduce_peel")(grid, block, (alive, deg, dead_end) + dims)
    del dead_end
    # a forest has fewer paths than kept vertices
    kept = cp.zeros(1, cp.uint64)
    mod.get_function("reduce_count_kept")(grid, block, (deg, kept, np.int32(n)))
    cap = int(kept.get()[0]) + 2 * (R + C)
    count = cp.zeros(1, cp.uint64)
    out_key = cp.empty(cap, cp.int64)
    out_b = cp.empty(cap, cp.int32)
    out_w = cp.empty(cap, cp.float32)
    out_rep = cp.empty(cap, cp.uint32)
    mod.get_function("reduce_chains")(grid, block, (
        zd, alive, deg) + dims + (np.int32(model), cp.asarray(np.asarray(hlen, np.float64)),
                                  count, np.int64(cap), out_key, out_b, out_w, out_rep))
    m = int(count.get()[0])
    if m > cap:  # pragma: no cover - a forest has fewer paths than kept vertices
        raise RuntimeError(f"reduce_block_device: {m} paths exceed the bound {cap}")
    key, b, w, rep = (x[:m].get() for x in (out_key, out_b, out_w, out_rep))
    order = np.argsort(key, kind="stable")
    owner, d = np.divmod(rep[order].astype(np.int64), 4)
    rows, cols = np.divmod(owner, C)
    grep = 4 * ((r0 + rows) * np.int64(shape[1]) + c0 + cols) + d
    return key[order] >> 3, b[order].astype(np.int64), w[order], grep

