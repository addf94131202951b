"""Exact diameter (and radius, center, periphery) by eccentricity bounding.

Algorithm (Takes & Kosters, "Determining the diameter of small world networks", 2011; on
the GPU as in Dal, Kosters & Takes, "Fast diameter computation of large sparse graphs
using GPUs", 2014). Every vertex w keeps bounds ``lower[w] <= ecc(w) <= upper[w]``. A BFS
from v (eccentricity e, distances d) tightens all of them at once:

    lower[w] = max(lower[w], d(v, w), e - d(v, w))      upper[w] = min(upper[w], e + d(v, w))

``delta_lower = max(lower)`` is a lower bound on the diameter (it is the largest
eccentricity computed so far) and ``radius_upper = min(upper)`` an upper bound on the
radius. A candidate is dropped when its eccentricity is settled (``lower == upper``) or can
no longer matter: for the diameter when ``upper <= delta_lower``; for ``extremes`` (radius,
center, periphery) when ``upper < delta_lower`` *and* ``lower > radius_upper``. The search
ends when no candidate is left; then the diameter is ``delta_lower``, and with extremes
every vertex of eccentricity = diameter or = radius is settled, so periphery and center
are exact. The next BFS source alternates between the candidate with the largest upper
bound and the one with the smallest lower bound (ties: higher degree, then lower number).

The BFS runs on the frontier core (:func:`terrain.graph.traversal.traverse`); the bound update
and the pruning are kernels (``_diameter.cu``) with Numba twins, and candidate selection
is a few array reductions, so on the GPU nothing but a handful of scalars per BFS crosses
to the host.

Bit-parallel batches. After ``SINGLE_BFS`` single-source BFS (enough for small-world
graphs) the bounding takes ``BATCH`` = 64 candidates at a time (alternately from the two
selection orders) and runs them as one bit-parallel BFS (:meth:`FrontierCore.bitwise_bfs`:
a uint64 per vertex, bit i for source i, a level is an OR over the neighbours): one pass
for the 64 eccentricities, a second that applies each (source, vertex, distance) to the
bounds as it appears — the bounds 64 single BFS would leave, for the memory of three
uint64 arrays. Cycles, grids and other graphs that settle few vertices per BFS need 64
times fewer passes; no peer uses bit-parallel BFS for exact diameter.

Components. The component is found where the BFS runs: union-find on the device (every
edge hooks the larger root under the smaller with a CAS, so each label is the component's
smallest vertex whatever the order; ``_diameter.cu``, Numba twin ``_component_roots_cpu``)
and cut out there (the kept rows are whole), so the graph crosses to the device once and
scipy's labelling (which builds the transpose) is off the path. Cycles are the known worst case (every vertex has the same eccentricity, and
bounds settle one vertex per BFS); small-world graphs, grids and trees need few BFS.

:func:`weighted_diameter` runs the same bounding with a shortest-path search (Dijkstra on
the CPU, Crauser / delta-stepping on the GPU) in place of BFS, for weighted undirected
graphs: the bounds hold for any metric.

A disconnected graph has infinite diameter: we say so and answer for its largest
connected component. The sampled *effective diameter* is the 90th percentile of the
distances from ``k`` random sources, linearly interpolated between hop counts (as SNAP
reports it).

Pieces. :func:`diameter` is the whole answer in one call. Its parts are public so that a
scheduler can run them as tasks (``pipelines/graph.py``): :func:`exact_diameter` is the
bounding loop on one component (its BFS runs depend on each other: one task);
:func:`sample_sources`, :func:`distance_histogram` and :func:`effective_from_histograms`
split the effective sample into independent batches whose integer histograms sum to the
same value however the sources were split.
"""

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np

from ..backend import get_backend
from ..errors import InputError
from .traversal import traverse
from .csr import Graph, _subgraph, as_graph, largest_component
from .frontier import BLOCK, FrontierCore

__all__ = ["diameter", "DiameterResult", "exact_diameter", "effective_diameter",
           "component_roots", "largest_component_on",
           "sample_sources", "distance_histogram", "effective_from_histograms",
           "weighted_diameter"]


@dataclass
class DiameterResult:
    """Result of :func:`diameter` (vertices in the graph's own ids).

    Attributes
    ----------
    diameter : int
    bfs_count : int
        BFS runs the bounding took (not counting ``effective`` samples).
    endpoints : tuple
        Two vertices at distance ``diameter``.
    path : list
        A shortest path between them (``diameter + 1`` vertices).
    connected : bool
    components : int
    vertices, lcc_vertices : int
        Vertices of the graph and of the component answered for.
    radius, center, periphery : optional
        With ``extremes=True``.
    effective_diameter : float, optional
    effective_sources : int, optional
    """

    diameter: int
    bfs_count: int
    endpoints: tuple
    path: list
    connected: bool
    components: int
    vertices: int
    lcc_vertices: int
    radius: object = None
    center: object = None
    periphery: object = None
    effective_diameter: object = None
    effective_sources: object = None
    extra: dict = field(default_factory=dict)

    def as_dict(self):
        d = {k: getattr(self, k) for k in ("diameter", "bfs_count", "endpoints", "path",
                                           "connected", "components", "vertices",
                                           "lcc_vertices")}
        d["endpoints"] = list(d["endpoints"])
        for k in ("radius", "center", "periphery", "effective_diameter", "effective_sources"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        return d


# --------------------------------------------------------------------------- CPU twins

@numba.njit(nogil=True, cache=True)
def _find_root_cpu(parent, v):
    while True:
        p = parent[v]
        if p == v:
            return v
        g = parent[p]
        parent[v] = g
        v = p


@numba.njit(nogil=True, cache=True)
def _component_roots_cpu(indptr, indices, parent):
    """Union-find twin of ``hook_edges``: each component's label is its smallest vertex."""
    n = parent.shape[0]
    for v in range(n):
        parent[v] = v
    for u in range(n):
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            if v >= u:
                continue
            a = _find_root_cpu(parent, u)
            b = _find_root_cpu(parent, v)
            if a != b:
                parent[max(a, b)] = min(a, b)
    for v in range(n):
        parent[v] = _find_root_cpu(parent, v)


@numba.njit(nogil=True, cache=True)
def _update_bounds_cpu(dist, ecc, lower, upper):
    for w in range(dist.shape[0]):
        d = dist[w]
        if d < 0:
            continue
        lower[w] = max(lower[w], max(d, ecc - d))
        upper[w] = min(upper[w], ecc + d)


@numba.njit(nogil=True, cache=True)
def _prune_candidates_cpu(cand, lower, upper, delta_lower, radius_upper, extremes):
    left = 0
    for w in range(cand.shape[0]):
        if not cand[w]:
            continue
        lo, up = lower[w], upper[w]
        if lo == up:
            keep = False
        elif extremes:
            keep = up >= delta_lower or lo <= radius_upper
        else:
            keep = up > delta_lower
        if keep:
            left += 1
        else:
            cand[w] = 0
    return left


_DIAMETER_CU = Path(__file__).with_name("_diameter.cu")
SINGLE_BFS = 16  # single-source BFS before the bounding switches to bit-parallel batches
BATCH = 64       # sources per bit-parallel pass
BOUND_LOOP = None  # GPU level loop of the bounding's BFS (None: traverse's default)


def _diameter_kernels(backend, index_dtype):
    """The kernels of ``_diameter.cu`` for one index type (compiled once per process)."""
    it = "int" if np.dtype(index_dtype) == np.int32 else "long long"
    names = {"update": "update_bounds", "prune": "prune_candidates",
             "init": f"init_parents<{it}>", "hook": f"hook_edges<{it}>",
             "flatten": f"flatten_parents<{it}>", "check": f"check_components<{it}>"}
    module = backend.cuda_module(_DIAMETER_CU, name_expressions=tuple(names.values()))
    return {k: module.get_function(v) for k, v in names.items()}


def component_roots(indptr, indices, backend=None):
    """Connected-component labels of an undirected CSR on ``backend``: ``roots[v]`` is the
    smallest vertex of ``v``'s component (union-find; unique labels, so the same on every
    backend). ``indptr`` / ``indices`` may already live on the device.

    Examples
    --------
    >>> component_roots(np.array([0, 1, 2, 2, 2]), np.array([1, 0], np.int32), "cpu").tolist()
    [0, 0, 2, 3]
    """
    b = get_backend(backend)
    indptr, indices = b.asarray(indptr), b.asarray(indices)
    n = indptr.shape[0] - 1
    parent = b.xp.empty(n, indices.dtype)
    if not b.is_gpu:
        _component_roots_cpu(indptr, indices, parent)
        return parent
    k = _diameter_kernels(b, indices.dtype)
    grid = (max(1, min(4096, -(-n // BLOCK))),)
    n64 = np.int64(n)
    k["init"](grid, (BLOCK,), (parent, n64))
    warp_grid = (max(1, min(65536, -(-n * 32 // BLOCK))),)
    missed = b.xp.zeros(1, np.uint64)
    for _ in range(64):
        k["hook"](warp_grid, (BLOCK,), (indptr, indices, parent, n64))
        k["flatten"](grid, (BLOCK,), (parent, n64))
        missed.fill(0)
        k["check"](warp_grid, (BLOCK,), (indptr, indices, parent, n64, missed))
        if not int(missed.get()[0]):
            return parent
    raise RuntimeError("component_roots: labels did not settle")


def largest_component_on(graph, backend=None):
    """``(lcc, info)`` as :func:`terrain.graph.largest_component`, computed on ``backend``
    (same component: the largest, ties to the one with the smallest vertex).

    On the GPU the graph is uploaded once, the components found and the component cut out
    there (neighbours of a kept vertex are kept, so the kept rows are whole), and ``lcc``
    holds device arrays (``lcc.meta['device']`` is True; ids stay on the host) ready for
    :class:`FrontierCore`; nothing of size ``m`` comes back to the host.
    """
    b = get_backend(backend)
    xp = b.xp
    indptr, indices = b.asarray(graph.indptr), b.asarray(graph.indices)
    roots = component_roots(indptr, indices, b)
    n = graph.n
    info = {"components": 0, "vertices": n, "lcc_vertices": n}
    if n == 0:
        return graph, info
    is_root = roots == xp.arange(n, dtype=roots.dtype)
    info["components"] = count = int(is_root.sum())
    if count <= 1:
        if not b.is_gpu:
            return graph, info
        lcc = Graph(indptr, indices, graph.ids, graph.id_base, graph.name, dict(graph.meta))
        lcc.meta["device"] = True
        return lcc, info
    sizes = xp.bincount(roots, minlength=n)
    root = int(sizes.argmax())
    keep = roots == root
    info["lcc_vertices"] = int(sizes[root])
    if not b.is_gpu:
        lcc = _subgraph(graph, keep)
    else:
        new_id = (xp.cumsum(keep, dtype=np.int64) - 1).astype(indices.dtype)
        deg = indptr[1:] - indptr[:-1]
        new_indptr = xp.zeros(info["lcc_vertices"] + 1, np.int64)
        xp.cumsum(deg[keep], out=new_indptr[1:])
        new_indices = new_id[indices[keep[indices]]]
        kept = b.to_numpy(xp.flatnonzero(keep))
        lcc = Graph(new_indptr, new_indices, graph.id_array()[kept], 0, graph.name,
                    dict(graph.meta))
        lcc.meta.pop("_index", None)
        lcc.meta["device"] = True
    lcc.meta["lcc_of"] = info
    return lcc, info


class _Bounds:
    """Eccentricity bounds and candidates on the core's backend, and their kernels."""

    def __init__(self, core, extremes):
        self.core = core
        self.backend = core.backend
        xp = self.backend.xp
        n = core.n
        self.lower = xp.zeros(n, np.int32)
        self.upper = xp.full(n, np.iinfo(np.int32).max, np.int32)
        self.cand = xp.ones(n, np.uint8)
        self.degree = core.indptr[1:] - core.indptr[:-1]
        self.extremes = bool(extremes)
        if self.backend.is_gpu:
            k = _diameter_kernels(self.backend, core.index_dtype)
            self._update, self._prune = k["update"], k["prune"]
            self._remaining = xp.zeros(1, np.uint64)

    def update(self, ecc):
        if self.backend.is_gpu:
            self._update((self.core._blocks(self.core.n),), (BLOCK,),
                         (self.core.dist, np.int32(ecc), self.lower, self.upper,
                          np.int64(self.core.n)))
        else:
            _update_bounds_cpu(self.core.dist, ecc, self.lower, self.upper)

    def prune(self, delta_lower, radius_upper):
        if self.backend.is_gpu:
            self._remaining.fill(0)
            self._prune((self.core._blocks(self.core.n),), (BLOCK,),
                        (self.cand, self.lower, self.upper, np.int32(delta_lower),
                         np.int32(radius_upper), np.int32(self.extremes),
                         np.int64(self.core.n), self._remaining))
            return int(self._remaining.get()[0])
        return int(_prune_candidates_cpu(self.cand, self.lower, self.upper, delta_lower,
                                         radius_upper, self.extremes))

    def select(self, largest_upper):
        """Candidate with the largest upper (or smallest lower) bound; ties: higher degree,
        then lower number. Same reductions on both backends, so the same choice."""
        xp = self.backend.xp
        cand = self.cand.astype(bool)
        if largest_upper:
            best = int(xp.where(cand, self.upper, -1).max())
            tie = cand & (self.upper == best)
        else:
            best = int(xp.where(cand, self.lower, np.iinfo(np.int32).max).min())
            tie = cand & (self.lower == best)
        top = int(xp.where(tie, self.degree, -1).max())
        return int(xp.flatnonzero(tie & (self.degree == top))[0])

    def select_batch(self, k):
        """Up to ``k`` candidates for one bit-parallel pass: taken in turn from the order of
        :meth:`select`'s two rules (largest upper bound; smallest lower bound; ties: higher
        degree, then lower number), each vertex once. Host int64 array."""
        xp = self.backend.xp
        cand = xp.flatnonzero(self.cand)
        if cand.size <= k:
            return self.backend.to_numpy(cand).astype(np.int64)
        up = self.upper[cand].astype(np.int64)
        lo = self.lower[cand].astype(np.int64)
        deg = self.degree[cand].astype(np.int64)
        by_upper = self.backend.to_numpy(cand[xp.lexsort(xp.stack([cand, -deg, -up]))[:k]])
        by_lower = self.backend.to_numpy(cand[xp.lexsort(xp.stack([cand, -deg, lo]))[:k]])
        chosen, seen = [], set()
        for a, b in zip(by_upper.tolist(), by_lower.tolist()):
            for v in (a, b):
                if v not in seen and len(chosen) < k:
                    seen.add(v)
                    chosen.append(v)
        return np.array(chosen, np.int64)


def _farthest_and_path(graph, dist, ecc):
    """Smallest-numbered vertex at distance ``ecc`` and the path back to the source along
    smallest-numbered predecessors (host; ``ecc`` steps)."""
    t = int(np.flatnonzero(dist == ecc)[0])
    path = [t]
    v = t
    while dist[v] > 0:
        nb = graph.neighbors(v)
        v = int(nb[np.flatnonzero(dist[nb] == dist[v] - 1)[0]])
        path.append(v)
    return t, path[::-1]


def _farthest_and_path_on(core, dist, ecc):
    """:func:`_farthest_and_path` from device labels: the same vertices, through the
    deterministic predecessors of :meth:`FrontierCore.parents` (one pass on the device,
    then ``ecc`` scalar reads)."""
    xp = core.backend.xp
    t = int(xp.flatnonzero(dist == ecc)[0])
    pred = core.parents(dist)
    path = [t]
    for _ in range(ecc):  # ecc scalar reads, not an n-sized download
        path.append(int(pred[path[-1]]))
    return t, path[::-1]


def sample_sources(n, k, seed=0):
    """The effective-diameter sample: ``min(k, n)`` distinct vertices of ``0..n-1``, drawn
    with ``numpy.random.default_rng(seed)`` (the same on every backend and scheduler)."""
    return np.random.default_rng(seed).choice(n, size=min(int(k), n), replace=False)


def distance_histogram(core, sources):
    """``hist[d]``: the (source, vertex) pairs at distance ``d``, summed over ``sources``
    (on the :class:`FrontierCore` ``core``: bit-parallel BFS of up to ``BATCH`` distinct
    sources at a time, or one BFS per source when ``sources`` repeats one; ``hist[0]``
    counts the sources)."""
    src = [int(s) for s in sources]
    if len(set(src)) == len(src):
        runs = []
        for i in range(0, len(src), BATCH):
            runs.append([])
            core.bitwise_bfs(src[i:i + BATCH], pairs=runs[-1])
    else:
        runs = [traverse(core, [s]).level_sizes for s in src]
    hist = np.zeros(1, np.int64)
    for sizes in runs:
        sizes = np.asarray(sizes, np.int64)
        if sizes.size > hist.size:
            hist = np.pad(hist, (0, sizes.size - hist.size))
        hist[:sizes.size] += sizes
    return hist


def effective_from_histograms(histograms):
    """The 90th percentile of the distances counted by ``histograms`` (summed; see
    :func:`distance_histogram`), linearly interpolated between hop counts; pairs of a vertex
    with itself do not count. Integer sums: the same value however the sources were split.

    Examples
    --------
    >>> effective_from_histograms([np.array([1, 2, 1]), np.array([1, 2])])
    1.5
    """
    size = max((h.size for h in histograms), default=1)
    hist = np.zeros(size, np.int64)
    for h in histograms:
        hist[:h.size] += h
    hist[0] = 0  # a vertex and itself is no pair
    total = hist.sum()
    if total == 0:
        return 0.0
    cum = np.cumsum(hist) / total
    d = int(np.searchsorted(cum, 0.9 - 1e-12))
    prev = cum[d - 1] if d > 0 else 0.0
    value = (d - 1) + (0.9 - prev) / (cum[d] - prev) if cum[d] > prev else float(d)
    return round(float(value), 6)


def effective_diameter(core, k, seed=0, sources=None):
    """Sampled effective diameter of the component ``core`` holds: 90th percentile of the
    hop distances from ``k`` random sources (interpolated). Returns ``(value, sources)``."""
    if sources is None:
        sources = sample_sources(core.n, k, seed)
    return effective_from_histograms([distance_histogram(core, sources)]), np.asarray(sources)


def _stderr_progress(start=time.monotonic):
    t0 = start()
    last = [t0]

    def report(bfs_count, delta_lower, diameter_upper, remaining):
        now = start()
        if now - t0 > 2.0 and now - last[0] > 1.0:
            last[0] = now
            print(f"diameter: {bfs_count} BFS, {delta_lower} <= diameter <= {diameter_upper}, "
                  f"{remaining} candidates left", file=sys.stderr, flush=True)
    return report


def exact_diameter(component, components=None, *, extremes=False, backend=None,
                   progress=None):
    """The bounding of :func:`diameter` on a connected graph, without the effective sample.

    Parameters
    ----------
    component : Graph
        Connected (a :func:`terrain.graph.largest_component`).
    components : dict, optional
        The ``info`` of :func:`terrain.graph.largest_component`, for ``connected``,
        ``components`` and ``vertices`` of the result (default: ``component`` is the graph).
    extremes, backend, progress
        As :func:`diameter`.

    Returns
    -------
    DiameterResult

    Examples
    --------
    >>> from terrain.graph.csr import build_csr
    >>> r = exact_diameter(build_csr(4, [0, 1, 2], [1, 2, 3]), backend="cpu")
    >>> r.diameter, r.endpoints, r.path
    (3, (0, 3), [0, 1, 2, 3])
    """
    if component.n == 0:
        raise InputError(f"{component.name}: empty graph (no vertices)")
    if components is None:
        components = {"components": 1, "vertices": component.n, "lcc_vertices": component.n}
    component = component.undirected()
    return _bound(FrontierCore(component, backend), components, extremes, progress)


def _bound(core, info, extremes, progress, single_bfs=None):
    """The bounding loop on ``core`` (a connected component); ``info`` as
    :func:`terrain.graph.largest_component` returns it. The first ``single_bfs`` BFS
    (default ``SINGLE_BFS``) run one source at a time, the rest in bit-parallel batches of
    ``BATCH`` sources."""
    single_bfs = SINGLE_BFS if single_bfs is None else int(single_bfs)
    lcc = core.graph
    bounds = _Bounds(core, extremes)
    if progress is True:
        progress = _stderr_progress()
    xp = core.backend.xp
    delta_lower, radius_upper = 0, np.iinfo(np.int32).max
    best = None
    bfs_count = 0
    largest_upper = True
    remaining = lcc.n
    while remaining > 0:
        if bfs_count < single_bfs:
            v = bounds.select(largest_upper)
            largest_upper = not largest_upper
            stats = traverse(core, [v], loop=BOUND_LOOP)
            if stats.reached != lcc.n:
                raise ValueError("exact_diameter: the graph is not connected (give its "
                                 "largest_component)")
            ecc = stats.eccentricity
            bfs_count += 1
            if best is None or ecc > best[0]:
                best = (ecc, v, core.dist.copy())
            bounds.update(ecc)
        else:
            batch = bounds.select_batch(BATCH)
            eccs = core.bitwise_bfs(batch)
            bfs_count += len(batch)
            top = int(eccs.max())
            if best is None or top > best[0]:
                best = (top, int(batch[int(np.argmax(eccs))]), None)
            core.bitwise_bfs(batch, eccs, bounds.lower, bounds.upper)
        delta_lower = int(bounds.lower.max())
        radius_upper = int(bounds.upper.min())
        remaining = bounds.prune(delta_lower, radius_upper)
        if progress:
            upper = int(xp.where(bounds.cand.astype(bool), bounds.upper, delta_lower).max())
            progress(bfs_count, delta_lower, max(upper, delta_lower), remaining)
    ecc, source, dist = best
    if dist is None:  # found by a bit-parallel batch: one BFS for its labels
        traverse(core, [source])
        dist = core.dist
    if core.backend.is_gpu:
        target, path = _farthest_and_path_on(core, dist, ecc)
    else:
        target, path = _farthest_and_path(lcc, dist, ecc)
    result = DiameterResult(
        diameter=int(delta_lower), bfs_count=bfs_count,
        endpoints=(lcc.id_of(source), lcc.id_of(target)),
        path=[lcc.id_of(x) for x in path],
        connected=info["components"] <= 1, components=info["components"],
        vertices=info["vertices"], lcc_vertices=lcc.n)
    if extremes:
        lower = core.backend.to_numpy(bounds.lower)
        upper = core.backend.to_numpy(bounds.upper)
        settled = lower == upper
        result.radius = int(upper.min())
        result.center = sorted(lcc.id_of(x) for x in np.flatnonzero(settled & (upper == result.radius)))
        result.periphery = sorted(lcc.id_of(x) for x in np.flatnonzero(settled & (lower == result.diameter)))
    return result


def diameter(graph, *, extremes=False, effective=None, seed=0, backend=None, progress=None):
    """Exact diameter by eccentricity bounding; optionally radius, center, periphery.

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices)
        Treated as undirected; a disconnected graph is answered for its largest component.
    extremes : bool
        Also radius, center and periphery (needs more BFS than the diameter alone).
    effective : int, optional
        Also the sampled effective diameter over this many random sources.
    seed : int
        Seed of the effective-diameter sample.
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional
    progress : callable or True, optional
        ``progress(bfs_count, delta_lower, diameter_upper, candidates_left)`` after each
        BFS; True prints to stderr on long runs.

    Returns
    -------
    DiameterResult
        Vertices in the graph's own ids (file ids, networkx nodes).

    Examples
    --------
    >>> import networkx as nx
    >>> r = diameter(nx.path_graph(5), extremes=True, backend="cpu")
    >>> r.diameter, r.endpoints, r.path, r.radius, r.center
    (4, (0, 4), [0, 1, 2, 3, 4], 2, [2])
    """
    g = as_graph(graph, directed=False)
    if g.n == 0:
        raise InputError(f"{g.name}: empty graph (no vertices)")
    lcc, info = largest_component_on(g, backend)
    core = FrontierCore(lcc, backend)
    result = _bound(core, info, extremes, progress)
    if effective:
        value, sources = effective_diameter(core, effective, seed)
        result.effective_diameter = value
        result.effective_sources = int(len(sources))
        result.extra["effective_source_ids"] = [lcc.id_of(s) for s in sources]
    return result


# --------------------------------------------------------------------------- weighted

def _weighted_select(cand, lower, upper, degree, largest_upper):
    """As :meth:`_Bounds.select`, on host arrays of any numeric dtype."""
    if largest_upper:
        best = upper[cand].max()
        tie = cand & (upper == best)
    else:
        best = lower[cand].min()
        tie = cand & (lower == best)
    top = degree[tie].max()
    return int(np.flatnonzero(tie & (degree == top))[0])


def weighted_diameter(graph, *, extremes=False, backend=None, algorithm="auto",
                      progress=None):
    """Exact weighted diameter (and radius, center, periphery) of an undirected graph:
    Takes & Kosters' bounding with a shortest-path search in place of BFS.

    The bounds ``max(d, e - d) <= ecc(w) <= e + d`` hold for any metric, so they hold for
    weighted undirected graphs. Integer weights: exact int64 arithmetic, the same pruning
    and settling as the unweighted bounding. Real weights: distances are float64 left-fold
    sums, for which the triangle inequality holds only up to rounding, so the pruning tests
    are widened by ``1e-9`` times the largest eccentricity found and a vertex counts as
    settled only once its own eccentricity has been computed: the answers are computed
    eccentricities, exactly, at the price of a few more searches. Each search is
    :func:`terrain.graph.sssp` (Dijkstra on the CPU, Crauser / delta-stepping on the GPU);
    bounds are updated on the host (``n`` values per search).

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices, weights)
        Taken undirected; weights >= 0; a disconnected graph is answered for its largest
        component.
    extremes : bool
        Also radius, center and periphery.
    backend, algorithm
        Passed to :func:`terrain.graph.sssp`.
    progress : callable or True, optional
        As :func:`diameter`.

    Returns
    -------
    DiameterResult
        ``diameter`` / ``radius`` are int (integer weights) or float; ``bfs_count`` counts
        the shortest-path searches; ``path`` follows canonical predecessors.

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.Graph([(0, 1, {"weight": 5}), (1, 2, {"weight": 1}), (2, 3, {"weight": 1})])
    >>> r = weighted_diameter(G, extremes=True, backend="cpu")
    >>> r.diameter, r.endpoints, r.path, r.radius, r.center
    (7, (3, 0), [3, 2, 1, 0], 5, [1])
    """
    from ..backend import get_backend
    from .shortest_paths import ShortestPaths
    g = as_graph(graph, directed=False)
    if g.n == 0:
        raise InputError(f"{g.name}: empty graph (no vertices)")
    lcc, info = largest_component(g)
    n = lcc.n
    is_float = lcc.weights is not None and lcc.weights.dtype.kind == "f"
    dtype = np.float64 if is_float else np.int64
    big = np.inf if is_float else np.iinfo(np.int64).max // 4
    lower = np.zeros(n, dtype)
    upper = np.full(n, big, dtype)
    cand = np.ones(n, bool)
    sourced = np.zeros(n, bool)
    ecc_of = np.zeros(n, dtype)
    degree = lcc.degrees()
    if progress is True:
        progress = _stderr_progress()
    best = None
    count = 0
    largest_upper = True
    delta_lower, radius_upper = dtype(0), dtype(big)
    b = get_backend(backend)
    solver = ShortestPaths(lcc, b)  # one set-up (weights, device arrays) for every search
    while cand.any():
        v = _weighted_select(cand, lower, upper, degree, largest_upper)
        largest_upper = not largest_upper
        r = solver.run([v], algorithm, predecessors=False)
        d = b.to_numpy(r.dist).astype(dtype, copy=False)  # connected: every vertex reached
        ecc = d.max()
        count += 1
        sourced[v] = True
        ecc_of[v] = ecc
        if best is None or ecc > best[0]:
            best = (ecc, v)
        np.maximum(lower, np.maximum(d, ecc - d), out=lower)
        np.minimum(upper, ecc + d, out=upper)
        if is_float:
            delta_lower = ecc_of[sourced].max()
            radius_upper = ecc_of[sourced].min()
            tol = 1e-9 * delta_lower
            open_ = ~sourced
            if extremes:
                keep = (upper + tol >= delta_lower) | (lower - tol <= radius_upper)
            else:
                keep = upper + tol > delta_lower
        else:
            delta_lower = lower.max()
            radius_upper = upper.min()
            open_ = lower != upper
            keep = ((upper >= delta_lower) | (lower <= radius_upper)) if extremes \
                else upper > delta_lower
        cand &= open_ & keep
        if progress:
            progress(count, delta_lower, max(upper[cand].max() if cand.any() else delta_lower,
                                             delta_lower), int(cand.sum()))
    ecc, source = best
    r = solver.run([source], algorithm)
    d, r.pred = b.to_numpy(r.dist).astype(dtype, copy=False), b.to_numpy(r.pred)
    target = int(np.flatnonzero(d == ecc)[0])
    path = [target]
    while r.pred[path[-1]] >= 0:
        path.append(int(r.pred[path[-1]]))
    path = path[::-1]
    py = float if is_float else int
    result = DiameterResult(
        diameter=py(delta_lower), bfs_count=count,
        endpoints=(lcc.id_of(source), lcc.id_of(target)),
        path=[lcc.id_of(x) for x in path],
        connected=info["components"] <= 1, components=info["components"],
        vertices=info["vertices"], lcc_vertices=n)
    result.extra["weighted"] = True
    if extremes:
        if is_float:
            radius = ecc_of[sourced].min()
            center = sourced & (ecc_of == radius)
            periphery = sourced & (ecc_of == delta_lower)
        else:
            settled = lower == upper
            radius = upper.min()
            center = settled & (upper == radius)
            periphery = settled & (lower == delta_lower)
        result.radius = py(radius)
        result.center = sorted(lcc.id_of(x) for x in np.flatnonzero(center))
        result.periphery = sorted(lcc.id_of(x) for x in np.flatnonzero(periphery))
    return result
