from .cache import (finish_graph, graph_from_edges, is_graph_cache, load_graph,
    read_graph_cache, write_graph_cache)
from .csr import (as_graph, build_csr, component_roots, connected_components, Graph,
    largest_component, subgraph)
from .eccentricity import (diameter, DiameterResult, effective_diameter, exact_diameter,
    largest_component_on, weighted_diameter)
from ._native import discovery_bfs, discovery_dijkstra
from .frontier import FrontierCore
from .loaders import (DEFAULT_CHUNK_BYTES, detect_format, EdgeChunk, EdgeList,
    edges_from_chunks, FORMATS, GraphFilePlan, parse_graph_chunk, plan_graph_file,
    read_graph_file, read_whole_file)
from .mst import minimum_spanning_forest, MSTResult
from .results import check_table_path, dense_ids, vertex_table, write_table
from .shortest_paths import ShortestPaths, sssp, SSSPResult
from .traversal import bfs, BFSResult, is_networkx, TraversalStats, traverse
