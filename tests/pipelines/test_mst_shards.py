"""The MST pipeline's reads and writes through the whole-shard reader/writer.

:func:`terrain.tiles.store.read_block` / ``write_block`` (over :mod:`terrain.tiles._shards`)
must give zarr's own bytes for the ``mst`` mask's codec and the DEM's, and the same values
for windows that cut a shard (zarr's path); the write tasks touch only the shards a change
reaches; group windows of several shards give the reference forest (oracle: the
independent Kruskal of ``tests/oracles.py``).
"""

import numpy as np
import pytest
import zarr
from grids import SHAPE, shard_files
from grids import shard_layer as _array

from pipelines.ingest import default_compressors
from pipelines.mst import _changes_by_window
from terrain.grid.merge import Changes
from terrain.tiles._shards import fast_layout
from terrain.tiles.store import read_block, result_compressors, write_block
from grids import small_shards_case


@pytest.mark.parametrize("name, dtype, fill, compressors", [
    ("mst", "uint8", 0, result_compressors("codes")),
    ("elevation", "float32", np.nan, default_compressors())])
def test_blocks_are_zarrs_bytes_and_read_back(tmp_path, name, dtype, fill, compressors):
    rng = np.random.default_rng(4)
    v = (rng.integers(0, 16, SHAPE) if dtype == "uint8" else rng.random(SHAPE) * 100
         ).astype(dtype)
    v[:40, :40] = fill  # whole tiles of fill: left out, as zarr does
    ours, theirs = tmp_path / "a.zarr", tmp_path / "b.zarr"
    _array(ours, name, dtype, fill, compressors)
    ref = _array(theirs, name, dtype, fill, compressors)
    windows = [(0, 128, 0, 64), (0, 128, 64, 130), (128, 150, 0, 130)]  # whole shards
    for r0, r1, c0, c1 in windows:
        assert write_block(ours, name, (r0, r1, c0, c1), v[r0:r1, c0:c1]) > 0
    ref[...] = v
    assert fast_layout(ref) is not None  # the whole-shard path, not zarr's, wrote ours
    assert shard_files(ours) and shard_files(ours) == shard_files(theirs)
    for r0, r1, c0, c1 in windows + [(10, 77, 5, 129)]:  # the last one cuts shards: zarr's path
        got = read_block(ours, name, (r0, r1, c0, c1))
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, v[r0:r1, c0:c1])
    # a window cutting shards is written through zarr, the same values
    write_block(ours, name, (10, 77, 5, 129), v[10:77, 5:129][::-1].copy())
    want = v.copy()
    want[10:77, 5:129] = v[10:77, 5:129][::-1]
    np.testing.assert_array_equal(zarr.open_array(str(ours), path=name)[:], want)


def test_changes_reach_only_their_shards(monkeypatch):
    import pipelines.mst_input as mst_input
    from terrain.grid.mst import MSTSpec
    spec = MSTSpec(SHAPE, 16)
    ncols = SHAPE[1]
    cells = np.array([5 * ncols + 3, 70 * ncols + 66, 6 * ncols + 63, 129 * ncols + 129])
    ids = 4 * cells + np.array([0, 1, 2, 3])
    ch = Changes(ids[:3], np.float32([1, 2, 3]), ids[3:], np.float32([4]))
    parts = _changes_by_window(spec, 64, (0, 150, 0, 130), ch)
    # shards (0, 0) twice, (1, 1), (2, 2): three shards, row-major
    assert [w for w, _ in parts] == [(0, 64, 0, 64), (64, 128, 64, 128), (128, 150, 128, 130)]
    assert [p.added.tolist() for _, p in parts] == [[ids[0], ids[2]], [ids[1]], []]
    assert [p.dropped.tolist() for _, p in parts] == [[], [], [ids[3]]]
    assert _changes_by_window(spec, 64, (0, 150, 0, 130), Changes()) == []
    # every shard of the window (the mask on the device: each shard is written once): a
    # group among others in runs of a row of shards, the whole grid a run an I/O thread
    every = _changes_by_window(spec, 64, (0, 128, 0, 130), ch, every=True)
    assert [w for w, _ in every] == [(0, 64, 0, 130), (64, 128, 0, 130)]
    assert [p.added.tolist() for _, p in every] == [[ids[0], ids[2]], [ids[1]]]
    assert sum(len(p.dropped) for _, p in every) == 0  # ids[3]'s shard is outside the window
    monkeypatch.setattr(mst_input, "IO_THREADS", 16)
    every = _changes_by_window(spec, 64, (0, 150, 0, 130), ch, every=True)
    assert [w for w, _ in every][:4] == [(0, 64, 0, 64), (0, 64, 64, 128), (0, 64, 128, 130),
                                         (64, 128, 0, 64)] and len(every) == 9
    assert sum(len(p.added) + len(p.dropped) for _, p in every) == 4
    monkeypatch.setattr(mst_input, "IO_THREADS", 2)
    assert len(_changes_by_window(spec, 64, (0, 150, 0, 130), ch, every=True)) == 3
    assert len(_changes_by_window(spec, 64, (0, 64, 0, 64), Changes(), every=True)) == 1


@pytest.mark.parametrize("group_shards", [1, 2])
def test_groups_of_several_shards_give_the_reference_forest(tmp_path, monkeypatch,
                                                            group_shards):
    # on the CPU a group is normally one shard; groups of 2 x 2 shards (as the GPU's
    # super-tiles are) make write tasks that read and write only their changed shards
    from pipelines.cluster import compute, open_scheduler
    from pipelines.mst import build_mst_graph
    from oracles import mask_ids, ref_kruskal

    z, store, spec, out, geo = small_shards_case(tmp_path, monkeypatch, 5, 3)
    with open_scheduler("threads", quiet=True):
        graph = build_mst_graph(tmp_path / "in.zarr", out, spec,
                                store.tiles_per_shard * group_shards, "cpu", geo=geo,
                                in_core=False)
        (summary,) = compute(graph)
    want, w = ref_kruskal(z, 8, "max")
    assert np.array_equal(mask_ids(zarr.open_array(str(out), path="mst", mode="r")[:]), want)
    assert summary["edges"] == len(want)
    assert summary["group_tiles"] == store.tiles_per_shard * group_shards


def test_shard_buffers_do_not_follow_the_thread_count(tmp_path):
    # 32 threads reading and writing shards at once keep at most `keep` free buffers a kind
    from concurrent.futures import ThreadPoolExecutor

    from terrain.tiles import _shards
    _array(tmp_path, "mst", "uint8", 0, result_compressors("codes"))
    v = np.random.default_rng(1).integers(0, 16, SHAPE).astype(np.uint8)
    windows = [(r, min(r + 64, 150), c, min(c + 64, 130)) for r in (0, 64, 128)
               for c in (0, 64, 128)]

    def write(w):  # a writer owns its shards
        return write_block(tmp_path, "mst", w, v[w[0]:w[1], w[2]:w[3]])

    def read(k):
        w = windows[k % len(windows)]
        return np.array_equal(read_block(tmp_path, "mst", w), v[w[0]:w[1], w[2]:w[3]])

    with ThreadPoolExecutor(32) as pool:
        assert all(pool.map(write, windows))
        assert all(pool.map(read, range(256)))
    held = _shards._buffers.free
    assert held and all(len(bufs) <= _shards._buffers.keep for bufs in held.values())
