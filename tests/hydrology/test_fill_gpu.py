"""The GPU's fill: its algorithm (seeded forest, Euler tours, list ranking, pointer jumping)
run on the CPU by the kernels' Numba twins against the CPU's drain pass; on a GPU, the
device's result bit for bit the CPU's (tests/backends.py), in core and tiled."""

import numba
import numpy as np
import pytest

from backends import assert_backends_identical
from terrain.hydrology import fill_depressions, fill_tiled, outlet_cells
from terrain.hydrology._fill_cpu import NB_DC, NB_DR
from terrain.hydrology._fill_gpu import _MAX_ROUNDS, _roots
from oracles import priority_flood, seeded_forest


# -- the Numba twins of _fill.cu's kernels: the same steps, thread by thread ---------------

@numba.njit(cache=True)
def _popc(b):
    c = 0
    while b:
        c += b & 1
        b >>= 1
    return c


@numba.njit(cache=True)
def _arc_of(nb, base, v, k):
    return base[v] + _popc(nb[v] & ((1 << k) - 1))


@numba.njit(cache=True)
def fill_adjacency_twin(mask, nb, deg, rows, cols):
    for v in range(rows * cols):
        r, c = v // cols, v % cols
        m = mask[v]
        b = 0
        if m & 1:
            b |= 1
        if m & 4:
            b |= 2
        if m & 2:
            b |= 4
        if m & 8:
            b |= 8
        if c > 0 and (mask[v - 1] & 1):
            b |= 16
        if r > 0 and c > 0 and (mask[v - cols - 1] & 4):
            b |= 32
        if r > 0 and (mask[v - cols] & 2):
            b |= 64
        if r > 0 and c + 1 < cols and (mask[v - cols + 1] & 8):
            b |= 128
        nb[v] = b
        deg[v] = _popc(b)


@numba.njit(cache=True)
def fill_succ_twin(nb, base, is_root, succ, rows, cols):
    for v in range(rows * cols):
        b = nb[v]
        if not b:
            continue
        a = base[v]
        for k in range(8):
            if not (b & (1 << k)):
                continue
            u = v + NB_DR[k] * cols + NB_DC[k]
            bu = nb[u]
            j = (k + 4) & 7
            kk = j
            for t in range(1, 9):
                kk = (j + t) & 7
                if bu & (1 << kk):
                    break
            first = 0
            while not (bu & (1 << first)):
                first += 1
            succ[a] = -1 if (is_root[u] and kk == first) else _arc_of(nb, base, u, kk)
            a += 1


@numba.njit(cache=True)
def fill_rank_twin(nxt, rank, nxt2, rank2, arcs):
    flag = 0
    for a in range(arcs):
        s = nxt[a]
        if s < 0:
            nxt2[a] = s
            rank2[a] = rank[a]
            continue
        rank2[a] = rank[a] + rank[s]
        ss = nxt[s]
        nxt2[a] = ss
        if ss >= 0:
            flag = 1
    return flag


@numba.njit(cache=True)
def fill_parent_twin(nb, base, rank, is_root, outlet, z, parent, val, rows, cols):
    inf = np.float32(np.inf)
    for v in range(rows * cols):
        parent[v] = v
        zv = z[v]
        if np.isnan(zv):
            val[v] = inf
            continue
        b = nb[v]
        if is_root[v] or not b:
            val[v] = zv if outlet[v] else inf
            continue
        for k in range(8):
            if not (b & (1 << k)):
                continue
            u = v + NB_DR[k] * cols + NB_DC[k]
            if rank[_arc_of(nb, base, u, (k + 4) & 7)] > rank[_arc_of(nb, base, v, k)]:
                parent[v] = u
                zu = z[u]
                val[v] = zv if zv >= zu else zu
                break


@numba.njit(cache=True)
def fill_jump_twin(P, val, P2, val2, n):
    flag = 0
    for v in range(n):
        p = P[v]
        a, b = val[v], val[p]
        val2[v] = a if a >= b else b
        pp = P[p]
        P2[v] = pp
        if pp != p:
            flag = 1
    return flag


def euler_levels_twin(z, mask, outlet, labels):
    """device_levels' steps after the forest, on the CPU with the kernels' twins: ``mask``
    a forest in which every tree holds at most one outlet, ``labels`` a cell of each tree
    (its supervertex label)."""
    z = np.ascontiguousarray(z, np.float32)
    rows, cols = z.shape
    n = rows * cols
    flat = np.ascontiguousarray(mask).ravel()
    od = np.ascontiguousarray(outlet, np.uint8).ravel()
    is_root = _roots(np, od != 0, np.asarray(labels).ravel()).astype(np.uint8)
    nb = np.empty(n, np.uint8)
    deg = np.empty(n, np.int32)
    fill_adjacency_twin(flat, nb, deg, rows, cols)
    base = (np.cumsum(deg) - deg).astype(np.int32)
    arcs = int(deg.sum())
    succ = np.empty(max(arcs, 1), np.int32)
    fill_succ_twin(nb, base, is_root, succ, rows, cols)
    _, rank = _jumped(fill_rank_twin, succ[:arcs].copy(),
                      (succ[:arcs] >= 0).astype(np.int32), arcs)
    parent = np.empty(n, np.int32)
    val = np.empty(n, np.float32)
    fill_parent_twin(nb, base, rank, is_root, od, z.ravel(), parent, val, rows, cols)
    return _jumped(fill_jump_twin, parent, val, n)[1].reshape(rows, cols)


def _jumped(kernel, links, values, size):
    """Pointer jumping: ``kernel(links, values, links2, values2, size)`` rounds, the arrays
    swapped after each, until a round changes nothing."""
    links2, values2 = np.empty_like(links), np.empty_like(values)
    for _ in range(_MAX_ROUNDS):
        more = kernel(links, values, links2, values2, size)
        links, links2, values, values2 = links2, links, values2, values
        if not more:
            break
    return links, values


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


@pytest.mark.gpu
def test_gpu_fill_beyond_the_device_is_the_hosts(monkeypatch):
    """A grid the device cannot hold whole (its free memory made to look small) is filled
    by the host's flood: NumPy layers, the CPU's bit for bit."""
    import terrain.hydrology.fill as fill_module
    z = case(3, (300, 257))
    cpu = fill_depressions(z, 8, backend="cpu")
    monkeypatch.setattr(fill_module, "fill_fits_on_device", lambda shape, backend=None: False)
    gpu = fill_depressions(z, 8, backend="gpu")
    for name in ("filled", "depth", "depression"):
        assert isinstance(getattr(gpu, name), np.ndarray)
        np.testing.assert_array_equal(getattr(gpu, name), getattr(cpu, name), strict=True)


@pytest.mark.gpu
def test_gpu_options_fill_on_the_device(monkeypatch):
    """The options keep their DEM and hierarchy on the host, but where the grid fits the
    device their levels are the device's: the host's flood is for grids beyond it."""
    import terrain.hydrology.fill as fill_module
    z = case(4, (120, 130))
    cpu = fill_depressions(z, 8, backend="cpu", min_depth=2.0)

    def host_flood(*args, **kwargs):
        raise AssertionError("the host's flood ran for a grid that fits the device")

    monkeypatch.setattr(fill_module, "_flood_levels", host_flood)
    gpu = fill_depressions(z, 8, backend="gpu", min_depth=2.0)
    np.testing.assert_array_equal(gpu.filled, cpu.filled, strict=True)


class _HostArray(np.ndarray):
    """A NumPy array with CuPy's ``.get()``: the launcher's host reads."""

    def get(self):
        return np.asarray(self)

    def __getitem__(self, key):  # CuPy indexes a scalar as a 0-d array
        out = super().__getitem__(key)
        return np.asarray(out).view(_HostArray) if np.ndim(out) == 0 else out


class _FakeCupy:
    """Just enough of CuPy, on the host, for device_levels' launcher: its array calls return
    :class:`_HostArray`, so the launch sequence (arguments, buffers, swaps, flags) runs with
    the kernels' Numba twins in place of the CUDA kernels."""

    float32, uint8, int32 = np.float32, np.uint8, np.int32

    def __getattr__(self, name):
        fn = getattr(np, name)

        def wrapped(*a, **k):
            out = fn(*a, **k)
            return out.view(_HostArray) if isinstance(out, np.ndarray) else out
        return wrapped


def test_device_launcher_with_the_twins(monkeypatch):
    """terrain.hydrology._fill_gpu.device_levels end to end without a GPU: the seeded
    forest from Kruskal (what device_mst(seeds=...) makes), the CUDA kernels replaced by
    their twins through the same argument lists; the levels equal the CPU's."""
    import terrain.grid.mst_device as md
    import terrain.hydrology._fill_gpu as fg
    from terrain.backend import Backend

    def fake_mst(z, connectivity, model, hlen, be, seeds=None):
        mask, labels = seeded_forest(np.asarray(z), connectivity, np.asarray(seeds))
        return md.InCoreForest(mask.view(_HostArray), None, 0, 0, 0,
                               labels.astype(np.int32).view(_HostArray))

    def rank(grid, block, args):
        nxt, r, nxt2, r2, flag, arcs = args
        flag[0] = fill_rank_twin(nxt, r, nxt2, r2, int(arcs))

    def jump(grid, block, args):
        P, val, P2, val2, flag, n = args
        flag[0] = fill_jump_twin(P, val, P2, val2, int(n))

    kernels = {"fill_adjacency": lambda g, b, a: fill_adjacency_twin(
                   np.ascontiguousarray(a[0]).ravel(), *a[1:3], int(a[3]), int(a[4])),
               "fill_succ": lambda g, b, a: fill_succ_twin(*a[:4], int(a[4]), int(a[5])),
               "fill_rank": rank,
               "fill_parent": lambda g, b, a: fill_parent_twin(*a[:8], int(a[8]), int(a[9])),
               "fill_jump": jump}

    class Module:
        def get_function(self, name):
            return kernels[name]

    class FakeGpu(Backend):
        is_gpu = True

        def cuda_module(self, path, *a, **k):
            return Module()

    monkeypatch.setattr(md, "device_mst", fake_mst)
    be = FakeGpu("gpu", _FakeCupy())
    for seed in range(8):
        z = case(seed, (23, 31))
        for conn in (4, 8):
            out = outlet_cells(z, conn)
            got = np.asarray(fg.device_levels(z, out, conn, be))
            want = fill_depressions(z, conn, backend="cpu")
            np.testing.assert_array_equal(np.where(np.isinf(got), z, got), want.filled,
                                          strict=True)


@pytest.mark.gpu
@pytest.mark.parametrize("conn", [4, 8])
def test_gpu_signed_zeros_are_the_cpus_bytes(conn):
    """-0.0 and +0.0 side by side and in pits: the device's layers (a NumPy DEM, a CuPy DEM
    whose layers stay there, and the epsilon fill's) are the CPU's bytes; assert_identical
    compares values, where -0.0 == +0.0."""
    import cupy
    from backends import run_on_backends
    from grids import dem
    for seed in range(4):
        z = dem("signed-zeros", (61, 47), seed)
        for kw in ({}, {"epsilon": True}):
            got = run_on_backends(lambda b: fill_depressions(z, conn, backend=b, **kw))
            for name in ("filled", "depth"):
                cpu, gpu = (np.asarray(getattr(got[k], name)) for k in ("cpu", "gpu"))
                np.testing.assert_array_equal(gpu.view(np.uint32), cpu.view(np.uint32),
                                              err_msg=f"{name} {kw} seed {seed}")
        on_device = fill_depressions(cupy.asarray(z), conn, backend="gpu")
        cpu = fill_depressions(z, conn, backend="cpu")
        for name in ("filled", "depth"):
            np.testing.assert_array_equal(getattr(on_device, name).get().view(np.uint32),
                                          getattr(cpu, name).view(np.uint32), err_msg=name)
