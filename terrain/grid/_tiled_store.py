"""The tiled SSSP's index in a Zarr store (:class:`IndexStore`: per-level node arrays, or a
run's final boundary labels) and :class:`TiledStoreCpuOps`, the CPU side of the stored
index's table (GPU twin in ``_tiled_store_gpu.py``: the level of tiles kept on the device).
Layout: docs/cost-distance-tiled.md.
"""

import threading
from contextlib import nullcontext

import numpy as np
import zarr

from ..io.remote import is_remote, store_for
from ._tiled_graphs import NodeBoundary
from ._tournament import INT_INF

__all__ = ["IndexStore", "StoredNodes", "TiledStoreCpuOps", "INDEX_GROUP", "LABELS_GROUP",
           "PAGE_BYTES", "TOP_CACHE_BYTES", "GPU_PAGE_BYTES", "BAND_BYTES", "HOST_BANDS",
           "host_bands"]

INDEX_GROUP = "sssp_index"
LABELS_GROUP = "sssp_labels"
PAGE_BYTES = 512 << 10  # a page of distance matrices (the top Dijkstra's cache unit), at most
TOP_CACHE_BYTES = 256 << 20
GPU_PAGE_BYTES = 8 << 20  # a GPU run's index chunks (unsharded: written and read in bands)
BAND_BYTES = 64 << 20     # matrices per band between the device and the store
#: bands between the device and the store in flight at once (the host's buffers for them)
HOST_BANDS = 6
host_bands = threading.BoundedSemaphore(HOST_BANDS)

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

    def group_region(self, k, i, j):
        """Level-``k`` node region ``(i0, i1, j0, j1)`` of group ``(g, i, j)``, clipped."""
        s = 1 << (self.g - k)
        nr, nc = self.shape(k)
        return i * s, min((i + 1) * s, nr), j * s, min((j + 1) * s, nc)

    def child_keys(self, k, i, j):
        """The keys of node ``(k, i, j)``'s four children (None: outside the grid)."""
        nr, nc = self.shape(k - 1)
        return [(k - 1, a, b) if a < nr and b < nc else None
                for a in (2 * i, 2 * i + 1) for b in (2 * j, 2 * j + 1)]

    def group_slots(self):
        """``({(i, j): (first slot, tile region)}, slots)``: the groups' tiles in a
        ``DeviceLevel``, group after group, each group's tiles row-major."""
        nr, nc = self.shape(self.g)
        out, start = {}, 0
        for i in range(nr):
            for j in range(nc):
                region = self.group_region(0, i, j)
                out[(i, j)] = (start, region)
                start += (region[1] - region[0]) * (region[3] - region[2])
        return out, start

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
            with host_bands:
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
        sl = self.clip(0, region)
        (i0, i1), (j0, j1) = ((x.start, x.stop) for x in sl)
        ni, nj = i1 - i0, j1 - j0
        B = self.bpad(0)
        count = np.asarray(self.array(0, "count")[sl]).reshape(-1)
        level.put(start, count, *(np.asarray(self.array(0, n)[sl]).reshape(-1, B)
                                  for n in ("ids", "z", "f")))
        rows = self._band_rows(nj, band_bytes)
        for r in range(0, ni, rows):
            r1 = min(r + rows, ni)
            with host_bands:
                s0, s1 = start + r * nj, start + r1 * nj
                for name, dst in (("dist", level.dist), ("hops", level.hops)):
                    part = np.asarray(self.array(0, name)[i0 + r:i0 + r1, j0:j1])
                    dst[s0:s1].set(np.ascontiguousarray(part.reshape((s1 - s0, B, B))))
                    del part
        return int(count.sum())

    def clip(self, k, region):
        """Slices of level ``k``'s node grid inside ``region``, clipped; None when empty."""
        nr, nc = self.shape(k)
        i0, i1 = max(region[0], 0), min(region[1], nr)
        j0, j1 = max(region[2], 0), min(region[3], nc)
        return (slice(i0, i1), slice(j0, j1)) if i1 > i0 and j1 > j0 else None

    def meta(self, k, region, matrices=False):
        """``{(k, i, j): NodeBoundary}`` of the nodes in ``region`` (matrices None unless asked)."""
        sl = self.clip(k, region)
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
        sl = self.clip(k, region)
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



class StoredNodes:
    """``nodes[key]`` read from an :class:`IndexStore` on first use (a task's view)."""

    def __init__(self, store):
        self.store, self.cache = store, {}

    def __getitem__(self, key):
        if key not in self.cache:
            self.cache[key] = self.store.node(key)
        return self.cache[key]


class TiledStoreCpuOps:
    """The CPU side of the stored index's table (twin: ``TiledStoreGpuOps``): the index in
    pages of :data:`PAGE_BYTES`, sharded per group, its top solved by the paged Dijkstra on
    the host with a cache of :data:`TOP_CACHE_BYTES`; no state kept between tasks."""

    name = "cpu"
    #: :class:`IndexStore`'s layout arguments
    index_layout = {}

    def top_cache_bytes(self):
        """The top Dijkstra's page cache."""
        return TOP_CACHE_BYTES

    def held_groups(self):
        """What a group task holds while it has a group's arrays: nothing to wait for."""
        return nullcontext()

    def index_leaf(self, tspec, reader, store, g, i, j):
        """Phase 1 of a group on the device: never (False: the host writes the index)."""
        return False

    def top(self, tspec, store, lstore, labels, everywhere, single_process):
        """The top on the device: never (None: the host's paged Dijkstra serves)."""
        return None

    def top_in_one_page(self, nbytes, cache_bytes):
        """Whether the top's ``nbytes`` of matrices are read as one page: no, page by page
        is as fast on the CPU and holds less."""
        return False

    def ring_labels(self, lstore, sl):
        """Final labels of level 0 over slices ``sl`` held in this process: none (None)."""
        return None

    def wait_writes(self, path, groups=None):
        """Index writes still running in this process: none."""

    def release(self, path):
        """What this process holds of run store ``path``: nothing."""
