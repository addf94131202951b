"""``cost-distance --route blocked`` (pipelines/cost_distance_blocked.py): the store equals
the in-core command's layer for layer, with several blocks and output shards; bad input leaves
nothing behind; ``auto`` picks it on the CPU when the memory budget is small."""

import json

import numpy as np
import pytest
import zarr

from cli import run_main
from grids import random_dem, write_asc
from oracles import csr_graph, oracle_distance

LAYERS = ("distance", "allocation", "backlink")


@pytest.fixture
def dem(tmp_path):
    return random_dem(tmp_path, 2, (45, 37), 30, [(3, 4), (40, 30), (16, 16)],
                      5, barrier=(20, slice(None, 30)))


def _layers(path):
    g = zarr.open_group(str(path), mode="r")
    return {n: np.asarray(g[n][:]) for n in (*LAYERS, "friction") if n in g}


def _run(capsys, *argv, scheduler="synchronous"):
    rc, so, se = run_main(capsys, "cost-distance", *argv, "--json", scheduler=scheduler)
    assert rc == 0, se
    return json.loads(so)


@pytest.mark.parametrize("conn,cost,scheduler,cache", [(8, "absdiff", "synchronous", None),
                                                       (16, "friction", "threads", 0),
                                                       (4, "tobler", "synchronous", None)])
def test_blocked_equals_in_core(capsys, tmp_path, dem, small_shards, conn, cost, scheduler,
                                cache, monkeypatch):
    """``cache`` 0: the block cache holds one block, every other one is written when it
    leaves (write-back) and read again."""
    import pipelines.cost_distance_blocked as blocked
    if cache is not None:
        monkeypatch.setattr(blocked, "cache_bytes", lambda *a: cache)
    z, path = dem
    common = ["--source-cell", "3,4", "--source-cell", "40,30", "--source-cell", "16,16",
              "--tile", 8, "--connectivity", conn, "--cost", cost]
    if cost != "absdiff":
        f = (1 + np.random.default_rng(3).random(z.shape)).astype(np.float32)
        common += ["--friction", write_asc(tmp_path / "f.asc", f)]
    if cost == "tobler":
        common += ["--max-cost", 40]
    s_in = _run(capsys, path, "-o", tmp_path / "in.zarr", "--route", "in-core", *common)
    s_b = _run(capsys, path, "-o", tmp_path / "b.zarr", "--route", "blocked", *common,
               scheduler=scheduler)
    assert s_in["route"] == "in-core" and s_b["route"] == "blocked"
    assert s_b["block"] == 16 and s_b["blocks"] == 9  # 45 x 37 cells in blocks of 16
    assert s_b["stage_stats"]["stage1"]["visits"] >= 3
    a, b = _layers(tmp_path / "in.zarr"), _layers(tmp_path / "b.zarr")
    assert set(a) == set(b)
    for n in a:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)
    if cost == "absdiff":
        ref = oracle_distance(csr_graph(z), z.shape, [(3, 4), (40, 30), (16, 16)])
        np.testing.assert_array_equal(b["distance"], ref)
    assert s_b["reached_cells"] == s_in["reached_cells"]
    assert s_b["max_distance"] == s_in["max_distance"]
    g = zarr.open_group(str(tmp_path / "b.zarr"), mode="r")
    assert g.attrs["cost_distance"]["route"] == "blocked"
    assert sorted(p.name for p in tmp_path.iterdir() if "zarr" in p.name) == ["b.zarr",
                                                                              "in.zarr"]
    rc, so, se = run_main(capsys, "verify", tmp_path / "b.zarr", "--json", scheduler=None)
    assert rc == 0 and json.loads(so)["ok"], so + se


def test_auto_picks_blocked_under_a_small_budget(capsys, tmp_path, dem, small_shards):
    _, path = dem
    s = _run(capsys, path, "-o", tmp_path / "b.zarr", "--source-cell", "3,4", "--tile", 8,
             "--memory", "20KB")
    assert s["route"] == "blocked" and s["block"] == 8  # the budget halves the blocks
    rc, so, se = run_main(capsys, "cost-distance", path, "-o", tmp_path / "c.zarr",
                          "--source-cell", "3,4", "--tile", 8, "--memory", "20KB")
    assert rc == 0 and "blocks    30 of 8², solved" in so
    rc, so, se = run_main(capsys, "cost-distance", path, "-o", tmp_path / "p.zarr",
                          "--source-cell", "3,4", "--tile", 8, "--memory", "20KB", "--dry-run")
    assert rc == 0 and "solve     blocked, backend cpu: 30 blocks of 8²" in so
    assert not (tmp_path / "p.zarr").exists()


def test_blocks_inside_shards_own_friction_and_geotiffs_under_a_budget(capsys, tmp_path, dem,
                                                                        small_shards,
                                                                        monkeypatch):
    """``--memory 20KB``: blocks of 8 in output shards of 16, each shard written block by
    block (``ShardWriter``), and the GeoTIFFs one layer at a time: the store and the
    GeoTIFFs equal the in-core run's. The DEM is its own friction: ingested once."""
    import rasterio

    import pipelines.ingest as ingest
    z, path = dem
    common = ["--source-cell", "3,4", "--source-cell", "40,30", "--tile", 8,
              "--cost", "friction", "--friction", path]
    s_in = _run(capsys, path, "-o", tmp_path / "in.zarr", "--route", "in-core",
                "--geotiff-dir", tmp_path / "gi", *common)
    ingests, build = [], ingest.build_ingest_graph
    monkeypatch.setattr(ingest, "build_ingest_graph",
                        lambda *a, **k: ingests.append(a[0]) or build(*a, **k))
    s_b = _run(capsys, path, "-o", tmp_path / "b.zarr", "--route", "blocked", "--memory",
               "20KB", "--geotiff-dir", tmp_path / "gb", *common, scheduler="threads")
    assert s_b["block"] == 8 and s_b["blocks"] == 30 and len(ingests) == 1
    a, b = _layers(tmp_path / "in.zarr"), _layers(tmp_path / "b.zarr")
    assert set(a) == set(b) == {*LAYERS, "friction"}
    for n in a:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)
    assert (s_b["reached_cells"], s_b["max_distance"]) == (s_in["reached_cells"],
                                                           s_in["max_distance"])
    for n in LAYERS:
        with rasterio.open(tmp_path / "gi" / f"{n}.tif") as x, \
                rasterio.open(tmp_path / "gb" / f"{n}.tif") as y:
            np.testing.assert_array_equal(x.read(1), y.read(1), err_msg=n)


def test_source_on_nodata_leaves_nothing(capsys, tmp_path, dem, small_shards):
    z, path = dem
    rc, so, se = run_main(capsys, "cost-distance", path, "-o", tmp_path / "x.zarr",
                          "--source-cell", "20,5", "--tile", 8, "--route", "blocked")
    assert rc == 2 and se.startswith("terrain: ") and "nodata" in se
    assert "Traceback" not in se and len(se.strip().splitlines()) == 1
    assert not (tmp_path / "x.zarr").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".x.zarr")]
    rc, so, se = run_main(capsys, "cost-distance", path, "-o", tmp_path / "y.zarr",
                          "--source-cell", "3,4", "--memory", "lots")
    assert rc == 2 and "memory" in se and not (tmp_path / "y.zarr").exists()


def test_block_reader_equals_zarr(tmp_path, small_shards):
    """The chunk-by-chunk block reader (terrain.tiles._shards.read_window) gives zarr's
    cells: windows across shards and partial edge tiles, an absent (all-NaN) chunk, a
    missing shard file, and the zarr fallback for a store of another layout."""
    from pipelines.cost_distance_blocked import BlockReader
    from pipelines.cost_distance_store import StoreReader
    from pipelines.ingest import default_compressors
    from terrain.tiles.store import create_store
    rng = np.random.default_rng(5)
    shape = (45, 37)
    paths = []
    for name in ("dem", "fr", "zstd"):  # the last one: zarr's default codec (zstd)
        st = create_store(tmp_path / f"{name}.zarr", shape, 8, compressors=(
            "auto" if name == "zstd" else default_compressors()))
        a = (rng.random(shape) * 9 + (1 if name == "fr" else 0)).astype(np.float32)
        a[8:16, 8:16] = np.nan  # a whole inner chunk of NaN: not stored
        st.elevation[:, :] = a
        paths.append(tmp_path / f"{name}.zarr")
    shard_files = sorted((paths[0] / "elevation").rglob("c/*/*"))
    assert len(shard_files) == 9  # 3 x 3 shards of 16
    shard_files[-1].unlink()  # a missing shard: the fill value (NaN)
    ref, got = StoreReader(*paths[:2]), BlockReader(*paths[:2])
    windows = [(0, 16, 0, 16), (3, 45, 5, 37), (8, 16, 8, 16), (40, 45, 30, 37), (0, 45, 0, 37)]
    for w in windows:
        for a, b in zip(ref(w), got(w)):
            assert b.dtype == np.float32 and b.shape == (w[1] - w[0], w[3] - w[2])
            np.testing.assert_array_equal(a, b)
    assert got.layouts  # the chunk reader, not zarr
    assert np.isnan(got((32, 45, 32, 37))[0]).all()
    z, f = BlockReader(paths[0])((0, 9, 0, 9))
    assert f is None and np.array_equal(z, ref((0, 9, 0, 9))[0], equal_nan=True)
    other = BlockReader(paths[0], paths[2])  # another layout: zarr reads both
    for a, b in zip(StoreReader(paths[0], paths[2])((2, 30, 3, 20)), other((2, 30, 3, 20))):
        np.testing.assert_array_equal(a, b)
    assert other.layouts == []


def test_block_cache_writes_changed_states_when_they_leave(tmp_path):
    """The cache holds what fits its budget: the least recently used blocks leave, their
    changed states written (and read back the same), unchanged ones dropped."""
    from pipelines.cost_distance_blocked import BlockCache, BlockFiles
    files = BlockFiles(tmp_path, lambda i, j: (4, 4))
    cache = BlockCache(files, 2 * 128)  # room for two blocks' distances
    d = [np.full((4, 4), float(k)) for k in range(4)]
    for k in range(3):
        cache.put(0, k, {"z": None, "f": None, "d": d[k], "l": None,
                         "dirty": {"d"} if k != 1 else set()})
    assert list(cache.entries) == [(0, 1), (0, 2)] and not files.path("d", 0, 1).exists()
    assert np.array_equal(files.read("d", 0, 0), d[0])  # written when it left
    cache.put(0, 3, {"z": None, "f": None, "d": np.zeros((8, 8)), "l": None, "dirty": set()})
    assert list(cache.entries) == [(0, 3)] and files.read("d", 0, 1) is None  # the last stays
    assert np.array_equal(files.read("d", 0, 2), d[2])


def test_no_task_key_is_used_twice(capsys, tmp_path, dem, small_shards, monkeypatch):
    """Every round's block tasks, and each run's, have keys of their own: a distributed
    scheduler that still holds a key of an earlier round or run (its release is
    asynchronous) hands that result back instead of running the task, which gave a cluster
    run of the blocked route other distances than a local one."""
    import pipelines.cluster as cluster
    keys, compute = [], cluster.compute

    def recording(*collections, **kw):
        keys.extend(c.key for c in collections)
        return compute(*collections, **kw)

    monkeypatch.setattr(cluster, "compute", recording)
    _, path = dem
    for out in ("b1.zarr", "b2.zarr"):
        s = _run(capsys, path, "-o", tmp_path / out, "--route", "blocked", "--tile", 8,
                 "--source-cell", "3,4", "--memory", "64KB")
        assert s["stage_stats"]["stage1"]["visits"] >= 3  # several rounds
    assert len(keys) > 2 * 9 and len(keys) == len(set(keys))
