"""Tiled, out-of-core exact SSSP / cost distance (thesis ch. 4-5 with Haverkort's hierarchy).

Labels, costs and outputs are those of :mod:`terrain.grid.sssp`. Phase 1 (per tile, source
independent): boundary-to-boundary matrices; phase 2: bottom-up child-boundary graphs up to
``max_height`` (above it one Dijkstra on the top nodes), sources up, final boundary labels
down; phase 3 (per tile): Dijkstra seeded with the final labels of the halo and of the
tile's own boundary cells (fixed: one label per cell), then the backlinks.
This module holds the index, the walk steps (for :func:`terrain.tiles.quadtree.walk_up` /
``walk_down``, which a pipeline schedules as Dask tasks) and the driver; ``_tiled_graphs.py``
the boundary graphs. With integer costs the result equals ``grid_sssp``'s bit for bit; with
float costs within a relative ``1e-12``. Design and costs: docs/cost-distance-tiled.md.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from ..backend import get_backend
from ..errors import InputError
from ..tiles.quadtree import QuadtreePlan, walk_down, walk_up
from ._sssp_frame import GridSSSPResult
from ._tiled_cpu import backlinks_batch
from ._tiled_gpu import (MAX_GPU_TILE, SHARED_BYTES, DeviceLevel, level_solve_gpu,
                         shared_pass)
from ._tiled_graphs import (FlatBoundaries, NodeBoundary, TileBatch, TiledSpec,
                            default_max_height, ext_window, halo_seeds, has_finite,
                            inf_labels, node_boundary, node_down, node_source_labels,
                            nodes_boundary, ops, tile_batch, tile_boundaries,
                            tile_source_labels, top_labels, top_labels_paged)
from ._tournament import INT_INF, tt_capacity
from .costs import check_friction
from .sssp import check_max_cost, check_sources

__all__ = ["tiled_sssp", "TiledSpec", "TiledIndex", "NodeBoundary", "TiledSSSPResult",
           "index_leaf", "tile_batch", "TileBatch",
           "FlatBoundaries", "sources_leaf", "sources_merge",
           "fill_group", "tile_boundaries", "node_boundary", "nodes_boundary",
           "tile_source_labels", "node_source_labels", "top_labels", "node_down",
           "top_labels_paged", "halo_seeds", "default_max_height", "MAX_GPU_TILE", "PHASES",
           "shared_pass", "SHARED_BYTES", "DeviceLevel", "level_solve_gpu", "INT_INF",
           "tt_capacity"]

_INF = np.inf


PHASES = ("index", "sources_up", "top_down", "phase3")


@dataclass
class TiledIndex:
    """The source-independent part, for ``reuse=``: ``nodes[(level, i, j)]``, a
    :class:`NodeBoundary` for every tile and node up to ``spec.height``."""

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
class TiledSSSPResult(GridSSSPResult):
    """:class:`terrain.grid.sssp.GridSSSPResult` (distance, allocation, backlink, hops, stats) and
    the :class:`TiledIndex` it used (for ``reuse=``)."""

    index: TiledIndex = None


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
    """Bottom-up index step of node ``(k, i, j)``: ``(up, own)``; above the height cap the
    children's ``up`` lists are passed on whole (the top nodes reach the root)."""
    if k <= spec.height:
        nb = node_boundary(spec, k, i, j, [None if c is None else c[0] for c in kids])
        return [nb], {(k, i, j): nb}
    return [nb for c in kids if c is not None for nb in c], {}


def index_leaf(spec, reader, backend, g, i, j, emit=None):
    """Bottom-up index step of group ``(g, i, j)``: phase 1 on its tiles, then its levels up
    to the height cap, one batched call a level. ``(up, own)``: the nodes of level
    ``min(g, spec.height)`` and every node made here. With ``emit``, each level goes to
    ``emit(level, nodes)`` (the tiles as a :class:`TileBatch`) instead of ``own``, so a
    pipeline holds at most two levels (``up`` is empty when the group has no level above
    its tiles under the cap).
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
    """Bottom-up source step of node ``(k, i, j)``: ``(up, own)`` as :func:`index_merge`, of
    ``(key, (d, a, h))`` source labels on the node's boundary."""
    if k <= spec.height:
        key = (k, i, j)
        kid_keys = [None if c is None else c[0][0] for c in kids]
        if not any(c is not None and has_finite(c[0][1]) for c in kids):
            return [(key, None)], {key: None}  # no source below: nothing read
        lab = node_source_labels(spec, nodes[key], [None if c is None else nodes[c]
                                                    for c in kid_keys],
                                 [None if c is None else c[0][1] for c in kids])
        return [(key, lab)], {key: lab}
    return [e for c in kids if c is not None for e in c], {}


def sources_leaf(spec, nodes, reader, sources, g, i, j):
    """Bottom-up source step of group ``(g, i, j)``: each tile's sources to its boundary,
    then the group's own levels."""
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
    """Top-down step of node ``(k, i, j)``: ``{key: final labels}`` per child from
    ``incoming`` (None at the root, which runs :func:`top_labels`)."""
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
            return {(0, i, j): inf_labels(nodes[(0, i, j)].size)}
        return incoming

    def node(k, ii, jj, inc):
        return down_node(spec, nodes, labels, *_global(g, i, j, k, ii, jj),
                         incoming if k == g else inc)

    def leaf(k, ii, jj, inc):
        return inc

    _, out = walk_down(_inner_plan(spec, spec.window(g, i, j), g), node, leaf)
    return {key: lab for d in out.values() for key, lab in d.items()}


def fill_group(spec, reader, backend, nodes, final, sources, g, i, j, seeds=None):
    """Phase 3 on the tiles of group ``(g, i, j)``, one batch of halo-extended windows
    seeded from ``final`` labels of ``nodes`` (the group's tiles and the ring around) or flat
    ``seeds``: ``(window, distance, allocation, backlink, hops)`` of the group's block."""
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
    er0, er1, ec0, ec1 = ext = ext_window(spec, window)
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
    # every boundary cell keeps its final label, in its own tile's window as in its
    # neighbours' halos: one label per cell, so hops fall along every backlink
    fixed = np.zeros(Hp * Wp, bool)
    for ids, _ in seeds:
        rr, cc = ids // C - pr0, ids % C - pc0
        m = (rr >= 0) & (rr < Hp) & (cc >= 0) & (cc < Wp)
        fixed[rr[m] * Wp + cc[m]] = True
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
    cells = np.zeros((n, S, S), bool)  # the tiles' cells: written, with their backlinks
    cells[centre] = True
    cells &= ~np.isnan(zb) & ~np.isnan(fb)
    inner = cells & ~cut(fixed.reshape(Hp, Wp))  # the cells the Dijkstra labels
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
        costs_of = (spec.codes, spec.model, spec.lengths)
        zl, fl = pick(zb), pick(fb)
        sd, sa, sh = pick(ld), pick(la), pick(lh)
        ops(backend).windows_dijkstra(zl, fl, pick(inner), *costs_of, sd, sa, sh)
        bl = pick(back)
        backlinks_batch(zl, fl, pick(cells), *costs_of, sd, sa, sh, bl)
        if not every:
            ld[live], la[live], lh[live], back[live] = sd, sa, sh, bl

    def uncut(a):  # (n, S, S) centres -> the group's block
        c = a.reshape(nr, nc, S, S)[:, :, w:w + T, w:w + T]
        return c.transpose(0, 2, 1, 3).reshape(nr * T, nc * T)[: r1 - r0, : c1 - c0]

    reached = uncut(cells) & (uncut(ld.reshape(n, S, S)) < _INF)
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
    nodes = {key: nb for (own,) in rest.values() for key, nb in own.items()}
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
    dem, sources, start_costs, cost, friction, connectivity, max_cost, cellsize
        As for :func:`terrain.grid.sssp.grid_sssp`.
    tile : int
        Tile side, a power of two (at most 64 for phase 1 on the GPU).
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional
        The GPU runs phase 1, the merges inside each group and phase 3.
    max_height : int, optional
        Highest level with boundary matrices (default :func:`default_max_height`).
    reuse : TiledIndex or dict of arrays, optional
        Phase 1 and bottom-up matrices from an earlier run on the same raster and cost.
    group_tiles : int, optional
        Tiles a side per group, processed in one call (default ``max(4, 1024 // tile)``).

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
    check_max_cost(max_cost)
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
    labels = {key: lab for (own,) in rest.values() for key, lab in own.items()}
    times["sources_up"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, out = walk_down(plan, (down_node, spec, nodes, labels), (down_leaf, spec, nodes, labels),
                       node_nout=4)
    final = {key: lab for d in out.values() for key, lab in d.items()}
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
