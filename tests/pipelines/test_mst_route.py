"""``--gpus``: the GPU count's parsing and errors, and the one-GPU route the runs take on
GPU 0 of N; the GPU runs themselves are ``gpu`` tests."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import zarr

from pipelines import cluster
from pipelines.cluster import gpu_count_backend, parse_gpus, visible_gpus
from terrain.errors import InputError


@pytest.mark.parametrize("text, visible, want", [
    ("1", ["0", "1"], ["0"]), ("2", ["0", "1"], ["0", "1"]), ("all", ["3"], ["3"]),
    (" ALL ", ["0", "1", "2"], ["0", "1", "2"]), (2, ["5", "7"], ["5", "7"])])
def test_gpu_count_picks_the_first_visible_devices(text, visible, want):
    assert parse_gpus(text, visible) == want


@pytest.mark.parametrize("text, visible, message", [
    ("3", ["0", "1"], "3 GPUs asked for, but CuPy sees 2"),
    ("1", [], "1 GPU asked for, but CuPy sees none"),
    ("all", [], "CuPy sees none"),
    ("0", ["0"], "at least 1"), ("-2", ["0"], "at least 1"),
    ("two", ["0", "1"], "'two': not a number nor 'all'")])
def test_gpu_count_errors_say_what_is_wrong(text, visible, message):
    with pytest.raises(InputError, match=message):
        parse_gpus(text, visible)


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    import terrain.backend

    class FakeCupy:
        class cuda:
            class runtime:
                @staticmethod
                def getDeviceCount():
                    return 2

    monkeypatch.setattr(terrain.backend, "_cupy", lambda: FakeCupy)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4, 6,7")
    assert visible_gpus() == ["4", "6"]  # CuPy counts 2 of the 3 listed
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_gpus() == ["0", "1"]
    monkeypatch.setattr(terrain.backend, "_cupy", lambda: None)
    assert visible_gpus() == []


def test_gpu_count_is_refused_before_anything_runs(monkeypatch):
    monkeypatch.setattr(cluster, "visible_gpus", lambda: ["0"])
    with pytest.raises(InputError, match="2 GPUs asked for, but CuPy sees 1"):
        gpu_count_backend("2", "gpu", "dem.tif")
    with pytest.raises(InputError, match="cannot be used with a GPU count"):
        gpu_count_backend("1", "gpu", "dem.tif", "threads")


def test_cli_gpus_errors_are_one_line(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # no device, even on a GPU machine
    for extra, message in ((["--gpus", "2"], "2 GPUs asked for, but CuPy sees none"),
                           (["--gpus", "1", "--backend", "cpu"], "needs the gpu backend"),
                           (["--gpus", "x", "--backend", "gpu"], None),
                           (["--gpus", "1", "--scheduler", "threads"],
                            "sample.asc: GPU workers are started here"),
                           (["--gpus", "1", "--scheduler", "threads", "--dry-run"],
                            "sample.asc: GPU workers are started here")):
        proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", "data/sample.asc",
                               "-o", str(tmp_path / "o.zarr"), *extra], capture_output=True,
                              text=True, timeout=60, env=env)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("terrain: "), proc.stderr
        if message:
            assert message in lines[0]
        assert not (tmp_path / "o.zarr").exists()
        assert not list(tmp_path.glob(".o.zarr.partial*"))


@pytest.mark.gpu
def test_mst_on_all_gpus_equals_one_gpu(tmp_path):
    # --gpus all (one GPU is enough for the run) against --gpus 1: the same store bits
    src = tmp_path / "g.asc"
    subprocess.run([sys.executable, "-m", "terrain.run", "synth", "--rows", "3000", "--cols",
                    "4500", "--nodata", "0.02", "-o", str(src)], check=True, timeout=300)
    summaries = {}
    for gpus in ("1", "all"):
        out = tmp_path / f"m{gpus}.zarr"
        proc = subprocess.run([sys.executable, "-m", "terrain.run", "mst", str(src), "-o",
                               str(out), "--gpus", gpus, "--json"], capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        assert "Traceback" not in proc.stderr and "Warning" not in proc.stderr
        summaries[gpus] = json.loads(proc.stdout)
    a = zarr.open_group(str(tmp_path / "m1.zarr"), mode="r")
    b = zarr.open_group(str(tmp_path / "mall.zarr"), mode="r")
    for k in ("elevation", "mst"):
        assert np.asarray(a[k][:]).tobytes() == np.asarray(b[k][:]).tobytes(), k
    for k in ("total_weight", "edges", "trees", "vertices"):
        assert summaries["1"][k] == summaries["all"][k]
    assert summaries["all"]["gpus"] >= 1


@pytest.mark.parametrize("what, extra, message", [
    ("ingest", [], "batch ingest: runs on the CPU; a GPU count is for mst"),
    ("mst", ["--backend", "cpu"], "needs the gpu backend"),
    ("mst", [], "CuPy sees none")])
def test_batch_gpus_errors_before_anything_is_written(tmp_path, what, extra, message):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "batch", what, "data/sample.asc",
                           "-o", str(tmp_path / "out"), "--gpus", "1", *extra],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert message in proc.stderr
    assert not (tmp_path / "out").exists()


def test_summary_says_how_many_of_the_gpus_ran():
    import pipelines.mst as mst
    line = mst._format_summary({"output": "o", "rows": 1, "cols": 1, "connectivity": 8,
                                "weight": "max", "edges": 0, "trees": 1, "vertices": 1,
                                "total_weight": 0.0, "tile": 16, "levels": 1, "backend": "gpu",
                                "device": "d", "path": "in-core", "phase_seconds": {},
                                "read_bytes": 0, "written_bytes": 0, "graph_bytes": 0,
                                "seconds": 1.0, "gpus": 2, "gpus_used": 1,
                                "note": "fits one GPU: x"})
    assert "on 1 of 2 GPUs" in line and line.splitlines()[-1] == "note      fits one GPU: x"


# ---------------------------------------------------------------- one route: run and dry run

_N = 300 * 400  # data/sample.asc's cells


@pytest.mark.parametrize("text, free, kw, want", [
    # (is text, device bytes free, mst_route options, (path, graph, device text, note words))
    (True, 80 << 30, {}, ("in-core", False, False, None)),
    (True, 80 << 30, {"gpus": 2}, ("in-core", False, False, "in core")),
    (True, 20 * _N + (3 << 29), {"gpus": 4}, ("super-tiles", True, True, "super-tiles")),
    (True, 5 * _N, {"gpus": 2}, ("super-tiles", True, False, "super-tiles")),  # no room
    (True, 80 << 30, {"gpus": 2, "resume": True}, ("in-core", True, False, "in core")),
    (True, 80 << 30, {"scheduler": "threads"}, ("in-core", True, False, None)),
    (True, 20 * _N + (3 << 29), {"in_core": "groups"}, ("super-tiles", True, True, None)),
    (True, 80 << 30, {"in_core": False, "gpus": 2}, ("tiled", True, False, "tiles")),
    (False, 80 << 30, {"gpus": 2}, ("in-core", False, False, "in core")),
    (False, 20 * _N, {"gpus": 2}, ("super-tiles", True, False, "super-tiles")),
    (False, 20 * _N, {"gpus": 1}, ("super-tiles", True, False, None)),
    (True, 80 << 30, {"gpus": 2, "cluster_active": True}, ("in-core", True, False, "in core")),
])
def test_gpus_run_the_one_gpu_route_on_gpu_0(text, free, kw, want):
    # --gpus N never slower than one GPU: every route is one device's, taken on GPU 0 of N
    from pipelines.mst import mst_route
    from terrain.backend import Backend
    from terrain.grid.mst import MSTSpec
    route = mst_route(MSTSpec((300, 400), 64), Backend("gpu", None), text, free=free, **kw)
    path, graph, device_text, words = want
    assert (route.path, route.graph, route.device_text) == (path, graph, device_text)
    n = kw.get("gpus", 0)
    assert route.note == (f"fits one GPU: {words} on GPU 0 of {n}" if words else None)
    assert route.held == (not graph or device_text)


def test_route_on_the_cpu():
    from pipelines.mst import mst_route
    from terrain.backend import get_backend
    from terrain.grid.mst import MSTSpec
    cpu = get_backend("cpu")
    route = mst_route(MSTSpec((300, 400), 64), cpu, True)
    assert (route.path, route.graph, route.device_text, route.note) == ("in-core", False,
                                                                        False, None)
    assert mst_route(MSTSpec((300, 400), 64), cpu, scheduler="threads").graph
    assert mst_route(MSTSpec((4096, 4096), 512), cpu, True).path == "tiled"
    with pytest.raises(InputError, match="in_core 'x'"):
        mst_route(MSTSpec((3, 4), 64), cpu, in_core="x")


class _Took(Exception):
    """Raised by a faked route: which one the run took."""


def _fake_gpu(monkeypatch, free):
    """A GPU backend without a device (two visible GPUs, ``free`` bytes on GPU 0)."""
    import pipelines.mst as mst
    import terrain.backend
    from terrain.backend import Backend
    real = terrain.backend.get_backend
    fake = Backend("gpu", None)

    def get_backend(name=None):
        return fake if getattr(name, "name", name) == "gpu" else real(name)

    monkeypatch.setattr(terrain.backend, "get_backend", get_backend)
    monkeypatch.setattr(mst, "get_backend", get_backend)
    monkeypatch.setattr(cluster, "visible_gpus", lambda: ["0", "1"])
    monkeypatch.setattr(mst, "free_device_bytes", lambda be: free)
    monkeypatch.setattr(fake.__class__, "device_name", lambda self: "fake")
    return mst


@pytest.mark.parametrize("store, free, gpus, want", [
    (False, 80 << 30, "2", ("in-core", False)), (False, 20 * _N + (3 << 29), "2", ("super-tiles", True)),
    (False, 5 * _N, "2", ("super-tiles", False)), (True, 80 << 30, "2", ("in-core", False)),
    (True, 5 * _N, "all", ("super-tiles", False)), (False, 80 << 30, None, ("in-core", False))])
def test_dry_run_shows_the_route_the_run_takes(tmp_path, capsys, monkeypatch, store, free, gpus,
                                               want):
    from cli import run_main
    from pipelines._plan import _Args, build_plan
    from pipelines.mst import run_mst
    inp = tmp_path / "dem.asc"
    inp.write_bytes(open("data/sample.asc", "rb").read())
    if store:
        rc, _, err = run_main(capsys, "ingest", inp, "-o", tmp_path / "dem.zarr")
        assert rc == 0, err
        inp = tmp_path / "dem.zarr"
    mst = _fake_gpu(monkeypatch, free)
    plan = build_plan("mst", _Args(input=str(inp), output=str(tmp_path / "o.zarr"),
                                   backend="gpu", gpus=gpus))

    def took(route, *a, **k):
        raise _Took(route.path, route.device_text)

    monkeypatch.setattr(mst, "_run_held", took)
    monkeypatch.setattr(mst, "_run_graph", took)
    with pytest.raises(_Took) as ran:
        run_mst(inp, tmp_path / "o.zarr", backend="gpu", gpus=gpus)
    assert (plan["path"], "parsed on the device" in plan["route"]) == ran.value.args == want
    assert plan["gpus_used"] == 1
    if gpus is not None:
        assert plan["backend"] == "gpu, GPU 0 of 2"
        assert plan["note"].startswith("fits one GPU: ") and plan["note"].endswith(" of 2")
    assert not (tmp_path / "o.zarr").exists()


def test_dry_run_route_equals_the_cpu_run(tmp_path, capsys):
    from cli import run_main
    for extra in ([], ["--scheduler", "threads"]):
        rc, out, err = run_main(capsys, "mst", "data/sample.asc", "-o", tmp_path / "o.zarr",
                                "--backend", "cpu", "--dry-run", "--json", "--overwrite",
                                *extra, scheduler=None)
        assert rc == 0, err
        plan = json.loads(out)
        assert (plan["tasks"] > 0) == bool(extra)  # in process: no task graph
        rc, out, err = run_main(capsys, "mst", "data/sample.asc", "-o", tmp_path / "o.zarr",
                                "--backend", "cpu", "--json", "--overwrite", *extra,
                                scheduler=None)
        assert rc == 0, err
        assert plan["path"] == json.loads(out)["path"] == "in-core"


def _gpu_count():
    from terrain.backend import gpu_available
    return len(visible_gpus()) if gpu_available() else 0


@pytest.mark.gpu
@pytest.mark.parametrize("gpus", ["2", "all"])
def test_gpus_give_the_one_gpu_forest(tmp_path, capsys, gpus):
    # super-tiles of a store with --gpus N: on GPU 0, the same mask bits and statistics as
    # one GPU (skipped with fewer than two devices, except "all")
    from cli import run_main
    from pipelines.mst import run_mst
    if gpus != "all" and _gpu_count() < int(gpus):
        pytest.skip(f"needs {gpus} GPUs")
    src = tmp_path / "g.asc"
    rc, _, err = run_main(capsys, "synth", "--rows", "3000", "--cols", "4500", "--nodata",
                          "0.02", "-o", src, scheduler=None)
    assert rc == 0, err
    rc, _, err = run_main(capsys, "ingest", src, "-o", tmp_path / "g.zarr", "--tile", "256")
    assert rc == 0, err
    one = run_mst(tmp_path / "g.zarr", tmp_path / "one.zarr", backend="gpu", in_core="groups",
                  scheduler="threads")
    many = run_mst(tmp_path / "g.zarr", tmp_path / "many.zarr", in_core="groups", gpus=gpus)
    a = zarr.open_array(str(tmp_path / "one.zarr"), path="mst", mode="r")[:]
    b = zarr.open_array(str(tmp_path / "many.zarr"), path="mst", mode="r")[:]
    assert a.tobytes() == b.tobytes()
    for k in ("total_weight", "edges", "trees", "vertices"):
        assert one[k] == many[k], k
    assert one["path"] == many["path"] == "super-tiles"
    n = len(parse_gpus(gpus, visible_gpus()))
    assert many["gpus"] == n and many["gpus_used"] == 1
    if n > 1:
        assert many["note"] == f"fits one GPU: super-tiles on GPU 0 of {n}"


@pytest.mark.gpu
def test_dry_run_path_equals_the_gpu_run(tmp_path, capsys):
    # on a real device: the text in core, and a store in core (the plan asks the run's route)
    from cli import run_main
    rc, _, err = run_main(capsys, "ingest", "data/sample.asc", "-o", tmp_path / "s.zarr")
    assert rc == 0, err
    for n, (inp, gpus) in enumerate((("data/sample.asc", []),
                                     ("data/sample.asc", ["--gpus", "all"]),
                                     (tmp_path / "s.zarr", ["--gpus", "1"]))):
        out = tmp_path / f"o{n}.zarr"
        rc, plan, err = run_main(capsys, "mst", inp, "-o", out, "--backend", "gpu", *gpus,
                                 "--dry-run", "--json", scheduler=None)
        assert rc == 0, err
        rc, ran, err = run_main(capsys, "mst", inp, "-o", out, "--backend", "gpu", *gpus,
                                "--json", scheduler=None)
        assert rc == 0, err
        assert json.loads(plan)["path"] == json.loads(ran)["path"]


@pytest.mark.gpu
def test_batch_mst_with_gpus_runs_each_file_on_gpu_0(tmp_path):
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "terrain.run", "batch", "mst", "data/sample.asc",
                           "-o", str(tmp_path / "out"), "--gpus", "all"], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    (out,) = (tmp_path / "out").glob("*.mst.zarr")
    s = zarr.open_group(str(out), mode="r").attrs["mst"]
    assert s["gpus_used"] == 1 and s["gpus"] >= 1 and s["path"] == "in-core"
    want = subprocess.run([sys.executable, "-m", "terrain.run", "mst", "data/sample.asc", "-o",
                           str(tmp_path / "one.zarr"), "--backend", "gpu", "--scheduler",
                           "threads"], capture_output=True, text=True, timeout=300)
    assert want.returncode == 0, want.stderr
    a = zarr.open_array(str(out), path="mst", mode="r")[:]
    b = zarr.open_array(str(tmp_path / "one.zarr"), path="mst", mode="r")[:]
    assert a.tobytes() == b.tobytes()
