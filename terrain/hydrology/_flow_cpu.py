"""The CPU kernels (Numba) of flow directions and accumulation, twins of ``_flow.cu``'s.
Each works on a *padded block* (a window with a halo, NaN / 255 outside the grid), so the
in-core and tiled runs execute the same code. Neighbour ``k`` (E, SE, S, ..., NE) has ESRI
code ``1 << k``; D4 takes the even ``k``.
"""

import numba
import numpy as np

from ._fill_cpu import _find
from ._neighbours import NB_DC as DC, NB_DR as DR

__all__ = ["classify_cpu", "flat_distances_cpu", "flat_labels_cpu", "flat_directions_cpu",
           "accumulate_cpu", "exits_cpu", "resolve_edges_cpu", "chain_exits_cpu",
           "union_max_cpu", "DR", "DC", "FLAT", "INF"]

FLAT = np.uint8(254)    # no lower neighbour, not an outlet: resolved by the flat pass
INF = np.int32(2**31 - 1)  # an unreached BFS distance
CODE_K = np.full(256, -1, np.int64)  # the neighbour k of code 1 << k, -1 for any other code
CODE_K[1 << np.arange(8)] = np.arange(8)


@numba.njit(cache=True, nogil=True)
def classify_cpu(zp, outp, has_out, edge_outlets, dist, step, code):
    """Codes of the cells inside the outer ring of ``zp``: 255 nodata, 0 outlet, ``1 << k``
    the steepest drop ``(z - z_k) / dist[k]`` (ties: the lowest ``k``), else :data:`FLAT`."""
    R, C = zp.shape
    for r in range(1, R - 1):
        for c in range(1, C - 1):
            z = zp[r, c]
            if np.isnan(z):
                code[r, c] = 255
                continue
            if has_out and outp[r, c] != 0:
                code[r, c] = 0
                continue
            best = 0.0
            bk = -1
            boundary = False
            for k in range(0, 8, step):
                zn = zp[r + DR[k], c + DC[k]]
                if np.isnan(zn):
                    boundary = True
                    continue
                drop = (np.float64(z) - np.float64(zn)) / dist[k]
                if drop > best:
                    best = drop
                    bk = k
            if bk >= 0:
                code[r, c] = np.uint8(1 << bk)
            elif edge_outlets and boundary:
                code[r, c] = 0
            else:
                code[r, c] = 254


@numba.njit(cache=True, nogil=True)
def _bfs_cpu(code, seed_r, seed_c, seed_d, r0, r1, c0, c1, step, dist, queue):
    """Multi-source BFS over the window's :data:`FLAT` cells from seeds sorted by distance."""
    head = 0
    tail = 0
    si = 0
    ns = seed_d.shape[0]
    while si < ns or head < tail:
        if head < tail and (si >= ns or dist[queue[head] // code.shape[1],
                                              queue[head] % code.shape[1]] <= seed_d[si]):
            cell = queue[head]
            head += 1
            r = cell // code.shape[1]
            c = cell % code.shape[1]
        else:
            r = seed_r[si]
            c = seed_c[si]
            d0 = seed_d[si]
            si += 1
            if dist[r, c] < d0:
                continue  # reached earlier by a shorter path: expanded then
        d = dist[r, c] + 1
        for k in range(0, 8, step):
            nr = r + DR[k]
            nc = c + DC[k]
            if nr < r0 or nr >= r1 or nc < c0 or nc >= c1:
                continue
            if code[nr, nc] != 254 or dist[nr, nc] <= d:
                continue
            dist[nr, nc] = d
            queue[tail] = nr * code.shape[1] + nc
            tail += 1


@numba.njit(cache=True, nogil=True)
def flat_distances_cpu(zp, code, halo_a, halo_t, step, away, towards):
    """BFS distances in the interior's flats: ``away`` from higher terrain, ``towards``
    lower (a draining cell of the flat's elevation), seeded also by the halo ring's
    ``halo_a``/``halo_t``; :data:`INF` where unreached."""
    R, C = zp.shape
    queue = np.empty(R * C, np.int64)
    seed_r = np.empty(R * C, np.int64)
    seed_c = np.empty(R * C, np.int64)
    seed_d = np.empty(R * C, np.int32)
    for which in range(2):
        dist = away if which == 0 else towards
        halo = halo_a if which == 0 else halo_t
        dist[:, :] = INF
        n = 0
        for r in range(1, R - 1):
            for c in range(1, C - 1):
                if code[r, c] != 254:
                    continue
                if not (2 <= r < R - 2 and 2 <= c < C - 2):  # the halo ring
                    if halo[r, c] < INF:
                        seed_r[n] = r
                        seed_c[n] = c
                        seed_d[n] = halo[r, c]
                        dist[r, c] = halo[r, c]
                        n += 1
                    continue
                z = zp[r, c]
                for k in range(0, 8, step):
                    zn = zp[r + DR[k], c + DC[k]]
                    cn = code[r + DR[k], c + DC[k]]
                    if (which == 0 and zn > z) or (which == 1 and cn != 254 and cn != 255
                                                   and zn == z):
                        seed_r[n] = r
                        seed_c[n] = c
                        seed_d[n] = 1
                        dist[r, c] = 1
                        n += 1
                        break
        order = np.argsort(seed_d[:n], kind="mergesort")
        _bfs_cpu(code, seed_r[order], seed_c[order], seed_d[order], 2, R - 2, 2, C - 2, step,
                 dist, queue)


@numba.njit(cache=True, nogil=True)
def flat_labels_cpu(code, away, step, labels):
    """Label the interior's flats (row-major); returns each label's largest finite ``away``."""
    R, C = code.shape
    labels[:, :] = 0
    queue = np.empty(R * C, np.int64)
    maxa = [np.int32(0)]
    n = 0
    for r0 in range(2, R - 2):
        for c0 in range(2, C - 2):
            if code[r0, c0] != 254 or labels[r0, c0] != 0:
                continue
            n += 1
            labels[r0, c0] = n
            best = np.int32(0)
            head = 0
            tail = 1
            queue[0] = r0 * C + c0
            while head < tail:
                r = queue[head] // C
                c = queue[head] % C
                head += 1
                a = away[r, c]
                if a < INF and a > best:
                    best = a
                for k in range(0, 8, step):
                    nr = r + DR[k]
                    nc = c + DC[k]
                    if nr < 2 or nr >= R - 2 or nc < 2 or nc >= C - 2:
                        continue
                    if code[nr, nc] == 254 and labels[nr, nc] == 0:
                        labels[nr, nc] = n
                        queue[tail] = nr * C + nc
                        tail += 1
            maxa.append(best)
    return np.asarray(maxa)


@numba.njit(cache=True, nogil=True, inline="always")
def _mask(a, t, h):
    """Barnes et al.'s combined gradient: ``2 t + (h - a)`` (0 for ``a`` unreached)."""
    return np.int64(2) * t + (np.int64(h) - a if a < INF else 0)


@numba.njit(cache=True, nogil=True)
def flat_directions_cpu(zp, code, away, towards, labels, height, step, out):
    """Directions of the interior's flat cells into ``out``: towards the least :func:`_mask`
    in the flat, a drain lowest (ties: cardinal first, then the lowest ``k``); 0 where the
    flat has no drain. ``height[label]``: the whole flat's largest ``away``."""
    R, C = code.shape
    for r in range(2, R - 2):
        for c in range(2, C - 2):
            if code[r, c] != 254:
                continue
            t = towards[r, c]
            if t >= INF:
                out[r, c] = 0
                continue
            h = height[labels[r, c]]
            best = _mask(away[r, c], t, h)
            bk = -1
            bcard = False
            for k in range(0, 8, step):
                nr = r + DR[k]
                nc = c + DC[k]
                cn = code[nr, nc]
                if cn == 254:
                    m = _mask(away[nr, nc], towards[nr, nc], h)
                elif cn != 255 and zp[nr, nc] == zp[r, c]:
                    m = np.int64(-1)
                else:
                    continue
                card = k % 2 == 0
                if m < best or (m == best and bk >= 0 and card and not bcard):
                    best = m
                    bk = k
                    bcard = card
            # bk >= 0 always: a BFS parent lies lower (Barnes et al., 2014, section 2.4)
            out[r, c] = 0 if bk < 0 else np.uint8(1 << bk)


@numba.njit(cache=True, nogil=True)
def accumulate_cpu(dp, weights, has_w, ext, acc, order):
    """Accumulation of ``dp``'s interior (inflows summed in code order, the halo's from
    ``ext``) in Kahn's order, written to ``order``. Returns ``(cells done, error)``: error 1
    for a direction to nodata or off the grid; fewer cells done: a cycle."""
    R, C = dp.shape
    indeg = np.zeros((R, C), np.uint8)
    err = 0
    for r in range(1, R - 1):
        for c in range(1, C - 1):
            v = dp[r, c]
            if v == 0 or v == 255:
                continue
            k = CODE_K[v]
            if k < 0:
                err = 1
                continue
            nr = r + DR[k]
            nc = c + DC[k]
            if dp[nr, nc] == 255:
                err = 1
            elif 1 <= nr < R - 1 and 1 <= nc < C - 1:
                indeg[nr, nc] += 1
    stack = np.empty(R * C, np.int64)
    top = 0
    for r in range(1, R - 1):
        for c in range(1, C - 1):
            if dp[r, c] != 255 and indeg[r, c] == 0:
                stack[top] = r * C + c
                top += 1
    done = 0
    while top > 0:
        top -= 1
        cell = stack[top]
        r = cell // C
        c = cell % C
        s = weights[r - 1, c - 1] if has_w else 1.0
        for k in range(8):
            nr = r + DR[k]
            nc = c + DC[k]
            if dp[nr, nc] == (1 << ((k + 4) & 7)):
                if 1 <= nr < R - 1 and 1 <= nc < C - 1:
                    s += acc[nr, nc]
                else:
                    s += ext[nr, nc]
        acc[r, c] = s
        order[done] = cell
        done += 1
        k = CODE_K[dp[r, c]]
        if k < 0:  # an outlet (or a code that is no direction: an error already)
            continue
        nr = r + DR[k]
        nc = c + DC[k]
        if 1 <= nr < R - 1 and 1 <= nc < C - 1 and dp[nr, nc] != 255:
            indeg[nr, nc] -= 1
            if indeg[nr, nc] == 0:
                stack[top] = nr * C + nc
                top += 1
    return done, err


@numba.njit(cache=True, nogil=True)
def exits_cpu(dp, order, done, out_index, exit_):
    """Each interior cell's out-edge (``out_index``) leaving the block; -1: ends inside."""
    R, C = dp.shape
    for i in range(done - 1, -1, -1):
        cell = order[i]
        r = cell // C
        c = cell % C
        v = dp[r, c]
        if out_index[r, c] >= 0:
            exit_[r, c] = out_index[r, c]
        elif v == 0:
            exit_[r, c] = -1
        else:
            k = CODE_K[v]
            exit_[r, c] = exit_[r + DR[k], c + DC[k]]


@numba.njit(cache=True, nogil=True)
def resolve_edges_cpu(in_exit, in_src, in_given, out_local, out_val, in_val):
    """Values of a node's boundary edges: ``out_val[o] = out_local[o] + sum of in_val over
    the in-edges leaving by o``, ``in_val[i]`` given or the out-edge ``in_src[i]``'s, in
    Kahn's order. Returns the out-edges resolved (fewer than all: a cycle)."""
    no = out_local.shape[0]
    ni = in_exit.shape[0]
    indeg = np.zeros(no, np.int64)
    feeds = np.full(no, -1, np.int64)
    for o in range(no):
        out_val[o] = out_local[o]
    for i in range(ni):
        if in_src[i] >= 0:
            feeds[in_src[i]] = i
            if in_exit[i] >= 0:
                indeg[in_exit[i]] += 1
        else:
            in_val[i] = in_given[i]
    for i in range(ni):
        if in_src[i] < 0 and in_exit[i] >= 0:
            out_val[in_exit[i]] += in_val[i]
    stack = np.empty(no, np.int64)
    top = 0
    for o in range(no):
        if indeg[o] == 0:
            stack[top] = o
            top += 1
    done = 0
    while top > 0:
        top -= 1
        o = stack[top]
        done += 1
        i = feeds[o]
        if i < 0:
            continue
        in_val[i] = out_val[o]
        e = in_exit[i]
        if e >= 0:
            out_val[e] += in_val[i]
            indeg[e] -= 1
            if indeg[e] == 0:
                stack[top] = e
                top += 1
    return done


@numba.njit(cache=True, nogil=True)
def chain_exits_cpu(in_exit, in_src, out_external, node_exit):
    """Each in-edge's external out-edge (-1: ends inside) into ``node_exit``; False: a cycle."""
    ni = in_exit.shape[0]
    no = out_external.shape[0]
    feeds = np.full(no, -1, np.int64)
    for i in range(ni):
        if in_src[i] >= 0:
            feeds[in_src[i]] = i
    memo = np.full(no, -2, np.int64)
    path = np.empty(no + 1, np.int64)
    ok = True
    for o0 in range(no):
        if memo[o0] != -2:
            continue
        n = 0
        o = o0
        while True:
            if memo[o] != -2:
                res = memo[o]
                break
            if out_external[o]:
                res = o
                break
            path[n] = o
            n += 1
            j = feeds[o]
            e = in_exit[j] if j >= 0 else -1
            if e < 0:
                res = -1
                break
            o = e
            if n > no:
                ok = False
                res = -1
                break
        for q in range(n):
            memo[path[q]] = res
        if out_external[o0]:
            memo[o0] = o0
    for i in range(ni):
        node_exit[i] = -1 if in_exit[i] < 0 else memo[in_exit[i]]
    return ok


@numba.njit(cache=True, nogil=True)
def union_max_cpu(parent, best, us, vs):
    """Union ``us[i]`` with ``vs[i]``, then give every element its set's largest ``best``."""
    for i in range(us.shape[0]):
        a = _find(parent, us[i])
        b = _find(parent, vs[i])
        if a != b:
            if a < b:
                parent[b] = a
            else:
                parent[a] = b
    n = parent.shape[0]
    for x in range(n):
        r = _find(parent, x)
        if best[x] > best[r]:
            best[r] = best[x]
    for x in range(n):
        best[x] = best[_find(parent, x)]
