"""The quadtree plan and walk: coverage, order, and the same results run now or by Dask."""

import numpy as np
import pytest

from terrain.tiles.quadtree import QuadtreePlan, walk_down, walk_up


@pytest.mark.parametrize("shape,tile,group", [((5, 7), 2, 1), ((33, 70), 4, 2), ((64, 64), 8, 4),
                                              ((1, 1), 2, 8), ((100, 9), 2, 16)])
def test_groups_partition_the_grid_and_walks_visit_children_first(shape, tile, group):
    plan = QuadtreePlan.build(shape, tile, group)
    cover = np.zeros(shape, int)
    for (i, j) in plan.groups:
        r0, r1, c0, c1 = plan.window(plan.group_level, i, j)
        cover[r0:r1, c0:c1] += 1
    assert (cover == 1).all()
    seen = []

    def leaf(k, i, j):
        seen.append((k, i, j))
        r0, r1, c0, c1 = plan.window(k, i, j)
        return (r1 - r0) * (c1 - c0), None

    def merge(k, i, j, *kids):
        for c, kid in zip(plan.children(k, i, j), kids):
            assert (c is None) == (kid is None)
            if c is not None:
                assert (k - 1,) + c in seen
        seen.append((k, i, j))
        r0, r1, c0, c1 = plan.window(k, i, j)
        total = sum(x for x in kids if x is not None)
        assert total == (r1 - r0) * (c1 - c0)
        return total, None

    root, rest = walk_up(plan, leaf, merge)
    assert root == shape[0] * shape[1]
    assert seen[-1] == plan.root and set(rest) == set(seen)
    order = []

    def split(k, i, j, incoming):
        order.append((k, i, j))
        assert (incoming is None) == ((k, i, j) == plan.root)
        return 4 * ((k, i, j),)

    def apply(k, i, j, incoming):
        parent = None if (k, i, j) == plan.root else incoming
        return parent

    _, leaves = walk_down(plan, split, apply)
    assert order == sorted(order, key=lambda n: -n[0])
    for (k, i, j), parent in leaves.items():
        if parent is not None:
            assert parent[0] == k + 1 and (i, j) in plan.children(*parent)


def _leaf(k, i, j):  # the walks' test steps: values that say which steps made them
    return np.int64(100 * i + j), f"{k}/{i}/{j}"


def _merge(k, i, j, *kids):
    return sum(int(x) * (q + 1) for q, x in enumerate(kids) if x is not None), f"{k}/{i}/{j}"


def test_the_task_graph_walk_equals_the_direct_walk_both_ways(tmp_path):
    dask = pytest.importorskip("dask")
    from pipelines._resume import CHECKPOINT_DIR, prepare_resume
    from pipelines.quadtree import TaskGraph

    plan = QuadtreePlan.build((45, 30), 4, 2)

    def split(k, i, j, incoming, label):
        return 4 * ((incoming or ()) + (label,),) + (label,)

    def receive(k, i, j, incoming, label):
        return (label, incoming)

    up_direct, rest_direct = walk_up(plan, _leaf, _merge)
    down_direct = walk_down(plan, split, receive, extra=rest_direct, node_nout=5)
    for partial in (None, tmp_path):
        graph = TaskGraph("t", "x", partial, ("t-leaf", "t-apply"))
        up, rest = walk_up(plan, _leaf, _merge, call=graph.call)
        node_rest, leaves = walk_down(plan, split, receive, call=graph.call, extra=rest,
                                      node_nout=5)
        refs = [up, [list(r) for r in node_rest.values()], list(leaves.values())]
        result = dask.compute(graph.delayed(graph.add("t-all", (), lambda *a: a, *refs)),
                              scheduler="sync")[0]
        assert result[0] == up_direct
        assert result[1] == [list(r) for r in down_direct[0].values()]
        assert result[2] == list(down_direct[1].values())
    # the checkpoints were written as the tasks ran: a resumed run counts them, and its
    # checkpointed steps return them instead of running
    assert len(list((tmp_path / CHECKPOINT_DIR).glob("*.npz"))) == 2 * len(plan.groups)
    assert len(prepare_resume(tmp_path)) == 2 * len(plan.groups)

    def leaf_again(*_):
        raise AssertionError("a checkpointed leaf ran again")

    again = TaskGraph("t", "x", tmp_path, ("t-leaf", "t-apply"))
    up, _ = walk_up(plan, leaf_again, _merge, call=again.call)
    assert dask.compute(again.delayed(up), scheduler="sync")[0] == up_direct
