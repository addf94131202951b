"""``cost-distance --gpus`` and ``batch cost-distance --gpus``: a run is one device's work
(GPU 0 of the N), the errors, a real two-worker-process cluster (CPU backend) giving the
threads scheduler's bits, and the GPU runs themselves (``gpu`` tests, one device is
enough)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import zarr

from pipelines import cost_distance as cd
from grids import random_dem

LAYERS = ("distance", "allocation", "backlink")


@pytest.fixture
def dem(tmp_path):
    return random_dem(tmp_path, 4, (61, 50), 40, [(3, 4), (55, 40)], 7,
                      barrier=(30, slice(5, 45)))


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
def test_two_worker_processes_give_the_threads_result(tmp_path, dem, small_shards):
    """Every algorithm's tasks on a cluster of two worker processes (the CPU backend): the
    threads scheduler's bits."""
    distributed = pytest.importorskip("distributed")
    import logging

    from pipelines.ingest import ingest

    _, path = dem
    store = tmp_path / "dem.zarr"
    ingest(path, store, tile=8, scheduler="threads")
    common = dict(cells=["3,4", "55,40", "10,49"], tile=8, backend="cpu")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=logging.CRITICAL)
    with cluster:
        address = cluster.scheduler_address
        with distributed.Client(address) as client:
            client.run(exec, "import terrain.tiles.store as s; s.SHARD_TARGET_SIDE = 16")
        for algorithm, extra in (("tiled", {"tile_sssp": 4}), ("in-core", {})):
            cd.run_cost_distance(store, tmp_path / f"{algorithm}-threads.zarr",
                                 algorithm=algorithm, scheduler="threads", **common, **extra)
            cd.run_cost_distance(store, tmp_path / f"{algorithm}-2.zarr", algorithm=algorithm,
                                 scheduler=address, **common, **extra)
            want = _layers(tmp_path / f"{algorithm}-threads.zarr")
            got = _layers(tmp_path / f"{algorithm}-2.zarr")
            for n in LAYERS:
                np.testing.assert_array_equal(got[n], want[n], err_msg=(algorithm, n))


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
    assert s["gpus_used"] == 1 and s["note"] == f"one device's work: on GPU 0 of {s['gpus']}"
    if algorithm == "in-core":  # solved in this process, no workers
        assert s["path"] == "in-process"
    want, got = _layers(tmp_path / "one.zarr"), _layers(tmp_path / "all.zarr")
    for n in LAYERS:
        assert got[n].tobytes() == want[n].tobytes(), n


def test_summary_says_how_many_gpus_served():
    s = {"output": "o.zarr", "rows": 3, "cols": 4, "connectivity": 8, "cost": "absdiff",
         "sources": [{}], "reached_cells": 12, "max_distance": 2.0, "algorithm": "in-core",
         "queue": "near-far", "backend": "gpu", "device": "GPU", "seconds": 1.0,
         "solve_seconds": 0.1, "read_seconds": 0.1, "write_seconds": 0.1, "gpus": 4,
         "gpus_used": 1, "note": "one device's work: on GPU 0 of 4"}
    assert "gpus      one device's work: on GPU 0 of 4" in cd._format_summary(s).splitlines()
    del s["note"], s["gpus"], s["gpus_used"]
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
