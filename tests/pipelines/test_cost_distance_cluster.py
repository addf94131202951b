"""Cost distance on a real cluster of two worker processes (CPU backend): the threads
scheduler's bits."""

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
                                 route=algorithm, scheduler="threads", **common, **extra)
            cd.run_cost_distance(store, tmp_path / f"{algorithm}-2.zarr", route=algorithm,
                                 scheduler=address, **common, **extra)
            want = _layers(tmp_path / f"{algorithm}-threads.zarr")
            got = _layers(tmp_path / f"{algorithm}-2.zarr")
            for n in LAYERS:
                np.testing.assert_array_equal(got[n], want[n], err_msg=(algorithm, n))


@pytest.mark.slow
def test_the_in_process_cluster_gives_the_threads_result(tmp_path, dem, small_shards):
    """Every algorithm on the in-process LocalCluster (``local``: the default above 8192²
    cells, where ``auto`` picks the blocked algorithm under a budget): the threads
    scheduler's bits. The blocked run's context (its block cache and lock) is pickled with
    the task graph as a name of the one held in this process (it failed to serialize)."""
    pytest.importorskip("distributed")
    from pipelines.ingest import ingest

    _, path = dem
    store = tmp_path / "dem.zarr"
    ingest(path, store, tile=8, scheduler="threads")
    common = dict(cells=["3,4", "55,40", "10,49"], tile=8, backend="cpu")
    for algorithm, extra in (("blocked", {"memory": "1MB"}), ("tiled", {"tile_sssp": 4}),
                             ("in-core", {})):
        for scheduler in ("threads", "local"):
            cd.run_cost_distance(store, tmp_path / f"{algorithm}-{scheduler}.zarr",
                                 route=algorithm, scheduler=scheduler, **common, **extra)
        want = _layers(tmp_path / f"{algorithm}-threads.zarr")
        got = _layers(tmp_path / f"{algorithm}-local.zarr")
        for n in LAYERS:
            np.testing.assert_array_equal(got[n], want[n], err_msg=(algorithm, n))
