"""ingest, mst and fill to s3:// (a local moto server) on a cluster of separate processes: a
``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1, each in its own empty
folder, give the bits of local runs.

ingest and mst share nothing with the client but the store: their tasks open the stores at
the URLs (terrain.io.remote.Location), and the test makes the client's staging (fetch,
publish, its temporary folder) fail. fill stages (terrain.io.remote.stage): its workers run
on this host and see the client's temporary folder.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

ROOT = Path(__file__).resolve().parents[2]


def _arrays(store):
    g = zarr.open_group(store=store, mode="r", use_consolidated=False)
    return {name: np.ascontiguousarray(a[...]).tobytes() for name, a in g.arrays()}


@pytest.fixture
def cluster(tmp_path):
    """The scheduler's address; scheduler and two workers in their own empty folders."""
    pytest.importorskip("distributed")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
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

    def staged(*args, **kwargs):
        raise AssertionError("staged through the client's disk")

    for name in ("fetch", "publish"):
        monkeypatch.setattr(remote, name, staged)
    monkeypatch.setattr(remote.tempfile, "mkdtemp", staged)
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
