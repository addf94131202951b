"""Damaged or crafted input stores are one line naming the store, not a different result or
a job of hours.

Stores terrain writes carry a CRC-32C after every chunk (zarr's crc32c codec) and, once
finished, an inventory of their shard files in every sharded array's attributes
(:func:`terrain.io.outputs.seal_store`); :func:`terrain.tiles.open_store` checks the
inventory, the shape and the tile geometry before any work.
"""

import errno
import json
import os
import shutil
import socket

import numpy as np
import pytest
import zarr

from cli import SAMPLE, assert_one_line_error, run_terrain

SYNC = ("--scheduler", "synchronous")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A store of 2 x 1 shards (2200 x 400 cells, tile 256) and its forest, for reference."""
    from terrain.io import write_synth
    d = tmp_path_factory.mktemp("stores")
    write_synth(d / "g.asc", 2200, 400, seed=5, nodata=0.02)
    proc = run_terrain("ingest", "g.asc", "-o", "s.zarr", "--tile", "256", *SYNC, cwd=d)
    assert proc.returncode == 0, proc.stderr
    return d / "s.zarr"


@pytest.fixture
def copy(store, tmp_path):
    shutil.copytree(store, tmp_path / "s.zarr")
    return tmp_path


def _mst(cwd, *extra):
    return run_terrain("mst", "s.zarr", "-o", "m.zarr", "--backend", "cpu", *extra, *SYNC,
                       cwd=cwd)


def _edit_json(path, edit):
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))


def test_a_whole_store_runs(copy):
    proc = _mst(copy)
    assert proc.returncode == 0, proc.stderr


def test_deleted_shard_is_refused(copy):
    os.remove(copy / "s.zarr" / "elevation" / "c" / "1" / "0")
    proc = _mst(copy)
    assert_one_line_error(proc, "terrain: s.zarr: elevation/c/1/0 is missing (the store is "
                                "damaged)")
    assert sorted(os.listdir(copy)) == ["s.zarr"]


def test_deleted_shard_is_refused_by_the_shard_reader(copy):
    """Past the check at open (a file gone meanwhile): the whole-shard reader refuses too."""
    from terrain.errors import InputError
    from terrain.tiles import open_store, read_block
    store = open_store(copy / "s.zarr")
    os.remove(copy / "s.zarr" / "elevation" / "c" / "1" / "0")
    with pytest.raises(InputError, match="shard missing"):
        read_block(store.path, "elevation", (0, 2200, 0, 400))


def test_an_array_that_lost_its_shard_list_is_refused(store, copy):
    """A finished store lists every sharded array's shards; an array whose list was edited
    away (its siblings keep theirs) read a deleted shard as nodata, exit 0, ``info``
    counting no nodata."""
    proc = run_terrain("mst", store.parent / "g.asc", "-o", "m.zarr", "--backend", "cpu",
                       "--tile", "256", *SYNC, cwd=copy)  # the DEM's elevation and its mst
    assert proc.returncode == 0, proc.stderr
    _edit_json(copy / "m.zarr" / "elevation" / "zarr.json",
               lambda d: d["attributes"].pop("terrain_shards"))
    os.remove(copy / "m.zarr" / "elevation" / "c" / "1" / "0")
    for argv in (["info", "m.zarr"], ["mst", "m.zarr", "-o", "m2.zarr", *SYNC]):
        proc = run_terrain(*argv, cwd=copy)
        assert_one_line_error(proc, "terrain: m.zarr: elevation has lost its list of shard "
                                    "files")
    assert sorted(os.listdir(copy)) == ["m.zarr", "s.zarr"]


@pytest.mark.parametrize("damaged", ["zarr.json", "elevation/zarr.json"])
def test_damaged_metadata_is_one_line(copy, damaged):
    """A truncated or unparsable zarr.json: json's traceback before, exit 1."""
    path = copy / "s.zarr" / damaged
    path.write_text(path.read_text()[:50])
    for argv in (["info", "s.zarr"], ["plot", "s.zarr", "-o", "p.png"],
                 ["fill", "s.zarr", "-o", "f.zarr", *SYNC]):
        proc = run_terrain(*argv, cwd=copy)
        assert_one_line_error(proc, f"terrain: {path.relative_to(copy)}: not valid JSON (the "
                                    "store is damaged)")
    assert sorted(os.listdir(copy)) == ["s.zarr"]


def test_a_layer_given_for_its_store_says_so(copy):
    """``info s.zarr/elevation`` (a layer's folder): zarr_meta's FileExistsError traceback
    before."""
    for argv in (["info", "s.zarr/elevation"], ["verify", "s.zarr/elevation"],
                 ["fill", "s.zarr/elevation", "-o", "f.zarr"]):
        proc = run_terrain(*argv, cwd=copy)
        assert_one_line_error(proc, "terrain: s.zarr/elevation: a layer of the store s.zarr, "
                                    "not a store (give s.zarr)")
    assert sorted(os.listdir(copy)) == ["s.zarr"]


def _unreadable(path, monkeypatch):
    """Make the file ``path`` one the kernel will not open: mode 000, or, where the tests run
    as root (whom no mode stops), a Unix socket in its place; the strerror it gives."""
    if os.geteuid() != 0:
        path.chmod(0)
        return "Permission denied"
    path.unlink()
    monkeypatch.chdir(path.parent)  # a socket's address is at most 107 bytes
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(path.name)
    return os.strerror(errno.ENXIO)


def test_an_unreadable_array_document_is_one_line(copy, monkeypatch):
    """An array's zarr.json that cannot be read (its folder mode 000): a PermissionError
    traceback before, exit 1, or the layer taken as absent."""
    proc = run_terrain("cost-distance", "s.zarr", "--source-cell", "1,1", "-o", "cz", *SYNC,
                       cwd=copy)
    assert proc.returncode == 0, proc.stderr
    said = _unreadable(copy / "cz" / "distance" / "zarr.json", monkeypatch)
    for argv in (["info", "cz"], ["verify", "cz"], ["plot", "cz", "-o", "p.png"],
                 ["path", "cz", "--to-cell", "5,5", "-o", "p.fgb"]):
        proc = run_terrain(*argv, cwd=copy)
        assert_one_line_error(proc, f"terrain: cz/distance/zarr.json: cannot read ({said})")
    assert sorted(os.listdir(copy)) == ["cz", "s.zarr"]


@pytest.mark.parametrize("argv", [
    ["mst", "s.zarr", "-o", "out.zarr", *SYNC],
    ["fill", "s.zarr", "-o", "out.zarr", *SYNC],
    ["cost-distance", "s.zarr", "--source-cell", "1,1", "-o", "out.zarr", *SYNC],
    ["mst", "s.zarr", "-o", "out.zarr", "--scheduler", "local"],  # read on a worker
])
def test_an_unreadable_shard_is_one_line(copy, argv, monkeypatch):
    said = _unreadable(copy / "s.zarr" / "elevation" / "c" / "1" / "0", monkeypatch)
    proc = run_terrain(*argv, cwd=copy, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"terrain: s.zarr/elevation/c/1/0: cannot read ({said})")
    assert sorted(os.listdir(copy)) == ["s.zarr"]


def test_flipped_bits_in_chunk_data_are_refused(copy):
    shard = copy / "s.zarr" / "elevation" / "c" / "0" / "0"
    data = bytearray(shard.read_bytes())
    for pos in (1000, 20000, 60000):  # inside the chunks, not the index at the end
        data[pos] ^= 0x10
    shard.write_bytes(bytes(data))
    proc = _mst(copy)
    assert_one_line_error(proc, "chunk checksum mismatch (the store is damaged)")
    assert "s.zarr" in proc.stderr
    assert sorted(os.listdir(copy)) == ["s.zarr"]


def test_flipped_bits_read_through_zarr_are_refused(copy):
    from terrain.errors import InputError
    from terrain.tiles import open_store
    shard = copy / "s.zarr" / "elevation" / "c" / "0" / "0"
    data = bytearray(shard.read_bytes())
    data[1000] ^= 0x01
    shard.write_bytes(bytes(data))
    with pytest.raises(InputError, match="s.zarr: elevation: chunk checksum mismatch"):
        open_store(copy / "s.zarr").read_window(0, 4, 0, 4)


def test_edited_shape_is_refused(copy):
    def shrink(doc):
        doc["shape"][0] = 2199
    _edit_json(copy / "s.zarr" / "elevation" / "zarr.json", shrink)
    proc = _mst(copy)
    assert_one_line_error(proc, "terrain: s.zarr: ")
    assert "y has 2200 values for 2199 rows" in proc.stderr or "shape" in proc.stderr


def test_edited_shape_with_its_coordinates_is_refused(copy):
    """Shape and y edited alike: the inventory still knows the shape it was written for."""
    def shrink(doc):
        doc["shape"][0] = 2199
    _edit_json(copy / "s.zarr" / "elevation" / "zarr.json", shrink)
    _edit_json(copy / "s.zarr" / "y" / "zarr.json", lambda doc: doc["shape"].__setitem__(0, 2199))
    proc = _mst(copy)
    assert_one_line_error(proc, "terrain: s.zarr: elevation: shape 2199 x 400 is not the one "
                                "its shards were written for (2200 x 400)")


def test_tile_attribute_edited_is_refused(copy):
    def tile4(doc):
        doc["attributes"]["tile"] = 4
    _edit_json(copy / "s.zarr" / "zarr.json", tile4)
    proc = _mst(copy)
    assert_one_line_error(proc, "terrain: s.zarr: tile attribute 4 does not match its chunks "
                                "(256 x 256)")


def _crafted(path, rows, cols, tile, k):
    """A store of metadata only: a grid of ``rows x cols`` claimed, no chunk written."""
    from terrain.tiles.store import quadtree_levels
    g = zarr.open_group(str(path), mode="w-", zarr_format=3)
    g.create_array("elevation", shape=(rows, cols), dtype="float32", chunks=(tile, tile),
                   shards=(k * tile, k * tile), fill_value=np.float32("nan"),
                   dimension_names=("y", "x"))
    g.attrs.update({"terrain": 1, "tile": tile, "tiles_per_shard": k,
                    "levels": quadtree_levels(-(-rows // tile), -(-cols // tile)),
                    "geotransform": [0, 1, 0, rows, 0, -1], "cellsize": [1, 1]})


def test_crafted_huge_store_is_refused_at_once(tmp_path):
    _crafted(tmp_path / "s.zarr", 200000, 200000, 512, 4)
    size = sum(p.stat().st_size for p in (tmp_path / "s.zarr").rglob("*") if p.is_file())
    assert size < 5000
    proc = _mst(tmp_path)
    assert_one_line_error(proc, "terrain: s.zarr: claims 200000 x 200000 cells but holds no "
                                "data")
    assert sorted(os.listdir(tmp_path)) == ["s.zarr"]


def test_store_of_tiny_tiles_is_refused(tmp_path):
    _crafted(tmp_path / "s.zarr", 3000, 3000, 4, 512)
    proc = _mst(tmp_path)
    assert_one_line_error(proc, "terrain: s.zarr: 562,500 tiles of 4 a side: more than 65,536 "
                                "tiles need a tile of at least 256")


def test_ingest_refuses_tiny_tiles_on_a_big_grid(tmp_path):
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 1100, 1000, seed=1)
    proc = run_terrain("ingest", "g.asc", "-o", "s.zarr", "--tile", "2", *SYNC, cwd=tmp_path)
    assert_one_line_error(proc, "tiles of 2 a side: more than 65,536 tiles")
    assert sorted(os.listdir(tmp_path)) == ["g.asc"]
    # mst names the grid, and its dry run refuses what the run would (it printed a plan)
    for dry in ((), ("--dry-run",)):
        proc = run_terrain("mst", "g.asc", "-o", "m.zarr", "--tile", "2", *dry, *SYNC,
                           cwd=tmp_path)
        assert_one_line_error(proc, "terrain: g.asc: 275,000 tiles of 2 a side: more than "
                                    "65,536 tiles need a tile of at least 256")
    assert sorted(os.listdir(tmp_path)) == ["g.asc"]


def test_stores_stay_readable_by_xarray_and_rioxarray(tmp_path):
    xr = pytest.importorskip("xarray")
    rioxarray = pytest.importorskip("rioxarray")
    del rioxarray
    proc = run_terrain("mst", str(SAMPLE), "-o", "m.zarr", "--tile", "64", "--backend", "cpu",
                       *SYNC, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    g = zarr.open_group(str(tmp_path / "m.zarr"), mode="r")
    for name in ("elevation", "mst"):  # every raster's chunks, the forest's mask included
        codecs = [c["name"] for c in g[name].metadata.to_dict()["codecs"][0][
            "configuration"]["codecs"]]
        assert codecs[-1] == "crc32c", name
    assert "terrain_shards" in g["elevation"].attrs and "terrain_shards" in g["mst"].attrs
    ds = xr.open_zarr(tmp_path / "m.zarr")
    from terrain.io import read_grid
    ref, _ = read_grid(SAMPLE)
    assert np.array_equal(ds["elevation"].values, ref, equal_nan=True)
    assert ds["elevation"].rio.transform() is not None


@pytest.mark.parametrize("command", ["mst", "fill"])
def test_a_dem_store_rewritten_during_the_run_is_refused(tmp_path, monkeypatch, capsys,
                                                         command):
    """Another command rewrites the DEM store while a result is computed from it: the run
    says so and publishes nothing (it published the old DEM's result with the new DEM's
    fingerprint, and verify then failed it)."""
    from cli import rewritten_before_finishing, run_main
    store = tmp_path / "dem.zarr"
    rewritten_before_finishing(monkeypatch, tmp_path, store, command)
    out = tmp_path / "out.zarr"
    rc, _, err = run_main(capsys, command, store, "-o", out, "--backend", "cpu")
    assert rc == 2 and err == (f"terrain: {store}: changed while this run read it (written by "
                               f"another command): {out} not written; run it again\n"), err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "a.asc", "b.asc", "dem.zarr"]


def test_a_result_whose_dem_store_moved_says_so(tmp_path):
    """A result of a DEM store holds no elevation of its own: when that store moves, verify
    and plot say it is gone (they said it was "not a tile store")."""
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 30, 40, seed=1)
    for argv in (("ingest", "g.asc", "-o", "d.zarr"), ("mst", "d.zarr", "-o", "m.zarr")):
        proc = run_terrain(*argv, *SYNC, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    (tmp_path / "d.zarr").rename(tmp_path / "moved.zarr")
    for argv in (("verify", "m.zarr"), ("plot", "m.zarr", "-o", "p.png")):
        proc = run_terrain(*argv, cwd=tmp_path)
        assert_one_line_error(proc, f"terrain: m.zarr: the DEM is not in this store and its "
                                    f"source '{tmp_path / 'd.zarr'}' is gone (moved or "
                                    "removed)")


def test_a_cost_store_of_a_relative_dem_store_is_verified_from_anywhere(tmp_path):
    """The DEM store a cost store names was recorded as given (``d.zarr``): verify from
    another folder said it was gone. It is recorded absolute."""
    from terrain.io import write_synth
    write_synth(tmp_path / "g.asc", 30, 40, seed=1)
    (tmp_path / "sub").mkdir()
    for argv in (("ingest", "g.asc", "-o", "d.zarr"),
                 ("cost-distance", "d.zarr", "--source-cell", "5,5", "-o", "sub/c.zarr")):
        proc = run_terrain(*argv, *SYNC, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    proc = run_terrain("verify", "c.zarr", cwd=tmp_path / "sub")
    assert proc.returncode == 0 and "verified" in proc.stdout, proc.stderr
