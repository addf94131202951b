"""The GPU's fill: its algorithm (seeded forest, Euler tours, list ranking, pointer jumping)
run on the CPU by the kernels' Numba twins against the CPU's drain pass; on a GPU, the
device's result bit for bit the CPU's (tests/backends.py), in core and tiled."""

import numpy as np
import pytest

from backends import assert_backends_identical
from terrain.hydrology import fill_depressions, fill_tiled, outlet_cells
from terrain.hydrology._fill_gpu import euler_levels_twin
from oracles import priority_flood, seeded_forest


def case(seed, shape=None):
    rng = np.random.default_rng(seed)
    shape = shape or (int(rng.integers(1, 40)), int(rng.integers(1, 40)))
    z = (rng.integers(0, 7, shape) if seed % 2 else rng.random(shape) * 40).astype(np.float32)
    if seed % 3 == 0:
        z[rng.random(shape) < 0.2] = np.nan
    return z


@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", range(20))
def test_twins_equal_the_drain_pass(seed, conn):
    z = case(seed)
    outlets = None
    if seed % 4 == 1:  # named outlets: some parts of the grid reach none
        outlets = np.zeros(z.shape, np.uint8)
        outlets.ravel()[:: 7] = 1
    out = outlet_cells(z, conn, outlets)
    mask, labels = seeded_forest(z, conn, out)
    got = euler_levels_twin(z, mask, out, labels)
    want = priority_flood(z, conn, outlets)
    levels = np.where(np.isinf(got), z, got)
    np.testing.assert_array_equal(levels, want, strict=True)
    r = fill_depressions(z, conn, outlets, backend="cpu")
    np.testing.assert_array_equal(np.isinf(got) & ~np.isnan(z),
                                  np.zeros(z.shape, bool) if r.stats["undrained"] == 0
                                  else (np.isinf(got) & ~np.isnan(z)))
    assert int(np.count_nonzero(np.isinf(got) & ~np.isnan(z))) == r.stats["undrained"]


@pytest.mark.gpu
@pytest.mark.parametrize("conn", [4, 8])
@pytest.mark.parametrize("seed", range(6))
def test_gpu_equals_cpu(seed, conn):
    z = case(seed, (300, 257))

    def run(backend):
        r = fill_depressions(z, conn, backend=backend)
        return r.filled, r.depth, r.depression

    assert_backends_identical(run)


@pytest.mark.gpu
def test_gpu_options_and_tiled_equal_cpu():
    z = case(4, (200, 190))
    for kw in ({"epsilon": True}, {"min_depth": 2.0}, {"hierarchy": True}):
        def run(backend):
            r = fill_depressions(z, 8, backend=backend, **kw)
            return r.filled, r.depression
        assert_backends_identical(run)
    assert_backends_identical(lambda b: fill_tiled(z, 4, tile=32, group_tiles=2,
                                                   backend=b).filled)
