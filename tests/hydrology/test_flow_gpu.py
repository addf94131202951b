"""The GPU twin of flow directions and accumulation gives the CPU's bits (tests/backends.py),
in core and tiled; skipped without a GPU."""

import numpy as np
import pytest

from backends import assert_backends_identical
from grids import dem
from oracles import priority_flood
from terrain.hydrology import flow_accumulation, flow_directions

pytestmark = pytest.mark.gpu

CASES = [(kind, shape, seed) for kind in ("random", "integer", "plateau", "holes")
         for shape, seed in (((17, 23), 0), ((64, 77), 1))]


@pytest.mark.parametrize("conn", [8, 4])
@pytest.mark.parametrize("kind,shape,seed", CASES)
def test_directions_and_accumulation_on_both_backends(kind, shape, seed, conn):
    f = priority_flood(dem(kind, shape, seed), conn)
    w = np.random.default_rng(seed).random(shape)

    def run(backend):
        out = []
        for tile, group in ((None, 1), (8, 1), (16, 2)):
            d = flow_directions(f, (10.0, 7.0), conn, tile=tile, group_tiles=group,
                                backend=backend)
            out += [d.direction, flow_accumulation(d.direction, tile=tile, group_tiles=group,
                                                   backend=backend),
                    flow_accumulation(d.direction, w, tile=tile, group_tiles=group,
                                      backend=backend)]
        return out

    assert_backends_identical(run)


def test_a_large_flat_on_both_backends():
    z = np.full((300, 257), 10.0, np.float32)
    z[3:297, 3:250] = 5.0
    z[150, 0:4] = 5.0
    z[150, 0] = 4.0
    f = priority_flood(z)
    assert_backends_identical(lambda b: flow_directions(f, backend=b).direction)
    assert_backends_identical(lambda b: flow_directions(f, tile=32, backend=b).direction)


def test_device_arrays_stay_on_the_device():
    """CuPy in, CuPy out: fill, directions and accumulation of a device array never come to
    the host (the in-core `flow` route's path), with the CPU's bits."""
    import cupy as cp

    from terrain.hydrology import fill_depressions
    z = dem("holes", (64, 77), 1)
    w = np.random.default_rng(1).random(z.shape)
    for conn in (8, 4):
        filled = fill_depressions(cp.asarray(z), conn, backend="gpu").filled
        d = flow_directions(filled, (10.0, 7.0), conn, backend="gpu").direction
        acc = flow_accumulation(d, cp.asarray(w), backend="gpu")
        assert all(isinstance(a, cp.ndarray) for a in (filled, d, acc))
        host = fill_depressions(z, conn, backend="cpu").filled
        dh = flow_directions(host, (10.0, 7.0), conn, backend="cpu").direction
        np.testing.assert_array_equal(cp.asnumpy(filled), host)
        np.testing.assert_array_equal(cp.asnumpy(d), dh)
        np.testing.assert_array_equal(cp.asnumpy(acc), flow_accumulation(dh, w, backend="cpu"))


def test_what_the_device_holds_whole():
    """A grid's flow runs whole on the device where DEVICE_BYTES_PER_CELL a cell fit its free
    memory and the flats' 32-bit labels index every cell; never on the CPU."""
    from terrain.hydrology import flow_fits_on_device
    assert flow_fits_on_device((4096, 4096), "gpu")
    assert not flow_fits_on_device((4096, 4096), "cpu")
    assert not flow_fits_on_device((65536, 65536), "gpu")  # 2^32 cells
    assert not flow_fits_on_device((4096, 4096), "gpu", headroom=1e-6)


def test_a_grid_in_core_within_its_device_bytes(monkeypatch):
    """The DEM given on the host, a grid's flow peaks on the device within
    DEVICE_BYTES_PER_CELL a padded cell (a fifth of its cells flat, as the 10-ft size's),
    its cell lists found in bands of three rows; the CPU's bits."""
    import cupy as cp

    from terrain.hydrology import _flow_gpu, fill_depressions
    from terrain.io.synth import synth_rows
    monkeypatch.setattr(_flow_gpu, "_BAND_CELLS", 3 * 504)
    z = synth_rows(600, 500, 0, 600, seed=3, nodata=0.02)
    f = fill_depressions(z, backend="cpu").filled
    pool = cp.get_default_memory_pool()
    base, peak = pool.used_bytes(), [0]

    class Peak(cp.cuda.MemoryHook):
        name = "peak"

        def malloc_postprocess(self, **kw):
            peak[0] = max(peak[0], pool.used_bytes() - base)

    with Peak():
        d = flow_directions(f, backend="gpu")
        acc = flow_accumulation(cp.asarray(d.direction), backend="gpu")
    cpu = flow_directions(f, backend="cpu")
    assert isinstance(d.direction, np.ndarray) and 0.15 < d.stats["flat_cells"] / (
        d.stats["cells"]) < 0.3
    assert 0 < peak[0] <= _flow_gpu.DEVICE_BYTES_PER_CELL * 604 * 504
    np.testing.assert_array_equal(d.direction, cpu.direction)
    np.testing.assert_array_equal(cp.asnumpy(acc), flow_accumulation(cpu.direction,
                                                                      backend="cpu"))


def test_cells_that_drain_nowhere_on_both_backends():
    z = dem("random", (64, 77), 1)  # not filled: its pits drain nowhere

    def run(backend):
        out = []
        for tile, group in ((None, 1), (16, 2)):
            d = flow_directions(z, (10.0, 7.0), 8, tile=tile, group_tiles=group,
                                backend=backend)
            s = d.stats
            out += [d.direction, np.array([s["undrained"], *s["first_undrained"], s["outlets"]])]
        return out

    assert_backends_identical(run)
