"""The tile store: layout, Morton order of tiles inside shard files, attributes, round trip."""

from pathlib import Path

import google_crc32c
import numpy as np
import pytest

from pipelines.ingest import ingest
from terrain.errors import InputError
from terrain.io import read_grid, synth_rows, write_synth
from terrain.tiles import create_store, is_store, morton_encode, open_store, read_block
from terrain.tiles.store import tiles_per_shard

ROOT = Path(__file__).resolve().parents[2]
EMPTY = 2**64 - 1


@pytest.fixture(scope="module")
def synth_store(tmp_path_factory):
    """A 128 x 128 grid without nodata in tiles of 16: one shard of 8 x 8 full tiles."""
    d = tmp_path_factory.mktemp("store")
    write_synth(d / "s.asc", 128, 128, seed=11)
    return ingest(d / "s.asc", d / "s.zarr", tile=16, scheduler="threads")


def shard_index(shard_file, k):
    """(offset, length) per inner chunk of a zarr v3 shard whose index sits at its end.

    The index is k*k (offset, length) uint64 pairs in C order of the chunk coordinates,
    followed by the crc32c of those bytes (zarr's default index codecs: bytes + crc32c).
    """
    raw = Path(shard_file).read_bytes()
    n = k * k * 16
    index, crc = raw[-(n + 4):-4], raw[-4:]
    assert int.from_bytes(crc, "little") == google_crc32c.value(index)
    return np.frombuffer(index, dtype="<u8").reshape(k, k, 2), len(raw) - n - 4


def test_tile_and_shard_layout(synth_store):
    s = synth_store
    assert s.tile == 16 and s.tiles_per_shard == 8 and s.tiles_shape == (8, 8) and s.levels == 4
    assert s.elevation.chunks == (16, 16) and s.elevation.shards == (128, 128)
    assert s.elevation.dtype == np.float32
    assert tiles_per_shard(512, (16384, 16384)) == 4 and tiles_per_shard(512, (300, 400)) == 1


def test_inner_chunks_are_morton_ordered_in_the_shard_file(synth_store):
    k = synth_store.tiles_per_shard
    index, data_end = shard_index(synth_store.path / "elevation" / "c" / "0" / "0", k)
    offsets, lengths = index[..., 0], index[..., 1]
    assert (offsets != EMPTY).all()
    r, c = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    # terrain's Morton code follows zarr's convention (first axis in the low bit)
    zorder = np.argsort(morton_encode(r.ravel(), c.ravel()))
    o, n = offsets.ravel()[zorder], lengths.ravel()[zorder]
    assert np.array_equal(o[1:], o[:-1] + n[:-1]) and o[0] == 0 and o[-1] + n[-1] == data_end
    # hence every aligned 2^l x 2^l block of tiles (a quadtree node) is one contiguous run
    for side in (2, 4, 8):
        for bi in range(0, k, side):
            for bj in range(0, k, side):
                bo = offsets[bi:bi + side, bj:bj + side]
                bn = lengths[bi:bi + side, bj:bj + side]
                assert (bo + bn).max() - bo.min() == bn.sum()


def test_edge_tiles_padded_with_nan_and_empty_tiles_not_stored(tmp_path):
    z = synth_rows(40, 70, 0, 40, seed=2)
    z[:, 32:48] = np.nan  # one column of all-nodata tiles
    path = tmp_path / "e.asc"
    path.write_text("ncols 70\nnrows 40\nxllcorner 0\nyllcorner 0\ncellsize 1\n"
                    "NODATA_value -9999\n"
                    + "".join(" ".join("-9999" if np.isnan(v) else f"{v:.2f}" for v in row) + "\n"
                              for row in z))
    store = ingest(path, tmp_path / "e.zarr", tile=16, scheduler="threads")
    assert store.tiles_shape == (3, 5)
    assert np.array_equal(store.read_window(32, 48, 64, 80), z[32:, 64:])  # the edge tile
    index, _ = shard_index(store.path / "elevation" / "c" / "0" / "0", store.tiles_per_shard)
    assert (index[:3, 2, 0] == EMPTY).all()        # all-NaN tiles take no space
    assert (index[3:, :, 0] == EMPTY).all() and (index[:, 5:, 0] == EMPTY).all()
    assert (index[:3, [0, 1, 3, 4], 0] != EMPTY).all()


def test_attributes(tmp_path):
    store = ingest(ROOT / "data" / "sample.asc", tmp_path / "a.zarr", tile=64,
                   scheduler="threads")
    a = store.attrs
    z, grid = read_grid(ROOT / "data" / "sample.asc")
    assert a["geotransform"] == [500000.0, 10.0, 0.0, 4003000.0, 0.0, -10.0]
    assert a["cellsize"] == [10.0, 10.0] and a["nodata"] == -9999.0
    assert a["source"] == "sample.asc" and a["source_format"] == "esri-ascii"
    assert a["header"] == {"ncols": "400", "nrows": "300", "xllcorner": "500000.0",
                           "yllcorner": "4000000.0", "cellsize": "10.0", "nodata_value": "-9999"}
    assert a["crs"] is None and a["tile"] == 64 and a["levels"] == 4
    assert a["stats"] == {"nodata_cells": int(np.isnan(z).sum()), "min": float(np.nanmin(z)),
                          "max": float(np.nanmax(z))}


def test_round_trip_tiles_windows_and_morton_tile_order(synth_store):
    z = synth_rows(128, 128, 0, 128, seed=11)
    s = synth_store
    assert np.array_equal(s.read_window(0, 128, 0, 128), z)
    assert np.array_equal(s.read_window(5, 77, 30, 31), z[5:77, 30:31])
    order = s.tile_order()
    assert len(order) == 64 and tuple(order[3]) == (1, 1)
    back = np.empty_like(z)
    for ti, tj in order:
        r0, c0 = ti * s.tile, tj * s.tile
        back[r0:r0 + s.tile, c0:c0 + s.tile] = s.read_window(r0, r0 + s.tile, c0, c0 + s.tile)
    assert np.array_equal(back, z)


def test_xarray_opens_a_georeferenced_array(tmp_path):
    xr = pytest.importorskip("xarray")
    store = ingest(ROOT / "data" / "sample.asc", tmp_path / "x.zarr", tile=128,
                   scheduler="threads")
    ds = xr.open_zarr(store.path, consolidated=False)
    da = ds["elevation"]
    assert da.dims == ("y", "x") and da.shape == (300, 400) and da.dtype == np.float32
    assert float(ds.x[0]) == 500005.0 and float(ds.y[0]) == 4002995.0
    assert float(ds.y[-1]) == 4000005.0
    z, _ = read_grid(ROOT / "data" / "sample.asc")
    assert np.array_equal(da.values, z, equal_nan=True)


def test_open_store_rejects_what_is_not_a_store(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        open_store(tmp_path / "missing.zarr")
    (tmp_path / "dir").mkdir()
    with pytest.raises(InputError, match="not a terrain tile store"):
        open_store(tmp_path / "dir")
    assert not is_store(tmp_path / "dir")
    store = create_store(tmp_path / "new.zarr", (10, 10), 4)
    assert is_store(store.path) and np.isnan(store.read_window(8, 10, 8, 10)).all()


def test_read_block_refuses_a_window_outside_the_layer(tmp_path):
    """A window past the layer's edge raised NumPy's broadcast error (the docs' own example
    read 512² of a 300 x 400 store)."""
    d = tmp_path / "s.zarr"
    s = create_store(d, (5, 6), tile=2)
    s.write_window("elevation", 0, 0, np.arange(30, dtype=np.float32).reshape(5, 6))
    for window in ((0, 512, 0, 512), (0, 5, 0, 7), (-1, 2, 0, 2), (3, 3, 0, 2)):
        with pytest.raises(InputError, match=r"are not inside its elevation layer's 5 x 6 cells"):
            read_block(d, "elevation", window)
    assert read_block(d, "elevation", (0, 5, 0, 6)).shape == (5, 6)
