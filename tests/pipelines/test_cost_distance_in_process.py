"""The in-core ``cost-distance`` runs its tasks in this process, with no task graph, unless
the run is on a cluster: the store is the cluster's graph's, byte for byte, for a raster
input (ingested first, with a friction raster), a tile store and a ``--reuse`` query; bad
input still leaves nothing; on the GPU the layers written off the device are the same
bytes."""

import json
import subprocess
import sys

import numpy as np
import pytest
import zarr

from cli import run_main
from grids import random_dem, write_asc

from pipelines.cluster import runs_in_process


@pytest.fixture
def dem(tmp_path):
    return random_dem(tmp_path, 11, (75, 61), 50, [(4, 7), (66, 50), (20, 33)], 9)


def _files(path):
    """Every file of a store but the group's own metadata (the summary holds timings)."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file() and str(p.relative_to(path)) != "zarr.json"}


def _run(capsys, *argv, scheduler=None, backend="cpu"):
    rc, so, se = run_main(capsys, "cost-distance", *argv, "--tile", 16, "--json",
                          "--backend", backend, scheduler=scheduler)
    assert rc == 0, se
    return json.loads(so)


def _same_stores(a, b):
    fa, fb = _files(a), _files(b)
    assert sorted(fa) == sorted(fb)
    assert len(fa) > 10
    for name in fa:
        assert fa[name] == fb[name], name


@pytest.mark.slow
def test_in_process_writes_the_cluster_graphs_bytes(capsys, tmp_path, dem):
    z, path = dem
    rng = np.random.default_rng(12)
    fpath = write_asc(tmp_path / "fr.asc", rng.uniform(1, 3, z.shape).round(2).astype(np.float32))
    args = [path, "--source-cell", "4,7", "--source-cell", "66,50", "--cost", "tobler",
            "--friction", fpath]
    direct = _run(capsys, *args, "-o", tmp_path / "a.zarr")
    graph = _run(capsys, *args, "-o", tmp_path / "b.zarr", scheduler="local")
    assert direct["path"] == "in-process" and "path" not in graph
    assert {"ingest", "read + solve", "writes after the solve"} <= set(direct["wall_seconds"])
    assert direct["reached_cells"] == graph["reached_cells"] > 0
    _same_stores(tmp_path / "a.zarr", tmp_path / "b.zarr")
    # a --reuse query of the first store, both ways
    new = ["--source-cell", "20,33", "--cost", "tobler", "--friction", fpath, "--reuse",
           tmp_path / "a.zarr"]
    q1 = _run(capsys, path, *new, "-o", tmp_path / "q1.zarr")
    q2 = _run(capsys, path, *new, "-o", tmp_path / "q2.zarr", scheduler="local")
    assert q1["reused"] == q2["reused"] == ["ingested DEM", "checked friction"]
    _same_stores(tmp_path / "q1.zarr", tmp_path / "q2.zarr")


def test_in_process_from_a_tile_store(capsys, tmp_path, dem):
    z, path = dem
    rc, _, se = run_main(capsys, "ingest", path, "-o", tmp_path / "dem.zarr", "--tile", 16)
    assert rc == 0, se
    args = [tmp_path / "dem.zarr", "--source-cell", "66,50", "--connectivity", 16]
    a = _run(capsys, *args, "-o", tmp_path / "a.zarr")
    b = _run(capsys, *args, "-o", tmp_path / "b.zarr", scheduler="synchronous")
    assert a["path"] == b["path"] == "in-process"
    _same_stores(tmp_path / "a.zarr", tmp_path / "b.zarr")
    assert not (tmp_path / "a.zarr" / "elevation").exists()


def test_in_process_bad_input_leaves_nothing(capsys, tmp_path, dem):
    z, path = dem
    r, c = map(int, np.argwhere(np.isnan(z))[0])
    rc, so, se = run_main(capsys, "cost-distance", path, "--source-cell", f"{r},{c}", "-o",
                          tmp_path / "x.zarr", "--tile", 16, "--backend", "cpu", scheduler=None)
    assert rc == 2 and se.count("\n") == 1 and "nodata" in se, se
    assert not (tmp_path / "x.zarr").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["dem.asc"]


@pytest.mark.parametrize("cell", [(float("nan"), 1), (2.5, 1), ("a", 1)])
def test_source_cells_that_are_no_whole_numbers_are_said_so(tmp_path, dem, cell):
    """As terrain.cost_distance says it; a NaN cell was "outside the raster"."""
    from pipelines.cost_distance import run_cost_distance
    from terrain.errors import InputError
    with pytest.raises(InputError, match=r"source cell \(.*\): cells must be whole \(row, "
                                         r"col\) numbers"):
        run_cost_distance(dem[1], tmp_path / "x.zarr", cells=[cell], backend="cpu")
    assert not (tmp_path / "x.zarr").exists()


def test_the_rule():
    assert runs_in_process() and runs_in_process("threads") and runs_in_process("synchronous")
    assert not runs_in_process("local") and not runs_in_process("tcp://127.0.0.1:8786")


@pytest.mark.gpu
def test_gpu_in_process_equals_the_cluster_graph_and_the_cpu(tmp_path, dem):
    """The command line, GPU, in process (the layers written off the device): a fresh run
    from a tile store and a --reuse query of a raster run's store write the cluster graph's
    bytes (the layers downloaded whole), and the CPU's layers."""
    z, path = dem

    def cli(*argv, backend="gpu"):
        proc = subprocess.run([sys.executable, "-m", "terrain.run", "cost-distance",
                               *map(str, argv), "--tile", "16", "--json", "--backend", backend],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    subprocess.run([sys.executable, "-m", "terrain.run", "ingest", str(path), "-o",
                    str(tmp_path / "dem.zarr"), "--tile", "16", "--scheduler", "threads"],
                   check=True, capture_output=True)
    s1 = cli(tmp_path / "dem.zarr", "--source-cell", "4,7", "-o", tmp_path / "a.zarr")
    cli(tmp_path / "dem.zarr", "--source-cell", "4,7", "-o", tmp_path / "b.zarr",
        "--scheduler", "local")
    assert s1["path"] == "in-process"
    _same_stores(tmp_path / "a.zarr", tmp_path / "b.zarr")
    cli(path, "--source-cell", "4,7", "-o", tmp_path / "r.zarr")
    new = ["--source-cell", "66,50", "--source-cell", "20,33", "--reuse", tmp_path / "r.zarr"]
    cli(path, *new, "-o", tmp_path / "q1.zarr")
    cli(path, *new, "-o", tmp_path / "q2.zarr", "--scheduler", "local")
    _same_stores(tmp_path / "q1.zarr", tmp_path / "q2.zarr")
    cli(path, *new[:4], "-o", tmp_path / "c.zarr", backend="cpu")
    g1 = zarr.open_group(str(tmp_path / "q1.zarr"), mode="r")
    g2 = zarr.open_group(str(tmp_path / "c.zarr"), mode="r")
    for name in ("distance", "allocation", "backlink"):
        np.testing.assert_array_equal(np.asarray(g1[name][:]), np.asarray(g2[name][:]),
                                      err_msg=name)
