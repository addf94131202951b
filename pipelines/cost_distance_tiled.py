"""The tiled cost distance (``cost-distance --algorithm tiled``) as an out-of-core Dask graph.

The steps of :mod:`terrain.grid.sssp_tiled` (thesis ch. 4-5, Haverkort's hierarchy) on the
one quadtree walk of :mod:`terrain.tiles.quadtree`. A *group* is a block of ``group_side``
cells (CPU: at most :data:`GROUP_SIDE`, at most a shard; GPU: :func:`gpu_sizing`) cut into
SSSP tiles of ``tile_sssp`` cells. Nothing grid-sized is held or passed between tasks: the
index lives in the output store (:class:`IndexStore`, ``sssp_index``), the run's boundary
labels in ``sssp_labels`` (removed at the end); tasks pass tokens and the sparse source
labels. With ``--backend gpu`` at height 0 the level of tiles stays on the device
(``DeviceLevel``) and the top is solved there. The layout, tasks and memory bound:
docs/cost-distance-tiled.md.
"""

import threading
import time
from contextlib import nullcontext
from dataclasses import replace

import numpy as np
import zarr

from terrain.errors import InputError
from terrain.io.remote import inside, is_remote, remove_tree, store_for
from terrain.grid.sssp import on_nodata
from terrain.grid.sssp_tiled import (INT_INF, MAX_GPU_TILE, DeviceLevel, FlatBoundaries,
                                     NodeBoundary, TileBatch, TiledSpec, default_max_height,
                                     fill_group, index_leaf, level_solve_gpu, node_boundary,
                                     node_down, shared_pass, sources_leaf, sources_merge,
                                     tile_batch, top_labels_paged, tt_capacity)
from terrain.io.zarr_meta import open_group
from terrain.tiles.quadtree import QuadtreePlan, walk_down, walk_up

from ._resume import (checkpoint_at, checkpoint_file, checkpoint_folder, kept_checkpoints,
                      run_checkpointed)
from .cluster import here_and_on_every_worker, worker_client
from .cost_distance_store import (StoreReader, prepare_layers, reached, source_arrays,
                                  summary_base, window_stats)
from .quadtree import TaskGraph, stage_seconds

__all__ = ["IndexStore", "build_cost_distance_tiled", "tiled_spec", "resume_index",
           "solve_spec", "index_spec", "check_reuse_store", "INDEX_GROUP", "LABELS_GROUP",
           "GROUP_SIDE", "gpu_sizing", "TOP_CACHE_BYTES", "top_cache_bytes"]

INDEX_GROUP = "sssp_index"
LABELS_GROUP = "sssp_labels"
#: the checkpoint that says a CPU run's index is whole in its partial output: a resumed run
#: takes it as ``--reuse`` takes an earlier store's (:func:`resume_index`). A GPU run writes
#: none: reading its index back (the top solved from the store's pages) took as long as
#: building it again on the device (40-ft, H200: 55.3 s resumed against 55.5 s fresh)
INDEX_DONE = "cost-index-done"
GROUP_SIDE = 512       # cells a side of a group (phase 1 / phase 3 batch, index chunks)
PAGE_BYTES = 512 << 10  # a page of distance matrices (the top Dijkstra's cache unit), at most
TOP_CACHE_BYTES = 256 << 20
GPU_PAGE_BYTES = 8 << 20  # a GPU run's index chunks (unsharded: written and read in bands)
BAND_BYTES = 64 << 20     # matrices per band between the device and the store
#: bands between the device and the store in flight at once (the host's buffers for them)
HOST_BANDS = 6
_HOST_BANDS = threading.BoundedSemaphore(HOST_BANDS)
#: GPU runs: groups whose host arrays (a window read, phase 1's batch, phase 3's windows and
#: a shard's layers: a few hundred MB for 2048^2) are held at once; their device work runs
#: one launch after another anyway, so more threads would only add memory
_GROUP_SLOTS = threading.BoundedSemaphore(4)
#: the stages whose task-seconds the summary's ``stage_seconds`` gives (``top`` apart)
_TIMED = ("index-leaf", "index-merge", "index-check", "src-", "down-", "fill")


def top_cache_bytes(backend):
    """The top Dijkstra's page cache: :data:`TOP_CACHE_BYTES` on the CPU; with the GPU 1/16 of
    the host's memory, up to 8 GB, so that a level's matrices are read in one go."""
    import os
    if backend != "gpu":
        return TOP_CACHE_BYTES
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 0
    return int(min(max(TOP_CACHE_BYTES, ram // 16), 8 << 30))


class IndexStore:
    """Per-level node arrays in a Zarr group: the index, or with ``labels=True`` a run's final
    boundary labels (``d``, ``a``, ``h``). Layout: docs/cost-distance-tiled.md. ``path``: a
    local path or a :class:`terrain.io.remote.Location` (the tasks open it where they run);
    ``self.path`` is its text, what names the run's store in this process's tables."""

    def __init__(self, path, tspec, group_level, labels=False, mode="r+",
                 page_bytes=None, sharded=True):
        self.path, self.tspec, self.g, self.labels = str(path), tspec, int(group_level), labels
        self.where = path if is_remote(path) else str(path)
        self.mode = mode  # "r" for a reused store: never written
        # a GPU run's pages are larger and unsharded: written band by band
        self.page_bytes, self.sharded = int(page_bytes or PAGE_BYTES), bool(sharded)
        self.name = LABELS_GROUP if labels else INDEX_GROUP
        self._arrays = {}

    # geometry
    def shape(self, k):
        nt_r, nt_c = self.tspec.tiles_shape
        return (nt_r + (1 << k) - 1) >> k, (nt_c + (1 << k) - 1) >> k

    def bpad(self, k):
        S, w = self.tspec.tile << k, self.tspec.width
        R, C = min(S, self.tspec.shape[0]), min(S, self.tspec.shape[1])
        return max(R * C - max(R - 2 * w, 0) * max(C - 2 * w, 0), 1)

    def side(self, k):
        """Nodes a side per chunk of level ``k``."""
        return 1 << (self.g - k) if k <= self.g else 1

    def page(self, k):
        """Nodes a side per page of level ``k``: the stored chunks', else from the page bytes."""
        try:
            return int(self.array(k, "dist").chunks[0])
        except Exception:
            pass
        B, m = self.bpad(k), self.side(k)
        while m > 1 and m * m * B * B * 8 > self.page_bytes:
            m //= 2
        return m

    def create(self, attrs):
        root = zarr.open_group(store=store_for(self.where, read_only=False), mode="a")
        grp = root.require_group(self.name)
        grp.attrs.update(attrs)
        for k in range(self.tspec.height + 1):
            lev = grp.require_group(f"L{k}")
            nr, nc = self.shape(k)
            B, c, m = self.bpad(k), self.side(k), self.page(k)
            cfg, zstd = {"write_empty_chunks": False}, (zarr.codecs.ZstdCodec(level=1),)

            def arr(name, shp, chunks, dtype, fill, shards=None):
                lev.create_array(name, shape=shp, chunks=chunks, shards=shards, dtype=dtype,
                                 fill_value=fill, compressors=zstd, config=cfg,
                                 overwrite=True)
            if self.labels:
                arr("d", (nr, nc, B), (c, c, B), "float64", np.inf)
                arr("a", (nr, nc, B), (c, c, B), "int32", int(INT_INF))
                arr("h", (nr, nc, B), (c, c, B), "int32", int(INT_INF))
                continue
            arr("count", (nr, nc), (c, c), "int32", 0)
            arr("ids", (nr, nc, B), (c, c, B), "int64", -1)
            arr("z", (nr, nc, B), (c, c, B), "float32", np.nan)
            arr("f", (nr, nc, B), (c, c, B), "float32", np.nan)
            shards = (c, c, B, B) if c > m and self.sharded else None
            arr("dist", (nr, nc, B, B), (m, m, B, B), "float64", np.inf, shards)
            arr("hops", (nr, nc, B, B), (m, m, B, B), "int32", int(INT_INF), shards)

    def array(self, k, name):
        key = (k, name)
        if key not in self._arrays:
            self._arrays[key] = zarr.open_array(store=store_for(self.where,
                                                                read_only=self.mode == "r"),
                                                path=f"{self.name}/L{k}/{name}",
                                                mode=self.mode)
        return self._arrays[key]

    # index
    def write_nodes(self, k, region, nodes):
        """Write the nodes ``{(k, i, j): NodeBoundary}`` of ``region`` = (i0, i1, j0, j1)."""
        i0, i1, j0, j1 = region
        B = self.bpad(k)
        ni, nj = i1 - i0, j1 - j0
        count = np.zeros((ni, nj), np.int32)
        ids = np.full((ni, nj, B), -1, np.int64)
        z = np.full((ni, nj, B), np.nan, np.float32)
        f = np.full((ni, nj, B), np.nan, np.float32)
        dist = np.full((ni, nj, B, B), np.inf)
        hops = np.full((ni, nj, B, B), INT_INF, np.int32)
        for (kk, i, j), nb in nodes.items():
            if kk != k or not (i0 <= i < i1 and j0 <= j < j1):
                continue
            n, a, b = nb.size, i - i0, j - j0
            count[a, b] = n
            ids[a, b, :n], z[a, b, :n], f[a, b, :n] = nb.ids, nb.z, nb.f
            dist[a, b, :n, :n], hops[a, b, :n, :n] = nb.dist, nb.hops
        sl = (slice(i0, i1), slice(j0, j1))
        for name, data in (("count", count), ("ids", ids), ("z", z), ("f", f),
                           ("dist", dist), ("hops", hops)):
            self.array(k, name)[sl] = data
        return dist.nbytes + hops.nbytes + ids.nbytes + z.nbytes + f.nbytes

    def write_batch(self, region, batch):
        """Write phase 1 of the level-0 tiles of ``region`` from a ``TileBatch`` of exactly those
        tiles (row-major), padded to the level's width."""
        i0, i1, j0, j1 = region
        ni, nj = i1 - i0, j1 - j0
        if tuple(batch.tiles) != (ni, nj):
            raise ValueError(f"batch of {batch.tiles} tiles for region {region}")
        B, b = self.bpad(0), batch.ids.shape[1]
        sl = (slice(i0, i1), slice(j0, j1))
        out = 0
        for name, data, fill in (("count", batch.count, None), ("ids", batch.ids, -1),
                                 ("z", batch.z, np.nan), ("f", batch.f, np.nan),
                                 ("dist", batch.dist, np.inf), ("hops", batch.hops, INT_INF)):
            if fill is not None and b < B:  # pad the boundary axes to the level's width
                full = np.full(data.shape[:1] + (B,) * (data.ndim - 1), fill, data.dtype)
                full[(slice(None),) + (slice(0, b),) * (data.ndim - 1)] = data
                data = full
            data = data.reshape((ni, nj) + data.shape[1:])
            self.array(0, name)[sl] = data
            out += data.nbytes
        return out

    def write_batch_bands(self, region, batch, band_bytes=None, cells=True, matrices=True):
        """:meth:`write_batch` of a batch whose matrices are device arrays: the boundary cells, then
        the matrices a band of whole chunk rows at a time (the store unsharded below the group)."""
        i0, i1, j0, j1 = region
        ni, nj = i1 - i0, j1 - j0
        B = self.bpad(0)
        if tuple(batch.tiles) != (ni, nj) or batch.ids.shape[1] != B:
            raise ValueError(f"batch of {batch.tiles} tiles, width {batch.ids.shape[1]}, "
                             f"for region {region} of width {B}")
        sl = (slice(i0, i1), slice(j0, j1))
        for name, data in (("count", batch.count), ("ids", batch.ids), ("z", batch.z),
                           ("f", batch.f)) if cells else ():
            self.array(0, name)[sl] = data.reshape((ni, nj) + data.shape[1:])
        rows = self._band_rows(nj, band_bytes) if matrices else ni
        for r in range(0, ni if matrices else 0, rows):
            r1 = min(r + rows, ni)
            with _HOST_BANDS:
                for name, data in (("dist", batch.dist), ("hops", batch.hops)):
                    part = data[r * nj:r1 * nj].get().reshape((r1 - r, nj, B, B))
                    self.array(0, name)[i0 + r:i0 + r1, j0:j1] = part
                    del part
        return ni * nj * B * (16 + 12 * B)

    def _band_rows(self, nj, band_bytes=None):
        """Node rows per band of level 0: whole chunk rows, about ``band_bytes`` of matrices."""
        B, m = self.bpad(0), self.page(0)
        per_row = max(nj * B * B * 12, 1)
        return m * max(1, int(band_bytes or BAND_BYTES) // (m * per_row))

    def read_group_to(self, level, start, region, band_bytes=None):
        """Level-0 nodes of ``region`` into slots ``start:`` of a ``DeviceLevel``."""
        sl = self._clip(0, region)
        (i0, i1), (j0, j1) = ((x.start, x.stop) for x in sl)
        ni, nj = i1 - i0, j1 - j0
        B = self.bpad(0)
        count = np.asarray(self.array(0, "count")[sl]).reshape(-1)
        level.put(start, count, *(np.asarray(self.array(0, n)[sl]).reshape(-1, B)
                                  for n in ("ids", "z", "f")))
        rows = self._band_rows(nj, band_bytes)
        for r in range(0, ni, rows):
            r1 = min(r + rows, ni)
            with _HOST_BANDS:
                s0, s1 = start + r * nj, start + r1 * nj
                for name, dst in (("dist", level.dist), ("hops", level.hops)):
                    part = np.asarray(self.array(0, name)[i0 + r:i0 + r1, j0:j1])
                    dst[s0:s1].set(np.ascontiguousarray(part.reshape((s1 - s0, B, B))))
                    del part
        return int(count.sum())

    def _clip(self, k, region):
        """Slices of level ``k``'s node grid inside ``region``, clipped; None when empty."""
        nr, nc = self.shape(k)
        i0, i1 = max(region[0], 0), min(region[1], nr)
        j0, j1 = max(region[2], 0), min(region[3], nc)
        return (slice(i0, i1), slice(j0, j1)) if i1 > i0 and j1 > j0 else None

    def meta(self, k, region, matrices=False):
        """``{(k, i, j): NodeBoundary}`` of the nodes in ``region`` (matrices None unless asked)."""
        sl = self._clip(k, region)
        if sl is None:
            return {}
        (i0, i1), (j0, j1) = ((x.start, x.stop) for x in sl)
        count, ids, z, f = (np.asarray(self.array(k, n)[sl]) for n in ("count", "ids", "z", "f"))
        if matrices:
            dist, hops = (np.asarray(self.array(k, n)[sl]) for n in ("dist", "hops"))
        out = {}
        for a in range(i1 - i0):
            for b in range(j1 - j0):
                n, key = int(count[a, b]), (k, i0 + a, j0 + b)
                out[key] = NodeBoundary(k, key[1:], self.tspec.window(*key), ids[a, b, :n],
                                        z[a, b, :n], f[a, b, :n],
                                        dist[a, b, :n, :n] if matrices else None,
                                        hops[a, b, :n, :n] if matrices else None)
        return out

    def node(self, key):
        """One node with its matrices."""
        k, i, j = key
        return self.meta(k, (i, i + 1, j, j + 1), matrices=True)[key]

    def load_page(self, k, p):
        """Page ``p`` of level ``k`` (row-major): padded ``(dist, hops)``."""
        m, B = self.page(k), self.bpad(k)
        npc = -(-self.shape(k)[1] // m)
        pi, pj = divmod(p, npc)
        sl = (slice(pi * m, (pi + 1) * m), slice(pj * m, (pj + 1) * m))
        out = []
        for name, fill, dtype in (("dist", np.inf, np.float64), ("hops", INT_INF, np.int32)):
            part = np.asarray(self.array(k, name)[sl])
            full = np.full((m, m, B, B), fill, dtype)
            full[: part.shape[0], : part.shape[1]] = part
            out.append(full.reshape(m * m, B, B))
        return out

    # labels
    def write_labels(self, k, region, labels):
        """Write final labels ``{(k, i, j): (d, a, h)}`` of ``region``."""
        i0, i1, j0, j1 = region
        B = self.bpad(k)
        d = np.full((i1 - i0, j1 - j0, B), np.inf)
        a = np.full((i1 - i0, j1 - j0, B), INT_INF, np.int32)
        h = np.full((i1 - i0, j1 - j0, B), INT_INF, np.int32)
        for (kk, i, j), lab in labels.items():
            if kk == k and lab is not None and i0 <= i < i1 and j0 <= j < j1 and lab[0].size:
                n = lab[0].size
                d[i - i0, j - j0, :n], a[i - i0, j - j0, :n], h[i - i0, j - j0, :n] = lab
        sl = (slice(i0, i1), slice(j0, j1))
        self.array(k, "d")[sl], self.array(k, "a")[sl], self.array(k, "h")[sl] = d, a, h

    def read_labels(self, k, region, counts):
        """``{key: (d, a, h)}`` over ``region`` (clipped); ``counts[key]``: boundary sizes."""
        sl = self._clip(k, region)
        if sl is None:
            return {}
        (i0, i1), (j0, j1) = ((x.start, x.stop) for x in sl)
        d, a, h = (np.asarray(self.array(k, n)[sl]) for n in ("d", "a", "h"))
        out = {}
        for x in range(i1 - i0):
            for y in range(j1 - j0):
                key = (k, i0 + x, j0 + y)
                n = counts[key]
                out[key] = (d[x, y, :n].copy(), a[x, y, :n].copy(), h[x, y, :n].copy())
        return out


class _LazyNodes:
    """``nodes[key]`` read from an :class:`IndexStore` on first use (a task's view)."""

    def __init__(self, store):
        self.store, self.cache = store, {}

    def __getitem__(self, key):
        if key not in self.cache:
            self.cache[key] = self.store.node(key)
        return self.cache[key]


def index_spec(spec):
    """What a stored index must match (JSON-able): the grid, the cost, and the DEM's and the
    friction's fingerprints (a tile's interior changed is no boundary cell's: a reuse that
    checks only those would give wrong distances)."""
    dem, friction = spec["fingerprints"]  # taken where the command runs (a store at a URL
    return {"shape": list(spec["shape"]), "cost": spec["cost"],  # with its options)
            "connectivity": int(spec["connectivity"]),
            "cellsize": [float(x) for x in spec["cellsize"]], "tile": int(spec["tile_sssp"]),
            "group": int(spec["group_side"]), "input": dem, "friction": friction}


def solve_spec(spec):
    """The :class:`~terrain.grid.sssp_tiled.TiledSpec` of a command's ``spec``;
    :class:`InputError` where a value is off.

    >>> solve_spec({"shape": [10, 20], "tile_sssp": 8, "connectivity": 8, "cost": "absdiff",
    ...             "cellsize": [1, 1]}).tiles_shape
    (2, 3)
    """
    return TiledSpec(tuple(spec["shape"]), int(spec["tile_sssp"]), int(spec["connectivity"]),
                     spec["cost"], tuple(float(x) for x in spec["cellsize"]),
                     spec.get("max_height"))


def _index_attrs(path):
    try:
        return dict(open_group(path, mode="r")[INDEX_GROUP].attrs)
    except Exception:
        raise InputError(f"{path}: not a tiled cost-distance store (no {INDEX_GROUP!r} "
                         "group)") from None


def check_reuse_store(path, spec):
    """The stored index's attributes of ``path``; :class:`InputError` unless it is a tiled
    cost-distance store of the same grid, cost, connectivity, cell size and tile."""
    attrs = _index_attrs(path)
    want = index_spec(spec)
    got = {k: attrs.get(k) for k in want}
    if spec.get("max_height") is not None:
        want["height"], got["height"] = int(spec["max_height"]), attrs.get("height")
    changed = [f"{'input ' + spec['input'] if k == 'input' else 'friction raster'} does not "
               "match the one it was computed from (size or modification time)"
               for k in ("input", "friction") if got.pop(k) != want.pop(k)]
    if changed:
        raise InputError(f"{path}: cannot reuse: " + "; ".join(changed))
    if got != want:
        diff = ", ".join(f"{k} {got[k]} (this run: {want[k]})" for k in want
                         if got[k] != want[k])
        raise InputError(f"{path}: stored index was computed for another grid or cost: "
                         f"{diff}")
    return attrs


def _group_region(store, k, i, j):
    """Level-``k`` node region ``(i0, i1, j0, j1)`` of group ``(g, i, j)``, clipped."""
    s = 1 << (store.g - k)
    nr, nc = store.shape(k)
    return i * s, min((i + 1) * s, nr), j * s, min((j + 1) * s, nc)


def _make_stores(index, labels, spec, height, prepared):
    del prepared  # after cost-prepare made the output store
    if index is not None:
        index.create(dict(index_spec(spec), height=int(height)))
    labels.create({})
    return True


#: index store path -> [DeviceLevel, vertices so far] of a GPU run at height 0 (this process's)
_LEVELS = {}
_LEVELS_LOCK = threading.Lock()


def _group_slots(store):
    """``({(i, j): (first slot, tile region)}, slots)``: the groups' tiles in a ``DeviceLevel``."""
    nr, nc = store.shape(store.g)
    out, start = {}, 0
    for i in range(nr):
        for j in range(nc):
            region = _group_region(store, 0, i, j)
            out[(i, j)] = (start, region)
            start += (region[1] - region[0]) * (region[3] - region[2])
    return out, start


def _device_level_fits(tspec, store, backend):
    """Whether the level of tiles fits 70 % of the free device memory (GPU, height 0)."""
    if backend != "gpu" or tspec.height != 0 or tspec.tile > MAX_GPU_TILE \
            or tspec.levels == 1:
        return False
    from terrain.backend import free_device_bytes, get_backend
    _, n = _group_slots(store)
    R, C = tspec.shape
    return DeviceLevel.nbytes(n, store.bpad(0), R * C) <= 0.7 * free_device_bytes(
        get_backend(backend))


def _device_level(store, tspec, backend):
    """This run's level of tiles on the device (made by the first group task), or None."""
    with _LEVELS_LOCK:
        if store.path not in _LEVELS:
            if not _device_level_fits(tspec, store, backend):
                return None
            from terrain.backend import get_backend
            _LEVELS[store.path] = [DeviceLevel(get_backend(backend), _group_slots(store)[1],
                                               store.bpad(0)), 0]
        return _LEVELS[store.path][0]


def _drop_level(path):
    """Free this process's device level of run store ``path`` (if any)."""
    with _LEVELS_LOCK:
        return _LEVELS.pop(str(path), None)


#: labels store path -> (group slots, B, (d, a, h)): the top's labels on the device for phase 3
_DEVICE_LABELS = {}


def _single_process():
    """Whether every task runs in this process (the top's labels may then stay on the device)."""
    client = worker_client()
    return client is None or len(client.scheduler_info()["workers"]) == 1


_WRITES = {}     # index store path -> {group: future of its matrices' write} (this process's)
_WRITER = []     # the process's writer pool, made on first use


def _write_later(path, group, fn, *args):
    """Run ``fn(*args)`` (a group's matrices written from the device) in the writer pool."""
    from concurrent.futures import ThreadPoolExecutor
    with _LEVELS_LOCK:
        if not _WRITER:
            _WRITER.append(ThreadPoolExecutor(HOST_BANDS,
                                              thread_name_prefix="terrain-index-write"))
        fut = _WRITER[0].submit(fn, *args)
        _WRITES.setdefault(str(path), {})[group] = fut
    return fut


def _wait_writes(path, groups=None):
    """Wait for this process's matrix writes of ``path`` (of ``groups``, else all, forgotten)."""
    with _LEVELS_LOCK:
        pending = _WRITES.get(str(path), {})
        if groups is None:
            futs = list(_WRITES.pop(str(path), {}).values())
        else:
            futs = [pending[k] for k in groups if k in pending]
    for fut in futs:
        fut.result()


def _index_written(root):
    """The :data:`INDEX_DONE` step: once the index's walk (``root``) has returned, a CPU
    run's index is whole in the store (its tasks write it themselves)."""
    del root
    return True


def _index_leaf_device(tspec, reader, backend, store, level, g, i, j):
    """Phase 1 of group ``(g, i, j)`` into the device ``level``; the index written in the
    background."""
    slots, _ = _group_slots(store)
    start, region = slots[(i, j)]
    window = tspec.window(g, i, j)
    n = (region[1] - region[0]) * (region[3] - region[2])
    with _GROUP_SLOTS:
        z, f = reader(window)
        batch = tile_batch(tspec, z, f, window, backend, width=store.bpad(0),
                           out=level.views(start, n))
        del z, f
        level.put(start, batch.count, batch.ids, batch.z, batch.f)
    store.write_batch_bands(region, batch, matrices=False)  # the cells now: phase 3 reads them
    # the batch's device arrays are views of the level: they keep it alive until written
    _write_later(store.path, (i, j), store.write_batch_bands, region, batch, None, False)
    with _LEVELS_LOCK:
        level.filled.add((i, j))
        if store.path in _LEVELS:
            _LEVELS[store.path][1] += int(batch.count.sum())


def _index_leaf_task(tspec, reader, backend, store, made, g, i, j):
    """Phase 1 and the group's own levels; written to the index. Returns a token."""
    del made
    if backend == "gpu" and tspec.height == 0 and store.mode != "r":
        level = _device_level(store, tspec, backend)
        if level is not None:
            _index_leaf_device(tspec, reader, backend, store, level, g, i, j)
            return (g, i, j), None
    written = set()

    def emit(k, nodes):  # level by level: at most two levels of the group in memory
        if k <= tspec.height:
            region = _group_region(store, k, i, j)
            if isinstance(nodes, TileBatch):  # the tiles: the batch's arrays as they are
                store.write_batch(region, nodes)
            else:
                store.write_nodes(k, region, nodes)
            written.add(k)
    index_leaf(tspec, reader, backend, g, i, j, emit=emit)
    for k in range(min(g, tspec.height) + 1):  # levels of empty nodes (none in the group)
        if k not in written:
            store.write_nodes(k, _group_region(store, k, i, j), {})
    return (g, i, j), None


def _index_merge_task(tspec, store, k, i, j, *kids):
    """A node's matrix from its four children's (read from the index), written."""
    if k <= tspec.height:
        children = [None if c is None else store.node(c) for c in _child_keys(store, k, i, j)]
        store.write_nodes(k, (i, i + 1, j, j + 1),
                          {(k, i, j): node_boundary(tspec, k, i, j, children)})
    return (k, i, j), None


def _child_keys(store, k, i, j):
    nr, nc = store.shape(k - 1)
    return [(k - 1, a, b) if a < nr and b < nc else None
            for a in (2 * i, 2 * i + 1) for b in (2 * j, 2 * j + 1)]


def _index_check_task(tspec, reader, store, prepared, g, i, j):
    """With ``--reuse``: the stored boundary cells must carry this raster's values."""
    del prepared  # the DEM is in place (a raster input is ingested first)
    window = tspec.window(g, i, j)
    z, f = reader(window)
    r0, c0 = window[0], window[2]
    cols = tspec.shape[1]
    sl = store._clip(0, _group_region(store, 0, i, j))
    ids = np.asarray(store.array(0, "ids")[sl])  # all the group's tiles at once (-1: padding)
    cell = ids >= 0
    rr, cc = ids[cell] // cols - r0, ids[cell] % cols - c0
    if not (np.array_equal(z[rr, cc], np.asarray(store.array(0, "z")[sl])[cell], equal_nan=True)
            and np.array_equal(f[rr, cc], np.asarray(store.array(0, "f")[sl])[cell],
                               equal_nan=True)):
        raise InputError(f"{store.path}: the stored index does not match this raster "
                         f"(group {i},{j})")
    return True


def _sources_leaf_task(tspec, store, reader, srcs, name, ready, g, i, j):
    """:func:`sources_leaf` after checking that the group's sources are on data."""
    del ready
    rows, cols, _ = srcs
    r0, r1, c0, c1 = window = tspec.window(g, i, j)
    inside = np.nonzero((rows >= r0) & (rows < r1) & (cols >= c0) & (cols < c1))[0]
    if not inside.size:  # no source: every label in the group is infinite, nothing to read
        return ([] if g > tspec.height else [((g, i, j), None)]), {}
    _wait_writes(store.path, [(i, j)])  # the source tiles' matrices, read below
    z, f = reader(window)
    for s in inside.tolist():
        r, c = int(rows[s]) - r0, int(cols[s]) - c0
        if np.isnan(z[r, c]) or np.isnan(f[r, c]):
            raise InputError(f"{name}: "
                             f"{on_nodata('source', s, rows[s], cols[s], not np.isnan(z[r, c]))}")
    up, own = sources_leaf(tspec, _LazyNodes(store), reader, srcs, g, i, j)
    if g > tspec.height:  # pass on only the top nodes that reach a source
        up = [e for e in up if e[1] is not None]
    return up, {k: v for k, v in own.items() if v is not None}


def _sources_merge_task(tspec, store, k, i, j, *kids):
    up, own = sources_merge(tspec, _LazyNodes(store), k, i, j, *kids)
    if k > tspec.height:  # pass on only the top nodes that reach a source
        up = [e for e in up if e[1] is not None]
    return up, {key: v for key, v in own.items() if v is not None}


def _collect_own(*owns):
    """The source labels every node of the sources' walk kept, in one dict."""
    out = {}
    for own in owns:
        out.update(own)
    return out


def _top_device(tspec, store, lstore, labels):
    """The top at height 0 solved on the device level, its labels kept there or written; None
    when it does not fit or a start cost is negative (the host's Dijkstra serves)."""
    from terrain.backend import get_backend
    t0 = time.perf_counter()
    be = get_backend("gpu")
    slots, n = _group_slots(store)
    B = store.bpad(0)
    g = store.g
    sv, sd, sa, sh = [], [], [], []
    for (k, i, j), lab in labels.items():
        if k != 0 or lab is None or not lab[0].size:
            continue
        start, region = slots[(i >> g, j >> g)]
        slot = start + (i - region[0]) * (region[3] - region[2]) + j - region[2]
        sv.append(slot * B + np.arange(lab[0].size, dtype=np.int64))
        sd.append(lab[0])
        sa.append(lab[1])
        sh.append(lab[2])
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
    seeds = (cat(sv, np.int64), cat(sd, np.float64), cat(sa, np.int32), cat(sh, np.int32))
    if np.any(np.signbit(seeds[1][seeds[1] < np.inf])):
        return None
    held = _drop_level(store.path)  # this task owns it now: freed when the solve is done
    if held is None and not _device_level_fits(tspec, store, "gpu"):
        return None
    level, vertices = held if held is not None else (DeviceLevel(be, n, B), 0)
    held = None
    read = 0.0
    if len(level.filled) < len(slots):  # groups of other processes: their writes done first
        here_and_on_every_worker(_wait_writes, str(store.path))
    for key, (start, region) in slots.items():
        if key not in level.filled:
            t = time.perf_counter()
            vertices += store.read_group_to(level, start, region)
            read += time.perf_counter() - t
    t = time.perf_counter()
    (d, a, h), rounds = level_solve_gpu(be, tspec, level, seeds)
    solve = time.perf_counter() - t
    del level
    t = time.perf_counter()
    if _single_process():  # phase 3 runs here: it reads the labels from the device
        with _LEVELS_LOCK:
            _DEVICE_LABELS[lstore.path] = (slots, B, (d, a, h))
        write_s = 0.0
    else:
        def write(start, region):  # one group's labels: one chunk of each array
            ni, nj = region[1] - region[0], region[3] - region[2]
            s = slice(start * B, (start + ni * nj) * B)
            sl = (slice(region[0], region[1]), slice(region[2], region[3]))
            with _HOST_BANDS:
                for name, lab in (("d", d), ("a", a), ("h", h)):
                    lstore.array(0, name)[sl] = lab[s].get().reshape(ni, nj, B)
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(HOST_BANDS) as pool:  # compressed in parallel
            list(pool.map(lambda item: write(*item), slots.values()))
        write_s = time.perf_counter() - t
    return {"pages": 1, "page_loads": 1, "page_bytes": n * B * B * 12, "vertices": vertices,
            "read_seconds": read, "solve_seconds": solve, "gpu_rounds": rounds,
            "write_seconds": write_s, "device_level": True,
            "seconds": time.perf_counter() - t0}


def _top(tspec, store, lstore, labels, cache_bytes, backend=None):
    """The top Dijkstra on the level-``H`` nodes; writes their final labels; returns its stats."""
    t0 = time.perf_counter()
    H = tspec.height
    nr, nc = store.shape(H)
    if H == tspec.levels - 1:  # the root has its matrix and no boundary: nothing above
        return {"pages": 0, "page_loads": 0, "page_bytes": 0, "vertices": 0}
    if backend == "gpu" and H == 0 and tspec.tile <= MAX_GPU_TILE:
        stats = _top_device(tspec, store, lstore, labels)
        if stats is not None:
            return stats
    whole = (slice(0, nr), slice(0, nc))
    count = np.asarray(store.array(H, "count")[whole]).reshape(-1)
    ids = np.asarray(store.array(H, "ids")[whole])
    cell = ids >= 0  # (nr, nc, B): node-major, each node's cells first
    tops = FlatBoundaries(count, ids[cell], np.asarray(store.array(H, "z")[whole])[cell],
                          np.asarray(store.array(H, "f")[whole])[cell])
    del ids
    known = {key[1] * nc + key[2]: lab for key, lab in labels.items() if key[0] == H}
    B = store.bpad(H)
    node = np.arange(nr * nc, dtype=np.int64)
    if backend == "gpu" and nr * nc * B * B * 12 <= cache_bytes:
        # the whole level fits: one read (zarr reads its chunks concurrently) as a single
        # page, solved on the device (on the CPU, page by page is as fast and holds less)
        shape = (nr * nc, B, B)

        def load(p):  # the two arrays in two threads (decompression releases the GIL)
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(2) as pool:
                return tuple(pool.map(lambda name: np.asarray(store.array(H, name)[:])
                                      .reshape(shape), ("dist", "hops")))
        final, stats = top_labels_paged(tspec, tops, known, np.zeros(nr * nc, np.int64), node,
                                        load, shape, cache_bytes, backend=backend)
    else:
        m = store.page(H)
        npc, npr = -(-nc // m), -(-nr // m)
        i, j = node // nc, node % nc
        page_of = (i // m) * npc + j // m
        page_loc = (i % m) * m + j % m

        def around(p):  # the 8 pages around page p
            pi, pj = divmod(p, npc)
            return [(pi + a) * npc + pj + b for a in (-1, 0, 1) for b in (-1, 0, 1)
                    if (a or b) and 0 <= pi + a < npr and 0 <= pj + b < npc]
        final, stats = top_labels_paged(
            tspec, tops, known, page_of, page_loc, lambda p: store.load_page(H, p),
            (m * m, B, B), cache_bytes, neighbours=around)
    for name, lab, fill in zip(("d", "a", "h"), final, (np.inf, INT_INF, INT_INF)):
        out = np.full(cell.shape, fill, lab.dtype)
        out[cell] = lab
        lstore.array(H, name)[whole] = out
    stats["seconds"] = time.perf_counter() - t0
    return stats


def _own_labels(store, lstore, k, region):
    """Final labels of the level-``k`` nodes of ``region`` and their meta (ids)."""
    meta = store.meta(k, region)
    lab = lstore.read_labels(k, region, {key: nb.size for key, nb in meta.items()})
    return meta, lab


def _node_down(tspec, store, labels, meta, lab, k, region):
    """Children's final labels of the level-``k`` nodes in ``region``."""
    kids_all = store.meta(k - 1, (2 * region[0], 2 * region[1], 2 * region[2],
                                  2 * region[3]), matrices=True)
    out = {}
    for key, nb in meta.items():
        _, i, j = key
        kids = [c if c in kids_all else None for c in _child_keys(store, k, i, j)]
        down = node_down(tspec, nb, lab[key], [None if c is None else kids_all[c]
                                                for c in kids],
                         [None if c is None else labels.get(c) for c in kids])
        for c, d in zip(kids, down):
            if c is not None:  # the child's ids stay, its matrices go
                out[c] = (replace(kids_all[c], dist=None, hops=None), d)
    return out


def _down_node_task(tspec, store, lstore, labels, top_cfg, ready, k, i, j, incoming):
    """Top-down step of node ``(k, i, j)`` above the groups (the root runs the top)."""
    del ready
    stats = _top(tspec, store, lstore, labels, *top_cfg) if incoming is None else incoming
    if k <= tspec.height:
        meta, lab = _own_labels(store, lstore, k, (i, i + 1, j, j + 1))
        kids = _node_down(tspec, store, labels, meta, lab, k, (i, i + 1, j, j + 1))
        for key, (_, d) in kids.items():
            lstore.write_labels(k - 1, (key[1], key[1] + 1, key[2], key[2] + 1), {key: d})
    return (stats,) * 4


def _down_leaf_task(tspec, store, lstore, labels, top_cfg, ready, g, i, j, incoming):
    """Top-down inside group ``(g, i, j)`` to its tiles' final labels (``sssp_labels/L0``)."""
    del ready
    stats = _top(tspec, store, lstore, labels, *top_cfg) if incoming is None else incoming
    s = min(tspec.height, g)
    if s == 0:  # the top wrote the tiles' final labels: nothing to split
        return stats
    meta, lab = _own_labels(store, lstore, s, _group_region(store, s, i, j))
    if s == tspec.levels - 1 and s == tspec.height:
        lab = {key: (np.zeros(0), np.zeros(0, np.int32), np.zeros(0, np.int32))
               for key in meta}  # the root: no boundary
    for k in range(s, 0, -1):
        kids = _node_down(tspec, store, labels, meta, lab, k,
                          _group_region(store, k, i, j))
        meta = {key: nb for key, (nb, _) in kids.items()}
        lab = {key: d for key, (_, d) in kids.items()}
    if s > 0:
        lstore.write_labels(0, _group_region(store, 0, i, j), lab)
    return stats


def _ring_seeds(store, lstore, region):
    """``(ids, (d, a, h))``: the boundary cells of ``region``'s tiles and their final labels."""
    sl = store._clip(0, region)
    ids = np.asarray(store.array(0, "ids")[sl])
    cell = ids >= 0
    with _LEVELS_LOCK:
        held = _DEVICE_LABELS.get(lstore.path)
    if held is None:
        return ids[cell], tuple(np.asarray(lstore.array(0, n)[sl])[cell]
                                for n in ("d", "a", "h"))
    slots, B, labs = held
    (i0, i1), (j0, j1) = (sl[0].start, sl[0].stop), (sl[1].start, sl[1].stop)
    out = [np.empty((i1 - i0, j1 - j0, B), dt) for dt in (np.float64, np.int32, np.int32)]
    for start, reg in slots.values():  # the groups the region overlaps, row bands of each
        a0, a1, b0, b1 = max(i0, reg[0]), min(i1, reg[1]), max(j0, reg[2]), min(j1, reg[3])
        if a0 >= a1 or b0 >= b1:
            continue
        nj = reg[3] - reg[2]
        s0, s1 = (start + (a0 - reg[0]) * nj) * B, (start + (a1 - reg[0]) * nj) * B
        for o, lab in zip(out, labs):
            part = lab[s0:s1].get().reshape(a1 - a0, nj, B)
            o[a0 - i0:a1 - i0, b0 - j0:b1 - j0] = part[:, b0 - reg[2]:b1 - reg[2]]
    return ids[cell], tuple(o[cell] for o in out)


def _fill_task(tspec, store, lstore, reader, backend, srcs, out_path, max_cost,
               write_friction, group_level, shard, prepared, *downs):
    """Phase 3 on the groups of one output shard, then one write of the shard."""
    with _GROUP_SLOTS if backend == "gpu" else nullcontext():
        return _fill_shard(tspec, store, lstore, reader, backend, srcs, out_path, max_cost,
                           write_friction, group_level, shard)


def _fill_shard(tspec, store, lstore, reader, backend, srcs, out_path, max_cost,
                write_friction, group_level, shard):
    t0 = time.perf_counter()
    g = group_level
    r0, r1, c0, c1 = shard
    d = np.full((r1 - r0, c1 - c0), np.nan)
    a = np.full((r1 - r0, c1 - c0), -1, np.int32)
    b = np.full((r1 - r0, c1 - c0), 255, np.uint8)
    side = tspec.tile << g
    for gi in range(r0 // side, -(-r1 // side)):
        for gj in range(c0 // side, -(-c1 // side)):
            reg = _group_region(store, 0, gi, gj)
            ring = (reg[0] - 1, reg[1] + 1, reg[2] - 1, reg[3] + 1)
            win, gd, ga, gb, _ = fill_group(tspec, reader, backend, None, None, srcs, g,
                                            gi, gj, seeds=_ring_seeds(store, lstore, ring))
            x0, x1, y0, y1 = max(win[0], r0), min(win[1], r1), max(win[2], c0), min(win[3], c1)
            src = (slice(x0 - win[0], x1 - win[0]), slice(y0 - win[2], y1 - win[2]))
            dst = (slice(x0 - r0, x1 - r0), slice(y0 - c0, y1 - c0))
            d[dst], a[dst], b[dst] = gd[src], ga[src], gb[src]
    if max_cost is not None:
        far = d > max_cost
        d[far], a[far], b[far] = np.nan, -1, 255
    t1 = time.perf_counter()
    group = open_group(out_path, mode="r+")
    sl = (slice(r0, r1), slice(c0, c1))
    group["distance"][sl] = d
    group["allocation"][sl] = a
    group["backlink"][sl] = b
    if write_friction:
        group["friction"][sl] = reader(shard)[1]
    return window_stats(d, t0, t1)


def _release_level(path):
    """The end of a run in this process: index written, device level and labels dropped."""
    _wait_writes(path)
    _drop_level(path)
    with _LEVELS_LOCK:
        _DEVICE_LABELS.pop(str(path), None)


def _finish(out_path, fills, meta, tops, token=None):
    # groups written by other processes, a level left on a device whose process did not
    # run the top: every process ends the run
    here_and_on_every_worker(_release_level, str(out_path))
    stages = stage_seconds(token)
    top = next((t for t in tops if isinstance(t, dict)), {})
    if top.get("seconds"):  # the root's down task ran the top Dijkstra: count it apart
        stages["top"] = top["seconds"]
        down = "down-apply" if "down-apply" in stages and "down-split" not in stages \
            else "down-split"
        stages[down] = stages.get(down, 0.0) - top["seconds"]
    summary = dict(meta)
    summary.update({
        "stage_seconds": {k: round(v, 3) for k, v in sorted(stages.items())}, **reached(fills),
        "solve_seconds": round(sum(f["solve"] for f in fills), 6), "read_seconds": 0.0,
        "write_seconds": round(sum(f["write"] for f in fills), 6),
        "queue": "tournament tree", "device": meta.get("backend"),
        "top_vertices": top.get("vertices", 0), "top_pages": top.get("pages", 0),
        "top_page_loads": top.get("page_loads", 0),
        "top_seconds": round(top.get("seconds", 0.0), 3),
        "top_split": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in top.items()
                      if k in ("read_seconds", "arcs_seconds", "solve_seconds", "gpu_rounds",
                               "write_seconds", "device_level")}})
    remove_tree(inside(out_path, LABELS_GROUP))  # the run's scratch
    return summary


def build_cost_distance_tiled(dem_path, out_path, spec, sources, start_costs, backend="cpu",
                              upstream=None, geo=None, friction_store=None):
    """The whole tiled ``cost-distance`` graph: ``cost-prepare``, then the walks. ``spec``:
    :func:`tiled_spec`'s. A Delayed summary."""
    import dask

    token = dask.base.tokenize(str(dem_path), str(out_path), time.time_ns())
    graph = TaskGraph("cost", token, timed=_TIMED)
    call = graph.call
    prepared = call(prepare_layers, out_path, spec["shape"], spec["tile"], geo or {},
                    friction_store is not None, upstream, key=("prepare",))
    reuse = spec.get("reuse")
    tspec = solve_spec(spec)
    group_tiles = max(1, int(spec["group_side"]) // tspec.tile)
    plan = QuadtreePlan.build(tspec.shape, tspec.tile, group_tiles)
    g = plan.group_level
    reader = StoreReader(dem_path, friction_store, spec.get("friction_path") or "")
    srcs = source_arrays(sources, start_costs)
    index_tasks = len(plan.groups) + sum(len(v) for v in plan.levels.values()) + 1
    layout = {"page_bytes": GPU_PAGE_BYTES, "sharded": False} if backend == "gpu" else {}
    index = (IndexStore(out_path, tspec, g, **layout) if reuse is None
             else IndexStore(reuse, tspec, g, mode="r"))
    lstore = IndexStore(out_path, tspec, g, labels=True)
    made = call(_make_stores, index if reuse is None else None, lstore, spec, tspec.height,
                prepared, key=("index-make",))
    if reuse is None:
        ready, _ = walk_up(plan, (_index_leaf_task, tspec, reader, backend, index, made),
                           (_index_merge_task, tspec, index), call,
                           names=("index-leaf", "index-merge"))
        if backend != "gpu":  # the sources start once the checkpoint is written (its name
            # is the run's: the token of a run differs from its resumed run's)
            ready = graph.add(f"{INDEX_DONE}-{token}", (), run_checkpointed,
                              checkpoint_at(checkpoint_folder(out_path), INDEX_DONE),
                              _index_written, ready)
    else:
        ready = [call(_index_check_task, tspec, reader, index, made, g, i, j,
                      key=("index-check", i, j)) for (i, j) in plan.groups]
    name = spec.get("input", "")
    _, rest = walk_up(plan, (_sources_leaf_task, tspec, index, reader, srcs, name, ready),
                      (_sources_merge_task, tspec, index), call, names=("src-leaf", "src-merge"))
    labels = call(_collect_own, *(own for (own,) in rest.values()), key=("labels",))
    top_cfg = (top_cache_bytes(backend), backend)  # the top Dijkstra's page cache and device
    _, out = walk_down(plan, (_down_node_task, tspec, index, lstore, labels, top_cfg, made),
                       (_down_leaf_task, tspec, index, lstore, labels, top_cfg, made), call,
                       node_nout=4, names=("down-split", "down-apply"))
    max_cost = spec.get("max_cost")
    R, C = tspec.shape
    sh = int(spec.get("shard_side") or spec["group_side"])
    side = tspec.tile << g
    fills = []
    for r in range(0, R, sh):
        for c in range(0, C, sh):
            shard = (r, min(r + sh, R), c, min(c + sh, C))
            gi0, gi1 = max(r // side - 1, 0), -(-shard[1] // side) + 1
            gj0, gj1 = max(c // side - 1, 0), -(-shard[3] // side) + 1
            deps = [out[(g, a, b)] for a in range(gi0, gi1) for b in range(gj0, gj1)
                    if (g, a, b) in out]
            fills.append(call(_fill_task, tspec, index, lstore, reader, backend, srcs,
                              out_path, max_cost, friction_store is not None, g, shard,
                              prepared, *deps, key=("fill", r // sh, c // sh)))
    meta = summary_base(spec, backend)
    resumed = bool(spec.get("resumed_index"))
    meta.update({"tile_sssp": tspec.tile, "height": tspec.height, "groups": len(plan.groups),
                 "group_side": tspec.tile << g,
                 "index_tasks": index_tasks if reuse is None else 0,
                 "reused_tasks": 0 if reuse is None else index_tasks,
                 "skipped_phases": [] if reuse is None else ["phase 1", "phase 2 upward"],
                 "reuse": None if reuse is None or resumed else str(reuse),
                 "resumed_index": resumed, "sizing": spec.get("sizing")})
    tops = [out[(g, 0, 0)]] if (g, 0, 0) in out else []
    return graph.delayed(call(_finish, out_path, fills, meta, tops, token,
                              key=("tiled-finish",)))


def resume_index(spec, partial, tile_sssp=None, max_height=None, backend=None):
    """For a resumed run: when the killed CPU run's index is whole in the partial output
    ``partial`` (its :data:`INDEX_DONE` checkpoint), complete ``spec`` to take it as
    ``--reuse`` takes an earlier store's (its tile and group side; phases 1 and 2 are not run
    again, the stored cells checked against the raster) and return True; else False."""
    if checkpoint_file(INDEX_DONE) not in kept_checkpoints(checkpoint_folder(partial)):
        return False
    tiled_spec(spec, tile_sssp, max_height, reuse=partial, backend=backend)
    spec["resumed_index"] = True
    return True


def tiled_spec(spec, tile_sssp=None, max_height=None, reuse=None, backend=None):
    """Complete the command's ``spec`` for the tiled path (in place): SSSP tile (default: the
    reused store's, else 16), height cap and group side: a reused store's own (checked by
    :func:`check_reuse_store`); on the CPU a shard, at most :data:`GROUP_SIDE`; a fresh GPU
    run's from the device (:func:`gpu_sizing`). ``spec["sizing"]`` says which.
    """
    stored = {} if reuse is None else _index_attrs(reuse)  # its tile and group side
    spec["tile_sssp"] = int((stored.get("tile") if tile_sssp is None else tile_sssp) or 16)
    spec["max_height"] = None if max_height is None else int(max_height)
    spec["shard_side"] = int(spec["tile"]) * int(spec["tiles_per_shard"])
    spec["group_side"] = min(spec["shard_side"], GROUP_SIDE)
    sizing = {"by": "cpu", "group_side": spec["group_side"]}
    solve_spec(spec)  # checks the values before any sizing
    if reuse is not None and isinstance(stored.get("group"), int):
        spec["group_side"] = stored["group"]
        sizing = {"by": "reused store", "group_side": spec["group_side"]}
    elif reuse is None and getattr(backend, "name", backend) == "gpu":
        sizing = gpu_sizing(spec, backend)
        spec["group_side"] = sizing["group_side"]
        if spec["max_height"] is None:
            spec["max_height"] = sizing["height"]
    spec["reuse"] = None
    if reuse is not None:
        attrs = check_reuse_store(reuse, spec)
        spec["max_height"] = int(attrs["height"])
        # a store at a URL as a Location: the tasks open it with its options
        spec["reuse"] = reuse if is_remote(reuse) else str(reuse)
    spec["sizing"] = sizing
    return spec


#: phase 1's scratch per launch (``boundary_pairs_gpu``'s bound: larger groups run in chunks)
PHASE1_SCRATCH = 4 << 30


def _device_facts(backend):
    """``(resident threads, free bytes)`` of the backend's device."""
    from terrain.backend import free_device_bytes, get_backend
    be = get_backend(backend)
    cp = be.xp
    dev = cp.cuda.Device()
    try:
        props = cp.cuda.runtime.getDeviceProperties(dev.id)
        threads = int(props["multiProcessorCount"]) * int(props["maxThreadsPerMultiProcessor"])
    except (KeyError, AttributeError, TypeError):
        a = dev.attributes
        threads = int(a["MultiProcessorCount"]) * int(a["MaxThreadsPerMultiProcessor"])
    return threads, free_device_bytes(be)


def gpu_sizing(spec, backend="gpu", device=None, threads=None):
    """Group side and height cap of a fresh ``--backend gpu`` run, from the device.

    ``device``: ``(resident threads, free bytes)`` instead of asking the device;
    ``threads``: the task threads (default: the cores). Returns a dict for the summary.
    The rule (launch fills the resident threads; height 0 when the level of tiles fits 70 %
    of the free memory): docs/cost-distance-tiled.md.

    >>> s = {"shape": (4096, 4096), "tile_sssp": 16, "connectivity": 8, "cost": "absdiff",
    ...      "cellsize": (1.0, 1.0), "max_height": None, "shard_side": 2048}
    >>> g = gpu_sizing(s, device=(270336, 70 << 30), threads=16)
    >>> g["group_side"], g["height"], g["launch_threads"], g["top_on_device"]
    (2048, 0, 4194304, True)
    >>> g = gpu_sizing(s, device=(270336, 4 << 30), threads=16)
    >>> g["group_side"], g["height"]  # little memory: small groups, the top above the tiles
    (512, 1)
    """
    import os

    dev_threads, free = _device_facts(backend) if device is None else device
    threads = int(threads or os.cpu_count() or 1)
    T = int(spec["tile_sssp"])
    tspec = solve_spec(spec)
    B = IndexStore("", tspec, 0).bpad(0)
    fit = shared_pass(T, tspec.codes.size)  # phase 1 in shared memory: no scratch
    per_tile = 0 if fit else B * (T * T * 16 + 2 * tt_capacity(T * T) * 20)  # labels + tree
    nt_r, nt_c = tspec.tiles_shape
    R, C = tspec.shape
    top_bytes = nt_r * nt_c * B * B * 12
    level_bytes = DeviceLevel.nbytes(nt_r * nt_c, B, R * C)
    on_device = T <= MAX_GPU_TILE and level_bytes <= 0.7 * free  # the top where phase 1 ran
    avail = free - level_bytes if on_device else free

    def groups(side):
        return len(QuadtreePlan.build(tspec.shape, T, max(1, side // T)).groups)

    def group_bytes(side):  # scratch, inputs and (unless in the device level) matrices
        tiles = (side // T) ** 2
        return (min(tiles * per_tile, PHASE1_SCRATCH) + tiles * (8 * T * T + 16 * B)
                + (0 if on_device else tiles * B * B * 12))

    shard = int(spec["shard_side"])
    side = min(GROUP_SIDE, shard)
    while side < shard and (side // T) ** 2 * B < dev_threads:
        side *= 2
    while side > min(GROUP_SIDE, shard) and \
            min(threads, groups(side)) * group_bytes(side) > avail // 2:
        side //= 2
    height = 0 if on_device else default_max_height(tspec.tiles_shape, tile=T)
    tiles = (side // T) ** 2
    return {"by": "device", "group_side": side, "height": height,
            "launch_threads": tiles * fit[1] if fit else min(tiles, PHASE1_SCRATCH // per_tile) * B,
            "device_threads": dev_threads, "free_bytes": int(free),
            "top_matrix_bytes": int(top_bytes), "device_level_bytes": int(level_bytes),
            "top_on_device": bool(on_device)}
