"""``terrain flow`` in process: the in-core and tiled routes give the same store bits, the
library's results and a certificate; outlets, weights, GeoTIFFs, info, verify, batch."""

import json
import os

import numpy as np
import pytest
import zarr

from cli import run_killed, run_main
from grids import dem, write_asc
from oracles import priority_flood
from terrain.hydrology import fill_depressions, flow_accumulation, flow_directions


def _dem(tmp_path, seed=0, shape=(150, 111)):
    z = dem("random", shape, seed)
    z[np.random.default_rng(seed + 7).random(z.shape) < 0.08] = np.nan
    z[40:70, 30:90] = np.float32(100.0)  # a plateau crossing groups
    return z, write_asc(tmp_path / "dem.asc", z)


def _layers(path):
    g = zarr.open_group(str(path), mode="r")
    return {n: g[n][:] for n in ("filled", "direction", "accumulation")}


def _both_routes(capsys, tmp_path, asc, conn):
    """The layers of ``flow`` on the in-core and the tiled route, by route."""
    outs = {}
    for route in ("in-core", "tiled"):
        out = tmp_path / f"{route}.zarr"
        rc, _, err = run_main(capsys, "flow", asc, "-o", out, "--route", route, "--tile", "8",
                              "--connectivity", conn, scheduler="threads")
        assert rc == 0, err
        outs[route] = _layers(out)
    return outs


@pytest.mark.parametrize("conn", [8, 4])
def test_routes_give_the_same_bits_as_the_library(tmp_path, monkeypatch, capsys,
                                                  conn):
    import terrain.tiles.store as store_mod
    monkeypatch.setattr(store_mod, "SHARD_TARGET_SIDE", 32)  # groups of 32 cells: 5 x 4
    z, asc = _dem(tmp_path)
    outs = _both_routes(capsys, tmp_path, asc, conn)
    s = zarr.open_group(str(tmp_path / "tiled.zarr")).attrs["flow"]
    assert s["groups"] == 20 and s["flat_passes"] > 20
    for name in outs["in-core"]:
        np.testing.assert_array_equal(outs["tiled"][name].view(np.uint8),
                                      outs["in-core"][name].view(np.uint8), err_msg=name)
    z = zarr.open_group(str(tmp_path / "tiled.zarr"))["elevation"][:]  # as the text reads
    f = priority_flood(z, conn)
    np.testing.assert_array_equal(outs["in-core"]["filled"], f)
    d = flow_directions(f, (10.0, 10.0), conn, backend="cpu").direction
    np.testing.assert_array_equal(outs["tiled"]["direction"], d)
    np.testing.assert_array_equal(outs["tiled"]["accumulation"], flow_accumulation(d))
    for route in ("in-core", "tiled"):
        rc, out, _ = run_main(capsys, "verify", tmp_path / f"{route}.zarr", scheduler=None)
        assert rc == 0 and "no cycle" in out


def test_filled_input_outlets_weights_and_geotiffs(tmp_path, capsys):
    z, _ = _dem(tmp_path, seed=3, shape=(60, 50))
    z = np.round(z, 1)
    f = priority_flood(z)
    asc = write_asc(tmp_path / "filled.asc", f)
    w = np.round(np.random.default_rng(1).random(z.shape), 3).astype(np.float32)
    wasc = write_asc(tmp_path / "rain.asc", np.where(np.isnan(z), np.nan, w))
    rc, out, err = run_main(capsys, "flow", asc, "--filled", "-o", tmp_path / "w.zarr",
                            "--weights", wasc, "--geotiff-dir", tmp_path / "tifs",
                            scheduler="threads")
    assert rc == 0, err
    g = _layers(tmp_path / "w.zarr")
    d = flow_directions(f, (10.0, 10.0), backend="cpu").direction
    np.testing.assert_array_equal(g["direction"], d)
    wv = np.where(np.isnan(z), np.nan, w).astype(np.float64)
    np.testing.assert_array_equal(g["accumulation"], flow_accumulation(d, wv))
    import rasterio
    with rasterio.open(tmp_path / "tifs" / "direction.tif") as src:
        assert src.nodata == 255 and (src.read(1) == d).all()
    rc, out, _ = run_main(capsys, "verify", tmp_path / "w.zarr", scheduler=None)
    assert rc == 0, out
    # named outlets: a CSV point
    x = 1000.0 + 10 * 25 + 5
    y = 2000.0 + 10 * 60 - 10 * 30 - 5
    (tmp_path / "o.csv").write_text(f"x,y\n{x},{y}\n")
    f2 = priority_flood(np.where(np.isnan(z), 0, z).astype(np.float32),
                        outlets=_one(z.shape, 30, 25))
    asc2 = write_asc(tmp_path / "f2.asc", f2)
    rc, out, err = run_main(capsys, "flow", asc2, "--filled", "--outlets", tmp_path / "o.csv",
                            "-o", tmp_path / "o.zarr", "--json", scheduler="threads")
    assert rc == 0, err
    d2 = _layers(tmp_path / "o.zarr")["direction"]
    assert d2[30, 25] == 0 and np.count_nonzero(d2 == 0) == 1
    rc, out, _ = run_main(capsys, "verify", tmp_path / "o.zarr", scheduler=None)
    assert rc == 0, out
    rc, out, _ = run_main(capsys, "info", tmp_path / "o.zarr", scheduler=None)
    assert "result    flow: D8" in out and "named" in out



@pytest.mark.parametrize("route", ["in-core", "tiled"])
def test_an_infinite_weight_is_one_line_naming_the_raster(tmp_path, capsys, route):
    rasterio = pytest.importorskip("rasterio")
    z, asc = _dem(tmp_path, seed=3, shape=(60, 50))
    w = np.ones(z.shape, np.float32)
    w[41, 7] = np.inf  # ESRI ASCII has no word for it: a GeoTIFF
    tif = tmp_path / "rain.tif"
    with rasterio.open(asc) as src:
        profile = {"driver": "GTiff", "height": z.shape[0], "width": z.shape[1], "count": 1,
                   "dtype": "float32", "transform": src.transform}
    with rasterio.open(tif, "w", **profile) as dst:
        dst.write(w, 1)
    rc, out, err = run_main(capsys, "flow", asc, "-o", tmp_path / "w.zarr", "--weights",
                            tif, "--route", route, "--tile", "16", scheduler="threads")
    assert rc == 2 and err == f"terrain: {tif}: cell (41, 7) is inf; weights must be finite " \
        "(NaN counts 0)\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dem.asc", "rain.tif"]


def test_a_weighted_store_is_verified_from_another_folder(tmp_path, capsys, monkeypatch):
    """The store recorded its weights raster as given on the command line (``rain.asc``),
    so ``verify`` run from another folder said it was gone; it is recorded absolute, as the
    DEM's source is. Weights changed since the flow failed the certificate as if the store
    were wrong; they are said to have changed, as a result's DEM is."""
    from oracles import ref_accumulation
    z, _ = _dem(tmp_path, seed=5, shape=(40, 30))
    rain = np.random.default_rng(5).random(z.shape).astype(np.float32)
    write_asc(tmp_path / "rain.asc", rain)
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_main(capsys, "flow", "dem.asc", "-o", "w.zarr", "--weights", "rain.asc",
                          scheduler="threads")
    assert rc == 0, err
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    rc, out, err = run_main(capsys, "verify", tmp_path / "w.zarr", scheduler=None)
    assert rc == 0 and "accumulation = weight + " in out, err
    rasterio = pytest.importorskip("rasterio")
    with rasterio.open(tmp_path / "rain.asc") as src:  # the weights as GDAL reads them
        rain = src.read(1, masked=True).filled(np.nan)
    layers = _layers(tmp_path / "w.zarr")
    np.testing.assert_array_equal(layers["accumulation"],
                                  ref_accumulation(layers["direction"], rain))
    # weights changed since: said of the weights (exit 2), not a violation of the store's
    write_asc(tmp_path / "rain.asc", rain[::-1].copy())
    os.utime(tmp_path / "rain.asc", ns=(0, 0))
    rc, out, err = run_main(capsys, "verify", tmp_path / "w.zarr", scheduler=None)
    assert rc == 2 and err == (f"terrain: {tmp_path / 'w.zarr'}: its weights "
                               f"{tmp_path / 'rain.asc'} changed after this result was "
                               "computed (its files differ): it needs the weights it was "
                               "computed from\n")


def test_run_flow_refuses_a_connectivity_of_8_5(tmp_path):
    """8.5 is no connectivity: refused with the library's error, nothing written (it ran as
    8)."""
    from pipelines.flow import run_flow
    from terrain.errors import InputError
    asc = write_asc(tmp_path / "d.asc", dem("random", (6, 7)))
    with pytest.raises(InputError, match="^connectivity 8.5 is not 4 or 8$"):
        run_flow(asc, tmp_path / "w.zarr", connectivity=8.5, backend="cpu")
    assert [p.name for p in tmp_path.iterdir()] == ["d.asc"]


def test_a_dem_of_nodata_only_flows_to_an_empty_summary(tmp_path, capsys):
    asc = write_asc(tmp_path / "nd.asc", np.full((3, 4), np.nan, np.float32))
    rc, out, err = run_main(capsys, "flow", asc, "-o", tmp_path / "w.zarr", scheduler=None)
    assert rc == 0, err
    assert "max acc   none (no valid cell)" in out.splitlines()
    assert (_layers(tmp_path / "w.zarr")["direction"] == 255).all()

def test_a_fill_store_is_flowed_without_filling_again(tmp_path, monkeypatch, capsys):
    """``fill DEM`` then ``flow FILL_STORE``: the same layers as ``flow DEM`` on both routes
    (the tiled fill's store, read at halos that cut its shards); a fill that would not
    drain as the flow does is refused in one line."""
    import terrain.tiles.store as store_mod
    monkeypatch.setattr(store_mod, "SHARD_TARGET_SIDE", 32)
    _, asc = _dem(tmp_path, seed=5)
    whole = _both_routes(capsys, tmp_path, asc, 8)["in-core"]
    for route in ("in-core", "tiled"):
        rc, _, err = run_main(capsys, "fill", asc, "-o", tmp_path / f"dem-{route}.fill.zarr",
                              "--route", route, "--tile", "8", scheduler="threads")
        assert rc == 0, err

    def no_fill(*args, **kwargs):
        raise AssertionError("filled again")
    import pipelines.fill
    import pipelines.flow
    monkeypatch.setattr(pipelines.fill, "write_filled", no_fill)
    monkeypatch.setattr(pipelines.flow, "fill_depressions", no_fill)
    for route in ("in-core", "tiled"):
        fill = tmp_path / f"dem-{route}.fill.zarr"
        out = tmp_path / f"from-fill-{route}.zarr"
        rc, _, err = run_main(capsys, "flow", fill, "-o", out, "--route", route,
                              scheduler="threads")
        assert rc == 0, err
        got = _layers(out)
        for name in whole:
            np.testing.assert_array_equal(got[name].view(np.uint8), whole[name].view(np.uint8),
                                          err_msg=f"{route} {name}")
        assert zarr.open_group(str(out)).attrs["flow"]["filled_input"] is True
        # the fill's shard files shared, not written again
        shards = [p for p in (fill / "filled").rglob("*") if p.is_file() and p.name != "zarr.json"]
        assert shards and all(os.path.samefile(p, out / p.relative_to(fill)) for p in shards)
        rc, text, _ = run_main(capsys, "verify", out, scheduler=None)
        assert rc == 0 and "no cycle" in text
    fill = tmp_path / "dem-tiled.fill.zarr"
    for extra, words in ((("--connectivity", "4"), "filled 8-connected, not 4"),
                         (("--outlets", asc), "named outlets")):
        rc, _, err = run_main(capsys, "flow", fill, "-o", tmp_path / "no.zarr", *extra,
                              scheduler="threads")
        assert rc == 2 and words in err and len(err.strip().splitlines()) == 1, err
        assert not (tmp_path / "no.zarr").exists()
    kept = tmp_path / "kept.fill.zarr"
    monkeypatch.undo()
    rc, _, err = run_main(capsys, "fill", asc, "-o", kept, "--min-depth", "0.5",
                          scheduler="threads")
    assert rc == 0, err
    rc, _, err = run_main(capsys, "flow", kept, "-o", tmp_path / "no.zarr", scheduler="threads")
    assert rc == 2 and "kept the depressions of at least a minimum depth unfilled" in err, err


def _one(shape, r, c):
    m = np.zeros(shape, bool)
    m[r, c] = True
    return m


def test_verify_refuses_a_corrupted_store(tmp_path, capsys):
    z, _ = _dem(tmp_path, seed=5, shape=(40, 40))
    asc = write_asc(tmp_path / "filled.asc", priority_flood(z))
    out = tmp_path / "f.zarr"
    assert run_main(capsys, "flow", asc, "--filled", "-o", out, scheduler="threads")[0] == 0
    g = zarr.open_group(str(out), mode="r+")
    acc = g["accumulation"][:]
    r, c = np.argwhere(~np.isnan(acc))[100]
    acc[r, c] += 1
    g["accumulation"][:, :] = acc
    rc, text, _ = run_main(capsys, "verify", out, scheduler=None)
    assert rc == 1 and "FAIL" in text


def test_batch_flow(tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    for k in range(2):
        write_asc(folder / f"d{k}.asc", dem("random", (30, 20), k))
    rc, _, err = run_main(capsys, "batch", "flow", folder, "-o", tmp_path / "out",
                          scheduler="threads")
    assert rc == 0, err
    assert (tmp_path / "out" / "d1.flow.zarr").exists()


@pytest.mark.parametrize("conn", [8, 4])
def test_a_flat_across_many_groups_resolves_as_in_core(tmp_path, monkeypatch, capsys,
                                                       conn):
    """A lake of 90 x 100 cells filled to one level (its rim higher except for one notch at
    a far corner) spans 4 x 4 groups of 32: the tiled route's flat passes must route it
    the same way as the in-core one (towards the notch, away from the higher rim)."""
    import terrain.tiles.store as store_mod
    monkeypatch.setattr(store_mod, "SHARD_TARGET_SIDE", 32)
    rng = np.random.default_rng(5)
    z = (50 + rng.random((120, 130)) * 5).astype(np.float32)
    z[10:100, 12:112] = np.float32(20) + rng.integers(0, 3, (90, 100)).astype(np.float32)
    z[9, 12:113] = z[100, 12:113] = np.float32(40)  # the rim
    z[9:101, 11] = z[9:101, 112] = np.float32(40)
    z[100, 111] = np.float32(30)  # the notch
    z[101:, 108:115] = np.float32(25)
    asc = write_asc(tmp_path / "lake.asc", z)
    outs = _both_routes(capsys, tmp_path, asc, conn)
    s = zarr.open_group(str(tmp_path / "tiled.zarr")).attrs["flow"]
    assert s["flat_cells"] >= 90 * 100 and s["flat_passes"] > s["groups"]
    for name in outs["in-core"]:
        np.testing.assert_array_equal(outs["tiled"][name].view(np.uint8),
                                      outs["in-core"][name].view(np.uint8), err_msg=name)
    assert outs["tiled"]["accumulation"][100, 111] >= 90 * 100  # the lake drains by the notch


def test_no_task_key_is_used_twice(tmp_path, monkeypatch, capsys):
    """The tiled route's rounds of flat tasks, and each run's tasks, have keys of their own:
    a distributed scheduler still holding a key of an earlier round hands that result back
    instead of running the task."""
    import pipelines.cluster as cluster
    import terrain.tiles.store as store_mod
    monkeypatch.setattr(store_mod, "SHARD_TARGET_SIDE", 32)
    keys, compute = [], cluster.compute

    def recording(*collections, **kw):
        keys.extend(k for c in collections for k in c.__dask_keys__())
        return compute(*collections, **kw)

    monkeypatch.setattr(cluster, "compute", recording)
    _, asc = _dem(tmp_path)
    for out in ("a.zarr", "b.zarr"):
        rc, _, err = run_main(capsys, "flow", asc, "-o", tmp_path / out, "--route", "tiled",
                              "--tile", "8", scheduler="threads")
        assert rc == 0, err
        assert zarr.open_group(str(tmp_path / out)).attrs["flow"]["flat_passes"] > 1
    assert len(keys) > 2 * 20 and len(keys) == len(set(map(str, keys)))


def test_a_tiled_fill_of_a_store_is_flowed(tmp_path, monkeypatch, capsys):
    """The tiled fill of a tile store (no ingest: the grid MST's graph prepares the output)
    records the grid's tile as the in-core one does, and flow of it gives the layers of
    ``flow DEM``."""
    import terrain.tiles.store as store_mod
    monkeypatch.setattr(store_mod, "SHARD_TARGET_SIDE", 32)
    _, asc = _dem(tmp_path, seed=3, shape=(70, 50))
    whole = _both_routes(capsys, tmp_path, asc, 8)["tiled"]
    rc, _, err = run_main(capsys, "ingest", asc, "-o", tmp_path / "dem.zarr", "--tile", "8",
                          scheduler="synchronous")
    assert rc == 0, err
    attrs = {}
    for route in ("in-core", "tiled"):
        fill = tmp_path / f"{route}.fill.zarr"
        rc, _, err = run_main(capsys, "fill", tmp_path / "dem.zarr", "-o", fill, "--route",
                              route, scheduler="threads")
        assert rc == 0, err
        attrs[route] = {k: v for k, v in zarr.open_group(str(fill)).attrs.items() if k != "fill"}
    assert attrs["tiled"] == attrs["in-core"] and attrs["tiled"]["tile"] == 8
    out = tmp_path / "from-fill.zarr"
    rc, _, err = run_main(capsys, "flow", tmp_path / "tiled.fill.zarr", "-o", out, "--route",
                          "tiled", scheduler="threads")
    assert rc == 0, err
    got = _layers(out)
    for name in whole:
        np.testing.assert_array_equal(got[name].view(np.uint8), whole[name].view(np.uint8),
                                      err_msg=name)


def test_a_tiled_flow_asked_fills_tiled_too(tmp_path, monkeypatch, capsys):
    """``flow --route tiled`` filled the grid in core wherever the fill fitted (its RSS grew
    14 bytes a cell: 1.87 GB at 8192 x 16384): asked, the whole run is tiled, the same bits;
    chosen by itself, the tiled flow still fills in core where that fits."""
    import pipelines.fill
    import terrain.tiles.store as store_mod
    monkeypatch.setattr(store_mod, "SHARD_TARGET_SIDE", 32)
    _, asc = _dem(tmp_path, seed=4, shape=(60, 50))
    whole = _both_routes(capsys, tmp_path, asc, 8)["in-core"]
    real, calls = pipelines.fill._run_in_core, []
    monkeypatch.setattr(pipelines.fill, "_run_in_core",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    out = tmp_path / "asked.zarr"
    rc, _, err = run_main(capsys, "flow", asc, "-o", out, "--route", "tiled", "--tile", "8",
                          scheduler="threads")
    assert rc == 0 and calls == [], err
    got = _layers(out)
    for name in whole:
        np.testing.assert_array_equal(got[name].view(np.uint8), whole[name].view(np.uint8),
                                      err_msg=name)


@pytest.mark.parametrize("killed_in", ["_leaf_down", "direction_group"])
def test_a_killed_tiled_flow_resumes_to_the_same_store(tmp_path, capsys, killed_in):
    """A tiled flow killed in its accumulation's or its directions' steps is finished by
    ``flow --resume``: the flats' settled borders and the finished steps come from its
    checkpoints, the store is a fresh run's bit for bit, and nothing is left beside it."""
    _, asc = _dem(tmp_path, seed=3)
    argv = ["flow", str(asc), "--route", "tiled", "--tile", "8", "--json"]
    module = "terrain.hydrology.flow" if killed_in == "_leaf_down" else "pipelines.flow"
    run_killed([*argv, "-o", tmp_path / "f.zarr", "--scheduler", "synchronous"], module,
               killed_in, 3, shard_side=32)
    (partial,) = tmp_path.glob(".f.zarr.partial-*")
    assert list((partial / ".terrain-checkpoints").glob("flow-flats-*"))

    import terrain.tiles.store as store_mod
    side, store_mod.SHARD_TARGET_SIDE = store_mod.SHARD_TARGET_SIDE, 32
    try:
        # its steps are the tiled route's: in core is refused, the partial kept
        rc, _, err = run_main(capsys, *argv[:2], "--tile", "8", "-o", tmp_path / "f.zarr",
                              "--route", "in-core", "--resume")
        assert rc == 2 and "the interrupted run took the tiled route" in err, err
        assert len(err.strip().splitlines()) == 1 and partial.is_dir()
        rc, out, err = run_main(capsys, *argv, "-o", tmp_path / "f.zarr", "--resume")
        assert rc == 0 and "resuming from" in err, err
        resumed = json.loads(out)
        rc, out, err = run_main(capsys, *argv, "-o", tmp_path / "g.zarr")
        assert rc == 0, err
    finally:
        store_mod.SHARD_TARGET_SIDE = side
    assert resumed["reused_tasks"] >= 6 and json.loads(out)["reused_tasks"] == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dem.asc", "f.zarr", "g.zarr"]
    assert not (tmp_path / "f.zarr" / ".terrain-checkpoints").exists()
    a, b = _layers(tmp_path / "f.zarr"), _layers(tmp_path / "g.zarr")
    for name in a:
        assert a[name].tobytes() == b[name].tobytes(), name


def test_a_resume_without_kept_steps_takes_a_fresh_runs_route(tmp_path, capsys, monkeypatch):
    """``--resume`` took the tiled route whatever it found, and the tiled route adds a
    weighted accumulation's sums in another order than in core: a weighted flow resumed
    where no steps were kept (a run killed in core, or none) differed from the uninterrupted
    run in its last bits. It takes the route a fresh run takes; in core asked, it runs there."""
    import terrain.tiles.store as store_mod
    monkeypatch.setattr(store_mod, "SHARD_TARGET_SIDE", 32)  # several groups when tiled
    z, asc = _dem(tmp_path, seed=5, shape=(100, 90))
    w = np.round(np.random.default_rng(2).random(z.shape), 3).astype(np.float32)  # as written
    wasc = write_asc(tmp_path / "rain.asc", np.where(np.isnan(z), np.nan, w))
    runs = {}
    for name, extra in (("plain", []), ("resumed", ["--resume"]),
                        ("asked", ["--resume", "--route", "in-core"])):
        rc, out, err = run_main(capsys, "flow", asc, "-o", tmp_path / f"{name}.zarr",
                                "--weights", wasc, "--tile", "8", "--json", *extra,
                                scheduler="threads")
        assert rc == 0, err
        runs[name] = json.loads(out)["route"], _layers(tmp_path / f"{name}.zarr")
    assert {route for route, _ in runs.values()} == {"in-core"}
    for name in ("resumed", "asked"):
        for layer, a in runs["plain"][1].items():
            assert a.tobytes() == runs[name][1][layer].tobytes(), (name, layer)
    d = flow_directions(runs["plain"][1]["filled"], (10.0, 10.0), backend="cpu").direction
    wv = np.where(np.isnan(z), np.nan, w).astype(np.float64)
    np.testing.assert_array_equal(runs["plain"][1]["accumulation"], flow_accumulation(d, wv))


def test_each_route_writes_its_codecs(tmp_path, capsys):
    """In core the layers are LZ4 (the writes end the run: faster); tiled, the directions
    and accumulations are Zstd (the bytes bound it: smaller) — the same values."""
    import pipelines.flow as flow
    _, asc = _dem(tmp_path, shape=(40, 30))
    for route in ("in-core", "tiled"):
        rc, _, err = run_main(capsys, "flow", asc, "-o", tmp_path / f"{route}.zarr", "--route",
                              route, "--tile", "8", scheduler="threads")
        assert rc == 0, err
        for name in ("direction", "accumulation"):
            meta = json.loads((tmp_path / f"{route}.zarr" / name / "zarr.json").read_text())
            blosc = meta["codecs"][0]["configuration"]["codecs"][1]["configuration"]
            want = (flow.TILED_CODECS if route == "tiled" else
                    {n: v[2] for n, v in flow.FLOW_LAYERS.items()})[name]
            assert (blosc["cname"], blosc["clevel"], blosc["shuffle"]) == want, (route, name)
    a, b = _layers(tmp_path / "in-core.zarr"), _layers(tmp_path / "tiled.zarr")
    for name in a:
        assert a[name].tobytes() == b[name].tobytes(), name


def test_flow_route_by_memory(monkeypatch):
    """On the CPU the in-core flow holds IN_CORE_BYTES a cell within half the memory; on a
    GPU whose device holds the grid's flow, the host holds the in-core fill's within 80 %:
    the 10-ft size in core on an H200 host (125 GB available), not on the 2-core VM."""
    import pipelines.flow as flow_module
    from pipelines.flow import flow_route
    from terrain.backend import get_backend

    class Gpu:
        is_gpu = True

    ten_ft, host = (50220, 70520), 125 << 30
    assert flow_route(ten_ft, memory_bytes=host) == "tiled"
    assert flow_route(ten_ft, memory_bytes=host, backend=get_backend("cpu")) == "tiled"
    assert flow_route((4096, 4096), memory_bytes=8 << 30, backend=get_backend("cpu")) \
        == "in-core"
    monkeypatch.setattr(flow_module, "flow_fits_on_device", lambda shape, backend: True)
    assert flow_route(ten_ft, memory_bytes=host, backend=Gpu()) == "in-core"
    assert flow_route(ten_ft, memory_bytes=24 << 30, backend=Gpu()) == "tiled"
    assert flow_route(ten_ft, "tiled", memory_bytes=host, backend=Gpu()) == "tiled"
    monkeypatch.setattr(flow_module, "flow_fits_on_device", lambda shape, backend: False)
    assert flow_route(ten_ft, memory_bytes=host, backend=Gpu()) == "tiled"


@pytest.mark.gpu
@pytest.mark.parametrize("named", [False, True], ids=["edge outlets", "named outlets"])
def test_gpu_flow_of_a_grid_beyond_the_devices_fill(tmp_path, monkeypatch, capsys, named):
    """A grid the device's fill cannot hold is filled on the host, its flow in core on the
    device (the 10-ft size on an H200): the CPU's store bits, and the DEM (and the outlets)
    filled where they were read, not sent to the device and back."""
    import pipelines.flow as flow_module
    import terrain.hydrology.fill as fill_module
    _, asc = _dem(tmp_path)
    outlets = ("--outlets", asc) if named else ()
    rc, _, err = run_main(capsys, "flow", asc, "-o", tmp_path / "cpu.zarr", "--route",
                          "in-core", "--backend", "cpu", *outlets, scheduler="threads")
    assert rc == 0, err
    beyond = lambda shape, backend=None: False  # noqa: E731
    monkeypatch.setattr(fill_module, "fill_fits_on_device", beyond)
    monkeypatch.setattr(flow_module, "fill_fits_on_device", beyond)
    given = []

    def fill_where_read(z, connectivity, outlets, **kw):
        given.extend(type(a) for a in (z, outlets) if a is not None)
        return fill_depressions(z, connectivity, outlets, **kw)
    monkeypatch.setattr(flow_module, "fill_depressions", fill_where_read)
    rc, _, err = run_main(capsys, "flow", asc, "-o", tmp_path / "gpu.zarr", "--route",
                          "in-core", "--backend", "gpu", *outlets, scheduler="threads")
    assert rc == 0, err
    assert given == [np.ndarray] * (1 + named)
    cpu, gpu = _layers(tmp_path / "cpu.zarr"), _layers(tmp_path / "gpu.zarr")
    for name in cpu:
        np.testing.assert_array_equal(gpu[name].view(np.uint8), cpu[name].view(np.uint8),
                                      err_msg=name)
    s = zarr.open_group(str(tmp_path / "gpu.zarr")).attrs["flow"]
    assert s["max_accumulation"] == np.nanmax(cpu["accumulation"])
