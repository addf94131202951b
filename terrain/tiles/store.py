"""The z-ordered Zarr tile store every grid algorithm reads.

A Zarr v3 group: ``elevation`` (float32, one chunk per square tile, NaN nodata, chunks in
square shards laid out in Morton order so a quadtree node's tiles are adjacent on disk),
``x``, ``y``, ``spatial_ref`` (:func:`terrain.io.georef.write_georeference`) and the
attributes ``terrain`` (format version), ``tile``, ``tiles_per_shard``, ``levels``,
``geotransform``, ``cellsize``, ``crs``, ``nodata``, ``source``, ``header``. Zarr rewrites a
shard written in part, so writers own whole shards (:meth:`TileStore.shard_windows`).
Format and reasons: docs/architecture.md, "The tile store".
"""

import concurrent.futures
import math
import os
from pathlib import Path

import numpy as np

from ..errors import InputError, cannot_read
from ..io.georef import crs_wkt, unplaced_geotransform, write_georeference
from ..io.remote import (check_unchanged, is_remote, is_url, store_for, store_state,
                         url_inventory, zarr_store)
from ..io.zarr_meta import Array, Group, codec, compressor_list, open_group
from .morton import morton_order

__all__ = ["create_store", "open_store", "TileStore", "DEFAULT_TILE", "check_tile_size",
           "quadtree_levels", "tiles_per_shard", "FORMAT_VERSION", "create_layer",
           "result_dem", "link_layer", "checksummed", "check_shard_lists",
           "check_tile_count", "window_shards", "shard_windows", "read_block", "write_block",
           "shard_layouts", "write_windows", "write_layers", "read_layer", "RESULT_CODECS",
           "result_compressors"]

FORMAT_VERSION = 1
DEFAULT_TILE = 512
# Largest tile side: a task holds whole tiles (and the MST their edges) in memory.
TILE_LIMIT = 4096
# Shards of at most this many cells a side: a band of shards is what one ingest task holds.
SHARD_TARGET_SIDE = 2048
#: more tiles than this need tiles of at least :data:`SMALL_TILE` (each costs a task step)
MANY_TILES = 1 << 16
SMALL_TILE = 256


def check_tile_size(tile, limit=TILE_LIMIT, why=None):
    """``tile`` as int; :class:`InputError` unless a power of two in ``[2, limit]`` (``why``
    says what bounds it)."""
    try:
        t = int(tile)
        if t != float(tile):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"tile {tile!r} is not an integer") from None
    if t < 2 or t & (t - 1):
        raise InputError(f"tile {tile} is not a power of two >= 2")
    if t > limit:
        why = why or (f"a task holds whole tiles in memory (one of {t} x {t} float32 cells is "
                      f"{4 * t * t / 2**20:,.0f} MiB)")
        raise InputError(f"tile {t} is above {limit}: {why}")
    return t


def check_tile_count(tile, shape, where=None):
    """:class:`InputError` (naming ``where``) when ``shape`` would have more than
    :data:`MANY_TILES` tiles of ``tile`` < :data:`SMALL_TILE` a side.

    >>> check_tile_count(4, (3000, 3000))
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: 562,500 tiles of 4 a side: more than 65,536 tiles need a tile of at least 256
    """
    n = -(-int(shape[0]) // tile) * -(-int(shape[1]) // tile)
    if n > MANY_TILES and tile < SMALL_TILE:
        raise InputError((f"{where}: " if where else "") + f"{n:,} tiles of {tile} a side: "
                         f"more than {MANY_TILES:,} tiles need a tile of at least {SMALL_TILE}")


def quadtree_levels(n_tile_rows, n_tile_cols):
    """Number of quadtree levels over the tiles: 1 for a single tile, root included."""
    side = max(n_tile_rows, n_tile_cols, 1)
    return int(math.ceil(math.log2(side))) + 1


def tiles_per_shard(tile, shape):
    """Tiles per shard side: the largest power of two k with k*tile <=
    max(SHARD_TARGET_SIDE, tile), not beyond the grid.

    >>> tiles_per_shard(512, (16384, 16384)), tiles_per_shard(512, (300, 400))
    (4, 1)
    """
    k = max(1, SHARD_TARGET_SIDE // tile)
    tiles_side = max(-(-shape[0] // tile), -(-shape[1] // tile), 1)
    while k > 1 and k // 2 >= tiles_side:
        k //= 2
    return k


def checksummed(compressors):
    """``compressors`` (bytes-to-bytes codecs as zarr.json names them,
    :func:`terrain.io.zarr_meta.codec`; ``"auto"`` or None) followed by the ``crc32c``
    codec, so a flipped bit is a read error, not a different elevation.

    >>> [c["name"] for c in checksummed("auto")]
    ['zstd', 'crc32c']
    """
    compressors = tuple(compressor_list(compressors))  # zarr's codec objects taken too
    if compressors and compressors[-1]["name"] == "crc32c":
        return compressors
    return (*compressors, codec("crc32c"))


#: the Blosc settings ``(cname, clevel, shuffle)`` of a result layer by what its cells hold:
#: LZ4 level 5 (Blosc releases the GIL: writer threads compress in parallel) after a byte
#: shuffle (``values``: floats), none (``ids``: long runs of one label, fastest so) or a bit
#: shuffle (``codes``: a few bits a cell); measured on cost-distance layers
#: (docs/cost-distance.md, "Output codecs")
RESULT_CODECS = {"values": ("lz4", 5, "shuffle"), "ids": ("lz4", 5, "noshuffle"),
                 "codes": ("lz4", 5, "bitshuffle")}


def result_compressors(kind="values"):
    """The codecs of a result layer whose cells hold ``kind`` (:data:`RESULT_CODECS`), for
    :func:`create_layer`.

    >>> [(c["configuration"]["cname"], c["configuration"]["shuffle"])
    ...  for k in ("values", "ids", "codes") for c in result_compressors(k)]
    [('lz4', 'shuffle'), ('lz4', 'noshuffle'), ('lz4', 'bitshuffle')]
    """
    cname, clevel, shuffle = RESULT_CODECS[kind]
    return (codec("blosc", cname=cname, clevel=clevel, shuffle=shuffle),)


def create_store(path, shape, tile=DEFAULT_TILE, *, geotransform=None, crs=None, nodata=None,
                 source=None, header=None, compressors="auto", units=None):
    """Create an empty tile store at ``path`` and return its :class:`TileStore`.

    In a partial output of an earlier run (resumed, retried) the ``elevation`` there is kept
    with its shards when its geometry is this one.

    Parameters
    ----------
    path : str or Path
    shape : (rows, cols)
    tile : int (a power of two)
    geotransform : sequence of 6 floats (GDAL order), optional
    units : str, optional
        The elevations' unit (the source band's: "m", "ft"), the layer's ``units``
        attribute; None: none (a unit not known is not written).
    """
    tile = check_tile_size(tile)
    rows, cols = (int(shape[0]), int(shape[1]))
    check_tile_count(tile, (rows, cols))
    k = tiles_per_shard(tile, (rows, cols))
    # a store at a URL is written whole (terrain.io.remote.url_output cleared its prefix)
    again = not is_remote(path) and Path(path).is_dir() and any(Path(path).iterdir())
    group = open_group(path, mode="a" if again else "w-")
    elev = create_layer(group, "elevation", "float32", np.float32("nan"), tile, (rows, cols),
                        compressors=compressors, keep=True)
    if geotransform is None:
        geotransform = unplaced_geotransform(rows)
    gt = [float(v) for v in geotransform]
    crs = crs_wkt(crs)
    # attributes first: write_georeference tags the array through another handle
    elev.attrs.update({"nodata_stored_as": "NaN", **({"units": units} if units else {})})
    write_georeference(group, (rows, cols), gt, crs)
    n_tr, n_tc = -(-rows // tile), -(-cols // tile)
    group.attrs.update({
        "terrain": FORMAT_VERSION,
        "tile": tile,
        "tiles_per_shard": k,
        "levels": quadtree_levels(n_tr, n_tc),
        "geotransform": gt,
        "cellsize": [abs(gt[1]), abs(gt[5])],
        "crs": crs,
        # JSON has no infinities: a source's -inf nodata is "-Infinity", as Zarr v3 writes a
        # fill value (written bare, strict JSON would keep null and it would read as NaN)
        "nodata": {math.inf: "Infinity", -math.inf: "-Infinity"}.get(nodata, nodata),
        "source": None if source is None else str(source),
        "header": header or {},
    })
    return TileStore(path, group)


def create_layer(group, name, dtype, fill, tile, shape, *, compressors="auto", attrs=None,
                 overwrite=False, keep=False):
    """Create a raster layer ``name`` beside ``elevation`` in a store's Zarr ``group`` (or
    store path) with the elevation's tiles and shards, so the same windows own whole shards
    of every layer. Returns the array.

    ``keep``: a layer already there with this dtype, shape and tiling is returned as it is
    (another of that name replaced): a resumed run's, or one made by a task run again after
    its worker was lost, whose shards may hold what tasks that do not run again wrote.

    Examples
    --------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> s = create_store(os.path.join(d, "s.zarr"), (5, 6), tile=4)
    >>> a = create_layer(s.group, "distance", "float64", np.nan, 4, (5, 6))
    >>> s.write_window("distance", 0, 0, np.ones((5, 6)))
    >>> float(s.read_window(0, 2, 0, 2, layer="distance").sum())
    4.0
    """
    if isinstance(group, (str, Path)) or is_remote(group):
        group = open_group(group, mode="a")
    tile = check_tile_size(tile)
    rows, cols = (int(shape[0]), int(shape[1]))
    k = tiles_per_shard(tile, (rows, cols))
    if keep:
        kept = group.get(name)
        if kept is not None and (kept.dtype, kept.shape, kept.chunks, kept.shards) == (
                np.dtype(dtype), (rows, cols), (tile, tile), (k * tile, k * tile)):
            return kept
    arr = group.create_array(
        name, shape=(rows, cols), dtype=dtype, chunks=(tile, tile), shards=(k * tile, k * tile),
        fill_value=fill, dimension_names=("y", "x"), compressors=checksummed(compressors),
        config={"write_empty_chunks": False}, overwrite=overwrite or keep)
    if attrs:
        arr.attrs.update(attrs)
    return arr


def open_store(path, mode="r"):
    """Open an existing tile store (read-only unless ``mode="r+"``) at a path, a URL or a
    :class:`terrain.io.remote.Location`; :class:`InputError` when ``path`` is not one or is
    damaged (:func:`check_store`)."""
    if is_remote(path):
        if store_state(path) != "store":
            raise InputError(f"{path}: no such store")
        p = path
    else:
        p = Path(path)
        if not p.exists():
            raise InputError(f"{path}: no such file or directory")
    try:
        group = open_group(p, mode=mode)
        group["elevation"]
        if "terrain" not in group.attrs:
            raise KeyError("terrain")
    except InputError:  # a damaged document, a layer named for its store: said as it is
        raise
    except Exception:
        raise InputError(f"{path}: not a terrain tile store") from None
    check_store(p, group)
    return TileStore(p, group)


#: cells above which a store holding no shard is refused (metadata alone claiming a huge grid)
EMPTY_STORE_CELLS = 1 << 26


def check_store(path, group):
    """Raise :class:`InputError` naming the store at ``path`` (``group``: it opened) unless
    its tile, shard, level and coordinate attributes fit its ``elevation``, every sharded
    array holds exactly the shards its inventory lists, and it is not empty above
    :data:`EMPTY_STORE_CELLS`."""
    from ..io.outputs import INVENTORY_ATTR
    from ._shards import shard_inventory
    elev = group["elevation"]
    a = dict(group.attrs)
    if elev.ndim != 2 or elev.shards is None:
        raise InputError(f"{path}: elevation is not a sharded 2-D array")
    shape = tuple(int(n) for n in elev.shape)
    try:
        tile, k, levels = int(a["tile"]), int(a["tiles_per_shard"]), int(a["levels"])
    except (KeyError, TypeError, ValueError):
        raise InputError(f"{path}: tile attributes missing or not numbers") from None
    try:
        check_tile_size(tile)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
    chunks, shards = tuple(int(c) for c in elev.chunks), tuple(int(c) for c in elev.shards)
    if chunks != (tile, tile):
        raise InputError(f"{path}: tile attribute {tile} does not match its chunks "
                         f"({' x '.join(map(str, chunks))})")
    if shards != (k * tile, k * tile) or k * tile > max(SHARD_TARGET_SIDE, tile):
        raise InputError(f"{path}: shards of {' x '.join(map(str, shards))} cells do not fit "
                         f"its tiles_per_shard {k} (at most {SHARD_TARGET_SIDE} cells a side)")
    n_tr, n_tc = -(-shape[0] // tile), -(-shape[1] // tile)
    if levels != quadtree_levels(n_tr, n_tc):
        raise InputError(f"{path}: levels {levels} is not the quadtree's "
                         f"({quadtree_levels(n_tr, n_tc)}) for {n_tr} x {n_tc} tiles")
    check_tile_count(tile, shape, path)
    for axis, name in ((0, "y"), (1, "x")):
        if name in group and tuple(group[name].shape) != (shape[axis],):
            raise InputError(f"{path}: {name} has {group[name].shape[0]} values for "
                             f"{shape[axis]} {'rows' if axis == 0 else 'columns'}: the shape "
                             "was edited or the store is damaged")
    check_shard_lists(path, group)
    if shape[0] * shape[1] > EMPTY_STORE_CELLS:
        now = _inventory_now(path, group, "elevation")
        if now is not None and not shard_inventory({INVENTORY_ATTR: now}, shape, shards).any():
            raise InputError(f"{path}: claims {shape[0]} x {shape[1]} cells but holds no data")


def check_shard_lists(path, group):
    """:class:`InputError` naming the store at ``path`` (``group``: it opened) unless every
    sharded array holds exactly the shards its inventory lists (a finished store lists
    them: :func:`terrain.io.outputs.seal_store`)."""
    from ..io.outputs import INVENTORY_ATTR
    from ._shards import shard_inventory
    sharded = [(name, arr) for name, arr in group.arrays() if arr.shards is not None]
    listed = any(INVENTORY_ATTR in arr.attrs for _, arr in sharded)
    for name, arr in sharded:
        if INVENTORY_ATTR not in arr.attrs:
            if listed:  # a finished store lists every array's shards (seal_store)
                raise InputError(f"{path}: {name} has lost its list of shard files, which "
                                 "its other arrays keep (the store was edited or is "
                                 "damaged): a missing shard would read as nodata")
            continue
        try:
            expected = shard_inventory(dict(arr.attrs), arr.shape, arr.shards or arr.chunks)
        except InputError as e:
            raise InputError(f"{path}: {name}: {e}") from None
        now = _inventory_now(path, group, name)
        found = shard_inventory({INVENTORY_ATTR: now}, arr.shape, arr.shards or arr.chunks)
        if (expected != found).any():
            where = tuple(int(i) for i in np.argwhere(expected != found)[0])
            key = "/".join(["c", *map(str, where)])
            what = "missing" if expected[where] else "not one of the shards it was written with"
            raise InputError(f"{path}: {name}/{key} is {what} (the store is damaged)")


def _inventory_now(path, group, name):
    """What the array ``name`` of ``group`` (the store at ``path``) holds now, as an
    inventory (:func:`terrain.io.outputs.array_inventory`)."""
    from ..io.outputs import array_inventory
    if isinstance(group, Group):
        return array_inventory(group.root / name)
    where = f"{group.path}/{name}" if group.path else name
    if is_remote(path):
        return url_inventory(path, where)
    return array_inventory(Path(str(group.store_path.store.root)) / where)


def is_store(path):
    """True when ``path`` looks like a Zarr group (a directory with zarr.json; at a URL or a
    :class:`terrain.io.remote.Location`, a published store)."""
    if is_remote(path):
        return store_state(path) == "store"
    p = Path(path)
    try:
        return p.is_dir() and (p / "zarr.json").exists()
    except OSError as e:  # a folder on the way that may not be searched
        raise cannot_read(e.filename or path, e) from None


def result_dem(path, group, source, required=True):
    """The ``elevation`` a result store was computed from: its own, else that of the tile
    store ``source`` names; else :class:`InputError` (None when not ``required``)."""
    if "elevation" in group:
        return group["elevation"]
    # a result published to an object store names its DEM's URL
    if source and (store_state(source) == "store" if is_url(source) else is_store(source)):
        import zarr
        check_unchanged(path, "DEM", source, group.attrs.get("source_fingerprint"))
        return zarr.open_group(store=zarr_store(source), mode="r",
                               use_consolidated=False)["elevation"]
    if not required:
        return None
    gone = isinstance(source, str) and not is_url(source) and not Path(source).exists()
    raise InputError(f"{path}: the DEM is not in this store and its source {source!r} is "
                     + ("gone (moved or removed): the result needs the DEM it was computed "
                        "from" if gone else "not a tile store"))


class TileStore:
    """A tile store opened for reading or being written: ``shape``, ``tile``,
    ``tiles_shape``, ``tiles_per_shard``, ``levels`` (quadtree levels, root included)."""

    def __init__(self, path, group):
        self.path = path if is_remote(path) else Path(path)
        self.group = group
        self.elevation = group["elevation"]
        a = dict(group.attrs)
        self.attrs = a
        self.shape = tuple(int(s) for s in self.elevation.shape)
        self.tile = int(a["tile"])
        self.tiles_per_shard = int(a["tiles_per_shard"])
        self.tiles_shape = (-(-self.shape[0] // self.tile), -(-self.shape[1] // self.tile))
        self.levels = int(a["levels"])

    def __repr__(self):
        return (f"TileStore({str(self.path)!r}, shape={self.shape}, tile={self.tile}, "
                f"tiles={self.tiles_shape}, levels={self.levels})")

    @property
    def geotransform(self):
        return tuple(self.attrs["geotransform"])

    @property
    def cellsize(self):
        return tuple(self.attrs["cellsize"])

    def read_window(self, r0, r1, c0, c1, layer="elevation"):
        """Rows ``r0:r1``, cols ``c0:c1`` (clipped) of a layer (elevations as float32)."""
        elevation = layer == "elevation"
        return np.asarray(_read(self.elevation if elevation else self.layer(layer), self.path,
                                r0, r1, c0, c1), dtype=np.float32 if elevation else None)

    def layer(self, name):
        """The zarr array of layer ``name``; :class:`InputError` when the store lacks it."""
        try:
            return self.group[name]
        except KeyError:
            raise InputError(f"{self.path}: no layer {name!r} in this store") from None

    def write_window(self, layer, r0, c0, block):
        """Write ``block`` at rows ``r0:``, cols ``c0:`` of a layer (``mode="r+"``, whole
        shards)."""
        block = np.asarray(block)
        self.layer(layer)[r0:r0 + block.shape[0], c0:c0 + block.shape[1]] = block

    def shard_windows(self):
        """``(r0, r1, c0, c1)`` of every shard, row-major; a writer should own whole shards."""
        return shard_windows(self.shape, self.tile * self.tiles_per_shard)

    def tile_order(self):
        """All tile coordinates in Morton order, as an (N, 2) int array."""
        return morton_order(*self.tiles_shape)


def _read(arr, path, r0, r1, c0, c1):
    """``arr[r0:r1, c0:c1]``; a chunk checksum mismatch is :class:`InputError`."""
    try:
        return arr[r0:r1, c0:c1]
    except ValueError as e:
        if "checksum" not in str(e):
            raise
        raise InputError(f"{path}: {arr.path}: chunk checksum mismatch in rows {r0}:{r1}, "
                         f"columns {c0}:{c1} (the store is damaged)") from None


def link_layer(src, dst, name, as_name=None):
    """Give the store ``dst`` the layer ``name`` of the store ``src`` (as ``as_name``, default
    ``name``): shard files hard linked (copied across file systems; never rewritten in
    place), metadata copied.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> s = create_store(os.path.join(d, "a.zarr"), (5, 6), tile=4)
    >>> s.write_window("elevation", 0, 0, np.ones((5, 6)))
    >>> import zarr
    >>> _ = zarr.open_group(os.path.join(d, "b.zarr"), mode="w", zarr_format=3)
    >>> link_layer(os.path.join(d, "a.zarr"), os.path.join(d, "b.zarr"), "elevation")
    >>> float(zarr.open_array(os.path.join(d, "b.zarr"), path="elevation")[:].sum())
    30.0
    """
    import shutil
    src_dir, dst_dir = Path(src) / name, Path(dst) / (as_name or name)
    for root, _, files in os.walk(src_dir):
        target = dst_dir / Path(root).relative_to(src_dir)
        target.mkdir(parents=True, exist_ok=True)
        for fname in files:
            a, b = Path(root) / fname, target / fname
            if fname == "zarr.json":
                shutil.copyfile(a, b)
                continue
            if b.exists() or b.is_symlink():  # linked by an earlier run (resumed): a new
                b.unlink()  # name, never a write through the old one into ``src``'s file
            try:
                os.link(a, b)
            except OSError:
                shutil.copyfile(a, b)


def window_shards(layout, window):
    """The shards ``(si, sj)`` that ``window`` ``(r0, r1, c0, c1)`` covers exactly (clipped
    to the array), or None when it cuts one."""
    r0, r1, c0, c1 = window
    (R, C), (rows, cols) = layout.shard, layout.shape
    if (r0 % R or c0 % C or not (r1 % R == 0 or r1 == rows) or not (c1 % C == 0 or c1 == cols)
            or r1 > rows or c1 > cols):
        return None
    return [(si, sj) for si in range(r0 // R, -(-r1 // R)) for sj in range(c0 // C, -(-c1 // C))]


def shard_windows(shape, side, window=None):
    """The windows ``(r0, r1, c0, c1)`` of the shards of ``side`` cells inside the aligned
    ``window`` (default: the grid), row-major.

    >>> shard_windows((5, 7), 4)
    [(0, 4, 0, 4), (0, 4, 4, 7), (4, 5, 0, 4), (4, 5, 4, 7)]
    """
    r0, r1, c0, c1 = window or (0, shape[0], 0, shape[1])
    return [(a, min(a + side, r1), b, min(b + side, c1))
            for a in range(r0, r1, side) for b in range(c0, c1, side)]


def read_block(store_path, layer, window, out=None):
    """Cells ``window = (r0, r1, c0, c1)`` of the layer ``layer`` of the store at
    ``store_path`` (into ``out`` when given, else a new array of the layer's dtype).

    In the usual layout the window is read in the calling thread
    (:func:`terrain.tiles._shards.read_window`: a shard it covers whole at once, of a shard
    it cuts the chunks it meets), so threads read in parallel. zarr's reads all pass
    through its one event loop: the 2048² blocks with a one-cell halo that the tiled fill
    reads took 54 ms by zarr against 24-27 ms so (2-core VM), and the 10-ft fill's reads
    819 task-seconds against 353 on 16 threads (H200 host). At a URL (or a
    :class:`terrain.io.remote.Location`) whole shards are fetched with one GET each
    (:func:`terrain.tiles._shards.read_url_shard`); other layouts go through zarr.

    >>> import tempfile, os
    >>> d = os.path.join(tempfile.mkdtemp(), "s.zarr")
    >>> s = create_store(d, (5, 6), tile=2)
    >>> s.write_window("elevation", 0, 0, np.arange(30, dtype=np.float32).reshape(5, 6))
    >>> read_block(d, "elevation", (4, 5, 0, 6)).tolist()
    [[24.0, 25.0, 26.0, 27.0, 28.0, 29.0]]
    """
    from ._shards import read_layout, read_window
    r0, r1, c0, c1 = window
    if is_remote(store_path):
        return _read_url_block(store_path, layer, window, out)
    layout = read_layout(Path(store_path) / layer)  # its zarr.json alone, no event loop
    if (layout is None or (out is not None and out.dtype != layout.dtype) or min(r0, c0) < 0
            or r1 > layout.shape[0] or c1 > layout.shape[1] or r0 >= r1 or c0 >= c1):
        return _read_block_by_zarr(store_path, layer, window, out)
    if out is None:
        out = np.empty((r1 - r0, c1 - c0), layout.dtype)
    read_window(layout, r0, r1, c0, c1, out)
    return out


def _read_block_by_zarr(store_path, layer, window, out):
    """:func:`read_block` through zarr: a layout the shard readers do not serve (another
    codec or dtype) or a window to be checked against the layer's shape."""
    import zarr
    r0, r1, c0, c1 = window
    arr = zarr.open_array(store=store_for(store_path), path=layer, mode="r")
    _check_window(store_path, layer, window, arr.shape)
    if out is None:
        out = np.empty((r1 - r0, c1 - c0), arr.dtype)
    out[...] = _read(arr, store_path, r0, r1, c0, c1)
    return out


def _check_window(store_path, layer, window, shape):
    """:class:`InputError` for a window ``(r0, r1, c0, c1)`` not inside ``shape``."""
    r0, r1, c0, c1 = window
    if not (0 <= r0 < r1 <= shape[0] and 0 <= c0 < c1 <= shape[1]):
        raise InputError(f"{store_path}: rows {r0}:{r1}, columns {c0}:{c1} are not inside "
                         f"its {layer} layer's {shape[0]} x {shape[1]} cells")


def _read_url_block(store_path, layer, window, out):
    """:func:`read_block` of a store at a URL."""
    from ._shards import read_url_shard, url_layout
    r0, r1, c0, c1 = window
    fs, layout = url_layout(store_path, layer)
    shards = None if layout is None else window_shards(layout, window)
    if shards is None or (out is not None and out.dtype != layout.dtype):
        return _read_block_by_zarr(store_path, layer, window, out)
    if out is None:
        out = np.empty((r1 - r0, c1 - c0), layout.dtype)
    for si, sj in shards:
        read_url_shard(layout, fs, si, sj, out, r0, c0)
    return out


def write_block(store_path, layer, window, values):
    """Write ``values`` (the cells of ``window = (r0, r1, c0, c1)``) into ``layer`` of the
    store at ``store_path``, whole shards in the calling thread as :func:`read_block`;
    returns the bytes written (None where zarr wrote them: at a URL, a whole shard is one
    PUT of its object).

    >>> import tempfile, os
    >>> d = os.path.join(tempfile.mkdtemp(), "s.zarr")
    >>> s = create_store(d, (5, 6), tile=2)
    >>> _ = write_block(d, "elevation", (0, 4, 0, 4), np.ones((4, 4), np.float32))
    >>> float(np.nansum(s.elevation[:]))
    16.0
    """
    from ._shards import write_layout, write_shard
    r0, r1, c0, c1 = window
    layout = None if is_remote(store_path) else write_layout(Path(store_path) / layer)
    whole = None if layout is None else window_shards(layout, window)
    values = np.asarray(values)
    if whole is None or values.dtype != layout.dtype:
        import zarr
        arr = zarr.open_array(store=store_for(store_path, read_only=False), path=layer,
                              mode="r+")
        arr[r0:r1, c0:c1] = values
        return None
    return sum(write_shard(layout, si, sj, values, r0, c0) for si, sj in whole)


def shard_layouts(store_path, names):
    """``{name: (zarr array, ShardLayout or None)}`` of the store's layers ``names``, opened
    once for many :func:`write_windows` calls (opening serialises the writers). ``store_path``:
    a local path, or a :class:`terrain.io.remote.Location` (zarr writes there)."""
    from ._shards import fast_layout
    group = open_group(store_path, mode="r+")
    arrays = {name: group[name] for name in names}
    return {name: (arr, fast_layout(arr)) for name, arr in arrays.items()}


def write_windows(store_path, layers, windows, config=None, layouts=None):
    """Write ``layers[name][r0:r1, c0:c1]`` into the layer ``name`` of the Zarr store at
    ``store_path`` for every window ``(r0, r1, c0, c1)``. Whole shards of a layer in the
    usual layout are encoded in this thread (a CuPy layer's from pinned tiles copied off the
    device); anything else goes through zarr's API with ``config``. ``layouts``:
    :func:`shard_layouts`'s, else the store is opened here.

    >>> import tempfile, os
    >>> d = os.path.join(tempfile.mkdtemp(), "s.zarr")
    >>> a = create_layer(d, "backlink", "uint8", 255, 4, (5, 6))
    >>> write_windows(d, {"backlink": np.arange(30, dtype=np.uint8).reshape(5, 6)},
    ...               [(0, 4, 0, 4), (4, 5, 0, 6)])
    >>> import zarr
    >>> zarr.open_array(d, path="backlink")[4, :3].tolist(), int(a[0, 4])
    ([24, 25, 26], 255)
    """
    from ._shards import write_shard
    if layouts is None or config is not None:
        layouts = shard_layouts(store_path, layers)
    for name, values in layers.items():
        values = _blocks(values)
        arr, layout = layouts[name]
        layout = layout if config is None else None
        for window in windows:
            shards = None if layout is None else window_shards(layout, window)
            if shards is None:
                r0, r1, c0, c1 = window
                a = arr if config is None else arr.with_config(config)
                a[r0:r1, c0:c1] = values[r0:r1, c0:c1]
                continue
            for si, sj in shards:
                write_shard(layout, si, sj, values)


def write_layers(store_path, layers, side):
    """Write whole layers ``{name: host or device array of the grid's shape}`` into the
    store at ``store_path``, shard by shard (``side`` cells a side) on the I/O threads
    (:func:`terrain.tiles.io_threads`; a device array comes down one shard at a time)."""
    from ._shards import io_threads
    layouts = shard_layouts(store_path, list(layers))
    windows = shard_windows(next(iter(layers.values())).shape, side)
    with concurrent.futures.ThreadPoolExecutor(io_threads()) as pool:
        list(pool.map(lambda w: write_windows(store_path, layers, [w], layouts=layouts),
                      windows))


def _blocks(values):
    """``values`` as ``write_shard`` takes it (a device array as ``DeviceBlocks``; a window
    of rows, such as a padded grid's interior, read in place: its copy, made again for each
    shard's call, was 28 GB of device memory at the 10-ft size)."""
    from ..backend import array_backend
    be = array_backend(values)
    if not be.is_gpu:
        return values
    from .._transfer import DeviceBlocks, rows_contiguous
    cp = be.xp
    return DeviceBlocks(cp, values if rows_contiguous(values) else cp.ascontiguousarray(values))


def read_layer(store_path, layer, dtype=None, workers=None):
    """The whole layer ``layer`` of the Zarr store at ``store_path`` as a NumPy array, its
    shards read by ``workers`` threads (default: :func:`terrain.tiles.io_threads`).

    >>> import tempfile, os
    >>> d = os.path.join(tempfile.mkdtemp(), "s.zarr")
    >>> a = create_layer(d, "allocation", "int32", -1, 4, (5, 6))
    >>> a[1:3, 2:6] = 7
    >>> read_layer(d, "allocation")[:3].tolist()
    [[-1, -1, -1, -1, -1, -1], [-1, -1, 7, 7, 7, 7], [-1, -1, 7, 7, 7, 7]]
    """
    from ._shards import fast_layout, io_threads, read_array
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
