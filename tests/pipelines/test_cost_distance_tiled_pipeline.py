"""``cost-distance --route tiled`` (the Dask graph of pipelines/cost_distance_tiled.py)
against the in-core command and scipy, several groups (shards of 16 cells), and ``--reuse``."""

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
import zarr

from cli import assert_one_line_error, child_env, run_main
from grids import random_dem, write_asc
from oracles import csr_graph, oracle_distance

LAYERS = ("distance", "allocation", "backlink")


@pytest.fixture
def dem(tmp_path):
    return random_dem(tmp_path, 1, (45, 37), 30, [(3, 4), (40, 30), (44, 0)],
                      5, barrier=(20, slice(None, 30)))


def _layers(path):
    g = zarr.open_group(str(path), mode="r")
    return {n: np.asarray(g[n][:]) for n in LAYERS}


def _run(capsys, *argv):
    rc, so, se = run_main(capsys, "cost-distance", *argv, "--json")
    assert rc == 0, se
    return json.loads(so)


@pytest.mark.parametrize("conn,tile_sssp,height", [(8, 4, None), (4, 4, 0), (16, 8, 1),
                                                    (8, 16, None)])
def test_tiled_equals_in_core(capsys, tmp_path, dem, small_shards, conn, tile_sssp, height):
    z, path = dem
    common = ["--source-cell", "3,4", "--source-cell", "40,30", "--source-cell", "44,0",
              "--tile", 8, "--connectivity", conn]
    s_in = _run(capsys, path, "-o", tmp_path / "in.zarr", "--route", "in-core", *common)
    extra = [] if height is None else ["--max-height", height]
    s_t = _run(capsys, path, "-o", tmp_path / "t.zarr", "--route", "tiled",
               "--tile-sssp", tile_sssp, *extra, *common)
    assert s_in["route"] == "in-core" and s_t["route"] == "tiled"
    assert s_t["groups"] == 9 and s_t["group_side"] == 16  # 45 x 37 cells in shards of 16
    a, b = _layers(tmp_path / "in.zarr"), _layers(tmp_path / "t.zarr")
    for n in LAYERS:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)
    if conn == 8:
        ref = oracle_distance(csr_graph(z), z.shape, [(3, 4), (40, 30), (44, 0)])
        np.testing.assert_array_equal(b["distance"], ref)
    assert s_t["reached_cells"] == s_in["reached_cells"]
    assert s_t["max_distance"] == s_in["max_distance"]
    assert "sssp_index" in zarr.open_group(str(tmp_path / "t.zarr"), mode="r")


def test_reuse_gives_a_fresh_runs_result(capsys, tmp_path, dem, small_shards):
    z, path = dem
    base = ["--tile", 8, "--route", "tiled", "--tile-sssp", 4]
    s1 = _run(capsys, path, "-o", tmp_path / "a.zarr", "--source-cell", "3,4", *base)
    assert s1["index_tasks"] > 0 and s1["reused_tasks"] == 0
    new = ["--source-cell", "40,30", "--source-cell", "10,36", "--max-cost", "60"]
    fresh = _run(capsys, path, "-o", tmp_path / "fresh.zarr", *new, *base)
    reused = _run(capsys, path, "-o", tmp_path / "r.zarr", *new, "--tile", 8,
                  "--reuse", tmp_path / "a.zarr")  # tiled, tile 4: the store's
    assert reused["reused_tasks"] == s1["index_tasks"] and reused["index_tasks"] == 0
    assert reused["skipped_phases"] == ["phase 1", "phase 2 upward"]
    a, b = _layers(tmp_path / "fresh.zarr"), _layers(tmp_path / "r.zarr")
    for n in LAYERS:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)
    # a store of another connectivity, or of another raster, is one line, exit 2
    rc, so, se = run_main(capsys, "cost-distance", path, "-o", tmp_path / "x.zarr", *new,
                          *base, "--connectivity", 4, "--reuse", tmp_path / "a.zarr")
    assert rc == 2 and se.count("\n") == 1 and "connectivity" in se
    assert not (tmp_path / "x.zarr").exists()
    z2 = z.copy()
    z2[np.isfinite(z2)] += 1
    other = write_asc(tmp_path / "other.asc", z2)
    rc, so, se = run_main(capsys, "cost-distance", other, "-o", tmp_path / "y.zarr", *new,
                          *base, "--reuse", tmp_path / "a.zarr")
    assert rc == 2 and se.count("\n") == 1 and "does not match" in se
    assert not (tmp_path / "y.zarr").exists()
    rc, so, se = run_main(capsys, "cost-distance", path, "-o", tmp_path / "w.zarr", *new,
                          "--tile", 8, "--reuse", tmp_path / "fresh.zarr" / "distance")
    assert rc == 2 and se.count("\n") == 1


def test_tiled_source_on_nodata(capsys, tmp_path, dem, small_shards):
    z, path = dem
    rc, so, se = run_main(capsys, "cost-distance", path, "-o", tmp_path / "n.zarr",
                          "--source-cell", "20,5", "--tile", 8, "--route", "tiled")
    assert rc == 2 and "nodata" in se and se.count("\n") == 1
    assert not (tmp_path / "n.zarr").exists()


#: ``terrain.run.main`` of the arguments in a fresh interpreter, in groups of 16 cells
#: (``small_shards``, which a child process does not inherit)
SMALL_SHARDS_MAIN = ("import sys; import terrain.tiles.store as s; s.SHARD_TARGET_SIDE = 16; "
                     "from terrain.run import main; sys.exit(main(sys.argv[1:]))")


def _child_run(tmp_path, layer, *argv):
    return subprocess.run([sys.executable, "-c", SMALL_SHARDS_MAIN, "cost-distance",
                           *map(str, argv)], env=child_env(NUMBA_THREADING_LAYER=layer),
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)


def test_tiled_under_numbas_workqueue_layer(capsys, tmp_path, dem):
    """The parallel kernels launched from several task threads at once: the workqueue
    layer aborted the process ("Concurrent access has been detected", SIGABRT) and left
    the partial and the lock; they take turns now, and the layers are the in-core run's."""
    z, path = dem
    common = ["--source-cell", "3,4", "--source-cell", "40,30", "--source-cell", "44,0",
              "--tile", 8]
    _run(capsys, path, "-o", tmp_path / "in.zarr", "--route", "in-core", *common)
    proc = _child_run(tmp_path, "workqueue", path, "-o", "t.zarr", "--route", "tiled",
                      "--tile-sssp", 4, *common, "--scheduler", "threads", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["groups"] == 9
    a, b = _layers(tmp_path / "in.zarr"), _layers(tmp_path / "t.zarr")
    for n in LAYERS:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dem.asc", "in.zarr", "t.zarr"]


@pytest.mark.skipif(importlib.util.find_spec("tbb") is not None, reason="TBB is installed")
def test_a_numba_threading_layer_that_cannot_load_is_one_line(tmp_path, dem):
    """``NUMBA_THREADING_LAYER=tbb`` without TBB: Numba's ValueError traceback, exit 1."""
    z, path = dem
    proc = _child_run(tmp_path, "tbb", path, "-o", "t.zarr", "--route", "tiled",
                      "--source-cell", "3,4", "--tile", 8, "--scheduler", "threads")
    assert_one_line_error(proc, "terrain: NUMBA_THREADING_LAYER=tbb: No threading layer "
                                "could be loaded")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dem.asc"]


def test_cost_distance_route():
    from pipelines.cost_distance import cost_distance_route
    assert cost_distance_route((100, 100), memory_bytes=10**9) == "in-core"
    # on the CPU the blocked algorithm serves out of core (tests/test_cost_distance_blocked_*)
    assert cost_distance_route((10**5, 10**5), memory_bytes=10**9) == "blocked"
    assert cost_distance_route((100, 100), route="tiled") == "tiled"


@pytest.mark.gpu
def test_cost_distance_route_on_the_gpu():
    from pipelines.cost_distance import cost_distance_route
    assert cost_distance_route((10**5, 10**5), memory_bytes=10**9, backend="gpu") == "tiled"


@pytest.mark.gpu
@pytest.mark.parametrize("conn,tile_sssp,height", [(8, 4, 1), (16, 4, 0)])
def test_tiled_gpu_equals_cpu(capsys, tmp_path, dem, small_shards, conn, tile_sssp, height):
    """``--backend gpu`` on the tiled pipeline (phase 1, the group's node merges, the top
    solve on the device, phase 3) writes the CPU's layers bit for bit, fresh and reused."""
    z, path = dem
    common = ["--source-cell", "3,4", "--source-cell", "40,30", "--source-cell", "44,0",
              "--tile", 8, "--connectivity", conn, "--route", "tiled", "--tile-sssp",
              tile_sssp, "--max-height", height]
    out = {}
    for be in ("cpu", "gpu"):
        s = _run(capsys, path, "-o", tmp_path / f"{be}.zarr", *common, "--backend", be)
        assert s["backend"] == be
        out[be] = _layers(tmp_path / f"{be}.zarr")
    new = ["--source-cell", "40,30", "--source-cell", "10,36", "--tile", 8, "--connectivity",
           conn, "--backend", "gpu"]
    _run(capsys, path, "-o", tmp_path / "r.zarr", *new, "--reuse", tmp_path / "cpu.zarr")
    _run(capsys, path, "-o", tmp_path / "f.zarr", *new[:-2], "--backend", "cpu",
         "--route", "tiled", "--tile-sssp", tile_sssp, "--max-height", height)
    out["reuse-gpu"], out["fresh-cpu"] = _layers(tmp_path / "r.zarr"), _layers(tmp_path / "f.zarr")
    for n in LAYERS:
        np.testing.assert_array_equal(out["cpu"][n], out["gpu"][n], err_msg=n)
        np.testing.assert_array_equal(out["reuse-gpu"][n], out["fresh-cpu"][n], err_msg=n)


def test_group_side_does_not_change_the_layers(capsys, tmp_path, dem, small_shards,
                                               monkeypatch):
    """Groups of 8 and of 16 cells (the GPU sizes them from the device) write the same
    layers; a reuse query takes the stored index's group side."""
    import pipelines.cost_distance_tiled as cdt
    z, path = dem
    base = ["--source-cell", "3,4", "--source-cell", "40,30", "--tile", 8, "--route",
            "tiled", "--tile-sssp", 4, "--max-height", 1]
    monkeypatch.setattr(cdt, "GROUP_SIDE", 8)
    s8 = _run(capsys, path, "-o", tmp_path / "g8.zarr", *base)
    monkeypatch.setattr(cdt, "GROUP_SIDE", 16)
    s16 = _run(capsys, path, "-o", tmp_path / "g16.zarr", *base)
    assert (s8["group_side"], s8["groups"], s16["group_side"], s16["groups"]) == (8, 30, 16, 9)
    assert s16["sizing"] == {"by": "cpu", "group_side": 16}
    a, b = _layers(tmp_path / "g8.zarr"), _layers(tmp_path / "g16.zarr")
    for n in LAYERS:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)
    new = ["--source-cell", "10,36", "--tile", 8]
    r = _run(capsys, path, "-o", tmp_path / "r.zarr", *new, "--reuse", tmp_path / "g8.zarr")
    assert r["sizing"]["by"] == "reused store" and r["group_side"] == 8
    f = _run(capsys, path, "-o", tmp_path / "f.zarr", *new, "--route", "tiled",
             "--tile-sssp", 4, "--max-height", 1)
    a, b = _layers(tmp_path / "r.zarr"), _layers(tmp_path / "f.zarr")
    for n in LAYERS:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)


@pytest.mark.gpu
def test_tiled_gpu_sized_from_the_device(capsys, tmp_path, dem, small_shards):
    """A fresh ``--backend gpu`` run sizes its groups and height from the device (the
    summary's ``sizing``) and writes the CPU's layers at that height."""
    z, path = dem
    common = ["--source-cell", "3,4", "--source-cell", "44,0", "--tile", 8, "--route",
              "tiled", "--tile-sssp", 4]
    g = _run(capsys, path, "-o", tmp_path / "g.zarr", *common, "--backend", "gpu")
    sz = g["sizing"]
    assert sz["by"] == "device" and sz["device_threads"] > 0 and sz["free_bytes"] > 0
    assert g["group_side"] == sz["group_side"] == 16 and g["height"] == sz["height"] == 0
    _run(capsys, path, "-o", tmp_path / "c.zarr", *common, "--backend", "cpu",
         "--max-height", g["height"])
    a, b = _layers(tmp_path / "g.zarr"), _layers(tmp_path / "c.zarr")
    for n in LAYERS:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)


@pytest.mark.slow
def test_stage_seconds_gather_every_worker_process():
    """On worker processes the summary's task-seconds come from every worker, not only from
    the one that runs the finishing task (a stage that ran in another process must not give
    negative seconds)."""
    distributed = pytest.importorskip("distributed")
    import logging
    from pipelines.quadtree import _add_seconds, stage_seconds
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=logging.CRITICAL)
    with cluster, distributed.Client(cluster) as client:
        a, b = sorted(client.scheduler_info()["workers"])
        client.submit(_add_seconds, "run-1", "index-leaf", 2.0, workers=[a], pure=False).result()
        client.submit(_add_seconds, "run-1", "index-leaf", 3.0, workers=[b], pure=False).result()
        client.submit(_add_seconds, "run-1", "fill", 1.0, workers=[b], pure=False).result()
        got = client.submit(stage_seconds, "run-1", workers=[a], pure=False).result()
        assert got == {"index-leaf": 5.0, "fill": 1.0}
        # popped everywhere: a second run's summary does not count them again
        assert client.submit(stage_seconds, "run-1", workers=[b], pure=False).result() == {}
    assert stage_seconds("run-1") == {}  # outside a worker: this process's own
