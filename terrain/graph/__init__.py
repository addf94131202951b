"""Sparse graphs: loaders and cache, CSR, the frontier core, BFS, exact diameter, SSSP, MST.

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

# Loaded on first use (lazy_loader, from the stub ``__init__.pyi``): ``terrain bfs`` needs the
# loaders, the CSR and the frontier core only (C kernels), not the Numba kernels of the others.
import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
