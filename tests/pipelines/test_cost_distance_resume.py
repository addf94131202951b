"""``cost-distance --resume``: a run killed mid-way (the process gone, its partial output
left) is finished by a resumed run into a fresh run's store, bit for bit: its ingested bands
are not read again, and on the tiled algorithm on the CPU its index, once whole, is not
built again."""

import json

import numpy as np
import pytest
import zarr

from cli import run_killed, run_main
from grids import random_dem

LAYERS = ("distance", "allocation", "backlink", "elevation")


@pytest.fixture
def dem(tmp_path):
    return random_dem(tmp_path, 3, (45, 37), 30, [(3, 4), (40, 30), (16, 16)],
                      5, barrier=(20, slice(None, 30)))


def _run(capsys, *argv):
    rc, so, se = run_main(capsys, "cost-distance", *argv, "--json", scheduler="synchronous")
    assert rc == 0, se
    return json.loads(so)


def _same_stores(a, b):
    a, b = zarr.open_group(str(a), mode="r"), zarr.open_group(str(b), mode="r")
    assert sorted(a.array_keys()) == sorted(b.array_keys())
    for name in LAYERS:
        assert a[name][...].tobytes() == b[name][...].tobytes(), name


@pytest.mark.parametrize("killed_in,index_kept", [("_fill_task", True),
                                                  ("_index_merge_task", False)])
def test_a_killed_tiled_run_resumes_to_a_fresh_runs_store(capsys, tmp_path, dem, small_shards,
                                                          killed_in, index_kept):
    """Killed after its index was whole (in the fills), the resumed run takes the index as
    ``--reuse`` takes an earlier store's; killed while building it, it builds it again. Either
    way the ingest's bands are reused and nothing of the run is left beside the output."""
    _, path = dem
    common = ["--source-cell", "3,4", "--source-cell", "40,30", "--tile", 8,
              "--route", "tiled", "--tile-sssp", 4]
    out = tmp_path / "c.zarr"
    run_killed(["cost-distance", path, "-o", out, *common, "--scheduler", "synchronous"],
               "pipelines.cost_distance_tiled", killed_in, 2, shard_side=16)
    (partial,) = tmp_path.glob(".c.zarr.partial-*")
    done = (partial / ".terrain-checkpoints" / "cost-index-done.npz").exists()
    assert done == index_kept
    s = _run(capsys, path, "-o", out, *common, "--resume")
    fresh = _run(capsys, path, "-o", tmp_path / "f.zarr", *common)
    assert s["resumed_index"] == index_kept and not fresh["resumed_index"]
    assert s["resumed"] and not fresh["resumed"]
    assert s["skipped_phases"] == (["phase 1", "phase 2 upward"] if index_kept else [])
    assert s["reuse"] is None and fresh["reused_tasks"] == 0
    # the ingest's tasks at least, and with the index its tasks too
    assert s["reused_tasks"] >= 2 + (fresh["index_tasks"] if index_kept else 0)
    assert not partial.exists() and not list(tmp_path.glob(".c.zarr*"))
    assert not (out / ".terrain-checkpoints").exists()
    assert "sssp_labels" not in zarr.open_group(str(out), mode="r")
    _same_stores(out, tmp_path / "f.zarr")
    assert s["reached_cells"] == fresh["reached_cells"]


@pytest.mark.gpu
def test_a_killed_gpu_tiled_run_resumes_to_the_cpus_store(capsys, tmp_path, dem, small_shards):
    """On the GPU a resumed run takes the ingest's bands and builds its index again (the
    device builds it as fast as the stored one is read back): a run killed as it ends
    resumes to the CPU's store."""
    _, path = dem
    common = ["--source-cell", "3,4", "--source-cell", "40,30", "--tile", 8,
              "--route", "tiled", "--tile-sssp", 4, "--max-height", 0]
    out = tmp_path / "c.zarr"
    run_killed(["cost-distance", path, "-o", out, *common, "--backend", "gpu", "--scheduler",
                "threads"], "pipelines.cost_distance_tiled", "_finish", 1, shard_side=16)
    s = _run(capsys, path, "-o", out, *common, "--backend", "gpu", "--resume")
    _run(capsys, path, "-o", tmp_path / "cpu.zarr", *common, "--backend", "cpu")
    assert s["resumed"] and not s["resumed_index"] and s["backend"] == "gpu"
    assert s["reused_tasks"] >= 2 and s["index_tasks"] > 0
    _same_stores(out, tmp_path / "cpu.zarr")


def test_a_killed_blocked_run_resumes_to_a_fresh_runs_store(capsys, tmp_path, dem,
                                                            small_shards):
    """Killed while writing its layers: the resumed run reuses the ingest's bands, solves
    again from fresh block states (the killed run's scratch is not read) and writes the
    same store."""
    _, path = dem
    common = ["--source-cell", "3,4", "--source-cell", "16,16", "--tile", 8,
              "--route", "blocked", "--memory", "1MB"]
    out = tmp_path / "c.zarr"
    run_killed(["cost-distance", path, "-o", out, *common, "--scheduler", "synchronous"],
               "pipelines.cost_distance_blocked", "_write_task", 1, shard_side=16)
    assert list(tmp_path.glob(".c.zarr.partial-*.blocked"))  # the killed run's block states
    s = _run(capsys, path, "-o", out, *common, "--resume")
    fresh = _run(capsys, path, "-o", tmp_path / "f.zarr", *common)
    assert s["route"] == "blocked" and s["blocks"] > 1
    assert s["reused_tasks"] >= 2 and fresh["reused_tasks"] == 0
    assert not list(tmp_path.glob(".c.zarr*"))
    _same_stores(out, tmp_path / "f.zarr")


def test_resume_without_a_partial_is_a_fresh_run(capsys, tmp_path, dem, small_shards):
    """Nothing to resume (no partial): the run starts afresh; in core it
    keeps no steps, so a resumed in-core run is a fresh one too."""
    _, path = dem
    for algorithm in ("tiled", "in-core"):
        s = _run(capsys, path, "-o", tmp_path / f"{algorithm}.zarr", "--source-cell", "3,4",
                 "--tile", 8, "--route", algorithm, "--resume")
        assert s["route"] == algorithm and s["reused_tasks"] == 0
    a = zarr.open_group(str(tmp_path / "tiled.zarr"), mode="r")
    b = zarr.open_group(str(tmp_path / "in-core.zarr"), mode="r")
    for name in ("distance", "allocation", "backlink"):
        np.testing.assert_array_equal(a[name][...], b[name][...], err_msg=name)
