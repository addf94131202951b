"""The tiled cost distance (``cost-distance --route tiled``) as an out-of-core Dask graph.

The steps of :mod:`terrain.grid.sssp_tiled` (thesis ch. 4-5, Haverkort's hierarchy) on the
one quadtree walk of :mod:`terrain.tiles.quadtree`. A *group* is a block of ``group_side``
cells (CPU: at most :data:`GROUP_SIDE`, at most a shard; GPU: :func:`gpu_sizing`) cut into
SSSP tiles of ``tile_sssp`` cells. Nothing grid-sized is held or passed between tasks: the
index lives in the output store (:class:`IndexStore`, ``sssp_index``), the run's boundary
labels in ``sssp_labels`` (removed at the end); tasks pass tokens and the sparse source
labels. The index, the top Dijkstra and the backends' sides of both (with ``--backend gpu``
at height 0 the level of tiles stays on the device and the top is solved there) are
:mod:`terrain.grid.sssp_tiled_store`'s; this module wires them into tasks. The layout,
tasks and memory bound: docs/cost-distance-tiled.md.
"""

import time

import numpy as np

from terrain.backend import get_backend
from terrain.errors import InputError
from terrain.io.remote import inside, is_remote, remove_tree
from terrain.grid.sssp import on_nodata
from terrain.grid.sssp_tiled import (MAX_GPU_TILE, DeviceLevel, TiledSpec, default_max_height,
                                     fill_group, shared_pass, sources_leaf, sources_merge,
                                     tt_capacity)
from terrain.grid.sssp_tiled_store import (INDEX_GROUP, LABELS_GROUP, IndexStore, StoredNodes,
                                           check_index_group, children_labels, release_run,
                                           ring_seeds, solve_stored_top, store_ops,
                                           stored_labels, write_index_leaf, write_index_node)
from terrain.io.zarr_meta import open_group
from terrain.tiles.quadtree import QuadtreePlan, walk_down, walk_up

from ._resume import (checkpoint_at, checkpoint_file, checkpoint_folder, kept_checkpoints,
                      run_checkpointed)
from .cluster import here_and_on_every_worker, worker_client
from .cost_distance_store import (StoreReader, prepare_layers, reached, source_arrays,
                                  summary_base, window_stats)
from .quadtree import TaskGraph, stage_seconds

__all__ = ["build_cost_distance_tiled", "tiled_spec", "resume_index", "solve_spec",
           "index_spec", "check_reuse_store", "GROUP_SIDE", "gpu_sizing"]

#: the checkpoint that says a CPU run's index is whole in its partial output: a resumed run
#: takes it as ``--reuse`` takes an earlier store's (:func:`resume_index`). A GPU run writes
#: none: reading its index back (the top solved from the store's pages) took as long as
#: building it again on the device (40-ft, H200: 55.3 s resumed against 55.5 s fresh)
INDEX_DONE = "cost-index-done"
GROUP_SIDE = 512       # cells a side of a group (phase 1 / phase 3 batch, index chunks)
#: the stages whose task-seconds the summary's ``stage_seconds`` gives (``top`` apart)
_TIMED = ("index-leaf", "index-merge", "index-check", "src-", "down-", "fill")


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
def _make_stores(index, labels, spec, height, prepared):
    del prepared  # after cost-prepare made the output store
    if index is not None:
        index.create(dict(index_spec(spec), height=int(height)))
    labels.create({})
    return True


def _index_written(root):
    """The :data:`INDEX_DONE` step: once the index's walk (``root``) has returned, a CPU
    run's index is whole in the store (its tasks write it themselves)."""
    del root
    return True


def _single_process():
    """Whether every task runs in this process (the top's labels may then stay on the device)."""
    client = worker_client()
    return client is None or len(client.scheduler_info()["workers"]) == 1


def _index_leaf_task(tspec, reader, backend, store, made, g, i, j):
    """Phase 1 and the group's own levels; written to the index. Returns a token."""
    del made
    write_index_leaf(tspec, reader, backend, store, g, i, j)
    return (g, i, j), None


def _index_merge_task(tspec, store, k, i, j, *kids):
    """A node's matrix from its four children's, written (:func:`write_index_node`)."""
    write_index_node(tspec, store, k, i, j)
    return (k, i, j), None


def _index_check_task(tspec, reader, store, prepared, g, i, j):
    """With ``--reuse``: :func:`check_index_group` once the DEM is in place (``prepared``:
    a raster input is ingested first)."""
    del prepared
    check_index_group(tspec, reader, store, g, i, j)
    return True


def _sources_leaf_task(tspec, store, reader, backend, srcs, name, ready, g, i, j):
    """:func:`sources_leaf` after checking that the group's sources are on data."""
    del ready
    rows, cols, _ = srcs
    r0, r1, c0, c1 = window = tspec.window(g, i, j)
    inside = np.nonzero((rows >= r0) & (rows < r1) & (cols >= c0) & (cols < c1))[0]
    if not inside.size:  # no source: every label in the group is infinite, nothing to read
        return ([] if g > tspec.height else [((g, i, j), None)]), {}
    store_ops(backend).wait_writes(store.path, [(i, j)])  # the source tiles' matrices
    z, f = reader(window)
    for s in inside.tolist():
        r, c = int(rows[s]) - r0, int(cols[s]) - c0
        if np.isnan(z[r, c]) or np.isnan(f[r, c]):
            raise on_nodata("source", s, rows[s], cols[s], not np.isnan(z[r, c]), name)
    up, own = sources_leaf(tspec, StoredNodes(store), reader, srcs, g, i, j)
    if g > tspec.height:  # pass on only the top nodes that reach a source
        up = [e for e in up if e[1] is not None]
    return up, {k: v for k, v in own.items() if v is not None}


def _sources_merge_task(tspec, store, k, i, j, *kids):
    up, own = sources_merge(tspec, StoredNodes(store), k, i, j, *kids)
    if k > tspec.height:  # pass on only the top nodes that reach a source
        up = [e for e in up if e[1] is not None]
    return up, {key: v for key, v in own.items() if v is not None}


def _collect_own(*owns):
    """The source labels every node of the sources' walk kept, in one dict."""
    out = {}
    for own in owns:
        out.update(own)
    return out


def _top(tspec, store, lstore, labels, top_cfg):
    """The top Dijkstra (:func:`~terrain.grid.sssp_tiled_store.solve_stored_top`) with the
    run's processes reached through the cluster; ``top_cfg``: ``(cache bytes, backend)``."""
    cache_bytes, backend = top_cfg
    return solve_stored_top(tspec, store, lstore, labels, cache_bytes, backend,
                            everywhere=here_and_on_every_worker, single_process=_single_process)


def _down_node_task(tspec, store, lstore, labels, top_cfg, ready, k, i, j, incoming):
    """Top-down step of node ``(k, i, j)`` above the groups (the root runs the top)."""
    del ready
    stats = _top(tspec, store, lstore, labels, top_cfg) if incoming is None else incoming
    if k <= tspec.height:
        meta, lab = stored_labels(store, lstore, k, (i, i + 1, j, j + 1))
        kids = children_labels(tspec, store, labels, meta, lab, k, (i, i + 1, j, j + 1))
        for key, (_, d) in kids.items():
            lstore.write_labels(k - 1, (key[1], key[1] + 1, key[2], key[2] + 1), {key: d})
    return (stats,) * 4


def _down_leaf_task(tspec, store, lstore, labels, top_cfg, ready, g, i, j, incoming):
    """Top-down inside group ``(g, i, j)`` to its tiles' final labels (``sssp_labels/L0``)."""
    del ready
    stats = _top(tspec, store, lstore, labels, top_cfg) if incoming is None else incoming
    s = min(tspec.height, g)
    if s == 0:  # the top wrote the tiles' final labels: nothing to split
        return stats
    meta, lab = stored_labels(store, lstore, s, store.group_region(s, i, j))
    if s == tspec.levels - 1 and s == tspec.height:
        lab = {key: (np.zeros(0), np.zeros(0, np.int32), np.zeros(0, np.int32))
               for key in meta}  # the root: no boundary
    for k in range(s, 0, -1):
        kids = children_labels(tspec, store, labels, meta, lab, k,
                               store.group_region(k, i, j))
        meta = {key: nb for key, (nb, _) in kids.items()}
        lab = {key: d for key, (_, d) in kids.items()}
    if s > 0:
        lstore.write_labels(0, store.group_region(0, i, j), lab)
    return stats


def _fill_task(tspec, store, lstore, reader, backend, srcs, out_path, max_cost,
               write_friction, group_level, shard, prepared, *downs):
    """Phase 3 on the groups of one output shard, then one write of the shard."""
    # order only: after cost-prepare made the output store and the top-down walk labelled
    # the groups around the shard
    del prepared, downs
    with store_ops(backend).held_groups():
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
            reg = store.group_region(0, gi, gj)
            ring = (reg[0] - 1, reg[1] + 1, reg[2] - 1, reg[3] + 1)
            win, gd, ga, gb, _ = fill_group(tspec, reader, backend, None, None, srcs, g,
                                            gi, gj, seeds=ring_seeds(store, lstore, ring, backend))
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


def _finish(out_path, backend, fills, meta, tops, token=None):
    # groups written by other processes, a level left on a device whose process did not
    # run the top: every process ends the run
    here_and_on_every_worker(release_run, str(out_path), backend)
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
    be, ops = get_backend(backend), store_ops(backend)
    index = (IndexStore(out_path, tspec, g, **ops.index_layout) if reuse is None
             else IndexStore(reuse, tspec, g, mode="r"))
    lstore = IndexStore(out_path, tspec, g, labels=True)
    made = call(_make_stores, index if reuse is None else None, lstore, spec, tspec.height,
                prepared, key=("index-make",))
    if reuse is None:
        ready, _ = walk_up(plan, (_index_leaf_task, tspec, reader, backend, index, made),
                           (_index_merge_task, tspec, index), call,
                           names=("index-leaf", "index-merge"))
        if not be.is_gpu:  # the sources start once the checkpoint is written (its name
            # is the run's: the token of a run differs from its resumed run's)
            ready = graph.add(f"{INDEX_DONE}-{token}", (), run_checkpointed,
                              checkpoint_at(checkpoint_folder(out_path), INDEX_DONE),
                              _index_written, ready)
    else:
        ready = [call(_index_check_task, tspec, reader, index, made, g, i, j,
                      key=("index-check", i, j)) for (i, j) in plan.groups]
    name = spec.get("input", "")
    _, rest = walk_up(plan, (_sources_leaf_task, tspec, index, reader, backend, srcs, name, ready),
                      (_sources_merge_task, tspec, index), call, names=("src-leaf", "src-merge"))
    labels = call(_collect_own, *(own for (own,) in rest.values()), key=("labels",))
    top_cfg = (ops.top_cache_bytes(), backend)  # the top Dijkstra's page cache and device
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
    return graph.delayed(call(_finish, out_path, backend, fills, meta, tops, token,
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
    elif reuse is None and backend is not None and get_backend(backend).is_gpu:
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
    be = get_backend(backend)
    cp = be.xp
    dev = cp.cuda.Device()
    try:
        props = cp.cuda.runtime.getDeviceProperties(dev.id)
        threads = int(props["multiProcessorCount"]) * int(props["maxThreadsPerMultiProcessor"])
    except (KeyError, AttributeError, TypeError):
        a = dev.attributes
        threads = int(a["MultiProcessorCount"]) * int(a["MaxThreadsPerMultiProcessor"])
    return threads, be.free_bytes()


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
