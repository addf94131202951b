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

import sys
import types

from .._lazy import lazy_names

from .bfs import BFSResult, TraversalStats, bfs, traverse
from .cache import (finish_graph, graph_from_edges, is_graph_cache, load_graph,
                    read_graph_cache, write_graph_cache)
from .csr import Graph, as_graph, build_csr, connected_components, largest_component
from .frontier import FrontierCore
from .loaders import (DEFAULT_CHUNK_BYTES, FORMATS, EdgeChunk, EdgeList, GraphFilePlan,
                      detect_format, edges_from_chunks, parse_graph_chunk, plan_graph_file,
                      read_graph_file, read_whole_file)

# The diameter, SSSP and MST names are loaded on first use (PEP 562): ``terrain bfs`` needs
# the modules above only (C kernels, :mod:`terrain.graph._native`), and those three import
# Numba for their kernels (about half a second of a one-second process).
_WHERE = {
    "DiameterResult": "diameter", "diameter": "diameter", "distance_histogram": "diameter",
    "effective_diameter": "diameter", "effective_from_histograms": "diameter",
    "exact_diameter": "diameter", "sample_sources": "diameter", "weighted_diameter": "diameter",
    "SSSPResult": "sssp", "sssp": "sssp",
    "MSTResult": "mst", "minimum_spanning_forest": "mst",
}


__getattr__, __dir__ = lazy_names(__name__, _WHERE)


class _Package(types.ModuleType):
    """Importing the submodule ``diameter`` (or ``sssp``) binds the package attribute of that
    name to the module; the public name is the function of the same name, as the eager
    ``from .diameter import diameter`` left it."""

    def __setattr__(self, name, value):
        if name in ("diameter", "sssp") and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


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
