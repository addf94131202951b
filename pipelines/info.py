"""``terrain info STORE``: describe any store terrain writes (tile stores, result stores).

A graph cache is described by its vertex and edge counts; a tile store (or a result store
holding the DEM) by :func:`describe_store`, a result store without one by its layers and
georeference: every raster layer with its type and meaning, and each result's summary. The
CRS is printed as ``EPSG:xxxx`` (``--json`` gives the full WKT too).
"""

import math


from terrain.errors import InputError
from terrain.io.georef import RASTER_DIMS, crs_label, unplaced_geotransform
from terrain.io.zarr_meta import open_group
from terrain.io.outputs import WRITTEN_BY_ATTR, json_text
from terrain.io.remote import inputs_unchanged
from terrain.tiles import is_store, open_store

__all__ = ["describe_path", "describe_store", "store_stats", "merge_stats", "format_description",
           "info_command", "RESULT_ATTRS"]

# store attributes that hold a result's summary (other commands add theirs here)
RESULT_ATTRS = ("mst", "cost_distance", "sssp", "bfs", "fill", "flow")
_MEANINGS = {"elevation": "elevation, NaN = nodata",
             "allocation": "index of the nearest source (ties: lower index), -1 unreached",
             "backlink": "direction to the predecessor: 0 source, 1..16 E SE S SW W NW N NE "
                         "ENE..NNE, 255 unreached",
             "mst": "forest edge bits: 1 E, 2 S, 4 SE, 8 SW (0 = no edge owned)",
             "filled": "depression-filled elevation, NaN = nodata",
             "direction": "D8 flow direction, ESRI codes 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, "
                          "64 N, 128 NE; 0 outlet; 255 nodata",
             "accumulation": "flow accumulation (cells or weights draining through, itself "
                             "included), NaN = nodata"}


def _layers(group):
    out = []
    for name, arr in sorted(group.arrays()):
        dims = tuple(getattr(arr.metadata, "dimension_names", None) or ())
        if dims != RASTER_DIMS:
            continue
        a = dict(arr.attrs)
        out.append({"name": name, "dtype": str(arr.dtype), "shape": list(arr.shape),
                    "chunks": list(arr.chunks),
                    # a layer without a unit (a friction, a distance in friction units)
                    # has its long_name
                    "meaning": a.get("bits") or a.get("meaning") or a.get("units")
                    or a.get("long_name") if name not in _MEANINGS else _MEANINGS[name]})
    return out


def describe_path(path):
    """Everything ``info`` prints about a store, as a JSON-ready dict."""
    if not is_store(path):
        open_store(path)  # raises the usual "no such file" / "not a terrain tile store"
    group = open_group(path, mode="r")
    a = dict(group.attrs)
    if a.get("kind") == "terrain-graph-csr":
        return {"input": str(path), "kind": "graph cache", "vertices": int(a["n"]),
                "edges": int(a["nnz"]) // 2, "name": a.get("name"), "meta": a.get("meta", {})}
    if "elevation" in group and "terrain" in a:
        d = describe_store(open_store(path))
        d["kind"] = "tile store"
    else:
        layers = _layers(group)
        if not layers:
            raise InputError(f"{path}: not a terrain tile store or result store")
        rows, cols = layers[0]["shape"]
        gt = a.get("geotransform") or unplaced_geotransform(rows)
        d = {"input": str(path), "kind": "result store", "shape": [rows, cols],
             "geotransform": list(gt), "cellsize": [abs(gt[1]), abs(gt[5])],
             "crs": a.get("crs"), "source": a.get("source")}
    d["crs_label"] = crs_label(d.get("crs"))
    d["written_by"] = a.get(WRITTEN_BY_ATTR)  # None: by a release that did not record it
    d["layers"] = _layers(group)
    d["results"] = {k: a[k] for k in RESULT_ATTRS if isinstance(a.get(k), dict)}
    return d


def store_stats(store):
    """``{"nodata_cells", "min", "max"}`` of a store: from its attributes (ingest writes
    them), else by a scan of its shards."""
    if "stats" in store.attrs:
        return dict(store.attrs["stats"])
    from terrain.io import nan_min_max
    return merge_stats([nan_min_max(store.read_window(*w)) for w in store.shard_windows()])


def merge_stats(parts):
    """``{"nodata_cells", "min", "max"}`` (the ``stats`` attribute ingest writes) from the
    ``(nodata cells, min, max)`` of each part of a grid; min and max None without data.

    >>> merge_stats([(2, 1.0, 5.0), (0, -3.0, 4.0)]), merge_stats([(4, math.inf, -math.inf)])
    ({'nodata_cells': 2, 'min': -3.0, 'max': 5.0}, {'nodata_cells': 4, 'min': None, 'max': None})
    """
    lo = min((p[1] for p in parts), default=math.inf)
    hi = max((p[2] for p in parts), default=-math.inf)
    return {"nodata_cells": sum(p[0] for p in parts), "min": lo if math.isfinite(lo) else None,
            "max": hi if math.isfinite(hi) else None}


def describe_store(store):
    """Everything ``info`` prints, as a JSON-ready dict."""
    stats = store_stats(store)
    rows, cols = store.shape
    a = store.attrs
    return {
        "input": str(store.path), "shape": [rows, cols], "tile": store.tile,
        "tiles": list(store.tiles_shape), "tile_count": store.tiles_shape[0] * store.tiles_shape[1],
        "tiles_per_shard": store.tiles_per_shard, "levels": store.levels,
        "nodata_cells": stats["nodata_cells"], "min": stats["min"], "max": stats["max"],
        "geotransform": list(store.geotransform), "cellsize": list(store.cellsize),
        "crs": a.get("crs"), "nodata": a.get("nodata"), "source": a.get("source"),
        "source_format": a.get("source_format"), "header": a.get("header", {}),
    }


def _number(value):
    """A summary's number, NaN where it has none (JSON's null: no valid cell)."""
    return float("nan") if value is None else value


def _format_result(name, s):
    if name == "mst":
        return (f"{s.get('edges')} edges, {s.get('trees')} trees, total weight "
                f"{s.get('total_weight', float('nan')):.10g} ({s.get('connectivity')}-connected, "
                f"weight {s.get('weight')})")
    if name == "cost_distance":
        md = s.get("max_distance")
        return (f"{len(s.get('sources') or [])} source(s), {s.get('reached_cells')} cells "
                f"reached, max distance {'-' if md is None else f'{md:.10g}'} (cost "
                f"{s.get('cost')}, {s.get('connectivity')}-connected"
                + (f", max cost {s['max_cost']:g}" if s.get("max_cost") else "") + ")")
    if name == "fill":
        return (f"{s.get('flooded')} cells filled in {s.get('depressions')} depressions, max "
                f"depth {_number(s.get('max_depth')):.6g} ({s.get('connectivity')}-connected"
                + (", epsilon" if s.get("epsilon") else "")
                + (f", {s['undrained']} undrained" if s.get("undrained") else "") + ")")
    if name == "flow":
        return (f"D{s.get('connectivity')}, {s.get('cells')} cells, {s.get('outlet_cells')} "
                f"outlets ({s.get('outlets')}), {s.get('flat_cells')} flat cells, max "
                f"accumulation {_number(s.get('max_accumulation')):.10g}"
                + (f" (weights {s['weights']})" if s.get("weights") else "")
                + f", {s.get('route')} route")
    keys = [k for k, v in s.items() if isinstance(v, (int, float, str)) and k != "output"][:6]
    return ", ".join(f"{k} {s[k]}" for k in keys)


def format_description(d):
    """The text ``info`` prints for :func:`describe_path`'s dict."""
    if d["kind"] == "graph cache":
        return "\n".join([f"store     {d['input']} (graph cache written by graph-ingest)",
                          f"graph     {d['vertices']} vertices, {d['edges']} undirected edges",
                          f"source    {d['name']}"])
    rows, cols = d["shape"]
    gt, cells = d["geotransform"], rows * cols
    tiles = d["kind"] == "tile store"
    lines = [f"store     {d['input']}" if tiles else
             f"store     {d['input']} (result store"
             + (f"; the DEM is in {d['source']})" if d.get("source") else ")"),
             f"shape     {rows} rows x {cols} cols ({cells} cells)"]
    if tiles:
        fmt = (lambda v: "n/a" if v is None else f"{v:.6g}")
        lines += [
            f"tile      {d['tile']} x {d['tile']}; {d['tiles'][0]} x {d['tiles'][1]} = "
            f"{d['tile_count']} tiles; {d['tiles_per_shard']} x {d['tiles_per_shard']} tiles "
            "per shard",
            f"levels    {d['levels']} (quadtree over tiles, root included)",
            f"nodata    {d['nodata_cells']} cells "
            f"({100.0 * d['nodata_cells'] / max(cells, 1):.2f}%), stored as NaN "
            + (f"(the source's {mask})" if (mask := (d.get("header") or {}).get("mask")) else
               "(the source's: NaN)" if d["nodata"] is None else
               f"(source value {d['nodata']})"),
            f"min/max   {fmt(d['min'])} / {fmt(d['max'])}"]
    lines += [f"origin    x {gt[0]:.10g}, y {gt[3]:.10g} (upper-left corner)",
              f"cellsize  {d['cellsize'][0]:.10g} x {d['cellsize'][1]:.10g}",
              f"crs       {d['crs_label']}",
              f"written   by {d['written_by'] or 'a terrain that did not record its release'}"]
    if tiles:
        header = d.get("header") or {}
        bands = (f", band {header['band']} of {header['count']}"  # which one was read
                 if (header.get("count") or 1) > 1 and header.get("band") else "")
        lines.append(f"source    {d['source']} ({d['source_format']}){bands}")
    for layer in d["layers"]:
        lines.append(f"layer     {layer['name']}: {layer['dtype']}, {layer['meaning']}")
    for name, s in d["results"].items():
        lines.append(f"result    {name}: {_format_result(name, s)}")
    return "\n".join(lines)


def info_command(args):
    """``terrain info STORE [--json]``."""
    from terrain.io.outputs import check_input_file
    check_input_file(args.store)  # a FIFO or a device: refused before any read
    with inputs_unchanged([args.store]):  # one replaced while described: not described
        d = describe_path(args.store)
    print(json_text(d, indent=2) if args.json else format_description(d))
    return 0
