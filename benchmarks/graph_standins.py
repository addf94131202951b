"""Stand-ins for SNAP's power (USpowerGrid), facebook_combined and CA-HepPh (their files are
not available offline), built with networkx generators at the same vertex and edge counts and
shape, and the exact diameter on them in process, warm: terrain against networkit.

    python -m benchmarks.graph_standins OUTDIR [--repeat 5] [--networkit PYTHON]

Writes ``OUTDIR/{power,facebook,hepph}.txt`` (SNAP edge lists; diameters 50, 9, 14 against
the originals' 46, 8, 13) and prints, per graph, the best of ``--repeat`` calls in CPU
seconds (after one warm-up call in the same process) of terrain's ``diameter`` on the loaded
graph, and with ``--networkit PYTHON`` (an interpreter whose environment has networkit) of
``nk.distance.Diameter(G, nk.distance.DiameterAlgo.EXACT).run()`` on the graph networkit's
``EdgeListReader`` read, one thread (its CPU seconds grow with more on a shared box).

``--processes`` times whole processes instead, on the stand-ins and every ``--file``: ``terrain
diameter FILE`` (``--terrain-python``: an installation's) against a networkit script that
reads the file, extracts the largest component and runs the exact diameter (best wall of
``--repeat``; peak RSS), then checks the two diameters agree (one untimed run each).
"""

import argparse
import random
import time
from pathlib import Path

import networkx as nx
import numpy as np

from .common import terrain_command, timed_child, verdict


def power(n=4941, m=6594, seed=1, long_lines=150):
    """The MST of a random geometric graph plus its shortest other edges and a few long
    lines: planar-like, average degree 2.67, a long diameter."""
    rng = random.Random(seed)
    G = nx.random_geometric_graph(n, 0.03, seed=seed)
    while not nx.is_connected(G):
        comps = sorted(nx.connected_components(G), key=len)
        G.add_edge(rng.choice(list(comps[0])), rng.choice(list(comps[-1])))
    pos = nx.get_node_attributes(G, "pos")
    for a, b in G.edges():
        G[a][b]["weight"] = np.hypot(pos[a][0] - pos[b][0], pos[a][1] - pos[b][1])
    T = nx.minimum_spanning_tree(G)
    extra = sorted((d["weight"], a, b) for a, b, d in G.edges(data=True) if not T.has_edge(a, b))
    rng.shuffle(extra)
    for _, a, b in extra[:m - T.number_of_edges() - long_lines]:
        T.add_edge(a, b)
    nodes = list(T)
    while T.number_of_edges() < m:
        T.add_edge(rng.choice(nodes), rng.choice(nodes))
    return nx.Graph(T.edges())


def facebook(n=4039, m=88234, seed=2):
    """Ten clustered power-law communities (the ego networks) tied to the largest."""
    rng = random.Random(seed)
    G, base, comms = nx.Graph(), 0, []
    for s in (1034, 786, 535, 475, 347, 333, 225, 168, 83, 53):
        H = nx.powerlaw_cluster_graph(s, min(round(m / n), s - 1), 0.5,
                                      seed=rng.randint(0, 10**6))
        G.add_edges_from((a + base, b + base) for a, b in H.edges())
        comms.append(range(base, base + s))
        base += s
    for c in comms[1:]:
        for _ in range(3):
            G.add_edge(rng.choice(comms[0]), rng.choice(c))
    while G.number_of_edges() < m:
        c = rng.choice(comms)
        a, b = rng.choice(c), rng.choice(c)
        if a != b:
            G.add_edge(a, b)
    return G


def hepph(n=12008, m=118521, seed=3):
    """A clustered power-law collaboration graph with pendant chains, and small components."""
    rng = random.Random(seed)
    G = nx.powerlaw_cluster_graph(11000, 10, 0.7, seed=seed)
    v = 11000
    for _ in range(40):
        prev = rng.randrange(11000)
        for _ in range(5):
            G.add_edge(prev, v)
            prev, v = v, v + 1
    while v < n:
        size = min(rng.choice([2, 2, 3, 3, 4]), n - v)
        if size < 2:
            G.add_node(v)
            v += 1
            continue
        G.add_edges_from((v + i, v + i + 1) for i in range(size - 1))
        v += size
    core = list(range(11000))
    while G.number_of_edges() < m:
        a, b = rng.choice(core), rng.choice(core)
        if a != b:
            G.add_edge(a, b)
    return G


_NETWORKIT = """
import sys, time
import networkit as nk
nk.setNumberOfThreads(1)
G = nk.graphio.EdgeListReader("\\t", 0, "#", continuous=False, directed=False).read(sys.argv[1])
best = None
for _ in range(int(sys.argv[2]) + 1):  # the first call warms up
    t0 = time.process_time()
    d = nk.distance.Diameter(G, nk.distance.DiameterAlgo.EXACT)
    d.run()
    t = time.process_time() - t0
    best = t if best is None else min(best, t)
print(d.getDiameter()[0], best)
"""


_NETWORKIT_PROCESS = """
import sys
import networkit as nk
nk.setNumberOfThreads(1)
G = nk.graphio.EdgeListReader("\\t", 0, "#", continuous=False, directed=False).read(sys.argv[1])
G = nk.components.ConnectedComponents(G).extractLargestConnectedComponent(G, True)
d = nk.distance.Diameter(G, nk.distance.DiameterAlgo.EXACT)
d.run()
print(d.getDiameter()[0])
"""


def _diameters_agree(path, ours, env, networkit):
    """``(what, agreed)``: terrain's ``diameter --json`` against the networkit script's, one
    untimed run each (the timed ones print into /dev/null)."""
    import json
    import subprocess
    mine = subprocess.run([*ours, "diameter", str(path), "--json"], env=env,
                          capture_output=True, text=True, check=True)
    peer = subprocess.run([networkit, "-c", _NETWORKIT_PROCESS, str(path)],
                          capture_output=True, text=True, check=True)
    d = int(peer.stdout.split()[-1])
    return f"{Path(path).name} diameter vs networkit's ({d})", json.loads(mine.stdout)[
        "diameter"] == d


def _processes(paths, repeat, networkit, terrain_python):
    """Whole processes: terrain's ``diameter`` command against the networkit script, their
    diameters compared when networkit ran."""
    ours, env = terrain_command(terrain_python)
    checks = []
    print("graph | terrain wall s | terrain peak MB | networkit wall s | networkit peak MB")
    for path in paths:
        cmds = {"terrain": ([*ours, "diameter", str(path)], env)}
        if networkit:
            cmds["networkit"] = ([networkit, "-c", _NETWORKIT_PROCESS, str(path)], None)
        best = {}
        for _ in range(repeat):  # interleaved
            for name, (cmd, e) in cmds.items():
                wall, rss, _ = timed_child(cmd, e)
                w, m = best.get(name, (float("inf"), 0))
                best[name] = (min(w, wall), max(m, rss))
        cells = [f"{best[k][0]:.2f} | {best[k][1] / 1e6:.0f}" if k in best else "- | -"
                 for k in ("terrain", "networkit")]
        print(f"{Path(path).name} | {cells[0]} | {cells[1]}", flush=True)
        if networkit:
            checks.append(_diameters_agree(path, ours, env, networkit))
    return verdict(checks, unchecked="no --networkit: terrain's processes timed alone")


def main(argv=None):
    import subprocess
    from terrain.graph import diameter, load_graph
    p = argparse.ArgumentParser(prog="python -m benchmarks.graph_standins")
    p.add_argument("outdir")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--networkit", metavar="PYTHON",
                   help="an interpreter with networkit: time its exact diameter too")
    p.add_argument("--processes", action="store_true",
                   help="time whole processes (terrain's command, a networkit script)")
    p.add_argument("--file", action="append", default=[], metavar="EDGES",
                   help="with --processes: another SNAP edge list to time")
    p.add_argument("--terrain-python", metavar="PYTHON",
                   help="with --processes: an installation's interpreter")
    args = p.parse_args(argv)
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, make in (("power", power), ("facebook", facebook), ("hepph", hepph)):
        paths[name] = path = out / f"{name}.txt"
        if not path.exists():
            G = make()
            path.write_text(f"# stand-in: {G.number_of_nodes()} nodes\n"
                            + "".join(f"{a}\t{b}\n" for a, b in G.edges()))
    if args.processes:
        return _processes([*paths.values(), *args.file], args.repeat, args.networkit,
                          args.terrain_python)
    checks = []
    print("graph | vertices | edges | diameter | terrain BFS | terrain CPU ms | networkit CPU ms")
    for name, path in paths.items():
        g = load_graph(path)
        r = diameter(g, backend="cpu")
        best = min(_cpu_seconds(lambda: diameter(g, backend="cpu")) for _ in range(args.repeat))
        peer = "-"
        if args.networkit:
            proc = subprocess.run([args.networkit, "-c", _NETWORKIT, str(path), str(args.repeat)],
                                  capture_output=True, text=True, check=True)
            d, secs = proc.stdout.split()
            checks.append((f"{name} diameter vs networkit's ({d})", int(d) == r.diameter))
            peer = f"{float(secs) * 1e3:.2f}"
        print(f"{name} | {g.n} | {g.m} | {r.diameter} | {r.bfs_count} | {best * 1e3:.2f} | {peer}",
              flush=True)
    return verdict(checks)


def _cpu_seconds(fn):
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


if __name__ == "__main__":
    raise SystemExit(main())
