"""Grid MST on the GPU: bit-identical to the CPU (masks, statistics) and to the reference Kruskal."""

import numpy as np
import pytest
import zarr

from backends import assert_backends_identical
from terrain.grid import grid_mst
from terrain.grid._boruvka import boruvka_tiles, weight_ranks
from terrain.grid.edges import horizontal_lengths, weight_model_code
from test_mst import dem, mask_ids, ref_kruskal

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("weight", ["max", "absdiff", "slope", "length3d"])
@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("kind", ["random", "integer", "holes"])
@pytest.mark.parametrize("key_bits", ["auto", 32, 64])
def test_tile_boruvka_identical_on_cpu_and_gpu(kind, conn, weight, key_bits):
    # 64² tiles: 14 index bits, so even 4096 distinct weights fit a 32-bit key
    z = dem(kind, (6 * 64, 64), seed=conn).reshape(6, 64, 64)
    hlen = horizontal_lengths((3.0, 7.0))

    def run(backend):
        xp_z = backend.asarray(z) if backend.is_gpu else z
        return backend.to_numpy(boruvka_tiles(xp_z, conn, weight_model_code(weight), hlen, backend,
                                              key_bits=key_bits))

    mask = assert_backends_identical(run)
    for b in (0, 5):
        want, _ = ref_kruskal(z[b], conn, weight, (3.0, 7.0))
        assert np.array_equal(mask_ids(mask[b]), want)


@pytest.mark.parametrize("kind", ["random", "integer"])
@pytest.mark.parametrize("key_bits", ["auto", 64])
def test_tile_boruvka_512_both_key_widths(kind, key_bits):
    # tile 512: 20 index bits; integer DEMs fit 32 bits ("auto" takes them), random ones do not
    z = dem(kind, (3 * 512, 512), seed=2).reshape(3, 512, 512)
    z[1, 100:140] = np.nan

    def run(backend):
        xp_z = backend.asarray(z) if backend.is_gpu else z
        return backend.to_numpy(boruvka_tiles(xp_z, 8, 0, np.ones(4), backend, key_bits=key_bits))

    mask = assert_backends_identical(run)
    want, _ = ref_kruskal(z[1])
    assert np.array_equal(mask_ids(mask[1]), want)


def test_forced_32_bit_key_on_gpu_matches_64():
    from terrain.backend import get_backend

    gpu = get_backend("gpu")
    z = gpu.asarray(dem("integer", (4 * 512, 512), seed=8).reshape(4, 512, 512))
    m32 = gpu.to_numpy(boruvka_tiles(z, 8, 1, np.ones(4), gpu, key_bits=32))
    m64 = gpu.to_numpy(boruvka_tiles(z, 8, 1, np.ones(4), gpu, key_bits=64))
    assert np.array_equal(m32, m64) and m32.any()


@pytest.mark.parametrize("per_edge", [False, True])
def test_weight_ranks_identical_on_cpu_and_gpu(per_edge):
    z = dem("holes", (4, 4 * 300 if per_edge else 300), seed=1)
    z[0, :2] = [-0.0, 0.0]

    def run(backend):
        r, k = weight_ranks(backend.asarray(z) if backend.is_gpu else z, backend.xp)
        return backend.to_numpy(r), k

    assert_backends_identical(run)


@pytest.mark.parametrize("tile", [32, 256])
@pytest.mark.parametrize("kind", ["random", "integer", "plateau", "holes"])
@pytest.mark.parametrize("key_bits", ["auto", 64])
def test_grid_mst_identical_on_cpu_and_gpu(kind, tile, key_bits):
    z = dem(kind, (700, 530), seed=tile)

    def run(backend):
        r = grid_mst(z, 8, "max", tile=tile, backend=backend, key_bits=key_bits)
        return r.mask, r.total_weight, r.edges, r.trees

    mask, *_ = assert_backends_identical(run)
    want, _ = ref_kruskal(z)
    assert np.array_equal(mask_ids(mask), want)


def test_pipeline_identical_on_cpu_and_gpu(tmp_path):
    from pipelines.mst import run_mst
    from terrain.tiles import create_store

    z = dem("holes", (1500, 2100), seed=4)
    store = create_store(tmp_path / "in.zarr", z.shape, 256)
    for (r0, r1, c0, c1) in store.shard_windows():
        store.elevation[r0:r1, c0:c1] = z[r0:r1, c0:c1]

    def run(backend):
        out = tmp_path / f"{backend.name}.zarr"
        s = run_mst(tmp_path / "in.zarr", out, backend=backend.name, scheduler="threads")
        return zarr.open_array(str(out), path="mst", mode="r")[:], s["total_weight"], s["edges"]

    assert_backends_identical(run)
