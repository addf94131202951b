"""Fixed-capacity, allocation-free tournament tree (thesis §3.3.1, §5.4), Numba CPU twin of
``_tournament.cuh`` (same layout, same comparisons).

``2 * cap`` nodes (``cap``: the next power of two >= n): node 1 is the root, node ``p`` has
children ``2p`` and ``2p + 1``, leaf ``i`` is node ``cap + i``; a node holds the smaller of
its children's keys ``(distance, allocation, hops, leaf)``, strict, so the pop order is the
same on every backend. ``tt = (key_d, key_a, key_h, win)``. By hand because Dijkstra needs
decrease-key without allocating in a Numba kernel or a CUDA thread.
"""

import numpy as np
from numba import njit

__all__ = ["tt_alloc", "tt_capacity", "tt_reset", "tt_seed", "tt_lower", "tt_pop", "key_less",
           "INT_INF"]

INT_INF = np.int32(2**31 - 1)


@njit(cache=True)
def tt_capacity(n):
    """Leaves of a tree for ``n`` items: the smallest power of two >= max(n, 1)."""
    cap = 1
    while cap < n:
        cap *= 2
    return cap


@njit(cache=True)
def tt_alloc(n):
    """The arrays of a tree for ``n`` items, not yet reset (kernels allocate once per
    worker and seed or reset per search): ``(key_d, key_a, key_h, win)``."""
    cap = tt_capacity(n)
    return (np.empty(2 * cap, np.float64), np.empty(2 * cap, np.int32),
            np.empty(2 * cap, np.int32), np.empty(2 * cap, np.int32))


@njit(cache=True, inline="always")
def key_less(d1, a1, h1, i1, d2, a2, h2, i2):
    """Lexicographic ``(d, a, h, i) < (d2, a2, h2, i2)``."""
    if d1 != d2:
        return d1 < d2
    if a1 != a2:
        return a1 < a2
    if h1 != h2:
        return h1 < h2
    return i1 < i2


@njit(cache=True)
def tt_reset(key_d, key_a, key_h, win):
    """Empty every leaf (``O(cap)``)."""
    cap = key_d.shape[0] // 2
    for p in range(2 * cap):
        key_d[p] = np.inf
        key_a[p] = INT_INF
        key_h[p] = INT_INF
    for i in range(cap):
        win[cap + i] = i
    for p in range(cap - 1, 0, -1):
        win[p] = win[2 * p]


@njit(cache=True, inline="always")
def tt_lower(key_d, key_a, key_h, win, i, d, a, h):
    """Decrease leaf ``i``'s key to ``(d, a, h)``, climbing only while the new key wins."""
    cap = key_d.shape[0] // 2
    p = cap + i
    key_d[p] = d
    key_a[p] = a
    key_h[p] = h
    while p > 1:
        p >>= 1
        if win[p] != i and not key_less(d, a, h, i, key_d[p], key_a[p], key_h[p], win[p]):
            break
        key_d[p] = d
        key_a[p] = a
        key_h[p] = h
        win[p] = i


@njit(cache=True)
def tt_seed(key_d, key_a, key_h, win, ld, la, lh):
    """Reset the tree, then put in every leaf ``p`` with a finite label ``ld[p]``."""
    tt_reset(key_d, key_a, key_h, win)
    for p in range(ld.shape[0]):
        if ld[p] < np.inf:
            tt_lower(key_d, key_a, key_h, win, p, ld[p], la[p], lh[p])


@njit(cache=True)
def tt_pop(key_d, key_a, key_h, win):
    """Remove the minimum: empty its leaf, propagate, return its index."""
    cap = key_d.shape[0] // 2
    i = win[1]
    p = cap + i
    key_d[p] = np.inf
    key_a[p] = INT_INF
    key_h[p] = INT_INF
    while p > 1:
        p >>= 1
        c = 2 * p
        if key_less(key_d[c + 1], key_a[c + 1], key_h[c + 1], win[c + 1],
                    key_d[c], key_a[c], key_h[c], win[c]):
            c += 1
        key_d[p] = key_d[c]
        key_a[p] = key_a[c]
        key_h[p] = key_h[c]
        win[p] = win[c]
    return i
