"""The friendly Python API, in the shape of xarray-spatial: rasters in, rasters out.

Raster operations (:func:`mst`; ``cost_distance`` and ``sssp`` join here the same way) take
a DEM as

* a NumPy array (NaN = nodata),
* an xarray DataArray (2-D, or ``(band, y, x)`` with one band): its coordinates, attributes
  naming the grid mapping and its ``spatial_ref`` (rioxarray's georeference) are kept, and
  the cell size comes from its transform,
* a Dask array (computed: the in-memory algorithms hold the whole grid; the out-of-core
  path is the command line / :mod:`pipelines`),
* a path: a tile store (read window by window) or any grid :func:`terrain.io.open_grid`
  reads (georeference from the file),

and return an :class:`xarray.DataArray` on the same grid (same coordinates and CRS) with
the result's summary in its attributes. Graph operations (:func:`bfs`, :func:`diameter`)
take a :class:`terrain.graph.Graph`, a SciPy sparse matrix, a NetworkX graph or
``(indptr, indices)`` (see :func:`terrain.graph.as_graph`).

Two helpers are the seam for further raster operations: :func:`as_dem` (any input above
-> ``(float32 array, Georef)``) and :func:`raster_like` (a result array -> a DataArray on
the input's grid).

Examples
--------
>>> import numpy as np, terrain
>>> forest = terrain.mst(np.array([[1, 2], [3, 4]], np.float32), backend="cpu")
>>> forest.values.tolist(), forest.attrs["edges"], forest.attrs["total_weight"]
([[7, 0], [0, 0]], 3, 9.0)
>>> terrain.diameter(__import__("networkx").path_graph(4), backend="cpu").diameter
3
"""

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import InputError
from .io.georef import GRID_MAPPING, check_weight_units, crs_wkt

__all__ = ["mst", "bfs", "diameter", "as_dem", "raster_like", "Georef", "MST_BITS"]

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
        A tile store input (read window by window).
    """

    cellsize: tuple = (1.0, 1.0)
    crs: object = None
    geotransform: object = None
    template: object = None
    store: object = None
    where: str = "dem"


def _is_dataarray(obj):
    return type(obj).__name__ == "DataArray" and hasattr(obj, "dims")


def _is_dask(obj):
    return type(obj).__module__.startswith("dask.array") and hasattr(obj, "compute")


def _cellsize_of(da):
    try:
        res = da.rio.resolution()
        return (abs(float(res[0])), abs(float(res[1])))
    except Exception:
        pass
    out = []
    for dim in (da.dims[1], da.dims[0]):
        c = np.asarray(da.coords[dim].values, dtype=np.float64) if dim in da.coords else None
        out.append(abs(float(c[1] - c[0])) if c is not None and c.size > 1 else 1.0)
    return tuple(out)


def _crs_of(da):
    try:
        crs = da.rio.crs
        if crs is not None:
            return crs.to_wkt()
    except Exception:
        pass
    name = da.attrs.get("grid_mapping") or da.encoding.get("grid_mapping") or GRID_MAPPING
    if name in da.coords:
        a = da.coords[name].attrs
        return a.get("crs_wkt") or a.get("spatial_ref")
    return None


def as_dem(dem):
    """Any DEM input (see the module docstring) -> ``(float32 array or None, Georef)``.

    The array is None for a tile store (read it through ``georef.store``).

    Examples
    --------
    >>> z, g = as_dem([[1, 2], [3, 4]])
    >>> z.dtype, g.cellsize
    (dtype('float32'), (1.0, 1.0))
    """
    if isinstance(dem, (str, Path)):
        from .tiles import is_store, open_store
        if is_store(dem):
            store = open_store(dem)
            return None, Georef(tuple(store.cellsize), store.attrs.get("crs"),
                                tuple(store.geotransform), None, store, str(dem))
        from .io import read_grid
        z, grid = read_grid(dem)
        return z, Georef(tuple(grid.cellsize), grid.crs, tuple(grid.geotransform), None, None,
                         str(dem))
    if _is_dataarray(dem):
        da = dem
        if da.ndim == 3 and da.shape[0] == 1:
            da = da.isel({da.dims[0]: 0}, drop=True)
        if da.ndim != 2:
            raise InputError(f"DataArray {da.name!r}: a DEM must be 2-D, got dims {da.dims}")
        values = np.asarray(da.data.compute() if _is_dask(da.data) else da.values,
                            dtype=np.float32)
        nodata = da.attrs.get("_FillValue", da.encoding.get("_FillValue"))
        try:
            nodata = da.rio.nodata if nodata is None else nodata
        except Exception:
            pass
        if nodata is not None and not np.isnan(nodata):
            values = np.where(values == np.float32(nodata), np.float32(np.nan), values)
        return values, Georef(_cellsize_of(da), _crs_of(da), None, da, None,
                              f"DataArray {da.name!r}" if da.name else "DataArray")
    if _is_dask(dem):
        dem = dem.compute()
    z = np.asarray(dem, dtype=np.float32)
    if z.ndim != 2:
        raise InputError(f"a DEM must be 2-D, got shape {z.shape}")
    return z, Georef()


def raster_like(values, georef, name, attrs=None):
    """A result array as a DataArray on the input's grid (coordinates and CRS kept).

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
        return da
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
    return xr.DataArray(values, dims=("y", "x"), coords=coords, name=name, attrs=attrs)


def mst(dem, connectivity=8, weight="max", *, tile=512, backend=None, cellsize=None):
    """Minimum spanning forest of the grid graph of a DEM, as a direction-bit raster.

    Parameters
    ----------
    dem : ndarray, xarray.DataArray, dask array, or path
        Elevations, NaN (or the DataArray's nodata) = nodata; see the module docstring.
    connectivity : {4, 8}
    weight : {'max', 'absdiff', 'slope', 'length3d'}
        ``slope``/``length3d`` need a projected CRS (refused on a geographic one).
    tile : int
        Tile side for an in-memory DEM (a tile store keeps its own).
    backend : {'cpu', 'gpu', 'auto'}, optional
    cellsize : (dx, dy), optional
        Overrides the cell size taken from the input's georeference.

    Returns
    -------
    xarray.DataArray
        uint8 ``mst`` on the DEM's grid (same coordinates, ``spatial_ref``/CRS kept): bit
        ``d`` set when the forest holds the edge from the cell in direction ``d`` (1 E,
        2 S, 4 SE, 8 SW). Attributes: ``total_weight``, ``edges``, ``trees``, ``vertices``,
        ``connectivity``, ``weight``, ``bits``.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> z = xr.DataArray(np.array([[1, 2, 3], [4, 5, 6]], np.float32), dims=("y", "x"),
    ...                  coords={"y": [15.0, 5.0], "x": [5.0, 15.0, 25.0]})
    >>> f = mst(z, connectivity=4, backend="cpu")
    >>> f.values.tolist(), f.x.values.tolist(), int(f.attrs["trees"])
    ([[3, 3, 2], [0, 0, 0]], [5.0, 15.0, 25.0], 1)
    """
    from .grid.mst import grid_mst

    z, geo = as_dem(dem)
    check_weight_units(weight, geo.crs, geo.where)
    cs = tuple(cellsize) if cellsize is not None else geo.cellsize
    r = grid_mst(geo.store if z is None else z, connectivity=connectivity, weight=weight,
                 tile=tile, backend=backend, cellsize=cs)
    attrs = {"total_weight": float(r.total_weight), "edges": int(r.edges), "trees": int(r.trees),
             "vertices": int(r.vertices), "connectivity": int(r.connectivity),
             "weight": str(r.weight), "bits": MST_BITS}
    return raster_like(r.mask, geo, "mst", attrs)


def bfs(graph, sources, **options):
    """Breadth-first search: :func:`terrain.graph.bfs` (hop distances, predecessors).

    ``graph``: a :class:`terrain.graph.Graph`, SciPy sparse matrix, NetworkX graph or
    ``(indptr, indices)``; for NetworkX graphs ``sources`` are nodes.

    Examples
    --------
    >>> import networkx as nx
    >>> bfs(nx.path_graph(4), 1, backend="cpu").dist.tolist()
    [1, 0, 1, 2]
    """
    from .graph import bfs as _bfs
    return _bfs(graph, sources, **options)


def diameter(graph, **options):
    """Exact diameter by eccentricity bounding: :func:`terrain.graph.diameter`.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> diameter(sp.diags_array([np.ones(4), np.ones(4)], offsets=[-1, 1]), backend="cpu").diameter
    4
    """
    from .graph import diameter as _diameter
    return _diameter(graph, **options)
