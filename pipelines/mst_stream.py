"""``terrain mst`` of a text grid too large for the in-core path: parsed once onto the device.

When it applies
---------------
An ESRI/GRASS ASCII grid, the GPU backend, no ``--scheduler`` or ``--resume`` (with
``--gpus N`` on GPU 0 of the N), and a grid whose whole forest does not fit the device in core
(:func:`terrain.grid.mst_device.fits_on_device`: more than 2^30 cells, or too many bytes)
while its float32 elevations do, with room left for the super-tiles
(:data:`DEVICE_SHARE`, :func:`text_streamed_fits`); :func:`pipelines.mst.mst_route`
decides. The 10-ft Neuse size (50220 × 70520, 24.4 GB of text, 14.2 GB of
float32) on one H100 is the case it was made for.

Algorithm and Dask strategy
---------------------------
Before, the text went through the task graph of :mod:`pipelines.ingest` into the output
store (a newline index over the whole file, then band tasks of 2048 rows parsing into
host memory, one 578 MB band and ~1 GB of mapped text per task thread), and the
forest's super-tiles then read the elevations back from the store and decoded them: the
text read twice, every elevation encoded, written, read and decoded again. Here:

1. The text goes to the device once, in pieces of whole lines, and is parsed there into
   one float32 array of the whole grid (:func:`terrain.io._parse_gpu.parse_grid_streamed`:
   the pool's threads read the next piece into pinned buffers while the device indexes and
   parses the current one).
2. As soon as a band of shard rows is parsed, its ``elevation`` shards are brought back
   through pinned buffers and written (:func:`pipelines.ingest.write_window`, the ingest's
   writer and statistics) by a pool of :data:`WRITER_THREADS`, while the device goes on.
3. The forest is :func:`pipelines.mst.build_mst_graph`'s super-tile graph (``in_core=
   "groups"``) on the default scheduler, whose group tasks take their block from the
   device array (a :class:`DeviceGrid` handle in the graph; the array itself is in this
   process's :data:`_GRIDS`, never pickled) instead of reading and decoding it from the store:
   forest and reduction on the device, mask and boundary graph back; merges and expansions
   as on the store path. The provisional masks of the groups go into a uint8 grid on the
   device (1 byte a cell beside the 4 of the elevations), not into the store: the write
   tasks take each shard from there, apply its changes and write it -- the mask is written
   once and never read back (the store path writes it twice and reads it once).

Host memory holds no grid-sized array: pinned buffers of the copies and writers, the
super-tiles' masks in flight, the level graphs. The output store is the one the graph path
writes (the same writers), and the forest is the same forest bit for bit (the super-tile
path's). A text that is not a valid grid makes the parse return None; the caller then
runs the graph path, whose CPU parser raises the usual :class:`~terrain.errors.InputError`.
"""

import itertools
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor


__all__ = ["text_streamed_fits", "text_streamed", "DeviceGrid", "device_get", "device_put",
           "DEVICE_SHARE", "WRITER_THREADS"]

#: the device's free memory the float32 grid may take (the rest: pieces of text, super-tiles)
DEVICE_SHARE = 0.5
#: threads writing ``elevation`` shards while the device parses and computes the forest
WRITER_THREADS = 8

_GRIDS = {}  # DeviceGrid.key -> CuPy array, while a run holds it
_ids = itertools.count()


class DeviceGrid:
    """A handle, in a task graph, on a grid held on this process's device (:data:`_GRIDS`).

    Its ``str`` names it (task keys hash it); pickling it copies the key only. A plain
    class: Dask walks into dataclasses and containers among task arguments.

    >>> str(DeviceGrid("1-0")), DeviceGrid("1-0") == DeviceGrid("1-0")
    ('device-grid:1-0', True)
    """

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = str(key)

    def __str__(self):
        return f"device-grid:{self.key}"

    __repr__ = __str__

    def __eq__(self, other):
        return isinstance(other, DeviceGrid) and other.key == self.key

    def __hash__(self):
        return hash(("DeviceGrid", self.key))

    def __reduce__(self):
        return (DeviceGrid, (self.key,))


def _held(handle):
    z = _GRIDS.get(handle.key)
    if z is None:
        raise RuntimeError(f"{handle}: no such grid in this process (a task ran elsewhere?)")
    return z


def device_get(handle, window, on_device=True):
    """The block ``window = (r0, r1, c0, c1)`` of the device grid ``handle``: a contiguous
    CuPy copy (``on_device``), else a NumPy one. On the calling thread's stream (the one
    a super-tile's forest then runs on)."""
    from terrain.grid.mst import _thread_stream
    import cupy as cp
    z = _held(handle)
    r0, r1, c0, c1 = window
    with _thread_stream(cp):
        block = z[r0:r1, c0:c1].copy()
        return block if on_device else block.get()


def device_put(handle, window, block):
    """Copy the host array ``block`` into ``window`` of the device grid ``handle`` (done
    when this returns)."""
    from terrain.grid.mst import _thread_stream
    import cupy as cp
    z = _held(handle)
    r0, r1, c0, c1 = window
    stream = _thread_stream(cp)
    with stream:
        z[r0:r1, c0:c1] = cp.asarray(block)
    stream.synchronize()


def text_streamed_fits(spec, free):
    """Whether the float32 elevations and the uint8 provisional mask of ``spec``'s grid fit
    :data:`DEVICE_SHARE` of ``free`` device bytes (the rest: pieces of text, super-tiles).
    :func:`pipelines.mst.mst_route` takes this path for an ASCII grid that fits here but
    not the whole-grid in-core path.

    >>> from terrain.grid.mst import MSTSpec
    >>> text_streamed_fits(MSTSpec((50220, 70520), 512), 80 << 30)
    True
    """
    return 5 * spec.shape[0] * spec.shape[1] <= DEVICE_SHARE * free


def text_streamed(grid, out_path, spec, shard, backend, tile, key_bits="auto"):
    """The forest of the ASCII grid ``grid`` into the partial output ``out_path`` (module
    docstring). Returns the summary of :func:`pipelines.mst._finish` (its ``wall_seconds``:
    the steps' wall seconds), or None when the text is not a valid grid (nothing is left in
    ``out_path`` but what the graph path overwrites)."""
    from terrain.backend import get_backend
    from terrain.io._parse import load_kernels
    from terrain.io import _parse_gpu

    from .cluster import compute, open_scheduler
    from .ingest import _band_stats, _create, _finish as finish_ingest, default_compressors
    from .ingest import elevation_layout, write_window
    from .mst import _PinnedStaging, build_mst_graph

    cp = get_backend(backend).xp
    rows, cols = spec.shape
    side = spec.tile * shard
    wall = {}
    t0 = time.perf_counter()
    threading.Thread(target=load_kernels, daemon=True).start()  # the band statistics' kernel
    _create(out_path, grid, tile, default_compressors())
    layout = elevation_layout(out_path)
    staging = _PinnedStaging(side * side * 4)
    zd = cp.empty((rows, cols), cp.float32)

    def write_shard(r0, r1, c0, c1):  # a queued write holds nothing but its window
        band = staging.fetch(cp, zd[r0:r1, c0:c1])
        write_window(out_path, band, r0, c0, layout=layout)
        return _band_stats(band)

    writes = []
    written_rows = [0]
    dem = None
    with ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="terrain-read") as readers, \
            ThreadPoolExecutor(WRITER_THREADS, thread_name_prefix="terrain-write") as writers:
        def on_rows(r0, r1):
            # whole shard rows parsed (the last one at the grid's end): write them
            cp.cuda.Device().synchronize()
            while written_rows[0] + side <= r1 or (r1 == rows and written_rows[0] < rows):
                a = written_rows[0]
                b = min(a + side, rows)
                for c in range(0, cols, side):
                    writes.append(writers.submit(write_shard, a, b, c, min(c + side, cols)))
                written_rows[0] = b

        def parse():
            try:
                return _parse_gpu.parse_grid_streamed(grid, zd, backend, readers, times=wall,
                                                      on_rows=on_rows,
                                                      piece_bytes=_parse_gpu.PIECE_BYTES)
            finally:
                wall["text"] = time.perf_counter() - t0

        parsing = ThreadPoolExecutor(1, thread_name_prefix="terrain-parse")
        try:
            # the scheduler starts (Dask's imports, the cluster) while the text is parsed
            future = parsing.submit(parse)
            with open_scheduler(None, cells=rows * cols):
                parsed = future.result()
                if parsed is None:
                    _cancel(writes)
                    shutil.rmtree(out_path, ignore_errors=True)  # the graph path makes it anew
                    return None
                cp.get_default_memory_pool().free_all_blocks()  # the pieces' (null stream)
                t1 = time.perf_counter()
                dem = DeviceGrid(f"{os.getpid()}-{next(_ids)}")
                mask = DeviceGrid(f"{dem.key}-mask")
                _GRIDS[dem.key] = zd
                _GRIDS[mask.key] = cp.zeros((rows, cols), cp.uint8)
                graph = build_mst_graph(dem, out_path, spec, shard, backend, None, None,
                                        key_bits, "groups", device_mask=mask)
                (summary,) = compute(graph, label="mst")
            wall["forest"] = time.perf_counter() - t1
            t2 = time.perf_counter()
            band_stats = [f.result() for f in writes]
            wall["elevation-write-tail"] = time.perf_counter() - t2
        finally:
            parsing.shutdown(cancel_futures=True)  # waits for a parse still running
            if dem is not None:
                _GRIDS.pop(dem.key, None)
                _GRIDS.pop(f"{dem.key}-mask", None)
            _cancel(writes)  # wait: the partial output is removed after an error
    del zd
    cp.get_default_memory_pool().free_all_blocks()
    finish_ingest(out_path, band_stats)
    summary["path"] = "text-streamed"
    summary["parse"] = "gpu"
    # the summary's read_bytes count the super-tiles' elevations as copied on the device
    summary["text_bytes"] = int(grid.size - grid.data_offset)
    summary["wall_seconds"] = {k: round(v, 6) for k, v in wall.items()}
    import zarr
    zarr.open_group(store=str(out_path), mode="r+").attrs.update({"mst": summary})
    return summary


def _cancel(futures):
    """Cancel the futures not started; wait for the others (their errors are not news)."""
    for f in futures:
        f.cancel()
    for f in futures:
        if not f.cancelled():
            f.exception()
