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

from .bfs import BFSResult, TraversalStats, bfs, traverse
from .cache import (finish_graph, graph_from_edges, is_graph_cache, load_graph,
                    read_graph_cache, write_graph_cache)
from .csr import Graph, as_graph, build_csr, connected_components, largest_component
from .diameter import (DiameterResult, diameter, distance_histogram, effective_diameter,
                       effective_from_histograms, exact_diameter, sample_sources)
from .frontier import FrontierCore
from .loaders import (DEFAULT_CHUNK_BYTES, FORMATS, EdgeChunk, EdgeList, GraphFilePlan,
                      detect_format, edges_from_chunks, parse_graph_chunk, plan_graph_file,
                      read_graph_file, read_whole_file)
from .sssp import SSSPResult, sssp
from .mst import MSTResult, minimum_spanning_forest
from .diameter import weighted_diameter

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
