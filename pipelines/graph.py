"""Command handlers for sparse graphs: ``graph-ingest``, ``bfs``, ``sssp``, ``diameter`` and
``mst`` of a graph file, in this process or as Dask graphs.

Without ``--scheduler`` (and no cluster already active) a command loads and runs in this
process and imports no Dask (:func:`_load_and_run`). ``--scheduler`` builds a task graph
(the header read eagerly): ``graph-read`` (gzip),
``graph-chunk`` per byte range, ``graph-csr``, then the command's task. Tables are written
by this process, atomically, in the file's ids. Design and tasks: docs/graphs.md ("Commands
as Dask graphs").
"""

import os
import re
import time
from pathlib import Path

import numpy as np

from terrain.io.outputs import atomic_output, check_outputs, json_text
from terrain.backend import get_backend
from terrain.errors import InputError
from terrain.graph import (DEFAULT_CHUNK_BYTES, bfs, check_table_path, dense_ids,
                           edges_from_chunks, graph_from_edges, load_graph,
                           parse_graph_chunk, plan_graph_file, read_whole_file, vertex_table,
                           write_graph_cache, write_table)


__all__ = ["build_load_graph", "graph_ingest_command", "bfs_command",
           "diameter_command", "sssp_command", "is_graph_input", "mst_graph_command"]


def _token(*parts):
    import dask
    return dask.base.tokenize(*map(str, parts), time.time_ns())


def _load_and_run(source, task, task_args, *, directed, name, label):
    """``task(graph, *task_args)`` on the graph ``source = (path, format, lcc, scheduler)``:
    loaded and run in this process without a scheduler or an active cluster (module
    docstring), else as the Dask graph ``graph-chunk`` ... ``graph-csr`` -> ``NAME``."""
    from .cluster import cluster_active
    path, fmt, lcc, scheduler = source
    if scheduler is None and not cluster_active():
        return task(load_graph(path, fmt, lcc=lcc, directed=directed), *task_args)
    import dask
    from .cluster import compute, open_scheduler
    token = _token(path, name)
    graph = build_load_graph(path, fmt, lcc=lcc, token=token, directed=directed)
    run = dask.delayed(task)(graph, *task_args, dask_key_name=f"{name}-{token}")
    with open_scheduler(scheduler):
        (result,) = compute(run, label=label)
    return result


def _source(args):
    return args.graph, args.format, args.lcc, args.scheduler


def _csr_task(plan, chunks, lcc, directed=None):
    return graph_from_edges(edges_from_chunks(plan, chunks), lcc=lcc, directed=directed)


def build_load_graph(path, fmt="auto", *, lcc=False, chunk_bytes=DEFAULT_CHUNK_BYTES,
                     token=None, directed=None):
    """Dask graph loading a graph file (or a graph-ingest cache) into a :class:`Graph`.

    Parameters
    ----------
    path : str or Path
    fmt : {'auto', 'snap', 'mtx', 'dimacs', 'metis', 'store'}
    lcc : bool
        Keep only the largest connected component.
    chunk_bytes : int
        Nominal byte range of one ``graph-chunk`` task.
    token : str, optional
        Suffix of the task names (default: a fresh one).
    directed : bool, optional
        As :func:`terrain.graph.load_graph` (default: as the format says).

    Returns
    -------
    dask.delayed.Delayed
        Computing it returns the :class:`terrain.graph.Graph`, identical to
        :func:`terrain.graph.load_graph`'s.

    Raises
    ------
    InputError
        Eagerly for a missing file or a bad header; errors in the body when it runs.

    Examples
    --------
    >>> g = build_load_graph("web-Google.txt.gz", lcc=True)   # doctest: +SKIP
    >>> dask.compute(g, scheduler="threads")[0].n             # doctest: +SKIP
    855802
    """
    import dask
    path = Path(path)
    token = token or _token(path)
    if fmt == "store" or (fmt == "auto" and path.is_dir()):
        return dask.delayed(load_graph)(path, "store", lcc=lcc, directed=directed,
                                        dask_key_name=f"graph-csr-{token}")
    plan = plan_graph_file(path, fmt, chunk_bytes=chunk_bytes)
    data = None
    if plan.compressed:
        data = dask.delayed(read_whole_file)(plan, dask_key_name=f"graph-read-{token}")
    chunks = [dask.delayed(parse_graph_chunk)(plan, j, data,
                                              dask_key_name=(f"graph-chunk-{token}", j))
              for j in range(plan.chunks)]
    return dask.delayed(_csr_task)(plan, chunks, lcc, directed,
                                   dask_key_name=f"graph-csr-{token}")


def _write_task(graph, output, overwrite):
    t0 = time.perf_counter()
    write_graph_cache(graph, output, overwrite=overwrite)
    return {"n": graph.n, "m": graph.m, "format": graph.meta.get("format", "store"),
            "lcc": graph.meta.get("lcc"), "write_seconds": time.perf_counter() - t0}


def graph_ingest_command(args):
    """``graph-ingest GRAPH -o G.zarr``: parse once, cache the CSR (in this process, as the
    other graph commands: :func:`_load_and_run`)."""
    check_outputs([args.graph], [args.output], args.overwrite)
    t0 = time.perf_counter()
    s = _load_and_run(_source(args), _write_task, (args.output, args.overwrite),
                      directed=True if args.directed else None, name="graph-write",
                      label="graph-ingest")
    seconds = time.perf_counter() - t0 - s["write_seconds"]
    print(f"{args.output}: {s['n']} vertices, {s['m']} edges "
          f"(format {s['format']}, parsed in {seconds:.2f} s, "
          f"written in {s['write_seconds']:.2f} s)")
    info = s["lcc"]
    if info and info["components"] > 1:
        print(f"kept the largest of {info['components']} components "
              f"({info['lcc_vertices']} of {info['vertices']} vertices)")
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


def _bfs_task(graph, source_ids, backend, predecessors=False):
    t0 = time.perf_counter()
    result = bfs(graph, source_ids, predecessors=predecessors, backend=backend)
    seconds = time.perf_counter() - t0
    dist = result.dist
    summary = {
        "vertices": graph.n, "edges": graph.m,
        "sources": result.sources.tolist(),
        "reached": int(np.count_nonzero(dist >= 0)),
        "max_distance": result.stats.eccentricity, "levels": len(result.stats.level_sizes),
        "level_sizes": result.stats.level_sizes, "seconds": round(seconds, 6),
    }
    table = vertex_table(graph, dist, result.pred) if predecessors else None
    return summary, (table, dense_ids(graph))


def _search_command(args, backend, task, task_args, **kw):
    """A bfs/sssp task on the graph, ``(found, summary)``: ``--out`` checked before any work,
    the task's table written there after."""
    if args.out:
        check_outputs([args.graph], [args.out], args.overwrite)
        check_table_path(args.out)
    found, (table, dense) = _load_and_run(_source(args), task, task_args, **kw)
    summary = {"input": str(args.graph), **found, "backend": backend.name}
    if args.out:
        if not dense:
            check_table_path(args.out, dense_ids=False)
        write_table(args.out, table, overwrite=args.overwrite)
        summary["output"] = str(args.out)
    return found, summary


def bfs_command(args):
    """``bfs GRAPH --source S[,S...]``: hop distances from the source(s)."""
    backend = get_backend(args.backend)
    source_ids = _parse_sources(args.source)
    found, summary = _search_command(args, backend, _bfs_task,
                                     (source_ids, backend.name, bool(args.out)),
                                     directed=False, name="bfs-run", label="bfs")
    if args.json:
        print(json_text(summary))
    else:
        print(f"BFS from {', '.join(map(str, summary['sources']))}: reached "
              f"{summary['reached']} of {summary['vertices']} vertices, max distance "
              f"{summary['max_distance']} ({summary['seconds'] * 1e3:.1f} ms, {backend.name})")
        if args.out:
            held = ("the distance by row number" if str(args.out).lower().endswith(".npy")
                    else "id, distance, predecessor")
            print(f"distances written to {args.out} ({held}; -1 = unreachable / none)")
    return 0


def _sssp_task(graph, source_ids, algorithm, delta, backend, with_table):
    from terrain.graph import sssp
    t0 = time.perf_counter()
    result = sssp(graph, source_ids, algorithm=algorithm, delta=delta, backend=backend,
                  predecessors=with_table)
    seconds = time.perf_counter() - t0
    reached = result.reached
    far = result.dist[reached].max() if reached.any() else 0
    summary = {
        "vertices": graph.n, "edges": graph.m, "directed": graph.directed,
        "weighted": graph.weighted,
        "sources": result.sources.tolist(),
        "reached": int(np.count_nonzero(reached)), "max_distance": far.item(),
        "algorithm": result.algorithm, "delta": result.delta,
        "iterations": result.iterations, "seconds": round(seconds, 6),
    }
    table = vertex_table(graph, result.dist, result.pred) if with_table else None
    return summary, (table, dense_ids(graph))


def sssp_command(args):
    """``sssp GRAPH --source S[,S...]``: weighted shortest-path distances and predecessors."""
    backend = get_backend(args.backend)
    source_ids = _parse_sources(args.source)
    if args.delta is not None and args.algorithm not in ("delta", "auto"):
        raise InputError("--delta is the bucket width of --algorithm delta")
    found, summary = _search_command(
        args, backend, _sssp_task, (source_ids, args.algorithm, args.delta, backend.name,
                                    bool(args.out)),
        directed=True if args.directed else None, name="sssp-run", label="sssp")
    if args.json:
        print(json_text(summary))
        return 0
    how = found["algorithm"] + (f", delta {found['delta']}" if found["delta"] else "")
    print(f"SSSP from {', '.join(map(str, summary['sources']))}: reached {summary['reached']} "
          f"of {summary['vertices']} vertices, max distance {summary['max_distance']} "
          f"({summary['seconds'] * 1e3:.1f} ms, {how}, {backend.name}, "
          f"{'directed' if found['directed'] else 'undirected'}"
          f"{'' if found['weighted'] else ', unweighted: 1 per edge'})")
    if args.out:
        held = ("the distance by row number; unreachable: -1 or inf"
                if str(args.out).lower().endswith(".npy") else "id, distance, predecessor; "
                "unreachable: distance -1 or inf, predecessor -1")
        print(f"written to {args.out} ({held})")
    return 0


def _diameter_task(graph, backend, weighted, extremes, effective, seed):
    """``(result, seconds, backend name)``; the backend chosen once the graph's size is known."""
    from terrain.graph import diameter, weighted_diameter
    backend = get_backend(backend, work=graph.n + graph.nnz)
    t0 = time.perf_counter()
    if weighted:
        result = weighted_diameter(graph, extremes=extremes, backend=backend, progress=True)
    else:
        result = diameter(graph, extremes=extremes, effective=effective, seed=seed,
                          backend=backend, progress=True)
    return result, time.perf_counter() - t0, backend.name


_SHOWN = 5


def summarize_ids(ids, shown=_SHOWN):
    """``n vertices: a b c ... x y z`` for a long id list, all of it when short.

    Examples
    --------
    >>> summarize_ids(list(range(100)), 3)
    '100 vertices: 0 1 2 ... 97 98 99'
    >>> summarize_ids([4, 5])
    '2 vertices: 4 5'
    """
    ids = list(ids)
    if len(ids) <= 2 * shown:
        body = " ".join(map(str, ids))
    else:
        body = " ".join(map(str, ids[:shown])) + " ... " + " ".join(map(str, ids[-shown:]))
    return f"{len(ids)} vertices: {body}"


def _write_ids(path, ids, overwrite=False):
    """One id a line, atomically (over an existing file only with ``overwrite``)."""
    with atomic_output(path, overwrite) as tmp:
        with open(tmp, "w") as f:
            f.writelines(f"{v}\n" for v in ids)


def diameter_command(args):
    """``diameter GRAPH [--all] [--effective K] [--weighted]``: exact diameter by bounding."""
    get_backend(args.backend, work=0)  # the name checked before the graph is read
    overwrite = getattr(args, "overwrite", False)
    if getattr(args, "path_out", None):
        check_outputs([args.graph], [args.path_out], overwrite)
    weighted = getattr(args, "weighted", False)
    if weighted and args.effective:
        raise InputError("--effective does not combine with --weighted: the effective "
                         "diameter is SNAP's 90th percentile of hop counts, interpolated "
                         "between hop levels, which weighted distances do not have")
    result, seconds, backend = _load_and_run(
        _source(args), _diameter_task, (args.backend, weighted, bool(args.all), args.effective,
                                        args.seed), directed=False, name="diameter-run",
        label="diameter")
    out = result.as_dict()
    out.update(input=str(args.graph), seconds=round(seconds, 6), backend=backend)
    if getattr(args, "path_out", None):
        _write_ids(args.path_out, result.path, overwrite)
        out["output"] = str(args.path_out)
    if args.json:
        print(json_text(out))
        return 0
    if not result.connected:
        print(f"the graph is disconnected ({result.components} components): its diameter is "
              f"infinite; answering for the largest component ({result.lcc_vertices} of "
              f"{result.vertices} vertices)")
    a, b = result.endpoints
    searches = f"{result.bfs_count} {'Dijkstra' if weighted else 'BFS'}"
    print(f"diameter {result.diameter} (exact{', weighted' if weighted else ''}, {searches}, "
          f"{seconds:.3f} s, {backend}) between {a} and {b}")
    print("path: " + summarize_ids(result.path)
          + (f" (whole path in {args.path_out})" if getattr(args, "path_out", None) else
             " (the whole path: --json or --path-out FILE)" if len(result.path) > 2 * _SHOWN else ""))
    if args.all:
        print(f"radius {result.radius}")
        for name, ids in (("center", result.center), ("periphery", result.periphery)):
            print(f"{name} ({len(ids)}): " + " ".join(map(str, ids[:50]))
                  + (" ..." if len(ids) > 50 else ""))
    if args.effective:
        print(f"effective diameter (90th percentile over {result.effective_sources} sources): "
              f"{result.effective_diameter:.2f}")
    return 0


_GRID_SUFFIXES = {".asc", ".tif", ".tiff", ".img", ".vrt", ".nc", ".grd", ".bil", ".flt",
                  ".dem", ".hgt", ".jp2", ".png", ".zarr"}
_GRAPH_SUFFIXES = {".mtx", ".gr", ".graph", ".metis", ".edges", ".el", ".snap"}
_GRID_HEADERS = ("ncols", "nrows", "xllcorner", "xllcenter", "north:", "south:", "east:",
                 "west:", "rows:", "cols:")


def is_graph_input(path):
    """True when ``path`` is a sparse graph (a graph-ingest cache, a graph format by suffix, a
    DIMACS text, or a text whose first content line, after a row of column names, is an edge
    ``U V [W ...]``, spaces or commas between) rather than a grid."""
    from terrain.graph import is_graph_cache
    from terrain.io.remote import is_remote
    if is_remote(path):  # a tile store at a URL (terrain.io.remote.Location)
        return False
    path = Path(path)
    if path.is_dir():
        return is_graph_cache(path)
    if path.exists() and not path.is_file():
        return False  # a FIFO or a device: not read here (it could block)
    name = path.name.lower()
    compressed = name.endswith(".gz")
    suffix = Path(name[:-3] if compressed else name).suffix
    if suffix in _GRAPH_SUFFIXES:
        return True
    if suffix in _GRID_SUFFIXES:
        return False
    try:
        import gzip
        with (gzip.open if compressed else open)(path, "rb") as f:
            head = f.read(4096).decode("utf-8", "replace").removeprefix("\ufeff")
    except (OSError, EOFError):
        return compressed  # the graph reader names a bad gzip file; the grid path a missing one
    named = False  # a row of column names (SNAP's "source,target,weight") seen first
    commented = False  # comment lines, which no grid format has
    for line in head.splitlines():
        text = line.strip().lower()
        if not text or text.startswith(("#", "%")):
            commented = commented or bool(text)
            continue
        if text.startswith(_GRID_HEADERS):
            return False
        if text.startswith("p sp"):  # DIMACS (its "c" lines are comments)
            return True
        if text == "c" or text.startswith("c "):
            continue
        # separated as the graph loader separates them: whitespace or commas, and columns
        # after the weight (KONECT's timestamps) allowed
        tokens = [t for t in re.split(r"[\s,]+", text) if t]
        numeric = []
        for t in tokens:
            try:
                numeric.append(float(t) is not None)
            except ValueError:
                numeric.append(False)
        ids = len(tokens) >= 2 and all(t.lstrip("-").isdigit() for t in tokens[:2])
        if ids:  # an edge (the graph reader says what is wrong with its weight, if anything)
            return True
        if not any(numeric):  # column names: only words, once, before the first edge
            if named or len(tokens) < 2:
                return False
            named = True
            continue
        # a word then numbers is a header's key and value (the grid reader names the key);
        # words among numbers are an edge of labels (the graph reader says what it reads)
        return len(tokens) >= 3 and not numeric[0] and not numeric[1]
    return commented  # only comments so far: an edge list (the graph reader says it is empty)


def _mst_graph_task(graph, backend):
    from terrain.graph import minimum_spanning_forest
    t0 = time.perf_counter()
    result = minimum_spanning_forest(graph, backend=backend)
    seconds = time.perf_counter() - t0
    w = result.weight if graph.weights is not None else result.weight.astype(np.int64)
    table = {"u": result.u.astype(np.int64), "v": result.v.astype(np.int64), "weight": w}
    summary = {"vertices": graph.n, "edges": graph.m, "weighted": graph.weighted,
               "forest_edges": int(result.u.size), "total_weight": result.total_weight,
               "trees": result.trees, "rounds": result.rounds, "seconds": round(seconds, 6)}
    return summary, table


#: ``mst``'s options that only a grid takes: (attribute, default, flag)
GRID_OPTIONS = (("connectivity", 8, "--connectivity"), ("weight", "max", "--weight"),
                ("tile", 512, "--tile"), ("geotiff", None, "--geotiff"),
                ("no_cog", False, "--no-cog"), ("resume", False, "--resume"),
                ("dry_run", False, "--dry-run"))


def mst_graph_command(args):
    """``mst GRAPH``: the minimum spanning forest as an edge table (``-o`` .csv / .parquet /
    .npz) with original ids; a grid's options are refused (they would be ignored)."""
    given = [flag for name, default, flag in GRID_OPTIONS
             if getattr(args, name, default) != default]
    if given:
        raise InputError(f"{args.input}: a graph file: {', '.join(given)} "
                         f"{'applies' if len(given) == 1 else 'apply'} to grids only")
    backend = get_backend(args.backend)
    if not os.path.lexists(args.input):  # before its default output is found taken
        raise InputError(f"{args.input}: no such file")
    name = Path(args.input).name.removesuffix(".gz")
    out = Path(args.output) if args.output else Path(args.input).with_name(
        Path(name).stem + ".mst.csv")
    check_outputs([args.input], [out], args.overwrite)
    if out.suffix.lower() == ".npy":
        raise InputError(f"{out}: an edge table needs .parquet, .csv or .npz")
    check_table_path(out)
    summary, table = _load_and_run((args.input, "auto", False, args.scheduler),
                                   _mst_graph_task, (backend.name,), directed=False,
                                   name="mst-graph-run", label="mst")
    write_table(out, table, overwrite=args.overwrite)
    summary = {"input": str(args.input), **summary, "backend": backend.name, "output": str(out)}
    if args.json:
        print(json_text(summary))
    else:
        print(f"minimum spanning forest of {args.input}: {summary['forest_edges']} edges, "
              f"{summary['trees']} tree(s), total weight {summary['total_weight']} "
              f"({summary['rounds']} Boruvka rounds, {summary['seconds']:.3f} s, "
              f"{backend.name})")
        print(f"edges written to {out} (u, v, weight in the file's ids)")
    return 0
