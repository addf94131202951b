"""Compressed sparse row (CSR) graphs: the one representation every traversal runs on.

:class:`Graph` holds each edge both ways (a *directed* graph each arc once, in its tail's
row), self-loops and duplicates dropped, rows sorted, optional ``weights`` (parallel edges
keep the minimum) and the map back to the source's ids. :func:`build_csr` is a parallel
counting sort in C (docs/graphs.md, "CSR and cache"); :func:`as_graph` takes the friendly
inputs.
"""

import itertools
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from . import _native
from ._native import _p

__all__ = ["Graph", "build_csr", "as_graph", "largest_component", "connected_components",
           "component_roots", "subgraph", "weight_dtype", "WEIGHT_DTYPES"]


@dataclass(eq=False)
class Graph:
    """An undirected graph in CSR form.

    Attributes
    ----------
    indptr : ndarray of int64, shape (n + 1,)
    indices : ndarray of int32 (int64 when n >= 2**31), shape (2m,)
        Neighbours of vertex ``i`` are ``indices[indptr[i]:indptr[i+1]]``, sorted, unique,
        never ``i`` itself.
    ids : ndarray or None
        ``ids[i]`` is vertex ``i``'s id in the source (file ids, networkx nodes); None means
        ``id_base + i``.
    name : str
        Where the graph came from, for messages.
    weights : ndarray or None
        ``weights[e]``: the weight of arc ``e`` (a dtype of :data:`WEIGHT_DTYPES`).
    directed : bool
        Rows hold out-arcs only (each arc once); otherwise every edge is in both rows.

    Examples
    --------
    >>> g = build_csr(3, np.array([0, 1]), np.array([1, 2]))
    >>> g.n, g.m, g.indices[g.indptr[1]:g.indptr[2]].tolist()
    (3, 2, [0, 2])
    """

    indptr: np.ndarray
    indices: np.ndarray
    ids: object = None
    id_base: int = 0
    name: str = "graph"
    meta: dict = field(default_factory=dict)
    weights: object = None
    directed: bool = False

    @property
    def n(self):
        """Number of vertices."""
        return int(self.indptr.shape[0] - 1)

    @property
    def nnz(self):
        """Number of stored (directed) edges, 2m."""
        return int(self.indices.shape[0])

    @property
    def m(self):
        """Number of undirected edges (of arcs, for a directed graph)."""
        return self.nnz if self.directed else self.nnz // 2

    @property
    def weighted(self):
        return self.weights is not None

    def undirected(self):
        """The undirected view: ``self`` when already undirected, else every arc in both
        rows (parallel edges keep the minimum weight)."""
        if not self.directed:
            return self
        rows = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.indptr))
        g = build_csr(self.n, rows, self.indices, weights=self.weights, ids=self.ids,
                      id_base=self.id_base, name=self.name)
        g.meta = {k: v for k, v in self.meta.items() if k != "_index"}
        return g

    def degrees(self):
        """Vertex degrees (int64)."""
        return np.diff(self.indptr)

    def id_array(self):
        """The source id of every vertex, as an array."""
        if self.ids is None:
            return np.arange(self.n, dtype=np.int64) + self.id_base
        return np.asarray(self.ids)

    def id_of(self, v):
        """Source id of internal vertex ``v`` (a Python scalar or node)."""
        if self.ids is None:
            return int(v) + self.id_base
        x = self.ids[int(v)]
        return x.item() if hasattr(x, "item") else x

    def index_of(self, ids, what="vertex"):
        """Internal numbers of source ids; :class:`InputError` naming the first missing one."""
        ids_array = self.ids if isinstance(self.ids, np.ndarray) else None
        int_ids = ids_array is not None and ids_array.dtype.kind in "iu"
        if self.ids is None:
            def find(x):
                key = _int_or_none(x)
                v = -1 if key is None else key - self.id_base
                return v if 0 <= v < self.n else None
        elif int_ids and (ids_array.size < 2 or np.all(ids_array[1:] > ids_array[:-1])):
            # file ids (SNAP) rise with the vertex number: a binary search, no dict of n ids
            def find(x):
                key = _int_or_none(x)
                v = int(np.searchsorted(ids_array, key)) if key is not None else self.n
                return v if v < self.n and int(ids_array[v]) == key else None
        else:
            table = self.meta.get("_index")
            if table is None:
                table = {(k.item() if hasattr(k, "item") else k): i
                         for i, k in enumerate(self.ids)}
                self.meta["_index"] = table

            def find(x):
                key = _int_or_none(x) if int_ids else x
                return table[key] if key in table else None
        out = []
        for x in ids:
            v = find(x)
            if v is None:
                kept = (" (only its largest connected component was kept)"
                        if "lcc" in self.meta else "")
                raise InputError(f"{self.name}: {what} {x!r} is not in the graph{kept}")
            out.append(v)
        return np.asarray(out, dtype=np.int64)

    def source_vertices(self, sources, caller):
        """Internal numbers (int64) of a search's ``sources``, given in the graph's own ids
        (file ids, networkx nodes, row numbers): a vertex, or a list or array of them (a
        tuple is one networkx node). :class:`InputError` naming ``caller`` for none, a
        non-integer where the ids are integers (1.5 is not read as 1, nor "3" as 3) and one
        that is not in the graph."""
        ids = list(sources) if isinstance(sources, (list, np.ndarray)) else [sources]
        if not ids:
            raise InputError(f"{caller}: at least one source is needed")
        if self.ids is None or (isinstance(self.ids, np.ndarray) and self.ids.dtype.kind in "iu"):
            for x in ids:
                if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
                    raise InputError(f"{caller}: source {x!r} is not an integer vertex id "
                                     f"(the ids of {self.name} are integers)")
        return self.index_of(ids, what="source vertex")

    def ids_of(self, internal, missing=-1):
        """The graph's ids of internal vertex numbers ``internal`` (an array); ``missing``
        (``None`` for ids that are not integers) where a number is negative (no vertex)."""
        internal = np.asarray(internal)
        if self.ids is None and self.id_base == 0:
            return internal
        ids = self.id_array()
        ok = internal >= 0
        if ids.dtype.kind in "iu":
            out = np.full(internal.shape, missing, np.int64)
        else:
            out = np.full(internal.shape, None, object)
        out[ok] = ids[internal[ok]]
        return out

    def to_scipy(self, weighted=False):
        """The adjacency matrix as ``scipy.sparse.csr_matrix`` (int8 ones, or the weights
        with ``weighted=True``; shares the index arrays)."""
        import scipy.sparse as sp
        data = self.weights if weighted and self.weights is not None else np.ones(self.nnz,
                                                                                  np.int8)
        return sp.csr_matrix((data, self.indices, self.indptr), shape=(self.n, self.n))


def _int_or_none(x):
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


WEIGHT_DTYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32),
                 np.dtype(np.float64))


def weight_dtype(dtype):
    """The dtype a weight array is kept in: int32/int64/float32/float64 as given; other
    integers widen to int64, other floats to float64."""
    dtype = np.dtype(dtype)
    if dtype in WEIGHT_DTYPES:
        return dtype
    if dtype.kind in "iub":
        return np.dtype(np.int64)
    if dtype.kind == "f":
        return np.dtype(np.float64)
    raise ValueError(f"edge weights must be integers or real numbers, got {dtype}")


def build_csr(n, u, v, *, weights=None, directed=False, ids=None, id_base=0, name="graph"):
    """CSR of the edges ``(u[k], v[k])`` (weights ``weights[k]``) on ``n`` vertices: both
    directions stored unless ``directed``; self-loops dropped, rows sorted, parallel edges
    merged keeping the minimum weight. The strict inner constructor: ids in ``0..n-1``.

    Parameters
    ----------
    n : int
    u, v : array_like of int
    weights : array_like, optional
        Kept in their dtype (see :func:`weight_dtype`).
    directed : bool
    ids, id_base, name
        See :class:`Graph`.

    Returns
    -------
    Graph

    Examples
    --------
    >>> g = build_csr(4, [0, 1, 1, 2, 3], [1, 0, 2, 2, 0])
    >>> g.indptr.tolist(), g.indices.tolist()
    ([0, 2, 4, 5, 6], [1, 3, 0, 2, 1, 0])
    >>> g = build_csr(3, [0, 1, 0], [1, 0, 2], weights=[5, 3, 7], directed=True)
    >>> g.indices.tolist(), g.weights.tolist(), g.weights.dtype.name
    ([1, 2, 0], [5, 7, 3], 'int64')
    """
    u = np.ascontiguousarray(u)
    v = np.ascontiguousarray(v)
    if u.ndim != 1 or u.shape != v.shape:
        raise ValueError(f"build_csr: u and v must be 1-D of equal length, got {u.shape} and "
                         f"{v.shape}")
    if u.dtype.kind not in "iu" or v.dtype.kind not in "iu":
        raise ValueError(f"build_csr: u and v must be integer arrays, got {u.dtype} and {v.dtype}")
    n = int(n)
    if n < 0:
        raise ValueError(f"build_csr: n must be >= 0, got {n}")
    if u.size and (min(u.min(), v.min()) < 0 or max(u.max(), v.max()) >= n):
        raise ValueError(f"build_csr: vertex numbers must lie in 0..{n - 1}")
    w = None
    if weights is not None:
        w = np.ascontiguousarray(weights)
        if w.shape != u.shape:
            raise ValueError(f"build_csr: weights must have the shape of u, got {w.shape}")
        if w.dtype == np.uint64 and w.size and w.max() > np.iinfo(np.int64).max:
            # widened to int64 they would wrap round to negative weights
            raise InputError(f"{name}: edge weight {int(w.max())} is beyond int64 (at most "
                             f"{np.iinfo(np.int64).max}); give such weights as reals")
        if w.dtype.kind not in "iubf":  # a matrix's or a networkx graph's, as given
            raise InputError(f"{name}: edge weights must be integers or real numbers, got "
                             f"{w.dtype}")
        w = w.astype(weight_dtype(w.dtype), copy=False)
    directed = bool(directed)
    if u.dtype != np.int64 or v.dtype != np.int64:
        u, v = u.astype(np.int64), v.astype(np.int64)
    m = u.shape[0]
    with_w = w is not None
    idx_dtype = np.int32 if n < 2**31 else np.int64
    scatter, sort_rows, compact = _native.csr_kernels(idx_dtype, w.dtype if with_w else None)
    blocks = _blocks(n, m)
    pool = ThreadPoolExecutor(blocks) if blocks > 1 else None
    run = map if pool is None else pool.map
    both = not directed
    try:
        # per-block row counters; each block counts, then scatters, its own edge slice
        cuts = [m * t // blocks for t in range(blocks + 1)]
        counts = np.zeros((blocks, n), np.int64)
        lib = _native.library()
        list(run(lambda t: lib.terrain_csr_count(_p(u), _p(v), cuts[t], cuts[t + 1],
                                                 _p(counts[t]), both), range(blocks)))
        deg = np.empty(n, np.int64)
        indptr = np.empty(n + 1, np.int64)
        lib.terrain_csr_offsets(_p(counts), blocks, n, _p(deg), _p(indptr))
        indices = np.empty(int(indptr[-1]), idx_dtype)
        wts = np.empty(indices.shape[0], w.dtype) if with_w else np.zeros(1, np.int8)
        w_in = w if with_w else wts
        list(run(lambda t: scatter(_p(u), _p(v), _p(w_in), cuts[t], cuts[t + 1],
                                   _p(counts[t]), _p(indices), _p(wts), both),
                 range(blocks)))
        del counts
        # rows sorted and de-duplicated in row ranges of about equal entries, one per thread
        unique_deg = deg  # rewritten row by row: the degrees are no longer needed
        nbits = max(1, (n - 1).bit_length())
        parts = _native.threads(indices.shape[0])
        bounds = np.searchsorted(indptr, np.linspace(0, indptr[-1], parts + 1)[1:-1])
        rows = [0, *sorted(set(int(b) for b in bounds)), n]
        status = list((map if pool is None or parts == 1 else pool.map)(
            lambda r: sort_rows(_p(indptr), rows[r], rows[r + 1], _p(indices), _p(wts), nbits,
                                _p(unique_deg)), range(len(rows) - 1)))
        if min(status, default=0) < 0:
            raise MemoryError("build_csr: no memory for the row sort's scratch arrays")
    finally:
        if pool is not None:
            pool.shutdown()
    if int(unique_deg.sum()) != indices.shape[0]:
        # duplicates dropped: close the gaps in place (a parallel copy needs a second array)
        kept = compact(_p(indptr), n, _p(indices), _p(wts), _p(unique_deg))
        indices = indices[:kept]
        wts = wts[:kept] if with_w else wts
    return Graph(indptr, indices, ids, id_base, name, weights=wts if with_w else None,
                 directed=directed)


def _blocks(n, m):
    """Edge blocks counted and scattered in parallel: one per thread, fewer when their row
    counters (``blocks x n``) would outweigh the edges."""
    return int(max(1, min(_native.threads(m), m // max(n, 1))))


def _check_csr(indptr, indices, where="graph"):
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    if indptr.ndim != 1 or indptr.size < 1 or indices.ndim != 1:
        raise InputError(f"{where}: indptr and indices must be 1-D, indptr non-empty")
    if indptr.dtype.kind not in "iu" or indices.dtype.kind not in "iu":
        raise InputError(f"{where}: indptr and indices must be integer arrays")
    if indptr[0] != 0 or indptr[-1] != indices.size or np.any(np.diff(indptr) < 0):
        raise InputError(f"{where}: indptr must rise from 0 to len(indices)")
    return indptr, indices


def _kernel_index_dtype(graph):
    """The index dtype the C kernels take for ``graph``: its own if int32/int64, else int64."""
    it = graph.indices.dtype
    return it if it in (np.dtype(np.int32), np.dtype(np.int64)) else np.dtype(np.int64)


def subgraph(graph, keep):
    """The subgraph induced by the vertices where ``keep`` is true, ids and weights carried
    along (in C, no temporaries of the graph's size).

    Examples
    --------
    >>> g = build_csr(4, [0, 1, 2], [1, 2, 3], ids=np.array([5, 6, 7, 8]))
    >>> s = subgraph(g, np.array([False, True, True, True]))
    >>> s.indptr.tolist(), s.indices.tolist(), s.id_array().tolist()
    ([0, 1, 3, 4], [1, 0, 2, 1], [6, 7, 8])
    """
    kept = np.flatnonzero(keep)
    new_id = np.full(graph.n, -1, np.int64)
    new_id[kept] = np.arange(kept.size)
    indptr = np.ascontiguousarray(graph.indptr, np.int64)
    it = _kernel_index_dtype(graph)
    indices = np.ascontiguousarray(graph.indices, it)
    fn = _native.traversal_kernels(it)["subgraph"]
    m = fn(_p(indptr), _p(indices), graph.n, _p(new_id), None, None, None, None, 0)
    out_indptr = np.empty(kept.size + 1, np.int64)
    out = np.empty(m, it)
    w = graph.weights
    out_w = None if w is None else np.empty(m, w.dtype)
    if w is not None:
        w = np.ascontiguousarray(w)
    fn(_p(indptr), _p(indices), graph.n, _p(new_id), _p(out_indptr), _p(out),
       None if w is None else _p(w), None if w is None else _p(out_w),
       0 if w is None else w.dtype.itemsize)
    sub = Graph(out_indptr, out, graph.id_array()[kept], 0, graph.name, dict(graph.meta), out_w,
                graph.directed)
    sub.meta.pop("_index", None)
    return sub


def component_roots(graph):
    """``roots[v]``: the smallest vertex of ``v``'s (weakly) connected component
    (union-find in C; int32 or int64 as the graph's indices)."""
    it = _kernel_index_dtype(graph)
    roots = np.empty(graph.n, it)
    _native.traversal_kernels(it)["roots"](
        _p(np.ascontiguousarray(graph.indptr, np.int64)),
        _p(np.ascontiguousarray(graph.indices, it)), graph.n, int(not graph.directed),
        _p(roots))
    return roots


def connected_components(graph):
    """``(count, labels)`` of the (weakly) connected components, labelled ``0..count-1`` in
    the order of their smallest vertex.

    Examples
    --------
    >>> connected_components(build_csr(5, [0, 3], [1, 4]))[1].tolist()
    [0, 0, 1, 2, 2]
    """
    roots = component_roots(graph)
    is_root = roots == np.arange(graph.n, dtype=roots.dtype)
    rank = np.cumsum(is_root, dtype=np.int64) - 1
    return int(is_root.sum()), rank[roots].astype(np.int32)


def largest_component(graph):
    """``(lcc, info)``: the largest connected component (ties: the lowest vertex; ``graph``
    itself when connected), ``info = {'components': k, 'lcc_vertices': n', 'vertices': n}``."""
    roots = component_roots(graph)
    n = graph.n
    sizes = np.bincount(roots, minlength=n) if n else np.zeros(0, np.int64)
    count = int(np.count_nonzero(sizes))
    info = {"components": count, "vertices": n, "lcc_vertices": n}
    if count <= 1:
        return graph, info
    root = int(sizes.argmax())
    info["lcc_vertices"] = int(sizes[root])
    sub = subgraph(graph, roots == root)
    sub.meta["lcc_of"] = info
    return sub, info


def as_graph(obj, *, name=None, weight="weight", directed=None):
    """The friendly entry: turn ``obj`` into a :class:`Graph`.

    Parameters
    ----------
    obj : Graph, scipy.sparse matrix/array, networkx graph, (indptr, indices[, weights])
        Self-loops dropped, parallel edges merged (minimum weight); networkx nodes become
        the graph's ids.
    weight : str or None
        A scipy matrix's values (unless boolean) or this networkx edge attribute (edges
        without it weigh 1; no edge with it: unweighted); None: unweighted.
    directed : bool, optional
        Default: networkx graphs as they are, matrices and arrays undirected; False turns a
        directed :class:`Graph` into its undirected view.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> g = as_graph(sp.csr_matrix(np.array([[0, 1], [0, 0]])))
    >>> g.indices.tolist(), g.weights.tolist()
    ([1, 0], [1, 1])
    >>> import networkx as nx
    >>> G = nx.DiGraph([(1, 2, {"weight": 2.5}), (2, 3, {"weight": 1.0})])
    >>> g = as_graph(G)
    >>> g.directed, g.indices.tolist(), g.weights.tolist()
    (True, [1, 2], [2.5, 1.0])
    """
    if isinstance(obj, Graph):
        if directed is False and obj.directed:
            return obj.undirected()
        return obj
    if isinstance(obj, tuple) and len(obj) in (2, 3):
        where = name or "arrays"
        indptr, indices = _check_csr(*obj[:2], where=where)
        n = indptr.size - 1
        # the caller's arrays: what build_csr would refuse as a bug is named as their error
        if indices.size and (indices.min() < 0 or indices.max() >= n):
            raise InputError(f"{where}: indices must be vertex numbers 0..{n - 1} (indptr "
                             f"has {n} rows), got {indices.min()}..{indices.max()}")
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr).astype(np.int64))
        w = np.asarray(obj[2]) if len(obj) == 3 and weight is not None else None
        if w is not None and w.shape != indices.shape:
            raise InputError(f"{where}: {w.shape} weights for {indices.size} indices (one "
                             "weight an entry)")
        return build_csr(n, rows, indices.astype(np.int64), weights=w,
                         directed=bool(directed), name=name or "arrays")
    sp = sys.modules.get("scipy.sparse")  # a matrix of it means it is imported
    if sp is not None:
        if sp.issparse(obj):
            if obj.shape[0] != obj.shape[1]:
                raise InputError(f"{name or 'matrix'}: an adjacency matrix must be square, "
                                 f"got {obj.shape[0]} x {obj.shape[1]}")
            coo = obj.tocoo()
            w = coo.data if weight is not None and coo.data.dtype != bool else None
            return build_csr(obj.shape[0], coo.row.astype(np.int64), coo.col.astype(np.int64),
                             weights=w, directed=bool(directed), name=name or "matrix")
    if hasattr(obj, "nodes") and hasattr(obj, "edges") and hasattr(obj, "adj"):
        return _from_networkx(obj, name, weight, directed)
    if isinstance(obj, (str, os.PathLike)):  # a graph file, as the command line takes one
        raise InputError(f"{obj}: a path, not a graph: read the file with "
                         "terrain.graph.load_graph(path) (its ids are the sources)")
    what = (f"a dense {obj.ndim}-D array" if isinstance(obj, np.ndarray)
            else f"a {type(obj).__name__}")
    raise InputError(f"{name or 'graph'}: {what} is not a graph: give a terrain Graph, a "
                     "scipy.sparse matrix, a networkx graph or (indptr, indices[, weights]) "
                     "(a dense adjacency matrix: scipy.sparse.csr_array(a))")


def _from_networkx(obj, name, weight, directed):
    """:func:`as_graph` of a networkx graph, read from its adjacency dicts (faster than an
    edge view's tuples)."""
    nodes = list(obj.nodes)
    n = len(nodes)
    rows = [nbrs for _, nbrs in obj.adjacency()]  # the graph's own dicts, in node order
    if directed is None:
        directed = obj.is_directed() if hasattr(obj, "is_directed") else False
    deg = np.fromiter(map(len, rows), np.int64, count=n)
    arcs = int(deg.sum())
    heads = itertools.chain.from_iterable(rows)
    if nodes == list(range(n)):  # nodes numbered 0..n-1 in order: a head is its number
        index = None
        v = np.fromiter(heads, np.int64, count=arcs)
    else:
        index = {x: i for i, x in enumerate(nodes)}
        v = np.fromiter(map(index.__getitem__, heads), np.int64, count=arcs)
    u = np.repeat(np.arange(n, dtype=np.int64), deg)
    w = None
    if weight is not None:
        multi = obj.is_multigraph() if hasattr(obj, "is_multigraph") else False
        datas = [d for nbrs in rows for d in nbrs.values()]
        if multi:  # parallel edges: {key: data}; build_csr keeps the lightest
            keyed = [(k, dd) for k, d in enumerate(datas) for dd in d.values()]
            if any(weight in dd for _, dd in keyed):
                take = np.fromiter((k for k, _ in keyed), np.int64, count=len(keyed))
                u, v = u[take], v[take]
                w = np.asarray([dd.get(weight, 1) for _, dd in keyed])
        elif any(weight in d for d in datas):
            w = np.asarray([d.get(weight, 1) for d in datas])
    if nodes and all(isinstance(x, (int, np.integer)) for x in nodes):
        ids = np.asarray(nodes, dtype=np.int64)
    else:
        ids = np.empty(n, dtype=object)
        ids[:] = nodes
    name = name or "networkx graph"
    if directed or not obj.is_directed():
        # the adjacency of an undirected graph holds each edge both ways: its arcs are the
        # undirected CSR already (rows to sort, self-loops and parallel edges to drop)
        g = build_csr(n, u, v, weights=w, directed=True, ids=ids, name=name)
        g.directed = bool(directed)
        return g
    return build_csr(n, u, v, weights=w, directed=False, ids=ids, name=name)
