"""Sparse graphs: loaders, CSR, the frontier core, BFS and exact diameter.

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

from .bfs import BFSResult, TraversalStats, bfs, traverse
from .cache import is_graph_cache, load_graph, read_graph_cache, write_graph_cache
from .csr import Graph, as_graph, build_csr, connected_components, largest_component
from .diameter import DiameterResult, diameter, effective_diameter
from .frontier import FrontierCore
from .loaders import FORMATS, EdgeList, detect_format, read_graph_file

__all__ = [
    "BFSResult", "DiameterResult", "EdgeList", "FORMATS", "FrontierCore", "Graph",
    "TraversalStats", "as_graph", "bfs", "build_csr", "connected_components", "detect_format",
    "diameter", "effective_diameter", "is_graph_cache", "largest_component", "load_graph",
    "read_graph_cache", "read_graph_file", "traverse", "write_graph_cache",
]
