"""What the three cost-distance algorithms' pipelines share: the output store's layers
(types and codecs: :mod:`terrain.grid.cost_outputs`), its attributes, the shard windows and
the GeoTIFFs of ``--geotiff-dir``.
"""

import shutil
import time
from pathlib import Path

import numpy as np

from terrain.grid.cost_outputs import BACKLINK_CODES, LAYERS, layer_attributes, layer_compressors
from terrain.grid.costs import check_friction
from terrain.io.geotiff import geotiff_files as shared_geotiff_files
from terrain.io.geotiff import geotiff_paths as shared_geotiff_paths
from terrain.io.georef import mark_raster, write_georeference
from terrain.io.remote import is_remote, store_for
from terrain.io.zarr_meta import open_group
from terrain.tiles.store import create_layer, link_layer, read_block

__all__ = ["StoreReader", "prepare_layers", "dem_in_output",
           "cost_model_attributes", "geotiff_paths", "geotiff_files", "write_geotiffs",
           "GEOTIFF_LAYERS",
           "summary_base", "window_stats", "reached", "source_arrays"]

#: the layers --geotiff-dir writes, one GeoTIFF each
GEOTIFF_LAYERS = ("distance", "allocation", "backlink")


def prepare_layers(out_path, shape, tile, geo, with_friction, upstream=None,
                   friction_from=None):
    """The output's georeference and empty layers (chunks = tiles; ``upstream``: the ingest
    tasks this one waits for in a graph); ``friction_from``: a layer of the output already
    written that is the friction too (a friction surface given as the DEM), linked as the
    ``friction`` layer (a local output). Returns ``out_path`` (a path as text; a
    :class:`terrain.io.remote.Location` as it is)."""
    del upstream
    group = open_group(out_path, mode="a")
    if "x" not in group:
        group.attrs.update({"geotransform": list(geo["geotransform"]), "crs": geo.get("crs"),
                            "source": geo.get("source"), "tile": tile,
                            "cellsize": [abs(geo["geotransform"][1]),
                                         abs(geo["geotransform"][5])]})
    # CF georeference (idempotent: an ingested DEM already wrote x, y, spatial_ref)
    write_georeference(group, shape, geo["geotransform"], geo.get("crs"))
    for name, attrs in layer_attributes(geo.get("cost", "absdiff"), geo.get("units")).items():
        dtype, fill, _ = LAYERS.get(name, ("float32", np.nan, None))
        if name == "friction" and not with_friction:
            continue
        if name == "friction" and friction_from:  # the same cells: its shard files linked
            shutil.rmtree(Path(out_path) / name, ignore_errors=True)  # a resumed run's
            link_layer(out_path, out_path, friction_from, name)
            arr = group["friction"]
            arr.attrs.put(attrs)
            mark_raster(arr, nodata=fill)
            continue
        # kept when there (a resumed run's, or this task's before its worker was lost): its
        # shards hold this run's values, which tasks that do not run again wrote
        arr = create_layer(group, name, dtype, fill, tile, shape,
                           compressors=layer_compressors(name), attrs=attrs, keep=True)
        mark_raster(arr, nodata=fill)  # grid_mapping and _FillValue (xarray masks it)
    return out_path if is_remote(out_path) else str(out_path)


def source_arrays(sources, start_costs):
    """``(rows, cols, costs)`` of the sources ``[(row, col), ...]`` as arrays (costs 0 where
    ``start_costs`` is None)."""
    rows = np.array([r for r, _ in sources], np.int64)
    cols = np.array([c for _, c in sources], np.int64)
    costs = np.zeros(rows.size) if start_costs is None else np.asarray(start_costs, np.float64)
    return rows, cols, costs


def summary_base(spec, backend):
    """The summary's first entries, the same for every algorithm."""
    out = {"cost": spec["cost"], "connectivity": spec["connectivity"],
           "max_cost": spec["max_cost"], "route": spec["route"], "tile": spec["tile"]}
    out.update({"rows": spec["shape"][0], "cols": spec["shape"][1], "backend": backend})
    return out


def window_stats(d, t0, t1):
    """What an output window's task returns: its reached cells and largest distance ``d``,
    its solve (``t0`` to ``t1``) and write (``t1`` to now) seconds."""
    reached = int(np.count_nonzero(~np.isnan(d)))
    return {"reached": reached, "max": float(np.nanmax(d)) if reached else None,
            "solve": t1 - t0, "write": time.perf_counter() - t1}


def reached(fills):
    """The summary's ``reached_cells`` and ``max_distance`` from the windows' stats."""
    maxes = [f["max"] for f in fills if f["max"] is not None]
    return {"reached_cells": sum(f["reached"] for f in fills),
            "max_distance": max(maxes) if maxes else None}


def dem_in_output(path):
    """True when the output store holds the DEM (``elevation``: a raster input was ingested)."""
    return "elevation" in open_group(path, mode="r")


def cost_model_attributes(spec, sources, start_costs, has_friction, dem):
    """What ``verify`` needs to recompute every arc cost: the store's ``cost_model`` attribute.

    ``dem`` is ``"elevation"`` (the layer of this store) or the path of the tile store the
    distances were computed from; ``friction`` names this store's friction layer or is None.
    """
    return {"cost": spec["cost"], "connectivity": int(spec["connectivity"]),
            "cellsize": [float(v) for v in spec["cellsize"]],
            "max_cost": spec["max_cost"],
            "sources": [[int(r), int(c)] for r, c in sources],
            "start_costs": [0.0] * len(sources) if start_costs is None
            else [float(v) for v in start_costs],
            "dem": dem, "friction": "friction" if has_friction else None}

def geotiff_paths(directory):
    """What ``--geotiff-dir DIR`` writes (:func:`terrain.io.geotiff.geotiff_paths`)."""
    return shared_geotiff_paths(directory, GEOTIFF_LAYERS)


def geotiff_files(directory):
    """The GeoTIFFs ``--geotiff-dir DIR`` publishes with the store (its companions)."""
    return shared_geotiff_files(directory, GEOTIFF_LAYERS)


def write_geotiffs(store_path, directory, cog=True, memory=None):
    """Stage ``distance``, ``allocation`` and ``backlink`` of a cost store as Cloud-Optimized
    GeoTIFFs for ``DIR/<layer>.tif`` (:func:`terrain.io.geotiff.stage_geotiffs`: the three
    at once, fewer under a budget of ``memory`` bytes). Nodata: distance NaN, allocation -1,
    backlink 255 (the layers' fill values). Returns the paths they get."""
    from terrain.io.geotiff import stage_geotiffs

    group = open_group(store_path, mode="r")
    layers = {}
    for name in GEOTIFF_LAYERS:
        _, fill, _ = LAYERS[name]
        # the layer's own attributes (its cost model's; the units, GDAL's unit type, the
        # writer takes from them): the run's summary attributes come after the GeoTIFFs,
        # which a partial store writes first
        a = {**layer_attributes("absdiff")[name], **dict(group[name].attrs)}
        tags = {f"code_{k}": v for k, v in BACKLINK_CODES.items()} if name == "backlink" else {}
        said = a["description"]
        layers[name] = dict(nodata=fill, description=said if said.startswith(a["long_name"])
                            else f"{a['long_name']}: {said}", tags=tags,
                            resampling="average" if name == "distance" else "nearest")
    return stage_geotiffs(store_path, directory, layers, cog=cog, read=read_block,
                          memory=memory)


class StoreReader:
    """``reader(window) -> (z, f)`` from a tile store's ``elevation`` layer and a friction
    store's (ones without one; a ``(store, layer)`` pair: that layer, the DEM's own when it
    is the input's, read once for both), the friction checked as the in-core path does
    (:func:`terrain.grid.costs.check_friction`). A store at a URL is a
    :class:`terrain.io.remote.Location`, which the tasks open wherever they run."""

    ones = True  # without a friction store, ``f`` is ones (else None)

    def __init__(self, dem_path, friction_path=None, name=""):
        self.sources = [(p if is_remote(p) else str(p), layer) for p, layer in
                        (_source(dem_path), _source(friction_path)) if p is not None]
        self.own = len(self.sources) == 2 and self.sources[0] == self.sources[1]
        self.name = name

    def _read(self, i, window):
        r0, r1, c0, c1 = window
        path, layer = self.sources[i]
        import zarr
        return np.asarray(zarr.open_array(store=store_for(path), path=layer,
                                          mode="r")[r0:r1, c0:c1], np.float32)

    def __call__(self, window):
        z = self._read(0, window)
        if len(self.sources) == 1:
            return z, (np.ones_like(z) if self.ones else None)
        return z, check_friction(z if self.own else self._read(1, window), name=self.name)


def _source(path):
    """``(store, layer)`` of a reader's store: a path's ``elevation``, or a pair as it is."""
    if isinstance(path, (tuple, list)):
        return tuple(path)
    return path, "elevation"
