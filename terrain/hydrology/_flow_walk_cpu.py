"""The CPU kernels (Numba) of the tiled accumulation's quadtree walk: a node's boundary
edges resolved and chained, flats joined across groups. The blocks' kernels are C
(:mod:`terrain.hydrology._flow_cpu`); these run on the walk's small per-node arrays.
"""

import numba
import numpy as np

from ._fill_cpu import _find

__all__ = ["resolve_edges_cpu", "chain_exits_cpu", "union_max_cpu"]


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
