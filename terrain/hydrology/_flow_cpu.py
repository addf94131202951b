"""The CPU kernels of flow directions and accumulation on a *padded block* (a window with a
halo, NaN / 255 outside the grid), so the in-core and tiled runs execute the same code: C
(``terrain_flow_*`` of terrain/native/kernels.c, loaded with ctypes), twins of
``_flow.cu``'s. C, not Numba: Numba's import and first kernel load cost a CPU flow process
1.25 s before any work. Neighbour ``k`` (E, SE, S, ..., NE) has ESRI code ``1 << k``; D4
takes the even ``k``.
"""

import ctypes

import numpy as np

from .. import native
from ._neighbours import NB_DC as DC, NB_DR as DR

__all__ = ["classify", "flat_distances", "lower_flat_distances", "flat_labels", "label_regions",
           "flat_directions", "accumulate", "exits", "DR", "DC", "FLAT", "INF", "CODE_K"]

FLAT = np.uint8(254)    # no lower neighbour, not an outlet: resolved by the flat pass
INF = np.int32(2**31 - 1)  # an unreached BFS distance
CODE_K = np.full(256, -1, np.int64)  # the neighbour k of code 1 << k, -1 for any other code
CODE_K[1 << np.arange(8)] = np.arange(8)

_P, _I, _N = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
_SIGNATURES = {  # the last pointer of the first five: the stop flag
    "terrain_flow_classify": (_I, [_P, _P, _N, _P, _N, _I, _I, _P, _P]),
    "terrain_flow_flat_distances": (_I, [_P] * 4 + [_N, _I, _I, _P, _P, _N, _P]),
    "terrain_label_regions": (_I, [_P, _N, _I, _I, _I, _N, _P, _P, _P, _P]),
    "terrain_flow_flat_directions": (_I, [_P] * 6 + [_N, _I, _I, _P, _P]),
    "terrain_flow_accumulate": (_I, [_P, _P, _I, _P, _I, _I, _P, _P, _P, _P]),
    "terrain_flow_exits": (None, [_P, _P, _I, _P, _I, _I, _P]),
}


def _lib():
    return native.declared(_SIGNATURES)


def _run(name, *args):
    """Kernel ``name`` on ``args`` and a stop flag, on :func:`terrain.native.interruptible`
    (Ctrl-C stops it: at the 40-ft size each pass takes seconds)."""
    kernel = getattr(_lib(), name)
    return native.interruptible(lambda stop: kernel(*args, stop.ctypes.data))


def _c(a, dtype):
    return np.ascontiguousarray(a, dtype)


def _oom(rc, what, shape):
    if rc == -1:
        raise MemoryError(f"flow: no memory for {what} of a {shape[0]} x {shape[1]} block")
    return rc


def classify(zp, op, edge_outlets, dist, step):
    """Codes of the cells inside the outer ring of ``zp`` (uint8; 255 there): 255 nodata, 0
    outlet (``op`` non-zero, or with ``edge_outlets`` no lower neighbour beside the grid's
    edge or nodata), ``1 << k`` the steepest drop ``(z - z_k) / dist[k]`` (ties: the lowest
    ``k``), else :data:`FLAT`."""
    zp = _c(zp, np.float32)
    R, C = zp.shape
    code = np.full((R, C), 255, np.uint8)
    op = None if op is None else _c(op, np.uint8)
    dist = _c(dist, np.float64)
    _oom(_run("terrain_flow_classify", zp.ctypes.data, None if op is None else op.ctypes.data,
              bool(edge_outlets), dist.ctypes.data, int(step), R, C, code.ctypes.data),
         "the codes", (R, C))
    return code


def flat_distances(zp, code, halo_a, halo_t, step):
    """``(away, towards)`` (int32): BFS distances in the interior's flats from higher
    terrain and towards lower (a draining cell of the flat's elevation), seeded also by the
    halo ring's ``halo_a``/``halo_t`` (None: no halo, a block that holds its flats whole);
    :data:`INF` where unreached."""
    zp = _c(zp, np.float32)
    away, towards = np.empty(zp.shape, np.int32), np.empty(zp.shape, np.int32)
    _flat_distances(zp, code, halo_a, halo_t, step, away, towards, True)
    return away, towards


def lower_flat_distances(code, halo_a, halo_t, step, away, towards):
    """:func:`flat_distances` again, in place, from its ``away`` and ``towards`` of halos no
    lower anywhere than ``halo_a``/``halo_t``: only the halo cells now lower seed, and the
    result is :func:`flat_distances`' with these halos (the distances are a minimum over
    seeds). ``code`` needs its flat cells only where the halo can reach."""
    _flat_distances(None, code, halo_a, halo_t, step, away, towards, False)


def _flat_distances(zp, code, halo_a, halo_t, step, away, towards, fresh):
    code = _c(code, np.uint8)
    R, C = code.shape
    for a in (away, towards):
        if a.dtype != np.int32 or a.shape != (R, C) or not a.flags.c_contiguous:
            raise ValueError("flat distances: int32 C-contiguous arrays of the codes' shape")
    halo_a, halo_t = (None if h is None else _c(h, np.int32).ctypes.data
                      for h in (halo_a, halo_t))
    _oom(_run("terrain_flow_flat_distances", None if zp is None else zp.ctypes.data,
              code.ctypes.data, halo_a, halo_t, int(step), R, C,
              away.ctypes.data, towards.ctypes.data, int(fresh)), "the flat distances",
         (R, C))


def label_regions(cells, value=1, margin=0, connectivity=8, away=None, out=None, stop=None):
    """``(labels, maxa)``: the connected regions of ``cells == value`` (uint8) inside
    ``margin`` numbered 1, 2, ... in the row-major order of their first cell (int32, 0
    elsewhere; into ``out`` when given), the numbering of ``scipy.ndimage.label``; with
    ``away``, ``maxa`` is each region's largest finite ``away`` (``maxa[0] = 0``), else None.
    ``stop``: the caller's flag (:func:`terrain.native.interruptible`), else one of its own."""
    cells = _c(cells, np.uint8)
    H, W = cells.shape
    labels = np.empty((H, W), np.int32) if out is None else out
    maxa = None
    if away is not None:
        away = _c(away, np.int32)
        maxa = np.empty(1 + int(np.count_nonzero(cells == value)), np.int32)
    args = (cells.ctypes.data, int(value), H, W, int(margin), int(connectivity),
            None if away is None else away.ctypes.data,
            None if maxa is None else maxa.ctypes.data, labels.ctypes.data)
    n = (_run("terrain_label_regions", *args) if stop is None
         else _lib().terrain_label_regions(*args, stop.ctypes.data))
    if n == -1:
        raise MemoryError(f"no memory to label the regions of a {H} x {W} grid")
    return labels, None if maxa is None else maxa[:n + 1].copy()


def flat_labels(code, away, step):
    """``(labels, maxa)``: the interior's flats (:data:`FLAT`, inside the two outer rings)
    labelled 1, 2, ... (row-major; int32, 0 elsewhere) and each label's largest finite
    ``away`` (``maxa[0] = 0``)."""
    return label_regions(code, FLAT, 2, 8 if step == 1 else 4, away)


def flat_directions(zp, code, away, towards, labels, height, step):
    """``code`` with the interior's flat cells given directions: towards the least combined
    gradient ``2 t + (h - a)`` in the flat (Barnes et al. 2014), a drain lowest (ties:
    cardinal first, then the lowest ``k``); 0 where the flat has no drain.
    ``height[label]``: the whole flat's largest ``away``."""
    zp, code = _c(zp, np.float32), _c(code, np.uint8)
    R, C = code.shape
    out = code.copy()
    away, towards = _c(away, np.int32), _c(towards, np.int32)
    labels, height = _c(labels, np.int32), _c(height, np.int32)
    _run("terrain_flow_flat_directions", zp.ctypes.data, code.ctypes.data, away.ctypes.data,
         towards.ctypes.data, labels.ctypes.data, height.ctypes.data, int(step), R, C,
         out.ctypes.data)
    return out


def accumulate(dp, weights, ext):
    """``(acc, order, done, err)``: the accumulation of ``dp``'s interior (float64, NaN in
    the ring; inflows summed in code order, the ring's from ``ext``, or None for a block
    whose ring is nodata; ``weights`` the interior's, or 1 a cell) in Kahn's order
    (``order``: flat block indices). ``err`` 1 for
    a direction to nodata or off the grid; fewer cells ``done`` than valid: a cycle."""
    dp = _c(dp, np.uint8)
    R, C = dp.shape
    acc = np.full((R, C), np.nan, np.float64)
    order = np.empty(R * C, np.int64)
    err = np.zeros(1, np.int64)
    w = None if weights is None else _c(weights, np.float64)
    ext = None if ext is None else _c(ext, np.float64)
    done = _oom(_run("terrain_flow_accumulate", dp.ctypes.data,
                     None if w is None else w.ctypes.data, 0 if w is None else w.shape[1],
                     None if ext is None else ext.ctypes.data, R, C, acc.ctypes.data,
                     order.ctypes.data, err.ctypes.data), "the accumulation", dp.shape)
    return acc, order, int(done), int(err[0])


def exits(dp, order, done, out_index):
    """Each interior cell's out-edge (``out_index``, int64) leaving the block; -1: ends
    inside (int64, -1 in the ring)."""
    dp = _c(dp, np.uint8)
    R, C = dp.shape
    exit_ = np.full((R, C), -1, np.int64)
    _lib().terrain_flow_exits(dp.ctypes.data, _c(order, np.int64).ctypes.data, int(done),
                              _c(out_index, np.int64).ctypes.data, R, C, exit_.ctypes.data)
    return exit_
