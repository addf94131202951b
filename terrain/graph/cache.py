"""The graph-ingest cache (a parsed CSR kept as a Zarr group) and :func:`load_graph`.

Parsing a large text graph takes far longer than reading its CSR back, so ``graph-ingest``
writes ``indptr``, ``indices``, ``weights`` and ``ids`` as arrays of one Zarr group (written
atomically), the rest in its attributes; :func:`load_graph` reads either.
"""

from pathlib import Path

import numpy as np

from ..io.outputs import atomic_output
from ..errors import InputError
from .csr import Graph, build_csr, largest_component
from .loaders import read_graph_file

__all__ = ["write_graph_cache", "read_graph_cache", "is_graph_cache", "load_graph",
           "graph_from_edges", "finish_graph"]

_KIND = "terrain-graph-csr"
_CHUNK = 1 << 24


def is_graph_cache(path):
    """True when ``path`` is a Zarr group written by :func:`write_graph_cache`."""
    from ..io.zarr_meta import open_group
    path = Path(path)
    if not (path / "zarr.json").is_file():
        return False
    try:  # its attributes alone (the grid commands ask it of every store input)
        return open_group(path, mode="r").attrs.get("kind") == _KIND
    except Exception:  # not a readable group: not our cache
        return False


def write_graph_cache(graph, path, overwrite=False):
    """Write ``graph`` to the Zarr group ``path`` (atomically).

    Examples
    --------
    >>> import tempfile, os
    >>> g = build_csr(3, np.array([0, 1]), np.array([1, 2]), id_base=1, name="g")
    >>> p = os.path.join(tempfile.mkdtemp(), "g.zarr")
    >>> write_graph_cache(g, p)
    >>> read_graph_cache(p).indices.tolist()
    [1, 0, 2, 1]
    """
    import zarr
    ids = None
    if graph.ids is not None:
        ids = np.asarray(graph.ids)
        if ids.dtype.kind not in "iu":
            raise ValueError("write_graph_cache: only integer vertex ids can be cached")
    with atomic_output(path, overwrite) as tmp:
        root = zarr.open_group(str(tmp), mode="w")
        for name, arr in (("indptr", graph.indptr), ("indices", graph.indices), ("ids", ids),
                          ("weights", graph.weights)):
            if arr is None:
                continue
            root.create_array(name, data=np.ascontiguousarray(arr),
                              chunks=(min(max(arr.size, 1), _CHUNK),))
        root.attrs.update({"kind": _KIND, "version": 1, "n": graph.n, "nnz": graph.nnz,
                           "id_base": int(graph.id_base), "name": str(graph.name),
                           "directed": bool(graph.directed),
                           "weight_dtype": (None if graph.weights is None
                                            else np.dtype(graph.weights.dtype).name),
                           "meta": {k: v for k, v in graph.meta.items()
                                    if not k.startswith("_")}})


def read_graph_cache(path):
    """Read a cache written by :func:`write_graph_cache` into a :class:`Graph`."""
    import zarr
    path = Path(path)
    if not is_graph_cache(path):
        raise InputError(f"{path}: not a graph cache written by graph-ingest")
    root = zarr.open_group(str(path), mode="r")
    attrs = dict(root.attrs)
    indptr = np.asarray(root["indptr"][:])
    indices = np.asarray(root["indices"][:])
    ids = np.asarray(root["ids"][:]) if "ids" in root else None
    weights = np.asarray(root["weights"][:]) if "weights" in root else None
    if indptr.size != attrs["n"] + 1 or indices.size != attrs["nnz"] or (
            weights is not None and (weights.size != indices.size
                                     or weights.dtype.name != attrs.get("weight_dtype"))):
        raise InputError(f"{path}: damaged graph cache (array sizes disagree with attributes)")
    # named by the cache (what messages about it say); the parsed file is meta["source"]
    return Graph(indptr, indices, ids, int(attrs["id_base"]), str(path),
                 dict(attrs.get("meta", {})), weights, bool(attrs.get("directed", False)))


def load_graph(path, fmt="auto", *, lcc=False, workers=None, directed=None, memory=None):
    """Load a graph file or cache as a :class:`Graph`.

    Parameters
    ----------
    path : str or Path
        Text graph (see :func:`terrain.graph.read_graph_file`) or a graph-ingest cache.
    fmt : {'auto', 'snap', 'mtx', 'dimacs', 'metis', 'store'}
    lcc : bool
        Keep only the largest connected component.
    workers, memory : int, optional
        Parser threads and bytes the reading may take (:func:`read_graph_file`).
    directed : bool, optional
        Arcs as listed (True) or the undirected view (False); default: as the format (DIMACS
        directed) or cache says.

    Returns
    -------
    Graph
        ``graph.meta`` holds ``format``, and with ``lcc`` the component counts.

    Examples
    --------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.txt")
    >>> _ = open(p, "w").write("1 2\\n2 3\\n7 8\\n")
    >>> g = load_graph(p, lcc=True)
    >>> g.n, g.id_array().tolist()
    (3, [1, 2, 3])
    """
    path = Path(path)
    if fmt == "store" or (fmt == "auto" and path.is_dir()):
        return finish_graph(read_graph_cache(path), path, lcc=lcc, directed=directed)
    return graph_from_edges(read_graph_file(path, fmt, workers=workers, memory=memory),
                            lcc=lcc, directed=directed)


def graph_from_edges(edges, *, lcc=False, directed=None):
    """The :class:`Graph` of a parsed file: its CSR, then :func:`finish_graph` (the task after
    the chunk parsers in ``pipelines/graph.py``).

    Parameters
    ----------
    edges : EdgeList
    lcc : bool
        Keep only the largest connected component.
    directed : bool, optional
        Default: ``edges.directed`` (as the format says).

    Returns
    -------
    Graph

    Examples
    --------
    >>> from terrain.graph.loaders import EdgeList
    >>> e = EdgeList(np.array([0, 2]), np.array([1, 3]), 4, None, 1, "g.txt", "mtx")
    >>> g = graph_from_edges(e, lcc=True)
    >>> g.n, g.id_array().tolist(), g.meta["format"]
    (2, [1, 2], 'mtx')
    """
    directed = edges.directed if directed is None else bool(directed)
    u, v, w = edges.u, edges.v, edges.weights
    if directed and edges.symmetric:
        # a symmetric Matrix Market entry stands for both arcs
        u, v = np.concatenate([u, v]), np.concatenate([v, u])
        w = None if w is None else np.concatenate([w, w])
    graph = build_csr(edges.n, u, v, weights=w, directed=directed, ids=edges.ids,
                      id_base=edges.id_base, name=edges.source)
    graph.meta.update(format=edges.fmt, source=edges.source)
    return finish_graph(graph, edges.source, lcc=lcc)


def finish_graph(graph, source, *, lcc=False, directed=None):
    """Refuse a graph without edges (:class:`InputError` naming ``source``); ``lcc``: keep
    its largest component (counts in ``graph.meta['lcc']``); ``directed=False``: undirected;
    ``directed=True`` of an undirected graph (a cache stored so): :class:`InputError`."""
    if directed is False and graph.directed:
        graph = graph.undirected()
    if directed and not graph.directed:  # the arcs' directions are gone: not guessed back
        raise InputError(f"{source}: a graph cache stored undirected, without its arcs' "
                         "directions (cache the file directed to keep them)")
    if graph.m == 0:
        raise InputError(f"{source}: empty graph (no edges besides self-loops)")
    if lcc:
        graph, info = largest_component(graph)
        graph.meta["lcc"] = info
    return graph
