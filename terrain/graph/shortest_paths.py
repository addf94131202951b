"""Single-source (and multi-source) shortest paths on weighted sparse graphs.

Algorithms (``algorithm=``):

``dijkstra`` (the CPU twin)
    Dijkstra with a 4-ary heap and lazy deletion, in Numba: each improvement pushes
    ``(distance, vertex)``, stale entries are skipped when popped. O(m log m), cache-friendly
    flat arrays, no decrease-key bookkeeping (scipy's ``dijkstra`` uses a Fibonacci heap of
    node objects). Integer weights up to ``DIAL_MAX_WEIGHT`` (and 4n) use Dial's bucket
    queue instead: ``C + 1`` cyclic buckets, O(1) per operation, O(m + max distance) in all;
    each bucket a stack of 32-id blocks (reused through a free list, so the queue stays in
    cache), and with positive weights the canonical predecessors are kept while relaxing
    instead of in a second pass over the arcs (RMAT-18, one core: 0.19 -> 0.12 CPU seconds
    per source with predecessors, against one linked pool entry per push and the pass).
    A vertex's distance and predecessor share one int64 label, ``d << bits | p``, so one
    compare takes the lexicographically smaller ``(d, p)``, and each pop prefetches the
    vertices a few pops down the bucket; the Dial loop is C (:func:`_dial_cpu` says why:
    140 -> 56 CPU ms per source on the 1000² grid, 95 -> about 45 on RMAT-18).
    Written by hand because no library offers a Numba-callable priority queue.
``crauser`` (GPU and its Numba twin; Crauser, Mehlhorn, Meyer & Sanders 1998, as in
    Ortega-Arranz et al.'s GPU Dijkstra) - a label-setting loop: each iteration computes, over
    the *fringe* (reached, unsettled vertices), ``L = min d(v)`` and
    ``M = min (d(u) + minout(u))`` (``crauser_bounds``: block reductions, one atomicMin per
    warp); then settles every fringe vertex with ``d(v) <= L + minin(v)`` (IN criterion) or
    ``d(v) <= M`` (OUT criterion) and relaxes its arcs at once (``crauser_settle``: a settled
    distance is final, so settling and relaxing need no barrier between them); the unsettled
    rest and the first-reached heads form the next fringe. Every arc is relaxed once.
``delta`` (GPU and its Numba twin; near-far delta-stepping, Meyer & Sanders' buckets in the
    two-pile form of Davidson et al. 2014 that Gunrock uses) - the *near* queue holds the
    vertices whose distance fell below the bucket bound ``thr``; a step relaxes all their
    arcs, improvements below ``thr`` form the next near queue (once per step), the others go
    to the *far* pile (once). When the near queue runs dry, ``thr`` moves up by ``delta``
    (or jumps to the pile's minimum if that bucket is empty) and the pile is split.
    Label-correcting: a vertex may be relaxed more than once (never twice at the same
    distance), in exchange for far fewer synchronised steps than Crauser on long-diameter
    graphs.
``auto``
    ``dijkstra`` on the CPU (one thread: a heap or Dial's buckets do the least work). On
    the GPU, ``delta`` for sparse, road-like graphs (average degree <= 8: long weighted
    diameters, where Crauser's thresholds settle only a thin shell per iteration, so tens
    of thousands of iterations) and ``crauser`` otherwise (low-diameter, scale-free graphs:
    few iterations anyway, and label-setting never re-relaxes a hub's list).

The device loops (``_sssp.cu``) never return to the host between steps: each kernel reads
its mode, queue sizes and threshold from a control block in device memory, and the last
block to finish a step writes the next step's control block. The host launches steps in
batches (8, 16, ... 256, each batch one replayed CUDA graph) and reads one word, the mode,
per batch. :class:`ShortestPaths` keeps the graph, the weights and every buffer on the
device between searches.

Bucket width (``default_delta``): ``mean weight * 128 / average degree`` (Davidson et al.'s
near-far heuristic with 4x their warp's worth of arcs: measured on the H100, the step count
dominates on road-like graphs), at least the smallest positive weight; an integer for
integer weights. Any ``delta > 0`` gives the same answer. On road-like graphs the GPU loop
also uses bucket fusion (``ShortestPaths.fuse_rounds``): blocks relax what they improved
below the bound themselves for a few rounds before it goes to the global queue.

Conventions (the same on every algorithm and backend, bit for bit):

* integer weights (any integer dtype) are summed in int64; real weights (float32 or
  float64) in float64 as a left fold ``d = fl(d + w)`` along the path. fl(a + w) is
  monotone in ``a``, so every correct label-setting or label-correcting algorithm reaches
  the same fixed point: Dijkstra on the CPU and Crauser / delta-stepping on the GPU give
  identical bits.
* unreached vertices: distance -1 (integers) or ``inf`` (reals); predecessor -1.
* predecessors are canonical: the smallest-numbered ``u`` with ``d(u) < d(v)`` and
  ``d(u) + w(u, v) == d(v)``. Zero-weight arcs can leave a vertex with tight tails only at
  its own distance; it then takes the smallest such tail one *hop level* closer, levels
  counted by a BFS over zero-weight tight arcs inside each class of equal distance, from the
  vertices that have a strictly closer tail (level 0). Levels fall by one along each
  predecessor, so the predecessor graph is a forest rooted at the sources.
* weights must be >= 0 (an :class:`InputError` otherwise), and integer sums must stay below
  2**62 (``max weight * (n - 1)``), the unreached marker of the device arrays.

Directed graphs use their arcs; undirected graphs every edge both ways.
"""

from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np

from ..errors import InputError
from .csr import Graph, as_graph
from .frontier import FrontierCore

__all__ = ["sssp", "SSSPResult", "ShortestPaths", "ALGORITHMS", "default_delta",
           "choose_algorithm", "is_road_like"]

ALGORITHMS = ("auto", "dijkstra", "crauser", "delta")
INT_INF = np.int64(1) << np.int64(62)
SPARSE_DEGREE = 8.0


@dataclass
class SSSPResult:
    """Result of :func:`sssp` (arrays indexed by internal vertex number).

    Attributes
    ----------
    dist : ndarray of int64 or float64
        Distance to the nearest source; -1 (integers) or inf (reals) where unreachable.
    pred : ndarray of int64
        Canonical predecessor (see the module docstring); -1 at sources and unreached
        vertices.
    sources : ndarray of int64
    algorithm : str
        The algorithm that ran (``auto`` resolved).
    delta : number or None
        Bucket width (delta-stepping).
    iterations : int
        Heap pops (dijkstra), settle iterations (crauser) or relax rounds (delta).
    """

    dist: np.ndarray
    pred: np.ndarray
    sources: np.ndarray
    algorithm: str
    delta: object = None
    iterations: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def reached(self):
        """Boolean mask of the vertices some source reaches."""
        return self.dist >= 0 if self.dist.dtype.kind == "i" else np.isfinite(self.dist)


# --------------------------------------------------------------------------- CPU Dijkstra

@numba.njit(nogil=True, cache=True, inline="always")
def _heap_push(keys, vals, size, k, v):
    """Sift ``(k, v)`` up a 4-ary min-heap of ``size`` entries; returns the new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 2
        if keys[parent] <= k:
            break
        keys[i] = keys[parent]
        vals[i] = vals[parent]
        i = parent
    keys[i] = k
    vals[i] = v
    return size + 1


@numba.njit(nogil=True, cache=True, inline="always")
def _heap_pop(keys, vals, size):
    """Remove the root of a 4-ary min-heap of ``size`` entries; returns the new size.

    The hole left at the root moves down along the smallest children until the last entry
    fits (a 4-ary heap: half the depth of a binary one, four keys per cache line)."""
    size -= 1
    k = keys[size]
    v = vals[size]
    i = 0
    while True:
        c = 4 * i + 1
        if c >= size:
            break
        best = c
        bk = keys[c]
        last = min(c + 4, size)
        for j in range(c + 1, last):
            if keys[j] < bk:
                bk = keys[j]
                best = j
        if bk >= k:
            break
        keys[i] = bk
        vals[i] = vals[best]
        i = best
    keys[i] = k
    vals[i] = v
    return size


@numba.njit(nogil=True, cache=True)
def _dijkstra_cpu(indptr, indices, weights, sources, dist, inf):
    """Multi-source Dijkstra into ``dist`` (pre-filled with ``inf``); returns the settled
    count. An entry is stale when its key exceeds the vertex's distance (keys of one vertex
    strictly decrease, so exactly one entry per vertex is current)."""
    cap = indices.shape[0] + sources.shape[0] + 1
    keys = np.empty(cap, dist.dtype)
    vals = np.empty(cap, indices.dtype)
    size = 0
    for i in range(sources.shape[0]):
        s = sources[i]
        if dist[s] != 0:
            dist[s] = 0
            size = _heap_push(keys, vals, size, dist[s], s)
    settled = 0
    while size > 0:
        k = keys[0]
        u = vals[0]
        size = _heap_pop(keys, vals, size)
        if k > dist[u]:
            continue
        settled += 1
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            nd = k + weights[e]
            if nd < dist[v]:
                dist[v] = nd
                size = _heap_push(keys, vals, size, nd, v)
    return settled


DIAL_BLOCK = 32  # queue entries per block of a Dial bucket (terrain/native/kernels.c, the same)


def _dial_cpu(indptr, indices, weights, sources, label, max_weight, shift):
    """Multi-source Dijkstra with Dial's bucket queue, for integer weights <= ``max_weight``:
    ``max_weight + 1`` cyclic buckets hold every queued key (all lie in ``[d, d + C]``), so
    a push or a pop is O(1) and the cursor walks the distances once. Returns the settled
    count. The kernel is C (``terrain_dial_*`` in ``terrain/native/kernels.c``, through
    :mod:`terrain.graph._native`).

    ``label[v]`` (pre-filled with the int64 maximum: unreached) packs a vertex's distance
    and predecessor into one word, ``d << shift | p`` (``2**shift - 1 >= n``: no
    predecessor), and every relaxation keeps the smaller of ``(d(u) + w, u)`` and the label:
    one compare improves the distance or, at the same distance, takes a smaller tail, and
    the predecessor sits in the cache line of the distance it belongs to. With positive
    weights every tight tail is settled before ``v`` and relaxes ``v`` once, so the final
    ``p`` is the canonical predecessor, the smallest ``u`` with ``d(u) + w(u, v) == d(v)``,
    without a second pass over the arcs (zero weights need the hop-level rule:
    :meth:`FrontierCore.sssp_parents`; their distances are right all the same). Measured
    against a separate predecessor array written on each improvement and read on each tie
    (CPU seconds per source, 2-core VM, both with the prefetches below, both in Numba):
    RMAT-18 78 -> 64 ms, grid 1000² 106 -> 91 ms. Stale queue entries: the cursor is above
    the vertex's distance.

    A bucket is a LIFO stack of blocks of ``DIAL_BLOCK`` vertex ids (a linked list of
    blocks, not of entries): a pop reads the next id beside the last one instead of chasing
    a pointer into a pool as large as the arc count, and an emptied block goes to a free
    list and is reused while still in cache (measured on RMAT-18: 0.15 -> 0.11 CPU seconds
    per source against one linked entry per push, whose pool also cost page faults).

    The pops of a bucket's top block are known ahead: each pop prefetches the label and row
    offsets of the vertex 6 entries down and the first arcs of the one 3 down. Without the
    hints every settle waits for its cache misses one after the other (a relaxation's
    unpredictable branch ends the core's own look-ahead): they took a source on the 1000²
    grid from 140 to 103 ms (RMAT-18: 95 to 75 ms; CPU seconds, 2-core VM, Numba), and in C
    from 97 to 66 ms (RMAT-18: 76 to 56).
    Prefetching the heads' labels too (a third stage, all of them or the first and last)
    cost more than it saved on both graphs.

    Why C and not Numba (the other CPU twins are Numba): Numba inlined the push with an
    atomic reference-count call per array argument (``NRT_incref``/``NRT_decref``, about
    ten per push), fixed up every index for negative values and kept the arrays' pointers
    in stack slots; the same loop in C took 56 against 90 CPU ms per source on the grid
    (1.6x) with the same labels, and needs no Numba in a process that runs one SSSP.
    """
    from . import _native
    return _native.dial(indptr, indices, weights, sources, label, max_weight, shift)


DIAL_MAX_WEIGHT = 1 << 20


def _dial_labels(label, shift, dist, pred, inf):
    """Unpack :func:`_dial_cpu`'s labels: ``dist`` (``inf`` where unreached) and, when
    ``pred`` has a slot per vertex, the predecessors (-1 at sources and unreached)."""
    from . import _native
    _native.dial_labels(label, shift, dist, pred if pred.shape[0] == label.shape[0] else None,
                        inf)


def _dial_shift(graph, max_weight):
    """Predecessor bits of :func:`_dial_cpu`'s labels, or None when the distances could
    overflow the bits left (the heap runs instead)."""
    shift = max(1, graph.n.bit_length())
    if max_weight * max(graph.n - 1, 1) >= (1 << (63 - shift)) - 1:
        return None
    return shift


# --------------------------------------------------------------------------- helpers

def _sum_weights(graph):
    """``(weights, smallest, largest)``: the graph's weights in the dtype distances are
    summed in (int64 or float64), on the host, checked: >= 0, no NaN, integer sums
    bounded; their extremes as Python numbers (0 when there are none). Unweighted graphs
    weigh 1."""
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
    if w.dtype.kind == "i" and high * max(graph.n - 1, 1) >= int(INT_INF):
        raise InputError(f"{graph.name}: edge weights up to {high} could overflow exact "
                         "int64 path sums (at most 2**62)")
    return w, low, high


DELTA_ARCS = 128.0   # default_delta: arcs' worth of mean weight per bucket, per unit degree


def default_delta(weights, n, nnz):
    """Bucket width: the mean weight times ``DELTA_ARCS`` (128) / average degree, at least
    the smallest positive weight; an integer for integer weights.

    Davidson et al.'s near-far heuristic uses 32 (a warp's worth of arcs per vertex); on the
    H100 a sweep over road-like graphs of 24 M vertices (grid, random geometric) found the
    step count, not the extra relaxations, to be the cost, and 4x wider buckets 15-20 %
    faster than 32 (docs/benchmarks.md); on RMAT the width hardly matters (16-17 ms for
    widths 25-100).

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
    """``auto``'s choice (see the module docstring): ``dijkstra`` on the CPU; on the GPU
    ``delta`` for road-like graphs (:func:`is_road_like`), else ``crauser``.

    Examples
    --------
    >>> from terrain.backend import get_backend
    >>> from terrain.graph.csr import build_csr
    >>> choose_algorithm(build_csr(3, [0, 1], [1, 2]), get_backend("cpu"))
    'dijkstra'
    """
    if not backend.is_gpu:
        return "dijkstra"
    return "delta" if is_road_like(graph) else "crauser"


def _min_per_row(indptr, values, empty):
    out = np.full(indptr.size - 1, empty, values.dtype)
    deg = np.diff(indptr)
    rows = np.flatnonzero(deg)
    if rows.size:
        out[rows] = np.minimum.reduceat(values, indptr[rows])
    return out


# --------------------------------------------------------------------------- CPU twins of
# the device loops (_sssp.cu): the same queues, thresholds and criteria, one thread


@numba.njit(nogil=True, cache=True)
def _seed_sources(sources, dist, queue):
    """Distance 0 at every source, each queued once (a repeated source is skipped); returns
    the queue's length. The CPU twins' common start."""
    count = 0
    for i in range(sources.shape[0]):
        s = sources[i]
        if dist[s] != 0:
            dist[s] = 0
            queue[count] = s
            count += 1
    return count


@numba.njit(nogil=True, cache=True)
def _nearfar_cpu(indptr, indices, weights, sources, dist, delta, inf, tiny):
    """Near-far delta-stepping into ``dist`` (pre-filled with ``inf``): the twin of
    ``nearfar_step``. ``tiny`` (0 for integers) is the relative step that moves a real
    threshold past ``thr`` when ``thr + delta`` rounds back to it. Returns the steps run."""
    n = dist.shape[0]
    relaxed_at = np.full(n, inf, dist.dtype)
    stamp = np.full(n, -1, np.int64)
    in_far = np.zeros(n, np.uint8)
    near = np.empty(max(n, 1), indices.dtype)
    nxt = np.empty(max(n, 1), indices.dtype)
    far = np.empty(max(n, 1), indices.dtype)
    far2 = np.empty(max(n, 1), indices.dtype)
    nn = _seed_sources(sources, dist, near)
    nf = 0
    thr = dist.dtype.type(delta)
    step = 0
    while nn > 0 or nf > 0:
        cnt = 0
        if nn > 0:                                       # relax the near queue
            for i in range(nn):
                u = near[i]
                du = dist[u]
                if not du < relaxed_at[u]:
                    continue
                relaxed_at[u] = du
                for e in range(indptr[u], indptr[u + 1]):
                    v = indices[e]
                    nd = du + weights[e]
                    if nd < dist[v]:
                        dist[v] = nd
                        if nd < thr:
                            if stamp[v] != step:
                                stamp[v] = step
                                nxt[cnt] = v
                                cnt += 1
                        elif in_far[v] == 0:
                            in_far[v] = 1
                            far[nf] = v
                            nf += 1
        else:                                            # split the far pile
            thr_new = thr + delta
            if not thr_new > thr:
                thr_new = thr + thr * tiny
            low = inf
            nf2 = 0
            for i in range(nf):
                v = far[i]
                d = dist[v]
                if d < thr_new:
                    in_far[v] = 0
                    if not d < thr:
                        nxt[cnt] = v
                        cnt += 1
                else:
                    far2[nf2] = v
                    nf2 += 1
                    low = min(low, d)
            far, far2 = far2, far
            nf = nf2
            thr = thr_new if cnt > 0 else low
        near, nxt = nxt, near
        nn = cnt
        step += 1
    return step


@numba.njit(nogil=True, cache=True)
def _crauser_cpu(indptr, indices, weights, min_in, min_out, sources, dist, inf):
    """Crauser's IN/OUT settling into ``dist`` (pre-filled with ``inf``): the twin of
    ``crauser_bounds`` + ``crauser_settle``. Returns the iterations run."""
    n = dist.shape[0]
    settled = np.zeros(n, np.uint8)
    fringe = np.empty(max(n, 1), indices.dtype)
    nxt = np.empty(max(n, 1), indices.dtype)
    nf = _seed_sources(sources, dist, fringe)
    iterations = 0
    while nf > 0:
        low = inf
        out_bound = inf
        for i in range(nf):
            v = fringe[i]
            low = min(low, dist[v])
            out_bound = min(out_bound, dist[v] + min_out[v])
        cnt = 0
        for i in range(nf):
            v = fringe[i]
            d = dist[v]
            if d <= low + min_in[v] or d <= out_bound:
                settled[v] = 1
                for e in range(indptr[v], indptr[v + 1]):
                    x = indices[e]
                    if settled[x]:
                        continue
                    nd = d + weights[e]
                    if nd < dist[x]:
                        if dist[x] == inf:
                            nxt[cnt] = x
                            cnt += 1
                        dist[x] = nd
            else:
                nxt[cnt] = v
                cnt += 1
        fringe, nxt = nxt, fringe
        nf = cnt
        iterations += 1
    return iterations


# --------------------------------------------------------------------------- the solver

_C_MODE, _C_STEP, _C_NEAR_SEL, _C_NEAR_N, _C_WORK, _C_SPLITS = 0, 1, 2, 3, 9, 10
_C_WORDS = 16
_M_DONE = 2
_BLOCK = 256                 # threads per block (must match _sssp.cu)
_BLOCKS_PER_SM = 4
_MAX_BATCH = 256             # steps launched between two reads of the mode word
FUSE_ROUNDS = 16             # GPU near-far on road-like graphs: bucket-fusion rounds per step


class ShortestPaths:
    """SSSP state of one graph on one backend, reused across searches (benchmarks, the
    weighted diameter's many Dijkstras): weights in the summing dtype and, on the GPU, the
    graph, the queues and the control block stay on the device.

    Parameters
    ----------
    graph : Graph
    backend : str or Backend, optional
    graphs : bool
        GPU: replay each batch of device steps as one CUDA graph (fewer launch overheads);
        plain launches when False or when CuPy cannot capture.

    Examples
    --------
    >>> from terrain.graph.csr import build_csr
    >>> sp = ShortestPaths(build_csr(3, [0, 1], [1, 2], weights=[5, 2]), "cpu")
    >>> sp.run([0], "delta").dist.tolist()
    [0, 5, 7]
    """

    def __init__(self, graph, backend=None, *, graphs=True):
        from ..backend import get_backend
        if not isinstance(graph, Graph):
            raise TypeError(f"ShortestPaths: expected a Graph, got {type(graph).__name__}")
        self.graph = graph
        self.backend = b = get_backend(backend)
        self.weights, low, self._w_max = _sum_weights(graph)
        self.is_float = self.weights.dtype.kind == "f"
        self.inf = np.float64(np.inf) if self.is_float else INT_INF
        self.core = FrontierCore(graph, b)
        self.w = b.asarray(self.weights)
        self._minima = None
        self._default_delta = None
        self._has_zero = bool(self.weights.size) and low == 0   # weights are >= 0
        self._gpu = None
        self._use_graphs = graphs
        # bucket fusion pays on long-diameter graphs (grid 24 M: 122 -> 103 ms) and costs
        # on scale-free ones (RMAT-21: 17 -> 82 ms: hub lists serialise a block's rounds)
        self.fuse_rounds = FUSE_ROUNDS if is_road_like(graph) else 0

    # ------------------------------------------------------------------ shared
    def min_in_out(self):
        """Per vertex, the smallest incoming and outgoing arc weight (``inf`` when none)."""
        if self._minima is None:
            g, w = self.graph, self.weights
            min_out = _min_per_row(g.indptr, w, self.inf)
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
        """Distances (and canonical predecessors) from ``sources`` (unique internal ids).

        Returns an :class:`SSSPResult` whose arrays live on the backend (GPU: ``dist`` is
        this solver's buffer, valid until the next run; integer distances keep ``inf``,
        2**62, for unreached vertices).
        """
        b = self.backend
        g = self.graph
        src = np.unique(np.asarray(sources, dtype=np.int64))
        if algorithm == "auto":
            algorithm = choose_algorithm(g, b)
        if algorithm == "delta":
            delta = self.default_delta() if delta is None else delta
            if not delta > 0:
                raise InputError(f"delta must be > 0, got {delta}")
            delta = float(delta) if self.is_float else int(np.ceil(delta))
        else:
            delta = None
        if algorithm == "dijkstra" and b.is_gpu:
            raise ValueError("sssp: 'dijkstra' is the CPU algorithm (use crauser or delta on "
                             "the GPU)")
        extra = {}
        if b.is_gpu:
            with self._device().stream:
                dist, iterations, extra = self._run_gpu(src, algorithm, delta)
                pred = self._preds(dist, src) if predecessors else None
            self._gpu.stream.synchronize()
        else:
            w, inf = self.weights, self.inf
            w_max = self._w_max
            shift = _dial_shift(g, w_max) if algorithm == "dijkstra" and not self.is_float \
                and w_max <= min(DIAL_MAX_WEIGHT, 4 * g.n + 16) else None
            dist = np.full(g.n, inf, w.dtype) if shift is None else np.empty(g.n, w.dtype)
            fused = False
            if shift is not None:
                # predecessors kept while relaxing when no weight is zero
                fused = predecessors and not self._has_zero
                label = np.full(g.n, np.iinfo(np.int64).max, np.int64)
                # the weights as stored (int32 ones stream half the bytes; the kernel
                # sums in int64 all the same)
                dial_w = g.weights if g.weights is not None and \
                    g.weights.dtype == np.int32 else w
                iterations = int(_dial_cpu(g.indptr, g.indices, dial_w, src, label, w_max,
                                           shift))
                pred = np.empty(g.n if fused else 0, np.int64)
                _dial_labels(label, shift, dist, pred, inf)
                del label
            elif algorithm == "dijkstra":
                iterations = int(_dijkstra_cpu(g.indptr, g.indices, w, src, dist, inf))
            elif algorithm == "crauser":
                min_in, min_out = self.min_in_out()
                iterations = int(_crauser_cpu(g.indptr, g.indices, w, min_in, min_out,
                                              src.astype(g.indices.dtype), dist, inf))
            else:
                tiny = w.dtype.type(2.0 ** -50 if self.is_float else 0)
                iterations = int(_nearfar_cpu(g.indptr, g.indices, w,
                                              src.astype(g.indices.dtype), dist,
                                              w.dtype.type(delta), inf, tiny))
            if not fused:
                pred = self._preds(dist, src) if predecessors else None
        return SSSPResult(dist, pred, src, algorithm, delta, iterations, extra)

    def _preds(self, dist, src):
        if not self.backend.is_gpu or self._has_zero:
            return self.core.sssp_parents(dist, self.w, self.inf, self.backend.asarray(src))
        # no zero weights: pass 1 of the core's rule is the whole rule; run it
        # load-balanced (hub lists over a block), which matters on scale-free graphs
        st = self._gpu
        big = np.iinfo(np.int64).max
        pred = st.pred
        pred.fill(big)
        st.kernel("tight_tails")((st.blocks,), (_BLOCK,), (
            self.core.indptr, self.core.indices, self.w, dist,
            self.weights.dtype.type(self.inf), pred, np.int64(self.graph.n)))
        return self.backend.xp.where(pred == big, np.int64(-1), pred)

    # ------------------------------------------------------------------ GPU
    def _device(self):
        if self._gpu is None:
            self._gpu = _DeviceState(self)
        return self._gpu

    def _run_gpu(self, src, algorithm, delta):
        st = self._gpu
        cp = self.backend.xp
        dt = self.weights.dtype.type
        st.dist.fill(self.inf)
        ctl = np.zeros(_C_WORDS, np.int64)
        ctl[_C_NEAR_N] = src.size
        st.ctl.set(ctl, stream=st.stream)
        d_src = cp.asarray(src.astype(self.core.index_dtype))
        st.queues[0][:src.size] = d_src
        st.dist[d_src] = 0
        if algorithm == "delta":
            st.relaxed_at.fill(self.inf)
            st.stamp.fill(-1)
            st.in_far.fill(0)
            st.wctl.set(np.array([dt(delta), self.inf, 0, 0], self.weights.dtype),
                        stream=st.stream)
            key = ("delta", delta, self.fuse_rounds)
            args = (self.core.indptr, self.core.indices, self.w, st.dist, st.relaxed_at,
                    st.stamp, st.in_far, st.queues[0], st.queues[1], st.queues[2],
                    st.queues[3], st.ctl, st.wctl, dt(delta), dt(self.inf),
                    np.int32(self.fuse_rounds))
            kernels = ((st.kernel("nearfar_step"), args),)
        else:
            min_in, min_out = self.min_in_out()
            st.settled.fill(0)
            st.wctl.set(np.array([self.inf, self.inf, 0, 0], self.weights.dtype),
                        stream=st.stream)
            key = ("crauser",)
            kernels = ((st.kernel("crauser_bounds"),
                        (st.queues[0], st.queues[1], st.dist, min_out, st.ctl, st.wctl,
                         dt(self.inf))),
                       (st.kernel("crauser_settle"),
                        (self.core.indptr, self.core.indices, self.w, st.dist, min_in,
                         st.settled, st.queues[0], st.queues[1], st.ctl, st.wctl,
                         dt(self.inf))))
        batch, launched = 8, 0
        limit = 64 * (self.graph.n + 1024)   # far above any real run: a guard, not a bound
        while True:
            st.launch(key, kernels, batch)
            launched += batch
            if int(st.ctl[_C_MODE:_C_MODE + 1].get(stream=st.stream)[0]) == _M_DONE:
                break
            if launched > limit:
                raise RuntimeError(f"sssp: the device {algorithm} loop did not finish in "
                                   f"{launched} steps")
            batch = min(2 * batch, _MAX_BATCH)
        words = st.ctl.get(stream=st.stream)
        extra = {"arcs_scanned": int(words[_C_WORK]), "splits": int(words[_C_SPLITS])}
        return st.dist, int(words[_C_STEP]), extra


class _DeviceState:
    """Device buffers, kernels and captured step batches of a :class:`ShortestPaths`."""

    def __init__(self, solver):
        b = solver.backend
        cp = b.xp
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
        self._kernels = {k: module.get_function(v) for k, v in names.items()}
        with self.stream:
            self.dist = cp.empty(n, wdt)
            self.relaxed_at = cp.empty(n, wdt)
            self.stamp = cp.empty(n, np.int32)
            self.in_far = cp.empty(n, np.int32)
            self.settled = cp.empty(n, np.uint8)
            self.pred = cp.empty(n, np.int64)
            self.queues = tuple(cp.empty(n, core.index_dtype) for _ in range(4))
            self.ctl = cp.zeros(_C_WORDS, np.int64)
            self.wctl = cp.zeros(4, wdt)
        props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
        self.blocks = props["multiProcessorCount"] * _BLOCKS_PER_SM
        self.use_graphs = solver._use_graphs
        self._graphs = {}

    def kernel(self, name):
        return self._kernels[name]

    def _launch_plain(self, kernels, count):
        for _ in range(count):
            for k, args in kernels:
                k((self.blocks,), (_BLOCK,), args)

    def launch(self, key, kernels, count):
        """``count`` steps (each: the kernels in order) on this state's stream."""
        if not self.use_graphs:
            return self._launch_plain(kernels, count)
        graph = self._graphs.get((key, count))
        if graph is None:
            try:
                self.stream.begin_capture()
                try:
                    self._launch_plain(kernels, count)
                finally:
                    graph = self.stream.end_capture()
            except Exception:           # no stream capture in this CuPy / driver
                self.use_graphs = False
                return self._launch_plain(kernels, count)
            self._graphs[(key, count)] = graph
        graph.launch(self.stream)


def _is_networkx(obj):
    return hasattr(obj, "nodes") and hasattr(obj, "adj") and not isinstance(obj, Graph)


def sssp(graph, sources, algorithm="auto", delta=None, backend=None, *, directed=None,
         by_id=None, predecessors=True):
    """Shortest-path distances (and canonical predecessors) from one source or many.

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices[, weights])
        Weighted (unweighted graphs weigh 1 per edge); weights >= 0.
    sources : int or sequence
        Internal vertex numbers; for a networkx graph (or ``by_id=True``) its nodes / ids.
    algorithm : {'auto', 'dijkstra', 'crauser', 'delta'}
        See the module docstring; every one gives the same result.
    delta : number, optional
        Bucket width for ``delta`` (default :func:`default_delta`).
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional
    directed : bool, optional
        Passed to :func:`terrain.graph.as_graph` (networkx: as the graph is; matrices:
        undirected unless True).
    by_id : bool, optional
        Sources are the graph's own ids (default: True for networkx graphs only).
    predecessors : bool
        Also compute predecessors (one more pass over the arcs).

    Returns
    -------
    SSSPResult

    Raises
    ------
    InputError
        Negative or NaN weights, a source that is not a vertex (by id).

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.Graph([(0, 1, {"weight": 4}), (1, 2, {"weight": 1}), (0, 2, {"weight": 7})])
    >>> r = sssp(G, 0, backend="cpu")
    >>> r.dist.tolist(), r.pred.tolist()
    ([0, 4, 5], [-1, 0, 1])
    >>> sssp(G, [0, 2], algorithm="crauser", backend="cpu").dist.tolist()
    [0, 1, 0]
    """
    from ..backend import get_backend
    if algorithm not in ALGORITHMS:
        raise ValueError(f"sssp: algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
    if by_id is None:
        by_id = _is_networkx(graph)
    g = as_graph(graph, directed=directed)
    if by_id:
        # a node may itself be a tuple: only lists and arrays are several sources
        ids = list(sources) if isinstance(sources, (list, np.ndarray)) else [sources]
        if not ids:
            raise ValueError("sssp: at least one source is needed")
        src = g.index_of(ids, what="source vertex")
    else:
        src = np.atleast_1d(np.asarray(sources))
        if src.size == 0:
            raise ValueError("sssp: at least one source is needed")
        if src.dtype.kind not in "iu":
            raise ValueError(f"sssp: sources must be integers, got {src.dtype}")
        bad = src[(src < 0) | (src >= g.n)]
        if bad.size:
            raise ValueError(f"sssp: source {int(bad[0])} is not a vertex (0..{g.n - 1})")
    if algorithm == "dijkstra" and get_backend(backend).is_gpu:
        raise ValueError("sssp: 'dijkstra' is the CPU algorithm (use crauser or delta on "
                         "the GPU)")
    r = ShortestPaths(g, backend).run(src, algorithm, delta, predecessors)
    b = get_backend(backend)
    dist = b.to_numpy(r.dist).copy() if b.is_gpu else r.dist
    if r.pred is not None:
        r.pred = b.to_numpy(r.pred)
    if dist.dtype.kind == "i":
        dist[dist == INT_INF] = -1      # in place: the array is this call's own
    r.dist = dist
    return r

