"""The boundary graphs of the tiled SSSP (:mod:`terrain.grid.sssp_tiled`): phase 1 on tile
batches, the hierarchy's child-boundary graphs, the top Dijkstra (in memory or paged) and the
halo seeds; kernels from the table :func:`ops` chooses (``_tiled_cpu.py``/``_tiled_gpu.py``).
"""

import time
from dataclasses import dataclass

import numpy as np

from .. import native
from ..backend import get_backend
from ..errors import InputError
from ..tiles.quadtree import TiledGrid
from ..tiles.store import check_tile_size, shard_windows
from ._tiled_cpu import (TiledCpuOps, arcs_cpu, graph_dijkstra, graph_dijkstra_paged,
                         page_min_key, page_to_evict, window_dijkstra_cpu)
from ._tournament import INT_INF, tt_alloc, tt_seed
from .costs import arc_codes, arc_lengths, cost_model_code

__all__ = ["ops", "TiledSpec", "default_max_height", "NodeBoundary", "FlatBoundaries",
           "TileBatch", "tile_batch", "tile_boundaries", "nodes_boundary", "node_boundary",
           "graph_arcs", "tile_source_labels", "node_source_labels", "top_labels",
           "top_labels_paged", "node_down", "halo_seeds", "inf_labels", "has_finite",
           "ext_window"]

_INF = np.inf
_NO_STOP = np.zeros(1, np.uint8)  # a node's graph is small: never interrupted inside


def ops(backend=None):
    """The kernel table of ``backend``: ``TiledCpuOps`` or ``TiledGpuOps``
    (:meth:`terrain.backend.Backend.kernel_table`)."""
    def gpu():
        from ._tiled_gpu import TiledGpuOps
        return TiledGpuOps
    return get_backend(backend).kernel_table(lambda: TiledCpuOps, gpu)


@dataclass(frozen=True)
class TiledSpec(TiledGrid):
    """What is computed: grid shape, tile side, connectivity, cost model, cell size, height cap.

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
    side ``S``); the budget is the top Dijkstra's graph (docs/cost-distance-tiled.md).

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


@dataclass
class NodeBoundary:
    """A tile's or node's boundary cells (``ids`` sorted, ``z``, ``f``) and the least
    ``(dist, hops)[s, j]`` from ``ids[s]`` to ``ids[j]`` on paths inside ``window``."""

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
    """The boundary cells of a row of nodes concatenated (``size`` per node), as a pipeline
    reads a whole level."""

    size: np.ndarray
    ids: np.ndarray
    z: np.ndarray
    f: np.ndarray


def inf_labels(n):
    return (np.full(n, _INF), np.full(n, INT_INF, np.int32), np.full(n, INT_INF, np.int32))


def has_finite(labels):
    return labels is not None and labels[0].size > 0 and bool(np.any(labels[0] < _INF))


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
    return zb, fb, shard_windows(spec.shape, T, window)


@dataclass
class TileBatch:
    """Phase 1 of a block's tiles (row-major) as padded arrays: ``count`` boundary sizes,
    ``ids`` (-1), ``z``/``f`` (NaN), ``dist``/``hops`` (inf / ``INT_INF``) per tile."""

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
    """The boundary cells of every tile of a batch: ``(count, ids, bidx, (t, pos, loc))``,
    ``ids`` global (-1 padding), ``bidx`` tile-local; ``width`` pads to that many cells."""
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
    """Phase 1 on every tile of a block as one :class:`TileBatch` (arguments as
    :func:`tile_boundaries`; ``width`` pads the boundary axes; ``out``: device matrices)."""
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
    if out is not None and width is None:
        raise ValueError("out= needs a width")
    out_d, out_h = ops(backend).boundary_pairs(zb, fb, bidx, count, spec.codes, spec.model,
                                               spec.lengths, out=out)
    r0, r1, c0, c1 = window
    return TileBatch(T, (-(-(r1 - r0) // T), -(-(c1 - c0) // T)), wins, count, ids, bz, bf,
                     out_d, out_h)


def tile_boundaries(spec, z_block, f_block, window, backend=None):
    """Phase 1 on every tile of a block: one :class:`NodeBoundary` per tile (row-major).

    ``z_block, f_block``: elevations and frictions (ones without a friction raster; NaN =
    nodata) of the ``window`` aligned to the tile grid. On the GPU, tiles above
    ``MAX_GPU_TILE`` run on the CPU kernel.

    >>> spec = TiledSpec((4, 4), 2, connectivity=4)
    >>> z = np.arange(16, dtype=np.float32).reshape(4, 4)
    >>> nb = tile_boundaries(spec, z, np.ones_like(z), (0, 4, 0, 4), "cpu")[0]
    >>> nb.ids.tolist(), nb.dist.tolist()
    ([1, 4, 5], [[0.0, 5.0, 4.0], [5.0, 0.0, 1.0], [4.0, 1.0, 0.0]])
    """
    return tile_batch(spec, z_block, f_block, window, backend).nodes()


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

    def dijkstra(self, ld, la, lh, stop=None):
        """The labels in place (:func:`graph_dijkstra`). ``stop``: the flag of
        :func:`terrain.native.interruptible` for the top's graph, which holds every top
        node's boundary; None for a node's (its four children's): never stopped inside."""
        tt = tt_alloc(ld.size)
        graph_dijkstra(self.vchild, self.coff, self.csize, self.moff, self.mat_d, self.mat_h,
                       self.cptr, self.cdst, self.cw, ld, la, lh, *tt,
                       _NO_STOP if stop is None else stop)

    def positions(self, ids):
        """Vertex index of each of ``ids`` (all must be vertices)."""
        order = np.argsort(self.ids, kind="stable")
        return order[np.searchsorted(self.ids, ids, sorter=order)]


def _nonempty(nodes):
    """``(kids, slots, sizes)`` of the non-empty ones of ``nodes``."""
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
    cptr, cdst, cw = graph_arcs(spec, ids, z, f, vchild)
    return _ChildGraph(kids, slots, ids, z, f, vchild, coff, sizes, moff, mat_d, mat_h,
                       cptr, cdst, cw)


def graph_arcs(spec, ids, z, f, vchild):
    """CSR ``(cptr, cdst, cw)`` of the grid arcs between vertices of different children."""
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
    arcs_cpu(*args, cptr, np.zeros(0, np.int64), np.zeros(0), False)
    np.cumsum(cptr, out=cptr)
    cdst = np.empty(int(cptr[-1]), np.int64)
    cw = np.empty(int(cptr[-1]), np.float64)
    arcs_cpu(*args, cptr, cdst, cw, True)
    return cptr, cdst, cw


def nodes_boundary(spec, items, backend="cpu"):
    """:func:`node_boundary` of each ``(level, i, j, children)`` of ``items``, all their
    Dijkstras in one kernel call."""
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
    if pnode.size:
        ops(backend).graphs_pairs(*args)
    out = []
    for n, ((level, i, j, _), g, t) in enumerate(zip(items, graphs, targets)):
        B = t.size
        out.append(NodeBoundary(level, (i, j), windows[n], g.ids[t], g.z[t], g.f[t],
                                out_d[obase[n]:obase[n + 1]].reshape(B, B),
                                out_h[obase[n]:obase[n + 1]].reshape(B, B)))
    return out


def node_boundary(spec, level, i, j, children, backend="cpu"):
    """Bottom-up: the :class:`NodeBoundary` of node ``(level, i, j)`` from its 4 children's.

    ``children``: NodeBoundary or None, in :meth:`QuadtreePlan.children` order.

    >>> spec = TiledSpec((4, 8), 2, connectivity=4)
    >>> z = np.zeros((4, 8), np.float32)
    >>> tiles = tile_boundaries(spec, z, np.ones_like(z), (0, 4, 0, 8), "cpu")
    >>> kids = [tiles[0], tiles[1], tiles[4], tiles[5]]
    >>> node_boundary(spec, 1, 0, 0, kids).ids.tolist()
    [3, 11, 19, 27]
    """
    return nodes_boundary(spec, [(level, i, j, children)], backend)[0]


def tile_source_labels(spec, z_tile, f_tile, window, nb, sources):
    """``(d, a, h)`` over ``nb.ids`` from the tile's ``sources`` ``(rows, cols, start_costs,
    index)``, on paths inside the tile."""
    rows, cols, costs, index = sources
    B = nb.size
    if len(rows) == 0 or B == 0:
        return inf_labels(B)
    r0, r1, c0, c1 = window
    H, W = r1 - r0, c1 - c0
    ld, la, lh = inf_labels(H * W)
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
    ld, la, lh = inf_labels(int(g.ids.size))
    for kid_pos, slot in enumerate(g.slots):
        lab = children_labels[slot]
        if lab is None:
            continue
        s, e = g.coff[kid_pos], g.coff[kid_pos + 1]
        ld[s:e], la[s:e], lh[s:e] = lab
    return ld, la, lh


def node_source_labels(spec, node, children, children_labels):
    """Bottom-up sources: ``(d, a, h)`` over ``node.ids`` from the children's source labels."""
    if not any(has_finite(lab) for lab in children_labels):
        return inf_labels(node.size)
    g = _child_graph(spec, children)
    ld, la, lh = _seed_graph(g, children_labels)
    g.dijkstra(ld, la, lh)
    pos = g.positions(node.ids)
    return ld[pos], la[pos], lh[pos]


def top_labels(spec, tops, tops_labels):
    """One Dijkstra on the top nodes' boundary graph: their final labels, in order."""
    g = _child_graph(spec, tops)
    ld, la, lh = _seed_graph(g, tops_labels)
    if np.any(ld < _INF):
        native.interruptible(g.dijkstra, ld, la, lh)
    return _split(g.slots, g.coff, tops, ld, la, lh)


def top_labels_paged(spec, tops, tops_labels, page_of, page_loc, load_page, page_shape,
                     cache_bytes=256 << 20, neighbours=None, prefetch=3, backend="cpu"):
    """:func:`top_labels` with the top nodes' matrices read page by page, on demand.

    Only the top nodes' cells (``tops``, no matrices; or a :class:`FlatBoundaries`, then
    ``tops_labels`` maps positions to labels and the labels come back flat) are in memory;
    page ``p`` of matrices (``load_page(p)``: ``(dist, hops)`` of ``page_shape``; top node
    ``t`` at ``page_of[t]``, ``page_loc[t]``) is held in a ``cache_bytes`` cache evicting the
    page needed last, a miss also prefetching up to ``prefetch`` ``neighbours(p)`` with
    queued vertices in threads. One page: read once, solved on the device on the GPU.
    Returns ``(labels, stats)`` (pages, page_loads, page_bytes). See
    docs/cost-distance-tiled.md.
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
        return ((ld, la, lh) if flat else _split(slots, coff, tops, ld, la, lh)), stats
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
        cptr, cdst, cw = graph_arcs(spec, ids, z, f, vchild)
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
        top_solve = ops(backend).top_solve
        if npages == 1 and top_solve is not None and not np.any(np.signbit(ld[ld < _INF])):
            # the whole level on the device: solved there, no queue on the host
            t_solve = time.perf_counter()
            stats["gpu_rounds"] = top_solve(vchild, coff[:-1], sizes, loc, pool_d[0],
                                                pool_h[0], cptr, cdst, cw, ld, la, lh)
            stats["solve_seconds"] = time.perf_counter() - t_solve
            stats["pages"] = 1
            return result()
        tt = tt_alloc(V)
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
                p = native.interruptible(graph_dijkstra_paged, vchild, coff, sizes, pg, loc,
                                         slot_of, pool_d, pool_h, stamp, clock, cptr, cdst, cw,
                                         ld, la, lh, *tt)
                if p < 0:
                    break
                free = np.nonzero(held < 0)[0]
                sl = int(free[0]) if free.size else int(page_to_evict(held, pptr, pverts,
                                                                       tt[0]))
                want = [(int(p), sl)]
                if threads is not None:  # neighbours with queued vertices, into spare slots
                    taken = {sl}
                    for q in neighbours(int(p)):
                        if len(want) > prefetch:
                            break
                        if not (0 <= q < npages) or slot_of[q] >= 0 or not (
                                page_min_key(q, pptr, pverts, tt[0]) < _INF):
                            continue
                        spare = [x for x in range(nslots) if x not in taken and (
                            held[x] < 0 or not page_min_key(held[x], pptr, pverts,
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


def _split(slots, coff, nodes, ld, la, lh):
    """The vertices' labels back per node (None for an absent node)."""
    out = [None if c is None else inf_labels(c.size) for c in nodes]
    for kid_pos, slot in enumerate(slots):
        s, e = coff[kid_pos], coff[kid_pos + 1]
        out[slot] = (ld[s:e].copy(), la[s:e].copy(), lh[s:e].copy())
    return out


def node_down(spec, node, node_labels, children, children_labels):
    """Top-down: the children's final boundary labels (None for an absent child), by a
    Dijkstra on the child-boundary graph seeded with the node's and the children's labels."""
    if not has_finite(node_labels) and not any(has_finite(lab) for lab in children_labels):
        return [None if c is None else inf_labels(c.size) for c in children]
    g = _child_graph(spec, children)
    ld, la, lh = _seed_graph(g, children_labels)
    if node.size:
        pos = g.positions(node.ids)
        nd, na, nh = node_labels
        for p, d, a, h in zip(pos.tolist(), nd.tolist(), na.tolist(), nh.tolist()):
            if (d, a, h) < (ld[p], la[p], lh[p]):
                ld[p], la[p], lh[p] = d, a, h
    g.dijkstra(ld, la, lh)
    return _split(g.slots, g.coff, children, ld, la, lh)


def ext_window(spec, window):
    r0, r1, c0, c1 = window
    w = spec.width
    return (max(r0 - w, 0), min(r1 + w, spec.shape[0]), max(c0 - w, 0), min(c1 + w, spec.shape[1]))


def halo_seeds(spec, window, neighbours, ext=None):
    """``(ext_window, ld, la, lh)``: flat seeds over a tile's halo-extended window (or
    ``ext``) from the neighbours' ``(ids, (d, a, h))`` final labels outside ``window``."""
    er0, er1, ec0, ec1 = ext = ext_window(spec, window) if ext is None else ext
    H, W = er1 - er0, ec1 - ec0
    ld, la, lh = inf_labels(H * W)
    C = spec.shape[1]
    r0, r1, c0, c1 = window
    for ids, (d, a, h) in neighbours:
        rr, cc = ids // C, ids % C
        m = ((rr >= er0) & (rr < er1) & (cc >= ec0) & (cc < ec1)
             & ~((rr >= r0) & (rr < r1) & (cc >= c0) & (cc < c1)))
        loc = (rr[m] - er0) * W + (cc[m] - ec0)
        ld[loc], la[loc], lh[loc] = d[m], a[m], h[m]
    return ext, ld, la, lh