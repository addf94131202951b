"""The tiled SSSP (:mod:`terrain.grid.sssp_tiled`) on an index kept in a Zarr store, for the
out-of-core pipeline (``pipelines/cost_distance_tiled.py``, which schedules these steps as
tasks): :class:`IndexStore` (the index's per-level node arrays, or a run's final boundary
labels), a group's phase 1 and its nodes' merges written to it, a reused index checked
against the raster, the top Dijkstra on its top level (paged on the host, or on the GPU with
the level of tiles kept on the device), the final labels split down to the tiles and phase
3's ring seeds.
Each backend's side comes from the table :func:`store_ops` picks (``TiledStoreCpuOps`` in
``_tiled_store.py``, ``TiledStoreGpuOps`` in ``_tiled_store_gpu.py``). Layout, tasks and
memory: docs/cost-distance-tiled.md.
"""

import time
from dataclasses import replace

import numpy as np

from ..backend import get_backend
from ..errors import InputError
from ._tiled_graphs import FlatBoundaries, TileBatch, top_labels_paged
from ._tiled_store import (BAND_BYTES, GPU_PAGE_BYTES, HOST_BANDS, INDEX_GROUP, LABELS_GROUP,
                           PAGE_BYTES, TOP_CACHE_BYTES, IndexStore, StoredNodes,
                           TiledStoreCpuOps)
from ._tournament import INT_INF
from .sssp_tiled import index_leaf, node_boundary, node_down

__all__ = ["IndexStore", "StoredNodes", "store_ops", "write_index_leaf", "write_index_node",
           "check_index_group", "solve_stored_top", "stored_labels", "children_labels",
           "ring_seeds", "release_run", "INDEX_GROUP", "LABELS_GROUP", "PAGE_BYTES",
           "TOP_CACHE_BYTES", "GPU_PAGE_BYTES", "BAND_BYTES", "HOST_BANDS"]


def store_ops(backend=None):
    """The stored index's table of ``backend``: ``TiledStoreCpuOps`` or ``TiledStoreGpuOps``
    (:meth:`terrain.backend.Backend.kernel_table`).

    >>> store_ops("cpu").top_cache_bytes() == TOP_CACHE_BYTES
    True
    """
    def gpu():
        from ._tiled_store_gpu import TiledStoreGpuOps
        return TiledStoreGpuOps
    return get_backend(backend).kernel_table(lambda: TiledStoreCpuOps, gpu)


def write_index_leaf(tspec, reader, backend, store, g, i, j):
    """Phase 1 of group ``(g, i, j)`` and the group's own levels up to the height cap,
    written to the index ``store``: on the GPU at height 0 into the run's device level (its
    matrices written in the background), else level by level from the host."""
    if store_ops(backend).index_leaf(tspec, reader, store, g, i, j):
        return
    written = set()

    def emit(k, nodes):  # level by level: at most two levels of the group in memory
        if k <= tspec.height:
            region = store.group_region(k, i, j)
            if isinstance(nodes, TileBatch):  # the tiles: the batch's arrays as they are
                store.write_batch(region, nodes)
            else:
                store.write_nodes(k, region, nodes)
            written.add(k)
    index_leaf(tspec, reader, backend, g, i, j, emit=emit)
    for k in range(min(g, tspec.height) + 1):  # levels of empty nodes (none in the group)
        if k not in written:
            store.write_nodes(k, store.group_region(k, i, j), {})


def write_index_node(tspec, store, k, i, j):
    """Node ``(k, i, j)``'s matrix from its four children's in the index ``store``, written
    there (nodes above the height cap have none: the top solves them)."""
    if k <= tspec.height:
        children = [None if c is None else store.node(c) for c in store.child_keys(k, i, j)]
        store.write_nodes(k, (i, i + 1, j, j + 1),
                          {(k, i, j): node_boundary(tspec, k, i, j, children)})


def check_index_group(tspec, reader, store, g, i, j):
    """:class:`InputError` unless the boundary cells that the index ``store`` holds for group
    ``(g, i, j)`` carry the elevations and frictions ``reader`` gives (an index reused for
    another raster would give another raster's distances)."""
    window = tspec.window(g, i, j)
    z, f = reader(window)
    r0, c0 = window[0], window[2]
    cols = tspec.shape[1]
    sl = store.clip(0, store.group_region(0, i, j))
    ids = np.asarray(store.array(0, "ids")[sl])  # all the group's tiles at once (-1: padding)
    cell = ids >= 0
    rr, cc = ids[cell] // cols - r0, ids[cell] % cols - c0
    if not (np.array_equal(z[rr, cc], np.asarray(store.array(0, "z")[sl])[cell], equal_nan=True)
            and np.array_equal(f[rr, cc], np.asarray(store.array(0, "f")[sl])[cell],
                               equal_nan=True)):
        raise InputError(f"{store.path}: the stored index does not match this raster "
                         f"(group {i},{j})")


def stored_labels(store, lstore, k, region):
    """``(meta, labels)``: the level-``k`` nodes of ``region`` in the index ``store`` (their
    ids) and their final labels in the labels store ``lstore``."""
    meta = store.meta(k, region)
    lab = lstore.read_labels(k, region, {key: nb.size for key, nb in meta.items()})
    return meta, lab


def children_labels(tspec, store, labels, meta, lab, k, region):
    """``{child key: (child meta, its final labels)}`` for the level-``k`` nodes of
    ``region`` (``meta``, ``lab``: :func:`stored_labels`); ``labels``: the source labels
    of the nodes that reach a source."""
    kids_all = store.meta(k - 1, (2 * region[0], 2 * region[1], 2 * region[2],
                                  2 * region[3]), matrices=True)
    out = {}
    for key, nb in meta.items():
        _, i, j = key
        kids = [c if c in kids_all else None for c in store.child_keys(k, i, j)]
        down = node_down(tspec, nb, lab[key], [None if c is None else kids_all[c]
                                                for c in kids],
                         [None if c is None else labels.get(c) for c in kids])
        for c, d in zip(kids, down):
            if c is not None:  # the child's ids stay, its matrices go
                out[c] = (replace(kids_all[c], dist=None, hops=None), d)
    return out


def _here(fn, *args):
    return [fn(*args)]


def _one_process():
    return True


def solve_stored_top(tspec, store, lstore, labels, cache_bytes, backend,
                     everywhere=_here, single_process=_one_process):
    """The top Dijkstra on the level-``H`` nodes of the index ``store``; writes their final
    labels to ``lstore`` (on the GPU's device level they may stay on the device, for
    :func:`ring_seeds`); returns its stats.

    Parameters
    ----------
    labels : dict
        ``{(k, i, j): (d, a, h)}``: the source labels of the nodes that reach a source.
    cache_bytes : int
        The page cache (``store_ops(backend).top_cache_bytes()``).
    everywhere : callable
        ``everywhere(fn, *args)`` runs ``fn(*args)`` in every process of the run (default:
        this one): the device top waits there for the index writes of the other processes.
    single_process : callable
        Whether every task of the run runs in this process (default True): only then do the
        device top's labels stay on the device.
    """
    t0 = time.perf_counter()
    H = tspec.height
    nr, nc = store.shape(H)
    if H == tspec.levels - 1:  # the root has its matrix and no boundary: nothing above
        return {"pages": 0, "page_loads": 0, "page_bytes": 0, "vertices": 0}
    ops = store_ops(backend)
    stats = ops.top(tspec, store, lstore, labels, everywhere, single_process)
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
    if ops.top_in_one_page(nr * nc * B * B * 12, cache_bytes):
        # the whole level fits: one read as a single page, solved on the device
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


def ring_seeds(store, lstore, region, backend):
    """``(ids, (d, a, h))``: the boundary cells of ``region``'s tiles and their final labels
    (from the labels store, or the device where the top's labels stayed there)."""
    sl = store.clip(0, region)
    ids = np.asarray(store.array(0, "ids")[sl])
    cell = ids >= 0
    labs = store_ops(backend).ring_labels(lstore, sl)
    if labs is None:
        labs = [np.asarray(lstore.array(0, n)[sl]) for n in ("d", "a", "h")]
    return ids[cell], tuple(lab[cell] for lab in labs)


def release_run(path, backend):
    """The end of run store ``path`` in this process: what the backend's table holds of it
    (on the GPU: the index's writes waited for, the device level and labels dropped)."""
    store_ops(backend).release(path)
