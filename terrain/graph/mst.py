"""Minimum spanning forest of a general weighted graph: Borůvka with packed keys, every step
on the device.

Keys. Each undirected edge ``e`` (listed once, ``u < v``, in CSR order: its *edge id*) gets
the key ``rank(w_e) << id_bits | e`` with an order-preserving ``rank``: ``w + 2**31`` for
int32 weights, the order bits of ``w + 0.0`` for float32 (``-0.0`` ranks as ``+0.0``), 0
when unweighted, ``w - min w`` for int64 weights whose range fits, else the position among
the distinct weights (a sort). Keys are unique, so the minimum spanning forest is unique
and every backend finds the same edges, whatever order its threads run in.

Algorithm (the operators are CUDA kernels in ``_mst.cu`` with Numba twins here, same names
plus ``_cpu``; the round loop is shared):

1. ``extract``: the ``u < v`` arcs of every row become the edge list ``(eu, ev, w_e, key)``
   at their edge ids (on the GPU: ``count_upper`` per row by a binary search -- rows are
   sorted, so a row's ``u < v`` arcs are a suffix --, a prefix sum, then ``extract``: a
   thread a row up to 32 such arcs, a warp up to 512, and ``extract_long`` a block for each
   longer row: one warp alone took 2.9 ms of RMAT-21's 6.6 on its hubs of 10^5 arcs);
2. edge filtering by a threshold (ECL-MST's, Fallin et al. SC'23): when the graph has at
   least 1.5 edges per vertex, the *light* edges (key ≤ the key quantile of 1.2 edges per
   vertex in a strided sample of 1024 keys) are solved first, then the heavy ones -- most
   of which by then lie inside one component and are dropped by the first pass over them
   without ever entering a worklist (on a 2000² grid with weights 1..100 the rounds' work
   fell from 2.45 m to 1.08 m edges, on RMAT-19 from 2.8 m to 0.3 m);
3. rounds of Borůvka over a worklist of edges between components: ``offer`` finds both
   endpoints' roots in a union-find forest (path halving), drops edges inside one component,
   appends the others to the next worklist as (root, root, key) -- later finds start at
   the top (ECL-MST's implicit path compression) -- and offers the key to both roots with
   ``atomicMin`` after a plain test; ``join`` unions the two components of every edge that
   won at one of its roots (a CAS hooks the larger root under the smaller) and marks it.
   The host reads one number a round (the next worklist's length); there is no pointer
   jumping and no per-vertex pass;
4. the marked edges (``flatnonzero``, in edge-id order), their endpoints and weights and the
   total are gathered on the device; only the forest comes back.

``extra["device_seconds"]`` is the GPU part (CUDA events from the CSR on the device to the
forest on the device), ``extra["worklist"]`` the worklist length of every round.

Weights may be negative (ranks only compare them); a directed graph is taken undirected.
The forest's total weight is an int64 sum for integer weights and a correctly rounded sum
(``math.fsum``) of the float64 weights otherwise: the same bits whatever order the edges
come in.

scipy's ``minimum_spanning_tree`` is Kruskal (a global sort of the edges) and treats zero
weights as missing edges; here a zero weight is an edge. Written by hand because neither
cuGraph nor scipy breaks ties by our edge ids (the forest would differ between backends).
"""

import math
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np

from ..backend import get_backend
from ..errors import InputError
from .csr import as_graph

__all__ = ["minimum_spanning_forest", "MSTResult", "graph_edges"]

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
    u, v : ndarray of the graph's index dtype (int32 below 2**31 vertices)
        Internal endpoints of the forest's edges (``u < v``), in edge-id order.
    weight : ndarray
        Their weights (the graph's dtype; int64 ones when unweighted).
    edge_ids : ndarray of int32 (int64 from 2**31 edges)
        Their edge ids (position among the graph's ``u < v`` edges in CSR order).
        The narrow dtypes halve the forest's copy back from the GPU, which dominates a
        whole call (24 M forest edges: ~0.2 s of 0.33 at ~3.5 GB/s into fresh pages).
    total_weight : int or float
    trees : int
        Trees of the forest (connected components, isolated vertices included).
    rounds : int
        Borůvka rounds (``join`` passes, both phases of the edge filter).
    extra : dict
        ``worklist`` (edges between components per round), ``light_threshold`` (None
        without filtering), ``device_seconds`` (GPU only).
    """

    u: np.ndarray
    v: np.ndarray
    weight: np.ndarray
    edge_ids: np.ndarray
    total_weight: object
    trees: int
    rounds: int
    extra: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- CPU twins

@numba.njit(nogil=True, cache=True)
def _extract_cpu(indptr, indices, weights, key_mode, float_bits, id_bits, eu, ev, w_e, key):
    """Twin of ``count_upper`` + ``extract``: sequential, so the running count is the id.
    ``float_bits``: ``weights`` is a float32 array's uint32 view (rank = order bits)."""
    e = 0
    for r in range(indptr.shape[0] - 1):
        for a in range(indptr[r], indptr[r + 1]):
            c = indices[a]
            if c <= r:
                continue
            eu[e] = r
            ev[e] = c
            if key_mode == 2:
                key[e] = e
            else:
                w_e[e] = weights[a]
                if key_mode == 1:
                    if float_bits:
                        b = np.int64(weights[a])
                        if b == 0x80000000:  # -0.0 ranks as +0.0
                            b = 0
                        rank = (~b & 0xFFFFFFFF) if b & 0x80000000 else (b | 0x80000000)
                    else:
                        rank = np.int64(weights[a]) + 2147483648
                    key[e] = (rank << id_bits) | e
            e += 1
    return e


@numba.njit(nogil=True, cache=True, inline="always")
def _find_halving_cpu(x, parent):
    p = parent[x]
    while p != x:
        pp = parent[p]
        if pp == p:
            return p
        parent[x] = pp
        x = pp
        p = parent[x]
    return x


@numba.njit(nogil=True, cache=True)
def _offer_cpu(in_a, in_b, in_key, n_in, lo, hi, parent, best, out_a, out_b, out_key):
    n_out = 0
    for i in range(n_in):
        k = in_key[i]
        if k <= lo or k > hi:
            continue
        ra = _find_halving_cpu(in_a[i], parent)
        rb = _find_halving_cpu(in_b[i], parent)
        if ra == rb:
            continue
        out_a[n_out] = ra
        out_b[n_out] = rb
        out_key[n_out] = k
        n_out += 1
        if k < best[ra]:
            best[ra] = k
        if k < best[rb]:
            best[rb] = k
    return n_out


@numba.njit(nogil=True, cache=True)
def _join_cpu(wl_a, wl_b, wl_key, n, parent, best, id_mask, in_forest):
    none = np.iinfo(np.int64).max
    for i in range(n):
        k = wl_key[i]
        a, b = wl_a[i], wl_b[i]
        won_a, won_b = best[a] == k, best[b] == k
        if not (won_a or won_b):
            continue
        if won_a:
            best[a] = none
        if won_b:
            best[b] = none
        in_forest[k & id_mask] = 1
        while parent[a] != a:
            a = parent[a]
        while parent[b] != b:
            b = parent[b]
        if a != b:
            if a > b:
                a, b = b, a
            parent[b] = a


# --------------------------------------------------------------------------- helpers

def graph_edges(graph):
    """``(u, v, w)``: every undirected edge once (``u < v``) in CSR order, with its weight
    (ones when unweighted). The position is the edge id.

    >>> import networkx as nx
    >>> u, v, w = graph_edges(nx.path_graph(3))
    >>> u.tolist(), v.tolist(), w.tolist()
    ([0, 1], [1, 2], [1, 1])
    """
    g = as_graph(graph, directed=False).undirected()
    m = g.m
    eu = np.empty(m, g.indices.dtype)
    ev = np.empty(m, g.indices.dtype)
    if g.weights is None:
        _extract_cpu(g.indptr, g.indices, np.zeros(1, np.int32), KEY_UNWEIGHTED, False, 0,
                     eu, ev, np.zeros(1, np.int32), np.empty(m, np.int64))
        return eu, ev, np.ones(m, np.int64)
    w_e = np.empty(m, g.weights.dtype)
    _extract_cpu(g.indptr, g.indices, g.weights, KEY_LATER, False, 0, eu, ev, w_e,
                 np.empty(0, np.int64))
    return eu, ev, w_e


def _key_mode(weights):
    if weights is None:
        return KEY_UNWEIGHTED
    return KEY_FROM_WEIGHT if weights.dtype in (np.int32, np.float32) else KEY_LATER


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
    """The light/heavy key threshold of the edge filter (None: no filtering): the key
    quantile of ``LIGHT_PER_VERTEX * n`` edges in a strided sample of ``SAMPLE`` keys,
    when ``m >= FILTER_MIN_DEGREE * n``."""
    if m < FILTER_MIN_DEGREE * n or m < SAMPLE:
        return None
    q = int(SAMPLE * LIGHT_PER_VERTEX * n / m)
    if q >= SAMPLE:
        return None
    sample = xp.sort(key[(xp.arange(SAMPLE, dtype=np.int64) * m) // SAMPLE])
    return int(sample[q])


class _CpuOps:
    """The operators on the CPU (Numba twins)."""

    def __init__(self, g):
        self.g = g
        self.xp = np

    def extract(self, mode, id_bits, eu, ev, w_e, key):
        g = self.g
        weights = g.weights if g.weights is not None else np.zeros(1, np.int32)
        float_bits = weights.dtype == np.float32
        if float_bits:
            weights = weights.view(np.uint32)
            w_e = w_e.view(np.uint32)
        _extract_cpu(g.indptr, g.indices, weights, mode, float_bits, id_bits, eu, ev, w_e,
                     key)

    def offer(self, src, n_in, lo, hi, dst, parent, best, slot):
        return int(_offer_cpu(*src, n_in, lo, hi, parent, best, *dst))

    def join(self, wl, n, parent, best, id_mask, in_forest):
        _join_cpu(*wl, n, parent, best, id_mask, in_forest)


class _GpuOps:
    """The operators on the GPU (``_mst.cu``)."""

    def __init__(self, g, b):
        cp = self.xp = b.xp
        self.n = g.n
        self.indptr = cp.asarray(g.indptr)
        self.indices = cp.asarray(g.indices)
        self.weights = cp.asarray(g.weights) if g.weights is not None \
            else cp.zeros(1, np.int32)
        it, wt = _C_TYPES[np.dtype(g.indices.dtype)], _C_TYPES[self.weights.dtype]
        names = {"count_upper": f"count_upper<{it}>", "extract": f"extract<{it}, {wt}>",
                 "extract_long": f"extract_long<{it}, {wt}>", "offer": f"offer<{it}>",
                 "join": f"join<{it}>"}
        module = b.cuda_module(Path(__file__).with_name("_mst.cu"),
                               name_expressions=tuple(names.values()))
        self.kern = {k: module.get_function(v) for k, v in names.items()}
        self.counts = cp.zeros(_MAX_OFFERS, np.uint64)

    @staticmethod
    def grid(work):
        return (max(1, min(1 << 20, -(-int(work) // BLOCK))),)

    def extract(self, mode, id_bits, eu, ev, w_e, key):
        cp, n = self.xp, np.int64(self.n)
        count = cp.empty(max(self.n, 1), np.int64)
        self.kern["count_upper"](self.grid(self.n), (BLOCK,),
                                 (self.indptr, self.indices, n, count))
        first = cp.cumsum(count)
        first -= count
        long_rows = cp.empty(int(eu.shape[0]) // LONG_ROW + 1, np.int64)
        n_long = cp.zeros(1, np.uint64)
        rows = (max(1, -(-self.n // BLOCK)),)  # one thread per row, no grid-stride
        tail = (np.int32(mode), np.int32(id_bits), eu, ev, w_e, key, long_rows, n_long)
        self.kern["extract"](rows, (BLOCK,), (self.indptr, self.indices, self.weights, n,
                                              count, first, *tail))
        self.kern["extract_long"]((LONG_ROW_BLOCKS,), (BLOCK,),
                                  (self.indptr, self.indices, self.weights, count, first,
                                   *tail))

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


def minimum_spanning_forest(graph, backend=None):
    """The minimum spanning forest of ``graph`` (Borůvka with packed keys).

    Parameters
    ----------
    graph : Graph, scipy.sparse matrix, networkx graph or (indptr, indices[, weights])
        Taken undirected; unweighted graphs weigh 1 per edge.
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
    ([0, 1, 3], [2, 2, 4], 7, 2)
    """
    g = as_graph(graph, directed=False).undirected()
    b = get_backend(backend)
    if g.weights is not None and g.weights.dtype.kind == "f" and np.isnan(g.weights).any():
        raise InputError(f"{g.name}: NaN edge weight")
    ops = _GpuOps(g, b) if b.is_gpu else _CpuOps(g)
    xp = ops.xp
    n, m = g.n, g.m
    it = g.indices.dtype
    wt = g.weights.dtype if g.weights is not None else np.dtype(np.int32)
    if b.is_gpu:
        start, stop = xp.cuda.Event(), xp.cuda.Event()
        start.record()
    id_bits = max(1, int(m - 1).bit_length())
    mode = _key_mode(g.weights)
    if mode == KEY_FROM_WEIGHT and id_bits > 31:  # the 32-bit rank leaves 31 bits for ids
        mode = KEY_LATER
    eu, ev = xp.empty(m, it), xp.empty(m, it)
    w_e = xp.empty(m if mode != KEY_UNWEIGHTED else 1, wt)
    key = xp.empty(m, np.int64)
    ops.extract(mode, id_bits, eu, ev, w_e, key)
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
    del buffers, parent, best
    chosen = xp.flatnonzero(in_forest[:m])
    u, v = eu[chosen], ev[chosen]
    weights = w_e[chosen] if mode != KEY_UNWEIGHTED else None
    total = None
    if weights is not None and weights.dtype.kind in "iu":
        total = weights.sum(dtype=np.int64)
    extra = {"worklist": worklist, "light_threshold": threshold}
    if b.is_gpu:
        stop.record()
        stop.synchronize()
        extra["device_seconds"] = xp.cuda.get_elapsed_time(start, stop) / 1e3
    id_type = np.int32 if m < 2**31 else np.int64
    chosen, u, v = (b.to_numpy(x) for x in (chosen.astype(id_type, copy=False), u, v))
    if weights is None:
        weights = np.ones(chosen.size, np.int64)
        total = int(chosen.size)
    else:
        weights = b.to_numpy(weights)
        total = int(total) if total is not None else math.fsum(
            weights.astype(np.float64).tolist())
    return MSTResult(u, v, weights, chosen, total, n - int(chosen.size), len(worklist), extra)
