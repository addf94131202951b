"""The CPU kernels (Numba) of the blocked SSSP (:mod:`terrain.grid.sssp_blocked`) that the
in-core kernels (:mod:`terrain.grid._sssp_cpu`) do not provide. CPU only: the blocked
algorithm has no GPU path, so these have no CUDA twins.

:func:`tight_labels_buckets_cpu` is the label stage's solve where every arc costs more than
zero: the least fixed point of the tight-arc label propagation with the distances final
(what :func:`terrain.grid._sssp_cpu.sssp_cpu` computes with ``fixed``), in the order of a
bucket queue instead of a binary heap. Every tight arc climbs at least one bucket (buckets
are half the cheapest arc wide), so a cell's tight predecessors are all in earlier buckets:
its label is final when its bucket comes, each cell is settled once per solve, and the
queue costs O(1) a cell where the heap costs O(log n) (about half the stage's time).

:func:`window_inner_cpu` fills a block's cells of its window (elevation, friction, distance,
label) in one pass, where NumPy took a pass (and a fresh array) per step.
"""

import math

import numba
import numpy as np

from ._sssp_cpu import _grown, _prefetch
from ._costs_cpu import arc_cost

__all__ = ["tight_labels_buckets_cpu", "window_inner_cpu"]


@numba.njit(cache=True, nogil=True)
def tight_labels_buckets_cpu(z, f, has_f, model, lengths, offs, codes, dist, label, seeds,
                             seed_dist, seed_label, inv_width, nbuckets):
    """Labels over tight arcs with the distances final, in place on ``label``.

    ``dist``: the final distances on the padded flat window (-inf at non-vertices and at
    unreached cells; never changed); ``label``: int64 ``alloc << 32 | hops`` (max int64 =
    none), lowered where a tight arc gives a smaller one. ``seeds`` (flat cells, their
    distance and label) count where their distance is the cell's and their label smaller.
    ``inv_width`` and ``nbuckets`` as :func:`terrain.grid._sssp_cpu.sssp_buckets_cpu`'s
    (:func:`terrain.grid.sssp.bucket_plan`). Returns the number of cells settled.
    """
    mask = nbuckets - 1
    heads = np.full(nbuckets, -1, np.int32)
    pcell = np.empty(1 << 16, np.int32)
    pnext = np.empty(1 << 16, np.int32)
    free = -1
    used = 0
    live = 0
    cur = np.int64(1) << 62
    for s in range(seeds.size):
        c = seeds[s]
        d0 = seed_dist[s]
        l0 = seed_label[s]
        if not (d0 > -math.inf) or d0 != dist[c] or l0 >= label[c]:
            continue
        label[c] = l0
        b = np.int64(d0 * inv_width)
        cur = min(cur, b)
        if used == pcell.shape[0]:
            pcell = _grown(pcell, used)
            pnext = _grown(pnext, used)
        e = used
        used += 1
        pcell[e] = c
        pnext[e] = heads[b & mask]
        heads[b & mask] = e
        live += 1
    nk = codes.size
    offj = np.empty(nk, np.int64)
    for j in range(nk):
        offj[j] = offs[codes[j]]
    row = offs[2] - offs[0] + 1  # the padded row width
    one = np.float32(1.0)
    settled = 0
    while live > 0:
        slot = cur & mask
        e = heads[slot]
        if e < 0:
            cur += 1
            continue
        en = pnext[e]
        heads[slot] = en
        u = pcell[e]
        if en >= 0:  # the next cell's neighbourhood, ahead of time
            un = pcell[en]
            _prefetch(dist, un - row)
            _prefetch(dist, un)
            _prefetch(dist, un + row)
            _prefetch(label, un)
            if has_f:
                _prefetch(f, un - row)
                _prefetch(f, un)
                _prefetch(f, un + row)
            if model != 1:
                _prefetch(z, un)
        pnext[e] = free
        free = e
        live -= 1
        lab = label[u]
        if lab < 0:
            continue  # settled already (a cell lowered twice is queued twice)
        label[u] = -1 - lab  # settled mark: no tight arc leads back into a settled cell
        settled += 1
        d = dist[u]
        zu = z[u] if model != 1 else one
        fu = f[u] if has_f else one
        nlab = lab + 1
        for j in range(nk):
            v = u + offj[j]
            dv = dist[v]
            if dv <= d:
                continue  # not a vertex (-inf), or no tight arc: every arc costs more than 0
            w = arc_cost(zu, z[v] if model != 1 else one, fu, f[v] if has_f else one,
                         codes[j], model, lengths)
            if d + w != dv or nlab >= label[v]:
                continue
            label[v] = nlab
            b = np.int64(dv * inv_width)
            if free >= 0:
                e = free
                free = pnext[e]
            else:
                if used == pcell.shape[0]:
                    pcell = _grown(pcell, used)
                    pnext = _grown(pnext, used)
                e = used
                used += 1
            pcell[e] = v
            pnext[e] = heads[b & mask]
            heads[b & mask] = e
            live += 1
    for i in range(label.size):  # settled marks off
        if label[i] < 0:
            label[i] = -1 - label[i]
    return settled


@numba.njit(cache=True, nogil=True)
def window_inner_cpu(z, f, has_f, state_d, has_d, state_l, has_l, labels, off, width, zp, fp,
                     dist, label):
    """The block's cells of its padded flat window (``off`` rows and columns of halo and
    frame before them, ``width`` cells a row): ``zp`` and ``fp`` (``has_f``) copy ``z`` and
    ``f``; ``dist`` is -inf at non-vertices, else the state (``has_d``) or, without one, +inf
    (``labels`` False: the distance stage) or -inf (``labels``: no state is no distance);
    with ``labels`` a non-finite state distance is -inf (no tight arc into the cell) and the
    labels are the state (``has_l``) or none (max int64), else all 0."""
    th, tw = z.shape
    none = np.iinfo(np.int64).max
    empty = -math.inf if labels else math.inf
    for r in range(th):
        base = (r + off) * width + off
        for c in range(tw):
            i = base + c
            zv = z[r, c]
            zp[i] = zv
            ok = zv == zv
            if has_f:
                fv = f[r, c]
                fp[i] = fv
                ok = ok and fv == fv
            d = state_d[r, c] if has_d else empty
            if not ok or (labels and not (d > -math.inf and d < math.inf)):
                d = -math.inf
            dist[i] = d
            if labels:
                label[i] = state_l[r, c] if has_l else none
            else:
                label[i] = 0
