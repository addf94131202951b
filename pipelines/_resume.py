"""Checkpoints inside the partial output, so that ``--resume`` finishes a killed run.

:func:`checkpointed` rewrites a built task graph: every task whose name starts with one of
the given prefixes runs through :func:`run_checkpointed`, which returns the task's result
from ``PARTIAL/.terrain-checkpoints/KEY.npz`` when that file exists, else runs the task and
writes the file (beside, then renamed) *after* the task's own writes into the store. An
output at a URL (a :class:`terrain.io.remote.Location`) is its own partial: its checkpoints
are objects under ``PREFIX/.terrain-checkpoints/RUNKEY/``, the run key of the run that
writes them (``Location.key``). Tasks are idempotent (whole shards rewritten); keys are
deterministic (:func:`run_key`), so a rerun finds the same files. Checkpoints are data only
(:func:`save_result`: an ``.npz`` read with ``allow_pickle=False``, a JSON ``__tree__``); one
that does not decode is absent. Design: docs/scale.md, "Resume".
"""

import base64
import dataclasses
import hashlib
import importlib
import io
import json
import os
import re
import shutil
import uuid
import warnings
import zipfile
from pathlib import Path

import numpy as np

from terrain.io.outputs import (CHECKPOINT_DIR, code_identity, input_identity, partial_path,
                                write_path)
from terrain.io.remote import (Location, filesystem, inside, is_remote, location,
                               object_entries, remove_tree)

__all__ = ["CHECKPOINT_DIR", "checkpointed", "drop_checkpoints", "prepare_resume", "run_key",
           "data_identity", "graph_dict", "run_checkpointed", "checkpoint_file", "save_result",
           "load_result", "NotCheckpointable", "checkpoint_folder", "kept_checkpoints",
           "checkpoint_at", "drop_stale_checkpoints"]

# zarr warns of every folder in a group that is no node of it: listing a partial output's
# arrays (its checks, a resumed run's layers) would warn of the checkpoints' one
warnings.filterwarnings("ignore", message=f"Object at {re.escape(CHECKPOINT_DIR)} is not "
                        "recognized as a component of a Zarr hierarchy")


def run_key(command, inputs, *params):
    """Deterministic hash of a run: the command, its inputs' identity and its parameters.

    Names the partial output (``.OUT.partial-KEY``) and so every task key built on it.

    Examples
    --------
    >>> run_key("ingest", ["data/sample.asc"], 512) == run_key("ingest", ["data/sample.asc"], 512)
    True
    """
    text = repr((command, [input_identity(p) for p in inputs], [repr(p) for p in params],
                 code_identity()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def data_identity(inp):
    """A tile store's files' paths, sizes and modification times (at a URL: its objects'
    keys, sizes and versions, one listing), hashed; None for a file."""
    if is_remote(inp):
        return hashlib.sha256(json.dumps(object_entries(inp, [""])).encode()).hexdigest()
    if not inp.is_dir():
        return None
    h = hashlib.sha256()
    for root, dirs, files in os.walk(inp):
        dirs.sort()
        for name in sorted(files):
            p = os.path.join(root, name)
            st = os.stat(p)
            h.update(os.fsencode(os.path.relpath(p, inp)))  # str.encode refuses a non-UTF-8 name
            h.update(f"\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _key_name(key):
    return key[0] if isinstance(key, tuple) else str(key)


def checkpoint_file(key):
    """The checkpoint's file name of task ``key`` (``('a', 1, 2)`` -> ``a.1.2.npz``)."""
    parts = [str(p) for p in (key if isinstance(key, tuple) else (key,))]
    return ".".join(parts) + ".npz"


def checkpoint_folder(partial):
    """Where the checkpoints of the partial output ``partial`` lie: its local folder
    ``.terrain-checkpoints``, or for a store being written at a URL (a
    :class:`~terrain.io.remote.Location`) the prefix ``.terrain-checkpoints/RUNKEY`` under it
    (a :class:`~terrain.io.remote.Location`): a partial at a URL has no name of its own to
    say which run wrote it."""
    if is_remote(partial):
        key = getattr(partial, "key", None)
        return inside(partial, CHECKPOINT_DIR + (f"/{key}" if key else ""))
    return Path(partial) / CHECKPOINT_DIR


def checkpoint_at(folder, key):
    """The checkpoint of task ``key`` in ``folder`` (:func:`checkpoint_folder`): a local path
    as text, or a :class:`~terrain.io.remote.Location` (what a task on any worker opens)."""
    if is_remote(folder):
        return inside(folder, checkpoint_file(key))
    return str(Path(folder) / checkpoint_file(key))


def steps_kept(target, key):
    """Whether the partial output that a killed run of ``key`` left for the store ``target``
    holds checkpoints: a resumed run finishes them on the route that wrote them (the task
    graph's). A run killed on an in-core route, or before its first step, left none: a
    resumed run then takes the route a fresh one would, and gives its bits (a tiled flow's
    weighted sums are added in another order than in core's)."""
    if is_remote(target):
        at = location(target)
        partial = Location(at.url, at.options, writing=True, key=key)
    else:
        partial = partial_path(write_path(target), key)
    return bool(kept_checkpoints(checkpoint_folder(partial)))


def kept_checkpoints(folder):
    """The file names of the checkpoints in ``folder`` now (one listing at a URL)."""
    if is_remote(folder):
        fs, root = filesystem(folder)
        try:
            return {k.rsplit("/", 1)[-1] for k in fs.find(root)}
        except FileNotFoundError:
            return set()
    folder = Path(folder)
    return set(os.listdir(folder)) if folder.is_dir() else set()


def _versions(folder):
    """The checkpoints in ``folder`` now: file name -> what writing it again changes (a
    local file's inode and modification time, an object's listing entry)."""
    if is_remote(folder):
        fs, root = filesystem(folder)
        try:
            found = fs.find(root, detail=True)
        except FileNotFoundError:
            return {}
        return {k.rsplit("/", 1)[-1]: tuple(str(info.get(f)) for f in
                                            ("size", "ETag", "LastModified", "created"))
                for k, info in found.items() if k.endswith(".npz")}
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {e.name: (e.stat().st_ino, e.stat().st_mtime_ns, e.stat().st_size)
            for e in os.scandir(folder) if e.name.endswith(".npz")}


class NotCheckpointable(TypeError):
    """A task result holding a type :func:`save_result` does not write."""


_TREE = "__tree__"
# dataclasses rebuilt from a checkpoint: those of terrain's own modules, by a plain name
_CLASS = re.compile(r"terrain(\.[A-Za-z_]\w*)+:[A-Za-z_]\w*")


def _encode(value, arrays):
    """``value`` as JSON, its arrays added to ``arrays`` (name -> array)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and type(value) in (int, float):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.hasobject:
            raise NotCheckpointable(f"array of {arr.dtype}")
        name = f"a{len(arrays)}"
        arrays[name] = arr
        return {"a" if isinstance(value, np.ndarray) else "s": name}
    if isinstance(value, bytes):
        return {"b": base64.b64encode(value).decode()}
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {"t": [_encode(v, arrays) for v in value]}
    if isinstance(value, list):
        return {"l": [_encode(v, arrays) for v in value]}
    if isinstance(value, dict) and type(value) is dict:
        return {"d": [[_encode(k, arrays), _encode(v, arrays)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        name = f"{cls.__module__}:{cls.__qualname__}"
        if not _CLASS.fullmatch(name):
            raise NotCheckpointable(name)
        return {"c": name, "f": {f.name: _encode(getattr(value, f.name), arrays)
                                 for f in dataclasses.fields(cls)}}
    raise NotCheckpointable(type(value).__qualname__)


def _decode(tree, arrays):
    if not isinstance(tree, dict):
        return tree
    if "c" in tree:
        tag, body = "c", tree
    elif len(tree) == 1:
        (tag, body), = tree.items()
    else:
        raise ValueError(f"unknown node {sorted(tree)}")
    if tag == "a":
        return arrays[body]
    if tag == "s":
        return arrays[body][()]
    if tag == "b":
        return base64.b64decode(body)
    if tag == "t":
        return tuple(_decode(v, arrays) for v in body)
    if tag == "l":
        return [_decode(v, arrays) for v in body]
    if tag == "d":
        return {_hashable(_decode(k, arrays)): _decode(v, arrays) for k, v in body}
    if tag == "c":
        name = body["c"]
        if not _CLASS.fullmatch(name):
            raise ValueError(f"class {name!r}")
        module, qualname = name.split(":")
        cls = getattr(importlib.import_module(module), qualname)
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise ValueError(f"{name} is not a dataclass")
        fields = {f.name for f in dataclasses.fields(cls)}
        if set(body["f"]) != fields:
            raise ValueError(f"{name}: fields {sorted(body['f'])}")
        obj = object.__new__(cls)  # no constructor runs; frozen dataclasses too
        for key, v in body["f"].items():
            object.__setattr__(obj, key, _decode(v, arrays))
        return obj
    raise ValueError(f"unknown tag {tag!r}")


def _hashable(key):
    if isinstance(key, list):
        return tuple(_hashable(k) for k in key)
    return key


def save_result(path, value):
    """Write ``value`` to ``path`` (or a binary file object) as a data-only checkpoint (an
    ``.npz`` without pickles, deflated at level 1: an 8192² tiled fill's checkpoints take
    8.0 MB instead of 26 in 0.36 CPU s, where ``np.savez_compressed``'s level 6 took 1.5 s
    for 7.6 MB); :class:`NotCheckpointable` for a type it does not hold.

    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "c.npz"
    >>> save_result(p, {"n": 3, ("a", 1): (np.arange(3), np.float32(2.5), None)})
    >>> load_result(p)
    {'n': 3, ('a', 1): (array([0, 1, 2]), np.float32(2.5), None)}"""
    arrays = {}
    tree = _encode(value, arrays)
    arrays[_TREE] = np.frombuffer(json.dumps(tree).encode(), np.uint8)
    if hasattr(path, "write"):
        _write_npz(path, arrays)
        return
    with open(path, "wb") as f:
        _write_npz(f, arrays)


def _write_npz(file, arrays):
    """``arrays`` as the ``.npz`` ``np.load`` reads, each member deflated at level 1."""
    with zipfile.ZipFile(file, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        for name, arr in arrays.items():
            with z.open(f"{name}.npy", "w", force_zip64=True) as out:
                np.lib.format.write_array(out, np.asanyarray(arr), allow_pickle=False)


def load_result(path):
    """The value :func:`save_result` wrote to ``path`` (or a binary file object); never
    unpickles (``ValueError`` for anything that is not such a checkpoint)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if not isinstance(z, np.lib.npyio.NpzFile) or _TREE not in z.files:
                raise ValueError(f"{path}: not a checkpoint")
            arrays = {name: z[name] for name in z.files}
        tree = json.loads(arrays.pop(_TREE).tobytes().decode())
        return _decode(tree, arrays)
    except (OSError, KeyError, TypeError, AttributeError, ImportError, zipfile.BadZipFile,
            UnicodeDecodeError, EOFError, RecursionError) as e:
        raise ValueError(f"{path}: not a checkpoint ({e})") from None


def run_checkpointed(path, func, *args, **kwargs):
    """``func(*args, **kwargs)``, or its result kept at ``path`` (a local path, or a
    :class:`~terrain.io.remote.Location` of an object) by an earlier run (one that does not
    decode is ignored: the task, idempotent, runs again; :func:`drop_stale_checkpoints`
    drops the later tasks' checkpoints first)."""
    if is_remote(path):
        return _run_checkpointed_at_url(path, func, args, kwargs)
    path = Path(path)
    if path.is_file():
        try:
            return load_result(path)
        except ValueError:
            pass
    result = func(*args, **kwargs)
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        save_result(tmp, result)
    except NotCheckpointable:  # returned, not kept: a resumed run redoes this task
        tmp.unlink(missing_ok=True)
        _ran_marker(path).touch()
        return result
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return result


def _ran_marker(path):
    """The file saying that the task of checkpoint ``path`` ran, its result not kept."""
    return path.with_suffix(".ran")


def _sound(path, present):
    """Whether the checkpoint ``path`` (local) is whole (every member's CRC checked), or
    absent with its task marked as run; ``present``: the folder's file names."""
    if path.name not in present:
        return _ran_marker(path).name in present
    try:
        with zipfile.ZipFile(path) as z:
            return f"{_TREE}.npy" in z.namelist() and z.testzip() is None
    except (OSError, zipfile.BadZipFile, EOFError, ValueError):
        return False


def drop_stale_checkpoints(tasks):
    """Before a graph runs: remove the checkpoints of the tasks that depend on a checkpointed
    task whose checkpoint is damaged (a power cut's empty or truncated file) or gone while
    later ones are kept. That task runs again and rewrites its shards, which the later
    tasks had rewritten after it: kept, their checkpoints would skip them, and the output
    would mix both (a resumed fill published wrong levels, or crashed). ``tasks``: the
    graph's ``key -> Task``. Returns how many were removed; local checkpoints only (an
    object store writes an object whole)."""
    from dask._task_spec import Task

    kept = {key: Path(task.args[0]) for key, task in tasks.items()
            if isinstance(task, Task) and task.func is run_checkpointed
            and isinstance(task.args[0], (str, Path))}
    folders = {p.parent for p in kept.values()}
    present = set().union(*(kept_checkpoints(f) for f in folders)) if folders else set()
    if not any(p.name in present for p in kept.values()):
        return 0  # nothing kept yet: a fresh run
    unsound = [key for key, p in kept.items() if not _sound(p, present)]
    later = {}
    for key, task in tasks.items():
        for dep in getattr(task, "dependencies", ()):
            later.setdefault(dep, []).append(key)
    stale, todo = set(), list(unsound)
    while todo:
        for key in later.get(todo.pop(), ()):
            if key not in stale:
                stale.add(key)
                todo.append(key)
    removed = 0
    for key in stale & kept.keys():
        for f in (kept[key], _ran_marker(kept[key])):
            if f.name in present:
                f.unlink(missing_ok=True)
                removed += f.suffix == ".npz"
    return removed


def _run_checkpointed_at_url(location, func, args, kwargs):
    """:func:`run_checkpointed` with the checkpoint an object at a URL."""
    fs, key = filesystem(location)
    try:
        return load_result(io.BytesIO(fs.cat_file(key)))
    except (FileNotFoundError, ValueError):
        pass
    result = func(*args, **kwargs)
    buffer = io.BytesIO()
    try:
        save_result(buffer, result)
    except NotCheckpointable:  # returned, not kept: a resumed run redoes this task
        return result
    # one PUT writes an object whole or not at all (an object store has no torn objects
    # and no rename): no copy beside it first, as a local checkpoint has
    fs.pipe_file(key, buffer.getvalue())
    return result


def graph_dict(delayed):
    """The tasks of a Delayed as one dict ``key -> Task``, from the layers' own mappings
    (``dict(HighLevelGraph)`` looks every key up through the layers: far slower)."""
    graph = delayed.__dask_graph__()
    layers = getattr(graph, "layers", None)
    if layers and all(hasattr(layer, "mapping") for layer in layers.values()):
        out = {}
        for layer in layers.values():
            out.update(layer.mapping)
        return out
    return dict(graph)


def checkpointed(delayed, partial, prefixes):
    """``delayed`` with checkpoints for the named tasks.

    Parameters
    ----------
    delayed : dask.delayed.Delayed
    partial : Path or terrain.io.remote.Location
        The partial output (checkpoints go in :func:`checkpoint_folder`): a local directory,
        or the store being written at a URL.
    prefixes : tuple of str
        Task names (the key's name part) that get a checkpoint.

    Returns
    -------
    Delayed
        The rewritten graph (a task whose checkpoint exists returns it and does not run
        again: :func:`prepare_resume` counts them).
    """
    from dask._task_spec import Task  # here, not at the top: run_key's callers need no Dask
    from dask.delayed import Delayed

    folder = checkpoint_folder(partial)
    graph = graph_dict(delayed)
    rewritten = False
    for key, task in list(graph.items()):
        if not isinstance(task, Task) or not _key_name(key).startswith(tuple(prefixes)):
            continue
        if task.func is run_checkpointed:  # wrapped at construction (pipelines.quadtree)
            continue
        graph[key] = Task(key, run_checkpointed, checkpoint_at(folder, key), task.func,
                          *task.args, **task.kwargs)
        rewritten = True
    # a graph wrapped at construction is returned as it is (with its annotations)
    return Delayed(delayed.key, graph) if rewritten else delayed


def prepare_resume(partial):
    """Before a resumed run: drop a partial holding no checkpoint (a run killed before its
    first; one at a URL holding only other run keys' was refused before it was resumed:
    :func:`terrain.io.remote.url_output`), and remove the half-written files of writers the
    kill stopped (an object store has none).
    Returns the checkpoints kept (empty when none), which :func:`drop_checkpoints` compares
    with those the run ends with."""
    from terrain.tiles import sweep_partial_files
    kept = _versions(checkpoint_folder(partial))
    if kept:
        if not is_remote(partial):
            sweep_partial_files(Path(partial))
        return kept
    remove_tree(partial)  # a partial without checkpoints
    return {}


def drop_checkpoints(partial, kept=None):
    """Remove the checkpoints from a finished partial output (before its rename, or before
    it is published at a URL: every run key's), and any half-written shard file a lost
    worker left (its task ran again elsewhere). Returns how many of the checkpoints
    ``kept`` (:func:`prepare_resume`'s) are there as they were: the tasks whose results the
    run took from them (a summary's ``reused_tasks``; a task that ran again, its
    checkpoint damaged or made stale, wrote its own anew)."""
    from terrain.tiles import sweep_partial_files
    now = _versions(checkpoint_folder(partial)) if kept else {}
    reused = sum(kept[name] == version for name, version in now.items() if name in kept)
    if is_remote(partial):
        remove_tree(inside(partial, CHECKPOINT_DIR))
        return reused
    shutil.rmtree(Path(partial) / CHECKPOINT_DIR, ignore_errors=True)
    if Path(partial).is_dir():
        sweep_partial_files(partial)
    return reused

