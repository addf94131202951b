"""One quadtree plan over a tiled grid and one bottom-up / top-down walk of it.

Every tiled algorithm runs a *leaf* step per group (a node of ``2^g × 2^g`` tiles), a
*merge* step per node above, bottom up, on its four children's results; then, top down, a
*node* step per node splitting what it received among its children and a *leaf* step per
group applying what reached it. :func:`walk_up` and :func:`walk_down` visit the nodes of a
:class:`QuadtreePlan` in that order and wire outputs to inputs; a ``call(fn, *args, key=...,
nout=...)`` runs each step (:func:`call_now`) or schedules it (the pipelines). A step is a
function or a tuple ``(function, *leading_args)``. Node ``(k, i, j)`` covers rows
``[i·t·2^k, (i+1)·t·2^k)`` and the matching columns, clipped; level 0 are tiles.

Count the cells bottom up (each leaf counts its own), then hand each leaf the path from
the root down to it:

>>> import numpy as np
>>> plan = QuadtreePlan.build((5, 7), tile=2, group_tiles=1)
>>> plan.group_level, len(plan.groups), plan.levels, plan.root
(0, 12, {1: [(0, 0), (0, 1), (1, 0), (1, 1)], 2: [(0, 0)]}, (2, 0, 0))
>>> def leaf(level, i, j):
...     r0, r1, c0, c1 = plan.window(level, i, j)
...     return (r1 - r0) * (c1 - c0), f"{i},{j}"
>>> def merge(level, i, j, *children):
...     return sum(c for c in children if c is not None), None
>>> root, own = walk_up(plan, leaf, merge)
>>> root, own[(0, 2, 3)]
(35, ('2,3',))
>>> def split(level, i, j, incoming, label):  # the path from the root, to each child
...     return 4 * ((incoming or ()) + ((level, i, j),),)
>>> def receive(level, i, j, incoming, label):
...     return label, incoming
>>> _, at_leaves = walk_down(plan, split, receive, extra=own)
>>> at_leaves[(0, 2, 3)]
('2,3', ((2, 0, 0), (1, 1, 1)))
"""

from dataclasses import dataclass

from .store import quadtree_levels

__all__ = ["QuadtreePlan", "TiledGrid", "node_window", "walk_up", "walk_down", "call_now"]


def node_window(shape, tile, level, i, j):
    """``(r0, r1, c0, c1)`` of quadtree node ``(level, i, j)``, clipped to ``shape``.

    >>> node_window((5, 7), 2, 1, 1, 1)
    (4, 5, 4, 7)
    """
    side = int(tile) << int(level)
    return (i * side, min((i + 1) * side, shape[0]), j * side, min((j + 1) * side, shape[1]))


class TiledGrid:
    """Tile count, quadtree levels and node windows of an object with ``shape`` and ``tile``
    (the tiled algorithms' specs inherit them).

    >>> class Grid(TiledGrid):
    ...     shape, tile = (5, 7), 2
    >>> Grid().tiles_shape, Grid().levels, Grid().window(1, 1, 1)
    ((3, 4), 3, (4, 5, 4, 7))
    """

    __slots__ = ()

    @property
    def tiles_shape(self):
        """``(rows, cols)`` of tiles (the last ones clipped to the grid)."""
        return (-(-self.shape[0] // self.tile), -(-self.shape[1] // self.tile))

    @property
    def levels(self):
        """Quadtree levels over the tiles, root included."""
        return quadtree_levels(*self.tiles_shape)

    def window(self, level, i, j):
        """Block ``(r0, r1, c0, c1)`` of quadtree node ``(level, i, j)`` (level 0 = tile),
        clipped to the grid."""
        return node_window(self.shape, self.tile, level, i, j)

    def plan(self, group_tiles):
        """The :class:`QuadtreePlan` with ``group_tiles`` tiles a side per group."""
        return QuadtreePlan.build(self.shape, self.tile, group_tiles)


@dataclass
class QuadtreePlan:
    """The quadtree over a grid's tiles, cut at ``group_level`` (a group is
    ``2^group_level`` tiles a side): ``groups`` lists the groups' ``(i, j)``, ``levels[k]``
    the nodes of level ``k`` above them (row-major; the last level is the root alone),
    ``nlevels`` counts the levels over the tiles, root included."""

    shape: tuple
    tile: int
    group_level: int
    groups: list
    levels: dict
    nlevels: int

    @classmethod
    def build(cls, shape, tile, group_tiles, nlevels=None):
        """The plan of ``shape`` in ``tile``-side tiles, ``group_tiles`` (rounded down to a
        power of two) a side per group; ``nlevels`` forces more levels than the grid needs."""
        shape = (int(shape[0]), int(shape[1]))
        tile = int(tile)
        nr, nc = -(-shape[0] // tile), -(-shape[1] // tile)
        nlevels = max(quadtree_levels(nr, nc), int(nlevels or 0))
        g = min(max(int(group_tiles), 1).bit_length() - 1, nlevels - 1)
        gr, gc = -(-nr // (1 << g)), -(-nc // (1 << g))
        groups = [(i, j) for i in range(gr) for j in range(gc)]
        levels = {}
        rows, cols = gr, gc
        for k in range(g + 1, nlevels):
            rows, cols = -(-rows // 2), -(-cols // 2)
            levels[k] = [(i, j) for i in range(rows) for j in range(cols)]
        return cls(shape, tile, g, groups, levels, nlevels)

    def window(self, level, i, j):
        """``(r0, r1, c0, c1)`` of node ``(level, i, j)``, clipped to the grid."""
        return node_window(self.shape, self.tile, level, i, j)

    def children(self, k, i, j):
        """The four children ``(i, j)`` (NW, NE, SW, SE; None outside the grid) of node
        ``(k, i, j)``, ``k > group_level``."""
        below = self.groups if k - 1 == self.group_level else self.levels[k - 1]
        rows, cols = below[-1][0] + 1, below[-1][1] + 1  # a full row-major rectangle
        return [(2 * i + di, 2 * j + dj) if 2 * i + di < rows and 2 * j + dj < cols else None
                for di in (0, 1) for dj in (0, 1)]

    @property
    def root(self):
        """The root node ``(level, i, j)`` (a group when the groups cover the grid)."""
        return (self.nlevels - 1, 0, 0) if self.levels else (self.group_level, 0, 0)


def call_now(fn, *args, key=None, nout=None):
    """The in-memory ``call``: run ``fn(*args)`` now (``key`` and ``nout`` are ignored)."""
    del key, nout
    return fn(*args)


def _step(step):
    """``(function, leading_args)`` of a step."""
    if isinstance(step, tuple):
        return step[0], tuple(step[1:])
    return step, ()


def walk_up(plan, leaf, merge, call=call_now, nout=2, names=("leaf", "merge")):
    """Bottom-up walk: a leaf step per group, then a merge step per node up to the root.

    Parameters
    ----------
    plan : QuadtreePlan
    leaf : step
        ``leaf(*lead, level, i, j)`` for each group, returning ``nout`` values.
    merge : step
        ``merge(*lead, level, i, j, c0, c1, c2, c3)`` for each node above the groups, where
        ``c*`` are the children's first outputs (None for a missing child); returns ``nout``
        values.
    call : callable
        ``call(fn, *args, key=(name, i, j), nout=nout)`` runs a step (:func:`call_now`) or
        schedules it. Keys are ``(names[0], i, j)`` for leaves and ``(f"{names[1]}{k}", i, j)``
        for nodes of level ``k``.
    nout : int
        Values each step returns (at least 1); the first goes up to the parent.
    names : (str, str)
        Stage names in the keys.

    Returns
    -------
    root_up : the root's first output
    rest : dict
        ``(level, i, j)`` -> the tuple of the other ``nout - 1`` outputs of every node.
    """
    leaf_fn, leaf_lead = _step(leaf)
    merge_fn, merge_lead = _step(merge)
    g = plan.group_level
    up, rest = {}, {}
    for (i, j) in plan.groups:
        out = call(leaf_fn, *leaf_lead, g, i, j, key=(names[0], i, j), nout=nout)
        up[(g, i, j)], rest[(g, i, j)] = out[0], tuple(out[q] for q in range(1, nout))
    for k in sorted(plan.levels):
        for (i, j) in plan.levels[k]:
            kids = [up.pop((k - 1,) + c) if c is not None else None
                    for c in plan.children(k, i, j)]
            out = call(merge_fn, *merge_lead, k, i, j, *kids, key=(f"{names[1]}{k}", i, j),
                       nout=nout)
            up[(k, i, j)], rest[(k, i, j)] = out[0], tuple(out[q] for q in range(1, nout))
    (root_up,) = up.values()
    return root_up, rest


def walk_down(plan, node, leaf, call=call_now, extra=None, node_nout=4, leaf_nout=1,
              names=("split", "apply")):
    """Top-down walk: a node step per node from the root down, then a leaf step per group.

    Parameters
    ----------
    plan : QuadtreePlan
    node : step
        ``node(*lead, level, i, j, incoming, *extra[(level, i, j)])`` for each node above the
        groups, ``incoming`` being what its parent passed it (None at the root); returns
        ``node_nout`` values, the first four for the four children (NW, NE, SW, SE; ignored
        for a missing child), the rest kept.
    leaf : step
        ``leaf(*lead, level, i, j, incoming, *extra[(level, i, j)])`` for each group;
        returns ``leaf_nout`` values (a single value when ``leaf_nout`` is 1).
    call : callable
        As for :func:`walk_up`; keys ``(f"{names[0]}{k}", i, j)`` and ``(names[1], i, j)``.
    extra : dict, optional
        More arguments per node, e.g. the ``rest`` of :func:`walk_up`.

    Returns
    -------
    node_rest : dict
        ``(level, i, j)`` -> the tuple of outputs past the first four of each node step.
    leaf_out : dict
        ``(level, i, j)`` -> what each group's leaf step returned.
    """
    node_fn, node_lead = _step(node)
    leaf_fn, leaf_lead = _step(leaf)
    extra = extra or {}
    g = plan.group_level
    pending, node_rest, leaf_out = {}, {}, {}
    for k in sorted(plan.levels, reverse=True):
        for (i, j) in plan.levels[k]:
            out = call(node_fn, *node_lead, k, i, j, pending.pop((k, i, j), None),
                       *extra.get((k, i, j), ()), key=(f"{names[0]}{k}", i, j), nout=node_nout)
            for q, c in enumerate(plan.children(k, i, j)):
                if c is not None:
                    pending[(k - 1,) + c] = out[q]
            node_rest[(k, i, j)] = tuple(out[q] for q in range(4, node_nout))
    for (i, j) in plan.groups:
        leaf_out[(g, i, j)] = call(leaf_fn, *leaf_lead, g, i, j, pending.pop((g, i, j), None),
                                   *extra.get((g, i, j), ()), key=(names[1], i, j),
                                   nout=leaf_nout if leaf_nout > 1 else None)
    return node_rest, leaf_out
