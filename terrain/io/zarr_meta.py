"""The Zarr v3 groups and arrays of a local store as the JSON documents they are.

A store's metadata is one ``zarr.json`` per group and array; terrain writes its own stores'
documents here (the groups, the layers' metadata, the coordinates, the consolidated copy)
and their shards by hand (:mod:`terrain.tiles`), so that a command writing a store imports
no zarr: zarr's import alone costs a process 0.22-0.27 s on the 2-core VM (0.37 s of the
40-ft ``mst`` on an H200 host), more than a small job's work (the sample's cost distance
runs 0.21 s in a 0.62-0.71 s process). zarr reads what is written here (the tests open
every store with it and with xarray); a store at a URL is zarr's to write
(:func:`open_group`), and reading an array's data here goes through zarr.

:class:`Group` and :class:`Array` answer the part of zarr's ``Group`` and ``Array`` that
terrain's writers use (attributes, members, creating arrays and groups, an array's shape,
chunks and shards); every read of an attribute reads the document again, so handles never
write back stale metadata.

>>> import tempfile, os
>>> g = open_group(os.path.join(tempfile.mkdtemp(), "s.zarr"), mode="w-")
>>> a = g.create_array("z", shape=(5, 6), dtype="float32", chunks=(4, 4), shards=(8, 8),
...                    fill_value=float("nan"), dimension_names=("y", "x"))
>>> a.attrs.update({"units": "m"})
>>> a.shape, a.chunks, a.shards, g["z"].attrs["units"], "z" in g
((5, 6), (4, 4), (8, 8), 'm', True)
"""

import functools
import json
import math
import os
import shutil
import uuid
from collections.abc import MutableMapping
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..errors import InputError, cannot_read
from .outputs import json_text
from .remote import is_remote, store_for

__all__ = ["open_group", "open_array", "Group", "Array", "consolidate", "codec",
           "compressor_list", "codec_library", "blosc", "zstd_encode", "ZARR_JSON"]

ZARR_JSON = "zarr.json"
_CONSOLIDATED_EMPTY = {"kind": "inline", "must_understand": False, "metadata": {}}


@functools.cache
def codec_library(name):
    """numcodecs' C extension ``name`` (``"blosc"``, ``"zstd"``) loaded by ctypes for its C
    functions, without importing numcodecs: its import registers every codec and brings
    multiprocessing, importlib.metadata and email, 4.7 MB of a cost distance's peak RSS and
    30 ms of its start (2-core VM)."""
    import ctypes
    import importlib.machinery
    import importlib.util
    folder = Path(importlib.util.find_spec("numcodecs").submodule_search_locations[0])
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if (folder / f"{name}{suffix}").exists():
            return ctypes.CDLL(str(folder / f"{name}{suffix}"))
    raise ImportError(f"numcodecs has no {name} extension in {folder}")


class _Blosc:
    """c-blosc's ``blosc_(de)compress_ctx`` from numcodecs' extension through ctypes, on
    caller-owned buffers, the GIL released (numcodecs allocates a ``bytes`` per call, GIL
    held)."""

    def __init__(self):
        import ctypes
        lib = codec_library("blosc")
        self.compress = lib.blosc_compress_ctx
        self.compress.restype = ctypes.c_int
        self.compress.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t,
                                  ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                  ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
        self.decompress = lib.blosc_decompress_ctx
        self.decompress.restype = ctypes.c_int
        self.decompress.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                    ctypes.c_int]


@functools.cache
def blosc():
    """c-blosc's context functions (``.compress``, ``.decompress``: ``blosc_*_ctx``), or
    None where numcodecs' extension does not export them (zarr's codecs then do it)."""
    try:
        return _Blosc()
    except Exception:  # noqa: BLE001 - no exported symbols
        return None


@functools.cache
def _zstd():
    import ctypes
    lib = codec_library("zstd")
    lib.ZSTD_compressBound.restype = ctypes.c_size_t
    lib.ZSTD_compress.restype = ctypes.c_size_t
    lib.ZSTD_isError.restype = ctypes.c_uint
    return lib


def zstd_encode(raw, level):
    """``raw`` (bytes) as one Zstandard frame at ``level``: what zarr's ``zstd`` codec
    decodes (``ZSTD_compress`` of numcodecs' extension, :func:`codec_library`)."""
    import ctypes
    lib = _zstd()
    cap = lib.ZSTD_compressBound(ctypes.c_size_t(len(raw)))
    out = ctypes.create_string_buffer(cap)
    n = lib.ZSTD_compress(out, ctypes.c_size_t(cap), raw, ctypes.c_size_t(len(raw)),
                          ctypes.c_int(level))
    if lib.ZSTD_isError(ctypes.c_size_t(n)):
        raise ValueError(f"zstd: compression failed at level {level}")
    return out.raw[:n]


def codec(name, **configuration):
    """A bytes-to-bytes codec as zarr.json names it (zarr takes the same dict):
    ``codec("blosc", cname="lz4", clevel=5, shuffle="bitshuffle")``, ``codec("crc32c")``."""
    return {"name": name, "configuration": configuration} if configuration else {"name": name}


def as_codec(c):
    """A codec as its zarr.json dict: given as one, or as a zarr codec object."""
    return dict(c) if isinstance(c, dict) else c.to_dict()


def open_group(path, mode="r"):
    """The group at ``path``: a :class:`Group` for a local path, zarr's ``Group`` at a URL.
    ``mode`` as zarr's: ``r``/``r+`` (it must exist), ``a`` (created when missing), ``w-``
    (created; an error when a group or array is there). No mode removes what is there."""
    if mode not in ("r", "r+", "a", "w-"):
        raise ValueError(f"open_group: mode {mode!r} is not 'r', 'r+', 'a' or 'w-'")
    if is_remote(path):
        import zarr
        return zarr.open_group(store=store_for(path, read_only=mode == "r"), mode=mode,
                               zarr_format=3, use_consolidated=False)
    root = Path(path)
    doc = _read(root)
    if mode in ("r", "r+") and doc is None:
        raise FileNotFoundError(f"{root}: no Zarr group")
    if mode == "w-" and doc is not None:
        raise FileExistsError(f"{root}: a Zarr node is there already")
    if doc is None:
        _write_group(root)
    elif doc.get("node_type") != "group":  # a layer named where its store is meant
        raise InputError(f"{root}: a layer of the store {root.parent}, not a store (give "
                         f"{root.parent})" if _read(root.parent) is not None else
                         f"{root}: a Zarr array, not a store")
    return Group(root)


def open_array(store, name):
    """The array ``name`` of the store at ``store`` (read-only): an :class:`Array` for a local
    path, zarr's array at a URL."""
    if is_remote(store):
        import zarr
        return zarr.open_array(store=store_for(store), path=name, mode="r")
    return Array(Path(store) / name)


def _read(folder):
    path = Path(folder) / ZARR_JSON
    try:
        doc = json.loads(path.read_text())
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:  # unreadable (or its folder untraversable): no node is not the answer
        raise cannot_read(path, e) from None
    except (ValueError, UnicodeDecodeError):  # JSONDecodeError is a ValueError
        raise InputError(f"{path}: not valid JSON (the store is damaged)") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not a Zarr document (the store is damaged)")
    return doc


def _write(folder, doc):
    """``doc`` as ``folder``'s zarr.json, atomically (written beside, then renamed)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{ZARR_JSON}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.write_text(json_text(doc, indent=2))
    os.replace(tmp, folder / ZARR_JSON)


def _write_group(folder):
    """An empty group's zarr.json in ``folder``."""
    _write(folder, {"attributes": {}, "zarr_format": 3, "node_type": "group"})


class Attributes(MutableMapping):
    """A node's ``attributes``, read from its zarr.json at each access, written back by
    :meth:`update` (and item assignment) as one document."""

    def __init__(self, folder):
        self._folder = Path(folder)

    def _all(self):
        return (_read(self._folder) or {}).get("attributes") or {}

    def __getitem__(self, key):
        return self._all()[key]

    def __iter__(self):
        return iter(list(self._all()))

    def __len__(self):
        return len(self._all())

    def __setitem__(self, key, value):
        self.update({key: value})

    def __delitem__(self, key):
        doc = _read(self._folder)
        del doc["attributes"][key]
        _write(self._folder, doc)

    def update(self, other=(), **more):
        doc = _read(self._folder)
        doc.setdefault("attributes", {}).update(dict(other, **more))
        _write(self._folder, doc)

    def put(self, attributes):
        """Replace every attribute by ``attributes``."""
        doc = _read(self._folder)
        doc["attributes"] = dict(attributes)
        _write(self._folder, doc)


class Group:
    """A local group (``root``: its folder), as much of zarr's ``Group`` as terrain uses."""

    def __init__(self, root):
        self.root = Path(root)
        self.attrs = Attributes(self.root)

    def __repr__(self):
        return f"<terrain Group {self.root}>"

    def __contains__(self, name):
        return _read(self.root / name) is not None

    def __getitem__(self, name):
        doc = _read(self.root / name)
        if doc is None:
            raise KeyError(name)
        return Group(self.root / name) if doc.get("node_type") == "group" else \
            Array(self.root / name, doc)

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def _members(self, kind):
        if not self.root.is_dir():
            return []
        out = []
        try:
            entries = sorted(os.listdir(self.root))
        except OSError as e:
            raise cannot_read(self.root, e) from None
        for entry in entries:
            if entry.startswith(".") or not (self.root / entry).is_dir():
                continue
            doc = _read(self.root / entry)
            if doc is not None and doc.get("node_type") == kind:
                out.append(entry)
        return out

    def array_keys(self):
        return iter(self._members("array"))

    def arrays(self):
        return iter([(name, self[name]) for name in self._members("array")])

    def create_group(self, name, overwrite=False):
        if name in self and not overwrite:
            raise FileExistsError(f"{self.root / name}: a Zarr node is there already")
        if overwrite and (self.root / name).exists():
            shutil.rmtree(self.root / name)
        _write_group(self.root / name)
        return Group(self.root / name)

    def create_array(self, name, *, shape, dtype, chunks=None, shards=None, fill_value=None,
                     dimension_names=None, compressors="auto", config=None, overwrite=False,
                     attributes=None):
        """A new array's zarr.json, as zarr writes it: a regular grid of ``chunks`` (or of
        ``shards``, each ``sharding_indexed`` into ``chunks``: bytes, ``compressors``,
        index bytes and CRC-32C at the end), the default chunk keys (``c/i/j``), ``fill_value``
        (zarr's default 0 / False). ``compressors``: codec dicts (:func:`codec`), ``"auto"``
        (zarr's Zstd level 0) or None; ``config`` is zarr's run-time setting, not stored."""
        del config  # write_empty_chunks: the writers here never write a chunk of fill alone
        folder = self.root / name
        if (folder / ZARR_JSON).is_file():
            if not overwrite:
                raise FileExistsError(f"{folder}: a Zarr node is there already")
        if overwrite and folder.exists():
            shutil.rmtree(folder)
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        chunks = tuple(int(c) for c in (chunks if chunks is not None else shape))
        inner = [_bytes_codec(dtype), *(_sized(c, dtype) for c in compressor_list(compressors))]
        if shards is not None:
            shards = tuple(int(s) for s in shards)
            codecs = [{"name": "sharding_indexed", "configuration": {
                "chunk_shape": list(chunks), "codecs": inner,
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                                 {"name": "crc32c"}],
                "index_location": "end"}}]
        else:
            codecs = inner
        doc = {"shape": list(shape), "data_type": _dtype_name(dtype),
               "chunk_grid": {"name": "regular", "configuration": {
                   "chunk_shape": list(shards if shards is not None else chunks)}},
               "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
               "fill_value": _fill_json(fill_value, dtype), "codecs": codecs,
               "attributes": dict(attributes or {})}
        if dimension_names is not None:
            doc["dimension_names"] = list(dimension_names)
        doc.update({"zarr_format": 3, "node_type": "array", "storage_transformers": []})
        _write(folder, doc)
        return Array(folder, doc)


def _dtype_name(dtype):
    if dtype.kind not in "biuf" or dtype.byteorder == ">":
        raise ValueError(f"zarr_meta: no v3 name here for dtype {dtype}")
    return "bool" if dtype.kind == "b" else dtype.name


def _bytes_codec(dtype):
    return ({"name": "bytes"} if dtype.itemsize == 1 else
            {"name": "bytes", "configuration": {"endian": "little"}})


def compressor_list(compressors):
    """``compressors`` as a list of zarr.json codec dicts: None none, ``"auto"`` zarr's
    default for numbers (Zstd level 0), one codec or several, dicts or zarr's codec objects."""
    if compressors is None:
        return []
    if isinstance(compressors, str):  # "auto"
        return [codec("zstd", level=0, checksum=False)]
    if isinstance(compressors, dict) or hasattr(compressors, "to_dict"):
        compressors = [compressors]
    return [as_codec(c) for c in compressors]


def _sized(c, dtype):
    """Codec ``c`` as zarr stores it for ``dtype``: Blosc with the element size and block
    size zarr fills in."""
    c = {"name": c["name"], **({"configuration": dict(c["configuration"])}
                               if c.get("configuration") else {})}
    if c["name"] == "blosc":
        conf = c["configuration"]
        c["configuration"] = {"typesize": dtype.itemsize, "cname": conf["cname"],
                              "clevel": conf["clevel"], "shuffle": conf["shuffle"],
                              "blocksize": conf.get("blocksize", 0)}
    return c


def _fill_json(value, dtype):
    if dtype.kind == "b":
        return bool(value) if value is not None else False
    if dtype.kind in "iu":
        return int(value) if value is not None else 0
    v = float(value) if value is not None else 0.0
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def _fill_value(text, dtype):
    if dtype.kind == "f" and isinstance(text, str):
        return dtype.type({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[text])
    return dtype.type(text)


class Array:
    """A local array's metadata (``folder``: its folder): ``shape``, ``dtype``, ``chunks`` (the
    inner chunks of a sharded array), ``shards`` (None unless sharded), ``fill_value``,
    ``attrs``, ``metadata.dimension_names``. Its data are read and written through zarr
    (imported then), but for a whole unsharded array written at once (the coordinates)."""

    def __init__(self, folder, doc=None):
        self.folder = Path(folder)
        doc = doc if doc is not None else _read(self.folder)
        if doc is None or doc.get("node_type") != "array":
            raise FileNotFoundError(f"{self.folder}: no Zarr array")
        self.shape = tuple(doc["shape"])
        self.ndim = len(self.shape)
        self.dtype = np.dtype(doc["data_type"])
        grid = tuple(doc["chunk_grid"]["configuration"]["chunk_shape"])
        first = doc["codecs"][0]
        if first["name"] == "sharding_indexed":
            self.shards, self.chunks = grid, tuple(first["configuration"]["chunk_shape"])
            self._codecs = first["configuration"]["codecs"]
        else:
            self.shards, self.chunks, self._codecs = None, grid, doc["codecs"]
        self.fill_value = _fill_value(doc["fill_value"], self.dtype)
        self.metadata = SimpleNamespace(dimension_names=tuple(doc["dimension_names"])
                                        if doc.get("dimension_names") else None)
        self.attrs = Attributes(self.folder)
        self.path = self.name = self.folder.name

    def __repr__(self):
        return f"<terrain Array {self.folder} {self.shape} {self.dtype}>"

    def _zarr(self, read_only):
        import zarr
        return zarr.open_array(store=str(self.folder), mode="r" if read_only else "r+")

    def __getitem__(self, key):
        return self._zarr(True)[key]

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self[...], dtype)

    def with_config(self, config):
        """zarr's array with run-time ``config`` (writing through zarr)."""
        return self._zarr(False).with_config(config)

    def __setitem__(self, key, value):
        whole = key is Ellipsis or key == slice(None) or key == ()
        if not (whole and self.shards is None and self.chunks == self.shape):
            self._zarr(False)[key] = value
            return
        # one chunk, the whole array: its bytes through the codecs (bytes, then Zstd)
        data = np.broadcast_to(np.asarray(value, self.dtype), self.shape)
        key_file = self.folder / ("c/" + "/".join("0" * self.ndim) if self.ndim else "c")
        if np.all(data == self.fill_value):  # zarr writes no chunk of fill alone
            key_file.unlink(missing_ok=True)
            return
        raw = np.ascontiguousarray(data, self.dtype.newbyteorder("<")).tobytes()
        for c in self._codecs[1:]:
            if c["name"] != "zstd":
                self._zarr(False)[key] = value
                return
            raw = zstd_encode(raw, c["configuration"]["level"])
        key_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = key_file.with_name(f".{key_file.name}.{uuid.uuid4().hex[:8]}.tmp")
        tmp.write_bytes(raw)
        os.replace(tmp, key_file)


def consolidate(path):
    """Copy every member's document into the root group's ``consolidated_metadata`` (zarr's
    ``consolidate_metadata``: xarray opens the store from that one document). Local only."""
    root = Path(path)
    doc = _read(root)
    members = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "c")
        rel = Path(folder).relative_to(root).as_posix()
        if rel == "." or ZARR_JSON not in files:
            continue
        child = _read(folder)
        if child.get("node_type") == "group":
            child = {**child, "consolidated_metadata": dict(_CONSOLIDATED_EMPTY)}
        else:
            dirs[:] = []
        members[rel] = child
    doc["consolidated_metadata"] = {"kind": "inline", "must_understand": False,
                                    "metadata": dict(sorted(members.items()))}
    _write(root, doc)
