"""Sparse graphs: loaders, CSR, the frontier core, BFS, exact diameter, SSSP.

Read a file with :func:`load_graph` (SNAP, Matrix Market, DIMACS, METIS, optionally gzip,
or a cache written by ``graph-ingest``), or pass a scipy.sparse matrix, a networkx graph
or ``(indptr, indices)`` straight to :func:`bfs` / :func:`diameter`. See docs/graphs.md.

Examples
--------
>>> import networkx as nx
>>> from terrain.graph import bfs, diameter
>>> bfs(nx.cycle_graph(6), 0, backend="cpu").dist.tolist()
[0, 1, 2, 3, 2, 1]
>>> diameter(nx.cycle_graph(6), backend="cpu").diameter
3
"""

import importlib

# Names are loaded on first use (PEP 562), as in terrain.io: ``terrain bfs`` needs the loaders,
# the CSR and the frontier's C operators, not the diameter, SSSP and MST modules, whose Numba
# kernels would import Numba (about half a second of a one-second process).
_WHERE = {
    "BFSResult": "bfs", "TraversalStats": "bfs", "bfs": "bfs", "traverse": "bfs",
    "finish_graph": "cache", "graph_from_edges": "cache", "is_graph_cache": "cache",
    "load_graph": "cache", "read_graph_cache": "cache", "write_graph_cache": "cache",
    "Graph": "csr", "as_graph": "csr", "build_csr": "csr", "connected_components": "csr",
    "largest_component": "csr",
    "DiameterResult": "diameter", "diameter": "diameter", "distance_histogram": "diameter",
    "effective_diameter": "diameter", "effective_from_histograms": "diameter",
    "exact_diameter": "diameter", "sample_sources": "diameter", "weighted_diameter": "diameter",
    "FrontierCore": "frontier",
    "DEFAULT_CHUNK_BYTES": "loaders", "FORMATS": "loaders", "EdgeChunk": "loaders",
    "EdgeList": "loaders", "GraphFilePlan": "loaders", "detect_format": "loaders",
    "edges_from_chunks": "loaders", "parse_graph_chunk": "loaders",
    "plan_graph_file": "loaders", "read_graph_file": "loaders", "read_whole_file": "loaders",
    "SSSPResult": "sssp", "sssp": "sssp",
    "MSTResult": "mst", "minimum_spanning_forest": "mst",
}


def __getattr__(name):
    if name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_WHERE))


__all__ = [
    "BFSResult", "DEFAULT_CHUNK_BYTES", "DiameterResult", "EdgeChunk", "EdgeList", "FORMATS",
    "FrontierCore", "Graph", "GraphFilePlan", "TraversalStats", "as_graph", "bfs", "build_csr",
    "connected_components", "detect_format", "diameter", "distance_histogram",
    "edges_from_chunks", "effective_diameter", "effective_from_histograms", "exact_diameter",
    "finish_graph", "graph_from_edges", "is_graph_cache", "largest_component", "load_graph",
    "parse_graph_chunk", "plan_graph_file", "read_graph_cache", "read_graph_file",
    "read_whole_file", "sample_sources", "traverse", "write_graph_cache", "sssp", "SSSPResult",
    "minimum_spanning_forest", "MSTResult", "weighted_diameter",
]
