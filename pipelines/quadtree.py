"""The Dask ``call`` for the quadtree walks of :mod:`terrain.tiles.quadtree`.

The library walks a :class:`~terrain.tiles.quadtree.QuadtreePlan` and hands each step to a
``call(fn, *args, key=(stage, i, j), nout=n)``. In memory the step runs at once; here it
becomes a ``dask.delayed`` task named ``(f"{prefix}-{stage}-{token}", i, j)``: one name per
stage and quadtree level, so the dashboard groups the tasks by stage, and keys are
deterministic for a given token.
"""

import dask

__all__ = ["delayed_call"]


def delayed_call(prefix, token):
    """A ``call`` for :func:`~terrain.tiles.quadtree.walk_up` / ``walk_down`` building tasks.

    >>> from terrain.tiles.quadtree import QuadtreePlan, walk_up
    >>> plan = QuadtreePlan.build((4, 4), 2, 1)
    >>> root, _ = walk_up(plan, lambda k, i, j: (1, None), lambda k, i, j, *c: (sum(
    ...     x for x in c if x is not None), None), call=delayed_call("count", "t"))
    >>> root.compute(), ("count-merge1-t", 0, 0) in dict(root.__dask_graph__())
    (4, True)
    """
    def call(fn, *args, key, nout=None):
        stage, *index = key
        name = (f"{prefix}-{stage}-{token}", *index)
        return dask.delayed(fn, nout=nout, pure=False)(*args, dask_key_name=name)
    return call
