"""The GPU parser of ASCII grids (terrain/io/_parse.cu) gives the CPU parser's (terrain/native/kernels.c)
float32 values bit for bit on every token form the CPU accepts, in pieces of any size, and hands
every bad text (and every value beyond float32) back to the CPU."""

import numpy as np
import pytest

from terrain.io import open_grid, read_grid
from grids import assert_bits_equal, esri_text, grass_text, random_values, with_nodata
from grids import BEYOND_FLOAT32, TRICKY
from oracles import parse_oracle

pytestmark = pytest.mark.gpu



def gpu_parse(path):
    """The GPU parse in one piece; in pieces of a few lines (and of one line) it must give
    the same bits, or hand the text back too."""
    import cupy as cp
    from terrain.io import parse_grid_on_device
    grid = open_grid(path)
    z = None
    for piece in (1 << 30, 1, 97, 4096):
        rows_done = []
        out = cp.full(grid.shape, 7.0, cp.float32)
        s = parse_grid_on_device(grid, out, "gpu", piece_bytes=piece,
                                 on_rows=lambda a, b: rows_done.append((a, b)))
        if piece == 1 << 30:
            z = None if s is None else s.get()
        elif z is None:
            assert s is None, piece
        else:
            assert_bits_equal(s.get(), z)
            assert rows_done[0][0] == 0 and rows_done[-1][1] == grid.shape[0]
            assert all(a[1] == b[0] for a, b in zip(rows_done, rows_done[1:]))
    return z


@pytest.mark.parametrize("sep, eol, trail", [(" ", "\n", "\n"), ("\t", "\r\n", ""),
                                             ("  \t ", "\n", "\n\n  \n")])
def test_tricky_tokens_bit_for_bit(tmp_path, sep, eol, trail):
    tokens = np.array(TRICKY * 3, dtype=object).reshape(3, len(TRICKY))
    path = tmp_path / "t.asc"
    path.write_text(esri_text(tokens, sep=sep, eol=eol).rstrip("\r\n") + trail)
    want, _ = read_grid(path)
    assert_bits_equal(gpu_parse(path), want)
    assert_bits_equal(want, parse_oracle(tokens, nodata=-9999))  # and both are GDAL's values
    assert np.isnan(want).any() and (want.view(np.uint32) == 0x80000000).any()  # -0.0 kept


@pytest.mark.parametrize("kind", ["int", "decimal", "scientific", "long"])
def test_random_tokens_bit_for_bit(tmp_path, kind):
    rng = np.random.default_rng(len(kind))
    path = tmp_path / "r.asc"
    path.write_text(esri_text(with_nodata(rng, random_values(rng, (211, 97), kind))))
    want, _ = read_grid(path)
    assert_bits_equal(gpu_parse(path), want)


def test_grass_star_and_synth(tmp_path):
    rng = np.random.default_rng(5)
    tokens = with_nodata(rng, random_values(rng, (40, 33), "decimal"), text="*")
    path = tmp_path / "g.asc"
    path.write_text(grass_text(tokens, null="-1"))
    want, _ = read_grid(path)
    assert_bits_equal(gpu_parse(path), want)
    from terrain.io import write_synth
    write_synth(tmp_path / "s.asc", 300, 257, seed=2, nodata=0.1)
    want, _ = read_grid(tmp_path / "s.asc")
    assert_bits_equal(gpu_parse(tmp_path / "s.asc"), want)


def test_nan_tokens_are_nodata_as_on_the_cpu(tmp_path):
    rng = np.random.default_rng(8)
    tokens = with_nodata(rng, random_values(rng, (40, 33), "decimal"), text="nan")
    tokens[3, 4], tokens[5, 6] = "-NaN", "NAN"
    path = tmp_path / "n.asc"
    path.write_text(esri_text(tokens))
    want, _ = read_grid(path)
    assert np.isnan(want[3, 4]) and np.isnan(want[5, 6])
    assert_bits_equal(gpu_parse(path), want)


@pytest.mark.parametrize("bad", ["bad token", "short row", "long row", "few rows", "extra row",
                                 "star in esri", "lone sign"])
def test_bad_text_goes_back_to_the_cpu(tmp_path, bad):
    tokens = np.array([["1", "2", "3"]] * 4, dtype=object)
    text = esri_text(tokens)
    text = {"bad token": text.replace("\n2 ", "\n2x ", 1).replace(" 2 ", " 2x ", 1),
            "short row": text[: text.rindex("3")],
            "long row": text.replace("1 2 3\n", "1 2 3 4\n", 1),
            "few rows": text.replace("1 2 3\n", "", 1),
            "extra row": text + "1 2 3\n",
            "star in esri": text.replace(" 2 ", " * ", 1),
            "lone sign": text.replace(" 2 ", " - ", 1)}[bad]
    path = tmp_path / "b.asc"
    path.write_text(text)
    assert gpu_parse(path) is None


@pytest.mark.parametrize("token", BEYOND_FLOAT32)
def test_values_beyond_float32_go_back_to_the_cpu(tmp_path, token):
    # the CPU parser then refuses them with their line (tests/io/test_parse.py)
    tokens = np.array([["1", "2", "3"], ["4", token, "6"]], dtype=object)
    path = tmp_path / "b.asc"
    path.write_text(esri_text(tokens))
    assert gpu_parse(path) is None
