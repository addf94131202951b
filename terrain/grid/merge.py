"""Level merges up the tile quadtree and the changes they make, applied top down (Haverkort).

Every node hands up a :class:`LevelGraph`: its block's reduced forest plus the elevations of
the block's border lines, so the parent builds the *separator* edges between its children
without reading a tile again. :func:`merge_level` runs Kruskal (``(weight, rep)`` order) on
the children's graphs and the separators, records its :class:`Changes` (``added`` separator
edges, ``dropped`` representatives of child edges it does not keep) and reduces again. The
final forest is the tile forests plus every added minus every dropped edge;
:func:`split_changes` routes changes to the child owning each edge's cell and
:func:`apply_changes` applies them to a mask block (docs/mst.md).
"""

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .edges import edge_weights_np

__all__ = ["LevelGraph", "Changes", "merge_level", "split_changes", "apply_changes",
           "child_windows"]


@dataclass
class LevelGraph:
    """A block's reduced forest (global cell ids) and the elevations of its border rows
    (``top``, ``bottom``) and columns (``left``, ``right``) in its clipped ``window``."""

    window: tuple
    a: np.ndarray
    b: np.ndarray
    w: np.ndarray
    rep: np.ndarray
    top: np.ndarray
    bottom: np.ndarray
    left: np.ndarray
    right: np.ndarray

    @classmethod
    def from_block(cls, window, z, a, b, w, rep):
        if hasattr(z, "get"):  # on the device (a CuPy block): only its four sides come back
            sides = (z[0].get(), z[-1].get(), z[:, 0].get(), z[:, -1].get())
        else:
            z = np.asarray(z, np.float32)
            sides = (z[0].copy(), z[-1].copy(), z[:, 0].copy(), z[:, -1].copy())
        return cls(tuple(int(x) for x in window), a, b, w, rep, *sides)

    @property
    def nbytes(self):
        return sum(getattr(self, k).nbytes for k in ("a", "b", "w", "rep", "top", "bottom",
                                                     "left", "right"))


@dataclass
class Changes:
    """Edges added to and dropped from the union of the tile forests (global ids, weights)."""

    added: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    added_w: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))
    dropped: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    dropped_w: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))

    @staticmethod
    def concat(items):
        items = [c for c in items if c is not None]
        if not items:
            return Changes()
        return Changes(*(np.concatenate([getattr(c, k) for c in items])
                         for k in ("added", "added_w", "dropped", "dropped_w")))

    def take(self, sel_added, sel_dropped):
        return Changes(self.added[sel_added], self.added_w[sel_added],
                       self.dropped[sel_dropped], self.dropped_w[sel_dropped])

    @property
    def nbytes(self):
        return self.added.nbytes + self.added_w.nbytes + self.dropped.nbytes + self.dropped_w.nbytes


def block_boundary(cells, window, shape):
    """True for cells on a side of ``window`` that is not the grid's border."""
    r0, r1, c0, c1 = window
    ncols = shape[1]
    r, c = np.divmod(np.asarray(cells, np.int64), ncols)
    return (((r == r0) & (r0 > 0)) | ((r == r1 - 1) & (r1 < shape[0]))
            | ((c == c0) & (c0 > 0)) | ((c == c1 - 1) & (c1 < shape[1])))


def child_windows(window, half):
    """Windows of the NW, NE, SW, SE children of a node (None where outside the grid)."""
    r0, r1, c0, c1 = window
    rm, cm = r0 + half, c0 + half
    out = []
    for ra, rb in ((r0, min(rm, r1)), (rm, r1)):
        for ca, cb in ((c0, min(cm, c1)), (cm, c1)):
            out.append((ra, rb, ca, cb) if ra < rb and ca < cb else None)
    return out


def _separator_edges(row_hi, row_lo, r, c0, vertical, connectivity, model, hlen, ncols, skip_row):
    """Grid edges crossing one separator line: between row ``r`` (``row_hi``) and ``r + 1``
    (``row_lo``), or with ``vertical`` between columns ``c0`` and ``c0 + 1`` (diagonals at
    ``skip_row`` are left to the horizontal separator)."""
    n = row_hi.shape[0]
    idx = np.arange(n)
    parts = []
    diag = connectivity == 8
    if not vertical:
        # S: (r, c) -> (r+1, c);  SE: (r, c) -> (r+1, c+1);  SW: (r, c) -> (r+1, c-1)
        specs = [(1, idx, idx)]
        if diag:
            specs += [(2, idx[:-1], idx[1:]), (3, idx[1:], idx[:-1])]
        for d, i_hi, i_lo in specs:
            za, zb = row_hi[i_hi], row_lo[i_lo]
            ok = ~(np.isnan(za) | np.isnan(zb))
            owner = np.int64(r) * ncols + c0 + i_hi[ok]
            other = np.int64(r + 1) * ncols + c0 + i_lo[ok]
            parts.append((owner, other, d, edge_weights_np(za[ok], zb[ok], d, model, hlen)))
    else:
        # E: (r, c) -> (r, c+1);  SE: (r, c) -> (r+1, c+1);  SW: (r, c+1) -> (r+1, c)
        specs = [(0, idx, idx, False)]
        if diag:
            lo = idx[:-1][(r + idx[:-1]) != skip_row]
            specs += [(2, lo, lo + 1, False), (3, lo, lo + 1, True)]
        for d, i_a, i_b, from_right in specs:
            if from_right:
                za, zb = row_lo[i_a], row_hi[i_b]
                ca, cb = c0 + 1, c0
            else:
                za, zb = row_hi[i_a], row_lo[i_b]
                ca, cb = c0, c0 + 1
            ok = ~(np.isnan(za) | np.isnan(zb))
            owner = (r + i_a[ok]).astype(np.int64) * ncols + ca
            other = (r + i_b[ok]).astype(np.int64) * ncols + cb
            parts.append((owner, other, d, edge_weights_np(za[ok], zb[ok], d, model, hlen)))
    a = np.concatenate([p[0] for p in parts])
    b = np.concatenate([p[1] for p in parts])
    w = np.concatenate([p[3] for p in parts]).astype(np.float32)
    ids = np.concatenate([4 * p[0] + p[2] for p in parts])
    return a, b, w, ids


def _cat(parts, dtype):
    parts = [p for p in parts if p is not None]
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)


def merge_level(window, half, children, shape, connectivity, model, hlen):
    """Merge four children's reduced forests into the node's reduced forest.

    Parameters
    ----------
    window : (r0, r1, c0, c1)
        The node's block, clipped to the grid.
    half : int
        Side of a child block in cells (before clipping).
    children : list of 4 LevelGraph or None
        NW, NE, SW, SE (None where a child lies outside the grid).
    shape : (rows, cols) of the grid
    connectivity, model, hlen
        As in :func:`terrain.grid.edges.grid_edges` (model as a code, hlen as lengths).

    Returns
    -------
    graph : LevelGraph
        The node's reduced forest and border.
    changes : Changes
        Separator edges added to the forest, representatives dropped from it.
    n_edges_in : int
        Edges of the merged graph, for statistics.

    Examples
    --------
    Two 1×1 blocks side by side: the separator edge joins them.

    >>> z = np.array([[1.0, 2.0]], np.float32)
    >>> kids = [LevelGraph.from_block((0, 1, c, c + 1), z[:, c:c + 1], *(np.zeros(0),) * 4)
    ...         for c in (0, 1)] + [None, None]
    >>> g, ch, _ = merge_level((0, 1, 0, 2), 1, kids, (1, 2), 8, 0, np.ones(4))
    >>> ch.added.tolist(), ch.dropped.tolist(), len(g.a)
    ([0], [], 0)
    """
    if len(children) != 4:
        raise InputError("merge_level: needs the four children (None where absent)")
    nw, ne, sw, se = children
    if nw is None:
        raise InputError("merge_level: the NW child must exist")
    r0, r1, c0, c1 = window
    rm, cm = r0 + half, c0 + half
    ncols = shape[1]
    kids = [k for k in children if k is not None]
    seps = []
    if sw is not None:  # horizontal separator between rows rm-1 and rm
        hi = np.concatenate([nw.bottom] + ([ne.bottom] if ne is not None else []))
        lo = np.concatenate([sw.top] + ([se.top] if se is not None else []))
        seps.append(_separator_edges(hi, lo, rm - 1, c0, False, connectivity, model, hlen, ncols, -1))
    if ne is not None:  # vertical separator between columns cm-1 and cm
        left = np.concatenate([nw.right] + ([sw.right] if sw is not None else []))
        right = np.concatenate([ne.left] + ([se.left] if se is not None else []))
        seps.append(_separator_edges(left, right, r0, cm - 1, True, connectivity, model, hlen, ncols,
                                     rm - 1))
    # the children's edges first, then the separators'
    n_child = sum(len(k.a) for k in kids)
    a = _cat([k.a for k in kids] + [s[0] for s in seps], np.int64)
    b = _cat([k.b for k in kids] + [s[1] for s in seps], np.int64)
    w = _cat([k.w for k in kids] + [s[2] for s in seps], np.float32)
    rep = _cat([k.rep for k in kids] + [s[3] for s in seps], np.int64)
    cells, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    la, lb = inv[:a.shape[0]].astype(np.int64), inv[a.shape[0]:].astype(np.int64)
    from .reduce import kruskal_keep, reduce_forest  # Numba: only where there are merges
    order = np.lexsort((rep, w))
    keep = kruskal_keep(order, la, lb, cells.shape[0])
    is_child = np.arange(a.shape[0]) < n_child
    drop = is_child & ~keep
    add = ~is_child & keep
    changes = Changes(rep[add], w[add], rep[drop], w[drop])
    boundary = block_boundary(cells, window, shape)
    ra, rb, rw, rrep, _ = reduce_forest(cells.shape[0], la[keep], lb[keep], w[keep], rep[keep],
                                        boundary)
    top = np.concatenate([nw.top] + ([ne.top] if ne is not None else []))
    left = np.concatenate([nw.left] + ([sw.left] if sw is not None else []))
    low = (sw, se) if sw is not None else (nw, ne)
    bottom = np.concatenate([k.bottom for k in low if k is not None])
    east = (ne, se) if ne is not None else (nw, sw)
    right = np.concatenate([k.right for k in east if k is not None])
    graph = LevelGraph(tuple(window), cells[ra], cells[rb], rw, rrep, top, bottom, left, right)
    return graph, changes, int(a.shape[0])


def split_changes(changes, window, half, ncols):
    """Route changes to the NW, NE, SW, SE children of a node (by each edge's owner cell)."""
    r0, _, c0, _ = window

    def quadrant(ids):
        r, c = np.divmod(np.asarray(ids, np.int64) >> 2, ncols)
        return (r >= r0 + half).astype(np.int64) * 2 + (c >= c0 + half)

    qa, qd = quadrant(changes.added), quadrant(changes.dropped)
    return [changes.take(qa == q, qd == q) for q in range(4)]


def apply_changes(mask, r0, c0, ncols, changes):
    """Apply added (set) then dropped (clear) edges to a mask block whose corner is (r0, c0).

    >>> m = np.zeros((2, 3), np.uint8)
    >>> apply_changes(m, 10, 0, 3, Changes(np.array([4 * 31 + 1]), np.ones(1, np.float32)))
    array([[0, 2, 0],
           [0, 0, 0]], dtype=uint8)
    """
    R, C = mask.shape
    for ids, on in ((changes.added, True), (changes.dropped, False)):
        ids = np.asarray(ids, np.int64)
        r, c = np.divmod(ids >> 2, int(ncols))
        r, c = r - int(r0), c - int(c0)
        if ((r < 0) | (r >= R) | (c < 0) | (c >= C)).any():
            raise RuntimeError("apply_changes: an edge outside the block (changes routed wrongly)")
        bits = (np.uint8(1) << (ids & 3).astype(np.uint8)).astype(np.uint8)
        if on:
            np.bitwise_or.at(mask, (r, c), bits)
        else:
            np.bitwise_and.at(mask, (r, c), ~bits)
    return mask
