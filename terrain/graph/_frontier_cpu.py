"""Numba CPU twins of the weighted operators: ``_frontier.cu``'s SSSP predecessor kernels,
the heap Dijkstra, and sequential twins of ``_sssp.cu``'s near-far and Crauser loops.

Imported on first use: BFS, the diameter and Dial's Dijkstra run C only, without Numba.
"""

import numba
import numpy as np

__all__ = []


@numba.njit(nogil=True, cache=True, inline="always")
def _is_tight_cpu(du, w, dv):
    """The arc u -> v (weight w) is a predecessor arc: u strictly closer, and tight
    (``is_tight`` in ``_dist.cuh``)."""
    return du < dv and du + w == dv


@numba.njit(nogil=True, cache=True)
def _sssp_parents_cpu(indptr, indices, weights, dist, inf, pred):
    for u in range(dist.shape[0]):
        du = dist[u]
        if du == inf:
            continue
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if _is_tight_cpu(du, weights[e], dist[v]) and u < pred[v]:
                pred[v] = u


@numba.njit(nogil=True, cache=True, parallel=True)
def _sssp_parents_pull_cpu(indptr, indices, weights, dist, inf, pred):
    """Undirected graphs: the same predecessors pulled from each vertex's own sorted row
    (the first tight, strictly closer neighbour is the smallest), in parallel."""
    for v in numba.prange(dist.shape[0]):
        dv = dist[v]
        if dv == inf:
            continue
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            if _is_tight_cpu(dist[u], weights[e], dv):
                pred[v] = u
                break


@numba.njit(nogil=True, cache=True)
def _zero_hop_level_cpu(indptr, indices, weights, dist, hops, level):
    changed = 0
    for u in range(dist.shape[0]):
        if hops[u] != level:
            continue
        du = dist[u]
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if weights[e] == 0 and dist[v] == du and hops[v] < 0:
                hops[v] = level + 1
                changed = 1
    return changed


@numba.njit(nogil=True, cache=True)
def _zero_parents_cpu(indptr, indices, weights, dist, hops, pred):
    for u in range(dist.shape[0]):
        h = hops[u]
        if h < 0:
            continue
        du = dist[u]
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if weights[e] == 0 and dist[v] == du and hops[v] == h + 1 and u < pred[v]:
                pred[v] = u


@numba.njit(nogil=True, cache=True, inline="always")
def _heap_push(keys, vals, size, k, v):
    """Sift ``(k, v)`` up a 4-ary min-heap of ``size`` entries; returns the new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 2
        if keys[parent] <= k:
            break
        keys[i] = keys[parent]
        vals[i] = vals[parent]
        i = parent
    keys[i] = k
    vals[i] = v
    return size + 1


@numba.njit(nogil=True, cache=True, inline="always")
def _heap_pop(keys, vals, size):
    """Remove the root of a 4-ary min-heap of ``size`` entries; returns the new size.

    The hole left at the root moves down along the smallest children until the last entry
    fits (a 4-ary heap: half the depth of a binary one, four keys per cache line)."""
    size -= 1
    k = keys[size]
    v = vals[size]
    i = 0
    while True:
        c = 4 * i + 1
        if c >= size:
            break
        best = c
        bk = keys[c]
        last = min(c + 4, size)
        for j in range(c + 1, last):
            if keys[j] < bk:
                bk = keys[j]
                best = j
        if bk >= k:
            break
        keys[i] = bk
        vals[i] = vals[best]
        i = best
    keys[i] = k
    vals[i] = v
    return size


@numba.njit(nogil=True, cache=True)
def _dijkstra_cpu(indptr, indices, weights, sources, dist, inf):
    """Multi-source Dijkstra into ``dist`` (pre-filled with ``inf``); returns the settled
    count. An entry is stale when its key exceeds the vertex's distance (keys of one vertex
    strictly decrease, so exactly one entry per vertex is current)."""
    cap = indices.shape[0] + sources.shape[0] + 1
    keys = np.empty(cap, dist.dtype)
    vals = np.empty(cap, indices.dtype)
    size = 0
    for i in range(sources.shape[0]):
        s = sources[i]
        if dist[s] != 0:
            dist[s] = 0
            size = _heap_push(keys, vals, size, dist[s], s)
    settled = 0
    while size > 0:
        k = keys[0]
        u = vals[0]
        size = _heap_pop(keys, vals, size)
        if k > dist[u]:
            continue
        settled += 1
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            nd = k + weights[e]
            if nd < dist[v]:
                dist[v] = nd
                size = _heap_push(keys, vals, size, nd, v)
    return settled


@numba.njit(nogil=True, cache=True)
def _seed_sources(sources, dist, queue):
    """Distance 0 at every source, each queued once (a repeated source is skipped); returns
    the queue's length. The CPU twins' common start."""
    count = 0
    for i in range(sources.shape[0]):
        s = sources[i]
        if dist[s] != 0:
            dist[s] = 0
            queue[count] = s
            count += 1
    return count


@numba.njit(nogil=True, cache=True)
def _nearfar_cpu(indptr, indices, weights, sources, dist, delta, inf, tiny):
    """Near-far delta-stepping into ``dist`` (pre-filled with ``inf``): the twin of
    ``nearfar_step``. ``tiny`` (0 for integers) is the relative step that moves a real
    threshold past ``thr`` when ``thr + delta`` rounds back to it. Returns the steps run."""
    n = dist.shape[0]
    relaxed_at = np.full(n, inf, dist.dtype)
    stamp = np.full(n, -1, np.int64)
    in_far = np.zeros(n, np.uint8)
    near = np.empty(max(n, 1), indices.dtype)
    nxt = np.empty(max(n, 1), indices.dtype)
    far = np.empty(max(n, 1), indices.dtype)
    far2 = np.empty(max(n, 1), indices.dtype)
    nn = _seed_sources(sources, dist, near)
    nf = 0
    thr = dist.dtype.type(delta)
    step = 0
    while nn > 0 or nf > 0:
        cnt = 0
        if nn > 0:                                       # relax the near queue
            for i in range(nn):
                u = near[i]
                du = dist[u]
                if not du < relaxed_at[u]:
                    continue
                relaxed_at[u] = du
                for e in range(indptr[u], indptr[u + 1]):
                    v = indices[e]
                    nd = du + weights[e]
                    if nd < dist[v]:
                        dist[v] = nd
                        if nd < thr:
                            if stamp[v] != step:
                                stamp[v] = step
                                nxt[cnt] = v
                                cnt += 1
                        elif in_far[v] == 0:
                            in_far[v] = 1
                            far[nf] = v
                            nf += 1
        else:                                            # split the far pile
            thr_new = thr + delta
            if not thr_new > thr:
                thr_new = thr + thr * tiny
            low = inf
            nf2 = 0
            for i in range(nf):
                v = far[i]
                d = dist[v]
                if d < thr_new:
                    in_far[v] = 0
                    if not d < thr:
                        nxt[cnt] = v
                        cnt += 1
                else:
                    far2[nf2] = v
                    nf2 += 1
                    low = min(low, d)
            far, far2 = far2, far
            nf = nf2
            thr = thr_new if cnt > 0 else low
        near, nxt = nxt, near
        nn = cnt
        step += 1
    return step


@numba.njit(nogil=True, cache=True)
def _crauser_cpu(indptr, indices, weights, min_in, min_out, sources, dist, inf):
    """Crauser's IN/OUT settling into ``dist`` (pre-filled with ``inf``): the twin of
    ``crauser_bounds`` + ``crauser_settle``. Returns the iterations run."""
    n = dist.shape[0]
    settled = np.zeros(n, np.uint8)
    fringe = np.empty(max(n, 1), indices.dtype)
    nxt = np.empty(max(n, 1), indices.dtype)
    nf = _seed_sources(sources, dist, fringe)
    iterations = 0
    while nf > 0:
        low = inf
        out_bound = inf
        for i in range(nf):
            v = fringe[i]
            low = min(low, dist[v])
            out_bound = min(out_bound, dist[v] + min_out[v])
        cnt = 0
        for i in range(nf):
            v = fringe[i]
            d = dist[v]
            if d <= low + min_in[v] or d <= out_bound:
                settled[v] = 1
                for e in range(indptr[v], indptr[v + 1]):
                    x = indices[e]
                    if settled[x]:
                        continue
                    nd = d + weights[e]
                    if nd < dist[x]:
                        if dist[x] == inf:
                            nxt[cnt] = x
                            cnt += 1
                        dist[x] = nd
            else:
                nxt[cnt] = v
                cnt += 1
        fringe, nxt = nxt, fringe
        nf = cnt
        iterations += 1
    return iterations
