"""D8 (and D4) flow directions with flats resolved, and flow accumulation: exact, in core or
tiled through the quadtree walk, on the CPU (``_flow_cpu.py``) or the GPU (``_flow.cu``),
the same bits.

Directions are ESRI's D8 codes (1 E, 2 SE, ... 128 NE; 0 an outlet; 255 nodata) on a
*filled* DEM: steepest drop, ties in code order; flats routed as Garbrecht & Martz in
Barnes et al.'s form. Accumulation sums each cell's inflows in code order once all are
known (Kahn). Tiled runs iterate the flats' BFS across groups and run an up/down pass on
the quadtree walk. docs/hydrology.md (flow sections) has the rules and reasons.

Examples
--------
A filled basin (a flat of two cells at 3) spilling south through the cell at 1:

>>> import numpy as np
>>> z = np.array([[5, 5, 5, 5], [5, 3, 3, 5], [5, 3, 3, 5], [5, 5, 1, 5]], np.float32)
>>> d = flow_directions(z, backend="cpu")
>>> d.direction.tolist()
[[2, 4, 4, 8], [1, 4, 4, 16], [1, 2, 4, 8], [128, 1, 0, 16]]
>>> flow_accumulation(d.direction, backend="cpu").tolist()[2:]
[[1.0, 7.0, 5.0, 1.0], [1.0, 1.0, 16.0, 1.0]]
"""

import math
import threading
from dataclasses import dataclass, field

import numpy as np

from ..backend import array_backend, count_nonzero, get_backend
from ..errors import InputError
from ..grid.edges import check_connectivity
from ..io.zarr_meta import blosc
from ..tiles.quadtree import TiledGrid, call_now, walk_down, walk_up
from ._flow_gpu import GpuOps
from ._neighbours import NB_DC, NB_DR, direction_codes

__all__ = ["flow_directions", "flow_accumulation", "FlowSpec", "FlowDirections",
           "direction_pass", "direction_group", "group_totals", "forget_flat_states",
           "accumulation_pass", "padded_window", "NotFilled", "check_drained", "DEGREE_STEPS",
           "fill_store_attrs", "FLOW_MEANINGS"]

#: what each layer of a flow holds: its ``meaning`` attribute, in a store and in
#: :func:`terrain.flow`'s Dataset alike
FLOW_MEANINGS = {
    "filled": "depression-filled elevation (the spill level of every cell); NaN nodata",
    "direction": "D8 flow direction, ESRI codes: 1 E, 2 SE, 4 S, 8 SW, 16 W, 32 NW, 64 N, "
                 "128 NE; 0 outlet; 255 nodata",
    "accumulation": "flow accumulation: cells (or weights) draining through the cell, itself "
                    "included; NaN nodata",
}

#: what a geographic DEM's directions take from its cells in degrees (the warning's words)
DEGREE_STEPS = ("a step east as long as a step north (at 60° it is half as long): the "
                "steepest descents between them are the degrees', not the ground's")

_INF = 2**31 - 1
#: the flat passes' memo holds states up to this share of the memory the process may take
#: when it first needs it (1/N of :func:`terrain.io.available_memory`): about 90 MB on a
#: 24 GB machine (the 64 groups of a 16384² grid keep 63 MiB), where the 10-ft grid's tiled
#: flow peaked at 2.05 GB with 1/64 (1.35 GB without the memo; floor 2 GB)
FLAT_MEMO_SHARE = 256
#: (drow, dcol) of each uint8 code (0, 0 for a code that is no direction)
_CODE_DR, _CODE_DC = np.zeros(256, np.int64), np.zeros(256, np.int64)
_CODE_DR[[1 << k for k in range(8)]], _CODE_DC[[1 << k for k in range(8)]] = NB_DR, NB_DC


@dataclass(frozen=True)
class FlowSpec(TiledGrid):
    """What a flow run computes on; ``edge_outlets``: the grid's edge and nodata drain."""

    shape: tuple
    tile: int
    connectivity: int = 8
    cellsize: tuple = (1.0, 1.0)
    edge_outlets: bool = True

    def __post_init__(self):
        check_connectivity(self.connectivity)
        dx, dy = (float(v) for v in self.cellsize)
        if not (dx > 0 and dy > 0 and math.isfinite(dx) and math.isfinite(dy)):
            raise InputError(f"cell size {self.cellsize}: must be positive")

    @property
    def step(self):
        """1 (D8) or 2 (D4: the cardinal neighbours)."""
        return 1 if self.connectivity == 8 else 2

    @property
    def distances(self):
        """The distance to neighbour ``k`` (E, SE, S, ..., NE), float64."""
        dx, dy = (float(v) for v in self.cellsize)
        diag = math.sqrt(dx * dx + dy * dy)
        return np.array([dx, diag, dy, diag, dx, diag, dy, diag], np.float64)


@dataclass
class FlowDirections:
    """Flow directions (uint8 ESRI codes) and what the run found (``stats``)."""

    direction: object
    stats: dict = field(default_factory=dict)


# -- kernel tables
class _CpuOps:
    """The kernels on the CPU (``_flow_cpu.py``, C); blocks are NumPy arrays."""

    def __init__(self, backend):
        from . import _flow_cpu as k
        self.be = backend
        self.classify, self.flat_distances, self.flat_labels = (
            k.classify, k.flat_distances, k.flat_labels)
        self.flat_directions, self.accumulate, self.exits = (
            k.flat_directions, k.accumulate, k.exits)


def _ops(backend):
    be = get_backend(backend)
    return be.select(_CpuOps, GpuOps)(be)


# -- windows
def padded_window(read, shape, window, halo, fill, dtype):
    """Cells ``window`` grown by ``halo``, ``fill`` outside the grid; ``read`` the rest."""
    r0, r1, c0, c1 = window
    out = np.full((r1 - r0 + 2 * halo, c1 - c0 + 2 * halo), fill, dtype)
    a0, a1 = max(r0 - halo, 0), min(r1 + halo, shape[0])
    b0, b1 = max(c0 - halo, 0), min(c1 + halo, shape[1])
    if a1 > a0 and b1 > b0:
        out[a0 - r0 + halo:a1 - r0 + halo, b0 - c0 + halo:b1 - c0 + halo] = read(a0, a1, b0, b1)
    return out


def _array_reader(a):
    return lambda r0, r1, c0, c1: a[r0:r1, c0:c1]


# -- directions
def _frames(a, h, w):
    """The group's border cells of a padded (halo 2) array: top, bottom, left, right."""
    return (a[2, 2:w + 2].copy(), a[h + 1, 2:w + 2].copy(), a[2:h + 2, 2].copy(),
            a[2:h + 2, w + 1].copy())


#: where a group's halo ring comes from: the neighbour at ``(di, dj)``, the side of its
#: frames (:func:`_frames`: 0 top, 1 bottom, 2 left, 3 right) and the cells of that side
_HALO_SOURCES = (((-1, 0), 1, slice(None)), ((1, 0), 0, slice(None)),
                 ((0, -1), 3, slice(None)), ((0, 1), 2, slice(None)),
                 ((-1, -1), 1, -1), ((-1, 1), 1, 0), ((1, -1), 0, -1), ((1, 1), 0, 0))


def _halo(frames, gi, gj, h, w, fill, dtype):
    """A padded array holding on its inner ring the neighbouring groups' border cells."""
    a = np.full((h + 4, w + 4), fill, dtype)
    rows, cols = slice(2, h + 2), slice(2, w + 2)
    for (di, dj), side, take in _HALO_SOURCES:
        if (n := frames.get((gi + di, gj + dj))) is not None:
            a[{-1: 1, 0: rows, 1: h + 2}[di], {-1: 1, 0: cols, 1: w + 2}[dj]] = n[side][take]
    return a


def _seeds(frames, group, window):
    """The away and towards halos of ``group`` from what its neighbours published."""
    h, w = window[1] - window[0], window[3] - window[2]
    return tuple(_halo(f, *group, h, w, _INF, np.int32) for f in frames)


@dataclass
class _GroupFlats:
    """What a group's flat pass publishes: its border cells' away/towards distances and
    labels, each local flat's largest ``away``, whether a flat touches the border, counts,
    and whether the pass lowered a kept state (:class:`_FlatState`) instead of running whole."""

    away: tuple
    towards: tuple
    labels: tuple
    maxa: np.ndarray
    border_flats: bool
    stats: dict
    lowered: bool = False


def _padded(spec, read_z, read_out, window):
    """A group's elevations and outlets read with a halo of 2 (host arrays)."""
    zp = padded_window(read_z, spec.shape, window, 2, np.nan, np.float32)
    op = None if read_out is None else padded_window(read_out, spec.shape, window, 2, 0,
                                                     np.uint8)
    return zp, op


def _group_step(spec, ops, zp, op, halo_a, halo_t, height, memo=None, state=None):
    """One group's work on its padded elevations ``zp`` and outlets ``op``: classify, flat
    distances (seeded by the halo), labels; with ``height`` (each local flat's whole-flat
    largest ``away``) the codes, left where ``ops`` computes. What a first pass publishes to
    the other groups is on the host; ``memo(away, towards, labels, code, published)`` is
    given its flats' arrays (with the CPU's kernels). With ``state`` (the group's
    :class:`_FlatState` after its last pass) the distances and labels are the state's."""
    host = ops.be.to_numpy
    h, w = zp.shape[0] - 4, zp.shape[1] - 4
    code = ops.classify(zp, op, spec.edge_outlets, spec.distances, spec.step)
    inner = code[2:h + 2, 2:w + 2]
    flats = count_nonzero(inner == 254)
    stats = {"cells": count_nonzero(inner != 255), "flat_cells": flats,
             "outlets": count_nonzero(inner == 0), "undrained": 0}
    if flats == 0:
        if height is not None:
            return inner.copy(), stats
        return _GroupFlats((), (), (), np.zeros(1, np.int32), False, stats)
    if state is not None:
        away, towards, labels = state.dense()
    else:
        away, towards = ops.flat_distances(zp, code, halo_a, halo_t, spec.step)
        labels, maxa = ops.flat_labels(code, away, spec.step)
    if isinstance(height, str):  # "local": the block holds its flats whole (one group)
        height = maxa
    if height is None:
        res = _published(away, towards, labels, host(maxa), stats, host)
        if memo is not None:
            memo(away, towards, labels, code, res)
        return res
    out = ops.flat_directions(zp, code, away, towards, labels, height, spec.step)
    del away, towards, labels  # freed before the copy, made beside the rest
    final = out[2:h + 2, 2:w + 2]
    # a flat with no drain keeps 0: on a filled DEM none (every flat spills), on a DEM that
    # is not, its pits (first_undrained says where the first lies)
    stats["undrained"] = count_nonzero(final == 0) - stats["outlets"]
    if stats["undrained"]:
        first = int(ops.be.xp.argmax(((inner == 254) & (final == 0)).ravel()))
        stats["first_undrained"] = divmod(first, w)
    del code, inner
    return final.copy(), stats


def _published(away, towards, labels, maxa, stats, host=np.asarray):
    """What a flat pass publishes (:class:`_GroupFlats`, on the host) from its padded
    arrays."""
    h, w = away.shape[0] - 4, away.shape[1] - 4
    fl = tuple(host(x) for x in _frames(labels, h, w))
    return _GroupFlats(tuple(host(x) for x in _frames(away, h, w)),
                       tuple(host(x) for x in _frames(towards, h, w)), fl, maxa,
                       any(bool(np.any(x > 0)) for x in fl), stats)


def _packed(a):
    """``a`` (int32) compressed (Blosc LZ4 over shuffled bytes: a group's flat state,
    distances in smooth runs and cell numbers as steps, takes 20-40x less, at about 1 GB/s);
    ``a`` itself without c-blosc."""
    lib = blosc()
    if lib is None:
        return a
    out = np.empty(a.nbytes + 16, np.uint8)  # BLOSC_MAX_OVERHEAD
    n = lib.compress(1, 1, 4, a.nbytes, a.ctypes.data, out.ctypes.data, out.nbytes, b"lz4",
                     0, 1)
    if n <= 0:
        raise MemoryError("blosc: compression of a flat state failed")
    return out[:n].copy()


def _unpacked(blob, size):
    """The int32 array of ``size`` that :func:`_packed` gave ``blob``."""
    if blob.dtype == np.int32:
        return blob
    a = np.empty(size, np.int32)
    if blosc().decompress(blob.ctypes.data, a.ctypes.data, a.nbytes, 1) != a.nbytes:
        raise ValueError("blosc: a flat state does not decompress to its size")
    return a


@dataclass
class _FlatState:
    """A group's flats after a pass, as its next pass and its last (directions) need them:
    the flats that reach its border with the halo ring's flat cells (``edge``) and the others
    (``inner``, final after the first pass), each :class:`_FlatCells`; every flat's largest
    ``away``, the border's labels and the pass's counts."""

    shape: tuple
    edge: "_FlatCells"
    inner: "_FlatCells"
    maxa: np.ndarray
    border: np.ndarray
    stats: dict

    @classmethod
    def of(cls, away, towards, labels, code, res):
        R, C = labels.shape
        if R * C >= 2**31:
            return None  # cell numbers of int32
        border = np.unique(np.concatenate(res.labels))
        border = border[border > 0]
        reach = np.zeros(len(res.maxa), bool)
        reach[border] = True
        edge = reach[labels]
        inner = (labels > 0) & ~edge
        for ring in (np.s_[1, 1:C - 1], np.s_[R - 2, 1:C - 1], np.s_[1:R - 1, 1],
                     np.s_[1:R - 1, C - 2]):  # the halo ring's flat cells
            edge[ring] |= code[ring] == 254
        arrays = (away, towards, labels)
        return cls((R, C), _FlatCells.of(edge, *arrays), _FlatCells.of(inner, *arrays),
                   res.maxa, border, res.stats)

    @property
    def nbytes(self):
        return self.edge.nbytes + self.inner.nbytes + self.maxa.nbytes + self.border.nbytes

    def dense(self):
        """The padded ``(away, towards, labels)`` of every flat (INF, INF, 0 elsewhere)."""
        out = _no_flats(self.shape)
        for part in (self.edge, self.inner):
            part.into(out)
        return out

    def again(self, halo_a, halo_t, step):
        """The pass again with lower halos: only the distances the halos lower are walked
        (:func:`terrain.hydrology._flow_cpu.lower_flat_distances`), on the flats that reach
        the border. Returns what it publishes; the state becomes the new pass's."""
        from ._flow_cpu import lower_flat_distances
        dense = _no_flats(self.shape)
        cells, (_, _, labels) = self.edge.into(dense)
        code = np.full(self.shape, 255, np.uint8)
        code.ravel()[cells] = 254
        lower_flat_distances(code, halo_a, halo_t, step, *dense[:2])
        away = dense[0].ravel()[cells]
        self.edge.away, self.edge.towards = _packed(away), _packed(dense[1].ravel()[cells])
        inside = labels > 0
        lab, a = labels[inside], away[inside]
        finite = a < _INF
        maxa = self.maxa.copy()
        maxa[self.border] = 0
        np.maximum.at(maxa, lab[finite], a[finite])
        self.maxa = maxa
        res = _published(*dense, maxa, dict(self.stats))
        res.lowered = True
        return res


def _no_flats(shape):
    """Padded ``(away, towards, labels)`` of a block without flats: INF, INF, 0."""
    return (np.full(shape, _INF, np.int32), np.full(shape, _INF, np.int32),
            np.zeros(shape, np.int32))


@dataclass
class _FlatCells:
    """Cells of a padded block (flat indices, stored as steps) with their ``away``,
    ``towards`` and labels, each :func:`_packed`."""

    count: int
    steps: np.ndarray
    away: np.ndarray
    towards: np.ndarray
    labels: np.ndarray

    @classmethod
    def of(cls, mask, away, towards, labels):
        cells = np.flatnonzero(mask)
        return cls(cells.size, _packed(np.diff(cells, prepend=0).astype(np.int32)),
                   *(_packed(a.ravel()[cells]) for a in (away, towards, labels)))

    @property
    def nbytes(self):
        return sum(a.nbytes for a in (self.steps, self.away, self.towards, self.labels))

    def cells(self):
        return np.cumsum(_unpacked(self.steps, self.count), dtype=np.int64)

    def values(self):
        return tuple(_unpacked(a, self.count) for a in (self.away, self.towards, self.labels))

    def into(self, dense):
        """Its values written at its cells of ``dense`` (:func:`_no_flats`); returns
        ``(cells, values)``."""
        cells, values = self.cells(), self.values()
        for a, v in zip(dense, values):
            a.ravel()[cells] = v
        return cells, values


class _FlatMemo:
    """The :class:`_FlatState` of groups between their passes in this process, up to
    ``budget`` bytes: a pass run again as its neighbours publish walks only what their new
    borders lower, and a group not here (not admitted, or passed on another worker) runs
    whole, to the same result. A state comes in while there is room and stays until its
    run's directions take it: the passes go round the groups in waves, where dropping the
    least recently used keeps none until asked again (16384², 64 groups, a quarter of the
    room all states take: no pass of 217 found its state). States of another run, left in a
    worker whose directions ran elsewhere, make room for the run at hand."""

    def __init__(self, budget):
        self.budget, self.used = budget, 0
        self.states = {}
        self.lock = threading.Lock()

    def put(self, key, state):
        with self.lock:
            for older in [k for k in self.states if k[:2] == key[:2]]:  # its group's earlier
                self._drop(older)
            if state is None:
                return
            if self.used + state.nbytes > self.budget:
                # another run's states, left where its directions ran in another process
                for other in [k for k in self.states if k[0] != key[0]]:
                    self._drop(other)
            if self.used + state.nbytes <= self.budget:
                self.states[key] = state
                self.used += state.nbytes

    def take(self, key):
        """The state of ``key``, out of the memo while its pass runs (put back after)."""
        with self.lock:
            state = self.states.pop(key, None)
            if state is not None:
                self.used -= state.nbytes
            return state

    def forget(self, run):
        with self.lock:
            for key in [k for k in self.states if k[0] == run]:
                self._drop(key)

    def _drop(self, key):
        state = self.states.pop(key, None)
        if state is not None:
            self.used -= state.nbytes


_memo = None
_memo_made = threading.Lock()


def _flat_memo():
    """This process's :class:`_FlatMemo`, made on first use."""
    global _memo
    with _memo_made:
        if _memo is None:
            from ..io import available_memory  # the process's share: a cgroup's, a limit's
            _memo = _FlatMemo(available_memory() // FLAT_MEMO_SHARE)
        return _memo


def _neighbours(g, groups):
    gi, gj = g
    return [(gi + a, gj + b) for a in (-1, 0, 1) for b in (-1, 0, 1)
            if (a or b) and (gi + a, gj + b) in groups]


def _flat_heights(plan, results, step):
    """``{group: each local flat's largest away}``, flats joined across group borders."""
    offsets, total = {}, 0
    for g in plan.groups:
        offsets[g] = total
        total += len(results[g].maxa)
    parent = np.arange(total, dtype=np.int64)
    best = np.concatenate([results[g].maxa for g in plan.groups]).astype(np.int64)
    pairs = []
    for g in plan.groups:
        res = results[g]
        if not res.border_flats:
            continue
        top, bottom, left, right = res.labels
        gi, gj = g
        # right column vs the east's left, bottom row vs the south's top (D8: offsets -1..1)
        for h, mine, side in (((gi, gj + 1), right, 2), ((gi + 1, gj), bottom, 0)):
            o = results.get(h)
            if o is not None and o.border_flats:
                other = o.labels[side]
                for d in ((0,) if step == 2 else (-1, 0, 1)):
                    pairs.append((g, mine[max(0, -d):len(mine) - max(0, d)], h,
                                  other[max(0, d):len(other) - max(0, -d)]))
        if step == 1:  # the corners: south-east and south-west
            for h, a, b in (((gi + 1, gj + 1), bottom[-1:], slice(None, 1)),
                            ((gi + 1, gj - 1), bottom[:1], slice(-1, None))):
                o = results.get(h)
                if o is not None and o.border_flats:
                    pairs.append((g, a, h, o.labels[0][b]))
    us, vs = [], []
    for g, a, h, b in pairs:
        ok = (a > 0) & (b > 0)
        us.append(offsets[g] + a[ok].astype(np.int64))
        vs.append(offsets[h] + b[ok].astype(np.int64))
    if us:
        from ._flow_walk_cpu import union_max_cpu
        union_max_cpu(parent, best, np.concatenate(us), np.concatenate(vs))
    return {g: best[offsets[g]:offsets[g] + len(results[g].maxa)].astype(np.int32)
            for g in plan.groups}


def direction_pass(spec, plan, read_z, read_out=None, backend=None, run_groups=None):
    """The tiled directions' flat work: per-group flat passes until no border distance
    changes, then the flats' heights. Returns ``(results, heights, passes, frames)`` for
    :func:`direction_group`, ``passes`` the counts ``flat_passes`` and
    ``flat_passes_lowered`` (those that lowered a kept state). ``read_z``/``read_out`` read
    the grid.

    ``run_groups(fn, prepare, first, after)`` runs ``fn(prepare(group))`` for each group of
    ``first`` and of the lists ``after(group, result)`` returns, ``prepare`` and ``after``
    called in this thread as a pass starts and completes (a pipeline passes a parallel one,
    ``pipelines.cluster.run_as_completed``; default: one pass at a time, in order). A pass
    publishes its border distances as it completes and a neighbour runs again with them as
    soon as it can, instead of after a round of every group: the distances are a min-plus
    fixed point, the same whatever the order (8192², 256 groups one at a time, first in
    first out: 772 passes, where rounds of every group took 1080; last in first out 2280)."""
    import uuid
    ops = _ops(backend)
    run = uuid.uuid4().hex  # this pass's states in the memo of each process it runs in
    groups = list(plan.groups)
    gset = set(groups)
    frames_a, frames_t, results = {}, {}, {}
    # each group side's version (0: nothing or all INF published, as the halo's fill); a
    # group runs again only when a side its halo is made of has changed since its last run
    # (a pass is a function of its halo): a neighbour's change on a far side, or a border
    # without flat cells, leaves it as it is
    versions, ran_with, running = {}, {}, set()
    passes = {"flat_passes": 0, "flat_passes_lowered": 0}
    # each group's passes so far: a pass takes the state its group's previous pass kept, and
    # the directions the last one's; a state an older pass left in another worker process
    # (its later passes ran elsewhere) is stale, and taken it made flats drain wrong
    count = {}

    def seeds_of(group):
        gi, gj = group
        return tuple(versions.get((gi + di, gj + dj), (0, 0, 0, 0))[side]
                     for (di, dj), side, _ in _HALO_SOURCES)

    def prepare(group):  # a pass is given its neighbours' border cells published so far
        ran_with[group] = seeds_of(group)
        running.add(group)
        count[group] = count.get(group, 0) + 1
        return group, count[group], {n: (frames_a[n], frames_t[n])
                                     for n in _neighbours(group, gset) if n in frames_a}

    def after(group, res):
        running.discard(group)
        passes["flat_passes"] += 1
        passes["flat_passes_lowered"] += res.lowered
        results[group] = res
        if res.border_flats:
            v = list(versions.get(group, (0, 0, 0, 0)))
            pa, pt = frames_a.get(group), frames_t.get(group)
            for side, (a, t) in enumerate(zip(res.away, res.towards)):
                if pa is None:  # nothing published yet: as all INF
                    v[side] += bool((a != _INF).any() or (t != _INF).any())
                elif not (np.array_equal(pa[side], a) and np.array_equal(pt[side], t)):
                    v[side] += 1
            if tuple(v) != versions.get(group, (0, 0, 0, 0)):
                versions[group] = tuple(v)
                frames_a[group], frames_t[group] = res.away, res.towards
        # itself too: its sides may have changed while it ran (a running pass waits)
        return [n for n in [*_neighbours(group, gset), group]
                if n not in running and n in results and results[n].border_flats
                and seeds_of(n) != ran_with[n]]

    def flat_pass(item):
        group, n, near = item
        window = plan.window(plan.group_level, *group)
        ha, ht = (_seeds(({n: a for n, (a, _) in near.items()},
                          {n: t for n, (_, t) in near.items()}), group, window)
                  if near else (None, None))
        # the memo keeps host states: a device's kernels run every pass whole
        memo = None if ops.be.is_gpu else _flat_memo()
        state = None if memo is None or ha is None else memo.take((run, group, n - 1))
        if state is not None:
            res = state.again(ha, ht, spec.step)
            memo.put((run, group, n), state)
            return res
        keep = None if memo is None else (
            lambda *a: memo.put((run, group, n), _FlatState.of(*a)))
        return _group_step(spec, ops, *_padded(spec, read_z, read_out, window), ha, ht, None,
                           keep)

    try:
        (run_groups or _run_in_order)(flat_pass, prepare, groups, after)
    except BaseException:
        forget_flat_states((None, None, run, count))
        raise
    heights = _flat_heights(plan, results, spec.step)
    return results, heights, passes, (frames_a, frames_t, run, count)


def forget_flat_states(frames):
    """Drop what :func:`direction_pass` (``frames``: the last of what it returns) kept in
    this process for :func:`direction_group`s that did not run here."""
    _flat_memo().forget(frames[2])


def _run_in_order(fn, prepare, first, after):
    """:func:`direction_pass`'s ``run_groups``, one pass at a time, first in first out."""
    todo = list(dict.fromkeys(first))
    queued = set(todo)
    while todo:
        group = todo.pop(0)
        queued.discard(group)
        for n in after(group, fn(prepare(group))):
            if n not in queued:
                todo.append(n)
                queued.add(n)


def direction_group(spec, plan, group, read_z, read_out, heights, frames, backend=None):
    """One group's final directions and counts, after :func:`direction_pass`: from the
    group's flats as its last pass left them where this process kept them (its last pass ran
    with the final borders), else computed again."""
    ops = _ops(backend)
    window = plan.window(plan.group_level, *group)
    state = None if ops.be.is_gpu else _flat_memo().take((frames[2], group,
                                                          frames[3].get(group, 0)))
    ha, ht = (None, None) if state is not None else _seeds(frames[:2], group, window)
    code, stats = _group_step(spec, ops, *_padded(spec, read_z, read_out, window), ha, ht,
                              heights.get(group, np.zeros(1, np.int32)), state=state)
    if "first_undrained" in stats:
        stats["first_undrained"] = tuple(map(sum, zip(stats["first_undrained"], window[::2])))
    return ops.be.to_numpy(code), stats


def _in_core_tile(shape):
    return 1 << max(1, (max(shape) - 1).bit_length())


def flow_directions(filled, cellsize=(1.0, 1.0), connectivity=8, outlets=None, *, tile=None,
                    group_tiles=1, backend=None):
    """D8 (``connectivity=8``) or D4 flow directions of a filled DEM, flats resolved.

    Parameters
    ----------
    filled : 2-D array
        Depression-filled elevations (float32; NaN nodata). The codes come back where it is
        (a CuPy array on the device).
    cellsize : (dx, dy)
        The distances that weight the drops.
    connectivity : {8, 4}
    outlets : 2-D bool array, optional
        The cells that drain out; default: those with no lower neighbour beside the grid's
        edge or nodata.
    tile, group_tiles : int, optional
        Run tiled as the out-of-core pipeline does (the same result).
    backend : {'cpu', 'gpu', 'auto'}, optional

    Returns
    -------
    FlowDirections
    """
    where = array_backend(filled)
    z = where.xp.asarray(filled)
    if z.ndim != 2:
        raise InputError(f"filled: a DEM must be 2-D, got shape {z.shape}")
    z = where.xp.ascontiguousarray(z, np.float32)
    out = None
    if outlets is not None:
        out = where.asarray(outlets) != 0
        if out.shape != z.shape:
            raise InputError(f"outlets: {out.shape} cells, the DEM {z.shape}")
        out = out.view(np.uint8)
    check_connectivity(connectivity)  # FlowSpec's own check: an empty grid makes none
    if z.size == 0:  # no cell: no direction (as an empty fill)
        return FlowDirections(where.xp.empty(z.shape, np.uint8), {
            "cells": 0, "flat_cells": 0, "outlets": 0, "undrained": 0, "flat_passes": 0,
            "flat_passes_lowered": 0})
    spec = FlowSpec(z.shape, int(tile or _in_core_tile(z.shape)), connectivity,
                    tuple(float(v) for v in cellsize), outlets is None)
    plan = spec.plan(group_tiles)
    if len(plan.groups) == 1:  # one block: its flats are whole, one pass where ops compute
        ops = _ops(backend)
        be = ops.be
        zp = be.xp.pad(be.asarray(z), 2, constant_values=np.nan)
        op = None if out is None else be.xp.pad(be.asarray(out), 2)
        code, stats = _group_step(spec, ops, zp, op, None, None, "local")
        stats.update(flat_passes=1, flat_passes_lowered=0)
        return FlowDirections(where.asarray(code), stats)
    z = where.to_numpy(z)
    read_z = _array_reader(z)
    read_out = None if out is None else _array_reader(where.to_numpy(out))
    results, heights, passes, frames = direction_pass(spec, plan, read_z, read_out, backend)
    direction = np.empty(z.shape, np.uint8)
    counts = []
    try:
        for grp in plan.groups:
            code, s = direction_group(spec, plan, grp, read_z, read_out, heights, frames,
                                      backend)
            r0, r1, c0, c1 = plan.window(plan.group_level, *grp)
            direction[r0:r1, c0:c1] = code
            counts.append(s)
    finally:
        forget_flat_states(frames)
    return FlowDirections(where.asarray(direction), {**group_totals(counts), **passes})


def group_totals(counts):
    """The groups' counts (:func:`direction_group`'s) summed; ``first_undrained``, the
    first in row-major order, where some cell drains nowhere."""
    total = {k: sum(int(s[k]) for s in counts)
             for k in ("cells", "flat_cells", "outlets", "undrained")}
    firsts = [s["first_undrained"] for s in counts if "first_undrained" in s]
    if firsts:
        total["first_undrained"] = min(firsts)
    return total


class NotFilled(InputError):
    """A DEM given as depression-filled is not: ``option`` names the parameter that said it
    was (the command line turns it into its flag)."""

    option = "filled"


def check_drained(stats, what):
    """:class:`NotFilled` when the directions' counts (:func:`flow_directions`') have cells
    that drain nowhere: ``what`` (the DEM's name) was said to be filled."""
    n = int(stats.get("undrained", 0))
    if n:
        r, c = stats["first_undrained"]
        cells = f"{n} cells drain" if n > 1 else "1 cell drains"
        raise NotFilled(f"{what}: not depression-filled: {cells} nowhere (pits, or flats with "
                        f"no lower way out), the first at row {r}, column {c}")


# -- accumulation
@dataclass
class EdgeSummary:
    """A quadtree node's boundary graph: the flow edges entering it (tail outside; the
    out-edge its path leaves by, -1 none) and leaving it (with the node's own accumulation)."""

    in_tail: np.ndarray
    in_exit: np.ndarray
    out_tail: np.ndarray
    out_head: np.ndarray
    out_local: np.ndarray


def _ring_edges(dp, k, inward):
    """Cells of ring ``k`` (0: the halo, 1: the interior's border) pointing into
    (``inward``) or out of the interior: padded ``(rows, cols, head rows, head cols)``."""
    R, C = dp.shape
    ring = np.zeros((R, C), bool)
    ring[[k, R - 1 - k], k:C - k] = ring[k:R - k, [k, C - 1 - k]] = True
    rr, cc = np.nonzero(ring & (dp != 255) & (dp != 0))
    hr, hc = rr + _CODE_DR[dp[rr, cc]], cc + _CODE_DC[dp[rr, cc]]
    keep = ((hr >= 1) & (hr < R - 1) & (hc >= 1) & (hc < C - 1)) == inward
    return rr[keep], cc[keep], hr[keep], hc[keep]


def _global_ids(r, c, window, shape, halo=1):
    return (r + window[0] - halo).astype(np.int64) * shape[1] + (c + window[2] - halo)


def _accumulate_block(ops, spec, read_dir, read_w, window, incoming, what):
    """The padded direction block, its in-edges (tails, heads) and its accumulation given
    ``incoming``."""
    dp = padded_window(read_dir, spec.shape, window, 1, 255, np.uint8)
    weights = None
    if read_w is not None:
        r0, r1, c0, c1 = window
        weights = _finite_weights(np, np.asarray(read_w(r0, r1, c0, c1), np.float64),
                                  (r0, c0))
    ir, ic, er, ec = _ring_edges(dp, 0, True)
    ext = np.zeros(dp.shape, np.float64)
    if incoming is not None and len(ir):
        ext[ir, ic] = incoming
    acc, order, done = _checked_accumulate(ops, dp, weights, ext, what)
    return dp, (ir, ic, er, ec), ops.be.to_numpy(acc), order, done


def _finite_weights(xp, w, origin=(0, 0)):
    """Weights (float64, ``xp``'s) with NaN as 0; :class:`InputError` naming the first
    cell (offset by ``origin``) that is infinite: its inflow could not be summed.

    >>> _finite_weights(np, np.array([[1.0, np.nan], [np.inf, 2.0]]), (10, 0))
    Traceback (most recent call last):
    ...
    terrain.errors.InputError: weights: cell (11, 0) is inf; weights must be finite (NaN counts 0)
    """
    bad = xp.isinf(w)
    if bool(bad.any()):
        r, c = (int(v) for v in np.unravel_index(int(bad.argmax()), w.shape))
        raise InputError(f"weights: cell ({r + origin[0]}, {c + origin[1]}) is "
                         f"{float(w[r, c])}; weights must be finite (NaN counts 0)")
    return xp.nan_to_num(w, nan=0.0)


def _checked_accumulate(ops, dp, weights, ext, what):
    """``ops.accumulate`` on a padded direction block, its errors raised."""
    acc, order, done, err = ops.accumulate(dp, weights, ext)
    if err:
        raise InputError(f"{what}: a flow direction leads to nodata, off the grid or is not "
                         "an ESRI D8 code")
    valid = count_nonzero(dp[1:-1, 1:-1] != 255)
    if done != valid:
        raise InputError(f"{what}: the flow directions hold a cycle ({valid - done} cells "
                         "never drain)")
    return acc, order, done


def _leaf_up(spec, backend, read_dir, read_w, what, level, i, j):
    ops = _ops(backend)
    window = spec.window(level, i, j)
    dp, (ir, ic, er, ec), acc, order, done = _accumulate_block(ops, spec, read_dir, read_w,
                                                               window, None, what)
    orr, occ, ohr, ohc = _ring_edges(dp, 1, False)
    out_index = np.full(dp.shape, -1, np.int64)
    out_index[orr, occ] = np.arange(len(orr))
    exit_ = ops.exits(dp, order, done, out_index)
    return EdgeSummary(_global_ids(ir, ic, window, spec.shape), exit_[er, ec].astype(np.int64),
                       _global_ids(orr, occ, window, spec.shape),
                       _global_ids(ohr, ohc, window, spec.shape),
                       acc[orr, occ].astype(np.float64)), None


def _inside(ids, window, cols):
    r, c = ids // cols, ids % cols
    return (r >= window[0]) & (r < window[1]) & (c >= window[2]) & (c < window[3])


def _compose(spec, level, i, j, children):
    """The children's summaries joined, the internal edges and their out-edges."""
    e = np.zeros(0, np.int64)
    kids = [c if c is not None else EdgeSummary(e, e, e, e, np.zeros(0)) for c in children]
    window = spec.window(level, i, j)
    cols = spec.shape[1]
    n_out = np.cumsum([0] + [len(c.out_tail) for c in kids])
    in_tail = np.concatenate([c.in_tail for c in kids])
    in_exit = np.concatenate([np.where(c.in_exit >= 0, c.in_exit + n_out[q], -1)
                              for q, c in enumerate(kids)]).astype(np.int64)
    out_tail = np.concatenate([c.out_tail for c in kids])
    out_head = np.concatenate([c.out_head for c in kids])
    out_local = np.concatenate([c.out_local for c in kids])
    in_internal = _inside(in_tail, window, cols)
    out_external = ~_inside(out_head, window, cols)
    in_src = np.full(len(in_tail), -1, np.int64)
    if in_internal.any():
        order = np.argsort(out_tail, kind="stable")
        pos = np.searchsorted(out_tail[order], in_tail[in_internal])
        pos = np.minimum(pos, len(order) - 1)
        src = order[pos]
        if not np.array_equal(out_tail[src], in_tail[in_internal]):
            raise InputError("flow accumulation: an edge between tiles has no tail")
        in_src[in_internal] = src
    counts = [len(c.in_tail) for c in kids]
    return in_tail, in_exit, in_src, out_tail, out_head, out_local, out_external, counts


def _merge_up(spec, level, i, j, *children):
    from ._flow_walk_cpu import chain_exits_cpu, resolve_edges_cpu
    parts = _compose(spec, level, i, j, children)
    in_tail, in_exit, in_src, out_tail, out_head, out_local, out_external, counts = parts
    out_val = np.empty(len(out_local), np.float64)
    in_val = np.empty(len(in_tail), np.float64)
    done = resolve_edges_cpu(in_exit, in_src, np.zeros(len(in_tail)), out_local, out_val,
                             in_val)
    node_exit = np.empty(len(in_tail), np.int64)
    ok = chain_exits_cpu(in_exit, in_src, out_external, node_exit)
    if done != len(out_local) or not ok:
        raise InputError("flow accumulation: the flow directions hold a cycle across tiles")
    ext_in = in_src < 0
    rank = np.cumsum(out_external) - 1
    exits = node_exit[ext_in]
    node_in_exit = np.full(len(exits), -1, np.int64)
    node_in_exit[exits >= 0] = rank[exits[exits >= 0]]
    return EdgeSummary(in_tail[ext_in], node_in_exit.astype(np.int64), out_tail[out_external],
                       out_head[out_external], out_val[out_external]), tuple(children)


def _split_down(spec, level, i, j, incoming, children):
    from ._flow_walk_cpu import resolve_edges_cpu
    parts = _compose(spec, level, i, j, children)
    in_tail, in_exit, in_src, out_tail, out_head, out_local, out_external, counts = parts
    given = np.zeros(len(in_tail), np.float64)
    ext_in = in_src < 0
    if incoming is not None:
        given[ext_in] = incoming
    out_val = np.empty(len(out_local), np.float64)
    in_val = np.empty(len(in_tail), np.float64)
    resolve_edges_cpu(in_exit, in_src, given, out_local, out_val, in_val)
    bounds = np.cumsum([0] + counts)
    return tuple(in_val[bounds[q]:bounds[q + 1]] for q in range(4))


def _leaf_down(spec, backend, read_dir, read_w, what, write, level, i, j, incoming, *rest):
    window = spec.window(level, i, j)
    acc = _accumulate_block(_ops(backend), spec, read_dir, read_w, window, incoming, what)[2]
    return write(window, acc[1:-1, 1:-1])


def accumulation_pass(spec, plan, read_dir, write, read_w=None, backend=None, call=call_now,
                      what="direction"):
    """Flow accumulation by the quadtree up/down walk: ``write(window, acc)`` gets each
    group's; returns the leaf steps' results by group. ``call`` runs the steps."""
    if len(plan.groups) == 1:  # one block: nothing enters it, no boundary graphs
        rest = {(plan.group_level, 0, 0): (None,)}
    else:
        _, rest = walk_up(plan, (_leaf_up, spec, backend, read_dir, read_w, what),
                          (_merge_up, spec), call, nout=2, names=("acc-up", "acc-merge"))
    _, out = walk_down(plan, (_split_down, spec),
                       (_leaf_down, spec, backend, read_dir, read_w, what, write), call,
                       extra=rest, node_nout=4, names=("acc-split", "acc-down"))
    return out


def flow_accumulation(direction, weights=None, *, tile=None, group_tiles=1, backend=None):
    """Cells (or ``weights``) draining through each cell, itself included (float64; NaN at
    nodata).

    Parameters
    ----------
    direction : 2-D uint8 array
        ESRI D8 codes (0 outlet, 255 nodata), e.g. :func:`flow_directions`'s (another type:
        :func:`direction_codes`, NaN nodata). The result comes back where it is (a CuPy
        array on the device).
    weights : 2-D array, optional
        Per-cell weight (rainfall); NaN counts as 0, an infinite weight is refused.
        Default: 1 per cell.
    tile, group_tiles : int, optional
        Run tiled, as the out-of-core pipeline does.
    backend : {'cpu', 'gpu', 'auto'}, optional
    """
    where = array_backend(direction)
    d = direction_codes(direction, where.xp)
    if d.ndim != 2:
        raise InputError(f"direction: must be 2-D, got shape {d.shape}")
    w = None
    if weights is not None:
        w = where.asarray(weights, np.float64)
        if w.shape != d.shape:
            raise InputError(f"weights: {w.shape} cells, the directions {d.shape}")
    if d.size == 0:  # no cell: nothing to accumulate (as an empty fill)
        return where.xp.empty(d.shape, np.float64)
    spec = FlowSpec(d.shape, int(tile or _in_core_tile(d.shape)))
    plan = spec.plan(group_tiles)
    if len(plan.groups) == 1:  # one block: nothing enters it, computed where ops compute
        ops = _ops(backend)
        xp = ops.be.xp
        dp = xp.pad(ops.be.asarray(d), 1, constant_values=255)
        wd = None if w is None else _finite_weights(xp, ops.be.asarray(w))
        acc = _checked_accumulate(ops, dp, wd, None, "direction")[0]
        return where.asarray(acc[1:-1, 1:-1])
    d, w = where.to_numpy(d), None if w is None else where.to_numpy(w)
    acc = np.empty(d.shape, np.float64)

    def write(window, block):
        acc[window[0]:window[1], window[2]:window[3]] = block

    accumulation_pass(spec, plan, _array_reader(d), write,
                      None if w is None else _array_reader(w), backend)
    return acc


def fill_store_attrs(path, connectivity=8, outlets=None):
    """The attributes of the store at ``path`` when ``terrain fill`` wrote it (its ``filled``
    layer is then a flow's filled DEM, not filled again), else None. :class:`InputError`
    when that fill does not drain as this flow would: another connectivity, named
    ``outlets``, or depressions left unfilled on purpose."""
    from ..io.zarr_meta import open_group
    from ..tiles import is_store
    if not is_store(path):
        return None
    group = open_group(path, mode="r")
    summary = group.attrs.get("fill")
    if "filled" not in group or not isinstance(summary, dict):
        return None
    conn = int(summary.get("connectivity", 0))
    if conn != int(connectivity):
        raise InputError(f"{path}: filled {conn}-connected, not {connectivity}-connected as "
                         "this flow: give the DEM, or a fill of the same connectivity")
    if outlets is not None or summary.get("outlets_file"):
        raise InputError(f"{path}: a filled store drains to the grid's edge and nodata here; "
                         "with named outlets give the DEM and the outlets")
    kept = [what for k, what in (("min_depth", "depth"), ("min_area", "area"))
            if summary.get(k) is not None]
    if kept:
        raise InputError(f"{path}: its fill kept the depressions of at least a minimum "
                         f"{' and '.join(kept)} unfilled (their pits are sinks): give the DEM")
    return dict(group.attrs)
