"""Shards encoded by hand (terrain/tiles/_shards.py) are zarr's own bytes, and read back."""

import numpy as np
import pytest
import zarr

from terrain.grid.cost_outputs import layer_compressors
from terrain.tiles.store import read_layer, write_windows
from terrain.tiles._shards import (ShardWriter, fast_layout, read_shard, shard_grid,
                                   write_shard)
from grids import SHAPE, shard_files, shard_layer

CODECS = {"lz4-bitshuffle": (zarr.codecs.BloscCodec(cname="lz4", clevel=5,
                                                    shuffle="bitshuffle"),),
          "zstd-shuffle": (zarr.codecs.BloscCodec(cname="zstd", clevel=1, shuffle="shuffle"),),
          "none": None}


def _values(dtype, fill):
    v = np.random.default_rng(0).integers(0, 5, SHAPE).astype(dtype)
    v[:40, :40] = fill          # whole tiles of fill: left out of their shard
    v[128:, 64:] = fill         # two shards of fill only: no files at all
    v[100:101, :7] = fill       # a few fill cells inside a tile: kept
    return v


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("dtype, fill", [("float64", np.nan), ("float32", np.nan),
                                         ("int32", -1), ("uint8", 255)])
def test_hand_written_shards_are_zarrs_bytes(tmp_path, codec, dtype, fill):
    """c-blosc through ctypes per tile on reused buffers: the same bytes as zarr's."""
    from terrain.tiles import _shards
    assert _shards.BLOSC is not None  # numcodecs' extension exports c-blosc here
    v = _values(dtype, fill)
    by_zarr = shard_layer(tmp_path / "a.zarr", "x", dtype, fill, CODECS[codec])
    by_zarr[:, :] = v
    ours = shard_layer(tmp_path / "b.zarr", "x", dtype, fill, CODECS[codec])
    layout = fast_layout(ours)
    assert layout is not None and shard_grid(layout) == (3, 3)
    for si in range(3):
        for sj in range(3):
            write_shard(layout, si, sj, v)
    a, b = shard_files(tmp_path / "a.zarr" / "x"), shard_files(tmp_path / "b.zarr" / "x")
    assert sorted(a) == sorted(b) and len(a) == 7  # the empty shards: written by neither
    for name in a:
        assert a[name] == b[name], name
    np.testing.assert_array_equal(np.asarray(ours[:, :]), v)  # zarr reads ours
    back = np.empty(SHAPE, dtype)
    for si in range(3):
        for sj in range(3):
            read_shard(layout, si, sj, back)  # and we read zarr's
    np.testing.assert_array_equal(back, np.asarray(by_zarr[:, :]))


@pytest.mark.parametrize("side", [16, 32])
def test_shard_writer_takes_a_shard_window_by_window(tmp_path, side):
    """``ShardWriter.put`` of whole-chunk windows (blocks of ``side``) in Morton order gives
    ``write_shard``'s bytes, holding a window at a time; in another order the same cells
    (the index says where each chunk lies); a window that is not whole chunks, or a writer
    left without ``close``, writes nothing."""
    from terrain.tiles.morton import morton_encode
    v = _values("float64", np.nan)
    whole = shard_layer(tmp_path / "a.zarr", "x", "float64", np.nan, CODECS["lz4-bitshuffle"])
    for si in range(3):
        for sj in range(3):
            write_shard(fast_layout(whole), si, sj, v)
    for name, ordered in (("b.zarr", True), ("c.zarr", False)):
        arr = shard_layer(tmp_path / name, "x", "float64", np.nan, CODECS["lz4-bitshuffle"])
        layout = fast_layout(arr)
        for si in range(3):
            for sj in range(3):
                blocks = [(r, c) for r in range(si * 64, min(si * 64 + 64, SHAPE[0]), side)
                          for c in range(sj * 64, min(sj * 64 + 64, SHAPE[1]), side)]
                blocks.sort(key=lambda b: int(morton_encode(b[0] // side, b[1] // side)),
                            reverse=not ordered)
                with ShardWriter(layout, si, sj) as w:
                    for r, c in blocks:
                        w.put(np.ascontiguousarray(v[r:r + side, c:c + side]), r, c)
                    w.close()
        np.testing.assert_array_equal(np.asarray(arr[:, :]), v)
        if ordered:
            assert shard_files(tmp_path / "a.zarr" / "x") == shard_files(tmp_path / name / "x")
    layout = fast_layout(arr)
    with ShardWriter(layout, 0, 0) as w:
        with pytest.raises(ValueError, match="whole chunks"):
            w.put(np.zeros((8, 16)), 0, 0)
        w.put(np.ones((16, 16)), 0, 0)  # not closed: the shard stays as it was
    assert np.isnan(np.asarray(arr[0, 0]))
    assert not list((tmp_path / "c.zarr" / "x").rglob("*.partial"))


def test_write_windows_and_read_layer(tmp_path):
    """Shard windows take the hand-written path, a window that cuts a shard goes through
    zarr, an emptied shard is removed; ``read_layer`` returns the layer."""
    path = tmp_path / "s.zarr"
    arr = shard_layer(path, "distance", "float64", np.nan, layer_compressors("distance"))
    v = _values("float64", np.nan)
    v[128:, 64:] = 3.0
    write_windows(path, {"distance": v}, [(0, 64, 0, 130), (64, 128, 0, 130),
                                          (128, 150, 0, 64), (128, 150, 64, 130)])
    shard = fast_layout(arr).file(2, 2)
    assert shard.exists()
    np.testing.assert_array_equal(read_layer(path, "distance"), v)
    v[128:, 64:] = np.nan  # written again all fill: the shard files go
    write_windows(path, {"distance": v}, [(128, 150, 64, 130)])
    assert not shard.exists()
    v[5:9, 5:9] = 7.0  # a window that cuts a shard: zarr's path, same result
    write_windows(path, {"distance": v}, [(0, 30, 0, 30)])
    np.testing.assert_array_equal(read_layer(path, "distance"), v)
    np.testing.assert_array_equal(read_layer(path, "distance", np.float32),
                                  v.astype(np.float32))


@pytest.mark.parametrize("dtype, fill", [("float32", np.nan), ("uint8", 0)])
def test_read_block_of_windows_that_cut_shards(tmp_path, monkeypatch, dtype, fill):
    """Windows that cut shards (halos, edges, absent shards and tiles) are read by the
    shard reader, not zarr's indexing, and hold zarr's cells."""
    import terrain.tiles.store as store_mod
    from terrain.tiles.store import read_block
    v = _values(dtype, fill)
    arr = shard_layer(tmp_path / "s.zarr", "x", dtype, fill, CODECS["lz4-bitshuffle"])
    arr[:, :] = v
    monkeypatch.setattr(store_mod, "_read", None)  # zarr's indexing would fail
    rng = np.random.default_rng(1)
    windows = [(63, 129, 63, 129), (0, 150, 0, 130), (127, 150, 60, 130), (99, 102, 0, 9)]
    for _ in range(20):
        r0, c0 = rng.integers(0, 149), rng.integers(0, 129)
        windows.append((r0, rng.integers(r0 + 1, 151), c0, rng.integers(c0 + 1, 131)))
    for r0, r1, c0, c1 in windows:
        np.testing.assert_array_equal(read_block(tmp_path / "s.zarr", "x", (r0, r1, c0, c1)),
                                      v[r0:r1, c0:c1])


class _HostBlocks:
    """A block reader over a NumPy array (what ``DeviceBlocks`` is over a device array),
    counting its copies, the buffers it made and the largest copy's bytes."""

    buffer_kind = "test-blocks"

    def __init__(self, values):
        self.values, self.blocks, self.buffers, self.most = values, 0, 0, 0

    def empty(self, nbytes):
        self.buffers += 1
        return np.empty(nbytes, np.uint8)

    def read_block(self, out, r0, r1, c0, c1):
        assert out.shape == (r1 - r0, c1 - c0) and out.dtype == self.values.dtype
        self.blocks += 1
        self.most = max(self.most, out.nbytes)
        out[...] = self.values[r0:r1, c0:c1]


@pytest.mark.parametrize("dtype, fill", [("float64", np.nan), ("int32", -1), ("uint8", 255)])
def test_shards_from_a_block_reader_are_the_arrays_bytes(tmp_path, dtype, fill):
    """``write_shard`` from a block reader (a device array's way: each quarter of a shard in
    one copy into a buffer of the reader's kind, put in the chunks' order): the same files as
    from the array, edge tiles included, at an origin other than the array's too."""
    v = _values(dtype, fill)
    codec = layer_compressors({"float64": "distance", "int32": "allocation",
                               "uint8": "backlink"}[dtype])
    ours = shard_layer(tmp_path / "a.zarr", "x", dtype, fill, codec)
    theirs = shard_layer(tmp_path / "b.zarr", "x", dtype, fill, codec)
    la, lb = fast_layout(ours), fast_layout(theirs)
    reader = _HostBlocks(v)
    for si in range(3):
        for sj in range(3):
            write_shard(lb, si, sj, v)
            if (si, sj) == (2, 1):  # a reader over that shard's window alone
                write_shard(la, si, sj, _HostBlocks(v[128:, 64:128].copy()), 128, 64)
            else:
                write_shard(la, si, sj, reader)
    a, b = shard_files(tmp_path / "a.zarr" / "x"), shard_files(tmp_path / "b.zarr" / "x")
    assert sorted(a) == sorted(b) and len(a) == 7
    for name in a:
        assert a[name] == b[name], name
    # a copy a quarter of a shard, none past the array's edge (150 x 130 in 64² shards:
    # 4 a whole shard, 2 a shard of the last row or column, 1 the corner's), but shard
    # (2, 1); one buffer, reused, that holds a quarter
    assert reader.blocks == 4 * 4 + 2 + 2 + 2 + 1
    assert reader.buffers <= 1 and reader.most == 32 * 32 * v.dtype.itemsize


def test_unusual_layouts_go_through_zarr(tmp_path):
    g = zarr.open_group(str(tmp_path / "u.zarr"), mode="w", zarr_format=3)
    plain = g.create_array("plain", shape=(10, 10), chunks=(5, 5), dtype="int32",
                           fill_value=-1)
    assert fast_layout(plain) is None
    gz = g.create_array("gz", shape=(10, 10), chunks=(5, 5), shards=(10, 10), dtype="int32",
                        fill_value=-1, compressors=(zarr.codecs.GzipCodec(),))
    assert fast_layout(gz) is None
    write_windows(tmp_path / "u.zarr", {"gz": np.arange(100, dtype=np.int32).reshape(10, 10)},
                  [(0, 10, 0, 10)])
    assert int(gz[9, 9]) == 99


@pytest.mark.parametrize("codec", sorted(CODECS))
@pytest.mark.parametrize("dtype, fill", [("float64", np.nan), ("float32", np.nan),
                                         ("int32", -1), ("uint8", 255)])
def test_layout_from_zarr_json_alone_reads_zarrs_layers(tmp_path, codec, dtype, fill):
    """``read_layout`` (the array's zarr.json, no zarr) describes the array, and
    ``read_array`` gives zarr's values, absent chunks and shards as the fill value."""
    from terrain.tiles._shards import read_array, read_layout
    v = _values(dtype, fill)
    arr = shard_layer(tmp_path / "a.zarr", "x", dtype, fill, CODECS[codec])
    arr[:, :] = v
    ours = read_layout(tmp_path / "a.zarr" / "x")
    assert ours is not None and ours.order is None  # it cannot write
    assert (ours.shape, ours.shard, ours.inner, ours.dtype) == (arr.shape, arr.shards,
                                                                  arr.chunks, arr.dtype)
    np.testing.assert_array_equal(ours.fill, np.asarray(arr.fill_value, dtype))
    assert (ours.codec is None) == (CODECS[codec] is None)
    folder = tmp_path / "a.zarr" / "x"
    assert {str(ours.file(i, j).relative_to(folder)) for i in range(3)
            for j in range(3)} >= set(shard_files(folder))
    for workers in (1, 3):
        np.testing.assert_array_equal(read_array(ours, workers), np.asarray(arr[:, :]))


def test_layout_from_zarr_json_refuses_what_it_does_not_know(tmp_path):
    from terrain.tiles._shards import read_layout
    g = zarr.open_group(str(tmp_path / "u.zarr"), mode="w", zarr_format=3)
    g.create_array("plain", shape=(10, 10), chunks=(5, 5), dtype="int32", fill_value=-1)
    g.create_array("gz", shape=(10, 10), chunks=(5, 5), shards=(10, 10), dtype="int32",
                   fill_value=-1, compressors=(zarr.codecs.GzipCodec(),))
    g.create_array("cube", shape=(4, 10, 10), chunks=(1, 5, 5), shards=(1, 10, 10),
                   dtype="int32", fill_value=-1)
    for name in ("plain", "gz", "cube", "missing"):
        assert read_layout(tmp_path / "u.zarr" / name) is None, name
    assert read_layout(tmp_path / "u.zarr") is None  # a group


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, fill", [("float64", np.nan), ("int32", -1), ("uint8", 255)])
def test_device_layers_are_written_as_the_host_arrays(tmp_path, dtype, fill):
    """``write_windows`` of a CuPy layer (chunks copied off the device into pinned tiles,
    ``terrain._transfer.DeviceBlocks``): the files of the NumPy layer, for shard windows
    and for a window that cuts shards (zarr's path); a block copy checks its buffer."""
    import cupy as cp

    from terrain._transfer import DeviceBlocks
    v = _values(dtype, fill)
    name = {"float64": "distance", "int32": "allocation", "uint8": "backlink"}[dtype]
    windows = [(0, 64, 0, 130), (64, 128, 0, 130), (128, 150, 0, 64), (128, 150, 64, 130)]
    for store, layer in (("a.zarr", v), ("b.zarr", cp.asarray(v))):
        shard_layer(tmp_path / store, name, dtype, fill, layer_compressors(name))
        write_windows(tmp_path / store, {name: layer}, windows)
        write_windows(tmp_path / store, {name: layer[3:40, 5:77]}, [(0, 30, 0, 30)])
    # a padded grid's interior, rows a pitch apart, read in place
    padded = cp.pad(cp.asarray(v), 2, constant_values=fill)
    shard_layer(tmp_path / "c.zarr", name, dtype, fill, layer_compressors(name))
    write_windows(tmp_path / "c.zarr", {name: padded[2:-2, 2:-2]}, windows)
    a, b = shard_files(tmp_path / "a.zarr" / name), shard_files(tmp_path / "b.zarr" / name)
    c = shard_files(tmp_path / "c.zarr" / name)
    assert sorted(a) == sorted(b) == sorted(c) and len(a) >= 7
    for f in a:
        assert a[f] == b[f] == c[f], f
    blocks = DeviceBlocks(cp, cp.asarray(v))
    out = np.zeros((70, 70), dtype)
    blocks.read_block(out[5:12, 3:20], 140, 147, 100, 117)
    np.testing.assert_array_equal(out[5:12, 3:20], v[140:147, 100:117])
    assert (out[:5] == 0).all() and (out[12:] == 0).all()
    np.testing.assert_array_equal(blocks[7:9, 1:4], v[7:9, 1:4])
    with pytest.raises(ValueError):
        blocks.read_block(np.zeros((7, 17), np.int8), 140, 147, 100, 117)
    inner = DeviceBlocks(cp, padded[2:-2, 2:-2])
    inner.read_block(out[5:12, 3:20], 140, 147, 100, 117)
    np.testing.assert_array_equal(out[5:12, 3:20], v[140:147, 100:117])
    for strided in (padded[:, ::2], padded.T, cp.asarray(v)[None]):
        with pytest.raises(ValueError):
            DeviceBlocks(cp, strided)
