"""Graph loaders (SNAP, Matrix Market, DIMACS, METIS; gzip, CRLF), CSR building, the cache,
and the command line's answers to bad input."""

import gzip
import json

import networkx as nx
import numpy as np
import dask
import pytest
import scipy.sparse as sp

from pipelines.graph import build_load_graph
from terrain.errors import InputError
from terrain.graph import (as_graph, build_csr, load_graph, plan_graph_file, read_graph_cache,
                           read_graph_file, write_graph_cache)

from cli import run_cli as _cli

def _write(path, text, gz=False, crlf=False):
    if crlf:
        text = text.replace("\n", "\r\n")
    data = text.encode()
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return path


def _edge_set(graph):
    """Undirected edges as a set of (file id, file id) with the smaller id first."""
    ids = graph.id_array()
    rows = np.repeat(np.arange(graph.n), np.diff(graph.indptr))
    return {(int(min(ids[a], ids[b])), int(max(ids[a], ids[b])))
            for a, b in zip(rows, graph.indices)}


def _reference_edges(pairs):
    return {(min(a, b), max(a, b)) for a, b in pairs if a != b}


def _random_pairs(rng, n_ids, m, id_pool):
    ids = rng.choice(id_pool, size=n_ids, replace=False)
    return [(int(ids[a]), int(ids[b])) for a, b in rng.integers(0, n_ids, size=(m, 2))]


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("crlf", [False, True])
def test_snap_sparse_ids_comments_tabs(tmp_path, gz, crlf):
    rng = np.random.default_rng(1)
    pairs = _random_pairs(rng, 40, 120, np.arange(5, 10**9, 7919))
    lines = ["# SNAP-style header", "# FromNodeId\tToNodeId"]
    for k, (a, b) in enumerate(pairs):
        sep = "\t" if k % 2 else "  "
        lines.append(f"{a}{sep}{b}" + (" " if k % 5 == 0 else ""))  # trailing blanks
        if k == 10:
            lines.append("")
    path = _write(tmp_path / "g.txt", "\n".join(lines) + "\n", gz, crlf)
    g = load_graph(path)
    assert g.meta["format"] == "snap"
    assert _edge_set(g) == _reference_edges(pairs)
    used = sorted({x for p in pairs for x in p})
    assert g.id_array().tolist() == used


@pytest.mark.parametrize("crlf", [False, True])
def test_tokens_of_every_length_and_leading_zeros(tmp_path, crlf):
    """Ids and integer weights of 1 to 18 digits (leading zeros, negative weights, tabs and
    runs of blanks) read as Python reads them, at any position in an 8-byte word and at
    the end of the file (the scanner's word-at-a-time path and its byte loop agree)."""
    rng = np.random.default_rng(11)
    lines, want = [], []
    for k in range(600):
        a_len, b_len, w_len = (int(x) for x in rng.integers(1, 19, 3))
        a = "".join(str(d) for d in rng.integers(0, 10, a_len))
        b = "".join(str(d) for d in rng.integers(0, 10, b_len))
        w = "".join(str(d) for d in rng.integers(0, 10, w_len))
        if k % 7 == 3:
            w = "-" + w
        sep = ["  ", "\t", " \t "][k % 3]
        lines.append(f"{a}{sep}{b} {w}")
        want.append((int(a), int(b), int(w)))
    path = _write(tmp_path / "g.txt", "\n".join(lines) + "\n", crlf=crlf)
    for chunk in (1 << 20, 997):       # one chunk, and many cut mid-line
        e = read_graph_file(path, "snap", chunk_bytes=chunk)
        ids = e.ids
        got = list(zip(ids[e.u].tolist(), ids[e.v].tolist(), e.weights.tolist()))
        assert got == want
    tail = _write(tmp_path / "t.txt", "5 1234567 7")   # no newline: the last token ends the file
    e = read_graph_file(tail, "snap")
    assert e.ids[e.u].tolist() == [5] and e.ids[e.v].tolist() == [1234567]
    assert e.weights.tolist() == [7]


def test_snap_parallel_chunks_match_one_chunk(tmp_path):
    rng = np.random.default_rng(2)
    pairs = rng.integers(0, 500, size=(3000, 2))
    text = "# c\n" + "".join(f"{a} {b}\n" for a, b in pairs)
    path = _write(tmp_path / "big.txt", text)
    one = read_graph_file(path)
    many = read_graph_file(path, chunk_bytes=97, workers=3)
    assert np.array_equal(one.u, many.u) and np.array_equal(one.v, many.v)
    # an error in a late chunk still reports its own line number
    lines = text.splitlines()
    lines[2500] = "12 twelve"
    _write(path, "\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"big\.txt:2501: cannot parse '12 twelve'"):
        read_graph_file(path, chunk_bytes=97, workers=3)


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("field,symmetry", [("pattern", "general"), ("real", "symmetric"),
                                            ("integer", "general")])
def test_matrix_market(tmp_path, gz, field, symmetry):
    rng = np.random.default_rng(3)
    n = 30
    pairs = [(int(a), int(b)) for a, b in rng.integers(1, n + 1, size=(80, 2))]
    body = []
    for a, b in pairs:
        val = {"pattern": "", "real": " 0.25", "integer": " 7"}[field]
        body.append(f"{a} {b}{val}")
    text = (f"%%MatrixMarket matrix coordinate {field} {symmetry}\n% comment\n"
            f"{n} {n} {len(body)}\n" + "\n".join(body) + "\n")
    g = load_graph(_write(tmp_path / "g.mtx", text, gz, crlf=gz))
    assert g.n == n and g.id_base == 1
    assert _edge_set(g) == _reference_edges(pairs)


@pytest.mark.parametrize("gz", [False, True])
def test_dimacs(tmp_path, gz):
    rng = np.random.default_rng(4)
    n = 25
    pairs = [(int(a), int(b)) for a, b in rng.integers(1, n + 1, size=(60, 2))]
    text = (f"c road graph\np sp {n} {len(pairs)}\nc arcs\n"
            + "".join(f"a {a} {b} {rng.integers(1, 100)}\n" for a, b in pairs))
    g = load_graph(_write(tmp_path / "g.gr", text, gz, crlf=True))
    assert g.n == n and g.meta["format"] == "dimacs"
    assert _edge_set(g) == _reference_edges(pairs)
    # arcs missing (a file cut short at a line end): refused as a Matrix Market file is
    short = text.rsplit("a ", 1)[0]
    with pytest.raises(InputError, match=rf"g\.gr(\.gz)?:2: the header declares "
                                         rf"{len(pairs)} arcs, the file has {len(pairs) - 1}$"):
        load_graph(_write(tmp_path / "g.gr", short, gz))


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("fmt", ["", "0", "1", "11", "100"])
def test_metis(tmp_path, gz, fmt):
    G = nx.gnm_random_graph(20, 45, seed=5)
    G.add_node(20)  # an isolated vertex: a blank adjacency line
    lines = ["% METIS graph", f"{G.number_of_nodes()} {G.number_of_edges()} {fmt}".strip()]
    for v in range(G.number_of_nodes()):
        toks = []
        if fmt == "100":
            toks.append("3")          # vertex size
        if fmt == "11":
            toks.append("9")          # vertex weight
        for w in sorted(G[v]):
            toks.append(str(w + 1))
            if fmt in ("1", "11"):
                toks.append("2")      # edge weight
        lines.append(" ".join(toks))
        if v == 3:
            lines.append("% a comment between vertex lines")
    g = load_graph(_write(tmp_path / "g.graph", "\n".join(lines) + "\n", gz))
    assert g.n == 21
    assert _edge_set(g) == {(a + 1, b + 1) for a, b in map(sorted, G.edges())}
    assert g.degrees()[20] == 0
    # the header's edges counted once, the lists twice: a list cut short or a count of
    # arcs in the header is refused, naming the header's line
    short = lines[:2] + [" ".join(lines[2].split()[:-2 if fmt in ("1", "11") else -1])] \
        + lines[3:]
    with pytest.raises(InputError, match=rf"g\.graph(\.gz)?:2: the header declares 45 edges "
                                         rf"\(90 adjacency entries: each edge is in the lists of "
                                         rf"both its ends\), the lists hold 89$"):
        load_graph(_write(tmp_path / "g.graph", "\n".join(short) + "\n", gz))


def test_build_csr_matches_scipy():
    rng = np.random.default_rng(6)
    n = 200
    u, v = rng.integers(0, n, 2000), rng.integers(0, n, 2000)
    g = build_csr(n, u, v)
    A = sp.coo_matrix((np.ones(u.size), (u, v)), shape=(n, n)).tocsr()
    A = ((A + A.T) > 0).astype(np.int8)
    A.setdiag(0)
    A.eliminate_zeros()
    A.sort_indices()
    assert np.array_equal(g.indptr, A.indptr) and np.array_equal(g.indices, A.indices)
    assert g.indices.dtype == np.int32 and g.indptr.dtype == np.int64


def test_as_graph_inputs_agree():
    G = nx.gnm_random_graph(50, 120, seed=7)
    A = nx.to_scipy_sparse_array(G, format="csr")
    a, b, c = as_graph(G), as_graph(A), as_graph((A.indptr, A.indices))
    for g in (b, c):
        assert np.array_equal(a.indptr, g.indptr) and np.array_equal(a.indices, g.indices)
    with pytest.raises(InputError, match=r"^graph: a float is not a graph: give a terrain Graph"):
        as_graph(3.5)
    with pytest.raises(InputError, match=r"^graph: a dense 2-D array is not a graph: .*"
                                         r"scipy\.sparse\.csr_array"):
        as_graph(np.ones((3, 3)))
    with pytest.raises(InputError, match=r"^g\.txt: a path, not a graph: .*load_graph"):
        as_graph("g.txt")  # a file, as the command line takes one: the reader named
    with pytest.raises(ValueError, match="build_csr"):
        build_csr(3, [0, 5], [1, 1])


def _edges_reference(G, weight, directed):
    """as_graph of a networkx graph from its edge list (every edge once, with data)."""
    nodes = list(G)
    index = {x: i for i, x in enumerate(nodes)}
    edges = list(G.edges(data=True))
    u = np.array([index[a] for a, _, _ in edges], np.int64)
    v = np.array([index[b] for _, b, _ in edges], np.int64)
    w = None
    if weight is not None and any(weight in d for _, _, d in edges):
        w = np.array([d.get(weight, 1) for _, _, d in edges])
    return build_csr(len(nodes), u, v, weights=w, directed=directed)


@pytest.mark.parametrize("kind", ["graph", "labels", "digraph", "multigraph", "multidigraph"])
@pytest.mark.parametrize("weight", ["weight", None])
def test_networkx_graphs_read_from_adjacency_match_their_edge_lists(kind, weight):
    """Self-loops dropped, parallel edges merged at their lightest, edges without the weight
    weigh 1, labels kept, arcs directed as asked: as the edge list says."""
    rng = np.random.default_rng(4)
    cls = {"graph": nx.Graph, "labels": nx.Graph, "digraph": nx.DiGraph,
           "multigraph": nx.MultiGraph, "multidigraph": nx.MultiDiGraph}[kind]
    G = cls()
    G.add_nodes_from(rng.permutation(60).tolist())  # node order is not number order
    for _ in range(200):
        a, b = rng.integers(0, 60, 2).tolist()
        G.add_edge(a, b, **({"weight": int(rng.integers(1, 9))} if rng.random() < 0.8 else {}))
    if kind == "labels":
        G = nx.relabel_nodes(G, {x: f"v{x}" for x in G})
    for directed in ([None, False] if G.is_directed() else [None]):
        got = as_graph(G, weight=weight, directed=directed)
        want = _edges_reference(G, weight, G.is_directed() if directed is None else directed)
        assert got.directed == want.directed
        assert np.array_equal(got.indptr, want.indptr)
        assert np.array_equal(got.indices, want.indices)
        assert (got.weights is None) == (want.weights is None)
        if got.weights is not None:
            assert np.array_equal(got.weights, want.weights)
        assert got.id_array().tolist() == list(G)


def test_cache_roundtrip_and_lcc(tmp_path):
    path = _write(tmp_path / "g.txt", "5 6\n6 7\n7 5\n100 200\n")
    g = load_graph(path)
    write_graph_cache(g, tmp_path / "g.zarr")
    back = read_graph_cache(tmp_path / "g.zarr")
    assert np.array_equal(back.indptr, g.indptr) and np.array_equal(back.indices, g.indices)
    assert back.id_array().tolist() == [5, 6, 7, 100, 200]
    lcc = load_graph(tmp_path / "g.zarr", lcc=True)
    assert lcc.id_array().tolist() == [5, 6, 7] and lcc.meta["lcc"]["components"] == 2


def _error_lines(err):
    return [x for x in err.splitlines() if "Dask dashboard" not in x]


BAD_INPUTS = [
    ("bad.txt", "1 2\n2 three\n", "bad.txt:2: cannot parse '2 three'"),
    ("neg.txt", "# c\n1 2\n-4 2\n", "neg.txt:3: negative vertex id"),
    ("range.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n2 9\n",
     "range.mtx:4: vertex id out of the declared range 1..3"),
    ("nohead.mtx", "3 3 1\n1 2\n", "nohead.mtx:1: missing Matrix Market header"),
    ("nohead.gr", "c only comments\na 1 2 3\n", "nohead.gr:2: missing DIMACS header"),
    ("range.graph", "3 2\n2\n1 4\n\n", "range.graph:3: vertex id out of the declared range 1..3"),
    ("short.graph", "3 1\n2\n1\n", "the file ends after 2 of the 3 vertex lines"),
    ("skew.mtx", "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 0.5\n3 2 1\n",
     "skew.mtx:1: a skew-symmetric matrix's mirrored entries are the negatives"),
    ("empty.txt", "# nothing\n\n", "empty.txt: empty graph"),
    # empty CSV fields: read as blanks they shifted the columns ("1,,2" was the edge 1-2)
    ("trailing.csv", "# ids\n1,2\n2,3,\n", "trailing.csv:3: cannot parse '2,3,': an empty field"),
    ("double.csv", "1,2\n1,,2\n2,3\n", "double.csv:2: cannot parse '1,,2': an empty field"),
    ("first.csv", "1,2,\n2,3,\n", "first.csv:1: cannot parse '1,2,': an empty field"),
    ("leading.csv", "src,dst\n,1,2\n", "leading.csv:2: cannot parse ',1,2': an empty field"),
]


def test_a_comment_first_line_is_neither_a_field_nor_a_header(tmp_path):
    """A CSV edge list opening with a comment: its columns come from the first edge line,
    its row of column names is skipped, and every edge is read (checked against the edges
    networkx reads from the same lines)."""
    import networkx as nx
    edges = "1,2\n2,3\n3,7\n"
    for head in ("# comment, with a comma\n", "# comment\nsrc,dst\n", "% note\n"):
        g = load_graph(_write(tmp_path / "c.csv", head + edges))
        G = nx.parse_edgelist(edges.splitlines(), delimiter=",", nodetype=int)
        assert g.id_array().tolist() == sorted(G) and g.m == G.number_of_edges()
        assert g.weights is None


@pytest.mark.parametrize("name,text,message", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_one_line_exit_2(tmp_path, name, text, message):
    path = _write(tmp_path / name, text)
    code, out, err = _cli("diameter", path)
    assert code == 2, err
    assert err.startswith(f"terrain: {path}") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_source_and_cache_cli(tmp_path):
    path = _write(tmp_path / "g.txt", "10 20\n20 30\n")
    code, _, err = _cli("bfs", path, "--source", "11")
    assert code == 2 and err.strip() == f"terrain: {path}: source vertex 11 is not in the graph"
    code, out, err = _cli("graph-ingest", path, "-o", tmp_path / "g.zarr", scheduler=None)
    assert code == 0, err
    assert out.startswith(f"{tmp_path / 'g.zarr'}: 3 vertices, 2 edges (format snap")
    code, out, err = _cli("bfs", tmp_path / "g.zarr", "--source", "30", "--json",
                          "--out", tmp_path / "d.npz", "--backend", "cpu")
    assert code == 0, err
    assert json.loads(out)["max_distance"] == 2
    with np.load(tmp_path / "d.npz") as z:
        assert z["id"].tolist() == [10, 20, 30] and z["distance"].tolist() == [2, 1, 0]
        assert z["predecessor"].tolist() == [20, 30, -1]
    # ids are not 0..n-1: a bare .npy would lose them
    code, _, err = _cli("bfs", tmp_path / "g.zarr", "--source", "30", "--out",
                        tmp_path / "d.npy")
    assert code == 2 and "not 0..n-1" in err and not (tmp_path / "d.npy").exists()
    # a cache is named by itself in messages (the file it was parsed from before); a
    # vertex --lcc dropped is said to be so
    code, _, err = _cli("graph-ingest", _write(tmp_path / "two.txt", "1 2\n2 3\n7 8\n"),
                        "-o", tmp_path / "two.zarr", "--lcc", scheduler=None)
    assert code == 0, err
    code, _, err = _cli("bfs", tmp_path / "two.zarr", "--source", "7")
    assert code == 2 and err.strip() == (f"terrain: {tmp_path / 'two.zarr'}: source vertex 7 is "
                                         "not in the graph (only its largest connected "
                                         "component was kept)"), err


def test_a_cache_keeps_the_arcs_directions_only_when_asked(tmp_path):
    """sssp --directed of a cache stored undirected ran undirected (its summary said so):
    refused; graph-ingest --directed keeps the arcs, and sssp of that cache is the raw
    file's, against NetworkX's directed distances."""
    path = _write(tmp_path / "g.txt", "1 2 1\n2 3 1\n3 1 5\n")
    want = nx.single_source_dijkstra_path_length(
        nx.DiGraph([(1, 2, {"weight": 1}), (2, 3, {"weight": 1}), (3, 1, {"weight": 5})]), 2)
    for flags, name in (([], "u.zarr"), (["--directed"], "d.zarr")):
        code, _, err = _cli("graph-ingest", path, "-o", tmp_path / name, *flags, scheduler=None)
        assert code == 0, err
    code, _, err = _cli("sssp", tmp_path / "u.zarr", "--source", "2", "--directed")
    assert code == 2 and err.strip() == (f"terrain: {tmp_path / 'u.zarr'}: a graph cache stored "
                                         "undirected, without its arcs' directions (cache the "
                                         "file directed to keep them)"), err
    with pytest.raises(InputError, match="stored undirected"):
        load_graph(tmp_path / "u.zarr", directed=True)
    for source in (path, tmp_path / "d.zarr"):
        code, out, err = _cli("sssp", source, "--source", "2", "--directed", "--out",
                              tmp_path / f"{source.name}.npz", "--backend", "cpu")
        assert code == 0, err
        with np.load(tmp_path / f"{source.name}.npz") as z:
            got = dict(zip(z["id"].tolist(), z["distance"].tolist()))
        assert got == want, (source, got)


@pytest.mark.parametrize("scheduler", [None, "threads"], ids=["LocalCluster", "threads"])
def test_error_inside_a_task_is_one_line_exit_2_on_every_scheduler(tmp_path, scheduler):
    """The parse error is raised in a Dask task; it reaches the CLI unchanged (the
    synchronous scheduler is BAD_INPUTS' case)."""
    path = _write(tmp_path / "bad.txt", "1 2\n2 3\n3 four\n")
    code, out, err = _cli("bfs", path, "--source", "1", scheduler=scheduler)
    assert code == 2 and out == "", err
    assert _error_lines(err) == [f"terrain: {path}:3: cannot parse '3 four': expected "
                                 "integer vertex ids"], err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- Dask chunks

def _snap_text(rng, m=90):
    lines = ["# a SNAP header", "% another comment"]
    for k, (a, b) in enumerate(rng.integers(0, 10**6, size=(m, 2))):
        sep = "\t" if k % 3 else "   "
        lines.append(f"{a}{sep}{b}" + (" " if k % 4 == 0 else ""))
        if k % 17 == 5:
            lines.append("# mid-file comment" if k % 2 else "")
    return "\n".join(lines) + "\n"


def _mtx_text(rng, n=40, m=80):
    body = [f"{a} {b} 1.5" for a, b in rng.integers(1, n + 1, size=(m, 2))]
    return (f"%%MatrixMarket matrix coordinate real general\n% c\n{n} {n} {m}\n"
            + "\n".join(body) + "\n")


def _dimacs_text(rng, n=40, m=80):
    return (f"c hi\np sp {n} {m}\n"
            + "".join(f"a {a} {b} 9\n" for a, b in rng.integers(1, n + 1, size=(m, 2))))


def _load_in_chunks(path, chunk_bytes, scheduler="synchronous"):
    (graph,) = dask.compute(build_load_graph(path, chunk_bytes=chunk_bytes), scheduler=scheduler)
    return graph


def _assert_same_graph(a, b):
    assert (a.n, a.id_base, a.meta["format"]) == (b.n, b.id_base, b.meta["format"])
    assert np.array_equal(a.indptr, b.indptr) and a.indptr.dtype == b.indptr.dtype
    assert np.array_equal(a.indices, b.indices) and a.indices.dtype == b.indices.dtype
    assert np.array_equal(a.id_array(), b.id_array())


@pytest.mark.parametrize("kind,gz", [("snap", False), ("snap", True), ("mtx", False),
                                     ("dimacs", True)])
def test_dask_chunks_give_the_sequential_csr(tmp_path, kind, gz):
    """Cuts at every byte (chunk_bytes=1: mid-token, mid-line, between CR and LF, inside
    comments) and at odd sizes give the CSR of one sequential pass, on CRLF files too."""
    rng = np.random.default_rng(11)
    text = {"snap": _snap_text, "mtx": _mtx_text, "dimacs": _dimacs_text}[kind](rng)
    name = {"snap": "g.txt", "mtx": "g.mtx", "dimacs": "g.gr"}[kind]
    path = _write(tmp_path / name, text, gz=gz, crlf=True)
    one = read_graph_file(path, workers=1)
    sequential = load_graph(path, workers=1)
    assert plan_graph_file(path).chunks == 1
    for chunk_bytes in (1, 7, 64):
        plan = plan_graph_file(path, chunk_bytes=chunk_bytes)
        assert plan.chunks > (len(text) // (chunk_bytes * 2) if not gz else 1)
        _assert_same_graph(_load_in_chunks(path, chunk_bytes), sequential)
        many = read_graph_file(path, chunk_bytes=chunk_bytes, workers=1)
        assert np.array_equal(one.u, many.u) and np.array_equal(one.v, many.v)
    _assert_same_graph(_load_in_chunks(path, 5, scheduler="threads"), sequential)


def test_dask_chunks_report_the_first_error_in_file_order(tmp_path):
    rng = np.random.default_rng(12)
    lines = _mtx_text(rng).splitlines()
    lines[10] = "3 99 1.5"           # id out of range on line 11 ...
    lines[60] = "4 x"                # ... but an unparseable line wins, wherever it is
    path = _write(tmp_path / "e.mtx", "\r\n".join(lines) + "\r\n")
    for chunk_bytes in (1, 9, 1 << 20):
        with pytest.raises(InputError, match=r"e\.mtx:61: cannot parse '4 x'"):
            _load_in_chunks(path, chunk_bytes)
    lines[60] = "4 5 1.5"
    _write(tmp_path / "e.mtx", "\n".join(lines) + "\n")
    for chunk_bytes in (1, 9, 1 << 20):
        with pytest.raises(InputError, match=r"e\.mtx:11: vertex id out of the declared "
                                             r"range 1\.\.40 in '3 99 1\.5'"):
            _load_in_chunks(path, chunk_bytes)
    # a METIS body is one chunk whatever the size
    path = _write(tmp_path / "m.graph", "% c\n3 2\n2\n1 3\n2\n")
    assert plan_graph_file(path, chunk_bytes=1).chunks == 1
    _assert_same_graph(_load_in_chunks(path, 1), load_graph(path))
