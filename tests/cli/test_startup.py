"""Start-up: the kernels the build step compiles are the ones a first run needs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli import child_env, imported_after

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "sample.asc"


def _index_files(cache):
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in Path(cache).rglob("*.nbi")}


@pytest.mark.slow
def test_warm_up_compiles_every_kernel_the_sample_mst_uses(tmp_path):
    """After ``python -m terrain._precompile mst`` (what setup.py runs at build time) into an
    empty cache, ``mst data/sample.asc`` adds no compiled signature: no index file of the
    cache is written again."""
    env = child_env(NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-m", "terrain._precompile", "mst"], env=env, check=True,
                   capture_output=True, timeout=600)
    before = _index_files(tmp_path / "cache")
    assert len(before) >= 8, before  # parse, Borůvka, reduction, merge kernels
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(SAMPLE), "-o",
                           str(tmp_path / "s.mst.zarr")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "dashboard" not in proc.stderr  # a grid this small runs without a cluster
    assert _index_files(tmp_path / "cache") == before


@pytest.mark.slow
def test_warm_up_compiles_the_tiled_fill_and_flow(tmp_path):
    """After ``python -m terrain._precompile fill flow`` into an empty cache, a tiled fill and
    a tiled flow of a grid of several groups (a DEM of its own, another tile) add no
    compiled signature: the steps between groups are warmed too, not only a one-group grid's
    (a first tiled fill of 8192² after install had compiled them for 7 s)."""
    from terrain.io import write_synth
    env = child_env(NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-m", "terrain._precompile", "fill", "flow"], env=env,
                   check=True, capture_output=True, timeout=900)
    before = _index_files(tmp_path / "cache")
    assert any(name.startswith("_fill_cpu.leaf_reduce_cpu") for name in before), before
    dem = tmp_path / "t.asc"
    write_synth(dem, 2100, 40, seed=3, nodata=0.05)
    cpu = ["--route", "tiled", "--tile", "16", "--backend", "cpu", "--scheduler", "synchronous"]
    for argv in (["fill", dem, "-o", tmp_path / "f.zarr", *cpu],
                 ["flow", tmp_path / "f.zarr", "-o", tmp_path / "w.zarr", *cpu]):
        proc = subprocess.run([sys.executable, "-m", "terrain.run", *map(str, argv)], env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        assert '"groups": 1,' not in proc.stdout
    assert _index_files(tmp_path / "cache") == before


def test_small_job_imports_neither_distributed_nor_rasterio(tmp_path):
    """The default path of a small ASCII job stays off the heavy imports (docs/architecture.md;
    numba itself imports the top-level scipy package, which is light)."""
    _, imported = imported_after([["ingest", SAMPLE, "-o", tmp_path / "g.zarr"]],
                                  ("distributed", "bokeh", "rasterio", "scipy.sparse"))
    assert imported == "[]"


@pytest.mark.parametrize("kind", ["store", "raster"])
def test_cost_distance_in_process_does_not_import_dask(tmp_path, kind):
    """An in-core cost distance runs in this process without Dask, of a tile store and of a
    raster (ingested on threads, the friction raster too): importing it would be a tenth of
    the whole process of a grid that fits the device, and of a small job's."""
    dem = tmp_path / "g.zarr"
    from terrain.run import main
    assert main(["ingest", str(SAMPLE), "-o", str(dem)]) == 0
    friction = []
    if kind == "raster":
        dem, friction = SAMPLE, ["--friction", SAMPLE]
    _, imported = imported_after([["cost-distance", dem, "-o", tmp_path / "c.zarr",
                                    "--source-cell", "150,200", *friction]],
                                  ("dask", "distributed"))
    assert imported == "[]"


def test_fill_and_flow_in_core_do_not_import_dask(tmp_path):
    """The in-core fill and flow of a store run in this process without Dask (a third of a
    second of the 40-ft fill's process)."""
    dem = tmp_path / "g.zarr"
    from terrain.run import main
    assert main(["ingest", str(SAMPLE), "-o", str(dem)]) == 0
    _, imported = imported_after([["fill", dem, "-o", tmp_path / "f.zarr"],
                                   ["flow", dem, "-o", tmp_path / "w.zarr"]],
                                  ("dask", "distributed"))
    assert imported == "[]"


def test_cpu_fill_and_flow_in_core_leave_numba_and_ndimage_unimported(tmp_path):
    """The in-core fill and flow on the CPU are C (the priority flood, the layers, the lake
    ids, the directions with flats, the accumulation; the options' epsilon flood and
    depression hierarchy), so the process pays neither Numba's import and first kernel load
    (1.25 s; 2.6-3.8 s more for the options' kernels on first use) nor scipy.ndimage's
    import (0.65 s)."""
    dem = tmp_path / "g.zarr"
    from terrain.run import main
    assert main(["ingest", str(SAMPLE), "-o", str(dem)]) == 0
    _, imported = imported_after([["fill", dem, "-o", tmp_path / "f.zarr", "--backend", "cpu"],
                                   ["fill", SAMPLE, "-o", tmp_path / "s.zarr", "--backend", "cpu",
                                    "--connectivity", "4"],
                                   ["flow", dem, "-o", tmp_path / "w.zarr", "--backend", "cpu"],
                                   ["flow", SAMPLE, "-o", tmp_path / "v.zarr", "--backend", "cpu",
                                    "--connectivity", "4"],
                                   # the options: RichDEM's epsilon flood, the hierarchy
                                   ["fill", SAMPLE, "-o", tmp_path / "e.zarr", "--backend", "cpu",
                                    "--epsilon", "--min-depth", "2", "--min-area", "3",
                                    "--hierarchy"]],
                                  ("numba", "scipy.ndimage"))
    assert imported == "[]"


@pytest.mark.gpu
def test_fill_and_flow_on_the_gpu_leave_numba_unimported(tmp_path):
    """The in-core fill and flow on the device run no Numba kernel, so Numba is never
    imported (its import and typing registry: a tenth of the 40-ft flow's process)."""
    store = tmp_path / "g.zarr"
    from terrain.run import main
    assert main(["ingest", str(SAMPLE), "-o", str(store)]) == 0
    _, imported = imported_after([["fill", store, "-o", tmp_path / "f.zarr", "--backend", "gpu"],
                                   ["flow", store, "-o", tmp_path / "w.zarr", "--backend", "gpu"]],
                                  ("numba",))
    assert imported == "[]"


@pytest.mark.gpu
def test_gpu_commands_leave_cupyx_scipy_unimported(tmp_path):
    """The device text parse, the forest and the cost distance use no array-scalar CuPy
    operator: CuPy sends those through NumPy's ufunc machinery, whose first call imports
    cupyx.scipy.special (a quarter of a second of a process)."""
    store = tmp_path / "g.zarr"
    out, imported = imported_after(
        [["mst", SAMPLE, "-o", tmp_path / "m.zarr", "--backend", "gpu", "--json"],
         ["ingest", SAMPLE, "-o", store],
         ["cost-distance", store, "-o", tmp_path / "c.zarr", "--source-cell", "150,200",
          "--backend", "gpu"]], ("cupyx.scipy.special", "cupyx.scipy"))
    assert '"parse": "gpu"' in out  # the text went through the device parser
    assert imported == "[]"


@pytest.mark.slow
def test_warm_up_compiles_the_tiled_cost_distance_levels(tmp_path):
    """After ``python -m terrain._precompile cost-distance`` into an empty cache, a tiled
    cost distance with levels of boundary graphs (another DEM, another source) adds no
    compiled signature: their Dijkstras are warmed, not only the leaves' (a grid under
    16384 tiles builds no level on its own)."""
    from terrain.io import write_synth
    env = child_env(NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-m", "terrain._precompile", "cost-distance"], env=env,
                   check=True, capture_output=True, timeout=900)
    before = _index_files(tmp_path / "cache")
    assert any(name.startswith("_tiled_cpu.graphs_pairs_cpu") for name in before), before
    assert any(name.startswith("_tiled_cpu.graph_dijkstra-") for name in before), before
    write_synth(tmp_path / "t.asc", 200, 150, seed=4, nodata=0.05)
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "cost-distance",
                           str(tmp_path / "t.asc"), "--source-cell", "100,70", "-o",
                           str(tmp_path / "c.zarr"), "--route", "tiled", "--max-height",
                           "2", "--backend", "cpu", "--scheduler", "synchronous"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert _index_files(tmp_path / "cache") == before


def test_a_cpu_cost_distance_leaves_numba_unimported(tmp_path):
    """Every cost model's in-core CPU solve (the heap, the bucket queue without elevations,
    Tobler's plan, 4- and 16-connected) and the blocked one run C kernels, so the process
    pays neither Numba's import nor a first kernel load (1.04-1.20 s of a 1024² run's
    solve; the blocked run's RSS 120 MB more)."""
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 60, 70, seed=2, nodata=0.05)
    header = (tmp_path / "g.asc").read_text().splitlines()[:6]
    (tmp_path / "f.asc").write_text("\n".join(header + [" ".join(str(1 + (r * c) % 3) for c in
                                                                  range(70)) for r in range(60)]))
    runs = [["cost-distance", tmp_path / "g.asc", "--source-cell", "5,5", "-o",
             tmp_path / f"c{i}.zarr", "--backend", "cpu", *extra]
            for i, extra in enumerate((["--friction", tmp_path / "f.asc"],
                                       ["--friction", tmp_path / "f.asc", "--connectivity", "4"],
                                       ["--connectivity", "16", "--stop-cell", "30,30"],
                                       ["--cost", "tobler", "--connectivity", "4"],
                                       ["--friction", tmp_path / "f.asc", "--route",
                                        "blocked"]))]
    _, imported = imported_after(runs, ("numba",))
    assert imported == "[]"


def test_diameter_of_a_small_graph_does_not_load_cupy(tmp_path):
    """``diameter`` with the auto backend picks it once the graph is read: a graph far below
    the device's break-even stays on the CPU, CuPy never imported (also on a GPU machine)."""
    g = tmp_path / "g.txt"
    g.write_text("0 1\n1 2\n2 3\n3 0\n3 4\n")
    out, imported = imported_after([["diameter", g, "--backend", "auto"]], ("cupy",))
    assert "diameter 3 " in out and ", cpu)" in out
    assert imported == "[]"


def test_the_build_has_what_the_precompile_imports():
    """setup.py runs the commands at build time in pip's isolated build environment, which
    holds only the build requirements: every runtime dependency the commands import must be
    one (without lazy_loader there the whole warm-up failed and the wheel shipped no
    compiled kernel). The dashboard's bokeh and the vector files' pyogrio (imported by the
    runs that read or write one) are those the commands never import there."""
    import re
    tomllib = pytest.importorskip("tomllib")

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    name = lambda spec: re.split(r"[\[<>=!~ ;]", spec, maxsplit=1)[0].lower()  # noqa: E731
    build = {name(s) for s in meta["build-system"]["requires"]}
    runtime = {name(s) for s in meta["project"]["dependencies"]} - {"bokeh", "pyogrio"}
    assert runtime <= build, sorted(runtime - build)


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("given", [None, "3"])
def test_the_command_line_starts_no_openblas_pool_unless_told(given):
    """No command multiplies matrices: OpenBLAS, loaded with NumPy, starts no threads of its
    own (they spin, costing a small job CPU time), unless the user set a count."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given:
        env["OPENBLAS_NUM_THREADS"] = given
    env["PYTHONPATH"] = child_env()["PYTHONPATH"]
    code = ("import os; import terrain.run; import numpy; "
            "print(os.environ['OPENBLAS_NUM_THREADS'], len(os.listdir('/proc/self/task')))")
    count, threads = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                    text=True, timeout=120, check=True).stdout.split()
    assert count == (given or "1")
    if not given:
        assert threads == "1"


def test_the_graph_formats_offered_are_the_loaders():
    """The command line spells the loaders' formats out (importing the loaders would slow
    every command's start-up): they must stay the same."""
    from terrain.graph import FORMATS
    from terrain.run import GRAPH_FORMATS
    assert GRAPH_FORMATS == ("auto", *FORMATS, "store")


def test_the_cost_distance_routes_offered_are_the_pipelines():
    """The command line spells cost-distance's routes out, as the graph formats: they must
    stay the pipeline's."""
    from pipelines.cost_distance import ROUTES
    from terrain.run import COST_DISTANCE_ROUTES
    assert COST_DISTANCE_ROUTES == ROUTES
