"""A NetworkX backend: ``nx.diameter(G, backend="terrain")`` runs terrain's exact diameter, and
``bfs_layers``, shortest path lengths and ``minimum_spanning_tree`` run on terrain's kernels,
returning what NetworkX returns, in NetworkX's order.

NetworkX finds it through the entry points ``networkx.backends`` (:class:`BackendInterface`)
and ``networkx.backend_info`` (:func:`get_info`). A :class:`TerrainGraph` keeps the graph as
NetworkX iterates it, so orders, number types and tie-breaking are NetworkX's own; what the
backend cannot do the NetworkX way it declines (``can_run``, ``NotImplementedError``).
Details: docs/graphs.md ("The NetworkX backend").

Examples
--------
>>> import networkx as nx
>>> B = BackendInterface
>>> B.diameter(B.convert_from_nx(nx.cycle_graph(7)))
3
>>> list(B.bfs_layers(B.convert_from_nx(nx.Graph([(0, 1), (0, 2), (2, 3), (1, 4)])), 0))
[[0], [1, 2], [4, 3]]
"""

import math

import numpy as np

__all__ = ["BackendInterface", "TerrainGraph", "get_info", "FUNCTIONS"]

BACKEND_NAME = "terrain"
_NOT_CONNECTED = "Found infinite path length because the graph is not connected"
_NOT_CONNECTED_BOUNDS = "Cannot compute metric because graph is not connected."
#: NetworkX's work below which a call stays in NetworkX (should_run): edges for the spanning
#: tree, nodes x edges for the all-pairs measures
TREE_MIN_EDGES = 100_000
ALL_PAIRS_MIN_WORK = 10_000


class TerrainGraph:
    """A NetworkX graph converted for terrain: its nodes (vertex ``i`` is ``nodes[i]``), its
    rows in ``G._adj`` order (``indptr``, ``indices``) with each arc's data dict
    (``arc_data``; a key dict for multigraphs), and the simple CSR (:meth:`csr`)."""

    __networkx_backend__ = BACKEND_NAME

    def __init__(self, G, preserve_node_attrs=False, preserve_graph_attrs=False):
        self.nodes = list(G)
        self.index = {v: i for i, v in enumerate(self.nodes)}
        adj = G._adj
        index = self.index
        # rows as iterated: a view's len() may count neighbours its iteration filters out
        # (a multigraph's edge_subgraph counts a neighbour with none of its keys kept)
        indices, ends = [], []
        for v in self.nodes:
            indices.extend(map(index.__getitem__, adj[v]))
            ends.append(len(indices))
        self.indptr = np.zeros(len(self.nodes) + 1, np.int64)
        self.indptr[1:] = ends
        self.indices = np.array(indices, np.int64)
        self.arc_data = [d for v in self.nodes for d in adj[v].values()]
        self.directed = G.is_directed()
        self.multigraph = G.is_multigraph()
        self.nx_class = G.__class__
        self.graph = dict(G.graph) if preserve_graph_attrs else None
        self.node_data = list(G.nodes(data=True)) if preserve_node_attrs else None
        self.__networkx_cache__ = {}
        self._csr = None
        self._weights = {}

    def __contains__(self, node):
        try:
            return node in self.index
        except TypeError:
            return False

    def __len__(self):
        return len(self.nodes)

    number_of_nodes = __len__

    def is_directed(self):
        return self.directed

    def is_multigraph(self):
        return self.multigraph

    def __repr__(self):
        return f"TerrainGraph({len(self.nodes)} nodes, {self.indices.size} arcs)"

    def csr(self):
        """The simple graph (self-loops and parallel edges dropped, rows sorted)."""
        if self._csr is None:
            from terrain.graph import build_csr
            rows = np.repeat(np.arange(len(self.nodes), dtype=np.int64), np.diff(self.indptr))
            self._csr = build_csr(len(self.nodes), rows, self.indices, directed=self.directed,
                                  name="networkx graph")
        return self._csr

    def arc_weight(self, weight, e):
        """Arc ``e``'s weight as NetworkX's weight function reads it (missing: 1;
        multigraphs: the minimum over the keys; it may raise, as NetworkX's does)."""
        d = self.arc_data[e]
        if self.multigraph:
            return min(a.get(weight, 1) for a in d.values())
        return d.get(weight, 1)

    def arc_weights(self, weight):
        """``(kind, w_int, w_flt)`` per arc for the edge attribute ``weight``: kind 0 an
        int, 1 a float, 2 one NetworkX fails on (a string), 3 ``None`` (a hidden arc).
        NotImplementedError for what the C Dijkstra cannot add the Python way."""
        if weight not in self._weights:
            m = len(self.arc_data)
            kind = np.zeros(m, np.uint8)
            w_int = np.zeros(m, np.int64)
            w_flt = np.zeros(m, np.float64)
            for e in range(m):
                try:
                    w = self.arc_weight(weight, e)
                except Exception:  # NetworkX raises the same when it reads this arc
                    kind[e] = 2
                    continue
                t = type(w)
                if t is int or t is bool:
                    if not -2**63 <= w < 2**63:
                        raise NotImplementedError("terrain: an integer weight past 64 bits")
                    w_int[e] = w
                elif t is float:
                    if w != w or w == -math.inf:
                        raise NotImplementedError("terrain: a NaN or -inf weight")
                    kind[e], w_flt[e] = 1, w
                elif t is str:
                    kind[e] = 2
                elif w is None:
                    kind[e] = 3
                else:
                    raise NotImplementedError(f"terrain: weights of type {t.__name__}")
            self._weights[weight] = (kind, w_int, w_flt)
        return self._weights[weight]


def _keyed(G, source, vertices, values):
    """``{node: value}`` of ``vertices`` (the source's first) as NetworkX keys them: the
    source by the object given (``1.0``, ``True`` for the node ``1``), the others by the
    graph's own nodes."""
    nodes = G.nodes
    out = {source: values[0]} if vertices else {}
    out.update((nodes[v], d) for v, d in zip(vertices[1:], values[1:]))
    return out


def _bfs_order(G, sources):
    """The vertices reached from ``sources`` in NetworkX's discovery order, and their levels."""
    from terrain.graph import discovery_bfs
    order, dist = discovery_bfs(G.indptr, G.indices, sources)
    return order, dist[order]


def _dijkstra(G, sources, weight, cutoff=None, target=-1):
    """NetworkX's ``_dijkstra_multisource``: ``[(vertex, distance)]`` in its settling order
    and its number types."""
    from terrain.graph import discovery_dijkstra
    kind, w_int, w_flt = G.arc_weights(weight)
    if cutoff is not None:
        if type(cutoff) in (int, bool) and -2**63 <= cutoff < 2**63:
            cutoff = (1, int(cutoff))
        elif type(cutoff) is float and cutoff == cutoff:
            cutoff = (2, cutoff)
        else:
            raise NotImplementedError(f"terrain: a cutoff of type {type(cutoff).__name__}")
    status, got, d_i, d_f, d_isf, err = discovery_dijkstra(
        G.indptr, G.indices, kind, w_int, w_flt, sources, cutoff, target)
    if status == -1:
        raise ValueError("Contradictory paths found:", "negative weights?")
    if status == -2:  # NetworkX's own expression raises its own error
        v, e = err
        dist = float(d_f[v]) if d_isf[v] else int(d_i[v])
        dist + G.arc_weight(weight, e)
        raise NotImplementedError("terrain: an arc NetworkX cannot add")
    if status == -3:
        raise NotImplementedError("terrain: a path sum past 64 bits")
    if status < 0:
        raise MemoryError("terrain: no memory for the Dijkstra heap")
    ints, floats, isf = d_i[got].tolist(), d_f[got].tolist(), d_isf[got].tolist()
    return [(v, f if flt else i) for v, i, f, flt in zip(got.tolist(), ints, floats, isf)]


class _NodeBunch:
    """What ``networkx.Graph.nbunch_iter`` reads of a graph (membership, the adjacency's
    keys), for a :class:`TerrainGraph`."""

    def __init__(self, G):
        self._adj = G.index
        self._graph = G

    def __contains__(self, node):
        return node in self._graph


class BackendInterface:
    """What NetworkX loads from the ``networkx.backends`` entry point."""

    @staticmethod
    def convert_from_nx(G, edge_attrs=None, node_attrs=None, preserve_edge_attrs=False,
                        preserve_node_attrs=False, preserve_graph_attrs=False, name=None,
                        graph_name=None):
        """A NetworkX graph as a :class:`TerrainGraph`."""
        if isinstance(G, TerrainGraph):
            return G
        return TerrainGraph(G, preserve_node_attrs, preserve_graph_attrs)

    @staticmethod
    def convert_to_nx(obj, *, name=None):
        """A :class:`TerrainGraph` as a graph of its class again (results are NetworkX types)."""
        if not isinstance(obj, TerrainGraph):
            return obj
        G = obj.nx_class()
        G.graph.update(obj.graph or {})
        G.add_nodes_from(obj.node_data if obj.node_data is not None else obj.nodes)
        rows = np.repeat(np.arange(len(obj.nodes)), np.diff(obj.indptr)).tolist()
        for u, v, d in zip(rows, obj.indices.tolist(), obj.arc_data):
            if obj.directed or v >= u:
                a, b = obj.nodes[u], obj.nodes[v]
                if obj.multigraph:
                    for key, data in d.items():
                        G.add_edge(a, b, key, **data)
                else:
                    G.add_edge(a, b, **d)
        return G

    @staticmethod
    def can_run(name, args, kwargs):
        """True, or the reason terrain cannot run ``name`` with these arguments."""
        bound = dict(zip(PARAMETERS.get(name, ("G",)), args))
        bound.update(kwargs)
        G = bound.get("G")
        if G is not None and hasattr(G, "__len__") and len(G) == 0:
            return "empty graph"
        directed = G is not None and G.is_directed()
        if name in WEIGHTED:
            if callable(bound.get("weight")):
                return "terrain reads weights from an edge attribute (weight= a callable given)"
        elif bound.get("weight") is not None:
            return "terrain computes hop distances (weight=None)"
        if directed and name not in DIRECTED_OK:
            return "terrain's distance measures and trees are for undirected graphs"
        if name == "minimum_spanning_tree":
            if bound.get("ignore_nan"):
                return "ignore_nan=True: NetworkX skips NaN edges itself"
            if G is not None and G.is_multigraph():
                return "multigraph: NetworkX keeps edge keys in the tree"
        for key in ("e", "sp"):
            if bound.get(key) is not None:
                return f"{key}= given: NetworkX computes from it"
        return True

    @staticmethod
    def should_run(name, args, kwargs):
        """Small jobs stay in NetworkX (the conversion is a Python pass over the edges)."""
        G = kwargs.get("G", args[0] if args else None)
        if G is None or isinstance(G, TerrainGraph):
            return True
        # G.number_of_edges() is a pass over the nodes' degrees: counted only where it decides
        if name in ALL_PAIRS or (name == "eccentricity" and len(args) < 2
                                 and kwargs.get("v") is None):
            return G.number_of_nodes() * G.number_of_edges() >= ALL_PAIRS_MIN_WORK or \
                "a small graph: NetworkX is as fast"
        if name == "minimum_spanning_tree":  # 2x NetworkX's from 10^5 edges, converting too
            return G.number_of_edges() >= TREE_MIN_EDGES or \
                "a small graph: the conversion costs as much as the tree"
        # a single search: converting (a Python pass over the edges) took 2.3x NetworkX's own
        # search at 10^5 and 4·10^5 edges, a search of the converted graph a fifth of it
        cache = getattr(G, "__networkx_cache__", None) or {}
        return bool(cache.get("backends", {}).get(BACKEND_NAME)) or \
            "one search: converting the graph costs more than NetworkX's search"

    @staticmethod
    def bfs_layers(G, sources):
        """Layers of a BFS from ``sources`` (a node or nodes) in NetworkX's discovery order; a
        generator, checked when iterated, as NetworkX's."""
        import networkx as nx
        if sources in G:
            sources = [sources]
        first = list(set(sources))  # NetworkX's first layer: its order and the objects given
        for s in first:
            if s not in G:
                raise nx.NetworkXError(f"The node {s} is not in the graph.")
        if not first:
            return
        yield first
        order, levels = _bfs_order(G, [G.index[s] for s in first])
        cuts = np.flatnonzero(np.diff(levels)) + 1
        nodes = G.nodes
        for part in np.split(order, cuts)[1:]:
            yield [nodes[i] for i in part.tolist()]

    @staticmethod
    def single_source_shortest_path_length(G, source, cutoff=None):
        """Hop distance to every node reachable from ``source`` (within ``cutoff``, as
        NetworkX counts it), in discovery order."""
        import networkx as nx
        if source not in G:
            raise nx.NodeNotFound(f"Source {source} is not in G")
        if cutoff is not None:
            cutoff > 0  # a cutoff that is no number: NetworkX's TypeError, as its loop's test
        order, levels = _bfs_order(G, [G.index[source]])
        if cutoff is not None:
            keep = (levels == 0) | (levels - 1 < cutoff)
            order, levels = order[keep], levels[keep]
        return _keyed(G, source, order.tolist(), levels.tolist())

    @staticmethod
    def eccentricity(G, v=None, sp=None, weight=None):
        """Eccentricity of one node (a number) or of several / all nodes (a dict)."""
        import networkx as nx
        from terrain.graph import FrontierCore, traverse
        single = v is not None and v in G
        if v is None:
            wanted = G.nodes
        elif single:
            wanted = [v]
        else:  # a container of nodes, read by NetworkX's own nbunch_iter (its errors too)
            wanted = list(nx.Graph.nbunch_iter(_NodeBunch(G), v))
        core = FrontierCore(G.csr(), "cpu")
        n = len(G)
        out = {}
        for node in wanted:
            stats = traverse(core, [G.index[node]])
            if stats.reached != n:
                raise nx.NetworkXError(_NOT_CONNECTED)
            out[node] = stats.eccentricity
        return out[v] if single else out

    @staticmethod
    def _bounds(G, usebounds, extremes=True):
        import networkx as nx
        from terrain.graph import diameter
        r = diameter(G.csr(), extremes=extremes, backend="cpu")
        if not r.connected:
            # NetworkX bounds only for ``usebounds is True``; any other value runs (and words)
            # its eccentricity loop
            raise nx.NetworkXError(_NOT_CONNECTED_BOUNDS if usebounds is True else _NOT_CONNECTED)
        return r

    @staticmethod
    def diameter(G, e=None, usebounds=False, weight=None):
        """Exact diameter (terrain's eccentricity bounding)."""
        return int(BackendInterface._bounds(G, usebounds, extremes=False).diameter)

    @staticmethod
    def radius(G, e=None, usebounds=False, weight=None):
        return int(BackendInterface._bounds(G, usebounds).radius)

    @staticmethod
    def center(G, e=None, usebounds=False, weight=None):
        """Nodes of minimum eccentricity, in ``G``'s node order."""
        return [G.nodes[i] for i in sorted(BackendInterface._bounds(G, usebounds).center)]

    @staticmethod
    def periphery(G, e=None, usebounds=False, weight=None):
        """Nodes of maximum eccentricity, in ``G``'s node order."""
        return [G.nodes[i] for i in sorted(BackendInterface._bounds(G, usebounds).periphery)]

    @staticmethod
    def single_source_dijkstra_path_length(G, source, cutoff=None, weight="weight"):
        """Weighted distance to every node reachable from ``source`` (within ``cutoff``)."""
        import networkx as nx
        hash(source)  # NetworkX puts it in a set first: an unhashable one is its TypeError
        if source not in G:
            raise nx.NodeNotFound(f"Node {source} not found in graph")
        settled = _dijkstra(G, [G.index[source]], weight, cutoff)
        return _keyed(G, source, [v for v, _ in settled], [d for _, d in settled])

    @staticmethod
    def dijkstra_path_length(G, source, target, weight="weight"):
        """Weighted distance from ``source`` to ``target``."""
        import networkx as nx
        if source not in G:
            raise nx.NodeNotFound(f"Node {source} not found in graph")
        if source == target:
            return 0
        t = G.index[target] if target in G else -1
        for v, d in _dijkstra(G, [G.index[source]], weight, target=t):
            if v == t:
                return d
        # NetworkX looks the target up in its dict of distances after its search (whose own
        # errors come first): an unhashable target's TypeError
        hash(target)
        raise nx.NetworkXNoPath(f"Node {target} not reachable from {source}")

    @staticmethod
    def minimum_spanning_tree(G, weight="weight", algorithm="kruskal", ignore_nan=False):
        """Kruskal's minimum spanning forest as NetworkX builds it (``G``'s class, graph
        attributes and nodes; the edges with their data in Kruskal's order)."""
        from terrain.graph import build_csr, minimum_spanning_forest
        # a set: an unhashable algorithm raises the TypeError of NetworkX's dict lookup
        if algorithm not in {"kruskal", "prim", "boruvka"}:
            raise ValueError(f"{algorithm} is not a valid choice for an algorithm.")
        if algorithm != "kruskal":
            raise NotImplementedError("terrain: Kruskal's tie-breaking only (NetworkX runs "
                                      f"{algorithm})")
        if G.node_data is None or G.graph is None:
            raise NotImplementedError("terrain: convert with the node and graph attributes")
        # G.edges(data=True)'s order: each row's arcs to a node not before it
        rows = np.repeat(np.arange(len(G.nodes)), np.diff(G.indptr))
        first = np.flatnonzero(G.indices >= rows)
        data = [G.arc_data[e] for e in first.tolist()]
        w = [d.get(weight, 1) for d in data]
        if any(type(x) not in (int, float, bool) for x in w):
            raise NotImplementedError("terrain: weights other than ints and floats")
        ints = all(type(x) is not float for x in w)
        if ints and all(-2**63 <= x < 2**63 for x in w):
            arr = np.asarray(w, np.int64)
        elif all(abs(x) < 2**53 for x in w if type(x) is not float):
            arr = np.asarray(w, np.float64)
            if np.isnan(arr).any():
                raise NotImplementedError("terrain: NaN weights (NetworkX says where)")
        else:
            raise NotImplementedError("terrain: integer weights that floats cannot hold")
        order = np.argsort(arr, kind="stable")  # Kruskal's sort: ties keep G.edges() order
        rank = np.empty(order.size, np.int64)
        rank[order] = np.arange(order.size)
        u, v = rows[first], G.indices[first]
        loops = u == v
        csr = build_csr(len(G.nodes), u[~loops], v[~loops], weights=rank[~loops])
        forest = minimum_spanning_forest(csr, backend="cpu")
        chosen = np.sort(forest.weight)  # ranks: Kruskal adds the forest in this order
        T = G.nx_class()
        T.graph.update(G.graph)
        T.add_nodes_from(G.node_data)
        nodes = G.nodes
        T.add_edges_from((nodes[int(u[order[r]])], nodes[int(v[order[r]])], data[order[r]])
                         for r in chosen.tolist())
        return T


WEIGHTED = ("single_source_dijkstra_path_length", "dijkstra_path_length",
            "minimum_spanning_tree")
DIRECTED_OK = ("bfs_layers", "single_source_shortest_path_length",
               "single_source_dijkstra_path_length", "dijkstra_path_length")
ALL_PAIRS = ("diameter", "radius", "center", "periphery")

# positional parameters of the NetworkX functions (to read ``args`` in can_run)
PARAMETERS = {"bfs_layers": ("G", "sources"),
              "single_source_shortest_path_length": ("G", "source", "cutoff"),
              "eccentricity": ("G", "v", "sp", "weight"),
              **{k: ("G", "e", "usebounds", "weight") for k in ALL_PAIRS},
              "single_source_dijkstra_path_length": ("G", "source", "cutoff", "weight"),
              "dijkstra_path_length": ("G", "source", "target", "weight"),
              "minimum_spanning_tree": ("G", "weight", "algorithm", "ignore_nan")}

_BOUNDING = "Exact, by eccentricity bounding."
FUNCTIONS = {name: {"additional_docs": doc} for name, doc in {
    "bfs_layers": "NetworkX's discovery order.",
    "single_source_shortest_path_length": "NetworkX's discovery order.",
    "eccentricity": "Hop distances; undirected graphs.",
    "diameter": "Exact, by eccentricity bounding (few BFS runs).",
    "radius": _BOUNDING, "center": _BOUNDING, "periphery": _BOUNDING,
    "single_source_dijkstra_path_length": "NetworkX's Dijkstra in C: the same order, types "
                                          "and errors.",
    "dijkstra_path_length": "NetworkX's Dijkstra in C.",
    "minimum_spanning_tree": "Kruskal's forest (its tie-breaking) by Borůvka with unique keys.",
}.items()}


def get_info():
    """What NetworkX loads from the ``networkx.backend_info`` entry point."""
    return {
        "backend_name": BACKEND_NAME,
        "project": "terrain",
        "package": "terrain",
        "short_summary": "Exact BFS, distances, diameter and spanning trees in C, in "
                         "NetworkX's order.",
        "functions": {k: dict(v) for k, v in FUNCTIONS.items()},
        "default_config": {},
    }
