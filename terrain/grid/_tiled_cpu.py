"""The tiled SSSP's CPU kernels (Numba) and :class:`TiledCpuOps`, the CPU side of its kernel
table (GPU twins in ``_tiled_gpu.py``): phase 1's boundary pairs, phase 3's seeded windows,
the hierarchy's child-graph Dijkstras (dense, and paged for the top), the grid arcs between
children and the backlinks. Every queue is the tournament tree of :mod:`terrain.grid._tournament`
with keys ``(distance, allocation, hops)``. The ``parallel=True`` kernels are launched from a
run's task threads at once: :func:`terrain.native.parallel_kernel` makes that safe under
every Numba threading layer.
"""

import numpy as np
from numba import njit, prange

from .. import native
from ..native.flag import stopped

from ._costs_cpu import arc_cost, pair_factor, quad_factor, window_arc_factor
from ._tournament import INT_INF, key_less, tt_alloc, tt_lower, tt_pop, tt_seed
from .costs import ARC_DC, ARC_DR, KNIGHT_MID

__all__ = ["TiledCpuOps", "boundary_pairs_cpu", "windows_dijkstra_cpu", "window_dijkstra_cpu",
           "graphs_pairs_cpu", "graph_dijkstra", "graph_dijkstra_paged", "page_to_evict",
           "page_min_key", "arcs_cpu", "backlinks_batch"]

_INF = np.inf


@njit(cache=True, nogil=True)
def _arc_table(z, f, inner, codes, model, lengths):
    """Costs ``wt[u, kk]`` of arc ``codes[kk]`` from cell u of a window (inf: none, or its
    head not ``inner``), shared by all the Dijkstras run on the window."""
    H, W = z.shape
    K = codes.shape[0]
    wt = np.full((H * W, K), _INF)
    for ur in range(H):
        for uc in range(W):
            zu = z[ur, uc]
            fu = f[ur, uc]
            if zu != zu or fu != fu:
                continue
            for kk in range(K):
                k = codes[kk]
                vr = ur + ARC_DR[k]
                vc = uc + ARC_DC[k]
                if vr < 0 or vr >= H or vc < 0 or vc >= W or not inner[vr, vc]:
                    continue
                zv = z[vr, vc]
                fv = f[vr, vc]
                if zv != zv or fv != fv:
                    continue
                ok, fac = window_arc_factor(z, f, True, ur, uc, k)
                if not ok:
                    continue
                w = arc_cost(zu, zv, fac, k, model, lengths)
                if w < _INF:
                    wt[ur * W + uc, kk] = w
    return wt


@njit(cache=True, nogil=True)
def _window_dijkstra(wt, off, ld, la, lh, kd, ka, kh, win):
    """Multi-source Dijkstra on a window: ``ld, la, lh`` (flat) hold the seeds and receive the
    labels; halo seeds stay fixed."""
    K = off.shape[0]
    tt_seed(kd, ka, kh, win, ld, la, lh)
    while kd[1] < _INF:
        u = tt_pop(kd, ka, kh, win)
        du = ld[u]
        au = la[u]
        hu = lh[u] + 1
        for kk in range(K):
            w = wt[u, kk]
            if not w < _INF:
                continue
            nd = du + w
            v = u + off[kk]
            if key_less(nd, au, hu, 0, ld[v], la[v], lh[v], 0):
                ld[v] = nd
                la[v] = au
                lh[v] = hu
                tt_lower(kd, ka, kh, win, v, nd, au, hu)


@native.parallel_kernel
@njit(cache=True, nogil=True, parallel=True)
def boundary_pairs_cpu(z, f, bidx, bcount, codes, model, lengths, out_d, out_h, stop):
    """Phase 1 on many tiles: ``out_*[t, s, j]`` = label of boundary cell j (of ``bidx``)
    from boundary cell s, on paths inside the tile. Once ``stop[0]`` is set no further
    Dijkstra starts, within a tile too: a tile of 256² runs a thousand, tens of seconds
    (:func:`terrain.native.interruptible`)."""
    n, T, _ = z.shape
    off = np.empty(codes.shape[0], np.int64)
    for kk in range(codes.shape[0]):
        off[kk] = ARC_DR[codes[kk]] * T + ARC_DC[codes[kk]]
    for t in prange(n):
        B = bcount[t]
        if B == 0 or stopped(stop):
            continue
        kd, ka, kh, win = tt_alloc(T * T)
        ld = np.empty(T * T, np.float64)
        la = np.empty(T * T, np.int32)
        lh = np.empty(T * T, np.int32)
        wt = _arc_table(z[t], f[t], np.ones((T, T), np.bool_), codes, model, lengths)
        for s in range(B):
            if stopped(stop):
                break
            ld[:] = _INF
            la[:] = INT_INF
            lh[:] = INT_INF
            src = bidx[t, s]
            ld[src] = 0.0
            la[src] = 0
            lh[src] = 0
            _window_dijkstra(wt, off, ld, la, lh, kd, ka, kh, win)
            for j in range(B):
                out_d[t, s, j] = ld[bidx[t, j]]
                out_h[t, s, j] = lh[bidx[t, j]]


@native.parallel_kernel
@njit(cache=True, nogil=True, parallel=True)
def windows_dijkstra_cpu(z, f, inner, codes, model, lengths, ld, la, lh, stop):
    """Seeded Dijkstra on a batch of windows: ``ld, la, lh`` (n, H*W) hold the seeds and
    receive the labels; only ``inner`` cells change. Windows not started once ``stop[0]``
    is set are skipped."""
    n, H, W = z.shape
    off = np.empty(codes.shape[0], np.int64)
    for kk in range(codes.shape[0]):
        off[kk] = ARC_DR[codes[kk]] * W + ARC_DC[codes[kk]]
    for t in prange(n):
        if stopped(stop):
            continue
        kd, ka, kh, win = tt_alloc(H * W)
        wt = _arc_table(z[t], f[t], inner[t], codes, model, lengths)
        _window_dijkstra(wt, off, ld[t], la[t], lh[t], kd, ka, kh, win)


def window_dijkstra_cpu(z, f, inner, codes, model, lengths, ld, la, lh):
    """Seeded Dijkstra on one window (a batch of one); labels (flat) in place."""
    H, W = z.shape
    bd, ba, bh = ld.reshape(1, -1), la.reshape(1, -1), lh.reshape(1, -1)
    native.interruptible(windows_dijkstra_cpu, z.reshape(1, H, W), f.reshape(1, H, W),
                         inner.reshape(1, H, W), codes, model, lengths, bd, ba, bh)


@njit(cache=True, nogil=True)
def _improve(ld, la, lh, kd, ka, kh, win, v, nd, au, nh):
    """Label ``v`` with ``(nd, au, nh)`` and lower its key in the tournament tree when that
    label comes first (the labels' total order, :func:`key_less`)."""
    if key_less(nd, au, nh, 0, ld[v], la[v], lh[v], 0):
        ld[v] = nd
        la[v] = au
        lh[v] = nh
        tt_lower(kd, ka, kh, win, v, nd, au, nh)


@njit(cache=True, nogil=True)
def graph_dijkstra(vchild, coff, csize, moff, mat_d, mat_h, cptr, cdst, cw,
                    ld, la, lh, kd, ka, kh, win, stop):
    """Multi-source Dijkstra on a child-boundary graph (dense child matrices + CSR arcs).
    False when it returned early, ``stop[0]`` being set (polled every 65536 pops:
    :func:`terrain.native.interruptible`), the labels unfinished; else True."""
    tt_seed(kd, ka, kh, win, ld, la, lh)
    popped = 0
    while kd[1] < _INF:
        popped += 1
        if (popped & 0xFFFF) == 0 and stopped(stop):
            return False
        u = tt_pop(kd, ka, kh, win)
        du = ld[u]
        au = la[u]
        hu = lh[u]
        c = vchild[u]
        base = coff[c]
        B = csize[c]
        row = moff[c] + (u - base) * B
        for j in range(B):
            w = mat_d[row + j]
            if not w < _INF:
                continue
            v = base + j
            nd = du + w
            nh = hu + mat_h[row + j]
            _improve(ld, la, lh, kd, ka, kh, win, v, nd, au, nh)
        for e in range(cptr[u], cptr[u + 1]):
            v = cdst[e]
            nd = du + cw[e]
            nh = hu + 1
            _improve(ld, la, lh, kd, ka, kh, win, v, nd, au, nh)
    return True


@native.parallel_kernel
@njit(cache=True, nogil=True, parallel=True)
def graphs_pairs_cpu(pnode, psrc, vbase, tbase, targets, obase, vchild, coff, csize, moff,
                     mat_d, mat_h, cptr, cdst, cw, out_d, out_h, stop):
    """Phase 2 bottom-up on a batch of concatenated node graphs: pair ``p`` runs a Dijkstra
    from boundary cell ``psrc[p]`` of node ``pnode[p]`` and writes that row of the node's
    matrices at ``out_*[obase[n]:]``. Pairs not started once ``stop[0]`` is set are skipped
    (:func:`terrain.native.interruptible`)."""
    for p in prange(pnode.shape[0]):
        if stopped(stop):
            continue
        n = pnode[p]
        v0, v1 = vbase[n], vbase[n + 1]
        t0, t1 = tbase[n], tbase[n + 1]
        B = t1 - t0
        V = v1 - v0
        kd, ka, kh, win = tt_alloc(V)
        ld = np.full(V, _INF)
        la = np.full(V, INT_INF, np.int32)
        lh = np.full(V, INT_INF, np.int32)
        src = targets[t0 + psrc[p]]
        ld[src] = 0.0
        la[src] = 0
        lh[src] = 0
        if not graph_dijkstra(vchild[v0:v1], coff, csize, moff, mat_d, mat_h, cptr[v0:v1 + 1],
                              cdst, cw, ld, la, lh, kd, ka, kh, win, stop):
            continue
        row = obase[n] + psrc[p] * B
        for j in range(B):
            out_d[row + j] = ld[targets[t0 + j]]
            out_h[row + j] = lh[targets[t0 + j]]


@njit(cache=True, nogil=True)
def _backlinks(z, f, cells, codes, model, lengths, ld, la, lh, out):
    """Backlink of every cell of ``cells``: the lowest ``k + 1`` whose neighbour is a tight
    predecessor with ``(allocation, hops - 1)``. A tile's boundary cell keeps its phase-2
    label, whose distance adds a boundary-matrix segment in another float association than
    the window's sums, so it may have none (an ulp or a hops tie away): then, among the
    neighbours whose ``(hops, distance)`` lies lexicographically below its own, the one of
    its allocation (else of any), not farther than it (else farther), whose relaxation
    ``(ld[u] + w, lh[u] + 1)`` is the least (lowest ``k`` among equals). Every window sees
    every cell's one label and every backlink, tight or not, lowers ``(hops, distance)``,
    so following them ends at a source. ``(distance, hops)`` would not do: a boundary cell
    an ulp below every path of its window seeds its zero-cost plateau, whose cells then
    all lie above it. 255 is left only where no neighbour lies below the label."""
    H, W = z.shape
    for vr in range(H):
        for vc in range(W):
            if not cells[vr, vc]:
                continue
            v = vr * W + vc
            dv, av, hv = ld[v], la[v], lh[v]
            if not dv < _INF:
                out[vr, vc] = 255
                continue
            if hv == 0:
                out[vr, vc] = 0
                continue
            out[vr, vc] = 255
            best = (True, True, _INF, INT_INF)  # (other allocation, farther, nd, nh)
            for k in codes:
                ur = vr + ARC_DR[k]
                uc = vc + ARC_DC[k]
                if ur < 0 or ur >= H or uc < 0 or uc >= W:
                    continue
                u = ur * W + uc
                du, hu = ld[u], lh[u]
                # only neighbours below the label: (hops, distance) falls along every link
                if not (hu < hv or (hu == hv and du < dv)):
                    continue
                zu = z[ur, uc]
                fu = f[ur, uc]
                if zu != zu or fu != fu:
                    continue
                back = (k + 4) % 8 if k < 8 else 8 + (k - 8 + 4) % 8  # the arc u -> v
                ok, fac = window_arc_factor(z, f, True, ur, uc, back)
                if not ok:
                    continue
                nd = du + arc_cost(zu, z[vr, vc], fac, back, model, lengths)
                other = la[u] != av
                if nd == dv and hu + 1 == hv and not other:
                    out[vr, vc] = k + 1
                    break
                cand = (other, du > dv, nd, hu + 1)
                if cand < best:
                    best = cand
                    out[vr, vc] = k + 1


@native.parallel_kernel
@njit(cache=True, nogil=True, parallel=True)
def backlinks_batch(z, f, inner, codes, model, lengths, ld, la, lh, out):
    """:func:`_backlinks` on a batch of windows (``z`` (n, H, W), labels (n, H*W))."""
    for t in prange(z.shape[0]):
        _backlinks(z[t], f[t], inner[t], codes, model, lengths, ld[t], la[t], lh[t], out[t])


@njit(cache=True, nogil=True, inline="always")
def _vertex_at(r, c, C, order, sorted_ids):
    """The vertex of cell ``(r, c)`` (inside the grid) of a graph whose cell ids sort as
    ``sorted_ids`` (positions ``order``); -1 when none."""
    nid = r * C + c
    pos = np.searchsorted(sorted_ids, nid)
    if pos >= sorted_ids.shape[0] or sorted_ids[pos] != nid:
        return -1
    return order[pos]


@native.parallel_kernel
@njit(cache=True, nogil=True, parallel=True)
def arcs_cpu(ids, order, sorted_ids, z, f, vchild, R, C, codes, model, lengths, cptr, cdst,
              cw, fill):
    """Count (``fill`` False: ``cptr[u + 1]``) or write (``cdst``, ``cw``) the grid arcs
    ``u -> v`` between vertices of different children, by ``u`` then arc code. The cells a
    knight arc passes between lie within 1 cell of the edge it crosses, inside the frames (2
    cells) of their children: vertices of the graph when they are vertices at all."""
    V = ids.shape[0]
    for u in prange(V):
        r = ids[u] // C
        c = ids[u] % C
        e = cptr[u]
        n = 0
        for k in codes:
            rr = r + ARC_DR[k]
            cc = c + ARC_DC[k]
            if rr < 0 or rr >= R or cc < 0 or cc >= C:
                continue
            v = _vertex_at(rr, cc, C, order, sorted_ids)
            if v < 0:
                continue
            if vchild[v] == vchild[u]:
                continue
            if k < 8:
                fac = pair_factor(f[u], f[v])
            else:
                ka, kb = KNIGHT_MID[k - 8, 0], KNIGHT_MID[k - 8, 1]
                a = _vertex_at(r + ARC_DR[ka], c + ARC_DC[ka], C, order, sorted_ids)
                b = _vertex_at(r + ARC_DR[kb], c + ARC_DC[kb], C, order, sorted_ids)
                if a < 0 or b < 0:
                    continue
                fac = quad_factor(f[u], f[v], f[a], f[b])
            w = arc_cost(z[u], z[v], fac, k, model, lengths)
            if not w < _INF:
                continue
            if fill:
                cdst[e + n] = v
                cw[e + n] = w
            n += 1
        if not fill:
            cptr[u + 1] = n


@njit(cache=True, nogil=True)
def graph_dijkstra_paged(vchild, coff, csize, page_of, page_loc, slot_of, pool_d, pool_h,
                          stamp, clock, cptr, cdst, cw, ld, la, lh, kd, ka, kh, win, stop):
    """:func:`graph_dijkstra` with the child matrices in a cache of pages (``pool_*[slot,
    loc]``): -1 when the queue is empty, or the page the next vertex needs (queue untouched:
    the caller loads it and calls again), or -2 once ``stop[0]`` is set (polled every 65536
    pops, the queue untouched: :func:`terrain.native.interruptible`)."""
    popped = 0
    while kd[1] < _INF:
        popped += 1
        if (popped & 0xFFFF) == 0 and stopped(stop):
            return -2
        u = win[1]
        c = vchild[u]
        sl = slot_of[page_of[c]]
        if sl < 0:
            return page_of[c]
        stamp[sl] = clock[0]
        clock[0] += 1
        tt_pop(kd, ka, kh, win)
        du = ld[u]
        au = la[u]
        hu = lh[u]
        base = coff[c]
        B = csize[c]
        r = u - base
        loc = page_loc[c]
        for j in range(B):
            w = pool_d[sl, loc, r, j]
            if not w < _INF:
                continue
            v = base + j
            nd = du + w
            nh = hu + pool_h[sl, loc, r, j]
            _improve(ld, la, lh, kd, ka, kh, win, v, nd, au, nh)
        for e in range(cptr[u], cptr[u + 1]):
            v = cdst[e]
            nd = du + cw[e]
            nh = hu + 1
            _improve(ld, la, lh, kd, ka, kh, win, v, nd, au, nh)
    return -1


@njit(cache=True, nogil=True)
def page_to_evict(held, pptr, pverts, kd):
    """The cache slot whose page is needed last (the largest least queued distance): Belady's
    rule with Dijkstra's order as the future, where LRU would follow the wavefront back."""
    cap = kd.shape[0] // 2
    best, best_key = 0, -1.0
    for sl in range(held.shape[0]):
        p = held[sl]
        m = np.inf
        for e in range(pptr[p], pptr[p + 1]):
            d = kd[cap + pverts[e]]
            if d < m:
                m = d
        if m > best_key:
            best, best_key = sl, m
            if m == np.inf:
                break
    return best


@njit(cache=True, nogil=True)
def page_min_key(p, pptr, pverts, kd):
    """Least queued distance over the vertices of page ``p`` (+inf: none queued)."""
    cap = kd.shape[0] // 2
    m = np.inf
    for e in range(pptr[p], pptr[p + 1]):
        d = kd[cap + pverts[e]]
        if d < m:
            m = d
    return m


class TiledCpuOps:
    """The CPU side of the tiled algorithm's kernel table (twin: ``TiledGpuOps``)."""

    name = "cpu"

    def boundary_pairs(self, zb, fb, bidx, count, codes, model, lengths, out=None):
        """Phase 1 on a batch of tiles: ``(dist, hops)`` (n, bmax, bmax) host arrays."""
        if out is not None:
            raise ValueError("out= (device slots) needs the gpu backend")
        n, bmax = bidx.shape
        out_d = np.full((n, bmax, bmax), _INF)
        out_h = np.full((n, bmax, bmax), INT_INF, np.int32)
        if count.any():
            native.interruptible(boundary_pairs_cpu, zb, fb, bidx, count, codes, model,
                                 lengths, out_d, out_h)
        return out_d, out_h

    def graphs_pairs(self, *args):
        """The bottom-up Dijkstras of a batch of nodes (:func:`graphs_pairs_cpu`)."""
        native.interruptible(graphs_pairs_cpu, *args)

    def windows_dijkstra(self, *args):
        """Seeded Dijkstras on a batch of windows (:func:`windows_dijkstra_cpu`)."""
        native.interruptible(windows_dijkstra_cpu, *args)

    #: the top is solved by the paged Dijkstra on the host
    top_solve = None
