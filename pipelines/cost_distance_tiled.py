"""The tiled cost distance (``cost-distance --algorithm tiled``) as a Dask graph.

The steps are those of :mod:`terrain.grid.sssp_tiled` (thesis ch. 4-5, Haverkort's
hierarchy), scheduled on the ONE quadtree walk of :mod:`terrain.tiles.quadtree` with the
Dask ``call`` of :mod:`pipelines.quadtree`. A *group* is a shard of the tile store (``shard``
cells a side), cut into SSSP tiles of ``tile_sssp`` cells (16 by default: phase 1 costs grow
linearly with the tile side, so the store's 512 tiles would be far too big).

Dask strategy
-------------
1. ``cost-index-leaf`` per group: reads the group's DEM (and friction) window from the store,
   phase 1 on its tiles and the hierarchy inside the group (:func:`index_leaf`), and writes
   them to the output store's ``sssp_index/g_I_J`` (the reuse record, one Zarr group per
   quadtree group). ``cost-index-merge{k}`` per node above the groups (:func:`index_merge`,
   up to the height cap), ``cost-index-top`` saves those nodes. With ``--reuse STORE`` the
   leaf step instead loads the group's record from STORE (checking the stored boundary
   cells against this raster), and no merge runs: phase 1 and the upward matrices are
   skipped.
2. ``cost-nodes``: the index as one in-process dict (the LocalCluster runs threads, so the
   tasks share it; nothing is copied).
3. ``cost-src-leaf`` / ``cost-src-merge{k}``: the sources up (:func:`sources_leaf`,
   :func:`sources_merge`); a group reads its window only when it holds a source.
4. ``cost-down-split{k}`` / ``cost-down-apply``: the top Dijkstra at the root and the final
   boundary labels down to every tile (:func:`down_node`, :func:`down_leaf`).
5. ``cost-fill`` per group: phase 3 (:func:`fill_group`) on the group's tiles, given the final
   labels of its own and the eight neighbouring groups' tiles; it writes its shard of
   ``distance``, ``allocation`` and ``backlink`` (a writer owns whole shards).
6. ``cost-tiled-finish``: the summary.
"""

import time

import numpy as np
import zarr

from terrain.errors import InputError
from terrain.grid.costs import check_friction
from terrain.grid.sssp_tiled import (NodeBoundary, TiledSpec, down_leaf, down_node,
                                     fill_group, index_leaf, index_merge, sources_leaf,
                                     sources_merge)
from terrain.tiles.quadtree import QuadtreePlan, walk_down, walk_up

from .quadtree import delayed_call

__all__ = ["StoreReader", "build_tiled_graph", "build_cost_distance_tiled", "tiled_spec",
           "index_spec", "check_reuse_store", "INDEX_GROUP"]

INDEX_GROUP = "sssp_index"
_FIELDS = (("ids", "int64"), ("z", "float32"), ("f", "float32"), ("dist", "float64"),
           ("hops", "int32"))


class StoreReader:
    """``reader(window) -> (z, f)`` from a tile store's ``elevation`` layer (and a friction
    store's; ones without one). Negative or NaN-free checks of friction as in the in-core
    path (:func:`terrain.grid.costs.check_friction`)."""

    def __init__(self, dem_path, friction_path=None, name=""):
        self.dem_path, self.friction_path, self.name = str(dem_path), friction_path, name

    def __call__(self, window):
        r0, r1, c0, c1 = window
        z = np.asarray(zarr.open_array(store=self.dem_path, path="elevation", mode="r")
                       [r0:r1, c0:c1], np.float32)
        if self.friction_path is None:
            return z, np.ones_like(z)
        f = np.asarray(zarr.open_array(store=str(self.friction_path), path="elevation",
                                       mode="r")[r0:r1, c0:c1], np.float32)
        return z, check_friction(f, name=self.name)


def index_spec(spec):
    """What a stored index must match (JSON-able): grid, cost, connectivity, cell size,
    tile, height cap, group side."""
    return {"shape": list(spec["shape"]), "cost": spec["cost"],
            "connectivity": int(spec["connectivity"]),
            "cellsize": [float(x) for x in spec["cellsize"]], "tile": int(spec["tile_sssp"]),
            "group": int(spec["group_side"])}


def check_reuse_store(path, spec):
    """The stored index's attributes of ``path``; :class:`InputError` if it is not a tiled
    cost-distance store of the same grid, cost, connectivity, cell size and tile."""
    try:
        group = zarr.open_group(store=str(path), mode="r")
        attrs = dict(group[INDEX_GROUP].attrs)
    except Exception:
        raise InputError(f"{path}: not a tiled cost-distance store (no {INDEX_GROUP!r} "
                         "group)") from None
    want = index_spec(spec)
    got = {k: attrs.get(k) for k in want}
    if spec.get("max_height") is not None:
        want["height"], got["height"] = int(spec["max_height"]), attrs.get("height")
    if got != want:
        diff = ", ".join(f"{k} {got[k]} (this run: {want[k]})" for k in want
                         if got[k] != want[k])
        raise InputError(f"{path}: stored index was computed for another grid or cost: "
                         f"{diff}")
    return attrs


def _save_nodes(root, name, nodes):
    """Write ``{key: NodeBoundary}`` as one Zarr group of concatenated arrays."""
    keys = sorted(nodes)
    g = root.require_group(name)
    sizes = np.array([nodes[k].size for k in keys], np.int64)
    g.create_array("keys", data=np.array(keys, np.int64).reshape(-1, 3), overwrite=True)
    g.create_array("sizes", data=sizes, overwrite=True)
    nbytes = sizes.nbytes
    for field, dtype in _FIELDS:
        parts = [np.asarray(getattr(nodes[k], field), dtype).reshape(-1) for k in keys]
        data = np.concatenate(parts) if parts else np.zeros(0, dtype)
        g.create_array(field, data=data, chunks=(min(max(data.size, 1), 1 << 22),),
                       overwrite=True)
        nbytes += data.nbytes
    return nbytes


def _load_nodes(tspec, path, name):
    g = zarr.open_group(store=str(path), mode="r")[INDEX_GROUP][name]
    keys = np.asarray(g["keys"][:]).tolist()
    sizes = np.asarray(g["sizes"][:])
    data = {field: np.asarray(g[field][:]) for field, _ in _FIELDS}
    out, o1, o2 = {}, 0, 0
    for key, n in zip(keys, sizes.tolist()):
        key = tuple(int(x) for x in key)
        out[key] = NodeBoundary(key[0], key[1:], tspec.window(*key), data["ids"][o1:o1 + n],
                                data["z"][o1:o1 + n], data["f"][o1:o1 + n],
                                data["dist"][o2:o2 + n * n].reshape(n, n),
                                data["hops"][o2:o2 + n * n].reshape(n, n))
        o1, o2 = o1 + n, o2 + n * n
    return out


# ------------------------------------------------------------------------------- tasks

def _index_leaf_saved(tspec, reader, backend, out_path, prepared, g, i, j):
    del prepared  # after cost-prepare made the output store
    up, own = index_leaf(tspec, reader, backend, g, i, j)
    _save_nodes(zarr.open_group(store=str(out_path), mode="a")[INDEX_GROUP],
                f"g_{i}_{j}", own)
    return up, own


def _index_leaf_loaded(tspec, reader, reuse_path, prepared, g, i, j):
    """A group's stored index, its boundary cells checked against this raster."""
    del prepared  # the DEM is in place (a raster input is ingested first)
    own = _load_nodes(tspec, reuse_path, f"g_{i}_{j}")
    window = tspec.window(g, i, j)
    z, f = reader(window)
    r0, c0 = window[0], window[2]
    cols = tspec.shape[1]
    for key, nb in own.items():
        if key[0] == 0 and nb.size:
            rr, cc = nb.ids // cols - r0, nb.ids % cols - c0
            if not (np.array_equal(z[rr, cc], nb.z, equal_nan=True)
                    and np.array_equal(f[rr, cc], nb.f, equal_nan=True)):
                raise InputError(f"{reuse_path}: the stored index does not match this raster "
                                 f"(group {i},{j})")
    return own


def _save_top(out_path, rest, g):
    top = {}
    for key, (own,) in rest.items():
        if key[0] > g:
            top.update(own)
    _save_nodes(zarr.open_group(store=str(out_path), mode="a")[INDEX_GROUP], "top", top)
    return len(top)


def _collect(*dicts):
    out = {}
    for d in dicts:
        out.update(d)
    return out


def _collect_rest(rest):
    out = {}
    for (own,) in rest.values():
        out.update(own)
    return out


def _sources_leaf_checked(tspec, nodes, reader, srcs, name, g, i, j):
    """:func:`sources_leaf`, after checking that the group's sources are on data."""
    rows, cols, _ = srcs
    r0, r1, c0, c1 = window = tspec.window(g, i, j)
    inside = np.nonzero((rows >= r0) & (rows < r1) & (cols >= c0) & (cols < c1))[0]
    if inside.size:
        z, f = reader(window)
        for s in inside.tolist():
            r, c = int(rows[s]) - r0, int(cols[s]) - c0
            if np.isnan(z[r, c]) or np.isnan(f[r, c]):
                raise InputError(f"{name}: source {s} at cell (row, col) = ({rows[s]}, "
                                 f"{cols[s]}) is on nodata")
    return sources_leaf(tspec, nodes, reader, srcs, g, i, j)


def _fill_write(tspec, reader, backend, nodes, srcs, out_path, max_cost, write_friction,
                prepared, g, i, j, *finals):
    del prepared  # the layers exist
    t0 = time.perf_counter()
    final = _collect(*finals)
    win, d, a, b, _ = fill_group(tspec, reader, backend, nodes, final, srcs, g, i, j)
    if max_cost is not None:
        far = d > max_cost
        d[far], a[far], b[far] = np.nan, -1, 255
    t1 = time.perf_counter()
    group = zarr.open_group(store=str(out_path), mode="r+")
    sl = (slice(win[0], win[1]), slice(win[2], win[3]))
    group["distance"][sl] = d
    group["allocation"][sl] = a
    group["backlink"][sl] = b
    if write_friction:
        group["friction"][sl] = reader(win)[1]
    reached = int(np.count_nonzero(~np.isnan(d)))
    return {"reached": reached, "max": float(np.nanmax(d)) if reached else None,
            "solve": t1 - t0, "write": time.perf_counter() - t1}


def _finish(out_path, fills, meta, times_marker):
    del times_marker
    reached = sum(f["reached"] for f in fills)
    maxes = [f["max"] for f in fills if f["max"] is not None]
    summary = dict(meta)
    summary.update({
        "reached_cells": reached, "max_distance": max(maxes) if maxes else None,
        "solve_seconds": round(sum(f["solve"] for f in fills), 6), "read_seconds": 0.0,
        "write_seconds": round(sum(f["write"] for f in fills), 6),
        "queue": "tournament tree", "device": meta.get("backend")})
    zarr.open_group(store=str(out_path), mode="r+").attrs.update({"cost_distance": summary})
    return summary


def _make_index_group(out_path, spec, height, prepared):
    del prepared
    root = zarr.open_group(store=str(out_path), mode="a")
    g = root.require_group(INDEX_GROUP)
    g.attrs.update(dict(index_spec(spec), height=int(height)))
    return True


def build_tiled_graph(dem_path, out_path, spec, sources, start_costs, prepared,
                      backend="cpu", friction_store=None, reuse=None, token="t"):
    """Dask graph of the tiled cost distance (module docstring); a Delayed summary.

    ``spec`` holds ``shape, cost, connectivity, cellsize, tile_sssp, max_height,
    group_side, max_cost, input``; ``prepared`` is the Delayed that made the output layers.
    """
    import dask

    tspec = TiledSpec(tuple(spec["shape"]), int(spec["tile_sssp"]), int(spec["connectivity"]),
                      spec["cost"], tuple(float(x) for x in spec["cellsize"]),
                      spec.get("max_height"))
    group_tiles = max(1, int(spec["group_side"]) // tspec.tile)
    plan = QuadtreePlan.build(tspec.shape, tspec.tile, group_tiles)
    g = plan.group_level
    reader = StoreReader(dem_path, friction_store, spec.get("friction_path") or "")
    rows = np.array([r for r, _ in sources], np.int64)
    cols = np.array([c for _, c in sources], np.int64)
    costs = (np.zeros(rows.size) if start_costs is None
             else np.asarray(start_costs, np.float64))
    srcs = (rows, cols, costs)
    call = (lambda stage: delayed_call(f"cost-{stage}", token))
    tasks = {"index": 0, "reused": 0}
    if reuse is None:
        made = dask.delayed(_make_index_group, pure=False)(
            out_path, spec, tspec.height, prepared, dask_key_name=f"cost-index-make-{token}")
        _, rest = walk_up(plan, (_index_leaf_saved, tspec, reader, backend, out_path, made),
                          (index_merge, tspec), call=call("index"))
        saved_top = dask.delayed(_save_top, pure=False)(out_path, rest, g,
                                                        dask_key_name=f"cost-index-top-{token}")
        nodes = dask.delayed(_collect_rest, pure=False)(rest, dask_key_name=f"cost-nodes-{token}")
        tasks["index"] = len(plan.groups) + sum(len(v) for v in plan.levels.values()) + 1
    else:
        owns = [dask.delayed(_index_leaf_loaded, pure=False)(
            tspec, reader, reuse, prepared, g, i, j, dask_key_name=(f"cost-index-load-{token}", i, j))
            for (i, j) in plan.groups]
        top = dask.delayed(_load_nodes, pure=False)(
            tspec, reuse, "top", dask_key_name=f"cost-index-load-top-{token}")
        nodes = dask.delayed(_collect, pure=False)(*owns, top,
                                                   dask_key_name=f"cost-nodes-{token}")
        saved_top = None
        tasks["reused"] = len(plan.groups) + sum(len(v) for v in plan.levels.values()) + 1
    name = spec.get("input", "")
    _, rest = walk_up(plan, (_sources_leaf_checked, tspec, nodes, reader, srcs, name),
                      (sources_merge, tspec, nodes), call=call("src"))
    labels = dask.delayed(_collect_rest, pure=False)(rest, dask_key_name=f"cost-labels-{token}")
    _, out = walk_down(plan, (down_node, tspec, nodes, labels), (down_leaf, tspec, nodes, labels),
                       call=call("down"), node_nout=4)
    max_cost = spec.get("max_cost")
    fills = []
    for (i, j) in plan.groups:
        ring = [out[(g, a, b)] for a in range(i - 1, i + 2) for b in range(j - 1, j + 2)
                if (g, a, b) in out]
        fills.append(dask.delayed(_fill_write, pure=False)(
            tspec, reader, backend, nodes, srcs, out_path, max_cost,
            friction_store is not None, prepared, g, i, j, *ring,
            dask_key_name=(f"cost-fill-{token}", i, j)))
    meta = {k: spec[k] for k in ("cost", "connectivity", "max_cost", "algorithm", "tile")}
    meta.update({"rows": tspec.shape[0], "cols": tspec.shape[1], "backend": backend,
                 "tile_sssp": tspec.tile, "height": tspec.height, "groups": len(plan.groups),
                 "group_side": tspec.tile << g, "index_tasks": tasks["index"],
                 "reused_tasks": tasks["reused"],
                 "skipped_phases": [] if reuse is None else ["phase 1", "phase 2 upward"],
                 "reuse": None if reuse is None else str(reuse)})
    return dask.delayed(_finish, pure=False)(out_path, fills, meta, saved_top,
                                             dask_key_name=f"cost-tiled-finish-{token}")


def tiled_spec(spec, tile_sssp=None, max_height=None, reuse=None):
    """Complete the command's ``spec`` for the tiled path (in place): SSSP tile (default: the
    reused store's, else 16), height cap,
    group side (a shard of the store), and, with ``reuse``, the stored index's height after
    checking it matches (:func:`check_reuse_store`)."""
    if tile_sssp is None and reuse is not None:  # the stored index's tile
        try:
            tile_sssp = zarr.open_group(store=str(reuse), mode="r")[INDEX_GROUP].attrs["tile"]
        except Exception:
            tile_sssp = None  # check_reuse_store names the problem
    spec["tile_sssp"] = int(tile_sssp or 16)
    spec["max_height"] = None if max_height is None else int(max_height)
    spec["group_side"] = int(spec["tile"]) * int(spec["tiles_per_shard"])
    TiledSpec(tuple(spec["shape"]), spec["tile_sssp"], int(spec["connectivity"]), spec["cost"],
              tuple(float(x) for x in spec["cellsize"]), spec["max_height"])
    spec["reuse"] = None
    if reuse is not None:
        attrs = check_reuse_store(reuse, spec)
        spec["max_height"] = int(attrs["height"])
        spec["reuse"] = str(reuse)
    return spec


def build_cost_distance_tiled(dem_path, out_path, spec, sources, start_costs, backend="cpu",
                              upstream=None, geo=None, friction_store=None):
    """The whole ``cost-distance`` graph on the tiled path: ``cost-prepare`` (the layers, as
    in the in-core path), then :func:`build_tiled_graph`. A Delayed summary."""
    import dask

    from .cost_distance import _prepare

    token = dask.base.tokenize(str(dem_path), str(out_path), time.time_ns())
    prepared = dask.delayed(_prepare, pure=False)(
        out_path, spec["shape"], spec["tile"], geo or {}, friction_store is not None, upstream,
        dask_key_name=f"cost-prepare-{token}")
    return build_tiled_graph(dem_path, out_path, spec, sources, start_costs, prepared, backend,
                             friction_store, spec.get("reuse"), token)
