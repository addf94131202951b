"""Minimum spanning forest of a general weighted graph: Borůvka with packed keys.

Algorithm. Each undirected edge ``e`` (listed once, ``u < v``, in CSR order: its *edge id*)
gets the key ``rank(w_e) << id_bits | e``, where ``rank`` is order-preserving: ``w - min w``
for integer weights whose range fits, else the position among the distinct weights (a
sort). Keys are unique, so the minimum spanning forest is unique and every backend
finds the same edges, whatever order its threads run in. Rounds of Borůvka:

1. ``min_edge``: every live edge offers its key to both endpoint components
   (``atomicMin`` on the packed key on the GPU; a test of the current best first, as
   ECL-MST does, skips most atomics);
2. ``hook``: every component root with a best edge hooks onto the component across it and
   marks the edge; of a mutual pair (both chose the same edge: the only cycles unique keys
   allow) the smaller root stays a root;
3. ``jump``: pointer jumping until every vertex points at its root (labels fully
   compressed, so the next round reads a vertex's component in one load);
4. filter: edges inside one component are dropped from the live list (ECL-MST's edge
   filtering), so later rounds touch only edges between components.

Each operator is a CUDA kernel (``_mst.cu``) with a Numba twin here; the filter and the
round loop are array operations on the backend (the frontier core's filter step, on edges).
Weights may be negative (ranks only compare them); a directed graph is taken undirected.
The forest's total weight is an int64 sum for integer weights and a correctly rounded sum
(``math.fsum``) of the float64 weights otherwise: the same bits whatever order the edges
come in.

scipy's ``minimum_spanning_tree`` is Kruskal (a global sort of the edges) and treats zero
weights as missing edges; here a zero weight is an edge.
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


@dataclass
class MSTResult:
    """Result of :func:`minimum_spanning_forest`.

    Attributes
    ----------
    u, v : ndarray of int64
        Internal endpoints of the forest's edges (``u < v``), in edge-id order.
    weight : ndarray
        Their weights (the graph's dtype; ones when unweighted).
    edge_ids : ndarray of int64
        Their edge ids (position among the graph's ``u < v`` edges in CSR order).
    total_weight : int or float
    trees : int
        Trees of the forest (connected components, isolated vertices included).
    rounds : int
        Borůvka rounds.
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
def _min_edge_cpu(eu, ev, key, live, comp, best):
    for i in range(live.shape[0]):
        e = live[i]
        cu, cv = comp[eu[e]], comp[ev[e]]
        if cu == cv:
            continue
        k = key[e]
        if k < best[cu]:
            best[cu] = k
        if k < best[cv]:
            best[cv] = k


@numba.njit(nogil=True, cache=True)
def _hook_cpu(eu, ev, comp, best, id_mask, none, parent, in_forest):
    for c in range(comp.shape[0]):
        if comp[c] != c or best[c] == none:
            continue
        e = best[c] & id_mask
        cu, cv = comp[eu[e]], comp[ev[e]]
        other = cv if cu == c else cu
        in_forest[e] = 1
        if not (best[other] == best[c] and c < other):
            parent[c] = other


@numba.njit(nogil=True, cache=True)
def _jump_cpu(parent):
    changed = 0
    for c in range(parent.shape[0]):
        p = parent[c]
        pp = parent[p]
        if p != pp:
            parent[c] = pp
            changed = 1
    return changed


# --------------------------------------------------------------------------- helpers

def graph_edges(graph):
    """``(u, v, w)``: every undirected edge once (``u < v``) in CSR order, with its weight
    (ones when unweighted). The position is the edge id."""
    g = graph.undirected()
    rows = np.repeat(np.arange(g.n, dtype=g.indices.dtype), np.diff(g.indptr))
    keep = rows < g.indices
    w = g.weights[keep] if g.weights is not None else np.ones(int(keep.sum()), np.int64)
    return rows[keep], g.indices[keep], w


def _packed_keys(w, xp):
    """``rank(w) << id_bits | edge id`` (int64) and ``id_bits``."""
    m = int(w.shape[0])
    id_bits = max(1, int(m - 1).bit_length())
    rank = None
    if w.dtype.kind in "iu" and m:
        low, high = int(w.min()), int(w.max())
        if (high - low).bit_length() + id_bits <= 63:
            rank = w.astype(np.int64) - low   # order-preserving already: no sort needed
    if rank is None:
        _, rank = xp.unique(w, return_inverse=True)
        rank = rank.reshape(-1).astype(np.int64)
    rank_bits = max(1, int(rank.max()).bit_length()) if m else 1
    if id_bits + rank_bits > 63:
        raise InputError(f"too many edges and distinct weights to pack into 64-bit keys "
                         f"({m} edges)")
    return (rank << id_bits) | xp.arange(m, dtype=np.int64), id_bits


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
    g = as_graph(graph, directed=False)
    b = get_backend(backend)
    xp = b.xp
    eu_h, ev_h, w_h = graph_edges(g)
    if w_h.dtype.kind == "f" and np.isnan(w_h).any():
        raise InputError(f"{g.name}: NaN edge weight")
    n, m = g.n, int(eu_h.shape[0])
    eu, ev, w = b.asarray(eu_h), b.asarray(ev_h), b.asarray(w_h)
    key, id_bits = _packed_keys(w, xp) if m else (xp.zeros(0, np.int64), 1)
    id_mask = np.int64((1 << id_bits) - 1)
    none = np.int64(np.iinfo(np.int64).max)
    it = eu.dtype
    comp = xp.arange(n, dtype=it)
    best = xp.full(n, none, np.int64)
    in_forest = xp.zeros(max(m, 1), np.uint8)
    live = xp.arange(m, dtype=np.int64)
    rounds = 0
    if b.is_gpu:
        names = {k: f"{k}<{'int' if it == np.int32 else 'long long'}>"
                 for k in ("min_edge", "hook", "jump")}
        module = b.cuda_module(Path(__file__).with_name("_mst.cu"),
                               name_expressions=tuple(names.values()))
        kern = {k: module.get_function(v) for k, v in names.items()}
        changed = xp.zeros(1, np.uint64)

        def grid(work):
            return (max(1, min(65535, -(-int(work) // BLOCK))),)
    while live.shape[0]:
        rounds += 1
        best.fill(none)
        parent = comp.copy()
        if b.is_gpu:
            kern["min_edge"](grid(live.shape[0]), (BLOCK,),
                             (eu, ev, key, live, np.int64(live.shape[0]), comp, best))
            kern["hook"](grid(n), (BLOCK,), (eu, ev, comp, best, id_mask, none, parent,
                                              in_forest, np.int64(n)))
            while True:
                changed.fill(0)
                kern["jump"](grid(n), (BLOCK,), (parent, np.int64(n), changed))
                if not int(changed.get()[0]):
                    break
        else:
            _min_edge_cpu(eu, ev, key, live, comp, best)
            _hook_cpu(eu, ev, comp, best, id_mask, none, parent, in_forest)
            while _jump_cpu(parent):
                pass
        comp = parent
        live = live[comp[eu[live]] != comp[ev[live]]]
    chosen = b.to_numpy(xp.flatnonzero(in_forest[:m])).astype(np.int64)
    weights = w_h[chosen]
    if weights.dtype.kind == "f":
        total = math.fsum(weights.astype(np.float64).tolist())
    else:
        total = int(weights.astype(np.int64).sum())
    return MSTResult(eu_h[chosen].astype(np.int64), ev_h[chosen].astype(np.int64), weights,
                     chosen, total, n - int(chosen.size), rounds)
