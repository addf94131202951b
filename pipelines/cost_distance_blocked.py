"""``cost-distance --route blocked``: the blocked SSSP (:mod:`terrain.grid.sssp_blocked`)
out of core on the CPU, the in-core result bit for bit in memory bounded by blocks
(docs/cost-distance.md). The driver builds one small graph a round: ``cost-block{stage}`` per
block taken, which reads its DEM block (:class:`BlockReader`) and its state
(:class:`BlockFiles`, in a scratch folder beside the partial output, or under the prefix of
an output at a URL, removed at the end),
solves it and returns its ring; stage 1 gives distances, stage 2 labels. Then
``cost-block-write`` per output window (whole shards) writes the layers block by block, each
block's chunks encoded as they come (:class:`terrain.tiles.ShardWriter`): no task holds a
shard's layers, and the block cache keeps its budget to the end.
"""

import contextlib
import itertools
import os
import time
from pathlib import Path

import numpy as np

from terrain.backend import get_backend
from terrain.errors import InputError
from terrain.grid.cost_outputs import LAYERS
from terrain.grid.costs import arc_codes, arc_lengths, cost_model_code
from terrain.grid.sssp import check_max_cost, on_nodata
from terrain.grid.sssp_blocked import (BlockedDriver, BlockedSpec, BlockPlan, block_outputs,
                                       solve_block)
from terrain.io.remote import filesystem, is_remote, remove_tree, scratch_beside
from terrain.startup import fixed_mmap_threshold
from terrain.tiles import (ShardWriter, morton_encode, read_block, read_layout, read_window,
                           write_block, write_layout)
from terrain.tiles.store import tiles_per_shard

from .cost_distance_store import StoreReader, prepare_layers, reached, source_arrays, summary_base

__all__ = ["run_blocked", "blocked_spec", "block_side", "BlockFiles", "BlockReader",
           "MAX_BLOCK", "SCRATCH", "block_task_bytes", "cache_bytes"]

MAX_BLOCK = 2048
CACHE_BLOCKS = 16  # blocks the cache should hold (block_side shrinks blocks to fit them)
SCRATCH = ".blocked"
_TASK_BYTES_PER_CELL = 40  # window (24) + the state read and written (16) + heap headroom


def block_task_bytes(side):
    """Memory of one block task of ``side`` cells a side (window, state, heap)."""
    return _TASK_BYTES_PER_CELL * (side + 8) ** 2


def block_cache_bytes(side):
    """Memory of one block in the :class:`BlockCache` (elevation, friction, distance,
    label)."""
    return 24 * side * side


def block_side(tile, shard_side, memory_bytes=None, threads=1):
    """The block side: the shard side (at most :data:`MAX_BLOCK`, at least the store tile),
    halved while ``threads`` tasks and :data:`CACHE_BLOCKS` cached blocks need more than
    half of ``memory_bytes``.

    >>> block_side(512, 2048, 1.5e9, 2), block_side(16, 16)
    (1024, 16)
    """
    side = max(int(tile), min(int(shard_side), MAX_BLOCK))
    while side >= 2 * tile and side % (2 * tile) == 0 and memory_bytes is not None and \
            threads * block_task_bytes(side) + CACHE_BLOCKS * block_cache_bytes(side) > \
            memory_bytes / 2:
        side //= 2
    return max(side, 4)


def cache_bytes(side, memory_bytes, threads, bands_bytes=0):
    """The block cache's budget: 40 % of ``memory_bytes`` less the tasks' memory and the
    driver's bands; :data:`CACHE_BLOCKS` blocks without a budget."""
    if memory_bytes is None:
        return CACHE_BLOCKS * block_cache_bytes(side)
    return max(0, int(0.4 * memory_bytes - threads * block_task_bytes(side) - bands_bytes))


class BlockFiles:
    """Block states in a directory, one file per block and state (``d``: float64 distances,
    ``l``: int64 labels), Blosc LZ4, written beside and renamed; or under a prefix of an
    object store (``root`` a :class:`terrain.io.remote.Location`: what every worker of a
    cluster that shares nothing but the store reaches), one object each (a PUT replaces an
    object whole)."""

    DTYPES = {"d": np.float64, "l": np.int64}

    def __init__(self, root, shape):
        from numcodecs import Blosc
        self.root, self.shape = (root if is_remote(root) else Path(root)), shape
        self.codec = Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE)

    @staticmethod
    def _name(name, i, j):
        return f"{name}_{i}_{j}.blosc"

    def path(self, name, i, j):
        return self.root / self._name(name, i, j)

    def _object(self, name, i, j):
        """``(filesystem, key)`` of block ``(i, j)``'s state ``name`` in the object store."""
        fs, prefix = filesystem(self.root)
        return fs, f"{prefix.rstrip('/')}/{self._name(name, i, j)}"

    def read(self, name, i, j):
        """Block ``(i, j)``'s state ``name`` (None if not stored)."""
        if is_remote(self.root):
            fs, key = self._object(name, i, j)
            try:
                blob = fs.cat_file(key)
            except FileNotFoundError:
                return None
        else:
            p = self.path(name, i, j)
            if not p.exists():
                return None
            blob = p.read_bytes()
        out = np.empty(self.shape(i, j), self.DTYPES[name])
        self.codec.decode(blob, out=out)  # no intermediate copy
        return out

    def write(self, name, i, j, a):
        blob = self.codec.encode(np.ascontiguousarray(a, self.DTYPES[name]))
        if is_remote(self.root):
            fs, key = self._object(name, i, j)
            fs.pipe_file(key, blob)
            return
        p = self.path(name, i, j)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_bytes(blob)
        os.replace(tmp, p)


class _Context:
    """What every task needs: the plan, the cost model, the reader, the state files and
    the block cache (:class:`BlockCache`, None when the tasks may run in other processes)."""

    def __init__(self, plan, spec, reader, files, has_f, name, cache=None):
        self.plan, self.spec, self.reader, self.files = plan, spec, reader, files
        self.has_f, self.name, self.cache = has_f, name, cache
        self.key = f"{os.getpid()}-{id(self)}"

    def take(self, i, j, stage):
        """Block ``(i, j)``'s ``{"z", "f", "d", "l"}`` (``d``/``l`` None when not stored yet),
        from the cache (taken out of it) or read."""
        e = self.cache.take(i, j) if self.cache is not None else None
        if e is None:
            z, f = self.reader(self.plan.window(i, j))
            e = {"z": z, "f": f if self.has_f else None, "d": self.files.read("d", i, j),
                 "l": self.files.read("l", i, j) if stage >= 2 else None, "dirty": set()}
        elif stage >= 2 and e["l"] is None and "l" not in e["dirty"]:
            e["l"] = self.files.read("l", i, j)
        return e

    def give(self, i, j, e, dirty=()):
        """Block ``(i, j)``'s arrays back: into the cache, or the ``dirty`` ones written."""
        e["dirty"] |= set(dirty)
        if self.cache is None:
            for name in e["dirty"]:
                self.files.write(name, i, j, e[name])
            return
        self.cache.put(i, j, e)

    def __reduce__(self):
        # with a cache the tasks run in this process (an in-process cluster pickles its task
        # graph all the same): a pickled context names the one held here, cache and lock
        if self.cache is None:
            return (_Context, (self.plan, self.spec, self.reader, self.files, self.has_f,
                               self.name))
        return (_context_held, (self.key,))


#: the contexts with a cache of the runs in this process (:func:`_Context.__reduce__`)
_HELD = {}


def _context_held(key):
    return _HELD[key]


@contextlib.contextmanager
def _held(ctx):
    """``ctx`` held in this process (what its pickled copies name) while the block is run."""
    _HELD[ctx.key] = ctx
    try:
        yield
    finally:
        _HELD.pop(ctx.key, None)


class BlockCache:
    """Blocks' inputs and states held in this process up to ``nbytes``, least recently used
    first out, written back when they leave; tasks take a block out while they work on it."""

    def __init__(self, files, nbytes):
        import collections
        import threading
        self.files, self.nbytes = files, int(nbytes)
        self.entries = collections.OrderedDict()
        self.used = 0
        self.lock = threading.Lock()

    @staticmethod
    def _size(e):  # an array held twice (a DEM that is its own friction) counted once
        return sum({id(a): a.nbytes for k, a in e.items()
                    if k != "dirty" and a is not None}.values())

    def take(self, i, j):
        with self.lock:
            e = self.entries.pop((i, j), None)
            if e is not None:
                self.used -= self._size(e)
            return e

    def put(self, i, j, e):
        with self.lock:
            self.entries[(i, j)] = e
            self.used += self._size(e)
        self._evict()

    def _evict(self):
        """Blocks out, least recently used first, until the cache fits (at least one stays)."""
        out = []
        with self.lock:
            while self.used > self.nbytes and len(self.entries) > 1:
                key, old = self.entries.popitem(last=False)
                self.used -= self._size(old)
                out.append((key, old))
        for (a, b), old in out:
            for name in old["dirty"]:
                self.files.write(name, a, b, old[name])


class BlockReader(StoreReader):
    """A :class:`StoreReader` that reads only the inner chunks that meet a window
    (:func:`terrain.tiles.read_window`) where both stores have the usual float32 layout,
    else through zarr; a store at a URL a shard's object a GET
    (:func:`terrain.tiles.read_block`); ``f`` is None without a friction store."""

    ones = False

    def __init__(self, dem_path, friction_path=None, name=""):
        super().__init__(dem_path, friction_path, name)
        self.layouts = None  # on the first read: the stores may be ingested by then

    def _read(self, i, window):
        path, layer = self.sources[i]
        if is_remote(path):
            r0, r1, c0, c1 = window
            return read_block(path, layer, window, np.empty((r1 - r0, c1 - c0), np.float32))
        if self.layouts is None:
            lays = [None if is_remote(p) else read_layout(Path(p) / lay)
                    for p, lay in self.sources]
            self.layouts = lays if all(lay is not None and lay.dtype == np.float32
                                       for lay in lays) else []
        if not self.layouts:
            return super()._read(i, window)
        r0, r1, c0, c1 = window
        out = np.empty((r1 - r0, c1 - c0), np.float32)
        read_window(self.layouts[i], r0, r1, c0, c1, out)
        return out


def _block_task(ctx, stage, i, j, halo, sources):
    e = ctx.take(i, j, stage)
    z, f = e["z"], e["f"]
    rows, cols, _, idx = sources
    for r, c, n in zip(rows.tolist(), cols.tolist(), idx.tolist()):
        if np.isnan(z[r, c]) or (f is not None and np.isnan(f[r, c])):
            r0, _, c0, _ = ctx.plan.window(i, j)
            raise on_nodata("source", n, r + r0, c + c0, not np.isnan(z[r, c]), ctx.name)
    nd, nl, ring, settled = solve_block(ctx.spec, stage, z, f, e["d"], e["l"], halo, sources)
    if stage == 1:
        e["d"] = nd
    else:
        e["l"] = nl
    ring = _ring(ring)
    ctx.give(i, j, e, dirty=("d",) if stage == 1 else ("l",))
    return ring, settled


def _ring(ring):
    """The ring as the bands read it, without references to the block's arrays."""
    return {key: None if a is None else _RingArray(a) for key, a in ring.items()}


class _RingArray:
    """The two outer rows and columns on each side of a block array, copied (what
    :meth:`Bands.store` reads: ``a[row, :]`` for ring rows, ``a[:, col]`` for ring columns)."""

    def __init__(self, a):
        h, w = a.shape
        self.rows = {r: a[r].copy() for r in sorted({0, 1, h - 2, h - 1}) if 0 <= r < h}
        self.cols = {c: a[:, c].copy() for c in sorted({0, 1, w - 2, w - 1}) if 0 <= c < w}

    def __getitem__(self, key):
        r, c = key
        if isinstance(r, slice):
            return self.cols[int(c)]
        return self.rows[int(r)]


def _write_task(ctx, out_path, window, blocks, write_friction):
    """The layers of one output ``window`` (whole shards of them, whole blocks), block by
    block: each block's outputs (:func:`block_outputs`) go into the shards' chunks as they
    are computed (:class:`_LayerSink`), so the task holds one block's arrays, never a
    window's layers. Returns the window's reached cells, largest distance and seconds."""
    names = LAYER_NAMES + (("friction",) if write_friction else ())
    found, top, solve, write = 0, None, 0.0, 0.0
    with contextlib.ExitStack() as stack:
        sinks = {n: stack.enter_context(_LayerSink(out_path, n, window)) for n in names}
        for i, j, halo in blocks:
            t0 = time.perf_counter()
            q0, _, p0, _ = ctx.plan.window(i, j)
            e = ctx.take(i, j, 3)
            out = {"friction": e["f"]} if write_friction else {}
            if e["d"] is not None:  # else never reached: the layers' fill
                d, a, b = block_outputs(ctx.spec, e["z"], e["f"], e["d"], e["l"], halo)
                out.update(distance=d, allocation=a, backlink=b)
                n = int(np.count_nonzero(~np.isnan(d)))
                if n:
                    found, most = found + n, float(np.nanmax(d))
                    top = most if top is None else max(top, most)
            del e  # not given back: the block is done
            t1 = time.perf_counter()
            for name, values in out.items():
                sinks[name].put(values, q0, p0)
            del out
            t2 = time.perf_counter()
            solve, write = solve + t1 - t0, write + t2 - t1
        t2 = time.perf_counter()
        for sink in sinks.values():
            sink.close()
        write += time.perf_counter() - t2
    return {"reached": found, "max": top, "solve": solve, "write": write}


LAYER_NAMES = ("distance", "allocation", "backlink")


class _LayerSink:
    """Where a write task puts a layer's blocks: in a local store of the usual layout one
    :class:`terrain.tiles.ShardWriter` a shard of the window (the blocks' chunks encoded as
    they come); elsewhere (a store at a URL: a shard is one object, one PUT) the window's
    array, written whole by :func:`terrain.tiles.write_block` at :meth:`close`."""

    def __init__(self, out_path, name, window):
        self.out_path, self.name, self.window = out_path, name, window
        self.layout = None if is_remote(out_path) else write_layout(Path(out_path) / name)
        dtype, fill, _ = LAYERS.get(name, ("float32", np.nan, None))
        self.dtype = np.dtype(dtype) if self.layout is None else self.layout.dtype
        r0, r1, c0, c1 = window
        if self.layout is None:
            self.cells = np.full((r1 - r0, c1 - c0), fill, self.dtype)
            return
        R, C = self.layout.shard
        self.writers = {(si, sj): ShardWriter(self.layout, si, sj)
                        for si in range(r0 // R, -(-r1 // R))
                        for sj in range(c0 // C, -(-c1 // C))}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for w in getattr(self, "writers", {}).values():
            w.__exit__(*exc)

    def put(self, values, r0, c0):
        """A block's cells ``values`` from the grid's ``(r0, c0)`` on."""
        values = np.ascontiguousarray(values, self.dtype)
        h, w = values.shape
        if self.layout is None:
            self.cells[r0 - self.window[0]:r0 - self.window[0] + h,
                       c0 - self.window[2]:c0 - self.window[2] + w] = values
            return
        R, C = self.layout.shard
        for si in range(r0 // R, -(-(r0 + h) // R)):
            for sj in range(c0 // C, -(-(c0 + w) // C)):
                a0, b0 = max(si * R, r0), max(sj * C, c0)
                a1, b1 = min(si * R + R, r0 + h), min(sj * C + C, c0 + w)
                self.writers[si, sj].put(values[a0 - r0:a1 - r0, b0 - c0:b1 - c0], a0, b0)

    def close(self):
        if self.layout is None:
            write_block(self.out_path, self.name, self.window, self.cells)
            return
        for w in self.writers.values():
            w.close()


def _morton_blocks(blocks):
    """``blocks`` (``(i, j, ...)``) in Morton order: a window's chunks in the shards' order
    (zarr's bytes) where the blocks are whole quadrants of the shards."""
    i0, j0 = min(b[0] for b in blocks), min(b[1] for b in blocks)
    return sorted(blocks, key=lambda b: int(morton_encode(b[0] - i0, b[1] - j0)))


def blocked_spec(spec, memory_bytes, reuse, backend):
    """Complete ``spec`` for the blocked algorithm (in place): its block side
    (:func:`block_side`) and memory budget (``memory_bytes``: None, no budget); CPU only, no
    ``--reuse``."""
    if get_backend(backend).is_gpu:
        raise InputError(f"{spec['input']}: the blocked algorithm runs on the CPU only")
    if reuse is not None:
        raise InputError(f"{spec['input']}: the blocked algorithm keeps no index to reuse")
    spec["block"] = block_side(spec["tile"], spec["tile"] * spec["tiles_per_shard"],
                               memory_bytes, os.cpu_count() or 1)
    spec["memory_bytes"] = memory_bytes
    return spec


def run_blocked(dem_path, out_path, spec, sources, start_costs, friction_store=None,
                upstream=(), geo=None, scheduler=None):
    """The blocked cost distance into the partial output ``out_path`` (module docstring);
    returns the summary."""
    t_start = time.perf_counter()
    bspec = BlockedSpec(cost_model_code(spec["cost"]), arc_codes(spec["connectivity"]),
                        arc_lengths(spec["cellsize"]), friction_store is not None,
                        check_max_cost(spec["max_cost"]))
    plan = BlockPlan(tuple(spec["shape"]), int(spec["block"]))
    files = BlockFiles(scratch_beside(out_path, SCRATCH),
                       lambda i, j: (lambda w: (w[1] - w[0], w[3] - w[2]))(plan.window(i, j)))
    remove_tree(files.root)  # a killed run's states (at a URL: under a resumed partial)
    if not is_remote(files.root):
        files.root.mkdir(parents=True, exist_ok=True)
    fixed_mmap_threshold()  # the blocks are allocated and freed at every visit
    try:
        return _run(dem_path, out_path, spec, source_arrays(sources, start_costs), bspec, plan,
                    files, friction_store, upstream, geo, scheduler, t_start)
    finally:
        remove_tree(files.root)


def _run(dem_path, out_path, spec, srcs, bspec, plan, files, friction_store, upstream, geo,
         scheduler, t_start):
    import dask

    from . import cluster

    shape, tile, side = plan.shape, int(spec["tile"]), plan.side
    reader = BlockReader(dem_path, friction_store, spec.get("friction_path") or "")
    threads = os.cpu_count() or 1
    # tasks in this process (Dask's local schedulers, our in-process LocalCluster): the
    # cache serves them; a cluster of other processes reads and writes the files each time
    local = scheduler in cluster.LOCAL_SCHEDULERS or (
        scheduler in (None, cluster.LOCAL_CLUSTER) and not cluster.cluster_active())
    bands = 24 * (plan.hrows.size * shape[1] + plan.vcols.size * shape[0])
    cache = BlockCache(files, cache_bytes(side, spec.get("memory_bytes"), threads, bands)) \
        if local else None
    cache_budget = None if cache is None else cache.nbytes
    ctx = _Context(plan, bspec, reader, files, friction_store is not None, spec["input"],
                   cache)
    with _held(ctx), cluster.open_scheduler(scheduler, cells=shape[0] * shape[1]):
        if upstream:
            cluster.compute(*upstream, label="cost-ingest")
        prepare_layers(out_path, shape, tile, geo or {}, friction_store is not None)
        driver = BlockedDriver(plan, bspec, srcs, batch=threads)
        # keys unique per run and round: a distributed scheduler that still holds a key of an
        # earlier round (its release is asynchronous) or run would hand back that result
        token = dask.base.tokenize(str(dem_path), str(out_path), time.time_ns())
        rounds = itertools.count()

        def execute(stage, blocks):
            n = next(rounds)
            tasks = [dask.delayed(_block_task, pure=False)(
                ctx, stage, i, j, halo, srcs,
                dask_key_name=(f"cost-block{stage}-{token}", n, i, j))
                for i, j, halo, srcs in blocks]
            return cluster.compute(*tasks, label="cost-block", progress=False)

        t0 = time.perf_counter()
        visits = driver.run(execute, 1)
        t1 = time.perf_counter()
        driver.run(execute, 2)
        t2 = time.perf_counter()
        # windows of whole output shards (a block larger than a shard: the block's)
        out_side = max(side, tile * tiles_per_shard(tile, shape))
        writes = []
        R, C = shape
        for r in range(0, R, out_side):
            for c in range(0, C, out_side):
                window = (r, min(r + out_side, R), c, min(c + out_side, C))
                blocks = _morton_blocks([(i, j, driver.bands.halo(i, j))
                                         for i in range(r // side, -(-window[1] // side))
                                         for j in range(c // side, -(-window[3] // side))])
                writes.append(dask.delayed(_write_task, pure=False)(
                    ctx, out_path, window, blocks, friction_store is not None,
                    dask_key_name=(f"cost-block-write-{token}", r // out_side,
                                   c // out_side)))
        fills = cluster.compute(*writes, label="cost-block-write")
        t3 = time.perf_counter()
    summary = summary_base(spec, "cpu")
    summary.update({
        "device": get_backend("cpu").device_name(),
        "block": side, "blocks": int(np.prod(plan.blocks)), "batch": threads,
        "cache_bytes": cache_budget, **reached(fills),
        "stage_stats": driver.stats,
        "max_block_visits": int(visits.max(initial=0)),
        "solve_seconds": round(t2 - t0, 6), "read_seconds": 0.0,
        "write_seconds": round(sum(f["write"] for f in fills), 6),
        "wall_seconds": {"distances": round(t1 - t0, 6), "labels": round(t2 - t1, 6),
                         "outputs": round(t3 - t2, 6),
                         "total": round(time.perf_counter() - t_start, 6)},
        "queue": "heap, blocks by key", "phases": None})
    return summary
