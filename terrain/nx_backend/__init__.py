"""A NetworkX backend: ``nx.diameter(G, backend="terrain")`` runs terrain's BFS and exact
diameter (CPU with Numba, or the GPU).

NetworkX finds backends through two entry points (declared in pyproject.toml, the way
nx-cugraph does it): ``networkx.backends`` -> :data:`BackendInterface` (``convert_from_nx``,
``convert_to_nx``, ``can_run``, ``should_run`` and one function per algorithm) and
``networkx.backend_info`` -> :func:`get_info` (which functions exist, what they accept).

Algorithms
----------
``bfs_layers``, ``single_source_shortest_path_length`` (hop counts), ``eccentricity``,
``diameter``, ``radius``, ``center``, ``periphery`` on undirected graphs (multigraphs too:
parallel edges do not change hop distances), unweighted. ``can_run`` declines, with the
reason, what terrain does not compute (directed graphs, ``weight=``, a precomputed ``e=`` or
``sp=``), so NetworkX runs those itself when fallback is on. Disconnected graphs raise
NetworkX's own ``NetworkXError`` where NetworkX does.

Weighted: ``single_source_dijkstra_path_length`` and ``dijkstra_path_length`` run
:func:`terrain.graph.sssp` (the same left-fold sums NetworkX forms, so the same numbers;
parallel edges of a multigraph count with their smallest weight, as in NetworkX);
``minimum_spanning_tree`` runs :func:`terrain.graph.minimum_spanning_forest` and returns a
NetworkX graph of ``G``'s class with ``G``'s nodes (with their data), graph attributes and
the forest's edges with their data. Any ``algorithm=`` gives the minimum spanning forest
(the same edges as NetworkX's when the weights are distinct; the same total weight always).
``can_run`` declines a callable ``weight``, ``ignore_nan=True``, multigraph MSTs and
directed graphs. Edges without the weight attribute weigh 1, as in NetworkX.

Conversion keeps the node order of the NetworkX graph: internal vertex ``i`` is
``list(G)[i]``; results come back as NetworkX returns them (dicts keyed by node, lists of
nodes in ``G``'s node order).

Examples
--------
>>> import networkx as nx
>>> G = nx.cycle_graph(7)
>>> BackendInterface.diameter(BackendInterface.convert_from_nx(G))
3
>>> sorted(BackendInterface.center(BackendInterface.convert_from_nx(nx.path_graph(5))))
[2]
"""

import numpy as np

__all__ = ["BackendInterface", "TerrainGraph", "get_info", "FUNCTIONS"]

BACKEND_NAME = "terrain"
_NOT_CONNECTED = "Found infinite path length because the graph is not connected"


class TerrainGraph:
    """A NetworkX graph converted for terrain: the CSR (:class:`terrain.graph.Graph`) and
    the node labels (internal vertex ``i`` is ``nodes[i]``)."""

    __networkx_backend__ = BACKEND_NAME

    def __init__(self, csr, nodes, directed=False, multigraph=False, graph_attrs=None):
        self.csr = csr
        self.nodes = list(nodes)
        self.directed = bool(directed)
        self.multigraph = bool(multigraph)
        self.graph = dict(graph_attrs or {})
        self._index = None
        self.edge_weight = None   # the edge attribute the CSR's weights came from
        self.node_data = None     # [(node, data)] when converted with preserve_node_attrs
        self.edge_data = None     # [(u, v, data)] when converted with preserve_edge_attrs
        self.__networkx_cache__ = {}

    def index_of(self, node):
        if self._index is None:
            self._index = {v: i for i, v in enumerate(self.nodes)}
        return self._index[node]

    def __contains__(self, node):
        try:
            self.index_of(node)
            return True
        except (KeyError, TypeError):
            return False

    def __len__(self):
        return len(self.nodes)

    def number_of_nodes(self):
        return len(self.nodes)

    def is_directed(self):
        return self.directed

    def is_multigraph(self):
        return self.multigraph

    def __repr__(self):
        return f"TerrainGraph({len(self.nodes)} nodes, {self.csr.m} edges)"


def _core(G):
    from terrain.graph import FrontierCore
    return FrontierCore(G.csr, None)


def _hops(G, source):
    """(dist array, stats) of one BFS from internal vertex ``source``."""
    from terrain.graph import traverse
    core = _core(G)
    stats = traverse(core, np.array([source], np.int64))
    return core.backend.to_numpy(core.dist), stats


def _node_index(G, node):
    import networkx as nx
    if node not in G:
        raise nx.NodeNotFound(f"Source {node} is not in G")
    return G.index_of(node)


class BackendInterface:
    """What NetworkX loads from the ``networkx.backends`` entry point."""

    # ---- conversion -----------------------------------------------------------------
    @staticmethod
    def convert_from_nx(G, edge_attrs=None, node_attrs=None, preserve_edge_attrs=False,
                        preserve_node_attrs=False, preserve_graph_attrs=False, name=None,
                        graph_name=None):
        """A NetworkX graph as a :class:`TerrainGraph`: unweighted, or weighted by the one
        attribute named in ``edge_attrs`` (``{name: default}``); the nodes' and edges' data
        kept as lists when asked to preserve them (``minimum_spanning_tree``)."""
        from terrain.graph import build_csr
        if isinstance(G, TerrainGraph):
            return G
        nodes = list(G)
        index = {v: i for i, v in enumerate(nodes)}
        m = G.number_of_edges()
        u = np.empty(m, np.int64)
        v = np.empty(m, np.int64)
        for k, (a, b) in enumerate(G.edges()):
            u[k], v[k] = index[a], index[b]
        weight = None
        if isinstance(edge_attrs, dict) and len(edge_attrs) == 1:
            weight = next(iter(edge_attrs))
        weights = None
        if weight is not None:
            default = edge_attrs[weight]
            default = 1 if default is None else default
            weights = np.asarray([d.get(weight, default) for _, _, d in G.edges(data=True)])
        csr = build_csr(len(nodes), u, v, weights=weights if m else None,
                        name=graph_name or "networkx graph")
        out = TerrainGraph(csr, nodes, G.is_directed(), G.is_multigraph(),
                           G.graph if preserve_graph_attrs else None)
        out._index = index
        out.edge_weight = weight
        if preserve_node_attrs:
            out.node_data = list(G.nodes(data=True))
        if preserve_edge_attrs:
            out.edge_data = list(G.edges(data=True))
        return out

    @staticmethod
    def convert_to_nx(obj, *, name=None):
        """Results are already NetworkX types; a :class:`TerrainGraph` becomes a Graph."""
        if isinstance(obj, TerrainGraph):
            import networkx as nx
            G = nx.Graph(**obj.graph)
            G.add_nodes_from(obj.nodes)
            indptr, indices = obj.csr.indptr, obj.csr.indices
            for i in range(len(obj.nodes)):
                for j in indices[indptr[i]:indptr[i + 1]]:
                    if i < j:
                        G.add_edge(obj.nodes[i], obj.nodes[int(j)])
            return G
        return obj

    @staticmethod
    def can_run(name, args, kwargs):
        """True, or the reason terrain cannot run ``name`` with these arguments."""
        bound = dict(zip(PARAMETERS.get(name, ("G",)), args))
        bound.update(kwargs)
        G = bound.get("G")
        if G is not None and hasattr(G, "is_directed") and G.is_directed():
            return "terrain's BFS and diameter treat graphs as undirected"
        weighted = name in WEIGHTED
        if weighted and callable(bound.get("weight")):
            return "terrain reads weights from an edge attribute (weight= a callable given)"
        if not weighted and bound.get("weight") is not None:
            return "terrain computes hop distances (weight=None)"
        if name == "minimum_spanning_tree":
            if bound.get("ignore_nan"):
                return "ignore_nan=True: NetworkX skips NaN edges itself"
            if G is not None and hasattr(G, "is_multigraph") and G.is_multigraph():
                return "multigraph: NetworkX keeps edge keys in the tree"
        for key in ("e", "sp"):
            if bound.get(key) is not None:
                return f"{key}= given: NetworkX computes from it"
        if G is not None and hasattr(G, "__len__") and len(G) == 0:
            return "empty graph"
        return True

    @staticmethod
    def should_run(name, args, kwargs):
        return True

    # ---- algorithms -----------------------------------------------------------------
    @staticmethod
    def bfs_layers(G, sources):
        """Layers of a BFS from ``sources`` (a node or an iterable of nodes)."""
        import networkx as nx
        from terrain.graph import traverse
        if sources in G:
            sources = [sources]
        src = []
        for s in sources:
            if s not in G:
                raise nx.NetworkXError(f"The node {s} is not in the graph.")
            src.append(G.index_of(s))
        core = _core(G)
        stats = traverse(core, np.unique(np.array(src, np.int64)))
        dist = core.backend.to_numpy(core.dist)
        order = np.argsort(dist, kind="stable")
        order = order[dist[order] >= 0]
        bounds = np.cumsum([0] + list(stats.level_sizes))

        def layers():
            for k in range(len(stats.level_sizes)):
                yield [G.nodes[int(i)] for i in order[bounds[k]:bounds[k + 1]]]
        return layers()

    @staticmethod
    def single_source_shortest_path_length(G, source, cutoff=None):
        """Hop distance to every node reachable from ``source`` (within ``cutoff``)."""
        s = _node_index(G, source)
        dist, _ = _hops(G, s)
        if cutoff is None:
            cutoff = float("inf")
        order = np.argsort(dist, kind="stable")
        return {G.nodes[int(i)]: int(dist[i]) for i in order if 0 <= dist[i] <= cutoff}

    @staticmethod
    def eccentricity(G, v=None, sp=None, weight=None):
        """Eccentricity of one node (a number) or of several / all nodes (a dict)."""
        import networkx as nx
        from terrain.graph import traverse
        single = v is not None and v in G
        if v is None:
            wanted = list(G.nodes)
        elif single:
            wanted = [v]
        else:  # a container of nodes: those in G, as NetworkX's nbunch_iter takes them
            try:
                wanted = [node for node in v if node in G]
            except TypeError:
                raise nx.NetworkXError("nbunch is not a node or a sequence of nodes.") from None
        core = _core(G)
        n = len(G)
        out = {}
        for node in wanted:
            stats = traverse(core, np.array([G.index_of(node)], np.int64))
            if stats.reached != n:
                raise nx.NetworkXError(_NOT_CONNECTED)
            out[node] = stats.eccentricity
        return out[v] if single else out

    @staticmethod
    def _bounds(G):
        from terrain.graph import diameter
        r = diameter(G.csr, extremes=True)
        if not r.connected:
            import networkx as nx
            raise nx.NetworkXError(_NOT_CONNECTED)
        return r

    @staticmethod
    def diameter(G, e=None, usebounds=False, weight=None):
        """Exact diameter (terrain's eccentricity bounding)."""
        from terrain.graph import diameter
        r = diameter(G.csr)
        if not r.connected:
            import networkx as nx
            raise nx.NetworkXError(_NOT_CONNECTED)
        return int(r.diameter)

    @staticmethod
    def radius(G, e=None, usebounds=False, weight=None):
        return int(BackendInterface._bounds(G).radius)

    @staticmethod
    def center(G, e=None, usebounds=False, weight=None):
        """Nodes of minimum eccentricity, in ``G``'s node order."""
        ids = sorted(int(i) for i in BackendInterface._bounds(G).center)
        return [G.nodes[i] for i in ids]

    @staticmethod
    def periphery(G, e=None, usebounds=False, weight=None):
        """Nodes of maximum eccentricity, in ``G``'s node order."""
        ids = sorted(int(i) for i in BackendInterface._bounds(G).periphery)
        return [G.nodes[i] for i in ids]

    # ---- weighted -------------------------------------------------------------------
    @staticmethod
    def _weighted_csr(G, weight):
        """G's CSR weighted by the attribute ``weight`` (None: every edge weighs 1)."""
        if G.edge_weight == weight:
            return G.csr
        if weight is None:
            from terrain.graph import build_csr
            return G.csr if G.csr.weights is None else build_csr(
                G.csr.n, *_csr_edges(G.csr), name=G.csr.name)
        if G.edge_data is not None:
            from terrain.graph import build_csr
            w = np.asarray([d.get(weight, 1) for _, _, d in G.edge_data])
            u = np.asarray([G.index_of(a) for a, _, _ in G.edge_data], np.int64)
            v = np.asarray([G.index_of(b) for _, b, _ in G.edge_data], np.int64)
            return build_csr(G.csr.n, u, v, weights=w if w.size else None, name=G.csr.name)
        raise NotImplementedError(f"this TerrainGraph carries weights {G.edge_weight!r}, not "
                                  f"{weight!r} (convert with edge_attrs={{{weight!r}: 1}})")

    @staticmethod
    def single_source_dijkstra_path_length(G, source, cutoff=None, weight="weight"):
        """Weighted distance to every node reachable from ``source`` (within ``cutoff``),
        in order of distance, as NetworkX returns it."""
        from terrain.graph import sssp
        import networkx as nx
        if source not in G:
            raise nx.NodeNotFound(f"Node {source} not found in graph")
        r = sssp(BackendInterface._weighted_csr(G, weight), G.index_of(source),
                 backend="cpu", predecessors=False)
        reached = np.flatnonzero(r.reached)
        if cutoff is not None:
            reached = reached[r.dist[reached] <= cutoff]
        order = reached[np.argsort(r.dist[reached], kind="stable")]
        out = {G.nodes[int(i)]: r.dist[i].item() for i in order}
        out[source] = 0   # NetworkX's source distance is the int 0 whatever the weights
        return out

    @staticmethod
    def dijkstra_path_length(G, source, target, weight="weight"):
        """Weighted distance from ``source`` to ``target``."""
        import networkx as nx
        if source not in G:
            raise nx.NodeNotFound(f"Node {source} not found in graph")
        if source == target:
            return 0
        dist = BackendInterface.single_source_dijkstra_path_length(G, source, weight=weight)
        try:
            return dist[target]
        except (KeyError, TypeError):
            raise nx.NetworkXNoPath(f"Node {target} not reachable from {source}") from None

    @staticmethod
    def minimum_spanning_tree(G, weight="weight", algorithm="kruskal", ignore_nan=False):
        """The minimum spanning forest as a NetworkX graph: ``G``'s nodes (with their data)
        and graph attributes, the forest's edges with their data."""
        import networkx as nx
        from terrain.graph import build_csr, minimum_spanning_forest
        if algorithm not in ("kruskal", "prim", "boruvka"):
            raise ValueError(f"{algorithm} is not a valid choice for an algorithm.")
        if ignore_nan or G.multigraph:
            raise NotImplementedError("terrain: ignore_nan=True and multigraphs run in NetworkX")
        if G.edge_data is None:
            raise NotImplementedError("minimum_spanning_tree needs the edges' data (convert "
                                      "with preserve_edge_attrs=True)")
        edges = [(a, b, d) for a, b, d in G.edge_data if a != b]
        u = np.asarray([G.index_of(a) for a, _, _ in edges], np.int64)
        v = np.asarray([G.index_of(b) for _, b, _ in edges], np.int64)
        w = np.asarray([d.get(weight, 1) for _, _, d in edges])
        if w.dtype.kind == "f" and np.isnan(w).any():
            k = int(np.flatnonzero(np.isnan(w))[0])
            raise ValueError(f"NaN found as an edge weight. Edge {edges[k]}")
        if w.dtype.kind not in "iuf" and w.size:
            raise NotImplementedError(f"terrain: edge weights of type {w.dtype} run in NetworkX")
        csr = build_csr(len(G), u, v, weights=w if w.size else None, name=G.csr.name)
        r = minimum_spanning_forest(csr, backend="cpu")
        data = {}
        for (a, b, d), i, j in zip(edges, u.tolist(), v.tolist()):
            key = (min(i, j), max(i, j))
            if key not in data or d.get(weight, 1) < data[key].get(weight, 1):
                data[key] = d
        T = nx.Graph()
        T.graph.update(G.graph)
        T.add_nodes_from(G.node_data if G.node_data is not None else G.nodes)
        T.add_edges_from((G.nodes[i], G.nodes[j], data[(i, j)])
                         for i, j in zip(r.u.tolist(), r.v.tolist()))
        return T


def _csr_edges(csr):
    rows = np.repeat(np.arange(csr.n, dtype=np.int64), np.diff(csr.indptr))
    return rows, csr.indices.astype(np.int64)


WEIGHTED = ("single_source_dijkstra_path_length", "dijkstra_path_length",
            "minimum_spanning_tree")

# positional parameters of the NetworkX functions (to read ``args`` in can_run)
PARAMETERS = {"bfs_layers": ("G", "sources"),
              "single_source_shortest_path_length": ("G", "source", "cutoff"),
              "eccentricity": ("G", "v", "sp", "weight"),
              **{k: ("G", "e", "usebounds", "weight")
                 for k in ("diameter", "radius", "center", "periphery")},
              "single_source_dijkstra_path_length": ("G", "source", "cutoff", "weight"),
              "dijkstra_path_length": ("G", "source", "target", "weight"),
              "minimum_spanning_tree": ("G", "weight", "algorithm", "ignore_nan")}

FUNCTIONS = {
    "bfs_layers": {},
    "single_source_shortest_path_length": {},
    "eccentricity": {"additional_docs": "Hop distances; undirected graphs.",
                     "extra_parameters": {}},
    "diameter": {"additional_docs": "Exact, by eccentricity bounding (few BFS runs)."},
    "radius": {"additional_docs": "Exact, by eccentricity bounding."},
    "center": {"additional_docs": "Exact, by eccentricity bounding."},
    "periphery": {"additional_docs": "Exact, by eccentricity bounding."},
    "single_source_dijkstra_path_length": {
        "additional_docs": "terrain's SSSP (Dijkstra / Dial); undirected graphs, weights >= 0."},
    "dijkstra_path_length": {"additional_docs": "terrain's SSSP; undirected graphs."},
    "minimum_spanning_tree": {
        "additional_docs": "Boruvka with unique packed keys; any algorithm= gives the forest."},
}


def get_info():
    """What NetworkX loads from the ``networkx.backend_info`` entry point."""
    return {
        "backend_name": BACKEND_NAME,
        "project": "terrain",
        "package": "terrain",
        "short_summary": "Fast exact BFS and diameter on the CPU (Numba) or the GPU (CuPy).",
        "functions": {k: dict(v) for k, v in FUNCTIONS.items()},
        "default_config": {},
    }
