"""GPU launcher of the in-core grid SSSP (kernels in ``_sssp.cu``); reached only with
``backend="gpu"`` from :mod:`terrain.grid.sssp`, which holds the conventions and the CPU twin.

Host round trips: one read of the next frontier's size per relaxation round (a few bytes);
the frontier itself never leaves the device.
"""

from pathlib import Path

import numpy as np

from .sssp import _HOPS_BITS, PAD, SSSPResult, _flat_seeds, _offsets

_BLOCK = 256
_INF_BITS = np.uint64(0x7FF0000000000000)
_NO_LABEL = np.uint64(0xFFFFFFFFFFFFFFFF)


def _module(be):
    here = Path(__file__).parent
    return be.cuda_module(here / "_sssp.cu", options=("-std=c++17", f"-I{here}"))


class _Grid:
    """The padded grid and the arc tables on the device."""

    def __init__(self, be, z, f, model, codes, lengths):
        cp = be.xp
        self.be, self.cp = be, cp
        self.shape = z.shape
        rows, cols = z.shape
        zp = np.full((rows + 2 * PAD, cols + 2 * PAD), np.nan, np.float32)
        zp[PAD:PAD + rows, PAD:PAD + cols] = z
        self.z = cp.asarray(zp.ravel())
        if f is not None:
            fp = np.full_like(zp, np.nan)
            fp[PAD:PAD + rows, PAD:PAD + cols] = f
            self.f = cp.asarray(fp.ravel())
        else:
            self.f = cp.ones(1, cp.float32)
        self.has_f = np.int32(f is not None)
        self.model = np.int32(model)
        self.lengths = cp.asarray(lengths, cp.float64)
        self.offs = cp.asarray(_offsets(cols), cp.int64)
        self.codes = cp.asarray(codes, cp.int32)
        self.nk = np.int32(len(codes))
        self.n = zp.size
        self.mod = _module(be)
        self.in_next = cp.zeros(self.n, cp.int32)
        self.counter = cp.zeros(1, cp.uint64)

    def arcs(self):
        return (self.z, self.f, self.has_f, self.model, self.lengths, self.offs, self.codes,
                self.nk)

    def iterate(self, kernel, frontier, extra_before, extra_after):
        """Relax frontiers with ``kernel`` until none is left."""
        cp = self.cp
        clear = self.mod.get_function("clear_flags")
        relax = self.mod.get_function(kernel)
        nxt = cp.empty(max(self.n, 1), cp.int64)
        n_front = int(frontier.size)
        cur = cp.empty(max(self.n, 1), cp.int64)
        cur[:n_front] = frontier
        rounds = 0
        while n_front > 0:
            grid = ((n_front + _BLOCK - 1) // _BLOCK,)
            clear(grid, (_BLOCK,), (cur, np.int64(n_front), self.in_next))
            self.counter.fill(0)
            relax(grid, (_BLOCK,), self.arcs() + extra_before
                  + (cur, np.int64(n_front), self.in_next, nxt, self.counter) + extra_after)
            n_front = int(self.counter.get()[0])
            cur, nxt = nxt, cur
            rounds += 1
        return rounds

    def labels(self, dist, label_cells, label_values):
        cp = self.cp
        label = cp.full(self.n, _NO_LABEL, cp.uint64)
        cells = cp.asarray(label_cells, cp.int64)
        label[cells] = cp.asarray(label_values, cp.uint64)
        rounds = self.iterate("labels_relax", cells, (dist, label), ())
        return label, rounds

    def finish(self, dist, label, stats):
        cp = self.cp
        rows, cols = self.shape
        n = rows * cols
        backlink = cp.empty(n, cp.uint8)
        distance = cp.empty(n, cp.float64)
        allocation = cp.empty(n, cp.int32)
        hops = cp.empty(n, cp.int32)
        self.mod.get_function("backlinks")(
            ((n + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
            self.arcs() + (dist, label, np.int64(rows), np.int64(cols), np.int32(PAD),
                           backlink, distance, allocation, hops))
        host = [cp.asnumpy(a).reshape(self.shape) for a in (distance, allocation, backlink, hops)]
        return SSSPResult(*host, stats=stats)


def _root_labels(seeds, seed_dist, seed_label, final_dist):
    """Per cell, the smallest seed label whose distance is the cell's final distance."""
    ok = seed_dist == final_dist
    cells, labels = seeds[ok], seed_label[ok].astype(np.uint64)
    order = np.lexsort((labels, cells))
    cells, labels = cells[order], labels[order]
    first = np.ones(cells.size, bool)
    first[1:] = cells[1:] != cells[:-1]
    return cells[first], labels[first]


def grid_sssp_gpu(be, z, f, valid, model, codes, lengths, rows, cols, costs, limit):
    """GPU twin of ``_grid_sssp_cpu`` (same arguments after checking)."""
    cp = be.xp
    g = _Grid(be, z, f, model, codes, lengths)
    seeds, seed_dist, seed_label = _flat_seeds(rows, cols, costs, z.shape[1])
    keep = seed_dist <= limit
    seeds, seed_dist, seed_label = seeds[keep], seed_dist[keep], seed_label[keep]
    # start distances: the minimum start cost per cell
    best = {}
    for c, d in zip(seeds.tolist(), seed_dist.tolist()):
        best[c] = min(d, best.get(c, np.inf))
    dist = cp.full(g.n, _INF_BITS, cp.uint64)
    start_cells = np.array(sorted(best), np.int64)
    if start_cells.size:
        start = np.array([best[c] for c in start_cells.tolist()], np.float64)
        dist[cp.asarray(start_cells)] = cp.asarray(start.view(np.uint64))
    rounds = g.iterate("sssp_relax", cp.asarray(start_cells), (dist,), (np.float64(limit),))
    final = cp.asnumpy(dist[cp.asarray(seeds)]).view(np.float64) if seeds.size else seed_dist
    cells, labels = _root_labels(seeds, seed_dist, seed_label, final)
    label, label_rounds = g.labels(dist, cells, labels)
    return g.finish(dist, label, {"rounds": rounds, "label_rounds": label_rounds,
                                  "queue": "frontier"})


def labels_from_distance_gpu(be, z, f, known, dist_in, model, codes, lengths, rows, cols,
                             seed_d, seed_labels):
    """GPU twin of the CPU branch of ``labels_from_distance``."""
    cp = be.xp
    g = _Grid(be, z, f, model, codes, lengths)
    r, c = z.shape
    dp = np.full((r + 2 * PAD, c + 2 * PAD), np.inf)
    dp[PAD:PAD + r, PAD:PAD + c] = np.where(known, dist_in, np.inf)
    dist = cp.asarray(dp.ravel().view(np.uint64))
    seeds, _, _ = _flat_seeds(rows, cols, seed_d, z.shape[1])
    seed_lab = (seed_labels[:, 0].astype(np.int64) << _HOPS_BITS) | seed_labels[:, 1]
    finite = np.isfinite(seed_d)
    final = dp.ravel()[seeds]
    cells, labels = _root_labels(seeds[finite], seed_d[finite], seed_lab[finite],
                                 final[finite])
    label, label_rounds = g.labels(dist, cells, labels)
    return g.finish(dist, label, {"label_rounds": label_rounds})
