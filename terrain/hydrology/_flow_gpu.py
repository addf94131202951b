"""The GPU side of :mod:`terrain.hydrology.flow`: the ``_flow.cu`` kernels behind the CPU
table's calls (blocks in from the host or the device, out on the device, where an in-core
run keeps them), the CPU's bits (docs/hydrology.md, "On the GPU").
"""

from pathlib import Path

import numpy as np

from ..backend import count_nonzero
from ..errors import InputError
from ._neighbours import NB_DC, NB_DR

__all__ = ["GpuOps", "MAX_CELLS", "DEVICE_BYTES_PER_CELL", "flow_fits_on_device"]

_BLOCK = 256
_CHECK = 32  # frontier rounds between the host's looks at the frontier's size
_INF = 2**31 - 1
#: the most cells of a block: the flats' labels (its cell indices) and frontier counts are
#: unsigned 32-bit
MAX_CELLS = 2**32 - 1
#: device bytes a cell of a grid's flow in core (flow_directions and flow_accumulation of
#: one block) at its peak, the flats' labels: padded elevations (4), codes (1), away and
#: towards (8), the labels' cell indices and numbers (8), with a quarter of the cells flat
#: (their index lists, 28 a flat cell). The 10-ft size's (3.5·10⁹ cells, 25 % flat) ran so
#: on an H200 (139 GB free; CuPy's pool, reusing its blocks, reserved all of it)
DEVICE_BYTES_PER_CELL = 32


def flow_fits_on_device(shape, backend=None, headroom=0.9):
    """True when the flow of a grid of ``shape`` runs whole on the backend's device: its
    padded block of at most :data:`MAX_CELLS` cells, :data:`DEVICE_BYTES_PER_CELL` a cell
    within ``headroom`` of its free memory (:func:`terrain.grid.mst_device.fits_on_device`)."""
    from ..grid.mst_device import fits_on_device
    return fits_on_device((int(shape[0]) + 4, int(shape[1]) + 4), backend, headroom,
                          per_cell=DEVICE_BYTES_PER_CELL, max_cells=MAX_CELLS)


def _check_cells(R, C):
    if R * C > MAX_CELLS:
        raise InputError(f"flow: a {R} x {C} block is more than the device's flat kernels "
                         f"index (at most {MAX_CELLS} cells)")


class GpuOps:
    """The ``_flow.cu`` kernels of one backend."""

    def __init__(self, backend):
        self.be = backend
        self.cp = backend.xp
        self.mod = backend.cuda_module(Path(__file__).with_name("_flow.cu"))

    def _launch(self, name, n, *args):
        grid = (max(1, (int(n) + _BLOCK - 1) // _BLOCK),)
        self.mod.get_function(name)(grid, (_BLOCK,), args)

    def classify(self, zp, op, edge_outlets, dist, step):
        cp = self.cp
        R, C = zp.shape
        z = cp.asarray(zp, cp.float32)
        o = cp.asarray(op, cp.uint8) if op is not None else cp.zeros(1, cp.uint8)
        code = cp.full((R, C), 255, cp.uint8)
        self._launch("classify", R * C, z, o, np.int32(op is not None),
                     np.int32(bool(edge_outlets)), cp.asarray(dist, cp.float64),
                     np.int32(step), np.int32(R), np.int32(C), code)
        return code

    def _flat_cells(self, code_d, R, C):
        cp = self.cp
        inner = cp.zeros((R, C), bool)
        inner[2:R - 2, 2:C - 2] = True
        return cp.flatnonzero(inner.ravel() & (code_d.ravel() == 254))  # int64

    def flat_distances(self, zp, code, halo_a, halo_t, step):
        """The away and towards BFS distances over the flats, round by round on a frontier
        (rounds are enqueued without waiting; the host looks every ``_CHECK`` rounds). No
        halos (None): a block that holds its flats whole."""
        cp = self.cp
        R, C = zp.shape
        _check_cells(R, C)
        z = cp.asarray(zp, cp.float32)
        code_d = cp.asarray(code)
        flat = code_d == 254
        size = max(1, count_nonzero(flat))
        stamp = cp.full(R * C, -1, cp.int32)
        fronts = (cp.empty(size, cp.int64), cp.empty(size, cp.int64))
        counts = (cp.zeros(1, cp.uint32), cp.zeros(1, cp.uint32))
        grid = (min(4096, (size + _BLOCK - 1) // _BLOCK),)
        rnd = 0
        out = []
        for which, halo in ((0, halo_a), (1, halo_t)):
            dist = cp.empty((R, C), cp.int32)
            self._launch("flat_seed", R * C, z, code_d,
                         dist if halo is None else cp.asarray(halo, cp.int32),
                         np.int32(halo is not None), np.int32(which), np.int32(step),
                         np.int32(R), np.int32(C), dist)
            seeds = cp.flatnonzero(flat.ravel() & (dist.ravel() < _INF))
            fronts[0][:seeds.size] = seeds
            counts[0].fill(seeds.size)
            cur = 0
            while True:
                for _ in range(_CHECK):
                    counts[1 - cur].fill(0)
                    self.mod.get_function("flat_frontier")(
                        grid, (_BLOCK,), (fronts[cur], counts[cur], code_d, np.int32(step),
                                          np.int32(R), np.int32(C), np.int32(rnd), dist,
                                          stamp, fronts[1 - cur], counts[1 - cur]))
                    cur, rnd = 1 - cur, rnd + 1
                if not int(counts[cur].get()[0]):
                    break
            out.append(dist)
        return out[0], out[1]

    def flat_labels(self, code, away, step):
        cp = self.cp
        R, C = code.shape
        code_d = cp.asarray(code)
        _check_cells(R, C)
        cells = self._flat_cells(code_d, R, C)
        label = cp.arange(R * C, dtype=cp.uint32)  # label_min's cell indices
        changed = cp.zeros(1, cp.int32)
        while cells.size:
            changed.fill(0)
            self._launch("label_min", cells.size, cells, np.int64(cells.size), code_d,
                         np.int32(step), np.int32(R), np.int32(C), label, changed)
            self._launch("label_jump", cells.size, cells, np.int64(cells.size), label)
            if not int(changed.get()[0]):
                break
        roots = label[cells]
        del label  # before the labels' grid is made: a grid in core peaks here
        uniq = cp.unique(roots)  # sorted: row-major order of each component's first cell
        lab = cp.searchsorted(uniq, roots).astype(cp.int32) + 1
        labels = cp.zeros(R * C, cp.int32)
        labels[cells] = lab
        a = cp.asarray(away).ravel()[cells]
        a = cp.where(a < _INF, a, 0).astype(cp.int32)
        maxa = cp.zeros(int(uniq.size) + 1, cp.int32)
        cp.maximum.at(maxa, lab, a)
        return labels.reshape(R, C), maxa

    def flat_directions(self, zp, code, away, towards, labels, height, step):
        cp = self.cp
        R, C = zp.shape
        out = cp.asarray(code).copy()
        self._launch("flat_directions", R * C, cp.asarray(zp, cp.float32), cp.asarray(code),
                     cp.asarray(away, cp.int32), cp.asarray(towards, cp.int32),
                     cp.asarray(labels, cp.int32), cp.asarray(height, cp.int32),
                     np.int32(step), np.int32(R), np.int32(C), out)
        return out

    def accumulate(self, dp, weights, ext):
        cp = self.cp
        R, C = dp.shape
        d = cp.asarray(dp, cp.uint8)
        indeg = cp.zeros((R, C), cp.uint32)
        err = cp.zeros(1, cp.int32)
        self._launch("indegree", R * C, d, np.int32(R), np.int32(C), indeg, err)
        inner = cp.zeros((R, C), bool)
        inner[1:R - 1, 1:C - 1] = True
        sources = cp.flatnonzero(inner.ravel() & (d.ravel() != 255)
                                 & (indeg.ravel() == 0)).astype(cp.int64)
        del inner
        acc = cp.full((R, C), cp.nan, cp.float64)
        done = cp.zeros(1, cp.uint64)
        w = (cp.asarray(weights, cp.float64) if weights is not None
             else cp.zeros(1, cp.float64))
        self._launch("accumulate", sources.size, d, w, np.int32(weights is not None),
                     acc if ext is None else cp.asarray(ext, cp.float64),
                     np.int32(ext is not None), sources, np.int64(sources.size),
                     np.int32(R), np.int32(C), indeg, acc, done)
        return acc, None, int(done.get()[0]), int(err.get()[0])

    def exits(self, dp, order, done, out_index):
        """Pointer jumping to each interior cell's out-edge (its index) or outlet (-1)."""
        cp = self.cp
        R, C = dp.shape
        d = cp.asarray(dp).ravel()
        idx = cp.arange(R * C, dtype=cp.int64)
        k = cp.full(R * C, -1, cp.int64)
        for q in range(8):
            k[d == (1 << q)] = q
        nxt = idx + cp.asarray(NB_DR)[cp.maximum(k, 0)] * C + cp.asarray(NB_DC)[cp.maximum(k, 0)]
        oi = cp.asarray(out_index).ravel()
        inner = cp.zeros((R, C), bool)
        inner[1:R - 1, 1:C - 1] = True
        terminal = (k < 0) | (oi >= 0) | ~inner.ravel()
        val = cp.where(oi >= 0, oi, -1)
        nxt = cp.where(terminal, -1, nxt)
        while True:
            active = cp.flatnonzero(nxt >= 0)
            if active.size == 0:
                break
            p = nxt[active]
            ends = nxt[p] < 0
            val[active[ends]] = val[p[ends]]
            nxt[active] = cp.where(ends, -1, nxt[p])
        return val.reshape(R, C).get()
