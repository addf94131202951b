"""ctypes bindings of the graph kernels in ``terrain/native/kernels.c``: the edge-list scanner,
SNAP relabelling, the CSR build, the CPU's traversals, Dial's SSSP queue and the radix
heap's, the SSSP predecessors, table text.

C through ctypes, not Numba: a traversal process imports nothing heavier than NumPy, and
ctypes releases the GIL (callers run chunks on threads). Arrays must be C-contiguous with
the dtypes named.

>>> import numpy as np
>>> lf_count(np.frombuffer(b"# c\\n1 2\\n3 4 7\\n", np.uint8))
3
"""

import ctypes

import numpy as np

from .. import native
from ..native import address as _p, threads

__all__ = ["library", "lf_count", "parse_pairs", "parse_metis", "newline_count",
           "shift_ids", "max_id", "mark_present", "relabel", "csr_kernels", "traversal_kernels",
           "format_rows", "discovery_bfs", "discovery_dijkstra", "dial", "dial_labels",
           "sssp_radix", "sssp_parents", "zero_hop_level", "zero_parents", "threads"]

_i64, _i32, _vp, _int = ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int
_SIGNATURES = {
    "terrain_lf_count": (_i64, [_vp, _i64]),
    "terrain_edges_parse": (None, [_vp, _i64, _i64, _int, _int, _int, _int, _i64, _vp, _vp, _int,
                                   _vp, _vp, _vp, _vp]),
    "terrain_metis_parse": (None, [_vp, _i64, _i64, _i64, _i64, _int, _vp, _vp, _vp, _i64,
                                   _vp]),
    "terrain_shift_ids": (_i64, [_vp, _vp, _i64, _i64, _i64, _i64]),
    "terrain_max_id": (_i64, [_vp, _vp, _i64]),
    "terrain_mark_present": (None, [_vp, _i64, _vp]),
    "terrain_relabel": (None, [_vp, _i64, _vp, _vp]),
    "terrain_csr_count": (None, [_vp, _vp, _i64, _i64, _vp, _int]),
    "terrain_csr_offsets": (None, [_vp, _i64, _i64, _vp, _vp]),
}
for _it in ("i32", "i64"):
    for _wt in ("none", "i32", "i64", "f32", "f64"):
        _SIGNATURES[f"terrain_csr_scatter_{_it}_{_wt}"] = (
            None, [_vp, _vp, _vp, _i64, _i64, _vp, _vp, _vp, _int])
        _SIGNATURES[f"terrain_csr_sort_rows_{_it}_{_wt}"] = (
            _int, [_vp, _i64, _i64, _vp, _vp, _int, _vp])
        _SIGNATURES[f"terrain_csr_compact_{_it}_{_wt}"] = (_i64, [_vp, _i64, _vp, _vp, _vp])
    _SIGNATURES[f"terrain_bfs_levels_{_it}"] = (_i64, [_vp, _vp, _i64, _vp, _i64, _vp, _vp, _vp,
                                                       _i64, _i64, _vp, _i64, _vp])
    _SIGNATURES[f"terrain_bfs_parents_{_it}"] = (None, [_vp, _vp, _i64, _vp, _vp])
    _SIGNATURES[f"terrain_bitwise_bfs_{_it}"] = (_i64, [_vp, _vp, _i64, _vp, _i64] + [_vp] * 9)
    _SIGNATURES[f"terrain_component_roots_{_it}"] = (None, [_vp, _vp, _i64, _int, _vp])
    _SIGNATURES[f"terrain_subgraph_{_it}"] = (_i64, [_vp, _vp, _i64, _vp, _vp, _vp, _vp, _vp,
                                                     _i64])
    _SIGNATURES[f"terrain_diameter_bound_{_it}"] = (_i64, [_vp, _vp, _i64, _int] + [_i64] * 5
                                                    + [_vp] * 18)
    _SIGNATURES[f"terrain_mst_upper_{_it}"] = (None, [_vp, _vp, _vp, _i64, _int, _i64, _i64,
                                                      _vp, _vp, _vp, _i64, _vp])
    _SIGNATURES[f"terrain_mst_extract_{_it}"] = (_i64, [_vp, _i64, _vp, _int, _int, _int, _vp,
                                                        _vp])
    _SIGNATURES[f"terrain_mst_offer_{_it}"] = (_i64, [_vp, _vp, _vp, _i64, _i64, _i64, _vp, _vp,
                                                      _vp, _vp, _vp])
    _SIGNATURES[f"terrain_mst_join_{_it}"] = (None, [_vp, _vp, _vp, _i64, _vp, _vp, _i64, _vp])
    for _wt in ("i32", "i64"):
        _SIGNATURES[f"terrain_dial_{_it}_{_wt}"] = (
            _i64, [_vp, _vp, _vp, _i64, _vp, _i64, _vp, _i64, _int, _vp])
    for _wt, _inf in (("f64", ctypes.c_double), ("i64", _i64)):
        _SIGNATURES[f"terrain_sssp_radix_{_it}_{_wt}"] = (_i64, [_vp, _vp, _vp, _vp, _i64, _vp,
                                                                 _vp])
        _SIGNATURES[f"terrain_sssp_parents_{_it}_{_wt}"] = (
            None, [_vp, _vp, _vp, _i64, _vp, _inf, _vp])
        _SIGNATURES[f"terrain_sssp_parents_pull_{_it}_{_wt}"] = (
            None, [_vp, _vp, _vp, _i64, _i64, _vp, _inf, _vp])
        _SIGNATURES[f"terrain_zero_hop_level_{_it}_{_wt}"] = (
            _int, [_vp, _vp, _vp, _i64, _vp, _vp, _i32])
        _SIGNATURES[f"terrain_zero_parents_{_it}_{_wt}"] = (
            None, [_vp, _vp, _vp, _i64, _vp, _vp, _vp])
_SIGNATURES["terrain_newlines"] = (_i64, [_vp, _i64, _i64, _vp, _i64])
_SIGNATURES["terrain_dial_labels"] = (None, [_vp, _i64, _int, _vp, _vp, _i64])
_SIGNATURES["terrain_format_rows"] = (_i64, [_vp, _vp, _i64, _i64, _i64, _int, _vp])
_SIGNATURES["terrain_nx_bfs"] = (_i64, [_vp, _vp, _i64, _i64, _vp, _vp])
_SIGNATURES["terrain_nx_dijkstra"] = (_i64, [_vp, _vp, _i64, _vp, _vp, _vp, _vp, _i64, _int, _i64,
                                             ctypes.c_double, _i64, _vp, _vp, _vp, _vp, _vp])

_TYPE_NAMES = {np.dtype(np.int32): "i32", np.dtype(np.int64): "i64",
               np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


def library():
    """The shared library with the graph kernels' signatures declared."""
    return native.declared(_SIGNATURES)



def lf_count(buf):
    """Line feeds in the uint8 array ``buf``: a bound of the records :func:`parse_pairs`
    parses, for sizing.

    >>> lf_count(np.frombuffer(b"1 2\\n% c\\n\\n3 4", np.uint8))
    3
    """
    return int(library().terrain_lf_count(_p(buf), buf.shape[0]))


def parse_pairs(buf, comment_a, comment_b, tag, limit, u, v, wmode, w_int, w_len, w_flt,
                sep=0):
    """Parse lines ``[tag] a b [w] [ignored...]`` of ``buf`` into ``u``, ``v`` and weight
    tokens, up to ``limit`` records (``< 0``: all); ``kernels.c`` states the contract.

    ``wmode``: 0 no weight, 1 nothing but a comment after the ids, 2 an integer, 3 a
    number. Per record ``w_len`` is the token's length and ``w_int`` its value; a decimal
    negates ``w_len``, puts its start in ``w_int`` and its value in ``w_flt`` (NaN when
    Clinger's fast path is not exact). Returns ``(records, error, line_start)``.

    >>> buf = np.frombuffer(b"% c\\n1 2 5\\n3 4 0.5\\n", np.uint8)
    >>> u, v, w_int = (np.zeros(2, np.int64) for _ in range(3))
    >>> w_len, w_flt = np.zeros(2, np.int32), np.zeros(2)
    >>> parse_pairs(buf, ord("%"), 0, 0, -1, u, v, 3, w_int, w_len, w_flt)
    (2, 0, 10)
    >>> u.tolist(), v.tolist(), w_int.tolist()[0], w_len.tolist(), w_flt.tolist()[1]
    ([1, 3], [2, 4], 5, [1, -3], 0.5)
    """
    res = np.zeros(3, np.int64)
    library().terrain_edges_parse(_p(buf), 0, buf.shape[0], comment_a, comment_b, tag, sep,
                                  limit, _p(u), _p(v), wmode, _p(w_int), _p(w_len), _p(w_flt),
                                  _p(res))
    return int(res[0]), int(res[1]), int(res[2])


def parse_metis(buf, n, skip_before, edge_weights, u, v, w):
    """Parse ``n`` METIS adjacency lines of ``buf``; ``(entries, error, line_start,
    lines_read)``."""
    res = np.zeros(4, np.int64)
    library().terrain_metis_parse(_p(buf), buf.shape[0], 0, n, skip_before, int(edge_weights),
                                  _p(u), _p(v), _p(w), u.shape[0], _p(res))
    return tuple(int(x) for x in res)


def newline_count(buf, end=None):
    """Newlines in ``buf[:end]`` (``memchr``)."""
    end = buf.shape[0] if end is None else max(0, min(int(end), buf.shape[0]))
    return int(library().terrain_newlines(_p(buf), end, 0, None, 0))


def shift_ids(u, v, lo, hi_u, hi_v):
    """Subtract ``lo`` from every endpoint in place; the first record out of range, or -1."""
    return int(library().terrain_shift_ids(_p(u), _p(v), u.shape[0], lo, hi_u, hi_v))


def max_id(u, v):
    return int(library().terrain_max_id(_p(u), _p(v), u.shape[0]))


def mark_present(ids, present):
    library().terrain_mark_present(_p(ids), ids.shape[0], _p(present))


def relabel(ids, table, out):
    """``out[k] = table[ids[k]]`` (``out`` may be ``ids``)."""
    library().terrain_relabel(_p(ids), ids.shape[0], _p(table), _p(out))


def csr_kernels(index_dtype, weight_dtype):
    """``(scatter, sort_rows, compact)`` for int32/int64 indices and the weight dtype (None:
    unweighted)."""
    lib = library()
    it = _TYPE_NAMES[np.dtype(index_dtype)]
    wt = "none" if weight_dtype is None else _TYPE_NAMES[np.dtype(weight_dtype)]
    return (getattr(lib, f"terrain_csr_scatter_{it}_{wt}"),
            getattr(lib, f"terrain_csr_sort_rows_{it}_{wt}"),
            getattr(lib, f"terrain_csr_compact_{it}_{wt}"))


def traversal_kernels(index_dtype):
    """The CPU's traversal kernels for int32/int64 indices, by short name (contracts in
    ``kernels.c``)."""
    lib = library()
    it = _TYPE_NAMES[np.dtype(index_dtype)]
    names = {"levels": "bfs_levels", "parents": "bfs_parents", "bitwise": "bitwise_bfs",
             "roots": "component_roots", "subgraph": "subgraph", "bound": "diameter_bound",
             "mst_upper": "mst_upper", "mst_extract": "mst_extract", "mst_offer": "mst_offer",
             "mst_join": "mst_join"}
    return {key: getattr(lib, f"terrain_{name}_{it}") for key, name in names.items()}


def format_rows(columns, sep=","):
    """The rows of equal-length int64 / float64 ``columns`` as text (``%.17g`` for reals, an
    integral one with ``.0``), formatted by C in row blocks on threads: a list of uint8
    arrays, in order.

    >>> b"".join(x.tobytes() for x in format_rows([np.array([1, -20]), np.array([0.5, 3.0])]))
    b'1,0.5\\n-20,3.0\\n'
    """
    cols = [np.ascontiguousarray(c, np.float64 if np.asarray(c).dtype.kind == "f" else np.int64)
            for c in columns]
    rows = cols[0].shape[0] if cols else 0
    kinds = np.array([1 if c.dtype.kind == "f" else 0 for c in cols], np.int32)
    ptrs = (ctypes.c_void_p * max(len(cols), 1))(*[_p(c) for c in cols])
    block = 1 << 17
    lib = library()

    def one(r0):
        r1 = min(rows, r0 + block)
        out = np.empty(27 * len(cols) * (r1 - r0), np.uint8)
        size = lib.terrain_format_rows(ptrs, _p(kinds), len(cols), r0, r1, ord(sep), _p(out))
        return out[:size]

    starts = range(0, rows, block)
    if threads(rows * len(cols)) == 1:
        return [one(r0) for r0 in starts]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(threads()) as pool:
        return list(pool.map(one, starts))


def dial(indptr, indices, weights, sources, label, max_weight, shift, stop):
    """Dial's bucket-queue Dijkstra into the packed int64 ``label`` array; returns the
    settled count, or -3 when it returned early, ``stop[0]`` (a uint8 array, polled every
    65536 pops: :func:`terrain.native.interruptible`) being set."""
    it = _TYPE_NAMES[indices.dtype]
    wt = _TYPE_NAMES[weights.dtype]
    settled = getattr(library(), f"terrain_dial_{it}_{wt}")(
        _p(indptr), _p(indices), _p(weights), indices.shape[0], _p(sources),
        sources.shape[0], _p(label), int(max_weight), int(shift), _p(stop))
    if settled == -1:
        raise MemoryError("sssp: no memory for Dial's bucket queue")
    return int(settled)


def dial_labels(label, shift, dist, pred, inf):
    """Unpack :func:`dial`'s labels into ``dist`` (``inf`` unreached) and ``pred`` (unless
    None)."""
    library().terrain_dial_labels(_p(label), label.shape[0], int(shift), _p(dist),
                                  _p(pred), int(inf))


def _weighted(name, indices, weights, dist):
    """The kernel ``name`` for these index and weight dtypes (``dist`` summed as the weights)."""
    if dist.dtype != weights.dtype:
        raise TypeError(f"{name}: distances {dist.dtype} are not summed as weights {weights.dtype}")
    return getattr(library(), f"{name}_{_TYPE_NAMES[indices.dtype]}_{_TYPE_NAMES[weights.dtype]}")


def sssp_radix(indptr, indices, weights, sources, dist, stop):
    """Dijkstra on a radix heap from ``sources`` into ``dist`` (pre-filled with the weights'
    ``inf``; float64 or int64 as the weights, none negative); returns the settled count, or
    -3 when it returned early, ``stop[0]`` (a uint8 array, polled every 65536 pops:
    :func:`terrain.native.interruptible`) being set.

    >>> d, stop = np.full(3, np.inf), np.zeros(1, np.uint8)
    >>> sssp_radix(np.array([0, 1, 2, 2]), np.array([1, 2]), np.array([0.5, 2.0]), [0], d,
    ...            stop), d
    (3, array([0. , 0.5, 2.5]))
    """
    src = np.ascontiguousarray(sources, np.int64)
    settled = _weighted("terrain_sssp_radix", indices, weights, dist)(
        _p(indptr), _p(indices), _p(weights), _p(src), src.shape[0], _p(dist), _p(stop))
    if settled == -1:
        raise MemoryError("sssp: no memory for the Dijkstra radix heap")
    return int(settled)


def sssp_parents(indptr, indices, weights, dist, inf, pred, pull=False):
    """Into ``pred`` (pre-filled with the int64 maximum), each vertex's smallest tight tail
    strictly closer (``kernels.c``); ``pull``: an undirected graph's rows are pulled, ranges
    of vertices on threads."""
    inf = float(inf) if weights.dtype.kind == "f" else int(inf)
    if not pull:
        _weighted("terrain_sssp_parents", indices, weights, dist)(
            _p(indptr), _p(indices), _p(weights), dist.shape[0], _p(dist), inf, _p(pred))
        return
    fn = _weighted("terrain_sssp_parents_pull", indices, weights, dist)
    n = dist.shape[0]
    parts = threads(indices.shape[0])
    bounds = [n * k // parts for k in range(parts + 1)]

    def one(k):
        fn(_p(indptr), _p(indices), _p(weights), bounds[k], bounds[k + 1], _p(dist), inf,
           _p(pred))

    if parts == 1:
        one(0)
        return
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(parts) as pool:
        list(pool.map(one, range(parts)))


def zero_hop_level(indptr, indices, weights, dist, hops, level):
    """Hop level ``level + 1`` (int32 ``hops``, -1 unset) for the vertices a zero-length arc
    (``dist[u] + w == dist[u] == dist[v]``: a zero weight, or one absorbed in the sum) from
    level ``level`` reaches; whether any was."""
    return bool(_weighted("terrain_zero_hop_level", indices, weights, dist)(
        _p(indptr), _p(indices), _p(weights), dist.shape[0], _p(dist), _p(hops), int(level)))


def zero_parents(indptr, indices, weights, dist, hops, pred):
    """Behind zero-length arcs, ``pred`` = the smallest zero-length tail one hop level closer."""
    _weighted("terrain_zero_parents", indices, weights, dist)(
        _p(indptr), _p(indices), _p(weights), dist.shape[0], _p(dist), _p(hops), _p(pred))


def discovery_bfs(indptr, indices, sources):
    """BFS in discovery order over rows as given (NetworkX's order for ``G._adj``'s rows):
    ``(order, dist)``, the reached vertices as found (sources first), levels (-1 unreached).

    >>> discovery_bfs(np.array([0, 2, 3, 4]), np.array([2, 1, 0, 0]), [0])
    (array([0, 2, 1]), array([0, 1, 1], dtype=int32))
    """
    n = indptr.shape[0] - 1
    order = np.empty(max(n, 1), np.int64)
    order[:len(sources)] = sources
    dist = np.empty(max(n, 1), np.int32)
    count = library().terrain_nx_bfs(_p(indptr), _p(indices), n, len(sources), _p(order),
                                     _p(dist))
    return order[:count], dist[:n]


def discovery_dijkstra(indptr, indices, kind, w_int, w_flt, sources, cutoff=None, target=-1):
    """NetworkX's Dijkstra step by step (its heap order, Python's int and float sums) over
    rows as given; arc weights by ``kind`` (0 int, 1 float, 2 one NetworkX fails on, 3
    hidden); ``cutoff``: None, ``(1, int)`` or ``(2, float)``. Returns ``(status, order,
    d_int, d_flt, d_isf, err)``: status the settled count or a negative code (kernels.c)."""
    n = indptr.shape[0] - 1
    ck, cv = cutoff if cutoff is not None else (0, 0)
    src = np.ascontiguousarray(sources, np.int64)
    out = np.empty(max(n, 1), np.int64)
    d_i, d_f = np.empty(max(n, 1), np.int64), np.empty(max(n, 1), np.float64)
    d_isf, err = np.empty(max(n, 1), np.uint8), np.zeros(2, np.int64)
    status = library().terrain_nx_dijkstra(
        _p(indptr), _p(indices), n, _p(kind), _p(w_int), _p(w_flt), _p(src), src.size, ck,
        int(cv) if ck == 1 else 0, float(cv) if ck == 2 else 0.0, target, _p(out), _p(d_i),
        _p(d_f), _p(d_isf), _p(err))
    return status, out[:max(status, 0)], d_i, d_f, d_isf, err.tolist()
