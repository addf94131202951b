"""Whole shards of a sharded Zarr v3 array encoded and written, or read and decoded, in the
calling thread, in the bytes zarr itself writes (why by hand: docs/architecture.md, "Shards
by hand").

Format (the sharding codec, index at the end): the inner chunks in Morton order, then the
index, ``(chunks..., 2)`` little-endian uint64 (offset, length), ``2**64 - 1`` for an absent
chunk, then its CRC-32C. An inner chunk is the tile's C-order bytes padded with the fill
value, Blosc-compressed or raw, followed by its CRC-32C where the array has zarr's crc32c
codec; fill-only tiles are left out and a shard without chunks has no file. Only that layout
is handled (:func:`fast_layout`); anything else goes through zarr. A missing shard reads as
fill unless the array's inventory (:func:`shard_inventory`) lists it: then, as for a bad
checksum, the read is an :class:`~terrain.errors.InputError`.
"""

import base64
import contextlib
import ctypes
import functools
import os
import threading
import uuid
from pathlib import Path

import numpy as np

from .. import native
from ..errors import InputError, cannot_read
from ..io.outputs import INVENTORY_ATTR, sweep_partial_files
from ..io.zarr_meta import blosc

__all__ = ["fast_layout", "write_layout", "read_layout", "write_shard", "ShardWriter",
           "read_shard", "read_array", "read_window", "url_layout", "read_url_shard",
           "io_threads", "MAX_IO_THREADS", "sweep_partial_files",
           "shard_inventory", "borrow_buffer", "release_buffers", "shard_grid"]

_ABSENT = 2**64 - 1  # the offset and length of an absent chunk in a shard index

#: bytes of encoded chunks a writer holds before it writes them to the shard's file (the
#: writers of an in-core cost distance hold 4 at once: 8 MB took 15 MB more at its peak)
ENCODE_BYTES = 2 << 20

_vp, _i64, _int = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
_SIGNATURES = {
    "terrain_crc32c": (ctypes.c_uint32, [_vp, _i64]),
    "terrain_shard_encode": (_i64, [_vp] + [_i64] * 4 + [_int, _vp, _i64, _i64, _vp]
                             + [_i64] * 3 + [_vp, _int, _int, ctypes.c_char_p, _i64, _int,
                                             _vp, _vp, _i64, ctypes.c_uint64, _vp, _vp]),
}


def _lib():
    return native.declared(_SIGNATURES)

#: threads that read or write an array's shards at once; each holds its own buffers, so
#: this count bounds the host memory of the reads and writes
MAX_IO_THREADS = 16


def io_threads():
    """Threads for shard reads and writes: this process's CPUs, at most :data:`MAX_IO_THREADS`.

    >>> 1 <= io_threads() <= MAX_IO_THREADS
    True
    """
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_IO_THREADS, cpus or 1))


#: c-blosc's context functions (:func:`terrain.io.zarr_meta.blosc`), None without them
BLOSC = blosc()


_OVERHEAD = 16  # BLOSC_MAX_OVERHEAD
_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


class ShardLayout:
    """What the shard readers and writers need to know of one array (:func:`read_layout`).
    ``codec``: None (raw) or ``blosc_compress_ctx``'s arguments; ``checksum``: a CRC-32C
    follows each chunk; ``present``: the inventory; ``order``: the chunks' write order."""

    def __init__(self, path, shape, shard, inner, dtype, fill, codec, checksum, key, present):
        self.path, self.shape, self.shard, self.inner = path, shape, shard, inner
        self.dtype, self.fill, self.codec, self.checksum = dtype, fill, codec, checksum
        self.key, self.present, self.order = key, present, None
        self.per_shard = (shard[0] // inner[0], shard[1] // inner[1])

    def file(self, si, sj):
        return self.path / self.key((si, sj))


def shard_inventory(attrs, shape, shard):
    """The shards an array holds, from its ``terrain_shards`` attribute
    (:func:`terrain.io.outputs.seal_store`), as a boolean array over the shard grid; None
    without one; :class:`InputError` when it does not fit the array (its shape was edited)."""
    inv = attrs.get(INVENTORY_ATTR)
    if inv is None:
        return None
    grid = tuple(-(-int(n) // int(s)) for n, s in zip(shape, shard))
    try:
        bits = np.unpackbits(np.frombuffer(base64.b64decode(inv["present"]), np.uint8))
        ok = tuple(inv["shape"]) == tuple(shape) and tuple(inv["shards"]) == grid
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok or bits.size < int(np.prod(grid)):
        raise InputError(f"shape {' x '.join(map(str, shape))} is not the one its shards were "
                         f"written for ({_shape_text(inv)}): the store was edited or damaged")
    return bits[:int(np.prod(grid))].astype(bool).reshape(grid)


def _shape_text(inv):
    try:
        return " x ".join(str(int(n)) for n in inv["shape"])
    except (KeyError, TypeError, ValueError):
        return "unreadable inventory"


def read_layout(array_path, meta=None):
    """A :class:`ShardLayout` for *reading* the array in the directory ``array_path``, from
    its ``zarr.json`` alone (``meta``: its text, else read there; no zarr import, so start-up
    can read while zarr imports). None unless it is 2-D, sharded, inner codecs ``bytes``
    (little endian) [+ ``blosc``] [+ ``crc32c``], index ``bytes`` + ``crc32c`` at the end, and
    :data:`BLOSC` exists."""
    import json
    try:
        path = Path(array_path)
        meta = json.loads((path / "zarr.json").read_text() if meta is None else meta)
        if meta.get("zarr_format") != 3 or meta.get("node_type") != "array" or BLOSC is None:
            return None
        shape = tuple(int(s) for s in meta["shape"])
        shard = tuple(int(s) for s in meta["chunk_grid"]["configuration"]["chunk_shape"])
        if (len(shape) != 2 or meta["chunk_grid"]["name"] != "regular"
                or meta.get("storage_transformers")):
            return None
        dtype = np.dtype(meta["data_type"])  # a name (zarr 3.1 and 3.4 write one for these)
        codecs = meta["codecs"]
        if len(codecs) != 1 or codecs[0]["name"] != "sharding_indexed":
            return None
        sh = codecs[0]["configuration"]
        index = sh.get("index_codecs", [])
        if not (sh.get("index_location", "end") == "end" and len(index) == 2
                and index[0]["name"] == "bytes"
                and index[0].get("configuration", {}).get("endian") == "little"
                and index[1]["name"] == "crc32c"):
            return None
        inner_codecs = list(sh["codecs"])
        checksum = bool(inner_codecs) and inner_codecs[-1]["name"] == "crc32c"
        if checksum:
            inner_codecs.pop()
        if not inner_codecs or inner_codecs[0]["name"] != "bytes" or (
                dtype.itemsize > 1
                and inner_codecs[0].get("configuration", {}).get("endian") != "little"):
            return None
        if len(inner_codecs) == 2 and inner_codecs[1]["name"] == "blosc":
            b = inner_codecs[1]["configuration"]
            codec = (int(b["clevel"]), _SHUFFLE[b["shuffle"]], dtype.itemsize,
                     b["cname"].encode(), int(b.get("blocksize", 0)))
        elif len(inner_codecs) == 1:
            codec = None
        else:
            return None
        inner = tuple(int(c) for c in sh["chunk_shape"])
        if any(s % c for s, c in zip(shard, inner)):
            return None
        fill = meta["fill_value"]
        fill = {"NaN": np.nan, "Infinity": np.inf, "-Infinity": -np.inf}.get(fill, fill)
        if isinstance(fill, str) or dtype.kind not in "fiub":  # hex floats, other types
            return None
        enc = meta["chunk_key_encoding"]
        sep = enc.get("configuration", {}).get("separator", "/")
        if enc["name"] != "default":  # what zarr writes unless told otherwise
            return None
        key = (lambda c: sep.join(["c", *map(str, c)]))
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    return ShardLayout(path, shape, shard, inner, dtype, np.asarray(fill, dtype), codec,
                       checksum, key, shard_inventory(meta.get("attributes") or {}, shape, shard))


def fast_layout(arr):
    """A :class:`ShardLayout` that can also *write* when ``arr`` (a
    :class:`terrain.io.zarr_meta.Array`, or zarr's array) is in a local directory store and
    :func:`read_layout` takes it; else None (zarr does it)."""
    from ..io.zarr_meta import Array
    if isinstance(arr, Array):
        return write_layout(arr.folder)
    from zarr.storage import LocalStore
    if not isinstance(arr.store_path.store, LocalStore):
        return None
    return write_layout(Path(str(arr.store_path.store.root)) / arr.path)


def write_layout(array_path):
    """:func:`fast_layout` of the array in the local directory ``array_path``, from its
    ``zarr.json`` alone: opening the array with zarr passes through zarr's one event loop
    (16 task-seconds of the 10-ft fill's writes on 16 threads). None where zarr writes it."""
    layout = read_layout(array_path)
    if layout is not None and layout.dtype.kind == "f" and layout.dtype.itemsize not in (4, 8):
        return None  # the encoder compares float32 and float64 cells with the fill value
    if layout is not None:
        layout.order = _morton_order(layout.per_shard)
    return layout


@functools.lru_cache(maxsize=None)
def _morton_order(per_shard):
    """zarr's write order of the chunks in a shard of ``per_shard`` chunks (read-only): of a
    square power-of-two shard (terrain's) :func:`terrain.tiles.morton.morton_order`, the same
    order without importing zarr (a test compares them), else zarr's own."""
    k = per_shard[0]
    if len(per_shard) == 2 and per_shard[1] == k and k & (k - 1) == 0:
        from .morton import morton_order
        order = np.ascontiguousarray(morton_order(k, k), np.int64)
        order.flags.writeable = False
        return order
    try:  # zarr 3.1 ...
        from zarr.core.indexing import morton_order_iter as morton
    except ImportError:  # ... 3.4
        from zarr.core.indexing import morton_order_coords as morton
    order = np.array([tuple(int(v) for v in c) for c in morton(per_shard)],
                     np.int64).reshape(-1, 2)
    order.flags.writeable = False
    return order


class _Buffers:
    """Reusable buffers shared by a process's threads (no new pages per chunk); at most
    :attr:`keep` free ones a kind, so memory follows the calls running at once."""

    keep = 8

    def __init__(self):
        self.lock = threading.Lock()
        self.free = {}

    @contextlib.contextmanager
    def borrow(self, kind, nbytes, empty=None):
        """A uint8 buffer of at least ``nbytes`` of ``kind``, made by ``empty(nbytes)``
        (default ``np.empty``; pinned memory for a device array's tiles)."""
        with self.lock:
            free = self.free.get(kind)
            buf = free.pop() if free else None
        if buf is None or buf.nbytes < nbytes:
            size = max(nbytes, 1 << 16) * 5 // 4
            buf = np.empty(size, np.uint8) if empty is None else empty(size)
        try:
            yield buf
        finally:
            with self.lock:
                free = self.free.setdefault(kind, [])
                if len(free) < self.keep:
                    free.append(buf)


    def release(self):
        """Drop the free buffers (a phase whose arrays need the memory comes next)."""
        with self.lock:
            self.free.clear()


_buffers = _Buffers()
#: a reusable uint8 buffer shared by a process's threads, as a context manager
borrow_buffer = _buffers.borrow
#: drop the free reusable buffers
release_buffers = _buffers.release


def _view(buf, shape, dtype):
    """The first bytes of ``buf`` as a C-contiguous array of ``shape`` and ``dtype``."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    return buf[:n].view(dtype).reshape(shape)


def write_shard(layout, si, sj, values, r0=0, c0=0):
    """Encode and write shard ``(si, sj)`` (written beside, then renamed) from ``values``, the
    array's cells from ``(r0, c0)`` on; returns the bytes written (0: fill only, no file).
    ``values`` may be a block reader (:class:`terrain._transfer.DeviceBlocks`: its
    ``read_block``, ``empty`` and ``buffer_kind``): the shard's cells are copied off the
    device a quarter at a time (:func:`_put_windows`), each a :meth:`ShardWriter.put`; an
    array's shard is one put.
    """
    with ShardWriter(layout, si, sj) as writer:
        for a0, a1, b0, b1 in _put_windows(layout, si, sj, hasattr(values, "read_block")):
            with _shard_cells(values, layout.dtype, a0 - r0, a1 - r0, b0 - c0, b1 - c0) as cells:
                writer.put(cells, a0, b0)
        return writer.close()


def _put_windows(layout, si, sj, quarters):
    """The windows ``(r0, r1, c0, c1)`` that write shard ``(si, sj)`` (clipped to the array):
    the shard, or with ``quarters`` its four quarters in the chunks' Morton order, so that the
    puts give the one put's bytes while a block reader's buffer holds a quarter of the shard
    (the 40-ft cost distance's writers on a 16-core host copy float64 shards of 32 MB)."""
    (R, C), (tr, tc), (rows, cols) = layout.shard, layout.inner, layout.shape
    a0, b0 = si * R, sj * C
    quads = _quarter_order(layout.per_shard) if quarters else None
    if quads is None:
        return [(a0, min(a0 + R, rows), b0, min(b0 + C, cols))]
    hr, hc = layout.per_shard[0] // 2 * tr, layout.per_shard[1] // 2 * tc
    out = []
    for qi, qj in quads:
        r0, c0 = a0 + qi * hr, b0 + qj * hc
        r1, c1 = min(r0 + hr, rows), min(c0 + hc, cols)
        if r1 > r0 and c1 > c0:
            out.append((r0, r1, c0, c1))
    return out


@functools.lru_cache(maxsize=None)
def _quarter_order(per_shard):
    """The quarters ``(qi, qj)`` of a shard of ``per_shard`` chunks in the order zarr writes
    their chunks (:func:`_morton_order`), or None when a side is odd or a quarter's chunks do
    not come in one run (then a shard is written whole).

    >>> _quarter_order((4, 4))
    ((0, 0), (1, 0), (0, 1), (1, 1))
    """
    pr, pc = per_shard
    if pr % 2 or pc % 2:
        return None
    seq = [(int(ci >= pr // 2), int(cj >= pc // 2)) for ci, cj in _morton_order(per_shard)]
    quads = tuple(dict.fromkeys(seq))
    if sum(a != b for a, b in zip(seq, seq[1:])) != len(quads) - 1:
        return None
    return quads


@contextlib.contextmanager
def _shard_cells(values, dtype, r0, r1, c0, c1):
    """``values[r0:r1, c0:c1]`` as a host array of ``dtype`` whose rows are contiguous (a
    view when it is one; a block reader's cells copied into a buffer of its kind)."""
    if hasattr(values, "read_block"):
        nbytes = (r1 - r0) * (c1 - c0) * np.dtype(dtype).itemsize
        with borrow_buffer(values.buffer_kind, nbytes, values.empty) as buf:
            cells = _view(buf, (r1 - r0, c1 - c0), dtype)
            values.read_block(cells, r0, r1, c0, c1)
            yield cells
        return
    cells = values[r0:r1, c0:c1]
    if cells.dtype != dtype or cells.strides[1] != cells.dtype.itemsize:
        cells = np.ascontiguousarray(cells, dtype)
    yield cells


class ShardWriter:
    """Shard ``(si, sj)`` of the array ``layout`` written as its cells come: each
    :meth:`put` encodes the chunks of a window of whole chunks (``terrain_shard_encode``, C,
    the GIL released, :data:`ENCODE_BYTES` at a time) and appends them to a file beside the
    shard; :meth:`close` writes the index and renames the file over the shard (no chunk but
    fill: no file). So a writer holds a window's cells, not the shard's. Windows put in the
    shard's chunk order (Morton; what :func:`write_shard` puts, the whole shard at once) give
    zarr's bytes; another order the same cells. A context manager: leaving it without
    :meth:`close` (an error) leaves the shard as it was."""

    def __init__(self, layout, si, sj):
        self.layout, self.si, self.sj = layout, si, sj
        self.index = np.full(layout.per_shard + (2,), _ABSENT, np.uint64)
        self.offset = 0
        self.fh = self.tmp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._discard()

    def put(self, cells, r0, c0):
        """Encode ``cells``, the array's cells from ``(r0, c0)`` on (C-contiguous rows, the
        array's dtype): ``(r0, c0)`` a chunk corner inside this shard, the window whole
        chunks of it (or up to the array's edge)."""
        lay = self.layout
        (R, C), (tr, tc), (rows, cols) = lay.shard, lay.inner, lay.shape
        h, w = cells.shape
        a0, b0 = self.si * R, self.sj * C
        if ((r0 - a0) % tr or (c0 - b0) % tc or not (a0 <= r0 and r0 + h <= min(a0 + R, rows)
                                                     and b0 <= c0 and c0 + w <= min(b0 + C, cols))
                or (h % tr and r0 + h != rows) or (w % tc and c0 + w != cols)):
            raise ValueError(f"ShardWriter.put: window ({r0}, {c0}) + {cells.shape} is not "
                             f"whole chunks of shard ({self.si}, {self.sj})")
        if cells.dtype != lay.dtype or cells.strides[1] != cells.dtype.itemsize:
            raise ValueError("ShardWriter.put: cells of another dtype or with gaps in a row")
        ci0, cj0 = (r0 - a0) // tr, (c0 - b0) // tc
        order = lay.order
        inside = ((order[:, 0] >= ci0) & (order[:, 0] < ci0 + -(-h // tr))
                  & (order[:, 1] >= cj0) & (order[:, 1] < cj0 + -(-w // tc)))
        order = np.ascontiguousarray(order[inside] - (ci0, cj0))
        pc = lay.per_shard[1]
        chunk = tr * tc * lay.dtype.itemsize
        fill = np.asarray(lay.fill, lay.dtype).reshape(1)
        codec = lay.codec
        compress = None if codec is None else ctypes.cast(BLOSC.compress, ctypes.c_void_p).value
        clevel, shuffle, _, cname, blocksize = codec if codec is not None else (0, 0, 0, b"", 0)
        encode = _lib().terrain_shard_encode
        # the index entries from this window's first chunk on (its rows are the shard's)
        index = self.index.ctypes.data + 16 * (ci0 * pc + cj0)
        after = np.zeros(1, np.int64)
        with borrow_buffer("tile", chunk) as tile, \
                borrow_buffer("dest", max(ENCODE_BYTES, chunk + _OVERHEAD + 4)) as dest:
            k = 0
            while k < len(order):
                n = encode(cells.ctypes.data, h, w, cells.strides[0], cells.dtype.itemsize,
                           int(cells.dtype.kind == "f"), fill.ctypes.data, tr, tc,
                           order.ctypes.data, k, len(order), pc, compress, clevel, shuffle,
                           cname, blocksize, int(lay.checksum), tile.ctypes.data,
                           dest.ctypes.data, dest.nbytes, self.offset, index,
                           after.ctypes.data)
                if n < 0:
                    raise RuntimeError(f"blosc could not compress a tile of {lay.path}")
                k = int(after[0])
                if n:
                    self._file().write(memoryview(dest)[:n])
                    self.offset += n

    def _file(self):
        if self.fh is None:
            path = self.layout.file(self.si, self.sj)
            path.parent.mkdir(parents=True, exist_ok=True)
            # NAME.HEX.partial: the name zarr's local store writes through, so one sweep
            # (sweep_partial_files) removes what a killed writer of either left
            self.tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.partial")
            self.fh = open(self.tmp, "wb")
        return self.fh

    def close(self):
        """The index written and the file renamed over the shard; returns the bytes written
        (0: fill only, and the shard's file removed)."""
        path = self.layout.file(self.si, self.sj)
        if self.fh is None:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            return 0
        raw = self.index.astype("<u8").tobytes()
        self.fh.write(raw + _crc(raw))
        self.fh.close()
        os.replace(self.tmp, path)
        self.fh = self.tmp = None
        return self.offset + len(raw) + 4

    def _discard(self):
        if self.fh is not None:
            self.fh.close()
            self.fh = None
        if self.tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)
            self.tmp = None


def _crc(data):
    """The CRC-32C of ``data`` (bytes, a memoryview or an array) as 4 little-endian bytes."""
    a = np.frombuffer(data, np.uint8)
    return int(_lib().terrain_crc32c(a.ctypes.data, a.size)).to_bytes(4, "little")


def _open_shard(layout, si, sj):
    """Shard ``(si, sj)``'s file opened, None when absent (fill only); :class:`InputError`
    when the inventory lists it."""
    try:
        return open(layout.file(si, sj), "rb")
    except FileNotFoundError:
        if layout.present is not None and layout.present[si, sj]:
            raise InputError(f"{layout.file(si, sj)}: shard missing (the store is damaged: "
                             "its inventory lists it)") from None
        return None
    except OSError as e:
        raise cannot_read(layout.file(si, sj), e) from None


def read_shard(layout, si, sj, out, r0=0, c0=0):
    """Read shard ``(si, sj)`` into ``out`` (the array's cells from ``(r0, c0)`` on); absent
    chunks (and a missing shard) give the fill value. The index's CRC is checked."""
    R, C = layout.shard
    a0, b0 = si * R, sj * C
    a1, b1 = min(a0 + R, layout.shape[0]), min(b0 + C, layout.shape[1])
    read_window(layout, a0, a1, b0, b1, out[a0 - r0:a1 - r0, b0 - c0:b1 - c0])


def _shard_index(layout, path, raw, crc):
    """The shard index of ``path`` from its bytes ``raw``, after checking its CRC-32C."""
    if _crc(raw) != crc:
        raise InputError(f"{path}: shard index checksum mismatch (the store is damaged)")
    return np.frombuffer(raw, "<u8").reshape(layout.per_shard + (2,))


def _decoded(layout, path, blob, off, length, tile):
    """The inner chunk at ``blob[off:off + length]`` as a tile (into ``tile``, or a view)."""
    if layout.checksum:
        length -= 4
        crc = bytes(memoryview(blob)[off + length:off + length + 4])
        if length < 0 or _crc(memoryview(blob)[off:off + length]) != crc:
            raise InputError(f"{path}: chunk checksum mismatch (the store is damaged)")
    chunk = memoryview(blob)[off:off + length]
    if layout.codec is None:
        return np.frombuffer(chunk, layout.dtype).reshape(layout.inner)
    n = BLOSC.decompress(blob.ctypes.data + off, tile.ctypes.data, tile.nbytes, 1)
    if n != tile.nbytes:
        raise InputError(f"{path}: a chunk does not decompress to a tile (the store is "
                         "damaged)")
    return tile


def _read_exactly(fh, path, blob, size):
    if fh.readinto(memoryview(blob)[:size]) != size:
        raise InputError(f"{path}: short read (the store is damaged)")


class _BlobShard:
    """A shard's bytes in memory: a local file read whole, or an object fetched with one GET."""

    def __init__(self, path, blob, size):
        self.path, self.blob, self.size = path, blob, size

    def tail(self, n):  # a short tail fails the index's checksum
        return bytes(memoryview(self.blob)[:self.size][-n:])

    @contextlib.contextmanager
    def chunk(self, off, length):
        if off + length > self.size:
            raise InputError(f"{self.path}: short read (the store is damaged)")
        yield self.blob, off


class _FileShard:
    """A shard's file read a chunk at a time: a window that cuts the shard needs only the
    index and the chunks it meets."""

    def __init__(self, path, fh, size):
        self.path, self.fh, self.size = path, fh, size

    def tail(self, n):  # a short tail fails the index's checksum
        self.fh.seek(self.size - n)
        return self.fh.read(n)

    @contextlib.contextmanager
    def chunk(self, off, length):
        with borrow_buffer("blob", length) as part:
            self.fh.seek(off)
            _read_exactly(self.fh, self.path, part, length)
            yield part, 0


def _decode_shard(layout, shard, si, sj, r0, r1, c0, c1, out, tile):
    """The cells of ``[r0:r1, c0:c1]`` in shard ``(si, sj)`` (``shard``: its bytes, a
    :class:`_BlobShard` or :class:`_FileShard`) decoded into ``out``, the window's cells;
    absent chunks give the fill value. The index's CRC is checked."""
    R, C = layout.shard
    tr, tc = layout.inner
    rows, cols = layout.shape
    n_idx = layout.per_shard[0] * layout.per_shard[1] * 16
    tail = shard.tail(n_idx + 4)
    index = _shard_index(layout, shard.path, tail[:n_idx], tail[n_idx:]).tolist()
    for ci in range(layout.per_shard[0]):
        a0 = si * R + ci * tr
        lo, hi = max(a0, r0), min(a0 + tr, r1, rows)
        if lo >= hi:
            continue
        for cj in range(layout.per_shard[1]):
            b0 = sj * C + cj * tc
            clo, chi = max(b0, c0), min(b0 + tc, c1, cols)
            if clo >= chi:
                continue
            dst = out[lo - r0:hi - r0, clo - c0:chi - c0]
            off, length = index[ci][cj]
            if off == _ABSENT:
                dst[...] = layout.fill
                continue
            with shard.chunk(off, length) as (buf, start):
                src = _decoded(layout, shard.path, buf, start, length, tile)
                dst[...] = src[lo - a0:hi - a0, clo - b0:chi - b0]


def read_window(layout, r0, r1, c0, c1, out):
    """Cells ``[r0:r1, c0:c1]`` of the array into ``out`` (absent chunks: fill). A shard the
    window covers is read at once, of another only the index and the chunks it meets."""
    R, C = layout.shard
    rows, cols = layout.shape
    nbytes = int(np.prod(layout.inner)) * layout.dtype.itemsize
    with borrow_buffer("tile", nbytes) as tbuf:
        tile = _view(tbuf, layout.inner, layout.dtype)
        for si in range(r0 // R, (r1 - 1) // R + 1):
            for sj in range(c0 // C, (c1 - 1) // C + 1):
                path = layout.file(si, sj)
                fh = _open_shard(layout, si, sj)
                if fh is None:
                    out[max(si * R, r0) - r0:min(si * R + R, r1) - r0,
                        max(sj * C, c0) - c0:min(sj * C + C, c1) - c0] = layout.fill
                    continue
                whole = (r0 <= si * R and min(si * R + R, rows) <= r1
                         and c0 <= sj * C and min(sj * C + C, cols) <= c1)
                with fh, contextlib.ExitStack() as stack:
                    size = os.fstat(fh.fileno()).st_size
                    if whole:  # the whole file at once
                        blob = stack.enter_context(borrow_buffer("blob", size))
                        _read_exactly(fh, path, blob, size)
                        shard = _BlobShard(path, blob, size)
                    else:
                        shard = _FileShard(path, fh, size)
                    _decode_shard(layout, shard, si, sj, r0, r1, c0, c1, out, tile)


def url_layout(store, layer):
    """``(filesystem, layout)`` for reading the array ``layer`` of the store at a URL or a
    :class:`terrain.io.remote.Location` a whole shard object at a time
    (:func:`read_url_shard`); the layout is None where :func:`read_layout` takes none."""
    from ..io.remote import filesystem
    fs, root = filesystem(store)
    folder = f"{root.rstrip('/')}/{layer}"
    try:
        meta = fs.cat_file(f"{folder}/zarr.json")
    except (OSError, ValueError):
        return fs, None
    return fs, read_layout(folder, meta)


def read_url_shard(layout, fs, si, sj, out, r0=0, c0=0):
    """:func:`read_shard` of a store at a URL: the shard's object fetched with one GET
    (``fs``: :func:`url_layout`'s filesystem), its chunks decoded as a local file's."""
    R, C = layout.shard
    a0, b0 = si * R, sj * C
    a1, b1 = min(a0 + R, layout.shape[0]), min(b0 + C, layout.shape[1])
    path = layout.file(si, sj)
    try:
        blob = np.frombuffer(fs.cat_file(str(path)), np.uint8)
    except FileNotFoundError:
        if layout.present is not None and layout.present[si, sj]:
            raise InputError(f"{path}: shard missing (the store is damaged: its inventory "
                             "lists it)") from None
        out[a0 - r0:a1 - r0, b0 - c0:b1 - c0] = layout.fill
        return
    if blob.size < layout.per_shard[0] * layout.per_shard[1] * 16 + 4:
        raise InputError(f"{path}: short read (the store is damaged)")
    nbytes = int(np.prod(layout.inner)) * layout.dtype.itemsize
    with borrow_buffer("tile", nbytes) as tbuf:
        _decode_shard(layout, _BlobShard(path, blob, blob.size), si, sj, a0, a1, b0, b1,
                      out[a0 - r0:a1 - r0, b0 - c0:b1 - c0],
                      _view(tbuf, layout.inner, layout.dtype))


def shard_grid(layout):
    """``(shard rows, shard cols)`` of the array."""
    return (-(-layout.shape[0] // layout.shard[0]), -(-layout.shape[1] // layout.shard[1]))


def read_array(layout, workers=None):
    """The whole array described by ``layout``, its shards read by ``workers`` threads
    (default :func:`io_threads`; reads and decompression run without the GIL)."""
    import concurrent.futures
    out = np.empty(layout.shape, layout.dtype)
    gr, gc = shard_grid(layout)
    shards = [(si, sj) for si in range(gr) for sj in range(gc)]
    workers = max(1, min(workers or io_threads(), len(shards)))
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda s: read_shard(layout, s[0], s[1], out), shards))
    return out
