"""Benchmarks ``bench bfs``, ``bench diameter``, ``bench sssp``, ``bench mst-graph``: terrain
beside scipy / networkx, one run.

``bench sssp`` times SSSP with predecessors from ``--sources`` random sources on a grid or
RMAT graph with random integer weights 1..100 (or a file): our CPU twin and scipy's
``dijkstra`` (load excluded), on the GPU Crauser and delta-stepping (ms per source and GTEPS
= arcs of the reached component / time), and once with the load included (both read the
same Matrix Market file). ``bench mst-graph`` times the minimum spanning forest (CPU, GPU)
beside scipy's ``minimum_spanning_tree``.

Graphs: a Graph500 RMAT graph (A, B, C = 0.57, 0.19, 0.19; vertex labels randomly
permuted, as the Graph500 generator does), a 4-neighbour grid, or a file.

``bench bfs`` times BFS from ``--sources`` random vertices of the largest component (the
same sources for every contender) and reports GTEPS as Graph500 does: edges of the
traversed component counted as directed edges (the sum of the reached degrees), harmonic
mean over sources; plus time per BFS level (the figure that matters on long-diameter
graphs such as grids), and scipy's ``breadth_first_order`` on the same graph from the same
run. GPU times come from CUDA events around the whole traversal (seeding and the per-level
host reads included), after an untimed pass over the same sources (compilation, and the
capture of the level loop's CUDA graphs: one per level count, once per core); GPU distances
are checked against the CPU's on one source.

``bench diameter`` times the exact diameter on the CPU, the GPU (when present) and
networkx's bounding ``diameter(usebounds=True)`` when the graph is small enough for it.

Dask strategy: none (single-process timing).
"""

import sys
import time

import numpy as np

from terrain.backend import get_backend, gpu_available
from terrain.errors import InputError
from terrain.graph import FrontierCore, build_csr, diameter, largest_component, load_graph
from terrain.graph.bfs import traverse

from ._bench import peak_rss_bytes

__all__ = ["bench_bfs_command", "bench_diameter_command", "rmat_graph", "grid_graph",
           "bench_sssp_command", "bench_mst_graph_command", "weighted_graph"]

RMAT_ABC = (0.57, 0.19, 0.19)


def rmat_edges(scale, edge_factor, seed=1, xp=np):
    """Graph500 Kronecker/RMAT edge list: ``edge_factor * 2**scale`` edges on ``2**scale``
    vertices, labels permuted. ``xp`` is numpy or cupy (the GPU draws much faster)."""
    a, b, c = RMAT_ABC
    m = edge_factor << scale
    rs = xp.random.RandomState(seed)
    u = xp.zeros(m, xp.int64)
    v = xp.zeros(m, xp.int64)
    ab, c_norm, a_norm = a + b, c / (1.0 - (a + b)), a / (a + b)
    for bit in range(scale):
        ii = _uniform(rs, m, xp) > ab
        jj = _uniform(rs, m, xp) > a_norm + (c_norm - a_norm) * ii
        u += ii.astype(xp.int64) << bit
        v += jj.astype(xp.int64) << bit
    perm = rs.permutation(1 << scale)
    return perm[u], perm[v]


def _uniform(rs, m, xp):
    return rs.random_sample(m) if xp is np else rs.random_sample(m, dtype=xp.float32)


def rmat_graph(scale, edge_factor, seed=1, backend=None):
    """:class:`terrain.graph.Graph` of a Graph500 RMAT graph (undirected, simple)."""
    b = get_backend(backend)
    u, v = rmat_edges(scale, edge_factor, seed, b.xp)
    return build_csr(1 << scale, b.to_numpy(u), b.to_numpy(v),
                     name=f"rmat-{scale}-{edge_factor}")


def grid_graph(rows, cols):
    """4-neighbour ``rows x cols`` grid; vertex ``r * cols + c``."""
    idx = np.arange(rows * cols, dtype=np.int64).reshape(rows, cols)
    u = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    v = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return build_csr(rows * cols, u, v, name=f"grid-{rows}x{cols}")


def _graph(args):
    t0 = time.perf_counter()
    if args.graph == "rmat":
        g = rmat_graph(args.scale, args.edge_factor, args.seed,
                       "gpu" if gpu_available() and args.backend != "cpu" else "cpu")
    elif args.graph == "grid":
        g = grid_graph(args.rows, args.cols)
    else:
        if not args.file:
            raise InputError("bench: --graph file needs --file PATH")
        g = load_graph(args.file)
    print(f"graph {g.name}: {g.n} vertices, {g.m} undirected edges "
          f"(built in {time.perf_counter() - t0:.1f} s)", flush=True)
    return g


def _lcc_sources(graph, k, seed):
    from terrain.graph import connected_components
    count, labels = connected_components(graph)
    big = int(np.argmax(np.bincount(labels)))
    members = np.flatnonzero((labels == big) & (np.diff(graph.indptr) > 0))
    rng = np.random.default_rng(seed)
    return rng.choice(members, size=min(k, members.size), replace=False)


def _time_terrain(core, sources, **kw):
    """Per-source (seconds, edges, levels) of terrain BFS on ``core``."""
    b = core.backend
    traverse(core, [int(sources[0])], **kw)  # warm-up: compile, allocate
    out = []
    if b.is_gpu:
        for s in sources[1:]:  # and capture the CUDA graphs of every level count
            traverse(core, [int(s)], **kw)
        cp = b.xp
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        for s in sources:
            start.record()
            stats = traverse(core, [int(s)], **kw)
            stop.record()
            stop.synchronize()
            out.append((cp.cuda.get_elapsed_time(start, stop) / 1e3, stats.edges,
                        len(stats.level_sizes)))
    else:
        for s in sources:
            t0 = time.perf_counter()
            stats = traverse(core, [int(s)], **kw)
            out.append((time.perf_counter() - t0, stats.edges, len(stats.level_sizes)))
    return out


def _report(label, runs):
    secs = np.array([r[0] for r in runs])
    edges = np.array([r[1] for r in runs], float)
    levels = np.array([r[2] for r in runs], float)
    teps = edges / secs
    hmean = len(teps) / np.sum(1.0 / teps)
    per_level = np.mean(secs / levels) * 1e6
    print(f"  {label:<34} {hmean / 1e9:9.3f} GTEPS  {np.mean(secs) * 1e3:10.3f} ms/BFS  "
          f"{per_level:9.1f} us/level  ({np.mean(levels):.0f} levels, {len(runs)} sources)",
          flush=True)
    return hmean


def bench_bfs_command(args):
    """``bench bfs``: terrain BFS (GPU and CPU) vs scipy breadth_first_order."""
    from scipy.sparse.csgraph import breadth_first_order
    graph = _graph(args)
    sources = _lcc_sources(graph, args.sources, args.seed)
    want_gpu = gpu_available() and args.backend in (None, "auto", "gpu")
    print(f"BFS from {len(sources)} random sources of the largest component; "
          "GTEPS = harmonic mean of (reached degrees / time)")
    if want_gpu:
        gpu = get_backend("gpu")
        core = FrontierCore(graph, gpu)
        print(f"terrain gpu ({gpu.device_name()}):")
        _report("direction-optimising, graph loop", _time_terrain(core, sources))
        if core.graph_error:
            print(f"  (CUDA graph capture failed, direct launches: {core.graph_error})")
        fused = core.fused_steps
        core.fused_steps = not fused
        _report(f"direction-optimising, graph loop, fused steps {not fused}",
                _time_terrain(core, sources))
        core.fused_steps = fused
        _report("direction-optimising, device loop",
                _time_terrain(core, sources, loop="device"))
        _report("direction-optimising, host loop", _time_terrain(core, sources, loop="host"))
        _report("top-down, graph loop", _time_terrain(core, sources, direction="top-down"))
        for direction, variant in (("top-down", "hybrid"), ("top-down", "fused"),
                                   ("top-down", "balanced"), ("top-down", "two-phase"),
                                   ("auto", "fused"), ("auto", "balanced")):
            _report(f"{direction} {variant}, host loop",
                    _time_terrain(core, sources, direction=direction, variant=variant,
                                  loop="host"))
        traverse(core, [int(sources[0])])
        gpu_dist = gpu.to_numpy(core.dist)
        del core
    cpu = get_backend("cpu")
    core = FrontierCore(graph, cpu)
    if args.backend != "gpu":
        print(f"terrain cpu ({cpu.device_name()}, Numba):")
        _report("direction-optimising", _time_terrain(core, sources))
        _report("top-down", _time_terrain(core, sources, direction="top-down"))
    if want_gpu:
        traverse(core, [int(sources[0])])
        same = np.array_equal(gpu_dist, core.dist)
        print(f"  gpu distances == cpu distances: {same}")
        if not same:
            return 1
    adj = graph.to_scipy()
    k = len(sources) if graph.nnz < 50_000_000 else min(len(sources), 4)
    runs = []
    breadth_first_order(adj, int(sources[0]), directed=False, return_predecessors=False)
    deg = np.diff(graph.indptr)
    for s in sources[:k]:
        t0 = time.perf_counter()
        order = breadth_first_order(adj, int(s), directed=False, return_predecessors=False)
        secs = time.perf_counter() - t0
        runs.append((secs, int(deg[order].sum()), stats_levels(core, s)))
    print("scipy.sparse.csgraph.breadth_first_order:")
    _report("breadth_first_order", runs)
    print(f"peak RSS {peak_rss_bytes() / 2**30:.2f} GiB")
    return 0


def stats_levels(core, s):
    return len(traverse(core, [int(s)]).level_sizes)


def _sync(backend):
    if backend.is_gpu:
        backend.xp.cuda.Device().synchronize()


def _timed_phases(graph, backend):
    """``(result, {phase: seconds})`` of terrain's diameter of ``graph``, phase by phase:
    upload (GPU: the CSR to the device), components (labels and the largest component cut
    out, on the backend), bounding (the BFS runs and bound kernels, path included)."""
    from terrain.graph.csr import Graph
    from terrain.graph.diameter import _bound, largest_component_on
    t = {}
    t0 = time.perf_counter()
    dev = Graph(backend.asarray(graph.indptr), backend.asarray(graph.indices), graph.ids,
                graph.id_base, graph.name)
    _sync(backend)
    t["upload"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    lcc, info = largest_component_on(dev, backend)
    _sync(backend)
    t["components"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    core = FrontierCore(lcc, backend)
    _sync(backend)
    t["core"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = _bound(core, info, False, None)
    t["bounding"] = time.perf_counter() - t0
    return r, t


def bench_diameter_command(args):
    """``bench diameter``: terrain (CPU, GPU) vs networkx's bounding diameter; terrain phase
    by phase (upload, components, bounding) on the whole graph and on its largest
    component (the component given as the input)."""
    graph = _graph(args)
    t0 = time.perf_counter()
    lcc, info = largest_component(graph)
    print(f"largest component: {lcc.n} vertices, {lcc.m} edges ({info['components']} "
          f"components; scipy labels + host extraction {time.perf_counter() - t0:.3f} s)")
    results = {}
    names = ((["cpu"] if args.backend != "gpu" else [])
             + (["gpu"] if gpu_available() and args.backend != "cpu" else []))
    for name in names:
        b = get_backend(name)
        # warm-up (compile, allocate): the component, and a small disconnected graph for the
        # cut-out path
        diameter(lcc, backend=b)
        diameter(build_csr(9, np.array([0, 1, 2, 4, 5]), np.array([1, 2, 3, 5, 6])), backend=b)
        for label, g in (("graph", graph), ("component", lcc)):
            r, t = _timed_phases(g, b)
            total = sum(t.values())
            results[name] = r
            print(f"  terrain {name:<4} {label:<9} diameter {r.diameter:5d}  {r.bfs_count:6d} BFS  "
                  f"{total:9.3f} s  (upload {t['upload'] * 1e3:.1f} ms, components "
                  f"{t['components'] * 1e3:.1f} ms, core {t['core'] * 1e3:.1f} ms, bounding "
                  f"{t['bounding'] * 1e3:.1f} ms)  endpoints {r.endpoints}", flush=True)
        t0 = time.perf_counter()
        r = diameter(lcc, backend=b)
        _sync(b)
        print(f"  terrain {name:<4} diameter(component) one call {time.perf_counter() - t0:9.3f} s",
              flush=True)
        if b.is_gpu:  # the bounding's BFS launched directly: no CUDA graph to capture per core
            import importlib
            dm = importlib.import_module("terrain.graph.diameter")
            dm.BOUND_LOOP = "device"
            r, t = _timed_phases(lcc, b)
            dm.BOUND_LOOP = None
            print(f"  terrain gpu  component, direct launches: bounding "
                  f"{t['bounding'] * 1e3:.1f} ms ({r.bfs_count} BFS)", flush=True)
    if len(results) == 2 and results["cpu"].diameter != results["gpu"].diameter:
        print("  cpu and gpu disagree!", file=sys.stderr)
        return 1
    if lcc.m <= 2_000_000:
        import networkx as nx
        t0 = time.perf_counter()
        G = nx.Graph()
        G.add_nodes_from(range(lcc.n))
        rows = np.repeat(np.arange(lcc.n), np.diff(lcc.indptr))
        keep = rows < lcc.indices
        G.add_edges_from(zip(rows[keep].tolist(), lcc.indices[keep].tolist()))
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        d = nx.diameter(G, usebounds=True)
        secs = time.perf_counter() - t0
        print(f"  networkx diameter(usebounds=True) {d:5d}  {'?':>6} BFS  {secs:9.3f} s  "
              f"(+{build:.1f} s to build the nx graph)")
    else:
        print("  networkx: skipped (more than 2M edges)")
    print(f"peak RSS {peak_rss_bytes() / 2**30:.2f} GiB")
    return 0


# --------------------------------------------------------------------------- weighted

def weighted_graph(args, rng):
    """The bench graph of ``args`` with random integer weights 1..100 per edge (a grid: the
    road-like case; RMAT: the scale-free case; or a file with its own weights)."""
    t0 = time.perf_counter()
    if args.graph == "file":
        if not args.file:
            raise InputError("bench: --graph file needs --file PATH")
        g = load_graph(args.file)
    else:
        if args.graph == "rmat":
            b = get_backend("gpu" if gpu_available() and args.backend != "cpu" else "cpu")
            u, v = (b.to_numpy(x) for x in rmat_edges(args.scale, args.edge_factor,
                                                      args.seed, b.xp))
            n, name = 1 << args.scale, f"rmat-{args.scale}-{args.edge_factor}"
        else:
            idx = np.arange(args.rows * args.cols, dtype=np.int64).reshape(args.rows, args.cols)
            u = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
            v = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
            n, name = args.rows * args.cols, f"grid-{args.rows}x{args.cols}"
        w = rng.integers(1, 101, u.size).astype(np.int32)
        g = build_csr(n, u, v, weights=w, name=name)
    print(f"graph {g.name}: {g.n} vertices, {g.m} edges, weights "
          f"{'none' if g.weights is None else g.weights.dtype} "
          f"(built in {time.perf_counter() - t0:.1f} s)", flush=True)
    return g


def _write_mtx(graph, path):
    """The graph as a Matrix Market ``integer symmetric`` file (lower triangle), for the
    load-included timings of both contenders."""
    rows = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.indptr))
    keep = rows > graph.indices
    body = np.column_stack([rows[keep] + 1, graph.indices[keep].astype(np.int64) + 1,
                            graph.weights[keep].astype(np.int64)])
    with open(path, "w") as f:
        f.write("%%MatrixMarket matrix coordinate integer symmetric\n")
        f.write(f"{graph.n} {graph.n} {body.shape[0]}\n")
        np.savetxt(f, body, fmt="%d")


def bench_sssp_command(args):
    """``bench sssp``: terrain SSSP (CPU twin; GPU Crauser and delta-stepping) vs scipy's
    dijkstra on the same graph and sources, load excluded and included."""
    import tempfile
    from scipy.io import mmread
    from scipy.sparse.csgraph import dijkstra
    from terrain.graph import sssp
    rng = np.random.default_rng(args.seed)
    graph = weighted_graph(args, rng)
    sources = _lcc_sources(graph, args.sources, args.seed)
    adj = graph.to_scipy(weighted=True)
    print(f"SSSP from {len(sources)} random sources (distances and predecessors); time per "
          "source")
    sssp(graph, int(sources[0]), backend="cpu")  # compile
    rows = {}

    def timed(label, fn):
        secs = []
        for s in sources:
            t0 = time.perf_counter()
            out = fn(int(s))
            secs.append(time.perf_counter() - t0)
        rows[label] = float(np.mean(secs))
        print(f"  {label:<44} {rows[label] * 1e3:10.1f} ms/source", flush=True)
        return out

    ours = timed("terrain cpu (Dial/heap Dijkstra, Numba)",
                 lambda s: sssp(graph, s, backend="cpu"))
    same = True
    if not args.no_scipy:
        theirs = timed("scipy.sparse.csgraph.dijkstra",
                       lambda s: dijkstra(adj, directed=False, indices=s,
                                          return_predecessors=True))
        same = np.array_equal(np.where(ours.dist < 0, np.inf, ours.dist), theirs[0])
        print(f"  distances equal scipy's: {same}; speed-up "
              f"{rows['scipy.sparse.csgraph.dijkstra'] / rows['terrain cpu (Dial/heap Dijkstra, Numba)']:.2f}x")
    if gpu_available() and args.backend != "cpu":
        gpu = get_backend("gpu")
        reached = int(np.count_nonzero(ours.dist >= 0))
        edges = int(np.diff(graph.indptr)[ours.dist >= 0].sum())
        print(f"terrain gpu ({gpu.device_name()}), reached {reached} vertices / {edges} arcs:")
        for algorithm in ("delta", "crauser"):  # delta first: Crauser is slow on grids
            r = sssp(graph, int(sources[0]), algorithm=algorithm, backend=gpu)  # compile
            cp = gpu.xp
            secs = []
            for s in sources:
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                r = sssp(graph, int(s), algorithm=algorithm, backend=gpu, predecessors=False)
                cp.cuda.Device().synchronize()
                secs.append(time.perf_counter() - t0)
            ok = np.array_equal(sssp(graph, int(sources[-1]), algorithm=algorithm,
                                     backend=gpu).dist, ours.dist) if len(sources) == 1 \
                else None
            same = same and ok is not False
            mean = float(np.mean(secs))
            print(f"  {algorithm:<10} {mean * 1e3:10.1f} ms/source  {edges / mean / 1e9:7.3f} "
                  f"GTEPS  ({r.iterations} iterations{', delta ' + str(r.delta) if r.delta else ''}"
                  f"{'' if ok is None else ', equal to cpu: ' + str(ok)})", flush=True)
    if graph.n <= args.load_limit and not args.no_scipy:
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            path = f"{tmp}/g.mtx"
            _write_mtx(graph, path)
            s = int(sources[0])
            ours_load = theirs_load = np.inf
            for _ in range(2):  # best of two: the first also loads compiled code
                t0 = time.perf_counter()
                sssp(load_graph(path), s, backend="cpu")
                ours_load = min(ours_load, time.perf_counter() - t0)
                t0 = time.perf_counter()
                dijkstra(mmread(path).tocsr(), directed=False, indices=s,
                         return_predecessors=True)
                theirs_load = min(theirs_load, time.perf_counter() - t0)
            print(f"load included (Matrix Market file, one source, best of 2): terrain "
                  f"load_graph + sssp "
                  f"{ours_load:.2f} s, scipy mmread + dijkstra {theirs_load:.2f} s "
                  f"({theirs_load / ours_load:.2f}x)")
    print(f"peak RSS {peak_rss_bytes() / 2**30:.2f} GiB")
    return 0 if same else 1


def bench_mst_graph_command(args):
    """``bench mst-graph``: terrain's Borůvka forest (CPU, GPU) vs scipy's
    minimum_spanning_tree (Kruskal) on the same weighted graph."""
    from scipy.sparse.csgraph import minimum_spanning_tree
    from terrain.graph.mst import minimum_spanning_forest
    rng = np.random.default_rng(args.seed)
    graph = weighted_graph(args, rng)
    names = ["cpu"] + (["gpu"] if gpu_available() and args.backend != "cpu" else [])
    totals = {}
    for name in names:
        minimum_spanning_forest(graph, backend=name)  # compile, allocate
        t0 = time.perf_counter()
        r = minimum_spanning_forest(graph, backend=name)
        secs = time.perf_counter() - t0
        totals[name] = r.total_weight
        print(f"  terrain {name:<4} total {r.total_weight}  {r.trees} trees  {r.rounds} rounds  "
              f"{secs:8.3f} s  {graph.m / secs / 1e6:8.1f} M edges/s", flush=True)
    total = totals["cpu"]
    if not args.no_scipy:
        adj = graph.to_scipy(weighted=True)
        t0 = time.perf_counter()
        t = minimum_spanning_tree(adj)
        secs = time.perf_counter() - t0
        total = int(t.sum())
        print(f"  scipy minimum_spanning_tree total {total}  {secs:8.3f} s  "
              f"{graph.m / secs / 1e6:8.1f} M edges/s")
    ok = all(v == total for v in totals.values())
    print(f"  totals equal: {ok}")
    print(f"peak RSS {peak_rss_bytes() / 2**30:.2f} GiB")
    return 0 if ok else 1
