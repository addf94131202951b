"""Breadth-first search: hop distances and predecessors from one or many sources.

Algorithm. Level-synchronous BFS written as a loop over the operators of
:mod:`terrain.graph.frontier`; the loop only decides, level by level, which operator
builds the next frontier:

* **bottom-up** when the frontier's edges outnumber the unexplored edges / ``ALPHA`` and
  the frontier is growing, back to **top-down** when it holds fewer than ``n / BETA``
  vertices (Beamer's direction-optimising rule, alpha = 14, beta = 24): low-diameter graphs
  (RMAT, social networks) then skip most edges of their two or three huge levels;
* top-down on the GPU: the **edge-balanced** expand-contract kernel (one thread per
  frontier edge) once the level's edge frontier reaches ``HYBRID_BALANCED_EDGES``, the
  fused **expand-contract** kernel (block/warp/scan gathering, one launch, lowest latency)
  below that. The paper's hybrid switched between contract-expand and **two-phase** by
  frontier size (sec. 5.4); measured on an H200 (docs/benchmarks.md) the edge-balanced
  kernel beats both fused (whose block-wide gathering leaves a hub's list to one block)
  and two-phase on RMAT, so it replaces them for big levels; both stay selectable;
* on sparse graphs (average degree <= 8) with small frontiers (grids, road networks) the GPU
  launches ``BATCH_LEVELS`` fused levels back to back and reads the counter ring once:
  kernels read their frontier size on the device, so no level waits for the host.

That is the **host loop** (``loop='host'``). The GPU default is the **device-driven loop**
(``loop='graph'``): the same rule evaluated by a one-thread kernel on the device's counters,
each level the same three launches (advance in the chosen direction — fused top-down with
adjacency lists of ``frontier.HUB_MIN`` edges or more deferred, or bottom-up over the
visited *bitmask*: an unvisited vertex's visited neighbours are all on the current level, so
one bit per neighbour is the whole frontier test, and the scan stops at the first hit; it
writes the other of two bitmasks —; the deferred hub lists spread over the whole grid; the
decide for the next level), captured once into a CUDA graph and replayed per traversal.
The graph also copies the sources in and the counters out, so the host launches once and
waits once. It reads the counter ring once per launch of ``DEVICE_MORE_STEPS`` levels (the
first launch covers the most levels of the last ``DEVICE_HINT_TRAVERSALS`` traversals),
instead of once per level. ``loop='device'`` launches the same kernels without the graph.

Multi-source BFS seeds every source at level 0, so ``dist`` is the hop distance to the
nearest source. Distances are identical on every backend (they are unique); predecessors
are the smallest-id neighbour one level closer, so they are identical too.
"""

from dataclasses import dataclass, field

import numpy as np

from .csr import Graph, as_graph
from .frontier import FrontierCore

__all__ = ["bfs", "traverse", "BFSResult", "TraversalStats", "DIRECTIONS", "VARIANTS"]

ALPHA = 14
BETA = 24
BATCH_LEVELS = 8
BATCH_EDGE_LIMIT = 1 << 16
HYBRID_BALANCED_EDGES = 4096  # edge frontier from which edge balancing beats one fused launch
DIRECTIONS = ("auto", "top-down", "bottom-up")
VARIANTS = ("hybrid", "fused", "balanced", "two-phase")
LOOPS = ("graph", "device", "host")
DEVICE_FIRST_STEPS = 8       # levels of the first launch of the device loop (no hint yet)
DEVICE_MAX_FIRST_STEPS = 32
DEVICE_HINT_TRAVERSALS = 8   # the first launch covers the most levels of this many traversals
DEVICE_HINT_ROUND = 1        # ... rounded up to a multiple of this (4: fewer captured graphs,
                             # but idle steps; H100, RMAT-21: 1 gave 248.9 GTEPS against 239.0)
DEVICE_MORE_STEPS = 8        # levels per further launch
# Beamer's thresholds of the device loop: alpha 30 beat 14 on an H200 while the hub lists
# were walked one by one (249 GTEPS against 202); with the hub lists indexed in parallel 14
# measured best again (H100, RMAT-21: 255.5 against 239.0 for 30), as on the CPU
DEVICE_ALPHA, DEVICE_BETA = ALPHA, BETA


@dataclass
class TraversalStats:
    """What one traversal saw.

    Attributes
    ----------
    level_sizes : list of int
        Vertices at each distance from the sources (``level_sizes[d]``).
    level_edges : list of int
        Sum of the degrees of each level's vertices.
    operators : list of str
        Operator that built each level after the first (``bottom-up``, ``fused``,
        ``two-phase``).
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


def _traverse_device(core, sources, direction, use_graph):
    """GPU: the whole traversal by the device-driven level loop (:meth:`FrontierCore.run_levels`);
    the first launch covers as many levels as the last ``DEVICE_HINT_TRAVERSALS``
    traversals on this core needed (a traversal of L levels needs L steps; each step more
    costs a few idle launches, each step less a second launch and host round trip)."""
    mode = {"auto": 0, "top-down": 1, "bottom-up": 2}[direction]
    recent = core.__dict__.setdefault("_recent_levels", [])
    first = max(recent) if recent else DEVICE_FIRST_STEPS
    first = min(-(-first // DEVICE_HINT_ROUND) * DEVICE_HINT_ROUND, DEVICE_MAX_FIRST_STEPS)
    sizes, degs, ops = core.run_levels(sources, mode, DEVICE_ALPHA, DEVICE_BETA, first,
                                       DEVICE_MORE_STEPS, use_graph)
    recent.append(len(sizes))
    del recent[:-DEVICE_HINT_TRAVERSALS]
    names = {1: "fused", 2: "bottom-up"}
    return TraversalStats(sizes, degs, [names[o] for o in ops])


def traverse(core, sources, *, direction="auto", variant="hybrid", loop=None):
    """Run one BFS on ``core`` (a :class:`FrontierCore`); labels end in ``core.dist``.

    Strict inner layer: ``sources`` are valid internal vertex numbers.

    Parameters
    ----------
    core : FrontierCore
    sources : array_like of int
    direction : {'auto', 'top-down', 'bottom-up'}
        'auto' switches per level (see module docstring); the others force one direction
        (for tests and benchmarks).
    variant : {'hybrid', 'fused', 'balanced', 'two-phase'}
        GPU top-down variant; 'hybrid' picks per level.
    loop : {'device', 'graph', 'host'}, optional
        GPU: who runs the level loop. 'graph' (the default for the hybrid variant): the
        device decides each level's direction and the steps are replayed from a captured
        CUDA graph, the host reads counters once per launch; 'device': the same kernels
        launched one by one; 'host': the host picks each level's operator from the
        counters it reads back (the only loop for the fused / balanced / two-phase
        variants). Ignored on the CPU.

    Returns
    -------
    TraversalStats
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"traverse: direction must be one of {DIRECTIONS}, got {direction!r}")
    if variant not in VARIANTS:
        raise ValueError(f"traverse: variant must be one of {VARIANTS}, got {variant!r}")
    gpu = core.backend.is_gpu
    if loop is None:
        loop = "graph" if variant == "hybrid" else "host"
    if loop not in LOOPS:
        raise ValueError(f"traverse: loop must be one of {LOOPS}, got {loop!r}")
    if gpu and loop != "host":
        if variant != "hybrid":
            raise ValueError(f"traverse: the {loop} loop runs the hybrid variant only")
        return _traverse_device(core, sources, direction, loop == "graph")
    nf, mf = core.seed(sources)
    stats = TraversalStats([int(nf)], [int(mf)], [])
    explored = int(mf)
    level = 0
    bottom = direction == "bottom-up"
    sparse = core.nnz <= 8 * max(core.n, 1)
    while nf > 0:
        if direction == "auto":
            growing = len(stats.level_sizes) < 2 or nf > stats.level_sizes[-2]
            if not bottom and growing and mf > (core.nnz - explored) / ALPHA:
                bottom = True
            elif bottom and not growing and nf < core.n / BETA:
                bottom = False
        batch = 1
        if bottom:
            op = "bottom-up"
            result = core.advance_bottomup(level)
        elif gpu and variant == "two-phase":
            op = "two-phase"
            result = core.expand_contract_two_phase(level, nf, mf)
        elif gpu and (variant == "balanced" or (variant == "hybrid"
                                                and mf >= HYBRID_BALANCED_EDGES
                                                and not (sparse and mf < BATCH_EDGE_LIMIT))):
            op = "balanced"
            result = core.advance_balanced(level, nf, mf)
        else:
            op = "fused"
            if gpu and sparse and direction != "bottom-up" and mf < BATCH_EDGE_LIMIT:
                batch = BATCH_LEVELS
                blocks = core._blocks(4 * nf + BLOCK_SLACK)
                for j in range(batch):
                    core.advance_topdown(level + j, nf, blocks=blocks)
                result = None
            else:
                result = core.advance_topdown(level, nf)
        if gpu:
            ring = core.read_counts()
            new = [(int(ring[(level + j) % len(ring), 0]), int(ring[(level + j) % len(ring), 1]))
                   for j in range(1, batch + 1)]
        else:
            new = [(int(result[0]), int(result[1]))]
        for count, degsum in new:
            if count == 0:
                nf = 0
                break
            stats.level_sizes.append(count)
            stats.level_edges.append(degsum)
            stats.operators.append(op)
            explored += degsum
            level += 1
            nf, mf = count, degsum
    return stats


BLOCK_SLACK = 256


@dataclass
class BFSResult:
    """Result of :func:`bfs`.

    Attributes
    ----------
    dist : ndarray of int32
        Hop distance to the nearest source; -1 where unreachable.
    pred : ndarray or None
        Predecessor on a shortest path (smallest-id neighbour one level closer); -1 at
        sources and unreachable vertices.
    sources : ndarray of int64
        Internal numbers of the sources.
    stats : TraversalStats
    """

    dist: np.ndarray
    pred: object
    sources: np.ndarray
    stats: TraversalStats


def _is_networkx(obj):
    return hasattr(obj, "nodes") and hasattr(obj, "adj") and not isinstance(obj, Graph)


def bfs(graph, sources, *, predecessors=True, backend=None, direction="auto",
        variant="hybrid", by_id=None):
    """Hop distances (and predecessors) from one source or many.

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices)
        Treated as undirected.
    sources : int or sequence
        Internal vertex numbers ``0..n-1``; for a networkx graph (or ``by_id=True``) the
        nodes / source ids.
    predecessors : bool
        Also compute predecessors (one more pass over the edges).
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional
    direction, variant : str
        See :func:`traverse`.
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
        by_id = _is_networkx(graph)
    g = as_graph(graph, directed=False)
    src = np.atleast_1d(np.asarray(sources, dtype=object if by_id else None))
    if src.size == 0:
        raise ValueError("bfs: at least one source is needed")
    if by_id:
        src = g.index_of(src.tolist(), what="source vertex")
    else:
        if src.dtype.kind not in "iu":
            raise ValueError(f"bfs: sources must be integers, got {src.dtype}")
        bad = src[(src < 0) | (src >= g.n)]
        if bad.size:
            raise ValueError(f"bfs: source {int(bad[0])} is not a vertex (0..{g.n - 1})")
        src = src.astype(np.int64)
    core = FrontierCore(g, backend)
    stats = traverse(core, src, direction=direction, variant=variant)
    pred = core.backend.to_numpy(core.parents()) if predecessors else None
    return BFSResult(core.backend.to_numpy(core.dist), pred, np.unique(src), stats)
