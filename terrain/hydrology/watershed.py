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
from ..errors import InputError, naming_items, warn
from ._neighbours import NB_DC, NB_DR, direction_codes

__all__ = ["watershed", "snap_outlets", "stream_links", "cycle_cell", "label_outlets",
           "read_flow_store", "stream_lines", "WATERSHED_MEANING"]

#: what a watershed label means (the store's attribute, the GeoTIFF's band description, the
#: API's DataArray)
WATERSHED_MEANING = "watershed label: 1.. per outlet, 0 elsewhere, -1 nodata"

_P, _I = ctypes.c_void_p, ctypes.c_int64
#: the kernels of ``terrain/native/kernels.c`` (``terrain_ws_*``): C, not Numba, whose import
#: and cache load were most of a ``streams`` process (0.82-0.90 s on the sample, 2-core VM)
_SIGNATURES = {
    "terrain_ws_topological": (_I, [_P, _P, _I, _P]),
    "terrain_ws_basins": (_I, [_P, _I, _I, _P, _P, _I, _P, _P]),
    "terrain_ws_strahler": (_I, [_P, _I, _P, _P, _P, _I, _P]),
}


def _lib():
    return native.declared(_SIGNATURES)


def _basins(d, cells, seeds):
    """``terrain_ws_basins`` on the C-contiguous uint8 codes ``d``: ``(status, labels, bad)``
    (the kernel's return, the int32 labels, the cell it names)."""
    R, C = d.shape
    labels = np.empty((R, C), np.int32)
    bad = ctypes.c_int64(-1)
    status = _lib().terrain_ws_basins(_p(d), R, C, _p(cells), _p(seeds), cells.size,
                                      _p(labels), ctypes.byref(bad))
    if status < 0:
        raise MemoryError(f"direction: no memory for the paths of {R} x {C} cells")
    return status, labels, bad.value


def cycle_cell(d):
    """A cell on a cycle of the D8 codes ``d`` (C-contiguous uint8, every code checked),
    as a row-major index, or -1 when every path ends at an outlet."""
    status, _, bad = _basins(d, np.zeros(0, np.int64), np.zeros(0, np.int32))
    return bad if status == 2 else -1


def watershed(direction, outlets):
    """int32 labels of the cells draining to each outlet cell (module docstring).

    ``outlets``: ``[(row, col), ...]``; a cell named twice keeps its first label (a warning
    names the labels left empty). Each cell's path is walked down once
    (``terrain_ws_basins``): the codes and 4 bytes of labels a cell.
    """
    d = direction_codes(direction)
    if d.ndim != 2:
        raise InputError(f"direction: must be 2-D, got shape {d.shape}")
    R, C = d.shape
    first = {}
    for n, (r, c) in enumerate(_outlet_cells(outlets, R, C), start=1):
        if d[r, c] == 255:
            raise InputError(f"outlet {n} at cell (row, col) = ({r}, {c}) is on nodata",
                             item=("outlet", n))
        kept = first.setdefault(r * C + c, n)
        if kept != n:
            warn(f"outlets {kept} and {n} lie on one cell ({r}, {c}): label {n} "
                 "is left empty")
    cells = np.array(sorted(first), np.int64)
    status, labels, bad = _basins(d, cells, np.array([first[c] for c in cells.tolist()],
                                                     np.int32))
    if status == 1:
        raise InputError(f"direction: cell ({bad // C}, {bad % C}) holds no D8 code or leads "
                         "off the grid or to nodata")
    if status == 2:
        raise InputError("direction: the flow directions hold a cycle")
    return labels


def _outlet_cells(outlets, R, C):
    """The outlets as ``(row, col)`` ints; :class:`InputError` for a cell that is not a
    whole number or lies off the ``R`` x ``C`` grid (never truncated or wrapped)."""
    cells = []
    for cell in outlets:
        try:
            r, c = (float(v) for v in cell)
        except (TypeError, ValueError):
            raise InputError(f"outlet {cell!r}: expected a (row, col) cell") from None
        if not (r.is_integer() and c.is_integer()):
            raise InputError(f"outlet cell ({r:g}, {c:g}): cells must be whole (row, col) "
                             "numbers")
        r, c = int(r), int(c)
        if not (0 <= r < R and 0 <= c < C):
            raise InputError(f"outlet cell ({r}, {c}) is outside the grid ({R} x {C} cells)")
        cells.append((r, c))
    return cells


def read_flow_store(path):
    """``(zarr group, summary)`` of a flow's output store (the command line's ``flow``);
    :class:`InputError` when it is not one."""
    from pathlib import Path

    from ..io.zarr_meta import open_group
    from ..tiles import is_store
    p = Path(path)
    if not is_store(p) and not (p / "zarr.json").is_file():
        raise InputError(f"{path}: {'not a' if p.exists() else 'no such'} flow store "
                         "(the output store of a flow run)")
    group = open_group(p, mode="r")
    if "direction" not in group or not isinstance(group.attrs.get("flow"), dict):
        raise InputError(f"{path}: not a flow store (no 'direction' layer and 'flow' summary)")
    return group, dict(group.attrs["flow"])


def label_outlets(direction, accumulation, geotransform, crs=None, points=(), cells=(),
                  points_file=None, snap=0.0, where="flow"):
    """``(labels, outlets)``: the basins of outlets given as the command line's ``watershed``
    takes them (and :func:`terrain.watershed`): ``points`` (map X,Y), then ``cells``
    (ROW,COL), then the points (or a raster's cells) of ``points_file``
    (:func:`terrain.grid.sources.resolve_sources`), labelled 1, 2, ... in that order, each
    snapped to the cell of largest ``accumulation`` within ``snap`` map units
    (:func:`snap_outlets`; ``accumulation`` is read only then). ``where`` (the flow's name)
    begins the errors about an outlet."""
    from ..grid.sources import resolve_sources
    try:
        snap = float(snap)
    except (TypeError, ValueError):
        snap = float("nan")
    if not (np.isfinite(snap) and snap >= 0):
        raise InputError(f"snap distance {snap:g}: must be a number of map units >= 0")
    shape = np.shape(direction)
    gt = [float(v) for v in geotransform]
    found, _, origins = resolve_sources(gt, shape, points or (), cells or (), points_file,
                                        label=f"{where}: ", crs=crs, what="outlet")
    if snap > 0:
        found = snap_outlets(accumulation[:], found, snap, (abs(gt[1]), abs(gt[5])))
    try:
        with naming_items("outlet", origins, first=1):  # numbered as labelled, from 1
            labels = watershed(direction, found)
    except InputError as e:  # an outlet on nodata: said of the flow
        raise InputError(f"{where}: {e}") from None
    return labels, found


def stream_lines(direction, accumulation, threshold, geotransform, where="flow"):
    """``(lines, properties)`` of the stream links (:func:`stream_links`) as the command
    line's ``streams`` writes them: each a list of map ``(x, y)`` through its cells'
    centres (a link of one cell runs on to the side its water leaves by, half a cell: a line
    needs two points), and its ``order``, ``upstream``, ``outlet``, ``cells`` and ``length``
    (map units). ``where`` (the flow's name) begins the errors."""
    import math

    from ..io.points import cell_centre
    gt = [float(v) for v in geotransform]
    try:
        links = stream_links(direction, accumulation, threshold)  # read a band at a time
    except InputError as e:  # a damaged direction layer: said of the flow
        raise InputError(f"{where}: {e}") from None
    lines, props = [], []
    for link in links:
        xy = [cell_centre(r, c, gt) for r, c in link["cells"]]
        if len(xy) == 1:  # a LineString needs two distinct points (OGC): a link of one
            (r, c), (dr, dc) = link["cells"][0], link["exit"]  # cell runs to the side
            xy.append(cell_centre(r + dr / 2, c + dc / 2, gt))  # its water leaves by
        lines.append(xy)
        props.append({"order": link["order"], "upstream": link["upstream"],
                      "outlet": link["outlet"], "cells": len(link["cells"]),
                      "length": sum(math.dist(a, b) for a, b in zip(xy, xy[1:]))})
    return lines, props


def snap_outlets(accumulation, outlets, radius, cellsize=(1.0, 1.0)):
    """Each outlet moved to the cell of largest accumulation within ``radius`` (Euclidean
    between cell centres, in the units of ``cellsize``, a number >= 0; ``cellsize`` ``(dx,
    dy)`` or one number, default one cell; ties: the first in row-major order).

    >>> acc = np.array([[1, 9, 2], [5, 1, 1]], np.float64)
    >>> snap_outlets(acc, [(1, 0)], 1.0), snap_outlets(acc, [(1, 0)], 1.0, (1.0, 2.0))
    ([(1, 0)], [(1, 0)])
    >>> snap_outlets(acc, [(1, 0)], 1.5), snap_outlets(acc, [(1, 0)], 10.0, (1.0, 20.0))
    ([(0, 1)], [(1, 0)])
    """
    acc = np.asarray(accumulation)
    if acc.ndim != 2:
        raise InputError(f"accumulation: must be 2-D, got shape {acc.shape}")
    R, C = acc.shape
    rad = float(radius)
    if not (np.isfinite(rad) and rad >= 0):
        raise InputError(f"snap radius {radius!r}: must be a number >= 0")
    dx, dy = (float(cellsize),) * 2 if np.ndim(cellsize) == 0 else map(float, cellsize)
    if not (dx > 0 and dy > 0 and np.isfinite(dx) and np.isfinite(dy)):
        raise InputError(f"cell size {cellsize!r}: must be positive")
    kr, kc = int(np.floor(rad / dy)), int(np.floor(rad / dx))
    out = []
    for r, c in _outlet_cells(outlets, R, C):
        r0, r1, c0, c1 = max(0, r - kr), min(R, r + kr + 1), max(0, c - kc), min(C, c + kc + 1)
        rr, cc = np.mgrid[r0:r1, c0:c1]
        near = ((rr - r) * dy) ** 2 + ((cc - c) * dx) ** 2 <= rad * rad
        win = np.where(near & ~np.isnan(acc[r0:r1, c0:c1]), acc[r0:r1, c0:c1], -np.inf)
        q = int(np.argmax(win))
        out.append((int(rr.ravel()[q]), int(cc.ravel()[q])) if np.isfinite(win.ravel()[q])
                   else (int(r), int(c)))
    return out


#: rows of accumulation a band reads at once (about this many cells): the stream cells are
#: picked band by band, so only the directions (1 byte a cell) are whole-grid
_STREAM_BAND_CELLS = 1 << 22


def stream_links(direction, accumulation, threshold):
    """The stream network's links (module docstring): a list of dicts, in the row-major
    order of their first cells, with ``cells`` (``(row, col)`` from upstream down, ending at
    the confluence that ends the link), ``order`` (Strahler), ``upstream`` (the accumulation
    at the link's last own cell), ``outlet`` (True when it ends at an outlet), ``exit`` (the
    step ``(drow, dcol)`` by which water leaves the last of ``cells``: :func:`_exit_step`).

    ``accumulation`` is read a band of rows at a time (a zarr array stays on disk); the work
    is on the stream cells alone, whose codes are checked (a D8 code, downstream on the grid
    and not nodata) and whose paths must hold no cycle. Memory: the directions (1 byte a
    cell) and about 40 bytes a stream cell, where arrays of every cell took 42 bytes a cell
    (9.2 GB at 12555 x 17630).
    """
    try:
        positive = 0 < float(threshold) < float("inf")
    except (TypeError, ValueError):
        positive = False
    if not positive:  # NaN: no cell at all, quietly; 0 or less: every cell a stream
        raise InputError(f"threshold {threshold!r} is not a positive number",
                         option="threshold")
    d = direction_codes(direction)
    if d.ndim != 2:
        raise InputError(f"direction: must be 2-D, got shape {d.shape}")
    R, C = d.shape
    if tuple(np.shape(accumulation)) != (R, C):
        raise InputError(f"accumulation: {np.shape(accumulation)} cells, the directions "
                         f"{d.shape}")
    cells, acc = [], []
    step = max(1, _STREAM_BAND_CELLS // max(C, 1))
    for r0 in range(0, R, step):
        a = np.asarray(accumulation[r0:r0 + step], np.float64).ravel()
        on = (d[r0:r0 + step].ravel() != 255) & (a >= float(threshold))
        cells.append(np.flatnonzero(on) + r0 * C)
        acc.append(a[on])
    cells, acc = np.concatenate(cells), np.concatenate(acc)
    code = d.ravel()[cells]
    k = np.full(cells.size, -1, np.int64)
    for q in range(8):
        k[code == 1 << q] = q
    r, c = np.divmod(cells, C)
    rr, cc = r + NB_DR[k], c + NB_DC[k]  # k -1 (no code) is refused below
    ok = (code == 0) | ((k >= 0) & (rr >= 0) & (rr < R) & (cc >= 0) & (cc < C))
    below = np.where(ok & (code != 0), rr * C + cc, -1)
    ok &= (below < 0) | (d.ravel()[np.maximum(below, 0)] != 255)
    if not ok.all():
        i = int(cells[np.argmin(ok)])
        raise InputError(f"direction: cell ({i // C}, {i % C}) holds no D8 code or leads off "
                         "the grid or to nodata")
    # the stream cell below each one (positions in cells), -1 where the stream ends
    pos = np.minimum(np.searchsorted(cells, below), max(cells.size - 1, 0))
    down = np.where((below >= 0) & (cells[pos] == below), pos, -1) if cells.size else below
    del below, pos, code, k, r, c, rr, cc, ok
    m = cells.size
    ins = np.bincount(down[down >= 0], minlength=m).astype(np.int32)
    order = np.empty(max(m, 1), np.int64)
    stream = np.ones(max(m, 1), np.uint8)
    lib = _lib()
    if lib.terrain_ws_topological(_p(down), _p(stream), m, _p(order)) != m:
        raise InputError("direction: the flow directions hold a cycle")
    strahler = np.zeros(max(m, 1), np.int32)
    if lib.terrain_ws_strahler(_p(order), m, _p(down), _p(stream), _p(ins), m,
                               _p(strahler)) < 0:
        raise MemoryError(f"streams: no memory for the orders of {m} stream cells")
    links = []
    for start in np.flatnonzero(ins != 1):
        chain = [int(start)]
        while (j := int(down[chain[-1]])) >= 0:
            chain.append(j)
            if ins[j] != 1:  # a confluence: the next link starts there
                break
        end_outlet = j < 0
        last = chain[-1] if end_outlet or len(chain) == 1 else chain[-2]
        links.append({"cells": [divmod(int(cells[i]), C) for i in chain],
                      "order": int(strahler[start]), "upstream": float(acc[last]),
                      # its last cell drains nowhere: an outlet, also where it is the
                      # confluence that starts the outlet's own link of one cell (a stream
                      # ends before one where negative weights drop the accumulation below
                      # the threshold: not an outlet)
                      "outlet": bool(d.ravel()[cells[chain[-1]]] == 0),
                      "exit": _exit_step(d, *divmod(int(cells[chain[-1]]), C))})
    return links


def _exit_step(d, r, c):
    """The step ``(drow, dcol)`` by which water leaves cell ``(r, c)`` of the D8 codes ``d``:
    its code's; for an outlet (code 0) the first neighbour off the grid or nodata (E, S, W,
    N, then the corners), where the water leaves the grid; east for an outlet inside the
    grid (a named outlet, an undrained sink), where it leaves by no side.

    >>> d = np.array([[0, 1, 0], [64, 0, 4], [64, 255, 16]], np.uint8)
    >>> _exit_step(d, 0, 1), _exit_step(d, 0, 0), _exit_step(d, 1, 1)
    ((0, 1), (0, -1), (1, 0))
    >>> _exit_step(np.zeros((3, 3), np.uint8), 1, 1)  # no side off the grid or nodata
    (0, 1)
    """
    k = int(d[r, c]).bit_length() - 1
    if k < 0:
        R, C = d.shape
        k = next((k for k in (0, 2, 4, 6, 1, 3, 5, 7)
                  if not (0 <= r + NB_DR[k] < R and 0 <= c + NB_DC[k] < C)
                  or d[r + NB_DR[k], c + NB_DC[k]] == 255), 0)
    return int(NB_DR[k]), int(NB_DC[k])
