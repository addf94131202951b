"""Watersheds and stream networks from flow directions (ESRI D8 codes) and accumulation.

* :func:`watershed`: each cell gets the label of the first outlet on its downstream path
  (1, 2, ... in the order given), 0 when its path ends elsewhere, -1 at nodata; nested
  outlets cut their basins out (ArcGIS's *Watershed*). :func:`snap_outlets`: ArcGIS's *Snap
  Pour Point*.
* :func:`stream_links`: cells of accumulation >= ``threshold`` are streams; a *link* runs
  from a source or a confluence down to the next confluence or an outlet, with its Strahler
  order. Both hold the grid's directions in memory.

Examples
--------
>>> import numpy as np
>>> d = np.array([[4, 4, 4], [1, 4, 16], [1, 0, 16]], np.uint8)  # all to the bottom middle
>>> watershed(d, [(2, 1), (0, 1)]).tolist()
[[1, 2, 1], [1, 1, 1], [1, 1, 1]]
>>> links = stream_links(d, np.array([[1, 1, 1], [1, 3, 1], [2, 9, 2]], float), 2)
>>> [(l["cells"], l["order"]) for l in links]
[([(1, 1), (2, 1)], 1), ([(2, 0), (2, 1)], 1), ([(2, 1)], 2), ([(2, 2), (2, 1)], 1)]
"""

import ctypes

import numpy as np

from .. import native
from ..native import address as _p
from ..errors import InputError

__all__ = ["watershed", "snap_outlets", "stream_links"]

_P, _I = ctypes.c_void_p, ctypes.c_int64
#: the kernels of ``terrain/native/kernels.c`` (``terrain_ws_*``): C, not Numba, whose import
#: and cache load were most of a ``streams`` process (0.82-0.90 s on the sample, 2-core VM)
_SIGNATURES = {
    "terrain_ws_downstream": (None, [_P, _I, _I, _P]),
    "terrain_ws_topological": (_I, [_P, _P, _I, _P]),
    "terrain_ws_labels_down": (None, [_P, _I, _P, _P, _P]),
    "terrain_ws_strahler": (_I, [_P, _I, _P, _P, _P, _I, _P]),
}


def _lib():
    return native.declared(_SIGNATURES)



def downstream_order(d):
    """``(down, valid, order)`` of a C-contiguous uint8 grid of D8 codes ``d``: each cell's
    downstream cell (-1 at outlets and nodata, -2 for a code that is no direction or leads off
    the grid or to nodata), the valid cells (not 255) and those cells upstream first (Kahn's
    order: fewer than the valid cells when some lie on or above a cycle)."""
    R, C = d.shape
    down = np.empty(R * C, np.int64)
    _lib().terrain_ws_downstream(_p(d), R, C, _p(down))
    valid = (d != 255).ravel()
    order = np.empty(R * C, np.int64)
    count = _lib().terrain_ws_topological(_p(down), _p(valid), R * C, _p(order))
    if count < 0:
        raise MemoryError(f"direction: no memory to order {R} x {C} cells")
    return down, valid, order[:count]


def _prepare(direction):
    d = np.ascontiguousarray(direction, np.uint8)
    if d.ndim != 2:
        raise InputError(f"direction: must be 2-D, got shape {d.shape}")
    down, valid, order = downstream_order(d)
    if (down == -2).any():
        i = int(np.flatnonzero(down == -2)[0])
        raise InputError(f"direction: cell ({i // d.shape[1]}, {i % d.shape[1]}) holds no D8 "
                         "code or leads off the grid or to nodata")
    if order.shape[0] != int(valid.sum()):
        raise InputError("direction: the flow directions hold a cycle")
    return d, down, valid, order


def watershed(direction, outlets):
    """int32 labels of the cells draining to each outlet cell (module docstring).

    ``outlets``: ``[(row, col), ...]``; a cell named twice keeps its first label.
    """
    d, down, valid, order = _prepare(direction)
    R, C = d.shape
    seeds = np.zeros(R * C, np.int32)
    for n, (r, c) in enumerate(outlets, start=1):
        r, c = int(r), int(c)
        if not (0 <= r < R and 0 <= c < C):
            raise InputError(f"outlet cell ({r}, {c}) is outside the grid ({R} x {C} cells)")
        if d[r, c] == 255:
            raise InputError(f"outlet cell ({r}, {c}) is nodata")
        if seeds[r * C + c] == 0:
            seeds[r * C + c] = n
    labels = np.full(R * C, -1, np.int32)
    _lib().terrain_ws_labels_down(_p(order), order.shape[0], _p(down), _p(seeds), _p(labels))
    return labels.reshape(R, C)


def snap_outlets(accumulation, outlets, radius_cells):
    """Each outlet moved to the cell of largest accumulation within ``radius_cells``
    (Euclidean, in cells; ties: the first in row-major order)."""
    acc = np.asarray(accumulation)
    R, C = acc.shape
    rad = float(radius_cells)
    k = int(np.floor(rad))
    out = []
    for r, c in outlets:
        r0, r1, c0, c1 = max(0, r - k), min(R, r + k + 1), max(0, c - k), min(C, c + k + 1)
        rr, cc = np.mgrid[r0:r1, c0:c1]
        win = np.where(((rr - r) ** 2 + (cc - c) ** 2 <= rad * rad)
                       & ~np.isnan(acc[r0:r1, c0:c1]), acc[r0:r1, c0:c1], -np.inf)
        q = int(np.argmax(win))
        out.append((int(rr.ravel()[q]), int(cc.ravel()[q])) if np.isfinite(win.ravel()[q])
                   else (int(r), int(c)))
    return out


def stream_links(direction, accumulation, threshold):
    """The stream network's links (module docstring): a list of dicts, in the row-major
    order of their first cells, with ``cells`` (``(row, col)`` from upstream down, ending at
    the confluence that ends the link), ``order`` (Strahler), ``upstream`` (the accumulation
    at the link's last own cell), ``outlet`` (True when it ends at an outlet)."""
    d, down, valid, order = _prepare(direction)
    acc = np.asarray(accumulation, np.float64).ravel()
    if acc.shape[0] != d.size:
        raise InputError(f"accumulation: {np.shape(accumulation)} cells, the directions "
                         f"{d.shape}")
    stream = valid & (acc >= float(threshold))
    ins = np.zeros(d.size, np.int32)
    src = np.flatnonzero(stream & (down >= 0))
    np.add.at(ins, down[src][stream[down[src]]], 1)
    strahler = np.zeros(d.size, np.int32)
    if _lib().terrain_ws_strahler(_p(order), order.shape[0], _p(down), _p(stream), _p(ins),
                                  d.size, _p(strahler)) < 0:
        raise MemoryError(f"streams: no memory for the orders of {d.size} cells")
    C = d.shape[1]
    links = []
    for start in np.flatnonzero(stream & (ins != 1)):
        cells = [int(start)]
        while (j := int(down[cells[-1]])) >= 0 and stream[j]:
            cells.append(j)
            if ins[j] != 1:  # a confluence: the next link starts there
                break
        end_outlet = j < 0 or not stream[j]
        last = cells[-1] if end_outlet or len(cells) == 1 else cells[-2]
        links.append({"cells": [(c // C, c % C) for c in cells],
                      "order": int(strahler[start]), "upstream": float(acc[last]),
                      "outlet": bool(end_outlet)})
    return links
