"""Exact depression filling, in core or tiled.

A cell's spill elevation (priority-flood's) is the minimax elevation over paths to an
outlet: unique, so every exact method gives the same bits. In core on the CPU a priority
flood computes it (C; a big grid in row strips, one a core, joined by their spills); the GPU
and the tiled runs take it from the grid MSF with weights ``max(z_u, z_v)``, which holds
those paths: one O(cells) pass over the forest from the outlets fills the grid by
comparisons alone. Tiled runs reduce each group's forest to its ports on the way up the
quadtree walk and drain with the ports' final levels on the way down. docs/hydrology.md has
the definitions, outlets, the flood and the tiled walk.
"""

import ctypes
import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import native
from ..backend import array_backend, count_nonzero, get_backend, nanmax
from ..errors import InputError
from ..grid.edges import check_connectivity
from ..tiles.quadtree import TiledGrid, call_now, walk_down, walk_up
from ..tiles.store import check_tile_size
from . import _flow_cpu
from ._fill_gpu import fill_fits_on_device
from ._neighbours import NB_DC, NB_DR
from .flow import _inside, padded_window

# the Numba kernels (_fill_cpu) are imported in the functions that run them: the GPU's fill
# and flow import no Numba

__all__ = ["fill_depressions", "FillResult", "outlet_cells", "depression_labels",
           "depression_hierarchy", "kept_pits", "HIERARCHY_COLUMNS",
           "FillSpec", "LeafBlock", "LAKE_LABELS", "fill_walks", "fill_tiled",
           "SINKS_MEANING", "FILL_MEANINGS"]

#: the layer that the tiled fill's ``read`` gives its groups' own lake labels from (what
#: its ``keep`` kept of them), which the label walk turns into ``depression`` ids
LAKE_LABELS = "lake_labels"
#: what the ``sinks`` layer of a fill that keeps depressions says
SINKS_MEANING = "1 = the pit of a depression kept by the minimum depth or area: it drains"
#: what each layer of a fill holds: its ``meaning`` attribute, in a store and in
#: :func:`terrain.fill`'s Dataset alike
FILL_MEANINGS = {
    "filled": "spill elevation: the level each cell floods to (priority-flood depression "
              "filling); NaN = nodata",
    "depth": "filled - elevation (0 outside depressions); NaN = nodata",
    "depression": "id of the depression (lake) a cell lies in, numbered in the row-major "
                  "order of the lakes' first cells; 0 outside any",
}


@dataclass
class FillResult:
    """The filled DEM and what comes with it.

    Attributes
    ----------
    filled, depth : (rows, cols) float32
        Spill elevations and ``filled - z`` (NaN = nodata).
    depression : (rows, cols) int32
        The lake a cell lies in (row-major order of the lakes' first cells), 0 outside any.
    stats : dict
    hierarchy : dict or None
        :func:`depression_hierarchy`'s columns, when asked for.
    sinks : int64 array or None
        With ``min_depth``/``min_area``: the flat indices of the kept pits (they drain).
    """

    filled: np.ndarray
    depth: np.ndarray
    depression: np.ndarray
    stats: dict = field(default_factory=dict)
    hierarchy: dict = None
    sinks: np.ndarray = None


def _step(connectivity):
    return 1 if check_connectivity(connectivity) == 8 else 2


def outlet_cells(z, connectivity=8, outlets=None):
    """The outlet mask (uint8, 1 = outlet) of DEM ``z``: the cells on the grid's edge or
    beside nodata (a neighbour in ``connectivity`` is NaN or outside the grid), or with
    ``outlets`` (a mask of the grid's shape) exactly its non-zero cells that are not nodata.

    A CuPy ``z`` gives a CuPy mask, computed on the device.

    >>> outlet_cells(np.ones((3, 3), np.float32)).tolist()
    [[1, 1, 1], [1, 0, 1], [1, 1, 1]]
    """
    xp = array_backend(z).xp
    z = xp.asarray(z, np.float32)
    if outlets is not None:
        o = xp.asarray(outlets)
        if o.shape != z.shape:
            raise InputError(f"outlets: {o.shape[0]} x {o.shape[1]} cells, the DEM "
                             f"{z.shape[0]} x {z.shape[1]}")
        named = o.astype(np.bool_)
        mask = named & ~xp.isnan(z)
        if not bool(mask.any()) and bool(named.any()):  # nothing would drain: said, not run
            raise InputError(f"outlets: all {int(named.sum())} outlet cells lie on the DEM's "
                             "nodata: nothing would drain")
        return mask.astype(np.uint8)
    if xp is not np:
        return _beside_nan(xp.pad(z, 1, constant_values=np.nan), _step(connectivity))
    return _edge_cells(z, check_connectivity(connectivity))


def _beside_nan(zh, step):
    """uint8: 1 at the valid inner cells of halo block ``zh`` (NumPy or CuPy) with a NaN
    neighbour: on the device eight shifted masks, on the host :func:`_edge_cells`."""
    xp = array_backend(zh).xp
    if xp is np:
        return np.ascontiguousarray(_edge_cells(zh, 8 if step == 1 else 4)[1:-1, 1:-1])
    nan = xp.isnan(zh)
    H, W = zh.shape[0] - 2, zh.shape[1] - 2
    near = xp.zeros((H, W), np.bool_)
    for k in range(0, 8, step):
        dr, dc = int(NB_DR[k]), int(NB_DC[k])
        near |= nan[1 + dr:1 + dr + H, 1 + dc:1 + dc + W]
    return (near & ~nan[1:-1, 1:-1]).view(np.uint8)


def _edge_cells(z, connectivity):
    """uint8: 1 at the valid cells of ``z`` (host) beside NaN or the grid's edge:
    ``terrain_outlet_cells`` of terrain/native/kernels.c: one pass, 0.05 s at 4096² where
    NumPy's padded copy and shifted masks took 0.06-0.20 s and ten times the grid's bytes;
    in the flood's row strips, one a thread (8192² on the 2-core VM: 0.22 s against 0.36 s
    on one; the 10-ft size took 12 s on one thread)."""
    z = np.ascontiguousarray(z, np.float32)
    out = np.empty(z.shape, np.uint8)
    H, W = z.shape
    bounds = _strip_bounds(H, W)
    lib = native.declared(_FILL_SIGNATURES)
    native.in_strips(bounds, lambda s, stop: lib.terrain_outlet_cells(
        z.ctypes.data, H, W, connectivity, out.ctypes.data, bounds[s], bounds[s + 1]))
    return out


def depression_labels(flooded, connectivity=8, backend="cpu"):
    """Connected regions of ``flooded`` cells numbered 1, 2, ... in the row-major order
    of their first cell (int32, 0 elsewhere): on the GPU ``cupyx.scipy.ndimage.label``, on
    the CPU ``terrain_label_regions`` of terrain/native/kernels.c (the same numbering as
    ``scipy.ndimage.label``, without its 0.65 s import), on a big grid in row strips joined
    across their seams (:func:`_join_strip_labels`).

    >>> depression_labels(np.array([[1, 0, 1], [0, 1, 0]], bool), 4).tolist()
    [[1, 0, 2], [0, 3, 0]]
    """
    return _labelled(flooded, connectivity, backend)[0]


def _labelled(flooded, connectivity, backend, out=None):
    """``(depression_labels(...), the number of regions)``: the count, the largest id, is
    what the labelling knows, not another pass over the grid. ``out``: an int32 buffer of
    at least the grid's cells (host) that the labels take."""
    be = get_backend(backend)
    conn = check_connectivity(connectivity)
    if be.is_gpu:
        xp = be.xp
        structure = xp.ones((3, 3), bool) if conn == 8 else None
        labels, count = be.ndimage.label(xp.asarray(flooded, np.bool_), structure)
        return labels, int(count)
    mask = np.ascontiguousarray(flooded, np.bool_).view(np.uint8)
    if mask.ndim != 2:
        raise InputError(f"depression labels: a 2-D mask, got shape {mask.shape}")
    H, W = mask.shape
    bounds = _strip_bounds(H, W)
    labels = np.empty((H, W), np.int32) if out is None else out[:H * W].reshape(H, W)

    def label(s, stop):  # a strip's own numbering; its count
        rows = slice(bounds[s], bounds[s + 1])
        _flow_cpu.label_regions(mask[rows], 1, 0, conn, out=labels[rows], stop=stop)
        return int(labels[rows].max()) if labels[rows].size else 0

    counts = native.in_strips(bounds, label)
    if len(counts) > 1:
        return labels, _join_strip_labels(labels, bounds, counts, conn)
    return labels, counts[0]


def _join_strip_labels(labels, bounds, counts, conn):
    """The strips' own numberings in ``labels`` made the grid's, in place: regions that meet
    across a seam joined (each keyed by its strip and number, the least key of a region
    kept: the strip and number of its first cell), then numbered in the order of their keys,
    which is the row-major order of their first cells. Returns the number of regions."""
    W = labels.shape[1]
    first = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)  # key first[s] + n
    parent = np.arange(first[-1] + 1)

    def root(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for s in range(len(counts) - 1):
        above, below = labels[bounds[s + 1] - 1], labels[bounds[s + 1]]
        for up, down in _across_seam(W, conn):
            a, b = above[up], below[down]
            both = (a != 0) & (b != 0)
            pairs = np.unique(np.stack([a[both] + first[s], b[both] + first[s + 1]], 1), axis=0)
            for u, v in pairs.tolist():
                ru, rv = root(u), root(v)
                if ru != rv:
                    parent[max(ru, rv)] = min(ru, rv)
    while True:  # every key straight to its root
        up = parent[parent]
        if np.array_equal(up, parent):
            break
        parent = up
    ids = (np.cumsum(parent == np.arange(parent.size)) - 1)[parent].astype(np.int32)

    lib = native.declared(_FILL_SIGNATURES)

    def renumber(s, stop):  # in place (np.take would hold 8 bytes a cell of indices)
        table = ids[first[s]:first[s] + counts[s] + 1].copy()
        table[0] = 0  # no region
        lib.terrain_renumber_strip(labels.ctypes.data + 4 * bounds[s] * W,
                                   (bounds[s + 1] - bounds[s]) * W, table.ctypes.data)

    native.in_strips(bounds, renumber)
    return int(ids.max())


def _drain_block(zh, mh, src):
    """The drain pass over a halo block's forest from ``src`` (``inf``: no source):
    ``terrain_drain_grid`` of terrain/native/kernels.c. C, not Numba: loading a Numba kernel
    took 0.9 s of the sample DEM's 1.3 s fill."""
    zh = np.ascontiguousarray(zh, np.float32)
    mh = np.ascontiguousarray(mh, np.uint8)
    src = np.ascontiguousarray(src, np.float32).ravel()
    H, W = zh.shape[0] - 2, zh.shape[1] - 2
    f = np.empty(H * W, np.float32)
    rc = native.declared(_FILL_SIGNATURES).terrain_drain_grid(
        zh.ctypes.data, mh.ctypes.data, src.ctypes.data, H, W, f.ctypes.data)
    _check(rc, "the drain pass", H, W)
    return f


def _flood_levels(z, outlet, connectivity):
    """``(levels, spare)``: the levels (``inf`` where undrained or nodata) of DEM ``z`` in
    core, and the strips' labels buffer (int32, at least ``z.size``; None on one strip),
    free for the caller to reuse. The priority
    flood ``terrain_flood_grid`` of terrain/native/kernels.c, on a big grid one row strip a
    thread (:func:`_raise_strips`). At 4096² one strip takes 0.72 s where the forest and its
    drain pass took 5.9 s, so the CPU's in-core fill builds no forest; the tiled fill and
    the GPU drain the forest (their steps are per tile and parallel)."""
    H, W = z.shape
    z = np.ascontiguousarray(z, np.float32)
    outlet = np.ascontiguousarray(outlet, np.uint8)
    bounds = _strip_bounds(H, W)
    k = len(bounds) - 1
    # the strips' framed work arrays in one buffer, strip s from row bounds[s] + 2s; their
    # levels end at its front, row-major: the kernel and the moves below never write past
    # what is still to be read
    fh = np.empty((H + 2 * k) * (W + 2), np.float32)
    labels = np.empty(fh.size, np.int32) if k > 1 else None
    lib = native.declared(_FILL_SIGNATURES)

    def flood(s, stop):
        r0, r1 = bounds[s], bounds[s + 1]
        at = (r0 + 2 * s) * (W + 2)
        keys, weights = ctypes.c_void_p(), ctypes.c_void_p()
        m = lib.terrain_flood_grid(
            z.ctypes.data + 4 * r0 * W, outlet.ctypes.data + r0 * W, r1 - r0, W, connectivity,
            (s > 0) | (s < k - 1) << 1, fh.ctypes.data + 4 * at,
            None if labels is None else labels.ctypes.data + 4 * at, ctypes.byref(keys),
            ctypes.byref(weights), stop.ctypes.data)
        try:
            _check(m, "the priority flood", r1 - r0, W, z)
            return (np.ctypeslib.as_array((ctypes.c_uint64 * m).from_address(keys.value)).copy(),
                    np.ctypeslib.as_array((ctypes.c_float * m).from_address(weights.value)).copy()
                    ) if m > 0 else None
        finally:
            lib.terrain_free(keys)
            lib.terrain_free(weights)

    spills = native.in_strips(bounds, flood)
    if k > 1:
        _raise_strips(lib, z, fh, labels, bounds, spills, connectivity)
    return fh[:H * W].reshape(H, W), labels


def _strip_bounds(H, W, threads=None):
    """Row bounds of the strips of the flood, the layers and the lake ids: one a thread
    (default :func:`terrain.native.threads` of the grid's cells), at least 2 rows each, and
    as many more as keep each strip's framed cells under 2^30 (the flood numbers them with
    int32).

    >>> _strip_bounds(10, 10, 1), _strip_bounds(10, 10, 4), _strip_bounds(3, 10, 4)
    ([0, 10], [0, 2, 5, 7, 10], [0, 3])
    >>> _strip_bounds(50000, 50000, 2)  # 2.5·10⁹ cells
    [0, 16666, 33333, 50000]
    """
    threads = native.threads(H * W) if threads is None else threads
    k = max(threads, -(-(H + 2) * (W + 2) // (1 << 30)))
    return np.linspace(0, H, max(1, min(k, H // 2)) + 1).astype(np.int64).tolist()


def _across_seam(W, connectivity):
    """``(columns above, columns below)`` slices pairing the cells of a row and the next that
    touch (the diagonals too with 8-connectivity).

    >>> list(_across_seam(3, 8))[0]
    (slice(1, 3, None), slice(0, 2, None))
    """
    for d in ((0,) if connectivity == 4 else (-1, 0, 1)):  # above[j] meets below[j + d]
        j0, j1 = max(0, -d), W - max(0, d)
        yield slice(j0, j1), slice(j0 + d, j1 + d)


def _raise_strips(lib, z, fh, labels, bounds, spills, connectivity):
    """Barnes (2016)'s parallel priority flood, the strips' step after their floods: every
    strip's labels get their minimax spill level from the outlets' labels over the strips'
    spills and the pairs of cells across each seam (both seeds: their own elevations), the
    strips' levels are raised to their labels' (``terrain_spill_levels``,
    ``terrain_flood_raise``) and moved to the front of ``fh``: the one-strip flood's levels
    bit for bit (docs/hydrology.md, "In core on the CPU")."""
    H, W = z.shape
    k = len(bounds) - 1
    span = 2 * W + 2  # a strip's labels: 0 none, 1 its outlets, 2... its seams' cells
    at = [(bounds[s] + 2 * s) * (W + 2) for s in range(k)]
    eu, ev, ew = [], [], []
    for s, got in enumerate(spills):
        if got is not None:
            eu.append((got[0] >> np.uint64(32)).astype(np.int64) + s * span)
            ev.append((got[0] & np.uint64(0xFFFFFFFF)).astype(np.int64) + s * span)
            ew.append(got[1])
    for s in range(k - 1):
        r = bounds[s + 1]
        above = labels[at[s] + (r - bounds[s] - 1) * W:][:W]
        below = labels[at[s + 1]:][:W]
        for up, down in _across_seam(W, connectivity):
            a, b = above[up], below[down]
            both = (a != 0) & (b != 0)
            eu.append(a[both] + s * span)
            ev.append(b[both] + (s + 1) * span)
            ew.append(np.maximum(z[r - 1, up], z[r, down])[both])
    eu, ev = np.concatenate(eu).astype(np.int64), np.concatenate(ev).astype(np.int64)
    ew = np.concatenate(ew).astype(np.float32)
    g = np.full(k * span, np.inf, np.float32)
    g[1::span] = -np.inf
    if lib.terrain_spill_levels(g.size, eu.size, eu.ctypes.data, ev.ctypes.data,
                                ew.ctypes.data, g.ctypes.data):
        raise MemoryError(f"fill: no memory for the spills of {H} x {W} cells")
    g[0::span] = -np.inf  # nodata and the unreached: inf already

    # each strip's levels raised on their way to rows bounds[s]... of the front of fh, every
    # strip at once (moved after, on one thread, they took 2.8 s of the 10-ft fill): a strip
    # shifts left by its frames, so its first cells land where the end of the strip before
    # it still waits to move; those are raised aside first and written once all are done
    heads = [np.empty(0, np.float32)] * k

    def lift(s, stop):
        n = (bounds[s + 1] - bounds[s]) * W
        h = 0 if s == 0 else min(n, at[s - 1] - bounds[s - 1] * W)  # the strip before's shift

        def raise_into(out, first, count):  # the strip's levels first... raised into out
            lib.terrain_flood_raise(out, fh.ctypes.data + 4 * (at[s] + first),
                                    labels.ctypes.data + 4 * (at[s] + first), count,
                                    g.ctypes.data + 4 * s * span)
        heads[s] = np.empty(h, np.float32)
        raise_into(heads[s].ctypes.data, 0, h)
        raise_into(fh.ctypes.data + 4 * (bounds[s] * W + h), h, n - h)

    native.in_strips(bounds, lift)
    for s in range(k):
        fh[bounds[s] * W:][:heads[s].size] = heads[s]


def _refuse_infinite(z):
    """:class:`InputError` naming the first infinite elevation of ``z`` (host or device),
    if any: no level lies above inf (the flood left every cell undrained)."""
    xp = array_backend(z).xp
    bad = xp.isinf(z)
    if bool(bad.any()):
        r, c = (int(v) for v in xp.argwhere(bad)[0])
        raise InputError(f"dem: elevation {float(z[r, c])} at cell (row, col) = ({r}, {c}): "
                         "elevations are finite numbers (NaN is nodata)")


def _check(rc, what, H, W, z=None):
    if rc == -1:
        raise MemoryError(f"fill: no memory for {what} of {H} x {W} cells")
    if rc == -4:  # the flood found one: its first cell named here
        _refuse_infinite(z)
    if rc == -2:
        raise InputError(f"fill: {H} x {W} cells in one block: {what} takes fewer than "
                         "2^31")


_FILL_SIGNATURES = {
    "terrain_drain_grid": (ctypes.c_int64,
                           [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 2 + [ctypes.c_void_p]),
    "terrain_flood_grid": (ctypes.c_int64, [ctypes.c_void_p] * 2 + [ctypes.c_int64] * 2
                           + [ctypes.c_int] * 2 + [ctypes.c_void_p] * 5),
    "terrain_spill_levels": (ctypes.c_int64, [ctypes.c_int64] * 2 + [ctypes.c_void_p] * 4),
    "terrain_flood_raise": (None, [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_void_p]),
    "terrain_renumber_strip": (None, [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]),
    "terrain_outlet_cells": (None, [ctypes.c_void_p] + [ctypes.c_int64] * 2
                             + [ctypes.c_int, ctypes.c_void_p] + [ctypes.c_int64] * 2),
    "terrain_fill_layers": (None, [ctypes.c_void_p] * 2 + [ctypes.c_int64]
                            + [ctypes.c_void_p] * 4),
    "terrain_fill_hierarchy": (ctypes.c_int64, [ctypes.c_void_p, ctypes.c_int64]
                               + [ctypes.c_void_p] * 3 + [ctypes.c_int64]
                               + [ctypes.c_void_p] * 3),
    "terrain_free": (None, [ctypes.c_void_p]),
    "terrain_fill_epsilon": (ctypes.c_int64, [ctypes.c_void_p] + [ctypes.c_int64] * 2
                             + [ctypes.c_void_p] * 2 + [ctypes.c_int64] + [ctypes.c_void_p] * 2
                             + [ctypes.c_int64, ctypes.c_int] + [ctypes.c_void_p] * 2)}


class _CpuOps:
    """The host's priority flood (the CPU's, and the GPU's for a grid the device cannot
    hold whole) and the backend's forest (kept: it does not depend on the outlets)."""

    name = "cpu"

    def __init__(self, be):
        self.be = be
        self.mask = None
        self.spare = None  # the flood's labels buffer, once it is done with it

    def forest(self, z, connectivity, tile):
        if self.mask is None:
            from ..grid.mst import grid_mst
            self.mask = grid_mst(z, connectivity, "max", tile, self.be).mask
        return self.mask

    def levels(self, z, outlet, connectivity, tile):
        levels, self.spare = _flood_levels(z, outlet, connectivity)
        return levels


class _GpuOps:
    """The GPU's twin: the outlet-seeded forest, Euler tours and pointer jumping
    (:mod:`terrain.hydrology._fill_gpu`); the CPU's levels bit for bit."""

    name = "gpu"

    def __init__(self, be):
        self.be = be
        self.spare = None

    def forest(self, z, connectivity, tile):  # the plain forest (the hierarchy's)
        from ..grid.mst import grid_mst
        return grid_mst(z, connectivity, "max", tile, self.be).mask

    def levels(self, z, outlet, connectivity, tile):
        from ._fill_gpu import device_levels
        return device_levels(z, outlet, connectivity, self.be)  # left there for _finish


def fill_depressions(dem, connectivity=8, outlets=None, *, epsilon=False, min_depth=None,
                     min_area=None, hierarchy=False, labels=True, tile=512, backend=None,
                     overwrite_dem=False):
    """Fill every depression of ``dem`` to its spill elevation, in core.

    Parameters
    ----------
    dem : (rows, cols) array, NaN = nodata
        A CuPy ``dem`` filled on the GPU gives CuPy layers (nothing leaves the device). A
        grid the device cannot hold whole is filled on the host, NumPy layers.
    connectivity : {4, 8}
    outlets : (rows, cols) array, optional
        Non-zero cells are the outlets (instead of the grid's edge and nodata).
    epsilon : bool
        RichDEM's epsilon fill: every flooded or flat cell raised by float32 steps to drain.
    min_depth, min_area : float, int, optional
        Keep the depressions this deep and large (their pits drain), fill the others.
    hierarchy : bool
        Also return :func:`depression_hierarchy` in ``result.hierarchy``.
    labels : bool
        Number the depressions (``result.depression``); False leaves it None, for a caller
        that needs the filled DEM only (``flow``: a fifth of the 40-ft fill on the GPU).
    tile : int
        Tile side of the grid MST on the CPU.
    backend : {'cpu', 'gpu', 'auto'}, optional
    overwrite_dem : bool
        True: a float32 NumPy ``dem`` may be overwritten (it then holds the depth, one
        grid less), as SciPy's ``overwrite_a``. Other arrays are never written.

    Returns
    -------
    FillResult

    Examples
    --------
    >>> z = np.array([[5, 5, 5, 5], [5, 1, 2, 5], [5, 5, 3, 5], [5, 5, 5, 5]], np.float32)
    >>> z[0, 2] = 4                                    # the spill: 4, on the edge
    >>> r = fill_depressions(z, 8, backend="cpu")
    >>> r.filled[1:3, 1:3].tolist(), r.depression[1:3, 1:3].tolist()
    ([[4.0, 4.0], [5.0, 4.0]], [[1, 1], [0, 1]])
    """
    t0 = time.perf_counter()
    plain = not (hierarchy or epsilon or min_depth is not None or min_area is not None)
    be, conn = get_backend(backend), check_connectivity(connectivity)
    # the device takes the grid whole where it fits, else the host floods it (in row
    # strips on its cores: as fast as the device flooding it strip by strip, measured);
    # the options' hierarchy is the host's, so their DEM stays there, their levels not
    fits = be.is_gpu and fill_fits_on_device(np.shape(dem), be)
    whole = fits and plain
    z = _dem(dem, device=whole)
    if min_depth is not None and not _at_least(min_depth, 0):
        raise InputError(f"fill: min_depth {min_depth!r} must be a number >= 0")
    if min_area is not None and not _at_least(min_area, 1, whole=True):
        raise InputError(f"fill: min_area {min_area!r} must be a whole number >= 1")
    check_tile_size(tile)
    simplify = min_depth is not None or min_area is not None
    if whole:  # all on the device from here (the host's flood refuses an infinite cell)
        z = be.asarray(z)
        _refuse_infinite(z)
    outlet = outlet_cells(z, conn, outlets)
    ops = (_GpuOps if fits else _CpuOps)(be)
    times = {}
    table = None
    t1 = time.perf_counter()
    if hierarchy or simplify:
        table = depression_hierarchy(z, ops.forest(z, conn, tile), outlet, conn)
        times["hierarchy"] = time.perf_counter() - t1
        if simplify:
            pits = kept_pits(table, min_depth, min_area)
            outlet = outlet.copy()
            outlet.ravel()[pits] = 1
    t1 = time.perf_counter()
    if epsilon:
        f = epsilon_levels(z, outlet, conn, named=outlets is not None,
                           kept=pits if simplify else None)
    else:
        f = ops.levels(z, outlet, conn, tile)
    times["levels"] = time.perf_counter() - t1
    # the layers take the memory of what the fill is done with: at 4096² 144 MB fewer to
    # allocate, where a fresh page cost the 2-core VM more than its computation did
    r = _finish(z, f, outlet, conn, be, "in-core", times, t0,
                host=not array_backend(dem).is_gpu, labels=labels,
                spare=ops.spare, overwrite_dem=overwrite_dem)
    r.hierarchy = table if hierarchy else None
    if epsilon:
        r.stats["epsilon"] = True
    if simplify:
        r.sinks = pits
        r.stats.update({"min_depth": min_depth, "min_area": min_area,
                        "kept_pits": int(pits.shape[0])})
    return r


def _at_least(value, least, whole=False):
    """Whether ``value`` is a finite number >= ``least`` (and whole, with ``whole``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(v) and v >= least and (not whole or v == int(v))


def _dem(dem, device=False):
    """``dem`` as a C-contiguous float32 array on the host, or where it is with ``device``."""
    where = array_backend(dem)
    if device and where.is_gpu:
        z = where.xp.ascontiguousarray(dem, np.float32)
    else:
        z = np.ascontiguousarray(where.to_numpy(dem), np.float32)
    if z.ndim != 2:
        raise InputError(f"fill: the DEM must be 2-D, got shape {z.shape}")
    return z


#: RichDEM's neighbour order (W, NW, N, NE, E, SE, S, SW; D4: W, N, E, S) as (drow, dcol)
RICHDEM_D8 = (np.array([0, -1, -1, -1, 0, 1, 1, 1]), np.array([-1, -1, 0, 1, 1, 1, 0, -1]))
RICHDEM_D4 = (np.array([0, -1, 0, 1]), np.array([-1, 0, 1, 0]))


def epsilon_levels(z, outlet, connectivity=8, named=False, kept=None):
    """The epsilon fill's levels (``inf`` where undrained): RichDEM's priority flood step for
    step, ``terrain_fill_epsilon`` of terrain/native/kernels.c (C, not Numba: Numba's import
    and kernel load took ``fill --epsilon`` of the 300 x 400 sample from 0.6 to 1.2 s, 3.2 s
    on first use). Seeds: RichDEM's edge cells then the cells of nodata holes off the edge
    (so cells beside nodata drain), or the ``named`` outlets, row-major; then the ``kept``
    pits (flat indices, :func:`kept_pits`) where the outlets are not named (named ones
    include them)."""
    z = np.ascontiguousarray(z, np.float32)
    H, W = z.shape
    if named:
        seeds = np.flatnonzero(outlet.ravel() != 0)
    else:
        top = np.arange(W, dtype=np.int64)
        rows = np.stack([top, (H - 1) * W + top], axis=1).ravel()
        mid = np.arange(1, H - 1, dtype=np.int64) * W
        cols = np.stack([mid, mid + W - 1], axis=1).ravel()
        nodata = np.isnan(z)
        holes = depression_labels(nodata, connectivity)
        edge = np.unique(np.concatenate([holes[0], holes[-1], holes[:, 0], holes[:, -1]]))
        inner = np.flatnonzero((nodata & ~np.isin(holes, edge)).ravel())
        seeds = np.concatenate([rows, cols, inner]) if H * W else np.zeros(0, np.int64)
        if kept is not None:
            kept = np.asarray(kept, np.int64)
            seeds = np.concatenate([seeds, kept[~np.isin(kept, seeds)]])
    dr, dc = RICHDEM_D8 if check_connectivity(connectivity) == 8 else RICHDEM_D4
    seeds = np.ascontiguousarray(seeds, np.int64)
    seed_nodata = np.isnan(z.ravel()[seeds]).view(np.uint8)
    dr, dc = np.ascontiguousarray(dr, np.int64), np.ascontiguousarray(dc, np.int64)
    e = np.empty((H, W), np.float32)
    rc = native.interruptible(  # its own thread: Ctrl-C stops it
        lambda stop: native.declared(_FILL_SIGNATURES).terrain_fill_epsilon(
            z.ctypes.data, H, W, seeds.ctypes.data, seed_nodata.ctypes.data, seeds.size,
            dr.ctypes.data, dc.ctypes.data, dr.size, int(bool(named)), e.ctypes.data,
            stop.ctypes.data))
    _check(rc, "the epsilon fill", H, W)
    e[np.isnan(z)] = np.inf
    # a step above float32's largest value is inf, which reads as undrained (the cell kept
    # at its elevation, and verify failing the store): said instead. Without named outlets
    # every valid cell is reached, so an inf level is such a step; with them, a cut-off
    # region's are inf too, and a grid holding that largest value is refused
    raised = np.isinf(e) & ~np.isnan(z)
    if raised.any() and (not named or np.nanmax(z) == FLOAT32_MAX):
        raise InputError("dem: the epsilon fill would raise cells above float32's largest "
                         f"value ({FLOAT32_MAX:.8g}), as at cell {_first_cell(raised)} (cells "
                         "at that value are often nodata not declared as such)")
    return e


FLOAT32_MAX = float(np.finfo(np.float32).max)


def _first_cell(mask):
    r, c = (int(v) for v in np.argwhere(mask)[0])
    return f"(row, col) = ({r}, {c})"


HIERARCHY_COLUMNS = ("id", "pit_row", "pit_col", "pit_elevation", "spill_elevation",
                     "parent", "left", "right", "cells", "volume")


def depression_hierarchy(z, mask, outlet, connectivity=8):
    """The depression hierarchy of DEM ``z`` from its minimum spanning forest ``mask``
    (weight ``max``) and outlets: a dict of columns (:data:`HIERARCHY_COLUMNS`, meanings in
    docs/hydrology.md), ids 1, 2, ... in the order the depressions appear as water rises.

    >>> z = np.array([[9, 9, 9, 9, 9], [9, 1, 5, 2, 9], [9, 9, 9, 9, 7]], np.float32)
    >>> h = depression_hierarchy(z, __import__("terrain.grid", fromlist=["x"]).grid_mst(
    ...     z, 4, tile=2, backend="cpu").mask, outlet_cells(z, 4), 4)
    >>> h["pit_elevation"].tolist(), h["spill_elevation"].tolist(), h["parent"].tolist()
    ([1.0, 2.0, 1.0], [5.0, 5.0, 9.0], [3, 3, 0])
    """
    z = np.ascontiguousarray(z, np.float32)
    u, v, ids = _forest_edges(np.asarray(mask), z.shape[1])
    zf = z.ravel()
    w = np.maximum(zf[u], zf[v])
    order = np.lexsort((ids, w))
    nodes = _hierarchy_nodes(zf, u[order], v[order], w[order], (outlet != 0).ravel()).T
    pit, parent, left, right, cells = nodes[[0, 3, 4, 5, 6]].astype(np.int64)
    pitz, spill = nodes[1:3].astype(np.float32)
    rows, cols = np.divmod(pit, z.shape[1])
    return {"_width": z.shape[1], "id": np.arange(1, pit.shape[0] + 1, dtype=np.int64),
            "pit_row": rows,
            "pit_col": cols, "pit_elevation": pitz, "spill_elevation": spill,
            "parent": parent, "left": left, "right": right, "cells": cells, "volume": nodes[7]}


def _forest_edges(mask, width):
    """The forest's edges ``(u, v, id)`` from its mask (bit ``d``: the edge from a cell to
    its E, S, SE, SW neighbour), ``id = 4 u + d`` (the MST's ids)."""
    flat = mask.ravel()
    us, vs, ids = [], [], []
    for d, step in enumerate((1, width, width + 1, width - 1)):
        u = np.flatnonzero(flat & (1 << d))
        us.append(u)
        vs.append(u + step)
        ids.append(4 * u + d)
    return np.concatenate(us), np.concatenate(vs), np.concatenate(ids)


def _hierarchy_nodes(zf, eu, ev, ew, drained):
    """The hierarchy's nodes, rows of ``(pit, pit_z, spill, parent, left, right, cells,
    volume)`` (float64): Kruskal over the forest's edges sorted by ``(weight, id)``,
    ``terrain_fill_hierarchy`` of terrain/native/kernels.c (C, not Numba: Numba's import and
    kernel loads were 0.6 s of the sample's 1.1 s ``fill --min-depth``, 3.8 s more on first
    use)."""
    lib = native.declared(_FILL_SIGNATURES)
    eu, ev = np.ascontiguousarray(eu, np.int64), np.ascontiguousarray(ev, np.int64)
    ew = np.ascontiguousarray(ew, np.float32)
    drained = np.ascontiguousarray(drained, np.uint8)
    out = ctypes.c_void_p()
    k = native.interruptible(  # its own thread: Ctrl-C stops it
        lambda stop: lib.terrain_fill_hierarchy(zf.ctypes.data, zf.size, eu.ctypes.data,
                                                ev.ctypes.data, ew.ctypes.data, eu.size,
                                                drained.ctypes.data, ctypes.byref(out),
                                                stop.ctypes.data))
    if k == -1:
        raise MemoryError(f"fill: no memory for the depression hierarchy of {zf.size} cells")
    try:
        return (np.frombuffer((ctypes.c_double * (8 * k)).from_address(out.value),
                              np.float64).reshape(k, 8).copy() if k else np.zeros((0, 8)))
    finally:
        lib.terrain_free(out)


def kept_pits(table, min_depth=None, min_area=None):
    """The flat cell indices (int64) of the pits the simplification keeps: those whose
    highest depression (elder rule; none of zero height above its children) is at least
    ``min_depth`` deep and ``min_area`` cells large (docs/hydrology.md, "Options"). A pit
    cut off from every outlet (its tree's root never spills) is not kept: its region stays
    undrained, as the plain fill leaves it, not drained into a pit of infinite depth."""
    n = table["id"].shape[0]
    top = np.arange(n)  # each node's highest node with the same pit
    pit = table["pit_row"] * table["_width"] + table["pit_col"]
    parent = table["parent"]
    spill = table["spill_elevation"]
    drains = np.isfinite(spill)  # a root's; every other node's: its root's
    for k in range(n - 1, -1, -1):  # parents are made after their children
        p = parent[k] - 1
        if p >= 0:
            drains[k] = drains[p]
            if pit[p] == pit[k]:
                top[k] = top[p]
    leaves = np.flatnonzero(table["left"] == 0)
    t = top[leaves]
    # a node that ends at the level its children met is no depression of its own: whether
    # two pits meet before one of them drains (or a third joins) at one level is the order
    # of equal weights; the pit's highest depression is then the child it came from
    left, right = table["left"] - 1, table["right"] - 1
    same = np.where(left >= 0, np.where(pit[np.maximum(left, 0)] == pit, left, right), -1)
    while True:
        c = same[t]
        down = (c >= 0) & (spill[t] == spill[np.maximum(c, 0)])
        if not down.any():
            break
        t = np.where(down, c, t)
    depth = spill[t].astype(np.float64) - table["pit_elevation"][t]
    keep = drains[leaves]
    if min_depth is not None:
        keep &= depth >= float(min_depth)
    if min_area is not None:
        keep &= table["cells"][t] >= int(min_area)
    return np.unique(pit[leaves[keep]])


def _finish(z, f, outlet, conn, be, path, times, t0, depression=None, host=True,
            labels=True, spare=None, overwrite_dem=False):
    """The result layers and statistics from the levels ``f`` (``inf`` = undrained; on the
    host consumed, its memory reused), computed where ``f`` is (host or device:
    docs/hydrology.md), returned on the host (or left on the device without ``host``). On
    the host the outlet mask (consumed) holds the flooded cells, ``spare`` (an int32
    buffer, or None) the depression ids, and ``z`` the depth with ``overwrite_dem``."""
    t1 = time.perf_counter()
    on_device = not isinstance(f, np.ndarray)
    xp = be.xp if on_device else np
    outlets = _count_nonzero(xp, xp.asarray(outlet))
    if on_device:
        filled, depth, flooded, counts, max_depth = _device_layers(be.xp, z, f)
    else:
        filled, depth, flooded, counts, max_depth = _host_layers(
            z, f, depth=z if overwrite_dem else None, flooded=outlet)
    if depression is None and labels:
        depression, regions = _labelled(flooded, conn, be if on_device else "cpu",
                                        None if on_device else spare)
    elif depression is not None:
        regions = int(depression.max()) if depression.size else 0
    valid, wet, undrained = counts
    stats = {"cells": valid, "outlets": outlets,
             "flooded": wet,
             "depressions": None if depression is None else regions,
             "undrained": undrained, "max_depth": max_depth if valid else 0.0,
             "connectivity": conn, "backend": be.name, "path": path}
    if on_device and host:
        from .._transfer import to_host
        got = to_host(xp, [a for a in (filled, depth, depression) if a is not None])
        filled, depth, depression = (*got, None)[:3]
    times["labels"] = time.perf_counter() - t1
    times["total"] = time.perf_counter() - t0
    stats["times"] = {k: round(v, 6) for k, v in times.items()}
    return FillResult(filled, depth, depression, stats)


def _count_nonzero(xp, a):
    """The non-zero cells of a 2-D array: on the device at once, on the host summed over the
    row strips, one a thread (NumPy's count releases the GIL)."""
    if xp is not np:
        return count_nonzero(a)
    bounds = _strip_bounds(*a.shape)
    return sum(native.in_strips(bounds, lambda s, stop: int(
        np.count_nonzero(a[bounds[s]:bounds[s + 1]]))))


def _device_layers(xp, z, f):
    """``(filled, depth, flooded, (valid, flooded, undrained cells), max depth)`` from the
    levels ``f`` on the device (CuPy); :func:`_host_layers` is its twin."""
    z = xp.asarray(z)
    inf = xp.isinf(f)
    nan = xp.isnan(z)
    filled, flooded = _filled(xp, z, f, inf)  # flooded: depth > 0
    depth = (filled - z).astype(np.float32, copy=False)
    valid = count_nonzero(~nan)
    counts = (valid, count_nonzero(flooded), count_nonzero(inf & ~nan))
    return filled, depth, flooded, counts, nanmax(depth) if valid else 0.0


def _filled(xp, z, f, inf):
    """``(filled, raised)`` from the levels ``f`` (``inf``: where they are infinite, the
    undrained) on ``z``'s grid, by ``terrain_fill_layers``'s rule: a cell not raised keeps
    ``z``'s bits, a raised one takes its level + 0 (+0.0 for a zero), so which zero a level
    equal to ``z`` carries (the order of equal elevations in the flood or the forest) is in
    no route's bits."""
    raised = (f > z) & ~inf
    return xp.where(raised, f + np.float32(0), z).astype(np.float32, copy=False), raised


def _host_layers(z, f, depth=None, flooded=None):
    """:func:`_device_layers` on the host: ``terrain_fill_layers`` of
    terrain/native/kernels.c, one pass (NumPy's ten took 0.3 s at 4096²), in the flood's row
    strips (0.05-0.06 s on two cores at 4096² against 0.08-0.09 s). ``f`` is consumed:
    ``filled`` takes its memory (at the 40-ft size 0.9 GB fewer to allocate and fault in);
    ``depth`` (float32, may be ``z``: each cell is read before it is written) and
    ``flooded`` (one byte a cell), when given, are written in place."""
    z = np.ascontiguousarray(z, np.float32)
    filled = np.require(f, np.float32, ["C", "W"])
    depth = np.empty_like(z) if depth is None else depth
    flooded = (np.empty(z.shape, np.bool_) if flooded is None
               else flooded.reshape(z.shape).view(np.bool_))
    H, W = z.shape
    bounds = _strip_bounds(H, W)
    counts = np.zeros((len(bounds) - 1, 3), np.int64)
    deepest = np.zeros(len(bounds) - 1, np.float32)
    lib = native.declared(_FILL_SIGNATURES)

    def layers(s, stop):  # a strip of rows
        a, n = bounds[s] * W, (bounds[s + 1] - bounds[s]) * W
        lib.terrain_fill_layers(z.ctypes.data + 4 * a, filled.ctypes.data + 4 * a, n,
                                depth.ctypes.data + 4 * a, flooded.ctypes.data + a,
                                counts[s].ctypes.data, deepest.ctypes.data + 4 * s)

    native.in_strips(bounds, layers)
    return (filled, depth, flooded, tuple(int(c) for c in counts.sum(0)),
            float(deepest.max()))


# -- tiled: the quadtree walks' steps and their one sequence, :func:`fill_walks` (the
# in-memory driver below and pipelines/fill.py run it)
@dataclass(frozen=True)
class FillSpec(TiledGrid):
    """What the tiled fill computes on; ``named_outlets``: an outlet raster is given."""

    shape: tuple
    tile: int
    connectivity: int = 8
    named_outlets: bool = False

    def __post_init__(self):
        check_connectivity(self.connectivity)


@dataclass
class PortGraph:
    """A block's forest reduced to its ports (global ids): kept vertices, their levels, the
    edges between them and the edges leaving the block (``cu`` inside, ``cv`` outside)."""

    window: tuple
    verts: np.ndarray
    d: np.ndarray
    eu: np.ndarray
    ev: np.ndarray
    ew: np.ndarray
    cu: np.ndarray
    cv: np.ndarray
    cw: np.ndarray


def _read_halo(read, spec, window):
    """``(zh, mh, outlet)``: ``window``'s elevations and mask with a halo, and outlets."""
    r0, r1, c0, c1 = window
    zh = padded_window(lambda *w: read("elevation", *w), spec.shape, window, 1, np.nan,
                       np.float32)
    mh = padded_window(lambda *w: read("mst", *w), spec.shape, window, 1, 0, np.uint8)
    if spec.named_outlets:
        outlet = ((np.asarray(read("outlets", r0, r1, c0, c1)) != 0)
                  & ~np.isnan(zh[1:-1, 1:-1])).astype(np.uint8)
    else:
        outlet = _beside_nan(zh, _step(spec.connectivity))
    return zh, mh, outlet


def _local_to_global(local, window, ncols, width):
    i, j = np.divmod(np.asarray(local, np.int64), width)
    return (window[0] + i) * ncols + window[2] + j


def _fill_leaf_up(read, spec, after, level, i, j):
    """The walk's leaf step, up: ``(PortGraph, None, stats)`` of the group (``after``: what
    runs first)."""
    from . import _fill_cpu as K
    del after
    t0 = time.perf_counter()
    win = spec.window(level, i, j)
    zh, mh, outlet = _read_halo(read, spec, win)
    t1 = time.perf_counter()
    z = zh[1:-1, 1:-1]
    W = win[3] - win[2]
    src = np.where(outlet != 0, z, np.float32(np.inf)).astype(np.float32, copy=False).ravel()
    cp, cq, cw, kept, dk, ka, kb, kw = native.interruptible(  # Ctrl-C stops it
        K.leaf_reduce_cpu, zh, mh, src, ~np.isnan(z).ravel())
    ncols = spec.shape[1]
    verts = _local_to_global(kept, win, ncols, W)
    hi, hj = np.divmod(cq, W + 2)
    graph = PortGraph(win, verts, dk, verts[ka], verts[kb], kw,
                      _local_to_global(cp, win, ncols, W),
                      (win[0] - 1 + hi) * ncols + win[2] - 1 + hj, cw)
    stats = {"times": {"read": t1 - t0, "up": time.perf_counter() - t1},
             "read_bytes": zh.nbytes + mh.nbytes}
    return graph, None, stats


def _fill_merge(spec, level, i, j, *children):
    """The walk's merge step: the children's port graphs joined and reduced to the node's
    ports; ``(up, own, stats)``, ``own`` the joined forest for the split step."""
    from . import _fill_cpu as K
    t0 = time.perf_counter()
    win = spec.window(level, i, j)
    kids = [c for c in children if c is not None]
    cat = {k: np.concatenate([getattr(c, k) for c in kids])
           for k in ("verts", "d", "eu", "ev", "ew", "cu", "cv", "cw")}
    ncols = spec.shape[1]
    inner = _inside(cat["cv"], win, ncols)
    once = inner & (cat["cu"] < cat["cv"])  # each edge between children is listed twice
    eu = np.concatenate([cat["eu"], cat["cu"][once]])
    ev = np.concatenate([cat["ev"], cat["cv"][once]])
    ew = np.concatenate([cat["ew"], cat["cw"][once]])
    order = np.argsort(cat["verts"], kind="stable")
    verts, d = cat["verts"][order], cat["d"][order]
    lu, lv = np.searchsorted(verts, eu), np.searchsorted(verts, ev)
    indptr, adj, w = K.csr_from_edges_cpu(verts.shape[0], lu, lv, ew)
    out = ~inner
    port = np.zeros(verts.shape[0], np.bool_)
    port[np.searchsorted(verts, cat["cu"][out])] = True
    kept, dk, ka, kb, kw = K.forest_reduce_cpu(indptr, adj, w, d, port,
                                               np.ones(verts.shape[0], np.bool_))
    kv = verts[kept]
    up = PortGraph(win, kv, dk, kv[ka], kv[kb], kw, cat["cu"][out], cat["cv"][out],
                   cat["cw"][out])
    own = (verts, d, eu, ev, ew)
    return up, own, {"times": {"merge": time.perf_counter() - t0}}


def _fill_split(spec, level, i, j, incoming, own):
    """The walk's node step, down: the final levels of the node's joined forest, handed to
    the four children as ``(cells, levels)``; then ``stats``."""
    from . import _fill_cpu as K
    t0 = time.perf_counter()
    verts, d, eu, ev, ew = own
    src = d.copy()
    if incoming is not None:
        ids, vals = incoming
        at = np.searchsorted(verts, ids)
        src[at] = np.minimum(src[at], vals)
    indptr, adj, w = K.csr_from_edges_cpu(verts.shape[0], np.searchsorted(verts, eu),
                                          np.searchsorted(verts, ev), ew)
    f = native.interruptible(K.forest_dp_cpu, indptr, adj, w, src)  # Ctrl-C stops it
    return _to_children(spec, level, i, j, verts, f) + (
        {"times": {"split": time.perf_counter() - t0}},)


def _to_children(spec, level, i, j, cells, values):
    """``(cells, values)`` split among the node's four children (None: outside the grid)."""
    from ..grid.merge import child_windows
    parts = []
    for cw in child_windows(spec.window(level, i, j), spec.tile << (level - 1)):
        sel = None if cw is None else _inside(cells, cw, spec.shape[1])
        parts.append(None if cw is None else (cells[sel], values[sel]))
    return tuple(parts)


@dataclass
class LeafBlock:
    """A group's results on the way down: levels (``inf``: undrained), outlets, provisional
    labels of its flooded regions and each label's key (its first cell's global id)."""

    window: tuple
    z: np.ndarray
    levels: np.ndarray
    outlet: np.ndarray
    labels: np.ndarray
    keys: np.ndarray
    stats: dict

    def layers(self):
        """``(filled, depth)`` of the block."""
        filled, _ = _filled(np, self.z, self.levels, np.isinf(self.levels))
        return filled, (filled - self.z).astype(np.float32, copy=False)


def _fill_leaf_down(read, keep, spec, after, level, i, j, incoming):
    """The walk's leaf step, down: ``(its label border, its labels' keys, keep(block))`` of
    the group's :class:`LeafBlock` (``after``: what runs first)."""
    del after
    block = _drained_block(read, spec, level, i, j, incoming)
    return _label_border(block, spec.shape[1]), block.keys, keep(block)


def _drained_block(read, spec, level, i, j, incoming):
    """The group's final levels (drained from its outlets and ``incoming``) and provisional
    labels, as a :class:`LeafBlock`."""
    from . import _fill_cpu as K
    t0 = time.perf_counter()
    win = spec.window(level, i, j)
    zh, mh, outlet = _read_halo(read, spec, win)
    t1 = time.perf_counter()
    z = np.ascontiguousarray(zh[1:-1, 1:-1])
    src = np.where(outlet != 0, z, np.float32(np.inf)).astype(np.float32, copy=False).ravel()
    if incoming is not None:
        ids, vals = incoming
        r, c = np.divmod(ids, spec.shape[1])
        at = (r - win[0]) * (win[3] - win[2]) + c - win[2]
        src[at] = np.minimum(src[at], vals)
    f = _drain_block(zh, mh, src).reshape(z.shape)
    filled = np.where(np.isinf(f), z, f)
    labels = depression_labels(filled > z, spec.connectivity)
    first = K.first_cells_cpu(labels, int(labels.max(initial=0)))  # each label's key
    keys = _local_to_global(np.maximum(first, 0), win, spec.shape[1], labels.shape[1])
    keys[0] = -1
    stats = {"times": {"read": t1 - t0, "down": time.perf_counter() - t1},
             "read_bytes": zh.nbytes + mh.nbytes}
    return LeafBlock(win, z, f, outlet, labels, keys, stats)


# -- the depression ids across groups: a second walk joins regions across group borders
# (the smallest first-cell key wins); an id is 1 + the number of smaller keys

@dataclass
class LabelBorder:
    """The flooded cells on a block's four sides (sorted global ids) and their keys."""

    window: tuple
    cells: np.ndarray
    keys: np.ndarray


def _label_border(block, ncols):
    """:class:`LabelBorder` of a :class:`LeafBlock` (the label walk's leaf step up)."""
    lab = block.labels
    H, W = lab.shape
    side = np.zeros(lab.shape, np.bool_)
    side[0], side[-1], side[:, 0], side[:, -1] = True, True, True, True
    i, j = np.nonzero(side & (lab > 0))
    local = i.astype(np.int64) * W + j
    cells = _local_to_global(local, block.window, ncols, W)
    order = np.argsort(cells)
    return LabelBorder(block.window, cells[order], block.keys[lab[i, j]][order])


def _label_merge(spec, level, i, j, *children):
    """The label walk's merge step: the children's border regions joined across the
    separators; ``(up, own, stats)``, ``own`` = ``(keys, resolved)`` seen at the node."""
    from . import _fill_cpu as K
    t0 = time.perf_counter()
    win = spec.window(level, i, j)
    kids = [(q, c) for q, c in enumerate(children) if c is not None]
    cells = np.concatenate([c.cells for _, c in kids])
    keys = np.concatenate([c.keys for _, c in kids])
    child = np.concatenate([np.full(c.cells.shape[0], q, np.int8) for q, c in kids])
    order = np.argsort(cells, kind="stable")
    cells, keys, child = cells[order], keys[order], child[order]
    resolved = K.union_across_cpu(cells, keys, child, spec.shape[1], _step(spec.connectivity))
    keep = ~_inside(cells, (win[0] + 1, win[1] - 1, win[2] + 1, win[3] - 1), spec.shape[1])
    up = LabelBorder(win, cells[keep], resolved[keep])
    uk, at = np.unique(keys, return_index=True)
    own = (uk, resolved[at])
    return up, own, {"times": {"labels": time.perf_counter() - t0}}


def _label_split(spec, level, i, j, incoming, own):
    """The label walk's node step, down: the node's final keys handed to the children."""
    keys, resolved = own
    final = _final_keys(resolved, incoming)
    return _to_children(spec, level, i, j, keys, final) + ({"times": {"labels": 0.0}},)


def _final_keys(keys, incoming):
    """``keys`` mapped by ``incoming = (sorted keys, final keys)`` (others are final)."""
    if incoming is None or incoming[0].shape[0] == 0:
        return keys
    ik, iv = incoming
    at = np.minimum(np.searchsorted(ik, keys), ik.shape[0] - 1)
    return np.where(ik[at] == keys, iv[at], keys)


def _label_count(spec, level, i, j, incoming, keys):
    """The label walk's leaf step, down: what a group tells the numbering (owned regions
    per row, keys to publish and need), and ``incoming`` for its ids."""
    window = spec.window(level, i, j)
    final = _final_keys(keys, incoming)[1:]
    ncols = spec.shape[1]
    mine = _inside(final, window, ncols)
    owned = np.unique(final[mine])
    rows = owned // ncols - window[0]
    per_row = np.bincount(rows, minlength=window[1] - window[0]).astype(np.int64)
    crossing = np.zeros(0, np.int64) if incoming is None else np.unique(incoming[1])
    publish = np.intersect1d(owned, crossing)
    need = np.unique(final[~mine])
    return {"window": window, "per_row": per_row, "publish": publish,
            "publish_rank": _row_ranks(owned, ncols)[np.searchsorted(owned, publish)],
            "need": need}, incoming


def _row_ranks(owned, ncols):
    """Rank of each (sorted) key among the keys of its row."""
    if owned.shape[0] == 0:
        return np.zeros(0, np.int64)
    rows = owned // ncols
    first = np.searchsorted(rows, rows)
    return np.arange(owned.shape[0]) - first


def _label_numbering(spec, *counts):
    """The ids (1 + the regions with a smaller key) from every group's :func:`_label_count`:
    per group ``(row offsets, needed keys, their ids)``."""
    ncols = spec.shape[1]
    rows_total = np.zeros(spec.shape[0] + 1, np.int64)
    for c in counts:
        r0, r1 = c["window"][0], c["window"][1]
        rows_total[r0 + 1:r1 + 1] += c["per_row"]
    before_row = np.cumsum(rows_total)  # regions in the rows above row r: before_row[r]
    offsets = []
    left = {}
    for c in sorted(counts, key=lambda c: (c["window"][0], c["window"][2])):
        r0, r1, c0, _ = c["window"]
        prev = left.get((r0, r1), np.zeros(r1 - r0, np.int64))
        offsets.append((c["window"], before_row[r0:r1] + prev))
        left[(r0, r1)] = prev + c["per_row"]
    by_window = dict(offsets)
    pub_keys, pub_ids = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for c in counts:
        w = c["window"]
        rows = c["publish"] // ncols - w[0]
        pub_keys.append(c["publish"])
        pub_ids.append(by_window[w][rows] + c["publish_rank"] + 1)
    pk, pi = np.concatenate(pub_keys), np.concatenate(pub_ids)
    order = np.argsort(pk)
    pk, pi = pk[order], pi[order]
    out = []
    for c in counts:
        at = np.searchsorted(pk, c["need"])
        out.append((by_window[c["window"]], c["need"], pi[at] if pk.shape[0] else at))
    return tuple(out)


def _label_ids(read, write_ids, spec, level, i, j, keys, incoming, numbering):
    """The final ``depression`` ids of a group's cells from its provisional labels (read
    back as :data:`LAKE_LABELS`), given to ``write_ids(window, ids)``; returns the largest."""
    window = spec.window(level, i, j)
    labels = read(LAKE_LABELS, *window)
    offsets, need, need_ids = numbering
    ncols = spec.shape[1]
    final = _final_keys(keys, incoming)
    ids = np.zeros(final.shape[0], np.int32)
    mine = _inside(final, window, ncols)
    mine[0] = False
    owned = np.unique(final[mine])
    at = np.searchsorted(owned, final[mine])
    ids[mine] = (offsets[owned[at] // ncols - window[0]] + _row_ranks(owned, ncols)[at]
                 + 1).astype(np.int32)
    other = ~mine
    other[0] = False
    if np.any(other):
        ids[other] = need_ids[np.searchsorted(need, final[other])].astype(np.int32)
    ids = ids[labels]
    write_ids(window, ids)
    return int(ids.max(initial=0))


def fill_walks(spec, plan, read, keep, write_ids=None, call=call_now, after=None):
    """The tiled fill along the quadtree walks of ``plan`` (docs/hydrology.md, "Out of
    core"): the fill walk (its levels), then, with ``write_ids``, the label walk (the lake
    ids). The one sequence of both drivers, :func:`fill_tiled` in memory and
    ``pipelines.fill.build_fill_graph``, which differ in ``call`` and in how a group's
    block is read and what is done with its results.

    Parameters
    ----------
    spec : FillSpec
    plan : terrain.tiles.quadtree.QuadtreePlan
    read : callable
        ``read(name, r0, r1, c0, c1)``: the block of layer ``elevation``, ``mst`` (the
        forest's mask), ``outlets`` (with ``spec.named_outlets``) or :data:`LAKE_LABELS`
        (the labels ``keep`` kept).
    keep : callable
        ``keep(block)`` with each group's :class:`LeafBlock`: keeps its levels and labels;
        what it returns comes back by group.
    write_ids : callable, optional
        ``write_ids(window, ids)``: a group's final ``depression`` ids. None: no label walk.
    call : callable
        Runs each step (:func:`terrain.tiles.quadtree.call_now`) or schedules it (the
        pipeline's ``TaskGraph.call``); keys ``(stage, i, j)``, stages ``up``, ``merge{k}``,
        ``split{k}``, ``write``, ``lmerge{k}``, ``lsplit{k}``, ``count``, ``numbering``,
        ``label``.
    after : optional
        What the steps that read must run after (a task of the pipeline's).

    Returns
    -------
    kept : list
        What ``keep`` returned, by group (``plan.groups``' order).
    largest : list
        Each group's largest lake id, by group (empty without ``write_ids``).
    """
    g = plan.group_level
    _, rest = walk_up(plan, (_fill_leaf_up, read, spec, after), (_fill_merge, spec), call,
                      nout=3, names=("up", "merge"))
    own = {node: r[:1] for node, r in rest.items() if node[0] > g}
    _, leaves = walk_down(plan, (_fill_split, spec), (_fill_leaf_down, read, keep, spec, after),
                          call, extra=own, node_nout=5, leaf_nout=3, names=("split", "write"))
    kept = [leaves[(g,) + ij][2] for ij in plan.groups]
    if write_ids is None:
        return kept, []

    def label_call(fn, *args, key, nout=None):  # the label walk's leaves: the writes' borders
        if key[0] == "lborder":
            return leaves[(g,) + tuple(key[1:])][0], None, None
        return call(fn, *args, key=key, nout=nout)

    _, rest = walk_up(plan, None, (_label_merge, spec), label_call, nout=3,
                      names=("lborder", "lmerge"))
    own = {node: r[:1] for node, r in rest.items() if node[0] > g}
    own.update({(g, i, j): (leaves[(g, i, j)][1],) for (i, j) in plan.groups})
    _, counted = walk_down(plan, (_label_split, spec), (_label_count, spec), call, extra=own,
                           node_nout=5, leaf_nout=2, names=("lsplit", "count"))
    numbering = call(_label_numbering, spec, *[counted[(g,) + ij][0] for ij in plan.groups],
                     key=("numbering",), nout=len(plan.groups))
    largest = [call(_label_ids, read, write_ids, spec, g, i, j, leaves[(g, i, j)][1],
                    counted[(g, i, j)][1], numbering[q], key=("label", i, j))
               for q, (i, j) in enumerate(plan.groups)]
    return kept, largest


def fill_tiled(dem, connectivity=8, outlets=None, *, tile=512, group_tiles=4, backend=None):
    """:func:`fill_depressions` along the tiled walks (:func:`fill_walks`), in memory: the
    same bits.

    >>> z = np.array([[5, 5, 5, 5], [5, 1, 2, 5], [5, 5, 3, 5], [5, 5, 5, 5]], np.float32)
    >>> z[0, 2] = 4
    >>> fill_tiled(z, 8, tile=2, group_tiles=1, backend="cpu").filled[1:3, 1:3].tolist()
    [[4.0, 4.0], [5.0, 4.0]]
    """
    from ..grid.mst import grid_mst
    t0 = time.perf_counter()
    be, z, conn = get_backend(backend), _dem(dem), check_connectivity(connectivity)
    spec = FillSpec(tuple(int(s) for s in z.shape), int(tile), conn, outlets is not None)
    outlet = outlet_cells(z, conn, outlets)
    mask = grid_mst(z, conn, "max", tile, be, group_tiles=group_tiles).mask
    f = np.full(z.shape, np.inf, np.float32)
    depression = np.zeros(z.shape, np.int32)
    # a group's lake labels wait in ``depression`` until its ids replace them
    layers = {"elevation": z, "mst": mask, "outlets": outlet, LAKE_LABELS: depression}

    def read(name, r0, r1, c0, c1):
        return layers[name][r0:r1, c0:c1]

    def keep(block):
        r0, r1, c0, c1 = block.window
        f[r0:r1, c0:c1] = block.levels
        depression[r0:r1, c0:c1] = block.labels

    def write_ids(window, ids):
        depression[window[0]:window[1], window[2]:window[3]] = ids

    if 0 not in z.shape:
        fill_walks(spec, spec.plan(group_tiles), read, keep, write_ids)
    times = {"levels": time.perf_counter() - t0}
    return _finish(z, f, outlet, conn, be, "tiled", times, t0, depression)
