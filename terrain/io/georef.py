"""Georeferencing of the Zarr stores terrain writes, in the CF / GeoZarr shape that xarray,
rioxarray, GDAL and QGIS understand.

:func:`write_georeference` writes ``x``, ``y`` (cell centres), ``spatial_ref`` (CRS WKT and
GeoTransform, as rioxarray writes them) and tags every ``("y", "x")`` array with
``grid_mapping`` and its nodata as a ``_FillValue`` attribute; :func:`finish_store`
consolidates (the conventions and why: docs/gis.md, "Stores are xarray / rioxarray / GDAL
ready"). The CRS is kept as WKT (:func:`crs_wkt`); :func:`crs_label` gives ``EPSG:xxxx``.

>>> crs_label(crs_wkt("EPSG:32617"))
'EPSG:32617'
>>> is_geographic(crs_wkt("EPSG:4326")), is_geographic(crs_wkt("EPSG:32617"))
(True, False)
"""

import base64
import math
import struct
import warnings
from pathlib import Path

import numpy as np

from ..errors import InputError, warn

__all__ = ["crs_wkt", "crs_label", "same_crs", "is_geographic", "warn_degrees",
           "write_georeference", "mark_raster", "finish_store",
           "check_weight_units", "GRID_MAPPING", "RASTER_DIMS", "METRIC_WEIGHTS",
           "UNREFERENCED", "unplaced_geotransform", "is_unreferenced", "warn_unreferenced",
           "unit_of", "LENGTH_UNITS"]

GRID_MAPPING = "spatial_ref"

#: GDAL's geotransform of a raster without a georeference (its rows "run north")
UNREFERENCED = (0.0, 1.0, 0.0, 0.0, 0.0, 1.0)


def unplaced_geotransform(rows):
    """The geotransform a grid of ``rows`` rows without a georeference is read with: the
    north-up grid of cells of 1, lower-left corner at (0, 0), so that row 0 is the top.

    >>> unplaced_geotransform(30)
    (0.0, 1.0, 0.0, 30.0, 0.0, -1.0)
    """
    return (0.0, 1.0, 0.0, float(rows), 0.0, -1.0)


def unit_of(attrs):
    """The unit a stored layer's attributes name, or None: stores of releases before units
    were units said ``"elevation"``, ``"1"`` or prose there (``"elevation units (sum of
    |dz| ...)"``), which is no unit to pass on.

    >>> unit_of({"units": "m"}), unit_of({"units": "elevation"}), unit_of({})
    ('m', None, None)
    """
    units = attrs.get("units")
    if not isinstance(units, str) or units in ("", "elevation", "1") or "(" in units:
        return None
    return units


def is_unreferenced(geotransform, rows, crs=None):
    """Whether a grid of ``rows`` rows has no georeference: no CRS and GDAL's identity
    geotransform, or the grid of cells of 1 with its lower-left corner at (0, 0) that a
    raster without a geotransform is read as (:mod:`terrain.io.raster`).

    >>> is_unreferenced((0, 1, 0, 30, 0, -1), 30), is_unreferenced((0, 1, 0, 30, 0, -1), 20)
    (True, False)
    """
    gt = tuple(float(v) for v in geotransform)
    return not crs and gt in (UNREFERENCED, unplaced_geotransform(rows))


def warn_unreferenced(where):
    """The warning that ``where``, a raster without a geotransform, is read as the grid
    :func:`is_unreferenced` knows (:func:`terrain.io.raster.open_raster`)."""
    warn(f"{where}: not georeferenced (no geotransform): read as a grid of cells of 1, its "
         "lower-left corner at (0, 0), without a CRS")


RASTER_DIMS = ("y", "x")


def _crs(value, what="crs"):
    import rasterio
    from rasterio.crs import CRS
    from rasterio.errors import CRSError

    if isinstance(value, CRS):
        return value
    try:
        # in an environment of rasterio's, whose error handler keeps GDAL's own "ERROR 1:"
        # line off stderr (outside one GDAL prints it beside the message below)
        with rasterio.Env():
            if isinstance(value, (int, np.integer)):
                return CRS.from_epsg(int(value))
            return CRS.from_user_input(str(value).strip())
    except (CRSError, ValueError, TypeError) as e:
        short = str(value).strip().splitlines()[0][:60] if str(value).strip() else repr(value)
        raise InputError(f"{what}: {short!r} is not a coordinate reference system ({e})") from None


def crs_wkt(value, what="crs"):
    """WKT of a CRS given as ``EPSG:xxxx``, an int, WKT, PROJ text or a rasterio CRS; None stays None.

    Raises
    ------
    InputError
        When ``value`` names no CRS (``what`` starts the message, e.g. a file name).

    Examples
    --------
    >>> crs_wkt("EPSG:4326").startswith('GEOGCS["WGS 84"')
    True
    >>> crs_wkt(None) is None
    True
    """
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _crs(value, what).to_wkt()


def crs_label(wkt):
    """``EPSG:xxxx`` when the CRS has an EPSG code, else its name; ``"unknown"`` for None.

    Examples
    --------
    >>> crs_label(None)
    'unknown'
    """
    if not wkt:
        return "unknown"
    crs = _crs(wkt)
    epsg = crs.to_epsg()
    if epsg:
        return f"EPSG:{epsg}"
    text = crs.to_wkt()
    # the name is the first quoted string of the WKT
    start = text.find('"')
    end = text.find('"', start + 1)
    return text[start + 1:end] if 0 <= start < end else text[:60]


def same_crs(a, b):
    """False when both CRSs are known and differ (PROJ's equality, not the texts'); True
    when they match or either is unknown (a raster without a CRS takes the DEM's).

    >>> same_crs("EPSG:32617", "EPSG:32617"), same_crs("EPSG:32617", "EPSG:32618")
    (True, False)
    """
    if not a or not b:
        return True
    return _crs(a) == _crs(b)


def check_north_up(geotransform, where, flip="flip it north-up first (gdalwarp)"):
    """:class:`InputError` unless GDAL ``geotransform`` is north-up: no rotation or shear,
    columns running east and rows south (every step takes rows and columns as the grid's
    axes; south-up rows would turn every north into south: flow codes, MST bits, backlinks);
    ``flip`` says how to make it so.

    >>> check_north_up((0, 10, 0, 100, 0, -10), "dem.tif")
    >>> check_north_up((0, 10, 0, 0, 0, 10), "dem.tif")
    Traceback (most recent call last):
    terrain.errors.InputError: dem.tif: a south-up raster (its rows run north: geotransform 0, 10, 0, 0, 0, 10) is not supported; flip it north-up first (gdalwarp)
    """
    gt = [float(v) for v in geotransform]
    text = ", ".join(f"{v:.10g}" for v in gt)
    if gt[2] != 0 or gt[4] != 0:
        raise InputError(f"{where}: a rotated or sheared raster (geotransform {text}) is not "
                         "supported; warp it north-up first (gdalwarp)")
    if gt[5] > 0 or gt[1] < 0:
        what = "a south-up" if gt[5] > 0 else "an east-to-west"
        axis = "rows run north" if gt[5] > 0 else "columns run west"
        raise InputError(f"{where}: {what} raster (its {axis}: geotransform {text}) is not "
                         f"supported; {flip}")


def warn_degrees(crs, where, what):
    """A warning (not a refusal: flow directions on a geographic DEM are common) that the
    cells of ``where`` are in degrees, and ``what`` follows from it."""
    if crs and is_geographic(crs):
        warn(f"{where}: the CRS ({crs_label(crs)}) is geographic: cells are in "
             f"degrees, {what}; reproject the DEM to a projected CRS for metres")


def is_geographic(wkt):
    """True when the CRS is geographic (degrees), False when projected or unknown."""
    return bool(wkt) and bool(_crs(wkt).is_geographic)


def fill_value_attr(value, dtype):
    """``value`` encoded as xarray reads a Zarr ``_FillValue`` attribute for ``dtype``.

    Examples
    --------
    >>> fill_value_attr(255, np.uint8)
    255
    >>> fill_value_attr(float("nan"), np.float32)
    'AAAAAAAA+H8='
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return base64.standard_b64encode(struct.pack("<d", float(value))).decode()
    if dtype.kind in "iu":
        return int(value)
    if dtype.kind == "b":
        return bool(value)
    raise ValueError(f"fill_value_attr: unsupported dtype {dtype}")


def mark_raster(array, nodata=None):
    """Tag one raster array (writable, ``("y", "x")``) of a georeferenced group with
    ``grid_mapping`` and, when it has ``nodata``, ``_FillValue`` (default: NaN for a float
    array whose fill value is NaN; none for integer arrays)."""
    attrs = {"grid_mapping": GRID_MAPPING, "coordinates": GRID_MAPPING}
    dtype = np.dtype(array.dtype)
    if nodata is None and dtype.kind == "f":
        fill = array.fill_value
        if fill is not None and math.isnan(float(fill)):
            nodata = float("nan")
    if nodata is not None:
        attrs["_FillValue"] = fill_value_attr(nodata, dtype)
    array.attrs.update(attrs)


def write_georeference(group, shape, geotransform, crs=None):
    """Write ``x``, ``y`` and ``spatial_ref`` into a Zarr group and tag its raster arrays.

    Idempotent: existing coordinates are kept, ``spatial_ref``'s attributes rewritten;
    arrays created later are tagged by :func:`finish_store`.

    Parameters
    ----------
    group : terrain.io.zarr_meta.Group or zarr.Group (writable)
    shape : (rows, cols)
    geotransform : sequence of 6 floats (GDAL order)
    crs : str, optional
        Anything :func:`crs_wkt` accepts; None when unknown.

    Examples
    --------
    >>> import tempfile, os
    >>> from terrain.io.zarr_meta import open_group
    >>> g = open_group(os.path.join(tempfile.mkdtemp(), "g.zarr"), mode="w-")
    >>> write_georeference(g, (2, 3), (500000, 10, 0, 4000020, 0, -10), "EPSG:32617")
    >>> g["x"][:].tolist(), g["y"][:].tolist()
    ([500005.0, 500015.0, 500025.0], [4000015.0, 4000005.0])
    >>> g["spatial_ref"].attrs["GeoTransform"]
    '500000 10 0 4000020 0 -10'
    """
    rows, cols = (int(shape[0]), int(shape[1]))
    gt = [float(v) for v in geotransform]
    if len(gt) != 6:
        raise ValueError(f"write_georeference: geotransform needs 6 numbers, got {len(gt)}")
    members = set(group.array_keys())
    if "x" not in members:
        x = group.create_array("x", shape=(cols,), dtype="float64", chunks=(max(cols, 1),),
                               dimension_names=("x",))
        if cols:
            x[:] = gt[0] + gt[1] * (np.arange(cols) + 0.5)
    if "y" not in members:
        y = group.create_array("y", shape=(rows,), dtype="float64", chunks=(max(rows, 1),),
                               dimension_names=("y",))
        if rows:
            y[:] = gt[3] + gt[5] * (np.arange(rows) + 0.5)
    if GRID_MAPPING in members:
        ref = group[GRID_MAPPING]
    else:
        ref = group.create_array(GRID_MAPPING, shape=(), dtype="int32", fill_value=0)
        ref[...] = 0
    wkt = crs_wkt(crs)
    attrs = {"GeoTransform": " ".join(f"{v:.17g}" for v in gt)}
    if wkt:
        attrs.update({"crs_wkt": wkt, "spatial_ref": wkt})
    ref.attrs.update(attrs)
    _mark_all(group)


def _mark_all(group):
    for name, array in group.arrays():
        dims = tuple(getattr(array.metadata, "dimension_names", None) or ())
        if dims == RASTER_DIMS and array.attrs.get("grid_mapping") != GRID_MAPPING:
            mark_raster(array)


def finish_store(path):
    """Tag every raster array (:func:`mark_raster`) and consolidate the group's metadata:
    the last step of every writer, so that ``xarray.open_zarr(path)`` opens it as it is. A
    result whose DEM is another local store (its ``source``) records that store's
    fingerprint (not a store at a URL: a staged run's source is renamed to the URL after)."""
    from .remote import ROOT_METADATA, input_fingerprint, is_remote, is_url, store_for
    from .zarr_meta import consolidate, open_group
    group = open_group(path, mode="r+")
    if GRID_MAPPING in group:
        _mark_all(group)
    source = group.attrs.get("source")
    if ("elevation" not in group and isinstance(source, str) and not is_url(source)
            and (Path(source) / ROOT_METADATA).is_file()):
        # the DEM lies outside: what says that it is still the one (terrain.tiles.result_dem)
        group.attrs["source_fingerprint"] = input_fingerprint(source)
    if not is_remote(path):
        consolidate(path)
        return
    import zarr
    with warnings.catch_warnings():
        # zarr warns that consolidated metadata is not (yet) in the v3 spec: xarray reads it
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(store_for(path, read_only=False))


#: the MST weights and cost models that divide a rise by a run: cells in degrees are refused
METRIC_WEIGHTS = ("slope", "length3d", "tobler", "friction")

#: metres per unit of the length units a DEM band names (GDAL's, PROJ's, common spellings)
_US_FOOT = 1200 / 3937
LENGTH_UNITS = {"m": 1.0, "metre": 1.0, "meter": 1.0, "metres": 1.0, "meters": 1.0,
                "ft": 0.3048, "foot": 0.3048, "feet": 0.3048, "international foot": 0.3048,
                "us survey foot": _US_FOOT, "us-ft": _US_FOOT, "ftus": _US_FOOT,
                "us_survey_foot": _US_FOOT}


def metres_per_unit(unit):
    """Metres in one ``unit`` (a band's length unit, any case), None when it names none.

    >>> metres_per_unit("US survey foot") == 1200 / 3937, metres_per_unit("elevation")
    (True, None)
    """
    return LENGTH_UNITS.get(unit.strip().lower()) if isinstance(unit, str) else None


def linear_unit(crs):
    """``(name, metres per unit)`` of a projected CRS's axes, None for another or none."""
    if not crs or is_geographic(crs):
        return None
    try:
        name, factor = _crs(crs).linear_units_factor
    except Exception:  # rasterio's CRSError: a CRS without one (an engineering CRS)
        return None
    return name, float(factor)


def check_weight_units(weight, crs, where, kind="weight", units=None):
    """Raise :class:`InputError` for a weight or cost model (``kind``) that takes the cell
    sizes in the elevation's unit (:data:`METRIC_WEIGHTS`) where they are not: on a
    geographic CRS, whose cells are in degrees; where the elevations' ``units`` (a band's)
    name a length unit other than the CRS's (a rise in metres over a run in feet); and, for
    ``tobler``, whose speeds are metres per second, a CRS or elevations not in metres
    (elevations naming no unit are taken in the CRS's). Why: docs/gis.md, "Ingest options".

    Examples
    --------
    >>> check_weight_units("max", crs_wkt("EPSG:4326"), "dem.tif")
    >>> check_weight_units("slope", crs_wkt("EPSG:4326"), "dem.tif")
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: dem.tif: weight 'slope' needs cell sizes in the elevation's unit, but the CRS (EPSG:4326) is geographic: cells are in degrees; reproject the DEM to a projected CRS first
    >>> check_weight_units("slope", crs_wkt("EPSG:2264"), "dem.tif", units="m")
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: dem.tif: weight 'slope' divides a rise in m by a run in US survey foot (the CRS EPSG:2264); give the elevations in the CRS's unit or reproject the DEM
    >>> check_weight_units("tobler", crs_wkt("EPSG:2264"), "dem.tif", kind="cost")
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: dem.tif: cost 'tobler' takes speeds in metres per second, but the CRS (EPSG:2264) is in US survey foot; reproject the DEM to a CRS in metres (elevations in metres) first
    """
    if weight not in METRIC_WEIGHTS or not crs:
        return
    if is_geographic(crs):
        # friction multiplies lengths alone: a degree east and a degree north differ
        unit = "a linear unit" if weight == "friction" else "the elevation's unit"
        raise InputError(f"{where}: {kind} {weight!r} needs cell sizes in {unit}, but the CRS "
                         f"({crs_label(crs)}) is geographic: cells are in degrees; reproject "
                         "the DEM to a projected CRS first")
    axes, rise = linear_unit(crs), metres_per_unit(units)
    if weight == "friction" or axes is None:
        return
    if weight == "tobler" and not (math.isclose(axes[1], 1.0) and rise in (None, 1.0)):
        what = (f"the CRS ({crs_label(crs)}) is in {axes[0]}" if not math.isclose(axes[1], 1.0)
                else f"the elevations are in {units}")
        raise InputError(f"{where}: {kind} 'tobler' takes speeds in metres per second, but "
                         f"{what}; reproject the DEM to a CRS in metres (elevations in "
                         "metres) first")
    if rise is not None and not math.isclose(rise, axes[1], rel_tol=1e-9):
        raise InputError(f"{where}: {kind} {weight!r} divides a rise in {units} by a run in "
                         f"{axes[0]} (the CRS {crs_label(crs)}); give the elevations in the "
                         "CRS's unit or reproject the DEM")
