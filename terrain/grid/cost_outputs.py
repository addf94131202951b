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

import numpy as np

from ..tiles.store import result_compressors
from .costs import ARC_NAMES

__all__ = ["LAYERS", "BACKLINK_CODES", "DISTANCE_UNITS", "layer_attributes",
           "layer_compressors", "LAYER_KINDS"]


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
