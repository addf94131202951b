"""Ingest an elevation grid into a z-ordered tile store, as one Dask graph; ``synth``.

The header is validated eagerly, so bad input fails before any task runs. Tasks:
``ingest-create``; for an ASCII grid ``ingest-index`` and ``ingest-rows`` (every row's byte
span); ``ingest-band`` per band of shard rows (whole shards: zarr rewrites a shard written in
part); ``ingest-finish`` (nodata count, min, max into the attributes, for ``info``). A small
ASCII grid is parsed whole and written without Dask (:func:`write_elevation`): the same
store, byte for byte.
"""

import os
import re
import sys
import threading
import time
import warnings

import numpy as np

from terrain.io import BUFFERS, AsciiGrid, nan_min_max, open_grid, read_whole
from terrain.io.georef import finish_store
from terrain.io.outputs import input_identity
from terrain.io.remote import check_local_outputs, input_fingerprints, is_remote, output_at
from terrain.io.zarr_meta import codec, open_group
from terrain.tiles import DEFAULT_TILE, check_tile_size, create_store, open_store
from terrain.tiles.store import shard_windows, tiles_per_shard, write_block

from . import _plan as _plans
from ._resume import checkpointed, drop_checkpoints, prepare_resume, run_key
from .cluster import DASHBOARD_MIN_CELLS, cluster_active
from .info import merge_stats

# Dask (pipelines.cluster, dask itself) is imported where a graph is built or run: a small
# grid's ingest runs without one (ingest_in_threads) and does not pay its import

__all__ = ["build_ingest_graph", "bands_at_once", "ingest", "ingest_in_threads", "write_elevation",
           "band_stats", "ingest_into",
           "create_elevation", "finish_elevation", "write_window",
           "ingest_on_active_scheduler", "ingest_command", "synth_command",
           "default_compressors"]


def band_stats(z):
    """``(nodata cells, min, max)`` of a float32 block (min/max ignore NaN), Python scalars."""
    nan, lo, hi = nan_min_max(z)
    return int(nan), float(lo), float(hi)


def default_compressors():
    """Blosc LZ4 (level 1, byte shuffle): the parser, not the codec, bounds throughput
    (figures: docs/architecture.md, "Codecs")."""
    return (codec("blosc", cname="lz4", clevel=1, shuffle="shuffle"),)


def create_elevation(store_path, grid, tile, compressors=None):
    """Create the tile store of ``grid`` at ``store_path``; returns the shard side in cells."""
    compressors = default_compressors() if compressors is None else compressors
    store = create_store(store_path, grid.shape, tile, geotransform=grid.geotransform,
                         crs=grid.crs, nodata=grid.nodata, source=grid.path.name,
                         header=grid.header, compressors=compressors,
                         units=getattr(grid, "units", None))
    kind = (f"{grid.dialect}-ascii" if isinstance(grid, AsciiGrid)
            else f"gdal-{grid.header.get('driver', '?').lower()}")
    store.group.attrs.update({"source_format": kind})
    return store.elevation.shards[0]


#: host bytes the band tasks of one process hold at once (at least two bands run): the
#: cores do not multiply the RSS
BAND_HOST_BUDGET = 2 << 30

_band_slots = {}
_band_slots_lock = threading.Lock()


def bands_at_once(band_bytes, threads=None):
    """Band tasks of ``band_bytes`` that one process runs at once: ``BAND_HOST_BUDGET //
    band_bytes``, at least 2 (at most ``threads``, when given).

    >>> bands_at_once(578 << 20), bands_at_once(64 << 20, threads=16)
    (3, 16)
    """
    n = max(2, BAND_HOST_BUDGET // max(int(band_bytes), 1))
    return n if threads is None else min(n, int(threads))


def _band_slot(band_bytes):
    """This process's semaphore for bands of ``band_bytes`` (:func:`bands_at_once`)."""
    n = bands_at_once(band_bytes)
    with _band_slots_lock:
        if n not in _band_slots:
            _band_slots[n] = threading.BoundedSemaphore(n)
        return _band_slots[n]


def _ingest_band(grid, store_path, r0, r1, starts, shard_side):
    """Read rows ``r0:r1`` and write every shard of them; returns (nodata cells, min, max)."""
    del shard_side  # only orders this task after the store's creation
    cols = grid.shape[1]
    with _band_slot((r1 - r0) * cols * 4):
        return _ingest_band_now(grid, store_path, r0, r1, starts, cols)


def _ingest_band_now(grid, store_path, r0, r1, starts, cols):
    z = BUFFERS.take((r1 - r0) * cols * 4, np.float32, (r1 - r0, cols))
    try:
        if isinstance(grid, AsciiGrid):  # statistics counted by the parser
            stats = grid.read_rows_stats(r0, r1, starts, out=z)[1]
        else:
            stats = band_stats(grid.read_rows(r0, r1, starts, out=z))
        write_window(store_path, z, r0, 0)
        return stats
    finally:
        BUFFERS.give(z)


def write_window(store_path, z, r0, c0):
    """Write ``z`` into the store's ``elevation`` at ``(r0, c0)``: whole shards, in this thread."""
    write_block(store_path, "elevation", (r0, r0 + z.shape[0], c0, c0 + z.shape[1]), z)


def finish_elevation(store_path, parts):
    """The statistics of the bands ``parts`` (:func:`band_stats` each) into the attributes."""
    stats = merge_stats(parts)
    open_group(store_path, mode="r+").attrs.update({"stats": stats})
    BUFFERS.clear()
    return store_path


def _write_band(store_path, z, r0, shard_side):
    """Write the rows ``z`` (read by the client) from row ``r0`` on, once the store is
    created (``shard_side``); their statistics."""
    del shard_side  # only orders this task after the store's creation
    write_window(store_path, z, r0, 0)
    return band_stats(z)


def _held_bands(grid, band_rows):
    """``[(r0, rows)]``: the grid's bands of ``band_rows``, read in this process."""
    z = read_whole(grid)
    return [(r0, z[r0:r0 + band_rows]) for r0 in range(0, grid.shape[0], band_rows)]


# tasks whose results are checkpointed in the partial store (``--resume``)
CHECKPOINTED = ("ingest-create", "ingest-band")


def build_ingest_graph(input_path, store_path, tile=DEFAULT_TILE, compressors=None, *,
                       band=None, nodata=None, crs=None, partial=None, finite=True):
    """Dask graph that ingests ``input_path`` into a new tile store at ``store_path``.

    A store at a URL (a :class:`terrain.io.remote.Location`: workers that may share nothing
    with this process but the object store) is written by tasks given rows this process
    reads from ``input_path``; a local store by tasks that read the input themselves.

    Parameters
    ----------
    input_path : str or Path
        ESRI/GRASS ASCII grid or any raster rasterio reads.
    store_path : str or Path
        Where the store is written (must not exist; callers pass a temporary path from
        :func:`terrain.io.outputs.atomic_output`).
    tile : int
        Tile side, a power of two.
    compressors : tuple of zarr codecs, optional
        Default: :func:`default_compressors` (Blosc LZ4).
    band, nodata, crs : optional
        Band to read, nodata value and CRS overriding the file's (:func:`terrain.io.open_grid`).
    partial : path or terrain.io.remote.Location, optional
        The partial output of a resumable run: the store's creation and every band keep
        their results among its checkpoints (:data:`CHECKPOINTED`, ``--resume``).
    finite : bool
        False: infinite values are kept (a friction's impassable cells), else refused.

    Returns
    -------
    dask.delayed.Delayed
        Computing it writes the whole store and returns ``store_path``.

    Raises
    ------
    InputError
        Eagerly, for a missing or unreadable input, a bad header or a bad tile size; errors
        in the data (bad tokens, short rows, truncation) are raised when the graph runs.

    Examples
    --------
    >>> g = build_ingest_graph("data/sample.asc", "sample.zarr", tile=256)   # doctest: +SKIP
    >>> dask.compute(g)                                                      # doctest: +SKIP
    ('sample.zarr',)
    """
    import dask

    tile = check_tile_size(tile)
    grid = open_grid(input_path, band=band, nodata=nodata, crs=crs, finite=finite)
    token = dask.base.tokenize(input_identity(input_path), str(store_path), tile)
    shard_side = dask.delayed(create_elevation, pure=False)(
        store_path, grid, tile, compressors, dask_key_name=f"ingest-create-{token}")
    rows = grid.shape[0]
    band_rows = tile * tiles_per_shard(tile, grid.shape)
    if is_remote(store_path):
        bands = [dask.delayed(_write_band, pure=False)(
                    store_path, z, r0, shard_side, dask_key_name=(f"ingest-band-{token}", i))
                 for i, (r0, z) in enumerate(_held_bands(grid, band_rows))]
    else:
        starts = None
        if isinstance(grid, AsciiGrid):
            pieces = [dask.delayed(grid.newline_offsets)(
                a, b, dask_key_name=(f"ingest-index-{token}", i))
                for i, (a, b) in enumerate(grid.index_ranges())]
            starts = dask.delayed(grid.row_starts)(pieces, dask_key_name=f"ingest-rows-{token}")
        bands = [dask.delayed(_ingest_band, pure=False)(
                    grid, store_path, r0, min(r0 + band_rows, rows), starts, shard_side,
                    dask_key_name=(f"ingest-band-{token}", i))
                 for i, r0 in enumerate(range(0, rows, band_rows))]
    graph = dask.delayed(finish_elevation, pure=False)(store_path, bands,
                                                      dask_key_name=f"ingest-finish-{token}")
    return graph if partial is None else checkpointed(graph, partial, CHECKPOINTED)


def ingest_into(input_path, store_path, tile, partial=None, label="ingest", finite=True):
    """``input_path`` ingested into ``store_path``, a store that a command writes (its
    partial output, or scratch beside it), on this process's threads: the input is read
    where the command runs, whatever cluster computes the rest. With ``partial``, the steps
    keep their results among its checkpoints (``--resume``); ``finite``: as
    :func:`build_ingest_graph`'s."""
    from .cluster import compute, open_scheduler
    graph = build_ingest_graph(input_path, store_path, tile, partial=partial, finite=finite)
    with open_scheduler("threads"):
        compute(graph, label=label)


def ingest(input_path, output_path, tile=DEFAULT_TILE, overwrite=False, scheduler=None,
           compressors=None, resume=False, *, band=None, nodata=None, crs=None):
    """Ingest a grid into a tile store at ``output_path``, atomically.

    Parameters
    ----------
    input_path, output_path : str or Path
    tile : int
    overwrite : bool
        Replace an existing output.
    scheduler : str, optional
        As ``--scheduler``: None starts a LocalCluster for grids of more than
        :data:`pipelines.cluster.DASHBOARD_MIN_CELLS` cells and runs smaller ones on threads
        (an ASCII grid without a task graph: :func:`ingest_in_threads`),
        ``"local"`` always starts one, ``"threads"``/``"synchronous"`` run locally, an
        address attaches to a cluster.
    resume : bool
        Finish the partial output a killed run of the same input and tile left (its
        finished bands are not read again).

    Returns
    -------
    TileStore
        The finished store, opened for reading.

    Examples
    --------
    >>> store = ingest("data/sample.asc", "sample.zarr", scheduler="threads")  # doctest: +SKIP
    >>> store.shape                                                            # doctest: +SKIP
    (300, 400)
    """
    check_local_outputs([input_path], [output_path], overwrite)
    check_tile_size(tile)
    began = input_fingerprints([input_path])  # before its header is read
    grid = open_grid(input_path, band=band, nodata=nodata, crs=crs)  # bad input fails early
    cells = grid.shape[0] * grid.shape[1]
    if (scheduler is None and not resume and isinstance(grid, AsciiGrid)
            and cells <= DASHBOARD_MIN_CELLS and not cluster_active()):
        return ingest_in_threads(grid, input_path, output_path, tile, overwrite, compressors,
                                 began=began, band=band, nodata=nodata, crs=crs)
    from .cluster import open_scheduler

    # a store at a URL is written from rows this process reads: no worker reads the input
    with open_scheduler(scheduler, cells=cells,
                        inputs=[] if is_remote(output_path) else [input_path]):
        return ingest_on_active_scheduler(input_path, output_path, tile, overwrite, compressors,
                                          resume, began=began, band=band, nodata=nodata,
                                          crs=crs)


def ingest_on_active_scheduler(input_path, output_path, tile=DEFAULT_TILE, overwrite=False,
                               compressors=None, resume=False, *, began=None, **options):
    """:func:`ingest` on the scheduler made active by :func:`pipelines.cluster.open_scheduler`;
    ``options``: :func:`terrain.io.open_grid`'s; ``began``: the input's fingerprint when the
    run began (:func:`terrain.io.remote.output_at`). The store's ``reused_tasks`` counts the
    tasks a resumed run took from checkpoints."""
    from .cluster import compute, remote_input

    key = run_key("ingest", [input_path], tile, compressors, sorted(options.items()))
    with output_at(output_path, overwrite, inputs=[input_path], key=key,
                   resume=resume, began=began) as tmp:
        kept = prepare_resume(tmp) if resume else {}
        # the paths as the workers of a cluster given by address must see them
        src, part = remote_input(input_path), remote_input(tmp)
        graph = build_ingest_graph(src, part, tile, compressors, partial=part, **options)
        compute(graph, label="ingest")
        reused = drop_checkpoints(tmp, kept)
        # consolidated metadata last, by the command that owns the store: a pipeline that
        # embeds the ingest graph (mst) adds arrays afterwards and consolidates at its end
        finish_store(tmp)
    store = open_store(output_path)
    store.reused_tasks = reused
    return store


def ingest_in_threads(grid, input_path, output_path, tile=DEFAULT_TILE, overwrite=False,
                      compressors=None, *, began=None, **options):
    """:func:`ingest` of a grid that fits in memory, atomically, without a task graph
    (:func:`write_elevation`); ``began``: as :func:`ingest_on_active_scheduler`'s."""
    check_tile_size(tile)
    key = run_key("ingest", [input_path], tile, compressors, sorted(options.items()))
    with output_at(output_path, overwrite, inputs=[input_path], key=key, began=began) as tmp:
        write_elevation(grid, tmp, tile, compressors)
        finish_store(tmp)
    store = open_store(output_path)
    store.reused_tasks = 0
    return store


#: rows of a raster's band that :func:`write_elevation` reads at once are a multiple of this
#: (GeoTIFF blocks are 256 or 512 high, or strips)
READ_ROWS = 512


def write_elevation(grid, store_path, tile, compressors=None, out=None):
    """The store ``store_path`` created with the ``elevation`` of ``grid`` (one that fits in
    memory) on a thread pool: the same store as :func:`build_ingest_graph`'s, byte for byte,
    without Dask's import and scheduling (a small job's start-up). Returns the elevations
    (float32, NaN = nodata), for a caller that works in core not to read them back: ``out``
    when given (a float32 array of the grid's shape whose rows are contiguous, such as
    :func:`terrain.grid.sssp.padded_grid`'s, which the in-core SSSP takes without a copy).
    A raster is read in bands of rows on the pool (a band's read the only copy)."""
    from concurrent.futures import ThreadPoolExecutor

    threads = os.cpu_count() or 1
    with ThreadPoolExecutor(threads, thread_name_prefix="terrain-ingest") as pool:
        created = pool.submit(create_elevation, store_path, grid, tile, compressors)
        if isinstance(grid, AsciiGrid):
            z, stats = grid.read_all(pool, out)
        else:
            rows = grid.shape[0]
            z = np.empty(grid.shape, np.float32) if out is None else out
            step = READ_ROWS * -(-rows // (2 * threads * READ_ROWS))  # 2 bands a thread
            list(pool.map(lambda r0: grid.read_rows(r0, min(r0 + step, rows),
                                                    out=z[r0:r0 + step]),
                          range(0, rows, step)))
            stats = [band_stats(z)]
        side = created.result()
        list(pool.map(lambda w: write_window(store_path, z[w[0]:w[1], w[2]:w[3]], w[0], w[2]),
                      shard_windows(grid.shape, side)))
    finish_elevation(store_path, stats)
    return z


def ingest_command(args):
    """``terrain ingest INPUT -o OUT.zarr [--tile N] [--overwrite] [--scheduler S]``."""
    if getattr(args, "dry_run", False):
        from ._plan import dry_run_command
        return dry_run_command("ingest", args)
    t0 = time.perf_counter()
    options = {"band": getattr(args, "band", None), "nodata": getattr(args, "nodata", None),
               "crs": getattr(args, "crs", None)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        open_grid(args.input, **options)
    for w in caught:  # once, as one line (e.g. a multi-band input without --band)
        hint = " (--band N picks another)" if "; reading band" in str(w.message) else ""
        print(f"terrain: warning: {w.message}{hint}", file=sys.stderr)
    with warnings.catch_warnings():
        for w in caught:  # said above: not again as ingest opens the grid (the data's own,
            # such as integers float32 rounds, are found as it reads them and said then)
            warnings.filterwarnings("ignore", re.escape(str(w.message)) + r"\Z")
        store = ingest(args.input, args.output, tile=args.tile, overwrite=args.overwrite,
                       scheduler=args.scheduler, resume=getattr(args, "resume", False),
                       **options)
    rows, cols = store.shape
    reused = (f"; {store.reused_tasks} tasks reused from the interrupted run"
              if store.reused_tasks else "")
    print(f"terrain: wrote {store.path} ({rows} x {cols}, {store.tiles_shape[0]} x "
          f"{store.tiles_shape[1]} tiles of {store.tile}) in {time.perf_counter() - t0:.2f} s"
          f"{reused}")
    return 0


def synth_command(args):
    """``terrain synth --rows R --cols C [--seed S] [--nodata F] [--integer] -o FILE.asc``."""
    from terrain.io import write_synth  # Numba's import: only for this command

    t0 = time.perf_counter()
    n = write_synth(args.output, args.rows, args.cols, seed=args.seed, nodata=args.nodata,
                    integer=args.integer, overwrite=args.overwrite)
    dt = time.perf_counter() - t0
    print(f"terrain: wrote {args.output} ({args.rows} x {args.cols}, {n / 1e6:.1f} MB) in "
          f"{dt:.2f} s", file=sys.stdout)
    return 0


def _plan(plan, grid, args, inp, out):
    """``ingest --dry-run``: the graph's tasks, a band task's memory (:mod:`pipelines._plan`)."""
    from terrain.io.outputs import partial_path

    key = run_key("ingest", [inp], grid.tile, None)
    per_task = _plans.band_task_bytes(grid)
    graph = build_ingest_graph(inp, partial_path(out, key), grid.tile)
    return {"tasks": _plans.task_count(graph), "backend": "cpu (text parser / GDAL)",
            "memory_per_task_bytes": per_task,
            # the band tasks in flight are bounded by a host budget, not the threads
            "memory_per_worker_bytes": per_task * bands_at_once(per_task,
                                                                plan["threads_per_worker"]),
            "output_bytes": _plans.ingest_bytes(grid), "partial_extra_bytes": plan["shards"] * 64}


_plans.register("ingest", _plan)
