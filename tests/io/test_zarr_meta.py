"""terrain.io.zarr_meta writes the documents zarr writes (zarr is the oracle), and the stores
the commands write import no zarr."""

import json

import numpy as np
import pytest
from cli import imported_after

from terrain.io.zarr_meta import codec, consolidate, open_group

zarr = pytest.importorskip("zarr")

ARRAYS = [  # (name, create_array keywords)
    ("elevation", dict(shape=(300, 400), dtype="float32", chunks=(64, 64), shards=(256, 256),
                       fill_value=float("nan"), dimension_names=("y", "x"),
                       compressors=(codec("blosc", cname="lz4", clevel=1, shuffle="shuffle"),
                                    codec("crc32c")))),
    ("mst", dict(shape=(300, 400), dtype="uint8", chunks=(64, 64), shards=(128, 128),
                 fill_value=0, dimension_names=("y", "x"),
                 compressors=(codec("blosc", cname="lz4", clevel=5, shuffle="bitshuffle"),
                              codec("crc32c")))),
    ("allocation", dict(shape=(5, 6), dtype="int32", chunks=(4, 4), shards=(8, 8),
                        fill_value=-1, compressors=(codec("zstd", level=1, checksum=False),))),
    ("distance", dict(shape=(5, 6), dtype="float64", chunks=(4, 4), shards=(8, 8),
                      fill_value=float("inf"), compressors=None)),
    ("x", dict(shape=(400,), dtype="float64", chunks=(400,), dimension_names=("x",))),
    ("spatial_ref", dict(shape=(), dtype="int32", fill_value=0)),
    ("flag", dict(shape=(3,), dtype="bool", chunks=(3,))),
]


@pytest.mark.parametrize("name,kw", ARRAYS, ids=[a[0] for a in ARRAYS])
def test_array_documents_are_zarrs(tmp_path, name, kw):
    ours = open_group(tmp_path / "ours.zarr", mode="w-")
    ours.create_array(name, **kw)
    theirs = zarr.open_group(str(tmp_path / "zarr.zarr"), mode="w-", zarr_format=3)
    theirs.create_array(name, **kw)
    doc = json.loads((tmp_path / "ours.zarr" / name / "zarr.json").read_text())
    want = json.loads((tmp_path / "zarr.zarr" / name / "zarr.json").read_text())
    assert doc == want
    a = zarr.open_array(str(tmp_path / "ours.zarr"), path=name, mode="r")
    assert a.shape == tuple(kw["shape"]) and a.dtype == np.dtype(kw["dtype"])


def test_coordinates_written_here_read_by_zarr_and_consolidated_as_zarr_does(tmp_path):
    ours, theirs = tmp_path / "ours.zarr", tmp_path / "zarr.zarr"
    values = 500000.0 + 10.0 * np.arange(400)
    for root, group in ((ours, open_group(ours, mode="w-")),
                        (theirs, zarr.open_group(str(theirs), mode="w-", zarr_format=3))):
        group.attrs.update({"tile": 64, "crs": None})
        x = group.create_array("x", shape=(400,), dtype="float64", chunks=(400,),
                               dimension_names=("x",))
        x[:] = values
        ref = group.create_array("spatial_ref", shape=(), dtype="int32", fill_value=0)
        ref[...] = 0
        ref.attrs.update({"GeoTransform": "500000 10 0 4003000 0 -10"})
        sub = group.create_group("hierarchy")
        sub.attrs.update({"rows": 2})
        sub.create_array("id", shape=(2,), dtype="int64", chunks=(2,))[:] = np.array([1, 2])
    consolidate(ours)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(theirs))
    doc = json.loads((ours / "zarr.json").read_text())
    want = json.loads((theirs / "zarr.json").read_text())
    assert doc == want
    read = zarr.open_group(str(ours), mode="r")
    assert read["x"][:].tolist() == values.tolist()
    assert read["hierarchy"]["id"][:].tolist() == [1, 2]
    assert sorted(p.relative_to(ours).as_posix() for p in ours.rglob("*") if p.is_file()) == \
        sorted(p.relative_to(theirs).as_posix() for p in theirs.rglob("*") if p.is_file())


def test_attributes_are_read_again_and_updated_whole(tmp_path):
    g = open_group(tmp_path / "s.zarr", mode="w-")
    g.attrs.update({"a": 1})
    other = open_group(tmp_path / "s.zarr", mode="r+")  # another handle writes meanwhile
    other.attrs.update({"b": 2})
    g.attrs.update({"c": 3})
    assert dict(zarr.open_group(str(tmp_path / "s.zarr"), mode="r").attrs) == \
        {"a": 1, "b": 2, "c": 3}
    with pytest.raises(FileExistsError):
        open_group(tmp_path / "s.zarr", mode="w-")
    with pytest.raises(FileNotFoundError):
        open_group(tmp_path / "none.zarr", mode="r")


def test_a_command_writing_a_store_imports_no_zarr(tmp_path):
    """``mst``, ``fill``, ``flow`` and ``cost-distance`` of an ASCII grid write their stores
    with zarr_meta and the shard writer alone: zarr's import (0.22-0.27 s) is not paid, nor
    numcodecs' package (its C codecs are called through ctypes) or asyncio (7-10 MiB of a 4096²
    cost distance's peak RSS together); the stores open in zarr and xarray as before."""
    from pathlib import Path
    sample = Path(__file__).resolve().parents[2] / "data" / "sample.asc"
    runs = [["mst", sample, "-o", tmp_path / "m.zarr"],
            ["fill", sample, "-o", tmp_path / "f.zarr"],
            ["flow", sample, "-o", tmp_path / "w.zarr"],
            ["cost-distance", sample, "--source-cell", "5,5", "-o", tmp_path / "c.zarr"]]
    _, imported = imported_after(runs, ("zarr", "numcodecs", "asyncio"))
    assert imported == "[]"
    xr = pytest.importorskip("xarray")
    for name, layer in (("m", "mst"), ("f", "filled"), ("w", "direction"), ("c", "distance")):
        ds = xr.open_zarr(tmp_path / f"{name}.zarr")
        assert ds[layer].shape == (300, 400)


@pytest.mark.parametrize("level", [1, 3, 19])
def test_zstd_encode_is_what_numcodecs_decodes(level):
    """The coordinates' Zstd frames, written through numcodecs' extension by ctypes, are
    numcodecs' own frames, and its codec (what zarr reads them with) decodes them."""
    from numcodecs.zstd import Zstd

    from terrain.io.zarr_meta import zstd_encode
    raw = np.linspace(500000.5, 504095.5, 4096).tobytes() + bytes(1000)
    frame = zstd_encode(raw, level)
    assert frame == Zstd(level=level).encode(raw)
    assert Zstd().decode(frame) == raw


@pytest.mark.parametrize("k", [1, 2, 4, 8, 16, 64])
def test_the_shard_writer_orders_chunks_as_zarr(k):
    """A shard's chunks are written in zarr's Morton order, taken from terrain's own Morton
    order for terrain's square power-of-two shards (no zarr import)."""
    from terrain.tiles._shards import _morton_order
    try:
        from zarr.core.indexing import morton_order_iter as morton
    except ImportError:
        from zarr.core.indexing import morton_order_coords as morton
    want = [tuple(int(v) for v in c) for c in morton((k, k))]
    assert [tuple(c) for c in _morton_order((k, k)).tolist()] == want
