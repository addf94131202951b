"""A worker process killed mid-run: Dask reruns its tasks elsewhere and the result is the same.

Tasks are idempotent (whole shards rewritten; a finished task's checkpoint in the partial
output is returned instead of redoing its writes), so a task recomputed because the worker
holding its result died cannot undo a later task's write.
"""

import glob
import json
import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr
from cli import child_env


@pytest.mark.slow
def test_mst_survives_a_killed_worker(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 2200, 400, seed=5, nodata=0.02)  # 2 shards, 2 bands
    monkeypatch.setenv("PYTHONPATH", child_env()["PYTHONPATH"])
    # absolute paths: the workers run in another directory
    argv = [sys.executable, "-m", "terrain.run", "mst", str(tmp_path / "g.asc"), "--tile", "256",
            "--backend", "cpu", "--json"]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.CRITICAL) as cluster:
        proc = subprocess.Popen(argv + ["-o", str(tmp_path / "m.zarr"),
                                        "--scheduler", cluster.scheduler_address],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        t0 = time.monotonic()
        while not glob.glob(str(tmp_path / ".m.zarr.partial-*/.terrain-checkpoints/ingest-band-*")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() - t0 < 60
            time.sleep(0.01)
        victim = next(iter(cluster.workers.values())).process.pid
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        removed = [e for e in cluster.scheduler.get_events("all")
                   if isinstance(e[1], dict) and e[1].get("action") == "remove-worker"]
        assert removed, "the worker was not lost"
    remote = json.loads(out)
    ref = subprocess.run(argv + ["-o", "ref.zarr", "--scheduler", "synchronous"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert ref.returncode == 0, ref.stderr
    local = json.loads(ref.stdout)
    a = zarr.open_group(str(tmp_path / "m.zarr"), mode="r")
    b = zarr.open_group(str(tmp_path / "ref.zarr"), mode="r")
    for k in ("elevation", "mst"):
        assert np.asarray(a[k][:]).tobytes() == np.asarray(b[k][:]).tobytes(), k
    for k in ("total_weight", "edges", "trees", "vertices"):
        assert remote[k] == local[k]


@pytest.mark.slow
def test_worker_killed_mid_shard_write_on_a_dask_cluster(tmp_path):
    """``dask scheduler`` + two ``dask worker`` processes on 127.0.0.1; one worker dies in the
    middle of rewriting a mask shard: the task runs again on the other and the forest is the
    one a single process computes (a shard rewritten in place was torn, and the retry failed
    on its checksum)."""
    pytest.importorskip("distributed")
    from cli import dask_cluster, killed_mid_shard, stop_processes
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 2200, 1000, seed=5, nodata=0.02)  # 2 shards at tile 256, tiled
    # loaded by every worker (--preload): the first to rewrite a shard dies, once in all
    marker = tmp_path / "killed"
    (tmp_path / "kill_mid_shard.py").write_text(killed_mid_shard(marker))
    workdir = tmp_path / "workers"  # the workers run elsewhere
    workdir.mkdir()
    env = child_env()
    address, procs = dask_cluster(workdir, "scheduler", "--nthreads", "1", "--no-nanny",
                                  preload=tmp_path / "kill_mid_shard.py", workers=2)
    try:
        argv = [sys.executable, "-m", "terrain.run", "mst", str(tmp_path / "g.asc"), "--tile",
                "256", "--backend", "cpu", "--json"]
        proc = subprocess.run(argv + ["-o", str(tmp_path / "m.zarr"), "--scheduler", address],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        assert marker.exists(), "no worker was killed mid-shard"
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr
        assert procs[1].poll() is not None or procs[2].poll() is not None  # one is gone
    finally:
        stop_processes(procs)
    ref = subprocess.run(argv + ["-o", str(tmp_path / "ref.zarr"), "--scheduler", "synchronous"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr
    a = zarr.open_group(str(tmp_path / "m.zarr"), mode="r")
    b = zarr.open_group(str(tmp_path / "ref.zarr"), mode="r")
    for k in ("elevation", "mst"):
        assert np.asarray(a[k][:]).tobytes() == np.asarray(b[k][:]).tobytes(), k
    remote, local = json.loads(proc.stdout), json.loads(ref.stdout)
    for k in ("total_weight", "edges", "trees", "vertices"):
        assert remote[k] == local[k]
    assert not list((tmp_path / "m.zarr").rglob("*.partial"))
