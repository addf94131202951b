# `name as name`: type checkers take a stub's imported names as its exports only in this form
from .cache import (finish_graph as finish_graph, graph_from_edges as graph_from_edges,
    is_graph_cache as is_graph_cache, load_graph as load_graph,
    read_graph_cache as read_graph_cache, write_graph_cache as write_graph_cache)
from .csr import (as_graph as as_graph, build_csr as build_csr, component_roots as component_roots,
    connected_components as connected_components, Graph as Graph,
    largest_component as largest_component, subgraph as subgraph)
from .eccentricity import (diameter as diameter, DiameterResult as DiameterResult,
    effective_diameter as effective_diameter, exact_diameter as exact_diameter,
    largest_component_on as largest_component_on, weighted_diameter as weighted_diameter)
from ._native import discovery_bfs as discovery_bfs, discovery_dijkstra as discovery_dijkstra
from .frontier import FrontierCore as FrontierCore
from .loaders import (DEFAULT_CHUNK_BYTES as DEFAULT_CHUNK_BYTES, detect_format as detect_format,
    EdgeChunk as EdgeChunk, EdgeList as EdgeList, edges_from_chunks as edges_from_chunks,
    FORMATS as FORMATS, GraphFilePlan as GraphFilePlan, parse_graph_chunk as parse_graph_chunk,
    plan_graph_file as plan_graph_file, read_graph_file as read_graph_file,
    read_whole_file as read_whole_file)
from .mst import minimum_spanning_forest as minimum_spanning_forest, MSTResult as MSTResult
from .results import (check_table_path as check_table_path, dense_ids as dense_ids,
    vertex_table as vertex_table, write_table as write_table)
from .shortest_paths import ShortestPaths as ShortestPaths, sssp as sssp, SSSPResult as SSSPResult
from .traversal import (bfs as bfs, BFSResult as BFSResult, is_networkx as is_networkx,
    TraversalStats as TraversalStats, traverse as traverse)
