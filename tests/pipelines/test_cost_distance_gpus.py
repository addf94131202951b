"""``cost-distance --gpus`` and ``batch cost-distance --gpus``: where the tasks are pinned
(tiled: groups and shards spread over the workers in Z-order runs; in core: everything of
the solve on the first worker), the errors, a real two-worker-process run (CPU backend)
giving the threads scheduler's bits, and the GPU runs themselves (``gpu`` tests, one
device is enough)."""

import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
import zarr

from pipelines import cluster
from pipelines import cost_distance as cd
from pipelines.cluster import assign_groups
from grids import random_dem

LAYERS = ("distance", "allocation", "backlink")
WORKERS = ["tcp://127.0.0.1:1001", "tcp://127.0.0.1:1002"]


class _Built(Exception):
    pass


@pytest.fixture
def dem(tmp_path):
    return random_dem(tmp_path, 4, (61, 50), 40, [(3, 4), (55, 40)], 7,
                      barrier=(30, slice(5, 45)))


def _pins(monkeypatch, tmp_path, path, algorithm):
    """The graph ``run_cost_distance`` would compute with two GPU workers, and its pins
    ``{key: worker or None}`` (the graph is built, not run)."""
    built = {}

    def capture(graph, label):
        built["graph"] = graph
        raise _Built

    monkeypatch.setattr(cluster, "compute", capture)
    monkeypatch.setattr(cluster, "active_gpu_workers", lambda: list(WORKERS))
    with pytest.raises(_Built):
        cd.run_cost_distance(path, tmp_path / "o.zarr", cells=["3,4", "55,40"], tile=8,
                             algorithm=algorithm, tile_sssp=4, backend="cpu",
                             scheduler="threads")
    assert not (tmp_path / "o.zarr").exists()  # built, never run: nothing written
    layers = built["graph"].__dask_graph__().layers
    pinned = [lay for lay in layers.values() if (lay.annotations or {}).get("workers")]
    assert len(pinned) == 1
    (layer,) = pinned
    where = layer.annotations["workers"]
    loose = layer.annotations["allow_other_workers"]
    out = {}
    for key in layer:
        w = where(key)
        assert (w is None) == (loose(key) is None)  # every pin is a loose one
        out[key] = None if w is None else w[0]
    return out


def _stage(key):
    """``(stage, index)`` of a ``cost-...-TOKEN`` key, else None."""
    name = key if isinstance(key, str) else key[0]
    if not name.startswith("cost-"):
        return None
    return name[len("cost-"):].rsplit("-", 1)[0], (() if isinstance(key, str) else key[1:])


def test_tiled_groups_and_shards_are_spread_over_the_workers(monkeypatch, tmp_path, dem,
                                                             small_shards):
    _, path = dem
    pins = _pins(monkeypatch, tmp_path, path, "tiled")
    by_stage = {}
    for key, w in pins.items():
        if (st := _stage(key)) and len(st[1]) == 2:
            by_stage.setdefault(st[0], {})[st[1]] = w
    groups = sorted(by_stage["index-leaf"])
    assert len(groups) == 16  # 61 x 50 cells in groups of 16
    want = assign_groups(groups, WORKERS)
    for stage in ("index-leaf", "src-leaf", "down-apply"):  # a group stays on one worker
        assert by_stage[stage] == want, stage
    assert set(Counter(want.values()).values()) == {8}
    shards = sorted(by_stage["fill"])
    assert by_stage["fill"] == assign_groups(shards, WORKERS)
    assert set(by_stage["fill"].values()) == set(WORKERS)
    # the merges above the groups, the top and the finish: wherever the scheduler likes
    for key, w in pins.items():
        st = _stage(key)
        if st and st[0].startswith(("index-merge", "src-merge", "down-split", "tiled-finish")):
            assert w is None, key
    # the ingest of the raster input: anywhere
    assert all(w is None for k, w in pins.items() if _stage(k) is None)


def test_in_core_solve_and_writes_stay_on_the_first_worker(monkeypatch, tmp_path, dem):
    _, path = dem
    pins = _pins(monkeypatch, tmp_path, path, "in-core")
    own = {k: w for k, w in pins.items() if _stage(k)}
    assert {_stage(k)[0] for k in own} == {"prepare", "solve", "write", "finish"}
    assert set(own.values()) == {WORKERS[0]}  # the solved grid never crosses processes
    assert all(w is None for k, w in pins.items() if not _stage(k))  # the ingest: anywhere


def test_gpus_errors_are_one_line_and_write_nothing(tmp_path, dem):
    _, path = dem
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # no device, even on a GPU machine
    for argv, message in (
            (["cost-distance", path, "--gpus", "2"], "2 GPUs asked for, but CuPy sees none"),
            (["cost-distance", path, "--gpus", "1", "--backend", "cpu"],
             "needs the gpu backend"),
            (["cost-distance", path, "--gpus", "1", "--scheduler", "threads"],
             "cannot be used with a GPU count"),
            (["cost-distance", path, "--gpus", "two"], "not a number nor 'all'"),
            (["batch", "cost-distance", path, "--gpus", "1"], "CuPy sees none"),
            (["batch", "cost-distance", path, "--gpus", "1", "--backend", "cpu"],
             "batch cost-distance: a GPU count needs the gpu backend"),
            (["batch", "cost-distance", path, "--gpus", "1", "--scheduler", "threads"],
             "batch cost-distance: GPU workers are started here")):
        out = tmp_path / "out"
        proc = subprocess.run([sys.executable, "-m", "terrain.run", *map(str, argv),
                               "--source-cell", "3,4", "-o", str(out)],
                              capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("terrain: "), proc.stderr
        assert message in lines[0], lines[0]
        assert not out.exists() and not list(tmp_path.glob(".out*"))


def _layers(path):
    g = zarr.open_group(str(path), mode="r")
    return {n: np.asarray(g[n][:]) for n in LAYERS}


@pytest.mark.slow
def test_two_worker_processes_give_the_threads_result(tmp_path, monkeypatch, dem,
                                                      small_shards):
    # the GPU cluster's machinery on the CPU backend: two Nanny processes, the groups and
    # shards pinned to them; the input is a tile store made here (the workers read it)
    from distributed import get_task_stream

    from pipelines.cluster import active_gpu_workers, open_scheduler
    from pipelines.ingest import ingest

    z, path = dem
    store = tmp_path / "dem.zarr"
    ingest(path, store, tile=8, scheduler="threads")
    sources = ["3,4", "55,40", "10,49"]
    common = dict(cells=sources, tile=8, tile_sssp=4, backend="cpu")
    want = {}
    for algorithm in ("tiled", "in-core"):
        cd.run_cost_distance(store, tmp_path / f"{algorithm}-threads.zarr", algorithm=algorithm,
                             scheduler="threads", **common)
        want[algorithm] = _layers(tmp_path / f"{algorithm}-threads.zarr")
    monkeypatch.setattr(cluster, "visible_gpus", lambda: ["0", "1"])
    with open_scheduler(gpus="2", quiet=True) as client:
        workers = active_gpu_workers()
        # the worker processes make the output layers: the same small shards as here (else
        # two write tasks would share a shard and one could undo the other's write)
        client.run(exec, "import terrain.tiles.store as s; s.SHARD_TARGET_SIDE = 16")
        assert set(client.run(eval, "__import__('terrain.tiles.store', fromlist=['s'])"
                                    ".SHARD_TARGET_SIDE").values()) == {16}
        for algorithm in ("tiled", "in-core"):
            out = tmp_path / f"{algorithm}-2.zarr"
            with get_task_stream(client) as ts:
                summary = cd.run_cost_distance(store, out, algorithm=algorithm, **common)
            assert summary["gpus"] == 2
            assert summary["gpus_used"] == (2 if algorithm == "tiled" else 1)
            ran = {}
            for rec in ts.data:
                st = _stage(rec["key"])
                if st and (algorithm == "in-core" or len(st[1]) == 2):
                    ran[(st[0], st[1])] = rec["worker"]
            if algorithm == "tiled":
                groups = sorted(i for s, i in ran if s == "index-leaf")
                on = assign_groups(groups, workers)
                assert {w for (s, i), w in ran.items() if s == "fill"} == set(workers)
                for (stage, index), worker in ran.items():
                    if stage in ("index-leaf", "src-leaf", "down-apply"):
                        assert worker == on[index], (stage, index)
            else:
                assert set(ran.values()) == {workers[0]}
            got = _layers(out)
            for n in LAYERS:
                np.testing.assert_array_equal(got[n], want[algorithm][n], err_msg=n)


def _cli(*argv, timeout=300):
    proc = subprocess.run([sys.executable, "-m", "terrain.run", *map(str, argv)],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "Warning" not in proc.stderr
    return proc


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ["tiled", "in-core"])
def test_cost_distance_on_all_gpus_equals_one_gpu(tmp_path, algorithm):
    # --gpus all (one GPU is enough) against the plain GPU run: the same bits
    src = tmp_path / "g.asc"
    _cli("synth", "--rows", "200", "--cols", "150", "--nodata", "0.02", "-o", src)
    common = ["--source-cell", "10,12", "--source-cell", "190,140", "--tile", "32",
              "--algorithm", algorithm, "--json"]
    _cli("cost-distance", src, "-o", tmp_path / "one.zarr", "--backend", "gpu",
         "--scheduler", "threads", *common)
    s = json.loads(_cli("cost-distance", src, "-o", tmp_path / "all.zarr", "--gpus", "all",
                        *common).stdout)
    assert s["algorithm"] == algorithm and s["backend"] == "gpu" and s["gpus"] >= 1
    assert s["gpus_used"] == (s["gpus"] if algorithm == "tiled" else 1)
    if algorithm == "in-core":  # fits one GPU: solved in this process on GPU 0, no workers
        assert s["path"] == "in-process" and s["note"] == f"fits one GPU: in core on GPU 0 of {s['gpus']}"
    want, got = _layers(tmp_path / "one.zarr"), _layers(tmp_path / "all.zarr")
    for n in LAYERS:
        assert got[n].tobytes() == want[n].tobytes(), n


def test_summary_says_how_many_gpus_served():
    s = {"output": "o.zarr", "rows": 3, "cols": 4, "connectivity": 8, "cost": "absdiff",
         "sources": [{}], "reached_cells": 12, "max_distance": 2.0, "algorithm": "in-core",
         "queue": "near-far", "backend": "gpu", "device": "GPU", "seconds": 1.0,
         "solve_seconds": 0.1, "read_seconds": 0.1, "write_seconds": 0.1, "gpus": 4,
         "gpus_used": 1, "note": "fits one GPU: in core on GPU 0 of 4"}
    assert "gpus      fits one GPU: in core on GPU 0 of 4" in cd._format_summary(s).splitlines()
    del s["note"]
    s.update(algorithm="tiled", gpus_used=4)
    assert "gpus      4 of 4 GPU workers" in cd._format_summary(s).splitlines()
    del s["gpus"], s["gpus_used"]
    assert "gpus" not in cd._format_summary(s)


@pytest.mark.gpu
def test_batch_cost_distance_on_the_gpus(tmp_path):
    rasters = tmp_path / "in"
    rasters.mkdir()
    for seed in (1, 2):
        _cli("synth", "--rows", "120", "--cols", "90", "--seed", seed, "-o",
             rasters / f"d{seed}.asc")
    _cli("batch", "cost-distance", rasters, "-o", tmp_path / "out", "--source-cell", "5,5",
         "--gpus", "all", "--tile", "32")
    for seed in (1, 2):
        _cli("cost-distance", rasters / f"d{seed}.asc", "-o", tmp_path / f"ref{seed}.zarr",
             "--source-cell", "5,5", "--tile", "32", "--backend", "gpu", "--scheduler",
             "threads")
        a, b = _layers(tmp_path / "out" / f"d{seed}.cost.zarr"), _layers(
            tmp_path / f"ref{seed}.zarr")
        for n in LAYERS:
            assert a[n].tobytes() == b[n].tobytes(), (seed, n)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [f["status"] for f in manifest["files"]] == ["done", "done"]
