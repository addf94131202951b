"""Minimum spanning forest of a general weighted graph: Borůvka with packed keys.

Each undirected edge (``u < v``, in CSR order: its *edge id*) gets the unique key
``rank(w) << id_bits | edge id``, so the forest is unique on every backend. One round loop
runs over CUDA kernels (``_mst.cu``) or their sequential C twins (``terrain_mst_*``), chosen
once (``_CpuOps`` / ``_GpuOps``): ``extract`` the edge list, solve the light edges first
(ECL-MST's filter), then ``offer`` / ``join`` rounds over a worklist. Design, figures and why
by hand: docs/graphs.md ("MST of a general graph").
"""

import functools
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._transfer import to_device, to_host
from ..backend import get_backend
from ..errors import InputError
from . import _native
from ._native import _p
from .csr import as_graph, weight_dtype

__all__ = ["minimum_spanning_forest", "MSTResult"]

BLOCK = 256
NONE_KEY = np.int64(np.iinfo(np.int64).max)
# key modes of extract: 1 = rank from the weight (int32, float32), 2 = unweighted (rank 0),
# 0 = keys made afterwards (int64, float64: may need a sort)
KEY_LATER, KEY_FROM_WEIGHT, KEY_UNWEIGHTED = 0, 1, 2
# edge filtering: light edges ~ LIGHT_PER_VERTEX * n when m >= FILTER_MIN_DEGREE * n
LIGHT_PER_VERTEX = 1.2
FILTER_MIN_DEGREE = 1.5
SAMPLE = 1024
LONG_ROW = 512          # rows of more upper arcs than this: extract_long (_mst.cu's LONG_ROW)
LONG_ROW_BLOCKS = 1024  # extract_long's blocks (grid-stride over the long rows)
_MAX_OFFERS = 512
_C_TYPES = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long",
            np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


@dataclass
class MSTResult:
    """Result of :func:`minimum_spanning_forest`.

    Attributes
    ----------
    u, v : ndarray
        The graph's ids of the forest's edges' ends (docs/graphs.md, "Vertex ids"; ``u``'s
        internal number below ``v``'s), in edge-id order: row numbers (the graph's index
        dtype, int32 below 2**31 vertices) for a matrix or arrays, else int64 file ids or
        networkx nodes. CuPy arrays for a graph given on the device; for a host graph on
        the GPU, NumPy arrays in pinned host memory (CuPy's pool), as are ``weight`` and
        ``edge_ids`` (``u`` and ``v`` copied out where the ids are not row numbers).
    weight : ndarray
        Their weights (the graph's dtype; int64 ones when unweighted).
    edge_ids : ndarray of int32 (int64 from 2**31 edges)
        Their positions among the graph's ``u < v`` edges in CSR order.
    total_weight : int or float
    trees : int
        Trees of the forest (connected components, isolated vertices included).
    rounds : int
        Borůvka rounds (``join`` passes, both phases of the edge filter).
    extra : dict
        ``worklist`` (edges between components per round), ``light_threshold``; on the GPU
        ``device_seconds`` and, for a host graph, ``phase_seconds``.
    """

    u: np.ndarray
    v: np.ndarray
    weight: np.ndarray
    edge_ids: np.ndarray
    total_weight: object
    trees: int
    rounds: int
    extra: dict = field(default_factory=dict)


_W_KINDS = {"f": {4: 2, 8: 3}, "i": {4: 1, 8: 1}, "u": {4: 1, 8: 1}}


def _host_upper_arcs(g):
    """``(count, ev, w_e)`` of a host graph (one pass); ``w_e`` a dummy when unweighted."""
    n, m = g.n, g.m
    it = g.indices.dtype
    weights = g.weights if g.weights is not None else np.zeros(1, np.int32)
    count = np.empty(n, it)
    ev = np.empty(m, it)
    w_e = np.empty(m if g.weights is not None else 1, weights.dtype)
    out = np.zeros(2, np.int64)
    size = weights.dtype.itemsize if g.weights is not None else 0
    kind = _W_KINDS[weights.dtype.kind][weights.dtype.itemsize] if size else 0
    _native.traversal_kernels(it)["mst_upper"](
        _p(g.indptr), _p(g.indices), _p(np.ascontiguousarray(weights)), size, kind, 0, n,
        _p(count), _p(ev), _p(w_e), m, _p(out))
    _check_upper_arcs(g.name, int(out[0]), m, bool(out[1]))
    return count, ev, w_e


def _check_upper_arcs(name, e, m, nan):
    if nan:
        raise InputError(f"{name}: NaN edge weight")
    if e != m:  # e < 0: more arcs u < v than edges
        raise InputError(f"{name}: adjacency not symmetric (its arcs u < v are not half of "
                         f"its {2 * m} arcs)")


def _key_mode(weights_dtype, m):
    """``(key mode, id bits)`` for ``m`` edges with weights of ``weights_dtype`` (None:
    unweighted)."""
    id_bits = max(1, int(m - 1).bit_length())
    if weights_dtype is None:
        return KEY_UNWEIGHTED, id_bits
    if weights_dtype in (np.int32, np.float32) and id_bits <= 31:
        return KEY_FROM_WEIGHT, id_bits  # the 32-bit rank leaves 31 bits for ids
    return KEY_LATER, id_bits


def _later_keys(w_e, id_bits, xp):
    """Keys of int64 / float64 weights: ``w - min`` when the range fits, else the rank
    among the distinct weights (a sort)."""
    m = int(w_e.shape[0])
    rank = None
    if w_e.dtype.kind in "iu":
        low, high = int(w_e.min()), int(w_e.max())
        if (high - low).bit_length() + id_bits <= 63:
            rank = w_e.astype(np.int64) - low
    if rank is None:
        _, rank = xp.unique(w_e, return_inverse=True)
        rank = rank.reshape(-1).astype(np.int64)
        if max(1, int(rank.max()).bit_length()) + id_bits > 63:
            raise InputError(f"too many edges and distinct weights to pack into 64-bit keys "
                             f"({m} edges)")
    return (rank << id_bits) | xp.arange(m, dtype=np.int64)


def _light_threshold(key, n, m, xp):
    """The edge filter's light/heavy key threshold (None: no filtering): the quantile of
    ``LIGHT_PER_VERTEX * n`` edges in a strided sample, when ``m >= FILTER_MIN_DEGREE * n``."""
    if m < FILTER_MIN_DEGREE * n or m < SAMPLE:
        return None
    q = int(SAMPLE * LIGHT_PER_VERTEX * n / m)
    if q >= SAMPLE:
        return None
    sample = xp.sort(key[(xp.arange(SAMPLE, dtype=np.int64) * m) // SAMPLE])
    return int(sample[q])


class _CpuOps:
    """The operators on the CPU: sequential C twins (``terrain_mst_*``, ``kernels.c``)."""

    xp = np

    def __init__(self, it):
        self.k = _native.traversal_kernels(it)

    def extract(self, count, csr, mode, id_bits, eu, ev, w_e, key):
        kind = 2 if w_e.dtype == np.float32 else 1
        self.k["mst_extract"](_p(count), count.size, _p(w_e), mode, kind, id_bits, _p(eu),
                              _p(key))

    def offer(self, src, n_in, lo, hi, dst, parent, best, slot):
        return int(self.k["mst_offer"](*map(_p, src), n_in, lo, hi, _p(parent), _p(best),
                                       *map(_p, dst)))

    def join(self, wl, n, parent, best, id_mask, in_forest):
        self.k["mst_join"](*map(_p, wl), n, _p(parent), _p(best), id_mask, _p(in_forest))


@functools.lru_cache(maxsize=None)
def _gpu_kernels(b, it, wt):
    """The ``_mst.cu`` kernels for index dtype ``it`` and weight dtype ``wt``."""
    it, wt = _C_TYPES[np.dtype(it)], _C_TYPES[np.dtype(wt)]
    names = {"count_upper": f"count_upper<{it}>", "extract": f"extract<{it}, {wt}>",
             "extract_long": f"extract_long<{it}, {wt}>", "offer": f"offer<{it}>",
             "join": f"join<{it}>", "check_arcs": f"check_arcs<{it}>"}
    module = b.cuda_module(Path(__file__).with_name("_mst.cu"),
                           name_expressions=tuple(names.values()))
    return {k: module.get_function(v) for k, v in names.items()}


class _GpuOps:
    """The operators on the GPU (``_mst.cu``); one per call (``counts``: the rounds'
    worklist lengths, appended to atomically, zero at the start)."""

    def __init__(self, b, it, wt):
        cp = self.xp = b.xp
        self.kern = _gpu_kernels(b, np.dtype(it), np.dtype(wt))
        self.counts = cp.zeros(_MAX_OFFERS, np.uint64)

    @staticmethod
    def grid(work):
        return (max(1, min(1 << 20, -(-int(work) // BLOCK))),)

    def count_upper(self, indptr, indices):
        n = int(indptr.shape[0]) - 1
        count = self.xp.empty(max(n, 1), indices.dtype)
        self.kern["count_upper"](self.grid(n), (BLOCK,),
                                 (indptr, indices, np.int64(n), count))
        return count[:n]

    def check_arcs(self, indptr, indices):
        """True when every head is in ``[0, n)`` and every row strictly increasing
        (``indptr`` known to rise from 0 to ``len(indices)``)."""
        cp = self.xp
        n, nnz = int(indptr.shape[0]) - 1, int(indices.shape[0])
        row_start = cp.zeros(nnz + 1, np.uint8)
        row_start[indptr] = 1
        bad = cp.zeros(1, np.int32)
        self.kern["check_arcs"](self.grid(nnz), (BLOCK,),
                                (indices, row_start, np.int64(nnz), np.int64(n), bad))
        return not int(bad[0])

    def extract(self, count, csr, mode, id_bits, eu, ev, w_e, key):
        """``eu`` and ``key`` from ``count``; with ``csr = (indptr, indices, weights)``
        also gathers ``ev`` and ``w_e`` from it (a device graph)."""
        cp = self.xp
        n = int(count.shape[0])
        first = cp.cumsum(count, dtype=np.int64)
        first -= count
        gather = csr is not None
        indptr, indices, weights = csr if gather else (first, ev, w_e)  # unread dummies
        long_rows = cp.empty(int(eu.shape[0]) // LONG_ROW + 1, np.int64)
        n_long = cp.zeros(1, np.uint64)
        rows = (max(1, -(-n // BLOCK)),)  # one thread per row, no grid-stride
        tail = (np.int32(gather), np.int32(mode), np.int32(id_bits), eu, ev, w_e, key,
                long_rows, n_long)
        self.kern["extract"](rows, (BLOCK,), (indptr, indices, weights, np.int64(n), count,
                                              first, *tail))
        self.kern["extract_long"]((LONG_ROW_BLOCKS,), (BLOCK,),
                                  (indptr, indices, weights, count, first, *tail))

    def offer(self, src, n_in, lo, hi, dst, parent, best, slot):
        if slot >= _MAX_OFFERS:  # pragma: no cover - Borůvka halves the components a round
            raise RuntimeError("minimum_spanning_forest: no convergence")
        self.kern["offer"](self.grid(n_in), (BLOCK,),
                           (*src, np.int64(n_in), np.int64(lo), np.int64(hi), parent, best,
                            *dst, self.counts[slot:]))
        return int(self.counts[slot].get())  # the round's one host read

    def join(self, wl, n, parent, best, id_mask, in_forest):
        self.kern["join"](self.grid(n), (BLOCK,),
                          (*wl, np.int64(n), parent, best, np.int64(id_mask), in_forest))


def _boruvka(ops, n, count, ev, w_e, mode, id_bits, csr=None):
    """The shared core: keys, the edge filter, the rounds. Returns ``(eu, chosen edge ids
    (increasing), worklist lengths, light threshold, in_forest)``."""
    xp = ops.xp
    m = int(ev.shape[0])
    it = ev.dtype
    eu = xp.empty(m, it)
    key = xp.empty(m, np.int64)
    ops.extract(count, csr, mode, id_bits, eu, ev, w_e, key)
    if mode == KEY_LATER and m:
        key = _later_keys(w_e, id_bits, xp)
    threshold = _light_threshold(key, n, m, xp)
    phases = [(-1, NONE_KEY)] if threshold is None else [(-1, threshold),
                                                          (threshold, NONE_KEY)]
    parent = xp.arange(n, dtype=it)
    best = xp.full(n, NONE_KEY, np.int64)
    in_forest = xp.zeros(max(m, 1), np.uint8)
    id_mask = (1 << id_bits) - 1
    buffers = [(xp.empty(m, it), xp.empty(m, it), xp.empty(m, np.int64)) for _ in range(2)]
    worklist = []
    slot = 0
    for lo, hi in phases:
        src, n_in, dst = (eu, ev, key), m, 0
        while n_in:
            n_out = ops.offer(src, n_in, lo, hi, buffers[dst], parent, best, slot)
            slot += 1
            if not n_out:
                break
            ops.join(buffers[dst], n_out, parent, best, id_mask, in_forest)
            worklist.append(n_out)
            src, n_in, dst, lo, hi = buffers[dst], n_out, 1 - dst, -1, NONE_KEY
    del buffers, parent, best, key
    return eu, xp.flatnonzero(in_forest[:m]), worklist, threshold, in_forest[:m]


def _int_sums(weights):
    """The high and low 32 bits of integer weights (NumPy or CuPy) summed apart: neither sum
    can overflow int64 below 2**31 edges, where one int64 sum wraps round (a thousand
    weights of -1e17); :func:`_int_total` joins them."""
    w = weights.astype(np.int64, copy=False)
    return (w >> 32).sum(dtype=np.int64), (w & 0xFFFFFFFF).sum(dtype=np.int64)


def _int_total(sums):
    """The exact total of :func:`_int_sums` as a Python int."""
    return (int(sums[0]) << 32) + int(sums[1])


def _total(weights, count):
    """The forest's total: the exact integer sum, ``math.fsum`` of floats, the edge count
    unweighted."""
    if weights is None:
        return int(count)
    if weights.dtype.kind in "iu":
        return _int_total(_int_sums(weights))
    host = weights if isinstance(weights, np.ndarray) else weights.get()
    try:
        return math.fsum(host.astype(np.float64).tolist())
    except OverflowError:  # beyond float64's range: NetworkX's total is inf too
        return math.inf


def _forest_cpu(g, b=None):
    count, ev, w_e = _host_upper_arcs(g)
    mode, id_bits = _key_mode(g.weights.dtype if g.weights is not None else None, g.m)
    eu, chosen, worklist, threshold, _ = _boruvka(_CpuOps(ev.dtype), g.n, count, ev, w_e,
                                                  mode, id_bits)
    weights = w_e[chosen] if g.weights is not None else None
    extra = {"worklist": worklist, "light_threshold": threshold}
    return _result(g.n, g.m, eu[chosen], ev[chosen], weights, chosen, worklist, extra, np)


def _result(n, m, u, v, weights, chosen, worklist, extra, xp, total=None):
    total = _total(weights, chosen.size) if total is None else total
    if weights is None:
        weights = xp.ones(int(chosen.size), np.int64)
    ids = chosen.astype(np.int32 if m < 2**31 else np.int64, copy=False)
    return MSTResult(u, v, weights, ids, total, n - int(chosen.size), len(worklist), extra)


def _wire_weight_dtype(weights):
    """The narrowest integer dtype below ``weights``'s that a strided sample fits (None:
    none, or floats); a guess the upload checks (it resends at full width)."""
    if weights.dtype.kind not in "iu" or weights.size == 0:
        return None
    sample = weights[::max(1, weights.size // SAMPLE)]
    lo, hi = int(sample.min()), int(sample.max())
    for dt in map(np.dtype, (np.uint8, np.int8, np.uint16, np.int16, np.int32)):
        info = np.iinfo(dt)
        if dt.itemsize < weights.dtype.itemsize and info.min <= lo and hi <= info.max:
            return dt
    return None


def _upload_csr(g, cp):
    """``([indptr, indices, weights], copies)``: the host graph on the device as it crossed
    (``indptr`` as int32 below 2**31 arcs, integer weights narrowed); keep ``copies`` until
    they are done."""
    weighted = g.weights is not None
    host = [g.indptr, g.indices] + ([g.weights] if weighted else [])
    wire = [a.dtype for a in host]
    if g.nnz < 2**31:
        wire[0] = np.dtype(np.int32)
    if weighted:
        wire[2] = _wire_weight_dtype(g.weights) or wire[2]
    dev = [cp.empty(a.shape, d) for a, d in zip(host, wire)]
    copies = [to_device(cp, host, dev)]
    again = [i for i, fits in enumerate(copies[0].fits) if not fits]
    if again:  # a value outside the sample's range: those arrays again at full width
        for i in again:
            dev[i] = cp.empty(host[i].shape, host[i].dtype)
        copies.append(to_device(cp, [host[i] for i in again], [dev[i] for i in again]))
    return dev, copies


def _forest_gpu(g, b):
    """A host graph on the GPU: upload (narrowed), device Borůvka, download (pinned)."""
    cp = b.xp
    n, m = g.n, g.m
    weighted = g.weights is not None
    it = g.indices.dtype
    ops = _GpuOps(b, np.dtype(it), np.dtype(g.weights.dtype if weighted else np.int32))
    mode, id_bits = _key_mode(g.weights.dtype if weighted else None, m)
    start, uploaded, computed = cp.cuda.Event(), cp.cuda.Event(), cp.cuda.Event()
    start.record()
    csr, copies = _upload_csr(g, cp)
    uploaded.record()
    csr[0] = csr[0].astype(np.int64, copy=False)  # widened on the device
    if weighted:
        csr[2] = csr[2].astype(g.weights.dtype, copy=False)
    else:
        csr.append(cp.zeros(1, np.int32))
    count = ops.count_upper(csr[0], csr[1])
    upper = int(count.sum(dtype=np.int64))
    nan = weighted and csr[2].dtype.kind == "f" and bool(cp.isnan(csr[2]).any())
    if nan or upper != m:
        _check_upper_arcs(g.name, upper, m, nan)
    ev = cp.empty(m, it)
    w_e = cp.empty(m, csr[2].dtype) if weighted else cp.zeros(1, np.int32)
    eu, chosen, worklist, threshold, _ = _boruvka(ops, n, count, ev, w_e, mode, id_bits, csr)
    del count, csr
    int_sums = _int_sums(w_e[chosen]) if weighted and w_e.dtype.kind in "iu" else None
    ids = chosen.astype(np.int32 if m < 2**31 else np.int64, copy=False)
    forest = [ids, eu[chosen], ev[chosen]] + ([w_e[chosen]] if weighted else [])
    del eu, ev, w_e, chosen
    computed.record()
    computed.synchronize()
    del copies
    t0 = time.perf_counter()
    host = to_host(cp, forest, pinned=True)
    total = _int_total(int_sums) if int_sums is not None else None
    download_seconds = time.perf_counter() - t0
    device = cp.cuda.get_elapsed_time(uploaded, computed) / 1e3
    extra = {"worklist": worklist, "light_threshold": threshold, "device_seconds": device,
             "phase_seconds": {"upload": cp.cuda.get_elapsed_time(start, uploaded) / 1e3,
                               "device": device, "download": download_seconds}}
    return _result(n, m, host[1], host[2], host[3] if weighted else None, host[0], worklist,
                   extra, np, total)


def _device_csr(obj):
    """``(indptr, indices, weights or None)`` of a graph on the device (CuPy arrays or a
    ``cupyx.scipy.sparse`` matrix), else None."""
    def on_device(a):
        return type(a).__module__.split(".")[0] == "cupy"

    if type(obj).__module__.startswith("cupyx.scipy.sparse"):
        if obj.shape[0] != obj.shape[1]:
            raise InputError(f"minimum_spanning_forest: adjacency matrix must be square, "
                             f"got {obj.shape}")
        obj = obj.tocsr()
        return obj.indptr, obj.indices, obj.data
    if isinstance(obj, tuple) and len(obj) in (2, 3) and on_device(obj[0]):
        arrays = obj if len(obj) == 3 else (*obj, None)
        if not all(a is None or on_device(a) for a in arrays):
            raise InputError("minimum_spanning_forest: mixed host and device arrays")
        return arrays
    return None


def _device_graph_on_cpu(arrays, b):
    raise InputError("minimum_spanning_forest: a graph on the device needs the gpu backend")


def _forest_device(arrays, b):
    """A graph already on the device (CuPy arrays in, CuPy forest out)."""
    cp = b.xp
    indptr, indices, weights = arrays
    where = "minimum_spanning_forest"
    if indptr.ndim != 1 or indices.ndim != 1 or indptr.size < 1 \
            or indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu":
        raise InputError(f"{where}: indptr and indices must be 1-D integer arrays, indptr "
                         "non-empty")
    n, nnz = int(indptr.size) - 1, int(indices.size)
    it = np.dtype(np.int32 if n < 2**31 else np.int64)
    indptr = indptr.astype(np.int64, copy=False)
    indices = indices.astype(it, copy=False)
    if weights is not None:
        if weights.shape != indices.shape:
            raise InputError(f"{where}: weights must run parallel to indices")
        if weights.dtype == bool:
            weights = None
        else:
            try:
                wt = weight_dtype(weights.dtype)
            except ValueError as e:
                raise InputError(f"{where}: {e}") from None
            weights = weights.astype(wt, copy=False)
    ends = cp.concatenate((indptr[:1], indptr[-1:])).get()
    if ends[0] != 0 or ends[1] != nnz or (n and bool((indptr[1:] < indptr[:-1]).any())):
        raise InputError(f"{where}: indptr must rise from 0 to len(indices)")
    ops = _GpuOps(b, it, np.dtype(weights.dtype if weights is not None else np.int32))
    if nnz and not ops.check_arcs(indptr, indices):
        raise InputError(f"{where}: every row must hold increasing vertex numbers in "
                         f"[0, {n})")
    if weights is not None and weights.dtype.kind == "f" and bool(cp.isnan(weights).any()):
        raise InputError(f"{where}: NaN edge weight")
    count = ops.count_upper(indptr, indices)
    m = int(count.sum(dtype=np.int64))
    mode, id_bits = _key_mode(weights.dtype if weights is not None else None, m)
    ev = cp.empty(m, it)
    w_e = cp.empty(m, weights.dtype) if weights is not None else cp.zeros(1, np.int32)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    csr = (indptr, indices, weights if weights is not None else cp.zeros(1, np.int32))
    eu, chosen, worklist, threshold, _ = _boruvka(ops, n, count, ev, w_e, mode, id_bits, csr)
    forest_w = w_e[chosen] if weights is not None else None
    stop.record()
    stop.synchronize()
    extra = {"worklist": worklist, "light_threshold": threshold,
             "device_seconds": cp.cuda.get_elapsed_time(start, stop) / 1e3}
    return _result(n, m, eu[chosen], ev[chosen], forest_w, chosen, worklist, extra, cp)


def minimum_spanning_forest(graph, backend=None):
    """The minimum spanning forest of ``graph`` (Borůvka with packed keys).

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices[, weights])
        Taken undirected; unweighted graphs weigh 1 per edge. CuPy arrays (or a
        ``cupyx.scipy.sparse`` matrix): a symmetric CSR with sorted, duplicate-free rows on
        the device, and a forest of CuPy arrays.
    backend : {'cpu', 'gpu', 'auto'} or Backend, optional

    Returns
    -------
    MSTResult

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.Graph([(0, 1, {"weight": 3}), (1, 2, {"weight": 1}), (0, 2, {"weight": 2}),
    ...               (5, 6, {"weight": 4})])
    >>> r = minimum_spanning_forest(G, backend="cpu")
    >>> r.u.tolist(), r.v.tolist(), r.total_weight, r.trees
    ([0, 1, 5], [2, 2, 6], 7, 2)
    """
    arrays = _device_csr(graph)
    if arrays is not None:
        b = get_backend("gpu" if backend in (None, "auto") else backend)
        return b.select(_device_graph_on_cpu, _forest_device)(arrays, b)
    g = as_graph(graph, directed=False).undirected()
    b = get_backend(backend)
    r = b.select(_forest_cpu, _forest_gpu)(g, b)
    r.u, r.v = g.ids_of(r.u), g.ids_of(r.v)   # the same arrays where ids are row numbers
    return r
