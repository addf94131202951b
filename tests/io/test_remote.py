"""Stores at fsspec URLs (terrain.io.remote): memory:// in this process, s3:// on a local moto
server. Every result at a URL must hold the bits the same command writes to a local path."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from cli import child_env, run_main

SYNC = "synchronous"


def _arrays(store):
    """{array path: (dtype, shape, raw bytes)} of every array of a Zarr group (a path or a
    zarr store)."""
    return _group_arrays(zarr.open_group(store=store, mode="r", use_consolidated=False))


def _group_arrays(g, prefix=""):
    out = {}
    for name, arr in g.arrays():
        a = arr[...]
        out[prefix + name] = (a.dtype.str, a.shape, np.ascontiguousarray(a).tobytes())
    for name, sub in g.groups():
        out.update(_group_arrays(sub, prefix + name + "/"))
    return out


def _remote(url, options=None):
    from terrain.io import zarr_store
    return zarr_store(url, options)


@pytest.fixture(scope="module")
def dem(tmp_path_factory):
    """A 700 x 500 DEM with nodata, tile 128 (several tiles, several shards)."""
    from terrain.io import write_synth
    d = tmp_path_factory.mktemp("remote")
    write_synth(d / "g.asc", 700, 500, seed=3, nodata=0.02)
    return d / "g.asc"


def _same(url, local, options=None):
    got, want = _arrays(_remote(url, options)), _arrays(str(local))
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == want[k], f"{k} differs"


EXTRA = {"cost-distance": ("--source-cell", "350,250")}


@pytest.mark.parametrize("command", ["mst", "fill", "flow", "cost-distance"])
def test_memory_store_results_bit_identical(capsys, tmp_path, dem, command):
    url = f"memory://t-{command}"
    rc, _, err = run_main(capsys, "ingest", dem, "-o", f"{url}/dem.zarr", "--tile", "128",
                          scheduler=SYNC)
    assert rc == 0, err
    rc, _, err = run_main(capsys, "ingest", dem, "-o", tmp_path / "dem.zarr", "--tile", "128",
                          scheduler=SYNC)
    assert rc == 0, err
    _same(f"{url}/dem.zarr", tmp_path / "dem.zarr")
    extra = EXTRA.get(command, ())
    rc, out, err = run_main(capsys, command, f"{url}/dem.zarr", "-o", f"{url}/out.zarr", *extra,
                            scheduler=SYNC)
    assert rc == 0, err
    assert "terrain-url-" not in out  # the URL is named, not its temporary copy
    rc, _, err = run_main(capsys, command, tmp_path / "dem.zarr", "-o", tmp_path / "out.zarr",
                          *extra, scheduler=SYNC)
    assert rc == 0, err
    got = zarr.open_group(_remote(f"{url}/out.zarr"), mode="r", use_consolidated=False)
    assert got.attrs.get("source") in (None, f"{url}/dem.zarr")
    _same(f"{url}/out.zarr", tmp_path / "out.zarr")
    # the result at the URL is verified, and paths walk it, as a local one
    rc, out, err = run_main(capsys, "verify", f"{url}/out.zarr", scheduler=None)
    assert rc == 0 and "verified" in out and "terrain-url-" not in out, err
    if command == "cost-distance":
        for store, name in ((f"{url}/out.zarr", "u.fgb"), (tmp_path / "out.zarr", "l.fgb")):
            rc, _, err = run_main(capsys, "path", store, "--to-cell", "600,100",
                                  "-o", tmp_path / name, scheduler=None)
            assert rc == 0, err
        assert (tmp_path / "u.fgb").read_bytes() == (tmp_path / "l.fgb").read_bytes()
    if command in ("mst", "cost-distance"):  # and pictured as a local one
        for store, name in ((f"{url}/out.zarr", "u.png"), (tmp_path / "out.zarr", "l.png")):
            rc, _, err = run_main(capsys, "plot", store, "-o", tmp_path / name, "--size",
                                  "200x150", scheduler=None)
            assert rc == 0, err
        assert (tmp_path / "u.png").read_bytes() == (tmp_path / "l.png").read_bytes()


def test_cost_distance_friction_and_sources_at_urls(capsys, tmp_path, dem):
    """A friction raster and a sources file given as URLs are read from there: the result
    holds the bits of the same run on local copies."""
    import fsspec
    fs = fsspec.filesystem("memory")
    src = tmp_path / "s.csv"  # the centres of cells (350, 250) and (100, 400): 10 m cells
    src.write_text("x,y\n502505,4003495\n504005,4005995\n")
    fs.put(str(dem), "/t-fric/f.asc")
    fs.put(str(src), "/t-fric/s.csv")
    args = ("--cost", "friction")
    rc, _, err = run_main(capsys, "cost-distance", dem, "-o", "memory://t-fric/c.zarr",
                          "--friction", "memory://t-fric/f.asc", "--sources",
                          "memory://t-fric/s.csv", *args, scheduler=SYNC)
    assert rc == 0, err
    rc, _, err = run_main(capsys, "cost-distance", dem, "-o", tmp_path / "c.zarr",
                          "--friction", dem, "--source-cell", "350,250", "--source-cell",
                          "100,400", *args, scheduler=SYNC)
    assert rc == 0, err
    _same("memory://t-fric/c.zarr", tmp_path / "c.zarr")
    rc, _, err = run_main(capsys, "cost-distance", dem, "-o", tmp_path / "n.zarr",
                          "--friction", "memory://t-fric/none.asc", "--source-cell", "350,250",
                          *args, scheduler=SYNC)
    assert rc == 2 and "memory://t-fric/none.asc" in err and err.strip().count("\n") == 0
    assert not (tmp_path / "n.zarr").exists()
    rc, _, err = run_main(capsys, "cost-distance", dem, "-o", tmp_path / "g.zarr",
                          "--source-cell", "350,250", "--geotiff-dir", "memory://t-fric/gt",
                          scheduler=SYNC)
    assert rc == 2 and "local path" in err and not (tmp_path / "g.zarr").exists()


def test_flow_outlets_and_weights_at_urls(capsys, tmp_path, dem):
    """flow's outlets file and weights raster given as URLs are read from there (copied
    here), the outlets of fill as a store at a URL too: the results hold the bits of the
    same runs on local copies."""
    import fsspec
    fs = fsspec.filesystem("memory")
    outlets = tmp_path / "o.csv"  # the centres of cells (350, 250) and (100, 400): 10 m cells
    outlets.write_text("x,y\n502505,4003495\n504005,4005995\n")
    fs.put(str(dem), "/t-outlets/w.asc")
    fs.put(str(outlets), "/t-outlets/o.csv")
    rc, _, err = run_main(capsys, "flow", dem, "-o", "memory://t-outlets/f.zarr", "--outlets",
                          "memory://t-outlets/o.csv", "--weights", "memory://t-outlets/w.asc",
                          scheduler=SYNC)
    assert rc == 0, err
    rc, _, err = run_main(capsys, "flow", dem, "-o", tmp_path / "f.zarr", "--outlets", outlets,
                          "--weights", dem, scheduler=SYNC)
    assert rc == 0, err
    _same("memory://t-outlets/f.zarr", tmp_path / "f.zarr")
    rc, _, err = run_main(capsys, "fill", dem, "-o", "memory://t-outlets/fill.zarr",
                          "--outlets", "memory://t-outlets/f.zarr", scheduler=SYNC)
    assert rc == 0, err
    rc, _, err = run_main(capsys, "fill", dem, "-o", tmp_path / "fill.zarr", "--outlets",
                          tmp_path / "f.zarr", scheduler=SYNC)
    assert rc == 0, err
    _same("memory://t-outlets/fill.zarr", tmp_path / "fill.zarr")
    # on a cluster that shares nothing the outlets store comes as a Location, read here
    from pipelines.fill import named_outlets
    from terrain.io.remote import Location
    from terrain.tiles import open_store
    st = open_store(tmp_path / "f.zarr")
    want = named_outlets(tmp_path / "f.zarr", st.geotransform, st.shape)
    got = named_outlets(Location("memory://t-outlets/f.zarr"), st.geotransform, st.shape)
    assert len(want) and np.array_equal(got, want)


def test_url_output_exists_refused_then_overwritten(capsys, dem):
    url = "memory://t-exists/dem.zarr"
    assert run_main(capsys, "ingest", dem, "-o", url, scheduler=SYNC)[0] == 0
    rc, out, err = run_main(capsys, "ingest", dem, "-o", url, "--tile", "128", scheduler=SYNC)
    assert rc == 2 and err.strip().count("\n") == 0
    assert url in err and "--overwrite" in err
    rc, _, err = run_main(capsys, "ingest", dem, "-o", url, "--tile", "128", "--overwrite",
                          scheduler=SYNC)
    assert rc == 0, err
    g = zarr.open_group(_remote(url), mode="r", use_consolidated=False)
    assert g.attrs["tile"] == 128


def test_url_input_missing_one_line(capsys):
    rc, _, err = run_main(capsys, "mst", "memory://t-none/dem.zarr", "-o", "memory://t-none/o.zarr",
                          scheduler=SYNC)
    assert rc == 2 and err.strip().count("\n") == 0 and "memory://t-none/dem.zarr" in err


def test_bad_storage_options_one_line(capsys, dem):
    rc, _, err = run_main(capsys, "ingest", dem, "-o", "memory://t-bad/d.zarr",
                          "--storage-options", "[1", scheduler=SYNC)
    assert rc == 2 and err.strip().count("\n") == 0 and "storage options" in err


def test_failed_command_publishes_nothing(capsys, tmp_path):
    bad = tmp_path / "bad.asc"
    bad.write_text("ncols 2\nnrows 2\nxllcorner 0\nyllcorner 0\ncellsize 1\n1 2\n3\n")
    rc, _, err = run_main(capsys, "ingest", bad, "-o", "memory://t-fail/d.zarr", scheduler=SYNC)
    assert rc == 2 and str(bad) in err
    from terrain.io import store_state
    assert store_state("memory://t-fail/d.zarr") is None


def test_publish_writes_root_metadata_last_and_clears_partial(tmp_path, monkeypatch, capsys):
    """The store appears when its root zarr.json does (no rename on object stores); a
    partial a dead run left (objects, no root metadata) is removed before the new one."""
    import fsspec
    from terrain.io import publish, store_state
    local = tmp_path / "s.zarr"
    g = zarr.open_group(str(local), mode="w", zarr_format=3)
    g.create_array("a", shape=(4,), chunks=(2,), dtype="int32")[:] = np.arange(4)
    url = "memory://t-pub/s.zarr"
    fs = fsspec.filesystem("memory")
    fs.pipe("/t-pub/s.zarr/junk/c/0", b"left by a killed run")
    assert store_state(url) == "partial"
    order = []
    put = type(fs).put_file

    def recording(self, lpath, rpath, *a, **k):
        order.append(rpath)
        return put(self, lpath, rpath, *a, **k)

    monkeypatch.setattr(type(fs), "put_file", recording)
    publish(str(local), url)
    assert order[-1].endswith("s.zarr/zarr.json") and len(order) > 1
    assert not fs.exists("/t-pub/s.zarr/junk")
    assert "partial" in capsys.readouterr().err
    assert store_state(url) == "store"
    np.testing.assert_array_equal(
        zarr.open_group(_remote(url), mode="r")["a"][:], np.arange(4))


def test_file_url_is_a_local_path(capsys, tmp_path, dem):
    rc, _, err = run_main(capsys, "ingest", dem, "-o", f"file://{tmp_path}/d.zarr", scheduler=SYNC)
    assert rc == 0, err
    assert (tmp_path / "d.zarr" / "zarr.json").is_file()


# -- s3:// on a local moto server -------------------------------------------------------------

def test_s3_ingest_mst_fill_bit_identical(capsys, tmp_path, dem, s3):
    import json
    opts = ("--storage-options", json.dumps(s3))
    base = "s3://terrain-test/run"
    assert run_main(capsys, "ingest", dem, "-o", f"{base}/dem.zarr", "--tile", "128", *opts,
                    scheduler=SYNC)[0] == 0
    assert run_main(capsys, "ingest", dem, "-o", tmp_path / "dem.zarr", "--tile", "128",
                    scheduler=SYNC)[0] == 0
    _same(f"{base}/dem.zarr", tmp_path / "dem.zarr", s3)
    for command in ("mst", "fill"):
        rc, _, err = run_main(capsys, command, f"{base}/dem.zarr", "-o", f"{base}/{command}.zarr",
                              *opts, scheduler=SYNC)
        assert rc == 0, err
        rc, _, err = run_main(capsys, command, tmp_path / "dem.zarr", "-o",
                              tmp_path / f"{command}.zarr", scheduler=SYNC)
        assert rc == 0, err
        _same(f"{base}/{command}.zarr", tmp_path / f"{command}.zarr", s3)
    rc, _, err = run_main(capsys, "ingest", dem, "-o", f"{base}/dem.zarr", *opts, scheduler=SYNC)
    assert rc == 2 and f"{base}/dem.zarr" in err and "--overwrite" in err
    rc, out, err = run_main(capsys, "info", f"{base}/mst.zarr", *opts, scheduler=None)
    assert rc == 0 and f"{base}/mst.zarr" in out
    rc, _, err = run_main(capsys, "ingest", dem, "-o", "s3://no-such-bucket/d.zarr", *opts,
                          scheduler=SYNC)
    assert rc == 2 and err.strip().count("\n") == 0
    assert "s3://no-such-bucket/d.zarr: cannot write there" in err


def test_an_output_under_another_protocol_of_its_input_is_refused(capsys, dem, s3):
    """``s3a://`` names the bucket ``s3://`` does: ``fill s3://b/g.zarr -o s3a://b/g.zarr
    --overwrite`` took the output for another place, and replaced the DEM with its fill
    (on a cluster: removed it)."""
    import json
    opts = ("--storage-options", json.dumps(s3))
    url = "s3://terrain-test/alias/g.zarr"
    assert run_main(capsys, "ingest", dem, "-o", url, "--tile", "128", *opts,
                    scheduler=SYNC)[0] == 0
    for out in (url.replace("s3://", "s3a://"), url.replace("s3://", "s3a://") + "/",
                url.replace("s3://", "s3a://") + "/inner.zarr"):
        rc, _, err = run_main(capsys, "fill", url, "-o", out, "--overwrite", *opts,
                              scheduler=SYNC)
        assert rc == 2 and err.count("\n") == 1 and f"the input {url}" in err, err
    rc, out, err = run_main(capsys, "info", url, *opts, scheduler=None)
    assert rc == 0 and "elevation" in out, err


@pytest.mark.parametrize("command", ["mst", "fill"])
def test_a_dem_store_at_a_url_rewritten_during_the_run_is_refused(tmp_path, monkeypatch,
                                                                  command):
    """A DEM store at a URL rewritten by another command while a result is computed from it
    (on a cluster: exit 0, a result of neither DEM that verify failed): its objects'
    versions are compared before the output is published, as a local store's files are."""
    from cli import rewritten_before_finishing
    store = f"memory://rewritten-{command}/dem.zarr"
    module = rewritten_before_finishing(monkeypatch, tmp_path, store, command)
    out = f"memory://rewritten-{command}/out.zarr"
    # as a cluster that shares nothing but the store runs it: the stores given as Locations
    # (a run in this process reads a copy of the DEM, which nothing rewrites)
    from terrain.errors import InputError
    from terrain.io.remote import Location, store_state
    run = getattr(module, f"run_{command}")
    with pytest.raises(InputError) as e:
        run(Location(store), Location(out), backend="cpu", scheduler="synchronous")
    assert str(e.value) == (f"{store}: changed while this run read it (written by another "
                            f"command): {out} not written; run it again")
    assert store_state(out) is None


def test_watershed_and_streams_read_and_write_urls(capsys, tmp_path, dem):
    """A flow store at a URL (``no such flow store`` before: the commands took no URL), file
    outputs at a URL (an existing one kept without ``--overwrite``: it was taken for a
    killed run's partial), and a batch into a URL (``cannot create s3:/...``): refused."""
    import rasterio
    url = "memory://hydro-urls"
    assert run_main(capsys, "flow", dem, "-o", f"{url}/f.zarr", scheduler=SYNC)[0] == 0
    assert run_main(capsys, "flow", dem, "-o", tmp_path / "f.zarr", scheduler=SYNC)[0] == 0
    for where in (f"{url}/f.zarr", tmp_path / "f.zarr"):
        tag = "url" if where == f"{url}/f.zarr" else "local"
        rc, _, err = run_main(capsys, "watershed", where, "--outlet-cell", "20,30", "-o",
                              tmp_path / f"w-{tag}.tif", scheduler=None)
        assert rc == 0, err
        rc, _, err = run_main(capsys, "streams", where, "--threshold", "30", "-o",
                              tmp_path / f"s-{tag}.fgb", scheduler=None)
        assert rc == 0, err
    with rasterio.open(tmp_path / "w-url.tif") as a, rasterio.open(tmp_path / "w-local.tif") as b:
        np.testing.assert_array_equal(a.read(1), b.read(1))
    assert (tmp_path / "s-url.fgb").read_bytes() == (tmp_path / "s-local.fgb").read_bytes()
    out = f"{url}/s.fgb"
    argv = ["streams", f"{url}/f.zarr", "--threshold", "30", "-o", out]
    assert run_main(capsys, *argv, scheduler=None)[0] == 0
    rc, _, err = run_main(capsys, *argv, scheduler=None)
    assert rc == 2 and "output exists" in err, err
    assert run_main(capsys, *argv, "--overwrite", scheduler=None)[0] == 0
    import fsspec
    assert fsspec.filesystem("memory").cat_file(out.split("://")[1]) == (
        tmp_path / "s-local.fgb").read_bytes()
    rc, _, err = run_main(capsys, "batch", "mst", dem, "-o", f"{url}/batch", scheduler=SYNC)
    assert rc == 2 and err.strip() == (f"terrain: {url}/batch: a batch writes into a local "
                                       "folder (its outputs, manifest and lock); run the "
                                       "command for each file to write at a URL"), err


def test_url_blocks_read_whole_shard_objects(monkeypatch):
    """read_block at a URL fetches each whole shard's object once and decodes it as a local
    file's: the cells zarr reads, fill where a chunk or a shard is absent; write_block there
    writes what zarr reads back."""
    from terrain.io.remote import Location
    from terrain.tiles import _shards
    from terrain.tiles.store import create_store, read_block, write_block
    loc = Location("memory://blocks/s.zarr")
    blosc = zarr.codecs.BloscCodec(cname="lz4", clevel=1, shuffle="shuffle")  # ingest's
    store = create_store(loc, (37, 45), tile=8, compressors=(blosc,))  # one shard of 64
    z = np.arange(37 * 45, dtype=np.float32).reshape(37, 45)
    z[:16, :16] = np.nan  # absent chunks
    assert write_block(loc, "elevation", (0, 37, 0, 45), z) is None  # zarr wrote it
    calls = []
    real = _shards.read_url_shard
    monkeypatch.setattr(_shards, "read_url_shard", lambda *a: calls.append(a[2:4]) or real(*a))
    got = read_block(loc, "elevation", (0, 37, 0, 45))
    assert calls == [(0, 0)]
    np.testing.assert_array_equal(got, store.elevation[...])
    np.testing.assert_array_equal(got, z)
    part = read_block(loc, "elevation", (3, 20, 5, 40))  # cuts the shard: zarr reads it
    np.testing.assert_array_equal(part, z[3:20, 5:40])
    assert calls == [(0, 0)]


@pytest.mark.parametrize("command", ["mst", "fill", "flow"])
def test_store_at_a_url_needs_its_output_named(command):
    """A DEM store at a URL (a Location, as a cluster that shares nothing is given it) has no
    output name to derive: one line, before anything is read."""
    import importlib

    from terrain.errors import InputError
    from terrain.io.remote import Location
    run = getattr(importlib.import_module(f"pipelines.{command}"), f"run_{command}")
    with pytest.raises(InputError, match="needs its output named"):
        run(Location(f"memory://no-output-{command}/dem.zarr"), None)


# -- the lock object of an output at a URL, and --resume there --------------------------------

def _lock(url, options=None):
    """The lock object of the output ``url``: (its filesystem, its path there)."""
    from terrain.io.remote import filesystem, lock_url
    return filesystem(lock_url(url), options)


def _plant_lock(url, options=None, age=0.0, host="another-host", pid=4242):
    """A lock object as a run on ``host`` refreshed ``age`` seconds ago would have left."""
    import json
    import time
    fs, path = _lock(url, options)
    fs.pipe_file(path, json.dumps({"run": None, "host": host, "pid": pid, "token": "theirs",
                                   "started": time.time() - age,
                                   "heartbeat": time.time() - age}).encode())


@pytest.mark.parametrize("route", ["staged", "direct"])
def test_url_lock_refuses_a_second_writer_in_one_line(capsys, dem, route, monkeypatch):
    """A run writing a URL while another run's lock object is there is refused in one line
    naming the URL, exit 2, before it touches the output: a run holding the lock (the
    second run started while the first one publishes), then a lock object alone (a run of
    another host) in front of a published store and --overwrite. The lock goes with its
    run, which publishes its own output."""
    import terrain.io.remote as remote
    url = f"memory://t-lock-{route}/dem.zarr"
    # the staged route: the command line's copy; direct: --resume writes under the prefix
    extra = ["--resume"] if route == "direct" else []
    second = []
    where = "_publish_held_root" if route == "direct" else "publish"
    real = getattr(remote, where)

    def publish_after_a_second_run(*args, **kwargs):
        from terrain.run import main
        second.append(main(["ingest", str(dem), "-o", url, "--tile", "128", "--overwrite",
                            *extra, "--scheduler", SYNC]))
        second.append(capsys.readouterr().err)
        return real(*args, **kwargs)

    monkeypatch.setattr(remote, where, publish_after_a_second_run)
    rc, _, err = run_main(capsys, "ingest", dem, "-o", url, "--tile", "128", *extra,
                          scheduler=SYNC)
    assert rc == 0, err
    monkeypatch.setattr(remote, where, real)
    assert second[0] == 2 and second[1].strip().count("\n") == 0, second
    assert second[1].startswith(f"terrain: {url}: another terrain run is writing this output")
    fs, lock = _lock(url)
    assert not fs.exists(lock)
    want = _arrays(_remote(url))
    assert want and store_state_of(url) == "store"
    _plant_lock(url, age=5)
    rc, _, err = run_main(capsys, "ingest", dem, "-o", url, "--tile", "64", "--overwrite",
                          *extra, scheduler=SYNC)
    assert rc == 2 and err.strip().count("\n") == 0 and url in err, err
    assert "another terrain run is writing this output" in err and "another-host" in err
    assert _arrays(_remote(url)) == want  # the output is as it was
    assert fs.exists(lock)  # not this run's to remove
    fs.rm(lock)


def store_state_of(url):
    from terrain.io import store_state
    return store_state(url)


@pytest.mark.parametrize("route", ["staged", "direct"])
def test_url_lock_removed_after_success_and_failure(capsys, tmp_path, dem, route, monkeypatch):
    url = f"memory://t-lock-gone-{route}/dem.zarr"
    extra = ["--resume"] if route == "direct" else []
    rc, _, err = run_main(capsys, "ingest", dem, "-o", url, *extra, scheduler=SYNC)
    assert rc == 0, err
    fs, lock = _lock(url)
    assert not fs.exists(lock) and not fs.exists(lock.rsplit("/", 1)[0] + "/.terrain-probe")

    class Failed(RuntimeError):
        pass

    def fails(*args, **kwargs):
        raise Failed("a task failed")

    # the band writes fail: the staged route's (rows read here) and the direct one's
    monkeypatch.setattr("pipelines.ingest._ingest_band", fails)
    monkeypatch.setattr("pipelines.ingest._write_band", fails)
    monkeypatch.setattr("pipelines.ingest.write_window", fails)
    with pytest.raises(Failed):
        run_main(capsys, "ingest", dem, "-o", url, "--overwrite", *extra, scheduler=SYNC)
    assert not fs.exists(lock)
    # a staged run publishes nothing, the old store stays; a direct one replaced it
    assert store_state_of(url) == ("store" if route == "staged" else None)


def test_url_lock_stale_is_taken_over(capsys, dem):
    """A lock whose heartbeat is older than the lease, or whose process on this host is
    gone, is taken over with a notice; one of a live process here is not."""
    import os
    import socket
    import subprocess
    import sys

    from terrain.io.remote import LOCK_LEASE
    url = "memory://t-lock-stale/dem.zarr"
    fs, lock = _lock(url)
    _plant_lock(url, age=LOCK_LEASE + 10)
    rc, _, err = run_main(capsys, "ingest", dem, "-o", url, scheduler=SYNC)
    assert rc == 0, err
    assert "taking over the lock of memory://t-lock-stale/dem.zarr" in err
    assert "heartbeat stopped" in err and not fs.exists(lock)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _plant_lock(url, age=1, host=socket.gethostname(), pid=dead.pid)
    rc, _, err = run_main(capsys, "ingest", dem, "-o", url, "--overwrite", scheduler=SYNC)
    assert rc == 0, err
    assert f"its process {dead.pid} on this host is gone" in err and not fs.exists(lock)
    _plant_lock(url, age=1, host=socket.gethostname(), pid=os.getppid())  # alive
    rc, _, err = run_main(capsys, "ingest", dem, "-o", url, "--overwrite", scheduler=SYNC)
    assert rc == 2 and "another terrain run is writing this output" in err
    fs.rm(lock)


def test_url_lock_heartbeat_and_takeover_noticed(monkeypatch):
    """The held lock object is refreshed while its run lives; a run whose lock was taken
    over meanwhile (its heartbeat stalled past the lease) refuses to publish."""
    import json
    import time

    import terrain.io.remote as remote
    from terrain.errors import InputError
    monkeypatch.setattr(remote, "LOCK_HEARTBEAT", 0.05)
    url = "memory://t-lock-beat/out.zarr"
    fs, lock = _lock(url)
    with remote.hold_url_lock(url, key="k1") as still_held:
        first = json.loads(fs.cat_file(lock))
        assert first["run"] == "k1" and first["pid"] == __import__("os").getpid()
        time.sleep(0.4)
        assert json.loads(fs.cat_file(lock))["heartbeat"] > first["heartbeat"]
        still_held()
        _plant_lock(url)  # another run took it over
        time.sleep(0.4)
        with pytest.raises(InputError, match="took over this output's lock"):
            still_held()
    assert json.loads(fs.cat_file(lock))["token"] == "theirs"  # theirs is not removed
    fs.rm(lock)


class _Killed(RuntimeError):
    """A run stopped mid-way that keeps its partial output (as a lost cluster does)."""

    keep_partial = True


def test_resume_at_a_url_reuses_checkpoints(capsys, tmp_path, dem, monkeypatch):
    """mst of a raster to memory:// stopped after its first bands were written (partial kept),
    then run again with --resume: the written bands are not written again, no checkpoint
    is left in the published store, its lock is gone, and the arrays are the bits of a
    clean local run. Without --resume the partial is removed."""
    import json

    import pipelines.ingest as ingest
    monkeypatch.setattr("terrain.tiles.store.SHARD_TARGET_SIDE", 128)  # 6 bands of 128 rows
    url = "memory://t-resume/m.zarr"
    args = ["--tile", "64", "--backend", "cpu", "--json"]
    rc, _, err = run_main(capsys, "mst", dem, "-o", tmp_path / "m.zarr", *args,
                          scheduler=SYNC)
    assert rc == 0, err
    real, written, kill = ingest._write_band, [], [True]

    def write_band(*a, **k):
        if kill[0] and len(written) == 2:
            raise _Killed("killed")
        written.append(a[2])
        return real(*a, **k)

    monkeypatch.setattr(ingest, "_write_band", write_band)
    with pytest.raises(_Killed):
        run_main(capsys, "mst", dem, "-o", url, *args, "--resume", scheduler=SYNC)
    fs, lock = _lock(url)
    assert not fs.exists(lock) and store_state_of(url) == "partial"
    kept = [k for k in fs.find("/t-resume/m.zarr/.terrain-checkpoints")]
    assert sum("ingest-band" in k for k in kept) == 2, kept
    done, written[:], kill[0] = list(written), [], False
    rc, out, err = run_main(capsys, "mst", dem, "-o", url, *args, "--resume", scheduler=SYNC)
    assert rc == 0, err
    assert "resuming from the partial output at memory://t-resume/m.zarr" in err
    assert len(written) == 4 and not set(written) & set(done), (written, done)  # the rest
    assert json.loads(out)["reused_tasks"] >= 3  # create and the two bands
    assert not fs.exists(lock) and store_state_of(url) == "store"
    assert not [k for k in fs.find("/t-resume/m.zarr") if ".terrain-checkpoints" in k]
    _same(url, tmp_path / "m.zarr")
    # a run without --resume removes a partial it finds (the checkpoints with it)
    written[:], kill[0] = [], True
    with pytest.raises(_Killed):
        run_main(capsys, "mst", dem, "-o", f"{url}2", *args, "--resume", scheduler=SYNC)
    monkeypatch.setattr(ingest, "_write_band", real)
    rc, out, err = run_main(capsys, "mst", dem, "-o", f"{url}2", *args, scheduler=SYNC)
    assert rc == 0 and "removing the partial output" in err, err
    assert json.loads(out)["reused_tasks"] == 0


def _stopped_then_resumed(capsys, monkeypatch, command, dem, url, args, module, step):
    """``command DEM -o URL ARGS --resume`` stopped at the third call of ``module.step``
    (:class:`_Killed`: the partial kept, as a lost cluster leaves it), then run again; the
    second run's summary, once it said it resumed."""
    import importlib
    import json
    mod = importlib.import_module(module)
    real, calls = getattr(mod, step), []

    def stop_after_two(*a, **k):
        if len(calls) == 2:
            raise _Killed("killed")
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(mod, step, stop_after_two)
    with pytest.raises(_Killed):
        run_main(capsys, command, dem, "-o", url, *args, "--resume", scheduler=SYNC)
    monkeypatch.setattr(mod, step, real)
    rc, out, err = run_main(capsys, command, dem, "-o", url, *args, "--resume", scheduler=SYNC)
    assert rc == 0, err
    assert f"resuming from the partial output at {url}" in err
    return json.loads(out)


@pytest.mark.parametrize("command, module, step", [("fill", "pipelines.fill", "_write_ids"),
                                                   ("flow", "pipelines.flow", "direction_group")])
def test_fill_and_flow_resume_at_a_url(capsys, tmp_path, dem, monkeypatch, command, module,
                                       step):
    """fill and flow to memory:// stopped in a late step of the tiled route (the partial
    kept), then run again with --resume: the finished steps come from the checkpoints under
    the prefix, none is left in the published store, whose arrays are a clean local run's."""
    from terrain.io.remote import filesystem
    monkeypatch.setattr("terrain.tiles.store.SHARD_TARGET_SIDE", 128)  # 4 x 6 groups
    url = f"memory://t-resume-{command}/o.zarr"
    args = ["--tile", "64", "--backend", "cpu", "--json", "--route", "tiled"]
    rc, _, err = run_main(capsys, command, dem, "-o", tmp_path / "o.zarr", *args,
                          scheduler=SYNC)
    assert rc == 0, err
    summary = _stopped_then_resumed(capsys, monkeypatch, command, dem, url, args, module,
                                    step)
    assert summary["reused_tasks"] > 2
    fs, root = filesystem(url)
    assert not [k for k in fs.find(root) if ".terrain-checkpoints" in k]
    _same(url, tmp_path / "o.zarr")


def test_mst_resume_at_a_url_keeps_the_groups_forest(capsys, tmp_path, dem, monkeypatch):
    """mst to memory:// stopped while writing the forest (its groups' tasks checkpointed, the
    groups' edges already in the mask's shards), then run again with --resume: the mask is
    not created again over those shards (the preparing task, whose result is a URL, runs
    again), and the published forest is a clean local run's."""
    monkeypatch.setattr("terrain.tiles.store.SHARD_TARGET_SIDE", 128)
    monkeypatch.setattr("terrain.grid.mst_device.HOST_MAX_CELLS", 1 << 12)  # the tiled route
    url = "memory://t-resume-mst/o.zarr"
    args = ["--tile", "64", "--backend", "cpu", "--json"]
    rc, _, err = run_main(capsys, "mst", dem, "-o", tmp_path / "o.zarr", *args, scheduler=SYNC)
    assert rc == 0, err
    summary = _stopped_then_resumed(capsys, monkeypatch, "mst", dem, url, args,
                                    "pipelines.mst", "_write_changes")
    assert summary["path"] == "tiled" and summary["reused_tasks"] > 2
    _same(url, tmp_path / "o.zarr")


@pytest.mark.parametrize("where", ["memory", "s3"])
def test_resume_at_a_url_of_another_run_starts_again(capsys, tmp_path, dem, monkeypatch, where,
                                                     request):
    """A partial at the URL whose checkpoints another run (another tile) wrote is kept by a
    resumed run, which refuses in one line (it said it was resuming it first); a run without
    resume removes it and starts again, reusing nothing."""
    import json

    from terrain.io import store_state

    import pipelines.ingest as ingest
    options = request.getfixturevalue("s3") if where == "s3" else None
    url = ("s3://terrain-test/resume-other/m.zarr" if options else
           "memory://t-resume-other/m.zarr")
    common = ["-o", url, "--backend", "cpu", "--json"] + (
        ["--storage-options", json.dumps(options)] if options else [])
    real = ingest._write_band

    def killed(*a, **k):
        raise _Killed("killed")

    monkeypatch.setattr(ingest, "_write_band", killed)
    with pytest.raises(_Killed):
        run_main(capsys, "mst", dem, *common, "--tile", "128", "--resume", scheduler=SYNC)
    monkeypatch.setattr(ingest, "_write_band", real)
    rc, out, err = run_main(capsys, "mst", dem, *common, "--tile", "64", "--resume",
                            scheduler=SYNC)
    assert rc == 2 and err.count("\n") == 1 and not out, err
    assert err.startswith(f"terrain: {url}: the partial output there was left by a run with "
                          "other options"), err
    assert store_state(url, options) == "partial"
    rc, out, err = run_main(capsys, "mst", dem, *common, "--tile", "64", scheduler=SYNC)
    assert rc == 0, err
    assert json.loads(out)["reused_tasks"] == 0
    rc, _, err = run_main(capsys, "mst", dem, "-o", tmp_path / "m.zarr", "--tile", "64",
                          "--backend", "cpu", scheduler=SYNC)
    assert rc == 0, err
    _same(url, tmp_path / "m.zarr", options)


def test_resume_staged_at_a_url_refused(capsys, tmp_path, dem):
    """A run that stages (GeoTIFFs come from a local partial) cannot be resumed at a URL:
    one line, before any work."""
    rc, _, err = run_main(capsys, "mst", dem, "-o", "memory://t-resume-geotiff/m.zarr",
                          "--geotiff", tmp_path / "m.tif", "--resume", scheduler=SYNC)
    assert rc == 2 and err.strip().count("\n") == 0, err
    assert "memory://t-resume-geotiff/m.zarr: a run staged" in err
    assert not (tmp_path / "m.tif").exists()


# the command line, killed (SIGKILL) while it writes its third band of rows: its lock object,
# its partial output and the checkpoints of the tasks that ended stay at the URL
KILLED_MID_WAY = """
import os, signal, sys
import terrain.tiles.store as store
store.SHARD_TARGET_SIDE = 128
import pipelines.ingest as ingest
real, written = ingest._write_band, []
def write_band(*a, **k):
    if len(written) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    written.append(a[2])
    return real(*a, **k)
ingest._write_band = write_band
from terrain.run import main
sys.exit(main(sys.argv[1:]))
"""


def test_s3_run_killed_then_resumed(capsys, tmp_path, dem, s3, monkeypatch):
    """mst of a raster to s3:// killed with SIGKILL mid-way leaves its lock object (its
    process gone from this host: taken over at once) and a partial with checkpoints; the
    run again with --resume writes only the bands not written, publishes the bits of a
    clean local run, and leaves neither checkpoints nor a lock object."""
    import json
    import signal
    import socket
    import subprocess
    import sys

    import fsspec

    import pipelines.ingest as ingest
    from cli import child_env
    monkeypatch.setattr("terrain.tiles.store.SHARD_TARGET_SIDE", 128)  # 6 bands of 128 rows
    url = "s3://terrain-test/resume/m.zarr"
    args = ["mst", str(dem), "-o", url, "--tile", "64", "--backend", "cpu", "--json",
            "--storage-options", json.dumps(s3), "--resume", "--scheduler", SYNC]
    env = child_env()
    proc = subprocess.run([sys.executable, "-c", KILLED_MID_WAY, *args], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    fs = fsspec.filesystem("s3", **s3)
    lock = "terrain-test/resume/.m.zarr.lock"
    assert json.loads(fs.cat_file(lock))["host"] == socket.gethostname()
    bands = [k for k in fs.find("terrain-test/resume/m.zarr/.terrain-checkpoints")
             if "ingest-band" in k]
    assert len(bands) == 2, bands
    real, written = ingest._write_band, []
    monkeypatch.setattr(ingest, "_write_band", lambda *a, **k: written.append(a[2]) or
                        real(*a, **k))
    rc, out, err = run_main(capsys, *args[:-2], scheduler=SYNC)
    assert rc == 0, err
    assert "taking over the lock of s3://terrain-test/resume/m.zarr" in err
    assert "on this host is gone" in err and "resuming from the partial output" in err
    assert len(written) == 4, written  # of 6 bands
    assert json.loads(out)["reused_tasks"] >= 3
    assert not fs.exists(lock)
    assert not [k for k in fs.find("terrain-test/resume/m.zarr") if ".terrain-checkpoints" in k]
    monkeypatch.setattr(ingest, "_write_band", real)
    rc, _, err = run_main(capsys, *args[:3], str(tmp_path / "m.zarr"), *args[4:8],
                          scheduler=SYNC)
    assert rc == 0, err
    _same(url, tmp_path / "m.zarr", s3)


@pytest.mark.parametrize("algorithm, module, step", [
    ("tiled", "pipelines.cost_distance_tiled", "_fill_task"),
    ("blocked", "pipelines.cost_distance_blocked", "_write_task")])
def test_cost_distance_resume_at_a_url(capsys, tmp_path, monkeypatch, algorithm, module,
                                       step):
    """cost-distance to memory:// stopped in its last phase (the partial kept), then run
    again with --resume: the ingest's bands (and the tiled index, whole by then) come from
    the checkpoints under the prefix, the blocked states start afresh, and the published
    store, with no checkpoint or scratch in it, is a clean local run's."""
    from terrain.io import write_synth
    from terrain.io.remote import filesystem
    monkeypatch.setattr("terrain.tiles.store.SHARD_TARGET_SIDE", 64)
    write_synth(tmp_path / "d.asc", 150, 130, seed=4, nodata=0.02)
    dem = tmp_path / "d.asc"
    url = f"memory://t-resume-cost-{algorithm}/c.zarr"
    args = ["--tile", "32", "--backend", "cpu", "--json", "--route", algorithm,
            "--source-cell", "70,60", *(["--memory", "1MB"] if algorithm == "blocked" else [])]
    rc, _, err = run_main(capsys, "cost-distance", dem, "-o", tmp_path / "c.zarr", *args,
                          scheduler=SYNC)
    assert rc == 0, err
    summary = _stopped_then_resumed(capsys, monkeypatch, "cost-distance", dem, url, args,
                                    module, step)
    assert summary["resumed"] and summary["reused_tasks"] >= 2
    assert summary.get("resumed_index", False) == (algorithm == "tiled")
    fs, root = filesystem(url)
    assert not [k for k in fs.find(root) if ".terrain-checkpoints" in k or ".blocked" in k]
    _same(url, tmp_path / "c.zarr")


def test_an_object_store_client_error_is_one_line(capsys, monkeypatch):
    """botocore's EndpointConnectionError / NoCredentialsError (here a stand-in of its
    module): one line naming the object store, exit 2, not a traceback."""
    import terrain.run as run

    class NoCredentialsError(Exception):
        pass
    NoCredentialsError.__module__ = "botocore.exceptions"

    def fails(args):
        raise NoCredentialsError("Unable to locate credentials")
    monkeypatch.setattr(run, "_handler", lambda args: fails)
    rc, _, err = run_main(capsys, "info", "x.zarr", scheduler=None)  # the handler raises
    assert rc == 2 and err == "terrain: the object store: Unable to locate credentials\n"
    # the URLs given, and where a cluster's workers may be the ones without access
    rc, _, err = run_main(capsys, "mst", "s3://b/d.zarr", "-o", "s3://b/m.zarr",
                          "--storage-options", '{"endpoint_url": "http://127.0.0.1:9"}',
                          scheduler="tcp://127.0.0.1:9")
    assert rc == 2 and err == ("terrain: the object store (s3://b/d.zarr, s3://b/m.zarr) from "
                               "this machine or a worker of the cluster (each needs its "
                               "access): Unable to locate credentials\n"), err
    monkeypatch.setattr(NoCredentialsError, "__module__", "elsewhere")
    with pytest.raises(NoCredentialsError):  # another package's error stays a traceback
        run_main(capsys, "info", "x.zarr", scheduler=None)


def test_a_url_whose_client_is_missing_names_the_extra_that_installs_it():
    """Without s3fs, ``info s3://...`` said fsspec's "Install s3fs to access S3" alone, where
    ``plot`` and Parquet outputs name their extra: the extra named holds s3fs in
    pyproject.toml."""
    tomllib = pytest.importorskip("tomllib")
    extras = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]
    code = ("import sys; sys.modules['s3fs'] = None; from terrain.run import main; "
            "sys.exit(main(['info', 's3://bucket/x.zarr']))")
    proc = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    extra = re.search(r"pip install 'terrain\[(\w+)\]'", line)
    assert extra and any(r.startswith("s3fs") for r in extras[extra.group(1)]), line
