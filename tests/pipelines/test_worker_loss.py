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
from pathlib import Path

import numpy as np
import pytest
import zarr

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_mst_survives_a_killed_worker(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 2200, 400, seed=5, nodata=0.02)  # 2 shards, 2 bands
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
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
