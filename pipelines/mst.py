"""``terrain mst``: the grid minimum spanning forest of a DEM as one Dask graph.

Dask strategy
-------------
The library (:mod:`terrain.grid.mst`) supplies the phases; this module wires them:

1. ``mst-ingest`` (raster input only): :func:`pipelines.ingest.build_ingest_graph` writes
   the tile store *into the output store itself* (the temporary directory of
   :func:`terrain.io.outputs.atomic_output`), so the result holds the DEM and its forest.
2. ``mst-prepare``: creates the ``mst`` array (uint8, chunks = tiles, shards = the DEM's).
3. ``mst-group``: one task per group (a quadtree node of ``k × k`` tiles): reads the group
   once, runs Borůvka on all its tiles (one batch = one GPU launch per round), reduces each
   tile forest and merges the group's quadtree levels. On the CPU a group is a shard of the
   store. On the GPU a group is one *super-tile*: a square of shards as large as the device
   holds with one super-tile per task thread in flight (:func:`super_tile_group_tiles`; at
   most that many run at once in a process, whatever the scheduler's threads), its whole forest computed in core (:func:`terrain.grid.mst_device.device_mst`) and reduced
   to its boundary graph on the device
   (:func:`terrain.grid.reduce.reduce_block_device`), no in-group merges
   (:func:`terrain.grid.mst.group_forest` with ``in_core``); only the mask and the boundary
   graph come back to the host. Each task thread drives the device on a stream of its own,
   so one thread's reads (decompression) and writes overlap the others' device work. It
   writes the tile forests as the group's provisional mask (a writer owns whole shards) and
   returns the group's reduced graph (up) and its changes (down), as separate outputs.
   On the GPU, when the whole grid fits the device, steps 3-6 are one task instead,
   ``mst-in-core``: it reads the whole DEM, computes its forest in core and writes the mask
   (no reduction, no merges: nothing above a single node).
4. ``mst-merge``: one task per quadtree node above the shards, up to the root.
5. ``mst-expand``: top down, one task per node: routes its own and its ancestors' changes
   to its four children.
6. ``mst-write``: one task per shard: reads its provisional mask, applies the changes, writes.
7. ``mst-finish``: sums the statistics and writes them into the store's attributes.

Text in, GPU, grid fits the device, no scheduler asked for (``--scheduler`` unset, no
``--resume``; with ``--gpus N`` on GPU 0): no task graph at all (:func:`_text_in_core`). The text is
parsed on the device (:mod:`terrain.io._parse_gpu`), the forest computed from the parsed
array where it lies, and the store (``elevation``, statistics, ``mst``) written by a thread
pool while the forest runs -- the same store the graph writes, without the Zarr round trip
between ingest and forest, the cluster's start-up or per-task overheads. A cluster would
only add those: the work is one device's. ``--scheduler threads|local|ADDRESS`` still runs
the graph below.

Steps 3-6 are the walks of :mod:`terrain.tiles.quadtree` (the same plan and walk as the
in-memory :func:`terrain.grid.mst.grid_mst`), their steps made tasks by
:class:`pipelines.quadtree.TaskGraph` (one task dict written during the walk, checkpoints
wrapped in as the tasks are made: ~0.1 s for the 7532 tasks of the 10-ft Neuse size).

One decision, :func:`mst_route`, picks the path (text in core, text streamed, in core,
super-tiles, tiles) for :func:`run_mst` and ``--dry-run`` alike. With ``--gpus N`` every
path runs as one GPU runs it, on GPU 0 of the N, in this process: each path is one device's
(a store of any size goes through super-tiles), and spreading was measured slower
(:data:`SPREADS`); the summary's ``note`` says "fits one GPU: ... on GPU 0 of N".
``run_mst(spread="devices")`` spreads the super-tile groups over the N devices of this
process instead (group ``(i, j)`` on device ``(i + j) % N`` under ``cupy.cuda.Device``, a
stream per thread and device): our own equivalent of a worker per GPU, because the level
graphs then never cross a process and no worker process starts, compiles or imports (the
costs that made the worker processes slower); dask-cuda's ``LocalCUDACluster`` would be the
worker processes again (:mod:`pipelines.cluster` says why we do not depend on it). Spread
over processes (``run_mst(spread="processes")``, or a batch's GPU cluster), each GPU has a worker process
of its own (:func:`pipelines.cluster.open_scheduler`); the shards' ``mst-group`` and
``mst-write`` tasks are pinned to them in Z-order runs
(:func:`pipelines.cluster.assign_groups`), loosely, so a lost worker's shards run elsewhere;
merges and expansions go wherever the scheduler puts them. The forest does not depend on
where a task ran.

Level graphs are task results held by Dask (O(perimeter) per node, written once); each
shard of the DEM is read once and each shard of the mask written once, then read and
written again only when a change reaches it (``mst-write`` skips the others). Every such
read and write of whole shards goes through :func:`terrain.tiles.store.read_block` /
``write_block`` (:mod:`terrain.tiles._shards`: each task thread decodes and encodes its
own shards, the GIL released; zarr's synchronous API would funnel every chunk of every
thread through one event-loop thread: ~125 MB/s of elevations for 8 threads on the H100
host).
The bytes are counted: logical (uncompressed) bytes of the DEM read and of the mask written
and read, and the bytes of the level graphs and changes passed between tasks.
"""

import contextlib
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import dask
import numpy as np
import zarr

from terrain.io.outputs import atomic_output
from terrain.io.outputs import check_outputs
from terrain.backend import get_backend
from terrain.errors import InputError
from terrain.grid.edges import WeightSum
from terrain.io.georef import check_weight_units, finish_store
from terrain.grid.merge import Changes, apply_changes
from terrain.grid.mst import (PHASES, MSTSpec, expand_step, finish_stats, group_forest,
                               merge_step, super_tile_fits, super_tile_side)
from terrain.grid.mst_device import device_mst, fits_on_device
from terrain.tiles.quadtree import walk_down, walk_up
from terrain.tiles import is_store, open_store
from terrain.tiles.store import check_tile_size, tiles_per_shard, write_coordinates
from terrain.tiles.store import read_block, window_shards, write_block
from terrain.tiles._shards import fast_layout

from ._resume import checkpointed, drop_checkpoints, prepare_resume, run_key
from .mst_stream import text_streamed, text_streamed_fits
from .cluster import (active_gpu_workers, assign_groups, compute, gpu_count, gpu_count_backend,
                      gpu_worker_threads, gpu_workers_free_bytes, open_scheduler,
                      workers_per_gpu)
from .quadtree import TaskGraph

__all__ = ["build_mst_graph", "run_mst", "mst_command", "default_output", "write_geotiff",
           "mst_route", "MSTRoute", "PATHS"]

# tasks whose results are checkpointed in the partial output (``--resume``)
CHECKPOINTED = ("ingest-create", "ingest-band", "mst-prepare", "mst-in-core", "mst-group",
                "mst-merge", "mst-write")


#: the ``mst`` mask's codec: Blosc LZ4 level 5 after a bit shuffle (the cost-distance
#: backlinks' codec). On a synthetic 1024² forest (2-core VM, one thread): 0.46 of the bytes
#: at 1.0 GB/s encoding and 1.3 GB/s decoding; zstd level 1 (the codec before) keeps 0.35
#: at 0.2 / 0.6 GB/s, and the mask is written twice and read once: on the 10-ft size on one
#: H100 its encoding was most of the 113 write task-seconds. Blosc is also what the
#: whole-shard reader and writer (:mod:`terrain.tiles._shards`) handle with the GIL released.
MASK_COMPRESSORS = (zarr.codecs.BloscCodec(cname="lz4", clevel=5, shuffle="bitshuffle"),)

#: threads writing the in-core path's mask shards
GPU_IO_THREADS = 8


#: the paths of ``terrain mst`` (:func:`mst_route`), as the summary and ``--dry-run`` name them
PATHS = {"text-in-core": "the text in core", "text-streamed": "the text streamed",
         "in-core": "in core", "super-tiles": "super-tiles", "tiled": "tiles"}

#: ``spread`` of :func:`mst_route`: how a ``--gpus N`` job (N > 1) runs. "auto": on GPU 0 of
#: the N, in this process, whatever its path -- every path is served by one device (the
#: super-tiles take a store of any size), and spreading was measured slower: the 10-ft store
#: (50220 × 70520) took 50.1 s on 2 H200s and 53.8 s on 4 as worker processes against 23.0 s
#: in process on one H100 (docs/benchmarks.md, "Several GPUs" ff.): that run is bound by the
#: host's shard decoding and encoding, the device busy ~15 % of the time; the 40-ft size
#: 9.15 s as super-tiles on 2 H200s against 6.43 s in core on one. "processes": the task
#: graph on one worker process per GPU (:func:`pipelines.cluster.open_scheduler`), the groups
#: spread over them. "devices": the super-tile groups of this process spread over its N
#: devices (:func:`build_mst_graph`'s ``devices``; no level graph crosses a process: the
#: worker-process path's 2.7-s penalty at the 40-ft size was mostly fresh processes compiling
#: and moving level graphs); the other paths stay on GPU 0. Measured no faster than "auto"
#: (a 50220 × 35260 store on 4 H200s: 12.86 s over 4 devices, 13.19 s over 2, 13.00 s on
#: GPU 0, 13.03 s with ``--gpus 1``; docs/benchmarks.md, "``--gpus N`` never slower than
#: one GPU"): the shards' decoding and encoding bound the run, not the devices.
SPREADS = ("auto", "processes", "devices")


@dataclass(frozen=True)
class MSTRoute:
    """Where ``terrain mst`` runs (:func:`mst_route`).

    Attributes
    ----------
    path : str
        A key of :data:`PATHS`: "text-in-core" (:func:`_text_in_core`), "text-streamed"
        (:func:`pipelines.mst_stream.text_streamed`), else the task graph of
        :func:`build_mst_graph`: "in-core" (one task), "super-tiles" or "tiled".
    gpus : int
        GPUs asked for (``--gpus``); 0 without.
    workers : bool
        The task graph runs on one worker process per GPU (else in this process, on its
        device 0: the first of the GPUs).
    devices : int
        Devices of this process the super-tile groups spread over (1: GPU 0 only).
    note : str or None
        What the summary and the terminal say about it ("fits one GPU: ... on GPU 0 of N").
    """

    path: str
    gpus: int = 0
    workers: bool = False
    note: str = None
    devices: int = 1

    @property
    def graph(self):
        """True when the path is a task graph (:func:`build_mst_graph`)."""
        return self.path not in ("text-in-core", "text-streamed")

    @property
    def gpus_used(self):
        """GPUs the run computes on (0: the CPU)."""
        if self.workers:  # a grid in core: on the first worker (build_mst_graph)
            return 1 if self.path == "in-core" else self.gpus
        return self.devices if (self.path != "tiled" or self.gpus) else 0

    def describe(self):
        """One line for ``--dry-run``.

        >>> MSTRoute("super-tiles", 2, note="fits one GPU: super-tiles on GPU 0 of 2").describe()
        'super-tiles (fits one GPU: super-tiles on GPU 0 of 2)'
        """
        where = (f" over {self.gpus} GPU worker processes" if self.workers
                 else f" over {self.devices} GPUs in process" if self.devices > 1 else "")
        return self.path + where + (f" ({self.note})" if self.note else "")


def mst_route(inp, spec, be, scheduler=None, in_core="auto", gpus=0, resume=False,
              free=None, spread="auto", text=None, cluster_active=None):
    """The path of ``terrain mst INPUT``: the one decision :func:`run_mst` takes and
    ``--dry-run`` prints.

    Parameters
    ----------
    inp : path of the input (raster or tile store)
    spec : MSTSpec
    be : terrain.backend.Backend
    scheduler : str or None
        ``--scheduler``: any given runs the task graph.
    in_core : {"auto", "groups", False}
        As :func:`build_mst_graph`'s; only "auto" takes the text paths.
    gpus : int
        GPUs asked for (0: no ``--gpus``).
    resume : bool
        ``--resume`` runs the task graph (its checkpoints).
    free : int, optional
        Free bytes of the device (device 0 of this process); None: asked of it.
    spread : {"auto", "processes", "devices"}
        With ``gpus`` > 1: :data:`SPREADS`.
    text : bool, optional
        Whether ``inp`` is an ESRI/GRASS ASCII grid (None: looked at).
    cluster_active : bool, optional
        A cluster is already active (a batch's); None: looked up.

    Returns
    -------
    MSTRoute

    Examples
    --------
    >>> from terrain.backend import Backend
    >>> from terrain.grid.mst import MSTSpec
    >>> gpu = Backend("gpu", None)  # the device's facts are given, not asked
    >>> mst_route("dem.asc", MSTSpec((1000, 1000), 512), gpu, gpus=2, free=80 << 30,
    ...           text=True).note
    'fits one GPU: the text in core on GPU 0 of 2'
    >>> mst_route("dem.zarr", MSTSpec((50220, 70520), 512), gpu, gpus=2, free=80 << 30,
    ...           text=False).describe()
    'super-tiles (fits one GPU: super-tiles on GPU 0 of 2)'
    >>> mst_route("dem.asc", MSTSpec((1000, 1000), 512), Backend("cpu", None)).path
    'tiled'
    """
    if spread not in SPREADS:
        raise InputError(f"mst: spread {spread!r} is not one of {', '.join(SPREADS)}")
    gpus = int(gpus or 0)
    if not be.is_gpu:
        return MSTRoute("tiled")
    from . import cluster
    if cluster_active is None:
        cluster_active = cluster._active_client is not None
    if free is None:
        free = _free_bytes(be)
    fits = fits_on_device(spec.shape, be, free=free)
    path = None
    workers = gpus > 0 and spread == "processes"
    if (in_core == "auto" and not resume and scheduler is None and not cluster_active
            and not workers):
        if text is None:
            from terrain.io import looks_like_ascii_grid
            text = not is_store(inp) and looks_like_ascii_grid(inp)
        if text and fits:
            path = "text-in-core"
        elif text and text_streamed_fits(spec, free):
            path = "text-streamed"
    if path is None:
        path = ("in-core" if in_core == "auto" and fits
                else "super-tiles" if in_core in ("auto", "groups") else "tiled")
    devices = gpus if gpus > 1 and spread == "devices" and path == "super-tiles" else 1
    note = None
    if gpus > 1 and not workers and devices == 1:
        note = f"fits one GPU: {PATHS[path]} on GPU 0 of {gpus}"
    return MSTRoute(path, gpus, workers, note, devices)


def _free_bytes(be):
    """Free bytes of this process's device (:func:`mst_route` asks it here: tests inject)."""
    from terrain.grid.mst_device import free_device_bytes
    return free_device_bytes(be)


def default_output(input_path):
    """``INPUT``'s name with ``.mst.zarr`` (``neuse40.asc`` -> ``neuse40.mst.zarr``)."""
    p = Path(input_path)
    return p.with_name((p.stem if p.suffix else p.name) + ".mst.zarr")


def _prepare(out_path, spec, tile_shard, geo, upstream):
    """Create the ``mst`` array (and, for a store input, the georeference) in the output."""
    del upstream  # only orders this task after the ingest
    group = zarr.open_group(store=str(out_path), mode="a", zarr_format=3)
    if "x" not in group:
        gt = geo["geotransform"]
        write_coordinates(group, spec.shape, gt, geo.get("crs"))
        group.attrs.update({"geotransform": list(gt), "crs": geo.get("crs"),
                            "source": geo.get("source")})
    side = spec.tile * tile_shard
    arr = group.create_array("mst", shape=spec.shape, dtype="uint8",
                             chunks=(spec.tile, spec.tile), shards=(side, side), fill_value=0,
                             dimension_names=("y", "x"),
                             compressors=MASK_COMPRESSORS,
                             config={"write_empty_chunks": False}, overwrite=True)
    arr.attrs.update({"bits": "bit d set: edge (cell, d) in the forest; d: E=0, S=1, SE=2, SW=3"})
    return str(out_path)


def _group_task(dem_path, out_path, spec, backend, key_bits, super_tile, prepared, device_mask,
                devices, level, i, j):
    """A group's forest (read, Borůvka, reduction, in-group merges) and its provisional
    mask, written to the output's ``mst`` -- or, with ``device_mask`` (a
    :class:`pipelines.mst_stream.DeviceGrid`), put there on the device until the write
    tasks apply the changes: the mask is then written once and never read back. With
    ``devices`` > 1 the group runs on device ``(i + j) % devices`` of this process (the
    in-process spread: neighbouring groups on different devices)."""
    on_device = super_tile and get_backend(backend).is_gpu
    with _super_tile_slot() if on_device else contextlib.nullcontext(), \
            _on_device((i + j) % devices, backend) if on_device and devices > 1 \
            else contextlib.nullcontext():
        t0 = time.perf_counter()
        win = spec.window(level, i, j)
        shape = (win[1] - win[0], win[3] - win[2])
        in_core = on_device and super_tile_fits(shape, backend)
        if hasattr(dem_path, "key"):  # a grid on this process's device (pipelines.mst_stream)
            from .mst_stream import device_get
            z = device_get(dem_path, win, on_device=in_core)
        else:
            z = read_block(dem_path, "elevation", win, out=np.empty(shape, np.float32))
        g = group_forest(spec, z, win, level, backend, time.perf_counter() - t0, key_bits,
                         in_core)
        t0 = time.perf_counter()
        if device_mask is None:
            write_block(prepared, "mst", win, g.mask)
        else:
            from .mst_stream import device_put
            device_put(device_mask, win, g.mask)
        g.times["write"] = time.perf_counter() - t0
    # bytes of the store read and written (a grid on the device is neither)
    stats = {"times": g.times, "read_bytes": 0 if hasattr(dem_path, "key") else z.nbytes,
             "written_bytes": 0 if device_mask is not None else g.mask.nbytes,
             "graph_bytes": g.graph.nbytes + g.changes.nbytes, "forest_sum": g.forest_sum.acc,
             "forest_edges": g.forest_edges, "vertices": g.vertices}
    return g.graph, g.changes, stats


def _on_device(index, backend):
    """CuPy's current device set to ``index`` for the calling thread (a context)."""
    return get_backend(backend).xp.cuda.Device(index)


_slots = {}
_slots_lock = threading.Lock()


def _super_tile_slot():
    """This process's semaphore for the super-tile groups in flight: at most
    :func:`pipelines.cluster.gpu_worker_threads` of one device at once, whatever the
    scheduler's thread count (:func:`super_tile_group_tiles` sized the groups, in host and
    device memory, for that many)."""
    with _slots_lock:
        if "slot" not in _slots:
            _slots["slot"] = threading.BoundedSemaphore(gpu_worker_threads(["0"]))
        return _slots["slot"]


def _write_task(out_path, spec, device_mask, level, i, j, incoming, own):
    """Apply a group's changes to its provisional mask: only the shards that some change
    reaches are read, changed and written again (the others already hold their final
    bytes); each through :func:`terrain.tiles.store.read_block` / ``write_block``. With
    ``device_mask``, every shard of the group is taken from the device, changed and
    written (its first and only write)."""
    win = spec.window(level, i, j)
    changes = Changes.concat([incoming, own])
    times = {"read": 0.0, "expand": 0.0, "write": 0.0}
    nbytes = 0
    with _write_slot():
        nbytes = _apply_to_shards(out_path, spec, win, changes, times, device_mask)
    # every change reaches exactly one shard: the sums here add up to the forest's
    changes_sum = WeightSum().add(changes.added_w).add(changes.dropped_w, sign=-1)
    return {"times": times, "read_bytes": nbytes if device_mask is None else 0,
            "written_bytes": nbytes,
            "changes_sum": changes_sum.acc,
            "changes_edges": len(changes.added) - len(changes.dropped)}


#: write tasks reading and writing mask shards at once in a process: their buffers, not
#: the scheduler's thread count (the cores), bound the RSS of the write phase
WRITE_SLOTS = 16


def _write_slot():
    """This process's semaphore of :data:`WRITE_SLOTS` write tasks."""
    with _slots_lock:
        if "write" not in _slots:
            _slots["write"] = threading.BoundedSemaphore(WRITE_SLOTS)
        return _slots["write"]


def _apply_to_shards(out_path, spec, win, changes, times, device_mask=None):
    """:func:`_write_task`'s reads, changes and writes; returns the mask bytes read."""
    nbytes = 0
    every = device_mask is not None
    for shard_win, part in _changes_by_shard(out_path, spec, win, changes, every):
        t0 = time.perf_counter()
        if every:
            from .mst_stream import device_get
            mask = device_get(device_mask, shard_win, on_device=False)
        else:
            mask = read_block(out_path, "mst", shard_win)
        t1 = time.perf_counter()
        apply_changes(mask, shard_win[0], shard_win[2], spec.shape[1], part)
        t2 = time.perf_counter()
        write_block(out_path, "mst", shard_win, mask)
        times["read"] += t1 - t0
        times["expand"] += t2 - t1
        times["write"] += time.perf_counter() - t2
        nbytes += mask.nbytes
    return nbytes


def _changes_by_shard(out_path, spec, win, changes, every=False):
    """``[(shard window, its changes)]`` for the shards of the ``mst`` array inside ``win``
    that hold a change's cell (``every``: all its shards), in row-major shard order; the
    whole window with all the changes when the mask's shards are not known (or ``win`` cuts
    one), and nothing when there are no changes (and not ``every``)."""
    if len(changes.added) + len(changes.dropped) == 0 and not every:
        return []
    layout = fast_layout(zarr.open_array(store=str(out_path), path="mst", mode="r"))
    if layout is None or window_shards(layout, win) is None:
        return [(win, changes)]
    (R, C), (rows, cols), ncols = layout.shard, spec.shape, spec.shape[1]

    def shard_of(ids):
        cells = np.asarray(ids, np.int64) >> 2
        return (cells // ncols) // R * (-(-cols // C)) + (cells % ncols) // C

    sa, sd = shard_of(changes.added), shard_of(changes.dropped)
    if every:
        shards = [si * (-(-cols // C)) + sj for si, sj in window_shards(layout, win)]
    else:
        shards = np.unique(np.concatenate([sa, sd]))
    out = []
    for s in shards:
        si, sj = divmod(int(s), -(-cols // C))
        shard_win = (si * R, min((si + 1) * R, rows), sj * C, min((sj + 1) * C, cols))
        out.append((shard_win, changes.take(sa == s, sd == s)))
    return out


def _finish(out_path, spec, group_stats, node_stats, writes, meta):
    """Sum the statistics; store them in the output's attributes; return the summary.

    The changes' weights and counts come summed by the write tasks (each change is applied
    by one), so no task holds all the changes at once."""
    times = {p: 0.0 for p in PHASES}
    totals = {"read_bytes": 0, "written_bytes": 0, "graph_bytes": 0}
    fsum, fedges, verts = WeightSum(), 0, 0
    for s in list(group_stats) + list(node_stats) + list(writes):
        for p, v in s.get("times", {}).items():
            times[p] += v
        for key in totals:
            totals[key] += int(s.get(key, 0))
        if "forest_sum" in s:
            fsum.merge(WeightSum(s["forest_sum"]))
            fedges += s["forest_edges"]
            verts += s["vertices"]
        if "changes_sum" in s:
            fsum.merge(WeightSum(s["changes_sum"]))
            fedges += s["changes_edges"]
    total, edges = finish_stats(fsum, fedges, Changes())
    summary = {"total_weight": total, "edges": int(edges), "trees": int(verts - edges),
               "vertices": int(verts), "rows": spec.shape[0], "cols": spec.shape[1],
               "tile": spec.tile, "levels": spec.levels, "connectivity": spec.connectivity,
               "weight": spec.weight, **meta,
               "phase_seconds": {p: round(v, 6) for p, v in times.items()}, **totals}
    zarr.open_group(store=str(out_path), mode="r+").attrs.update({"mst": summary})
    return summary


def _in_core_task(dem_path, spec, backend, prepared):
    """The whole grid at once on the device: read, forest, write (the in-core path)."""
    from concurrent.futures import ThreadPoolExecutor

    from terrain.grid.cost_outputs import read_layer
    t0 = time.perf_counter()
    z = read_layer(dem_path, "elevation", np.float32)  # shard by shard, a pool of threads
    t1 = time.perf_counter()
    forest = device_mst(z, spec.connectivity, spec.model, spec.hlen, backend)
    mask = forest.mask.get()
    t2 = time.perf_counter()
    rows, cols = spec.shape
    side = spec.tile * tiles_per_shard(spec.tile, spec.shape)
    shards = [(r, min(r + side, rows), c, min(c + side, cols))
              for r in range(0, rows, side) for c in range(0, cols, side)]
    with ThreadPoolExecutor(min(len(shards), GPU_IO_THREADS)) as pool:
        list(pool.map(lambda w: write_block(prepared, "mst", w, mask[w[0]:w[1], w[2]:w[3]]),
                      shards))
    t3 = time.perf_counter()
    return {"times": {"read": t1 - t0, "boruvka": t2 - t1, "write": t3 - t2},
            "read_bytes": z.nbytes, "written_bytes": mask.nbytes,
            "forest_sum": forest.weight_sum.acc, "forest_edges": forest.edges,
            "vertices": forest.vertices}


def _text_in_core(grid, out_path, spec, shard, backend, tile, key_bits="auto"):
    """ASCII grid -> device -> forest, the store written beside it (the text in-core path).

    The whole grid fits the device (:func:`fits_on_device`), so nothing is gained from a
    round trip through the store. The text goes to the device and is parsed there
    (:func:`terrain.io._parse_gpu.parse_grid_on_device`; when the text does not fit beside
    the forest's arrays, or is not a valid grid, on the CPU's thread pool instead, each block
    copied to the device as soon as it is parsed). The forest then runs on the device while
    the pool brings the elevations back shard by shard (pinned buffers, a stream per thread)
    and writes the ``elevation`` shards; then the mask's shards the same way. The store's
    contents are those of the ingest + ``mst-in-core`` tasks (the same writers and
    statistics), so the output is the same. Returns the summary of :func:`_finish`; its
    ``wall_seconds`` holds the wall seconds of each step.
    """
    import os
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from terrain.grid.mst_device import device_bytes, free_device_bytes
    from terrain.io._parse import load_kernels
    from terrain.io._parse_gpu import parse_device_bytes, parse_grid_on_device

    from .ingest import _band_stats, _create, _finish as finish_ingest, default_compressors
    from .ingest import parse_whole_grid, write_window
    from .mst_start import take_prefetched_text

    cp = get_backend(backend).xp
    rows, cols = spec.shape
    side = spec.tile * shard
    wall = {}
    t0 = time.perf_counter()
    # the band statistics' Numba kernel: loaded while the text goes to the device
    threading.Thread(target=load_kernels, daemon=True).start()
    with ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="terrain-mst") as pool:
        created = pool.submit(_create, out_path, grid, tile, default_compressors())
        zd = None
        text = take_prefetched_text(grid.path)  # the data section, copied at start-up
        held = 0 if text is None else text.nbytes
        if (parse_device_bytes(grid) + device_bytes(spec.shape) - held
                <= 0.9 * (free_device_bytes(backend) + held)):
            zd = parse_grid_on_device(grid, backend, pool, times=wall, text=text)
        del text
        z = None
        if zd is None:  # on the CPU (also for the error message of a bad text)
            z = np.empty((rows, cols), np.float32)
            zd = cp.empty((rows, cols), cp.float32)

            def to_device(r0, r1):
                zd[r0:r1].set(z[r0:r1])

            z, band_stats = parse_whole_grid(grid, pool, out=z, on_block=to_device)
            wall["cpu-parse"] = time.perf_counter() - t0
        cp.cuda.Device().synchronize()
        t1 = time.perf_counter()
        created.result()
        shards = [(r0, min(r0 + side, rows), c0, min(c0 + side, cols))
                  for r0 in range(0, rows, side) for c0 in range(0, cols, side)]
        staging = _PinnedStaging(side * side * 4)
        if z is None:  # each shard from the device through a pinned buffer, then written
            def write_shard(r0, r1, c0, c1):
                band = staging.fetch(cp, zd[r0:r1, c0:c1])
                write_window(out_path, band, r0, c0)
                return _band_stats(band)
        else:
            def write_shard(r0, r1, c0, c1):
                write_window(out_path, z[r0:r1, c0:c1], r0, c0)

        writes = [pool.submit(write_shard, *w) for w in shards]
        prepared = _prepare(out_path, spec, shard, {}, None)
        forest = device_mst(zd, spec.connectivity, spec.model, spec.hlen, backend)
        cp.cuda.Device().synchronize()
        t3 = time.perf_counter()
        wall["mst"] = t3 - t1
        def write_mask(r0, r1, c0, c1):  # through the pinned buffers too
            write_block(prepared, "mst", (r0, r1, c0, c1),
                        staging.fetch(cp, forest.mask[r0:r1, c0:c1]))

        mask_writes = [pool.submit(write_mask, *w) for w in shards]
        written = [f.result() for f in writes]
        if z is None:
            band_stats = written
        t4 = time.perf_counter()
        wall["elevation-write-tail"] = t4 - t3
        for f in mask_writes:
            f.result()
        t5 = time.perf_counter()
        wall["mask-write"] = t5 - t4
        del zd
        nbytes = rows * cols * 4
    finish_ingest(out_path, band_stats)
    stats = {"times": {"read": t1 - t0, "boruvka": t3 - t1, "write": t5 - t3},
             "read_bytes": nbytes, "written_bytes": rows * cols,
             "forest_sum": forest.weight_sum.acc, "forest_edges": forest.edges,
             "vertices": forest.vertices}
    meta = {"backend": backend, "group_tiles": 1 << spec.plan(shard).group_level,
            "key_bits": key_bits, "path": "text-in-core",
            "parse": "cpu" if z is not None else "gpu",
            "wall_seconds": {k: round(v, 6) for k, v in wall.items()}}
    return _finish(prepared, spec, [stats], [], [], meta)


class _PinnedStaging:
    """One pinned host buffer per thread (and a stream), for device -> host copies of
    shards: a pinned copy runs at the bus's speed, a pageable one at a fraction of it."""

    def __init__(self, nbytes):
        import threading
        self.nbytes = nbytes
        self.local = threading.local()

    def fetch(self, cp, window):
        """``window`` (a CuPy 2-D view) as a NumPy array in this thread's pinned buffer."""
        import cupyx
        loc = self.local
        if not hasattr(loc, "buf"):
            loc.buf = cupyx.empty_pinned(self.nbytes, np.uint8)
            loc.stream = cp.cuda.Stream(non_blocking=True)
        with loc.stream:
            dense = cp.ascontiguousarray(window)
            out = loc.buf[: dense.nbytes].view(dense.dtype).reshape(dense.shape)
            dense.get(stream=loc.stream, out=out)
        loc.stream.synchronize()
        return out


def build_mst_graph(dem_path, out_path, spec, group_tiles, backend="cpu", upstream=None,
                    geo=None, key_bits="auto", in_core="auto", partial=None, workers=(),
                    device_mask=None, devices=1):
    """Dask graph computing the forest of the DEM in store ``dem_path`` into ``out_path``.

    Parameters
    ----------
    dem_path : path of the tile store holding ``elevation`` (may equal ``out_path``)
    out_path : path of the output store (an existing group, or created by ``upstream``)
    spec : MSTSpec
    group_tiles : int
        Tiles a side per group task: the store's shard.
    backend : str
        Backend name each task resolves.
    upstream : Delayed, optional
        What must run first (the ingest).
    geo : dict, optional
        ``geotransform``/``crs``/``source`` to copy when the output has no coordinates.
    key_bits : {"auto", 32, 64}
        Borůvka's packed key width (:func:`terrain.grid._boruvka.boruvka_tiles`).
    in_core : {"auto", "groups", False}
        On the GPU: "auto" computes the whole grid in one task when it fits the device
        (``mst-in-core``: read, :func:`terrain.grid.mst_device.device_mst`, write), else
        each shard as one super-tile; "groups" always takes the shards as super-tiles;
        False runs tile batches. Ignored on the CPU. The forest is the same.
    partial : path, optional
        The partial output holding the checkpoints of :data:`CHECKPOINTED` tasks
        (``--resume``); None: no checkpoints.
    workers : list of str
        GPU workers (:func:`pipelines.cluster.active_gpu_workers`): the shards are spread over
        them (:func:`pipelines.cluster.assign_groups`), each worker reading, computing and
        writing its own -- unless the whole grid fits one device (``in_core="auto"``): then
        the in-core task runs on the first worker, as fast as one GPU can (the summary's
        ``note`` says so). Empty: the scheduler places every task.
    device_mask : pipelines.mst_stream.DeviceGrid, optional
        A uint8 grid on this process's device holding the provisional mask between the
        group and write tasks (:mod:`pipelines.mst_stream`); None: the output's ``mst``.
    devices : int
        On the GPU, super-tiles: spread the groups over this process's first ``devices``
        devices (group ``(i, j)`` on device ``(i + j) % devices``); 1: the current device.

    Returns
    -------
    dask.delayed.Delayed
        Computing it returns the summary dict (also stored in the ``mst`` attribute).
    """
    if in_core not in ("auto", "groups", False):
        raise InputError(f"build_mst_graph: in_core {in_core!r} is not 'auto', 'groups' or False")
    gpu = get_backend(backend).is_gpu
    # the GPU workers' devices, as they see them (this process need not touch a device)
    free = gpu_workers_free_bytes(workers) if gpu and workers else None
    if gpu and in_core in ("auto", "groups"):
        group_tiles = super_tile_group_tiles(spec, group_tiles, backend, workers, free)
    plan = spec.plan(group_tiles)
    # out_path names the run; the group side (which the device's memory may change between a
    # run and its --resume) what a group task's (i, j) covers
    token = dask.base.tokenize(str(dem_path), str(out_path), spec, plan.group_level)
    graph = TaskGraph("mst", token, partial, CHECKPOINTED if partial is not None else ())
    call = graph.call
    shard = tiles_per_shard(spec.tile, spec.shape)
    prepared = call(_prepare, out_path, spec, shard, geo or {}, upstream, key=("prepare",))
    n_gpus = len(workers) // workers_per_gpu() if workers else 0
    if gpu and in_core == "auto" and fits_on_device(spec.shape, backend, free=free):
        # the whole grid on one device, also with several GPUs: spreading a grid that fits
        # one device over them was slower (40-ft size, 2 H200s: super-tiles 9.15 s against
        # 6.43 s in core), and more GPUs must never be slower than one
        stats = call(_in_core_task, dem_path, spec, backend, prepared, key=("in-core",))
        meta = {"backend": backend, "group_tiles": 1 << plan.group_level, "key_bits": key_bits,
                "path": "in-core", **({"gpus": n_gpus} if workers else {})}
        if workers:
            graph.pin("in-core", (), workers[0])
        if n_gpus > 1:
            meta["note"] = f"fits one GPU: in core on GPU 0 of {n_gpus}"
        return graph.delayed(call(_finish, prepared, spec, [stats], [], [], meta,
                                  key=("finish",)))
    super_tile = gpu and in_core in ("auto", "groups")
    _, rest = walk_up(plan, (_group_task, dem_path, out_path, spec, backend, key_bits,
                             super_tile, prepared, device_mask, devices),
                      (merge_step, spec), call, nout=3, names=("group", "merge"))
    g = plan.group_level
    own = {node: r[:1] for node, r in rest.items()}
    stats = [rest[(g, i, j)][1] for (i, j) in plan.groups]
    node_rest, writes = walk_down(plan, (expand_step, spec), (_write_task, prepared, spec, device_mask), call,
                                  extra=own, node_nout=5, names=("expand", "write"))
    node_stats = ([r[1] for node, r in rest.items() if node[0] > g]
                  + [r[0] for r in node_rest.values()])
    for (i, j), worker in assign_groups(plan.groups, list(workers)).items():
        graph.pin("group", (i, j), worker)
        graph.pin("write", (i, j), worker)
    meta = {"backend": backend, "group_tiles": 1 << g, "key_bits": key_bits,
            "path": "super-tiles" if super_tile else "tiled"}
    if workers:
        meta["gpus"] = n_gpus
    if super_tile and devices > 1:
        meta["gpus_used"] = devices
    return graph.delayed(call(_finish, prepared, spec, stats, node_stats, list(writes.values()),
                              meta, key=("finish",)))


#: host bytes the super-tile groups in flight may hold, all GPU workers together
#: (:func:`super_tile_group_tiles`): the peak RSS does not grow with the cores or the GPUs
SUPER_TILE_HOST_BUDGET = 2 << 30


def super_tile_group_tiles(spec, shard_tiles, backend, workers=(), free=None):
    """Tiles a side of a super-tile group: a power-of-two multiple of the store's shard
    (``shard_tiles``; a writer owns whole shards), as large as
    :func:`terrain.grid.mst.super_tile_side` allows with one group in flight per task
    thread of a device -- :func:`pipelines.cluster.gpu_worker_threads`, the bound of
    ``_super_tile_slot`` for a local scheduler -- and :data:`SUPER_TILE_HOST_BUDGET` shared by them all
    (``free``: the workers' free device bytes).
    Larger groups: fewer tasks and small top levels; but at least one group per task thread
    (else threads, or GPUs, stand idle). The forest is the same.

    >>> super_tile_group_tiles(MSTSpec((5000, 5000), 512), 4, "cpu")
    4
    """
    if workers:
        in_flight = gpu_worker_threads(list(workers))  # per worker process
        host = SUPER_TILE_HOST_BUDGET // len(workers)
        per_device = in_flight * workers_per_gpu()
    else:  # the scheduler's threads: at most this many at once (_super_tile_slot)
        in_flight = per_device = gpu_worker_threads(["0"])
        host = SUPER_TILE_HOST_BUDGET
    # the device holds its processes' groups; the host budget is per worker process
    g = super_tile_side(spec, backend, per_device, host * per_device // in_flight,
                        min_tiles=shard_tiles, free=free)
    side = spec.tile * g
    while g > shard_tiles and ((-(-spec.shape[0] // side)) * (-(-spec.shape[1] // side))
                               < in_flight * max(1, len(workers))):
        g //= 2
        side //= 2
    return g


def run_mst(input_path, output_path=None, tile=512, connectivity=8, weight="max", backend=None,
            scheduler=None, overwrite=False, geotiff=None, key_bits="auto", in_core="auto",
            resume=False, cog=True, gpus=None, spread="auto"):
    """Compute the forest of ``input_path`` (raster or tile store) into ``output_path``.

    Returns the summary dict. See ``terrain mst --help``; ``key_bits`` picks Borůvka's key
    width (:func:`terrain.grid._boruvka.boruvka_tiles`, "auto" on the command line),
    ``in_core`` the GPU's path (:func:`build_mst_graph`); ``resume`` finishes the partial
    output a killed run of the same input and options left (the summary's ``reused_tasks``
    counts the tasks not run again). ``gpus`` (``"N"`` or ``"all"``): the run's path is the
    one a single GPU takes, on GPU 0 of the N, unless ``spread`` is "processes": then one
    worker process per GPU (:func:`pipelines.cluster.open_scheduler`), the shards spread
    over them; or "devices": the super-tiles spread over the N devices in this process
    (:func:`mst_route`, :data:`SPREADS` say why). The forest is the same.

    Examples
    --------
    >>> run_mst("data/sample.asc", "sample.mst.zarr", scheduler="threads")  # doctest: +SKIP
    """
    t_start = time.perf_counter()
    backend = gpu_count_backend(gpus, backend, input_path, scheduler)
    be = get_backend(backend)
    inp = Path(input_path)
    out = Path(output_path) if output_path else default_output(inp)
    check_outputs([inp], [out, geotiff], overwrite)
    check_tile_size(tile)
    if is_store(inp):
        store = open_store(inp)
        shape, tile, cellsize = store.shape, store.tile, store.cellsize
        geo = {"geotransform": list(store.geotransform), "crs": store.attrs.get("crs"),
               "source": str(inp.resolve())}
        shard = store.tiles_per_shard
    else:
        from terrain.io import open_grid
        grid = open_grid(inp)
        shape, cellsize = grid.shape, grid.cellsize
        geo = None
        shard = tiles_per_shard(tile, shape)
    check_weight_units(weight, geo["crs"] if geo else grid.crs, inp)
    spec = MSTSpec(tuple(int(s) for s in shape), int(tile), int(connectivity), weight,
                   tuple(float(c) for c in cellsize))
    route = mst_route(inp, spec, be, scheduler, in_core, gpu_count(gpus), resume,
                      spread=spread)
    key = run_key("mst", [inp], spec)
    with atomic_output(out, overwrite, inputs=[inp], key=key, resume=resume) as tmp:
        if resume:
            prepare_resume(tmp)
        summary = None
        if route.path == "text-in-core":
            summary = _text_in_core(grid, tmp, spec, shard, be.name, tile, key_bits)
            reused = 0
        elif route.path == "text-streamed":
            from .mst_start import take_prefetched_text
            take_prefetched_text(inp)  # a copy made at start-up (too large to be one)
            summary = text_streamed(grid, tmp, spec, shard, be.name, tile, key_bits)
            reused = 0
        if summary is None:  # (a text the device parse found invalid: the CPU says why)
            from .mst_start import take_prefetched_text
            take_prefetched_text(inp)  # a copy made at start-up: not this path's, free it
            if is_store(inp) and not tmp.exists():
                zarr.open_group(store=str(tmp), mode="w-", zarr_format=3)
                dem_path, upstream = inp, None
            else:
                from .ingest import build_ingest_graph
                upstream, _ = checkpointed(build_ingest_graph(inp, tmp, tile), tmp,
                                           CHECKPOINTED)
                dem_path = tmp
            # the graph's own path: the route's (a text path that fell back: its graph twin)
            graph_in_core = {"in-core": "auto", "text-in-core": "auto", "super-tiles": "groups",
                             "text-streamed": "groups"}.get(route.path, in_core)
            with open_scheduler(scheduler, cells=spec.shape[0] * spec.shape[1],
                                gpus=gpus if route.workers else None):
                graph = build_mst_graph(dem_path, tmp, spec, shard, be.name, upstream, geo,
                                        key_bits, graph_in_core, partial=tmp,
                                        workers=active_gpu_workers(), devices=route.devices)
                graph, reused = checkpointed(graph, tmp, CHECKPOINTED)
                (summary,) = compute(graph, label="mst")
        drop_checkpoints(tmp)
        summary["seconds"] = round(time.perf_counter() - t_start, 6)
        summary["output"] = str(out)
        summary["device"] = be.device_name()
        summary["reused_tasks"] = reused
        if route.gpus:
            summary["gpus"] = route.gpus
            summary["gpus_used"] = summary.get("gpus_used", route.gpus_used)
        if route.note and not summary.get("note"):
            summary["note"] = route.note
        zarr.open_group(store=str(tmp), mode="r+").attrs.update({"mst": summary})
        finish_store(tmp)
        if geotiff:  # from the partial: a failing GeoTIFF leaves no store behind either
            write_geotiff(tmp, geotiff, overwrite, cog=cog)
            summary["geotiff"] = str(geotiff)
    return summary


MST_BAND_DESCRIPTION = ("MST edges: bit d set = the forest holds the edge from this cell in "
                        "direction d (1 = E, 2 = S, 4 = SE, 8 = SW); 255 = nodata cell")


def write_geotiff(store_path, tif_path, overwrite=False, cog=True):
    """Write the ``mst`` mask of an output store as a uint8 (Cloud-Optimized) GeoTIFF.

    Nodata cells of the DEM (the output's ``elevation``, else the source store's) are 255,
    so they never read as 0 (a valid cell owning no edge); see :mod:`terrain.io.geotiff`.
    """
    from terrain.io.geotiff import write_geotiff as write_layer

    group = zarr.open_group(store=str(store_path), mode="r", use_consolidated=False)
    valid = None
    if "elevation" in group:
        valid = (store_path, "elevation")
    elif group.attrs.get("source") and is_store(group.attrs["source"]):
        valid = (group.attrs["source"], "elevation")
    return write_layer(store_path, "mst", tif_path, cog=cog, nodata=255, valid_from=valid,
                       description=MST_BAND_DESCRIPTION, resampling="nearest",
                       tags={"E": 1, "S": 2, "SE": 4, "SW": 8, "nodata": 255},
                       overwrite=overwrite)


def _format_summary(s):
    t = s["phase_seconds"]
    return "\n".join([
        f"mst       {s['output']}",
        f"grid      {s['rows']} x {s['cols']}, {s['connectivity']}-connected, weight {s['weight']}",
        f"forest    {s['edges']} edges, {s['trees']} trees, {s['vertices']} vertices",
        f"weight    {s['total_weight']:.10g}",
        f"tiles     {s['tile']} a side, {s['levels']} levels, backend {s['backend']} "
        f"({s['device']}), {s.get('path', 'tiled')} path",
        "phases    " + ", ".join(f"{p} {v:.2f}" for p, v in t.items()) + " (task seconds)",
        f"bytes     read {s['read_bytes']}, written {s['written_bytes']}, "
        f"level graphs {s['graph_bytes']}",
        f"time      {s['seconds']:.2f} s" + _on_gpus(s),
    ] + ([f"note      {s['note']}"] if s.get("note") else []) + ([f"resumed   {s['reused_tasks']} tasks reused from the interrupted run"]
         if s.get("reused_tasks") else []) + ([f"geotiff   {s['geotiff']}"] if s.get("geotiff") else []))


def _on_gpus(s):
    """`` on N GPUs`` (`` on 1 of N GPUs`` when fewer ran it) for a ``--gpus`` summary."""
    n, used = s.get("gpus"), s.get("gpus_used", s.get("gpus"))
    if not n:
        return ""
    return f" on {n} GPU{'s' if n > 1 else ''}" if used == n else f" on {used} of {n} GPUs"


def mst_command(args):
    """``terrain mst INPUT [-o OUT.zarr] [--tile N] [--connectivity 4|8] [--weight W] ...``."""
    from .graph import mst_graph_if_graph  # a graph file: the general-graph forest
    if (status := mst_graph_if_graph(args)) is not None:
        return status
    if getattr(args, "dry_run", False):
        from ._plan import dry_run_command
        return dry_run_command("mst", args)
    summary = run_mst(args.input, args.output, tile=args.tile, connectivity=args.connectivity,
                      weight=args.weight, backend=args.backend, scheduler=args.scheduler,
                      overwrite=args.overwrite, geotiff=args.geotiff,
                      resume=getattr(args, "resume", False),
                      cog=not getattr(args, "no_cog", False), gpus=getattr(args, "gpus", None))
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(_format_summary(summary))
    return 0
