"""The fast SNAP loading path (C scanner and newline count, a weight on every line or on none,
relabelling into the joined arrays, CSR by degree count + scatter + per-row sort)
against an independent oracle: a Python line parser, ``np.unique`` relabelling and a
``np.lexsort`` CSR keeping the minimum weight (the first in file order among equal ones), on
random files with duplicates, self-loops, comments, blank lines, CRLF, weights, gzip, cut
into many chunks, parsed by one thread or two; and ``Graph.index_of``'s binary search
against a dict. The bench's SNAP writer is checked against Python's formatting."""

import gzip
import zlib

import numpy as np
import pytest

from terrain.errors import InputError
from terrain.graph.generators import write_int_rows
from terrain.graph import graph_from_edges, load_graph
from terrain.graph.loaders import read_graph_file
from cli import imported_after


def _random_snap(rng, weights, m=400):
    """(text, [(a, b, w_text or None)]) of a SNAP file with sparse ids, duplicates,
    self-loops, comments and blank lines."""
    pool = rng.choice(10**6, size=60, replace=False)
    lines, records = ["# random test graph", "% another comment"], []
    for _ in range(m):
        r = rng.random()
        if r < 0.05:
            lines.append(rng.choice(["", "  ", "# c", "\t% c"]))
            continue
        a = int(pool[rng.integers(pool.size)])
        b = a if r < 0.1 else int(pool[rng.integers(pool.size)])
        if r > 0.9 and records:
            a, b = records[int(rng.integers(len(records)))][:2]  # an exact duplicate line
        w = None
        if weights == "int":
            w = str(int(rng.integers(-50, 50)))
        elif weights == "float":
            w = repr(float(rng.integers(-40, 40)) / 8) if rng.random() < 0.5 else \
                str(int(rng.integers(0, 9)))
        elif weights == "some":
            w = str(int(rng.integers(1, 9))) if rng.random() < 0.7 else None
        sep = "\t" if rng.random() < 0.5 else " "
        lines.append(sep.join([str(a), str(b)] + ([w] if w is not None else [])))
        records.append((a, b, w))
    return "\n".join(lines) + "\n", records


def _oracle(records, directed):
    """(ids, indptr, indices, weights or None) computed without terrain."""
    u = np.array([r[0] for r in records], np.int64)
    v = np.array([r[1] for r in records], np.int64)
    ws = [r[2] for r in records]
    weighted = all(w is not None for w in ws)
    if weighted:
        floaty = any(("." in w or "e" in w.lower()) for w in ws)
        w = np.array([float(x) if floaty else int(x) for x in ws])
    ids, inv = np.unique(np.concatenate([u, v]), return_inverse=True)
    a, b = inv[:u.size], inv[u.size:]
    order = np.arange(u.size)
    if not directed:
        a, b, order = np.concatenate([a, b]), np.concatenate([b, a]), np.concatenate([order,
                                                                                      order])
    keep = a != b
    a, b, order = a[keep], b[keep], order[keep]
    wt = w[order] if weighted else np.zeros(a.size)
    # sort by (row, column, weight, file order): the first of each (row, column) is the
    # minimum weight, the first in file order among equal weights
    s = np.lexsort((order, wt, b, a))
    a, b, wt = a[s], b[s], wt[s]
    first = np.ones(a.size, bool)
    first[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    a, b, wt = a[first], b[first], wt[first]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(a, minlength=ids.size))])
    return ids, indptr, b, (wt if weighted else None)


@pytest.mark.parametrize("weights", [None, "int", "float", "some"])
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("directed", [False, True])
def test_fast_path_matches_oracle(tmp_path, weights, gz, directed):
    rng = np.random.default_rng(zlib.crc32(f"{weights}{gz}{directed}".encode()))
    for trial in range(3):
        text, records = _random_snap(rng, weights)
        if trial == 2:
            text = text.replace("\n", "\r\n")
        path = tmp_path / f"g{trial}.txt"
        if gz:
            path = path.with_name(path.name + ".gz")
            path.write_bytes(gzip.compress(text.encode()))
        else:
            path.write_text(text)
        if weights == "some":  # a weight on some lines only: refused at the first odd one
            edge_lines = [i + 1 for i, r in enumerate(text.splitlines())
                          if r.strip() and not r.lstrip().startswith(("#", "%"))]
            arity = [len(text.splitlines()[i - 1].split()) for i in edge_lines]
            # the first edge line decides (a first line of two ids too, not a header)
            line = next(i for i, a in zip(edge_lines, arity) if a != arity[0])
            for chunk_bytes, workers in ((1 << 20, 1), (61, 2)):
                with pytest.raises(InputError, match=rf":{line}: "):
                    read_graph_file(path, chunk_bytes=chunk_bytes, workers=workers)
            continue
        ids, indptr, indices, want_w = _oracle(records, directed)
        for chunk_bytes, workers in ((1 << 20, 1), (97, 1), (61, 2)):
            edges = read_graph_file(path, chunk_bytes=chunk_bytes, workers=workers)
            g = graph_from_edges(edges, directed=directed)
            assert g.id_array().tolist() == ids.tolist()
            assert g.indptr.tolist() == indptr.tolist()
            assert g.indices.tolist() == indices.tolist()
            assert g.indices.dtype == np.int32
            if want_w is None:
                assert g.weights is None
            else:
                assert g.weights.tolist() == want_w.tolist()
                assert g.weights.dtype.kind == want_w.dtype.kind


def test_index_of_binary_search_matches_dict(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("10 20\n20 35\n35 10\n7 1000\n")
    g = load_graph(path)
    table = {int(x): i for i, x in enumerate(g.id_array())}
    assert g.index_of([1000, 7, 35]).tolist() == [table[1000], table[7], table[35]]
    for missing in (8, -1, 2000, "x"):
        with pytest.raises(Exception, match="not in the graph"):
            g.index_of([missing])


def test_snap_writer(tmp_path):
    rng = np.random.default_rng(3)
    u = rng.integers(0, 10**12, 50)
    v = np.concatenate([[0, 9, 10], rng.integers(0, 10**12, 47)])
    path = tmp_path / "w.txt"
    write_int_rows(path, [u, v], "# h\n")
    assert path.read_text() == "# h\n" + "".join(f"{a}\t{b}\n" for a, b in zip(u, v))


@pytest.mark.parametrize("weighted", [False, True])
def test_build_csr_long_rows_match_oracle(weighted):
    """Hubs (rows of thousands: radix-sorted), mid rows (33..256: sort call), short rows
    (insertion sort), with duplicates and self-loops, against the lexsort oracle."""
    from terrain.graph import build_csr
    rng = np.random.default_rng(7)
    n = 5000
    hub = np.concatenate([np.zeros(3000, np.int64), np.ones(120, np.int64)])
    u = np.concatenate([hub, rng.integers(0, n, 4000)])
    v = np.concatenate([rng.integers(0, n, hub.size), rng.integers(0, n, 4000)])
    w = rng.integers(-20, 20, u.size)
    records = [(int(a), int(b), str(int(x)) if weighted else None) for a, b, x in zip(u, v, w)]
    ids, indptr, indices, want_w = _oracle(records, directed=False)
    g = build_csr(ids.size, np.searchsorted(ids, u), np.searchsorted(ids, v),
                  weights=w if weighted else None)
    assert np.diff(g.indptr).max() > 2000
    assert g.indptr.tolist() == indptr.tolist()
    assert g.indices.tolist() == indices.tolist()
    if weighted:
        assert g.weights.tolist() == want_w.tolist()


def test_bfs_process_imports_neither_numba_nor_scipy(tmp_path):
    """``terrain bfs FILE`` (no ``--out``, CPU) runs on the C kernels alone: neither Numba
    nor SciPy is imported (their start-up was most of a one-second process), and the
    distances still match networkx."""
    import networkx as nx
    rng = np.random.default_rng(5)
    u, v = rng.integers(0, 300, 2000), rng.integers(0, 300, 2000)
    path = tmp_path / "g.txt"
    write_int_rows(path, [u, v], "# g\n")
    out, imported = imported_after(
        [["bfs", path, "--source", int(u[0]), "--backend", "cpu", "--json"]],
        ("numba", "scipy", "dask", "zarr"))
    assert imported == "[]"
    import json
    summary = json.loads(out.strip().splitlines()[-2])
    G = nx.Graph()
    G.add_edges_from(zip(u.tolist(), v.tolist()))
    lengths = nx.single_source_shortest_path_length(G, int(u[0]))
    assert summary["reached"] == len(lengths)
    assert summary["max_distance"] == max(lengths.values())


def test_graph_ingest_runs_in_process(tmp_path):
    """``terrain graph-ingest FILE -o G.zarr`` without ``--scheduler`` parses and writes in
    its own process, as bfs and sssp do: no Dask and no cluster (a LocalCluster and its
    dashboard had started for a 4-edge file), and the cache holds the file's graph."""
    from terrain.graph import load_graph
    rng = np.random.default_rng(7)
    u, v = rng.integers(0, 300, 2000), rng.integers(0, 300, 2000)
    path, cache = tmp_path / "g.txt", tmp_path / "g.zarr"
    write_int_rows(path, [u, v], "# g\n")
    _, imported = imported_after([["graph-ingest", path, "-o", cache]],
                                 ("numba", "scipy", "dask", "distributed"))
    assert imported == "[]"
    a, b = load_graph(path), load_graph(cache)
    assert (a.n, a.m) == (b.n, b.m)
    assert a.indptr.tolist() == b.indptr.tolist() and a.indices.tolist() == b.indices.tolist()


def test_weighted_sssp_process_imports_neither_numba_nor_scipy(tmp_path):
    """``terrain sssp FILE --out d.csv`` of float weights (the heap's Dijkstra and the
    predecessors, CPU) runs on the C kernels alone, and its distances and predecessors are
    networkx's: each reached vertex's predecessor is a neighbour on a shortest path."""
    import csv
    import networkx as nx
    rng = np.random.default_rng(6)
    u, v = rng.integers(0, 300, 2000), rng.integers(0, 300, 2000)
    w = np.round(rng.random(2000) * 10, 3)
    path, out = tmp_path / "g.txt", tmp_path / "d.csv"
    path.write_text("".join(f"{a} {b} {c}\n" for a, b, c in zip(u, v, w)))
    _, imported = imported_after(
        [["sssp", path, "--source", int(u[0]), "--backend", "cpu", "--out", out]],
        ("numba", "scipy", "dask", "zarr"))
    assert imported == "[]"
    G = nx.Graph()
    for a, b, c in zip(u.tolist(), v.tolist(), w.tolist()):
        if a != b and (not G.has_edge(a, b) or G[a][b]["weight"] > c):
            G.add_edge(a, b, weight=c)
    want = nx.single_source_dijkstra_path_length(G, int(u[0]))
    with open(out, newline="") as f:
        rows = {int(r["id"]): r for r in csv.DictReader(f)}
    reached = {i: float(r["distance"]) for i, r in rows.items()
               if float(r["distance"]) not in (-1.0, float("inf"))}
    assert reached.keys() == want.keys()
    assert all(reached[i] == want[i] for i in want)
    for i, r in rows.items():
        p = int(r["predecessor"])
        if i in want and i != int(u[0]):
            assert reached[p] + G[p][i]["weight"] == reached[i]
