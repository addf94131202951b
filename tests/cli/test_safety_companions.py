"""``cost-distance --geotiff-dir``: the store and its GeoTIFFs are one set. The store is
published first (the commit point), the GeoTIFFs, staged before it, right after; the old
GeoTIFFs go as the new store comes. A run killed between the two publications leaves the
store with some of its GeoTIFFs missing, never an old one beside it, and ``--resume`` writes
them from the store; a failing GeoTIFF leaves the old set as it was."""

import subprocess
import sys

import numpy as np
import pytest
import rasterio
import zarr

from cli import SAMPLE, child_env, run_main, snapshot

LAYERS = ("distance", "allocation", "backlink")


def _argv(tmp_path, cell):
    return ["cost-distance", SAMPLE, "-o", tmp_path / "c.zarr", "--source-cell", cell,
            "--geotiff-dir", tmp_path / "gt"]


def _killed_after_rename(argv, dst):
    """``terrain ARGV`` in a child process killed (``os._exit(9)``, as SIGKILL) right after
    the rename that put ``dst`` in place."""
    code = f"""
import os
real = os.replace
def replace(src, dst, *a, **k):
    real(src, dst, *a, **k)
    if str(dst) == {str(dst)!r}:
        os._exit(9)
os.replace = replace
from terrain.run import main
main({[str(a) for a in argv]!r})
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=child_env(), timeout=300)
    assert proc.returncode == 9, proc.stderr


def _same_as_store(tif, store, name):
    """The GeoTIFF holds the store's layer (its nodata is the layer's fill value)."""
    want = zarr.open_group(str(store), mode="r")[name][...]
    with rasterio.open(tif) as src:
        got = src.read(1)
    return got.shape == want.shape and np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("overwrite", [False, True], ids=["new", "overwrite"])
@pytest.mark.parametrize("killed_after", ["c.zarr", "gt/distance.tif"])
def test_killed_between_store_and_geotiffs_resumes_to_one_set(capsys, tmp_path, overwrite,
                                                              killed_after):
    tmp_path = tmp_path.resolve()
    if overwrite:  # an old set, of another source
        rc, _, err = run_main(capsys, *_argv(tmp_path, "1,1"))
        assert rc == 0, err
        old = {n: (tmp_path / "gt" / f"{n}.tif").read_bytes() for n in LAYERS}
    argv = _argv(tmp_path, "5,5")
    _killed_after_rename(argv + ["--overwrite"] * overwrite + ["--scheduler", "synchronous"],
                         tmp_path / killed_after)
    store = tmp_path / "c.zarr"
    there = [n for n in LAYERS if (tmp_path / "gt" / f"{n}.tif").exists()]
    assert there == (["distance"] if killed_after.endswith(".tif") else [])
    for n in there:  # never an old GeoTIFF beside the new store
        assert _same_as_store(tmp_path / "gt" / f"{n}.tif", store, n)
        assert not overwrite or (tmp_path / "gt" / f"{n}.tif").read_bytes() != old[n]
    rc, _, err = run_main(capsys, *argv, "--resume", "--json")
    assert rc == 0, err
    for n in LAYERS:
        assert _same_as_store(tmp_path / "gt" / f"{n}.tif", store, n), n
    assert sorted(p.name for p in (tmp_path / "gt").iterdir()) == sorted(f"{n}.tif"
                                                                         for n in LAYERS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.zarr", "gt"]
    # finished now: a resumed run has nothing left to do
    rc, _, err = run_main(capsys, *argv, "--resume")
    assert rc == 2 and "nothing to resume" in err


def test_failing_geotiff_under_overwrite_leaves_the_old_set(capsys, tmp_path, monkeypatch):
    from terrain.io import geotiff

    rc, _, err = run_main(capsys, *_argv(tmp_path, "1,1"))
    assert rc == 0, err
    before = snapshot(tmp_path)
    real, calls = geotiff._write_one, []

    def fails_second(p, tmp, cog, threads):
        calls.append(tmp)
        if len(calls) == 2:
            raise RuntimeError("TIFFWriteEncodedTile failed (simulated)")
        return real(p, tmp, cog, threads)

    monkeypatch.setattr(geotiff, "_write_one", fails_second)
    with pytest.raises(RuntimeError, match="simulated"):
        run_main(capsys, *_argv(tmp_path, "5,5"), "--overwrite")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command, option, names", [
    ("mst", ["--geotiff", "gt/m.tif"], ["m.tif"]),
    ("fill", ["--geotiff-dir", "gt"], ["depression.tif", "depth.tif", "filled.tif"]),
    ("flow", ["--geotiff-dir", "gt"], ["accumulation.tif", "direction.tif", "filled.tif"])])
def test_each_command_resumes_its_geotiffs_as_a_run_records_them(capsys, tmp_path, command,
                                                                 option, names, monkeypatch):
    """mst, fill and flow killed between their store and its GeoTIFFs: ``--resume`` publishes
    them all from the store, and its summary names them as a whole run's does."""
    import json
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gt").mkdir()
    (tmp_path / "wt").mkdir()
    argv = [command, SAMPLE, "-o", tmp_path / "c.zarr", *option, "--json"]
    _killed_after_rename(argv + ["--scheduler", "synchronous"], tmp_path / "c.zarr")
    assert not list((tmp_path / "gt").glob("*.tif"))  # staged, not published
    rc, out, err = run_main(capsys, *argv, "--resume")
    assert rc == 0, err
    assert sorted(p.name for p in (tmp_path / "gt").glob("*.tif")) == names
    rc, whole, err = run_main(capsys, command, SAMPLE, "-o", tmp_path / "w.zarr",
                              *[o.replace("gt", "wt") for o in option], "--json")
    assert rc == 0, err
    wt = json.dumps(json.loads(whole)["geotiff"]).replace("wt", "gt")
    assert json.loads(out)["geotiff"] == json.loads(wt)
