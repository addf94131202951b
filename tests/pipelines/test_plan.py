"""``cost-distance --dry-run`` (pipelines/_plan.py, the planner ``mst`` and ``ingest`` use
too): the plan's numbers against the layers' dtypes and a real run's store, nothing
written, exit 0 / 2; and the command line's shared option tables (``cost-distance`` and
``batch cost-distance``, ``mst`` and ``batch mst``)."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import zarr

from cli import run_main
from cli import assert_one_line_error, run_terrain
from grids import write_asc
from cli import SAMPLE, snapshot
from grids import write_huge_sparse_tif


def _store_bytes(path):
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def _plan(capsys, *argv):
    rc, out, err = run_main(capsys, "cost-distance", *argv, "--dry-run", "--json")
    assert rc == 0 and err == "", err
    return json.loads(out)


@pytest.fixture
def sample(tmp_path):
    (tmp_path / "good.asc").write_bytes(SAMPLE.read_bytes())
    return tmp_path / "good.asc"


def test_in_core_plan_covers_the_real_output_and_writes_nothing(capsys, tmp_path, sample):
    from pipelines._plan import ELEVATION_BYTES_PER_CELL
    from pipelines.cost_distance import LAYER_STORED_BYTES as STORED_BYTES_PER_CELL
    from terrain.grid.sssp import incore_bytes
    from terrain.grid.cost_outputs import LAYERS

    before = snapshot(tmp_path)
    # the CPU backend: the same estimates on any, and a real run without compiling kernels
    plan = _plan(capsys, sample, "--source-cell", "3,4", "--source", "502005,4001505",
                 "--backend", "cpu")
    assert snapshot(tmp_path) == before  # nothing written, not even a partial
    assert (plan["rows"], plan["cols"], plan["tiles"], plan["levels"]) == (300, 400, [1, 1], 1)
    assert plan["route"] == "in-core" and plan["sources"] == 2 and plan["backend"] == "cpu"
    assert plan["output"] == str(tmp_path / "good.cost.zarr")
    # a raster input is ingested into the output; the result layers follow their dtypes
    assert plan["layers"] == ["elevation", "distance", "backlink", "allocation"]
    cells = 300 * 400
    for name in ("distance", "backlink", "allocation"):  # an estimate never above the raw size
        assert 0 < STORED_BYTES_PER_CELL[name] <= np.dtype(LAYERS[name][0]).itemsize
    want = round(cells * (ELEVATION_BYTES_PER_CELL + sum(STORED_BYTES_PER_CELL[n]
                                                         for n in plan["layers"][1:]))) + 700 * 8
    assert abs(plan["output_bytes"] - want) <= 1
    assert plan["disk_needed_bytes"] == plan["output_bytes"]  # no friction: no scratch
    assert plan["memory_per_task_bytes"] >= incore_bytes((300, 400))
    assert plan["disk_needed_bytes"] < plan["disk_free_bytes"]
    # the run itself: its store fits the estimate, which is not wildly above it
    rc, out, err = run_main(capsys, "cost-distance", sample, "--source-cell", "3,4",
                            "--source", "502005,4001505", "--backend", "cpu", "--json")
    assert rc == 0, err
    real = _store_bytes(tmp_path / "good.cost.zarr")
    assert real <= plan["output_bytes"] <= 3 * real, (real, plan["output_bytes"])


def test_plan_of_a_store_with_friction_and_geotiffs(capsys, tmp_path, sample):
    from pipelines._plan import ELEVATION_BYTES_PER_CELL
    from pipelines.cost_distance import LAYER_STORED_BYTES as STORED_BYTES_PER_CELL
    rc, _, err = run_main(capsys, "ingest", sample, "-o", tmp_path / "dem.zarr", "--tile", "64")
    assert rc == 0, err
    (tmp_path / "tifs").mkdir()
    plan = _plan(capsys, tmp_path / "dem.zarr", "--source-cell", "3,4", "--cost", "friction",
                 "--friction", sample, "--geotiff-dir", tmp_path / "tifs", "-o",
                 tmp_path / "c.zarr", "--tile", "128")
    cells = 300 * 400
    assert plan["tile"] == 64 and plan["tiles"] == [5, 7]  # the store keeps its tile
    assert plan["layers"] == ["distance", "backlink", "allocation", "friction"]  # DEM not copied
    # the friction raster is ingested into a hidden store beside the output while it runs
    assert plan["partial_extra_bytes"] == int(cells * ELEVATION_BYTES_PER_CELL)
    tifs = cells * sum(STORED_BYTES_PER_CELL[n] for n in ("distance", "backlink", "allocation"))
    assert plan["other_outputs_bytes"] == int(tifs)
    assert plan["disk_needed_bytes"] == (plan["output_bytes"] + plan["partial_extra_bytes"]
                                         + plan["other_outputs_bytes"])
    assert sorted(os.listdir(tmp_path)) == ["dem.zarr", "good.asc", "tifs"]
    assert os.listdir(tmp_path / "tifs") == []


@pytest.fixture
def small_shards(monkeypatch):
    import terrain.tiles.store as store
    monkeypatch.setattr(store, "SHARD_TARGET_SIDE", 16)  # groups = shards of 16 cells


def test_tiled_plan_matches_the_run(capsys, tmp_path, small_shards):
    rng = np.random.default_rng(3)
    z = rng.integers(0, 30, (45, 37)).astype(np.float32)
    z[rng.random(z.shape) < 0.05] = np.nan
    z[3, 4] = 1
    path = write_asc(tmp_path / "dem.asc", z)
    argv = [path, "--source-cell", "3,4", "--route", "tiled", "--tile", "8",
            "--tile-sssp", "4", "--max-height", "1", "-o", tmp_path / "t.zarr", "--backend",
            "cpu"]
    plan = _plan(capsys, *argv)
    assert sorted(os.listdir(tmp_path)) == ["dem.asc"]
    rc, out, err = run_main(capsys, "cost-distance", *argv, "--json")
    assert rc == 0, err
    s = json.loads(out)
    assert s["route"] == plan["route"] == "tiled"
    for key in ("groups", "group_side", "height", "tile_sssp"):
        assert plan[key] == s[key], key
    assert 0 < s["top_vertices"] <= plan["top_boundary_cells"]
    # the index's raw size is the stored arrays' (shape x itemsize, every level)
    group = zarr.open_group(str(tmp_path / "t.zarr"), mode="r")["sssp_index"]
    raw = sum(int(np.prod(a.shape)) * a.dtype.itemsize for _, a in group.arrays()) + sum(
        int(np.prod(a.shape)) * a.dtype.itemsize for _, lev in group.groups()
        for _, a in lev.arrays())
    assert plan["index_raw_bytes"] == raw
    assert plan["index_bytes"] <= raw and plan["output_bytes"] > plan["index_bytes"]


def test_blocked_plan_memory_covers_the_run_whatever_the_free_memory(capsys, tmp_path, sample):
    """The blocked plan without ``--memory`` counts the cache the grid's blocks fill (it
    said 40 % of the free memory: 8.9 GiB for a run that peaked at 0.3 GB), and a worker's
    memory counts its process's own: the real run's peak RSS lies under it, within 4×."""
    import subprocess
    import sys

    from cli import child_env
    argv = [sample, "--source-cell", "3,4", "--route", "blocked", "--backend", "cpu",
            "-o", tmp_path / "b.zarr"]
    plan = _plan(capsys, *argv)
    assert plan["memory_per_worker_bytes"] == _plan(capsys, *argv, "--memory", "1TB")[
        "memory_per_worker_bytes"]  # the free memory's budget is not what the grid fills
    # the child's own high-water mark (a rusage's maximum keeps the forked test process's)
    code = ("import sys\nfrom terrain.run import main\ntry:\n    main(sys.argv[1:])\n"
            "finally:\n    print(open('/proc/self/status').read())")
    proc = subprocess.run([sys.executable, "-c", code, "cost-distance", *map(str, argv)],
                          cwd=tmp_path, env=child_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    peak = int(proc.stdout.split("VmHWM:")[1].split()[0]) * 1024
    assert peak <= plan["memory_per_worker_bytes"] <= 4 * peak, (peak, plan)


def test_dry_run_refuses_when_the_disk_cannot_hold_the_output(tmp_path):
    write_huge_sparse_tif(tmp_path / "huge.tif")  # cost layers: about 9.7 TiB
    before = snapshot(tmp_path)
    proc = run_terrain("cost-distance", "huge.tif", "--source-cell", "3,4", "--route",
                       "in-core", "-o", "h.zarr", "--dry-run", cwd=tmp_path)
    assert_one_line_error(proc, "terrain: h.zarr: needs about 9.7 TiB of disk,")
    assert "1048576 x 1048576" in proc.stdout and "solve     in-core" in proc.stdout
    assert snapshot(tmp_path) == before


def test_dry_run_refuses_when_free_space_is_short(capsys, tmp_path, sample, monkeypatch):
    import pipelines._plan as plan_module

    class Usage:
        free = 1000
    monkeypatch.setattr(plan_module.shutil, "disk_usage", lambda path: Usage)
    rc, out, err = run_main(capsys, "cost-distance", sample, "--source-cell", "3,4", "--dry-run")
    assert rc == 2 and err.startswith(f"terrain: {tmp_path / 'good.cost.zarr'}: needs about ")
    assert err.strip().endswith("has 1000 B free") and "plan      cost-distance" in out
    assert sorted(os.listdir(tmp_path)) == ["good.asc"]


@pytest.mark.parametrize("argv,message", [
    (["--cost", "friction"], "cost model 'friction' needs a friction raster"),
    (["--max-cost", "0"], "max cost 0.0: must be > 0"),
    (["--start-cost", "-1"], "start cost -1.0: must be finite and >= 0"),
    (["--source-cell", "300,0"], "source cell (300, 0) is outside the raster"),
    (["-o", "good.asc", "--overwrite"], "good.asc: output is the input"),
    (["--friction", "missing.tif"], "missing.tif"),
])
def test_dry_run_bad_options_are_one_line(capsys, monkeypatch, tmp_path, sample, argv, message):
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    sources = [] if "--source-cell" in argv else ["--source-cell", "3,4"]
    rc, out, err = run_main(capsys, "cost-distance", "good.asc", *sources, *argv, "--dry-run",
                            scheduler=None)
    assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert err.startswith("terrain: ") and message in err, err
    assert snapshot(tmp_path) == before


# ----------------------------------------------------------------------- option tables

def _subparsers(parser):
    import argparse
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices


def _options(parser):
    return {a.dest: a for a in parser._actions if a.option_strings}


@pytest.mark.parametrize("argv", [["cost-distance"], ["batch"], ["mst"], ["ingest"]])
def test_help_lists_every_option(argv):
    from terrain.run import build_parser
    parser = build_parser()
    sub = _subparsers(parser)[argv[0]]
    proc = run_terrain(*argv, "--help", cwd=Path(__file__).parent)
    assert proc.returncode == 0, proc.stderr
    for action in sub._actions:
        for flag in action.option_strings:
            assert flag in proc.stdout, flag
        if action.option_strings and action.dest != "help":
            assert action.help, action.dest


def _words(text):
    return {w.strip(".,;:()'") for w in text.split()} - {""}


@pytest.mark.parametrize("single,shared", [
    ("cost-distance", ("source", "source_cell", "sources", "start_cost", "cost", "friction",
                       "max_cost", "route", "tile", "backend", "scheduler")),
    ("mst", ("weight", "tile", "backend", "scheduler"))])
def test_batch_takes_the_commands_options(single, shared):
    """The options ``batch`` shares with a command are the command's (one definition):
    same type, choices, default, metavar and action; the batch's help says all the
    command's help says (plus whose option it is and what the batch does with it)."""
    from terrain.run import build_parser
    sub = _subparsers(build_parser())
    one, batch = _options(sub[single]), _options(sub["batch"])
    for dest in shared:
        a, b = one[dest], batch[dest]
        assert (a.type, a.choices, a.default, a.metavar, type(a)) == \
            (b.type, b.choices, b.default, b.metavar, type(b)), dest
        if dest != "tile":  # a command's input may be a store (keeps its tile); a batch's not
            assert _words(a.help) <= _words(b.help), (dest, a.help, b.help)


def test_cost_distance_dry_run_is_in_its_help():
    proc = run_terrain("cost-distance", "--help", cwd=Path(__file__).parent)
    assert "--dry-run" in proc.stdout and "--resume" in proc.stdout
