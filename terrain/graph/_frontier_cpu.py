"""Numba CPU twins of the bit-parallel BFS and the SSSP predecessor kernels of
``_frontier.cu`` (``bitwise_*``, ``sssp_parents``, ``zero_hop_level``, ``zero_parents``).

Kept apart from :mod:`terrain.graph.frontier`, which imports this module on first use: a
process that runs one plain BFS (``terrain bfs``) runs only the C operators of
``terrain/native/kernels.c`` and never imports Numba (see :mod:`terrain.graph._native`).
"""

import numba
import numpy as np

__all__ = []


@numba.njit(nogil=True, cache=True, inline="always")
def _bitwise_pull_vertex(indptr, indices, frontier, seen, nxt, full, v):
    s = seen[v]
    acc = np.uint64(0)
    if s != full:
        for e in range(indptr[v], indptr[v + 1]):
            acc |= frontier[indices[e]]
            if (acc | s) == full:
                break
    nxt[v] = acc & ~s


@numba.njit(nogil=True, cache=True)
def _bitwise_pull_cpu(indptr, indices, frontier, seen, nxt, full):
    for v in range(seen.shape[0]):
        _bitwise_pull_vertex(indptr, indices, frontier, seen, nxt, full, v)


@numba.njit(nogil=True, cache=True, parallel=True)
def _bitwise_pull_parallel_cpu(indptr, indices, frontier, seen, nxt, full):
    """The same, vertices in parallel (big graphs: the thread pool costs ~ms per call)."""
    for v in numba.prange(seen.shape[0]):
        _bitwise_pull_vertex(indptr, indices, frontier, seen, nxt, full, v)


@numba.njit(nogil=True, cache=True)
def _bitwise_seed_cpu(sources, seen, frontier, ecc, lower, upper, with_bounds):
    for i in range(sources.shape[0]):
        s = sources[i]
        seen[s] = frontier[s] = np.uint64(1) << np.uint64(i)
        if with_bounds:
            lower[s] = max(lower[s], ecc[i])
            upper[s] = min(upper[s], ecc[i])


@numba.njit(nogil=True, cache=True)
def _bitwise_finish_cpu(seen, frontier, nxt, level, ecc, lower, upper, with_bounds):
    acc = np.uint64(0)
    one = np.uint64(1)
    pairs = 0
    for v in range(seen.shape[0]):
        fresh = nxt[v]
        frontier[v] = fresh
        if fresh == 0:
            continue
        nxt[v] = 0
        seen[v] |= fresh
        acc |= fresh
        m = fresh
        i = 0
        while m:
            if m & one:
                pairs += 1
                if with_bounds:
                    e = ecc[i]
                    lower[v] = max(lower[v], max(level, e - level))
                    upper[v] = min(upper[v], e + level)
            m >>= one
            i += 1
    return acc, pairs


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
