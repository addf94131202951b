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
    """Result of :func:`bfs`, in the graph's own ids (docs/graphs.md, "Vertex ids").

    Attributes
    ----------
    dist : ndarray of int32
        Hop distance to the nearest source, one per vertex in internal order: ``dist[i]`` is
        vertex ``ids[i]``'s; -1 where unreachable.
    pred : ndarray or None
        ``pred[i]``: the id of vertex ``ids[i]``'s predecessor, the smallest-numbered
        neighbour one level closer; -1 (``None`` for ids that are not integers) at sources
        and unreachable vertices.
    sources : ndarray
        The sources' ids, once each, in internal order.
    ids : ndarray
        The graph's ids (``Graph.id_array()``): file ids, networkx nodes or row numbers.
    stats : TraversalStats
    """

    dist: np.ndarray
    pred: object
    sources: np.ndarray
    ids: np.ndarray
    stats: TraversalStats


def is_networkx(obj):
    """True for a NetworkX graph (nodes are then the graph's own ids)."""
    return hasattr(obj, "nodes") and hasattr(obj, "adj")


def bfs(graph, sources, *, predecessors=True, backend=None):
    """Hop distances (and predecessors) from one source or many.

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices)
        Treated as undirected.
    sources : vertex or list of vertices
        The graph's own ids: a file's ids (a graph read by :func:`load_graph`), networkx
        nodes, row numbers of a matrix or of ``(indptr, indices)``; a list or array of them
        (a tuple is one node).
    predecessors : bool
        Also compute predecessors (one more pass over the edges).
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional

    Returns
    -------
    BFSResult

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> path = sp.diags_array([np.ones(3), np.ones(3)], offsets=[-1, 1])
    >>> bfs(path, 0, backend="cpu").dist.tolist()
    [0, 1, 2, 3]
    >>> bfs(path, [0, 3], backend="cpu").pred.tolist()
    [-1, 0, 3, -1]
    >>> from terrain.graph import build_csr
    >>> g = build_csr(3, [0, 1], [1, 2], id_base=1)   # ids 1, 2, 3 (as a DIMACS file's)
    >>> r = bfs(g, 1, backend="cpu")
    >>> r.ids.tolist(), r.dist.tolist(), r.pred.tolist(), r.sources.tolist()
    ([1, 2, 3], [0, 1, 2], [-1, 1, 2], [1])
    """
    g = as_graph(graph, directed=False)
    src = g.source_vertices(sources, "bfs")
    core = FrontierCore(g, backend)
    stats = traverse(core, src)
    pred = g.ids_of(core.backend.to_numpy(core.parents())) if predecessors else None
    return BFSResult(core.backend.to_numpy(core.dist), pred, g.ids_of(np.unique(src)),
                     g.id_array(), stats)
