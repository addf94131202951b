"""Fixed-capacity, allocation-free tournament tree (thesis §3.3.1, §5.4), Numba CPU twin.

A tournament tree over ``n`` items is a complete binary tree with ``cap`` leaves
(``cap`` = the next power of two >= n) stored in arrays of ``2 * cap`` nodes: node 1 is
the root, node ``p`` has children ``2p`` and ``2p + 1``, leaf ``i`` is node ``cap + i``.
Every node holds a key and the index of the leaf it came from; an internal node holds the
smaller of its two children's keys. Setting a leaf's key propagates to the root in
``log2(cap)`` steps; the minimum is always at the root (``O(1)``). Nothing is allocated
after :func:`tt_new` (the thesis needed that on the GPU, where CUDA threads cannot
allocate; the CUDA twin is ``_tournament.cuh``, same layout and the same comparisons).

Keys are compared lexicographically as ``(distance float64, allocation int32, hops int32,
leaf index)``: the leaf index makes every comparison strict, so the winner, and hence the
pop order, is the same on every backend. An empty leaf has key ``(+inf, INT_MAX, INT_MAX)``.

Why by hand: Dijkstra needs decrease-key on a queue of fixed capacity that Numba (and a
CUDA thread) can use without allocating; ``heapq`` allocates and has no decrease-key.

Arrays (``tt = (key_d, key_a, key_h, win)``):
``key_d`` float64[2cap], ``key_a`` int32[2cap], ``key_h`` int32[2cap], ``win`` int32[2cap].
"""

import numpy as np
from numba import njit

__all__ = ["tt_new", "tt_alloc", "tt_capacity", "tt_reset", "tt_seed", "tt_update", "tt_decrease", "tt_lower", "tt_pop", "tt_empty",
           "tt_top", "key_less", "INT_INF"]

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


def tt_new(n):
    """A tree for ``n`` leaves, all empty: ``(key_d, key_a, key_h, win)``.

    Examples
    --------
    >>> tt = tt_new(3)
    >>> tt_update(*tt, 2, 5.0, 0, 1); tt_update(*tt, 0, 7.0, 0, 0)
    >>> [tt_pop(*tt) for _ in range(2)], bool(tt_empty(*tt))
    ([2, 0], True)
    """
    tt = tt_alloc(max(int(n), 1))
    tt_reset(*tt)
    return tt


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
def _propagate(key_d, key_a, key_h, win, p):
    while p > 1:
        p >>= 1
        lc = 2 * p
        rc = lc + 1
        if key_less(key_d[rc], key_a[rc], key_h[rc], win[rc],
                    key_d[lc], key_a[lc], key_h[lc], win[lc]):
            c = rc
        else:
            c = lc
        key_d[p] = key_d[c]
        key_a[p] = key_a[c]
        key_h[p] = key_h[c]
        win[p] = win[c]


@njit(cache=True)
def tt_update(key_d, key_a, key_h, win, i, d, a, h):
    """Set leaf ``i``'s key to ``(d, a, h)`` and propagate to the root."""
    cap = key_d.shape[0] // 2
    p = cap + i
    key_d[p] = d
    key_a[p] = a
    key_h[p] = h
    _propagate(key_d, key_a, key_h, win, p)


@njit(cache=True)
def tt_seed(key_d, key_a, key_h, win, ld, la, lh):
    """Reset the tree, then put in every leaf ``p`` with a finite label ``ld[p]``."""
    tt_reset(key_d, key_a, key_h, win)
    for p in range(ld.shape[0]):
        if ld[p] < np.inf:
            tt_update(key_d, key_a, key_h, win, p, ld[p], la[p], lh[p])


@njit(cache=True, inline="always")
def tt_lower(key_d, key_a, key_h, win, i, d, a, h):
    """Set leaf ``i``'s key to ``(d, a, h)``, which must not be larger than its key now.

    Climbs only while the new key wins: an ancestor whose winner is another, smaller leaf
    stops the climb (its ancestors do not change either). Dijkstra's decrease-key.
    """
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
def tt_decrease(key_d, key_a, key_h, win, i, d, a, h):
    """Lower leaf ``i``'s key to ``(d, a, h)`` if that is smaller; True when it was."""
    cap = key_d.shape[0] // 2
    p = cap + i
    if key_less(d, a, h, i, key_d[p], key_a[p], key_h[p], i):
        tt_lower(key_d, key_a, key_h, win, i, d, a, h)
        return True
    return False


@njit(cache=True, inline="always")
def tt_empty(key_d, key_a, key_h, win):
    """True when every leaf is empty (the root's distance is +inf)."""
    return key_d[1] == np.inf if key_d.shape[0] > 2 else key_d[1] == np.inf


@njit(cache=True, inline="always")
def tt_top(key_d, key_a, key_h, win):
    """The leaf holding the minimum (the root's winner); check :func:`tt_empty` first."""
    return win[1]


@njit(cache=True)
def tt_pop(key_d, key_a, key_h, win):
    """Remove the minimum: empty its leaf, propagate, return its index."""
    cap = key_d.shape[0] // 2
    i = win[1]
    p = cap + i
    key_d[p] = np.inf
    key_a[p] = INT_INF
    key_h[p] = INT_INF
    _propagate(key_d, key_a, key_h, win, p)
    return i
