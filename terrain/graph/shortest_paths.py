"""Single-source (and multi-source) shortest paths on weighted sparse graphs.

``algorithm=``: ``dijkstra`` (CPU: Dial's buckets in C for small integer weights, else a
radix heap in C), ``crauser`` (Crauser et al.) and ``delta`` (near-far delta-stepping), on the
GPU (``_sssp.cu``) with sequential Numba twins on the CPU; ``auto``: ``dijkstra`` on the
CPU, on the GPU ``delta`` for road-like graphs (:func:`is_road_like`), else ``crauser``.
Every algorithm and backend gives the same bits (int64 sums or float64 left folds, canonical
predecessors); weights >= 0, integer sums below 2**62. Design and figures: docs/graphs.md
("SSSP: which algorithm, and why").
"""

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import native
from ..backend import get_backend
from ..errors import InputError
from . import _native
from .csr import Graph, as_graph
from .frontier import CapturedLaunches, FrontierCore, _multiprocessors

__all__ = ["sssp", "SSSPResult", "ShortestPaths", "ALGORITHMS", "check_algorithm",
           "default_delta", "choose_algorithm", "is_road_like", "INT_INF"]

ALGORITHMS = ("auto", "dijkstra", "crauser", "delta")
INT_INF = np.int64(1) << np.int64(62)
SPARSE_DEGREE = 8.0


@dataclass
class SSSPResult:
    """Result of :func:`sssp` in the graph's own ids (docs/graphs.md, "Vertex ids");
    :meth:`ShortestPaths.run`'s in internal vertex numbers, with ``ids`` None.

    Attributes
    ----------
    dist : ndarray of int64 or float64
        Distance to the nearest source, one per vertex in internal order: ``dist[i]`` is
        vertex ``ids[i]``'s; -1 (integers) or inf (reals) where unreachable.
    pred : ndarray
        ``pred[i]``: the id of the canonical predecessor of ``ids[i]``
        (:meth:`FrontierCore.sssp_parents`); -1 (``None`` for ids that are not integers)
        at sources and unreached vertices.
    sources : ndarray
        The sources, once each, in internal order.
    algorithm : str
        The algorithm that ran (``auto`` resolved).
    delta : number or None
        Bucket width (``delta``).
    iterations : int
        Heap pops (dijkstra), settle iterations (crauser) or relax rounds (delta).
    ids : ndarray or None
        The graph's ids (``Graph.id_array()``): file ids, networkx nodes or row numbers.
    """

    dist: np.ndarray
    pred: np.ndarray
    sources: np.ndarray
    algorithm: str
    delta: object = None
    iterations: int = 0
    extra: dict = field(default_factory=dict)
    ids: object = None

    @property
    def reached(self):
        """Boolean mask of the vertices some source reaches."""
        return self.dist >= 0 if self.dist.dtype.kind == "i" else np.isfinite(self.dist)


DIAL_MAX_WEIGHT = 1 << 20


def _dial_shift(graph, max_weight):
    """Predecessor bits of Dial's packed labels; None when distances could overflow."""
    shift = max(1, graph.n.bit_length())
    if max_weight * max(graph.n - 1, 1) >= (1 << (63 - shift)) - 1:
        return None
    return shift


def _sum_weights(graph):
    """``(weights, smallest, largest)``: the weights in the summing dtype (int64 or
    float64; 1 when unweighted), checked: >= 0, no NaN, integer sums bounded."""
    if graph.weights is None:
        return np.ones(graph.nnz, np.int64), 1, 1
    w = graph.weights
    if w.dtype.kind == "f":
        w = w.astype(np.float64) + 0.0  # -0.0 -> 0.0: the atomicMin compares bit patterns
        if np.isnan(w).any():
            raise InputError(f"{graph.name}: NaN edge weight (shortest paths need weights "
                             ">= 0)")
    else:
        w = w.astype(np.int64, copy=False)
    if not w.size:
        return w, 0, 0
    low, high = w.min().item(), w.max().item()
    if low < 0:
        raise InputError(f"{graph.name}: negative edge weight {low} (shortest paths need "
                         "weights >= 0)")
    # a shortest path is simple: at most n - 1 arcs, each edge at most once, so below both
    # bounds; an undirected graph holds every edge as two arcs, so its edges weigh half its
    # arcs (the float sum's error, about 1e-16 of it an arc, is inside the 1e-9 margin)
    if w.dtype.kind == "i" and high * max(graph.n - 1, 1) >= int(INT_INF) and \
            float(np.sum(w, dtype=np.float64)) / (1 if graph.directed else 2) \
            >= (1 - 1e-9) * float(INT_INF):
        total = int(w.sum(dtype=object)) // (1 if graph.directed else 2)
        raise InputError(f"{graph.name}: edge weights up to {high}, {total} in all, could "
                         "overflow exact int64 path sums (at most 2**62)")
    if w.dtype.kind == "f" and high * max(graph.n - 1, 1) > FLOAT_MAX:
        with np.errstate(over="ignore"):  # an infinite weight is an arc never taken
            total = float(np.sum(w[np.isfinite(w)]))
        if not np.isfinite(total):
            finite_high = float(np.max(w[np.isfinite(w)]))
            raise InputError(f"{graph.name}: edge weights up to {finite_high:g} could overflow "
                             "float64 path sums (beyond 1.8e308): a reachable vertex would "
                             "read as unreached")
    return w, low, high


FLOAT_MAX = float(np.finfo(np.float64).max)


DELTA_ARCS = 128.0   # default_delta: arcs' worth of mean weight per bucket, per unit degree


def default_delta(weights, n, nnz):
    """Bucket width: the mean weight times ``DELTA_ARCS`` (128) / average degree, at least
    the smallest positive weight; an integer for integer weights.

    Examples
    --------
    >>> default_delta(np.full(400, 50), 100, 400)   # a 4-regular graph, weights 50
    1600
    """
    if weights.size == 0:
        return 1
    avg_degree = max(nnz / max(n, 1), 1.0)
    delta = float(weights.mean()) * DELTA_ARCS / avg_degree
    positive = weights[weights > 0]
    if positive.size:
        delta = max(delta, float(positive.min()))
    if weights.dtype.kind == "i":
        return int(max(1, np.ceil(delta)))
    return delta if delta > 0 else 1.0


def is_road_like(graph):
    """Average degree <= ``SPARSE_DEGREE`` (8): grids, road networks, geometric graphs."""
    return graph.nnz <= SPARSE_DEGREE * max(graph.n, 1)


def choose_algorithm(graph, backend):
    """``auto``'s choice: ``dijkstra`` on the CPU; on the GPU ``delta`` for road-like
    graphs (:func:`is_road_like`), else ``crauser``.

    Examples
    --------
    >>> from terrain.backend import get_backend
    >>> from terrain.graph.csr import build_csr
    >>> choose_algorithm(build_csr(3, [0, 1], [1, 2]), get_backend("cpu"))
    'dijkstra'
    """
    return backend.select("dijkstra", "delta" if is_road_like(graph) else "crauser")


_C_MODE, _C_STEP, _C_NEAR_SEL, _C_NEAR_N, _C_WORK, _C_SPLITS = 0, 1, 2, 3, 9, 10
_C_WORDS = 16
_M_DONE = 2
_BLOCK = 256                 # threads per block (must match _sssp.cu)
_BLOCKS_PER_SM = 4
_MAX_BATCH = 256             # steps launched between two reads of the mode word
FUSE_ROUNDS = 16             # GPU near-far on road-like graphs: bucket-fusion rounds per step


class ShortestPaths:
    """SSSP state of one graph on one backend, reused across searches: weights in the
    summing dtype and, on the GPU, the graph, queues and control block on the device.

    Examples
    --------
    >>> from terrain.graph.csr import build_csr
    >>> sp = ShortestPaths(build_csr(3, [0, 1], [1, 2], weights=[5, 2]), "cpu")
    >>> sp.run([0], "delta").dist.tolist()
    [0, 5, 7]
    """

    def __init__(self, graph, backend=None):
        if not isinstance(graph, Graph):
            raise TypeError(f"ShortestPaths: expected a Graph, got {type(graph).__name__}")
        self.graph = graph
        self.backend = b = get_backend(backend)
        self.weights, low, self.w_max = _sum_weights(graph)
        self.is_float = self.weights.dtype.kind == "f"
        self.inf = np.float64(np.inf) if self.is_float else INT_INF
        self.core = FrontierCore(graph, b)
        self.w = b.asarray(self.weights)
        self.has_zero = bool(self.weights.size) and low == 0   # weights are >= 0
        self._minima = None
        self._default_delta = None
        # bucket fusion pays on long-diameter graphs and costs on scale-free ones (hub lists
        # serialise a block's rounds): docs/graphs.md
        self.fuse_rounds = FUSE_ROUNDS if is_road_like(graph) else 0
        self.ops = b.select(_CpuSearch, _GpuSearch)(self)

    def min_in_out(self):
        """Per vertex, the smallest incoming and outgoing arc weight (``inf`` when none)."""
        if self._minima is None:
            g, w = self.graph, self.weights
            min_out = np.full(g.n, self.inf, w.dtype)
            rows = np.flatnonzero(np.diff(g.indptr))
            if rows.size:
                min_out[rows] = np.minimum.reduceat(w, g.indptr[rows])
            if g.directed:
                min_in = np.full(g.n, self.inf, w.dtype)
                np.minimum.at(min_in, g.indices, w)
            else:
                min_in = min_out
            self._minima = (self.backend.asarray(min_in), self.backend.asarray(min_out))
        return self._minima

    def default_delta(self):
        """:func:`default_delta` of this graph (computed once: a pass over the weights)."""
        if self._default_delta is None:
            self._default_delta = default_delta(self.weights, self.graph.n, self.graph.nnz)
        return self._default_delta

    def run(self, sources, algorithm="auto", delta=None, predecessors=True):
        """:class:`SSSPResult` from ``sources`` (internal ids), arrays on the backend (GPU:
        ``dist`` is this solver's buffer until the next run; unreached integers: 2**62)."""
        src = np.unique(np.asarray(sources, dtype=np.int64))
        if algorithm == "auto":
            algorithm = choose_algorithm(self.graph, self.backend)
        if algorithm == "delta":
            delta = self.default_delta() if delta is None else delta
            if not isinstance(delta, (int, float, np.integer, np.floating)) or not delta > 0:
                raise InputError(f"delta must be a number > 0, got {delta!r}", option="delta")
            # any width gives the same answer: integer ones are kept to 2**61, so that the
            # thresholds (below 2**62 + delta) and thr + delta stay within int64
            delta = float(delta) if self.is_float else min(int(np.ceil(delta)),
                                                           int(INT_INF) // 2)
        else:
            delta = None
        dist, pred, iterations, extra = self.ops.run(src, algorithm, delta, predecessors)
        return SSSPResult(dist, pred, src, algorithm, delta, iterations, extra)


class _CpuSearch:
    """The searches on the CPU: Dial's buckets in C for integer weights up to
    ``DIAL_MAX_WEIGHT`` (and 4n), else a radix heap in C; Crauser and near-far as Numba
    twins."""

    def __init__(self, solver):
        self.s = solver

    def run(self, src, algorithm, delta, predecessors):
        sv = self.s
        g, w, inf = sv.graph, sv.weights, sv.inf
        shift = _dial_shift(g, sv.w_max) if algorithm == "dijkstra" and not sv.is_float \
            and sv.w_max <= min(DIAL_MAX_WEIGHT, 4 * g.n + 16) else None
        pred = None
        if shift is not None:
            # predecessors kept while relaxing when no weight is zero (integer weights:
            # no sum absorbs a positive one, so every tight tail is strictly closer)
            fused = predecessors and not sv.has_zero
            label = np.full(g.n, np.iinfo(np.int64).max, np.int64)
            # the weights as stored (int32 ones stream half the bytes; sums are int64)
            dial_w = g.weights if g.weights is not None and g.weights.dtype == np.int32 else w
            iterations = native.interruptible(_native.dial, g.indptr, g.indices, dial_w, src,
                                              label, sv.w_max, shift)
            dist = np.empty(g.n, w.dtype)
            pred = np.empty(g.n, np.int64) if fused else None
            _native.dial_labels(label, shift, dist, pred, inf)
        elif algorithm == "dijkstra":
            dist = np.full(g.n, inf, w.dtype)
            iterations = native.interruptible(_native.sssp_radix, g.indptr, g.indices, w,
                                              src, dist)
        else:
            from . import _frontier_cpu as kc  # Numba, loaded on first use
            dist = np.full(g.n, inf, w.dtype)
            if algorithm == "crauser":
                min_in, min_out = sv.min_in_out()
                iterations = native.interruptible(kc._crauser_cpu, g.indptr, g.indices, w,
                                                  min_in, min_out,
                                                  src.astype(g.indices.dtype), dist, inf)
            else:
                tiny = w.dtype.type(2.0 ** -50 if sv.is_float else 0)
                iterations = native.interruptible(kc._nearfar_cpu, g.indptr, g.indices, w,
                                                  src.astype(g.indices.dtype), dist,
                                                  w.dtype.type(delta), inf, tiny)
        if predecessors and pred is None:
            pred = sv.core.sssp_parents(dist, sv.w, inf, src)
        return dist, pred, int(iterations), {}


class _GpuSearch:
    """The searches on the GPU (``_sssp.cu``): one solver's buffers, kernels, captured steps."""

    def __init__(self, solver):
        self.s = solver
        b = solver.backend
        cp = self.cp = b.xp
        core = solver.core
        n = max(core.n, 1)
        wdt = solver.weights.dtype
        self.stream = cp.cuda.Stream(non_blocking=True)
        it = "int" if core.index_dtype == np.int32 else "long long"
        wt = "double" if solver.is_float else "long long"
        names = {k: f"{k}<{it}, {wt}>" for k in ("nearfar_step", "crauser_bounds",
                                                    "crauser_settle", "tight_tails")}
        module = b.cuda_module(Path(__file__).with_name("_sssp.cu"),
                               name_expressions=tuple(names.values()))
        self.k = {k: module.get_function(v) for k, v in names.items()}
        with self.stream:
            self.dist = cp.empty(n, wdt)
            self.relaxed_at = cp.empty(n, wdt)
            self.stamp = cp.empty(n, np.int32)
            self.in_far = cp.empty(n, np.int32)
            self.settled = cp.empty(n, np.uint8)
            self.queues = tuple(cp.empty(n, core.index_dtype) for _ in range(4))
            self.ctl = cp.zeros(_C_WORDS, np.int64)
            self.wctl = cp.zeros(4, wdt)
        self.blocks = _multiprocessors(cp) * _BLOCKS_PER_SM
        self.launches = CapturedLaunches(self.stream)

    def run(self, src, algorithm, delta, predecessors):
        if algorithm == "dijkstra":
            raise InputError("sssp: 'dijkstra' is the CPU algorithm (crauser or delta run on "
                             "the GPU)")
        with self.stream:
            dist, iterations, extra = self._search(src, algorithm, delta)
            pred = self._preds(dist, src) if predecessors else None
        self.stream.synchronize()
        return dist, pred, iterations, extra

    def _preds(self, dist, src):
        sv = self.s
        # pass 1 of the core's rule load-balanced (hub lists over a block), which matters
        # on scale-free graphs; the core completes it behind zero-length arcs
        pred = self.cp.full(sv.graph.n, np.iinfo(np.int64).max, np.int64)
        self.k["tight_tails"]((self.blocks,), (_BLOCK,), (
            sv.core.indptr, sv.core.indices, sv.w, dist, sv.weights.dtype.type(sv.inf),
            pred, np.int64(sv.graph.n)))
        return sv.core.zero_length_parents(dist, sv.w, sv.inf, sv.backend.asarray(src), pred)

    def _search(self, src, algorithm, delta):
        sv = self.s
        cp = self.cp
        core = sv.core
        dt = sv.weights.dtype.type
        self.dist.fill(sv.inf)
        ctl = np.zeros(_C_WORDS, np.int64)
        ctl[_C_NEAR_N] = src.size
        self.ctl.set(ctl, stream=self.stream)
        d_src = cp.asarray(src.astype(core.index_dtype))
        self.queues[0][:src.size] = d_src
        self.dist[d_src] = 0
        if algorithm == "delta":
            self.relaxed_at.fill(sv.inf)
            self.stamp.fill(-1)
            self.in_far.fill(0)
            self.wctl.set(np.array([dt(delta), sv.inf, 0, 0], sv.weights.dtype),
                          stream=self.stream)
            key = ("delta", delta, sv.fuse_rounds)
            args = (core.indptr, core.indices, sv.w, self.dist, self.relaxed_at, self.stamp,
                    self.in_far, *self.queues, self.ctl, self.wctl, dt(delta), dt(sv.inf),
                    np.int32(sv.fuse_rounds))
            kernels = ((self.k["nearfar_step"], args),)
        else:
            min_in, min_out = sv.min_in_out()
            self.settled.fill(0)
            self.wctl.set(np.array([sv.inf, sv.inf, 0, 0], sv.weights.dtype),
                          stream=self.stream)
            key = ("crauser",)
            kernels = ((self.k["crauser_bounds"],
                        (self.queues[0], self.queues[1], self.dist, min_out, self.ctl,
                         self.wctl, dt(sv.inf))),
                       (self.k["crauser_settle"],
                        (core.indptr, core.indices, sv.w, self.dist, min_in, self.settled,
                         self.queues[0], self.queues[1], self.ctl, self.wctl, dt(sv.inf))))
        batch, launched = 8, 0
        limit = 64 * (sv.graph.n + 1024)   # far above any real run: a guard, not a bound
        while True:
            self.launch(key, kernels, batch)
            launched += batch
            if int(self.ctl[_C_MODE:_C_MODE + 1].get(stream=self.stream)[0]) == _M_DONE:
                break
            if launched > limit:
                raise RuntimeError(f"sssp: the device {algorithm} loop did not finish in "
                                   f"{launched} steps")
            batch = min(2 * batch, _MAX_BATCH)
        words = self.ctl.get(stream=self.stream)
        extra = {"arcs_scanned": int(words[_C_WORK]), "splits": int(words[_C_SPLITS])}
        return self.dist, int(words[_C_STEP]), extra

    def launch(self, key, kernels, count):
        """``count`` steps (each: the kernels in order) on this solver's stream."""
        def enqueue():
            for _ in range(count):
                for k, args in kernels:
                    k((self.blocks,), (_BLOCK,), args)
        self.launches((key, count), enqueue)


def check_algorithm(algorithm):
    """Refuse an ``algorithm`` that is not one of :data:`ALGORITHMS` (an
    :class:`~terrain.errors.InputError` naming the parameter), before any work.

    >>> check_algorithm("dial")
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: algorithm 'dial': not one of auto, dijkstra, crauser, delta
    """
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
        raise InputError(f"algorithm {algorithm!r}: not one of {', '.join(ALGORITHMS)}",
                         option="algorithm")


def sssp(graph, sources, algorithm="auto", delta=None, backend=None, *, directed=None,
         predecessors=True):
    """Shortest-path distances (and canonical predecessors) from one source or many.

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices[, weights])
        Weights >= 0 (unweighted graphs weigh 1 per edge).
    sources, backend, predecessors
        As :func:`terrain.graph.bfs`: the graph's own ids.
    algorithm : {'auto', 'dijkstra', 'crauser', 'delta'}
        ``auto``: :func:`choose_algorithm`; every one gives the same result.
    delta : number, optional
        Bucket width for ``delta`` (default :func:`default_delta`).
    directed : bool, optional
        Passed to :func:`terrain.graph.as_graph`; ``True`` for a :class:`Graph` stored
        undirected (a file loaded without ``directed=True``) is refused: its arcs'
        directions are gone.

    Returns
    -------
    SSSPResult

    Raises
    ------
    InputError
        Negative or NaN weights, a source that is not a vertex, ``directed=True`` on an
        undirected :class:`Graph`.

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.Graph([(0, 1, {"weight": 4}), (1, 2, {"weight": 1}), (0, 2, {"weight": 7})])
    >>> r = sssp(G, 0, backend="cpu")
    >>> r.dist.tolist(), r.pred.tolist()
    ([0, 4, 5], [-1, 0, 1])
    >>> sssp(G, [0, 2], algorithm="crauser", backend="cpu").dist.tolist()
    [0, 1, 0]
    >>> H = nx.Graph([("a", "b", {"weight": 2})])
    >>> r = sssp(H, "b", backend="cpu")
    >>> r.ids.tolist(), r.dist.tolist(), r.pred.tolist(), r.sources.tolist()
    (['a', 'b'], [2, 0], ['b', None], ['b'])
    """
    check_algorithm(algorithm)
    if directed and isinstance(graph, Graph) and not graph.directed:
        raise InputError(f"{graph.name}: directed=True on a graph stored undirected: its arcs' "
                         "directions are gone (load the file with directed=True)",
                         option="directed")
    g = as_graph(graph, directed=directed)
    src = g.source_vertices(sources, "sssp")
    b = get_backend(backend)
    r = ShortestPaths(g, b).run(src, algorithm, delta, predecessors)
    dist = b.to_numpy(r.dist)           # the run's own array (on the GPU a fresh copy)
    if r.pred is not None:
        r.pred = g.ids_of(b.to_numpy(r.pred))
    if dist.dtype.kind == "i":
        dist[dist == INT_INF] = -1      # in place: the array is this call's own
    r.dist, r.sources, r.ids = dist, g.ids_of(r.sources), g.id_array()
    return r

