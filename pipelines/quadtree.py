"""The Dask ``call`` for the quadtree walks of :mod:`terrain.tiles.quadtree`.

The library walks a :class:`~terrain.tiles.quadtree.QuadtreePlan` and hands each step to a
``call(fn, *args, key=(stage, i, j), nout=n)``. In memory the step runs at once; here it
becomes a task named ``(f"{prefix}-{stage}-{token}", i, j)``: one name per stage and
quadtree level, so the dashboard groups the tasks by stage, and keys are deterministic for
a given token. :class:`TaskGraph` writes each step straight into one task dict (not
``dask.delayed``, whose graph merges are quadratic in the walk's length); a step returning
``nout`` values gets one ``getitem`` task per value, so each value is freed once its
consumer ran; checkpointed stages are wrapped at construction, timed stages add their
tasks' wall time to :func:`stage_seconds`. Design: docs/mst.md, "Design notes".
"""

import operator
import threading
import time

from dask._task_spec import Task, TaskRef, parse_input
from dask.delayed import Delayed

from ._resume import checkpoint_at, checkpoint_folder, graph_dict, run_checkpointed
from .cluster import here_and_on_every_worker

__all__ = ["TaskGraph", "stage_seconds"]

_STAGE_LOCK = threading.Lock()
_STAGE_SECONDS = {}  # graph token -> {stage: task-seconds} (tasks of this process)


def _add_seconds(token, stage, seconds):
    with _STAGE_LOCK:
        stages = _STAGE_SECONDS.setdefault(token, {})
        stages[stage] = stages.get(stage, 0.0) + seconds


def _pop_seconds(token):
    with _STAGE_LOCK:
        return _STAGE_SECONDS.pop(token, {})


def stage_seconds(token):
    """Every process's task-seconds of the timed stages of graph ``token``, by stage (taken:
    a second call returns none of them)."""
    stages = {}
    for part in here_and_on_every_worker(_pop_seconds, token):
        for k, v in part.items():
            stages[k] = stages.get(k, 0.0) + v
    return stages


class _Timed:
    """A task function adding its wall time to ``stage`` of graph ``token``."""

    def __init__(self, fn, token, stage):
        self.fn, self.token, self.stage = fn, token, stage
        self.__name__ = getattr(fn, "__name__", stage)

    def __call__(self, *args):
        t0 = time.perf_counter()
        try:
            return self.fn(*args)
        finally:
            _add_seconds(self.token, self.stage, time.perf_counter() - t0)


class _Ref:
    """A step's output inside a :class:`TaskGraph` (``key`` is its task)."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key


class TaskGraph:
    """A task dict built by the walks: ``graph.call`` is their ``call``.

    Parameters
    ----------
    prefix, token : str
        Task names are ``f"{prefix}-{stage}-{token}"``.
    partial : path or terrain.io.remote.Location, optional
        The partial output: steps whose key name starts with one of ``checkpoint``'s names
        keep their result in its checkpoint folder (:func:`pipelines._resume.checkpoint_folder`).
    checkpoint : tuple of str
        Key names (``f"{prefix}-{stage}"`` and other graphs' names) that get checkpoints.
    timed : tuple of str
        Stages (names or their starts) of :meth:`call` whose tasks add their wall time to
        :func:`stage_seconds` of ``token``, under the stage's name less its quadtree level
        (``merge3`` counts as ``merge``). A run that times its stages takes them once it is
        done: the table holds them until then.

    Examples
    --------
    >>> from terrain.tiles.quadtree import QuadtreePlan, walk_up
    >>> plan = QuadtreePlan.build((4, 4), 2, 1)
    >>> graph = TaskGraph("count", "t")
    >>> root, _ = walk_up(plan, lambda k, i, j: (1, None), lambda k, i, j, *c: (sum(
    ...     x for x in c if x is not None), None), call=graph.call)
    >>> total = graph.delayed(root)
    >>> total.compute(scheduler="sync"), ("count-merge1-t", 0, 0) in graph.tasks
    (4, True)
    """

    def __init__(self, prefix, token, partial=None, checkpoint=(), timed=()):
        self.prefix, self.token = prefix, token
        self.tasks = {}
        self._folder = checkpoint_folder(partial) if partial is not None else None
        self._checkpoint = tuple(checkpoint)
        self._timed = tuple(timed)

    def _arg(self, value):
        """``value`` as a task argument: references become ``TaskRef``; a Delayed's tasks
        join the dict."""
        if isinstance(value, _Ref):
            return TaskRef(value.key)
        if isinstance(value, Delayed):
            self.tasks.update(graph_dict(value))
            return TaskRef(value.key)
        if isinstance(value, (list, tuple)) and any(isinstance(v, (_Ref, Delayed, list, tuple))
                                                    for v in value):
            return parse_input(type(value)(self._arg(v) for v in value))
        return value

    def add(self, name, index, fn, *args):
        """Add the task ``(name, *index)`` running ``fn(*args)``; return its reference."""
        key = (name, *index) if index else name
        args = [self._arg(a) for a in args]
        if self._folder is not None and name.startswith(self._checkpoint):
            self.tasks[key] = Task(key, run_checkpointed, checkpoint_at(self._folder, key),
                                   fn, *args)
        else:
            self.tasks[key] = Task(key, fn, *args)
        return _Ref(key)

    def call(self, fn, *args, key, nout=None):
        """The walks' ``call``: the step as task ``(f"{prefix}-{stage}-{token}", *index)``.

        Returns a reference, or ``nout`` references to its values (``getitem`` tasks).
        """
        stage, *index = key
        name = f"{self.prefix}-{stage}-{self.token}"
        if self._timed and stage.startswith(self._timed):
            fn = _Timed(fn, self.token, stage.rstrip("0123456789"))
        ref = self.add(name, index, fn, *args)
        if nout is None:
            return ref
        part = f"getitem-{self.prefix}-{stage}-{self.token}"
        return tuple(self.add(part, (*index, q), operator.getitem, ref, q) for q in range(nout))

    def delayed(self, ref):
        """A ``Delayed`` computing ``ref`` from the whole dict (no copy of it)."""
        return Delayed(ref.key, self.tasks)

