"""The GPU side of :mod:`terrain.hydrology.flow`: the ``_flow.cu`` kernels behind the CPU
table's calls (blocks in from the host or the device, out on the device, where an in-core
run keeps them), the CPU's bits (docs/hydrology.md, "On the GPU").
"""

from pathlib import Path

import numpy as np

from ..backend import count_nonzero, get_backend
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
#: one block, given the DEM on the host) at its peak, the flats' labels: padded elevations
#: (4), codes (1), away and towards (8), the labels' grid (4), and 4 + 4 for each flat cell
#: (its index and its root), the cell lists found a band of rows at a time. The 10-ft size
#: (3.54·10⁹ cells, a quarter of them flat) peaked at 20.3 (71.8 GB; 32 before its lists were
#: 32-bit and the DEM's second copy stayed on the host): it ran so on an H200 of which another
#: process held all but an 80 GB H100's 84 GB
DEVICE_BYTES_PER_CELL = 20


def flow_fits_on_device(shape, backend=None, headroom=0.9):
    """True when the flow of a grid of ``shape`` runs whole on the backend's device: its
    padded block of at most :data:`MAX_CELLS` cells, :data:`DEVICE_BYTES_PER_CELL` a cell
    within ``headroom`` of its free memory (:meth:`terrain.backend.Backend.fits`)."""
    return get_backend(backend).fits((int(shape[0]) + 4, int(shape[1]) + 4),
                                     DEVICE_BYTES_PER_CELL, headroom, MAX_CELLS)


#: cells of a band of rows in :func:`_cells_where`: its bool masks and int64 indices take at
#: most 1.5 GB, where the whole grid's took about 5 bytes a cell (a quarter of them flat)
_BAND_CELLS = 1 << 27


def _cells_where(cp, R, C, test, out=None, margin=0):
    """The row-major indices (uint32) of the cells of an ``R`` x ``C`` block where
    ``test(r0, r1)`` (a new bool array of rows ``r0:r1``) holds, ``margin`` cells or more
    from the block's border, found a band of rows at a time; into ``out`` (returning how
    many) or a new array."""
    rows = max(1, _BAND_CELLS // max(C, 1))
    parts, n = [], 0
    for r0 in range(0, R, rows):
        band = test(r0, min(R, r0 + rows))
        if margin:
            band[:, :margin] = False
            band[:, C - margin:] = False
            band[:max(0, margin - r0)] = False
            band[max(0, R - margin - r0):] = False
        idx = cp.flatnonzero(band)
        idx += r0 * C
        if out is None:
            parts.append(idx.astype(cp.uint32))
        else:
            out[n:n + idx.size] = idx
        n += int(idx.size)
    if out is not None:
        return n
    return cp.concatenate(parts) if parts else cp.empty(0, cp.uint32)


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
        """The interior's flat cells (uint32 indices, row-major)."""
        return _cells_where(self.cp, R, C, lambda r0, r1: code_d[r0:r1] == 254, margin=2)

    def flat_distances(self, zp, code, halo_a, halo_t, step):
        """The away and towards BFS distances over the flats, round by round on a frontier
        (rounds are enqueued without waiting; the host looks every ``_CHECK`` rounds). No
        halos (None): a block that holds its flats whole."""
        cp = self.cp
        R, C = zp.shape
        _check_cells(R, C)
        z = cp.asarray(zp, cp.float32)
        code_d = cp.asarray(code)
        size = max(1, count_nonzero(code_d == 254))
        stamp = cp.full(R * C, -1, cp.int32)
        fronts = (cp.empty(size, cp.uint32), cp.empty(size, cp.uint32))
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
            seeds = _cells_where(cp, R, C, lambda r0, r1: (code_d[r0:r1] == 254)
                                 & (dist[r0:r1] < _INF), fronts[0])
            counts[0].fill(seeds)
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
        # a component's root is its first cell: in row-major order, as the cells are
        uniq = cells[roots == cells]
        labels = label.view(cp.int32)  # the grid of labels takes the indices' memory
        labels.fill(0)
        away = cp.asarray(away).ravel()
        maxa = cp.zeros(int(uniq.size) + 1, cp.int32)
        for s in range(0, int(cells.size), _BAND_CELLS):  # int64 temporaries a band at a time
            c = cells[s:s + _BAND_CELLS]
            lab = cp.searchsorted(uniq, roots[s:s + _BAND_CELLS]).astype(cp.int32) + 1
            labels[c] = lab
            a = away[c]
            cp.maximum.at(maxa, lab, cp.where(a < _INF, a, 0).astype(cp.int32))
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

        # interior cells, not nodata, nothing flowing in
        sources = _cells_where(cp, R, C, lambda r0, r1: (d[r0:r1] != 255)
                               & (indeg[r0:r1] == 0), margin=1)
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
