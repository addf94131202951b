"""Benchmarks ``bench bfs``, ``bench diameter``, ``bench sssp``, ``bench mst-graph``: terrain
beside scipy / networkx, one run.

``bench sssp`` times SSSP from ``--sources`` random sources on a grid, a random geometric
graph or an RMAT graph (built on the device when there is one) with integer weights 1..100
(or a file): our CPU twin and scipy's ``dijkstra`` (distances and predecessors, load
excluded; one source on graphs over 4 M vertices), on the GPU near-far delta-stepping for
each ``--delta`` (default: the rule's width), once more with bucket fusion toggled, and
Crauser — ``ShortestPaths.run`` timed by CUDA events with the graph on the device (ms per
source and GTEPS = arcs of the reached component / time; distances checked against the CPU
twin's from the same source) — and once with the load included (both read the same Matrix
Market file). ``bench mst-graph`` times the minimum spanning forest (CPU, GPU)
beside scipy's ``minimum_spanning_tree``.

Graphs: a Graph500 RMAT graph (A, B, C = 0.57, 0.19, 0.19; vertex labels randomly
permuted, as the Graph500 generator does), a 4-neighbour grid, a random geometric graph
(``bench sssp`` / ``mst-graph`` only), or a file.

``bench bfs`` times BFS from ``--sources`` random vertices of the largest component (the
same sources for every contender) and reports GTEPS with Graph500's harmonic mean over
sources but the edges of the traversed component counted as directed edges (the sum of the
reached degrees in the simple symmetric graph). Graph500's own count is the generated edge
tuples within the component, duplicates and self-loops included (specification,
"Performance Metric (TEPS)"): on RMAT-21 ef 16 that is 0.53 of ours (33.5 M tuples against
63.5 M arcs), so for RMAT graphs each backend's default is printed a second time with
Graph500's count. Plus time per BFS level (the figure that matters on long-diameter graphs such as
grids), and scipy's ``breadth_first_order`` on the same graph from the same run. GPU
times come from CUDA events around the whole traversal (seeding and the per-level host
reads included), after an untimed pass over the same sources (compilation, and the
capture of the level loop's CUDA graphs: one per level count, once per core); GPU distances
are checked against the CPU's on one source.

``bench diameter`` times the exact diameter on the CPU, the GPU (when present) and
networkx's bounding ``diameter(usebounds=True)`` when the graph is small enough for it.

Dask strategy: none (single-process timing).
"""

import time

import numpy as np

from terrain.backend import get_backend, gpu_available
from terrain.errors import InputError
from terrain.graph import (FrontierCore, TraversalStats, build_csr, diameter, exact_diameter,
                           largest_component, largest_component_on, load_graph, traverse)
from terrain.graph.frontier import ROUTES
from terrain.graph.generators import (geometric_graph, grid_graph, rmat_graph,
                                      weighted_grid_graph, weighted_rmat_graph, write_int_rows)

from .common import peak_rss_bytes, verdict

__all__ = ["bench_bfs_command", "bench_diameter_command", "bench_sssp_command",
           "bench_mst_graph_command", "weighted_graph"]

def _graph(args, tuples=None):
    """The benchmark's graph; for RMAT graphs and a dict ``tuples``, its generated tuples per
    vertex in ``tuples["degrees"]`` (:func:`rmat_graph`)."""
    t0 = time.perf_counter()
    if args.graph == "rmat":
        g = rmat_graph(args.scale, args.edge_factor, args.seed,
                       "gpu" if gpu_available() and args.backend != "cpu" else "cpu",
                       tuple_degrees=tuples is not None)
        if tuples is not None:
            g, tuples["degrees"] = g
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


def _time_terrain(core, sources, route=None):
    """Per-source (seconds, edges, levels) of terrain BFS on ``core`` (GPU: CUDA events
    around each traversal, after an untimed pass over the sources that compiles the kernels
    and captures the level loop's CUDA graphs; ``route`` forces one of the GPU's level
    loops)."""
    b = core.backend

    def run(s):
        src = np.array([int(s)], np.int64)
        return TraversalStats(*(core.ops.levels(src, route) if route else core.levels(src)))

    run(sources[0])  # warm-up: compile, allocate
    out = []
    if b.is_gpu:
        for s in sources[1:]:
            run(s)
        cp = b.xp
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        for s in sources:
            start.record()
            stats = run(s)
            stop.record()
            stop.synchronize()
            out.append((cp.cuda.get_elapsed_time(start, stop) / 1e3, stats.edges,
                        len(stats.level_sizes)))
    else:
        for s in sources:
            t0 = time.perf_counter()
            stats = run(s)
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


def _graph500_runs(core, sources, runs, tuple_degrees):
    """``runs`` recounted as Graph500 does (its spec, "Performance Metric (TEPS)"): the
    generated edge tuples within the traversed component, duplicates and self-loops
    included, instead of the arcs of the simple symmetric graph (about twice as many)."""
    out = []
    for s, r in zip(sources, runs):
        traverse(core, [int(s)])
        reached = core.backend.to_numpy(core.dist) >= 0
        out.append((r[0], int(tuple_degrees[reached].sum())) + tuple(r[2:]))
    return out


def bench_bfs_command(args):
    """``bench bfs``: terrain BFS (GPU and CPU) vs scipy breadth_first_order."""
    from scipy.sparse.csgraph import breadth_first_order
    tuples = {}
    graph = _graph(args, tuples)
    sources = _lcc_sources(graph, args.sources, args.seed)
    want_gpu = gpu_available() and args.backend in (None, "auto", "gpu")
    checks, goals, rates = [], [], {}
    print(f"BFS from {len(sources)} random sources of the largest component; "
          "GTEPS = harmonic mean of (reached degrees / time)")
    if want_gpu:
        gpu = get_backend("gpu")
        core = FrontierCore(graph, gpu)
        route = core.ops.route()
        print(f"terrain gpu ({gpu.device_name()}), the planner's route: {route}")
        runs = _time_terrain(core, sources)
        _report(f"direction-optimising, {route} loop", runs)
        if "degrees" in tuples:
            _report("  the same, Graph500 edge count", _graph500_runs(core, sources, runs,
                                                                     tuples["degrees"]))
        if core.ops.launches is not None and core.ops.launches.error:
            print(f"  (CUDA graph capture failed, direct launches: {core.ops.launches.error})")
        for other in ROUTES:  # the planner's check: the other route on this graph
            if other != route:
                _report(f"direction-optimising, {other} loop (not planned here)",
                        _time_terrain(core, sources, route=other))
        traverse(core, [int(sources[0])])
        gpu_dist = gpu.to_numpy(core.dist)
        del core
    cpu = get_backend("cpu")
    core = FrontierCore(graph, cpu)
    if args.backend != "gpu":
        print(f"terrain cpu ({cpu.device_name()}, C):")
        runs = _time_terrain(core, sources)
        rates["cpu"] = _report("direction-optimising", runs)
        if "degrees" in tuples:
            _report("  the same, Graph500 edge count", _graph500_runs(core, sources, runs,
                                                                     tuples["degrees"]))
    traverse(core, [int(sources[0])])
    cpu_dist = np.asarray(core.dist).copy()
    if want_gpu:
        checks.append(("gpu vs cpu distances", np.array_equal(gpu_dist, cpu_dist)))
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
    scipy_rate = _report("breadth_first_order", runs)
    if "cpu" in rates:
        goals.append(("terrain cpu faster than scipy", rates["cpu"] > scipy_rate))
    checks.append((f"distances from vertex {int(sources[0])} vs scipy's BFS tree",
                   _bfs_tree_agrees(adj, int(sources[0]), cpu_dist)))
    print(f"peak RSS {peak_rss_bytes() / 2**30:.2f} GiB")
    return verdict(checks, goals)


def _bfs_tree_agrees(adj, source, dist):
    """Whether ``dist`` (-1: unreached) are the BFS distances from ``source``: the vertices
    scipy's BFS reaches, each one more than its parent in scipy's BFS tree (a tree of
    shortest paths, so these are its depths)."""
    from scipy.sparse.csgraph import breadth_first_order
    order, parent = breadth_first_order(adj, source, directed=False, return_predecessors=True)
    reached = np.zeros(dist.size, bool)
    reached[order] = True
    rest = order[1:]
    return bool(np.array_equal(dist >= 0, reached) and dist[source] == 0
                and np.all(dist[rest] == dist[parent[rest]] + 1))


def stats_levels(core, s):
    return len(traverse(core, [int(s)]).level_sizes)


def _sync(backend):
    if backend.is_gpu:
        backend.xp.cuda.Device().synchronize()


def _timed_phases(graph, backend):
    """``(result, {phase: seconds})`` of terrain's diameter of ``graph``, phase by phase:
    upload (GPU: the CSR to the device), components (labels and the largest component cut
    out, on the backend), bounding (the BFS runs and bound kernels, path included)."""
    t = {}
    t0 = time.perf_counter()
    dev = type(graph)(backend.asarray(graph.indptr), backend.asarray(graph.indices),
                      graph.ids, graph.id_base, graph.name)
    _sync(backend)
    t["upload"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    lcc, info = largest_component_on(dev, backend)
    _sync(backend)
    t["components"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = exact_diameter(lcc, info, backend=backend)
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
                  f"{t['components'] * 1e3:.1f} ms, bounding {t['bounding'] * 1e3:.1f} ms)  "
                  f"endpoints {r.endpoints}", flush=True)
        t0 = time.perf_counter()
        r = diameter(lcc, backend=b)
        _sync(b)
        print(f"  terrain {name:<4} diameter(component) one call {time.perf_counter() - t0:9.3f} s",
              flush=True)
    checks = [("cpu vs gpu diameter", results["cpu"].diameter == results["gpu"].diameter)] \
        if len(results) == 2 else []
    try:  # an optional peer: without it, nothing else to compare with
        import networkx as nx
    except ImportError:
        nx = None
    if nx is None:
        print("  networkx: skipped (not installed)")
    elif lcc.m <= 2_000_000:
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
        checks += [(f"{name} diameter vs networkx's", r.diameter == d)
                   for name, r in results.items()]
    else:
        print("  networkx: skipped (more than 2M edges)")
    print(f"peak RSS {peak_rss_bytes() / 2**30:.2f} GiB")
    return verdict(checks, unchecked="networkx not installed, one backend" if nx is None
                   else "more than 2M edges for networkx, one backend")


# --------------------------------------------------------------------------- weighted

def weighted_graph(args, rng):
    """The bench graph of ``args`` with random integer weights 1..100 per edge (a grid: the
    road-like case; a random geometric graph with length weights: road-like too; RMAT: the
    scale-free case; or a file with its own weights)."""
    t0 = time.perf_counter()
    xp = get_backend("gpu" if gpu_available() and args.backend != "cpu" else "cpu").xp
    graph = getattr(args, "graph", "grid")
    if graph == "file":
        if not args.file:
            raise InputError("bench: --graph file needs --file PATH")
        g = load_graph(args.file)
    elif graph == "grid":
        g = weighted_grid_graph(args.rows, args.cols, args.seed, xp)
    elif graph == "geometric":
        g = geometric_graph(args.rows * args.cols, getattr(args, "degree", 6.0), args.seed, xp)
    else:
        g = weighted_rmat_graph(args.scale, args.edge_factor, args.seed, xp)
    if getattr(args, "float_weights", False):  # sums that round: the heap's path on the CPU
        from terrain.graph import Graph
        g = Graph(g.indptr, g.indices, weights=g.weights / 7.0, name=f"{g.name}/7")
    print(f"graph {g.name}: {g.n} vertices, {g.m} edges, weights "
          f"{'none' if g.weights is None else g.weights.dtype} "
          f"(built in {time.perf_counter() - t0:.1f} s)", flush=True)
    return g


def _write_mtx(graph, path):
    """The graph as a Matrix Market ``integer`` (or ``real``) ``symmetric`` file (lower
    triangle, row order), for the load-included timings of both contenders."""
    rows = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(graph.indptr))
    keep = rows > graph.indices
    header = (f"%%MatrixMarket matrix coordinate {{}} symmetric\n"
              f"{graph.n} {graph.n} {int(keep.sum())}\n")
    u, v, w = rows[keep] + 1, graph.indices[keep].astype(np.int64) + 1, graph.weights[keep]
    if w.dtype.kind == "f":
        with open(path, "w") as f:
            f.write(header.format("real"))
            np.savetxt(f, np.column_stack([u, v, w]), fmt=["%d", "%d", "%.17g"])
        return
    write_int_rows(path, [u, v, w.astype(np.int64)], header.format("integer"), sep=" ")


def _gpu_sssp_runs(solver, sources, algorithm, delta, reference, edges, cap_s=10.0):
    """Time ``solver.run`` per source on the GPU (CUDA events; the graph and buffers stay on
    the device; distances only, then once with predecessors); prints one line. A contender
    whose first source takes longer than ``cap_s`` is not repeated."""
    cp = solver.backend.xp
    s0 = int(sources[0])
    r = solver.run([s0], algorithm, delta, predecessors=False)  # compile, capture
    host = solver.backend.to_numpy(r.dist)
    ok = bool(np.array_equal(np.where(host == solver.inf, -1, host) if host.dtype.kind == "i"
                             else host, reference)) if reference is not None else None
    stream = solver.ops.stream
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    secs, steps, work = [], [], []
    for s in sources:
        start.record(stream)
        r = solver.run([int(s)], algorithm, delta, predecessors=False)
        stop.record(stream)
        stop.synchronize()
        secs.append(cp.cuda.get_elapsed_time(start, stop) / 1e3)
        steps.append(r.iterations)
        work.append(r.extra.get("arcs_scanned", 0))
        if secs[-1] > cap_s:
            break
    start.record(stream)
    solver.run([s0], algorithm, delta, predecessors=True)
    stop.record(stream)
    stop.synchronize()
    with_pred = cp.cuda.get_elapsed_time(start, stop)
    mean = float(np.mean(secs))
    label = algorithm + (f" delta={r.delta}" if r.delta is not None else "")
    if algorithm == "delta":
        label += f" fuse={solver.fuse_rounds}"
    print(f"  {label:<22} {mean * 1e3:9.1f} ms/source  {edges / mean / 1e9:7.3f} GTEPS  "
          f"(min {min(secs) * 1e3:.1f} ms; {with_pred:.1f} ms with predecessors; "
          f"{np.mean(steps):.0f} steps, "
          f"{np.mean(work) / max(edges, 1):.2f} arcs scanned per arc, {len(secs)} sources"
          f"{'' if ok is None else ', equal to cpu: ' + str(ok)})", flush=True)
    return mean, ok


def bench_sssp_command(args):
    """``bench sssp``: terrain SSSP (CPU twin; GPU near-far delta-stepping and Crauser) vs
    scipy's dijkstra on the same graph and sources, load excluded and included."""
    import tempfile
    from scipy.io import mmread
    from scipy.sparse.csgraph import dijkstra
    from terrain.graph import ShortestPaths
    from terrain.graph.shortest_paths import FUSE_ROUNDS
    rng = np.random.default_rng(args.seed)
    graph = weighted_graph(args, rng)
    sources = _lcc_sources(graph, args.sources, args.seed)
    # the single-threaded CPU contenders take seconds per source on 10 M+ vertices
    cpu_sources = sources if graph.n <= 4_000_000 else sources[:1]
    print(f"SSSP from {len(sources)} random sources ({len(cpu_sources)} for the CPU "
          "contenders; distances and predecessors); time per source")
    t0 = time.perf_counter()
    cpu = ShortestPaths(graph, "cpu")
    cpu.run([int(sources[0])], "dijkstra")  # compile
    print(f"  terrain cpu set-up (weights, compile) {time.perf_counter() - t0:.1f} s")
    rows = {}

    def timed(label, fn):
        """Mean time over the CPU sources; returns the output of the first source."""
        secs, out = [], None
        for s in cpu_sources:
            t0 = time.perf_counter()
            result = fn(int(s))
            secs.append(time.perf_counter() - t0)
            out = result if out is None else out
        rows[label] = float(np.mean(secs))
        print(f"  {label:<44} {rows[label] * 1e3:10.1f} ms/source", flush=True)
        return out

    label_ours = "terrain cpu (Dial in C, else radix heap)"
    ours = timed(label_ours, lambda s: cpu.run([s], "dijkstra"))
    reference = np.where(ours.dist == cpu.inf, -1, ours.dist) if ours.dist.dtype.kind == "i" \
        else ours.dist
    reached = reference >= 0
    edges = int(np.diff(graph.indptr)[reached].sum())
    checks, goals = [], []
    if not args.no_scipy:
        adj = graph.to_scipy(weighted=True)
        theirs = timed("scipy.sparse.csgraph.dijkstra",
                       lambda s: dijkstra(adj, directed=False, indices=s,
                                          return_predecessors=True))
        speedup = rows["scipy.sparse.csgraph.dijkstra"] / rows[label_ours]
        print(f"  speed-up {speedup:.2f}x")
        checks.append(("cpu distances vs scipy's",
                       np.array_equal(np.where(reached, reference, np.inf), theirs[0])))
        goals.append(("cpu >= 2x scipy, load excluded", speedup >= 2))
    if gpu_available() and args.backend != "cpu":
        gpu = get_backend("gpu")
        solver = ShortestPaths(graph, gpu)
        deltas = [None] if getattr(args, "delta", None) is None else \
            [float(x) for x in str(args.delta).split(",")]
        print(f"terrain gpu ({gpu.device_name()}), reached {int(reached.sum())} vertices / "
              f"{edges} arcs; default delta {solver.default_delta()}; graph on the device:")
        for delta in deltas:
            _, ok = _gpu_sssp_runs(solver, sources, "delta", delta, reference, edges)
            checks.append((f"gpu delta-stepping (delta {delta or 'default'}) vs cpu distances",
                           ok))
        default_fuse = solver.fuse_rounds        # bucket fusion toggled, the first width again
        solver.fuse_rounds = 0 if default_fuse else FUSE_ROUNDS
        _, ok = _gpu_sssp_runs(solver, sources, "delta", deltas[0], reference, edges)
        checks.append((f"gpu delta-stepping (bucket fusion {solver.fuse_rounds}) vs cpu "
                       "distances", ok))
        solver.fuse_rounds = default_fuse
        _, ok = _gpu_sssp_runs(solver, sources, "crauser", None, reference, edges)
        checks.append(("gpu Crauser vs cpu distances", ok))
        del solver
    if graph.n <= args.load_limit and not args.no_scipy:
        with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
            path = f"{tmp}/g.mtx"
            _write_mtx(graph, path)
            s = int(sources[0])
            ours_load = theirs_load = np.inf
            for _ in range(2):  # best of two: the first also loads compiled code
                t0 = time.perf_counter()
                from terrain.graph import sssp
                loaded = load_graph(path)
                sssp(loaded, loaded.id_of(s), backend="cpu")   # the file's ids start at 1
                ours_load = min(ours_load, time.perf_counter() - t0)
                t0 = time.perf_counter()
                dijkstra(mmread(path).tocsr(), directed=False, indices=s,
                         return_predecessors=True)
                theirs_load = min(theirs_load, time.perf_counter() - t0)
            print(f"load included (Matrix Market file, one source, best of 2): terrain "
                  f"load_graph + sssp "
                  f"{ours_load:.2f} s, scipy mmread + dijkstra {theirs_load:.2f} s "
                  f"({theirs_load / ours_load:.2f}x)")
            goals.append(("cpu >= 2x scipy, load included", theirs_load / ours_load >= 2))
    print(f"peak RSS {peak_rss_bytes() / 2**30:.2f} GiB")
    return verdict(checks, goals)


def _induced_prefix(graph, k):
    """The subgraph induced by vertices ``0..k-1`` (symmetric like ``graph``, the same
    dtypes; a grid's first rows): warms up the kernels a call on ``graph`` compiles."""
    from terrain.graph import Graph
    k = min(k, graph.n)
    end = int(graph.indptr[k])
    keep = graph.indices[:end] < k
    rows = np.repeat(np.arange(k), np.diff(graph.indptr[:k + 1]))[keep]
    indptr = np.zeros(k + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=k), out=indptr[1:])
    weights = None if graph.weights is None else graph.weights[:end][keep]
    return Graph(indptr, graph.indices[:end][keep], weights=weights, name=f"{graph.name}[:{k}]")


def bench_mst_graph_command(args):
    """``bench mst-graph``: terrain's Borůvka forest (GPU: CUDA events for the device part;
    the whole call from the host CSR to the host forest, best of 3 warm calls, with its
    phase split and the process's first call; the same graph already on the device, CuPy
    arrays in and out; CPU twin) vs scipy's minimum_spanning_tree (Kruskal) on the same
    weighted graph; forests compared."""
    from scipy.sparse.csgraph import minimum_spanning_tree
    from terrain.graph import minimum_spanning_forest
    rng = np.random.default_rng(args.seed)
    if args.graph == "grid":
        t0 = time.perf_counter()
        graph = weighted_grid_graph(args.rows, args.cols, args.seed)
        print(f"graph {graph.name}: {graph.n} vertices, {graph.m} edges, weights int32 1..100 "
              f"(built in {time.perf_counter() - t0:.1f} s)", flush=True)
    else:
        graph = weighted_graph(args, rng)
    m = graph.m
    results, checks = {}, []

    def line(label, secs, r, note=""):
        print(f"  {label:<40} {secs * 1e3:10.1f} ms  {m / secs / 1e9:7.3f} G edges/s  "
              f"{r.rounds} rounds{note}", flush=True)

    tiny = _induced_prefix(graph, 20000)  # the same dtypes and wire dtypes, small
    if gpu_available() and args.backend != "cpu":
        gpu = get_backend("gpu")
        cp = gpu.xp
        minimum_spanning_forest(tiny, backend=gpu)  # compile (CUDA, Numba), threads
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        r = minimum_spanning_forest(graph, backend=gpu)
        first = time.perf_counter() - t0
        del r

        def whole_calls():
            """Best of 3 warm whole calls: (wall, its phases, the last result)."""
            runs, r = [], None
            for _ in range(3):
                r = None  # the last forest's memory back to the pools before the next call
                cp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                r = minimum_spanning_forest(graph, backend=gpu)
                runs.append((time.perf_counter() - t0, r.extra["phase_seconds"]))
            wall, phases = min(runs, key=lambda x: x[0])
            return wall, phases, r, min(x[1]["device"] for x in runs)

        def whole_line(label, wall, phases, r):
            rest = wall - sum(phases.values())
            line(label, wall, r,
                 f"  [upload {phases['upload'] * 1e3:.1f} ms, device "
                 f"{phases['device'] * 1e3:.1f} ms, download {phases['download'] * 1e3:.1f} "
                 f"ms, host rest {rest * 1e3:.1f} ms]")

        wall, phases, r, dev = whole_calls()
        results["gpu"] = r
        wl = r.extra["worklist"]
        print(f"terrain gpu ({gpu.device_name()}), best of 3; worklist {sum(wl) / m:.2f} m "
              f"over the rounds, light threshold {r.extra['light_threshold']}:")
        line("device part (CUDA events)", dev, r)
        whole_line("whole call (host CSR -> host forest)", wall, phases, r)
        line("  first call of the process (cold pools)", first, r)
        on_device = (cp.asarray(graph.indptr), cp.asarray(graph.indices),
                     None if graph.weights is None else cp.asarray(graph.weights))
        minimum_spanning_forest(on_device)
        walls = []
        for _ in range(3):
            d = None
            cp.cuda.Device().synchronize()
            t0 = time.perf_counter()
            d = minimum_spanning_forest(on_device)
            walls.append(time.perf_counter() - t0)
        same = np.array_equal(d.edge_ids.get(), r.edge_ids) and d.total_weight == r.total_weight
        line("graph on the device (CuPy in, CuPy out)", min(walls), d, "")
        checks.append(("gpu forest, graph on the device vs host call", same))
        del d, on_device
    cpu = get_backend("cpu")
    minimum_spanning_forest(tiny, backend=cpu)  # compile for these dtypes
    t0 = time.perf_counter()
    r = minimum_spanning_forest(graph, backend=cpu)
    secs = time.perf_counter() - t0
    results["cpu"] = r
    line(f"terrain cpu twin ({cpu.device_name()}, Numba)", secs, r)
    if "gpu" in results:
        g, c = results["gpu"], results["cpu"]
        checks.append(("gpu vs cpu forest", np.array_equal(g.edge_ids, c.edge_ids)
                       and g.total_weight == c.total_weight))
    if not args.no_scipy:
        adj = graph.to_scipy(weighted=True)
        t0 = time.perf_counter()
        t = minimum_spanning_tree(adj)
        secs = time.perf_counter() - t0
        total = int(t.sum()) if graph.weights.dtype.kind in "iu" else float(t.sum())
        print(f"  {'scipy minimum_spanning_tree':<40} {secs * 1e3:10.1f} ms  "
              f"{m / secs / 1e9:7.3f} G edges/s  total {total}")
        checks += [(f"{name} forest total weight vs scipy's", x.total_weight == total)
                   for name, x in results.items()]
    print(f"peak RSS {peak_rss_bytes() / 2**30:.2f} GiB")
    return verdict(checks)
