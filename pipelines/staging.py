"""The staging of a command's URL arguments: a command run on local copies of its inputs at
URLs (fsspec: ``s3://``, ``memory://``, ...) in a temporary folder, its output published to
its URL (docs/scale.md, "Every other run on a URL stages"); on the share-nothing route its
stores are given as :class:`terrain.io.remote.Location` values instead, which its tasks open
themselves. What it calls to read, write and lock a URL is the library's
(:mod:`terrain.io.remote`).
"""

import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from terrain.errors import InputError
from terrain.io import remote
from terrain.io.outputs import json_text

__all__ = ["stage", "INPUT_FIELDS", "OUTPUT_FIELDS", "LOCAL_FIELDS"]

#: the argument names of the commands' input and output paths
INPUT_FIELDS = ("input", "store", "result", "flow", "dem", "friction", "reuse", "sources",
                "outlets", "weights")
OUTPUT_FIELDS = ("output",)
#: outputs written as local files only (GeoTIFFs beside the store)
LOCAL_FIELDS = ("geotiff", "geotiff_dir")


@contextlib.contextmanager
def stage(args, storage_options=None, direct=False):
    """Give a command (its parsed ``args``) local paths for its URL inputs and output: the
    output URL is checked first, the inputs are copied to a temporary folder, the output is
    published when the block ends without an error; messages name the URLs, not the copies.

    ``direct``: the command's tasks open stores at URLs themselves (a cluster that shares
    nothing but the object store, a resumed run): its output and its input stores are given
    as :class:`~terrain.io.remote.Location` values (the command writes and publishes the
    output, :func:`terrain.io.remote.url_output`); only input files (a raster, which this
    process reads) are copied. Else each URL output is held by its lock object
    (:func:`terrain.io.remote.hold_url_lock`) from its check to its publication; a resumed
    run is refused (its partial would lie in the temporary folder, gone with it)."""
    options = remote.parse_storage_options(storage_options)
    for name in LOCAL_FIELDS:
        if remote.is_url(getattr(args, name, None)):
            raise InputError(f"{getattr(args, name)}: GeoTIFFs are written to a local path")
    for name in INPUT_FIELDS + OUTPUT_FIELDS:
        if isinstance(getattr(args, name, None), str):
            setattr(args, name, remote.local_path(getattr(args, name)))
    urls_in = {n: getattr(args, n) for n in INPUT_FIELDS
               if remote.is_url(getattr(args, n, None))}
    urls_out = {n: getattr(args, n) for n in OUTPUT_FIELDS
                if remote.is_url(getattr(args, n, None))}
    if not urls_in and not urls_out:
        yield args
        return
    if urls_in and hasattr(args, "output") and args.output is None:
        raise InputError(f"{next(iter(urls_in.values()))}: a URL input needs its output named")
    if direct:
        for fields in (urls_out, urls_in):
            for n, url in list(fields.items()):
                if fields is urls_out or remote.store_state(url, options) == "store":
                    setattr(args, n, remote.Location(url, options))
                    del fields[n]
        if not urls_in and not urls_out:
            yield args
            return
    overwrite = bool(getattr(args, "overwrite", False))
    for url in urls_out.values():
        if getattr(args, "resume", False) and not getattr(args, "dry_run", False):
            # a staged run's partial output lies in a temporary folder, gone with the run
            raise InputError(f"{url}: a run staged through a temporary folder cannot be "
                             "resumed at a URL (its partial output lies in that folder)")
        remote.check_url_output(url, overwrite, list(urls_in.values()), options)
    with contextlib.ExitStack() as locks:
        held = [locks.enter_context(remote.hold_url_lock(url, options))
                for url in urls_out.values()]
        yield from _staged(args, urls_in, urls_out, options, overwrite, held)


def _staged(args, urls_in, urls_out, options, overwrite, held):
    """:func:`stage`'s copies: the inputs fetched into a temporary folder, the outputs
    published from there (``held``: their locks' checks) when the command ends well."""
    tmp = tempfile.mkdtemp(prefix="terrain-url-")
    names = {}
    try:
        for kind, urls in (("in", urls_in), ("out", urls_out)):
            for i, (n, url) in enumerate(urls.items()):
                local = os.path.join(tmp, f"{kind}{i}",
                                     os.path.basename(url.rstrip("/")) or f"{kind}put")
                os.makedirs(os.path.dirname(local))
                if kind == "in":
                    remote.fetch(url, local, options)
                names[local] = url
                setattr(args, n, local)
        try:
            with contextlib.redirect_stdout(_Renaming(sys.stdout, names)):
                yield args
        except InputError as e:
            _rename_in_message(e, names)
            raise
        for still_held in held:
            still_held()
        for n, url in urls_out.items():
            if os.path.exists(getattr(args, n)):  # a command that failed wrote nothing
                _rename_in_metadata(getattr(args, n), names)
                remote.publish(getattr(args, n), url, overwrite, options)
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
    """Name the URLs in the metadata of the store ``local`` (a result's ``source``); a
    fingerprint of the temporary copy that ``source`` named is dropped with it (a store at a
    URL is not fingerprinted: terrain.io.georef.finish_store)."""
    for folder, _dirs, files in os.walk(local):  # a file: nothing
        if remote.ROOT_METADATA in files:
            path = Path(folder, remote.ROOT_METADATA)
            text = path.read_text(encoding="utf-8")
            if _renamed(text, names) != text:
                doc = json.loads(_renamed(text, names))
                (doc.get("attributes") or {}).pop("source_fingerprint", None)
                path.write_text(json_text(doc, indent=2), encoding="utf-8")


def _rename_in_message(e, names):
    """Name the URLs, not their temporary copies, in the message of ``e``."""
    if e.args and isinstance(e.args[0], str):
        e.args = (_renamed(e.args[0], names),) + e.args[1:]
