"""Stores and rasters on object storage: any fsspec URL (``s3://``, ``gs://``, ``az://``,
``memory://``, ``file://``) where a command takes a path.

The one place terrain opens a URL. A store is published by writing its root ``zarr.json``
last (an object store has no rename). Two routes (docs/scale.md, "Stores at URLs"):

* share nothing: a store at a URL travels to the tasks as a :class:`Location` (URL and
  storage options, picklable), which :func:`zarr_store` opens on any worker; the output is
  written under its prefix with its root metadata held as :data:`PENDING_ROOT` and published
  last by :func:`url_output` (``ingest``, ``mst``, ``cost-distance``, ``fill`` and ``flow``
  on a cluster given by address, and resumed runs: ``pipelines.staging.stage`` with
  ``direct``);
* staged: ``pipelines.staging.stage`` runs a command on local copies of its URL inputs
  (:func:`fetch`) in a temporary folder and publishes its URL output (:func:`publish`):
  every other run.

On either route an output at a URL is held by a lock object beside its prefix while its run
lasts (:func:`hold_url_lock`).

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
import socket
import sys
import threading
import time
import uuid
from pathlib import Path

from ..errors import InputError
from .outputs import CHECKPOINT_DIR, OtherRunsPartial, OutputExists, json_text

__all__ = ["is_url", "local_path", "parse_storage_options", "zarr_store", "store_state",
           "check_url_output", "fetch", "publish", "ROOT_METADATA", "Location",
           "is_remote", "location", "store_for", "url_output", "output_at", "url_inventory",
           "filesystem", "scratch_beside", "inside", "remove_tree", "object_entries",
           "input_fingerprint", "input_fingerprints", "check_unchanged", "as_path", "command_paths",
           "check_local_outputs", "PENDING_ROOT",
           "hold_url_lock", "lock_url", "LOCK_LEASE", "LOCK_HEARTBEAT"]

#: the object whose presence makes a prefix a Zarr v3 store (written last, deleted first)
ROOT_METADATA = "zarr.json"
#: where the root metadata of a store being written at a URL is held until it is published
PENDING_ROOT = ".terrain-root.json"

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


class Location:
    """A store at an fsspec URL and the storage options that reach it: what a task is given
    to open the store itself on a worker that shares nothing with the client but the object
    store (picklable; ``str()`` is the URL). ``writing``: the store being written, its root
    metadata held as :data:`PENDING_ROOT` until :func:`url_output` publishes it; ``key``: the
    run key of that run (``pipelines._resume.run_key``), which names its checkpoints' folder
    under the prefix.

    >>> str(Location("s3://b/dem.zarr", {"anon": True}))
    's3://b/dem.zarr'
    """

    __slots__ = ("url", "options", "writing", "key")

    def __init__(self, url, options=None, writing=False, key=None):
        self.url, self.options, self.writing = str(url).rstrip("/"), dict(options or {}), writing
        self.key = key

    def __str__(self):
        return self.url

    def __repr__(self):
        return f"Location({self.url!r}{', writing' if self.writing else ''})"

    def __eq__(self, other):
        return isinstance(other, Location) and self.__getstate__() == other.__getstate__()

    __hash__ = None

    def __getstate__(self):
        return (self.url, self.options, self.writing, self.key)

    def __setstate__(self, state):
        self.url, self.options, self.writing, self.key = state

    def __dask_tokenize__(self):
        return ("Location", self.url, json.dumps(self.options, sort_keys=True, default=str),
                self.writing, self.key)


def is_remote(path):
    """True for a :class:`Location` or a URL (:func:`is_url`)."""
    return isinstance(path, Location) or is_url(path)


def location(path, options=None):
    """``path`` as a task should carry it: a URL as a :class:`Location` with ``options``
    (a :class:`Location` and a local path as they are)."""
    return Location(path, options) if is_url(path) else path


def as_path(path):
    """``path`` as a ``Path``; a store at a URL (a :class:`Location`) as it is: the tasks open
    it where they run."""
    return path if is_remote(path) else Path(path)


def command_paths(input_path, output_path, default_output):
    """``(input, output)`` of a command (:func:`as_path` each); without an output named,
    ``default_output(input)``, which derives a local name: for an input at a URL one
    :class:`InputError` instead."""
    inp = as_path(input_path)
    if output_path is None and is_remote(inp):
        raise InputError(f"{inp}: a URL input needs its output named")
    return inp, as_path(output_path) if output_path else default_output(inp)


def check_local_outputs(inputs, outputs, overwrite=False):
    """:func:`terrain.io.outputs.check_outputs` of the local ``inputs`` and ``outputs``; an
    output at a URL is checked by :func:`url_output` (against the inputs at URLs). The first
    output is the command's store: not named as a file of another format
    (:func:`terrain.io.outputs.check_store_name`)."""
    from .outputs import check_outputs, check_store_name
    check_outputs([i for i in inputs if i is not None and not is_remote(i)],
                  [o for o in outputs if o is not None and not is_remote(o)], overwrite)
    if outputs and outputs[0] is not None:
        check_store_name(outputs[0])


def _split(path, options=None):
    """``(url, options)`` of a URL (with ``options``) or a :class:`Location`."""
    if isinstance(path, Location):
        return path.url, path.options
    return path, options


#: URL schemes whose fsspec client an extra of terrain's installs (pyproject.toml)
_CLIENT_EXTRAS = {"s3": "s3", "s3a": "s3"}


def _fs(url, options=None):
    import fsspec
    url, options = _split(url, options)
    try:
        fs, root = fsspec.core.url_to_fs(url, **(options or {}))
    except ImportError as e:
        # fsspec names the client to install; terrain's extra that installs it, where it has one
        extra = _CLIENT_EXTRAS.get(fsspec.core.split_protocol(url)[0])
        hint = f"; pip install 'terrain[{extra}]'" if extra else ""
        raise InputError(f"{url}: no filesystem for this URL ({e}{hint})") from None
    except (ValueError, TypeError) as e:
        raise InputError(f"{url}: {e}") from None
    # the filesystem is cached, its listings too: other processes (a cluster's workers)
    # write under the prefix
    fs.invalidate_cache(root)
    return fs, root


def zarr_store(path, options=None, read_only=True):
    """The zarr store for a local path, an fsspec URL or a :class:`Location`: what every
    ``zarr.open_*`` of a store that may be remote is given."""
    import zarr
    writing = isinstance(path, Location) and path.writing
    path, options = _split(path, options)
    if is_url(path):
        store = zarr.storage.FsspecStore.from_url(
            path, storage_options=options or None, read_only=read_only)
        store.fs.invalidate_cache(store.path)  # as in _fs
        return _held_root_store()(store) if writing else store
    return zarr.storage.LocalStore(local_path(str(path)), read_only=read_only)


def store_for(path, read_only=True):
    """What ``zarr.open_*(store=...)`` is given for ``path``: a local path as text (zarr's
    own local store), else :func:`zarr_store`."""
    return zarr_store(path, read_only=read_only) if is_remote(path) else str(path)


_HELD_ROOT = []


def _held_root_store():
    """The zarr store class that keeps a store's root metadata as :data:`PENDING_ROOT`: no
    reader sees a store at the URL before :func:`url_output` publishes it."""
    if _HELD_ROOT:
        return _HELD_ROOT[0]
    from zarr.storage import WrapperStore

    def held(key):
        return PENDING_ROOT if key == ROOT_METADATA else key

    def shown(key):
        return ROOT_METADATA if key == PENDING_ROOT else key

    class HeldRootStore(WrapperStore):
        async def get(self, key, prototype, byte_range=None):
            return await self._store.get(held(key), prototype, byte_range)

        async def get_partial_values(self, prototype, key_ranges):
            return await self._store.get_partial_values(
                prototype, [(held(k), r) for k, r in key_ranges])

        async def exists(self, key):
            return await self._store.exists(held(key))

        async def set(self, key, value):
            await self._store.set(held(key), value)

        async def set_if_not_exists(self, key, value):
            return await self._store.set_if_not_exists(held(key), value)

        async def _set_many(self, values):
            await self._store._set_many([(held(k), v) for k, v in values])

        async def delete(self, key):
            await self._store.delete(held(key))

        async def list(self):
            async for key in self._store.list():
                yield shown(key)

        async def list_prefix(self, prefix):
            async for key in self._store.list_prefix(prefix):
                yield shown(key)

        async def list_dir(self, prefix):
            async for key in self._store.list_dir(prefix):
                yield shown(key) if not prefix.strip("/") else key

        async def _get_many(self, requests):
            for key, prototype, byte_range in requests:
                yield key, await self.get(key, prototype, byte_range)

    _HELD_ROOT.append(HeldRootStore)
    return HeldRootStore


def filesystem(path, options=None):
    """``(fsspec filesystem, root)`` of a URL (with ``options``) or a :class:`Location`;
    its listings are fresh (other processes write under the prefix)."""
    return _fs(path, options)


def _join(root, name):
    return root.rstrip("/") + "/" + name


def inside(path, name):
    """The folder ``name`` of the store at ``path``: a local path, or a :class:`Location`
    with ``path``'s options (a URL given as text, as a Location without any)."""
    if is_remote(path):
        url, options = _split(path)
        return Location(_join(url, name), options)
    return Path(path) / name


def scratch_beside(path, name):
    """Where a run writing the store ``path`` keeps its scratch ``name`` (``".blocked"``):
    a local folder beside it; for a store being written at a URL, a prefix under its own
    (:func:`inside`): the one place every worker of a cluster that shares nothing but the
    object store reaches, and removed with the output when the run fails. The run removes
    it (:func:`remove_tree`) before the output is finished."""
    if is_remote(path):
        return inside(path, name)
    p = Path(path)
    return p.with_name(p.name + name)


def remove_tree(path):
    """Remove the local folder (or file) ``path``, or every object under the URL (or
    :class:`Location`) ``path``; nothing there is no error."""
    if not is_remote(path):
        if os.path.isfile(path) or os.path.islink(path):
            os.unlink(path)
        else:
            shutil.rmtree(path, ignore_errors=True)
        return
    fs, root = _fs(path)
    _remove_prefix(fs, root)


def object_entries(path, names):
    """``[[key, size, version], ...]`` of the objects of the store at ``path`` (a URL or a
    :class:`Location`) that are ``names`` or lie under them, by key; ``version``: the
    object's ETag or modification time, what says that an object was written again."""
    fs, root = _fs(path)
    out = []
    for name in names:
        found = fs.find(_join(root, name), detail=True)
        for key, info in sorted(found.items()):
            version = (info.get("ETag") or info.get("LastModified") or info.get("mtime")
                       or info.get("created"))  # memory://
            out.append([key[len(root.rstrip("/")) + 1:], int(info.get("size") or 0),
                        str(version)])
    return out


def input_fingerprint(path):
    """What says that a raster (a file, or a tile store's ``elevation``) is unchanged: a hash
    of the size and modification time of each of its files (of a store at a URL, each
    object's size and version: :func:`object_entries`).

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "a.asc")
    >>> _ = open(p, "w").write("x")
    >>> input_fingerprint(p) == input_fingerprint(p)
    True
    """
    import hashlib
    if is_remote(path):
        entries = object_entries(path, ["zarr.json", "elevation"])
        return hashlib.sha256(json.dumps(entries).encode()).hexdigest()
    p = Path(path)
    if p.is_dir():
        files = [p / "zarr.json"] + sorted(f for f in (p / "elevation").rglob("*") if f.is_file())
    else:
        files = [p]
    entries = []
    for f in files:
        st = f.stat()
        entries.append([str(f.relative_to(p)) if p.is_dir() else f.name, st.st_size,
                        st.st_mtime_ns])
    return hashlib.sha256(json.dumps(entries).encode()).hexdigest()


def check_unchanged(result, what, source, seal):
    """:class:`InputError` when ``source``, the ``what`` (``"DEM"``, ``"weights"``) that the
    result at ``result`` was computed from, no longer has the :func:`input_fingerprint`
    ``seal`` recorded then (None: none was recorded): the input changed, not the result."""
    if seal is not None and input_fingerprint(source) != seal:
        raise InputError(f"{result}: its {what} {source} changed after this result was "
                         f"computed (its files differ): it needs the {what} it was computed "
                         "from")


def store_state(url, options=None):
    """``"store"`` when ``url`` holds a published store (its root metadata), ``"file"`` when
    it is an object (a file output: an upload appears whole), ``"partial"`` when it holds
    objects but no root metadata (a run that died while writing), else None. An
    unreachable store (no bucket, no credentials) is an :class:`InputError` naming it."""
    url, options = _split(url, options)
    fs, root = _fs(url, options)
    try:
        if fs.exists(_join(root, ROOT_METADATA)):
            return "store"
        if fs.isfile(root):
            return "file"
        if fs.exists(root) and fs.find(root, maxdepth=None):
            return "partial"
        return None
    except (OSError, PermissionError, ValueError) as e:
        raise InputError(f"{url}: cannot reach it: {_short(e)}") from None


def _short(e):
    return " ".join(str(e).split())[:200] or type(e).__name__


def _place(url):
    """``url`` as the place it names: its filesystem's own protocol (``s3a://`` and
    ``s3://`` are one bucket) and path, without a trailing slash.

    >>> _place("memory://b/x.zarr/")
    'memory:///b/x.zarr'
    """
    import fsspec
    url = str(url).rstrip("/")
    protocol, _ = fsspec.core.split_protocol(url)
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except (ImportError, ValueError):
        return url
    own = cls.protocol if isinstance(cls.protocol, str) else cls.protocol[0]
    return f"{own}://{cls._strip_protocol(url).rstrip('/')}"


def check_url_output(url, overwrite=False, inputs=(), options=None):
    """Refuse ``url`` as an output before any work: an input, inside one or holding one
    (under any of its filesystem's protocols), or a published store without ``overwrite``
    (:class:`~terrain.io.outputs.OutputExists`)."""
    target = _place(url)
    for given in inputs:
        if not isinstance(given, str) or not is_url(given):
            continue
        i = _place(given)
        if i == target:
            raise InputError(f"{url}: output is the input {given}")
        if i.startswith(target + "/") or target.startswith(i + "/"):
            raise InputError(f"{url}: output overlaps the input {given}")
    state = store_state(url, options)
    if state in ("store", "file") and not overwrite:
        raise OutputExists(f"{url}: output exists")
    _probe(url, options, beside=state == "file")


def _probe(url, options, beside=False):
    """Write and delete a probe object under ``url`` (``beside`` it: a file output there,
    to be replaced): a missing bucket or a read-only credential fails before the work."""
    fs, root = _fs(url, options)
    if beside:
        root = root.rstrip("/").rpartition("/")[0]
    probe = _join(root, f".terrain-probe-{uuid.uuid4().hex}")
    try:
        fs.pipe_file(probe, b"")
        fs.rm(probe)
    except (OSError, PermissionError, ValueError) as e:
        raise InputError(f"{url}: cannot write there: {_short(e)}") from None


#: seconds a lock object stays valid after its last refresh: past that its run is taken for
#: dead (killed with SIGKILL, its machine lost) and the lock is taken over (docs/scale.md)
LOCK_LEASE = 300
#: seconds between the refreshes of a held lock object (a few missed ones stay in the lease)
LOCK_HEARTBEAT = 30


def lock_url(url):
    """Where the lock object of the output ``url`` lies: ``.NAME.lock`` beside its prefix, as
    a local output's lock file (under the prefix it would make the prefix a partial, and be
    removed with it).

    >>> lock_url("s3://bucket/runs/dem.zarr")
    's3://bucket/runs/.dem.zarr.lock'
    """
    parent, _, name = url.rstrip("/").rpartition("/")
    return f"{parent}/.{name}.lock"


def _lock_doc(fs, path):
    """The lock object at ``path`` as a dict; None when there is none, ``{}`` when it is not
    terrain's (no heartbeat: stale)."""
    try:
        doc = json.loads(fs.cat_file(path))
    except FileNotFoundError:
        return None
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _stale(doc):
    """Why the run that holds the lock ``doc`` is taken for dead, or None while it may live:
    its heartbeat older than :data:`LOCK_LEASE`, or its process gone from this host."""
    try:
        age = time.time() - float(doc["heartbeat"])
    except (KeyError, TypeError, ValueError):
        return "a lock object that is not terrain's"
    if age > LOCK_LEASE:
        return f"its heartbeat stopped {age:.0f} s ago"
    pid = doc.get("pid")
    if doc.get("host") == socket.gethostname() and isinstance(pid, int) and pid != os.getpid():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return f"its process {pid} on this host is gone"
        except OSError:  # another user's process: alive
            pass
    return None


def _holder(doc):
    if not doc:
        return "a lock object that is not terrain's"
    try:
        age = f"{time.time() - float(doc['heartbeat']):.0f} s ago"
    except (KeyError, TypeError, ValueError):
        age = "at an unknown time"
    return f"host {doc.get('host')}, pid {doc.get('pid')}, refreshed {age}"


@contextlib.contextmanager
def hold_url_lock(target, options=None, *, key=None, notify=None):
    """Hold the lock object of the output ``target`` (a URL or a :class:`Location`) for one
    run (:func:`lock_url`); refuse when another run holds it, in one line naming the URL.

    The object is created only where none exists (``mode="create"``: S3's conditional put,
    ``If-None-Match: *``; an exclusive create in memory://; what fsspec gives elsewhere,
    there a check then a write), records the run (``key``, host, pid) and is refreshed by a
    thread every :data:`LOCK_HEARTBEAT` s; it is deleted when the block ends, however it
    ends. A lock whose heartbeat is older than :data:`LOCK_LEASE`, or whose process on this
    host is gone, is stale: taken over with a notice. Yields a callable that raises
    :class:`InputError` when another run took the lock over meanwhile (this run's heartbeat
    stalled past the lease): called before the output is published."""
    url, options = _split(target, options)
    fs, root = _fs(url, options)
    parent, _, name = root.rstrip("/").rpartition("/")
    if not parent.strip("/"):
        raise InputError(f"{url}: a store at the root of a bucket has no place for its lock "
                         "object beside it; name a prefix under the bucket")
    path, shown = f"{parent}/.{name}.lock", lock_url(url)
    token, started = uuid.uuid4().hex, time.time()

    def doc():
        return json.dumps({"run": key, "host": socket.gethostname(), "pid": os.getpid(),
                           "token": token, "started": started, "heartbeat": time.time()},
                          indent=1).encode()

    try:
        _take_lock(fs, path, doc, url, shown, _notify(notify))
    except InputError:
        raise
    except (OSError, PermissionError, ValueError) as e:
        raise InputError(f"{url}: cannot write there: {_short(e)}") from None
    stop, lost = threading.Event(), []
    beat = threading.Thread(target=_heartbeat, args=(fs, path, token, doc, stop, lost),
                            name="terrain-lock", daemon=True)
    beat.start()

    def still_held():
        if lost:
            raise InputError(f"{url}: another run took over this output's lock ({shown}) "
                             f"while this run's heartbeat stalled past {LOCK_LEASE} s; "
                             "not published")

    try:
        yield still_held
    finally:
        stop.set()
        beat.join()
        with contextlib.suppress(Exception):
            if (_lock_doc(fs, path) or {}).get("token") == token:
                fs.rm(path)


def _take_lock(fs, path, doc, url, shown, notify):
    """Create the lock object at ``path``; a stale one is removed and the create tried once
    more (two runs taking over one stale lock in the same moment are not told apart)."""
    for attempt in range(3):
        try:
            fs.pipe_file(path, doc(), mode="create")
            return
        except FileExistsError:
            pass
        held = _lock_doc(fs, path)
        if held is None:  # released since: try again
            continue
        why = _stale(held) if attempt == 0 else None
        if why is None:
            raise InputError(f"{url}: another terrain run is writing this output "
                             f"({shown}: {_holder(held)}; a lock not refreshed for "
                             f"{LOCK_LEASE} s is taken over)")
        notify(f"taking over the lock of {url} from a run that ended ({why}: "
               f"{_holder(held)})")
        with contextlib.suppress(FileNotFoundError):
            fs.rm(path)
    raise InputError(f"{url}: another terrain run is writing this output ({shown})")


def _heartbeat(fs, path, token, doc, stop, lost):
    """Refresh the lock object at ``path`` until ``stop``; a lock no longer this run's
    (taken over) ends the refreshes and is noted in ``lost``."""
    while not stop.wait(LOCK_HEARTBEAT):
        try:
            if (_lock_doc(fs, path) or {}).get("token") != token:
                lost.append(path)
                return
            fs.pipe_file(path, doc())
        except Exception:  # noqa: BLE001 - a failed refresh is tried again; the lease
            continue       # covers several


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


def _other_runs_only(fs, root, key):
    """Whether the partial under ``root`` holds checkpoints, none of them the run ``key``'s."""
    try:
        found = fs.find(_join(root, CHECKPOINT_DIR))
    except FileNotFoundError:
        return False
    keys = {k.split(f"/{CHECKPOINT_DIR}/", 1)[-1].split("/", 1)[0] for k in found
            if k.endswith(".npz")}
    return bool(keys) and key not in keys


def _make_room(fs, root, url, overwrite, options, notify, resume=False, key=None):
    """Before a store is written at ``url``: a store there unpublished (its root metadata
    deleted first) and removed with ``overwrite``, else refused; a dead run's partial
    removed with a notice, or kept with ``resume`` (the resumed run ``key`` decides what of
    it to reuse: ``pipelines._resume.prepare_resume``), refused when it holds only other
    runs' checkpoints (before it is said to be resumed)."""
    state = store_state(url, options)
    if state in ("store", "file") and not overwrite:
        raise OutputExists(f"{url}: output exists")
    if state == "file":
        fs.rm(root)
    elif state == "store":
        fs.rm(_join(root, ROOT_METADATA))  # unpublished before any object changes
        _remove_prefix(fs, root)
    elif state == "partial" and resume:
        if _other_runs_only(fs, root, key):
            raise OtherRunsPartial(f"{url}: the partial output there was left by a run with "
                                   "other options, another version of the input or other "
                                   "code of terrain, and is kept")
        notify(f"resuming from the partial output at {url}, left by an interrupted run")
    elif state == "partial":
        notify(f"removing the partial output a killed run left at {url}")
        _remove_prefix(fs, root)


def _notify(notify):
    return notify or (lambda m: print(f"terrain: {m}", file=sys.stderr))


def publish(local, url, overwrite=False, options=None, notify=None):
    """Upload the finished local store (or file) ``local`` to ``url``, root metadata last;
    a store there is replaced only with ``overwrite``, a dead run's partial with a notice."""
    fs, root = _fs(url, options)
    try:
        _make_room(fs, root, url, overwrite, options, _notify(notify))
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


@contextlib.contextmanager
def url_output(target, overwrite=False, *, inputs=(), key=None, resume=False, notify=None):
    """Yield the :class:`Location` (``writing``, ``key``) where the store for ``target`` (a
    URL or a :class:`Location`) is written, by this process or by a cluster's tasks, directly
    under its prefix; publish it when the block ends without an error: its arrays sealed
    (:func:`terrain.io.outputs.seal_store`'s inventory), its root metadata written last.

    Checked first as :func:`check_url_output`, then held by its lock object for the whole
    run (:func:`hold_url_lock`, ``key`` recorded in it); a store there goes only with
    ``overwrite`` (unpublished before the work starts), a dead run's partial with a notice,
    or is kept with ``resume`` (its checkpoints lie under the prefix). An error removes what
    was written, except one whose ``keep_partial`` is true (a lost cluster): the next run
    resumes that partial, or removes it."""
    url, options = _split(target, None)
    check_url_output(url, overwrite, [str(i) for i in inputs if is_remote(i)], options)
    fs, root = _fs(url, options)
    notify = _notify(notify)
    with hold_url_lock(url, options, key=key, notify=notify) as still_held:
        try:
            _make_room(fs, root, url, overwrite, options, notify, resume, key)
        except InputError:
            raise
        except (OSError, PermissionError, ValueError) as e:
            raise InputError(f"{url}: cannot write there: {_short(e)}") from None
        try:
            yield Location(url, options, writing=True, key=key)
        except BaseException as e:
            if not getattr(e, "keep_partial", False):
                with contextlib.suppress(Exception):
                    fs.invalidate_cache(root)  # written by other processes
                    _remove_prefix(fs, root)
            raise
        try:
            still_held()
            _publish_held_root(fs, root, url)
        except InputError:
            raise
        except (OSError, PermissionError, ValueError) as e:
            raise InputError(f"{url}: cannot write there: {_short(e)}") from None


def input_fingerprints(inputs):
    """``(input, fingerprint)`` of each input now (a local one that exists, or one at a URL):
    what :func:`output_at` holds against them when its block ends. A command takes them
    before it reads a grid's header, so that a file replaced between the header and the
    data is told as changed, not as malformed."""
    return [(i, _fingerprint_now(i)) for i in (i if is_remote(i) else Path(i) for i in inputs
                                               if i is not None)
            if is_remote(i) or i.exists()]


@contextlib.contextmanager
def output_at(target, overwrite=False, *, inputs=(), key=None, resume=False, companions=(),
              began=None):
    """Where a command writes ``target``: :func:`url_output` for a URL or a
    :class:`Location`, else :func:`terrain.io.outputs.atomic_output` (``key``: the run's key,
    its partial's name there, its checkpoints' folder at a URL; ``companions``: its local
    GeoTIFFs, which a store at a URL never has: those commands are staged,
    ``pipelines.staging.stage``).
    The block reads ``inputs`` under :func:`inputs_unchanged` (``began`` passed on): one
    that another command rewrites, replaces or removes while it runs is an
    :class:`InputError` before anything is published."""
    if is_remote(target):
        out = url_output(target, overwrite, inputs=inputs, key=key, resume=resume)
    else:
        from .outputs import atomic_output
        out = atomic_output(target, overwrite, inputs=[i for i in inputs if not is_remote(i)],
                            key=key, resume=resume, companions=companions)
    with out as tmp, inputs_unchanged(inputs, began, target):
        yield tmp


@contextlib.contextmanager
def inputs_unchanged(inputs, began=None, target=None):
    """A block that reads ``inputs`` (local ones, or stores at a URL: their objects'
    versions) and makes ``target`` (None: a report) from them. One that another command
    rewrites, replaces or removes while the block runs is an :class:`InputError` naming it
    when the block ends: the result would hold some of each (and record the new one's
    fingerprint). So is an error of the block (a parse error: the new file's rows read at
    the old header's offsets; a layer gone) raised while an input differs from ``began``
    (:func:`input_fingerprints` taken when the run began, before it read a header; an input
    not among them is taken as the block starts)."""
    seen = {str(p) for p, _ in began or ()}
    before = [*(began or ()), *input_fingerprints(i for i in inputs if str(i) not in seen)]
    try:
        yield
    except Exception as e:  # a layer gone is a KeyError, a FileNotFoundError, ...
        changed = _changed(before, target)
        if changed is None or getattr(e, "keep_partial", False):
            raise
        raise changed from None
    changed = _changed(before, target)
    if changed is not None:
        raise changed


def _changed(before, target):
    """The error of the first input whose fingerprint is no longer that of ``before``."""
    for path, seen in before:
        if _fingerprint_now(path) != seen:
            return InputError(f"{path}: changed while this run read it (written by another "
                              "command): " + ("" if target is None else f"{target} not written; ")
                              + "run it again")
    return None


def _fingerprint_now(path):
    """:func:`input_fingerprint` of an input, None where it is gone or no store."""
    try:
        return input_fingerprint(path)
    except (OSError, InputError):
        return None


def _publish_held_root(fs, root, url):
    """Seal the arrays of the store written under ``root`` (each one's inventory of shard
    objects, in its metadata and the consolidated copy), then publish its held root metadata
    as :data:`ROOT_METADATA`: the last object written."""
    from .outputs import INVENTORY_ATTR
    fs.invalidate_cache(root)  # written by other processes
    keys = _listed_keys(fs, root)  # one listing for every array of the store
    pending = _join(root, PENDING_ROOT)
    if PENDING_ROOT not in keys:
        raise InputError(f"{url}: the run wrote no store there")
    doc = json.loads(fs.cat_file(pending))
    consolidated = (doc.get("consolidated_metadata") or {}).get("metadata")
    for key in keys:
        if not key.endswith("/" + ROOT_METADATA):
            continue
        folder = key[:-len("/" + ROOT_METADATA)]
        meta = json.loads(fs.cat_file(_join(root, key)))
        inventory = _listed_inventory(meta, folder, keys)
        if inventory is None:
            continue
        meta.setdefault("attributes", {})[INVENTORY_ATTR] = inventory
        fs.pipe_file(_join(root, key), json_text(meta, indent=2).encode())
        if isinstance(consolidated, dict) and isinstance(consolidated.get(folder), dict):
            consolidated[folder].setdefault("attributes", {})[INVENTORY_ATTR] = inventory
    fs.pipe_file(_join(root, ROOT_METADATA), json_text(doc, indent=2).encode())  # published
    fs.rm(pending)


def _listed_keys(fs, root, under=None):
    """The keys of the objects under ``root`` (or its folder ``under``), relative to
    ``root``: one listing."""
    base = root.rstrip("/") + "/"
    return [k[len(base):] for k in fs.find(_join(root, under) if under else root)
            if k.startswith(base)]


def _listed_inventory(meta, folder, keys):
    """The inventory (:func:`terrain.io.outputs.inventory_of`) of the array in ``folder`` of a
    store, ``meta`` its metadata, from ``keys`` (a listing relative to the store's root, of
    the whole store or of the array alone); None for a group or where it writes none."""
    from .outputs import inventory_of
    if meta.get("node_type") != "array":
        return None
    shards = folder + "/c/"
    return inventory_of(meta, (k[len(shards):].split("/") for k in keys if k.startswith(shards)))


def url_inventory(path, name):
    """The inventory :func:`terrain.io.outputs.seal_store` would write now for the array
    ``name`` of the store at ``path`` (a URL or a :class:`Location`): what its shard objects
    are; None where it writes none."""
    fs, root = _fs(path)
    try:
        meta = json.loads(fs.cat_file(_join(_join(root, name), ROOT_METADATA)))
        keys = _listed_keys(fs, root, _join(name, "c"))
    except (OSError, ValueError):
        return None
    return _listed_inventory(meta, name, keys)
