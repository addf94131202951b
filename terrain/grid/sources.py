"""The cells a grid run starts from (or stops at, or traces to): map points, cells and the
cells of a file, with the cost already spent at each. One reading for the command line
(``cost-distance``, ``path``, ``watershed``) and the Python API (:func:`terrain.cost_distance`).
"""

import math
from collections import namedtuple
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io.points import POINT_SUFFIXES, map_to_cell, point_cells, raster_source_cells
from ..io.remote import as_path
from ..tiles import is_store, open_store

__all__ = ["resolve_sources", "parse_pair", "is_points_file", "SourceRaster"]

#: a raster of sources already in memory (an array, a DataArray): its values, GDAL
#: geotransform, CRS (WKT or None) and its name in errors
SourceRaster = namedtuple("SourceRaster", "values geotransform crs where")


def parse_pair(text, what, cast=float):
    """``"A,B"`` as two numbers (``cast``); :class:`InputError` otherwise (NaN too).

    >>> parse_pair("1.5, 2", "source")
    (1.5, 2.0)
    """
    try:
        a, b = (cast(v.strip()) for v in str(text).split(","))
    except ValueError:
        kind = "whole numbers" if cast is int else "numbers"
        raise InputError(f"{what} {text!r}: expected two {kind} A,B") from None
    if not (math.isfinite(a) and math.isfinite(b)):
        raise InputError(f"{what} {text!r}: coordinates must be finite numbers")
    return a, b


def is_points_file(path):
    """Whether the file ``path`` is read as points (by its suffix), not as a raster."""
    return (not isinstance(path, SourceRaster)
            and Path(str(path)).suffix.lower() in POINT_SUFFIXES)


def _point(p, what):
    """A map point ``(x, y)``: a string ``"X,Y"`` or a pair."""
    if isinstance(p, str):
        return parse_pair(p, what)
    try:
        x, y = p
    except (TypeError, ValueError):
        raise InputError(f"a {what} point must be (x, y), got {p!r}") from None
    return x, y


def _read_raster(sources_file):
    """``(values, geotransform, crs, where)`` of a raster or tile store of sources."""
    if isinstance(sources_file, SourceRaster):
        return sources_file
    path = as_path(sources_file)
    if is_store(path):
        st = open_store(path)
        return SourceRaster(st.read_window(0, st.shape[0], 0, st.shape[1]), st.geotransform,
                            st.attrs.get("crs"), path)
    from ..io import read_grid
    values, grid = read_grid(path, finite=False)  # start costs: checked by the caller
    return SourceRaster(values, grid.geotransform, grid.crs, path)


def resolve_sources(geotransform, shape, points=(), cells=(), sources_file=None, label="",
                    crs=None, start_cost=None, start_values=False, what="source"):
    """``(cells, costs, origins)``: source cells ``[(row, col), ...]`` in order: ``points``
    (map X,Y), then ``cells`` (ROW,COL), then the cells of ``sources_file`` (a raster, a tile
    store, a :class:`SourceRaster`, or points: :func:`terrain.io.points.read_points`,
    reprojected into ``crs``); the cost already spent at each (float64; None when every
    source starts at 0): ``start_cost``, or with ``start_values`` every cell of the raster
    ``sources_file`` that is not nodata is a source starting at its value (GRASS ``r.cost
    -r``), the others at ``start_cost``; and where each came from, for errors about one
    (:func:`terrain.errors.naming_items`): its place in a points file
    (:func:`terrain.io.points.point_cells`), else None. ``what`` names the cells in errors
    (stop cells are read the same way).

    >>> resolve_sources((0, 10, 0, 30, 0, -10), (3, 4), points=[(15, 25)], cells=["2,3"])
    ([(0, 1), (2, 3)], None, [None, None])
    """
    values = bool(start_values)
    if values and (sources_file is None or is_points_file(sources_file)):
        raise InputError("start costs from values need a raster of sources")
    out = []
    for p in points:
        x, y = _point(p, what)
        out.append(map_to_cell(x, y, geotransform, shape, what=f"{label}{what}",
                               raster_crs=crs is not None))
    for c in cells:
        r, k = parse_pair(c, f"{what} cell", int) if isinstance(c, str) else c
        try:
            whole = float(r).is_integer() and float(k).is_integer()
        except (TypeError, ValueError):
            whole = False
        if not whole:  # NaN was "outside the raster"
            raise InputError(f"{label}{what} cell ({r}, {k}): cells must be whole (row, col) "
                             "numbers")
        if not (0 <= r < shape[0] and 0 <= k < shape[1]):
            raise InputError(f"{label}{what} cell ({r}, {k}) is outside the raster "
                             f"({shape[0]} x {shape[1]} cells)")
        out.append((int(r), int(k)))
    costs = np.full(len(out), float(start_cost or 0.0)) if values else None
    origins = [None] * len(out)
    if sources_file is not None:
        if is_points_file(sources_file):
            found, places = point_cells(as_path(sources_file), geotransform, shape, what, crs)
            out.extend(found)
            origins.extend(places)
        else:
            grid_values, grid_gt, grid_crs, where = _read_raster(sources_file)
            found = raster_source_cells(grid_values, grid_gt, geotransform, shape, where,
                                        start_values=values, what=what, crs=grid_crs,
                                        grid_crs=crs)
            if values:
                found, spent = found
                costs = np.concatenate([costs, spent])
            out.extend(found)
            origins.extend([None] * len(found))
    if not out:
        raise InputError(f"{label}no {what}s given")
    if start_cost is not None and not values:
        costs = np.full(len(out), float(start_cost))
    return out, costs, origins
