"""Breadth-first search: hop distances and predecessors from one source or many.

The frontier core's level loop (:meth:`FrontierCore.levels`), then one pass for the
predecessors (the smallest-numbered neighbour one level closer): identical on every backend.
Multi-source BFS seeds every source at level 0.
"""

from dataclasses import dataclass, field

import numpy as np

from .csr import as_graph
from .frontier import FrontierCore

__all__ = ["bfs", "traverse", "BFSResult", "TraversalStats", "is_networkx"]


@dataclass
class TraversalStats:
    """What one traversal saw.

    Attributes
    ----------
    level_sizes, level_edges : list of int
        Vertices at each distance from the sources, and the sum of their degrees.
    operators : list of str
        Operator that built each level after the first (``'top-down'``, ``'bottom-up'``).
    """

    level_sizes: list = field(default_factory=list)
    level_edges: list = field(default_factory=list)
    operators: list = field(default_factory=list)

    @property
    def eccentricity(self):
        """Largest distance reached (the sources' eccentricity in their component)."""
        return len(self.level_sizes) - 1

    @property
    def reached(self):
        return int(sum(self.level_sizes))

    @property
    def edges(self):
        """Directed edges of the traversed component (sum of reached degrees)."""
        return int(sum(self.level_edges))


def traverse(core, sources):
    """One BFS on ``core`` (a :class:`FrontierCore`) from valid internal ``sources``; the
    labels end in ``core.dist``.

    Examples
    --------
    >>> from terrain.graph.csr import build_csr
    >>> core = FrontierCore(build_csr(4, [0, 1, 2], [1, 2, 3]), "cpu")
    >>> traverse(core, [1]).level_sizes, core.dist.tolist()
    ([1, 2, 1], [1, 0, 1, 2])
    """
    return TraversalStats(*core.levels(sources))


@dataclass
class BFSResult:
    """Result of :func:`bfs`.

    Attributes
    ----------
    dist : ndarray of int32
        Hop distance to the nearest source; -1 where unreachable.
    pred : ndarray or None
        The smallest-numbered neighbour one level closer; -1 at sources and unreachable.
    sources : ndarray of int64
    stats : TraversalStats
    """

    dist: np.ndarray
    pred: object
    sources: np.ndarray
    stats: TraversalStats


def is_networkx(obj):
    """True for a NetworkX graph (nodes are then the graph's own ids)."""
    return hasattr(obj, "nodes") and hasattr(obj, "adj")


def bfs(graph, sources, *, predecessors=True, backend=None, by_id=None):
    """Hop distances (and predecessors) from one source or many.

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices)
        Treated as undirected.
    sources : int or sequence
        Internal vertex numbers; for a networkx graph (or ``by_id=True``) its nodes / ids:
        a node, or a list or array of them (a tuple is one node, as in :func:`sssp`).
    predecessors : bool
        Also compute predecessors (one more pass over the edges).
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional
    by_id : bool, optional
        Sources are the graph's own ids (default: True for networkx graphs only).

    Returns
    -------
    BFSResult
        NumPy arrays indexed by internal vertex number.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> path = sp.diags_array([np.ones(3), np.ones(3)], offsets=[-1, 1])
    >>> bfs(path, 0, backend="cpu").dist.tolist()
    [0, 1, 2, 3]
    >>> bfs(path, [0, 3], backend="cpu").pred.tolist()
    [-1, 0, 3, -1]
    """
    if by_id is None:
        by_id = is_networkx(graph)
    g = as_graph(graph, directed=False)
    src = g.source_vertices(sources, by_id, "bfs")
    core = FrontierCore(g, backend)
    stats = traverse(core, src)
    pred = core.backend.to_numpy(core.parents()) if predecessors else None
    return BFSResult(core.backend.to_numpy(core.dist), pred, np.unique(src), stats)
