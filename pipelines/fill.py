"""``terrain fill``: exact depression filling of a DEM into a Zarr result store (layers and
summary: docs/hydrology.md, "The store"; the algorithm: :mod:`terrain.hydrology.fill`).

Two routes, one choice (:func:`fill_route`), the same store bit for bit
(tests/pipelines/test_fill_pipeline.py):

* *in core* (the working arrays fit the memory: the device's, or the host's):
  no task graph; the whole DEM read, :func:`terrain.hydrology.fill_depressions`, the layers
  written shard by shard.
* *tiled* (out of core): one graph: the grid MST's (weight ``max``) writes the ``mst`` mask,
  then the fill walk and the label walk over the same quadtree plan (groups = shards;
  docs/hydrology.md, "Out of core"), :func:`terrain.hydrology.fill_walks` with the steps
  as tasks, each group reading its blocks from and writing them to the stores. Peak memory: a group's block per running task plus
  O(perimeter) per node.

Stores at URLs travel to the tasks as :class:`terrain.io.remote.Location` values, which each
task opens itself (a cluster that shares nothing but the object store, docs/scale.md); the
``mst`` mask and the groups' own lake labels are scratch inside the output, removed before
the output is finished.
"""

import functools
import time

import numpy as np

from terrain.backend import get_backend
from terrain.errors import InputError, naming, warn
from terrain.hydrology import (FILL_MEANINGS, LAKE_LABELS, SINKS_MEANING, FillSpec,
                               fill_depressions, fill_walks)
from terrain.io import available_memory
from terrain.io.geotiff import geotiff_files, geotiff_paths
from terrain.io.georef import mark_raster, unit_of, unplaced_geotransform, write_georeference
from terrain.io.outputs import output_beside
from terrain.io.remote import (as_path, check_local_outputs, command_paths, inside, is_remote,
                               remove_tree)
from terrain.io.zarr_meta import open_array, open_group
from terrain.tiles import is_store, open_store
from terrain.tiles.store import (create_layer, read_block, read_layer, result_compressors,
                                 tiles_per_shard, write_block, write_layers)

from ._command import CommandOutput, asked_route, open_input, print_summary
from ._resume import data_identity, drop_checkpoints, run_key

__all__ = ["run_fill", "write_filled", "fill_command", "fill_route", "build_fill_graph",
           "default_output", "named_outlets", "write_outlets", "warn_outlets_on_nodata",
           "write_geotiffs", "write_hierarchy", "LAYERS", "GEOTIFF_LAYERS"]

#: name -> (dtype, fill value = nodata, meaning)
LAYERS = {
    "filled": ("float32", np.nan, FILL_MEANINGS["filled"]),
    "depth": ("float32", np.nan, FILL_MEANINGS["depth"]),
    "depression": ("int32", 0, FILL_MEANINGS["depression"]),
}
GEOTIFF_LAYERS = tuple(LAYERS)
#: the tiled route's steps that keep their results in the partial output (``--resume``),
#: beside the grid MST's: every step of the fill's walks (each idempotent: a group's writes
#: are whole shards, the labels read from the scratch below)
CHECKPOINTED = ("fill-",)
#: the tiled route's scratch layer :data:`terrain.hydrology.LAKE_LABELS`: each group's own
#: lake labels, which the label walk turns into ``depression`` ids (read from here, not from
#: ``depression`` itself, so that a step run twice, retried or resumed, writes the same ids)
_LAKE_LABELS = ("int32", 0, "scratch: a group's own numbering of its lakes")
#: host bytes a cell the in-core fill takes: the priority flood's (DEM 4, levels 4, in
#: strips labels 4, outlets 1, its queue), then the layers (filled over the levels, depth
#: and ids 8, the flooded mask 1, the labelling's stack). Peak RSS over cells measured 18-19
#: at the 40-ft, 16384² and 10-ft sizes, 23 at 4096² (where the process's own 0.1 GB counts)
IN_CORE_BYTES_PER_CELL = 24
#: the same with the options that build the forest (its graph and the hierarchy's): an
#: estimate, not measured at scale, so held to half the memory where the plain fill's
#: measured bytes are held to 80 %
FOREST_BYTES_PER_CELL = 96


#: the output when none is named: ``dem.tif`` -> ``dem.fill.zarr``
default_output = functools.partial(output_beside, suffix=".fill.zarr")


def fill_route(shape, backend, route="auto", available=None, forest=False):
    """"in-core" or "tiled": ``route`` when it names one, or for "auto" in core when the grid's
    working arrays fit: on the GPU the device (:func:`terrain.hydrology.fill_fits_on_device`);
    else on the host :data:`IN_CORE_BYTES_PER_CELL` within 80 % of the available memory,
    or with ``forest`` (the options that build the forest; not on the GPU)
    :data:`FOREST_BYTES_PER_CELL` within half of it and, the grid with its frame, fewer
    than 2^31 cells (the plain flood cuts a bigger grid into strips of fewer). The host
    floods a grid the device cannot hold as fast as the device does strip by strip (the
    10-ft size on an H200 host's 16 cores: 26.9 s against 24.4-27.9 s whole process).

    >>> fill_route((100, 100), get_backend("cpu"))
    'in-core'
    >>> fill_route((100, 100), get_backend("cpu"), route="tiled")
    'tiled'
    >>> [fill_route((50000, 50000), get_backend("cpu"), available=a, forest=f)
    ...  for a, f in ((2**50, False), (2**50, True), (2**30, False))]
    ['in-core', 'tiled', 'tiled']
    """
    if asked_route(route) != "auto":
        return route
    cells = int(shape[0]) * int(shape[1])
    if backend.is_gpu:
        from terrain.hydrology import fill_fits_on_device
        if fill_fits_on_device(shape, backend):
            return "in-core"
        if forest:  # the options' forest is built on the device whole
            return "tiled"
    if forest and (int(shape[0]) + 2) * (int(shape[1]) + 2) >= 2**31:
        return "tiled"
    if available is None:
        available = available_memory()
    if forest:
        return "in-core" if cells * FOREST_BYTES_PER_CELL <= available / 2 else "tiled"
    return "in-core" if cells * IN_CORE_BYTES_PER_CELL <= 0.8 * available else "tiled"


def write_geotiffs(store_path, directory, cog=True):
    """Stage ``filled``, ``depth`` and ``depression`` of a fill store as Cloud-Optimized
    GeoTIFFs for ``DIR/<layer>.tif`` (nodata: NaN, NaN, 0; overviews averaged for the
    elevations, nearest for the ids; :func:`terrain.io.geotiff.stage_geotiffs`). Returns the
    paths they get."""
    from terrain.io.geotiff import stage_geotiffs
    layers = {name: dict(nodata=fill, description=meaning,
                         resampling="nearest" if name == "depression" else "average")
              for name in GEOTIFF_LAYERS for _, fill, meaning in [LAYERS[name]]}
    return stage_geotiffs(store_path, directory, layers, cog=cog, read=read_block)


def _prepare(out_path, shape, tile, geo, upstream=None, names=tuple(LAYERS)):
    """Create the layers ``names`` not there yet (and, for a store input, the georeference)."""
    del upstream  # orders this task after what must run first
    group = open_group(out_path, mode="a")
    # a store input has no ingest to write the grid's attributes; on the tiled route the
    # grid MST's own preparation wrote the coordinates (not the tile) before this one
    if "tile" not in group.attrs:
        gt = geo["geotransform"]
        group.attrs.update({"geotransform": list(gt), "crs": geo.get("crs"),
                            "source": geo.get("source"), "tile": tile,
                            "cellsize": [abs(gt[1]), abs(gt[5])]})
    write_georeference(group, shape, geo["geotransform"], geo.get("crs"))
    for name, (dtype, fill, meaning) in {**LAYERS, LAKE_LABELS: _LAKE_LABELS}.items():
        if name not in names or name in group:
            continue
        arr = create_layer(group, name, dtype, fill, tile, shape,
                           compressors=result_compressors("ids" if dtype == "int32"
                                                          else "values"),
                           attrs={"meaning": meaning,
                                  # levels and depths in the elevations' unit
                                  **({"units": geo["units"]} if dtype == "float32"
                                     and geo.get("units") else {})})
        # a lake id of 0 is a value (no lake), not missing data: xarray would read the
        # ids as float64 with NaN for every cell outside a lake
        mark_raster(arr, nodata=None if dtype == "int32" else fill)
    return out_path if is_remote(out_path) else str(out_path)


def named_outlets(path, geotransform, shape, crs=None):
    """The cells ``(row, col)`` (sorted, int64) an outlets file names: a raster or tile
    store (its non-zero, non-nodata cells, mapped through the cell centres) or points (CSV
    ``x,y``, GeoJSON, reprojected from their CRS into ``crs``, the DEM's)."""
    from terrain.io.points import VECTOR_SUFFIXES, point_cells, raster_source_cells
    p = as_path(path)  # a store at a URL: read here
    if is_store(p):
        st = open_store(p)
        cells = raster_source_cells(st.read_window(0, st.shape[0], 0, st.shape[1]),
                                    st.geotransform, geotransform, shape, p, what="outlet",
                                    crs=st.attrs.get("crs"), grid_crs=crs)
    elif is_remote(p):  # a file at a URL is copied here first (pipelines.staging.stage)
        raise InputError(f"{p}: no such store")
    elif p.suffix.lower() in (".csv", ".json", ".geojson", *VECTOR_SUFFIXES):
        cells, _ = point_cells(p, geotransform, shape, "outlet", crs)
    else:
        from terrain.io import read_grid
        values, grid = read_grid(p, finite=False)  # an outlet is a non-zero cell
        cells = raster_source_cells(values, grid.geotransform, geotransform, shape, p,
                                    what="outlet", crs=grid.crs, grid_crs=crs)
    if not cells:
        raise InputError(f"{p}: no outlets in it")
    return np.unique(np.array(cells, np.int64).reshape(-1, 2), axis=0)


def _cells_by_shard(cells, shape, side):
    """``(window, rows, cols)`` of each shard (``side`` cells a side) holding some of
    ``cells``: their rows and columns within the window."""
    across = -(-shape[1] // side)
    shard = cells[:, 0] // side * across + cells[:, 1] // side
    for s in np.unique(shard):
        si, sj = divmod(int(s), across)
        win = (si * side, min((si + 1) * side, shape[0]), sj * side,
               min((sj + 1) * side, shape[1]))
        here = cells[shard == s]
        yield win, here[:, 0] - win[0], here[:, 1] - win[2]


def write_outlets(out_path, cells, shape, tile, side):
    """The ``outlets`` layer (uint8, 1 = outlet) of ``cells``: only the shards (``side``
    cells a side) holding one are written."""
    create_layer(out_path, "outlets", "uint8", 0, tile, shape,  # again when resumed
                 attrs={"meaning": "1 = an outlet named by --outlets"}, overwrite=True)
    for win, rows, cols in _cells_by_shard(cells, shape, side):
        block = np.zeros((win[1] - win[0], win[3] - win[2]), np.uint8)
        block[rows, cols] = 1
        write_block(out_path, "outlets", win, block)


def warn_outlets_on_nodata(outlets, cells, drained, dem_path, dem_layer, shape, side):
    """Named outlets on nodata drain nothing (a flood starts from valid cells): when the
    run's count of outlets (``drained``) is short of ``cells``, a warning says how many and
    where the first lies, read from the DEM's shards that hold outlets."""
    if cells is None or drained >= len(cells):
        return
    lost = []
    for win, rows, cols in _cells_by_shard(cells, shape, side):
        nodata = np.isnan(read_block(dem_path, dem_layer, win)[rows, cols])
        lost += [(win[0] + r, win[2] + c) for r, c in zip(rows[nodata], cols[nodata])]
    if lost:
        r, c = min(lost)
        warn(f"{outlets}: {len(lost)} of its {len(cells)} outlet cells lie on the DEM's "
             f"nodata and drain nothing (the first at row {r}, column {c})")


def _read(dem_path, out_path, name, r0, r1, c0, c1):
    """:func:`terrain.hydrology.fill_walks`'s ``read``: the DEM from ``dem_path``, the
    rest from the output."""
    return read_block(dem_path if name == "elevation" else out_path, name, (r0, r1, c0, c1))


def _write_group(out_path, names, block):
    """:func:`terrain.hydrology.fill_walks`'s ``keep``: a group's layers in ``names``
    written; returns its statistics."""
    t0 = time.perf_counter()
    filled, depth = block.layers()
    # the groups' own lake labels as scratch: the label walk writes ``depression``
    for name, values in (("filled", filled), ("depth", depth), (LAKE_LABELS, block.labels)):
        if name in names:
            write_block(out_path, name, block.window, values)
    s = block.stats
    s["times"]["write"] = time.perf_counter() - t0
    s["written_bytes"] = filled.nbytes * 3
    s.update(_block_stats(block.z, block.levels, block.outlet, depth))
    return s


def _write_ids(out_path, window, ids):
    """:func:`terrain.hydrology.fill_walks`'s ``write_ids``."""
    write_block(out_path, "depression", window, ids)


def _block_stats(z, levels, outlet, depth):
    valid = ~np.isnan(z)
    return {"cells": int(np.count_nonzero(valid)), "outlets": int(np.count_nonzero(outlet)),
            "flooded": int(np.count_nonzero(depth > 0)),
            "undrained": int(np.count_nonzero(np.isinf(levels) & valid)),
            "max_depth": float(np.nanmax(depth)) if valid.any() else 0.0}


def _finish(spec, mst_summary, writes, labels, meta):
    stats = {"cells": 0, "outlets": 0, "flooded": 0, "undrained": 0, "max_depth": 0.0}
    times = {}
    nbytes = {"read_bytes": 0, "written_bytes": 0}
    for s in writes:
        for k in stats:
            stats[k] = max(stats[k], s[k]) if k == "max_depth" else stats[k] + s[k]
        for p, v in s["times"].items():
            times[p] = times.get(p, 0.0) + v
        for k in nbytes:
            nbytes[k] += s.get(k, 0)
    summary = {**stats, "depressions": int(max(labels, default=0)), **meta,
               "rows": spec.shape[0], "cols": spec.shape[1], "tile": spec.tile,
               "connectivity": spec.connectivity,
               "mst_seconds": (mst_summary or {}).get("phase_seconds"),
               "phase_seconds": {k: round(v, 6) for k, v in times.items()}, **nbytes}
    return summary


def build_fill_graph(dem_path, out_path, spec, group_tiles, backend="cpu", upstream=None,
                     geo=None, names=tuple(LAYERS), partial=None):
    """The tiled route's Dask graph (module docstring): the grid MST's graph, then the fill
    and label walks. Computing it returns the summary dict.

    Parameters
    ----------
    dem_path : path of the store holding ``elevation`` (may be ``out_path``)
    out_path : path of the output store
    spec : terrain.hydrology.FillSpec
    group_tiles : int
        Tiles a side per group: the store's shard.
    backend : str
    upstream : Delayed, optional
        What must run first (the ingest, the outlets layer).
    geo : dict
        ``geotransform``, ``crs``, ``source`` of the grid.
    names : tuple of str
        The layers to write; without ``depression`` the label walk is left out.
    partial : path, optional
        The partial output of a resumable run: every step keeps its result among its
        checkpoints (:class:`pipelines.quadtree.TaskGraph`; the grid MST's steps too).
    """
    from terrain.grid.mst import MSTSpec

    import dask  # here: the in-core route runs without it

    from .mst import build_mst_graph
    from .quadtree import TaskGraph
    mst_spec = MSTSpec(spec.shape, spec.tile, spec.connectivity, "max")
    mst = build_mst_graph(dem_path, out_path, mst_spec, group_tiles, backend, upstream, geo,
                          in_core="auto" if get_backend(backend).is_gpu else False, partial=partial)
    plan = spec.plan(group_tiles)
    g = plan.group_level
    token = dask.base.tokenize(str(dem_path), str(out_path), spec, g)
    graph = TaskGraph("fill", token, partial, CHECKPOINTED if partial is not None else ())
    labels = "depression" in names
    scratch = (LAKE_LABELS,) if labels else ()
    prepared = graph.call(_prepare, out_path, spec.shape, spec.tile, geo, mst,
                          (*names, *scratch), key=("prepare",))
    writes, largest = fill_walks(
        spec, plan, functools.partial(_read, dem_path, out_path),
        functools.partial(_write_group, out_path, (*names, *scratch)),
        functools.partial(_write_ids, out_path) if labels else None, graph.call, prepared)
    meta = {"backend": backend, "path": "tiled", "group_tiles": 1 << g}
    return graph.delayed(graph.call(_finish, spec, mst, writes, largest, meta,
                                    key=("finish",)))


def _run_in_core(dem_path, out_path, spec, geo, backend, outlets, options=None,
                 names=tuple(LAYERS), z=None):
    """The in-core route: the DEM read whole (or given: ``z``), filled, the layers ``names``
    written by shards."""
    import concurrent.futures

    from terrain.tiles import io_threads
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(io_threads()) as pool:
        prepared = pool.submit(_prepare, out_path, spec.shape, spec.tile, geo, names=names)
        if z is None:
            z = read_layer(dem_path, "elevation", np.float32)
        t1 = time.perf_counter()
        # the elevations are written: their memory takes the depth
        r = fill_depressions(z, spec.connectivity, outlets, tile=spec.tile, backend=backend,
                             labels="depression" in names, overwrite_dem=True,
                             **(options or {}))
        t2 = time.perf_counter()
        prepared.result()
        side = spec.tile * tiles_per_shard(spec.tile, spec.shape)
        layers = {"filled": r.filled, "depth": r.depth, "depression": r.depression}
        write_layers(out_path, {name: layers[name] for name in names}, side)
        if r.hierarchy is not None:
            write_hierarchy(out_path, r.hierarchy)
        if r.sinks is not None:  # the kept pits drain: verify needs them
            sinks = np.zeros(spec.shape, np.uint8)
            sinks.ravel()[r.sinks] = 1
            create_layer(out_path, "sinks", "uint8", 0, spec.tile, spec.shape,
                         attrs={"meaning": SINKS_MEANING})
            write_layers(out_path, {"sinks": sinks}, side)
    t3 = time.perf_counter()
    s = r.stats
    summary = {k: s[k] for k in ("cells", "outlets", "flooded", "undrained", "max_depth",
                                 "depressions")}
    summary.update({"backend": s["backend"], "path": "in-core", "rows": spec.shape[0],
                    "cols": spec.shape[1], "tile": spec.tile, "connectivity": spec.connectivity,
                    "phase_seconds": {"read": round(t1 - t0, 6), **s["times"],
                                      "write": round(t3 - t2, 6)},
                    "read_bytes": z.nbytes, "written_bytes": len(names) * z.nbytes})
    for k in ("epsilon", "min_depth", "min_area", "kept_pits"):
        if k in s:
            summary[k] = s[k]
    if r.hierarchy is not None:
        summary["hierarchy_rows"] = int(r.hierarchy["id"].shape[0])
    return summary


def write_hierarchy(out_path, table):
    """The depression hierarchy as the table ``hierarchy`` of the store: a Zarr group of 1-D
    arrays, one per column, one row per depression (an xarray Dataset, ``depression_id``)."""
    from terrain.hydrology import HIERARCHY_COLUMNS
    group = open_group(out_path, mode="a").create_group("hierarchy", overwrite=True)
    n = int(table["id"].shape[0])
    meanings = {"id": "depression id (1-based, in the order the water rises)",
                "pit_row": "row of the lowest cell", "pit_col": "column of the lowest cell",
                "pit_elevation": "elevation of the lowest cell",
                "spill_elevation": "level at which it merges with its sibling or spills "
                                   "outside (inf: never)",
                "parent": "the depression it merges into (0: spills outside)",
                "left": "first of the two it was merged from (0: a pit)",
                "right": "second of the two it was merged from (0: a pit)",
                "cells": "cells at or below its spill level that it floods",
                "volume": "sum of spill - elevation over those cells"}
    for name in HIERARCHY_COLUMNS:
        values = np.asarray(table[name])
        arr = group.create_array(name, shape=(n,), dtype=values.dtype,
                                 chunks=(max(1, min(n, 1 << 20)),),
                                 dimension_names=("depression_id",))
        if n:
            arr[:] = values
        arr.attrs["meaning"] = meanings[name]
    group.attrs.update({"rows": n, "width": int(table["_width"])})


def write_filled(dem_path, out_path, shape, tile, connectivity=8, outlets_layer=None,
                 backend=None, partial=None, route="auto"):
    """Write ``filled`` (the depression fill of the ``elevation`` of ``dem_path``; outlets: the
    edge and nodata, or the ``outlets_layer`` of ``out_path``) into the store ``out_path`` by
    :func:`fill_route`'s route for ``route`` (``terrain flow``'s fill: the tiled route when
    the flow's was asked, whose memory is then bounded by its tiles), on the scheduler the
    caller opened (:func:`pipelines.cluster.open_scheduler`: the flow's, for both); on the
    tiled route its steps keep their results in the partial output ``partial`` when given.
    Returns the summary (not stored)."""
    be = get_backend(backend)
    shape = tuple(int(s) for s in shape)
    spec = FillSpec(shape, int(tile), int(connectivity), outlets_layer is not None)
    dem = open_group(dem_path, mode="r")
    gt = dem.attrs.get("geotransform") or unplaced_geotransform(shape[0])
    geo = {"geotransform": list(gt), "crs": dem.attrs.get("crs"), "source": str(dem_path),
           "units": unit_of(dem["elevation"].attrs)}
    if fill_route(shape, be, route) == "in-core":
        outlets = None if outlets_layer is None else read_layer(out_path, outlets_layer)
        return _run_in_core(dem_path, out_path, spec, geo, be.name, outlets, names=("filled",))
    if outlets_layer not in (None, "outlets"):
        raise InputError(f"{out_path}: the tiled fill reads its outlets from 'outlets'")
    from . import cluster
    shard = open_array(dem_path, "elevation")
    side = (getattr(shard, "shards", None) or shard.chunks)[0]
    # a cluster given by address runs the tasks in other folders: absolute
    graph = build_fill_graph(cluster.remote_input(dem_path), cluster.remote_input(out_path),
                             spec, max(1, side // spec.tile), be.name, None, geo,
                             names=("filled",), partial=partial)
    (summary,) = cluster.compute(graph, label="fill")
    _drop_forest(out_path)
    return summary


def _drop_forest(out_path):
    """Remove the tiled route's scratch from the output: the grid MST's ``mst`` mask and
    the groups' own lake labels (folders, or objects under the prefix of an output at a URL)
    and the MST's summary."""
    remove_tree(inside(out_path, "mst"))
    remove_tree(inside(out_path, LAKE_LABELS))
    group = open_group(out_path, mode="r+")
    if "mst" in group.attrs:
        del group.attrs["mst"]


def run_fill(input_path, output_path=None, *, tile=512, connectivity=8, outlets=None,
             epsilon=False, min_depth=None, min_area=None, hierarchy=False, backend=None,
             scheduler=None, overwrite=False, geotiff_dir=None, cog=True, route="auto",
             resume=False):
    """Fill the depressions of ``input_path`` (raster or tile store) into ``output_path``.

    ``outlets``: a raster, tile store or points file naming the outlets (instead of the
    grid's edge and nodata). ``epsilon``, ``min_depth``, ``min_area``, ``hierarchy``: as
    :func:`terrain.hydrology.fill_depressions` (in core only: a grid that does not fit is
    refused with them). ``route``: "auto", "in-core" or "tiled" (:func:`fill_route`).
    ``resume``: finish the partial output that a killed run with the same input and
    options left, its finished steps not run again (the tiled route: its steps keep their
    results among the partial's checkpoints; the summary's ``reused_tasks`` counts them).
    Returns the summary dict (also in the output's ``fill`` attribute).

    Examples
    --------
    >>> run_fill("data/sample.asc", "sample.fill.zarr", overwrite=True)  # doctest: +SKIP
    """
    t_start = time.perf_counter()
    be = get_backend(backend)
    inp, out = command_paths(input_path, output_path, default_output)
    # (a resumed run may find the store published and its GeoTIFFs not: checked later)
    check_local_outputs([inp, outlets], [out, *geotiff_paths(geotiff_dir, GEOTIFF_LAYERS)],
                        overwrite or resume)
    grid = open_input(inp, tile, tile_count=False)
    shape, tile, shard, geo = grid.shape, grid.tile, grid.tiles_per_shard, grid.geo()
    cells = None if outlets is None else named_outlets(outlets, geo["geotransform"], shape,
                                                       geo.get("crs"))
    spec = FillSpec(shape, tile, int(connectivity), cells is not None)
    if min_depth is not None and not (np.isfinite(min_depth) and min_depth >= 0):
        raise InputError(f"{inp}: minimum depth {min_depth!r} must be a number >= 0")
    if min_area is not None and not (int(min_area) == min_area and min_area >= 1):
        raise InputError(f"{inp}: minimum area {min_area!r} must be a whole number >= 1")
    options = {"epsilon": bool(epsilon), "min_depth": min_depth, "min_area": min_area,
               "hierarchy": bool(hierarchy)}
    asked = [k for k, v in options.items() if v not in (None, False)]
    from . import cluster
    key = run_key("fill", [p for p in (inp, outlets) if p is not None and not is_remote(p)],
                  str(inp), spec, data_identity(inp), be.name)
    output = CommandOutput(out, key, "fill",
                           geotiffs=geotiff_files(geotiff_dir, GEOTIFF_LAYERS),
                           write_geotiffs=lambda store: write_geotiffs(store, geotiff_dir,
                                                                       cog=cog),
                           overwrite=overwrite, resume=resume)
    # the steps of an interrupted run are the tiled route's (the only one that keeps them):
    # it finishes them; else the route a fresh run takes
    kept_steps = output.steps_kept()
    if kept_steps and route == "in-core":
        raise InputError(f"{inp}: the interrupted run took the tiled route: a resumed run "
                         "finishes it there")
    chosen = "tiled" if kept_steps else fill_route(shape, be, route, forest=bool(asked))
    if asked and chosen != "in-core":
        why = ("the tiled route was asked" if route == "tiled" else
               "the interrupted run took the tiled route" if kept_steps else
               f"{shape[0]} x {shape[1]} cells do not fit in memory")
        raise InputError(f"{inp}: {why}, and the tiled fill supports connectivity and outlets "
                         f"only: {', '.join(asked)} {'need' if len(asked) > 1 else 'needs'} "
                         "the in-core route", option=("connectivity", "outlets", *asked))
    if done := output.finished():
        return done
    # on a cluster (--scheduler, a batch's): reached before any work, which runs there (the
    # tiled route's ingest too; in core the fill is one task), as mst's and cost-distance's
    on_cluster = not cluster.runs_in_process(scheduler)
    with output.partial([inp, outlets], cluster=scheduler if on_cluster else None,
                        cluster_inputs=[inp]) as (tmp, kept):
        partial = tmp if chosen == "tiled" else None
        z = None
        if grid.from_store:
            open_group(tmp, mode="a" if resume else "w-")
            dem_path = inp
        elif chosen == "in-core":
            from .ingest import write_elevation  # the DEM stays in memory for the fill
            z = write_elevation(grid.raster, tmp, tile)
            dem_path = tmp
        else:  # the DEM before the outlets layer and the forest
            from .ingest import ingest_into
            ingest_into(cluster.remote_input(inp), cluster.remote_input(tmp), tile,
                        partial=cluster.remote_input(partial), label="fill-ingest")
            dem_path = tmp
        if cells is not None:
            write_outlets(tmp, cells, shape, tile, grid.shard_side)
        if chosen == "in-core":
            mask = None if cells is None else np.zeros(shape, np.uint8)
            if cells is not None:
                mask[cells[:, 0], cells[:, 1]] = 1
            with naming("outlets", outlets), naming("dem", inp):
                summary = cluster.call(_run_in_core, cluster.remote_input(dem_path),
                                       cluster.remote_input(tmp), spec, geo, be.name, mask,
                                       options, z=None if on_cluster else z, label="fill")
            summary["reused_tasks"] = 0  # one task: a resumed run does it again
        else:
            with cluster.open_scheduler(None if on_cluster else scheduler,
                                        cells=shape[0] * shape[1]):
                # a cluster given by address runs the tasks in other folders: absolute
                graph = build_fill_graph(cluster.remote_input(dem_path), tmp, spec, shard,
                                         be.name, None, geo, partial=partial)
                (summary,) = cluster.compute(graph, label="fill")
            _drop_forest(tmp)  # the intermediate forest, before the output is finished
            summary["reused_tasks"] = drop_checkpoints(tmp, kept)
        warn_outlets_on_nodata(outlets, cells, summary["outlets"], dem_path, "elevation",
                               shape, grid.shard_side)
        summary["route"] = chosen
        summary["seconds"] = round(time.perf_counter() - t_start, 6)
        summary["output"] = str(out)
        summary["device"] = be.device_name()
        if cells is not None:
            summary["outlets_file"] = str(outlets)
        output.publish(tmp, summary)  # the GeoTIFFs from the partial, published after it
    return summary


def _format_summary(s):
    t = s.get("phase_seconds") or {}
    return "\n".join([
        f"fill      {s['output']}",
        f"grid      {s['rows']} x {s['cols']}, {s['connectivity']}-connected, "
        f"{s['cells']} cells, {s['outlets']} outlets",
        f"filled    {s['flooded']} cells in {s['depressions']} depressions, max depth "
        f"{s['max_depth']:.6g}" + (f", {s['undrained']} cells undrained"
                                    if s.get("undrained") else ""),
        f"route     {s['path']}, backend {s['backend']} ({s['device']})",
        "phases    " + ", ".join(f"{p} {v:.2f}" for p, v in t.items()),
        f"time      {s['seconds']:.2f} s",
    ] + ([f"resumed   {s['reused_tasks']} tasks reused from the interrupted run"]
         if s.get("reused_tasks") else [])
      + ([f"geotiff   {', '.join(s['geotiff'])}"] if s.get("geotiff") else []))


def fill_command(args):
    """``terrain fill DEM [-o OUT.zarr] [--connectivity 4|8] [--outlets FILE] ...``."""
    summary = run_fill(args.input, args.output, tile=args.tile,
                       connectivity=args.connectivity, outlets=args.outlets,
                       epsilon=args.epsilon, min_depth=args.min_depth,
                       min_area=args.min_area, hierarchy=args.hierarchy,
                       backend=args.backend, scheduler=args.scheduler,
                       overwrite=args.overwrite, geotiff_dir=args.geotiff_dir,
                       cog=not args.no_cog, route=args.route, resume=args.resume)
    print_summary(summary, args.input, args.json, _format_summary)
    return 0
