"""Grid MST on the GPU: bit-identical to the CPU (masks, statistics) and to the reference Kruskal."""

import numpy as np
import pytest
import zarr

from backends import assert_backends_identical
from terrain.grid import grid_mst
from terrain.grid.edges import horizontal_lengths, weight_model_code
from grids import dem
from oracles import mask_ids, ref_kruskal

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("tile", [32, 256])
@pytest.mark.parametrize("kind", ["random", "integer", "plateau", "holes"])
@pytest.mark.parametrize("in_core", ["auto", "groups"])
def test_grid_mst_identical_on_cpu_and_gpu(kind, tile, in_core):
    # in core: Borůvka on the device against Kruskal in C; super-tiles of 2 x 2 tiles:
    # each group's forest in core and reduced (on the device on the GPU), merged above
    z = dem(kind, (700, 530), seed=tile)

    def run(backend):
        r = grid_mst(z, 8, "max", tile=tile, backend=backend, in_core=in_core,
                     group_tiles=2)
        assert r.path == ("in-core" if in_core == "auto" else "tiled")
        return r.mask, r.total_weight, r.edges, r.trees

    mask, *_ = assert_backends_identical(run)
    want, _ = ref_kruskal(z)
    assert np.array_equal(mask_ids(mask), want)


@pytest.mark.parametrize("in_core", ["auto", "groups", False])
def test_pipeline_identical_on_cpu_and_gpu(tmp_path, in_core):
    from pipelines.mst import run_mst
    from terrain.tiles import create_store

    z = dem("holes", (1500, 2100), seed=4)
    store = create_store(tmp_path / "in.zarr", z.shape, 256)
    for (r0, r1, c0, c1) in store.shard_windows():
        store.elevation[r0:r1, c0:c1] = z[r0:r1, c0:c1]

    def run(backend):
        out = tmp_path / f"{backend.name}.zarr"
        s = run_mst(tmp_path / "in.zarr", out, backend=backend.name, scheduler="threads",
                    in_core=in_core)
        if backend.is_gpu:
            assert s["path"] == {"auto": "in-core", "groups": "super-tiles", False: "tiled"}[in_core]
        return (zarr.open_array(str(out), path="mst", mode="r")[:], s["total_weight"], s["edges"],
                s["trees"], s["vertices"])

    assert_backends_identical(run)


# -- the in-core whole-grid path against the tiled CPU path ---------------------------------------
def _tiled_cpu(z, conn, weight, cellsize=(1.0, 1.0)):
    return grid_mst(z, conn, weight, tile=64, backend="cpu", cellsize=cellsize, in_core=False)


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("kind", ["integer", "holes", "plateau", "random"])
@pytest.mark.parametrize("shape", [(517, 333), (1, 1000), (999, 1), (1031, 1029)])
def test_in_core_equals_tiled_cpu(kind, conn, shape):
    z = dem(kind, shape, seed=conn)
    if kind == "integer":
        z[np.random.default_rng(1).random(shape) < 0.1] = np.nan  # ties and nodata
    gpu = grid_mst(z, conn, "max", backend="gpu")
    assert gpu.path == "in-core"
    cpu = _tiled_cpu(z, conn, "max")
    assert np.array_equal(gpu.mask, cpu.mask)
    assert (gpu.total_weight, gpu.edges, gpu.trees, gpu.vertices) == (
        cpu.total_weight, cpu.edges, cpu.trees, cpu.vertices)


@pytest.mark.parametrize("weight", ["absdiff", "slope", "length3d"])
def test_in_core_every_weight_model(weight):
    z = dem("holes", (700, 530), seed=3)
    gpu = grid_mst(z, 8, weight, backend="gpu", cellsize=(3.0, 7.0), in_core=True)
    cpu = _tiled_cpu(z, 8, weight, (3.0, 7.0))
    assert np.array_equal(gpu.mask, cpu.mask) and gpu.total_weight == cpu.total_weight
    want, _ = ref_kruskal(z, 8, weight, (3.0, 7.0))
    assert np.array_equal(mask_ids(gpu.mask), want)


def test_in_core_long_chains_and_device_input():
    # a flat grid: every cell's lightest edge (by id) leads NW, chains as long as the grid
    cp = pytest.importorskip("cupy")
    z = np.zeros((1500, 1100), np.float32)
    z[700:705, 100:1000] = np.nan
    gpu = grid_mst(cp.asarray(z), 8, "max", backend="gpu")
    cpu = _tiled_cpu(z, 8, "max")
    assert gpu.path == "in-core" and np.array_equal(gpu.mask, cpu.mask)
    assert (gpu.edges, gpu.trees) == (cpu.edges, cpu.trees)


@pytest.mark.parametrize("conn", [4, 8])
def test_super_tile_groups_on_gpu_equal_tiled_cpu(conn):
    # the out-of-core path on the GPU: each group in core, reduced, merged above
    z = dem("holes", (1100, 700), seed=conn)
    z2 = dem("integer", (1100, 700), seed=conn)
    z = np.where(np.isnan(z), z, z2)
    gpu = grid_mst(z, conn, "max", tile=64, group_tiles=4, backend="gpu", in_core="groups")
    cpu = _tiled_cpu(z, conn, "max")
    assert gpu.path == "tiled" and np.array_equal(gpu.mask, cpu.mask)
    assert gpu.total_weight == cpu.total_weight and gpu.edges == cpu.edges


def test_device_mst_empty_and_tiny():
    from terrain.grid.mst_device import device_mst

    f = device_mst(np.array([[1, 2], [3, 4]], np.float32))
    assert f.mask.get().tolist() == [[7, 0], [0, 0]] and f.total_weight == 9.0 and f.edges == 3
    f = device_mst(np.full((3, 5), np.nan, np.float32))
    assert f.edges == 0 and f.vertices == 0 and not f.mask.get().any()
    f = device_mst(np.zeros((0, 4), np.float32))
    assert f.edges == 0 and f.mask.shape == (0, 4)


# -- the super-tile's reduction on the device against the CPU's -----------------------------------
_WINDOWS = {  # (window, grid shape): which sides of the block face other blocks
    "interior": ((300, 600, 200, 610), (1000, 1000)),
    "corner": ((0, 300, 0, 410), (1000, 1000)),
    "bottom-right": ((700, 1000, 590, 1000), (1000, 1000)),
    "whole-grid": ((0, 300, 0, 410), (300, 410)),  # no boundary: everything is a dead end
}


@pytest.mark.parametrize("where", sorted(_WINDOWS))
@pytest.mark.parametrize("kind", ["random", "integer", "plateau", "holes"])
@pytest.mark.parametrize("conn", [4, 8])
def test_device_reduce_equals_cpu_reduce(kind, conn, where):
    from terrain.backend import get_backend
    from terrain.grid.reduce import reduce_block_device, reduce_tile

    window, shape = _WINDOWS[where]
    z = dem(kind, (300, 410), seed=conn + len(where))
    mask = grid_mst(z, conn, "max", tile=64, backend="cpu", in_core=False).mask
    hlen = horizontal_lengths((1.0, 1.0))
    cpu = reduce_tile(mask, z, window, shape, 0, hlen)[:4]
    gpu = get_backend("gpu")
    dev = reduce_block_device(gpu.asarray(mask), gpu.asarray(z), window, shape, 0, hlen, gpu)
    from backends import assert_identical
    assert_identical(cpu, dev)
    if where != "whole-grid" and kind != "holes":
        assert len(cpu[0]) > 10  # a real boundary graph was compared
    if where == "whole-grid":
        assert len(dev[0]) == 0


@pytest.mark.parametrize("weight", ["absdiff", "slope", "length3d"])
def test_device_reduce_every_weight_model_and_long_paths(weight):
    # a flat grid's forest is long parallel paths (every cell's lightest edge by id): long
    # walks for both kernels; the weight models pick the representatives
    from terrain.backend import get_backend
    from terrain.grid.reduce import reduce_block_device, reduce_tile

    z = np.zeros((700, 530), np.float32)
    z[::97] += dem("random", (1, 530), seed=2)[0]
    z[300:305, 50:500] = np.nan
    hlen = horizontal_lengths((3.0, 7.0))
    model = weight_model_code(weight)
    mask = grid_mst(z, 8, weight, tile=64, backend="cpu", cellsize=(3.0, 7.0), in_core=False).mask
    for window, shape in [((700, 1400, 530, 1060), (2000, 2000)), ((0, 700, 0, 530), (700, 900))]:
        cpu = reduce_tile(mask, z, window, shape, model, hlen)[:4]
        gpu = get_backend("gpu")
        dev = reduce_block_device(gpu.asarray(mask), gpu.asarray(z), window, shape, model, hlen,
                                  gpu)
        from backends import assert_identical
        assert_identical(cpu, dev)
        assert len(cpu[0]) > 0


def test_super_tile_path_reduces_on_the_device(monkeypatch):
    # the GPU's super-tile groups call the device reduction, never the host walk, and the
    # forest equals the CPU's
    def no_host_reduce(*a, **k):
        raise AssertionError("host reduce_tile called on the GPU super-tile path")

    z = dem("holes", (1100, 700), seed=5)
    cpu = _tiled_cpu(z, 8, "max")
    monkeypatch.setattr("terrain.grid.reduce.reduce_tile", no_host_reduce)
    gpu = grid_mst(z, 8, "max", tile=64, group_tiles=4, backend="gpu", in_core="groups")
    assert np.array_equal(gpu.mask, cpu.mask)
    assert (gpu.total_weight, gpu.edges, gpu.trees) == (cpu.total_weight, cpu.edges, cpu.trees)


def test_pipeline_super_tiles_span_several_shards(tmp_path, monkeypatch):
    # groups sized from the device: several shards a side, each written whole by its group
    import terrain.tiles.store as store_mod
    from pipelines.mst import run_mst

    monkeypatch.setattr(store_mod, "SHARD_TARGET_SIDE", 128)
    monkeypatch.setattr("os.cpu_count", lambda: 16)  # 8 groups in flight: many groups
    z = dem("holes", (1500, 2100), seed=6)
    z2 = dem("integer", (1500, 2100), seed=6)
    z = np.where(np.isnan(z), z, z2)  # ties
    store = store_mod.create_store(tmp_path / "in.zarr", z.shape, 64)
    for (r0, r1, c0, c1) in store.shard_windows():
        store.elevation[r0:r1, c0:c1] = z[r0:r1, c0:c1]
    shard_tiles = store.tiles_per_shard

    def run(backend):
        out = tmp_path / f"{backend.name}.zarr"
        s = run_mst(tmp_path / "in.zarr", out, backend=backend.name, scheduler="threads",
                    in_core="groups")
        if backend.is_gpu:
            assert s["path"] == "super-tiles" and s["group_tiles"] > shard_tiles, s
        return (zarr.open_array(str(out), path="mst", mode="r")[:], s["total_weight"], s["edges"],
                s["trees"], s["vertices"])

    mask, *_ = assert_backends_identical(run)
    want, _ = ref_kruskal(z)
    assert np.array_equal(mask_ids(mask), want)
