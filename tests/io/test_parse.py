"""The C parser of ASCII grids (terrain/native/kernels.c through ctypes): values against Python's
correctly rounded ``float`` on every token form, its strict inner layer, how its library is
found or compiled, and the graph-free ingest path it serves (same store, no Numba, no Dask)."""

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import terrain.io._parse as parse
from terrain.io import read_grid
from grids import assert_bits_equal, esri_text, grass_text
from grids import TRICKY
from oracles import parse_oracle
from cli import child_env

ROOT = Path(__file__).resolve().parents[2]

#: tokens of every form: signs, leading zeros, no integer or fraction digits, exponents of
#: every kind, more digits than the fast path takes, values at and past float32's range


@pytest.mark.parametrize("sep, eol, trail", [(" ", "\n", "\n"), ("\t", "\r\n", ""),
                                             ("  \t ", "\n", "\n\n  \n"), (" \v ", "\f\n", "")])
def test_tricky_tokens_equal_python_float(tmp_path, sep, eol, trail):
    rng = np.random.default_rng(len(sep))
    tokens = rng.permutation(np.array(TRICKY * 3, dtype=object)).reshape(3, len(TRICKY))
    path = tmp_path / "t.asc"
    path.write_text(esri_text(tokens, sep=sep, eol=eol).rstrip("\r\n\f") + trail)
    got, _ = read_grid(path)
    assert_bits_equal(got, parse_oracle(tokens, nodata=-9999))
    assert (got.view(np.uint32) == 0x80000000).any()  # -0.0 kept


def test_grass_stars_and_fast_and_slow_tokens_on_one_row(tmp_path):
    tokens = np.array([["*", "1.5", "12345678901234567890", "*"], ["-3", "*", "1e30", "0.25"]],
                      dtype=object)
    path = tmp_path / "g.asc"
    path.write_text(grass_text(tokens, null="-3"))
    got, _ = read_grid(path)
    assert_bits_equal(got, parse_oracle(tokens, nodata=-3, star=True))


def test_parse_rows_reports_bad_tokens_and_row_lengths():
    text = np.frombuffer(b"1 2 3\n4 x5 6\n7 8\n", dtype=np.uint8)
    out = np.empty((3, 3), dtype=np.float32)
    status, row, count, t0, t1, *_ = parse.parse_rows(text, [0, 6, 13, 17], 3, out,
                                                     np.float32(0), False, False)
    assert (status, row, count, bytes(text[t0:t1])) == (parse.PARSE_BAD_TOKEN, 1, 1, b"x5")
    status, row, count, *_ = parse.parse_rows(text[:6].copy(), [0, 6], 2, out[:1, :2],
                                              np.float32(0), False, False)
    assert (status, row, count) == (parse.PARSE_ROW_LENGTH, 0, 3)


def test_parse_rows_reads_nothing_outside_the_rows():
    # the last row ends without whitespace right at the end of the buffer (a file's last
    # line without a newline, read from a memory map): the token still ends there
    text = np.frombuffer(b"9 9\n1.25 -7", dtype=np.uint8)
    out = np.zeros((1, 2), dtype=np.float32)
    assert parse.parse_rows(text, [4, 11], 2, out, np.float32(0), False, False)[0] == parse.PARSE_OK
    assert out.tolist() == [[1.25, -7.0]]


def test_parse_rows_writes_strided_rows_and_checks_its_arguments():
    text = np.frombuffer(b"1 2\n3 4\n", dtype=np.uint8)
    big = np.full((2, 5), 8, dtype=np.float32)
    parse.parse_rows(text, [0, 4, 8], 2, big[:, 1:3], np.float32(0), False, False)
    assert big.tolist() == [[8, 1, 2, 8, 8], [8, 3, 4, 8, 8]]
    out = np.empty((2, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="uint8"):
        parse.parse_rows(np.zeros(8, np.int32), [0, 4, 8], 2, out, np.float32(0), False, False)
    with pytest.raises(ValueError, match="float32"):
        parse.parse_rows(text, [0, 4, 8], 2, out.astype(np.float64), np.float32(0), False, False)
    with pytest.raises(ValueError, match="inside buf"):
        parse.parse_rows(text, [0, 4, 9], 2, out, np.float32(0), False, False)
    with pytest.raises(ValueError, match="inside buf"):
        parse.parse_rows(text, [4, 0, 8], 2, out, np.float32(0), False, False)


@pytest.mark.parametrize("kind", ["tricky", "grass", "all nodata"])
def test_statistics_counted_by_the_parse_equal_a_pass_over_the_values(tmp_path, kind):
    from terrain.io import open_grid
    rng = np.random.default_rng(3)
    tokens = rng.permutation(np.array(TRICKY * 4, dtype=object)).reshape(4, len(TRICKY))
    path = tmp_path / "s.asc"
    if kind == "grass":
        tokens[rng.random(tokens.shape) < 0.3] = "*"
        path.write_text(grass_text(tokens, null="0.1"))
    else:
        if kind == "all nodata":
            tokens[:] = "-9999"
        path.write_text(esri_text(tokens))
    grid = open_grid(path)
    starts = grid.row_starts([grid.newline_offsets(a, b) for a, b in grid.index_ranges()])
    for r0, r1 in ((0, 4), (1, 3), (2, 2)):
        z, stats = grid.read_rows_stats(r0, r1, starts)
        want = parse.nan_min_max(z) if r1 > r0 else (0, np.inf, -np.inf)
        assert stats == want and [np.signbit(v) for v in stats[1:]] == [np.signbit(v) for v in want[1:]]


def test_nan_min_max_keeps_the_first_of_equal_values():
    z = np.array([[np.nan, -0.0, 3], [0.0, np.nan, -1]], dtype=np.float32)
    assert parse.nan_min_max(z) == (2, -1.0, 3.0)
    n, lo, hi = parse.nan_min_max(np.array([[-0.0, 0.0]], dtype=np.float32))
    assert (n, np.signbit(lo), np.signbit(hi)) == (0, True, True)
    assert parse.nan_min_max(np.full((2, 2), np.nan, np.float32)) == (4, np.inf, -np.inf)
    assert parse.nan_min_max(np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]) == (0, 0, 10)


# ----------------------------------------------------------------- the graph-free ingest path

def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_graph_free_ingest_writes_the_graphs_store_byte_for_byte(tmp_path, monkeypatch):
    from pipelines import ingest as ingest_module
    from terrain.io import write_synth
    write_synth(tmp_path / "s.asc", 2100, 300, seed=4, nodata=0.05)  # 2 shards (2048 rows)
    for name, scheduler in (("graph.zarr", "threads"), ("direct.zarr", None)):
        (tmp_path / name.split(".")[0]).mkdir()
        ingest_module.ingest(tmp_path / "s.asc", tmp_path / name.split(".")[0] / "s.zarr",
                             tile=256, scheduler=scheduler)
    graph, direct = (_files(tmp_path / d / "s.zarr") for d in ("graph", "direct"))
    assert sum(k.startswith("elevation/c/") for k in graph) == 2 and graph == direct
    z, _ = read_grid(tmp_path / "s.asc")
    assert np.isnan(z).any()


def test_an_active_cluster_runs_small_grids_too(tmp_path, monkeypatch):
    import pipelines.cluster as cluster
    import pipelines.ingest as ingest_module
    ran = []
    # as in a batch on one cluster
    monkeypatch.setattr(cluster, "_active", cluster._Active(object(), threading.get_ident(),
                                                             False, None))
    monkeypatch.setattr(ingest_module, "ingest_in_threads", lambda *a, **k: ran.append("direct"))
    monkeypatch.setattr(ingest_module, "ingest_on_active_scheduler",
                        lambda *a, **k: ran.append("cluster"))
    ingest_module.ingest(ROOT / "data" / "sample.asc", tmp_path / "s.zarr")
    assert ran == ["cluster"]


def test_cli_ingest_of_a_small_grid_imports_neither_numba_nor_dask(tmp_path):
    code = ("import sys; from terrain.run import main; "
            f"main(['ingest', {str(ROOT / 'data' / 'sample.asc')!r}, '-o', 's.zarr']); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'numba', 'dask', 'distributed', 'scipy', 'rasterio'}))")
    env = child_env()
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout


@pytest.mark.parametrize("scheduler", [None, "threads"])
def test_ingest_shards_are_the_bytes_zarr_writes(tmp_path, scheduler):
    """Both ingest paths encode the shards by hand (terrain.tiles._shards): the same files
    as zarr's own writer given the same values, partial edge shards and a shard of nodata
    only (no file) included."""
    import zarr

    from pipelines import ingest as ingest_module
    from terrain.tiles import create_store
    rows, cols = 4200, 40  # 256² tiles in 2048² shards: 3 x 1, all partial
    z = np.round(np.random.default_rng(5).uniform(-50, 900, (rows, cols)), 2).astype(np.float32)
    z[2048:4096, :] = -9999  # the middle shard: nodata only (no file)
    z[256:512, :] = -9999  # a tile of nodata only (left out of its shard)
    z[4150, 7] = -9999
    tokens = np.array([[f"{v:.2f}" if v != -9999 else "-9999" for v in row] for row in z],
                      dtype=object)
    (tmp_path / "g.asc").write_text(esri_text(tokens))
    ingest_module.ingest(tmp_path / "g.asc", tmp_path / "ours.zarr", tile=256,
                         scheduler=scheduler)
    ref = create_store(tmp_path / "ref.zarr", (rows, cols), 256,
                       compressors=ingest_module.default_compressors())
    ref.elevation[:, :] = np.where(z == -9999, np.float32(np.nan), z)
    ours, theirs = (_files(tmp_path / d / "elevation" / "c") for d in ("ours.zarr", "ref.zarr"))
    assert sorted(ours) == sorted(theirs) == ["0/0", "2/0"]
    assert all(ours[k] == theirs[k] for k in ours)
    assert zarr.open_array(str(tmp_path / "ours.zarr"), path="elevation").shards == (2048, 2048)


def test_ingest_with_a_codec_the_shard_writer_does_not_take_goes_through_zarr(tmp_path):
    import zarr

    from pipelines import ingest as ingest_module
    store = ingest_module.ingest(ROOT / "data" / "sample.asc", tmp_path / "z.zarr", tile=64,
                                 compressors=(zarr.codecs.ZstdCodec(level=1),))
    z, _ = read_grid(ROOT / "data" / "sample.asc")
    assert_bits_equal(store.read_window(0, z.shape[0], 0, z.shape[1]), z)


def test_write_window_writes_whole_shards(tmp_path):
    from pipelines import ingest as ingest_module
    from terrain.tiles import create_store
    s = create_store(tmp_path / "s.zarr", (300, 200), 64,  # one shard (512²) holds the grid
                     compressors=ingest_module.default_compressors())
    ingest_module.write_window(tmp_path / "s.zarr", np.ones((300, 200), np.float32), 0, 0)
    assert (tmp_path / "s.zarr" / "elevation" / "c" / "0" / "0").is_file()
    assert float(np.nansum(s.elevation[:])) == 300 * 200


@pytest.mark.parametrize("piece", [1, 7, 100, 5000, 1 << 30])
def test_piece_bounds_cut_after_newlines(tmp_path, piece):
    """The streamed GPU parse's pieces (terrain.io._parse_gpu.piece_bounds, CPU code): whole
    lines, in order, covering the data section; a line longer than a piece is one piece."""
    from terrain.io import open_grid
    from terrain.io._parse_gpu import piece_bounds
    rows = ["1 2 3", "4 5 6", " ".join(["7"] * 3000)[:5] + "      " * 2000 + " ", "8 9 10"]
    path = tmp_path / "p.asc"
    path.write_text("ncols 3\nnrows 4\nxllcorner 0\nyllcorner 0\ncellsize 1\n"
                    + "\n".join(rows))  # the last line without a newline
    grid = open_grid(path)
    b = piece_bounds(grid, piece)
    data = path.read_bytes()
    assert b[0] == grid.data_offset and b[-1] == grid.size == len(data)
    assert all(x < y for x, y in zip(b, b[1:]))
    assert all(data[x - 1:x] == b"\n" for x in b[1:-1])
    if piece >= len(data):
        assert b == [grid.data_offset, grid.size]
    elif piece == 1:
        assert len(b) == 5  # one piece a line


def test_band_read_in_blocks_equals_one_parse(tmp_path, monkeypatch):
    """read_rows reads and parses in blocks of BLOCK_BYTES (the ingest's band tasks): the
    same values and statistics as one parse of the whole range, and a bad token in a late
    block names its line."""
    import terrain.io.ascii_grid as ag
    from terrain.io import open_grid, write_synth
    write_synth(tmp_path / "s.asc", 97, 130, seed=3, nodata=0.1)
    grid = open_grid(tmp_path / "s.asc")
    starts = grid.row_starts([grid.newline_offsets(*ab) for ab in grid.index_ranges()])
    whole, stats = grid.read_rows_stats(5, 90, starts)
    monkeypatch.setattr(ag, "BLOCK_BYTES", 3000)  # ~4 rows a block
    monkeypatch.setattr(ag, "_buffers", __import__("threading").local())
    blocks, block_stats = grid.read_rows_stats(5, 90, starts)
    assert_bits_equal(blocks, whole)
    assert block_stats == stats and stats[0] > 0
    text = (tmp_path / "s.asc").read_text()
    lines = text.split("\n")
    bad_line = grid.data_line + 80  # 1-based line of data row 81
    parts = lines[bad_line - 1].split(" ")
    parts[3] = "x7"
    lines[bad_line - 1] = " ".join(parts)
    (tmp_path / "b.asc").write_text("\n".join(lines))
    bad = open_grid(tmp_path / "b.asc")
    starts = bad.row_starts([bad.newline_offsets(*ab) for ab in bad.index_ranges()])
    from terrain.errors import InputError
    with pytest.raises(InputError, match=rf"b.asc:{bad_line}: non-numeric token 'x7' "
                                         r"\(row 81, column 4\)"):
        bad.read_rows_stats(5, 90, starts)


@pytest.mark.parametrize("block", [64, 301, 1 << 20])
@pytest.mark.parametrize("case, message", [
    ("ok", None), ("no final newline", None), ("blank tail", None),
    ("few rows", "file ends after 3 of nrows=4 rows"), ("extra row", "more data rows than nrows=4"),
    ("short row", "row 2 has 2 values, expected ncols=3")])
def test_read_all_reads_once_with_the_two_pass_checks(tmp_path, monkeypatch, block, case, message):
    # the one-pass reader (lines found block by block) against the indexed band reader
    import terrain.io.ascii_grid as ag
    from terrain.errors import InputError
    from terrain.io import open_grid
    rows = ["1.5 2 3", "4 " + "0" * 200 + "5 6", "7 8 9", "10 11 12"]  # a line longer than 64
    text = {"ok": rows, "no final newline": rows, "blank tail": rows + ["  ", ""],
            "few rows": rows[:3], "extra row": rows + ["13 14 15"],
            "short row": [rows[0], "4 5", *rows[2:]]}[case]
    body = "\n".join(text) + ("" if case == "no final newline" else "\n")
    path = tmp_path / "g.asc"
    path.write_text("ncols 3\nnrows 4\nxllcorner 0\nyllcorner 0\ncellsize 1\n" + body)
    monkeypatch.setattr(ag, "BLOCK_BYTES", block)
    grid = open_grid(path)
    if message is None:
        z, stats = grid.read_all()
        want = grid.read_rows(0, 4, grid.row_starts([grid.newline_offsets(*ab)
                                                     for ab in grid.index_ranges()]))
        assert_bits_equal(z, want)
        assert sum(s[0] for s in stats) == 0 and z[1, 0] == 4.0
    else:
        with pytest.raises(InputError, match=message):
            grid.read_all()


def test_ascii_layouts_gdal_reads_are_named_and_binary_ones_go_to_gdal(tmp_path):
    """Values not one row a line (wrapped, on one line, blank lines between): the error says
    all the values are there and why terrain stops; CR-only line ends are named; a byte
    order mark is skipped; a GeoTIFF named .asc is read by GDAL, as any raster; binary
    junk is refused in a short line, none of its bytes echoed."""
    rasterio = pytest.importorskip("rasterio")
    from terrain.errors import InputError
    from terrain.io import write_synth
    base = tmp_path / "g.asc"
    write_synth(base, 13, 17, seed=2)
    text = base.read_text()
    head, body = text.split("\n", 6)[:6], text.split("\n", 6)[6]
    values = body.split()
    want, _ = read_grid(base)
    layouts = {"wrap": "\n".join(" ".join(values[i:i + 10]) for i in range(0, len(values), 10)),
               "oneline": " ".join(values),
               "blank": "\n\n".join(line for line in body.splitlines() if line)}
    for name, data in layouts.items():
        path = tmp_path / f"{name}.asc"
        path.write_text("\n".join(head) + "\n" + data + "\n")
        with pytest.raises(InputError, match=r"\(its 221 values are all there, but not one row "
                                             r"of ncols=17 values a line"):
            read_grid(path)
    cr = tmp_path / "cr.asc"
    cr.write_bytes(text.replace("\n", "\r").encode())
    with pytest.raises(InputError, match=r"^\S*cr\.asc: its lines end with a carriage return "
                                         r"alone") as e:
        read_grid(cr)
    assert len(str(e.value)) < 200
    bom = tmp_path / "bom.asc"
    bom.write_bytes(b"\xef\xbb\xbf" + text.encode())
    np.testing.assert_array_equal(read_grid(bom)[0], want)
    tif = tmp_path / "t.asc"
    with rasterio.open(tmp_path / "t.tif", "w", driver="GTiff", height=13, width=17, count=1,
                       dtype="float32", nodata=np.nan) as dst:
        dst.write(want, 1)
    tif.write_bytes((tmp_path / "t.tif").read_bytes())
    np.testing.assert_array_equal(read_grid(tif)[0], want)
    junk = tmp_path / "junk.asc"
    junk.write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(InputError) as e:
        read_grid(junk)
    assert "\\x" not in str(e.value) and len(str(e.value)) < 120
