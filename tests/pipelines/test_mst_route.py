"""``terrain mst``'s one planner (:func:`pipelines.mst.mst_route`): the route each input takes,
and ``--dry-run`` showing the route the run takes; the GPU runs themselves are ``gpu`` tests."""

import json

import pytest

from terrain.errors import InputError

_N = 300 * 400  # data/sample.asc's cells


@pytest.mark.parametrize("text, free, kw, want", [
    # (is text, device bytes free, mst_route options, (path, graph, device text))
    (True, 80 << 30, {}, ("in-core", False, False)),
    (True, 20 * _N + (3 << 29), {}, ("super-tiles", True, True)),
    (True, 5 * _N, {}, ("super-tiles", True, False)),  # no room for the text
    (True, 80 << 30, {"resume": True}, ("in-core", True, False)),
    (True, 80 << 30, {"scheduler": "threads"}, ("in-core", True, False)),
    (True, 20 * _N + (3 << 29), {"in_core": "groups"}, ("super-tiles", True, True)),
    (True, 80 << 30, {"in_core": False}, ("tiled", True, False)),
    (False, 80 << 30, {}, ("in-core", False, False)),
    (False, 20 * _N, {}, ("super-tiles", True, False)),
    (True, 80 << 30, {"cluster_active": True}, ("in-core", True, False)),
])
def test_route_on_the_gpu(text, free, kw, want):
    from pipelines.mst import mst_route
    from terrain.backend import Backend
    from terrain.grid.mst import MSTSpec
    route = mst_route(MSTSpec((300, 400), 64), Backend("gpu", None), text, free=free, **kw)
    path, graph, device_text = want
    assert (route.path, route.graph, route.device_text) == (path, graph, device_text)
    assert route.held == (not graph or device_text)


def test_route_on_the_cpu():
    from pipelines.mst import mst_route
    from terrain.backend import get_backend
    from terrain.grid.mst import MSTSpec
    cpu = get_backend("cpu")
    route = mst_route(MSTSpec((300, 400), 64), cpu, True)
    assert (route.path, route.graph, route.device_text) == ("in-core", False, False)
    assert mst_route(MSTSpec((300, 400), 64), cpu, scheduler="threads").graph
    assert mst_route(MSTSpec((4096, 4096), 512), cpu, True).path == "tiled"
    with pytest.raises(InputError, match="in_core 'x'"):
        mst_route(MSTSpec((3, 4), 64), cpu, in_core="x")


class _Took(Exception):
    """Raised by a faked route: which one the run took."""


def _fake_gpu(monkeypatch, free):
    """A GPU backend without a device (``free`` bytes on it)."""
    import pipelines.mst as mst
    import terrain.backend
    from terrain.backend import Backend
    real = terrain.backend.get_backend

    class FakeGpu(Backend):  # a device of ``free`` bytes
        def free_bytes(self):
            return free

        def device_name(self):
            return "fake"

    fake = FakeGpu("gpu", None)

    def get_backend(name=None):
        return fake if getattr(name, "name", name) == "gpu" else real(name)

    monkeypatch.setattr(terrain.backend, "get_backend", get_backend)
    monkeypatch.setattr(mst, "get_backend", get_backend)
    return mst


@pytest.mark.parametrize("store, free, want", [
    (False, 80 << 30, ("in-core", False)), (False, 20 * _N + (3 << 29), ("super-tiles", True)),
    (False, 5 * _N, ("super-tiles", False)), (True, 80 << 30, ("in-core", False)),
    (True, 5 * _N, ("super-tiles", False))])
def test_dry_run_shows_the_route_the_run_takes(tmp_path, capsys, monkeypatch, store, free, want):
    from cli import run_main
    from pipelines._plan import build_plan
    from pipelines.mst import run_mst
    from terrain.run import build_parser
    inp = tmp_path / "dem.asc"
    inp.write_bytes(open("data/sample.asc", "rb").read())
    if store:
        rc, _, err = run_main(capsys, "ingest", inp, "-o", tmp_path / "dem.zarr")
        assert rc == 0, err
        inp = tmp_path / "dem.zarr"
    mst = _fake_gpu(monkeypatch, free)
    plan = build_plan("mst", build_parser().parse_args(
        ["mst", str(inp), "-o", str(tmp_path / "o.zarr"), "--backend", "gpu"]))

    def took(route, *a, **k):
        raise _Took(route.path, route.device_text)

    monkeypatch.setattr(mst, "_run_held", took)
    monkeypatch.setattr(mst, "_run_graph", took)
    with pytest.raises(_Took) as ran:
        run_mst(inp, tmp_path / "o.zarr", backend="gpu")
    assert (plan["path"], "parsed on the device" in plan["route"]) == ran.value.args == want
    assert plan["backend"] == "gpu"
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


@pytest.mark.gpu
def test_dry_run_path_equals_the_gpu_run(tmp_path, capsys):
    # on a real device: the text in core, and a store in core (the plan asks the run's route)
    from cli import run_main
    rc, _, err = run_main(capsys, "ingest", "data/sample.asc", "-o", tmp_path / "s.zarr")
    assert rc == 0, err
    for n, inp in enumerate(("data/sample.asc", tmp_path / "s.zarr")):
        out = tmp_path / f"o{n}.zarr"
        rc, plan, err = run_main(capsys, "mst", inp, "-o", out, "--backend", "gpu",
                                 "--dry-run", "--json", scheduler=None)
        assert rc == 0, err
        rc, ran, err = run_main(capsys, "mst", inp, "-o", out, "--backend", "gpu", "--json",
                                scheduler=None)
        assert rc == 0, err
        assert json.loads(plan)["path"] == json.loads(ran)["path"]


@pytest.mark.parametrize("in_core", ["auto", False])
def test_every_route_marks_nodata_with_one_value(tmp_path, in_core):
    """The forest raster's nodata cells on each route: the ``--geotiff`` COG (in core and
    tiled), ``terrain.mst`` of the DEM and of the output store all hold
    ``MST_NODATA`` (255) there and declare it (rasterio's nodata, the DataArray's
    ``_FillValue``); elsewhere the store's bits, Kruskal's forest (the tests' oracle). The
    API held 0 there and declared nothing."""
    import numpy as np
    import rasterio
    import zarr

    import terrain
    from grids import write_asc
    from oracles import ref_kruskal
    from pipelines.mst import run_mst
    from terrain.grid.mst import MST_NODATA

    rng = np.random.default_rng(7)
    z = (rng.random((20, 30)) * 100).astype(np.float32)
    z[rng.random(z.shape) < 0.2] = np.nan
    dem = write_asc(tmp_path / "d.asc", z)
    out, tif = tmp_path / "f.zarr", tmp_path / "f.tif"
    summary = run_mst(dem, out, tile=8, backend="cpu", geotiff=tif, in_core=in_core)
    assert summary["path"] == ("in-core" if in_core == "auto" else "tiled")
    bits = np.asarray(zarr.open_group(str(out), mode="r")["mst"][:])
    nodata = np.isnan(z)
    ids, _ = ref_kruskal(z)  # edge ids 4 * cell + d
    want = np.zeros(z.size, np.uint8)
    np.bitwise_or.at(want, ids // 4, (1 << (ids % 4)).astype(np.uint8))
    np.testing.assert_array_equal(bits, want.reshape(z.shape))
    with rasterio.open(tif) as src:
        assert src.nodata == MST_NODATA == 255
        cog = src.read(1)
    np.testing.assert_array_equal(cog, np.where(nodata, MST_NODATA, bits))
    for given in (dem, out):
        da = terrain.mst(given, tile=8, backend="cpu")
        assert da.attrs["_FillValue"] == MST_NODATA and da.dtype == np.uint8
        np.testing.assert_array_equal(da.values, cog)
