"""What the cost-distance output layers hold: types, nodata (fill) values, units and codes.

One definition for every writer and reader (the output store, its GeoTIFFs, ``info``,
``verify``, the pictures, :func:`terrain.cost_distance`):

``distance``   float64, accumulated cost from the nearest source; NaN unreached (nodata)
``backlink``   uint8, 0 at a source root, ``k + 1`` for arc code ``k`` towards the
               predecessor (:data:`terrain.grid.costs.ARC_NAMES`); 255 unreached
``allocation`` int32, index of the nearest source (ties: the lower index); -1 unreached

Layers are Blosc LZ4 (GIL released: writer threads compress in parallel). Whole shards are
encoded in the calling thread (:func:`terrain.tiles.store.write_windows`), a device layer's
from pinned tiles, so a run holds no host copy of its outputs (docs/cost-distance.md).

Examples
--------
>>> BACKLINK_CODES["1"], BACKLINK_CODES["9"], BACKLINK_CODES["255"]
('E', 'ENE', 'unreached')
>>> layer_attributes("tobler")["distance"]["units"], layer_attributes("absdiff", "m")["distance"]["units"]
('s', 'm')
"""

import math

import numpy as np

from ..errors import InputError
from ..tiles.store import result_compressors
from .costs import ARC_DC, ARC_DR, ARC_NAMES

__all__ = ["LAYERS", "BACKLINK_CODES", "DISTANCE_UNITS", "layer_attributes",
           "layer_compressors", "LAYER_KINDS", "least_cost_paths"]


# name -> (dtype, fill (= nodata), description)
LAYERS = {
    "distance": ("float64", np.nan, "accumulated cost from the nearest source; NaN unreached"),
    "backlink": ("uint8", 255, "0 source root, k+1 = arc code k to the predecessor (1..8 "
                 "E SE S SW W NW N NE, 9..16 knight moves ENE..NNE), 255 unreached"),
    "allocation": ("int32", -1, "index of the nearest source (ties: lower index); -1 unreached"),
}
# code -> direction from the cell to its predecessor
BACKLINK_CODES = {"0": "source", **{str(k + 1): n for k, n in enumerate(ARC_NAMES)},
                  "255": "unreached"}
# what the distance of each cost model counts, said in its description
DISTANCE_UNITS = {"absdiff": "elevation units (sum of |dz| along the path)",
                  "friction": "friction x CRS length units (sum of L x mean friction)",
                  "tobler": "seconds of walking (Tobler), times the friction factor"}


def layer_attributes(cost, elevation_units=None):
    """Attributes of each output layer (``long_name``, ``description``, codes, and ``units``
    where the layer has a unit UDUNITS knows: the distance in seconds for ``tobler``, in the
    DEM's ``elevation_units`` for ``absdiff`` when known; friction, ids and codes have none)."""
    units = {"tobler": "s", "absdiff": elevation_units}.get(cost)
    return {
        "distance": {"long_name": "accumulated cost", **({"units": units} if units else {}),
                     "description": f"{LAYERS['distance'][2]}; in {DISTANCE_UNITS[cost]}",
                     "cost": cost},
        "backlink": {"long_name": "direction to the predecessor",
                     "description": LAYERS["backlink"][2], "codes": dict(BACKLINK_CODES)},
        "allocation": {"long_name": "nearest source",
                       "description": LAYERS["allocation"][2]},
        "friction": {"long_name": "friction",
                     "description": "friction per cell (cost per unit length); NaN barrier"},
    }


#: what each layer's cells hold, which picks its codecs
#: (:data:`terrain.tiles.store.RESULT_CODECS`)
LAYER_KINDS = {"distance": "values", "allocation": "ids", "backlink": "codes",
               "friction": "values"}


def layer_compressors(name="distance"):
    """The codecs of the output layer ``name``: Blosc LZ4 level 5 after a byte shuffle
    (floats), a bit shuffle (backlinks) or none (allocation).

    >>> [(c["configuration"]["cname"], c["configuration"]["shuffle"])
    ...  for n in ("distance", "allocation", "backlink") for c in layer_compressors(n)]
    [('lz4', 'shuffle'), ('lz4', 'noshuffle'), ('lz4', 'bitshuffle')]
    """
    return result_compressors(LAYER_KINDS.get(name, "values"))


def least_cost_paths(backlink, distance, allocation, cells, where=None):
    """Least-cost paths from ``cells`` back to their sources along the backlinks.

    Parameters
    ----------
    backlink, distance, allocation : 2-D arrays (NumPy, or zarr arrays read a chunk at a time)
        The layers of a cost-distance result (:data:`LAYERS`): :func:`terrain.cost_distance`'s
        or a cost-distance store's.
    cells : sequence of (row, col)
        The ends of the paths (``terrain path``'s targets).
    where : str, optional
        The result's name, which begins the errors (a store's path).

    Returns
    -------
    list of dict
        One a cell: ``cells`` (``(row, col)`` from the source to the cell), ``cost`` (its
        distance) and ``source`` (its allocation). :class:`InputError` for a cell off the
        grid or not reached (nodata too), naming it as ``target`` ``i``, its index in
        ``cells``.

    Examples
    --------
    >>> from terrain.grid.sssp import grid_sssp
    >>> r = grid_sssp(np.array([[1, 2, 4], [1, 1, 3]], np.float32), [(0, 0)], backend="cpu")
    >>> p = least_cost_paths(r.backlink, r.distance, r.allocation, [(0, 2)])[0]
    >>> p["cells"], p["cost"], p["source"]
    ([(0, 0), (1, 1), (0, 2)], 3.0, 0)
    """
    head = f"{where}: " if where else ""
    chunks = getattr(backlink, "chunks", None)
    tile = int(chunks[0]) if chunks else max(backlink.shape)
    cache = {}

    def tile_of(r, c):  # the backlinks a tile at a time: a store's chunk, read once
        key = (r // tile, c // tile)
        if key not in cache:
            if len(cache) > 64:
                cache.clear()
            r0, c0 = key[0] * tile, key[1] * tile
            cache[key] = np.asarray(backlink[r0:r0 + tile, c0:c0 + tile])
        return cache[key], key[0] * tile, key[1] * tile

    R, C = backlink.shape
    out = []
    for i, cell in enumerate(cells):
        try:
            r, c = (float(v) for v in cell)
        except (TypeError, ValueError):
            raise InputError(f"{head}target {i}: expected a (row, col) cell, got {cell!r}",
                             item=("target", i)) from None
        if not (r.is_integer() and c.is_integer() and 0 <= r < R and 0 <= c < C):
            raise InputError(f"{head}target {i} at cell (row, col) = ({r:g}, {c:g}) is not a "
                             f"cell of the {R} x {C} grid", item=("target", i))
        r, c = int(r), int(c)
        d = float(distance[r, c])
        if math.isnan(d):
            raise InputError(f"{head}target {i} at cell (row, col) = ({r}, {c}) is not "
                             "reached from any source", item=("target", i))
        path = [(r, c)]
        while True:
            t, r0, c0 = tile_of(r, c)
            code = int(t[r - r0, c - c0])
            if code == 0:
                break
            if code == 255 or len(path) > R * C:
                raise InputError(f"{head}broken backlink at cell ({r}, {c})")
            r, c = r + int(ARC_DR[code - 1]), c + int(ARC_DC[code - 1])
            path.append((r, c))
        path.reverse()
        out.append({"cells": path, "cost": d, "source": int(allocation[path[-1][0], path[-1][1]])})
    return out
