"""``cost-distance --reuse STORE`` on the in-core path: a second query on the same raster
with other sources gives a fresh run's layers, takes the earlier run's checked inputs, and
refuses a store of another raster, cost or algorithm (one line, exit 2, nothing written)."""

import json
import os

import numpy as np
import pytest
import zarr

from cli import run_main
from grids import random_dem, write_asc
from oracles import csr_graph, oracle_distance

from pipelines.cost_distance import LAYERS


@pytest.fixture
def dem(tmp_path):
    return random_dem(tmp_path, 4, (70, 53), 40, [(5, 6), (60, 40), (30, 2)], 7)


def _run(capsys, *argv, backend="cpu"):
    rc, so, se = run_main(capsys, "cost-distance", *argv, "--tile", 16, "--json",
                          "--backend", backend)
    assert rc == 0, se
    return json.loads(so)


def _layers(path, names=LAYERS):
    g = zarr.open_group(str(path), mode="r")
    return {n: np.asarray(g[n][:]) for n in names}


def _files(path):
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*"))
            if p.is_file()}


def test_reuse_query_equals_a_fresh_run(capsys, tmp_path, dem):
    z, path = dem
    rng = np.random.default_rng(5)
    fr = rng.uniform(1, 2, z.shape).round(3).astype(np.float32)
    fpath = write_asc(tmp_path / "fr.asc", fr)
    cost = ["--cost", "tobler", "--friction", fpath]
    first = _run(capsys, path, "-o", tmp_path / "a.zarr", "--source-cell", "5,6", *cost)
    before = _files(tmp_path / "a.zarr")
    new = ["--source-cell", "60,40", "--source-cell", "30,2", "--max-cost", "900"]
    fresh = _run(capsys, path, "-o", tmp_path / "fresh.zarr", *new, *cost)
    query = _run(capsys, path, "-o", tmp_path / "q.zarr", *new, *cost,
                 "--reuse", tmp_path / "a.zarr")
    assert "reuse" not in first and query["reuse"] == str(tmp_path / "a.zarr")
    assert query["reused"] == ["ingested DEM", "checked friction"]
    a, b = _layers(tmp_path / "fresh.zarr"), _layers(tmp_path / "q.zarr")
    for n in LAYERS:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)
    assert query["reached_cells"] == fresh["reached_cells"]
    # the query's store is whole: its own DEM and friction, reusable in turn
    q = _layers(tmp_path / "q.zarr", ("elevation", "friction"))
    np.testing.assert_array_equal(q["elevation"], z)
    np.testing.assert_array_equal(q["friction"], fr)
    g = zarr.open_group(str(tmp_path / "q.zarr"), mode="r")
    assert g.attrs["cost_model"]["dem"] == "elevation" and g.attrs["tile"] == 16
    third = _run(capsys, path, "-o", tmp_path / "t.zarr", "--source-cell", "5,6", *cost,
                 "--reuse", tmp_path / "q.zarr")
    np.testing.assert_array_equal(_layers(tmp_path / "t.zarr")["distance"],
                                  _layers(tmp_path / "a.zarr")["distance"])
    assert third["reached_cells"] == first["reached_cells"]
    rc, so, se = run_main(capsys, "verify", tmp_path / "q.zarr", scheduler=None)
    assert rc == 0, so + se
    # the earlier store is untouched (its DEM is shared by hard links, never rewritten)
    assert _files(tmp_path / "a.zarr") == before


def test_reuse_of_a_store_input_and_scipy(capsys, tmp_path, dem):
    z, path = dem
    rc, so, se = run_main(capsys, "ingest", path, "-o", tmp_path / "dem.zarr", "--tile", 16)
    assert rc == 0, se
    store = tmp_path / "dem.zarr"
    _run(capsys, store, "-o", tmp_path / "a.zarr", "--source-cell", "5,6")
    q = _run(capsys, store, "-o", tmp_path / "q.zarr", "--source-cell", "60,40",
             "--source-cell", "30,2", "--reuse", tmp_path / "a.zarr")
    assert q["reused"] == []  # the DEM is the input store's; nothing else to take
    ref = oracle_distance(csr_graph(z), z.shape, [(60, 40), (30, 2)])
    np.testing.assert_array_equal(_layers(tmp_path / "q.zarr")["distance"], ref)
    assert zarr.open_group(str(tmp_path / "q.zarr"), mode="r").attrs["cost_model"]["dem"] \
        == str(store)


@pytest.mark.parametrize("case", ["changed", "connectivity", "cost", "tiled", "not-a-store"])
def test_reuse_refused(capsys, tmp_path, dem, case):
    z, path = dem
    _run(capsys, path, "-o", tmp_path / "a.zarr", "--source-cell", "5,6")
    args = [path, "-o", tmp_path / "x.zarr", "--source-cell", "60,40", "--tile", 16,
            "--reuse", tmp_path / "a.zarr"]
    want = {"changed": "does not match", "connectivity": "connectivity", "cost": "cost",
            "tiled": "in-core", "not-a-store": "reused"}[case]
    if case == "changed":
        st = os.stat(path)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    elif case == "connectivity":
        args += ["--connectivity", 4]
    elif case == "cost":
        args += ["--cost", "tobler"]
    elif case == "tiled":
        args += ["--route", "tiled"]
    else:
        args[-1] = tmp_path / "a.zarr" / "distance"
    rc, so, se = run_main(capsys, "cost-distance", *args)
    assert rc == 2 and se.count("\n") == 1 and want in se, se
    assert not (tmp_path / "x.zarr").exists()



def test_reuse_refused_with_an_output_at_a_url(tmp_path, dem):
    """An in-core store is reused by hard links: with the output at a URL (a Location, as a
    cluster that shares nothing writes it) the run is refused before anything is written."""
    from pipelines.cost_distance import run_cost_distance
    from terrain.errors import InputError
    from terrain.io.remote import Location, store_state
    z, path = dem
    run_cost_distance(path, tmp_path / "a.zarr", cells=["5,6"], tile=16, backend="cpu")
    url = "memory://reuse-refused/x.zarr"
    with pytest.raises(InputError, match="both must be local"):
        run_cost_distance(path, Location(url, writing=True), cells=["60,40"], tile=16,
                          backend="cpu", reuse=tmp_path / "a.zarr")
    assert store_state(url) is None

@pytest.mark.gpu
def test_reuse_query_on_the_gpu_equals_the_cpu(capsys, tmp_path, dem):
    z, path = dem
    first = _run(capsys, path, "-o", tmp_path / "a.zarr", "--source-cell", "5,6",
                 backend="gpu")
    assert first["near_far_delta"] > 0
    attrs = zarr.open_group(str(tmp_path / "a.zarr"), mode="r").attrs["cost_reuse"]
    assert attrs["near_far_delta"] == first["near_far_delta"]
    new = ["--source-cell", "60,40", "--source-cell", "30,2"]
    q = _run(capsys, path, "-o", tmp_path / "q.zarr", *new, "--reuse", tmp_path / "a.zarr",
             backend="gpu")
    assert q["reused"] == ["ingested DEM", "near-far bucket width"]
    assert q["near_far_delta"] == first["near_far_delta"]
    _run(capsys, path, "-o", tmp_path / "c.zarr", *new, backend="cpu")
    a, b = _layers(tmp_path / "c.zarr"), _layers(tmp_path / "q.zarr")
    for n in LAYERS:
        np.testing.assert_array_equal(a[n], b[n], err_msg=n)


@pytest.mark.parametrize("case", ["interior", "friction", "in-core", "blocked"])
def test_a_tiled_index_is_reused_only_for_its_own_rasters(capsys, tmp_path, dem, case):
    """A tiled index checked only its tiles' boundary cells: a DEM (or friction) changed
    inside a tile was taken, giving distances its own verify failed. The index now records
    the rasters' fingerprints, as an in-core run's store does; an algorithm asked for other
    than tiled is refused with a tiled store, not switched."""
    z, path = dem
    fr = np.random.default_rng(2).uniform(1, 2, z.shape).astype(np.float32)
    fpath = write_asc(tmp_path / "fr.asc", fr)
    _run(capsys, path, "--friction", fpath, "-o", tmp_path / "t.zarr", "--source-cell", "5,6",
         "--route", "tiled", "--tile-sssp", 8)
    args = [path, "--friction", fpath, "-o", tmp_path / "x.zarr", "--source-cell", "60,40",
            "--reuse", tmp_path / "t.zarr", "--tile", 16]
    if case == "interior":  # a cell inside a tile of 8, on no boundary
        z2 = z.copy()
        z2[19:21, 19:21] += 500
        args[0] = write_asc(tmp_path / "z2.asc", z2)
        want = "does not match the one it was computed from"
    elif case == "friction":
        fr[19:21, 19:21] = 50
        args[2] = write_asc(tmp_path / "fr2.asc", fr)
        want = "friction raster does not match"
    else:
        args += ["--route", case]
        want = f"holds a tiled run's index; this run is {case}"
    rc, _, se = run_main(capsys, "cost-distance", *args)
    assert rc == 2 and se.count("\n") == 1 and want in se, se
    assert not (tmp_path / "x.zarr").exists()
    # the same rasters: reused
    same = _run(capsys, path, "--friction", fpath, "-o", tmp_path / "y.zarr", "--source-cell",
                "60,40", "--reuse", tmp_path / "t.zarr")
    assert same["route"] == "tiled" and same["reused_tasks"] > 0
