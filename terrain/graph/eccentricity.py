"""Exact diameter (and radius, center, periphery) by eccentricity bounding.

Takes & Kosters' bounding: every vertex keeps ``lower[w] <= ecc(w) <= upper[w]``, each BFS
tightens all of them, a cover bound from the centre and the last source tightens the upper
ones, and candidates are dropped once their eccentricity is settled or can no longer matter;
sources alternate between far and central picks; after ``SINGLE_BFS`` single searches,
bit-parallel batches of ``BATCH`` sources run whenever :func:`batch_pays`. One loop per
backend (``_CpuBounding``: C; ``_GpuBounding``: ``_diameter.cu`` and the frontier core)
picks the same sources, so both give the same answer, endpoints and path.
:func:`weighted_diameter` bounds with shortest-path searches. Rules and figures:
docs/graphs.md ("Exact diameter by bounding").
"""

import sys
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from ..backend import get_backend
from ..errors import InputError
from . import _native
from .csr import Graph, as_graph, component_roots, largest_component
from .frontier import BETA, BLOCK, FrontierCore
from .traversal import traverse

__all__ = ["diameter", "DiameterResult", "exact_diameter", "effective_diameter",
           "component_roots_on", "largest_component_on", "weighted_diameter", "batch_pays"]

SINGLE_BFS = 8   # single-source BFS before the bounding may take bit-parallel batches (>= 1)
BATCH = 64       # sources per bit-parallel pass
_ROUNDS = 16     # CPU: searches per C call (progress is reported between calls)
DMAT_BYTES = 64 << 20  # CPU: a batch keeps its distances (64 n bytes) up to this size


@dataclass
class DiameterResult:
    """Result of :func:`diameter` (vertices in the graph's own ids).

    Attributes
    ----------
    bfs_count : int
        BFS runs the bounding took (not counting ``effective`` samples).
    endpoints, path : tuple, list
        Two vertices at distance ``diameter`` and a shortest path between them.
    vertices, lcc_vertices : int
        Vertices of the graph and of the component answered for.
    radius, center, periphery : optional
        With ``extremes=True``.
    effective_diameter, effective_sources : optional
        With ``effective``.
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
        """The fields that are set, ``extra`` left out (the JSON of ``diameter --json``)."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        d = {k: v for k, v in d.items() if v is not None}
        d["endpoints"] = list(d["endpoints"])
        return d


_DIAMETER_CU = Path(__file__).with_name("_diameter.cu")


def _diameter_kernels(backend, index_dtype):
    """The kernels of ``_diameter.cu`` for one index type (compiled once per process)."""
    it = "int" if np.dtype(index_dtype) == np.int32 else "long long"
    names = {"update": "update_bounds", "prune": "prune_candidates", "cover": "cover_bounds",
             "init": f"init_parents<{it}>", "hook": f"hook_edges<{it}>",
             "flatten": f"flatten_parents<{it}>", "check": f"check_components<{it}>"}
    module = backend.cuda_module(_DIAMETER_CU, name_expressions=tuple(names.values()))
    return {k: module.get_function(v) for k, v in names.items()}


def _roots_on_device(b, indptr, indices):
    """Union-find on the device (``_diameter.cu``: CAS hooks, path halving) until a check
    finds every edge inside one component."""
    n = indptr.shape[0] - 1
    parent = b.xp.empty(n, indices.dtype)
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
    raise RuntimeError("component_roots_on: labels did not settle")


def _cut_on_device(b, graph, indptr, indices, roots, info):
    """The largest component cut out on the device; ids stay on the host."""
    xp = b.xp
    n = graph.n
    sizes = xp.bincount(roots, minlength=n)
    root = int(sizes.argmax())
    keep = roots == root
    info["lcc_vertices"] = int(sizes[root])
    new_id = (xp.cumsum(keep, dtype=np.int64) - 1).astype(indices.dtype)
    deg = indptr[1:] - indptr[:-1]
    new_indptr = xp.zeros(info["lcc_vertices"] + 1, np.int64)
    xp.cumsum(deg[keep], out=new_indptr[1:])
    kept = b.to_numpy(xp.flatnonzero(keep))
    lcc = Graph(new_indptr, new_id[indices[keep[indices]]], graph.id_array()[kept], 0,
                graph.name, dict(graph.meta))
    lcc.meta.pop("_index", None)
    return lcc


def component_roots_on(indptr, indices, backend=None):
    """Connected-component labels of an undirected CSR on ``backend``: ``roots[v]`` is the
    smallest vertex of ``v``'s component (unique labels, so the same on every backend).

    Examples
    --------
    >>> component_roots_on(np.array([0, 1, 2, 2, 2]), np.array([1, 0], np.int32), "cpu").tolist()
    [0, 0, 2, 3]
    """
    b = get_backend(backend)
    return b.select(_roots_on_host, _roots_on_device)(b, b.asarray(indptr), b.asarray(indices))


def _roots_on_host(b, indptr, indices):
    return component_roots(Graph(indptr, indices))


def largest_component_on(graph, backend=None):
    """``(lcc, info)`` as :func:`terrain.graph.largest_component`, computed on ``backend``;
    on the GPU ``lcc`` holds device arrays (``lcc.meta['device']``): nothing of size ``m``
    comes back to the host."""
    b = get_backend(backend)
    return b.select(_largest_on_host, _largest_on_device)(graph, b)


def _largest_on_host(graph, b):
    return largest_component(graph)


def _largest_on_device(graph, b):
    xp = b.xp
    indptr, indices = b.asarray(graph.indptr), b.asarray(graph.indices)
    n = graph.n
    info = {"components": 0, "vertices": n, "lcc_vertices": n}
    if n == 0:
        return graph, info
    roots = _roots_on_device(b, indptr, indices)
    info["components"] = int((roots == xp.arange(n, dtype=roots.dtype)).sum())
    if info["components"] <= 1:
        lcc = Graph(indptr, indices, graph.ids, graph.id_base, graph.name, dict(graph.meta))
    else:
        lcc = _cut_on_device(b, graph, indptr, indices, roots, info)
        lcc.meta["lcc_of"] = info
    lcc.meta["device"] = True
    return lcc, info


def batch_pays(n, arcs, delta_lower, k, remaining):
    """Does one bit-parallel batch of ``k`` sources (of ``remaining``) cost less than ``k``
    single BFS (``n`` vertices, ``arcs`` arcs, diameter >= ``delta_lower``)? The integers of
    ``kernels.c``'s ``bound_batch_pays``; the model: docs/graphs.md ("Bit-parallel batches").

    >>> batch_pays(4941, 13188, 50, 40, 40), batch_pays(4941, 13188, 50, 64, 90)
    (True, False)
    """
    one_pass = 64 * n <= DMAT_BYTES and 2 * delta_lower <= 254
    levels = (1 if one_pass else 2) * (delta_lower + 1)
    if k < 2 or levels >= 3 * k or not (k == remaining or 2 * (delta_lower + 1) < k):
        return False
    return levels * (50 * n + 7 * arcs) < k * (150 * n + 3 * arcs)


class _CpuBounding:
    """The bounding loop on the CPU: ``terrain_diameter_bound`` runs ``_ROUNDS`` searches a
    call, all in C."""

    def __init__(self, core, extremes):
        n = core.n
        self.core = core
        self.extremes = bool(extremes)
        self.lower = np.zeros(n, np.int32)
        self.upper = np.full(n, np.iinfo(np.int32).max, np.int32)
        self.cand = np.ones(n, np.uint8)
        # searches, next pick (1: far), best ecc, its source, its labels kept, left,
        # delta_lower, radius_upper, the centre's ecc, the last single source's ecc
        big = np.iinfo(np.int32).max
        self.state = np.array([0, 1, -1, 0, 0, n, 0, big, big, big], np.int64)

    def run(self, progress, single_bfs):
        c = self.core
        n = c.n
        q0, q1 = c.ops.buffers()
        best_dist = np.empty(max(n, 1), np.int32)
        centre_dist = np.empty(max(n, 1), np.int32)
        words = [np.empty(max(n, 1), np.uint64) for _ in range(3)]
        picks = [np.empty(BATCH, np.int64) for _ in range(3)]
        eccs = [np.empty(BATCH, np.int32) for _ in range(2)]
        # a batch's distances (64 bytes a vertex) spare its second pass on smaller graphs
        dmat = np.empty(64 * n, np.uint8) if 64 * n <= DMAT_BYTES else None
        st = self.state
        p = _native._p
        bound = c.ops.k["bound"]
        while st[5] > 0:
            rc = bound(p(c.indptr), p(c.indices), n, int(self.extremes), single_bfs, BATCH,
                       _ROUNDS, c.ops.alpha, BETA, p(self.lower), p(self.upper), p(self.cand),
                       p(c.dist), p(best_dist), p(q0), p(q1), *map(p, words), *map(p, picks),
                       *map(p, eccs), None if dmat is None else p(dmat), p(centre_dist),
                       p(st))
            if rc == -2:
                raise ValueError("exact_diameter: the graph is not connected (give its "
                                 "largest_component)")
            if progress:
                upper = int(self.upper[self.cand.astype(bool)].max()) if st[5] else int(st[6])
                progress(int(st[0]), int(st[6]), max(upper, int(st[6])), int(st[5]))
        return int(st[0]), int(st[6]), (int(st[2]), int(st[3]),
                                         best_dist if st[4] else None)


class _GpuBounding:
    """The bounding loop on the GPU: BFS by the frontier core, bounds and pruning by
    ``_diameter.cu``, sources chosen by the C loop's rules; a few scalars cross a search."""

    def __init__(self, core, extremes):
        xp = self.xp = core.backend.xp
        n = core.n
        self.core = core
        self.extremes = bool(extremes)
        self.lower = xp.zeros(n, np.int32)
        self.upper = xp.full(n, np.iinfo(np.int32).max, np.int32)
        self.cand = xp.ones(n, np.uint8)
        self.degree = core.indptr[1:] - core.indptr[:-1]
        k = _diameter_kernels(core.backend, core.index_dtype)
        self._update, self._prune, self._cover = k["update"], k["prune"], k["cover"]
        self._remaining = xp.zeros(1, np.uint64)
        self._fell = xp.zeros(1, np.uint32)
        self.grid = (core.ops.blocks(n),)

    def select_batch(self, k):
        """Up to ``k`` candidates (host int64): all when no more, else taken in turn from
        the two orders of :func:`_select`."""
        xp = self.xp
        to_numpy = self.core.backend.to_numpy
        cand = xp.flatnonzero(self.cand)
        if cand.size <= k:
            return to_numpy(cand).astype(np.int64)
        up = self.upper[cand].astype(np.int64)
        lo = self.lower[cand].astype(np.int64)
        deg = self.degree[cand].astype(np.int64)
        by_upper = to_numpy(cand[xp.lexsort(xp.stack([cand, -deg, -up]))[:k]])
        by_lower = to_numpy(cand[xp.lexsort(xp.stack([cand, -deg, lo]))[:k]])
        turns = np.stack([by_upper, by_lower], axis=1).ravel().tolist()
        return np.array(list(dict.fromkeys(turns))[:k], np.int64)

    def run(self, progress, single_bfs):
        c = self.core
        n = c.n
        best = None
        centre = None  # (ecc, distances) of the single source of smallest eccentricity
        count = 0
        far = True
        remaining = n
        delta_lower = 0
        while remaining > 0:
            if count < single_bfs or not batch_pays(n, c.nnz, delta_lower,
                                                    min(remaining, BATCH), remaining):
                v = _select(self.xp, self.cand.astype(bool), self.lower, self.upper,
                            self.degree, c.dist if count else None, far)
                far = far if count == 0 else not far  # the first two are far picks
                stats = traverse(c, [v])
                if stats.reached != n:
                    raise ValueError("exact_diameter: the graph is not connected (give its "
                                     "largest_component)")
                ecc = stats.eccentricity
                count += 1
                if best is None or ecc > best[0]:
                    best = (ecc, v, c.dist.copy())
                last_ecc = ecc
                if centre is None or ecc < centre[0]:
                    centre = (ecc, c.dist.copy())
                self._update(self.grid, (BLOCK,), (c.dist, np.int32(ecc), self.lower,
                                                   self.upper, np.int64(n)))
            else:
                batch = self.select_batch(BATCH)
                eccs = c.bitwise_bfs(batch)
                count += len(batch)
                top = int(eccs.max())
                if best is None or top > best[0]:
                    best = (top, int(batch[int(np.argmax(eccs))]), None)
                c.bitwise_bfs(batch, eccs, self.lower, self.upper)
            delta_lower, remaining = self.prune()
            # the cover bound from the centre, then from the last single source
            if remaining and (self.cover(centre[1], centre[0], delta_lower)
                              | self.cover(c.dist, last_ecc, delta_lower)):
                delta_lower, remaining = self.prune()
            if progress:
                upper = int(self.xp.where(self.cand.astype(bool), self.upper,
                                          delta_lower).max())
                progress(count, delta_lower, max(upper, delta_lower), remaining)
        return count, delta_lower, best

    def prune(self):
        """``prune_candidates`` with the current bounds: ``(delta_lower, candidates left)``."""
        delta_lower = int(self.lower.max())
        radius_upper = int(self.upper.min())
        self._remaining.fill(0)
        self._prune(self.grid, (BLOCK,), (self.cand, self.lower, self.upper,
                                          np.int32(delta_lower), np.int32(radius_upper),
                                          np.int32(self.extremes), np.int64(self.core.n),
                                          self._remaining))
        return delta_lower, int(self._remaining.get()[0])

    def cover(self, dist, ecc, delta_lower):
        """The cover bound from one source's distances and eccentricity (``kernels.c``'s
        ``bound_cover``): does an upper bound fall?"""
        reach = int(self.xp.where(self.cand.astype(bool), dist, 0).max())
        if reach >= ecc:
            return False
        self._fell.fill(0)
        self._cover(self.grid, (BLOCK,), (dist, np.int32(reach), np.int32(delta_lower),
                                          self.upper, np.int64(self.core.n), self._fell))
        return bool(int(self._fell.get()[0]))


def _select(xp, cand, lower, upper, degree, last, far):
    """The next single source (``kernels.c``'s ``bound_select``). far: the candidate first in
    (largest upper bound, largest ``last``, higher degree, lower number); else, of the
    vertices with ``last > 0``, the first in (smallest lower + ``last``, largest ``last``,
    higher degree, lower number). ``last``: the last single BFS's distances (None: none)."""
    if last is None:
        last = xp.zeros(cand.shape, np.int32)
    pool = cand if far else last > 0
    if not far and not bool(pool.any()):
        return _select(xp, cand, lower, upper, degree, None, True)
    key = upper if far else -(lower + last)
    for k in (key, last, degree):
        top = xp.where(pool, k, k.min()).max()
        pool = pool & (k == top)
    return int(xp.flatnonzero(pool)[0])


def _path(core, dist, ecc):
    """The path from the source to the smallest-numbered vertex at distance ``ecc``."""
    xp = core.backend.xp
    target = int(xp.flatnonzero(xp.asarray(dist) == ecc)[0])
    pred = core.parents(dist)
    path = [target]
    for _ in range(ecc):  # ecc scalar reads, not an n-sized download
        path.append(int(pred[path[-1]]))
    return path[::-1]


def _distance_histogram(core, sources):
    """``hist[d]``: the (source, vertex) pairs at distance ``d``, by bit-parallel BFS."""
    hist = np.zeros(1, np.int64)
    for i in range(0, len(sources), BATCH):
        sizes = []
        core.bitwise_bfs(sources[i:i + BATCH], pairs=sizes)
        hist = np.pad(hist, (0, max(0, len(sizes) - hist.size)))
        hist[:len(sizes)] += sizes
    return hist


def effective_diameter(core, k, seed=0):
    """``(value, sources)``: the 90th percentile of the hop distances from ``min(k, n)``
    distinct vertices drawn with ``numpy.random.default_rng(seed)``, interpolated between
    hop counts (a vertex and itself do not count), on the component ``core`` holds.

    Examples
    --------
    >>> from terrain.graph.csr import build_csr
    >>> effective_diameter(FrontierCore(build_csr(3, [0, 1], [1, 2]), "cpu"), 3)[0]
    1.7
    """
    sources = np.random.default_rng(seed).choice(core.n, size=min(int(k), core.n),
                                                 replace=False)
    hist = _distance_histogram(core, sources)
    hist[0] = 0  # a vertex and itself is no pair
    total = hist.sum()
    if total == 0:
        return 0.0, sources
    cum = np.cumsum(hist) / total
    d = int(np.searchsorted(cum, 0.9 - 1e-12))
    prev = cum[d - 1] if d > 0 else 0.0
    value = (d - 1) + (0.9 - prev) / (cum[d] - prev) if cum[d] > prev else float(d)
    return round(float(value), 6), sources


def _stderr_progress(extremes=False, start=time.monotonic):
    """A ``progress`` that prints a line a second after two seconds; once the diameter is
    known, what the candidates are left for (with ``extremes``: the radius and the rest)."""
    t0 = start()
    last = [t0]

    def report(bfs_count, delta_lower, diameter_upper, remaining):
        now = start()
        if now - t0 > 2.0 and now - last[0] > 1.0:
            last[0] = now
            bounds = (f"diameter {delta_lower}, {remaining} candidates left for the radius, "
                      "centre and periphery" if extremes and delta_lower == diameter_upper else
                      f"{delta_lower} <= diameter <= {diameter_upper}, {remaining} candidates "
                      "left")
            print(f"diameter: {bfs_count} BFS, {bounds}", file=sys.stderr, flush=True)
    return report


def exact_diameter(component, components=None, *, extremes=False, backend=None,
                   progress=None):
    """The bounding of :func:`diameter` on a connected graph, without the effective sample.

    Parameters
    ----------
    component : Graph
        Connected (a :func:`terrain.graph.largest_component`).
    components : dict, optional
        The ``info`` of :func:`terrain.graph.largest_component` (default: the whole graph).
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
    (3, (3, 0), [3, 2, 1, 0])
    """
    if component.n == 0:
        raise InputError(f"{component.name}: empty graph (no vertices)")
    if components is None:
        components = {"components": 1, "vertices": component.n, "lcc_vertices": component.n}
    component = component.undirected()
    return _bound(FrontierCore(component, backend), components, extremes, progress)


def _bound(core, info, extremes, progress):
    """The bounding loop on ``core`` (a connected component)."""
    lcc = core.graph
    if progress is True:
        progress = _stderr_progress(extremes)
    bounding = core.backend.select(_CpuBounding, _GpuBounding)(core, extremes)
    bfs_count, delta_lower, (ecc, source, dist) = bounding.run(progress, SINGLE_BFS)
    if dist is None:  # found by a bit-parallel batch: one BFS for its labels
        traverse(core, [source])
        dist = core.dist
    found = None
    if extremes:
        lower = core.backend.to_numpy(bounding.lower)
        upper = core.backend.to_numpy(bounding.upper)
        settled = lower == upper
        radius = int(upper.min())
        found = (radius, settled & (upper == radius), settled & (lower == delta_lower))
    return _result(lcc, info, int(delta_lower), bfs_count, _path(core, dist, ecc), found)


def _result(lcc, info, diameter, count, path, extremes=None):
    """The :class:`DiameterResult` on ``lcc``; ``path`` in internal numbers, ``extremes``:
    ``(radius, center mask, periphery mask)``."""
    result = DiameterResult(
        diameter=diameter, bfs_count=count, endpoints=(lcc.id_of(path[0]), lcc.id_of(path[-1])),
        path=[lcc.id_of(x) for x in path], connected=info["components"] <= 1,
        components=info["components"], vertices=info["vertices"], lcc_vertices=lcc.n)
    if extremes is not None:
        result.radius = extremes[0]
        result.center = _sorted_ids(lcc, extremes[1])
        result.periphery = _sorted_ids(lcc, extremes[2])
    return result


def _sorted_ids(lcc, mask):
    """The ids of ``mask``'s vertices, sorted; in the graph's own order where they do not
    compare (a NetworkX graph's nodes of mixed types)."""
    ids = [lcc.id_of(x) for x in np.flatnonzero(mask)]
    try:
        return sorted(ids)
    except TypeError:
        return ids


def _check_progress(progress):
    """Refuse a ``progress`` that is neither a callable nor True/False/None (a string was
    called after the first search, a TypeError of this module's)."""
    if progress is not None and not isinstance(progress, (bool, np.bool_)) \
            and not callable(progress):
        raise InputError(f"progress {progress!r}: must be True, False or a callable "
                         "progress(bfs_count, delta_lower, diameter_upper, candidates_left)",
                         option="progress")


def diameter(graph, *, extremes=False, effective=None, seed=0, backend=None, progress=None):
    """Exact diameter by eccentricity bounding; optionally radius, center, periphery.

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices)
        Treated as undirected; a disconnected graph is answered for its largest component.
    extremes : bool
        Also radius, center and periphery (more BFS).
    effective, seed : int, optional
        Also the effective diameter sampled from this many sources with this seed.
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional
        ``auto`` keeps a graph of fewer than ``GPU_MIN_WORK`` vertices + arcs on the CPU.
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
    (4, (4, 0), [4, 3, 2, 1, 0], 2, [2])
    """
    if effective is not None and not (isinstance(effective, (int, np.integer))
                                      and not isinstance(effective, bool) and effective >= 0):
        raise InputError(f"effective {effective!r}: the sources to sample, a whole number "
                         ">= 0")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) \
            or seed < 0:
        raise InputError(f"seed {seed!r}: the effective diameter's sample seed, a whole "
                         "number >= 0", option="seed")
    _check_progress(progress)
    g = as_graph(graph, directed=False, weight=None)  # hops: weights are not read
    if g.n == 0:
        raise InputError(f"{g.name}: empty graph (no vertices)")
    backend = get_backend(backend, work=g.n + g.nnz)  # auto: a small graph stays on the CPU
    lcc, info = largest_component_on(g, backend)
    core = FrontierCore(lcc, backend)
    result = _bound(core, info, extremes, progress)
    if effective:
        value, sources = effective_diameter(core, effective, seed)
        result.effective_diameter = value
        result.effective_sources = int(len(sources))
        result.extra["effective_source_ids"] = [lcc.id_of(s) for s in sources]
    return result


def _finite_edges(g):
    """``g`` without its edges of infinite weight: a search never takes them (the vertices
    they alone join are unreached), so they join no component either."""
    if g.weights is None or g.weights.dtype.kind != "f":
        return g
    keep = np.isfinite(g.weights)
    if keep.all():
        return g
    rows = np.repeat(np.arange(g.n), np.diff(g.indptr))
    indptr = np.zeros(g.n + 1, np.int64)
    np.cumsum(np.bincount(rows[keep], minlength=g.n), out=indptr[1:])
    return Graph(indptr, g.indices[keep], g.ids, g.id_base, g.name, {}, g.weights[keep],
                 g.directed)


def weighted_diameter(graph, *, extremes=False, backend=None, algorithm="auto",
                      progress=None):
    """Exact weighted diameter (and radius, center, periphery) of an undirected graph: the
    bounding with shortest-path searches (:func:`terrain.graph.sssp`) in place of BFS, exact
    with real weights too (docs/graphs.md, "Weighted eccentricities").

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices, weights)
        Taken undirected; weights >= 0; a disconnected graph is answered for its largest
        component.
    extremes, progress
        As :func:`diameter`.
    backend, algorithm
        Passed to :func:`terrain.graph.sssp`.

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
    (7, (0, 3), [0, 1, 2, 3], 5, [1])
    """
    from .shortest_paths import INT_INF, ShortestPaths, check_algorithm
    check_algorithm(algorithm)  # before the graph is built, as sssp's
    _check_progress(progress)
    g = _finite_edges(as_graph(graph, directed=False))
    if g.n == 0:
        raise InputError(f"{g.name}: empty graph (no vertices)")
    lcc, info = largest_component(g)
    n = lcc.n
    is_float = lcc.weights is not None and lcc.weights.dtype.kind == "f"
    dtype = np.float64 if is_float else np.int64
    # integer distances stay below 2**62 (the searches refuse weights that could pass it)
    big = np.inf if is_float else INT_INF
    lower = np.zeros(n, dtype)
    upper = np.full(n, big, dtype)
    cand = np.ones(n, bool)
    sourced = np.zeros(n, bool)
    ecc_of = np.zeros(n, dtype)
    degree = lcc.degrees()
    if progress is True:
        progress = _stderr_progress(extremes)
    best = None
    count = 0
    far, last = True, None
    delta_lower, radius_upper = dtype(0), dtype(big)
    b = get_backend(backend)
    solver = ShortestPaths(lcc, b)  # one set-up (weights, device arrays) for every search
    while cand.any():
        v = _select(np, cand, lower, upper, degree, last, far)
        far = far if count == 0 else not far  # the first two are far picks
        r = solver.run([v], algorithm, predecessors=False)
        d = last = b.to_numpy(r.dist).astype(dtype, copy=False)  # connected: all reached
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
    py = float if is_float else int
    found = None
    if extremes:
        if is_float:
            radius = ecc_of[sourced].min()
            found = (py(radius), sourced & (ecc_of == radius), sourced & (ecc_of == delta_lower))
        else:
            settled = lower == upper
            radius = upper.min()
            found = (py(radius), settled & (upper == radius), settled & (lower == delta_lower))
    result = _result(lcc, info, py(delta_lower), count, path[::-1], found)
    result.extra["weighted"] = True
    return result
