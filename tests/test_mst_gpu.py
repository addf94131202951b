"""Grid MST on the GPU: bit-identical to the CPU (masks, statistics) and to the reference Kruskal."""

import numpy as np
import pytest
import zarr

from backends import assert_backends_identical
from terrain.grid import grid_mst
from terrain.grid._boruvka import boruvka_tiles
from terrain.grid.edges import horizontal_lengths, weight_model_code
from test_mst import dem, mask_ids, ref_kruskal

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("weight", ["max", "absdiff", "slope", "length3d"])
@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("kind", ["random", "integer", "holes"])
def test_tile_boruvka_identical_on_cpu_and_gpu(kind, conn, weight):
    z = dem(kind, (6 * 64, 64), seed=conn).reshape(6, 64, 64)
    hlen = horizontal_lengths((3.0, 7.0))

    def run(backend):
        xp_z = backend.asarray(z) if backend.is_gpu else z
        return backend.to_numpy(boruvka_tiles(xp_z, conn, weight_model_code(weight), hlen, backend))

    assert_backends_identical(run)


@pytest.mark.parametrize("tile", [32, 256])
@pytest.mark.parametrize("kind", ["random", "integer", "plateau", "holes"])
def test_grid_mst_identical_on_cpu_and_gpu(kind, tile):
    z = dem(kind, (700, 530), seed=tile)

    def run(backend):
        r = grid_mst(z, 8, "max", tile=tile, backend=backend)
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
