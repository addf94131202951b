"""The stored index's GPU side (:class:`TiledStoreGpuOps`; CPU twin ``TiledStoreCpuOps`` in
``_tiled_store.py``) and this process's device state of a run: at height 0 the level of
tiles stays on the device (:class:`~terrain.grid._tiled_gpu.DeviceLevel`, filled by phase 1,
its matrices written to the index in the background), the top is solved there
(:func:`~terrain.grid._tiled_gpu.level_solve_gpu`) and, where every task runs in this
process, phase 3 reads the top's labels from the device. docs/cost-distance-tiled.md.
"""

import threading
import time

import numpy as np

from ._tiled_gpu import MAX_GPU_TILE, DeviceLevel, level_solve_gpu
from ._tiled_graphs import tile_batch
from ._tiled_store import GPU_PAGE_BYTES, HOST_BANDS, TOP_CACHE_BYTES, host_bands

__all__ = ["TiledStoreGpuOps", "wait_writes"]

#: groups whose host arrays (a window read, phase 1's batch, phase 3's windows and a shard's
#: layers: a few hundred MB for 2048^2) are held at once; their device work runs one launch
#: after another anyway, so more threads would only add memory
_GROUP_SLOTS = threading.BoundedSemaphore(4)

#: index store path -> [DeviceLevel, vertices so far] of a GPU run at height 0 (this process's)
_LEVELS = {}
_LEVELS_LOCK = threading.Lock()
#: labels store path -> (group slots, B, (d, a, h)): the top's labels on the device for phase 3
_DEVICE_LABELS = {}
_WRITES = {}     # index store path -> {group: future of its matrices' write} (this process's)
_WRITER = []     # the process's writer pool, made on first use


def _device_level_fits(be, tspec, store):
    """Whether the level of tiles fits 70 % of the free device memory (height 0)."""
    if tspec.height != 0 or tspec.tile > MAX_GPU_TILE or tspec.levels == 1:
        return False
    _, n = store.group_slots()
    R, C = tspec.shape
    return DeviceLevel.nbytes(n, store.bpad(0), R * C) <= 0.7 * be.free_bytes()


def _device_level(be, store, tspec):
    """This run's level of tiles on the device (made by the first group task), or None."""
    with _LEVELS_LOCK:
        if store.path not in _LEVELS:
            if not _device_level_fits(be, tspec, store):
                return None
            _LEVELS[store.path] = [DeviceLevel(be, store.group_slots()[1], store.bpad(0)), 0]
        return _LEVELS[store.path][0]


def _drop_level(path):
    """Free this process's device level of run store ``path`` (if any)."""
    with _LEVELS_LOCK:
        return _LEVELS.pop(str(path), None)


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


def wait_writes(path, groups=None):
    """Wait for this process's matrix writes of ``path`` (of ``groups``, else all, forgotten)."""
    with _LEVELS_LOCK:
        pending = _WRITES.get(str(path), {})
        if groups is None:
            futs = list(_WRITES.pop(str(path), {}).values())
        else:
            futs = [pending[k] for k in groups if k in pending]
    for fut in futs:
        fut.result()


def _index_leaf_device(be, tspec, reader, store, level, g, i, j):
    """Phase 1 of group ``(g, i, j)`` into the device ``level``; the index written in the
    background."""
    slots, _ = store.group_slots()
    start, region = slots[(i, j)]
    window = tspec.window(g, i, j)
    n = (region[1] - region[0]) * (region[3] - region[2])
    with _GROUP_SLOTS:
        z, f = reader(window)
        batch = tile_batch(tspec, z, f, window, be, width=store.bpad(0),
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


def _top_device(be, tspec, store, lstore, labels, everywhere, single_process):
    """The top at height 0 solved on the device level, its labels kept there or written; None
    when it does not fit or a start cost is negative (the host's Dijkstra serves)."""
    t0 = time.perf_counter()
    slots, n = store.group_slots()
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
    if held is None and not _device_level_fits(be, tspec, store):
        return None
    level, vertices = held if held is not None else (DeviceLevel(be, n, B), 0)
    held = None
    read = 0.0
    if len(level.filled) < len(slots):  # groups of other processes: their writes done first
        everywhere(wait_writes, str(store.path))
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
    if single_process():  # phase 3 runs here: it reads the labels from the device
        with _LEVELS_LOCK:
            _DEVICE_LABELS[lstore.path] = (slots, B, (d, a, h))
        write_s = 0.0
    else:
        def write(start, region):  # one group's labels: one chunk of each array
            ni, nj = region[1] - region[0], region[3] - region[2]
            s = slice(start * B, (start + ni * nj) * B)
            sl = (slice(region[0], region[1]), slice(region[2], region[3]))
            with host_bands:
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


class TiledStoreGpuOps:
    """The GPU side of the stored index's table (twin: ``TiledStoreCpuOps``)."""

    name = "gpu"
    #: :class:`~terrain.grid._tiled_store.IndexStore`'s layout arguments: larger pages,
    #: unsharded (written and read band by band between the device and the store)
    index_layout = {"page_bytes": GPU_PAGE_BYTES, "sharded": False}

    def __init__(self, be):
        self.be = be

    def top_cache_bytes(self):
        """The top Dijkstra's page cache: 1/16 of the memory this process may still take
        (a cgroup's or an address-space limit's share, not the host's), from
        :data:`~terrain.grid._tiled_store.TOP_CACHE_BYTES` up to 8 GB, so that a level's
        matrices are read in one go."""
        from ..io import available_memory
        return int(min(max(TOP_CACHE_BYTES, available_memory() // 16), 8 << 30))

    def held_groups(self):
        """What a group task holds while it has a group's arrays: one of the process's
        group slots."""
        return _GROUP_SLOTS

    def index_leaf(self, tspec, reader, store, g, i, j):
        """Phase 1 of group ``(g, i, j)`` into this run's device level (height 0, a store
        being written, the level fits); False where the host writes the index instead."""
        if tspec.height == 0 and store.mode != "r":
            level = _device_level(self.be, store, tspec)
            if level is not None:
                _index_leaf_device(self.be, tspec, reader, store, level, g, i, j)
                return True
        return False

    def top(self, tspec, store, lstore, labels, everywhere, single_process):
        """The top at height 0 (tiles of at most :data:`MAX_GPU_TILE`) on the device level
        (:func:`_top_device`): its stats, or None where the host's paged Dijkstra serves."""
        if tspec.height == 0 and tspec.tile <= MAX_GPU_TILE:
            return _top_device(self.be, tspec, store, lstore, labels, everywhere,
                               single_process)
        return None

    def top_in_one_page(self, nbytes, cache_bytes):
        """Whether the top's ``nbytes`` of matrices are read as one page (zarr reads its
        chunks concurrently) and solved on the device: when the cache holds them."""
        return nbytes <= cache_bytes

    def ring_labels(self, lstore, sl):
        """The ``(d, a, h)`` arrays of level 0 over slices ``sl`` from the top's labels kept on
        the device (:func:`_top_device`), or None where they are in ``lstore``."""
        with _LEVELS_LOCK:
            held = _DEVICE_LABELS.get(lstore.path)
        if held is None:
            return None
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
        return out

    def wait_writes(self, path, groups=None):
        """Wait for this process's matrix writes of ``path`` (:func:`wait_writes`)."""
        wait_writes(path, groups)

    def release(self, path):
        """The end of a run in this process: index written, device level and labels
        dropped."""
        wait_writes(path)
        _drop_level(path)
        with _LEVELS_LOCK:
            _DEVICE_LABELS.pop(str(path), None)
