"""Numba CPU twins of ``_sssp.cu``'s near-far and Crauser loops (sequential).

Imported on first use: BFS, the diameter, Dijkstra (Dial's buckets or the radix heap) and the
SSSP predecessors run C only, without Numba.
"""

import numba
import numpy as np

from ..native.flag import stopped

__all__ = []


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
def _nearfar_cpu(indptr, indices, weights, sources, dist, delta, inf, tiny, stop):
    """Near-far delta-stepping into ``dist`` (pre-filled with ``inf``): the twin of
    ``nearfar_step``. ``tiny`` (0 for integers) is the relative step that moves a real
    threshold past ``thr`` when ``thr + delta`` rounds back to it. Returns the steps run,
    or -1 once ``stop[0]`` is set (polled every 65536 vertices taken from the queues:
    :func:`terrain.native.interruptible`)."""
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
    taken = 0
    while nn > 0 or nf > 0:
        cnt = 0
        if nn > 0:                                       # relax the near queue
            for i in range(nn):
                taken += 1
                if (taken & 0xFFFF) == 0 and stopped(stop):
                    return -1
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
                taken += 1
                if (taken & 0xFFFF) == 0 and stopped(stop):
                    return -1
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
def _crauser_cpu(indptr, indices, weights, min_in, min_out, sources, dist, inf, stop):
    """Crauser's IN/OUT settling into ``dist`` (pre-filled with ``inf``): the twin of
    ``crauser_bounds`` + ``crauser_settle``. Returns the iterations run, or -1 once
    ``stop[0]`` is set (polled every 65536 fringe vertices:
    :func:`terrain.native.interruptible`)."""
    n = dist.shape[0]
    settled = np.zeros(n, np.uint8)
    fringe = np.empty(max(n, 1), indices.dtype)
    nxt = np.empty(max(n, 1), indices.dtype)
    nf = _seed_sources(sources, dist, fringe)
    iterations = 0
    taken = 0
    while nf > 0:
        low = inf
        out_bound = inf
        for i in range(nf):
            taken += 1
            if (taken & 0xFFFF) == 0 and stopped(stop):
                return -1
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
