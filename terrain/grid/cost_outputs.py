"""What the cost-distance output layers hold: types, nodata (fill) values, units and codes.

One definition for every writer and reader (the output store, its GeoTIFFs, ``info``,
``verify``, the pictures, :func:`terrain.cost_distance`):

``distance``   float64, accumulated cost from the nearest source; NaN unreached (nodata)
``backlink``   uint8, 0 at a source root, ``k + 1`` for arc code ``k`` towards the
               predecessor (:data:`terrain.grid.costs.ARC_NAMES`); 255 unreached
``allocation`` int32, index of the nearest source (ties: the lower index); -1 unreached

Layers are Blosc LZ4 (GIL released: writer threads compress in parallel). Whole shards are
encoded in the calling thread (:func:`terrain.tiles.write_shard`), a device layer's from
pinned tiles, so a run holds no host copy of its outputs (docs/cost-distance.md).

Examples
--------
>>> BACKLINK_CODES["1"], BACKLINK_CODES["9"], BACKLINK_CODES["255"]
('E', 'ENE', 'unreached')
>>> layer_attributes("tobler")["distance"]["units"], layer_attributes("absdiff", "m")["distance"]["units"]
('s', 'm')
"""

import concurrent.futures
import os

import numpy as np

from ..backend import array_backend
from ..io.remote import is_remote, store_for
from ..io.zarr_meta import Array, codec, open_group
from ..tiles import MAX_IO_THREADS, fast_layout, io_threads, read_array, read_block, write_shard
from .costs import ARC_NAMES

__all__ = ["LAYERS", "BACKLINK_CODES", "DISTANCE_UNITS", "layer_attributes",
           "layer_compressors", "LAYER_CODECS", "write_windows", "shard_layouts", "read_layer",
           "io_threads", "MAX_IO_THREADS"]


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


#: Blosc settings per layer: (cname, clevel, shuffle)
LAYER_CODECS = {"distance": ("lz4", 5, "shuffle"), "allocation": ("lz4", 5, "noshuffle"),
                "backlink": ("lz4", 5, "bitshuffle"), "friction": ("lz4", 5, "shuffle")}


def layer_compressors(name="distance"):
    """The codecs of the output layer ``name``: Blosc LZ4 level 5 after a byte shuffle
    (floats), a bit shuffle (backlinks) or none (allocation).

    >>> [(c["configuration"]["cname"], c["configuration"]["shuffle"])
    ...  for n in ("distance", "allocation", "backlink") for c in layer_compressors(n)]
    [('lz4', 'shuffle'), ('lz4', 'noshuffle'), ('lz4', 'bitshuffle')]
    """
    cname, clevel, shuffle = LAYER_CODECS.get(name, LAYER_CODECS["distance"])
    return (codec("blosc", cname=cname, clevel=clevel, shuffle=shuffle),)


def shard_layouts(store_path, names):
    """``{name: (zarr array, ShardLayout or None)}`` of the store's layers ``names``, opened
    once for many :func:`write_windows` calls (opening serialises the writers). ``store_path``:
    a local path, or a :class:`terrain.io.remote.Location` (zarr writes there)."""
    group = open_group(store_path, mode="r+")
    out = {}
    for name in names:
        arr = group[name]
        out[name] = (arr, fast_layout(arr))
    return out


def write_windows(store_path, layers, windows, config=None, layouts=None):
    """Write ``layers[name][r0:r1, c0:c1]`` into the layer ``name`` of the Zarr store at
    ``store_path`` for every window ``(r0, r1, c0, c1)``. Whole shards of a layer in the
    usual layout are encoded in this thread (a CuPy layer's from pinned tiles copied off the
    device); anything else goes through zarr's API with ``config``. ``layouts``:
    :func:`shard_layouts`'s, else the store is opened here.

    >>> import tempfile, os
    >>> from terrain.tiles.store import create_layer
    >>> d = os.path.join(tempfile.mkdtemp(), "s.zarr")
    >>> a = create_layer(d, "backlink", "uint8", 255, 4, (5, 6))
    >>> write_windows(d, {"backlink": np.arange(30, dtype=np.uint8).reshape(5, 6)},
    ...               [(0, 4, 0, 4), (4, 5, 0, 6)])
    >>> import zarr
    >>> zarr.open_array(d, path="backlink")[4, :3].tolist(), int(a[0, 4])
    ([24, 25, 26], 255)
    """
    if layouts is None or config is not None:
        layouts = shard_layouts(store_path, layers)
    for name, values in layers.items():
        values = _blocks(values)
        arr, layout = layouts[name]
        layout = layout if config is None else None
        for r0, r1, c0, c1 in windows:
            shards = None if layout is None else _whole_shards(layout, (r0, r1, c0, c1))
            if shards is None:
                a = arr if config is None else arr.with_config(config)
                a[r0:r1, c0:c1] = values[r0:r1, c0:c1]
                continue
            for si, sj in shards:
                write_shard(layout, si, sj, values)


def _blocks(values):
    """``values`` as ``write_shard`` takes it (a device array as ``DeviceBlocks``; a window
    of rows, such as a padded grid's interior, read in place: its copy, made again for each
    shard's call, was 28 GB of device memory at the 10-ft size)."""
    be = array_backend(values)
    if not be.is_gpu:
        return values
    from .._transfer import DeviceBlocks, rows_contiguous
    cp = be.xp
    return DeviceBlocks(cp, values if rows_contiguous(values) else cp.ascontiguousarray(values))


def _whole_shards(layout, window):
    """The shards ``(si, sj)`` that ``window`` covers exactly, or None when it cuts one."""
    r0, r1, c0, c1 = window
    (R, C), (rows, cols) = layout.shard, layout.shape
    if r0 % R or c0 % C or not (r1 % R == 0 or r1 == rows) or not (c1 % C == 0 or c1 == cols):
        return None
    return [(si, sj) for si in range(r0 // R, -(-r1 // R)) for sj in range(c0 // C, -(-c1 // C))]


def read_layer(store_path, layer, dtype=None, workers=None):
    """The whole layer ``layer`` of the Zarr store at ``store_path`` as a NumPy array, its
    shards read by ``workers`` threads (default: :func:`io_threads`).

    >>> import tempfile, os
    >>> from terrain.tiles.store import create_layer
    >>> d = os.path.join(tempfile.mkdtemp(), "s.zarr")
    >>> a = create_layer(d, "allocation", "int32", -1, 4, (5, 6))
    >>> a[1:3, 2:6] = 7
    >>> read_layer(d, "allocation")[:3].tolist()
    [[-1, -1, -1, -1, -1, -1], [-1, -1, 7, 7, 7, 7], [-1, -1, 7, 7, 7, 7]]
    """
    if is_remote(store_path):
        import zarr
        arr = zarr.open_array(store=store_for(store_path), path=layer, mode="r")
    else:
        arr = Array(os.path.join(store_path, layer))
    rows, cols = arr.shape
    side = getattr(arr, "shards", None) or arr.chunks
    windows = [(r, min(r + side[0], rows), c, min(c + side[1], cols))
               for r in range(0, rows, side[0]) for c in range(0, cols, side[1])]
    workers = max(1, min(workers or io_threads(), len(windows)))
    if is_remote(store_path):  # a shard's object in one GET a thread (read_block)
        out = np.empty((rows, cols), dtype or arr.dtype)
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda w: read_block(store_path, layer, w,
                                               out[w[0]:w[1], w[2]:w[3]]), windows))
        return out
    layout = fast_layout(arr)
    if layout is not None and (dtype is None or np.dtype(dtype) == layout.dtype):
        return read_array(layout, workers)
    out = np.empty((rows, cols), dtype or arr.dtype)
    import asyncio  # here: stores at URLs only (asyncio and ssl, 6 MB of a local run's RSS)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        batches = [windows[i::workers] for i in range(workers)]
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            list(pool.map(lambda b: asyncio.run(_read_windows(str(store_path), layer, b, out)),
                          batches))
        return out
    out[...] = arr[:, :]
    return out


async def _read_windows(store_path, layer, windows, out):
    from zarr.api.asynchronous import open_array
    arr = await open_array(store=store_path, path=layer, mode="r")
    for r0, r1, c0, c1 in windows:
        out[r0:r1, c0:c1] = await arr.getitem((slice(r0, r1), slice(c0, c1)))
