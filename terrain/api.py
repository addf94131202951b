"""The friendly Python API, in the shape of xarray-spatial: rasters in, rasters out.

Raster operations (:func:`mst`, :func:`cost_distance`, :func:`fill`, :func:`flow`) take a
DEM as a NumPy array (NaN = nodata); an xarray DataArray (2-D, or one band of
``(band, y, x)``; coordinates, grid mapping and ``spatial_ref`` kept, the cell size and
transform from its coordinates (else its grid mapping's), CF's ``scale_factor``/
``add_offset`` applied as a file's scale and offset); a Dask array (computed: these
algorithms hold the grid; out of core is the command line's); or a path: a tile store or
any grid :func:`terrain.io.open_grid` reads.
They return xarray objects (:func:`cost_distance`: NumPy arrays unless the input is xarray)
on the same grid (coordinates and CRS) with the result's summary in the attributes.
:func:`watershed` and :func:`streams` take :func:`flow`'s Dataset or a flow store. Graph
operations (:func:`bfs`, :func:`diameter`, :func:`sssp`) take what
:func:`terrain.graph.as_graph` takes. :func:`as_dem` and :func:`raster_like` are the seam
for further raster operations.

Examples
--------
>>> import numpy as np, terrain
>>> forest = terrain.mst(np.array([[1, 2], [3, 4]], np.float32), backend="cpu")
>>> forest.values.tolist(), forest.attrs["edges"], forest.attrs["total_weight"]
([[7, 0], [0, 0]], 3, 9.0)
>>> terrain.diameter(__import__("networkx").path_graph(4), backend="cpu").diameter
3
"""

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError, interruption, naming_items, warn
from .io.georef import (GRID_MAPPING, UNREFERENCED, check_north_up, check_weight_units,
                        crs_label, crs_wkt, same_crs, unit_of, unplaced_geotransform,
                        warn_degrees, warn_unreferenced)
from .io.points import POINT_SUFFIXES, VECTOR_SUFFIXES, point_cells, raster_source_cells
from .io.raster import nodata_value, warn_rounded

__all__ = ["mst", "cost_distance", "fill", "flow", "watershed", "streams", "bfs", "diameter",
           "sssp", "as_dem", "raster_like", "Georef", "MST_BITS", "CostDistance"]

MST_BITS = "bit d set: the forest holds the edge from this cell in direction d (1 E, 2 S, 4 SE, 8 SW)"


@dataclass
class Georef:
    """Where a DEM came from: its grid and how to label a result on it.

    Attributes
    ----------
    cellsize : (dx, dy)
    crs : str or None
        WKT.
    geotransform : tuple or None
        GDAL order.
    template : xarray.DataArray or None
        The input DataArray (2-D), whose coordinates a result takes.
    store : TileStore or None
        A tile store input.
    where : str
        The input's name for error messages.
    units : str or None
        The elevations' unit, where the input names one (a raster band's, a store's, a
        DataArray's ``units`` attribute).
    """

    cellsize: tuple = (1.0, 1.0)
    crs: object = None
    geotransform: object = None
    template: object = None
    store: object = None
    where: str = "dem"
    units: object = None

    def with_units(self, attrs):
        """``attrs`` with the elevations' ``units`` where known (a layer in their unit)."""
        return {**attrs, "units": self.units} if self.units else attrs


def _is_dataarray(obj):
    return type(obj).__name__ == "DataArray" and hasattr(obj, "dims")


def _is_dask(obj):
    return type(obj).__module__.startswith("dask.array") and hasattr(obj, "compute")


def _attrs_transform(da):
    """The affine ``(a, b, c, d, e, f)`` of the ``transform`` attribute that
    ``xarray.open_rasterio`` (and rioxarray without its accessor) leave, as a GDAL
    geotransform; None without one."""
    t = da.attrs.get("transform")
    try:
        a, b, c, d, e, f = (float(v) for v in tuple(t)[:6])
    except (TypeError, ValueError):
        return None
    return (c, a, b, f, d, e)


def _cellsize_of(da):
    # recalc: from the coordinates where they say (rioxarray's cached GeoTransform is the
    # source's still after da[::2, ::3] or a coarsen: cells 10 m apart where they are 20)
    try:
        res = da.rio.resolution(recalc=True)
        return (abs(float(res[0])), abs(float(res[1])))
    except Exception:
        pass
    out = []
    for dim in (da.dims[1], da.dims[0]):
        c = np.asarray(da.coords[dim].values, dtype=np.float64) if dim in da.coords else None
        out.append(abs(float(c[1] - c[0])) if c is not None and c.size > 1 else None)
    gt = _attrs_transform(da)
    if gt is not None:  # where the coordinates do not say
        out = [out[0] or abs(gt[1]), out[1] or abs(gt[5])]
    return tuple(v or 1.0 for v in out)


def _grid_mapping(da):
    """The name of a DataArray's grid mapping coordinate (CF's ``spatial_ref``)."""
    return da.attrs.get("grid_mapping") or da.encoding.get("grid_mapping") or GRID_MAPPING


def _crs_of(da):
    try:
        crs = da.rio.crs
        if crs is not None:
            return crs.to_wkt()
    except Exception:
        pass
    name = _grid_mapping(da)
    if name in da.coords:
        a = da.coords[name].attrs
        return a.get("crs_wkt") or a.get("spatial_ref")
    return da.attrs.get("crs") or None  # xarray.open_rasterio's attribute


def _declared_transform(da):
    """The GDAL geotransform a DataArray declares (its grid mapping's ``GeoTransform``, as
    rioxarray writes it, else an ``xarray.open_rasterio`` ``transform``), or None."""
    name = _grid_mapping(da)
    text = da.coords[name].attrs.get("GeoTransform") if name in da.coords else None
    try:
        gt = tuple(float(v) for v in str(text).split()) if text is not None else ()
    except ValueError:
        gt = ()
    return gt if len(gt) == 6 else _attrs_transform(da)


def _thin_geotransform(da):
    """The geotransform that the coordinates of a DataArray of one row or one column say
    (neither rioxarray nor :func:`_geotransform` places it), for its orientation and to
    compare it with another raster's grid (not to place points: the axis of one coordinate
    has no known step): the step of each dimension with two coordinates or more, 1 (x) or
    -1 (y) for one with a single coordinate, as its cell size is taken
    (:func:`_cellsize_of`); None without coordinates (or for no DataArray). A column whose
    y ascends runs north as a grid's rows do."""
    if da is None:
        return None
    gt = []
    for dim, unit in ((da.dims[1], 1.0), (da.dims[0], -1.0)):
        c = da.coords[dim].values if dim in da.coords else None
        if c is None or c.ndim != 1 or c.size == 0 or c.dtype.kind not in "iuf":
            return None
        c = c.astype(np.float64)
        step = c[1] - c[0] if c.size > 1 else unit
        gt += [c[0] - step / 2, step]
    return (gt[0], gt[1], 0.0, gt[2], 0.0, gt[3])


def _check_gridded(da, where):
    """:class:`InputError` for a DataArray placed only by ground control points (rioxarray
    keeps them in its grid mapping's ``gcps``, the geotransform GDAL's identity), as for
    its file (:func:`terrain.io.raster.open_raster`): its cells lie on no grid until warped;
    likewise for coordinates that are not evenly spaced (the cell size and origin would be
    read from their first step or their ends, each cell placed elsewhere). Coordinates
    stored as float32 deviate by their rounding, which is allowed, as is 0.1 % of a step."""
    name = _grid_mapping(da)
    if name in da.coords and da.coords[name].attrs.get("gcps"):
        raise InputError(f"{where}: georeferenced only by ground control points (GCPs): warp "
                         "it onto a grid first (da.rio.reproject(da.rio.crs))")
    for dim in da.dims:
        c = da.coords[dim].values if dim in da.coords else None
        if c is None or c.ndim != 1 or c.size < 2 or c.dtype.kind not in "iuf":
            continue
        given = np.abs(c).max()
        c = c.astype(np.float64)
        step = (c[-1] - c[0]) / (c.size - 1)
        rounding = 4 * float(np.spacing(given)) if given.dtype.kind == "f" else 0.0
        off = np.abs(c - (c[0] + step * np.arange(c.size))).max()
        if not off <= 1e-3 * abs(step) + rounding:
            steps = np.diff(c)
            raise InputError(f"{where}: {dim} coordinates are not evenly spaced (steps from "
                             f"{steps.min():.6g} to {steps.max():.6g}): its cells lie on no "
                             f"grid; interpolate it onto one first (da.interp({dim}=...))")
        if step == 0:  # a cell size of 0, which the cell size's default (1) would hide
            raise InputError(f"{where}: {dim} coordinates do not advance (every one is "
                             f"{c[0]:g}): its cells lie on no grid")


def _unreferenced_grid(da, where):
    """The :class:`Georef` of a DataArray of a raster read without a geotransform
    (rioxarray's: GDAL's identity, its y ascending, the rows "running north"), computed as
    its path is read (:func:`terrain.io.raster.open_raster`: the north-up grid of cells of 1,
    lower-left corner at (0, 0), without a CRS), warned; None for any other DataArray (one
    without coordinates or a transform has no georeference). The results keep the input's
    own labels (not the grid's), so that ``result - da`` pairs each cell with itself."""
    if _declared_transform(da) != UNREFERENCED:
        return None
    name = _grid_mapping(da)
    warn_unreferenced(where)
    gt = unplaced_geotransform(da.shape[0])
    template = da.drop_vars(name) if name in da.coords else da  # no transform, no CRS
    return Georef((1.0, 1.0), None, gt, template, None, where, unit_of(da.attrs))


def _real(values, where):
    """:class:`InputError` unless ``values`` are real numbers (not strings, complex numbers
    or objects: NumPy's conversion would raise its own message, or drop imaginary parts
    with a warning)."""
    dtype = np.asarray(values).dtype
    if dtype.kind not in "biuf":
        raise InputError(f"{where}: a raster must hold real numbers, got dtype {dtype}")


def _finite(values, given, where):
    """:class:`InputError` at the first infinite elevation of ``values`` (``given``: the
    input, whose value there says whether the cast to float32 made it so)."""
    if values.dtype.kind != "f":
        return
    bad = np.isinf(values)
    if not bad.any():
        return
    r, c = (int(v) for v in np.argwhere(bad)[0])
    was = float(np.asarray(given)[r, c])
    why = ("beyond float32's range (3.4028235e38)" if np.isfinite(was)
           else "elevations are finite numbers (NaN is nodata)")
    raise InputError(f"{where}: elevation {was!r} at cell (row, col) = ({r}, {c}): {why}")


def as_dem(dem, dtype=np.float32, name="dem", finite=None):
    """Any DEM input (see the module docstring) -> ``(float array or None, Georef)``:
    ``dtype`` float32 (elevations) or float64 (weights, kept as given); ``name``, the
    parameter it was given as, names an array in errors (a file or store names itself);
    ``finite`` (default: for the ``dem``) refuses an infinite value, which other rasters
    may hold (a friction's +inf: an impassable cell; the cost distance's DEM under the
    friction model, which may be its own friction).

    The array is None for a tile store (read it through ``georef.store``).

    Examples
    --------
    >>> z, g = as_dem([[1, 2], [3, 4]])
    >>> z.dtype, g.cellsize
    (dtype('float32'), (1.0, 1.0))
    """
    finite = name == "dem" if finite is None else finite
    if isinstance(dem, (str, Path)):
        from .tiles import is_store, open_store
        if is_store(dem):
            store = open_store(dem)
            return None, Georef(tuple(store.cellsize), store.attrs.get("crs"),
                                tuple(store.geotransform), None, store, str(dem),
                                unit_of(store.elevation.attrs))
        from .io import read_grid
        z, grid = read_grid(dem, finite=finite)
        return z, Georef(tuple(grid.cellsize), grid.crs, tuple(grid.geotransform), None, None,
                         str(dem), getattr(grid, "units", None))
    if _is_dataarray(dem):
        da = dem
        if da.ndim == 3 and da.shape[0] == 1:
            da = da.isel({da.dims[0]: 0}, drop=True)
        where = f"DataArray {da.name!r}" if da.name else "DataArray"
        if name != "dem":  # which parameter: the DataArray's own name may say nothing
            where = f"{name} ({where})"
        if da.ndim != 2:
            raise InputError(f"{where}: a raster must be 2-D, got dims {da.dims}")
        if da.dims[0] in X_DIMS or da.dims[1] in Y_DIMS:  # rows along x: every step turned
            raise InputError(f"{where}: dims {da.dims}: rows run along y, columns along x "
                             f"(give da.transpose({da.dims[1]!r}, {da.dims[0]!r}))")
        _check_gridded(da, where)
        values = da.data.compute() if _is_dask(da.data) else da.values
        _real(values, where)
        values = _float_values(values, dtype, where, _nodata_of(da), *_scale_of(da, where))
        if finite:
            _finite(values, da, where)
        geo = (_unreferenced_grid(da, where)
               or Georef(_cellsize_of(da), _crs_of(da), None, da, None, where,
                         unit_of(da.attrs)))
        gt = _geotransform(geo, values.shape) or _thin_geotransform(geo.template)
        if gt is not None:  # y ascending: the rows run north; x descending: columns west
            dim, order = (da.dims[0], "ascending") if gt[5] > 0 else (da.dims[1], "descending")
            check_north_up(gt, where, f"reverse the axis first (da.isel({dim}=slice(None, "
                           f"None, -1)) for {dim} {order})")
        return values, geo
    if type(dem).__module__.startswith(GRAPH_MODULES):  # NumPy makes no grid of one
        raise InputError(f"{name}: a graph ({type(dem).__name__}), not a raster: terrain.bfs, "
                         "sssp and diameter take graphs; "
                         "terrain.graph.minimum_spanning_forest(graph) is its minimum "
                         "spanning forest")
    if type(dem).__name__ == "Dataset" and hasattr(dem, "data_vars"):
        raise InputError(f"{name}: an xarray Dataset holds several variables: give one "
                         f"(ds[{next(iter(dem.data_vars), 'name')!r}])")
    if _is_dask(dem):
        dem = dem.compute()
    try:
        dem = np.asanyarray(dem)  # a masked array stays one
    except ValueError:  # ragged nested lists
        raise InputError(f"{name}: a raster must be a rectangular array of numbers") from None
    _real(dem, name)
    if dem.ndim == 3 and dem.shape[0] == 1:  # one band, as rasterio reads it: (1, rows, cols)
        dem = dem[0]
    z = _float_values(dem, dtype, name)
    if z.ndim != 2:
        raise InputError(f"{name}: a raster must be 2-D, got shape {z.shape}")
    if finite:
        _finite(z, dem, name)
    return z, Georef(where=name)


#: the packages of the graphs the graph operations take (SciPy's sparse matrices, NetworkX's
#: graphs, terrain's Graph), which a raster operation is refused by name
GRAPH_MODULES = ("scipy.sparse", "networkx", "terrain.graph")

#: dimension names of the x (columns) and y (rows) axes
X_DIMS = ("x", "lon", "longitude")
Y_DIMS = ("y", "lat", "latitude")


def _float_values(given, dtype, where, nodata=None, scale=1.0, offset=0.0):
    """``given`` as a ``dtype`` array (never the input itself where cells change): a masked
    array's masked cells NaN (what ``rasterio``'s masked reads give), and the cells equal to
    ``nodata`` among the stored values; the others ``stored * scale + offset`` (a raster
    read as a file is: :class:`terrain.io.raster.RasterGrid`); integers that float32 rounds
    said (:func:`terrain.io.raster.warn_rounded`); beyond float32's range: inf, which the
    caller refuses."""
    mask = np.ma.getmaskarray(given) if isinstance(given, np.ma.MaskedArray) else None
    data = np.asarray(np.ma.getdata(given))
    stored = nodata_value(data.dtype, nodata) if nodata is not None else None
    if stored is not None and not np.isnan(stored):
        mask = data == stored if mask is None else mask | (data == stored)
    if (scale, offset) != (1.0, 0.0):
        with np.errstate(over="ignore", invalid="ignore"):  # nodata: NaN below
            data = data.astype(np.float64) * scale + offset
    with np.errstate(over="ignore"):
        values = np.asarray(data, dtype=dtype)
    if np.dtype(dtype) == np.float32 and data.ndim == 2:
        warn_rounded(where, data, values, mask)
    if mask is not None and mask.any():
        if np.may_share_memory(values, data):
            values = values.copy()
        values[mask] = np.nan
    return values


#: where a DataArray says its nodata, in rioxarray's order (``da.rio.nodata`` reads the
#: same, but only once rioxarray is imported: the answer must not depend on an import)
NODATA_KEYS = ("_FillValue", "missing_value", "fill_value", "nodata")


def _nodata_of(da):
    """The nodata value a DataArray declares (:data:`NODATA_KEYS` in its attributes, then
    its encoding's ``_FillValue``), or None. An encoding that scaled the values holds a
    stored value, already masked: not one of the values."""
    scaled = {"scale_factor", "add_offset"} & set(da.encoding)
    for where, key in (*(("attrs", k) for k in NODATA_KEYS),
                       *((("encoding", "_FillValue"),) if not scaled else ())):
        value = getattr(da, where).get(key)
        if value is not None:
            try:
                return float(np.asarray(value).ravel()[0])
            except (TypeError, ValueError, IndexError):
                raise InputError(f"DataArray {da.name!r}: its {key} {value!r} is no "
                                 "number") from None
    return None


def _scale_of(da, where):
    """``(scale_factor, add_offset)`` of a DataArray whose values are still the stored ones
    (CF's attributes, as ``rioxarray.open_rasterio`` and xarray leave them unless
    ``mask_and_scale``; decoded, they are in its ``encoding`` and already applied)."""
    pair = []
    for key, default in (("scale_factor", 1.0), ("add_offset", 0.0)):
        value = da.attrs.get(key, default)
        try:
            pair.append(float(np.asarray(value).ravel()[0]))
        except (TypeError, ValueError, IndexError):
            raise InputError(f"{where}: its {key} {value!r} is no number") from None
    if not (np.all(np.isfinite(pair)) and pair[0] != 0):
        raise InputError(f"{where}: its scale_factor {pair[0]:g} and add_offset {pair[1]:g} "
                         "give no values")
    return tuple(pair)


def _in_memory(dem, dtype=np.float32, name="dem", finite=None):
    """:func:`as_dem`, a tile store read whole."""
    z, geo = as_dem(dem, dtype, name, finite)
    if z is None:
        z = np.asarray(geo.store.read_window(0, geo.store.shape[0], 0, geo.store.shape[1]),
                       dtype)
    return z, geo


def _cellsize(cellsize, geo):
    """The cell size given (a number, or ``(dx, dy)``), each positive and finite, else the
    input's; :class:`InputError` otherwise."""
    if cellsize is None:
        return geo.cellsize
    try:
        pair = np.broadcast_to(np.asarray(cellsize, np.float64), (2,))
    except (TypeError, ValueError):
        pair = None
    if pair is None or not np.all(np.isfinite(pair) & (pair > 0)):
        raise InputError(f"cellsize {cellsize!r}: must be a positive number or two, (dx, dy)")
    return (float(pair[0]), float(pair[1]))


def _on_grid(raster, shape, dem_geo, name, dtype=np.float32):
    """The raster given as parameter ``name`` (friction, weights, outlets), which must lie on
    the DEM's grid (``shape``; its georeference ``dem_geo``, where both say one), in memory."""
    values, geo = _in_memory(raster, dtype, name)
    if values.shape != tuple(shape):
        raise InputError(f"{geo.where}: {values.shape[0]} x {values.shape[1]} cells, the DEM "
                         f"{shape[0]} x {shape[1]}")
    mine, dems = (_geotransform(g, shape) or _thin_geotransform(g.template)
                  for g in (geo, dem_geo))
    if mine is not None and dems is not None:
        step = max(abs(dems[1]), abs(dems[5]), abs(dems[2]), abs(dems[4]))
        if not np.allclose(mine, dems, rtol=0, atol=1e-6 * step):
            raise InputError(f"{geo.where}: not on the DEM's grid: its geotransform "
                             f"{_shown(mine)}, the DEM's {_shown(dems)} (resample it first)")
    if not same_crs(geo.crs, dem_geo.crs):
        raise InputError(f"{geo.where}: its CRS ({crs_label(geo.crs)}) is not the DEM's "
                         f"({crs_label(dem_geo.crs)}): reproject it first")
    return values, geo


def _shown(gt):
    return "(" + ", ".join(f"{v:.10g}" for v in gt) + ")"


#: outlets files read as points, as the command line's ``--outlets`` reads them
#: (``pipelines.fill.named_outlets``); anything else is a raster (a ``.txt`` grid too)
OUTLET_POINT_SUFFIXES = (".csv", ".json", ".geojson") + VECTOR_SUFFIXES


def _outlet_mask(outlets, z, geo):
    """Outlets (cells ``(row, col)``, the non-zero cells of a raster on the grid, or a file)
    as a bool mask on the DEM's grid. An integer array of the grid's shape that could be
    either (a grid of two columns) is refused. A file on a georeferenced DEM is read as the
    command line's ``--outlets`` (:func:`_outlet_file`)."""
    if isinstance(outlets, (str, os.PathLike)):
        points = Path(outlets).suffix.lower() in OUTLET_POINT_SUFFIXES
        gt = _geotransform(geo, z.shape)
        if points or gt is not None:
            return _outlet_file(outlets, gt, z, geo, points)
    if (isinstance(outlets, np.ndarray) and outlets.shape == z.shape == (len(z), 2)
            and outlets.dtype != bool):
        raise InputError(f"{geo.where}: outlets of shape {outlets.shape} could be cells or a "
                         "mask on this two-column grid: give a bool mask or a list of "
                         "(row, col)")
    if isinstance(outlets, (list, tuple)) or (isinstance(outlets, np.ndarray)
                                              and outlets.shape[-1:] == (2,)
                                              and outlets.shape != z.shape):
        try:
            cells = np.asarray(outlets, np.float64)
        except (TypeError, ValueError):
            cells = None
        if cells is None or cells.ndim != 2 or cells.shape[1] != 2:
            raise InputError("outlets: expected (row, col) cells or a raster "
                             "on the DEM's grid")
        if not np.all(np.isfinite(cells)) or np.any(cells != np.round(cells)):
            raise InputError("outlets: cells must be whole (row, col) numbers")
        mask = np.zeros(z.shape, bool)
        for r, c in ((int(a), int(b)) for a, b in cells.tolist()):
            if not (0 <= r < z.shape[0] and 0 <= c < z.shape[1]):
                raise InputError(f"{geo.where}: outlet cell ({r}, {c}) is outside the "
                                 f"grid ({z.shape[0]} x {z.shape[1]} cells)")
            if np.isnan(z[r, c]):  # water leaves at a cell of the grid
                raise InputError(f"{geo.where}: outlet cell ({r}, {c}) is on nodata")
            mask[r, c] = True
        return mask
    mask = np.nan_to_num(_on_grid(outlets, z.shape, geo, "outlets")[0]) != 0
    lost = mask & np.isnan(z)
    if lost.any() and not lost[mask].all():  # all of them: the fill refuses the run
        r, c = np.argwhere(lost)[0]
        warn(f"outlets: {int(lost.sum())} of its {int(mask.sum())} outlet cells lie on the "
             f"DEM's nodata and drain nothing (the first at row {r}, column {c})")
    return mask


def _outlet_file(path, gt, z, geo, points):
    """The outlet mask of file ``path`` as the command line reads ``--outlets``: ``points``
    (CSV ``x,y`` in the DEM's CRS or ``lon,lat``, GeoJSON, a vector layer: reprojected into
    the DEM's CRS), else a raster or tile store whose non-zero cells that are not nodata are
    outlets, mapped through their centres (it may have its own grid). An outlet on nodata
    drains nothing, said in a warning (every one on nodata is refused by the fill)."""
    if gt is None:
        raise InputError(f"{geo.where}: outlets as map points need a georeferenced DEM "
                         "(give (row, col) cells or a raster instead)")
    cells, _ = _file_cells(path, gt, z, geo, "outlets", "outlet", points)
    if not cells:
        raise InputError(f"{path}: no outlets in it")
    rows, cols = np.unique(np.array(cells, np.int64).reshape(-1, 2), axis=0).T
    mask = np.zeros(z.shape, bool)
    mask[rows, cols] = True
    lost = np.flatnonzero(np.isnan(z[rows, cols]))
    if 0 < lost.size < rows.size:
        warn(f"{path}: {lost.size} of its {rows.size} outlet cells lie on the DEM's nodata "
             f"and drain nothing (the first at row {rows[lost[0]]}, column {cols[lost[0]]})")
    return mask


def raster_like(values, georef, name, attrs=None, nodata=None):
    """A result array as a DataArray on the input's grid (coordinates and CRS kept), its
    nodata (``nodata``; NaN for floats) in its ``_FillValue`` attribute, where xarray's
    writers and rioxarray (``rio.nodata``, ``rio.to_raster``) find it (rioxarray's
    ``write_nodata`` of data not masked; a store's layers say it so too).

    Examples
    --------
    >>> da = raster_like(np.zeros((2, 3), np.uint8), Georef(geotransform=(0, 10, 0, 20, 0, -10)), "m")
    >>> da.dims, da.x.values.tolist(), da.y.values.tolist()
    (('y', 'x'), [5.0, 15.0, 25.0], [15.0, 5.0])
    """
    import xarray as xr

    attrs = dict(attrs or {})
    t = georef.template
    if t is not None:
        coords = {k: v for k, v in t.coords.items() if set(v.dims) <= set(t.dims)}
        da = xr.DataArray(values, dims=t.dims, coords=coords, name=name, attrs=attrs)
        gm = t.attrs.get("grid_mapping") or t.encoding.get("grid_mapping")
        if gm:
            da.attrs["grid_mapping"] = gm
        return _with_nodata(da, nodata)
    rows, cols = values.shape
    coords = {}
    if georef.geotransform is not None:
        gt = [float(v) for v in georef.geotransform]
        coords["x"] = gt[0] + gt[1] * (np.arange(cols) + 0.5)
        coords["y"] = gt[3] + gt[5] * (np.arange(rows) + 0.5)
        ref = {"GeoTransform": " ".join(f"{v:.17g}" for v in gt)}
        wkt = crs_wkt(georef.crs)
        if wkt:
            ref.update({"crs_wkt": wkt, "spatial_ref": wkt})
        coords[GRID_MAPPING] = xr.Variable((), np.int32(0), attrs=ref)
        attrs["grid_mapping"] = GRID_MAPPING
    return _with_nodata(xr.DataArray(values, dims=("y", "x"), coords=coords, name=name,
                                     attrs=attrs), nodata)


def _with_nodata(da, nodata):
    if nodata is None and da.dtype.kind == "f":
        nodata = np.nan
    if nodata is not None:
        da.attrs["_FillValue"] = da.dtype.type(nodata)
    return da


def _interrupts_as_raised(function):
    """``function`` raising the KeyboardInterrupt (or SIGTERM's exception) that stopped it
    where Numba wraps it in a SystemError (:func:`terrain.errors.interruption`): a signal
    handled while a kernel's result is boxed. A notebook's or service's ``except
    KeyboardInterrupt`` then sees the interruption it made, as the command line does."""
    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except SystemError as e:
            stop = interruption(e)
            if stop is None:
                raise
            raise stop from None
    return call


@_interrupts_as_raised
def mst(dem, connectivity=8, weight="max", *, tile=512, backend=None, cellsize=None):
    """Minimum spanning forest of the grid graph of a DEM, as a direction-bit raster.

    Parameters
    ----------
    dem : ndarray, xarray.DataArray, dask array, or path
        Elevations, NaN (or the DataArray's nodata) = nodata.
    connectivity : {4, 8}
    weight : {'max', 'absdiff', 'slope', 'length3d'}
        ``slope``/``length3d`` need a projected CRS (refused on a geographic one).
    tile : int
        Tile side for an in-memory DEM (a tile store keeps its own).
    backend : {'cpu', 'gpu', 'auto'}, optional
    cellsize : (dx, dy), optional
        Overrides the input's cell size.

    Returns
    -------
    xarray.DataArray
        uint8 ``mst`` on the DEM's grid: :data:`MST_BITS`, the DEM's nodata cells
        :data:`terrain.grid.mst.MST_NODATA` (255, its ``_FillValue``), as in the command
        line's ``--geotiff``. Attributes: ``total_weight``, ``edges``, ``trees``,
        ``vertices``, ``connectivity``, ``weight``, ``bits``.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> z = xr.DataArray(np.array([[1, 2, 3], [4, 5, 6]], np.float32), dims=("y", "x"),
    ...                  coords={"y": [15.0, 5.0], "x": [5.0, 15.0, 25.0]})
    >>> f = mst(z, connectivity=4, backend="cpu")
    >>> f.values.tolist(), f.x.values.tolist(), int(f.attrs["trees"])
    ([[3, 3, 2], [0, 0, 0]], [5.0, 15.0, 25.0], 1)
    >>> f.dtype.name, f.attrs["total_weight"], f.attrs["weight"]
    ('uint8', 20.0, 'max')
    """
    from .grid.edges import check_weight_range
    from .grid.mst import MST_NODATA, grid_mst

    z, geo = as_dem(dem)
    if cellsize is None:  # given, the cell size is the caller's, in their units
        check_weight_units(weight, geo.crs, geo.where, units=geo.units)
    cs = _cellsize(cellsize, geo)
    if weight != "max":  # the DEM's range (a store's ingest recorded it)
        if z is None:
            stats = geo.store.attrs.get("stats") or {}
        else:
            stats = {"min": np.nanmin(z), "max": np.nanmax(z)} if np.isfinite(z).any() else {}
        check_weight_range(stats.get("min"), stats.get("max"), weight, cs, geo.where)
    r = grid_mst(geo.store if z is None else z, connectivity=connectivity, weight=weight,
                 tile=tile, backend=backend, cellsize=cs)
    attrs = {"total_weight": float(r.total_weight), "edges": int(r.edges), "trees": int(r.trees),
             "vertices": int(r.vertices), "connectivity": int(r.connectivity),
             "weight": str(r.weight), "bits": MST_BITS}
    mask = np.where(_nodata_cells(z, geo), np.uint8(MST_NODATA), r.mask)
    return raster_like(mask, geo, "mst", attrs, MST_NODATA)


def _nodata_cells(z, geo):
    """The nodata cells of the DEM ``z`` (of a tile store read shard by shard: ``z`` None)."""
    if z is not None:
        return np.isnan(z)
    st = geo.store
    out = np.empty(tuple(st.shape), bool)
    for r0, r1, c0, c1 in st.shard_windows():
        out[r0:r1, c0:c1] = np.isnan(st.read_window(r0, r1, c0, c1))
    return out


def _geotransform(geo, shape):
    """GDAL geotransform of the input's grid, or None when it has no georeference."""
    if geo.geotransform is not None:
        return tuple(float(v) for v in geo.geotransform)
    t = geo.template
    if t is None:
        return None
    try:
        gt = tuple(float(v) for v in t.rio.transform(recalc=True).to_gdal())  # as above
        # rioxarray's transform of an array without coordinates (or of one row or column)
        # is GDAL's identity, rows running "north": the coordinates, if any, say more
        if gt != UNREFERENCED:
            return gt
    except Exception:
        pass
    ydim, xdim = t.dims[-2], t.dims[-1]
    if xdim not in t.coords or ydim not in t.coords or min(shape) < 2:
        return _attrs_transform(t)
    x = np.asarray(t.coords[xdim].values, np.float64)
    y = np.asarray(t.coords[ydim].values, np.float64)
    dx, dy = x[1] - x[0], y[1] - y[0]
    return (x[0] - dx / 2, dx, 0.0, y[0] - dy / 2, 0.0, dy)


@dataclass
class CostDistance:
    """The result of :func:`cost_distance` for an input that is not an xarray object:
    the layers (``distance``, ``allocation``, ``backlink``: see :func:`cost_distance`) as
    NumPy arrays, the summary (``attrs``), per-layer attributes (``layer_attrs``) and the
    DEM's :class:`Georef`; :meth:`to_xarray` makes the Dataset an xarray input gets. Its
    least-cost paths (the command line's ``path``): :func:`terrain.grid.least_cost_paths`
    of ``backlink``, ``distance`` and ``allocation``."""

    distance: np.ndarray
    allocation: np.ndarray
    backlink: np.ndarray
    attrs: dict
    layer_attrs: dict
    georef: Georef

    def __getitem__(self, name):
        if name not in ("distance", "allocation", "backlink"):
            raise KeyError(name)
        return getattr(self, name)

    def to_xarray(self):
        """The layers as an :class:`xarray.Dataset` on the DEM's grid (CRS kept)."""
        import xarray as xr
        from .grid.cost_outputs import LAYERS
        layers = {name: raster_like(getattr(self, name), self.georef, name,
                                    _cf_flags(self.layer_attrs[name]), LAYERS[name][1])
                  for name in ("distance", "allocation", "backlink")}
        return xr.Dataset(layers, attrs=dict(self.attrs))


def _cf_flags(attrs):
    """A layer's attributes with its ``codes`` (a dict, which netCDF cannot hold) as CF's
    ``flag_values`` and ``flag_meanings``."""
    attrs = dict(attrs)
    codes = attrs.pop("codes", None)
    if codes:
        attrs["flag_values"] = np.array([int(k) for k in codes], np.uint8)
        attrs["flag_meanings"] = " ".join(codes.values())
    return attrs


@_interrupts_as_raised
def cost_distance(dem, sources=None, *, points=None, start_costs=None, start_values=False,
                  cost=None, friction=None, connectivity=8, max_cost=None, stops=None,
                  stop_points=None, backend=None, cellsize=None):
    """Accumulated cost from sources over a DEM: distance, allocation and backlinks.

    The exact grid SSSP of :func:`terrain.grid.sssp.grid_sssp`, in memory. Conventions:
    ``docs/cost-distance.md``.

    Parameters
    ----------
    dem : ndarray, xarray.DataArray, dask array, or path
        Elevations, NaN (or the DataArray's nodata) = nodata, a barrier.
    sources : sequence of (row, col), optional
        Source cells.
    points : sequence of (x, y), or path, optional
        Sources as map points in the DEM's CRS (georeferenced DEMs), numbered after
        ``sources``; or a file, as the command line's ``--sources``: points (CSV, GeoJSON,
        GeoPackage, ...), reprojected from their CRS into the DEM's, or a raster or tile
        store whose non-zero cells that are not nodata are sources (mapped through their
        centres). With ``start_values``: a raster (path, array or DataArray).
    start_costs : float or sequence of float, optional
        Cost already spent at each source (default 0); with ``start_values`` one number,
        the cost spent at each of ``sources``.
    start_values : bool
        Every cell of the raster ``points`` that is not nodata is a source, starting at its
        value (GRASS ``r.cost -r``; the command line's ``--start-values``), numbered after
        ``sources``. An array without a georeference lies on the DEM's grid; a file or
        georeferenced DataArray may have its own grid (mapped through the cell centres).
    cost : {'absdiff', 'friction', 'tobler'}, optional
        Default: ``friction`` with a friction raster, else ``absdiff``.
    friction : same kinds as ``dem``, optional
        Friction per cell on the DEM's grid (NaN = barrier); required by ``'friction'``.
    connectivity : {4, 8, 16}
    max_cost : float, optional
        Cells farther than this stay unreached.
    stops : sequence of (row, col), or path, optional
        Stop cells (as GRASS ``r.cost``'s): once all are reached, cells farther than the
        farthest of them stay unreached (``attrs["stop_distance"]``) and the CPU's solve ends;
        or a file of them, read as ``points``' files are (the command line's ``--stops``).
    stop_points : sequence of (x, y), optional
        Stop cells as map points in the DEM's CRS (the command line's ``--stop``), before
        ``stops``.
    backend : {'cpu', 'gpu', 'auto'}, optional
    cellsize : (dx, dy), optional
        Overrides the input's cell size.

    Returns
    -------
    CostDistance or xarray.Dataset
        ``distance`` (float64, NaN unreached), ``allocation`` (int32, index of the nearest
        source, -1 unreached), ``backlink`` (uint8, 0 source, ``k + 1`` towards the
        predecessor along arc ``k``, 255 unreached) on the DEM's grid, the summary in
        ``attrs`` (the cells as ``source_rows`` and ``source_cols``, flat as netCDF's
        attributes are): an :class:`xarray.Dataset` for an xarray input, else a
        :class:`CostDistance` (xarray is not imported).

    Examples
    --------
    >>> import numpy as np
    >>> r = cost_distance(np.ones((3, 4), np.float32), [(0, 0)],
    ...                   friction=np.full((3, 4), 2, np.float32), backend="cpu")
    >>> r.distance[0].tolist(), int(r.backlink[0, 1])
    ([0.0, 2.0, 4.0, 6.0], 5)
    >>> int(r.attrs["reached_cells"]), r.allocation.dtype.name, r.attrs["cost"]
    (12, 'int32', 'friction')
    >>> start = np.array([[1.0, np.nan, np.nan, 0.0]])  # NaN: no source
    >>> cost_distance(np.ones((1, 4), np.float32), points=start, start_values=True,
    ...               friction=np.ones((1, 4)), backend="cpu").distance.tolist()
    [[1.0, 2.0, 1.0, 0.0]]
    """
    from .grid.cost_outputs import layer_attributes
    from .grid.costs import check_friction, cost_model_code
    from .grid.sssp import grid_sssp
    from .io.points import map_to_cell

    if cost is None:
        cost = "friction" if friction is not None else "absdiff"
    cost_model_code(cost)
    # as the command line's: an infinite value is a wall only where the DEM gives no
    # elevations to the cost (a friction surface as its own DEM); elevations are finite
    z, geo = _in_memory(dem, finite=cost != "friction")
    if cellsize is None:
        check_weight_units(cost, geo.crs, geo.where, kind="cost", units=geo.units)
    cs = _cellsize(cellsize, geo)
    f = None
    if friction is not None:
        f, fgeo = _on_grid(friction, z.shape, geo, "friction")
        f = check_friction(f, name=fgeo.where)
    cells = [] if sources is None else _listed(sources, "sources", "(row, col) cells")
    origins = [None] * len(cells)  # a points file's place of each source, for its errors
    if _flag(start_values, "start_values"):
        cells, start_costs, origins = _valued_sources(points, cells, start_costs, z, geo)
    elif points is not None:
        gt = _geotransform(geo, z.shape)
        if gt is None:
            raise InputError(f"{geo.where}: map points as sources need a georeferenced DEM "
                             "(give (row, col) cells instead)")
        if isinstance(points, (str, os.PathLike)):
            found, places = _file_cells(points, gt, z, geo, "points", "source",
                                        Path(points).suffix.lower() in POINT_SUFFIXES)
            cells += found
            origins += places
        else:
            cells += [map_to_cell(*_pair(p, geo.where), gt, z.shape,
                                  what=f"{geo.where}: source", raster_crs=geo.crs is not None)
                      for p in _listed(points, "points", "(x, y) points or a points file")]
    if not cells:
        raise InputError(f"{geo.where}: no sources given")
    stop_origins = []
    if isinstance(stops, (str, os.PathLike)):
        gt = _geotransform(geo, z.shape)
        if gt is None:
            raise InputError(f"{geo.where}: a file of stops needs a georeferenced DEM (give "
                             "(row, col) cells instead)")
        stops, stop_origins = _file_cells(stops, gt, z, geo, "stops", "stop",
                                          Path(stops).suffix.lower() in POINT_SUFFIXES)
    if stop_points is not None:
        stops, stop_origins = _with_stop_points(stop_points, stops, stop_origins, z, geo)
    with naming_items("source", origins), naming_items("stop", stop_origins):
        r = grid_sssp(z, cells, start_costs, cost=cost, friction=f, connectivity=connectivity,
                      cellsize=cs, max_cost=max_cost, stops=stops, backend=backend)
    reached = int(np.count_nonzero(~np.isnan(r.distance)))
    # cells as a column of rows and one of columns: netCDF's attributes are flat
    summary = {"cost": cost, "connectivity": int(connectivity), "cellsize": list(cs),
               **_cell_columns("source", cells), "reached_cells": reached,
               "max_distance": float(np.nanmax(r.distance)) if reached else float("nan"),
               "backend": r.stats.get("backend")}
    if max_cost is not None:
        summary["max_cost"] = float(max_cost)
    if start_costs is not None:
        summary["start_costs"] = np.broadcast_to(np.asarray(start_costs, np.float64),
                                                 (len(cells),)).tolist()
    if stops is not None:
        summary.update(_cell_columns("stop", stops))
        if "target_distance" in r.stats:
            summary["stop_distance"] = float(r.stats["target_distance"])
    out = CostDistance(r.distance, r.allocation, r.backlink, summary,
                       layer_attributes(cost, geo.units), geo)
    return out.to_xarray() if geo.template is not None else out


def _valued_sources(raster, cells, start_cost, z, geo):
    """``(cells, costs, origins)`` of ``start_values``: ``cells`` at ``start_cost`` (one
    number), then every cell of ``raster`` that is not nodata at its value, read as the
    command line reads ``--sources RASTER --start-values``
    (:func:`terrain.grid.sources.resolve_sources`). An array without a georeference (or on
    a DEM without one) lies cell for cell on the DEM's grid."""
    from .grid.sources import SourceRaster, resolve_sources
    try:
        spent = None if start_cost is None else float(np.asarray(start_cost).item())
    except (TypeError, ValueError):
        spent = -1.0
    if start_cost is not None and not (np.ndim(start_cost) == 0 and spent >= 0
                                       and np.isfinite(spent)):
        raise InputError(f"start_costs {start_cost!r}: with start_values, one number >= 0: "
                         "the cost spent at each of the sources (the raster's cells start "
                         "at their values)", option="start_costs")
    gt = _geotransform(geo, z.shape)
    if raster is None or isinstance(raster, (str, os.PathLike)):  # a file: as the CLI's
        if gt is None and raster is not None:
            raise InputError(f"{geo.where}: a file of sources needs a georeferenced DEM "
                             "(give an array on its grid instead)")
    else:
        values, rgeo = _in_memory(raster, np.float64, "points", finite=False)
        rgt, crs = _geotransform(rgeo, values.shape), rgeo.crs
        if rgt is None or gt is None:  # placed by neither: the DEM's cells
            if values.shape != z.shape:
                raise InputError(f"{rgeo.where}: {values.shape[0]} x {values.shape[1]} cells, "
                                 f"the DEM {z.shape[0]} x {z.shape[1]}")
            rgt, crs = gt or unplaced_geotransform(z.shape[0]), geo.crs
        raster = SourceRaster(values, rgt, crs, rgeo.where)
    return resolve_sources(gt or unplaced_geotransform(z.shape[0]), z.shape, cells=cells,
                           sources_file=raster, label=f"{geo.where}: ", crs=geo.crs,
                           start_cost=spent, start_values=True)


def _with_stop_points(stop_points, stops, origins, z, geo):
    """``(stops, origins)``: the map points ``stop_points`` as cells (as the command line's
    ``--stop``: :func:`terrain.grid.sources.resolve_sources`), then ``stops``."""
    from .grid.sources import resolve_sources
    gt = _geotransform(geo, z.shape)
    if gt is None:
        raise InputError(f"{geo.where}: map points as stops need a georeferenced DEM (give "
                         "(row, col) cells instead)")
    found, _, _ = resolve_sources(gt, z.shape, _listed(stop_points, "stop_points",
                                                       "(x, y) points"),
                                  label=f"{geo.where}: ", crs=geo.crs, what="stop")
    given = [] if stops is None else [tuple(c) for c in _listed(stops, "stops",
                                                                  "(row, col) cells")]
    return found + given, ([None] * len(found) + list(origins)) if origins else []


def _file_cells(path, gt, z, geo, name, what, points):
    """``(cells, places)`` of the file ``path`` given as parameter ``name`` (``what``: its
    cells' name in errors) on the DEM ``z`` of geotransform ``gt``, as the command line
    reads ``--sources``, ``--stops`` and ``--outlets``: ``points`` (the caller tells them by
    suffix), reprojected into the DEM's CRS, each one's place in the file; else a raster or
    tile store, its non-zero cells that are not nodata, mapped through their centres."""
    if points:
        return point_cells(path, gt, z.shape, what, geo.crs)
    values, fgeo = _in_memory(path, np.float64, name, finite=False)
    found = raster_source_cells(values, _geotransform(fgeo, values.shape), gt, z.shape,
                                fgeo.where, what=what, crs=fgeo.crs, grid_crs=geo.crs)
    return found, [None] * len(found)


def _cell_columns(what, cells):
    """``{what}_rows`` and ``{what}_cols`` of ``cells`` ``(row, col)``."""
    rows, cols = zip(*((int(a), int(b)) for a, b in cells)) if len(cells) else ((), ())
    return {f"{what}_rows": list(rows), f"{what}_cols": list(cols)}


def _listed(values, name, kind):
    """``values`` as a list; :class:`InputError` naming ``name`` for what is not a sequence
    (a single number given for a list of cells)."""
    try:
        return list(values)
    except TypeError:
        raise InputError(f"{name}: expected a list of {kind}, got {values!r}",
                         option=name) from None


def _flag(value, name):
    """``value`` of a True/False parameter; :class:`InputError` for anything else (a
    string "no" is truthy)."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} {value!r}: must be True or False")
    return bool(value)


#: the True/False options of the graph operations (None: their default)
GRAPH_FLAGS = ("directed", "predecessors", "extremes")


def _flags(options):
    """The graph operations' ``options`` with each of :data:`GRAPH_FLAGS` given checked by
    :func:`_flag` (``directed="no"`` ran a directed search)."""
    return {k: _flag(v, k) if k in GRAPH_FLAGS and v is not None else v
            for k, v in options.items()}


def _pair(p, where):
    """A source point as ``(x, y)``; :class:`InputError` for anything else."""
    try:
        x, y = p
    except (TypeError, ValueError):
        raise InputError(f"{where}: a source point must be (x, y), got {p!r}") from None
    return x, y


@_interrupts_as_raised
def flow(dem, *, connectivity=8, outlets=None, weights=None, filled=False, backend=None,
         cellsize=None):
    """Depression filling, D8 (or D4) flow directions and flow accumulation of a DEM, in
    memory. Conventions: :mod:`terrain.hydrology.flow` and docs/hydrology.md.

    Parameters
    ----------
    dem : ndarray, xarray.DataArray, dask array, or path
        Elevations, NaN (or the DataArray's nodata) = nodata. A store written by ``terrain
        fill`` gives its ``filled`` layer, not filled again (as the command line's ``flow``
        reads it; a fill of another connectivity, or with named outlets or kept
        depressions, is refused: give the DEM).
    connectivity : {8, 4}
    outlets : same kinds as ``dem``, sequence of (row, col), or path, optional
        The cells water leaves by: the non-zero cells of a raster on the DEM's grid, cells,
        or a file as the command line's ``--outlets`` reads it: points (CSV ``x,y`` or
        ``lon,lat``, GeoJSON, GeoPackage, Shapefile, FlatGeobuf, KML; reprojected into the
        DEM's CRS), or a raster whose non-zero cells are mapped through their centres (on
        a grid of its own) (default: the grid's edge and nodata). A cell on nodata is
        refused; a raster's on nodata drain nothing (a warning says how many, an error when
        all do).
    weights : same kinds as ``dem``, optional
        Per-cell weights (rainfall) to accumulate instead of 1 per cell; NaN counts 0.
    filled : bool
        ``dem`` is already depression-filled: skip the fill. A DEM with pits or flats that
        drain nowhere is then refused (:class:`terrain.hydrology.NotFilled`).
    backend : {'cpu', 'gpu', 'auto'}, optional
    cellsize : (dx, dy), optional
        Overrides the input's cell size.

    Returns
    -------
    xarray.Dataset
        ``filled`` (float32), ``direction`` (uint8 ESRI codes: 1 E, 2 SE, 4 S, 8 SW, 16 W,
        32 NW, 64 N, 128 NE; 0 outlet; 255 nodata), ``accumulation`` (float64, NaN nodata)
        on the DEM's grid; the counts in the attributes.

    Examples
    --------
    >>> import numpy as np
    >>> ds = flow(np.array([[3, 2, 1], [3, 2, 1]], np.float32), filled=True, backend="cpu")
    >>> ds.direction.values.tolist(), ds.accumulation.values.tolist()
    ([[1, 1, 0], [1, 1, 0]], [[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    >>> {name: ds[name].dtype.name for name in ds.data_vars}
    {'filled': 'float32', 'direction': 'uint8', 'accumulation': 'float64'}
    """
    import xarray as xr

    from .hydrology import (DEGREE_STEPS, FLOW_MEANINGS, check_drained, fill_depressions,
                            fill_store_attrs, flow_accumulation, flow_directions)
    from .io.zarr_meta import open_group

    filled = _flag(filled, "filled")
    if isinstance(dem, (str, os.PathLike)) and fill_store_attrs(dem, connectivity, outlets):
        # a fill's store: its filled layer is the filled DEM (an epsilon fill's too), as the
        # command line's flow reads it; its elevation filled again would route flats anew
        _, geo = as_dem(dem)
        z, filled = np.asarray(open_group(dem, mode="r")["filled"][:], np.float32), True
    else:
        z, geo = _in_memory(dem)
    mask = None if outlets is None else _outlet_mask(outlets, z, geo)
    w = (None if weights is None
         else _on_grid(weights, z.shape, geo, "weights", np.float64)[0])
    if cellsize is None:
        warn_degrees(geo.crs, geo.where, DEGREE_STEPS)
    f = z if filled else fill_depressions(z, connectivity, mask, backend=backend).filled
    cs = _cellsize(cellsize, geo)
    d = flow_directions(f, cs, connectivity, mask, backend=backend)
    if filled:
        check_drained(d.stats, "dem")
    acc = flow_accumulation(d.direction, w, backend=backend)
    layers = {name: raster_like(v, geo, name, geo.with_units({"meaning": FLOW_MEANINGS[name]})
                                if name == "filled" else {"meaning": FLOW_MEANINGS[name]},
                                255 if name == "direction" else None)
              for name, v in (("filled", np.array(f, np.float32)),  # a copy: not the input
                              ("direction", d.direction), ("accumulation", acc))}
    attrs = {"connectivity": int(connectivity), "cellsize": list(cs),
             "cells": int(d.stats["cells"]), "outlet_cells": int(d.stats["outlets"]),
             "flat_cells": int(d.stats["flat_cells"]),
             "max_accumulation": float(np.nanmax(acc)) if d.stats["cells"] else float("nan")}
    return xr.Dataset(layers, attrs=attrs)


@_interrupts_as_raised
def watershed(flow, outlets=None, *, points=None, snap=0.0):
    """The basins of outlets: each cell labelled with the first outlet on its downstream path
    (:func:`terrain.hydrology.watershed`), as the command line's ``watershed`` labels them.

    Parameters
    ----------
    flow : xarray.Dataset or path
        :func:`flow`'s Dataset (its ``direction``, and ``accumulation`` to snap), or the store
        a flow run of the command line wrote.
    outlets : sequence of (row, col), optional
        Outlet cells, labelled after the map points of ``points``.
    points : sequence of (x, y), or path, optional
        Outlets as map points in the flow's CRS (labelled first), or a file as the command
        line's ``--outlets``: points (CSV, GeoJSON, GeoPackage, ...; reprojected) or a raster
        whose cells that are not nodata or 0 are outlets (labelled after the cells).
    snap : float
        Move each outlet to the cell of largest accumulation within this many map units of
        its cell's centre (ArcGIS's Snap Pour Point; default 0: as given).

    Returns
    -------
    xarray.DataArray
        int32 ``watershed`` on the flow's grid: 1, 2, ... per outlet in the order above, 0
        where a cell drains elsewhere, -1 at nodata (its ``_FillValue``); the outlets (after
        snapping) in ``outlet_rows``/``outlet_cols``, each basin's cells in ``basin_cells``.

    Examples
    --------
    >>> import numpy as np
    >>> ds = flow(np.array([[3, 2, 1], [3, 2, 1]], np.float32), filled=True, backend="cpu")
    >>> watershed(ds, [(0, 1), (1, 2)]).values.tolist()
    [[1, 1, 0], [2, 2, 2]]
    """
    from .hydrology import WATERSHED_MEANING, label_outlets

    direction, accumulation, geo, gt = _flow_input(flow, "snapping" if snap else None)
    warn_degrees(geo.crs, geo.where, "so are the basins' areas and the snap distance")
    given = [] if points is None or isinstance(points, (str, os.PathLike)) else points
    labels, cells = label_outlets(
        direction, accumulation, gt, geo.crs,
        _listed(given, "points", "(x, y) points or a points file"),
        [] if outlets is None else _listed(outlets, "outlets", "(row, col) cells"),
        points if isinstance(points, (str, os.PathLike)) else None, snap, where=geo.where)
    counts = np.bincount(labels[labels > 0].ravel(), minlength=len(cells) + 1)[1:]
    attrs = {"meaning": WATERSHED_MEANING, **_cell_columns("outlet", cells),
             "basin_cells": counts.tolist()}
    return raster_like(labels, geo, "watershed", attrs, -1)


def _flow_input(flow, needs_accumulation=None):
    """``(direction, accumulation, Georef, geotransform)`` of :func:`flow`'s Dataset or a
    flow store (the accumulation as it is held: read when used); ``needs_accumulation``
    (what needs it) refuses a Dataset without one."""
    from .hydrology import read_flow_store
    if isinstance(flow, (str, os.PathLike)):
        group, _ = read_flow_store(flow)
        direction, accumulation = group["direction"][:], group["accumulation"]
        gt = group.attrs.get("geotransform") or unplaced_geotransform(direction.shape[0])
        geo = Georef(where=str(flow), crs=group.attrs.get("crs"), geotransform=tuple(gt))
    elif type(flow).__name__ == "Dataset" and "direction" in getattr(flow, "data_vars", ()):
        da = flow["direction"]
        direction, accumulation = np.asarray(da.values), flow.get("accumulation")
        geo = Georef(_cellsize_of(da), _crs_of(da), None, da, None, "flow")
    else:
        raise InputError(f"flow: expected terrain.flow's Dataset or a flow store, got "
                         f"{type(flow).__name__}")
    if accumulation is None and needs_accumulation:
        raise InputError(f"flow: {needs_accumulation} needs its accumulation")
    return direction, accumulation, geo, (_geotransform(geo, direction.shape)
                                          or unplaced_geotransform(direction.shape[0]))


@_interrupts_as_raised
def streams(flow, threshold):
    """The stream network: cells of accumulation >= ``threshold``, one line a link (a source
    or confluence down to the next confluence or an outlet) with its Strahler order, as the
    command line's ``streams`` writes them (:func:`terrain.hydrology.stream_lines`).

    Parameters
    ----------
    flow : xarray.Dataset or path
        :func:`flow`'s Dataset (its ``direction`` and ``accumulation``), or the store a flow
        run of the command line wrote.
    threshold : float
        A cell is on a stream when its accumulation is at least this (> 0).

    Returns
    -------
    list of dict
        One a link, in the command's order: ``coords`` (map ``(x, y)`` in the flow's CRS,
        through the cells' centres), ``order`` (Strahler), ``upstream`` (accumulation at its
        last cell), ``outlet`` (it ends at an outlet), ``cells``, ``length`` (map units).

    Examples
    --------
    >>> import numpy as np
    >>> ds = flow(np.array([[3, 2, 1]], np.float32), filled=True, backend="cpu")
    >>> [(s["coords"], s["order"], s["cells"]) for s in streams(ds, 2)]
    [([(1.5, 0.5), (2.5, 0.5)], 1, 2)]
    """
    from .hydrology import stream_lines

    direction, accumulation, geo, gt = _flow_input(flow, "a stream network")
    warn_degrees(geo.crs, geo.where, "so are the links' lengths")
    lines, props = stream_lines(direction, accumulation, threshold, gt, where=geo.where)
    return [{"coords": [tuple(float(v) for v in p) for p in xy], **prop}
            for xy, prop in zip(lines, props)]


@_interrupts_as_raised
def bfs(graph, sources, **options):
    """Breadth-first search (:func:`terrain.graph.bfs`): hop distances, predecessors.

    Parameters
    ----------
    graph : SciPy sparse matrix, NetworkX graph, :class:`terrain.graph.Graph` or
        ``(indptr, indices)``
        Taken undirected. A graph file (the command line's input) is read by
        :func:`terrain.graph.load_graph` (``lcc=True`` keeps its largest component).
    sources : vertex or list of vertices
        The graph's own ids: a file's ids (a Graph read by
        :func:`terrain.graph.load_graph`, as the command line's sources), nodes of a
        NetworkX graph, row numbers of a matrix or arrays.
    **options
        ``backend``, ``predecessors`` (default True) of :func:`terrain.graph.bfs`.

    Returns
    -------
    BFSResult
        For a matrix, Graph or arrays: ``dist`` (int, -1 where unreached) by internal
        vertex number, the ids in ``ids`` (``dist[i]`` is ``ids[i]``'s), ``pred`` (the
        predecessors' ids, -1 at sources and unreached) and ``sources`` in ids. For a
        NetworkX graph, in nodes as :func:`sssp`'s: ``dist`` ``{node: hops}`` of the reached
        nodes in order of distance, ``pred`` ``{node: predecessor}`` of the reached
        non-sources, ``sources`` nodes.

    Examples
    --------
    >>> import networkx as nx
    >>> r = bfs(nx.path_graph(["a", "b", "c", "d"]), "b", backend="cpu")
    >>> r.dist, r.pred, r.sources
    ({'b': 0, 'a': 1, 'c': 1, 'd': 2}, {'a': 'b', 'c': 'b', 'd': 'c'}, ['b'])
    >>> bfs(nx.to_scipy_sparse_array(nx.path_graph(4)), 1, backend="cpu").dist.tolist()
    [1, 0, 1, 2]
    """
    from .graph import bfs as _bfs
    from .graph import is_networkx
    r = _bfs(graph, sources, **_flags(options))
    if is_networkx(graph):
        _in_nodes(r, r.dist >= 0)
    return r


def _in_nodes(r, reached):
    """A result on a NetworkX graph as dicts of its nodes, in place: ``dist`` of the
    ``reached`` in order of distance (ties in the graph's node order), ``pred`` of the
    reached non-sources."""
    nodes = r.ids.tolist()
    sources = r.sources.tolist()
    reached = np.flatnonzero(reached)
    order = reached[np.argsort(r.dist[reached], kind="stable")].tolist()
    if r.pred is not None:
        is_source = set(sources)
        pred = r.pred.tolist()
        r.pred = {nodes[i]: pred[i] for i in order if nodes[i] not in is_source}
    r.dist = {nodes[i]: r.dist[i].item() for i in order}
    r.sources = sources


@_interrupts_as_raised
def diameter(graph, weighted=False, **options):
    """Exact diameter by eccentricity bounding, in hops (:func:`terrain.graph.diameter`) or
    by edge weights (:func:`terrain.graph.weighted_diameter`).

    Parameters
    ----------
    graph : SciPy sparse matrix, NetworkX graph, :class:`terrain.graph.Graph` or
        ``(indptr, indices[, weights])``
        Taken undirected; a disconnected graph is answered for its largest component.
    weighted : bool
        Path lengths as sums of weights (a matrix's values, a NetworkX graph's ``weight``
        attribute), as ``nx.diameter(G, weight="weight")``; default hops, as
        ``nx.diameter(G)``.
    **options
        ``extremes`` (radius, center, periphery too), ``backend``, ``progress``; in hops
        also ``effective`` (the sampled 90th-percentile diameter over that many sources)
        and ``seed`` (of the sample, default 0), weighted also ``algorithm``.

    Returns
    -------
    DiameterResult
        ``diameter``, ``endpoints``, ``path`` (and with ``extremes`` ``radius``, ``center``,
        ``periphery``) in the graph's own vertices.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> diameter(sp.diags_array([np.ones(4), np.ones(4)], offsets=[-1, 1]), backend="cpu").diameter
    4
    >>> import networkx as nx
    >>> G = nx.Graph([(0, 1, {"weight": 5}), (1, 2, {"weight": 1}), (2, 3, {"weight": 1})])
    >>> diameter(G, backend="cpu").diameter, diameter(G, weighted=True, backend="cpu").diameter
    (3, 7)
    """
    from .graph import diameter as _diameter
    from .graph import weighted_diameter
    weighted, options = _flag(weighted, "weighted"), _flags(options)
    hops_only = [k for k in ("effective", "seed") if options.get(k) is not None]
    if weighted and hops_only:
        raise InputError(f"{hops_only[0]} does not combine with weighted: the effective "
                         "diameter is SNAP's 90th percentile of hop counts, interpolated "
                         "between hop levels, which weighted distances do not have",
                         option=(hops_only[0], "weighted"))
    return (weighted_diameter if weighted else _diameter)(graph, **options)


@_interrupts_as_raised
def sssp(graph, sources, **options):
    """Weighted shortest paths from one source or many (:func:`terrain.graph.sssp`) in the
    input's own vertex labels.

    Parameters
    ----------
    graph : SciPy sparse matrix, NetworkX graph, :class:`terrain.graph.Graph` or
        ``(indptr, indices[, weights])``
        A matrix's values are the weights (undirected unless ``directed=True``); a NetworkX
        graph's ``weight`` attribute (edges without it weigh 1), directed as the graph is.
    sources : vertex or list of vertices
        The graph's own ids: a file's ids (a Graph read by
        :func:`terrain.graph.load_graph`; DIMACS ids start at 1), nodes of a NetworkX
        graph, row numbers of a matrix or arrays.
    **options
        ``algorithm``, ``delta``, ``backend``, ``directed``, ``predecessors`` of
        :func:`terrain.graph.sssp`.

    Returns
    -------
    SSSPResult
        For a matrix, Graph or arrays: ``dist`` by internal vertex number (-1 or ``inf``
        where unreached), the ids in ``ids`` (``dist[i]`` is ``ids[i]``'s), ``pred`` (the
        predecessors' ids, -1 for none) and ``sources`` in ids. For a NetworkX graph:
        ``dist`` ``{node: distance}`` of the
        reached nodes in order of distance, equal distances in the order of the graph's
        nodes (NetworkX's own functions list those in the order their search met them, and
        keep a sum of integer weights an int where other weights are reals: the NetworkX
        backend, ``backend="terrain"``, does as they do), ``pred`` ``{node: predecessor}`` of the
        reached non-sources, ``sources`` nodes.

    Examples
    --------
    >>> import networkx as nx, scipy.sparse as sp
    >>> G = nx.Graph([("a", "b", {"weight": 4}), ("b", "c", {"weight": 1}),
    ...               ("a", "c", {"weight": 7}), ("x", "y", {"weight": 2})])
    >>> r = sssp(G, "a", backend="cpu")
    >>> r.dist, r.pred
    ({'a': 0, 'b': 4, 'c': 5}, {'b': 'a', 'c': 'b'})
    >>> A = sp.csr_array(np.array([[0, 2.5, 0], [0, 0, 1.0], [0, 0, 0]]))
    >>> sssp(A, 0, backend="cpu").dist.tolist()
    [0.0, 2.5, 3.5]
    """
    from .graph import is_networkx
    from .graph import sssp as _sssp
    r = _sssp(graph, sources, **_flags(options))
    if is_networkx(graph):
        _in_nodes(r, r.reached)
    return r


@_interrupts_as_raised
def fill(dem, connectivity=8, *, outlets=None, epsilon=False, min_depth=None, min_area=None,
         hierarchy=False, tile=512, backend=None):
    """Fill the depressions of a DEM to their spill elevations
    (:func:`terrain.hydrology.fill_depressions`; docs/hydrology.md).

    Parameters
    ----------
    dem : ndarray, xarray.DataArray, dask array, or path
        Elevations, NaN (or the DataArray's nodata) = nodata.
    connectivity : {4, 8}
    outlets : same kinds as ``dem``, sequence of (row, col), or path, optional
        Non-zero cells of a raster on the DEM's grid, cells, or a file of points or a
        raster (as :func:`flow`'s) (default: the grid's edge and nodata). A cell on nodata
        is refused; a raster's on nodata drain nothing (a warning says how many, an error
        when all do).
    epsilon : bool
        RichDEM's epsilon fill (flats raised by float32 steps so that every cell drains).
    min_depth, min_area : optional
        Keep the depressions at least this deep / this many cells large (their pits
        drain), fill the others.
    hierarchy : bool
        Also return the depression hierarchy (the columns of
        :func:`terrain.hydrology.depression_hierarchy`) as ``hierarchy_*`` variables along
        ``depression_id``.
    tile : int
    backend : {'cpu', 'gpu', 'auto'}, optional

    Returns
    -------
    xarray.Dataset
        ``filled`` (float32), ``depth`` (float32), ``depression`` (int32) on the DEM's grid,
        and with ``min_depth`` or ``min_area`` ``sinks`` (uint8, 1 at the pit of each kept
        depression: those cells drain); the summary in its attributes.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.array([[5, 5, 5, 5], [5, 1, 2, 5], [5, 5, 3, 5], [5, 4, 5, 5]], np.float32)
    >>> ds = fill(z, backend="cpu")
    >>> ds.filled.values[1:3, 1:3].tolist(), int(ds.attrs["depressions"])
    ([[4.0, 4.0], [5.0, 4.0]], 1)
    >>> {name: ds[name].dtype.name for name in ds.data_vars}
    {'filled': 'float32', 'depth': 'float32', 'depression': 'int32'}
    """
    import xarray as xr

    from .hydrology import FILL_MEANINGS, SINKS_MEANING, fill_depressions

    z, geo = _in_memory(dem)
    epsilon, hierarchy = _flag(epsilon, "epsilon"), _flag(hierarchy, "hierarchy")
    out = None if outlets is None else _outlet_mask(outlets, z, geo).astype(np.uint8)
    r = fill_depressions(z, connectivity, out, epsilon=epsilon, min_depth=min_depth,
                         min_area=min_area, hierarchy=hierarchy, tile=tile, backend=backend)
    layers = {name: raster_like(getattr(r, name), geo, name,
                                geo.with_units({"meaning": FILL_MEANINGS[name]})
                                if name != "depression" else {"meaning": FILL_MEANINGS[name]})
              for name in ("filled", "depth", "depression")}
    if r.sinks is not None:  # the kept depressions' pits, which drain
        sinks = np.zeros(z.shape, np.uint8)
        sinks.ravel()[r.sinks] = 1
        layers["sinks"] = raster_like(sinks, geo, "sinks", {"meaning": SINKS_MEANING}, 0)
    ds = xr.Dataset(layers, attrs={k: v for k, v in r.stats.items()
                                   if isinstance(v, (int, float, str, bool))})
    if r.hierarchy is not None:
        for name, values in r.hierarchy.items():
            if not name.startswith("_"):
                ds[f"hierarchy_{name}"] = ("depression_id", np.asarray(values))
    return ds
