"""Stores and rasters on object storage: any fsspec URL (``s3://``, ``gs://``, ``az://``,
``memory://``, ``file://``) where a command takes a path.

The one place terrain opens a URL. A store is published by writing its root ``zarr.json``
last (an object store has no rename); :func:`stage` runs a command on local copies of its
URL inputs and publishes its URL output (design note: docs/gis.md, "Object storage").

>>> is_url("s3://bucket/dem.zarr"), is_url("dem.zarr"), is_url("C:/dem.zarr")
(True, False, False)
>>> local_path("file:///tmp/dem.zarr")
'/tmp/dem.zarr'
>>> import zarr
>>> g = zarr.open_group(zarr_store("memory://doc/a.zarr", read_only=False), mode="w")
>>> store_state("memory://doc/a.zarr")
'store'
"""

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from ..errors import InputError
from .outputs import OutputExists

__all__ = ["is_url", "local_path", "parse_storage_options", "zarr_store", "store_state",
           "check_url_output", "fetch", "publish", "stage", "ROOT_METADATA"]

#: the object whose presence makes a prefix a Zarr v3 store (written last, deleted first)
ROOT_METADATA = "zarr.json"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")


def is_url(text):
    """True when ``text`` is a URL of a filesystem other than the local one (``file://``
    is a local path, see :func:`local_path`)."""
    if not isinstance(text, str):
        return False
    m = _SCHEME.match(text)
    return bool(m) and m.group(1).lower() not in ("file", "local")


def local_path(text):
    """``text`` without a ``file://`` scheme (a local path stays as it is)."""
    if isinstance(text, str):
        m = _SCHEME.match(text)
        if m and m.group(1).lower() in ("file", "local"):
            return text[m.end():] if text[m.end():].startswith("/") else "/" + text[m.end():]
    return text


def parse_storage_options(text):
    """The storage options given as JSON text (an object), ``{}`` for None."""
    if text is None or isinstance(text, dict):
        return dict(text or {})
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise InputError(f"storage options: not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise InputError("storage options: not a JSON object")
    return doc


def _fs(url, options=None):
    import fsspec
    try:
        return fsspec.core.url_to_fs(url, **(options or {}))
    except ImportError as e:
        raise InputError(f"{url}: no filesystem for this URL ({e})") from None
    except (ValueError, TypeError) as e:
        raise InputError(f"{url}: {e}") from None


def zarr_store(path, options=None, read_only=True):
    """The zarr store for a local path or an fsspec URL: what every ``zarr.open_*`` of a
    store that may be remote is given."""
    import zarr
    if is_url(path):
        return zarr.storage.FsspecStore.from_url(
            path, storage_options=options or None, read_only=read_only)
    return zarr.storage.LocalStore(local_path(str(path)), read_only=read_only)


def _join(root, name):
    return root.rstrip("/") + "/" + name


def store_state(url, options=None):
    """``"store"`` when ``url`` holds a published store (its root metadata), ``"partial"``
    when it holds objects but no root metadata (a run that died while writing), else None.
    An unreachable store (no bucket, no credentials) is an :class:`InputError` naming it."""
    fs, root = _fs(url, options)
    try:
        if fs.exists(_join(root, ROOT_METADATA)):
            return "store"
        if fs.exists(root) and (fs.isfile(root) or fs.find(root, maxdepth=None)):
            return "partial"
        return None
    except (OSError, PermissionError, ValueError) as e:
        raise InputError(f"{url}: cannot reach it: {_short(e)}") from None


def _short(e):
    return " ".join(str(e).split())[:200] or type(e).__name__


def check_url_output(url, overwrite=False, inputs=(), options=None):
    """Refuse ``url`` as an output before any work: an input, inside one or holding one,
    or a published store without ``overwrite`` (:class:`~terrain.io.outputs.OutputExists`)."""
    target = url.rstrip("/")
    for i in inputs:
        if not isinstance(i, str) or not is_url(i):
            continue
        i = i.rstrip("/")
        if i == target:
            raise InputError(f"{url}: output is the input {i}")
        if i.startswith(target + "/") or target.startswith(i + "/"):
            raise InputError(f"{url}: output overlaps the input {i}")
    if store_state(url, options) == "store" and not overwrite:
        raise OutputExists(f"{url}: output exists")
    _probe(url, options)


def _probe(url, options):
    """Write and delete a probe object under ``url``: a missing bucket or a read-only
    credential fails before the work."""
    import uuid
    fs, root = _fs(url, options)
    probe = _join(root, f".terrain-probe-{uuid.uuid4().hex}")
    try:
        fs.pipe_file(probe, b"")
        fs.rm(probe)
    except (OSError, PermissionError, ValueError) as e:
        raise InputError(f"{url}: cannot write there: {_short(e)}") from None


def fetch(url, local, options=None):
    """Copy the store or file at ``url`` to the local path ``local`` (which must not
    exist); :class:`InputError` naming ``url`` when there is nothing there."""
    fs, root = _fs(url, options)
    try:
        if fs.isfile(root):
            fs.get(root, local)
            return local
        if not fs.exists(_join(root, ROOT_METADATA)):
            raise InputError(f"{url}: no such store or file")
        fs.get(root.rstrip("/") + "/", local, recursive=True)
    except InputError:
        raise
    except (OSError, PermissionError, ValueError) as e:
        raise InputError(f"{url}: cannot read it: {_short(e)}") from None
    return local


def _remove_prefix(fs, root):
    if fs.exists(root):
        with contextlib.suppress(FileNotFoundError):
            fs.rm(root, recursive=True)


def publish(local, url, overwrite=False, options=None, notify=None):
    """Upload the finished local store (or file) ``local`` to ``url``, root metadata last;
    a store there is replaced only with ``overwrite``, a dead run's partial with a notice."""
    notify = notify or (lambda m: print(f"terrain: {m}", file=sys.stderr))
    fs, root = _fs(url, options)
    try:
        state = store_state(url, options)
        if state == "store":
            if not overwrite:
                raise OutputExists(f"{url}: output exists")
            fs.rm(_join(root, ROOT_METADATA))  # unpublished before any object changes
            _remove_prefix(fs, root)
        elif state == "partial":
            notify(f"removing the partial output a killed run left at {url}")
            _remove_prefix(fs, root)
        if os.path.isfile(local):
            fs.put(local, root)
            return url
        last = None
        for folder, _dirs, files in os.walk(local):
            for name in sorted(files):
                src = os.path.join(folder, name)
                rel = os.path.relpath(src, local).replace(os.sep, "/")
                if rel == ROOT_METADATA:
                    last = src
                    continue
                fs.put_file(src, _join(root, rel))
        if last is None:
            raise InputError(f"{local}: not a Zarr store (no {ROOT_METADATA})")
        fs.put_file(last, _join(root, ROOT_METADATA))  # the store appears here
    except InputError:
        raise
    except (OSError, PermissionError, ValueError) as e:
        raise InputError(f"{url}: cannot write there: {_short(e)}") from None
    return url


#: the argument names of the commands' input and output paths
INPUT_FIELDS = ("input", "store", "flow", "dem", "friction", "reuse", "sources")
OUTPUT_FIELDS = ("output",)
#: outputs written as local files only (GeoTIFFs beside the store)
LOCAL_FIELDS = ("geotiff", "geotiff_dir")


@contextlib.contextmanager
def stage(args, storage_options=None):
    """Give a command (its parsed ``args``) local paths for its URL inputs and output: the
    output URL is checked first, the inputs are copied to a temporary folder, the output is
    published when the block ends without an error; messages name the URLs, not the copies."""
    options = parse_storage_options(storage_options)
    for name in LOCAL_FIELDS:
        if is_url(getattr(args, name, None)):
            raise InputError(f"{getattr(args, name)}: GeoTIFFs are written to a local path")
    for name in INPUT_FIELDS + OUTPUT_FIELDS:
        if isinstance(getattr(args, name, None), str):
            setattr(args, name, local_path(getattr(args, name)))
    urls_in = {n: getattr(args, n) for n in INPUT_FIELDS if is_url(getattr(args, n, None))}
    urls_out = {n: getattr(args, n) for n in OUTPUT_FIELDS if is_url(getattr(args, n, None))}
    if not urls_in and not urls_out:
        yield args
        return
    if urls_in and hasattr(args, "output") and args.output is None:
        raise InputError(f"{next(iter(urls_in.values()))}: a URL input needs its output named")
    overwrite = bool(getattr(args, "overwrite", False))
    for url in urls_out.values():
        check_url_output(url, overwrite, list(urls_in.values()), options)
    tmp = tempfile.mkdtemp(prefix="terrain-url-")
    names = {}
    try:
        for kind, urls in (("in", urls_in), ("out", urls_out)):
            for i, (n, url) in enumerate(urls.items()):
                local = os.path.join(tmp, f"{kind}{i}",
                                     os.path.basename(url.rstrip("/")) or f"{kind}put")
                os.makedirs(os.path.dirname(local))
                if kind == "in":
                    fetch(url, local, options)
                names[local] = url
                setattr(args, n, local)
        try:
            with contextlib.redirect_stdout(_Renaming(sys.stdout, names)):
                yield args
        except InputError as e:
            _rename_in_message(e, names)
            raise
        for n, url in urls_out.items():
            if os.path.exists(getattr(args, n)):  # a command that failed wrote nothing
                _rename_in_metadata(getattr(args, n), names)
                publish(getattr(args, n), url, overwrite, options)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _renamed(text, names):
    for local, url in sorted(names.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(local, url)
    return text


class _Renaming:
    """A text stream that names the URLs, not their temporary copies (what a command prints)."""

    def __init__(self, stream, names):
        self._stream, self._names = stream, names

    def write(self, text):
        return self._stream.write(_renamed(text, self._names))

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _rename_in_metadata(local, names):
    """Name the URLs in the metadata of the store ``local`` (a result's ``source``)."""
    for folder, _dirs, files in os.walk(local):  # a file: nothing
        if ROOT_METADATA in files:
            path = Path(folder, ROOT_METADATA)
            text = path.read_text(encoding="utf-8")
            if _renamed(text, names) != text:
                path.write_text(_renamed(text, names), encoding="utf-8")


def _rename_in_message(e, names):
    """Name the URLs, not their temporary copies, in the message of ``e``."""
    if e.args and isinstance(e.args[0], str):
        e.args = (_renamed(e.args[0], names),) + e.args[1:]
