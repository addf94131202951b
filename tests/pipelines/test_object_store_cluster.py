"""ingest, mst, cost-distance, fill and flow to s3:// (a local moto server) on a cluster of
separate processes: a ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1, each
in its own empty folder, give the bits of local runs.

These commands share nothing with the client but the store: their tasks open the stores at
the URLs (terrain.io.remote.Location), and the tests make the client's staging (fetch,
publish, its temporary folder) fail.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from cli import child_env


def _arrays(store):
    """Every array of the store, its subgroups' too (a tiled cost distance's index), as bytes."""
    g = zarr.open_group(store=store, mode="r", use_consolidated=False)
    return {name: np.ascontiguousarray(a[...]).tobytes()
            for name, a in g.members(max_depth=None) if isinstance(a, zarr.Array)}


def _staging_fails(monkeypatch):
    """The client's staging (fetch, publish, its temporary folder) raises."""
    import pipelines.staging as staging
    import terrain.io.remote as remote

    def staged(*args, **kwargs):
        raise AssertionError("staged through the client's disk")

    for name in ("fetch", "publish"):
        monkeypatch.setattr(remote, name, staged)
    monkeypatch.setattr(staging.tempfile, "mkdtemp", staged)


@pytest.fixture
def cluster(tmp_path):
    """The scheduler's address; scheduler and two workers in their own empty folders."""
    pytest.importorskip("distributed")
    env = child_env()
    dask = str(Path(sys.executable).parent / "dask")
    sched = tmp_path / "scheduler.json"
    procs = []
    try:
        for i, argv in enumerate([["scheduler", "--host", "127.0.0.1", "--port", "0",
                                   "--no-dashboard", "--scheduler-file", str(sched)]]
                                 + [["worker", "--scheduler-file", str(sched), "--nthreads", "1",
                                     "--no-dashboard", "--host", "127.0.0.1"]] * 2):
            cwd = tmp_path / f"proc{i}"
            cwd.mkdir()
            procs.append(subprocess.Popen([dask, *argv], cwd=cwd, env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            t0 = time.monotonic()
            while i == 0 and not sched.exists():
                assert time.monotonic() - t0 < 60 and procs[0].poll() is None
                time.sleep(0.1)
        from distributed import Client
        with Client(scheduler_file=str(sched)) as client:
            client.wait_for_workers(2, timeout=60)
            yield client.scheduler.address
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


@pytest.mark.slow
def test_s3_on_separate_workers_bit_identical(tmp_path, s3, cluster):
    from terrain.io import write_synth, zarr_store
    from terrain.run import main
    # 2200 x 400, tile 256: above the CPU's in-core bound, so mst and fill run tiled
    write_synth(tmp_path / "g.asc", 2200, 400, seed=5, nodata=0.02)
    opts = ["--storage-options", json.dumps(s3)]
    base = "s3://terrain-test/cluster"
    grid = str(tmp_path / "g.asc")
    assert main(["ingest", grid, "-o", f"{base}/dem.zarr", "--tile", "256", *opts,
                 "--scheduler", cluster]) == 0
    assert main(["ingest", grid, "-o", str(tmp_path / "dem.zarr"), "--tile", "256",
                 "--scheduler", "synchronous"]) == 0
    assert _arrays(zarr_store(f"{base}/dem.zarr", s3)) == _arrays(str(tmp_path / "dem.zarr"))
    for command in ("mst", "fill"):
        assert main([command, f"{base}/dem.zarr", "-o", f"{base}/{command}.zarr", *opts,
                     "--backend", "cpu", "--scheduler", cluster]) == 0
        assert main([command, str(tmp_path / "dem.zarr"), "-o", str(tmp_path / f"{command}.zarr"),
                     "--backend", "cpu", "--scheduler", "synchronous"]) == 0
        got = _arrays(zarr_store(f"{base}/{command}.zarr", s3))
        assert got == _arrays(str(tmp_path / f"{command}.zarr")), command


@pytest.mark.slow
def test_s3_share_nothing_stages_nothing(tmp_path, s3, cluster, monkeypatch):
    """ingest and mst on the cluster given by address open the stores at their s3:// URLs in
    the tasks: nothing is copied to or from this process's disk (staging's fetch, publish and
    temporary folder fail here), the workers' folders stay empty, and the arrays are the
    bits of local runs."""
    import terrain.io.remote as remote
    from terrain.io import write_synth, zarr_store
    from terrain.run import main
    # mst of more cells than the CPU's in-core bound: the tiled route (2 shards of 2048)
    monkeypatch.setattr("terrain.grid.mst_device.HOST_MAX_CELLS", 1 << 16)
    write_synth(tmp_path / "g.asc", 2200, 400, seed=7, nodata=0.02)
    grid, base = str(tmp_path / "g.asc"), "s3://terrain-test/share-nothing"
    opts = ["--storage-options", json.dumps(s3)]
    local = [("ingest", grid, tmp_path / "dem.zarr", ["--tile", "64"]),
             ("mst", tmp_path / "dem.zarr", tmp_path / "mst.zarr", ["--backend", "cpu"])]
    for command, src, out, extra in local:
        assert main([command, str(src), "-o", str(out), *extra,
                     "--scheduler", "synchronous"]) == 0

    _staging_fails(monkeypatch)
    # a partial a killed run left is removed with a notice; the output then appears
    import fsspec
    fs = fsspec.filesystem("s3", **s3)
    fs.pipe_file("terrain-test/share-nothing/dem.zarr/elevation/zarr.json", b"{}")
    assert main(["ingest", grid, "-o", f"{base}/dem.zarr", "--tile", "64", *opts,
                 "--scheduler", cluster]) == 0
    assert main(["mst", f"{base}/dem.zarr", "-o", f"{base}/mst.zarr", "--backend", "cpu",
                 *opts, "--scheduler", cluster]) == 0
    summary = zarr.open_group(zarr_store(f"{base}/mst.zarr", s3), mode="r").attrs["mst"]
    assert summary["path"] == "tiled"
    for name in ("dem", "mst"):
        got = _arrays(zarr_store(f"{base}/{name}.zarr", s3))
        assert got == _arrays(str(tmp_path / f"{name}.zarr")), name
    assert not fs.exists(f"terrain-test/share-nothing/mst.zarr/{remote.PENDING_ROOT}")
    # an existing store is refused without --overwrite, replaced with it
    assert main(["mst", f"{base}/dem.zarr", "-o", f"{base}/mst.zarr", "--backend", "cpu",
                 *opts, "--scheduler", cluster]) == 2
    assert main(["mst", f"{base}/dem.zarr", "-o", f"{base}/mst.zarr", "--backend", "cpu",
                 "--overwrite", *opts, "--scheduler", cluster]) == 0
    assert _arrays(zarr_store(f"{base}/mst.zarr", s3)) == _arrays(str(tmp_path / "mst.zarr"))
    for i in (1, 2):  # the workers wrote nothing where they run
        assert not any((tmp_path / f"proc{i}").iterdir())


def _friction_grid(dem, path, seed=3):
    """An ESRI ASCII friction raster on the grid of the ASCII ``dem`` (0.5 to 2, NaN-free)."""
    lines = Path(dem).read_text().splitlines()
    header = {ln.split()[0].lower(): ln.split()[1] for ln in lines[:6]}
    rows, cols = int(header["nrows"]), int(header["ncols"])
    values = np.random.default_rng(seed).uniform(0.5, 2.0, (rows, cols))
    Path(path).write_text("\n".join(lines[:6] + [" ".join(f"{v:.3f}" for v in row)
                                                  for row in values]) + "\n")
    return float(header["xllcorner"]), float(header["yllcorner"]), float(header["cellsize"])


@pytest.mark.slow
def test_s3_share_nothing_cost_distance(tmp_path, s3, cluster, monkeypatch):
    """cost-distance (blocked, tiled, in-core) on the cluster given by address opens its stores at
    their s3:// URLs in the tasks (DEM, friction and --reuse stores) and keeps its scratch
    (the blocks' states, the tiled run's labels, a friction raster's store) under the
    output's prefix; the files (a friction raster, a sources CSV) are read here. Nothing is
    staged through this process's disk, the workers write nothing where they run, no scratch
    is left in the published stores, and the arrays are the bits of local runs."""
    import fsspec

    import terrain.io.remote as remote
    from terrain.io import write_synth, zarr_store
    from terrain.run import main
    # 600 x 300 cells, tile 64: two shards of 512; blocks of 128 and groups of 512
    write_synth(tmp_path / "g.asc", 600, 300, seed=11, nodata=0.02)
    x0, y0, cell = _friction_grid(tmp_path / "g.asc", tmp_path / "fr.asc")
    (tmp_path / "src.csv").write_text(f"x,y\n{x0 + 40.5 * cell},{y0 + 500.5 * cell}\n"
                                      f"{x0 + 250.5 * cell},{y0 + 80.5 * cell}\n")
    grid, fr, csv = (str(tmp_path / n) for n in ("g.asc", "fr.asc", "src.csv"))
    base = "s3://terrain-test/share-nothing-cost"
    opts = ["--storage-options", json.dumps(s3)]
    cpu = ["--backend", "cpu"]
    for name, src in (("dem", grid), ("fr", fr)):
        assert main(["ingest", src, "-o", str(tmp_path / f"{name}.zarr"), "--tile", "64",
                     "--scheduler", "synchronous"]) == 0
        assert main(["ingest", src, "-o", f"{base}/{name}.zarr", "--tile", "64", *opts,
                     "--scheduler", cluster]) == 0
    blocked = ["--route", "blocked", "--memory", "32MB", "--cost", "friction",
               "--sources", csv, *cpu]
    tiled = ["--route", "tiled", "--tile-sssp", "16", "--source-cell", "300,150",
             "--source-cell", "20,280", *cpu]
    # (name, DEM, friction, options): a DEM store with a friction raster read here (its store
    # the run's scratch), a DEM raster read here (ingested into the output) with a friction
    # store, that run's index reused, and the in-core graph (one solve task, shard writes)
    runs = [("blocked", "dem.zarr", fr, blocked),
            ("tiled", grid, "fr.zarr", tiled),
            ("reuse", grid, "fr.zarr", [*tiled, "--reuse", "tiled.zarr"]),
            ("in-core", "dem.zarr", "fr.zarr", ["--route", "in-core", "--sources", csv,
                                                *cpu])]

    def here(p):
        return p if p.startswith(str(tmp_path)) else str(tmp_path / p)

    def there(p):
        return p if p.startswith(str(tmp_path)) else f"{base}/{p}"

    for name, dem, friction, extra in runs:
        local = [here(e) if e == "tiled.zarr" else e for e in extra]
        assert main(["cost-distance", here(dem), "-o", str(tmp_path / f"{name}.zarr"),
                     "--friction", here(friction), *local, "--scheduler", "synchronous"]) == 0
    _staging_fails(monkeypatch)
    fs = fsspec.filesystem("s3", **s3)
    for name, dem, friction, extra in runs:
        remote_extra = [there(e) if e == "tiled.zarr" else e for e in extra]
        assert main(["cost-distance", there(dem), "-o", f"{base}/{name}.zarr",
                     "--friction", there(friction), *remote_extra, *opts,
                     "--scheduler", cluster]) == 0, name
        out = zarr_store(f"{base}/{name}.zarr", s3)
        summary = zarr.open_group(out, mode="r").attrs["cost_distance"]
        assert summary["route"] == {"reuse": "tiled"}.get(name, name)
        assert summary["reached_cells"] > 0
        got = _arrays(out)
        assert got == _arrays(str(tmp_path / f"{name}.zarr")), name
        left = {k.split("/")[3] for k in fs.find(f"terrain-test/share-nothing-cost/{name}.zarr")}
        assert not left & {".blocked", ".friction", "sssp_labels", remote.PENDING_ROOT}, left
    assert zarr.open_group(zarr_store(f"{base}/reuse.zarr", s3), mode="r").attrs[
        "cost_distance"]["reused_tasks"] > 0
    for i in (1, 2):  # the workers wrote nothing where they run
        assert not any((tmp_path / f"proc{i}").iterdir())


@pytest.mark.slow
def test_s3_share_nothing_fill_and_flow(tmp_path, s3, cluster, monkeypatch):
    """fill and flow on the cluster given by address open their stores at their s3:// URLs in
    the tasks (the DEM store, the output, the fill store flow is given) and keep
    their scratch under the output's prefix (the fill's mst mask, flow's ingested weights);
    the files (a DEM raster, a weights raster, an outlets CSV) are read here, and the in-core
    fill runs here on the DEM the cluster ingested at its URL. Nothing is staged through
    this process's disk, the workers write nothing where they run, no scratch is left in the
    published stores, and the arrays are the bits of local runs."""
    import fsspec

    import terrain.io.remote as remote
    from terrain.io import write_synth, zarr_store
    from terrain.run import main
    # the fill inside flow on the tiled route too (the grid would fit in memory)
    monkeypatch.setattr("pipelines.fill.IN_CORE_BYTES_PER_CELL", 1 << 40)
    # 600 x 300 cells, tile 64: two shards of 512 (the groups), 10 x 5 tiles
    write_synth(tmp_path / "g.asc", 600, 300, seed=13, nodata=0.02)
    x0, y0, cell = _friction_grid(tmp_path / "g.asc", tmp_path / "w.asc", seed=4)
    (tmp_path / "outlets.csv").write_text(f"x,y\n{x0 + 150.5 * cell},{y0 + 300.5 * cell}\n")
    grid, weights, outlets = (str(tmp_path / n) for n in ("g.asc", "w.asc", "outlets.csv"))
    base = "s3://terrain-test/share-nothing-hydrology"
    opts = ["--storage-options", json.dumps(s3)]
    tiled = ["--route", "tiled", "--backend", "cpu"]
    # (command, input, output, options): the tiled fill of a DEM store; flow of that fill
    # store (its filled layer copied, then the flats and accumulation tasks); flow of the
    # DEM store with named outlets and a weights raster (the fill inside flow is tiled); the
    # in-core fill of the DEM raster (ingested by the cluster, filled in this process)
    runs = [("fill", "dem.zarr", "fill.zarr", tiled),
            ("flow", "fill.zarr", "flow-of-fill.zarr", tiled),
            ("flow", "dem.zarr", "flow.zarr", [*tiled, "--weights", weights, "--outlets",
                                               outlets]),
            ("fill", grid, "fill-in-core.zarr", ["--route", "in-core", "--backend", "cpu"])]

    def here(p):
        return p if p.startswith(str(tmp_path)) else str(tmp_path / p)

    def there(p):
        return p if p.startswith(str(tmp_path)) else f"{base}/{p}"

    assert main(["ingest", grid, "-o", str(tmp_path / "dem.zarr"), "--tile", "64",
                 "--scheduler", "synchronous"]) == 0
    for command, src, out, extra in runs:
        assert main([command, here(src), "-o", str(tmp_path / out), *extra,
                     "--scheduler", "synchronous"]) == 0, out
    assert main(["ingest", grid, "-o", f"{base}/dem.zarr", "--tile", "64", *opts,
                 "--scheduler", cluster]) == 0
    _staging_fails(monkeypatch)  # fill and flow as staged commands would fail here
    fs = fsspec.filesystem("s3", **s3)
    for command, src, out, extra in runs:
        assert main([command, there(src), "-o", f"{base}/{out}", *extra, *opts,
                     "--scheduler", cluster]) == 0, out
        store = zarr_store(f"{base}/{out}", s3)
        attrs = zarr.open_group(store, mode="r").attrs
        assert (attrs["fill"]["path"] if command == "fill" else attrs["flow"]["route"]) == \
            extra[extra.index("--route") + 1]
        assert _arrays(store) == _arrays(str(tmp_path / out)), out
        left = {k.split("/")[3] for k in fs.find(f"terrain-test/share-nothing-hydrology/{out}")}
        assert not left & {"mst", ".weights", remote.PENDING_ROOT}, left
    assert zarr.open_group(zarr_store(f"{base}/flow.zarr", s3), mode="r").attrs["flow"][
        "named_outlets"] == 1
    for i in (1, 2):  # the workers wrote nothing where they run
        assert not any((tmp_path / f"proc{i}").iterdir())
