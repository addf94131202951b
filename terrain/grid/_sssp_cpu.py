"""The CPU twins (Numba) of the in-core grid SSSP's CUDA kernels (``_sssp.cu``) and
:class:`CpuOps`, the CPU side of :mod:`terrain.grid.sssp`'s kernel table (imported only where
a CPU kernel runs: the GPU path never imports Numba).
"""

import math
import threading
import warnings

import numba
import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir as llvm_ir
from numba.core import cgutils
from numba.extending import intrinsic

from ._sssp_frame import (HOPS_BITS, HOPS_MASK, NO_LABEL, PAD, GridSSSPResult, flat_seeds,
                          offsets, unpad)
from ._costs_cpu import arc_cost
from .costs import TOBLER_A, TOBLER_S0, TOBLER_V0

__all__ = ["CpuOps", "sssp_cpu", "sssp_buckets_cpu", "backlinks_cpu", "bucket_plan",
           "padded_state", "window_inner_cpu", "MAX_BUCKETS"]

# opaque pointers from LLVM 15 on
_PREFETCH_NAME = "llvm.prefetch.p0" if llvm_binding.llvm_version_info[0] >= 15 else \
    "llvm.prefetch.p0i8"


@intrinsic
def _prefetch(typingctx, arr, idx):
    """LLVM's ``prefetch`` of ``arr[idx]`` (Numba has none): the bucket queue fetches its
    next cell's neighbourhood one settle ahead, a third faster on grids beyond the caches."""
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
             seed_label, fixed, max_cost, targets, left, stop):
    """Lexicographic-key Dijkstra on the padded flat grid, in place on ``dist`` (+inf at
    vertices, -inf elsewhere; ``fixed``: final, only tight arcs relaxed) and ``label``: the
    cells settled, or -1 when ``stop[0]`` was set (:func:`_interruptible`). With ``left > 0``
    distinct cells flagged in ``targets``: ends once they are settled and every cell as near
    as the last of them (cells set farther keep provisional distances: :func:`cut_beyond`)."""
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
    bound = math.inf  # the last target's distance, once every target is settled
    while n > 0:
        d = hd[0]
        lab = hl[0]
        u = hc[0]
        if d > bound:
            break
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
        if (settled & 0xFFFF) == 0 and stop[0] != 0:
            return -1
        if left > 0 and targets[u] != 0:
            left -= 1
            if left == 0:
                bound = d
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
                     seed_label, fixed, max_cost, inv_width, nbuckets, backlink, targets,
                     left, stop):
    """Dijkstra with a circular array of buckets (Dinitz): exact when every arc costs at least
    ``2 / inv_width``, so that no cell of the current bucket can improve another one of it.

    As :func:`sssp_cpu`, plus the backlinks in the same pass: every tight predecessor is
    settled first, so the lowest arc code among the relaxations that set or tie a cell's
    final label is :func:`backlinks_cpu`'s. Settled cells keep ``label = -1 - label``
    (except with ``fixed``). ``nbuckets`` (a power of two) must exceed the span of live
    buckets; ``z`` is not read under ``friction``. ``targets``, ``left``: as
    :func:`sssp_cpu`'s, ending after the bucket of the last target.
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
        if fixed:
            if d0 != dist[c] or l0 >= label[c]:
                continue
        elif not _less(d0, l0, dist[c], label[c]):
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
    last = np.int64(1) << 62  # the bucket of the last target, once every one is settled
    while live > 0:
        slot = cur & mask
        e = heads[slot]
        if e < 0:
            cur += 1
            if cur > last:
                break
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
        if (settled & 0xFFFF) == 0 and stop[0] != 0:
            return -1
        if left > 0 and targets[u] != 0:
            left -= 1
            if left == 0:
                last = cur
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
            if not (nd <= max_cost and nd <= dv) or (fixed and nd != dv):
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
    if fixed:
        for i in range(label.size):  # settled marks off
            if label[i] < 0:
                label[i] = -1 - label[i]
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


@numba.njit(cache=True, nogil=True)
def window_inner_cpu(z, f, has_f, state_d, has_d, state_l, has_l, labels, off, width, zp, fp,
                     dist, label):
    """Fill the block's cells of its padded flat window (``off`` cells of halo and frame
    before, ``width`` a row) from ``z``, ``f`` and the block's state, as
    :func:`terrain.grid.sssp_blocked._window` describes."""
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


@numba.njit(cache=True, nogil=True, inline="always")
def _put_cell(r, c, dv, lv, distance, allocation, hops, backlink):
    """Cell ``(r, c)``'s outputs from ``dv`` and ``lv``, or the unreached marks when ``dv``
    is not finite; whether the cell was reached."""
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
            if (lv & HOPS_MASK) == 0:
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


MAX_BUCKETS = 1 << 22


def bucket_plan(z, f, model, codes, lengths, start_costs, zp=None, offs=None):
    """``(inv_width, nbuckets)`` of the bucket queue (width ``w_lo / 2`` for a positive bound
    ``w_lo`` on every arc cost, at most :data:`MAX_BUCKETS`), or None: use the heap."""
    if model == 0:
        return None
    used = lengths[codes]
    if f is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all NaN: no plan
            fmin, fmax = float(np.nanmin(f)), float(np.nanmax(f))
        if not (math.isfinite(fmin) and math.isfinite(fmax)):
            return None
    else:
        fmin = fmax = 1.0
    if model == 1:
        w_lo, w_hi = float(used.min()) * fmin, float(used.max()) * fmax
    else:
        smax = _max_abs_slope(zp, offs, codes, lengths, z.shape[0], z.shape[1], PAD)
        growth = TOBLER_A * (smax + TOBLER_S0)
        if not growth < 600:
            return None
        w_lo = float(used.min()) / TOBLER_V0 * fmin
        w_hi = float(used.max()) * math.exp(growth) / TOBLER_V0 * fmax
    w_lo *= 1 - 1e-9
    w_hi *= 1 + 1e-9
    if not (w_lo > 0 and math.isfinite(w_hi)):
        return None
    inv_width = 2.0 / w_lo
    spread = (float(np.max(start_costs)) - float(np.min(start_costs))) * inv_width
    span = w_hi * inv_width + spread + 4
    if span >= MAX_BUCKETS or (float(np.max(start_costs)) + z.size * w_hi) * inv_width > 2.0 ** 50:
        return None
    return inv_width, 1 << int(math.ceil(math.log2(span)))


def padded_state(z, f, keep_z=True):
    """``(zp, fp, dist, label)``: the padded flat arrays the kernels work on (``zp`` a 1-cell
    dummy unless ``keep_z``; ``fp`` a 1-cell 1.0 without ``f``)."""
    n = (z.shape[0] + 2 * PAD) * (z.shape[1] + 2 * PAD)
    zp = np.empty(n if keep_z else 1, np.float32)
    fp = np.empty(n if f is not None else 1, np.float32)
    dist = np.empty(n, np.float64)
    label = np.empty(n, np.int64)
    _init_padded_cpu(z, f if f is not None else np.ones((1, 1), np.float32), f is not None,
                     keep_z, PAD, zp, fp, dist, label)
    if f is None:
        fp[0] = 1.0
    if not keep_z:
        zp[0] = 0.0
    return zp, fp, dist, label


def _touched_outputs(shape):
    """Empty ``(backlink, distance, allocation, hops)`` arrays of ``shape``, their pages
    mapped."""
    arrays = (np.empty(shape, np.uint8), np.empty(shape, np.float64), np.empty(shape, np.int32),
              np.empty(shape, np.int32))
    for a in arrays:
        _touch_pages(a.reshape(-1).view(np.uint8))
    return arrays


def _finish(zp, fp, has_f, model, lengths, offs, codes, dist, label, shape, stats):
    """The result from a heap run's padded state: the backlink pass over every cell."""
    backlink, distance, allocation, hops = (np.empty(shape, t) for t in (np.uint8, np.float64,
                                                                         np.int32, np.int32))
    backlinks_cpu(zp, fp, has_f, model, lengths, offs, codes, dist, label, shape[0], shape[1],
                  PAD, backlink, distance, allocation, hops)
    return GridSSSPResult(distance, allocation, backlink, hops, stats)


#: no targets: the queue runs until it is empty
_NO_TARGETS = np.zeros(0, np.uint8)


def cut_beyond(dist, targets, stats):
    """Once every target cell is reached, every cell farther than the farthest of them
    unreached (``+inf`` in the padded ``dist``): the result of a run whose max cost is that
    distance, whatever cells the queue had set when it stopped. Records it as
    ``stats["target_distance"]``."""
    if targets is None or not len(targets):
        return
    far = float(dist[targets].max())
    if far < math.inf:
        dist[dist > far] = math.inf
        stats["target_distance"] = far


def _interruptible(kernel, *args):
    """``kernel(*args, stop)`` in a thread of its own while this one waits, so Ctrl-C (handled
    in the main thread) sets ``stop`` and the kernel returns within milliseconds."""
    stop = np.zeros(1, np.uint8)
    result = []

    def run():
        try:
            result.append(kernel(*args, stop))
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            result.append(e)

    t = threading.Thread(target=run, name="terrain-sssp", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.05)
    except BaseException:
        stop[0] = 1
        t.join()
        raise
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


class CpuOps:
    """The in-core SSSP on the CPU: the lexicographic-key Dijkstra on a heap, or on a bucket
    queue where every arc costs more than zero (:func:`bucket_plan`)."""

    name = "cpu"

    def solve(self, z, f, model, codes, lengths, rows, cols, costs, limit, *, queue="auto",
              targets=None, on_distance=None, **_gpu_only):
        """Distances, labels and backlinks from the sources ``(rows, cols)`` with start
        ``costs`` (checked); ``queue="heap"`` forces the heap. ``targets`` (padded flat
        cells): the queue stops once they are settled (:func:`cut_beyond`)."""
        shape = z.shape
        offs = offsets(shape[1])
        plan = None
        if queue != "heap" and model == 1:  # friction: the plan needs no padded elevations
            plan = bucket_plan(z, f, model, codes, lengths, costs)
        # the bucket queue under friction never reads elevations: no padded copy of them
        zp, fp, dist, label = padded_state(z, f, keep_z=not (plan is not None and model == 1))
        if queue != "heap" and model == 2:
            plan = bucket_plan(z, f, model, codes, lengths, costs, zp, offs)
        seeds, seed_dist, seed_label = flat_seeds(rows, cols, costs, shape[1])
        flags, left = _NO_TARGETS, 0
        if targets is not None:
            flags = np.zeros(dist.size, np.uint8)
            flags[targets] = 1
            left = int(np.count_nonzero(flags))
        stats = {}
        if plan is None:
            settled = _interruptible(sssp_cpu, zp, fp, f is not None, model, lengths, offs,
                                     codes, dist, label, seeds, seed_dist, seed_label, False,
                                     limit, flags, left)
            cut_beyond(dist, targets, stats)
            stats.update(settled=int(settled), queue="heap")
            res = _finish(zp, fp, f is not None, model, lengths, offs, codes, dist, label,
                          shape, stats)
        else:
            backlink_p = np.empty(dist.size, np.uint8)
            # the Dijkstra runs on one core without the GIL; meanwhile another thread
            # allocates the outputs and takes their page faults
            outputs = []
            prefault = threading.Thread(target=lambda: outputs.extend(_touched_outputs(shape)))
            prefault.start()
            try:
                settled = _interruptible(sssp_buckets_cpu, zp, fp, f is not None, model,
                                         lengths, offs, codes, dist, label, seeds, seed_dist,
                                         seed_label, False, limit, *plan, backlink_p, flags,
                                         left)
            finally:
                prefault.join()
            cut_beyond(dist, targets, stats)
            stats.update(settled=int(settled), queue="buckets")
            backlink, distance, allocation, hops = outputs or _touched_outputs(shape)
            _outputs_cpu(dist, label, backlink_p, shape[0], shape[1], PAD, backlink, distance,
                         allocation, hops)
            res = GridSSSPResult(distance, allocation, backlink, hops, stats)
        if on_distance is not None:
            on_distance(res.distance)
        return res

    def labels(self, z, f, known, dist_in, model, codes, lengths, rows, cols, seed_d,
               seed_labels):
        """Allocation, hops and backlinks for final distances ``dist_in`` (``known``: the
        vertices that have one) from seed labels: the heap kernel relaxing tight arcs only."""
        shape = z.shape
        zp, fp, dist, label = padded_state(z, f)
        unpad(dist, shape)[...] = np.where(known, dist_in, -np.inf)
        seeds, _, _ = flat_seeds(rows, cols, seed_d, shape[1])
        seed_lab = (seed_labels[:, 0] << HOPS_BITS) | seed_labels[:, 1]
        offs = offsets(shape[1])
        _interruptible(sssp_cpu, zp, fp, f is not None, model, lengths, offs, codes, dist,
                       label, seeds, np.nan_to_num(seed_d, nan=-np.inf), seed_lab, True,
                       math.inf, _NO_TARGETS, 0)
        dist[label == NO_LABEL] = -np.inf  # cells whose distance no seed explains
        return _finish(zp, fp, f is not None, model, lengths, offs, codes, dist, label, shape,
                       {})
