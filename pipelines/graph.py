"""Command handlers for sparse graphs: ``graph-ingest``, ``bfs``, ``diameter``.

Dask strategy: none. These run in-process: parsing parallelises with threads inside
:func:`terrain.graph.read_graph_file`, and a traversal is one device-resident loop whose
levels depend on each other; a task graph would only add scheduling overhead.
Long runs report progress on stderr; results go to stdout (text, or JSON with ``--json``).
"""

import json
import sys
import time

import numpy as np

from terrain._atomic import atomic_output
from terrain.backend import get_backend
from terrain.errors import InputError
from terrain.graph import bfs, diameter, load_graph, write_graph_cache

__all__ = ["graph_ingest_command", "bfs_command", "diameter_command"]


def _load(args):
    t0 = time.perf_counter()
    graph = load_graph(args.graph, args.format, lcc=getattr(args, "lcc", False))
    seconds = time.perf_counter() - t0
    if seconds > 2.0:
        print(f"{args.graph}: loaded {graph.n} vertices, {graph.m} edges in {seconds:.1f} s",
              file=sys.stderr, flush=True)
    return graph, seconds


def _lcc_note(graph):
    info = graph.meta.get("lcc")
    if info and info["components"] > 1:
        return (f"kept the largest of {info['components']} components "
                f"({info['lcc_vertices']} of {info['vertices']} vertices)")
    return None


def graph_ingest_command(args):
    """``graph-ingest GRAPH -o G.zarr``: parse once, cache the CSR."""
    from terrain._atomic import check_output_free
    check_output_free(args.output, args.overwrite)
    graph, seconds = _load(args)
    t0 = time.perf_counter()
    write_graph_cache(graph, args.output, overwrite=args.overwrite)
    print(f"{args.output}: {graph.n} vertices, {graph.m} edges "
          f"(format {graph.meta.get('format', 'store')}, parsed in {seconds:.2f} s, "
          f"written in {time.perf_counter() - t0:.2f} s)")
    note = _lcc_note(graph)
    if note:
        print(note)
    return 0


def _parse_sources(text):
    out = []
    for tok in text.split(","):
        tok = tok.strip()
        if not tok:
            continue
        try:
            out.append(int(tok))
        except ValueError:
            raise InputError(f"--source: {tok!r} is not an integer vertex id") from None
    if not out:
        raise InputError("--source: no vertex given")
    return out


def bfs_command(args):
    """``bfs GRAPH --source S[,S...]``: hop distances from the source(s)."""
    backend = get_backend(args.backend)
    graph, _ = _load(args)
    sources = graph.index_of(_parse_sources(args.source), what="source vertex")
    if args.out:
        from terrain._atomic import check_output_free
        check_output_free(args.out, True)
    t0 = time.perf_counter()
    result = bfs(graph, sources, predecessors=False, backend=backend)
    seconds = time.perf_counter() - t0
    dist = result.dist
    reached = int(np.count_nonzero(dist >= 0))
    summary = {
        "graph": str(args.graph), "vertices": graph.n, "edges": graph.m,
        "sources": [graph.id_of(s) for s in result.sources], "reached": reached,
        "max_distance": result.stats.eccentricity, "levels": len(result.stats.level_sizes),
        "level_sizes": result.stats.level_sizes, "seconds": round(seconds, 6),
        "backend": backend.name,
    }
    if args.out:
        with atomic_output(args.out, overwrite=True) as tmp:
            with open(tmp, "wb") as f:
                np.save(f, dist)
        summary["out"] = str(args.out)
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"BFS from {', '.join(map(str, summary['sources']))}: reached {reached} of "
              f"{graph.n} vertices, max distance {summary['max_distance']} "
              f"({seconds * 1e3:.1f} ms, {backend.name})")
        if args.out:
            print(f"distances written to {args.out} (row i = the i-th vertex in increasing "
                  "file-id order, -1 = unreachable)")
    return 0


def diameter_command(args):
    """``diameter GRAPH [--all] [--effective K]``: exact diameter by bounding."""
    backend = get_backend(args.backend)
    graph, _ = _load(args)
    t0 = time.perf_counter()
    result = diameter(graph, extremes=args.all, effective=args.effective, seed=args.seed,
                      backend=backend, progress=True)
    seconds = time.perf_counter() - t0
    out = result.as_dict()
    out.update(graph=str(args.graph), seconds=round(seconds, 6), backend=backend.name)
    if args.json:
        print(json.dumps(out))
        return 0
    if not result.connected:
        print(f"the graph is disconnected ({result.components} components): its diameter is "
              f"infinite; answering for the largest component ({result.lcc_vertices} of "
              f"{result.vertices} vertices)")
    a, b = result.endpoints
    print(f"diameter {result.diameter} (exact, {result.bfs_count} BFS, {seconds:.3f} s, "
          f"{backend.name}) between {a} and {b}")
    print("path: " + " ".join(map(str, result.path)))
    if args.all:
        print(f"radius {result.radius}")
        print(f"center ({len(result.center)}): " + " ".join(map(str, result.center[:50]))
              + (" ..." if len(result.center) > 50 else ""))
        print(f"periphery ({len(result.periphery)}): " + " ".join(map(str, result.periphery[:50]))
              + (" ..." if len(result.periphery) > 50 else ""))
    if args.effective:
        print(f"effective diameter (90th percentile over {result.effective_sources} sources): "
              f"{result.effective_diameter:.2f}")
    return 0
