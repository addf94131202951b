"""The CPU kernels (Numba) of the in-core grid SSSP: the twins of ``_sssp.cu``'s kernels of
the same names without ``_cpu``; conventions, algorithm and drivers in
:mod:`terrain.grid.sssp`, which imports this module only where a CPU kernel runs (the GPU
path of a command then never imports Numba: 0.1-0.4 s of its start-up on the GPU hosts).
"""

import math

import numba
import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir as llvm_ir
from numba.core import cgutils
from numba.extending import intrinsic

from .costs import arc_cost
from .sssp import _HOPS_MASK

__all__ = ["sssp_cpu", "sssp_buckets_cpu", "backlinks_cpu"]

# opaque pointers from LLVM 15 on
_PREFETCH_NAME = "llvm.prefetch.p0" if llvm_binding.llvm_version_info[0] >= 15 else \
    "llvm.prefetch.p0i8"


@intrinsic
def _prefetch(typingctx, arr, idx):
    """Hint the CPU to bring ``arr[idx]`` into the caches (LLVM's ``prefetch``: read,
    high locality). Numba has no prefetch of its own; the bucket queue knows its next cell
    one settle ahead, and fetching its neighbourhood early saves a third of the time on
    grids larger than the caches."""
    sig = numba.types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]],
                                       wraparound=False)
        i8p = llvm_ir.IntType(8).as_pointer()
        i32 = llvm_ir.IntType(32)
        fnty = llvm_ir.FunctionType(llvm_ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _PREFETCH_NAME)
        builder.call(fn, [builder.bitcast(ptr, i8p), llvm_ir.Constant(i32, 0),
                          llvm_ir.Constant(i32, 3), llvm_ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return sig, codegen


@numba.njit(cache=True, nogil=True, inline="always")
def _less(d1, l1, d2, l2):
    return d1 < d2 or (d1 == d2 and l1 < l2)


@numba.njit(cache=True, nogil=True, inline="always")
def _heap_push(hd, hl, hc, n, d, lab, c):
    """Push ``(d, lab, c)`` on the binary heap ``hd/hl/hc[:n]`` (doubled when full); returns
    the arrays (new ones after a doubling) and the new size."""
    if n == hd.shape[0]:
        hd2 = np.empty(2 * n, np.float64)
        hl2 = np.empty(2 * n, np.int64)
        hc2 = np.empty(2 * n, np.int32)
        hd2[:n] = hd[:n]
        hl2[:n] = hl[:n]
        hc2[:n] = hc[:n]
        hd, hl, hc = hd2, hl2, hc2
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if not _less(d, lab, hd[p], hl[p]):
            break
        hd[i] = hd[p]
        hl[i] = hl[p]
        hc[i] = hc[p]
        i = p
    hd[i] = d
    hl[i] = lab
    hc[i] = c
    return hd, hl, hc, n + 1


@numba.njit(cache=True, nogil=True)
def sssp_cpu(z, f, has_f, model, lengths, offs, codes, dist, label, seeds, seed_dist,
             seed_label, fixed, max_cost):
    """Lexicographic-key Dijkstra on the padded flat grid (in place on ``dist`` and ``label``).

    ``dist``: +inf at vertices, -inf elsewhere (or, with ``fixed``, the final distances with
    -inf at non-vertices and +inf where unreached); ``label``: int64 ``alloc << 32 | hops``
    (max int64 = none). ``seeds`` are flat padded cells with their distance and label.
    ``fixed`` relaxes only tight arcs and never changes a distance. Returns the number of
    cells settled.
    """
    cap = 1024
    hd = np.empty(cap, np.float64)
    hl = np.empty(cap, np.int64)
    hc = np.empty(cap, np.int32)
    n = 0
    for s in range(seeds.size):
        c = seeds[s]
        d0 = seed_dist[s]
        l0 = seed_label[s]
        if not (d0 > -math.inf and d0 <= max_cost):
            continue
        if fixed:
            if d0 != dist[c] or l0 >= label[c]:
                continue
        elif not _less(d0, l0, dist[c], label[c]):
            continue
        dist[c] = d0
        label[c] = l0
        hd, hl, hc, n = _heap_push(hd, hl, hc, n, d0, l0, c)
    nk = codes.size
    one = np.float32(1.0)
    settled = 0
    while n > 0:
        d = hd[0]
        lab = hl[0]
        u = hc[0]
        # pop: move the last entry down from the root
        n -= 1
        if n > 0:
            xd = hd[n]
            xl = hl[n]
            xc = hc[n]
            i = 0
            while True:
                ch = 2 * i + 1
                if ch >= n:
                    break
                if ch + 1 < n and _less(hd[ch + 1], hl[ch + 1], hd[ch], hl[ch]):
                    ch += 1
                if not _less(hd[ch], hl[ch], xd, xl):
                    break
                hd[i] = hd[ch]
                hl[i] = hl[ch]
                hc[i] = hc[ch]
                i = ch
            hd[i] = xd
            hl[i] = xl
            hc[i] = xc
        if d != dist[u] or lab != label[u]:
            continue  # stale entry
        settled += 1
        zu = z[u]
        fu = f[u] if has_f else one
        nlab = lab + 1
        for j in range(nk):
            k = codes[j]
            v = u + offs[k]
            dv = dist[v]
            if model == 2 and dv < d:
                continue  # settled (or not a vertex): spare the exp of tobler
            w = arc_cost(zu, z[v], fu, f[v] if has_f else one, k, model, lengths)
            nd = d + w
            if fixed:
                if nd != dv or nlab >= label[v]:
                    continue
            else:
                if nd > max_cost or not _less(nd, nlab, dv, label[v]):
                    continue
            dist[v] = nd
            label[v] = nlab
            hd, hl, hc, n = _heap_push(hd, hl, hc, n, nd, nlab, v)
    return settled


@numba.njit(cache=True, nogil=True)
def _grown(a, used):
    """A copy of ``a[:used]`` in an array twice as long as ``a`` (growth of the bucket
    queue's arrays)."""
    a2 = np.empty(2 * a.shape[0], a.dtype)
    a2[:used] = a[:used]
    return a2


@numba.njit(cache=True, nogil=True)
def sssp_buckets_cpu(z, f, has_f, model, lengths, offs, codes, dist, label, seeds, seed_dist,
                     seed_label, max_cost, inv_width, nbuckets, backlink):
    """Dijkstra with a circular array of buckets (Dinitz): exact when every arc costs at least
    ``2 / inv_width``, so that no cell of the current bucket can improve another one of it.

    Same arguments and results as :func:`sssp_cpu` (``fixed`` is not supported), plus the
    backlinks: since every arc costs more than zero, each tight predecessor ``u`` of a cell
    ``v`` is settled before ``v`` and relaxes it with ``v``'s final label, so keeping the
    lowest arc code among the relaxations that set or tie that label (``backlink``, padded
    uint8, written at reached cells only) gives :func:`backlinks_cpu`'s code without a second
    pass. Settled cells keep ``label = -1 - label`` (:func:`_outputs_cpu` reads through it).
    A cell's bucket is ``int(distance * inv_width)``; ``nbuckets`` (a power of two) must
    exceed the span of live buckets (largest arc cost and start-cost spread over the bucket
    width). ``z`` is not read under ``friction`` (a 1-cell dummy will do).
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
        if not (d0 > -math.inf and d0 <= max_cost):
            continue
        if not _less(d0, l0, dist[c], label[c]):
            continue
        dist[c] = d0
        label[c] = l0
        backlink[c] = 0
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
    # per arc j: the neighbour offset, and the backlink code of the reverse arc (v -> u) + 1
    offj = np.empty(nk, np.int64)
    backj = np.empty(nk, np.uint8)
    for j in range(nk):
        k = codes[j]
        offj[j] = offs[k]
        backj[j] = ((k & 8) | ((k + 4) & 7)) + 1
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
        if en >= 0:  # the next cell's neighbourhood and the entry after it, ahead of time
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
            en2 = pnext[en]
            if en2 >= 0:
                _prefetch(pcell, en2)
                _prefetch(pnext, en2)
        pnext[e] = free
        free = e
        live -= 1
        d = dist[u]
        lab = label[u]
        if lab < 0 or np.int64(d * inv_width) != cur:
            continue  # settled already, or stale: improved into a later bucket's slot
        label[u] = -1 - lab  # settled mark
        settled += 1
        zu = z[u] if model != 1 else one
        fu = f[u] if has_f else one
        nlab = lab + 1
        for j in range(nk):
            v = u + offj[j]
            dv = dist[v]
            if dv <= d:
                continue  # settled, or not a vertex (-inf): every arc costs more than 0
            w = arc_cost(zu, z[v] if model != 1 else one, fu, f[v] if has_f else one,
                         codes[j], model, lengths)
            nd = d + w
            if not (nd <= max_cost and nd <= dv):
                continue
            if nd == dv:
                lv = label[v]
                if nlab > lv:
                    continue
                if nlab == lv:  # another tight predecessor with the same label
                    if backj[j] < backlink[v]:
                        backlink[v] = backj[j]
                    continue
            dist[v] = nd
            label[v] = nlab
            backlink[v] = backj[j]
            b = np.int64(nd * inv_width)
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
    return settled


@numba.njit(cache=True, nogil=True, parallel=True)
def _init_padded_cpu(z, f, has_f, has_z, pad, zp, fp, dist, label):
    """Copy ``z`` (if ``has_z``; and ``f``) into NaN-framed flat arrays; distance +inf at
    vertices, -inf elsewhere; labels 'none' (max int64)."""
    rows, cols = z.shape
    width = cols + 2 * pad
    none = np.iinfo(np.int64).max
    for pr in numba.prange(rows + 2 * pad):
        r = pr - pad
        for pc in range(width):
            c = pc - pad
            i = pr * width + pc
            label[i] = none
            if 0 <= r < rows and 0 <= c < cols:
                zv = z[r, c]
                if has_z:
                    zp[i] = zv
                ok = zv == zv
                if has_f:
                    fv = f[r, c]
                    fp[i] = fv
                    ok = ok and fv == fv
                dist[i] = math.inf if ok else -math.inf
            else:
                if has_z:
                    zp[i] = np.float32(np.nan)
                if has_f:
                    fp[i] = np.float32(np.nan)
                dist[i] = -math.inf


@numba.njit(cache=True, nogil=True, inline="always")
def _put_cell(r, c, dv, lv, distance, allocation, hops, backlink):
    """Cell ``(r, c)``'s distance, allocation and hops from its distance ``dv`` and label
    ``lv``, or the unreached marks (NaN, -1, -1 and backlink 255) when ``dv`` is not finite
    (-inf: not a vertex, +inf: not reached). Returns whether the cell was reached."""
    if not (dv > -math.inf and dv < math.inf):
        backlink[r, c] = 255
        distance[r, c] = np.nan
        allocation[r, c] = -1
        hops[r, c] = -1
        return False
    distance[r, c] = dv
    allocation[r, c] = np.int32(lv >> 32)
    hops[r, c] = np.int32(lv & 0xFFFFFFFF)
    return True


@numba.njit(cache=True, nogil=True, parallel=True)
def backlinks_cpu(z, f, has_f, model, lengths, offs, codes, dist, label, rows, cols, pad,
                  backlink, distance, allocation, hops):
    """Backlink of every cell of the unpadded grid, and its distance (NaN where unreached),
    allocation and hops (-1 where unreached): one pass over the padded labels."""
    width = cols + 2 * pad
    nk = codes.size
    one = np.float32(1.0)
    for r in numba.prange(rows):
        base = (r + pad) * width + pad
        for c in range(cols):
            v = base + c
            lv = label[v]
            dv = dist[v]
            if not _put_cell(r, c, dv, lv, distance, allocation, hops, backlink):
                continue
            if (lv & _HOPS_MASK) == 0:
                backlink[r, c] = 0
                continue
            want = lv - 1
            code = 255
            zv = z[v]
            fv = f[v] if has_f else one
            for j in range(nk):  # codes are increasing
                k = codes[j]
                u = v + offs[k]
                if label[u] != want:
                    continue
                ku = (k & 8) | ((k + 4) & 7)  # the reverse arc u -> v
                du = dist[u]
                if du + arc_cost(z[u], zv, f[u] if has_f else one, fv, ku, model, lengths) == dv:
                    code = k + 1
                    break
            backlink[r, c] = code


@numba.njit(cache=True, nogil=True, parallel=True)
def _outputs_cpu(dist, label, backlink_p, rows, cols, pad, backlink, distance, allocation, hops):
    """The output arrays from :func:`sssp_buckets_cpu`'s padded state (its backlinks, and
    labels with settled marks) in one parallel pass."""
    width = cols + 2 * pad
    for r in numba.prange(rows):
        base = (r + pad) * width + pad
        for c in range(cols):
            v = base + c
            lv = label[v]
            if lv < 0:  # a settled mark
                lv = -1 - lv
            if _put_cell(r, c, dist[v], lv, distance, allocation, hops, backlink):
                backlink[r, c] = backlink_p[v]



@numba.njit(cache=True, nogil=True, parallel=True)
def _max_abs_slope(zp, offs, codes, lengths, rows, cols, pad):
    """Largest ``|z_v - z_u| / L_k`` over the arcs between vertices (padded flat grid)."""
    width = cols + 2 * pad
    best = np.zeros(rows, np.float64)
    for r in numba.prange(rows):
        m = 0.0
        base = (r + pad) * width + pad
        for c in range(cols):
            u = base + c
            zu = np.float64(zp[u])
            if zu != zu:
                continue
            for j in range(codes.size):
                k = codes[j]
                s = abs(np.float64(zp[u + offs[k]]) - zu) / lengths[k]
                if s > m:
                    m = s
        best[r] = m
    return best.max()


@numba.njit(cache=True, nogil=True)
def _touch_pages(buf):
    """Write a zero into every page of the byte array ``buf`` (its page faults, now)."""
    for i in range(0, buf.size, 4096):
        buf[i] = 0
