"""Tiled, out-of-core exact SSSP / cost distance (thesis ch. 4-5 with Haverkort's hierarchy).

Conventions (graph, arc codes, costs, labels, outputs) are those of ``SSSP_CONVENTIONS.md`` and
:mod:`terrain.grid.costs`: a vertex is a cell whose elevation and friction are not NaN, arc
``k`` goes from ``u`` to ``u + (ARC_DR[k], ARC_DC[k])`` and costs ``arc_cost(...)``, and every
vertex gets the lexicographically least label ``(distance, allocation, hops)`` over all paths
from a source ``i`` (start label ``(c_i, i, 0)``); the backlink is the lowest arc code to a
tight predecessor with ``(allocation, hops - 1)``.

Algorithm
---------
The grid is cut into ``T x T`` tiles (``T`` a power of two) under the quadtree of
:mod:`terrain.tiles.quadtree` (groups of tiles, nodes above). The *boundary* of a window (a
tile or a node) is its frame of width ``w`` (1 for connectivity 4 and 8, 2 for 16: a knight
arc reaches two cells) on the sides that face other windows, nodata cells left out. Every arc
between two windows joins two boundary cells.

1. *Phase 1, per tile, source independent* (:func:`tile_boundaries`): Dijkstra inside the
   tile from each boundary cell, with the fixed-capacity tournament tree of
   :mod:`terrain.grid._tournament` as its queue, gives the ``B x B`` matrices of least
   ``(distance, hops)`` between the tile's boundary cells. Many tiles per call: Numba
   ``prange`` over the tiles (:func:`boundary_pairs_cpu`); on the GPU
   (:func:`boundary_pairs_gpu`, ``_boundary.cu``) one CUDA thread per (tile, boundary
   source), the tile's elevations and frictions in shared memory, each thread's tree and
   labels in global scratch; tiles above ``MAX_GPU_TILE`` (64) run on the CPU kernel.
2. *Phase 2, the hierarchy.* Bottom-up (:func:`index_leaf`, :func:`index_merge`,
   :func:`node_boundary`) a node builds its *child-boundary graph* (its children's boundary
   cells, each child's matrix as dense arcs, the grid arcs between children) and runs
   Dijkstra on it from each of its own boundary cells. A node of side ``S`` costs ``O(S)``
   work per cell, so the height is capped (``max_height``, default
   :func:`default_max_height`); above the cap the root's step runs ONE Dijkstra on the
   boundary graph of all top nodes (:func:`top_labels`). Sources climb the same way
   (:func:`sources_leaf`, :func:`sources_merge`): each tile's sources reach its boundary by a
   Dijkstra inside the tile (:func:`tile_source_labels`: the thesis's special case §5.6.1,
   the source's own tile), nodes combine their children's. Top-down (:func:`down_node`,
   :func:`down_leaf`, :func:`node_down`) a node seeds its child-boundary graph with its
   boundary's final labels and its children's source labels; a multi-source Dijkstra gives
   the children's final boundary labels. The merges of a group's level run in one call
   (:func:`nodes_boundary`: :func:`graphs_pairs_cpu` or ``_boundary.cu: graphs_pairs``),
   and on the GPU the top can be solved by two label-correcting sweeps
   (:func:`top_solve_gpu`) that give the Dijkstra's labels.
3. *Phase 3, per tile* (:func:`fill_group`): Dijkstra seeded with the
   final labels of the halo (the cells within ``w`` outside the tile, which are the
   neighbours' boundary cells, fixed) and the tile's sources; then the backlink pass, halo
   cells counting as predecessors. Batched like phase 1 (``windows_dijkstra`` on the GPU).

The walks are :func:`terrain.tiles.quadtree.walk_up`/``walk_down`` (inside a group, the same
walks on the group's block), so a pipeline can schedule the same steps as Dask tasks.

Reuse: phase 1 and the bottom-up matrices do not depend on the sources. :class:`TiledIndex`
holds them as plain arrays (:meth:`TiledIndex.to_arrays`, :meth:`TiledIndex.from_arrays`);
``tiled_sssp(..., reuse=index)`` runs only the source part of phase 2 and phase 3.

Exactness: labels are compared as ``(distance, allocation, hops)`` everywhere, so with
integer costs (an integer DEM with ``absdiff``) distance, allocation and backlink equal the
in-core :func:`terrain.grid.sssp.grid_sssp` bit for bit, for every tile size, group size and
height cap. With float costs the boundary matrices add path *segments* (another association
of the same float64 sums): distances agree within a relative ``1e-12``.

Why by hand: no library does boundary-pair SSSP with a fixed-capacity queue on the GPU, and
scipy's ``dijkstra`` neither takes lexicographic keys nor runs inside Numba.

Costs: phase 1 ``O(T log T)`` per cell (``~4T`` Dijkstras over ``T^2`` cells per tile) and
``12 (4T)^2 / T^2 = 192`` bytes per cell of matrices; each hierarchy level of side ``S``
``O(S)`` per cell; the top Dijkstra ``~16`` matrix arcs per cell; phase 3 ``O(log T)`` per
cell.
"""
import time
from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

from ..backend import get_backend
from ..errors import InputError
from ..tiles.store import check_tile_size
from ._tournament import (INT_INF, key_less, tt_alloc, tt_capacity, tt_lower, tt_new,
                          tt_pop, tt_seed)
from .costs import (ARC_DC, ARC_DR, arc_codes, arc_cost, arc_lengths,
                    check_friction, cost_model_code)
from .sssp import SSSPResult, check_sources
from ..tiles.quadtree import QuadtreePlan, TiledGrid, walk_down, walk_up

__all__ = ["tiled_sssp", "TiledSpec", "TiledIndex", "NodeBoundary", "TiledSSSPResult",
           "ArrayReader", "build_index", "index_leaf", "tile_batch", "TileBatch", "index_merge",
           "FlatBoundaries",
           "sources_leaf",
           "sources_merge", "down_node", "down_leaf", "fill_group", "tile_boundaries",
           "node_boundary", "tile_source_labels", "node_source_labels", "top_labels",
           "node_down", "top_labels_paged", "halo_seeds", "boundary_pairs_cpu",
           "boundary_pairs_gpu", "windows_dijkstra_cpu", "windows_dijkstra_gpu",
           "nodes_boundary", "graphs_pairs_cpu", "graphs_pairs_gpu", "top_solve_gpu",
           "default_max_height", "MAX_GPU_TILE", "PHASES", "shared_pass", "SHARED_BYTES",
           "DeviceLevel", "level_solve_gpu"]

PHASES = ("index", "sources_up", "top_down", "phase3")
MAX_GPU_TILE = 64  # phase 1 on the GPU: larger tiles run on the CPU kernel (see tile_boundaries)
_INF = np.inf


# --------------------------------------------------------------------------- spec and windows

@dataclass(frozen=True)
class TiledSpec(TiledGrid):
    """What is computed: grid shape, tile side, connectivity, cost model, cell size, height cap.

    Examples
    --------
    >>> s = TiledSpec((10, 20), 8)
    >>> s.tiles_shape, s.levels, s.width, s.window(1, 0, 1)
    ((2, 3), 3, 1, (0, 10, 16, 20))
    """

    shape: tuple
    tile: int
    connectivity: int = 8
    cost: str = "absdiff"
    cellsize: tuple = (1.0, 1.0)
    max_height: int = None

    def __post_init__(self):
        arc_codes(self.connectivity)
        cost_model_code(self.cost)
        check_tile_size(self.tile)
        arc_lengths(self.cellsize)
        if self.max_height is not None and int(self.max_height) < 0:
            raise InputError(f"max_height {self.max_height}: must be >= 0")

    @property
    def model(self):
        return cost_model_code(self.cost)

    @property
    def lengths(self):
        return arc_lengths(self.cellsize)

    @property
    def codes(self):
        return arc_codes(self.connectivity)

    @property
    def width(self):
        """Frame width: the longest arc's reach in rows or columns."""
        return 2 if int(self.connectivity) == 16 else 1

    @property
    def height(self):
        """Highest level that gets boundary matrices (the cap, at most the root's level)."""
        top = self.levels - 1
        if self.max_height is None:
            return min(top, default_max_height(self.tiles_shape, tile=self.tile))
        return min(top, int(self.max_height))


def default_max_height(tiles_shape, max_top_nodes=16384, tile=None, max_top_cells=1 << 21):
    """Default height cap: the lowest level with at most ``max_top_nodes`` nodes and, given
    the ``tile`` side, at most ``max_top_cells`` top boundary cells (``~4 S`` per node of
    side ``S``).

    The budget is the top Dijkstra's graph: its vertex count ``~ 4 S`` per top node of side
    ``S`` shrinks as the cap rises (out of core, ~250 bytes per vertex are held in memory:
    2^21 cells are ~0.5 GB), while every level below the cap costs ``O(S)`` work per cell
    (about a phase 1 with tiles of side ``2 S``) and ``12 (4 S)^2`` bytes per node. Up to
    16384 tiles (2048^2 cells with tiles of 16) the flat boundary graph (height 0) is the
    cheapest in memory and time: measured at 2048^2, height 1 costs ~4x the index time of
    height 0 and its reuse query is slower too (docs/cost-distance-tiled.md).

    Examples
    --------
    >>> default_max_height((16, 16)), default_max_height((256, 256))
    (0, 1)
    >>> default_max_height((1024, 1024), tile=16)  # 16384^2 cells: 1024 top nodes of 512
    5
    """
    rows, cols = tiles_shape
    h = 0
    while rows * cols > 1 and (rows * cols > max_top_nodes or (
            tile is not None and rows * cols * 4 * (int(tile) << h) > max_top_cells)):
        rows, cols = -(-rows // 2), -(-cols // 2)
        h += 1
    return h


def _frame_mask(rows, cols, window, shape, width):
    """True for cells ``(rows, cols)`` of ``window`` within ``width`` of a side facing the grid."""
    r0, r1, c0, c1 = window
    m = np.zeros(np.shape(rows), bool)
    if r0 > 0:
        m |= rows < r0 + width
    if r1 < shape[0]:
        m |= rows >= r1 - width
    if c0 > 0:
        m |= cols < c0 + width
    if c1 < shape[1]:
        m |= cols >= c1 - width
    return m


# --------------------------------------------------------------------------- Numba kernels

@njit(cache=True, nogil=True)
def _arc_table(z, f, inner, codes, model, lengths):
    """Costs ``wt[u, kk]`` of arc ``codes[kk]`` from cell u of a window (inf: no such arc).

    An arc exists when both ends are in the window and valid and its head is ``inner``.
    Computed once per window and shared by all the Dijkstras run on it (phase 1 runs ``B``).
    """
    H, W = z.shape
    K = codes.shape[0]
    wt = np.full((H * W, K), _INF)
    for ur in range(H):
        for uc in range(W):
            zu = z[ur, uc]
            fu = f[ur, uc]
            if zu != zu or fu != fu:
                continue
            for kk in range(K):
                k = codes[kk]
                vr = ur + ARC_DR[k]
                vc = uc + ARC_DC[k]
                if vr < 0 or vr >= H or vc < 0 or vc >= W or not inner[vr, vc]:
                    continue
                zv = z[vr, vc]
                fv = f[vr, vc]
                if zv != zv or fv != fv:
                    continue
                w = arc_cost(zu, zv, fu, fv, k, model, lengths)
                if w < _INF:
                    wt[ur * W + uc, kk] = w
    return wt


@njit(cache=True, nogil=True)
def _window_dijkstra(wt, off, ld, la, lh, kd, ka, kh, win):
    """Multi-source Dijkstra on the cells of a window, keys ``(d, a, h)`` lexicographic.

    ``wt`` from :func:`_arc_table`, ``off[kk]`` the flat offset of arc ``kk``. ``ld, la, lh``
    (flat, row-major) hold the seeds (``d = inf`` elsewhere) and receive the labels. Cells
    that are not ``inner`` have no incoming arcs in ``wt``: halo seeds stay fixed.
    """
    K = off.shape[0]
    tt_seed(kd, ka, kh, win, ld, la, lh)
    while kd[1] < _INF:
        u = tt_pop(kd, ka, kh, win)
        du = ld[u]
        au = la[u]
        hu = lh[u] + 1
        for kk in range(K):
            w = wt[u, kk]
            if not w < _INF:
                continue
            nd = du + w
            v = u + off[kk]
            if key_less(nd, au, hu, 0, ld[v], la[v], lh[v], 0):
                ld[v] = nd
                la[v] = au
                lh[v] = hu
                tt_lower(kd, ka, kh, win, v, nd, au, hu)


@njit(cache=True, nogil=True, parallel=True)
def boundary_pairs_cpu(z, f, bidx, bcount, codes, model, lengths, out_d, out_h):
    """Phase 1 on many tiles: ``out_*[t, s, j]`` = label of boundary cell j from boundary cell s.

    ``z, f`` (n, T, T) float32 (NaN = nodata), ``bidx`` (n, Bmax) int32 local cell indices
    (row-major), ``bcount`` (n,) int32. Paths stay inside the tile.
    """
    n, T, _ = z.shape
    off = np.empty(codes.shape[0], np.int64)
    for kk in range(codes.shape[0]):
        off[kk] = ARC_DR[codes[kk]] * T + ARC_DC[codes[kk]]
    for t in prange(n):
        B = bcount[t]
        if B == 0:
            continue
        kd, ka, kh, win = tt_alloc(T * T)
        ld = np.empty(T * T, np.float64)
        la = np.empty(T * T, np.int32)
        lh = np.empty(T * T, np.int32)
        wt = _arc_table(z[t], f[t], np.ones((T, T), np.bool_), codes, model, lengths)
        for s in range(B):
            ld[:] = _INF
            la[:] = INT_INF
            lh[:] = INT_INF
            src = bidx[t, s]
            ld[src] = 0.0
            la[src] = 0
            lh[src] = 0
            _window_dijkstra(wt, off, ld, la, lh, kd, ka, kh, win)
            for j in range(B):
                out_d[t, s, j] = ld[bidx[t, j]]
                out_h[t, s, j] = lh[bidx[t, j]]


@njit(cache=True, nogil=True, parallel=True)
def windows_dijkstra_cpu(z, f, inner, codes, model, lengths, ld, la, lh):
    """Seeded Dijkstra on a batch of windows: ``z, f, inner`` (n, H, W), labels (n, H*W).

    ``ld, la, lh`` hold the seeds (``d = inf`` elsewhere) and receive the labels; only
    ``inner`` cells are updated (halo seeds stay fixed). One window per ``prange`` step.
    """
    n, H, W = z.shape
    off = np.empty(codes.shape[0], np.int64)
    for kk in range(codes.shape[0]):
        off[kk] = ARC_DR[codes[kk]] * W + ARC_DC[codes[kk]]
    for t in prange(n):
        kd, ka, kh, win = tt_alloc(H * W)
        wt = _arc_table(z[t], f[t], inner[t], codes, model, lengths)
        _window_dijkstra(wt, off, ld[t], la[t], lh[t], kd, ka, kh, win)


def _cuda(be):
    from pathlib import Path
    return be.cuda_module(Path(__file__).with_name("_boundary.cu"))


#: shared memory of one ``boundary_pairs_shared`` block (the default limit without opt-in)
SHARED_BYTES = 48 << 10


def shared_pass(T, K, shared=SHARED_BYTES):
    """``(sources per pass, threads per block)`` of ``_boundary.cu: boundary_pairs_shared``
    for tiles of side ``T`` and ``K`` arc codes, or None when its arc table and one source's
    labels (``8 T^2 K + 12 T^2`` bytes) do not fit ``shared`` bytes (tiles above 16 cells a
    side with 8 codes: the kernel with a queue per thread serves them).

    >>> shared_pass(16, 8), shared_pass(16, 16), shared_pass(8, 8), shared_pass(32, 8)
    ((8, 256), (5, 256), (8, 64), None)
    """
    n = T * T
    s = (int(shared) - 8 * n * K) // (12 * n)
    if s < 1:
        return None
    return min(s, 8), min(256, max(32, -(-n // 32) * 32))


def boundary_pairs_gpu(be, z, f, bidx, bcount, codes, model, lengths, max_scratch=4 << 30,
                       out=None, kernel=None):
    """CUDA twin of :func:`boundary_pairs_cpu`, host in/out (or ``out`` = device arrays
    ``(dist, hops)`` of shape (n, bmax, bmax), filled; then nothing is copied back).

    Tiles whose arc table fits a block's shared memory (:func:`shared_pass`: side 16 and
    below) run ``_boundary.cu: boundary_pairs_shared``, one block per tile, all the tiles in
    one launch; larger ones ``boundary_pairs`` (one thread per (tile, source), a queue in
    global memory) in launches whose per-thread scratch (labels + tree) stays under
    ``max_scratch`` bytes. ``kernel`` ('shared' or 'queue') forces one (tests compare them).
    """
    cp = be.xp
    n, T, _ = z.shape
    bmax = bidx.shape[1]
    fit = shared_pass(T, int(codes.size))
    if kernel == "queue" or (kernel is None and fit is None):
        fit = None
    elif fit is None:
        raise ValueError(f"tiles of {T} with {codes.size} codes do not fit shared memory")
    if fit is not None:
        S, threads = fit
        od, oh = (cp.empty((n, bmax, bmax)), cp.empty((n, bmax, bmax), cp.int32)) \
            if out is None else out
        if n:
            kern = _cuda(be).get_function("boundary_pairs_shared")
            kern((n,), (threads,),
                 (cp.asarray(z), cp.asarray(f), cp.asarray(bidx), cp.asarray(bcount),
                  np.int32(T), np.int32(bmax), cp.asarray(codes, cp.int32),
                  np.int32(codes.size), np.int32(model), cp.asarray(lengths, cp.float64), od,
                  oh, np.int32(S)),
                 shared_mem=8 * T * T * int(codes.size) + 12 * S * T * T)
        if out is not None:
            return out
        return od.get(), oh.get()
    cap = tt_capacity(T * T)
    per_tile = bmax * (T * T * 16 + 2 * cap * 20)
    chunk = max(1, min(n, max_scratch // max(per_tile, 1)))
    kern = _cuda(be).get_function("boundary_pairs")
    if out is None:
        out_d = np.empty((n, bmax, bmax))
        out_h = np.empty((n, bmax, bmax), np.int32)
    codes_d = cp.asarray(codes, cp.int32)
    len_d = cp.asarray(lengths, cp.float64)
    threads = 64
    for t0 in range(0, n, chunk):
        m = min(chunk, n - t0)
        zd = cp.asarray(z[t0:t0 + m])
        fd = cp.asarray(f[t0:t0 + m])
        bi = cp.asarray(bidx[t0:t0 + m])
        bc = cp.asarray(bcount[t0:t0 + m])
        od = cp.full((m, bmax, bmax), np.inf)
        oh = cp.full((m, bmax, bmax), INT_INF, cp.int32)
        slots = m * bmax
        s_ld = cp.empty(slots * T * T, cp.float64)
        s_la = cp.empty(slots * T * T, cp.int32)
        s_lh = cp.empty(slots * T * T, cp.int32)
        s_kd = cp.empty(slots * 2 * cap, cp.float64)
        s_ka = cp.empty(slots * 2 * cap, cp.int32)
        s_kh = cp.empty(slots * 2 * cap, cp.int32)
        s_win = cp.empty(slots * 2 * cap, cp.int32)
        grid = (m, -(-bmax // threads))
        kern(grid, (threads,), (zd, fd, bi, bc, np.int32(T), np.int32(bmax), codes_d,
                                np.int32(codes.size), np.int32(model), len_d, od, oh, s_ld, s_la,
                                s_lh, s_kd, s_ka, s_kh, s_win, np.int32(cap)),
             shared_mem=2 * T * T * 4)
        if out is not None:
            out[0][t0:t0 + m], out[1][t0:t0 + m] = od, oh
            continue
        od.get(out=out_d[t0:t0 + m])  # straight into the batch (no temporary host copy)
        oh.get(out=out_h[t0:t0 + m])
    return out if out is not None else (out_d, out_h)


def windows_dijkstra_gpu(be, z, f, inner, codes, model, lengths, ld, la, lh, kernel=None):
    """CUDA twin of :func:`windows_dijkstra_cpu`: windows whose arc table, distances and
    keys fit a block's shared memory (``8 HW K + 16 HW`` bytes: tiles of 16 with the
    8-neighbourhood) run ``_boundary.cu: windows_shared``, one block per window; others
    ``windows_dijkstra``, one thread per window with its queue in global memory.
    ``kernel`` ('shared' or 'queue') forces one (tests compare them)."""
    cp = be.xp
    n, H, W = z.shape
    if n == 0:
        return
    K = int(codes.size)
    fits = 8 * H * W * K + 16 * H * W <= SHARED_BYTES
    if kernel == "shared" and not fits:
        raise ValueError(f"windows of {H} x {W} with {K} codes do not fit shared memory")
    if kernel != "queue" and fits:
        dd, da, dh = cp.asarray(ld), cp.asarray(la), cp.asarray(lh)
        threads = min(256, max(32, -(-H * W // 32) * 32))
        _cuda(be).get_function("windows_shared")(
            (n,), (threads,),
            (cp.asarray(z), cp.asarray(f), cp.asarray(inner.astype(np.uint8)), np.int32(H),
             np.int32(W), cp.asarray(codes, cp.int32), np.int32(K), np.int32(model),
             cp.asarray(lengths, cp.float64), dd, da, dh),
            shared_mem=8 * H * W * K + 16 * H * W)
        ld[...], la[...], lh[...] = dd.get(), da.get(), dh.get()
        return
    cap = tt_capacity(H * W)
    kern = _cuda(be).get_function("windows_dijkstra")
    dd, da, dh = cp.asarray(ld), cp.asarray(la), cp.asarray(lh)
    s_kd = cp.empty(n * 2 * cap, cp.float64)
    s_ka = cp.empty(n * 2 * cap, cp.int32)
    s_kh = cp.empty(n * 2 * cap, cp.int32)
    s_win = cp.empty(n * 2 * cap, cp.int32)
    threads = 32
    kern((-(-n // threads),), (threads,),
         (cp.asarray(z), cp.asarray(f), cp.asarray(inner.astype(np.uint8)), np.int32(n),
          np.int32(H), np.int32(W), cp.asarray(codes, cp.int32), np.int32(codes.size),
          np.int32(model), cp.asarray(lengths, cp.float64), dd, da, dh, s_kd, s_ka, s_kh, s_win,
          np.int32(cap)))
    ld[...], la[...], lh[...] = dd.get(), da.get(), dh.get()


def window_dijkstra_cpu(z, f, inner, codes, model, lengths, ld, la, lh):
    """Seeded Dijkstra on one window (a batch of one); labels (flat) in place."""
    H, W = z.shape
    bd, ba, bh = ld.reshape(1, -1), la.reshape(1, -1), lh.reshape(1, -1)
    windows_dijkstra_cpu(z.reshape(1, H, W), f.reshape(1, H, W), inner.reshape(1, H, W),
                         codes, model, lengths, bd, ba, bh)



@njit(cache=True, nogil=True)
def _improve(ld, la, lh, kd, ka, kh, win, v, nd, au, nh):
    """Label ``v`` with ``(nd, au, nh)`` and lower its key in the tournament tree when that
    label comes first (the labels' total order, :func:`key_less`)."""
    if key_less(nd, au, nh, 0, ld[v], la[v], lh[v], 0):
        ld[v] = nd
        la[v] = au
        lh[v] = nh
        tt_lower(kd, ka, kh, win, v, nd, au, nh)

@njit(cache=True, nogil=True)
def _graph_dijkstra(vchild, coff, csize, moff, mat_d, mat_h, cptr, cdst, cw,
                    ld, la, lh, kd, ka, kh, win):
    """Multi-source Dijkstra on a child-boundary graph (dense child matrices + CSR arcs)."""
    tt_seed(kd, ka, kh, win, ld, la, lh)
    while kd[1] < _INF:
        u = tt_pop(kd, ka, kh, win)
        du = ld[u]
        au = la[u]
        hu = lh[u]
        c = vchild[u]
        base = coff[c]
        B = csize[c]
        row = moff[c] + (u - base) * B
        for j in range(B):
            w = mat_d[row + j]
            if not w < _INF:
                continue
            v = base + j
            nd = du + w
            nh = hu + mat_h[row + j]
            _improve(ld, la, lh, kd, ka, kh, win, v, nd, au, nh)
        for e in range(cptr[u], cptr[u + 1]):
            v = cdst[e]
            nd = du + cw[e]
            nh = hu + 1
            _improve(ld, la, lh, kd, ka, kh, win, v, nd, au, nh)


@njit(cache=True, nogil=True, parallel=True)
def graphs_pairs_cpu(pnode, psrc, vbase, tbase, targets, obase, vchild, coff, csize, moff,
                     mat_d, mat_h, cptr, cdst, cw, out_d, out_h):
    """Phase 2 bottom-up on a batch of nodes: one Dijkstra per (node, boundary source) pair.

    The nodes' child-boundary graphs are concatenated (:func:`_graphs_batch`): node ``n``
    owns vertices ``vbase[n]:vbase[n + 1]`` of ``vchild`` and ``cptr``, and ``coff`` /
    ``cdst`` are node-local, so each Dijkstra runs :func:`_graph_dijkstra` on its node's
    slices. Pair ``p`` runs from boundary cell ``psrc[p]`` of node ``pnode[p]`` (boundary
    cells: node-local vertices ``targets[tbase[n]:tbase[n + 1]]``) and writes row ``psrc[p]``
    of the node's ``B x B`` matrices at ``out_*[obase[n]:]``.
    """
    for p in prange(pnode.shape[0]):
        n = pnode[p]
        v0, v1 = vbase[n], vbase[n + 1]
        t0, t1 = tbase[n], tbase[n + 1]
        B = t1 - t0
        V = v1 - v0
        kd, ka, kh, win = tt_alloc(V)
        ld = np.full(V, _INF)
        la = np.full(V, INT_INF, np.int32)
        lh = np.full(V, INT_INF, np.int32)
        src = targets[t0 + psrc[p]]
        ld[src] = 0.0
        la[src] = 0
        lh[src] = 0
        _graph_dijkstra(vchild[v0:v1], coff, csize, moff, mat_d, mat_h, cptr[v0:v1 + 1], cdst,
                        cw, ld, la, lh, kd, ka, kh, win)
        row = obase[n] + psrc[p] * B
        for j in range(B):
            out_d[row + j] = ld[targets[t0 + j]]
            out_h[row + j] = lh[targets[t0 + j]]


def graphs_pairs_gpu(be, pnode, psrc, vbase, tbase, targets, obase, vchild, coff, csize,
                     moff, mat_d, mat_h, cptr, cdst, cw, out_d, out_h, max_scratch=2 << 30):
    """CUDA twin of :func:`graphs_pairs_cpu` (``_boundary.cu: graphs_pairs``): one thread per
    pair, in launches whose per-thread scratch (labels + tree) stays under ``max_scratch``
    bytes; the graphs are copied to the device once. ``out_*`` host arrays, filled."""
    cp = be.xp
    n_pairs = int(pnode.size)
    if n_pairs == 0:
        return
    vmax = int(np.max(np.diff(vbase)))
    cap = tt_capacity(vmax)
    per_pair = vmax * 16 + 2 * cap * 20
    chunk = max(1, min(n_pairs, max_scratch // per_pair))
    dev = [cp.asarray(a) for a in (pnode.astype(np.int32), psrc.astype(np.int32), vbase,
                                   tbase, targets, obase, vchild, coff, csize, moff, mat_d,
                                   mat_h, cptr, cdst, cw)]
    od = cp.asarray(out_d)
    oh = cp.asarray(out_h)
    s_ld = cp.empty(chunk * vmax, cp.float64)
    s_la = cp.empty(chunk * vmax, cp.int32)
    s_lh = cp.empty(chunk * vmax, cp.int32)
    s_kd = cp.empty(chunk * 2 * cap, cp.float64)
    s_ka = cp.empty(chunk * 2 * cap, cp.int32)
    s_kh = cp.empty(chunk * 2 * cap, cp.int32)
    s_win = cp.empty(chunk * 2 * cap, cp.int32)
    kern = _cuda(be).get_function("graphs_pairs")
    threads = 64
    for p0 in range(0, n_pairs, chunk):
        m = min(chunk, n_pairs - p0)
        kern((-(-m // threads),), (threads,),
             (np.int32(m), np.int32(p0), *dev, od, oh, s_ld, s_la, s_lh, s_kd, s_ka, s_kh,
              s_win, np.int32(vmax), np.int32(cap)))
    out_d[...] = od.get()
    out_h[...] = oh.get()


@njit(cache=True, nogil=True)
def _backlinks(z, f, inner, codes, model, lengths, ld, la, lh, out):
    """Backlink of every inner cell: lowest ``k + 1`` whose neighbour is a tight predecessor."""
    H, W = z.shape
    for vr in range(H):
        for vc in range(W):
            if not inner[vr, vc]:
                continue
            v = vr * W + vc
            if not ld[v] < _INF:
                out[vr, vc] = 255
                continue
            if lh[v] == 0:
                out[vr, vc] = 0
                continue
            out[vr, vc] = 255
            for k in codes:
                ur = vr + ARC_DR[k]
                uc = vc + ARC_DC[k]
                if ur < 0 or ur >= H or uc < 0 or uc >= W:
                    continue
                u = ur * W + uc
                if not ld[u] < _INF or la[u] != la[v] or lh[u] + 1 != lh[v]:
                    continue
                zu = z[ur, uc]
                fu = f[ur, uc]
                if zu != zu or fu != fu:
                    continue
                back = (k + 4) % 8 if k < 8 else 8 + (k - 8 + 4) % 8  # the arc u -> v
                if ld[u] + arc_cost(zu, z[vr, vc], fu, f[vr, vc], back, model, lengths) == ld[v]:
                    out[vr, vc] = k + 1
                    break


@njit(cache=True, nogil=True, parallel=True)
def _backlinks_batch(z, f, inner, codes, model, lengths, ld, la, lh, out):
    """:func:`_backlinks` on a batch of windows (``z`` (n, H, W), labels (n, H*W))."""
    for t in prange(z.shape[0]):
        _backlinks(z[t], f[t], inner[t], codes, model, lengths, ld[t], la[t], lh[t], out[t])


# --------------------------------------------------------------------------- data

@dataclass
class NodeBoundary:
    """A tile's or node's boundary: cells and their source-independent pair matrix.

    ``ids`` global linear ids (sorted), ``z``/``f`` their elevations and frictions,
    ``dist[s, j]``/``hops[s, j]`` the least ``(distance, hops)`` from ``ids[s]`` to ``ids[j]``
    on paths inside ``window``.
    """

    level: int
    index: tuple
    window: tuple
    ids: np.ndarray
    z: np.ndarray
    f: np.ndarray
    dist: np.ndarray
    hops: np.ndarray

    @property
    def size(self):
        return int(self.ids.size)


@dataclass
class FlatBoundaries:
    """The boundary cells of a row of nodes, concatenated: ``size`` (n,) cells per node,
    ``ids``, ``z``, ``f`` (``size.sum()``,) in node order (what a pipeline reads of a whole
    level at once, without one :class:`NodeBoundary` per node)."""

    size: np.ndarray
    ids: np.ndarray
    z: np.ndarray
    f: np.ndarray


def _inf_labels(n):
    return (np.full(n, _INF), np.full(n, INT_INF, np.int32), np.full(n, INT_INF, np.int32))


def _has_finite(labels):
    return labels is not None and labels[0].size > 0 and bool(np.any(labels[0] < _INF))


@dataclass
class TiledIndex:
    """The source-independent part (phase 1 and the bottom-up matrices), for ``reuse=``.

    ``nodes[(level, i, j)]`` is a :class:`NodeBoundary` for every tile (level 0) and every
    node up to ``spec.height``.
    """

    spec: TiledSpec
    nodes: dict
    times: dict = field(default_factory=dict)

    def to_arrays(self):
        """A flat ``{name: ndarray}`` (for a Zarr group or ``np.savez``)."""
        s = self.spec
        out = {"spec_shape": np.array(s.shape, np.int64), "spec_tile": np.array(s.tile),
               "spec_connectivity": np.array(s.connectivity),
               "spec_cost": np.array(s.cost), "spec_cellsize": np.array(s.cellsize, np.float64),
               "spec_height": np.array(s.height)}
        keys = sorted(self.nodes)
        out["node_keys"] = np.array(keys, np.int64).reshape(-1, 3)
        for key in keys:
            nb = self.nodes[key]
            name = "node_%d_%d_%d" % key
            out[name + "_ids"] = nb.ids
            out[name + "_z"] = nb.z
            out[name + "_f"] = nb.f
            out[name + "_dist"] = nb.dist
            out[name + "_hops"] = nb.hops
        return out

    @classmethod
    def from_arrays(cls, arrays):
        """Inverse of :meth:`to_arrays`."""
        a = {k: np.asarray(v) for k, v in dict(arrays).items()}
        spec = TiledSpec(tuple(int(x) for x in a["spec_shape"]), int(a["spec_tile"]),
                         int(a["spec_connectivity"]), str(a["spec_cost"]),
                         tuple(float(x) for x in a["spec_cellsize"]), int(a["spec_height"]))
        nodes = {}
        for key in a["node_keys"].tolist():
            key = tuple(int(x) for x in key)
            name = "node_%d_%d_%d" % key
            nodes[key] = NodeBoundary(key[0], key[1:], spec.window(*key), a[name + "_ids"],
                                      a[name + "_z"], a[name + "_f"], a[name + "_dist"],
                                      a[name + "_hops"])
        return cls(spec, nodes)


@dataclass
class TiledSSSPResult(SSSPResult):
    """:class:`terrain.grid.sssp.SSSPResult` (distance, allocation, backlink, hops, stats) and
    the :class:`TiledIndex` it used (for ``reuse=``)."""

    index: TiledIndex = None


# --------------------------------------------------------------------------- phase 1

def _tile_batch(spec, z_block, f_block, window):
    """Tiles of a block as ``(n, T, T)`` padded batches and their windows, row-major."""
    T = spec.tile
    r0, r1, c0, c1 = window
    nt_r, nt_c = -(-(r1 - r0) // T), -(-(c1 - c0) // T)
    zp = np.full((nt_r * T, nt_c * T), np.nan, np.float32)
    fp = np.full((nt_r * T, nt_c * T), np.nan, np.float32)
    zp[: r1 - r0, : c1 - c0] = z_block
    fp[: r1 - r0, : c1 - c0] = f_block
    zb = np.ascontiguousarray(zp.reshape(nt_r, T, nt_c, T).transpose(0, 2, 1, 3)).reshape(-1, T, T)
    fb = np.ascontiguousarray(fp.reshape(nt_r, T, nt_c, T).transpose(0, 2, 1, 3)).reshape(-1, T, T)
    wins = []
    for ti in range(nt_r):
        for tj in range(nt_c):
            tr0, tc0 = r0 + ti * T, c0 + tj * T
            wins.append((tr0, min(tr0 + T, spec.shape[0]), tc0, min(tc0 + T, spec.shape[1])))
    return zb, fb, wins


@dataclass
class TileBatch:
    """Phase 1 of a block's tiles as padded arrays, tiles row-major over ``tiles`` =
    ``(nr, nc)`` of side ``tile``: ``count`` (n,) boundary sizes, ``ids`` (n, bmax) global
    ids (-1 padding), ``z``/``f`` their elevations and frictions (NaN padding),
    ``dist``/``hops`` (n, bmax, bmax) the pair matrices (inf / ``INT_INF`` padding),
    ``windows`` the tiles' windows. A pipeline writes these arrays as they are;
    :meth:`nodes` gives one :class:`NodeBoundary` per tile."""

    tile: int
    tiles: tuple
    windows: list
    count: np.ndarray
    ids: np.ndarray
    z: np.ndarray
    f: np.ndarray
    dist: np.ndarray
    hops: np.ndarray

    def nodes(self):
        """One :class:`NodeBoundary` per tile (row-major), its arrays copies."""
        out = []
        for t, win in enumerate(self.windows):
            B = int(self.count[t])
            out.append(NodeBoundary(0, (win[0] // self.tile, win[2] // self.tile), win,
                                    self.ids[t, :B].copy(), self.z[t, :B].copy(),
                                    self.f[t, :B].copy(),
                                    np.ascontiguousarray(self.dist[t, :B, :B]),
                                    np.ascontiguousarray(self.hops[t, :B, :B])))
        return out


def _batch_frames(spec, zb, fb, wins, width=None):
    """The boundary cells of every tile of a batch at once (the frame of
    :func:`_frame_mask`, nodata left out): ``(count, ids, bidx, (t, pos, loc))`` with
    ``ids`` (n, bmax) global ids (-1 padding, sorted per tile), ``bidx`` (n, bmax) int32
    local cell indices (row-major in the ``T x T`` tile, 0 padding) and the flat
    ``(tile, position, local index)`` of every boundary cell. ``width``: ``bmax`` (at least
    the largest count), else the largest count."""
    T, w = spec.tile, spec.width
    R, C = spec.shape
    n = len(wins)
    W = np.asarray(wins, np.int64).reshape(n, 4)
    lr = np.arange(T)[None, :, None]
    lc = np.arange(T)[None, None, :]
    h = (W[:, 1] - W[:, 0])[:, None, None]
    wd = (W[:, 3] - W[:, 2])[:, None, None]
    m = (((W[:, 0] > 0)[:, None, None] & (lr < w))
         | ((W[:, 1] < R)[:, None, None] & (lr >= h - w))
         | ((W[:, 2] > 0)[:, None, None] & (lc < w))
         | ((W[:, 3] < C)[:, None, None] & (lc >= wd - w)))
    m &= (lr < h) & (lc < wd) & ~np.isnan(zb) & ~np.isnan(fb)
    t, loc = np.nonzero(m.reshape(n, T * T))
    count = np.bincount(t, minlength=n).astype(np.int32)
    bmax = max(int(count.max()) if n else 0, 1)
    if width is not None:
        if int(width) < bmax:
            raise ValueError(f"{bmax} boundary cells in a tile: more than the width {width}")
        bmax = int(width)
    pos = np.arange(t.size) - (np.cumsum(count) - count)[t]
    ids = np.full((n, bmax), -1, np.int64)
    ids[t, pos] = (W[t, 0] + loc // T) * C + W[t, 2] + loc % T
    bidx = np.zeros((n, bmax), np.int32)
    bidx[t, pos] = loc
    return count, ids, bidx, (t, pos, loc)


def tile_batch(spec, z_block, f_block, window, backend=None, width=None, out=None):
    """Phase 1 on every tile of a block, as one :class:`TileBatch` (row-major tiles).

    ``z_block, f_block``, ``window`` and ``backend`` as in :func:`tile_boundaries`.
    ``width`` pads the boundary axes to that many cells; ``out`` (GPU only, with
    ``width``): device arrays ``(dist, hops)`` of shape (tiles, width, width) that receive
    the matrices (a :class:`DeviceLevel`'s slots), which the batch then holds instead of
    host arrays.
    """
    be = get_backend(backend)
    T = spec.tile
    zb, fb, wins = _tile_batch(spec, np.asarray(z_block, np.float32),
                               np.asarray(f_block, np.float32), window)
    n = len(wins)
    count, ids, bidx, (t, pos, loc) = _batch_frames(spec, zb, fb, wins, width)
    bmax = ids.shape[1]
    bz = np.full((n, bmax), np.nan, np.float32)
    bf = np.full((n, bmax), np.nan, np.float32)
    bz[t, pos] = zb.reshape(n, T * T)[t, loc]
    bf[t, pos] = fb.reshape(n, T * T)[t, loc]
    if out is not None and not (be.is_gpu and T <= MAX_GPU_TILE and width is not None):
        raise ValueError("out= needs the gpu backend, tiles up to MAX_GPU_TILE and a width")
    if be.is_gpu and T <= MAX_GPU_TILE:
        out_d, out_h = boundary_pairs_gpu(be, zb, fb, bidx, count, spec.codes, spec.model,
                                          spec.lengths, out=out)
    else:
        out_d = np.full((n, bmax, bmax), _INF)
        out_h = np.full((n, bmax, bmax), INT_INF, np.int32)
        if count.any():
            boundary_pairs_cpu(zb, fb, bidx, count, spec.codes, spec.model, spec.lengths,
                               out_d, out_h)
    r0, r1, c0, c1 = window
    return TileBatch(T, (-(-(r1 - r0) // T), -(-(c1 - c0) // T)), wins, count, ids, bz, bf,
                     out_d, out_h)


def tile_boundaries(spec, z_block, f_block, window, backend=None):
    """Phase 1 on every tile of a block: one :class:`NodeBoundary` per tile (row-major).

    Parameters
    ----------
    spec : TiledSpec
    z_block, f_block : 2-D float32 arrays of the block's shape
        Elevations and frictions (ones without a friction raster); NaN = nodata.
    window : (r0, r1, c0, c1)
        The block, aligned to the tile grid.
    backend : {'cpu', 'gpu'} or Backend, optional
        On the GPU, tiles up to ``MAX_GPU_TILE`` (64) run in ``_boundary.cu``; larger tiles
        run on the CPU kernel (a T x T tournament tree does not fit a thread's budget).

    Examples
    --------
    >>> spec = TiledSpec((4, 4), 2, connectivity=4)
    >>> z = np.arange(16, dtype=np.float32).reshape(4, 4)
    >>> nb = tile_boundaries(spec, z, np.ones_like(z), (0, 4, 0, 4), "cpu")[0]
    >>> nb.ids.tolist(), nb.dist.tolist()
    ([1, 4, 5], [[0.0, 5.0, 4.0], [5.0, 0.0, 1.0], [4.0, 1.0, 0.0]])
    """
    return tile_batch(spec, z_block, f_block, window, backend).nodes()


# --------------------------------------------------------------------------- phase 2

@dataclass
class _ChildGraph:
    kids: list          # the non-empty children (NodeBoundary), in order
    slots: list         # position in the original children list of each kid
    ids: np.ndarray
    z: np.ndarray
    f: np.ndarray
    vchild: np.ndarray
    coff: np.ndarray
    csize: np.ndarray
    moff: np.ndarray
    mat_d: np.ndarray
    mat_h: np.ndarray
    cptr: np.ndarray
    cdst: np.ndarray
    cw: np.ndarray

    def dijkstra(self, ld, la, lh):
        tt = tt_new(ld.size)
        _graph_dijkstra(self.vchild, self.coff, self.csize, self.moff, self.mat_d, self.mat_h,
                        self.cptr, self.cdst, self.cw, ld, la, lh, *tt)

    def positions(self, ids):
        """Vertex index of each of ``ids`` (all must be vertices)."""
        order = np.argsort(self.ids, kind="stable")
        return order[np.searchsorted(self.ids, ids, sorter=order)]


def _nonempty(nodes):
    """``(kids, slots, sizes)``: the non-empty ones of ``nodes`` (NodeBoundary or None), in
    order, their positions in ``nodes`` and their sizes (int64)."""
    kids, slots = [], []
    for s, c in enumerate(nodes):
        if c is not None and c.size:
            kids.append(c)
            slots.append(s)
    return kids, slots, np.array([c.size for c in kids], np.int64)


def _cells(kids):
    """``(ids, z, f)`` of the boundary cells of ``kids`` (non-empty), concatenated."""
    return (np.concatenate([c.ids for c in kids]), np.concatenate([c.z for c in kids]),
            np.concatenate([c.f for c in kids]))


def _child_graph(spec, children):
    """The child-boundary graph of ``children`` (NodeBoundary or None)."""
    kids, slots, sizes = _nonempty(children)
    coff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    moff = np.concatenate([[0], np.cumsum(sizes * sizes)]).astype(np.int64)
    V = int(coff[-1])
    if V == 0:
        z0 = np.zeros(0, np.int64)
        return _ChildGraph([], [], z0, np.zeros(0, np.float32), np.zeros(0, np.float32), z0,
                           coff, sizes, moff, np.zeros(0), np.zeros(0, np.int32),
                           np.zeros(1, np.int64), z0, np.zeros(0))
    ids, z, f = _cells(kids)
    vchild = np.repeat(np.arange(len(kids), dtype=np.int64), sizes)
    mat_d = np.concatenate([c.dist.reshape(-1) for c in kids])
    mat_h = np.concatenate([c.hops.reshape(-1) for c in kids])
    cptr, cdst, cw = _graph_arcs(spec, ids, z, f, vchild)
    return _ChildGraph(kids, slots, ids, z, f, vchild, coff, sizes, moff, mat_d, mat_h,
                       cptr, cdst, cw)


@njit(cache=True, nogil=True, parallel=True)
def _arcs_cpu(ids, order, sorted_ids, z, f, vchild, R, C, codes, model, lengths, cptr, cdst,
              cw, fill):
    """Count (``fill`` False: ``cptr[u + 1]``) or write (``cdst``, ``cw`` from ``cptr``) the
    grid arcs ``u -> v`` between vertices of different children, by ``u`` then arc code.
    Each ``u`` writes only its own entries: ``prange`` over ``u`` (the top graph has
    millions of vertices)."""
    V = ids.shape[0]
    for u in prange(V):
        r = ids[u] // C
        c = ids[u] % C
        e = cptr[u]
        n = 0
        for k in codes:
            rr = r + ARC_DR[k]
            cc = c + ARC_DC[k]
            if rr < 0 or rr >= R or cc < 0 or cc >= C:
                continue
            nid = rr * C + cc
            pos = np.searchsorted(sorted_ids, nid)
            if pos >= V or sorted_ids[pos] != nid:
                continue
            v = order[pos]
            if vchild[v] == vchild[u]:
                continue
            w = arc_cost(z[u], z[v], f[u], f[v], k, model, lengths)
            if not w < _INF:
                continue
            if fill:
                cdst[e + n] = v
                cw[e + n] = w
            n += 1
        if not fill:
            cptr[u + 1] = n


def _graph_arcs(spec, ids, z, f, vchild):
    """CSR ``(cptr, cdst, cw)`` of the grid arcs between vertices of different children
    (:func:`_arcs_cpu`: two passes, no temporaries beyond the CSR and a sorted copy of
    ``ids``)."""
    V = ids.size
    R, C = spec.shape
    order = np.argsort(ids, kind="stable").astype(np.int64)
    sorted_ids = np.ascontiguousarray(ids[order], np.int64)
    ids = np.ascontiguousarray(ids, np.int64)
    z = np.ascontiguousarray(z, np.float32)
    f = np.ascontiguousarray(f, np.float32)
    vchild = np.ascontiguousarray(vchild, np.int64)
    cptr = np.zeros(V + 1, np.int64)
    args = (ids, order, sorted_ids, z, f, vchild, R, C, spec.codes, spec.model, spec.lengths)
    _arcs_cpu(*args, cptr, np.zeros(0, np.int64), np.zeros(0), False)
    np.cumsum(cptr, out=cptr)
    cdst = np.empty(int(cptr[-1]), np.int64)
    cw = np.empty(int(cptr[-1]), np.float64)
    _arcs_cpu(*args, cptr, cdst, cw, True)
    return cptr, cdst, cw


def nodes_boundary(spec, items, backend="cpu"):
    """Bottom-up on a batch of nodes: :func:`node_boundary` of each ``(level, i, j,
    children)`` of ``items``, all their Dijkstras in one call (:func:`graphs_pairs_cpu`, or
    ``_boundary.cu: graphs_pairs`` with ``backend='gpu'``). A list of NodeBoundary."""
    C = spec.shape[1]
    graphs, targets, windows = [], [], []
    for level, i, j, children in items:
        window = spec.window(level, i, j)
        g = _child_graph(spec, children)
        frame = _frame_mask(g.ids // C, g.ids % C, window, spec.shape, spec.width)
        t = np.nonzero(frame)[0]
        graphs.append(g)
        targets.append(t[np.argsort(g.ids[t], kind="stable")].astype(np.int64))
        windows.append(window)
    if not items:
        return []

    def offsets(sizes):
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    vbase = offsets([g.ids.size for g in graphs])
    kbase = offsets([g.csize.size for g in graphs])
    mbase = offsets([g.mat_d.size for g in graphs])
    ebase = offsets([g.cdst.size for g in graphs])
    sizes = np.array([t.size for t in targets], np.int64)
    tbase, obase = offsets(sizes), offsets(sizes * sizes)
    cat = np.concatenate
    vchild = cat([g.vchild + kbase[n] for n, g in enumerate(graphs)] + [np.zeros(0, np.int64)])
    coff = cat([g.coff[:-1] for g in graphs] + [np.zeros(0, np.int64)])
    csize = cat([g.csize for g in graphs] + [np.zeros(0, np.int64)])
    moff = cat([g.moff[:-1] + mbase[n] for n, g in enumerate(graphs)] + [np.zeros(0, np.int64)])
    mat_d = cat([g.mat_d for g in graphs] + [np.zeros(0)])
    mat_h = cat([g.mat_h for g in graphs] + [np.zeros(0, np.int32)]).astype(np.int32)
    cptr = cat([g.cptr[:-1] + ebase[n] for n, g in enumerate(graphs)] + [ebase[-1:]])
    cdst = cat([g.cdst for g in graphs] + [np.zeros(0, np.int64)])
    cw = cat([g.cw for g in graphs] + [np.zeros(0)])
    tg = cat(targets + [np.zeros(0, np.int64)])
    pnode = np.repeat(np.arange(len(items), dtype=np.int64), sizes)
    psrc = cat([np.arange(b, dtype=np.int64) for b in sizes] + [np.zeros(0, np.int64)])
    out_d = np.full(int(obase[-1]), _INF)
    out_h = np.full(int(obase[-1]), INT_INF, np.int32)
    args = (pnode, psrc, vbase, tbase, tg, obase, vchild, coff, csize, moff, mat_d, mat_h,
            cptr, cdst, cw, out_d, out_h)
    be = get_backend(backend)
    if pnode.size and be.is_gpu:
        graphs_pairs_gpu(be, *args)
    elif pnode.size:
        graphs_pairs_cpu(*args)
    out = []
    for n, ((level, i, j, _), g, t) in enumerate(zip(items, graphs, targets)):
        B = t.size
        out.append(NodeBoundary(level, (i, j), windows[n], g.ids[t], g.z[t], g.f[t],
                                out_d[obase[n]:obase[n + 1]].reshape(B, B),
                                out_h[obase[n]:obase[n + 1]].reshape(B, B)))
    return out


def node_boundary(spec, level, i, j, children, backend="cpu"):
    """Bottom-up: the :class:`NodeBoundary` of node ``(level, i, j)`` from its 4 children's.

    ``children`` lists the children's NodeBoundary (None where a child is outside the grid),
    in the order of :meth:`QuadtreePlan.children`.

    Examples
    --------
    >>> spec = TiledSpec((4, 8), 2, connectivity=4)
    >>> z = np.zeros((4, 8), np.float32)
    >>> tiles = tile_boundaries(spec, z, np.ones_like(z), (0, 4, 0, 8), "cpu")
    >>> kids = [tiles[0], tiles[1], tiles[4], tiles[5]]
    >>> node_boundary(spec, 1, 0, 0, kids).ids.tolist()
    [3, 11, 19, 27]
    """
    return nodes_boundary(spec, [(level, i, j, children)], backend)[0]


def tile_source_labels(spec, z_tile, f_tile, window, nb, sources):
    """Sources inside a tile to the tile's boundary, on paths inside the tile (thesis §5.6.1).

    ``sources`` is ``(rows, cols, start_costs, index)`` of the sources inside ``window``
    (global rows/cols). Returns ``(d, a, h)`` over ``nb.ids``.
    """
    rows, cols, costs, index = sources
    B = nb.size
    if len(rows) == 0 or B == 0:
        return _inf_labels(B)
    r0, r1, c0, c1 = window
    H, W = r1 - r0, c1 - c0
    ld, la, lh = _inf_labels(H * W)
    _seed_sources(ld, la, lh, W, np.asarray(rows) - r0, np.asarray(cols) - c0, costs, index)
    window_dijkstra_cpu(np.asarray(z_tile, np.float32), np.asarray(f_tile, np.float32),
                        np.ones((H, W), bool), spec.codes, spec.model, spec.lengths, ld, la, lh)
    C = spec.shape[1]
    loc = (nb.ids // C - r0) * W + (nb.ids % C - c0)
    return ld[loc].copy(), la[loc].copy(), lh[loc].copy()


def _seed_sources(ld, la, lh, W, lr, lc, costs, index):
    for r, c, s, i in zip(np.asarray(lr).tolist(), np.asarray(lc).tolist(),
                          np.asarray(costs).tolist(), np.asarray(index).tolist()):
        p = r * W + c
        if (s, i, 0) < (ld[p], la[p], lh[p]):
            ld[p], la[p], lh[p] = s, i, 0


def _seed_graph(g, children_labels):
    """Vertex labels of graph ``g`` seeded with each child's labels (in ``children`` order)."""
    ld, la, lh = _inf_labels(int(g.ids.size))
    for kid_pos, slot in enumerate(g.slots):
        lab = children_labels[slot]
        if lab is None:
            continue
        s, e = g.coff[kid_pos], g.coff[kid_pos + 1]
        ld[s:e], la[s:e], lh[s:e] = lab
    return ld, la, lh


def node_source_labels(spec, node, children, children_labels):
    """Bottom-up sources: ``(d, a, h)`` over ``node.ids`` from the children's source labels."""
    if not any(_has_finite(lab) for lab in children_labels):
        return _inf_labels(node.size)
    g = _child_graph(spec, children)
    ld, la, lh = _seed_graph(g, children_labels)
    g.dijkstra(ld, la, lh)
    pos = g.positions(node.ids)
    return ld[pos], la[pos], lh[pos]


def top_labels(spec, tops, tops_labels):
    """ONE Dijkstra on the boundary graph of the top nodes (above the height cap).

    ``tops`` lists NodeBoundary, ``tops_labels`` their source labels; returns the final labels
    of each top node's boundary (a list in the same order).
    """
    g = _child_graph(spec, tops)
    ld, la, lh = _seed_graph(g, tops_labels)
    if np.any(ld < _INF):
        g.dijkstra(ld, la, lh)
    return _split(g, tops, ld, la, lh)


@njit(cache=True, nogil=True)
def _graph_dijkstra_paged(vchild, coff, csize, page_of, page_loc, slot_of, pool_d, pool_h,
                          stamp, clock, cptr, cdst, cw, ld, la, lh, kd, ka, kh, win):
    """:func:`_graph_dijkstra` with the child matrices in a cache of pages.

    ``pool_*[slot, loc]`` is the matrix of the ``loc``-th node of the page held in ``slot``
    (padded; row ``r`` entry ``j`` for ``r, j < csize``). Runs until the queue is empty
    (returns -1) or until the next vertex to settle lies in a node whose page is not in the
    cache: it then returns that page, the queue untouched, so the caller loads the page and
    calls again. ``stamp[slot]`` records the last use (``clock[0]`` counts) for LRU.
    """
    while kd[1] < _INF:
        u = win[1]
        c = vchild[u]
        sl = slot_of[page_of[c]]
        if sl < 0:
            return page_of[c]
        stamp[sl] = clock[0]
        clock[0] += 1
        tt_pop(kd, ka, kh, win)
        du = ld[u]
        au = la[u]
        hu = lh[u]
        base = coff[c]
        B = csize[c]
        r = u - base
        loc = page_loc[c]
        for j in range(B):
            w = pool_d[sl, loc, r, j]
            if not w < _INF:
                continue
            v = base + j
            nd = du + w
            nh = hu + pool_h[sl, loc, r, j]
            _improve(ld, la, lh, kd, ka, kh, win, v, nd, au, nh)
        for e in range(cptr[u], cptr[u + 1]):
            v = cdst[e]
            nd = du + cw[e]
            nh = hu + 1
            _improve(ld, la, lh, kd, ka, kh, win, v, nd, au, nh)
    return -1


@njit(cache=True, nogil=True)
def _page_to_evict(held, pptr, pverts, kd):
    """The cache slot whose page is needed last: the largest least queued distance over its
    vertices (the tree's leaf keys; +inf when none of them is queued). Belady's rule with
    Dijkstra's order as the future: LRU would evict in the order the wavefront comes back."""
    cap = kd.shape[0] // 2
    best, best_key = 0, -1.0
    for sl in range(held.shape[0]):
        p = held[sl]
        m = np.inf
        for e in range(pptr[p], pptr[p + 1]):
            d = kd[cap + pverts[e]]
            if d < m:
                m = d
        if m > best_key:
            best, best_key = sl, m
            if m == np.inf:
                break
    return best


@njit(cache=True, nogil=True)
def _page_min_key(p, pptr, pverts, kd):
    """Least queued distance over the vertices of page ``p`` (+inf: none queued)."""
    cap = kd.shape[0] // 2
    m = np.inf
    for e in range(pptr[p], pptr[p + 1]):
        d = kd[cap + pverts[e]]
        if d < m:
            m = d
    return m


def top_solve_gpu(be, vchild, coff, csize, loc, pool_d, pool_h, cptr, cdst, cw, ld, la, lh):
    """The top Dijkstra's labels on the GPU (``_boundary.cu: top_relax_d, top_relax_key``);
    ``ld, la, lh`` hold the seeds and receive the labels. Returns the rounds of the two
    sweeps.

    Label-correcting instead of Dijkstra (a serial queue would leave the device idle): sweep
    1 relaxes the distances alone (Bellman-Ford on the active vertices, ``atomicMin`` on
    the bits of non-negative doubles, the same rounded sums as the CPU) to their least
    fixpoint, which is Dijkstra's (every label is a rounded path sum, and rounding is
    monotone); sweep 2 then relaxes ``(allocation, hops)``, packed in one 64-bit key, along
    the *tight* arcs (``d[u] + w == d[v]``) from the seeds whose start label is tight. The
    least key over tight paths is the least ``(allocation, hops)`` among the labels of least
    distance: Dijkstra's label, so the result equals the CPU's bit for bit. The child
    matrices are ``pool_d/pool_h[loc[c]]`` (one page holding the whole level).
    """
    cp = be.xp
    V = int(vchild.size)
    B = int(pool_d.shape[-1])

    def dev(a):
        return cp.asarray(np.ascontiguousarray(a))
    vc, co, lo, cs = dev(vchild), dev(coff), dev(loc), dev(csize)
    pd, ph = dev(pool_d), dev(pool_h)
    cpd, cdd, cwd = dev(cptr), dev(cdst), dev(cw)
    seeds = ld < _INF
    d = cp.asarray(np.ascontiguousarray(ld, np.float64)).view(cp.uint64)
    cuda = _cuda(be)
    threads = 256

    def sweep(kern, args, start):
        """Rounds until none improves: each round one warp per vertex of the frontier (the
        vertices that improved in the previous round, listed here)."""
        front = cp.asarray(np.flatnonzero(start).astype(np.int64))
        nxt = cp.zeros(V, cp.uint8)
        rounds = 0
        while front.size:
            kern((-(-front.size * 32 // threads),), (threads,),
                 (np.int64(front.size), front) + args + (nxt,))
            rounds += 1
            front = cp.flatnonzero(nxt)
            nxt.fill(0)
        return rounds
    r1 = sweep(cuda.get_function("top_relax_d"),
               (vc, co, lo, np.int32(B), cs, pd, cpd, cdd, cwd, d), seeds)
    dist = d.view(cp.float64).get()
    tight = seeds & (dist == ld)  # seeds that keep their start label's distance
    key0 = np.full(V, np.iinfo(np.uint64).max, np.uint64)
    key0[tight] = (la[tight].astype(np.uint64) << np.uint64(32)) | lh[tight].astype(np.uint64)
    key = cp.asarray(key0)
    r2 = sweep(cuda.get_function("top_relax_key"),
               (vc, co, lo, np.int32(B), cs, pd, ph, cpd, cdd, cwd, d, key), tight)
    k = key.get()
    reached = dist < _INF
    ld[:] = dist
    la[:] = np.where(reached, (k >> np.uint64(32)).astype(np.int64), INT_INF).astype(np.int32)
    lh[:] = np.where(reached, (k & np.uint64(0xFFFFFFFF)).astype(np.int64),
                     INT_INF).astype(np.int32)
    return r1, r2


class DeviceLevel:
    """A level's nodes on the device, in *slots* (a pipeline gives each group a range):
    ``count`` (n,) int32 boundary sizes, ``ids`` (n, B) int64 global cell ids (-1 padding),
    ``z``/``f`` (n, B) float32, ``dist``/``hops`` (n, B, B) float64 / int32 matrices (+inf /
    ``INT_INF`` padding). Phase 1 writes a group's matrices straight into its slots
    (:func:`tile_batch` with ``out=``), so the top solve (:func:`level_solve_gpu`) reads
    nothing back from the host; ``filled`` records the ranges written. A level of ``n``
    nodes holds :meth:`nbytes` ``(n, B)`` bytes of device memory.
    """

    def __init__(self, be, n, B):
        cp = be.xp
        self.be, self.n, self.B = be, int(n), int(B)
        self.count = cp.zeros(self.n, cp.int32)
        self.ids = cp.empty((self.n, self.B), cp.int64)
        self.z = cp.empty((self.n, self.B), cp.float32)
        self.f = cp.empty((self.n, self.B), cp.float32)
        self.dist = cp.empty((self.n, self.B, self.B), cp.float64)
        self.hops = cp.empty((self.n, self.B, self.B), cp.int32)
        self.filled = set()

    @staticmethod
    def nbytes(n, B, cells=0):
        """Device bytes of a level of ``n`` nodes of ``B`` boundary cells in a grid of
        ``cells`` cells: the pool, the solve's per-vertex arrays (labels, keys, frontier
        lists and flags) and its map cell -> vertex.

        >>> round(DeviceLevel.nbytes(65536, 60, 4096 * 4096) / 2**30, 2)  # 4096^2, tiles of 16
        2.91
        """
        n, B = int(n), int(B)
        return n * (4 + B * 16 + B * B * 12) + n * B * (8 + 8 + 8 + 8 + 4 + 4 + 1) + 4 * int(cells)

    def put(self, start, count, ids, z, f, dist=None, hops=None):
        """Slots ``start : start + len(count)`` from host arrays (``dist``/``hops`` too unless
        phase 1 wrote them there); copies, no kernels."""
        s = slice(int(start), int(start) + len(count))
        for dst, src, dtype in ((self.count, count, np.int32), (self.ids, ids, np.int64),
                                (self.z, z, np.float32), (self.f, f, np.float32),
                                (self.dist, dist, np.float64), (self.hops, hops, np.int32)):
            if src is not None:
                dst[s].set(np.ascontiguousarray(src, dtype))

    def views(self, start, n):
        """The ``(dist, hops)`` of slots ``start : start + n`` (contiguous device views)."""
        return self.dist[start:start + n], self.hops[start:start + n]


def level_solve_gpu(be, spec, level, seeds, per_wait=16):
    """The labels of every vertex of a :class:`DeviceLevel` (the top when it is the flat
    level of tiles): ``(d, a, h)`` device arrays over the ``n * B`` padded vertices
    (``+inf`` / ``INT_INF`` where unreached and on padding) and the rounds of the sweeps.

    ``seeds`` = ``(vertex, d, a, h)`` host arrays: the source labels of the few vertices
    that have one (vertex ``slot * B + j``), distances not negative. The two sweeps of
    :func:`top_solve_gpu` (``_boundary.cu: level_relax_d, level_relax_key``), with the grid
    arcs between nodes found on the fly through a device map cell -> vertex instead of a
    host-built CSR: the same arcs and costs as :func:`_graph_arcs`, so the labels are the
    top Dijkstra's bit for bit. The host waits once per ``per_wait`` rounds (a round is two
    small launches; a wait per round cost more than the round).
    """
    cp = be.xp
    V, B = level.n * level.B, level.B
    if V >= 2**31:
        raise ValueError(f"{V} vertices: more than a 32-bit map holds")
    R, C = spec.shape
    mod = _cuda(be)
    threads = 256

    def launch(name, n, *args):
        if n:
            mod.get_function(name)((-(-int(n) // threads),), (threads,), (np.int64(n),) + args)
    cell_vertex = cp.empty(R * C, cp.int32)
    cell_vertex.data.memset_async(0xFF, cell_vertex.nbytes)  # -1
    launch("level_cell_vertex", V, level.ids, cell_vertex)
    d = cp.empty(V, cp.uint64)
    key = cp.empty(V, cp.uint64)
    launch("level_reset", V, d, key)
    sv, sd, sa, sh = (np.asarray(x) for x in seeds)
    sv = sv.astype(np.int64)
    live = sd < _INF
    sv, sd, sa, sh = sv[live], sd[live], sa[live], sh[live]
    nxt = cp.zeros(V, cp.uint8)
    fronts = (cp.empty(V, cp.int64), cp.empty(V, cp.int64))
    codes = cp.asarray(spec.codes, cp.int32)
    lengths = cp.asarray(spec.lengths, cp.float64)
    geo = (np.int32(B), level.count, level.ids.reshape(-1), level.z.reshape(-1),
           level.f.reshape(-1), cell_vertex, np.int64(R), np.int64(C), codes,
           np.int32(spec.codes.size), np.int32(spec.model), lengths)

    dev = cp.cuda.Device()
    blocks = int(dev.attributes["MultiProcessorCount"]) * 8  # the resident warps, in turn
    counts = cp.zeros(per_wait + 1, cp.uint64)

    def sweep(kern, tail, start):
        """Rounds until none improves; round r relaxes the vertices improved in round r - 1
        (one warp each), listed by ``level_compact``. The frontier's size stays on the
        device (``counts[r]``): ``per_wait`` rounds are queued between two waits."""
        front, other = fronts
        nf = int(start.size)
        if nf:
            front[:nf].set(start)
        rounds = 0
        while nf:
            counts.data.memset_async(0, counts.nbytes)
            counts[:1].set(np.array([nf], np.uint64))
            for r in range(per_wait):
                mod.get_function(kern)((blocks,), (threads,),
                                       (counts[r:r + 1], front) + geo + tail + (nxt,))
                launch("level_compact", V, nxt, other, counts[r + 1:r + 2])
                front, other = other, front
            c = counts.get()
            rounds += int(np.count_nonzero(c[:per_wait]))
            nf = int(c[per_wait])
        return rounds
    if sv.size:
        idx = cp.asarray(sv)
        launch("scatter_min_u64", sv.size, idx, cp.asarray(sd.astype(np.float64).view(np.uint64)),
               d)
    r1 = sweep("level_relax_d", (level.dist.reshape(-1), d), np.unique(sv))
    # the seeds whose start distance stayed final start sweep 2 with their (a, h)
    got = cp.empty(sv.size, cp.uint64)
    if sv.size:
        launch("gather_u64", sv.size, cp.asarray(sv), d, got)
    final = got.get().view(np.float64)
    tight = final == sd
    tkey = (sa[tight].astype(np.uint64) << np.uint64(32)) | sh[tight].astype(np.uint64)
    if tight.any():
        launch("scatter_min_u64", int(tight.sum()), cp.asarray(sv[tight]), cp.asarray(tkey),
               key)
    r2 = sweep("level_relax_key", (level.dist.reshape(-1), level.hops.reshape(-1), d, key),
               np.unique(sv[tight]))
    la = cp.empty(V, cp.int32)
    lh = cp.empty(V, cp.int32)
    launch("level_labels", V, d, key, la, lh)
    del cell_vertex, nxt, fronts, key
    return (d.view(cp.float64), la, lh), (r1, r2)


def top_labels_paged(spec, tops, tops_labels, page_of, page_loc, load_page, page_shape,
                     cache_bytes=256 << 20, neighbours=None, prefetch=3, backend="cpu"):
    """:func:`top_labels` with the top nodes' matrices read page by page, on demand.

    Out of core: only the top nodes' boundary cells (``tops``: objects with ``ids``, ``z``,
    ``f``, ``size``; no matrices) and their labels are in memory; a node's ``(distance,
    hops)`` matrix is needed only while the Dijkstra settles its boundary cells, which
    happens while the wavefront crosses it. Matrices come in *pages* (``page_of[t]``,
    ``page_loc[t]``: the page of top node ``t`` and its place in it; ``load_page(p)`` returns
    ``(dist, hops)`` of shape ``page_shape = (nodes, bpad, bpad)``), held in a cache of
    ``cache_bytes`` (at least two pages) that evicts the page needed last
    (:func:`_page_to_evict`). The result equals :func:`top_labels`'s. With
    ``neighbours(p)`` (the pages around page ``p``), a miss also reads up to ``prefetch``
    neighbouring pages that hold queued vertices, into free slots or slots whose page has
    none queued, all in parallel threads (the reads release the GIL). With a single page
    (every node in page 0: the caller read the whole level at once), that page is read
    first and used as it is, and with ``backend='gpu'`` the labels are solved on the device
    (:func:`top_solve_gpu`, equal to the Dijkstra's).

    Returns ``(labels, stats)``: the final labels per top node (as :func:`top_labels`) and
    ``{"pages": distinct pages read, "page_loads": loads (misses), "page_bytes": bytes}``.

    ``tops`` may also be a :class:`FlatBoundaries` (every top node's cells concatenated, as a
    pipeline reads a level; ``tops_labels`` then maps node positions to the few nodes'
    labels that are known): the labels come back flat, ``(ld, la, lh)`` over those cells.
    """
    flat = isinstance(tops, FlatBoundaries)
    if flat:
        slots = np.nonzero(tops.size > 0)[0]
        sizes = tops.size[slots].astype(np.int64)
    else:
        kids, slots, sizes = _nonempty(tops)
    coff = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    V = int(coff[-1])
    ld = np.full(V, _INF)
    la = np.full(V, INT_INF, np.int32)
    lh = np.full(V, INT_INF, np.int32)
    stats = {"pages": 0, "page_loads": 0, "page_bytes": 0, "vertices": V}

    def result():
        if flat:
            return (ld, la, lh), stats
        out = [None if c is None else _inf_labels(c.size) for c in tops]
        return _top_split(slots, coff, ld, la, lh, out), stats
    if V == 0:
        return result()
    if flat:
        ids, z, f = tops.ids, tops.z, tops.f
        labelled = [(int(np.searchsorted(slots, slot)), lab)
                    for slot, lab in tops_labels.items()
                    if lab is not None and tops.size[slot]]
    else:
        ids, z, f = _cells(kids)
        labelled = [(kid_pos, tops_labels[slot]) for kid_pos, slot in enumerate(slots)
                    if tops_labels[slot] is not None]
    vchild = np.repeat(np.arange(sizes.size, dtype=np.int64), sizes)
    for kid_pos, lab in labelled:
        s, e = coff[kid_pos], coff[kid_pos + 1]
        ld[s:e], la[s:e], lh[s:e] = lab
    if np.any(ld < _INF):
        t_arcs = time.perf_counter()
        cptr, cdst, cw = _graph_arcs(spec, ids, z, f, vchild)
        stats["arcs_seconds"] = time.perf_counter() - t_arcs
        del ids, z, f
        pg = np.asarray(page_of, np.int64)[slots]
        loc = np.asarray(page_loc, np.int64)[slots]
        npages = int(np.max(pg)) + 1
        per_page = int(np.prod(page_shape)) * 12
        nslots = int(max(2, min(cache_bytes // max(per_page, 1), len(set(pg.tolist())))))
        slot_of = np.full(npages, -1, np.int64)
        if npages == 1:  # one page holds every matrix: it is the pool (no copy, no misses)
            t_read = time.perf_counter()
            d, h = load_page(0)
            stats["read_seconds"] = time.perf_counter() - t_read
            pool_d, pool_h = d[None], h[None]
            nslots, slot_of[0] = 1, 0
            stats["page_loads"], stats["page_bytes"] = 1, per_page
        else:
            pool_d = np.empty((nslots,) + tuple(page_shape), np.float64)
            pool_h = np.empty((nslots,) + tuple(page_shape), np.int32)
        held = np.full(nslots, -1, np.int64)
        held[slot_of[slot_of >= 0]] = np.nonzero(slot_of >= 0)[0]
        stamp = np.zeros(nslots, np.int64)
        clock = np.zeros(1, np.int64)
        be = get_backend(backend)
        if npages == 1 and be.is_gpu and not np.any(np.signbit(ld[ld < _INF])):
            # the whole level on the device: solved there, no queue on the host
            t_solve = time.perf_counter()
            stats["gpu_rounds"] = top_solve_gpu(be, vchild, coff[:-1], sizes, loc, pool_d[0],
                                                pool_h[0], cptr, cdst, cw, ld, la, lh)
            stats["solve_seconds"] = time.perf_counter() - t_solve
            stats["pages"] = 1
            return result()
        tt = tt_new(V)
        tt_seed(*tt, ld, la, lh)
        vpage = pg[vchild]
        pverts = np.argsort(vpage, kind="stable")
        pptr = np.searchsorted(vpage[pverts], np.arange(npages + 1)).astype(np.int64)
        seen = set(np.nonzero(slot_of >= 0)[0].tolist())
        threads = None
        if neighbours is not None and prefetch > 0 and nslots > 2:
            from concurrent.futures import ThreadPoolExecutor
            threads = ThreadPoolExecutor(max_workers=prefetch + 1)
        try:
            while True:
                p = _graph_dijkstra_paged(vchild, coff, sizes, pg, loc, slot_of, pool_d,
                                          pool_h, stamp, clock, cptr, cdst, cw, ld, la, lh, *tt)
                if p < 0:
                    break
                free = np.nonzero(held < 0)[0]
                sl = int(free[0]) if free.size else int(_page_to_evict(held, pptr, pverts,
                                                                       tt[0]))
                want = [(int(p), sl)]
                if threads is not None:  # neighbours with queued vertices, into spare slots
                    taken = {sl}
                    for q in neighbours(int(p)):
                        if len(want) > prefetch:
                            break
                        if not (0 <= q < npages) or slot_of[q] >= 0 or not (
                                _page_min_key(q, pptr, pverts, tt[0]) < _INF):
                            continue
                        spare = [x for x in range(nslots) if x not in taken and (
                            held[x] < 0 or not _page_min_key(held[x], pptr, pverts,
                                                             tt[0]) < _INF)]
                        if not spare:
                            break
                        want.append((int(q), spare[0]))
                        taken.add(spare[0])
                for q, x in want:
                    if held[x] >= 0:
                        slot_of[held[x]] = -1
                        held[x] = -1
                pages = (threads.map(load_page, [q for q, _ in want]) if len(want) > 1
                         else [load_page(want[0][0])])
                for (q, x), (d, h) in zip(want, pages):
                    pool_d[x], pool_h[x] = d, h
                    held[x], slot_of[q] = q, x
                    stamp[x] = clock[0]
                    stats["page_loads"] += 1
                    stats["page_bytes"] += per_page
                    seen.add(q)
        finally:
            if threads is not None:
                threads.shutdown()
        stats["pages"] = len(seen)
    return result()


def _top_split(slots, coff, ld, la, lh, out):
    """The top vertices' labels back per top node (``out[slot]``)."""
    for kid_pos, slot in enumerate(slots):
        s, e = coff[kid_pos], coff[kid_pos + 1]
        out[slot] = (ld[s:e].copy(), la[s:e].copy(), lh[s:e].copy())
    return out


def _split(g, children, ld, la, lh):
    """Vertex labels of ``g`` back per child (None for an absent child, empty for a child
    without boundary cells)."""
    out = [None if c is None else _inf_labels(c.size) for c in children]
    for kid_pos, slot in enumerate(g.slots):
        s, e = g.coff[kid_pos], g.coff[kid_pos + 1]
        out[slot] = (ld[s:e].copy(), la[s:e].copy(), lh[s:e].copy())
    return out


def node_down(spec, node, node_labels, children, children_labels):
    """Top-down: final labels of the children's boundaries from the node's final labels.

    Multi-source Dijkstra on the child-boundary graph seeded with ``node_labels`` (final, over
    ``node.ids``) and the children's bottom-up source labels. Returns a list (None for absent
    children) of ``(d, a, h)`` over each child's ``ids``.
    """
    if not _has_finite(node_labels) and not any(_has_finite(lab) for lab in children_labels):
        return [None if c is None else _inf_labels(c.size) for c in children]
    g = _child_graph(spec, children)
    ld, la, lh = _seed_graph(g, children_labels)
    if node.size:
        pos = g.positions(node.ids)
        nd, na, nh = node_labels
        for p, d, a, h in zip(pos.tolist(), nd.tolist(), na.tolist(), nh.tolist()):
            if (d, a, h) < (ld[p], la[p], lh[p]):
                ld[p], la[p], lh[p] = d, a, h
    g.dijkstra(ld, la, lh)
    return _split(g, children, ld, la, lh)


# --------------------------------------------------------------------------- phase 3

def _ext_window(spec, window):
    r0, r1, c0, c1 = window
    w = spec.width
    return (max(r0 - w, 0), min(r1 + w, spec.shape[0]), max(c0 - w, 0), min(c1 + w, spec.shape[1]))


def halo_seeds(spec, window, neighbours, ext=None):
    """Seed labels over the halo-extended window of a tile from its neighbours' final labels.

    ``neighbours`` lists ``(ids, (d, a, h))`` of neighbouring tiles' boundaries (any order;
    cells outside the halo are ignored). Returns ``(ext_window, ld, la, lh)`` (flat labels).
    ``ext`` overrides the extended window (then every given cell in it outside ``window`` is
    seeded).
    """
    er0, er1, ec0, ec1 = ext = _ext_window(spec, window) if ext is None else ext
    H, W = er1 - er0, ec1 - ec0
    ld, la, lh = _inf_labels(H * W)
    C = spec.shape[1]
    r0, r1, c0, c1 = window
    for ids, (d, a, h) in neighbours:
        rr, cc = ids // C, ids % C
        m = ((rr >= er0) & (rr < er1) & (cc >= ec0) & (cc < ec1)
             & ~((rr >= r0) & (rr < r1) & (cc >= c0) & (cc < c1)))
        loc = (rr[m] - er0) * W + (cc[m] - ec0)
        ld[loc], la[loc], lh[loc] = d[m], a[m], h[m]
    return ext, ld, la, lh


# --------------------------------------------------------------------------- driver

def _prepare(dem, friction, cost, sources, start_costs):
    z = np.asarray(dem, dtype=np.float32)
    if z.ndim != 2:
        raise InputError(f"tiled_sssp: the DEM must be 2-D, got shape {z.shape}")
    if friction is None:
        if cost == "friction":
            raise InputError("cost model 'friction' needs a friction raster")
        f = np.ones_like(z)
    else:
        f = check_friction(friction)
        if f.shape != z.shape:
            raise InputError(f"friction raster of shape {f.shape} does not match the DEM's "
                             f"{z.shape}")
    rows, cols, costs = check_sources(sources, ~np.isnan(z) & ~np.isnan(f), start_costs)
    return z, f, rows, cols, costs


def _sources_in(window, rows, cols, costs):
    r0, r1, c0, c1 = window
    m = (rows >= r0) & (rows < r1) & (cols >= c0) & (cols < c1)
    idx = np.nonzero(m)[0]
    return rows[idx], cols[idx], costs[idx], idx.astype(np.int32)


class ArrayReader:
    """``reader(window) -> (z, f)`` over in-memory arrays (a pipeline passes a store reader)."""

    def __init__(self, z, f):
        self.z, self.f = z, f

    def __call__(self, window):
        r0, r1, c0, c1 = window
        return self.z[r0:r1, c0:c1], self.f[r0:r1, c0:c1]


def _global(g, gi, gj, k, i, j):
    """Global ``(k, I, J)`` of node ``(k, i, j)`` of the inner plan of group ``(g, gi, gj)``."""
    return (k, (gi << (g - k)) + i, (gj << (g - k)) + j)


def _inner_plan(spec, window, g):
    r0, r1, c0, c1 = window
    return QuadtreePlan.build((r1 - r0, c1 - c0), spec.tile, 1, nlevels=g + 1)


def index_merge(spec, k, i, j, *kids):
    """Bottom-up index step of node ``(k, i, j)``: ``(up, own)``.

    ``kids`` are the children's ``up`` lists (None outside the grid). At or below the height
    cap, ``up = [node_boundary(...)]``; above it the children's lists are passed on whole (the
    top nodes reach the root, whose step runs :func:`top_labels`). ``own`` maps the keys of
    the NodeBoundary made here to them.
    """
    if k <= spec.height:
        nb = node_boundary(spec, k, i, j, [None if c is None else c[0] for c in kids])
        return [nb], {(k, i, j): nb}
    return [nb for c in kids if c is not None for nb in c], {}


def index_leaf(spec, reader, backend, g, i, j, emit=None):
    """Bottom-up index step of group ``(g, i, j)``: phase 1 on its tiles (one batched call),
    then its own levels up to the height cap, each level's nodes in one batched call
    (:func:`nodes_boundary`). Returns ``(up, own)``: ``up`` the group's nodes of level
    ``min(g, spec.height)`` (row-major), ``own`` every node made here.

    With ``emit``, each level's nodes go to ``emit(level, {key: NodeBoundary})`` as soon as
    they are made and are not kept in ``own``: a pipeline writes them out and holds at most
    two levels of the group. The tiles go as ``emit(0, TileBatch)`` (padded arrays, written
    as they are); when the group has no level above its tiles under the cap, ``up`` is
    then empty (the pipeline reads the index back from its store).
    """
    window = spec.window(g, i, j)
    z, f = reader(window)
    batch = tile_batch(spec, z, f, window, backend)
    del z, f
    own = {}

    def keep(k, made):
        if emit is None:
            own.update(made)
        else:
            emit(k, made)

    top = min(g, spec.height)
    level = {} if emit is not None and top == 0 else {
        (0,) + nb.index: nb for nb in batch.nodes()}
    keep(0, batch if emit is not None else level)  # a pipeline writes the batch's arrays
    del batch
    nt_r, nt_c = spec.tiles_shape
    for k in range(1, top + 1):
        nr, nc = -(-nt_r // (1 << k)), -(-nt_c // (1 << k))
        s = 1 << (g - k)
        keys = [(k, a, b) for a in range(i * s, min((i + 1) * s, nr))
                for b in range(j * s, min((j + 1) * s, nc))]
        items = [key + ([None if c is None else level[c] for c in _children(spec, *key)],)
                 for key in keys]
        level = dict(zip(keys, nodes_boundary(spec, items, backend)))
        keep(k, level)
    return [level[key] for key in sorted(level)], own


def sources_merge(spec, nodes, k, i, j, *kids):
    """Bottom-up source step of node ``(k, i, j)``: ``(up, own)`` as :func:`index_merge`, with
    ``up`` a list of ``(key, (d, a, h))`` (the sources' labels on the node's boundary, paths
    inside the node) and ``own = {key: labels}``."""
    if k <= spec.height:
        key = (k, i, j)
        kid_keys = [None if c is None else c[0][0] for c in kids]
        if not any(c is not None and _has_finite(c[0][1]) for c in kids):
            return [(key, None)], {key: None}  # no source below: nothing read
        lab = node_source_labels(spec, nodes[key], [None if c is None else nodes[c]
                                                    for c in kid_keys],
                                 [None if c is None else c[0][1] for c in kids])
        return [(key, lab)], {key: lab}
    return [e for c in kids if c is not None for e in c], {}


def sources_leaf(spec, nodes, reader, sources, g, i, j):
    """Bottom-up source step of group ``(g, i, j)``: each tile's sources to its boundary
    (:func:`tile_source_labels`), then the group's own levels. ``sources`` = ``(rows, cols,
    start_costs)`` of all sources."""
    window = spec.window(g, i, j)
    rows, cols, costs = sources
    own = {}
    z = f = None
    inside = _sources_in(window, rows, cols, costs)
    if len(inside[0]):
        z, f = reader(window)
    T = spec.tile
    in_tile = {}  # tile -> positions in ``inside`` (one pass, not one test per tile)
    for p, rc in enumerate(zip((inside[0] // T).tolist(), (inside[1] // T).tolist())):
        in_tile.setdefault(rc, []).append(p)

    def leaf(k, ii, jj):
        key = _global(g, i, j, 0, ii, jj)
        lab = None  # no source in the tile: all labels infinite (the index is not read)
        if key[1:] in in_tile:
            win = spec.window(*key)
            src = tuple(a[in_tile[key[1:]]] for a in inside)
            r0, c0 = win[0] - window[0], win[2] - window[2]
            sl = (slice(r0, r0 + win[1] - win[0]), slice(c0, c0 + win[3] - win[2]))
            lab = tile_source_labels(spec, z[sl], f[sl], win, nodes[key], src)
        own[key] = lab
        return [(key, lab)], None

    def merge(k, ii, jj, *kids):
        up, made = sources_merge(spec, nodes, *_global(g, i, j, k, ii, jj), *kids)
        own.update(made)
        return up, None

    up, _ = walk_up(_inner_plan(spec, window, g), leaf, merge)
    return up, own


def _inside(key, k, ci, cj):
    """Whether node ``key`` (of a lower level) lies in node ``(k, ci, cj)``."""
    s = k - key[0]
    return (key[1] >> s) == ci and (key[2] >> s) == cj


def _children(spec, k, i, j):
    """Keys of the four children of node ``(k, i, j)`` (NW, NE, SW, SE), None outside."""
    side = spec.tile << (k - 1)
    return [(k - 1, 2 * i + di, 2 * j + dj)
            if (2 * i + di) * side < spec.shape[0] and (2 * j + dj) * side < spec.shape[1]
            else None for di in (0, 1) for dj in (0, 1)]


def down_node(spec, nodes, labels, k, i, j, incoming):
    """Top-down step of node ``(k, i, j)``: four dicts ``{key: final labels}``, one per child.

    ``incoming`` maps keys (this node's, or the top nodes' below it above the cap) to final
    labels; None at the root, which runs :func:`top_labels` on the top nodes. At or below
    the cap, :func:`node_down` turns this node's final labels (and the children's source
    labels) into the children's.
    """
    key = (k, i, j)
    H = spec.height
    kids = _children(spec, k, i, j)
    if incoming is None:
        tops = sorted(n for n in nodes if n[0] == H and (k <= H or _inside(n, k, i, j)))
        tops = [key] if k <= H else tops
        incoming = dict(zip(tops, top_labels(spec, [nodes[t] for t in tops],
                                             [labels.get(t) for t in tops])))
    if k > H:
        return [None if c is None else {n: lab for n, lab in incoming.items()
                                        if _inside(n, *c)} for c in kids]
    down = node_down(spec, nodes[key], incoming[key],
                     [None if c is None else nodes[c] for c in kids],
                     [None if c is None else labels.get(c) for c in kids])
    return [None if c is None else {c: lab} for c, lab in zip(kids, down)]


def down_leaf(spec, nodes, labels, g, i, j, incoming):
    """Top-down step of group ``(g, i, j)``: ``{tile key: final labels}`` of its tiles, by
    the same walk on the group's block."""
    if g == 0:
        if incoming is None:  # a single tile is the root: it has no boundary
            return {(0, i, j): _inf_labels(nodes[(0, i, j)].size)}
        return incoming

    def node(k, ii, jj, inc):
        return down_node(spec, nodes, labels, *_global(g, i, j, k, ii, jj),
                         incoming if k == g else inc)

    def leaf(k, ii, jj, inc):
        return inc

    _, out = walk_down(_inner_plan(spec, spec.window(g, i, j), g), node, leaf)
    final = {}
    for d in out.values():
        final.update(d)
    return final


def fill_group(spec, reader, backend, nodes, final, sources, g, i, j, seeds=None):
    """Phase 3 on the tiles of group ``(g, i, j)``: ``(window, distance, allocation,
    backlink, hops)`` of the group's block.

    ``final`` maps tile keys to final boundary labels, for the group's tiles and the ring of
    tiles around it (the halo); ``nodes`` their boundary cells (``.ids``). Or ``seeds``:
    ``(ids, (d, a, h))``, those cells and labels as flat arrays (a pipeline reads them so
    from its store; ``nodes`` and ``final`` are then not used). The tiles' halo-extended
    windows are cut, all of one shape ``T + 2w``, from the group's block padded with
    nodata, and run as one batch
    (:func:`windows_dijkstra_cpu` or ``_boundary.cu: windows_dijkstra``).
    """
    T, w = spec.tile, spec.width
    R, C = spec.shape
    window = spec.window(g, i, j)
    r0, r1, c0, c1 = window
    rows, cols, costs = sources
    nt_r, nt_c = spec.tiles_shape
    ti0, tj0 = i << g, j << g
    ti1, tj1 = min(ti0 + (1 << g), nt_r), min(tj0 + (1 << g), nt_c)
    nr, nc = ti1 - ti0, tj1 - tj0
    # the group's block and halo, padded to whole tiles plus w (nodata outside the grid)
    pr0, pc0 = r0 - w, c0 - w
    Hp, Wp = nr * T + 2 * w, nc * T + 2 * w
    er0, er1, ec0, ec1 = ext = _ext_window(spec, window)
    zc, fc = reader(ext)
    zp = np.full((Hp, Wp), np.nan, np.float32)
    fp = np.full((Hp, Wp), np.nan, np.float32)
    sl = (slice(er0 - pr0, er1 - pr0), slice(ec0 - pc0, ec1 - pc0))
    zp[sl], fp[sl] = zc, fc
    # the final boundary labels of the group's tiles and of the ring of tiles around it
    if seeds is None:
        ring = [(0, ti, tj) for ti in range(max(ti0 - 1, 0), min(ti1 + 1, nt_r))
                for tj in range(max(tj0 - 1, 0), min(tj1 + 1, nt_c))]
        seeds = [(nodes[t].ids, final[t]) for t in ring]
    else:
        seeds = [seeds]
    _, cd, ca, ch = halo_seeds(spec, (pr0, pr0, pc0, pc0), seeds,
                               (pr0, pr0 + Hp, pc0, pc0 + Wp))
    S = T + 2 * w

    def cut(a):  # (Hp, Wp) -> (nr * nc, S, S), window of tile (ti, tj) at (ti*T, tj*T)
        v = np.lib.stride_tricks.sliding_window_view(a, (S, S))[::T, ::T][:nr, :nc]
        return np.array(v).reshape(nr * nc, S, S)  # a copy (the view is read-only)

    zb, fb = cut(zp), cut(fp)
    n = nr * nc
    ld = cut(cd.reshape(Hp, Wp))
    la = cut(ca.reshape(Hp, Wp))
    lh = cut(ch.reshape(Hp, Wp))
    centre = (slice(None), slice(w, w + T), slice(w, w + T))
    ld[centre], la[centre], lh[centre] = _INF, INT_INF, INT_INF  # computed, not seeded
    inner = np.zeros((n, S, S), bool)
    inner[centre] = True
    inner &= ~np.isnan(zb) & ~np.isnan(fb)
    ld, la, lh = ld.reshape(n, S * S), la.reshape(n, S * S), lh.reshape(n, S * S)
    src = _sources_in(window, rows, cols, costs)
    for r, c, cost, idx in zip(*(x.tolist() for x in src)):
        t = ((r - r0) // T) * nc + (c - c0) // T
        p = (w + (r - r0) % T) * S + w + (c - c0) % T
        if (cost, idx, 0) < (ld[t, p], la[t, p], lh[t, p]):
            ld[t, p], la[t, p], lh[t, p] = cost, idx, 0
    live = np.nonzero(np.any(ld < _INF, axis=1))[0]
    back = np.full((n, S, S), 255, np.uint8)
    if live.size:
        every = live.size == n  # all windows live (a reached grid): no gathered copies
        pick = (lambda a: a) if every else (lambda a: a[live])
        args = (pick(zb), pick(fb), pick(inner), spec.codes, spec.model, spec.lengths)
        sd, sa, sh = pick(ld), pick(la), pick(lh)
        if get_backend(backend).is_gpu:
            windows_dijkstra_gpu(get_backend(backend), *args, sd, sa, sh)
        else:
            windows_dijkstra_cpu(*args, sd, sa, sh)
        bl = pick(back)
        _backlinks_batch(*args, sd, sa, sh, bl)
        if not every:
            ld[live], la[live], lh[live], back[live] = sd, sa, sh, bl

    def uncut(a):  # (n, S, S) centres -> the group's block
        c = a.reshape(nr, nc, S, S)[:, :, w:w + T, w:w + T]
        return c.transpose(0, 2, 1, 3).reshape(nr * T, nc * T)[: r1 - r0, : c1 - c0]

    reached = uncut(inner) & (uncut(ld.reshape(n, S, S)) < _INF)
    dist = np.where(reached, uncut(ld.reshape(n, S, S)), np.nan)
    alloc = np.where(reached, uncut(la.reshape(n, S, S)), -1).astype(np.int32)
    hops = np.where(reached, uncut(lh.reshape(n, S, S)), -1).astype(np.int32)
    back = np.where(reached, uncut(back), 255).astype(np.uint8)
    return window, dist, alloc, back, hops


def build_index(spec, reader, backend=None, group_tiles=4):
    """Phase 1 on every tile and the bottom-up matrices up to ``spec.height``: a TiledIndex."""
    t0 = time.perf_counter()
    plan = QuadtreePlan.build(spec.shape, spec.tile, group_tiles)
    _, rest = walk_up(plan, (index_leaf, spec, reader, backend), (index_merge, spec))
    nodes = {}
    for (own,) in rest.values():
        nodes.update(own)
    return TiledIndex(spec, nodes, {"index": time.perf_counter() - t0})


def _check_reuse(index, spec, z, f):
    s = index.spec
    if (tuple(s.shape), s.tile, int(s.connectivity), s.cost, tuple(s.cellsize)) != (
            tuple(spec.shape), spec.tile, int(spec.connectivity), spec.cost,
            tuple(float(x) for x in spec.cellsize)):
        raise InputError("reuse: the stored index was computed for another grid, tile, "
                         "connectivity, cost model or cell size")
    # the stored boundary cells' elevations and frictions must be this raster's
    for key, nb in index.nodes.items():
        if key[0] == 0 and nb.size and not (
                np.array_equal(z.reshape(-1)[nb.ids], nb.z, equal_nan=True)
                and np.array_equal(f.reshape(-1)[nb.ids], nb.f, equal_nan=True)):
            raise InputError("reuse: the stored index does not match this raster")


def tiled_sssp(dem, sources, start_costs=None, *, cost="absdiff", friction=None,
               connectivity=8, tile=16, max_cost=None, cellsize=(1, 1), backend=None,
               max_height=None, reuse=None, group_tiles=None):
    """Exact multi-source cost distance by the tiled algorithm (phases 1-3, see module doc).

    Parameters
    ----------
    dem : 2-D array
        Elevations (float32; NaN = nodata, a barrier).
    sources : (n, 2) int array-like
        Source cells ``(row, col)``; source ``i`` is row ``i``.
    start_costs : float or (n,) array, optional
        Cost already spent at each source (default 0).
    cost : {'absdiff', 'friction', 'tobler'}
    friction : 2-D array, optional
        Friction raster (needed for ``friction``; a factor for ``tobler``); NaN = nodata.
    connectivity : {4, 8, 16}
    tile : int
        Tile side, a power of two (16 is the fastest on the CPU: phase 1 costs ``O(T)`` per
        cell; at most 64 for phase 1 on the GPU).
    max_cost : float, optional
        Cells farther than this are unreached.
    cellsize : (dx, dy)
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional
        The GPU runs phase 1 (tiles up to 64), the node merges inside each group and
        phase 3; the rest of phase 2 runs on the CPU (the pipeline also solves the top on
        the GPU: :func:`top_solve_gpu`).
    max_height : int, optional
        Highest quadtree level that gets boundary matrices (0: the thesis's flat boundary
        graph; default :func:`default_max_height`).
    reuse : TiledIndex or dict of arrays, optional
        Phase 1 and bottom-up matrices from an earlier run on the same raster and cost.
    group_tiles : int, optional
        Tiles a side per group (a quadtree node read and processed in one call: phases 1 and
        3 are batched over its tiles; default ``max(4, 1024 // tile)``, blocks of about
        1024 cells a side).

    Returns
    -------
    TiledSSSPResult

    Examples
    --------
    >>> z = np.array([[0, 1, 3], [2, 2, 2], [5, 1, 0]], np.float32)
    >>> r = tiled_sssp(z, [(0, 0)], tile=2, backend="cpu")
    >>> r.distance.tolist()
    [[0.0, 1.0, 3.0], [2.0, 2.0, 2.0], [5.0, 3.0, 4.0]]
    >>> r.backlink.tolist()
    [[0, 5, 4], [7, 6, 5], [7, 6, 6]]
    """
    t_start = time.perf_counter()
    be = get_backend(backend)
    z, f, rows, cols, costs = _prepare(dem, friction, cost, sources, start_costs)
    if max_cost is not None and not (float(max_cost) > 0):
        raise InputError(f"max cost {max_cost!r}: must be > 0")
    spec = TiledSpec(tuple(int(s) for s in z.shape), int(tile), int(connectivity), cost,
                     tuple(float(x) for x in cellsize), max_height)
    reader = ArrayReader(z, f)
    if group_tiles is None:
        group_tiles = max(4, 1024 // spec.tile)
    if reuse is not None:
        index = reuse if isinstance(reuse, TiledIndex) else TiledIndex.from_arrays(reuse)
        _check_reuse(index, spec, z, f)
        spec = TiledSpec(spec.shape, spec.tile, spec.connectivity, spec.cost, spec.cellsize,
                         index.spec.height)
        times = {"index": 0.0}
    else:
        index = build_index(spec, reader, be, group_tiles)
        times = dict(index.times)
    nodes = index.nodes
    plan = QuadtreePlan.build(spec.shape, spec.tile, group_tiles)
    srcs = (rows, cols, costs)
    t0 = time.perf_counter()
    _, rest = walk_up(plan, (sources_leaf, spec, nodes, reader, srcs),
                      (sources_merge, spec, nodes))
    labels = {}
    for (own,) in rest.values():
        labels.update(own)
    times["sources_up"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, out = walk_down(plan, (down_node, spec, nodes, labels), (down_leaf, spec, nodes, labels),
                       node_nout=4)
    final = {}
    for d in out.values():
        final.update(d)
    times["top_down"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    dist = np.full(spec.shape, np.nan)
    alloc = np.full(spec.shape, -1, np.int32)
    back = np.full(spec.shape, 255, np.uint8)
    hops = np.full(spec.shape, -1, np.int32)
    g = plan.group_level
    for (i, j) in plan.groups:
        win, d, a, b, h = fill_group(spec, reader, be, nodes, final, srcs, g, i, j)
        sl = (slice(win[0], win[1]), slice(win[2], win[3]))
        dist[sl], alloc[sl], back[sl], hops[sl] = d, a, b, h
    times["phase3"] = time.perf_counter() - t0
    if max_cost is not None:
        far = dist > float(max_cost)
        dist[far], alloc[far], back[far], hops[far] = np.nan, -1, 255, -1
    times["total"] = time.perf_counter() - t_start
    stats = {"tile": spec.tile, "levels": spec.levels, "height": spec.height, "connectivity":
             spec.connectivity, "cost": cost, "reached": int(np.count_nonzero(~np.isnan(dist))),
             "reused": reuse is not None, "backend": be.name, "times": times}
    return TiledSSSPResult(dist, alloc, back, hops, stats, index)
