"""The tiled cost distance out of core: the index lives in the output store (per-level Zarr
arrays), a fresh process reuses it, the top Dijkstra pages matrices through an LRU cache,
and no task holds the whole index."""

import json

import numpy as np
import pytest
import zarr

from cli import run_cli, run_main
from grids import write_asc
from grids import int_dem
from oracles import tiled_oracle

from terrain.backend import get_backend
from terrain.grid.sssp_tiled import (FlatBoundaries, TiledSpec, tile_boundaries, top_labels,
                                     top_labels_paged)

LAYERS = ("distance", "allocation", "backlink")


def _layers(path):
    g = zarr.open_group(str(path), mode="r")
    return {n: np.asarray(g[n][:]) for n in LAYERS}


@pytest.mark.parametrize("cache_pages,prefetch", [(2, 0), (4, 3), (100, 0), (100, 3)])
def test_paged_top_dijkstra_equals_in_memory(cache_pages, prefetch):
    """Matrices read page by page through a cache of 2 or 4 pages (evictions and reloads
    all the time) or of all pages, with or without reading neighbouring pages ahead, give
    the labels of the in-memory top Dijkstra."""
    rng = np.random.default_rng(5)
    z = int_dem(rng, (40, 36), nan_frac=0.05)
    spec = TiledSpec(z.shape, 4, 8)
    tiles = tile_boundaries(spec, z, np.ones_like(z), (0, 40, 0, 36), "cpu")  # 10 x 9 tiles
    srcs = {3: (np.zeros(tiles[3].size), np.zeros(tiles[3].size, np.int32),
                np.zeros(tiles[3].size, np.int32)),
            70: (np.full(tiles[70].size, 5.0), np.ones(tiles[70].size, np.int32),
                 np.zeros(tiles[70].size, np.int32))}
    labels = [srcs.get(t) for t in range(len(tiles))]
    want = top_labels(spec, tiles, labels)
    bp = max(t.size for t in tiles)
    m, npc = 2, 5  # pages of 2 x 2 tiles, 5 pages a row
    page_of = [(t // 9 // m) * npc + (t % 9) // m for t in range(len(tiles))]
    page_loc = [(t // 9 % m) * m + (t % 9) % m for t in range(len(tiles))]
    loads = []

    def load(p):
        loads.append(p)
        d = np.full((m * m, bp, bp), np.inf)
        h = np.zeros((m * m, bp, bp), np.int32)
        for t, (pg, loc) in enumerate(zip(page_of, page_loc)):
            if pg == p:
                n = tiles[t].size
                d[loc, :n, :n], h[loc, :n, :n] = tiles[t].dist, tiles[t].hops
        return d, h

    per_page = m * m * bp * bp * 12
    def around(p):
        pi, pj = divmod(p, npc)
        return [(pi + a) * npc + pj + b for a in (-1, 0, 1) for b in (-1, 0, 1)
                if (a or b) and 0 <= pi + a < 5 and 0 <= pj + b < npc]
    got, stats = top_labels_paged(spec, tiles, labels, page_of, page_loc, load,
                                  (m * m, bp, bp), cache_pages * per_page, around, prefetch)
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            np.testing.assert_array_equal(a, b)
    assert stats["pages"] == len(set(page_of)) and stats["page_loads"] == len(loads)
    if cache_pages < 20:
        assert stats["page_loads"] > stats["pages"]  # the cache did evict and reload
    else:
        assert stats["page_loads"] == stats["pages"]


@pytest.mark.parametrize("start", [0.0, 2.5])
def test_top_one_page_equals_in_memory(backend, start):
    """The whole level as one page (read at once; on the GPU solved by ``top_solve_gpu``'s
    two label-correcting sweeps) gives the in-memory top Dijkstra's labels bit for bit:
    float costs, nodata, three sources of which two share a tile, and a source whose
    start label is not tight (another source reaches its cell for less)."""
    rng = np.random.default_rng(8)
    z = (rng.random((44, 38)) * 20).astype(np.float32)
    z[rng.random(z.shape) < 0.05] = np.nan
    spec = TiledSpec(z.shape, 4, 16, "tobler")
    tiles = tile_boundaries(spec, z, np.ones_like(z), (0, 44, 0, 38), "cpu")  # 11 x 10 tiles
    def lab(t, d, a):
        n = tiles[t].size
        return (np.full(n, d), np.full(n, a, np.int32), np.zeros(n, np.int32))
    srcs = {3: lab(3, 0.0, 0), 57: lab(57, start, 1), 58: lab(58, 1e6, 2),
            109: lab(109, 0.0, 3)}
    labels = [srcs.get(t) for t in range(len(tiles))]
    want = top_labels(spec, tiles, labels)
    bp = max(t.size for t in tiles)
    d = np.full((len(tiles), bp, bp), np.inf)
    h = np.zeros((len(tiles), bp, bp), np.int32)
    for t, nb in enumerate(tiles):
        d[t, :nb.size, :nb.size], h[t, :nb.size, :nb.size] = nb.dist, nb.hops
    got, stats = top_labels_paged(spec, tiles, labels, [0] * len(tiles),
                                  list(range(len(tiles))), lambda p: (d, h), d.shape,
                                  d.nbytes + h.nbytes, backend=backend)
    assert stats["page_loads"] == 1
    assert ("gpu_rounds" in stats) == get_backend(backend).is_gpu
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            np.testing.assert_array_equal(a, b)
    # the same level read as whole arrays (a pipeline's way): the labels come back flat
    flat = FlatBoundaries(np.array([t.size for t in tiles], np.int32),
                          *(np.concatenate([getattr(t, x) for t in tiles])
                            for x in ("ids", "z", "f")))
    got, _ = top_labels_paged(spec, flat, srcs, [0] * len(tiles), list(range(len(tiles))),
                              lambda p: (d, h), d.shape, d.nbytes + h.nbytes, backend=backend)
    for i in range(3):
        np.testing.assert_array_equal(np.concatenate([w[i] for w in want]), got[i])


def test_index_in_store_reused_by_a_fresh_process(capsys, tmp_path):
    """The index is Zarr arrays in the output store (no run scratch left); another process
    reuses it, and its result equals a fresh run's and scipy's."""
    rng = np.random.default_rng(2)
    z = int_dem(rng, (70, 61), hi=30, nan_frac=0.04)
    z[30, 5:] = np.nan  # a barrier with a gap
    z[5, 5] = z[60, 50] = z[2, 58] = 7
    dem = write_asc(tmp_path / "dem.asc", z)
    rc, so, se = run_main(capsys, "cost-distance", dem, "-o", tmp_path / "a.zarr",
                          "--source-cell", "5,5", "--route", "tiled", "--tile-sssp", 4,
                          "--max-height", 1, "--tile", 16, "--json")
    assert rc == 0, se
    root = zarr.open_group(str(tmp_path / "a.zarr"), mode="r")
    idx = root["sssp_index"]
    assert idx.attrs["height"] == 1 and "sssp_labels" not in root
    n0 = idx["L0/count"]
    assert n0.shape == (18, 16) and idx["L0/dist"].shape[:2] == (18, 16)
    assert idx["L1/dist"].shape[:2] == (9, 8)
    # tile (3, 2)'s stored matrix is phase 1 on that tile
    spec = TiledSpec(z.shape, 4, 8)
    t = tile_boundaries(spec, z[12:16, 8:12], np.ones((4, 4), np.float32), (12, 16, 8, 12),
                        "cpu")[0]
    n = int(n0[3, 2])
    assert n == t.size
    np.testing.assert_array_equal(idx["L0/ids"][3, 2, :n], t.ids)
    np.testing.assert_array_equal(idx["L0/dist"][3, 2, :n, :n], t.dist)
    # a fresh process reuses it
    src = ["--source-cell", "60,50", "--source-cell", "2,58"]
    rc, so, se = run_cli("cost-distance", dem, "-o", tmp_path / "r.zarr", *src, "--tile", 16,
                         "--reuse", tmp_path / "a.zarr", "--json", scheduler="threads",
                         timeout=300)
    assert rc == 0, se
    s = json.loads(so)
    assert s["skipped_phases"] == ["phase 1", "phase 2 upward"] and s["index_tasks"] == 0
    rc, so, se = run_main(capsys, "cost-distance", dem, "-o", tmp_path / "f.zarr", *src,
                          "--route", "tiled", "--tile-sssp", 4, "--max-height", 1,
                          "--tile", 16, "--json")
    assert rc == 0, se
    a, b = _layers(tmp_path / "f.zarr"), _layers(tmp_path / "r.zarr")
    for name in LAYERS:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    ref, alloc = tiled_oracle(z, np.ones_like(z), [(60, 50), (2, 58)], 8, 0)
    np.testing.assert_array_equal(b["distance"], np.where(np.isfinite(ref), ref, np.nan))
    assert "sssp_index" not in zarr.open_group(str(tmp_path / "r.zarr"), mode="r")


def test_no_task_holds_the_whole_index(capsys, tmp_path, monkeypatch):
    """Many groups and a top cache of two pages: every read of the index (a group's or a
    node's matrices, a page) is a small part of it, the top Dijkstra reloads evicted pages,
    and the result equals the in-core one."""
    import terrain.grid._tiled_store as tiled_store
    import terrain.tiles.store as store
    from terrain.grid.sssp_tiled_store import IndexStore
    monkeypatch.setattr(store, "SHARD_TARGET_SIDE", 64)  # groups of 64 x 64 cells
    # 9 pages of 8 x 8 tiles
    monkeypatch.setattr(tiled_store, "TOP_CACHE_BYTES", 9 * 64 * 28 * 28 * 12)
    reads = []
    meta, load_page = IndexStore.meta, IndexStore.load_page

    def counted_meta(self, k, region, matrices=False):
        out = meta(self, k, region, matrices)
        if matrices:
            reads.append(sum(nb.dist.nbytes + nb.hops.nbytes for nb in out.values()))
        return out

    def counted_page(self, k, p):
        out = load_page(self, k, p)
        reads.append(out[0].nbytes + out[1].nbytes)
        return out
    monkeypatch.setattr(IndexStore, "meta", counted_meta)
    monkeypatch.setattr(IndexStore, "load_page", counted_page)
    rng = np.random.default_rng(3)
    z = int_dem(rng, (192, 200), hi=50)
    dem = write_asc(tmp_path / "dem.asc", z)
    common = ["--source-cell", "100,90", "--source-cell", "3,190", "--tile", 16, "--json"]
    rc, so, se = run_main(capsys, "cost-distance", dem, "-o", tmp_path / "i.zarr",
                          "--route", "in-core", *common)
    assert rc == 0, se
    rc, so, se = run_main(capsys, "cost-distance", dem, "-o", tmp_path / "t.zarr",
                          "--route", "tiled", "--tile-sssp", 8, "--max-height", 0,
                          *common)
    assert rc == 0, se
    s = json.loads(so)
    assert s["groups"] == 12 and s["top_pages"] == 12
    assert s["top_page_loads"] > s["top_pages"]  # 9 of 12 pages held: evicted and reloaded
    idx = zarr.open_group(str(tmp_path / "t.zarr"), mode="r")["sssp_index/L0"]
    index_bytes = idx["dist"].nbytes + idx["hops"].nbytes
    assert reads and max(reads) * 8 < index_bytes, (max(reads), index_bytes)
    a, b = _layers(tmp_path / "i.zarr"), _layers(tmp_path / "t.zarr")
    for name in LAYERS:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


class _Host(np.ndarray):
    """A NumPy array with CuPy's ``get``/``set`` (the device level's band copies, on the
    host: the layout and the bands are what is tested here)."""

    def get(self):
        return np.array(self)

    def set(self, a):
        self[...] = a


def test_gpu_index_layout_bands_and_slots(tmp_path):
    """A GPU run's index (unsharded, larger pages) written band by band from a device
    batch holds what ``write_batch`` writes; reading it back into a level's slots band by
    band gives the batch again; the groups' slots tile the level without overlap, in the
    order the device top addresses them."""
    from terrain.grid.sssp_tiled_store import BAND_BYTES, IndexStore
    from terrain.grid.sssp_tiled import tile_batch
    rng = np.random.default_rng(2)
    z = int_dem(rng, (70, 52), nan_frac=0.05)
    spec = TiledSpec(z.shape, 4, 8, max_height=0)  # 18 x 13 tiles
    g = 3                                            # groups of 8 x 8 tiles: 3 x 2 groups
    cpu = IndexStore(tmp_path / "c.zarr", spec, g)
    gpu = IndexStore(tmp_path / "g.zarr", spec, g, page_bytes=4 * 12 * 12 * 8, sharded=False)
    for st in (cpu, gpu):
        zarr.open_group(st.path, mode="w")
        st.create({"height": 0})
    assert gpu.page(0) == 2 and gpu.array(0, "dist").shards is None
    slots, n = gpu.group_slots()
    assert n == 18 * 13 and sorted(slots) == [(i, j) for i in range(3) for j in range(2)]
    seen = np.zeros(n, int)
    B = gpu.bpad(0)
    level = type("L", (), {})()
    level.dist = np.full((n, B, B), -1.0).view(_Host)
    level.hops = np.full((n, B, B), -1, np.int32).view(_Host)
    level.put = lambda start, count, ids, zz, ff: None
    for (i, j), (start, region) in slots.items():
        ni, nj = region[1] - region[0], region[3] - region[2]
        seen[start:start + ni * nj] += 1
        window = spec.window(g, i, j)
        zw = z[window[0]:window[1], window[2]:window[3]]
        batch = tile_batch(spec, zw, np.ones_like(zw), window, "cpu", width=B)
        cpu.write_batch(region, batch)
        dev = tile_batch(spec, zw, np.ones_like(zw), window, "cpu", width=B)
        dev.dist, dev.hops = dev.dist.view(_Host), dev.hops.view(_Host)
        gpu.write_batch_bands(region, dev, band_bytes=1)  # a band of one chunk row
        gpu.read_group_to(level, start, region, band_bytes=BAND_BYTES)
        np.testing.assert_array_equal(level.dist[start:start + ni * nj], batch.dist)
        np.testing.assert_array_equal(level.hops[start:start + ni * nj], batch.hops)
        # the device top's slot of tile (ti, tj): its group's start + row-major place
        ti, tj = region[0] + ni - 1, region[2] + nj - 1
        assert start + (ti - region[0]) * nj + tj - region[2] == start + ni * nj - 1
    assert np.all(seen == 1)
    for name in ("count", "ids", "z", "f", "dist", "hops"):
        np.testing.assert_array_equal(np.asarray(cpu.array(0, name)[:]),
                                      np.asarray(gpu.array(0, name)[:]), err_msg=name)


def _child_path(n):
    """A child-boundary graph of ``n`` children of one vertex each (no matrix arcs) chained
    by grid arcs ``i -> i + 1`` of weight 1, seeded at vertex 0: what the top Dijkstras
    take, in memory (``moff``, flat matrices) and paged (one page of 1 x 1 matrices)."""
    from terrain.grid._tournament import INT_INF, tt_alloc, tt_seed
    ld = np.full(n, np.inf)
    la = np.full(n, INT_INF, np.int32)
    lh = np.full(n, INT_INF, np.int32)
    ld[0] = la[0] = lh[0] = 0
    tt = tt_alloc(n)
    tt_seed(*tt, ld, la, lh)
    ids = np.arange(n, dtype=np.int64)
    cptr = np.concatenate([ids, [n - 1]])
    return (ids, ids, np.ones(n, np.int64), ids, np.full(n, np.inf), np.zeros(n, np.int32),
            cptr, ids[1:], np.ones(n - 1)), (ld, la, lh), tt


def test_a_stop_ends_the_top_dijkstras_within_65536_pops(stopped_in_a_task):
    """The tiled cost distance's top Dijkstras poll the stop flag every 65536 pops: told to
    stop before they start, on a 200000-vertex path, the in-memory one returns False and the
    paged one -2 with most vertices unreached (with the flag clear: scipy's distances; the
    paged one's queue is left as it was, and called again it finishes); and both run on
    :func:`terrain.native.interruptible`, so a stopping run's task raises Stopped after them
    (a stop waited for the whole top level)."""
    import scipy.sparse
    from scipy.sparse.csgraph import dijkstra
    from terrain.grid._tiled_cpu import graph_dijkstra, graph_dijkstra_paged
    n = 200_000
    graph, labels, tt = _child_path(n)
    vchild, coff, csize, moff, mat_d, mat_h, cptr, cdst, cw = graph
    want = dijkstra(scipy.sparse.csr_matrix((cw, cdst, cptr), shape=(n, n)), indices=0)
    assert not graph_dijkstra(*graph, *labels, *tt, np.ones(1, np.uint8))
    assert np.count_nonzero(labels[0] < np.inf) <= 70_000
    _, labels, tt = _child_path(n)
    assert graph_dijkstra(*graph, *labels, *tt, np.zeros(1, np.uint8))
    np.testing.assert_array_equal(labels[0], want)
    _, labels, tt = _child_path(n)
    # one page: child c's 1 x 1 matrix at location c, the page in cache slot 0
    cache = (np.zeros(n, np.int64), np.arange(n, dtype=np.int64), np.zeros(1, np.int64),
             mat_d.reshape(1, n, 1, 1), mat_h.reshape(1, n, 1, 1), np.zeros(1, np.int64),
             np.zeros(1, np.int64))
    stop = np.ones(1, np.uint8)
    assert graph_dijkstra_paged(vchild, coff, csize, *cache, cptr, cdst, cw, *labels, *tt,
                                stop) == -2
    assert np.count_nonzero(labels[0] < np.inf) <= 70_000
    stop[0] = 0
    assert graph_dijkstra_paged(vchild, coff, csize, *cache, cptr, cdst, cw, *labels, *tt,
                                stop) == -1
    np.testing.assert_array_equal(labels[0], want)

    rng = np.random.default_rng(5)
    z = int_dem(rng, (40, 36), nan_frac=0.05)
    spec = TiledSpec(z.shape, 4, 8)
    tiles = tile_boundaries(spec, z, np.ones_like(z), (0, 40, 0, 36), "cpu")
    labels = [None] * len(tiles)
    labels[3] = (np.zeros(tiles[3].size), np.zeros(tiles[3].size, np.int32),
                 np.zeros(tiles[3].size, np.int32))
    stopped_in_a_task(lambda: top_labels(spec, tiles, labels))
    bp = max(t.size for t in tiles)
    d = np.full((len(tiles), bp, bp), np.inf)
    h = np.zeros((len(tiles), bp, bp), np.int32)
    for t, nb in enumerate(tiles):
        d[t, :nb.size, :nb.size], h[t, :nb.size, :nb.size] = nb.dist, nb.hops
    stopped_in_a_task(lambda: top_labels_paged(spec, tiles, labels, [0] * len(tiles),
                                               list(range(len(tiles))), lambda p: (d, h),
                                               d.shape, d.nbytes + h.nbytes))


def test_store_tables_are_twins():
    """The stored index's CPU and GPU tables answer the same questions (a task asks the one
    ``store_ops`` picks without knowing which), and the CPU's is made without the GPU's
    module: a CPU run loads no device code."""
    import subprocess
    import sys
    from terrain.grid._tiled_store import TiledStoreCpuOps
    from terrain.grid._tiled_store_gpu import TiledStoreGpuOps

    def public(cls):
        return {n for n in vars(cls) if not n.startswith("_")} - {"name"}
    assert public(TiledStoreCpuOps) == public(TiledStoreGpuOps)
    code = ("import sys; from terrain.grid.sssp_tiled_store import store_ops; "
            "ops = store_ops('cpu'); print(type(ops).__name__, "
            "'terrain.grid._tiled_store_gpu' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["TiledStoreCpuOps", "False"]
