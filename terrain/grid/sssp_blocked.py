"""Blocked label-correcting SSSP over tiles ("tile delta-stepping"): exact cost distance out of
core on the CPU, with the in-core algorithm's bits.

The driver keeps every block's *ring* (cells within 2 of its edge, :class:`Bands`) and a
key per block; each round solves the ``batch`` pending blocks of the smallest keys with the
in-core kernels, seeded from their halos, and marks pending the neighbours whose halo
improved. Distances first, then ``(allocation, hops)`` over tight arcs, then the backlinks;
the result equals the in-core algorithm's bit for bit (docs/cost-distance.md, "Blocked").

Examples
--------
>>> import numpy as np
>>> dem = np.arange(36, dtype=np.float32).reshape(6, 6) % 5
>>> r = blocked_sssp(dem, [(0, 0), (5, 5)], side=4, backend="cpu")
>>> from terrain.grid.sssp import grid_sssp
>>> ref = grid_sssp(dem, [(0, 0), (5, 5)], backend="cpu")
>>> bool(np.array_equal(r.distance, ref.distance, equal_nan=True)), r.stats["blocks"]
(True, 4)
"""

import contextlib
import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..backend import get_backend
from ..errors import InputError
from ..tiles import borrow_buffer
from ._sssp_cpu import _NO_TARGETS, backlinks_cpu, bucket_plan, sssp_buckets_cpu, sssp_cpu
from ._sssp_frame import HOPS_BITS, NO_LABEL, GridSSSPResult
from .costs import ARC_DC, ARC_DR, arc_costs_np, arc_factor_np, knight_mid
from .sssp import check_max_cost, check_sources, prepare_grid

__all__ = ["BlockPlan", "BlockedSpec", "Bands", "solve_block", "block_outputs",
           "BlockedDriver", "blocked_sssp", "HALO", "MemoryBlocks"]

HALO = 2    # halo (and ring) width: knight moves reach two cells
_FRAME = 2  # NaN frame around the halo, so that halo cells may be relaxed without bounds checks
_OFF = HALO + _FRAME  # the block's first row and column in a window
_NO_STOP = np.zeros(1, np.uint8)  # a block's solve is short: never interrupted inside


@dataclass(frozen=True)
class BlockedSpec:
    """The cost model of a run and its distance limit."""

    model: int
    codes: np.ndarray
    lengths: np.ndarray
    has_f: bool
    limit: float


class BlockPlan:
    """Blocks of ``side`` cells over a grid of ``shape``, and the rows and columns that lie in
    some block's ring (the bands).

    >>> p = BlockPlan((10, 7), 4)
    >>> p.blocks, p.window(2, 1), p.hrows.tolist()
    ((3, 2), (8, 10, 4, 7), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    """

    def __init__(self, shape, side):
        self.shape = (int(shape[0]), int(shape[1]))
        self.side = int(side)
        if self.side < 2 * HALO:
            raise InputError(f"block side {side}: must be at least {2 * HALO}")
        R, C = self.shape
        self.blocks = (-(-R // self.side), -(-C // self.side))
        self.hrows = self._ring_lines(R)
        self.vcols = self._ring_lines(C)
        self.hrow_at = np.full(R, -1, np.int64)
        self.hrow_at[self.hrows] = np.arange(self.hrows.size)
        self.vcol_at = np.full(C, -1, np.int64)
        self.vcol_at[self.vcols] = np.arange(self.vcols.size)

    def _ring_lines(self, n):
        lines = set()
        for b0 in range(0, n, self.side):
            b1 = min(b0 + self.side, n)
            lines.update(x for x in (b0, b0 + 1, b1 - 2, b1 - 1) if b0 <= x < b1)
        return np.array(sorted(lines), np.int64)

    def window(self, i, j):
        """``(r0, r1, c0, c1)`` of block ``(i, j)``."""
        s = self.side
        return (i * s, min((i + 1) * s, self.shape[0]), j * s, min((j + 1) * s, self.shape[1]))

    def block_of(self, r, c):
        return int(r) // self.side, int(c) // self.side

    def neighbours(self, i, j):
        nr, nc = self.blocks
        return [(i + a, j + b) for a in (-1, 0, 1) for b in (-1, 0, 1)
                if (a or b) and 0 <= i + a < nr and 0 <= j + b < nc]


class Bands:
    """The rings of every block: ``z, f, d, l`` of the rows :attr:`BlockPlan.hrows` and the
    columns :attr:`BlockPlan.vcols`."""

    def __init__(self, plan):
        self.plan = plan
        R, C = plan.shape
        self.h = self._arrays((plan.hrows.size, C))
        self.v = self._arrays((R, plan.vcols.size))

    @staticmethod
    def _arrays(shape):
        return {"z": np.full(shape, np.nan, np.float32), "f": np.full(shape, np.nan, np.float32),
                "d": np.full(shape, np.inf), "l": np.full(shape, NO_LABEL, np.int64)}

    def reset_labels(self):
        self.h["l"][...] = NO_LABEL
        self.v["l"][...] = NO_LABEL

    def halo(self, i, j):
        """The halo strips of block ``(i, j)``: ``{side: {"z", "f", "d", "l"}}`` with ``top``
        and ``bottom`` of 2 x (width + 4) cells (corners included), ``left`` and ``right``
        of height x 2; cells outside the grid have NaN elevation."""
        p = self.plan
        R, C = p.shape
        r0, r1, c0, c1 = p.window(i, j)
        out = {}
        for name, rows in (("top", range(r0 - HALO, r0)), ("bottom", range(r1, r1 + HALO))):
            strip = {k: np.full((HALO, c1 - c0 + 2 * HALO), v.flat[0] if k != "z" else np.nan,
                                v.dtype) for k, v in self._arrays((1, 1)).items()}
            lo, hi = max(c0 - HALO, 0), min(c1 + HALO, C)
            for n, r in enumerate(rows):
                if 0 <= r < R:
                    k = p.hrow_at[r]
                    for key in strip:
                        strip[key][n, lo - (c0 - HALO):hi - (c0 - HALO)] = self.h[key][k, lo:hi]
            out[name] = strip
        for name, cols in (("left", range(c0 - HALO, c0)), ("right", range(c1, c1 + HALO))):
            strip = {k: np.full((r1 - r0, HALO), v.flat[0] if k != "z" else np.nan, v.dtype)
                     for k, v in self._arrays((1, 1)).items()}
            for n, c in enumerate(cols):
                if 0 <= c < C:
                    k = p.vcol_at[c]
                    for key in strip:
                        strip[key][:, n] = self.v[key][r0:r1, k]
            out[name] = strip
        return out

    def store(self, i, j, ring, labels=False):
        """Write block ``(i, j)``'s ``ring`` into the bands; the changed cells as ``(rows,
        cols, distances)``."""
        p = self.plan
        r0, r1, c0, c1 = p.window(i, j)
        rows, cols, dists = [], [], []
        key = "l" if labels else "d"
        for band, at, lines, axis in ((self.h, p.hrow_at, range(r0, r1), 0),
                                      (self.v, p.vcol_at, range(c0, c1), 1)):
            for x in lines:
                k = at[x]
                if k < 0:
                    continue
                if axis == 0:
                    dst = (k, slice(c0, c1))
                    src = (x - r0, slice(None))
                else:
                    dst = (slice(r0, r1), k)
                    src = (slice(None), x - c0)
                new = ring[key][src]
                old = band[key][dst]
                with np.errstate(invalid="ignore"):
                    changed = (new < old) & np.isfinite(ring["d"][src])
                if changed.any():
                    idx = np.flatnonzero(changed)
                    if axis == 0:
                        rows.append(np.full(idx.size, x)), cols.append(c0 + idx)
                    else:
                        rows.append(r0 + idx), cols.append(np.full(idx.size, x))
                    dists.append(ring["d"][src][idx])
                for name in ("z", "f", "d", "l"):
                    band[name][dst] = ring[name][src]
        if not rows:
            e = np.empty(0, np.int64)
            return e, e, np.empty(0)
        return np.concatenate(rows), np.concatenate(cols), np.concatenate(dists)


@contextlib.contextmanager
def _workspace(n):
    """Window arrays of ``n`` cells for one solve, in a borrowed buffer the threads share
    (fresh block-sized arrays cost page faults as much as the solve's passes)."""
    with borrow_buffer("blocked-window", 25 * n) as buf:
        yield {"d": buf[:8 * n].view(np.float64), "l": buf[8 * n:16 * n].view(np.int64),
               "z": buf[16 * n:20 * n].view(np.float32),
               "f": buf[20 * n:24 * n].view(np.float32), "b": buf[24 * n:25 * n]}


def _halo_cells(halo, th, tw, W):
    """The halo cells' flat window indices (increasing) and their ``z, f, d, l``."""
    o, h = _OFF, HALO
    parts = (("top", np.arange(o - h, o), np.arange(o - h, o + tw + h)),
             ("bottom", np.arange(o + th, o + th + h), np.arange(o - h, o + tw + h)),
             ("left", np.arange(o, o + th), np.arange(o - h, o)),
             ("right", np.arange(o, o + th), np.arange(o + tw, o + tw + h)))
    idx = np.concatenate([np.add.outer(rs * W, cs).ravel() for _, rs, cs in parts])
    order = np.argsort(idx, kind="stable")
    vals = {k: np.concatenate([halo[name][k].ravel() for name, _, _ in parts])[order]
            for k in ("z", "f", "d", "l")}
    return idx[order], vals


def _window(ws, z, f, halo, state_d, state_l, labels, halo_labels=False):
    """A block's padded flat window (block, halo, NaN frame) in the workspace ``ws``:
    ``(zp, fp, dist, label, (H, W), halo_idx, halo_ok, halo_vals)``, ``dist`` -inf at
    non-vertices, the state inside, at the halo +inf (distance stage) or its distances."""
    th, tw = z.shape
    H, W = th + 2 * _OFF, tw + 2 * _OFF
    zp, dist, label = ws["z"], ws["d"], ws["l"]
    fp = ws["f"] if f is not None else None
    none = NO_LABEL if labels else 0
    fr = _FRAME
    for a, fill in ((zp, np.nan), (fp, np.nan), (dist, -np.inf), (label, none)):
        if a is None:
            continue
        a2 = a.reshape(H, W)
        a2[:fr], a2[H - fr:], a2[:, :fr], a2[:, W - fr:] = fill, fill, fill, fill
    # the block's cells: inputs, state (none yet: +inf, or -inf for labels), -inf at
    # non-vertices (and, for labels, at cells without a finite distance)
    inner = (slice(_OFF, _OFF + th), slice(_OFF, _OFF + tw))
    zp.reshape(H, W)[inner] = z
    d = dist.reshape(H, W)[inner]
    d[...] = state_d if state_d is not None else (-np.inf if labels else np.inf)
    with borrow_buffer("blocked-mask", 2 * th * tw) as buf:  # no fresh pages a visit
        off, more = (buf[k * th * tw:(k + 1) * th * tw].view(bool).reshape(th, tw)
                     for k in (0, 1))
        np.isnan(z, out=off)
        if fp is not None:
            fp.reshape(H, W)[inner] = f
            off |= np.isnan(f, out=more)
        if labels:
            off |= np.logical_not(np.isfinite(d, out=more), out=more)
        np.copyto(d, -np.inf, where=off)
    label.reshape(H, W)[inner] = (state_l if state_l is not None else none) if labels else 0
    idx, hv = _halo_cells(halo, th, tw, W)
    zp[idx] = hv["z"]
    valid = ~np.isnan(hv["z"])
    if fp is not None:
        fp[idx] = hv["f"]
        valid &= ~np.isnan(hv["f"])
    ok = valid & np.isfinite(hv["d"])
    if labels:
        dist[idx] = np.where(ok, hv["d"], -np.inf)
        label[idx] = hv["l"] if halo_labels else NO_LABEL
    else:
        dist[idx] = np.where(valid, np.inf, -np.inf)
        label[idx] = 0
    return zp, fp, dist, label, (H, W), idx, ok, hv


def _offsets(W):
    return (ARC_DR * W + ARC_DC).astype(np.int64)


def _solve_window(ws, spec, stage, z, f, state_d, state_l, halo, sources):
    """:func:`solve_block`'s work in the workspace ``ws``: ``(state_d, state_l, settled)``."""
    th, tw = z.shape
    labels = stage != 1
    zp, fp, dist, label, (H, W), hidx, hok, hv = _window(ws, z, f, halo, state_d, state_l,
                                                         labels)
    inner = (slice(_OFF, _OFF + th), slice(_OFF, _OFF + tw))
    rows, cols, costs, idx = sources
    src = (np.asarray(rows, np.int64) + _OFF) * W + np.asarray(cols, np.int64) + _OFF
    sel = hok & (hv["l"] != NO_LABEL) if labels else hok
    seeds = np.concatenate([hidx[sel], src])
    seed_d = np.concatenate([hv["d"][sel], np.asarray(costs, np.float64)])
    if labels:
        seed_l = np.concatenate([hv["l"][sel], np.asarray(idx, np.int64) << HOPS_BITS])
    else:
        seed_l = np.zeros(seeds.size, np.int64)
    fixed, limit = (True, math.inf) if labels else (False, spec.limit)
    fk = fp if fp is not None else np.ones(1, np.float32)
    offs = _offsets(W)
    plan = None
    if spec.model != 0 and seeds.size:
        # the window as the in-core kernels' padded grid (a frame of 2) for the plan's bounds
        inner2 = (slice(HALO, H - HALO), slice(HALO, W - HALO))
        plan = bucket_plan(zp.reshape(H, W)[inner2], None if fp is None else
                           fp.reshape(H, W)[inner2], spec.model, spec.codes, spec.lengths,
                           seed_d, zp, offs)
    if plan is not None:
        settled = sssp_buckets_cpu(zp, fk, spec.has_f, spec.model, spec.lengths, offs,
                                   spec.codes, dist, label, seeds, seed_d, seed_l, fixed,
                                   limit, *plan, ws["b"], _NO_TARGETS, 0, _NO_STOP)
    else:
        settled = sssp_cpu(zp, fk, spec.has_f, spec.model, spec.lengths, offs, spec.codes,
                           dist, label, seeds, seed_d, seed_l, fixed, limit, _NO_TARGETS, 0,
                           _NO_STOP)
    if stage == 2:  # unchanged: the ring carries the final distances
        new_d = state_d if state_d is not None else np.full(z.shape, -np.inf)
        new_l = _into(state_l, label.reshape(H, W)[inner])
    else:
        new_d, new_l = _into(state_d, dist.reshape(H, W)[inner]), None
    return new_d, new_l, settled


def solve_block(spec, stage, z, f, state_d, state_l, halo, sources):
    """One block task's solve, stage 1 (distances) or 2 (labels over tight arcs), from the
    block's state (None before its first solve), its :meth:`Bands.halo` and its ``sources``
    ``(rows, cols, costs, indices)`` in block coordinates: ``(state_d, state_l, ring,
    settled)``, ``state_l`` None in stage 1, ``ring`` for :meth:`Bands.store`."""
    th, tw = z.shape
    with _workspace((th + 2 * _OFF) * (tw + 2 * _OFF)) as ws:
        new_d, new_l, settled = _solve_window(ws, spec, stage, z, f, state_d, state_l, halo,
                                              sources)
    # read-only broadcasts where the ring has nothing to say (the bands copy what they read)
    ring = {"z": z, "f": f if f is not None else np.broadcast_to(np.float32(1), z.shape),
            "d": new_d, "l": new_l if new_l is not None else
            np.broadcast_to(np.int64(NO_LABEL), z.shape)}
    return new_d, new_l, ring, int(settled)


def _into(state, a):
    """``a`` copied into the block's ``state`` array where it can take it (no fresh pages),
    else a copy."""
    if state is not None and state.flags.writeable and state.shape == a.shape:
        state[...] = a
        return state
    return a.copy()


def block_outputs(spec, z, f, state_d, state_l, halo):
    """The block's ``(distance, allocation, backlink)`` from the final distances and labels
    of the block and its halo (:func:`terrain.grid._sssp_cpu.backlinks_cpu` on the window)."""
    th, tw = z.shape
    distance = np.empty((th, tw), np.float64)
    allocation = np.empty((th, tw), np.int32)
    backlink = np.empty((th, tw), np.uint8)
    hops = np.empty((th, tw), np.int32)
    with _workspace((th + 2 * _OFF) * (tw + 2 * _OFF)) as ws:
        zp, fp, dist, label, (H, W), _, _, _ = _window(ws, z, f, halo, state_d, state_l, True,
                                                        halo_labels=True)
        backlinks_cpu(zp, fp if fp is not None else np.ones(1, np.float32), spec.has_f,
                      spec.model, spec.lengths, _offsets(W), spec.codes, dist, label, th, tw,
                      _OFF, backlink, distance, allocation, hops)
    return distance, allocation, backlink


@dataclass
class BlockedDriver:
    """The rounds of the blocked algorithm: :meth:`run` calls ``execute(stage, blocks)``
    with ``(i, j, halo, sources)`` items, which solves each block (:func:`solve_block`,
    storing its state) and returns their rings; a block becomes pending only when an arc
    from a neighbour's changed ring improves it."""

    plan: BlockPlan
    spec: BlockedSpec
    sources: tuple
    batch: int = 2
    stats: dict = field(default_factory=dict)

    def __post_init__(self):
        self.bands = Bands(self.plan)
        rows, cols, costs = (np.asarray(a) for a in self.sources)
        self._src = {}
        for n, (r, c, cost) in enumerate(zip(rows.tolist(), cols.tolist(), costs.tolist())):
            self._src.setdefault(self.plan.block_of(r, c), []).append((r, c, cost, n))

    def _band_cells(self, r, c):
        """``(z, f, d, l)`` of ring cells ``(r, c)`` (arrays) from the bands."""
        p = self.plan
        hk = p.hrow_at[r]
        inh = hk >= 0
        out = []
        for key in ("z", "f", "d", "l"):
            v = self.bands.v[key][r, p.vcol_at[c]]
            h = self.bands.h[key][hk, c]
            out.append(np.where(inh, h, v))
        return out

    def _improved(self, i, j, rs, cs, stage):
        """``{neighbour block: smallest improved distance}`` of the neighbours an arc from the
        changed ring cells ``(rs, cs)`` improves (stage 1: ``d_u + w < d_v``; stage 2: a tight
        arc with ``l_u + 1 < l_v``; a block never solved whenever an arc reaches it)."""
        out = {}
        if rs.size == 0:
            return out
        p, sp = self.plan, self.spec
        R, C = p.shape
        zu, fu, du, lu = self._band_cells(rs, cs)
        for k in sp.codes.tolist():
            vr, vc = rs + ARC_DR[k], cs + ARC_DC[k]
            ok = (vr >= 0) & (vr < R) & (vc >= 0) & (vc < C)
            ok &= (vr // p.side != i) | (vc // p.side != j)
            if not ok.any():
                continue
            vr, vc = vr[ok], vc[ok]
            zv, fv, dv, lv = self._band_cells(vr, vc)
            passable = np.ones(vr.size, bool)
            if k < 8:
                fac = arc_factor_np(fu[ok], fv)
            else:  # the cells it passes between lie within 1 of the edge crossed: ring cells
                (ra, ca), (rb, cb) = knight_mid(k)
                za, fa, _, _ = self._band_cells(rs[ok] + ra, cs[ok] + ca)
                zb, fb, _, _ = self._band_cells(rs[ok] + rb, cs[ok] + cb)
                passable = ~(np.isnan(za) | np.isnan(fa) | np.isnan(zb) | np.isnan(fb))
                fac = arc_factor_np(fu[ok], fv, fa, fb)
            w = arc_costs_np(zu[ok], zv, fac, k, sp.model, sp.lengths)
            nd = du[ok] + w
            with np.errstate(invalid="ignore"):
                if stage == 1:
                    better = (nd < dv) & (nd <= sp.limit)
                else:
                    better = (nd == dv) & np.isfinite(dv) & (lu[ok] + 1 < lv)
                better &= ~np.isnan(zv) & ~np.isnan(fv) & passable
                if stage == 1:  # a block never solved: its ring is unknown, try it
                    unknown = np.isnan(zv) & (dv == np.inf) & (du[ok] <= sp.limit)
                    better |= unknown
                    nd = np.where(unknown, du[ok], nd)
            for n in np.flatnonzero(better):
                blk = (int(vr[n]) // p.side, int(vc[n]) // p.side)
                out[blk] = min(out.get(blk, np.inf), float(nd[n]))
        return out

    def _passing_tails(self, i, j):
        """``[(block, rows, cols)]``: the reached ring cells of other blocks beside block
        ``(i, j)`` (within 1 cell), after its first solve made its cells known: a knight arc
        from one of them may pass between cells of ``(i, j)``, and it exists only now that
        they are known vertices (none without knight arcs)."""
        if not np.any(self.spec.codes >= 8):
            return []
        p = self.plan
        R, C = p.shape
        r0, r1, c0, c1 = p.window(i, j)
        across, down = np.arange(c0 - 1, c1 + 1), np.arange(r0, r1)
        rr = np.concatenate([np.full(across.size, r0 - 1), np.full(across.size, r1), down, down])
        cc = np.concatenate([across, across, np.full(down.size, c0 - 1), np.full(down.size, c1)])
        inside = (rr >= 0) & (rr < R) & (cc >= 0) & (cc < C)
        rr, cc = rr[inside], cc[inside]
        reached = np.isfinite(self._band_cells(rr, cc)[2])
        rr, cc = rr[reached], cc[reached]
        blocks = (rr // p.side) * p.blocks[1] + cc // p.side
        return [(int(b) // p.blocks[1], int(b) % p.blocks[1], rr[blocks == b], cc[blocks == b])
                for b in np.unique(blocks)]

    def block_sources(self, i, j):
        """``(rows, cols, costs, indices)`` of the sources in block ``(i, j)``, in block
        coordinates."""
        r0, _, c0, _ = self.plan.window(i, j)
        s = self._src.get((i, j), [])
        return (np.array([x[0] - r0 for x in s], np.int64),
                np.array([x[1] - c0 for x in s], np.int64),
                np.array([x[2] for x in s], np.float64), np.array([x[3] for x in s], np.int64))

    def run(self, execute, stage):
        """Rounds of ``stage`` until no block is pending; returns the visits per block."""
        plan = self.plan
        nr, nc = plan.blocks
        keys = np.full((nr, nc), np.inf)
        for (i, j), s in self._src.items():
            keys[i, j] = min(x[2] for x in s)
        visits = np.zeros((nr, nc), np.int32)
        if stage == 2:
            self.bands.reset_labels()
        rounds = settled = 0
        t0 = time.perf_counter()
        while True:
            pending = np.flatnonzero(np.isfinite(keys))
            if pending.size == 0:
                break
            order = pending[np.argsort(keys.reshape(-1)[pending], kind="stable")]
            take = [divmod(int(b), nc) for b in order[:max(1, self.batch)]]
            for i, j in take:
                keys[i, j] = np.inf
                visits[i, j] += 1
            results = execute(stage, [(i, j, self.bands.halo(i, j), self.block_sources(i, j))
                                      for i, j in take])
            rounds += 1
            for (i, j), (ring, n) in zip(take, results):
                settled += n
                rs, cs, _ = self.bands.store(i, j, ring, labels=stage == 2)
                tails = [(i, j, rs, cs)]
                if stage == 1 and visits[i, j] == 1:
                    tails += self._passing_tails(i, j)
                for ti, tj, trs, tcs in tails:
                    for (a, b), key in self._improved(ti, tj, trs, tcs, stage).items():
                        keys[a, b] = min(keys[a, b], key)
        self.stats[f"stage{stage}"] = {
            "rounds": rounds, "visits": int(visits.sum()), "settled": int(settled),
            "max_visits": int(visits.max(initial=0)),
            "blocks_solved": int(np.count_nonzero(visits)),
            "seconds": round(time.perf_counter() - t0, 6)}
        return visits


class MemoryBlocks:
    """Block states held in memory (the in-memory driver's, and the tests'): ``execute`` for
    :meth:`BlockedDriver.run` and the outputs."""

    def __init__(self, plan, spec, z, f):
        self.plan, self.spec, self.z, self.f = plan, spec, z, f
        self.d, self.l = {}, {}

    def block(self, i, j):
        r0, r1, c0, c1 = self.plan.window(i, j)
        return self.z[r0:r1, c0:c1], None if self.f is None else self.f[r0:r1, c0:c1]

    def execute(self, stage, blocks):
        out = []
        for i, j, halo, srcs in blocks:
            z, f = self.block(i, j)
            d, l, ring, n = solve_block(self.spec, stage, z, f, self.d.get((i, j)),
                                        self.l.get((i, j)), halo, srcs)
            self.d[(i, j)] = d
            if l is not None:
                self.l[(i, j)] = l
            out.append((ring, n))
        return out


def blocked_sssp(dem, sources, start_costs=None, *, cost="absdiff", friction=None,
                 connectivity=8, cellsize=(1.0, 1.0), max_cost=None, side=512, batch=2,
                 backend=None):
    """Cost distance, allocation and backlinks by the blocked algorithm, in memory (CPU only):
    :func:`terrain.grid.sssp.grid_sssp`'s arguments and results (``hops`` None), plus the
    block ``side`` and the blocks per round ``batch``.

    >>> import numpy as np
    >>> r = blocked_sssp(np.ones((5, 9), np.float32), [(2, 4)], cost="friction",
    ...                  friction=np.ones((5, 9), np.float32), side=4)
    >>> r.distance[2].tolist()
    [4.0, 3.0, 2.0, 1.0, 0.0, 1.0, 2.0, 3.0, 4.0]
    """
    t0 = time.perf_counter()
    be = get_backend(backend)
    if be.is_gpu:
        raise InputError("the blocked algorithm runs on the CPU only")
    z, f, valid, model, codes, lengths = prepare_grid(dem, friction, cost, connectivity, cellsize)
    rows, cols, costs = check_sources(sources, valid, start_costs)
    spec = BlockedSpec(model, codes, lengths, f is not None, check_max_cost(max_cost))
    plan = BlockPlan(z.shape, side)
    driver = BlockedDriver(plan, spec, (rows, cols, costs), batch=batch)
    mem = MemoryBlocks(plan, spec, z, f)
    v1 = driver.run(mem.execute, 1)
    driver.run(mem.execute, 2)
    distance = np.full(z.shape, np.nan)
    allocation = np.full(z.shape, -1, np.int32)
    backlink = np.full(z.shape, 255, np.uint8)
    for i in range(plan.blocks[0]):
        for j in range(plan.blocks[1]):
            r0, r1, c0, c1 = plan.window(i, j)
            if v1[i, j] == 0:
                continue
            zb, fb = mem.block(i, j)
            distance[r0:r1, c0:c1], allocation[r0:r1, c0:c1], backlink[r0:r1, c0:c1] = \
                block_outputs(spec, zb, fb, mem.d[(i, j)], mem.l.get((i, j)),
                              driver.bands.halo(i, j))
    stats = dict(driver.stats, blocks=int(np.prod(plan.blocks)), side=plan.side,
                 seconds=time.perf_counter() - t0, backend="cpu", algorithm="blocked")
    return GridSSSPResult(distance, allocation, backlink, None, stats)
