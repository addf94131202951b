"""``terrain fill``: the store of the in-core route and of the tiled Dask graph (several
groups: shards of 16 cells) are the library's result bit for bit; outlets, GeoTIFFs, the
hierarchy table, info, the command line and its bad input."""

import json
from pathlib import Path

import numpy as np
import pytest
import zarr

from cli import child_env, run_killed, run_main
from grids import write_asc
from oracles import priority_flood
from pipelines.fill import run_fill
from terrain.errors import InputError
from terrain.hydrology import fill_depressions

LAYERS = ("filled", "depth", "depression")


def _dem(seed, shape=(45, 37), integer=False):
    rng = np.random.default_rng(seed)
    z = (rng.integers(0, 9, shape) if integer else rng.random(shape) * 90).astype(np.float32)
    z[rng.random(shape) < 0.08] = np.nan
    return z


def _asc(tmp_path, z):
    """``z`` written as an ASCII grid; returns the path and the values a reader gets."""
    from terrain.io import read_grid
    asc = tmp_path / "dem.asc"
    write_asc(asc, z)
    return asc, read_grid(asc)[0]


def _layers(path):
    g = zarr.open_group(str(path), mode="r")
    return {n: np.asarray(g[n][:]) for n in LAYERS}


def _assert_store_is(path, r):
    got = _layers(path)
    for name in LAYERS:
        np.testing.assert_array_equal(got[name], getattr(r, name), strict=True, err_msg=name)


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", [0, 1])
def test_tiled_graph_equals_in_core(tmp_path, small_shards, conn, seed):
    z = _dem(seed, integer=bool(seed))
    asc, z = _asc(tmp_path, z)
    r = fill_depressions(z, conn, backend="cpu")
    a = run_fill(asc, tmp_path / "a.zarr", tile=4, connectivity=conn, backend="cpu",
                 route="in-core")
    b = run_fill(asc, tmp_path / "b.zarr", tile=4, connectivity=conn, backend="cpu",
                 scheduler="threads", route="tiled")
    assert (a["path"], b["path"]) == ("in-core", "tiled")
    _assert_store_is(tmp_path / "a.zarr", r)
    _assert_store_is(tmp_path / "b.zarr", r)
    g = zarr.open_group(str(tmp_path / "b.zarr"), mode="r")
    assert "mst" not in g and "mst" not in g.attrs and g.attrs["fill"]["path"] == "tiled"
    for k in ("flooded", "depressions", "undrained", "outlets", "cells"):
        assert a[k] == b[k] == r.stats[k], k


def test_store_input_tiled(tmp_path, small_shards):
    z = _dem(3, (40, 50))
    asc, z = _asc(tmp_path, z)
    from pipelines.ingest import ingest
    ingest(asc, tmp_path / "dem.zarr", tile=4, scheduler="synchronous")
    run_fill(tmp_path / "dem.zarr", tmp_path / "f.zarr", backend="cpu", route="tiled",
             scheduler="synchronous")
    _assert_store_is(tmp_path / "f.zarr", fill_depressions(z, 8, backend="cpu"))
    assert "elevation" not in zarr.open_group(str(tmp_path / "f.zarr"), mode="r")


@pytest.mark.parametrize("route", ["in-core", "tiled"])
def test_outlet_points(tmp_path, small_shards, route):
    z = _dem(4, (30, 30))
    asc, z = _asc(tmp_path, z)
    from grids import CS, XLL, YLL
    cells = [(5, 7), (20, 3), (29, 29)]
    pts = tmp_path / "out.csv"
    pts.write_text("x,y\n" + "".join(f"{XLL + (c + 0.5) * CS},{YLL + (30 - r - 0.5) * CS}\n"
                                     for r, c in cells))
    run_fill(asc, tmp_path / "f.zarr", tile=4, outlets=pts, backend="cpu", route=route,
             scheduler="synchronous")
    out = np.zeros(z.shape, np.uint8)
    for r, c in cells:
        out[r, c] = 1
    out &= ~np.isnan(z)
    got = _layers(tmp_path / "f.zarr")
    np.testing.assert_array_equal(got["filled"], priority_flood(z, 8, out))
    np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "f.zarr"))["outlets"][:], out)


def test_geotiffs_hierarchy_and_info(tmp_path, capsys):
    rasterio = pytest.importorskip("rasterio")
    z = _dem(5, (40, 40))
    asc, z = _asc(tmp_path, z)
    rc, so, se = run_main(capsys, "fill", asc, "-o", tmp_path / "f.zarr", "--geotiff-dir",
                          tmp_path / "tifs", "--hierarchy", "--json")
    assert rc == 0, se
    s = json.loads(so)
    r = fill_depressions(z, 8, hierarchy=True, backend="cpu")
    for name in LAYERS:
        with rasterio.open(tmp_path / "tifs" / f"{name}.tif") as ds:
            a = ds.read(1, masked=True)
            want = getattr(r, name)
            if name == "depression":
                np.testing.assert_array_equal(np.ma.filled(a, 0), want)
            else:
                np.testing.assert_array_equal(a.filled(np.nan), want)
    h = zarr.open_group(str(tmp_path / "f.zarr"), mode="r")["hierarchy"]
    assert s["hierarchy_rows"] == h["id"].shape[0] == r.hierarchy["id"].shape[0]
    np.testing.assert_array_equal(h["spill_elevation"][:], r.hierarchy["spill_elevation"])
    rc, so, _ = run_main(capsys, "info", tmp_path / "f.zarr", scheduler=None)
    assert rc == 0 and "result    fill:" in so and "layer     depression: int32" in so
    # xarray reads the lake ids as they are (int32, 0 outside a lake), not as float64 with
    # NaN there; the elevations' nodata is NaN
    xr = pytest.importorskip("xarray")
    ds = xr.open_zarr(tmp_path / "f.zarr")
    assert ds.depression.dtype == np.int32 and ds.filled.dtype == np.float32
    np.testing.assert_array_equal(ds.depression.values, r.depression)
    np.testing.assert_array_equal(ds.filled.values, r.filled)


def test_route_option(tmp_path, capsys, small_shards):
    asc, z = _asc(tmp_path, _dem(12, (30, 33)))
    rc, so, se = run_main(capsys, "fill", asc, "-o", tmp_path / "t.zarr", "--route", "tiled",
                          "--tile", "4", "--json")
    assert rc == 0, se
    assert json.loads(so)["path"] == "tiled"
    _assert_store_is(tmp_path / "t.zarr", fill_depressions(z, 8, backend="cpu"))


def test_route_by_memory(monkeypatch):
    """In core where the grid's bytes fit: on the host 24 a cell within 80 % of the
    available memory, 96 within half with the options that build the forest; on the GPU the
    device, or else the host's flood (the forest's options: the tiled route)."""
    import terrain.hydrology
    from pipelines.fill import fill_route
    from terrain.backend import get_backend

    class Gpu:
        is_gpu = True

    ten_ft, host = (50220, 70520), 125 << 30  # an H200 host's available memory
    cpu = get_backend("cpu")
    assert fill_route(ten_ft, cpu, available=host) == "in-core"
    assert fill_route(ten_ft, cpu, available=24 << 30) == "tiled"  # the 2-core VM
    assert fill_route((12555, 17630), cpu, available=20 << 30) == "in-core"  # 40-ft size
    assert fill_route((12555, 17630), cpu, available=20 << 30, forest=True) == "tiled"
    assert fill_route((8192, 8192), cpu, available=20 << 30, forest=True) == "in-core"
    monkeypatch.setattr(terrain.hydrology, "fill_fits_on_device", lambda shape, backend: False)
    assert fill_route(ten_ft, Gpu(), available=host) == "in-core"
    assert fill_route(ten_ft, Gpu(), available=host, forest=True) == "tiled"
    monkeypatch.setattr(terrain.hydrology, "fill_fits_on_device", lambda shape, backend: True)
    assert fill_route(ten_ft, Gpu(), available=1, forest=True) == "in-core"


def test_options_reach_the_library(tmp_path, capsys):
    z = _dem(6, (30, 40), integer=True)
    asc, z = _asc(tmp_path, z)
    rc, _, se = run_main(capsys, "fill", asc, "-o", tmp_path / "e.zarr", "--epsilon",
                         "--connectivity", "4", "--min-depth", "2", "--min-area", "3")
    assert rc == 0, se
    r = fill_depressions(z, 4, epsilon=True, min_depth=2, min_area=3, backend="cpu")
    _assert_store_is(tmp_path / "e.zarr", r)


def test_bad_input_one_line_exit_2(tmp_path, capsys):
    rc, _, se = run_main(capsys, "fill", tmp_path / "missing.asc", "-o", tmp_path / "x.zarr")
    assert rc == 2 and len(se.strip().splitlines()) == 1 and "missing.asc" in se
    asc, z = _asc(tmp_path, _dem(7, (10, 10)))
    rc, _, se = run_main(capsys, "fill", asc, "-o", tmp_path / "x.zarr", "--min-depth", "-1")
    assert rc == 2 and "dem.asc" in se and not (tmp_path / "x.zarr").exists()
    rc, _, se = run_main(capsys, "fill", asc, "-o", asc, "--overwrite")
    assert rc == 2 and "input" in se
    (tmp_path / "y.zarr").mkdir()
    rc, _, se = run_main(capsys, "fill", asc, "-o", tmp_path / "y.zarr")
    assert rc == 2 and "y.zarr" in se
    bad = tmp_path / "out.csv"
    bad.write_text("x,y\n1e9,1e9\n")
    rc, _, se = run_main(capsys, "fill", asc, "-o", tmp_path / "z.zarr", "--outlets", bad)
    assert rc == 2 and "out.csv" in se and not (tmp_path / "z.zarr").exists()


def test_options_refused_out_of_core(tmp_path):
    """The Python API's refusal names the parameters (min_depth), not the command line's flags
    (--min-depth: test_tiled_refusal_says_what_it_supports), and says which they are."""
    asc, z = _asc(tmp_path, _dem(8, (10, 10)))
    with pytest.raises(InputError, match="tiled route was asked.*: epsilon, min_depth need "
                                         "the in-core route") as e:
        run_fill(asc, tmp_path / "f.zarr", epsilon=True, min_depth=1, route="tiled")
    assert "supports connectivity and outlets only" in str(e.value) and "--" not in str(e.value)
    assert set(e.value.option) == {"connectivity", "outlets", "epsilon", "min_depth"}


def test_tiled_refusal_says_what_it_supports(tmp_path, capsys):
    """Forcing the tiled route with an in-core-only option: one line that names the file,
    says the route was asked (not that memory ran out) and what the tiled fill supports."""
    asc, _ = _asc(tmp_path, _dem(8, (10, 10)))
    out = tmp_path / "f.zarr"
    rc, _, se = run_main(capsys, "fill", asc, "-o", out, "--route", "tiled", "--epsilon",
                         "--min-depth", "1")
    lines = se.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and "dem.asc" in lines[0], se
    assert "tiled route was asked" in lines[0] and "do not fit" not in lines[0]
    assert "supports --connectivity and --outlets only" in lines[0]
    assert "--epsilon, --min-depth need the in-core route" in lines[0]
    assert not out.exists()


def test_api_keeps_the_grid():
    xr = pytest.importorskip("xarray")
    import terrain
    z = _dem(9, (12, 15))
    da = xr.DataArray(z, dims=("y", "x"), coords={"y": np.arange(12.0)[::-1],
                                                   "x": np.arange(15.0)})
    ds = terrain.fill(da, 4, backend="cpu", hierarchy=True)
    r = fill_depressions(z, 4, hierarchy=True, backend="cpu")
    np.testing.assert_array_equal(ds.filled.values, r.filled)
    assert ds.filled.x.values.tolist() == list(range(15)) and ds.depression.dtype == np.int32
    assert ds.hierarchy_pit_row.shape == r.hierarchy["id"].shape
    ds = terrain.fill(z, outlets=[(3, 3)], backend="cpu")
    out = np.zeros(z.shape, np.uint8)
    out[3, 3] = 0 if np.isnan(z[3, 3]) else 1
    np.testing.assert_array_equal(ds.filled.values, priority_flood(z, 8, out))


def test_batch_fill(tmp_path, capsys):
    d = tmp_path / "rasters"
    d.mkdir()
    zs = {}
    for k in range(2):
        zs[k] = _asc(d, _dem(20 + k, (20, 30)))[1]
        (d / "dem.asc").rename(d / f"d{k}.asc")
    (d / "broken.asc").write_text("ncols 2\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n"
                                  "1 x\n3 4\n")
    rc, so, se = run_main(capsys, "batch", "fill", d, "-o", tmp_path / "out", "--json",
                          "--connectivity", "4")
    assert rc == 1, se  # one file failed, the others ran
    doc = json.loads(so)
    status = {Path(f["input"]).name: f["status"] for f in doc}
    assert status == {"d0.asc": "done", "d1.asc": "done", "broken.asc": "failed"}
    for k in range(2):
        _assert_store_is(tmp_path / "out" / f"d{k}.fill.zarr",
                         fill_depressions(zs[k], 4, backend="cpu"))


def test_batch_fill_takes_the_fill_options(tmp_path, capsys):
    """``batch fill`` had none of fill's --epsilon, --min-depth, --min-area, --hierarchy,
    --route: its files are what ``fill`` gives with them, and a rerun with other options
    is not taken for done."""
    d = tmp_path / "rasters"
    d.mkdir()
    _, z = _asc(d, _dem(31, (24, 18)))
    options = ("--epsilon", "--min-depth", "1.5", "--hierarchy")
    rc, _, se = run_main(capsys, "batch", "fill", d, "-o", tmp_path / "out", *options)
    assert rc == 0, se
    _assert_store_is(tmp_path / "out" / "dem.fill.zarr",
                     fill_depressions(z, 8, epsilon=True, min_depth=1.5, backend="cpu"))
    assert (tmp_path / "out" / "dem.fill.zarr" / "hierarchy").is_dir()
    rc, so, se = run_main(capsys, "batch", "fill", d, "-o", tmp_path / "out", "--json")
    assert rc == 1 and "made it with other options (epsilon True then, not given now" in se, se  # not skipped
    rc, so, se = run_main(capsys, "batch", "fill", d, "-o", tmp_path / "out", "--json",
                          "--overwrite")
    assert rc == 0 and json.loads(so)[0]["status"] == "done", se
    _assert_store_is(tmp_path / "out" / "dem.fill.zarr", fill_depressions(z, 8, backend="cpu"))
    rc, _, se = run_main(capsys, "batch", "fill", d, "-o", tmp_path / "o2", "--epsilon",
                         "--route", "tiled")
    assert rc == 2 and se.strip() == ("terrain: batch fill: the tiled fill supports "
                                      "--connectivity and --outlets only: --epsilon needs the "
                                      "in-core route"), se
    rc, _, se = run_main(capsys, "batch", "flow", d, "-o", tmp_path / "o3", "--min-area", "3")
    assert rc == 2 and "--min-area is an option of batch fill" in se, se


@pytest.mark.parametrize("route", ["in-core", "tiled"])
def test_write_filled_for_another_pipeline(tmp_path, small_shards, route):
    """pipelines.fill.write_filled: only ``filled``, into a store another pipeline made
    (``terrain flow``'s fill), by either route."""
    import pipelines.fill as pf
    from pipelines.cluster import open_scheduler
    from pipelines.ingest import ingest
    z = _dem(11, (40, 44))
    asc, z = _asc(tmp_path, z)
    ingest(asc, tmp_path / "dem.zarr", tile=4, scheduler="synchronous")
    out = tmp_path / "out.zarr"
    zarr.open_group(str(out), mode="w")
    with open_scheduler("synchronous"):
        pf.write_filled(tmp_path / "dem.zarr", out, z.shape, 4, 4, route=route)
    g = zarr.open_group(str(out), mode="r")
    np.testing.assert_array_equal(g["filled"][:], fill_depressions(z, 4, backend="cpu").filled)
    assert "depth" not in g and "depression" not in g and "mst" not in g


def test_outlet_points_in_lon_lat_are_reprojected_into_the_dem_crs(tmp_path):
    """GeoJSON outlets are RFC 7946 longitude/latitude: reprojected into the DEM's UTM grid
    (pyproj's own transform is the oracle), not taken as metres."""
    import rasterio
    from pyproj import Transformer
    from rasterio.transform import from_origin
    z = _dem(4, (30, 30))
    with rasterio.open(tmp_path / "dem.tif", "w", driver="GTiff", height=30, width=30, count=1,
                       dtype="float32", crs="EPSG:32617", nodata=np.nan,
                       transform=from_origin(700000, 3900000, 30, 30)) as dst:
        dst.write(z, 1)
    to_ll = Transformer.from_crs("EPSG:32617", "EPSG:4326", always_xy=True)
    cells = [(5, 7), (20, 3)]
    pts = [to_ll.transform(700000 + (c + 0.5) * 30, 3900000 - (r + 0.5) * 30) for r, c in cells]
    (tmp_path / "o.geojson").write_text(json.dumps(
        {"type": "MultiPoint", "coordinates": [list(p) for p in pts]}))
    run_fill(tmp_path / "dem.tif", tmp_path / "f.zarr", tile=4, outlets=tmp_path / "o.geojson",
             backend="cpu", route="in-core", scheduler="synchronous")
    out = np.zeros(z.shape, np.uint8)
    for r, c in cells:
        out[r, c] = 1
    out &= ~np.isnan(z)
    np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "f.zarr"))["outlets"][:], out)


def test_a_killed_tiled_fill_resumes_to_the_same_store(tmp_path):
    """A tiled fill killed just after a label step wrote its ids (its checkpoint not yet
    written) is finished by ``fill --resume``: its steps reused, that label step run again
    (it reads the groups' own labels, not the ids it wrote), the store a fresh run's bit for
    bit, with no scratch layer, checkpoint or partial left."""
    import subprocess
    import sys

    asc, _ = _asc(tmp_path, _dem(6, (40, 44), integer=True))  # 9 groups, 57 lakes
    args = dict(tile=4, backend="cpu", scheduler="synchronous", route="tiled")
    code = f"""
import os
import terrain.tiles.store as store_mod
store_mod.SHARD_TARGET_SIDE = 16
import pipelines.fill as fill
done = []
write_ids = fill._write_ids
def write_ids_then_die(*a, **k):
    out = write_ids(*a, **k)
    done.append(out)
    if len(done) == 9:  # the last group's: its ids follow the other groups' lakes
        os._exit(9)
    return out
fill._write_ids = write_ids_then_die
fill.run_fill({str(asc)!r}, {str(tmp_path / 'f.zarr')!r}, **{args!r})
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(), timeout=300)
    assert proc.returncode == 9, proc.stderr
    (partial,) = tmp_path.glob(".f.zarr.partial-*")
    assert len(list((partial / ".terrain-checkpoints").glob("fill-label*"))) == 8

    import terrain.tiles.store as store_mod
    side = store_mod.SHARD_TARGET_SIDE
    store_mod.SHARD_TARGET_SIDE = 16
    try:
        # its steps are the tiled route's: in core, or an option of in core alone, refused
        # with the partial kept
        for asked, said in ((dict(route="in-core"), "took the tiled route: a resumed run"),
                            (dict(epsilon=True, route="auto"),
                             "took the tiled route, and the tiled fill")):
            with pytest.raises(InputError, match=said):
                run_fill(asc, tmp_path / "f.zarr", resume=True, **{**args, **asked})
            assert partial.is_dir()
        s = run_fill(asc, tmp_path / "f.zarr", resume=True, **args)
        fresh = run_fill(asc, tmp_path / "g.zarr", **args)
    finally:
        store_mod.SHARD_TARGET_SIDE = side
    assert s["reused_tasks"] > 50 and fresh["reused_tasks"] == 0
    assert not partial.exists()
    a = zarr.open_group(str(tmp_path / "f.zarr"), mode="r")
    b = zarr.open_group(str(tmp_path / "g.zarr"), mode="r")
    assert sorted(a.array_keys()) == sorted(b.array_keys())
    assert not {"mst", "lake_labels"} & set(a.array_keys())
    assert not (tmp_path / "f.zarr" / ".terrain-checkpoints").exists()
    for name in a.array_keys():
        assert a[name][...].tobytes() == b[name][...].tobytes(), name
    for k in ("flooded", "depressions", "outlets", "cells"):
        assert s[k] == fresh[k], k


@pytest.mark.parametrize("damage", ["empty", "truncated", "gone"])
def test_a_damaged_checkpoint_is_run_again_with_every_later_step(tmp_path, damage):
    """A group's checkpoint of the forest emptied (what a power cut leaves of a file not yet
    on disk), truncated or gone while the later steps' are kept: the group runs again and
    rewrites its shards, so the later steps must too (kept, they were skipped: the store
    mixed both, a fill above its spill levels with exit 0, or a crash in the C steps)."""
    asc, _ = _asc(tmp_path, _dem(6, (40, 44), integer=True))
    args = dict(tile=4, backend="cpu", scheduler="synchronous", route="tiled")
    # killed after the fill's first step, the forest's steps kept
    run_killed(["fill", asc, "-o", tmp_path / "f.zarr", "--tile", "4", "--backend", "cpu",
                "--scheduler", "synchronous", "--route", "tiled"], "terrain.hydrology.fill",
               "_fill_leaf_up", 1, shard_side=16)
    (partial,) = tmp_path.glob(".f.zarr.partial-*")
    group = sorted((partial / ".terrain-checkpoints").glob("mst-group*.npz"))[0]
    if damage == "gone":
        group.unlink()
    else:
        group.write_bytes(group.read_bytes()[:100] if damage == "truncated" else b"")

    import terrain.tiles.store as store_mod
    side = store_mod.SHARD_TARGET_SIDE
    store_mod.SHARD_TARGET_SIDE = 16
    try:
        resumed = run_fill(asc, tmp_path / "f.zarr", resume=True, **args)
        run_fill(asc, tmp_path / "g.zarr", **args)
    finally:
        store_mod.SHARD_TARGET_SIDE = side
    assert resumed["reused_tasks"] > 0  # the killed run's partial, not a fresh one
    a = zarr.open_group(str(tmp_path / "f.zarr"), mode="r")
    b = zarr.open_group(str(tmp_path / "g.zarr"), mode="r")
    for name in b.array_keys():
        assert a[name][...].tobytes() == b[name][...].tobytes(), name


def test_a_resume_without_kept_steps_runs_as_a_fresh_run(tmp_path, capsys):
    """``--resume`` took the tiled route whatever it found: with in core asked it was
    refused, and an option of the in-core route alone (``--epsilon``) with it, though no
    interrupted run had left steps to finish (one killed in core keeps none). It runs as a
    fresh run does, on its route, with its options."""
    asc, _ = _asc(tmp_path, _dem(7, (20, 20)))
    for name, extra in (("plain", []), ("asked", ["--route", "in-core", "--resume"]),
                        ("eps", ["--epsilon"]), ("eps-resumed", ["--epsilon", "--resume"])):
        rc, out, err = run_main(capsys, "fill", asc, "-o", tmp_path / f"{name}.zarr", "--json",
                                *extra)
        summary = json.loads(out)
        assert rc == 0 and summary["route"] == "in-core", err
        # the key a resuming script reads is there on either route (the tiled one's is
        # test_a_killed_tiled_fill_resumes_to_the_same_store's)
        assert summary["reused_tasks"] == 0, summary
    for a, b in (("plain", "asked"), ("eps", "eps-resumed")):
        ga = zarr.open_group(str(tmp_path / f"{a}.zarr"), mode="r")
        gb = zarr.open_group(str(tmp_path / f"{b}.zarr"), mode="r")
        for name in ("filled", "depth", "depression"):
            assert ga[name][...].tobytes() == gb[name][...].tobytes(), (b, name)


def test_resuming_a_finished_output_says_there_is_nothing_to_resume(tmp_path, capsys):
    """It said 'use --overwrite to replace it', inviting a whole run again."""
    asc, _ = _asc(tmp_path, _dem(7, (20, 20)))
    assert run_main(capsys, "fill", asc, "-o", tmp_path / "f.zarr")[0] == 0
    rc, _, err = run_main(capsys, "fill", asc, "-o", tmp_path / "f.zarr", "--resume")
    assert rc == 2 and err.strip().endswith("f.zarr: output exists (a finished output: "
                                            "nothing to resume; --overwrite runs it again)")


def test_a_tiled_fill_says_nothing_of_its_checkpoints(tmp_path):
    """The partial output's checkpoint folder is no node of the store: listing its arrays
    made zarr warn of it on stderr (a ZarrUserWarning of two lines, for every tiled fill)."""
    from cli import run_terrain
    asc, _ = _asc(tmp_path, _dem(8, (40, 40)))
    proc = run_terrain("fill", asc, "-o", tmp_path / "f.zarr", "--route", "tiled", "--tile", 4,
                       "--scheduler", "threads", cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("conn", [4, 8])
def test_signed_zeros_are_the_same_bytes_on_every_route(tmp_path, small_shards, capsys, conn):
    """``fill`` and ``flow`` of a DEM of -0.0 and +0.0 side by side and in pits: the in-core
    store and the tiled one for every tile size hold the same bytes; a cell not raised keeps
    its elevation's bits (the in-core flood gave a +0.0 cell beside a -0.0 level -0.0 and a
    depth of -0.0, the tiled drain a -0.0 cell +0.0)."""
    from grids import assert_bits_equal, dem, write_utm_tif
    z = dem("signed-zeros", (40, 36), conn)
    z[np.random.default_rng(conn).random(z.shape) < 0.05] = -32768  # nodata
    tif = write_utm_tif(tmp_path / "dem.tif", z)
    z = np.where(z == -32768, np.float32(np.nan), z)
    stores = {}
    runs = {"fill": [("in-core", 4), ("tiled", 2), ("tiled", 4), ("tiled", 16)],
            "flow": [("in-core", 4), ("tiled", 8)]}
    for command, layers in (("fill", ("filled", "depth")), ("flow", ("filled",))):
        for route, tile in runs[command]:
            out = tmp_path / f"{command}-{route}-{tile}.zarr"
            rc, _, se = run_main(capsys, command, tif, "-o", out, "--route", route, "--tile",
                                 tile, "--connectivity", conn, "--backend", "cpu")
            assert rc == 0, se
            g = zarr.open_group(str(out), mode="r")
            stores[command, route, tile] = {n: np.asarray(g[n][:]) for n in layers}
    want = stores["fill", "in-core", 4]
    for (command, route, tile), got in stores.items():
        for name, values in got.items():
            assert_bits_equal(values, want[name]), (command, route, tile, name)
    filled, depth = want["filled"], want["depth"]
    np.testing.assert_array_equal(filled, priority_flood(z, conn))
    kept = filled == z
    assert_bits_equal(np.where(kept, filled, 0), np.where(kept, z, 0))
    assert not np.signbit(depth[kept]).any() and (filled > z).any()
