"""Raster layers of a terrain store as (Cloud-Optimized) GeoTIFF, streamed shard by shard.

Algorithm
---------
1. Stage: a tiled GTiff (512 × 512 blocks, DEFLATE) beside the target is written window by
   window, one Zarr shard at a time, so memory is one shard whatever the grid size. Cells
   where ``valid_from`` (a float layer such as the DEM's ``elevation``) is NaN are written as
   the nodata value, so nodata never reads as a valid value (the MST mask uses bits 0-3,
   i.e. 0..15, and nodata is 255).
2. Overviews: GDAL builds them in the staging file (``build_overviews``, factors 2, 4, …
   until the smallest fits one block; ``nearest`` for bit masks and ids, ``average`` for
   continuous layers), reading the full-resolution blocks back one at a time.
3. Copy: GDAL's ``COG`` driver copies the stage into a Cloud-Optimized GeoTIFF, reusing
   its overviews (``OVERVIEWS=FORCE_USE_EXISTING``); without the COG driver (GDAL < 3.1)
   a GTiff copy with ``COPY_SRC_OVERVIEWS=YES`` gives the same layout. ``cog=False``
   writes a plain tiled GTiff with internal overviews.

The result carries CRS, geotransform, nodata, band description and band tags (what the
values mean), and appears atomically (:func:`terrain.io.outputs.atomic_output`).

GDAL does the encoding (rasterio); terrain only streams the windows, because GDAL's own
Zarr driver does not read zarr v3 sharded arrays with terrain's codecs everywhere.
"""

import math
import os
from pathlib import Path

import numpy as np
import zarr

from .outputs import atomic_output
from ..errors import InputError

__all__ = ["write_geotiff", "overview_factors", "BLOCK"]

BLOCK = 512


def overview_factors(shape, block=BLOCK):
    """Overview decimation factors 2, 4, … until the coarsest level fits one block.

    Examples
    --------
    >>> overview_factors((3000, 1000)), overview_factors((300, 400))
    ([2, 4, 8], [])
    """
    side = max(int(shape[0]), int(shape[1]), 1)
    factors, f = [], 2
    while math.ceil(side / (f // 2)) > block:
        factors.append(f)
        f *= 2
    return factors


def _open_array(path, name):
    group = zarr.open_group(store=str(path), mode="r", use_consolidated=False)
    if name not in group:
        raise InputError(f"{path}: no array {name!r} in this store")
    return group, group[name]


def _georeference(group, shape):
    a = dict(group.attrs)
    gt = a.get("geotransform")
    crs = a.get("crs")
    if "spatial_ref" in group:
        ref = dict(group["spatial_ref"].attrs)
        crs = crs or ref.get("crs_wkt")
        if gt is None and ref.get("GeoTransform"):
            gt = [float(v) for v in ref["GeoTransform"].split()]
    if gt is None:
        gt = [0.0, 1.0, 0.0, float(shape[0]), 0.0, -1.0]
    return [float(v) for v in gt], crs


def write_geotiff(store, array_name, tif_path, *, cog=True, nodata=None, valid_from=None,
                  description=None, tags=None, resampling="nearest", dtype=None,
                  compress="deflate", overwrite=False):
    """Write one ``(y, x)`` layer of a Zarr store as a GeoTIFF (a COG by default).

    Parameters
    ----------
    store : str or Path
        A store terrain wrote (georeferenced by :func:`terrain.io.georef.write_georeference`).
    array_name : str
        The layer, e.g. ``"mst"``.
    tif_path : str or Path
        The GeoTIFF (appears atomically; an existing file needs ``overwrite``).
    cog : bool
        Cloud-Optimized GeoTIFF (GDAL's COG driver); False: a tiled GTiff with overviews.
    nodata : number, optional
        The GeoTIFF's nodata value. Default: NaN for float layers, none for others.
    valid_from : (store path, array name), optional
        A float layer of the same shape whose NaN cells become ``nodata`` (e.g. the DEM's
        ``elevation`` for the MST mask). Requires ``nodata``.
    description : str, optional
        Band description (what the values mean); also stored as the ``meaning`` tag.
    tags : dict, optional
        More band tags.
    resampling : str
        Overview resampling (``nearest`` for masks and ids, ``average`` for distances).
    dtype : numpy dtype, optional
        Output type (default: the layer's).

    Returns
    -------
    Path
        ``tif_path``.

    Examples
    --------
    >>> write_geotiff("sample.mst.zarr", "mst", "mst.tif", nodata=255,
    ...               valid_from=("sample.mst.zarr", "elevation"))   # doctest: +SKIP
    """
    import rasterio
    from rasterio.enums import Resampling
    from rasterio.transform import Affine
    from rasterio.windows import Window

    group, arr = _open_array(store, array_name)
    if arr.ndim != 2:
        raise InputError(f"{store}: {array_name} is not a 2-D raster")
    rows, cols = (int(s) for s in arr.shape)
    if rows == 0 or cols == 0:
        raise InputError(f"{store}: {array_name} is empty; GeoTIFF needs at least one cell")
    out_dtype = np.dtype(dtype or arr.dtype)
    if nodata is None and out_dtype.kind == "f":
        nodata = float("nan")
    if valid_from is not None and nodata is None:
        raise ValueError("write_geotiff: valid_from needs a nodata value")
    if nodata is not None and out_dtype.kind in "iu":
        info = np.iinfo(out_dtype)
        if not info.min <= nodata <= info.max:
            raise ValueError(f"write_geotiff: nodata {nodata} does not fit {out_dtype}")
    valid = None
    if valid_from is not None:
        _, valid = _open_array(*valid_from)
        if tuple(valid.shape) != (rows, cols):
            raise InputError(f"{valid_from[0]}: {valid_from[1]} has shape {valid.shape}, "
                             f"not {arr.shape}")
    gt, crs = _georeference(group, (rows, cols))
    shard = int((arr.shards or arr.chunks)[0])
    side = shard * max(1, -(-BLOCK // shard))  # whole shards, at least one GeoTIFF block
    profile = {"driver": "GTiff", "height": rows, "width": cols, "count": 1,
               "dtype": out_dtype.name, "transform": Affine.from_gdal(*gt), "tiled": True,
               "blockxsize": BLOCK, "blockysize": BLOCK, "compress": compress,
               "BIGTIFF": "IF_SAFER"}
    if crs:
        profile["crs"] = crs
    if nodata is not None:
        profile["nodata"] = nodata
    band_tags = dict(tags or {})
    if description:
        band_tags.setdefault("meaning", description)
    tif_path = Path(tif_path)
    with atomic_output(tif_path, overwrite) as tmp:
        stage = tmp.with_name(tmp.name + ".stage.tif") if cog else tmp
        try:
            with rasterio.open(stage, "w", **profile) as dst:
                for r0 in range(0, rows, side):
                    for c0 in range(0, cols, side):
                        r1, c1 = min(r0 + side, rows), min(c0 + side, cols)
                        block = np.asarray(arr[r0:r1, c0:c1]).astype(out_dtype, copy=False)
                        if valid is not None:
                            holes = np.isnan(np.asarray(valid[r0:r1, c0:c1]))
                            if holes.any():
                                block = block.copy()
                                block[holes] = nodata
                        dst.write(block, 1, window=Window(c0, r0, c1 - c0, r1 - r0))
                if description:
                    dst.set_band_description(1, description)
                if band_tags:
                    dst.update_tags(1, **{k: str(v) for k, v in band_tags.items()})
                factors = overview_factors((rows, cols))
                if factors:
                    dst.build_overviews(factors, Resampling[resampling])
                    dst.update_tags(ns="rio_overview", resampling=resampling)
            if cog:
                _copy_cog(stage, tmp, compress)
        finally:
            if cog and stage.exists():
                os.unlink(stage)
    return tif_path


def _copy_cog(stage, target, compress):
    import rasterio
    from rasterio.shutil import copy as gdal_copy

    with rasterio.Env() as env:
        has_cog = "COG" in env.drivers()
    if has_cog:
        gdal_copy(stage, target, driver="COG", BLOCKSIZE=BLOCK, COMPRESS=compress.upper(),
                  OVERVIEWS="FORCE_USE_EXISTING", BIGTIFF="IF_SAFER")
    else:
        gdal_copy(stage, target, driver="GTiff", TILED="YES", BLOCKXSIZE=BLOCK,
                  BLOCKYSIZE=BLOCK, COMPRESS=compress.upper(), COPY_SRC_OVERVIEWS="YES",
                  BIGTIFF="IF_SAFER")
