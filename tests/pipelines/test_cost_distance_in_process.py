"""The in-core ``cost-distance`` on the default scheduler runs without a task graph
(``pipelines.cost_distance.run_in_process``): the same store, byte for byte, as the task
graph on Dask's threads, for a raster input (ingested first, with a friction raster), a tile
store and a ``--reuse`` query; bad input still leaves nothing. On the GPU the start-up
thread (``pipelines.cost_distance_start``) changes no byte either."""

import json
import os
import subprocess
import sys
from argparse import Namespace
from types import SimpleNamespace

import numpy as np
import pytest
import zarr

from cli import run_main
from grids import random_dem, write_asc

from pipelines import cost_distance_start as start
from pipelines.cost_distance import in_process_applies


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
    assert "dashboard" not in se, se  # no LocalCluster either way
    return json.loads(so)


def _same_stores(a, b):
    fa, fb = _files(a), _files(b)
    assert sorted(fa) == sorted(fb)
    assert len(fa) > 10
    for name in fa:
        assert fa[name] == fb[name], name


def test_in_process_path_writes_the_task_graphs_bytes(capsys, tmp_path, dem):
    z, path = dem
    rng = np.random.default_rng(12)
    fpath = write_asc(tmp_path / "fr.asc", rng.uniform(1, 3, z.shape).round(2).astype(np.float32))
    args = [path, "--source-cell", "4,7", "--source-cell", "66,50", "--cost", "tobler",
            "--friction", fpath]
    direct = _run(capsys, *args, "-o", tmp_path / "a.zarr")
    graph = _run(capsys, *args, "-o", tmp_path / "b.zarr", scheduler="threads")
    assert direct["path"] == "in-process" and "path" not in graph
    assert {"read + solve", "writes after the solve"} <= set(direct["wall_seconds"])
    assert direct["reached_cells"] == graph["reached_cells"] > 0
    _same_stores(tmp_path / "a.zarr", tmp_path / "b.zarr")
    # a --reuse query of the first store, both ways
    new = ["--source-cell", "20,33", "--cost", "tobler", "--friction", fpath, "--reuse",
           tmp_path / "a.zarr"]
    q1 = _run(capsys, path, *new, "-o", tmp_path / "q1.zarr")
    q2 = _run(capsys, path, *new, "-o", tmp_path / "q2.zarr", scheduler="threads")
    assert q1["reused"] == q2["reused"] == ["ingested DEM", "checked friction"]
    _same_stores(tmp_path / "q1.zarr", tmp_path / "q2.zarr")


def test_in_process_path_from_a_tile_store(capsys, tmp_path, dem):
    z, path = dem
    rc, _, se = run_main(capsys, "ingest", path, "-o", tmp_path / "dem.zarr", "--tile", 16)
    assert rc == 0, se
    args = [tmp_path / "dem.zarr", "--source-cell", "66,50", "--connectivity", 16]
    _run(capsys, *args, "-o", tmp_path / "a.zarr")
    _run(capsys, *args, "-o", tmp_path / "b.zarr", scheduler="synchronous")
    _same_stores(tmp_path / "a.zarr", tmp_path / "b.zarr")
    assert not (tmp_path / "a.zarr" / "elevation").exists()


def test_in_process_path_bad_input_leaves_nothing(capsys, tmp_path, dem):
    z, path = dem
    r, c = map(int, np.argwhere(np.isnan(z))[0])
    rc, so, se = run_main(capsys, "cost-distance", path, "--source-cell", f"{r},{c}", "-o",
                          tmp_path / "x.zarr", "--tile", 16, "--backend", "cpu", scheduler=None)
    assert rc == 2 and se.count("\n") == 1 and "nodata" in se, se
    assert not (tmp_path / "x.zarr").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["dem.asc"]


def test_the_rule():
    assert in_process_applies("in-core")
    assert not in_process_applies("in-core", scheduler="local")
    assert not in_process_applies("tiled")


def test_which_runs_start_the_device_early():
    assert not start._wanted(Namespace(scheduler="threads"))
    assert start._wanted(Namespace(gpus="2"))  # in core on GPU 0 of 2: early too
    assert not start._wanted(Namespace(backend="cpu"))
    assert not start._wanted(Namespace(backend="gpu", algorithm="tiled"))
    assert start._wanted(Namespace(backend="gpu", algorithm="auto"))
    assert start._wanted(Namespace(backend=None))
    start.wait_for_start_up()  # no thread: returns at once


@pytest.mark.gpu
def test_gpu_in_process_with_the_start_up_equals_the_task_graph(tmp_path, dem):
    """The command line (a process of its own: the start-up thread runs), GPU, default
    scheduler (the layers written off the device): a fresh run from a tile store and a
    --reuse query of a raster run's store write the task graph's bytes, as the query does
    with ``hostout`` (the layers downloaded whole first), and the CPU's layers."""
    z, path = dem
    env = dict(os.environ)

    def cli(*argv):
        proc = subprocess.run([sys.executable, "-m", "terrain.run", "cost-distance",
                               *map(str, argv), "--tile", "16", "--json", "--backend", "gpu"],
                              capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "dashboard" not in proc.stderr, proc.stderr
        return json.loads(proc.stdout)

    subprocess.run([sys.executable, "-m", "terrain.run", "ingest", str(path), "-o",
                    str(tmp_path / "dem.zarr"), "--tile", "16", "--scheduler", "threads"],
                   check=True, capture_output=True)
    s1 = cli(tmp_path / "dem.zarr", "--source-cell", "4,7", "-o", tmp_path / "a.zarr")
    cli(tmp_path / "dem.zarr", "--source-cell", "4,7", "-o", tmp_path / "b.zarr",
        "--scheduler", "threads")
    assert s1["path"] == "in-process"
    assert "kernels and pinned buffers (thread)" in s1["wall_seconds"], s1["wall_seconds"]
    assert "waited for the DEM read" in s1["wall_seconds"], s1["wall_seconds"]  # taken
    assert "waited for the start-up solve's distances" in s1["wall_seconds"]  # taken too
    _same_stores(tmp_path / "a.zarr", tmp_path / "b.zarr")
    cli(path, "--source-cell", "4,7", "-o", tmp_path / "r.zarr", "--scheduler", "threads")
    new = ["--source-cell", "66,50", "--source-cell", "20,33", "--reuse", tmp_path / "r.zarr"]
    q1 = cli(path, *new, "-o", tmp_path / "q1.zarr")
    cli(path, *new, "-o", tmp_path / "q2.zarr", "--scheduler", "threads")
    assert "waited for the start-up thread" in q1["wall_seconds"], q1["wall_seconds"]
    assert "waited for the DEM read" in q1["wall_seconds"], q1["wall_seconds"]  # hard links
    assert "waited for the start-up solve's distances" in q1["wall_seconds"]
    _same_stores(tmp_path / "q1.zarr", tmp_path / "q2.zarr")
    env["TERRAIN_COST_START"] = "hostout"  # the outputs downloaded whole before the writes
    cli(path, *new, "-o", tmp_path / "q3.zarr")
    _same_stores(tmp_path / "q1.zarr", tmp_path / "q3.zarr")
    g1 = zarr.open_group(str(tmp_path / "q1.zarr"), mode="r")
    cpu = tmp_path / "c.zarr"
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "cost-distance", str(path),
                           *map(str, new[:4]), "-o", str(cpu), "--tile", "16", "--backend",
                           "cpu", "--scheduler", "threads"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    g2 = zarr.open_group(str(cpu), mode="r")
    for name in ("distance", "allocation", "backlink"):
        np.testing.assert_array_equal(np.asarray(g1[name][:]), np.asarray(g2[name][:]),
                                      err_msg=name)


def test_the_dem_read_at_start_up_is_taken_only_for_the_same_bytes(capsys, tmp_path, dem):
    """The start-up's DEM read (``take_early_read``): the layer's values, for the store it
    read and for a store whose layer is hard links of it (a --reuse query's); None for
    a layer whose files changed, or where nothing was read."""
    from terrain.grid.cost_outputs import read_layer
    from terrain.tiles.store import link_layer
    z, path = dem
    be = SimpleNamespace(xp=SimpleNamespace(cuda=SimpleNamespace(  # a device of 1 GB free
        Device=lambda: SimpleNamespace(mem_info=(1 << 30, 1 << 30)))))
    rc, _, se = run_main(capsys, "ingest", path, "-o", tmp_path / "dem.zarr", "--tile", 16)
    assert rc == 0, se
    want = read_layer(tmp_path / "dem.zarr", "elevation", np.float32)
    np.testing.assert_array_equal(want, z)
    assert start.take_early_read(tmp_path / "dem.zarr") is None  # nothing read
    for reader_args in (Namespace(input=str(tmp_path / "dem.zarr"), reuse=None),
                        Namespace(input=str(path), reuse=str(tmp_path / "dem.zarr"))):
        start._start_early_read(reader_args, {"readers": "2"}, be)
        got = start.take_early_read(tmp_path / "dem.zarr")
        assert got is not None and got.dtype == np.float32
        np.testing.assert_array_equal(got, want)
        assert start.take_early_read(tmp_path / "dem.zarr") is None  # handed out once
    zarr.open_group(str(tmp_path / "q.zarr"), mode="w", zarr_format=3)
    link_layer(tmp_path / "dem.zarr", tmp_path / "q.zarr", "elevation")
    start._start_early_read(Namespace(input=str(tmp_path / "dem.zarr")), {}, be)
    np.testing.assert_array_equal(start.take_early_read(tmp_path / "q.zarr"), want)
    start._start_early_read(Namespace(input=str(tmp_path / "dem.zarr")), {}, be)
    shard = next(p for p in (tmp_path / "dem.zarr" / "elevation").rglob("*")
                 if p.is_file() and p.name != "zarr.json")
    start._early["thread"].join()
    os.utime(shard, ns=(0, 0))  # the input changed after it was read
    assert start.take_early_read(tmp_path / "dem.zarr") is None
    assert start._start_early_read(Namespace(input=str(path), reuse=None), {}, be) is None
    assert start._start_early_read(Namespace(input=str(tmp_path / "dem.zarr")),
                                   {"noread": ""}, be) is None
    # a grid the in-core algorithm would not take is not read
    tiny = SimpleNamespace(xp=SimpleNamespace(cuda=SimpleNamespace(
        Device=lambda: SimpleNamespace(mem_info=(1000, 1000)))))
    start._start_early_read(Namespace(input=str(tmp_path / "dem.zarr")), {}, tiny)
    assert start.take_early_read(tmp_path / "dem.zarr") is None
    start._start_early_read(Namespace(input=str(tmp_path / "dem.zarr"), algorithm="in-core"),
                            {}, tiny)
    assert start.take_early_read(tmp_path / "dem.zarr") is not None


def test_the_start_up_solve_is_taken_only_for_the_same_call(capsys, tmp_path, dem):
    """The start-up thread's solve (here on the CPU backend): ``take_early_solve`` hands it
    out for the call the command would make (the same distances, labels, backlinks as a
    call of its own), and None for any other call."""
    from terrain.backend import get_backend
    from terrain.grid.sssp import grid_sssp
    from terrain.tiles import open_store
    z, path = dem
    rc, _, se = run_main(capsys, "ingest", path, "-o", tmp_path / "dem.zarr", "--tile", 16)
    assert rc == 0, se
    gt = open_store(tmp_path / "dem.zarr").geotransform
    cellsize = (abs(gt[1]), abs(gt[5]))
    be = get_backend("cpu")
    args = Namespace(input=str(tmp_path / "dem.zarr"), reuse=None, algorithm="in-core",
                     source_cell=["66,50", "4,7"], source=None, cost="tobler",
                     connectivity=16, start_cost=0.5, max_cost=None)
    call = ([(66, 50), (4, 7)], np.array([0.5, 0.5]), "tobler", 16, cellsize, None, None)
    start._start_early_read(args, {}, be)
    grid = start.take_early_read(tmp_path / "dem.zarr")
    early = start.take_early_solve(grid, *call)
    assert early is not None
    np.testing.assert_array_equal(early.distance(), early.result().distance)
    own = grid_sssp(grid, call[0], call[1], cost="tobler", connectivity=16, cellsize=cellsize,
                    backend="cpu", hops=False)
    for name in ("distance", "allocation", "backlink"):
        np.testing.assert_array_equal(getattr(early.result(), name), getattr(own, name))
    assert start.take_early_solve(grid, *call) is None  # handed out once
    for other in ([(66, 50)], np.array([0.5]), "tobler", 16, cellsize, None, None), \
                 (call[0], None, "tobler", 16, cellsize, None, None), \
                 (call[0], call[1], "absdiff", 16, cellsize, None, None), \
                 (call[0], call[1], "tobler", 8, cellsize, None, None), \
                 (call[0], call[1], "tobler", 16, cellsize, 5.0, None), \
                 (call[0], call[1], "tobler", 16, cellsize, None, 2.0):
        start._start_early_read(args, {}, be)
        assert start.take_early_solve(start.take_early_read(tmp_path / "dem.zarr"),
                                      *other) is None, other
    start._start_early_read(args, {}, be)  # another grid than the one read
    assert start.take_early_solve(z.copy(), *call) is None
    start._early["thread"].join()
    # a solve that fails (a source on nodata): no result, the command's own call says why
    from pipelines.cost_distance import _take_early_solve
    r, c = map(int, np.argwhere(np.isnan(z))[0])
    start._start_early_read(Namespace(**dict(vars(args), source_cell=[f"{r},{c}"])), {}, be)
    early = start.take_early_solve(start.take_early_read(tmp_path / "dem.zarr"), [(r, c)],
                                   np.array([0.5]), "tobler", 16, cellsize, None, None)
    assert early is not None and early.distance() is None
    assert _take_early_solve(early, None) is None


def test_the_command_takes_the_start_up_read_and_solve(capsys, tmp_path, dem, monkeypatch):
    """The start-up's DEM read and solve, taken by the command (the GPU's start-up, run
    here on the CPU): the store is byte for byte the one of a run without them, for a
    fresh run from a tile store and a --reuse query of its store."""
    import terrain.backend
    import terrain.grid.sssp as sssp
    z, path = dem
    rc, _, se = run_main(capsys, "ingest", path, "-o", tmp_path / "dem.zarr", "--tile", 16)
    assert rc == 0, se
    fresh = [tmp_path / "dem.zarr", "--source-cell", "66,50", "--source-cell", "4,7"]
    query = [tmp_path / "dem.zarr", "--source-cell", "20,33", "--reuse", tmp_path / "a.zarr"]
    _run(capsys, *fresh, "-o", tmp_path / "a.zarr")
    _run(capsys, *query, "-o", tmp_path / "q.zarr")
    real = sssp.grid_sssp
    device = SimpleNamespace(is_gpu=True, name="gpu", xp=SimpleNamespace(cuda=SimpleNamespace(
        Device=lambda: SimpleNamespace(mem_info=(1 << 30, 1 << 30)))))
    monkeypatch.setattr(start, "_wanted", lambda args: True)
    monkeypatch.setattr(terrain.backend, "get_backend", lambda name=None: device)
    monkeypatch.setenv("TERRAIN_COST_START", "hostout")  # the CPU's outputs: host arrays
    monkeypatch.setattr(sssp, "grid_sssp", lambda *a, backend=None, **k: real(
        *a, backend="cpu", **k))
    s1 = _run(capsys, *fresh, "-o", tmp_path / "b.zarr")
    s2 = _run(capsys, *query[:-1], tmp_path / "b.zarr", "-o", tmp_path / "r.zarr")
    for s in (s1, s2):
        assert "waited for the start-up solve's distances" in s["wall_seconds"], s
    _same_stores(tmp_path / "a.zarr", tmp_path / "b.zarr")
    _same_stores(tmp_path / "q.zarr", tmp_path / "r.zarr")
