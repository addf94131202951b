"""Points in map coordinates: read from CSV / GeoJSON / OGR vector files / rasters, mapped
to grid cells (GDAL geotransform; the cell rasterio's ``index`` gives: docs/gis.md), and
lines (least-cost paths, streams) written as RFC 7946 GeoJSON, GeoPackage or FlatGeobuf.
GeoJSON points are WGS 84 unless a ``crs`` member says otherwise, CSV points the raster's
CRS unless their columns are named lon/lat, a GeoPackage's, Shapefile's, FlatGeobuf's or
KML's those of its layer; all are reprojected into the raster's CRS (a raster without one
takes them as they are, with a warning). The OGR formats go
through pyogrio (GDAL's vector drivers).

>>> map_to_cell(2.5, 7.9, (0.0, 1.0, 0.0, 10.0, 0.0, -1.0), (10, 10))
(2, 2)
>>> cell_centre(2, 2, (0.0, 1.0, 0.0, 10.0, 0.0, -1.0))
(2.5, 7.5)
"""

import contextlib
import csv
import datetime
import errno
import json
import math
import os
import struct
import warnings
from pathlib import Path

import numpy as np

from ..errors import InputError, warn, where
from .outputs import disk_full_reason, gdal_path, json_text

__all__ = ["map_to_cell", "cell_centre", "read_points", "point_cells", "raster_source_cells",
           "write_paths", "path_format", "ogr_lines", "geojson_crs", "reproject_points",
           "POINT_SUFFIXES", "VECTOR_SUFFIXES", "LINE_FORMATS", "WGS84"]

#: vector formats read through OGR (pyogrio): the points of their first layer
VECTOR_SUFFIXES = (".gpkg", ".shp", ".fgb", ".kml")
#: what lines are written as, by suffix: RFC 7946 GeoJSON (longitude/latitude), or OGR's
#: GeoPackage and FlatGeobuf, which keep the DEM's CRS and coordinates exactly
LINE_FORMATS = {".geojson": "geojson", ".json": "geojson", ".gpkg": "GPKG",
                ".fgb": "FlatGeobuf"}
#: files read as points (anything else is read as a raster of sources)
POINT_SUFFIXES = (".csv", ".txt", ".json", ".geojson") + VECTOR_SUFFIXES
WGS84 = "EPSG:4326"
_LON_NAMES = ("lon", "long", "longitude", "lng")
_LAT_NAMES = ("lat", "latitude")
_X_NAMES = ("x", "easting", "east", "e", "point_x", "x_coord", "xcoord") + _LON_NAMES
_Y_NAMES = ("y", "northing", "north", "n", "point_y", "y_coord", "ycoord") + _LAT_NAMES


def map_to_cell(x, y, geotransform, shape, what="point", raster_crs=True):
    """``(row, col)`` of the cell holding map point ``(x, y)``; :class:`InputError` outside
    the raster (naming its extent) or for a coordinate that is not a finite number. A point
    outside that looks like longitude/latitude gets a hint: reprojected points, unless
    ``raster_crs`` is False (the raster has no CRS to reproject them into).

    >>> gt = (500000.0, 10.0, 0.0, 4000000.0, 0.0, -10.0)
    >>> map_to_cell(500015.0, 3999995.0, gt, (300, 400))
    (0, 1)
    >>> map_to_cell(150, 150, gt, (300, 400), "outlet")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: outlet (150.0, 150.0) ... x 500000 to 504000, y 3997000 to 4000000)
    """
    try:
        x, y = float(x), float(y)
    except (TypeError, ValueError):
        raise InputError(f"{what} ({x}, {y}): coordinates must be numbers") from None
    if not (math.isfinite(x) and math.isfinite(y)):
        raise InputError(f"{what} ({x}, {y}): coordinates must be finite numbers")
    x0, dx, rx, y0, ry, dy = (float(v) for v in geotransform)
    if rx or ry:
        raise InputError(f"{what}: rotated geotransforms are not supported")
    # rasterio's index/rowcol, bit for bit: the inverse transform's coefficients as affine's
    # ~Affine computes them (through the determinant), applied, then floored; (x - x0) / dx
    # rounds otherwise, and put points on cell edges in the neighbouring cell
    inv = 1.0 / (dx * dy - rx * ry)
    cx, cy = dy * inv, dx * inv
    col = math.floor(cx * x + (-x0 * cx))
    row = math.floor(cy * y + (-y0 * cy))
    if not (0 <= row < shape[0] and 0 <= col < shape[1]):
        hint = ""
        if -180 <= x <= 180 and -90 <= y <= 90 and not (-180 <= x0 <= 180 and -90 <= y0 <= 90):
            hint = (" (it looks like longitude/latitude: give points in the raster's CRS, or "
                    "a GeoJSON file or a CSV file with lon,lat columns, whose points are "
                    "reprojected)" if raster_crs else
                    " (it looks like longitude/latitude, and the raster has no CRS to "
                    "reproject it into: give points in the raster's own coordinates)")
        xs = sorted((x0, x0 + shape[1] * dx))
        ys = sorted((y0, y0 + shape[0] * dy))
        raise InputError(f"{what} ({x}, {y}) is outside the raster "
                         f"({shape[0]} x {shape[1]} cells: x {xs[0]:.10g} to {xs[1]:.10g}, "
                         f"y {ys[0]:.10g} to {ys[1]:.10g}){hint}")
    return row, col


def cell_centre(row, col, geotransform):
    """Map coordinates of the centre of cell ``(row, col)``."""
    x0, dx, _, y0, _, dy = (float(v) for v in geotransform)
    return x0 + (col + 0.5) * dx, y0 + (row + 0.5) * dy


def read_points(path, crs=None):
    """Points ``[(x, y), ...]`` from a CSV file (``x,y``, or named columns: ``easting``, ...,
    or ``lon,lat`` in WGS 84), a GeoJSON file (points, features, collections) or an OGR
    vector file (:data:`VECTOR_SUFFIXES`: its first layer's points), in ``crs`` (the
    raster's; None: as they are written)."""
    return _read_points(path, crs)[0]


def point_cells(path, geotransform, shape, what="point", crs=None):
    """``(cells, places)``: the cells ``[(row, col), ...]`` of the points of the file ``path``
    (:func:`read_points`) on the raster of ``geotransform``, ``shape`` and ``crs`` (None: it
    has none), and where in the file each point is: ``"wells.csv:3"`` (a CSV file's line),
    ``"wells.geojson feature 2"`` (a feature, counted from 1 in the file's order, as a
    vector file's), else the file. A point outside the raster is an :class:`InputError`
    naming its place. Points whose file places them in a CRS (GeoJSON's longitude/latitude by
    default, lon,lat columns, a vector layer's CRS) on a raster without one are taken as its
    own coordinates, with a warning: nothing can reproject them."""
    points, places, src_crs = _read_points(path, crs)
    if crs is None and src_crs is not None:
        from .georef import crs_label  # zarr's import: only here
        warn(f"{path}: its points are in {crs_label(src_crs)} and the raster has no CRS: they "
             "are taken as the raster's own coordinates")
    cells = [map_to_cell(x, y, geotransform, shape, what=f"{place}: {what}",
                         raster_crs=crs is not None)
             for (x, y), place in zip(points, places)]
    return cells, places


def _read_points(path, crs):
    """``(points, places, src_crs)``: :func:`read_points`' points, where in the file each is
    (:func:`point_cells`) and the CRS the file places them in (None: the raster's)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if path.suffix.lower() in VECTOR_SUFFIXES:
        points, src_crs, places = _ogr_points(path)
    else:
        # utf-8-sig: a byte order mark (Excel's "CSV UTF-8") is no part of the first name
        # or of the JSON, as GDAL reads them
        text = path.read_text(encoding="utf-8-sig", errors="replace")
        if path.suffix.lower() in (".json", ".geojson") or text.lstrip().startswith("{"):
            points, src_crs, places = _geojson_points(path, text)
        else:
            points, src_crs, lines = _csv_points(path, text)
            places = [where(path, line) for line in lines]
    if crs is not None and src_crs is not None:
        points = reproject_points(points, src_crs, crs, path)
    return points, places, src_crs


def _csv_points(path, text):
    """``(points, crs, lines)``: WGS 84 for lon/lat columns, else None (the raster's); the
    line of each point. Every row has as many fields as the first (a header or a point)."""
    points, lines = [], []
    cx, cy, src_crs, width = 0, 1, None, None
    first = _first_line(text)
    for line, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or all(not c.strip() for c in row) or row[0].lstrip().startswith("#"):
            continue
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise InputError(f"{where(path, line)}: {len(row)} fields, where the first row "
                             f"(line {first}) has {width}: {','.join(row)[:80]!r}")
        if not points and line == first:
            names = [c.strip().lower() for c in row]
            hx = [i for i, n in enumerate(names) if n in _X_NAMES]
            hy = [i for i, n in enumerate(names) if n in _Y_NAMES]
            if hx and hy:  # a header naming the columns
                cx, cy = hx[0], hy[0]
                if names[cx] in _LON_NAMES and names[cy] in _LAT_NAMES:
                    src_crs = WGS84
                continue
        try:
            x, y = float(row[cx]), float(row[cy])
        except (ValueError, IndexError):
            if line == first and not points and len(row) >= 2:
                if len(row) > 2:
                    raise InputError(
                        f"{where(path, line)}: no x and y columns among "
                        f"{', '.join(c.strip() for c in row)[:120]}: name them x,y (or "
                        "easting,northing) in the raster's CRS, or lon,lat in WGS 84") \
                        from None
                continue  # a header of two other names: x, y are the two columns
            raise InputError(f"{where(path, line)}: expected x,y numbers, got {','.join(row)!r}")
        if not (math.isfinite(x) and math.isfinite(y)):
            raise InputError(f"{where(path, line)}: coordinates must be finite")
        points.append((x, y))
        lines.append(line)
    if not points:
        raise InputError(f"{path}: no points")
    return points, src_crs, lines


def _first_line(text):
    """Line number of the first line that is neither empty nor a comment."""
    for n, s in enumerate(text.splitlines(), start=1):
        if s.strip() and not s.lstrip().startswith("#"):
            return n
    return 0


def _geojson_points(path, text):
    """``(points, crs, places)`` of a GeoJSON text: its points, the CRS they are in and the
    feature each is of (:func:`point_cells`)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{where(path, e.lineno)}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None
    except ValueError:  # an integer of more digits than Python converts (sys.int_info)
        raise InputError(f"{path}: a number of too many digits") from None
    out, places = [], []
    features = 0  # counted, to name a feature without a geometry or a point's

    def position(c):
        if not isinstance(c, (list, tuple)) or len(c) < 2:
            raise InputError(f"{path}: a position must be an array of two numbers, got "
                             f"{json.dumps(c)[:60]}")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in c[:2]):
            raise InputError(f"{path}: a position must be numbers, got "
                             f"{json.dumps(c)[:60]}")
        try:
            x, y = float(c[0]), float(c[1])
        except OverflowError:  # an integer beyond float range
            raise InputError(f"{path}: coordinates must be finite, got an integer beyond "
                             "the range of a float") from None
        if not (math.isfinite(x) and math.isfinite(y)):
            raise InputError(f"{path}: coordinates must be finite, got {json.dumps(c)[:60]}")
        return x, y

    def visit(g, depth=0, place=str(path)):
        nonlocal features
        if depth > 32:
            raise InputError(f"{path}: GeoJSON nested too deeply")
        if not isinstance(g, dict):
            raise InputError(f"{path}: not a GeoJSON object")
        t = g.get("type")
        if t in ("FeatureCollection", "GeometryCollection"):  # t may be any JSON value
            key = "features" if t == "FeatureCollection" else "geometries"
            parts = g.get(key, [])
            if not isinstance(parts, list):
                raise InputError(f"{path}: {key!r} must be an array")
            for part in parts:
                visit(part, depth + 1, place)
        elif t == "Feature":
            features += 1
            if g.get("geometry") is None:
                raise _no_geometry(path, features)
            visit(g["geometry"], depth + 1, f"{path} feature {features}")
        elif t == "Point":
            out.append(position(g.get("coordinates")))
        elif t == "MultiPoint":
            cs = g.get("coordinates")
            if not isinstance(cs, list):
                raise InputError(f"{path}: MultiPoint coordinates must be an array")
            out.extend(position(c) for c in cs)
        else:
            raise InputError(f"{path}: GeoJSON {t!r} is not a point geometry")
        places.extend([place] * (len(out) - len(places)))

    visit(doc)
    if not out:
        raise InputError(f"{path}: no points")
    return out, geojson_crs(doc, path), places


def _no_geometry(path, n):
    """A feature without a geometry: refused, as skipping it would give the points after it
    the numbers (labels, allocations) of the points before them."""
    return InputError(f"{path}: feature {n} has no geometry (the points are numbered in the "
                      "file's order: give each feature a point, or remove it)")


#: WKB geometry types (2-D: pyogrio forces them) by number, for the refusal of other ones
_WKB_TYPES = {1: "Point", 2: "LineString", 3: "Polygon", 4: "MultiPoint",
              5: "MultiLineString", 6: "MultiPolygon", 7: "GeometryCollection"}


def _ogr_layer(path, columns=None):
    """``(meta, geometry, fields)`` of the first layer of an OGR vector file, read by pyogrio
    (2-D WKB geometries; ``columns``: the fields to read, None all); a file GDAL cannot read
    is one :class:`InputError` naming it."""
    import pyogrio.raw  # here: 0.3-0.9 s of import, for the runs that read such a file
    try:
        meta, _, geometry, fields = pyogrio.raw.read(path, layer=0, columns=columns,
                                                     force_2d=True)
    except Exception as e:  # noqa: BLE001 - GDAL's errors (pyogrio.errors) name no layer
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"{path}: not a vector file OGR reads ({reason})") from None
    return meta, geometry, fields


def _ogr_points(path):
    """``(points, crs, places)`` of the first layer of an OGR vector file: its Point and
    MultiPoint geometries (their WKB), the layer's CRS (None: the raster's) and the feature
    each point is of (:func:`point_cells`)."""
    meta, geometry, _ = _ogr_layer(path, columns=[])
    out, places = [], []
    try:
        for n, wkb in enumerate(geometry, start=1):
            if wkb is None:
                raise _no_geometry(path, n)
            _wkb_points(bytes(wkb), out, path)
            places.extend([f"{path} feature {n}"] * (len(out) - len(places)))
        if not out:
            raise InputError(f"{path}: no points")
    except InputError as e:  # a GeoPackage of several layers: say which one was read
        import pyogrio
        layers = [str(name) for name, _ in pyogrio.list_layers(path)]
        if len(layers) < 2:
            raise
        raise InputError(f"{e} (in its first layer, {layers[0]!r}, the one read, of "
                         f"{len(layers)}: {', '.join(map(repr, layers))})") from None
    return out, meta.get("crs") or None, places


def ogr_lines(path):
    """``(lines, costs, crs)`` of the first layer of an OGR vector file (GeoPackage,
    FlatGeobuf, ... as ``terrain path`` writes them): each LineString (and each part of a
    MultiLineString) as an ``(N, 2)`` array, the features' ``cost`` field (None without one),
    the layer's CRS (None without one)."""
    meta, geometry, fields = _ogr_layer(path)
    names = list(meta.get("fields", []))
    cost = fields[names.index("cost")] if "cost" in names else None
    lines, costs = [], []
    for i, wkb in enumerate(geometry):
        if wkb is None:
            continue
        wkb = bytes(wkb)
        order = "<" if wkb[0] == 1 else ">"
        (kind,) = struct.unpack_from(order + "I", wkb, 1)
        if kind == 2:
            parts, at = [wkb], 0
        elif kind == 5:
            (n,) = struct.unpack_from(order + "I", wkb, 5)
            parts, at = [], 9
            for _ in range(n):
                (m,) = struct.unpack_from("<I" if wkb[at] == 1 else ">I", wkb, at + 5)
                parts.append(wkb[at:at + 9 + 16 * m])
                at += 9 + 16 * m
        else:
            raise InputError(f"{path}: feature {i} is a "
                             f"{_WKB_TYPES.get(kind, f'geometry type {kind}')}, not a line")
        for part in parts:
            o = "<" if part[0] == 1 else ">"
            (m,) = struct.unpack_from(o + "I", part, 5)
            lines.append(np.frombuffer(part, o + "f8", 2 * m, 9).reshape(m, 2))
            costs.append(None if cost is None else float(cost[i]))
    return lines, costs, meta.get("crs") or None


def _wkb_points(wkb, out, path, at=0):
    """Append the points of the 2-D WKB Point or MultiPoint at ``wkb[at:]`` to ``out``;
    returns where it ends."""
    order = "<" if wkb[at] == 1 else ">"
    (kind,) = struct.unpack_from(order + "I", wkb, at + 1)
    if kind == 1:
        x, y = struct.unpack_from(order + "2d", wkb, at + 5)
        if not (math.isfinite(x) and math.isfinite(y)):
            raise InputError(f"{path}: an empty point or one without finite coordinates")
        out.append((x, y))
        return at + 21
    if kind == 4:
        (n,) = struct.unpack_from(order + "I", wkb, at + 5)
        at += 9
        for _ in range(n):
            at = _wkb_points(wkb, out, path, at)
        return at
    raise InputError(f"{path}: {_WKB_TYPES.get(kind, f'geometry type {kind}')} is not a "
                     "point geometry")


#: the ``crs`` member's name of the lines without a CRS that earlier versions wrote as GeoJSON
#: (positions as they are); now refused (:func:`path_format`)
GRID_COORDINATES = "unknown (grid coordinates)"


def geojson_crs(doc, path):
    """The CRS of a GeoJSON document: its (2008) ``crs`` member's name, else WGS 84; None
    for :data:`GRID_COORDINATES` (positions as they are)."""
    c = doc.get("crs")
    if c is None:
        return WGS84
    name = (c.get("properties") or {}).get("name") if isinstance(c, dict) else None
    if not isinstance(name, str) or not name:
        raise InputError(f"{path}: its 'crs' member names no CRS")
    if name == GRID_COORDINATES:
        return None
    if name.upper().replace(":", "") in ("URNOGCDEF CRSOGC1.3CRS84".replace(" ", ""),
                                         "OGCCRS84"):
        return WGS84
    return name


def reproject_points(points, src, dst, path):
    """``points`` from CRS ``src`` into ``dst``; points said to be longitude/latitude that
    are not are refused with a hint, not sent to PROJ."""
    from .georef import _crs  # zarr's import, only where points are reprojected
    s, d = _crs(src, path), _crs(dst, f"{path}: the raster's CRS")
    if s.is_geographic:
        for x, y in points:
            if not (-360 <= x <= 360 and -90 <= y <= 90):
                raise InputError(
                    f"{path}: point ({x:.10g}, {y:.10g}) is not longitude/latitude, the CRS "
                    f"{'of GeoJSON without a crs member (RFC 7946)' if src == WGS84 else src}"
                    "; give the points in longitude/latitude, name their CRS in a 'crs' "
                    "member, or give a CSV of x,y in the raster's CRS")
    if s == d:
        return points
    from rasterio.warp import transform
    try:
        xs, ys = transform(s, d, [p[0] for p in points], [p[1] for p in points])
    except Exception as e:  # noqa: BLE001 - PROJ refused a point (rasterio's CPLE_* errors)
        raise InputError(f"{path}: cannot reproject its points into the raster's CRS "
                         f"({e})") from None
    out = list(zip(xs, ys))
    if not all(math.isfinite(x) and math.isfinite(y) for x, y in out):
        raise InputError(f"{path}: some points cannot be reprojected into the raster's CRS")
    return out


def raster_source_cells(values, geotransform, grid_geotransform, grid_shape, path="sources",
                        start_values=False, what="source", crs=None, grid_crs=None):
    """Cells of a grid for the non-zero, non-NaN cells of a source raster (row-major order),
    mapped through the cell centres so that the source raster may have its own grid.

    With ``start_values``: every cell that is not NaN is a source, and returns ``(cells,
    costs)``, its values the costs already spent there (GRASS ``r.cost -r``); a negative or
    infinite one is an :class:`InputError`. ``what`` names the cells in errors. A raster in
    another CRS than the grid's (``crs``, ``grid_crs``), or without a georeference where the
    grid has one, is refused: its cells' centres would be taken in the grid's CRS.
    """
    from .georef import crs_label, is_unreferenced, same_crs
    if not same_crs(crs, grid_crs):
        raise InputError(f"{path}: its CRS {crs_label(crs)} is not the DEM's "
                         f"{crs_label(grid_crs)}: reproject it first (gdalwarp -t_srs), or give "
                         f"the {what}s as points, which are reprojected")
    gt = tuple(float(v) for v in geotransform)
    if is_unreferenced(gt, np.shape(values)[0], crs) \
            and not is_unreferenced(grid_geotransform, grid_shape[0], grid_crs):
        raise InputError(f"{path}: has no georeference, where the DEM has one: give it the "
                         f"DEM's (gdal_translate -a_ullr ... -a_srs ...), or give the {what}s "
                         "as cells or points")
    values = np.asarray(values)
    with np.errstate(invalid="ignore"):
        keep = ~np.isnan(values) if start_values else (values != 0) & ~np.isnan(values)
    rr, cc = np.nonzero(keep)
    if rr.size == 0:
        raise InputError(f"{path}: no {what} cells ("
                         + ("not nodata)" if start_values else "non-zero, not nodata)"))
    if tuple(float(v) for v in geotransform) == tuple(float(v) for v in grid_geotransform) \
            and values.shape == tuple(grid_shape):
        cells = list(zip(rr.tolist(), cc.tolist()))
    else:
        cells = [map_to_cell(*cell_centre(r, c, geotransform), grid_geotransform, grid_shape,
                             what=f"{path}: {what} cell ({r}, {c}) at")
                 for r, c in zip(rr.tolist(), cc.tolist())]
    if not start_values:
        return cells
    costs = values[rr, cc].astype(np.float64)
    bad = ~(np.isfinite(costs) & (costs >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{path}: start cost {float(costs[i])!r} at cell (row, col) = "
                         f"({int(rr[i])}, {int(cc[i])}): must be finite and >= 0")
    return cells, costs


def path_format(path, crs, what="paths"):
    """The format lines in ``crs`` are written in, by the suffix of ``path``
    (:data:`LINE_FORMATS`); :class:`InputError` for another, and for GeoJSON without a CRS
    (:func:`_lon_lat_from`).

    >>> path_format("p.geojson", "EPSG:32617"), path_format("streams.gpkg", None)
    ('geojson', 'GPKG')
    """
    fmt = LINE_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InputError(f"{path}: {what} are written as GeoJSON (.geojson), GeoPackage "
                         "(.gpkg) or FlatGeobuf (.fgb)")
    if fmt == "geojson":
        _lon_lat_from(crs, path, what)
    return fmt


def _lon_lat_from(crs, path, what):
    """GeoJSON's positions are longitude/latitude (RFC 7946; GDAL reads a file of other
    positions, whatever its ``crs`` member names, as WGS 84): lines without a CRS, which
    cannot be reprojected, are refused, not written where every GIS misplaces them."""
    if not crs:
        raise InputError(f"{path}: GeoJSON positions are longitude/latitude (RFC 7946), and "
                         f"the {what} have no CRS to reproject from: write a GeoPackage "
                         "(.gpkg) or FlatGeobuf (.fgb), which keep the grid's coordinates, "
                         "or give the DEM a CRS")


def write_paths(target, lines, properties, crs=None, fmt="geojson", what="paths",
                layer="paths", name=None, fields=None):
    """Write LineStrings (lists of map ``(x, y)`` in ``crs``, WKT) with their properties
    (dicts of the same keys: numbers, bools, strings): as an RFC 7946 GeoJSON
    FeatureCollection in WGS 84 (refused without a CRS), or as the layer ``layer`` of a
    GeoPackage or FlatGeobuf (``fmt``, as :func:`path_format` names it) in ``crs`` itself
    (none: no CRS). ``name``: the output as its errors call it (``target`` may be a partial
    beside it); ``fields``: name -> NumPy type of the properties, what a layer of no lines
    still declares."""
    if fmt in ("GPKG", "FlatGeobuf"):
        _write_ogr_lines(target, lines, properties, crs, fmt, layer, name or target, fields)
        return
    if fmt != "geojson":
        raise InputError(f"{target}: unknown {what} format {fmt!r}")
    _lon_lat_from(crs, name or target, "lines")
    from .georef import _crs
    s = _crs(crs, what)
    lon_lat = s == _crs(WGS84, what)
    features = []
    for pts, props in zip(lines, properties):
        pts = list(pts)
        if not lon_lat:
            pts = _to_lon_lat(pts, s, crs, name or target)
        coords = [[float(x), float(y)] for x, y in pts]
        if len(coords) == 1:
            coords = coords * 2  # a LineString needs two positions
        features.append({"type": "Feature",
                         "geometry": {"type": "LineString", "coordinates": coords},
                         "properties": props})
    Path(target).write_text(json_text({"type": "FeatureCollection", "features": features}))


def _to_lon_lat(points, src, crs, shown):
    """``points`` from the CRS ``src`` (``crs``, as the store holds it) into WGS 84;
    :class:`InputError` naming ``shown`` where PROJ has no way there (a local, engineering
    CRS has no longitude/latitude)."""
    from rasterio.warp import transform

    from .georef import crs_label
    try:
        out = list(zip(*transform(src, WGS84, [p[0] for p in points], [p[1] for p in points])))
    except Exception:  # noqa: BLE001 - PROJ found no operation (rasterio's CPLE_* errors)
        out = None
    if out is None or not all(math.isfinite(v) for p in out for v in p):
        raise InputError(f"{shown}: GeoJSON positions are longitude/latitude (RFC 7946), and "
                         f"the CRS {crs_label(crs)} cannot be reprojected to them: write a "
                         "GeoPackage (.gpkg) or FlatGeobuf (.fgb), which keep the CRS and its "
                         "coordinates")
    return out


@contextlib.contextmanager
def _ogr_options(driver):
    """GDAL's options for writing a ``driver`` file (restored after). A GeoPackage records
    when it was written (``gpkg_contents.last_change``), so two runs of one job write other
    bytes: with ``SOURCE_DATE_EPOCH`` set (the reproducible-builds convention, which GDAL
    does not read) that time instead, for outputs identical byte for byte
    (``OGR_CURRENT_DATE``). And SQLite keeps no rollback journal (``OGR_SQLITE_JOURNAL``):
    the file is a partial that is removed on failure and renamed into place when whole,
    and a failed write rolled back shrank it below the file size limit it met, which then
    read as a "disk I/O error" (:func:`terrain.io.outputs.disk_full_reason` sees a file
    grown to the limit)."""
    options = {}
    if driver == "GPKG":
        options["OGR_SQLITE_JOURNAL"] = "OFF"
        epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
        if epoch.isdigit():
            when = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc)
            options["OGR_CURRENT_DATE"] = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    if not options:
        yield
        return
    import pyogrio
    before = {k: pyogrio.get_gdal_config_option(k) for k in options}
    pyogrio.set_gdal_config_options(options)
    try:
        yield
    finally:
        pyogrio.set_gdal_config_options(before)


def _write_ogr_lines(target, lines, properties, crs, driver, layer, shown, types=None):
    """:func:`write_paths` through OGR (pyogrio): WKB LineStrings, one field a property."""
    import pyogrio.raw
    geometry = np.empty(len(lines), object)
    for i, pts in enumerate(lines):
        a = np.asarray(list(pts), "<f8").reshape(-1, 2)
        if len(a) == 1:
            a = np.concatenate([a, a])  # a LineString needs two positions
        geometry[i] = struct.pack("<BII", 1, 2, len(a)) + a.tobytes()
    names = list(properties[0]) if properties else list(types or ())
    fields = []
    for name in names:
        values = np.asarray([p[name] for p in properties],
                            None if properties else (types or {})[name])
        fields.append(values.astype(object) if values.dtype.kind == "U" else values)
    # FlatGeobuf's spatial index would order the features by place: kept in their order
    options = {"SPATIAL_INDEX": "NO"} if driver == "FlatGeobuf" else {}
    # OGR goes by the name's suffix (a FlatGeobuf named otherwise becomes a folder), and
    # an output is written under a partial name first: written as NAME.fgb, then renamed
    target = Path(target)
    suffix = next(k for k, v in LINE_FORMATS.items() if v == driver)
    named = target if target.suffix.lower() == suffix else target.with_name(target.name + suffix)
    try:
        with warnings.catch_warnings(), _ogr_options(driver), gdal_path(named) as path:
            # a grid without a CRS has none to give (the summary says so)
            warnings.filterwarnings("ignore", "'crs' was not provided")
            pyogrio.raw.write(path, geometry, fields, names, driver=driver,
                              layer=layer, geometry_type="LineString", crs=crs or None,
                              layer_options=options)
            # read back whole: FlatGeobuf's writer drops a failed write (a full disk) and
            # reports nothing, which left a truncated file that no reader opens
            written = len(pyogrio.raw.read(path, columns=[])[2])
        if written != len(lines):
            raise InputError(f"{shown}: {written} of {len(lines)} lines read back from the "
                             f"{driver} written; nothing written")
        if named != target:
            os.replace(named, target)
    except Exception as e:  # noqa: BLE001 - pyogrio's errors name no errno
        full = disk_full_reason(e, named.parent, written=(named,))
        if full is not None:  # the output's own line (atomic_output), nothing published
            raise OSError(errno.ENOSPC, full) from None
        if isinstance(e, (InputError, OSError)):
            raise
        raise InputError(f"{shown}: the {driver} writer failed ({e}); nothing written") \
            from None
    finally:
        if named != target and named.exists():
            named.unlink()
