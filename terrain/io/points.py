"""Points in map coordinates: read from CSV / GeoJSON / rasters, and mapped to grid cells.

A grid's geotransform is GDAL's ``(x0, dx, 0, y0, 0, dy)`` (``dy < 0`` for north-up): cell
``(row, col)`` covers ``x0 + col*dx .. x0 + (col+1)*dx`` and its centre is at
``x0 + (col + 0.5)*dx, y0 + (row + 0.5)*dy``. A point on a cell's west or north edge
belongs to that cell.

Examples
--------
>>> map_to_cell(2.5, 7.9, (0.0, 1.0, 0.0, 10.0, 0.0, -1.0), (10, 10))
(2, 2)
>>> cell_centre(2, 2, (0.0, 1.0, 0.0, 10.0, 0.0, -1.0))
(2.5, 7.5)
"""

import csv
import json
import math
from pathlib import Path

import numpy as np

from ..errors import InputError, where

__all__ = ["map_to_cell", "cell_centre", "read_points", "raster_source_cells"]


def map_to_cell(x, y, geotransform, shape, what="point"):
    """``(row, col)`` of the cell holding map point ``(x, y)``; :class:`InputError` outside."""
    x0, dx, rx, y0, ry, dy = (float(v) for v in geotransform)
    if rx or ry:
        raise InputError(f"{what}: rotated geotransforms are not supported")
    col = math.floor((float(x) - x0) / dx)
    row = math.floor((float(y) - y0) / dy)
    if not (0 <= row < shape[0] and 0 <= col < shape[1]):
        raise InputError(f"{what} ({x}, {y}) is outside the raster "
                         f"({shape[0]} x {shape[1]} cells)")
    return row, col


def cell_centre(row, col, geotransform):
    """Map coordinates of the centre of cell ``(row, col)``."""
    x0, dx, _, y0, _, dy = (float(v) for v in geotransform)
    return x0 + (col + 0.5) * dx, y0 + (row + 0.5) * dy


def read_points(path):
    """Points ``[(x, y), ...]`` from a CSV (``x,y`` per line, optional header) or a GeoJSON
    file (Point / MultiPoint geometries, or a FeatureCollection of them)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    text = path.read_text(errors="replace")
    if path.suffix.lower() in (".json", ".geojson") or text.lstrip().startswith("{"):
        return _geojson_points(path, text)
    points = []
    for line, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or all(not c.strip() for c in row) or row[0].lstrip().startswith("#"):
            continue
        try:
            x, y = float(row[0]), float(row[1])
        except (ValueError, IndexError):
            if line == 1 and not points:
                continue  # a header
            raise InputError(f"{where(path, line)}: expected x,y numbers, got {','.join(row)!r}")
        if not (math.isfinite(x) and math.isfinite(y)):
            raise InputError(f"{where(path, line)}: coordinates must be finite")
        points.append((x, y))
    if not points:
        raise InputError(f"{path}: no points")
    return points


def _geojson_points(path, text):
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{where(path, e.lineno)}: not valid JSON ({e.msg})") from None
    out = []

    def visit(g):
        if not isinstance(g, dict):
            raise InputError(f"{path}: not a GeoJSON object")
        t = g.get("type")
        if t == "FeatureCollection":
            for f in g.get("features", []):
                visit(f)
        elif t == "Feature":
            visit(g.get("geometry") or {})
        elif t == "GeometryCollection":
            for h in g.get("geometries", []):
                visit(h)
        elif t == "Point":
            out.append(tuple(float(v) for v in g["coordinates"][:2]))
        elif t == "MultiPoint":
            out.extend(tuple(float(v) for v in c[:2]) for c in g["coordinates"])
        else:
            raise InputError(f"{path}: GeoJSON {t!r} is not a point geometry")

    visit(doc)
    if not out:
        raise InputError(f"{path}: no points")
    return out


def raster_source_cells(values, geotransform, grid_geotransform, grid_shape, path="sources"):
    """Cells of a grid for the non-zero, non-NaN cells of a source raster (row-major order),
    mapped through the cell centres so that the source raster may have its own grid."""
    values = np.asarray(values)
    with np.errstate(invalid="ignore"):
        rr, cc = np.nonzero((values != 0) & ~np.isnan(values))
    if rr.size == 0:
        raise InputError(f"{path}: no source cells (non-zero, not nodata)")
    if tuple(float(v) for v in geotransform) == tuple(float(v) for v in grid_geotransform) \
            and values.shape == tuple(grid_shape):
        return list(zip(rr.tolist(), cc.tolist()))
    return [map_to_cell(*cell_centre(r, c, geotransform), grid_geotransform, grid_shape,
                        what=f"{path}: source cell ({r}, {c}) at")
            for r, c in zip(rr.tolist(), cc.tolist())]
