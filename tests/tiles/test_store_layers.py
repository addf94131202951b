"""Tile-store layers: one API for elevation, friction, sources and outputs."""

import numpy as np
import pytest

from terrain.errors import InputError
from terrain.tiles import create_store, open_store
from terrain.tiles.store import create_layer


def test_layers_share_tiles_shards_and_windows(tmp_path):
    store = create_store(tmp_path / "s.zarr", (37, 70), tile=16)
    z = np.arange(37 * 70, dtype=np.float32).reshape(37, 70)
    store.elevation[:, :] = z
    a = create_layer(store.group, "backlink", "uint8", 255, 16, store.shape)
    create_layer(tmp_path / "s.zarr", "distance", "float64", np.nan, 16, store.shape)
    assert a.chunks == store.elevation.chunks and a.shards == store.elevation.shards
    back = (np.arange(37 * 70) % 17).astype(np.uint8).reshape(37, 70)
    s = open_store(tmp_path / "s.zarr", mode="r+")
    for r0, r1, c0, c1 in s.shard_windows():
        s.write_window("backlink", r0, c0, back[r0:r1, c0:c1])
    s = open_store(tmp_path / "s.zarr")
    assert "distance" in s.group and "friction" not in s.group
    np.testing.assert_array_equal(s.read_window(3, 30, 5, 66, layer="backlink"), back[3:30, 5:66])
    assert s.read_window(0, 2, 0, 2, layer="backlink").dtype == np.uint8
    assert np.isnan(s.read_window(0, 37, 0, 70, layer="distance")).all()
    np.testing.assert_array_equal(s.read_window(1, 4, 2, 9), z[1:4, 2:9])
    with pytest.raises(InputError, match="no layer 'friction'"):
        s.read_window(0, 1, 0, 1, layer="friction")


def test_a_layer_made_again_keeps_what_was_written_when_asked(tmp_path):
    """keep=True (a task run again after its worker was lost, a resumed run's preparation)
    returns the layer of that layout with its shards; another dtype or tiling replaces it."""
    store = create_store(tmp_path / "s.zarr", (37, 70), tile=16)
    a = create_layer(store.group, "mst", "uint8", 0, 16, store.shape)
    a[:, :] = 7
    kept = create_layer(tmp_path / "s.zarr", "mst", "uint8", 0, 16, store.shape, keep=True)
    assert (kept[...] == 7).all()
    for dtype, tile in (("uint16", 16), ("uint8", 8)):
        again = create_layer(tmp_path / "s.zarr", "mst", dtype, 0, tile, store.shape, keep=True)
        assert again.dtype == np.dtype(dtype) and again.chunks == (tile, tile)
        assert not again[...].any()
