"""Graph inputs that used to exhaust memory, hang, echo binary or be read wrongly
(docs/safety.md, "Graph inputs"): each refused with one line before anything of
its declared size is allocated, or read the way its format says."""

import gzip
import os
import subprocess
import sys
import time

import pytest

from cli import ROOT
from terrain.errors import InputError
from terrain.graph import load_graph, read_graph_file


def _cli(*argv, timeout=60):
    proc = subprocess.run([sys.executable, "-m", "terrain.run", *map(str, argv)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("n", [900_000_000, 4_000_000_000])
def test_declared_vertices_beyond_memory_are_refused_before_allocating(tmp_path, n):
    path = tmp_path / "big.mtx"
    path.write_text(f"%%MatrixMarket matrix coordinate pattern general\n{n} {n} 1\n1 2\n")
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=rf"big\.mtx:2: declares {n} vertices: about .* GB "
                                         r"to hold, more than the .* of memory available"):
        load_graph(path, memory=8 << 30)
    assert time.perf_counter() - t0 < 5
    code, out, err = _cli("bfs", path, "--source", "1", "--backend", "cpu")
    assert code == 2 and "Traceback" not in err and f"declares {n} vertices" in err


def test_declared_entries_beyond_the_file_are_refused(tmp_path):
    path = tmp_path / "e.mtx"
    path.write_text("%%MatrixMarket matrix coordinate pattern general\n3 3 5000000000\n1 2\n")
    with pytest.raises(InputError, match=r"e\.mtx:2: the size line declares 5000000000 entries, "
                                         r"more than the 4 bytes after it can hold"):
        load_graph(path)
    path = tmp_path / "m.graph"
    path.write_text("3000000000 1\n2\n1\n")
    with pytest.raises(InputError, match=r"m\.graph:1: .*declares|m\.graph:1: the header "
                                         r"declares 3000000000 vertex lines"):
        load_graph(path, memory=1 << 40)


def test_a_gzip_bomb_is_read_with_a_bound(tmp_path):
    """A small gzip that expands far beyond the memory allowed stops being read there."""
    path = tmp_path / "bomb.txt.gz"
    block = b"1 2\n" * (1 << 18)  # 1 MiB of edges
    with gzip.open(path, "wb", compresslevel=9) as f:
        for _ in range(64):
            f.write(block)
    assert path.stat().st_size < 1 << 20
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=r"bomb\.txt\.gz: decompresses to more than .* "
                                         r"more than the .* of memory available"):
        read_graph_file(path, memory=32 << 20)
    assert time.perf_counter() - t0 < 10
    assert load_graph(path, memory=8 << 30).m == 1   # within the bound it reads


def test_a_text_file_of_more_lines_than_memory_is_refused_before_parsing(tmp_path):
    path = tmp_path / "many.txt"
    path.write_bytes(b"1 2\n" * 100_000)
    with pytest.raises(InputError, match=r"many\.txt: \d+ lines: about .* MB to hold"):
        read_graph_file(path, memory=1 << 20)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "g.txt"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"g\.txt: not a regular file \(a FIFO\)"):
        load_graph(fifo)
    code, out, err = _cli("bfs", fifo, "--source", "1", "--backend", "cpu", timeout=30)
    assert code == 2 and "not a regular file (a FIFO)" in err


def test_binary_input_is_refused_without_echoing_it(tmp_path):
    path = tmp_path / "junk.tif"
    path.write_bytes(b"II*\x00" + bytes(range(256)) * 8)
    code, out, err = _cli("bfs", path, "--source", "1", "--backend", "cpu")
    assert code == 2 and "not a text graph file (binary data" in err
    assert err.isascii() and len(err.strip().splitlines()) == 1
    assert all(c.isprintable() for c in err.strip())


def test_comma_separated_edge_lists_with_a_header_row(tmp_path):
    path = tmp_path / "g.csv"
    path.write_text("source,target,weight\n1,2,0.5\n2, 3, 1.5\n3,1,2\n")
    g = load_graph(path)
    assert g.m == 3 and g.weights.tolist() == [0.5, 2.0, 0.5, 1.5, 2.0, 1.5]
    path.write_text("10,20\n20,30\n")
    assert load_graph(path).id_array().tolist() == [10, 20, 30]


@pytest.mark.parametrize("tail", ["", "0 0.25\n1 0.5\n2 0.125\n3 1\n4 0\n", "0\n1\n"])
def test_a_header_of_counts_and_trailing_vertex_values(tmp_path, tail):
    """``N M`` (or ``M N``) first, then exactly M edge lines, then perhaps a section of
    vertex lines: the header is counts, the section is not read as edges."""
    import warnings
    edges = "0 1\n1 2\n2 3\n3 4\n0 4\n1 3\n"
    for header in ("5 6\n", "6 5\n"):
        path = tmp_path / "g.txt"
        path.write_text("# counts, edges, values\n" + header + edges + tail)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            g = load_graph(path)
        assert (g.n, g.m) == (5, 6), header
        assert sorted(g.id_array().tolist()) == [0, 1, 2, 3, 4]
        # the section not read is named (a typo in an edge list would end it unseen)
        said = [str(w.message) for w in caught]
        other = header.split()[1 if header.startswith("6") else 0]
        assert said == ([f"{path}:9: not read, nor any line after it: line 2, "
                         f"'{header.strip()}', is a header of counts, and the 6 edge lines "
                         "it counts end here"] if tail else
                        [f"{path}:2: '{header.strip()}' read as a header of counts (6 edge "
                         f"lines follow, their ids up to {other}), not as an edge; the format "
                         "'snap' reads it as an edge"])


def test_a_first_line_read_as_counts_is_said_and_snap_reads_it_as_an_edge(tmp_path):
    """``3 5`` then three edges with ids up to 5 fits a header of counts as well as an
    edge: read as counts (a file of another collection's layout), with a warning; named
    as the SNAP format, every line is an edge (NetworkX's read_edgelist as the oracle)."""
    nx = pytest.importorskip("networkx")
    path = tmp_path / "h3.txt"
    path.write_text("3 5\n1 2\n2 3\n4 5\n")
    with pytest.warns(UserWarning, match=r"h3\.txt:1: '3 5' read as a header of counts"):
        assert load_graph(path).m == 3
    g = load_graph(path, "snap")
    want = nx.read_edgelist(path, nodetype=int)
    assert g.m == want.number_of_edges() == 4
    assert sorted(g.id_array().tolist()) == sorted(want.nodes)


@pytest.mark.parametrize("text,line,what", [
    ("0 1\n1 x\n", 2, "cannot parse '1 x'"), ("0 1\n-1 2\n", 2, "negative vertex id"),
    ("5 1\n0 1\n1 x\n2 3\n", None, None)])
def test_a_bad_line_after_a_first_line_of_two_integers(tmp_path, text, line, what):
    """A header that would count no edge is an edge line, and the bad line after it is the
    error; one that counts the edges before a bad line warns that the rest is not read."""
    path = tmp_path / "g.txt"
    path.write_text(text)
    if line is not None:
        with pytest.raises(InputError, match=rf"^{path}:{line}: {what}"):
            load_graph(path)
        return
    with pytest.warns(UserWarning, match=rf"^{path}:3: not read, nor any line after it: "
                                         r"line 1, '5 1', is a header of counts, and the 1 "
                                         "edge line it counts end here"):
        assert load_graph(path).n == 2


def test_a_first_line_that_is_an_edge_stays_an_edge(tmp_path):
    path = tmp_path / "g.txt"
    path.write_text("7 8\n1 2\n2 3\n")   # 2 edge lines follow, not 7 or 8: an edge
    g = load_graph(path)
    assert g.m == 3 and 7 in g.id_array().tolist()



@pytest.mark.parametrize("text", ["1 99999999999999999999\n",
                                  "99999999999999999999 1\n2 3\n4 5\n"])
def test_an_id_past_64_bits_on_the_first_line_is_one_line(tmp_path, text):
    """Two integers first may be a header of counts, but not ids of more than 18 digits:
    those are refused as on any other line (an OverflowError's traceback before)."""
    path = tmp_path / "g.txt"
    path.write_text(text)
    with pytest.raises(InputError, match=rf"^{path}:1: vertex id too large in .* \(ids are "
                       r"below 10\^18: 18 digits at most\)$"):
        load_graph(path)

def test_graph_mst_of_a_small_file_runs_in_process(tmp_path):
    """``mst`` of a 78-edge graph starts no cluster: no Dask, a fraction of a second."""
    import networkx as nx
    path = tmp_path / "karate.txt"
    path.write_text("".join(f"{a} {b}\n" for a, b in nx.karate_club_graph().edges()))
    code, out, err = _cli("mst", path, "-o", tmp_path / "f.csv", "--backend", "cpu")
    assert code == 0, err
    assert "Dask dashboard" not in err and "33 edges" in out


def test_a_byte_order_mark_before_an_edge_list_is_skipped(tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf1 2 1\n2 3 2\n")
    g = load_graph(path)
    assert g.id_array().tolist() == [1, 2, 3] and g.weights.tolist() == [1, 1, 2, 2]
    code, out, err = _cli("mst", path, "-o", tmp_path / "f.csv", "--backend", "cpu")
    assert code == 0 and "total weight 3" in out, err


@pytest.mark.parametrize("text,message", [
    ("1 2 0x10\n2 3 1\n", "g.txt:1: cannot parse '1 2 0x10': expected a numeric weight"),
    ("a b 1\nb c 2\n", "g.txt:1: cannot parse 'a b 1': expected integer vertex ids"),
    ("ncol 3\nnrows 3\n", "g.txt:1: unknown ESRI header key 'ncol'"),  # a grid's header
])
def test_mst_takes_an_edge_list_with_a_bad_token_for_a_graph(tmp_path, text, message):
    """It was read as a grid: "no header (expected ESRI 'ncols ...')", where ``sssp`` of the
    same file names what is wrong with its edge."""
    path = tmp_path / "g.txt"
    path.write_text(text)
    code, _, err = _cli("mst", path, "-o", tmp_path / "f.csv", "--backend", "cpu")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_a_missing_gzip_input_is_missing_not_an_existing_output(tmp_path):
    (tmp_path / "b.mst.csv").write_text("u,v,weight\n")
    code, _, err = _cli("mst", tmp_path / "b.txt.gz", "--backend", "cpu")
    assert code == 2 and err.strip().endswith("b.txt.gz: no such file"), err
