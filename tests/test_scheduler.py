"""Pipelines run on any scheduler: an existing cluster reached by address, or local ones."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample.asc"


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
                               str(tmp_path / "m.zarr"), "--backend", "cpu", "--json"],
                              capture_output=True, text=True, timeout=300)
    finally:
        holder.close()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("terrain: Dask dashboard at http"), proc.stderr
    assert ":8787/" not in lines[0]
    assert json.loads(proc.stdout)["edges"] > 0
