"""Checkpoints inside the partial output, so that ``--resume`` finishes a killed run.

Dask strategy
-------------
:func:`checkpointed` rewrites a built task graph: every task whose name starts with one
of the given prefixes runs through :func:`run_checkpointed`, which returns the task's
result from ``PARTIAL/.terrain-checkpoints/KEY.pkl`` when that file exists, and otherwise
runs the task and writes the file (beside, then renamed: a checkpoint is whole or absent)
*after* the task's own writes into the store. Big graphs wrap their tasks at construction
instead (:class:`pipelines.quadtree.TaskGraph`); :func:`checkpointed` then only counts them. So a checkpoint means "this task's data is in
the store and here is what it returned"; a task killed half-way has none and runs again.
Tasks are idempotent (a band or shard task rewrites whole shards; the MST write task sets
and clears the same bits), which is also what makes Dask's retries after a lost worker safe.

Task keys are deterministic (hash of the inputs' identity and the parameters, see
:func:`terrain.io.outputs.input_identity`), and so is the partial's name, so a rerun with the
same inputs and options builds the same keys and finds the same files. Checkpoints are
removed (:func:`drop_checkpoints`) before the partial is renamed into place.

Why not Dask's own persistence: results held by a cluster die with it; graphchain-like
caches are keyed on code and data we do not control. The files here are a few per shard.
"""

import hashlib
import os
import pickle
import shutil
import uuid
from pathlib import Path

from terrain.io.outputs import input_identity

__all__ = ["CHECKPOINT_DIR", "checkpointed", "drop_checkpoints", "prepare_resume", "run_key",
           "graph_dict", "run_checkpointed", "checkpoint_file"]

CHECKPOINT_DIR = ".terrain-checkpoints"


def run_key(command, inputs, *params):
    """Deterministic hash of a run: the command, its inputs' identity and its parameters.

    Names the partial output (``.OUT.partial-KEY``) and so every task key built on it.

    Examples
    --------
    >>> run_key("ingest", ["data/sample.asc"], 512) == run_key("ingest", ["data/sample.asc"], 512)
    True
    """
    text = repr((command, [input_identity(p) for p in inputs], [repr(p) for p in params]))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _key_name(key):
    return key[0] if isinstance(key, tuple) else str(key)


def checkpoint_file(key):
    """The checkpoint's file name of task ``key`` (``('a', 1, 2)`` -> ``a.1.2.pkl``)."""
    parts = [str(p) for p in (key if isinstance(key, tuple) else (key,))]
    return ".".join(parts) + ".pkl"


def run_checkpointed(path, func, *args, **kwargs):
    """``func(*args, **kwargs)``, or its result kept at ``path`` by an earlier run."""
    path = Path(path)
    if path.is_file():
        with open(path, "rb") as f:
            return pickle.load(f)
    result = func(*args, **kwargs)
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "wb") as f:
        pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)
    return result


def graph_dict(delayed):
    """The tasks of a Delayed as one dict ``key -> Task``.

    Merges the layers' own mappings: ``dict(HighLevelGraph)`` looks every key up through
    the layers and culls, 50 times slower (9 s for the 7559 tasks of a Neuse-size MST).
    """
    graph = delayed.__dask_graph__()
    layers = getattr(graph, "layers", None)
    if layers and all(hasattr(layer, "mapping") for layer in layers.values()):
        out = {}
        for layer in layers.values():
            out.update(layer.mapping)
        return out
    return dict(graph)


def checkpointed(delayed, partial, prefixes):
    """Return ``(delayed', reused)``: ``delayed`` with checkpoints for the named tasks.

    Parameters
    ----------
    delayed : dask.delayed.Delayed
    partial : Path
        The partial output directory (checkpoints go in its ``.terrain-checkpoints``).
    prefixes : tuple of str
        Task names (the key's name part) that get a checkpoint.

    Returns
    -------
    (Delayed, int)
        The rewritten graph and how many of its tasks already have a checkpoint (they will
        not run again).
    """
    from dask._task_spec import Task  # here, not at the top: run_key's callers need no Dask
    from dask.delayed import Delayed

    folder = Path(partial) / CHECKPOINT_DIR
    graph = graph_dict(delayed)
    reused = 0
    rewritten = False
    for key, task in list(graph.items()):
        if not isinstance(task, Task) or not _key_name(key).startswith(tuple(prefixes)):
            continue
        if task.func is run_checkpointed:  # wrapped at construction (pipelines.quadtree)
            reused += Path(task.args[0]).is_file()
            continue
        path = folder / checkpoint_file(key)
        reused += path.is_file()
        graph[key] = Task(key, run_checkpointed, str(path), task.func, *task.args,
                          **task.kwargs)
        rewritten = True
    # a graph wrapped at construction is returned as it is (with its annotations)
    return (Delayed(delayed.key, graph) if rewritten else delayed), reused


def prepare_resume(partial):
    """Before a resumed run: drop a partial holding no checkpoint (nothing to reuse, and a
    half-created store would stop the run). Returns True when something is reused."""
    partial = Path(partial)
    folder = partial / CHECKPOINT_DIR
    if folder.is_dir() and any(folder.glob("*.pkl")):
        return True
    if partial.is_dir():
        shutil.rmtree(partial, ignore_errors=True)
    elif partial.exists():
        partial.unlink()
    return False


def drop_checkpoints(partial):
    """Remove the checkpoints from a finished partial output (before its rename)."""
    shutil.rmtree(Path(partial) / CHECKPOINT_DIR, ignore_errors=True)
