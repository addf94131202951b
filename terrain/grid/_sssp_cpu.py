"""The CPU side of :mod:`terrain.grid.sssp`'s kernel table: :class:`CpuOps`, over the C twins
(``terrain/native/kernels.c``, ``terrain_sssp_*``) of the in-core grid SSSP's CUDA kernels
(``_sssp.cu``). C, not Numba: a process's first Numba kernel costs 0.8-1.0 s before any work,
half the whole run of a 1024² cost distance. ctypes releases the GIL around each call.
"""

import ctypes
import math
import threading

import numpy as np

from .. import native
from ..native import address as _p
from ._sssp_frame import (HOPS_BITS, PAD, GridSSSPResult, flat_seeds, framed, label_layout,
                          offsets, unpad)
from .costs import TOBLER_A, TOBLER_S0, TOBLER_V0

__all__ = ["CpuOps", "sssp_cpu", "sssp_buckets_cpu", "backlinks_cpu", "bucket_plan",
           "padded_state", "MAX_BUCKETS"]

_vp, _i64, _int, _f64 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int, ctypes.c_double
# every kernel with labels takes them as int32 or int64 (the width after the pointer)
_SIGNATURES = {
    "terrain_sssp_init": (_i64, [_vp, _i64, _vp, _i64, _int] + [_i64] * 3 + [_vp] * 4
                          + [_int] + [_i64] * 2 + [_vp]),
    "terrain_sssp_heap": (_i64, [_vp, _vp, _int, _int, _vp, _vp, _vp, _i64, _vp, _vp, _int,
                                 _vp, _vp, _vp, _i64, _int, _f64, _vp, _i64, _vp]),
    "terrain_sssp_buckets": (_i64, [_vp, _vp, _int, _int, _vp, _vp, _vp, _i64, _vp, _vp, _int,
                                    _int, _i64, _vp, _vp, _vp, _i64, _int, _f64, _f64, _i64,
                                    _vp, _vp, _i64, _vp]),
    "terrain_sssp_backlinks": (_i64, [_vp, _vp, _int, _int, _vp, _vp, _vp, _i64, _vp, _vp,
                                      _int, _int] + [_i64] * 3 + [_vp] * 4 + [_i64] * 2
                               + [_vp]),
    "terrain_sssp_outputs": (_i64, [_vp, _vp, _int, _int] + [_vp] * 3 + [_i64] * 4 + [_vp]),
    "terrain_sssp_max_slope": (_f64, [_vp, _vp, _vp, _i64, _vp] + [_i64] * 4 + [_vp]),
}


def _lib():
    return native.declared(_SIGNATURES)


def _c(a, dtype):
    """``a`` as a C-contiguous array of ``dtype`` (no copy when it is one)."""
    return np.ascontiguousarray(a, dtype)


def _inout(*arrays):
    """The arrays a kernel writes, checked: ``(array, dtype)`` pairs, each C-contiguous of
    its dtype (a copy would take the results away; a tuple of dtypes: one of them) or None."""
    for a, dtype in arrays:
        if a is None:
            continue
        dtypes = dtype if isinstance(dtype, tuple) else (dtype,)
        if a.dtype not in dtypes or not a.flags.c_contiguous:
            want = " or ".join(str(np.dtype(t)) for t in dtypes)
            raise TypeError(f"grid SSSP kernel: expected a C-contiguous {want} "
                            f"array, got {a.dtype} {'' if a.flags.c_contiguous else 'strided'}")


#: the labels' dtypes (:func:`terrain.grid._sssp_frame.label_layout`); a kernel takes their
#: width in bytes after them
_LABELS = (np.int32, np.int64)


def _by_rows(fn, rows, cells, *args):
    """``fn(*args, r0, r1, stop)`` over row bands of ``[0, rows)``, on threads for a big grid
    (the C passes release the GIL), under the flag Ctrl-C sets (each pass polls it every
    row: :func:`terrain.native.in_strips`); their results."""
    n = max(1, min(native.threads(cells), rows))
    bounds = np.linspace(0, rows, n + 1).astype(np.int64).tolist()
    return native.in_strips(bounds, lambda s, stop: fn(*args, bounds[s], bounds[s + 1],
                                                       _p(stop)))


def _settled(n):
    if n == -3:
        raise MemoryError("grid SSSP: no memory for the queue")
    return n


def sssp_cpu(z, f, has_f, model, lengths, offs, codes, dist, label, seeds, seed_dist,
             seed_label, fixed, max_cost, targets, left, stop):
    """Lexicographic-key Dijkstra on the padded flat grid, in place on ``dist`` (+inf at
    vertices, -inf elsewhere; ``fixed``: final, only tight arcs relaxed) and ``label`` (int32
    or int64): the cells settled, or -1 when ``stop[0]`` was set
    (:func:`terrain.native.interruptible`).
    With ``left > 0`` distinct cells flagged in ``targets``: ends once they are settled and
    every cell as near as the last of them (cells set farther keep provisional distances:
    :func:`cut_beyond`).
    ``terrain_sssp_heap``."""
    _inout((dist, np.float64), (label, _LABELS), (stop, np.uint8))
    z, f, codes = _c(z, np.float32), _c(f, np.float32), _c(codes, np.int64)
    targets = _c(targets, np.uint8)
    seeds = _c(seeds, np.int64)
    return _settled(_lib().terrain_sssp_heap(
        _p(z), _p(f), int(has_f), int(model), _p(_c(lengths, np.float64)),
        _p(_c(offs, np.int64)), _p(codes), codes.size, _p(dist), _p(label),
        label.dtype.itemsize, _p(seeds),
        _p(_c(seed_dist, np.float64)), _p(_c(seed_label, np.int64)), seeds.size, int(fixed),
        float(max_cost), _p(targets), int(left), _p(stop)))


def sssp_buckets_cpu(z, f, has_f, model, lengths, offs, codes, dist, label, seeds, seed_dist,
                     seed_label, fixed, max_cost, inv_width, nbuckets, backlink, targets,
                     left, stop):
    """Dijkstra with a circular array of buckets (Dinitz): exact when every arc costs at least
    ``2 / inv_width``, so that no cell of the current bucket can improve another one of it.

    As :func:`sssp_cpu`, plus the backlinks in the same pass: every tight predecessor is
    settled first, so the lowest arc code among the relaxations that set or tie a cell's
    final label is :func:`backlinks_cpu`'s. A label is written as its cell is settled, as
    ``-1 - label`` (the marks stay, except with ``fixed``); until then it follows from the
    backlink. ``label`` may be ``f``'s memory viewed as int32 (:func:`padded_state`'s
    ``label_in_f``: every label "none" at the start, no knight arcs); it then holds no
    friction after. ``nbuckets`` (a power of two) must exceed the span of live buckets;
    under ``friction`` ``z`` is read only at the cells knight arcs pass between.
    ``targets``, ``left``: as
    :func:`sssp_cpu`'s, ending after the bucket of the last target. ``terrain_sssp_buckets``.
    """
    _inout((dist, np.float64), (label, _LABELS), (backlink, np.uint8), (stop, np.uint8))
    z, f, codes = _c(z, np.float32), _c(f, np.float32), _c(codes, np.int64)
    label_in_f = f.ctypes.data == label.ctypes.data
    targets = _c(targets, np.uint8)
    seeds = _c(seeds, np.int64)
    return _settled(_lib().terrain_sssp_buckets(
        _p(z), _p(f), int(has_f), int(model), _p(_c(lengths, np.float64)),
        _p(_c(offs, np.int64)), _p(codes), codes.size, _p(dist), _p(label),
        label.dtype.itemsize, int(label_in_f), dist.size, _p(seeds),
        _p(_c(seed_dist, np.float64)), _p(_c(seed_label, np.int64)), seeds.size, int(fixed),
        float(max_cost), float(inv_width), int(nbuckets), _p(backlink), _p(targets), int(left),
        _p(stop)))


def backlinks_cpu(z, f, has_f, model, lengths, offs, codes, dist, label, rows, cols, pad,
                  backlink, distance, allocation, hops, hop_bits=HOPS_BITS, out_pad=0):
    """Backlink of every cell of the unpadded grid, and its distance (NaN where unreached),
    allocation and hops (-1 where unreached): one pass over the padded labels (int32 or
    int64 with ``hop_bits`` bits of hops; ``terrain_sssp_backlinks``, row bands on
    threads). The outputs are flat arrays framed by ``out_pad`` cells (0: the unpadded
    grid); ``distance`` and ``allocation`` None: the backlinks alone (255 where
    unreached), as :func:`_outputs_cpu` takes them."""
    _inout((backlink, np.uint8), (distance, np.float64), (allocation, np.int32),
           (hops, np.int32))
    z, f, codes = _c(z, np.float32), _c(f, np.float32), _c(codes, np.int64)
    dist = _c(dist, np.float64)
    label = label if label.dtype in _LABELS else label.astype(np.int64)
    label = np.ascontiguousarray(label)
    _by_rows(_lib().terrain_sssp_backlinks, rows, rows * cols, _p(z), _p(f), int(has_f),
             int(model), _p(_c(lengths, np.float64)), _p(_c(offs, np.int64)), _p(codes),
             codes.size, _p(dist), _p(label), label.dtype.itemsize, int(hop_bits), cols, pad,
             out_pad, _p(backlink), _p(distance), _p(allocation), _p(hops))


def _outputs_cpu(dist, label, hop_bits, backlink, rows, cols, allocation, hops):
    """The outputs from :func:`sssp_buckets_cpu`'s padded state (labels with settled marks,
    ``hop_bits`` bits of hops; its backlinks) in one pass, in place in padded arrays
    (``terrain_sssp_outputs``): the distances in ``dist`` (NaN where unreached), the
    backlinks in ``backlink`` (255 there), allocation and hops (None: none) in int32
    arrays of the padded size, ``allocation`` being ``label`` itself when that is int32.
    The results are their unpadded views."""
    _inout((dist, np.float64), (label, _LABELS), (backlink, np.uint8), (allocation, np.int32),
           (hops, np.int32))
    _by_rows(_lib().terrain_sssp_outputs, rows, rows * cols, _p(dist), _p(label),
             label.dtype.itemsize, int(hop_bits), _p(backlink), _p(allocation), _p(hops), cols,
             PAD)


def _max_abs_slope(zp, offs, codes, lengths, rows, cols, pad):
    """Largest ``|z_v - z_u| / L_k`` over the arcs between vertices (padded flat grid)."""
    zp, codes = _c(zp, np.float32), _c(codes, np.int64)
    return max(_by_rows(_lib().terrain_sssp_max_slope, rows, rows * cols, _p(zp),
                        _p(_c(offs, np.int64)), _p(codes), codes.size,
                        _p(_c(lengths, np.float64)), cols, pad))


def _touch_pages(buf):
    """Write a zero into every page of the byte array ``buf`` (its page faults, now)."""
    buf[::4096] = 0


MAX_BUCKETS = 1 << 22


def bucket_plan(z, f, model, codes, lengths, start_costs, zp=None, offs=None):
    """``(inv_width, nbuckets)`` of the bucket queue (width ``w_lo / 2`` for a positive bound
    ``w_lo`` on every arc cost, at most :data:`MAX_BUCKETS`), or None: use the heap. Every
    arc's friction factor, the mean of two frictions or (knight arcs) four, lies between the
    least and the greatest friction, rounding being monotone."""
    if model == 0:
        return None
    used = lengths[codes]
    if f is not None:
        # all NaN: no plan (fmin/fmax skip NaN without a warning to silence)
        fmin, fmax = float(np.fmin.reduce(f, axis=None)), float(np.fmax.reduce(f, axis=None))
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


def _grid_rows(a):
    """``(a, row stride in cells)`` of a float32 grid the kernels read in place: ``a`` itself
    when its rows are contiguous (an unpadded view of a framed array: the frame's width), else
    a C-contiguous copy."""
    if a.dtype == np.float32 and a.strides[1] == 4 and a.strides[0] % 4 == 0 and (
            a.strides[0] >= 4 * a.shape[1]):
        return a, a.strides[0] // 4
    a = _c(a, np.float32)
    return a, a.shape[1]


def padded_state(z, f, keep_z=True, label_dtype=np.int64, label_in_f=False, overwrite_f=False):
    """``(zp, fp, dist, label)``: the padded flat arrays the kernels work on (``zp`` a 1-cell
    dummy unless ``keep_z``; ``fp`` a 1-cell 1.0 without ``f``; labels of ``label_dtype``).
    A grid read into :func:`terrain.grid._sssp_frame.padded_grid` is its own padded array
    (the same one for ``z`` and ``f`` when they are one grid): not copied, unless
    ``label_in_f`` without ``overwrite_f``. ``label_in_f`` (int32 labels, ``f`` given, no
    ``keep_z``): the labels are ``fp``'s memory, left uninitialised, for the bucket queue
    (:func:`sssp_buckets_cpu`), after which ``fp`` holds labels, not friction."""
    n = (z.shape[0] + 2 * PAD) * (z.shape[1] + 2 * PAD)
    fp = framed(f) if f is not None and (overwrite_f or not label_in_f) else None
    zp = (fp if f is z and fp is not None else framed(z)) if keep_z else None
    copy_z, copy_f = keep_z and zp is None, f is not None and fp is None
    if zp is None:
        zp = np.empty(n if keep_z else 1, np.float32)
    if fp is None:
        fp = np.empty(n if f is not None else 1, np.float32)
    dist = np.empty(n, np.float64)
    label = fp.view(np.int32) if label_in_f else np.empty(n, label_dtype)
    zs, z_stride = _grid_rows(z)
    fs, f_stride = _grid_rows(f) if f is not None else (None, 0)
    _by_rows(_lib().terrain_sssp_init, z.shape[0] + 2 * PAD, n, _p(zs), z_stride, _p(fs),
             f_stride, int(f is not None), z.shape[0], z.shape[1], PAD,
             _p(zp) if copy_z else None, _p(fp) if copy_f else None, _p(dist),
             None if label_in_f else _p(label), label.dtype.itemsize)
    if f is None:
        fp[0] = 1.0
    if not keep_z:
        zp[0] = 0.0
    return zp, fp, dist, label


def _touched_int32(n, count):
    """``count`` empty int32 arrays of ``n`` cells, their pages mapped."""
    arrays = [np.empty(n, np.int32) for _ in range(count)]
    for a in arrays:
        _touch_pages(a.view(np.uint8))
    return arrays


def _in_place_result(dist, label, hop_bits, backlink_p, shape, stats, hops, outputs=()):
    """The result from a queue's padded state, in place (:func:`_outputs_cpu`): the
    distances in ``dist``, allocations over int32 labels; int64 labels' allocations and hop
    counts (``hops``) in int32 arrays of the padded size, taken from ``outputs`` when given
    (their pages already faulted). The arrays are the result's unpadded views."""
    extra = (label.dtype != np.int32) + bool(hops)
    outputs = list(outputs) or _touched_int32(dist.size, extra)
    allocation = label if label.dtype == np.int32 else outputs.pop(0)
    hop_counts = outputs.pop(0) if hops else None
    _outputs_cpu(dist, label, hop_bits, backlink_p, shape[0], shape[1], allocation, hop_counts)
    return GridSSSPResult(*(None if a is None else unpad(a, shape) for a in (
        dist, allocation, backlink_p, hop_counts)), stats)


def _finish(zp, fp, has_f, model, lengths, offs, codes, dist, label, hop_bits, shape, stats,
            hops=True):
    """The result from a heap run's padded state: the backlink pass over every cell into a
    padded array, then the outputs in place (:func:`_in_place_result`)."""
    backlink_p = np.empty(dist.size, np.uint8)
    backlinks_cpu(zp, fp, has_f, model, lengths, offs, codes, dist, label, shape[0], shape[1],
                  PAD, backlink_p, None, None, None, hop_bits, out_pad=PAD)
    return _in_place_result(dist, label, hop_bits, backlink_p, shape, stats, hops)


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


class CpuOps:
    """The in-core SSSP on the CPU: the lexicographic-key Dijkstra on a heap, or on a bucket
    queue where every arc costs more than zero (:func:`bucket_plan`)."""

    name = "cpu"

    def solve(self, z, f, model, codes, lengths, rows, cols, costs, limit, *, queue="auto",
              targets=None, on_distance=None, hops=True, overwrite_friction=False,
              **_gpu_only):
        """Distances, labels and backlinks from the sources ``(rows, cols)`` with start
        ``costs`` (checked); ``queue="heap"`` forces the heap. ``targets`` (padded flat
        cells): the queue stops once they are settled (:func:`cut_beyond`). ``hops`` False:
        no hop counts (``result.hops`` None). ``overwrite_friction``: a padded ``f`` may
        become the labels' memory (its friction lost)."""
        shape = z.shape
        offs = offsets(shape[1])
        plan = None
        if queue != "heap" and model == 1:  # friction: the plan needs no padded elevations
            plan = bucket_plan(z, f, model, codes, lengths, costs)
        # the bucket queue under friction reads elevations only for the knight arcs (the
        # cells they pass between must be vertices): else no padded copy of them
        knights = bool(np.any(np.asarray(codes) >= 8))
        label_dtype, hop_bits = label_layout(len(costs), shape[0] * shape[1])
        # the bucket queue reads a cell's friction only until it is settled, when its label
        # is written: int32 labels share the friction's grid (4096², one source: 272 MB of
        # grids in the queue's pass → 208 MB), unless knight arcs read the friction of
        # settled cells between their ends
        friction_queue = plan is not None and model == 1 and not knights
        zp, fp, dist, label = padded_state(
            z, f, keep_z=not friction_queue, label_dtype=label_dtype,
            label_in_f=friction_queue and label_dtype is np.int32,
            overwrite_f=overwrite_friction)
        if queue != "heap" and model == 2:
            plan = bucket_plan(z, f, model, codes, lengths, costs, zp, offs)
        seeds, seed_dist, seed_label = flat_seeds(rows, cols, costs, shape[1],
                                                  hop_bits=hop_bits)
        flags, left = _NO_TARGETS, 0
        if targets is not None:
            flags = np.zeros(dist.size, np.uint8)
            flags[targets] = 1
            left = int(np.count_nonzero(flags))
        stats = {}
        if plan is None:
            settled = native.interruptible(sssp_cpu, zp, fp, f is not None, model, lengths,
                                           offs, codes, dist, label, seeds, seed_dist,
                                           seed_label, False, limit, flags, left)
            cut_beyond(dist, targets, stats)
            stats.update(settled=int(settled), queue="heap")
            res = _finish(zp, fp, f is not None, model, lengths, offs, codes, dist, label,
                          hop_bits, shape, stats, hops)
        else:
            backlink_p = np.empty(dist.size, np.uint8)
            # the outputs go in place into padded arrays (their unpadded views are the
            # result): the distances into dist, the backlinks into the pass's, allocations
            # into int32 labels; what else they need (int64 labels' allocations, hops) is
            # allocated, its pages faulted, on another thread while the Dijkstra runs on one
            # core without the GIL
            extra = (label.dtype != np.int32) + bool(hops)
            outputs = []
            prefault = threading.Thread(
                target=lambda: outputs.extend(_touched_int32(dist.size, extra)))
            prefault.start()
            try:
                settled = native.interruptible(sssp_buckets_cpu, zp, fp, f is not None,
                                               model, lengths, offs, codes, dist, label, seeds,
                                               seed_dist, seed_label, False, limit, *plan,
                                               backlink_p, flags, left)
            finally:
                prefault.join()
            del zp, fp  # the queue's pass was the last to read them
            cut_beyond(dist, targets, stats)
            stats.update(settled=int(settled), queue="buckets")
            res = _in_place_result(dist, label, hop_bits, backlink_p, shape, stats, hops,
                                   outputs)
            del label
        if on_distance is not None:
            on_distance(res.distance)
        return res

    def labels(self, z, f, known, dist_in, model, codes, lengths, rows, cols, seed_d,
               seed_labels):
        """Allocation, hops and backlinks for final distances ``dist_in`` (``known``: the
        vertices that have one) from seed labels: the heap kernel relaxing tight arcs only."""
        shape = z.shape
        # a seed's hops and then at most one a cell
        label_dtype, hop_bits = label_layout(
            int(seed_labels[:, 0].max(initial=0)) + 1,
            int(seed_labels[:, 1].max(initial=0)) + shape[0] * shape[1] + 1)
        zp, fp, dist, label = padded_state(z, f, label_dtype=label_dtype)
        unpad(dist, shape)[...] = np.where(known, dist_in, -np.inf)
        seeds, _, _ = flat_seeds(rows, cols, seed_d, shape[1])
        seed_lab = (seed_labels[:, 0] << hop_bits) | seed_labels[:, 1]
        offs = offsets(shape[1])
        native.interruptible(sssp_cpu, zp, fp, f is not None, model, lengths, offs, codes,
                             dist, label, seeds, np.nan_to_num(seed_d, nan=-np.inf), seed_lab,
                             True, math.inf, _NO_TARGETS, 0)
        # cells whose distance no seed explains
        dist[label == np.iinfo(label.dtype).max] = -np.inf
        return _finish(zp, fp, f is not None, model, lengths, offs, codes, dist, label,
                       hop_bits, shape, {})
