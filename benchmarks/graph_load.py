"""``terrain bench graph-load``: ``terrain bfs EDGES --source S`` against numpy + scipy.

The input is a SNAP edge list (three ``#`` comment lines, then ``u<TAB>v`` per line) of a
Graph500 RMAT graph, ``2**scale`` vertices and ``edge_factor * 2**scale`` edges (duplicates
and self-loops included, as the generator makes them); the default, scale 20 and edge
factor 8, is 1 M vertices, 8 M edges, about 116 MB of text. It is written once into
``--workdir`` and reused.

Whole processes, timed from the outside (start-up, imports, scheduler and kernel
loading included), alternating, ``--repeat`` times each, best and median side by side:

* ours: ``python -m terrain.run bfs EDGES --source S`` (``--scheduler`` passed through; S
  is the first edge's tail, a vertex of the giant component);
* the peer: one ``python -c`` process doing ``numpy.loadtxt`` + ``scipy.sparse`` CSR of
  ``A + A.T`` + ``scipy.sparse.csgraph.breadth_first_order`` from S, printing its
  own parse / CSR / BFS split.

Both must reach the same number of vertices (the figures only count then). Then, in this
process (kernels loaded by a first untimed run), our breakdown: parse (record count and
parse of all chunks on a thread pool, SNAP relabelling), CSR build (degree count and
scatter by edge blocks in parallel, per-row sort with de-duplication), and pyarrow's
multithreaded CSV reader on the same file when pyarrow is installed — the library
:mod:`terrain.graph.loaders` was measured against.
CPU seconds (``wait4``) are printed beside the wall clock: the machine may be shared.

Dask strategy: none here (the ``bfs`` child uses its own scheduler).
"""

import os
import subprocess
import sys
import time
from pathlib import Path

from .common import verdict

__all__ = ["bench_graph_load_command"]

_PEER = """
import sys, time
t0 = time.perf_counter()
import numpy as np, scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order
e = np.loadtxt(sys.argv[1], dtype=np.int64, comments="#")
t1 = time.perf_counter()
n = int(e.max()) + 1
a = sp.csr_matrix((np.ones(len(e), np.int8), (e[:, 0], e[:, 1])), shape=(n, n))
a = (a + a.T).tocsr()
t2 = time.perf_counter()
order = breadth_first_order(a, int(sys.argv[2]), directed=False, return_predecessors=False)
t3 = time.perf_counter()
print(f"PEER reached={order.size} parse={t1 - t0:.3f} csr={t2 - t1:.3f} bfs={t3 - t2:.3f}")
"""


def _make_input(workdir, scale, edge_factor, seed):
    from terrain.graph.generators import rmat_edges, write_int_rows
    path = Path(workdir) / f"rmat-{scale}-{edge_factor}-{seed}.txt"
    if not path.exists():
        u, v = rmat_edges(scale, edge_factor, seed)
        header = (f"# RMAT graph (terrain bench graph-load), seed {seed}\n"
                  f"# Nodes: {1 << scale} Edges: {u.size}\n# FromNodeId\tToNodeId\n")
        tmp = path.with_suffix(".tmp")
        write_int_rows(tmp, [u, v], header)
        os.replace(tmp, path)
    return path


def _run(cmd):
    """``(wall seconds, stdout)`` of a child process."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(f"bench graph-load: {' '.join(map(str, cmd))} failed:\n"
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return wall, proc.stdout.decode()


def _child_times(cmd):
    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, out = _run(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, out


def _reached(text, pattern):
    import re
    hit = re.search(pattern, text)
    return int(hit.group(1)) if hit else None


def _cpu():
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _breakdown(path, workers):
    """In-process ``(parse, CSR)`` wall and CPU seconds of our loader (the best of two
    runs): :func:`terrain.graph.read_graph_file` (record count, parse into one array,
    SNAP relabelling) and :func:`terrain.graph.build_csr` (degree count, scatter, per-row
    sort with de-duplication)."""
    from terrain.graph import build_csr, read_graph_file
    best = None
    for _ in range(2):
        t0, c0 = time.perf_counter(), _cpu()
        edges = read_graph_file(path, workers=workers)
        t1, c1 = time.perf_counter(), _cpu()
        graph = build_csr(edges.n, edges.u, edges.v, weights=edges.weights)
        t2, c2 = time.perf_counter(), _cpu()
        times = (t1 - t0, c1 - c0, t2 - t1, c2 - c1)
        best = times if best is None or times[0] + times[2] < best[0] + best[2] else best
    return best, graph


def _pyarrow_seconds(path, skip_rows):
    try:
        import pyarrow as pa
        import pyarrow.csv as pcsv
    except ImportError:
        return None
    best = None
    for _ in range(2):
        t0, c0 = time.perf_counter(), _cpu()
        table = pcsv.read_csv(
            path, read_options=pcsv.ReadOptions(skip_rows=skip_rows, use_threads=True,
                                                autogenerate_column_names=True),
            parse_options=pcsv.ParseOptions(delimiter="\t"),
            convert_options=pcsv.ConvertOptions(column_types={"f0": pa.int64(),
                                                              "f1": pa.int64()}))
        u = table.column(0).to_numpy()
        v = table.column(1).to_numpy()
        seconds = (time.perf_counter() - t0, _cpu() - c0)
        best = seconds if best is None else min(best, seconds)
    return best, int(u.size + 0 * v.size)


def bench_graph_load_command(args):
    workdir = Path(args.workdir or os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                "terrain-bench-graph-load"))
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    path = _make_input(workdir, args.scale, args.edge_factor, args.seed)
    size = path.stat().st_size
    print(f"input {path}: {size / 1e6:.1f} MB, {1 << args.scale} vertex ids, "
          f"{args.edge_factor << args.scale} edge lines "
          f"(ready in {time.perf_counter() - t0:.1f} s)", flush=True)
    path.read_bytes()  # into the page cache for both sides
    repo = str(Path(__file__).resolve().parent.parent)
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = repo + (os.pathsep + env_path if env_path else "")
    with open(path) as f:  # the BFS source: the first edge's tail (an id of the file)
        source = next(line for line in f if not line.startswith("#")).split()[0]
    ours_cmd = [sys.executable, "-m", "terrain.run", "bfs", str(path), "--source", source,
                "--backend", "cpu"]
    if args.scheduler:
        ours_cmd += ["--scheduler", args.scheduler]
    peer_cmd = [sys.executable, "-c", _PEER, str(path), source]
    ours, peer = [], []
    reached_ours = reached_peer = None
    peer_split = ""
    for _ in range(args.repeat):
        wall, cpu, out = _child_times(ours_cmd)
        ours.append((wall, cpu))
        reached_ours = _reached(out, r"reached (\d+) of")
        wall, cpu, out = _child_times(peer_cmd)
        peer.append((wall, cpu))
        reached_peer = _reached(out, r"reached=(\d+)")
        peer_split = out.strip().split(" ", 2)[-1]
    same = reached_ours is not None and reached_ours == reached_peer
    print(f"whole process, {args.repeat} runs each (wall best / median, CPU seconds best), "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
          f"({len(os.sched_getaffinity(0))} usable):")
    for name, runs in (("terrain bfs" + (f" --scheduler {args.scheduler}"
                                         if args.scheduler else ""), ours),
                       ("numpy loadtxt + scipy", peer)):
        walls = sorted(w for w, _ in runs)
        print(f"  {name:34s} {walls[0]:7.2f} s / {walls[len(walls) // 2]:7.2f} s   "
              f"cpu {min(c for _, c in runs):6.2f} s")
    best_ours, best_peer = min(w for w, _ in ours), min(w for w, _ in peer)
    print(f"  speed-up {best_peer / best_ours:.2f}x (peer / ours, best wall); "
          f"reached {reached_ours} and {reached_peer} vertices")
    print(f"  peer's split: {peer_split}")
    workers = len(os.sched_getaffinity(0))  # the CPUs this process may use (taskset honoured)
    (parse, parse_cpu, build, build_cpu), graph = _breakdown(path, workers)
    print(f"terrain in-process ({workers} threads, kernels loaded; wall / CPU seconds): "
          f"parse {parse:.3f} / {parse_cpu:.3f} s ({size / parse / 1e6:.0f} MB/s, "
          f"{size / parse_cpu / 1e6:.0f} MB/s per CPU second), CSR build with "
          f"de-duplication {build:.3f} / {build_cpu:.3f} s ({graph.n} vertices, "
          f"{graph.m} edges)")
    arrow = _pyarrow_seconds(path, 3)
    if arrow is not None:
        (wall, cpu), rows = arrow
        print(f"pyarrow.csv.read_csv ({workers} threads) to numpy: {wall:.3f} / {cpu:.3f} s "
              f"({size / wall / 1e6:.0f} MB/s, {size / cpu / 1e6:.0f} MB/s per CPU second), "
              f"{rows} rows")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return verdict([("vertices reached vs numpy loadtxt + scipy's", same)],
                   [("whole process >= 3x numpy + scipy (best)", best_peer / best_ours >= 3)])
