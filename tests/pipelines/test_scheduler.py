"""Pipelines run on any scheduler: an existing cluster reached by address, or local ones."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample.asc"


def _mst(tmp_path, name, scheduler):
    out = tmp_path / name
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(SAMPLE), "-o", str(out),
                           "--tile", "64", "--backend", "cpu", "--scheduler", scheduler, "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), np.asarray(zarr.open_group(str(out), mode="r")["mst"][:])


def test_mst_on_an_existing_cluster_equals_local_run(tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  protocol="tcp", dashboard_address=None) as cluster:
        remote, remote_mask = _mst(tmp_path, "remote.zarr", cluster.scheduler_address)
        # the work really ran on that cluster
        ran = cluster.scheduler.task_prefixes
        assert {"ingest-band", "mst-finish"} <= set(ran), list(ran)
    local, local_mask = _mst(tmp_path, "local.zarr", "synchronous")
    assert remote["levels"] > 1  # merges above the tiles ran
    assert np.array_equal(remote_mask, local_mask)
    for key in ("total_weight", "edges", "trees", "vertices"):
        assert remote[key] == local[key]


def test_default_cluster_takes_another_port_quietly_when_8787_is_busy(tmp_path):
    import socket
    holder = socket.socket()
    try:
        holder.bind(("", 8787))
        holder.listen()
    except OSError:
        pass  # already taken by someone else: the same situation
    try:
        proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(SAMPLE), "-o",
                               str(tmp_path / "m.zarr"), "--backend", "cpu", "--json",
                               "--scheduler", "local"],
                              capture_output=True, text=True, timeout=300)
    finally:
        holder.close()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("terrain: Dask dashboard at http"), proc.stderr
    assert ":8787/" not in lines[0]
    assert json.loads(proc.stdout)["edges"] > 0


def test_small_grid_by_default_runs_without_a_cluster_and_equals_one(tmp_path):
    """No dashboard for a grid far below DASHBOARD_MIN_CELLS; the same forest as on the
    LocalCluster that ``--scheduler local`` starts."""
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(SAMPLE), "-o",
                           str(tmp_path / "d.zarr"), "--tile", "64", "--backend", "cpu", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "dashboard" not in proc.stderr
    default = json.loads(proc.stdout)
    local, local_mask = _mst(tmp_path, "l.zarr", "local")
    assert np.array_equal(np.asarray(zarr.open_group(str(tmp_path / "d.zarr"), mode="r")["mst"][:]),
                          local_mask)
    assert default["total_weight"] == local["total_weight"]


def test_in_process_cluster_samples_and_ticks_less_often():
    """The LocalCluster that ``open_scheduler`` starts takes IN_PROCESS_CONFIG (docs/architecture.md)."""
    pytest.importorskip("distributed")
    from pipelines.cluster import open_scheduler

    with open_scheduler("local", quiet=True) as client:
        worker = next(iter(client.cluster.workers.values()))
        profile = worker.periodic_callbacks["profile"].callback_time
    assert profile == 100  # ms; distributed's default is 10
