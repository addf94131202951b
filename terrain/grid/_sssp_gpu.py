"""The in-core grid SSSP on the GPU: :class:`GpuOps`, the GPU side of :mod:`terrain.grid.sssp`'s
kernel table (kernels in ``_sssp.cu``).

Distances by near-far (Davidson et al., IPDPS 2014) on the implicit grid: the near pile is
relaxed (``atomicMin`` on the distance bits) until empty, then the threshold grows by
``delta`` and the far pile is split; the loop control runs on the device (persistent kernels,
falling back to one launch a step when not every block is resident). Labels ``allocation <<
32 | hops`` then propagate over tight arcs, and ``backlinks`` runs once per cell. Every
relaxation order ends at the same least fixed point, so the bits are the CPU's whatever
``delta`` is (:func:`near_far_delta`; docs/cost-distance.md, "Algorithms").
"""

import math
import time
from pathlib import Path

import numpy as np

from .._transfer import to_host
from ._sssp_frame import HOPS_BITS, PAD, GridSSSPResult, flat_seeds, offsets
from .costs import ARC_DC, ARC_DR, arc_costs_np, arc_factor_np, knight_mid

__all__ = ["GpuOps", "mean_arc_cost", "near_far_delta", "download", "DELTA_FACTOR"]

_BLOCK = 256
_BATCH = 64  # launches per host check (and per captured graph)
_INF_BITS = np.uint64(0x7FF0000000000000)
_NO_LABEL = np.uint64(0xFFFFFFFFFFFFFFFF)
#: Multiplier of Davidson's ``32 w / d`` bucket width (docs/cost-distance.md, "Design notes")
DELTA_FACTOR = 2.0
_SAMPLE_SIDE = 256

# ctl slots (the C_* of _sssp.cu)
C_NNEAR, C_NFAR, C_CUR, C_FCUR, C_STEP, C_EPOCH, C_T, C_TOLD = 0, 2, 4, 5, 6, 7, 8, 9
C_FARMIN, C_SPLIT, C_DONE, C_BLOCKS, C_DELTA, C_NSTEPS, C_NSPLITS, C_NPROC = range(10, 18)
_CTL_SIZE = 24


def _module(be):
    here = Path(__file__).parent
    return be.cuda_module(here / "_sssp.cu", options=("-std=c++17", f"-I{here}"))


def _lattice(n, side):
    """At most ``side`` distinct indices spread evenly over ``range(n)``, increasing (as
    ``np.unique`` of them, which would import ``numpy.ma`` into the process)."""
    i = np.linspace(0, n - 1, min(n, side)).astype(np.int64)
    return i[np.concatenate(([True], i[1:] != i[:-1]))]


def mean_arc_cost(z, f, model, codes, lengths, side=_SAMPLE_SIDE):
    """Mean of the finite costs of the arcs leaving a lattice of at most ``side²`` cells of
    the unpadded ``z`` (and ``f``); NaN when no arc is sampled.

    >>> z = np.array([[0, 1, 3], [0, 5, 3]], np.float32)
    >>> float(mean_arc_cost(z, None, 0, np.array([0]), np.ones(16)))  # |1-0|, |3-1|, |5-0|, |3-5|
    2.5
    """
    rows, cols = z.shape
    r, c = _lattice(rows, side), _lattice(cols, side)
    rr, cc = np.meshgrid(r, c, indexing="ij")
    rr, cc = rr.ravel(), cc.ravel()
    total, count = 0.0, 0
    for k in np.asarray(codes).tolist():
        r2, c2 = rr + int(ARC_DR[k]), cc + int(ARC_DC[k])
        inside = (r2 >= 0) & (r2 < rows) & (c2 >= 0) & (c2 < cols)
        a, b, a2, b2 = rr[inside], cc[inside], r2[inside], c2[inside]
        one = np.float32(1.0)
        fu = one if f is None else f[a, b]
        fv = one if f is None else f[a2, b2]
        if k < 8 or f is None:
            fac = arc_factor_np(fu, fv)
        else:  # the cells a knight arc passes between (in the grid: between its ends)
            (ra, ca), (rb, cb) = knight_mid(k)
            fac = arc_factor_np(fu, fv, f[a + ra, b + ca], f[a + rb, b + cb])
        w = arc_costs_np(z[a, b], z[a2, b2], fac, k, model, lengths)
        w = w[np.isfinite(w)]
        total += float(w.sum())
        count += w.size
    return total / count if count else math.nan


def near_far_delta(mean_cost, degree, factor=None):
    """Bucket width of the near-far queue: ``factor * 32 / degree * mean_cost``; ``inf``
    (one bucket: plain label-correcting) when the mean cost is 0, not finite or unknown.

    >>> near_far_delta(0.5, 8, factor=1), near_far_delta(0.0, 8), near_far_delta(2.0, 4, 0.5)
    (2.0, inf, 8.0)
    """
    factor = DELTA_FACTOR if factor is None else float(factor)
    if not (math.isfinite(mean_cost) and mean_cost > 0 and factor > 0):
        return math.inf
    delta = factor * 32.0 / degree * mean_cost
    return delta if delta > 0 and math.isfinite(delta) else math.inf


class _Grid:
    """The padded grid and the arc tables on the device."""

    def __init__(self, be, z, f, model, codes, lengths):
        cp = be.xp
        self.be, self.cp = be, cp
        self.shape = z.shape
        self.mod = _module(be)
        self.z = self._padded(np.ascontiguousarray(z, np.float32))
        if f is not None:
            self.f = self._padded(np.ascontiguousarray(f, np.float32))
        else:
            self.f = cp.ones(1, cp.float32)
        self.has_f = np.int32(f is not None)
        self.model = np.int32(model)
        self.lengths = cp.asarray(lengths, cp.float64)
        self.offs = cp.asarray(offsets(z.shape[1]), cp.int64)
        self.codes = cp.asarray(codes, cp.int32)
        self.nk = np.int32(len(codes))
        self.n = int(self.z.size)
        dev = cp.cuda.Device()
        self.sms = int(dev.attributes["MultiProcessorCount"])
        self.blocks = self.sms * 4

    def _padded(self, a):
        """``a`` padded by PAD NaN cells on the device (flat float32)."""
        cp = self.cp
        rows, cols = a.shape
        out = cp.empty((rows + 2 * PAD) * (cols + 2 * PAD), cp.float32)
        self.mod.get_function("pad_grid")((self.blocks_for(out.size),), (_BLOCK,),
                                          (self.be.asarray(a), np.int64(rows), np.int64(cols),
                                           np.int32(PAD), out))
        return out

    @staticmethod
    def blocks_for(n):
        return max(1, min((n + _BLOCK - 1) // _BLOCK, 1 << 16))

    def arcs(self):
        return (self.z, self.f, self.has_f, self.model, self.lengths, self.offs, self.codes,
                self.nk)

    def sync(self):
        self.cp.cuda.Device().synchronize()

    # --- device-driven loops ---------------------------------------------------------------

    def drive(self, kernel, args, ctl, use_graph=True):
        """Launch ``kernel`` until ``ctl[C_DONE]`` in batches of :data:`_BATCH` (a CUDA graph
        where capture works), one read per batch: ``(launches, graph used)``."""
        cp = self.cp
        fn = self.mod.get_function(kernel)
        grid, block = (self.blocks,), (_BLOCK,)
        graph = None
        self.sync()  # the stream below does not wait for the default stream's work
        stream = cp.cuda.Stream(non_blocking=True)
        if use_graph:
            try:
                with stream:
                    stream.begin_capture()
                    try:
                        for _ in range(_BATCH):
                            fn(grid, block, args)
                    finally:
                        graph = stream.end_capture()
            except Exception:  # noqa: BLE001 - no capture here: plain launches
                graph = None
                stream = cp.cuda.Stream(non_blocking=True)
        launches = 0
        done = ctl[C_DONE:C_DONE + 1]
        host = np.zeros(1, np.uint64)
        while True:
            with stream:
                if graph is not None:
                    graph.launch(stream)
                else:
                    for _ in range(_BATCH):
                        fn(grid, block, args)
                done.get(stream=stream, out=host)
            stream.synchronize()
            launches += _BATCH
            if host[0]:
                break
        return launches, graph is not None

    def persistent_shape(self, fn):
        """``(blocks, threads)`` for a persistent kernel: every block resident at once, or the
        grid barrier would wait forever."""
        cp = self.cp
        threads = 512
        try:
            threads = min(threads, int(fn.max_threads_per_block)) // 32 * 32
        except Exception:  # noqa: BLE001 - attribute missing: the safe size
            threads = 256
        per_sm = 1
        try:
            per_sm = int(cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(
                fn.ptr, threads, 0))
        except Exception:  # noqa: BLE001 - no occupancy query: one block per SM
            per_sm = 1
        return self.sms * max(1, min(per_sm, 2)), threads

    def near_far_persistent(self, dist, start_cells, start_bits, delta, limit):
        """Near-far SSSP in one launch of ``nf_persistent`` (grid barrier between steps)."""
        cp = self.cp
        n = self.n
        nears = [cp.empty(n, cp.int32) for _ in range(3)]
        fars = [cp.empty(n, cp.int32) for _ in range(3)]
        near_mark = cp.full(n, -1, cp.int32)
        far_mark = cp.full(n, -1, cp.int32)
        m = int(start_cells.size)
        if m:
            fars[0][:m] = start_cells.astype(cp.int32)
            far_mark[start_cells] = 0
        host = np.zeros(16, np.uint64)
        host[3] = m
        host[6:9] = _INF_BITS
        if m:
            host[6] = start_bits.min()
        cnt = cp.asarray(host)
        bar = cp.zeros(3, cp.uint32)
        fn = self.mod.get_function("nf_persistent")
        blocks, threads = self.persistent_shape(fn)
        fn((blocks,), (threads,), self.arcs() + (dist, *nears, *fars, near_mark, far_mark, cnt,
                                                 bar, np.float64(delta), np.float64(limit)))
        c = cnt.get()
        if bar.get()[2]:
            return None  # aborted: blocks not all resident
        return {"steps": int(c[9]), "splits": int(c[10]), "relaxed": int(c[11]),
                "launches": 1, "persistent": [blocks, threads], "delta": float(delta)}

    def labels_persistent(self, dist, label, cells):
        """Min-label propagation in one launch of ``labels_persistent``."""
        cp = self.cp
        n = self.n
        lists = [cp.empty(n, cp.int32) for _ in range(3)]
        mark = cp.full(n, -1, cp.int32)
        m = int(cells.size)
        lists[0][:m] = cells.astype(cp.int32)
        mark[cells] = 0
        host = np.zeros(16, np.uint64)
        host[0] = m
        cnt = cp.asarray(host)
        bar = cp.zeros(3, cp.uint32)
        fn = self.mod.get_function("labels_persistent")
        blocks, threads = self.persistent_shape(fn)
        fn((blocks,), (threads,), self.arcs() + (dist, label, *lists, mark, cnt, bar))
        c = cnt.get()
        if bar.get()[2]:
            return None  # aborted: blocks not all resident
        return {"label_steps": int(c[9]), "label_relaxed": int(c[11]), "label_launches": 1}

    def near_far(self, dist, start_cells, start_bits, delta, limit, use_graph=True):
        """Near-far SSSP from ``start_cells`` (their distances already in ``dist``)."""
        cp = self.cp
        n = self.n
        near0, near1 = cp.empty(n, cp.int32), cp.empty(n, cp.int32)
        far0, far1 = cp.empty(n, cp.int32), cp.empty(n, cp.int32)
        near_mark = cp.full(n, -1, cp.int32)
        far_mark = cp.zeros(n, cp.int32)
        ctl = cp.zeros(_CTL_SIZE, cp.uint64)
        m = int(start_cells.size)
        if m:
            far0[:m] = start_cells.astype(cp.int32)
            far_mark[start_cells] = 1
        host = np.zeros(_CTL_SIZE, np.uint64)
        host[C_NFAR] = m
        host[C_EPOCH] = 1
        host[C_T] = np.float64(-1.0).view(np.uint64)
        host[C_TOLD] = host[C_T]
        host[C_FARMIN] = start_bits.min() if m else _INF_BITS
        host[C_DELTA] = np.float64(delta).view(np.uint64)
        host[C_DONE] = 0 if m else 1
        # the first step splits the far list (the sources) at min start + delta
        t = max(-1.0, float(np.uint64(host[C_FARMIN]).view(np.float64))) if m else 0.0
        t_next = t + delta
        if not t_next > t:
            t_next = float(np.nextafter(t, np.inf))
        host[C_T] = np.float64(t_next).view(np.uint64)
        host[C_FARMIN] = _INF_BITS
        host[C_EPOCH] = 2
        host[C_SPLIT] = 1 if m else 0
        ctl.set(host)
        launches, graph = self.drive(
            "nf_step", self.arcs() + (dist, near0, near1, far0, far1, near_mark, far_mark, ctl,
                                      np.float64(limit)), ctl, use_graph)
        c = ctl.get()
        del near0, near1, far0, far1, near_mark, far_mark
        return {"steps": int(c[C_NSTEPS]), "splits": int(c[C_NSPLITS]),
                "relaxed": int(c[C_NPROC]), "launches": launches, "graph": graph,
                "delta": float(delta)}

    def labels(self, dist, label_cells, label_values, use_graph=True, persistent=True):
        """Min-label propagation over tight arcs from the root labels."""
        cp = self.cp
        n = self.n
        label = cp.full(n, _NO_LABEL, cp.uint64)
        cells = cp.asarray(label_cells, cp.int64)
        label[cells] = cp.asarray(label_values, cp.uint64)
        if persistent:
            st = self.labels_persistent(dist, label, cells)
            if st is not None:
                return label, st
            label.fill(_NO_LABEL)  # aborted: start over, one launch a step
            label[cells] = cp.asarray(label_values, cp.uint64)
        list0, list1 = cp.empty(n, cp.int32), cp.empty(n, cp.int32)
        mark = cp.full(n, -1, cp.int32)
        m = int(cells.size)
        list0[:m] = cells.astype(cp.int32)
        mark[cells] = 0
        ctl = cp.zeros(_CTL_SIZE, cp.uint64)
        host = np.zeros(_CTL_SIZE, np.uint64)
        host[C_NNEAR] = m
        host[C_DONE] = 0 if m else 1
        ctl.set(host)
        launches, _ = self.drive("labels_step", self.arcs() + (dist, label, list0, list1, mark,
                                                              ctl), ctl, use_graph)
        c = ctl.get()
        return label, {"label_steps": int(c[C_NSTEPS]), "label_relaxed": int(c[C_NPROC]),
                       "label_launches": launches}

    def reached_stats(self, distance):
        """``(cells reached, the largest distance or None)`` in one raw launch (CuPy's
        reductions would import ``cupyx.scipy`` and compile on first use)."""
        cp = self.cp
        out = cp.zeros(2, cp.uint64)
        self.mod.get_function("reached_stats")((self.blocks,), (_BLOCK,),
                                               (distance, np.int64(distance.size), out))
        count, best = out.get()
        best = np.array([best], np.uint64).view(np.float64)[0]
        return int(count), (float(best) if count else None)

    def early_distance(self, dist, on_distance, on_device=False):
        """Hand the unpadded distances to ``on_distance`` before the labels, downloaded in a
        thread on its own stream (``on_device``: the device array). ``(a callable giving the
        array handed over and raising what the thread raised, reached)``."""
        cp = self.cp
        rows, cols = self.shape
        n = rows * cols
        distance = cp.empty(n, cp.float64)
        self.mod.get_function("distances")(((n + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
                                           (dist, np.int64(rows), np.int64(cols),
                                            np.int32(PAD), distance))
        reached, _ = self.reached_stats(distance)
        self.sync()
        if on_device:
            view = distance.reshape(self.shape)
            on_distance(view)
            return (lambda: view), reached
        import concurrent.futures

        def fetch():
            host = download(cp, (distance,), synchronize=False)[0].reshape(self.shape)
            on_distance(host)
            return host

        pool = concurrent.futures.ThreadPoolExecutor(1)
        future = pool.submit(fetch)
        pool.shutdown(wait=False)
        return future.result, reached

    def finish(self, dist, label, stats, phases, hops=True, early=None, on_device=False):
        """Backlinks, allocation (and hops) of every cell, downloaded with the distances
        unless ``early`` has them (``on_device``: nothing downloaded)."""
        cp = self.cp
        t0 = time.perf_counter()
        rows, cols = self.shape
        n = rows * cols
        backlink = cp.empty(n, cp.uint8)
        distance = cp.empty(n, cp.float64)
        allocation = cp.empty(n, cp.int32)
        hops_d = cp.empty(n, cp.int32)
        self.mod.get_function("backlinks")(
            ((n + _BLOCK - 1) // _BLOCK,), (_BLOCK,),
            self.arcs() + (dist, label, np.int64(rows), np.int64(cols), np.int32(PAD),
                           backlink, distance, allocation, hops_d))
        reached, stats["max_distance"] = self.reached_stats(distance)
        stats["reached_cells"] = reached
        self.sync()
        t1 = time.perf_counter()
        wanted = ((distance,) if early is None else ()) + (allocation, backlink) + (
            (hops_d,) if hops else ())
        if on_device:
            host = [a.reshape(self.shape) for a in wanted]
        else:
            host = [a.reshape(self.shape) for a in download(cp, wanted)]
        if early is not None:
            host.insert(0, early[0]())  # the distances' download (and its error)
            if early[1] != reached:
                raise RuntimeError(f"{early[1]} cells have a distance, {reached} a label")
        host += [None] * (not hops)
        t2 = time.perf_counter()
        phases.update(backlinks=t1 - t0, download=t2 - t1)
        stats["phases"] = {k: round(v, 6) for k, v in phases.items()}
        return GridSSSPResult(*host, stats=stats)


def download(cp, arrays, synchronize=True):
    """Contiguous device arrays to new NumPy arrays through the pinned ring of
    :func:`terrain._transfer.to_host`, on a stream of their own (``synchronize=False``: the
    caller has synchronised the device after writing ``arrays``)."""
    if synchronize:
        cp.cuda.Device().synchronize()
    return to_host(cp, arrays, stream=cp.cuda.Stream(non_blocking=True))


def _root_labels(seeds, seed_dist, seed_label, final_dist):
    """Per cell, the smallest seed label whose distance is the cell's final distance."""
    ok = seed_dist == final_dist
    cells, labels = seeds[ok], seed_label[ok].astype(np.uint64)
    order = np.lexsort((labels, cells))
    cells, labels = cells[order], labels[order]
    first = np.ones(cells.size, bool)
    first[1:] = cells[1:] != cells[:-1]
    return cells[first], labels[first]


class GpuOps:
    """The in-core SSSP on the GPU (module docstring): the twin of
    :class:`terrain.grid._sssp_cpu.CpuOps`, the same arguments and bits."""

    name = "gpu"

    def __init__(self, be):
        self.be = be

    def solve(self, z, f, model, codes, lengths, rows, cols, costs, limit, *, delta=None,
              use_graph=True, persistent=True, hops=True, targets=None, on_distance=None,
              on_device=False, overwrite_friction=False):
        """Distances, labels and backlinks (:meth:`CpuOps.solve`). ``targets``: the near-far
        loop runs to its end, then the cells beyond them are cut as on the CPU.

        ``persistent``: the whole loop in one launch (default), else one launch a step
        (``use_graph``: from a captured CUDA graph); the rest as :func:`grid_sssp`
        (``overwrite_friction`` unused: the device holds its own copy).
        """
        cp = self.be.xp
        phases = {}
        t0 = time.perf_counter()
        g = _Grid(self.be, z, f, model, codes, lengths)
        seeds, seed_dist, seed_label = flat_seeds(rows, cols, costs, z.shape[1])
        keep = seed_dist <= limit
        seeds, seed_dist, seed_label = seeds[keep], seed_dist[keep], seed_label[keep]
        # start distances: the minimum start cost per cell
        order = np.lexsort((seed_dist, seeds))
        first = np.ones(order.size, bool)
        first[1:] = seeds[order][1:] != seeds[order][:-1]
        start_cells = seeds[order][first].astype(np.int64)
        start_bits = seed_dist[order][first].astype(np.float64).view(np.uint64)
        dist = cp.full(g.n, _INF_BITS, cp.uint64)
        d_cells = cp.asarray(start_cells)
        if start_cells.size:
            dist[d_cells] = cp.asarray(start_bits)
        g.sync()
        t1 = time.perf_counter()
        phases["upload"] = t1 - t0
        stats = {"queue": "near-far"}
        if delta is None:
            mean = mean_arc_cost(z, f, model, codes, lengths)
            delta = near_far_delta(mean, len(codes))
            stats["mean_arc_cost"] = mean
        st = None
        if persistent:
            st = g.near_far_persistent(dist, d_cells, start_bits, float(delta), limit)
            if st is None:  # aborted: start over, one launch a step
                dist.fill(_INF_BITS)
                if start_cells.size:
                    dist[d_cells] = cp.asarray(start_bits)
        if st is None:
            st = g.near_far(dist, d_cells, start_bits, float(delta), limit, use_graph)
        stats.update(st)
        if targets is not None and len(targets):
            # distances as their float64 bits (non-negative: ordered as integers)
            far = dist[cp.asarray(targets)].max()  # uint64 on the device: no float compare
            bits = np.uint64(int(far))
            if bits < _INF_BITS:
                dist[dist > far] = _INF_BITS
                stats["target_distance"] = float(bits.view(np.float64))
        g.sync()
        t2 = time.perf_counter()
        phases["distance"] = t2 - t1
        early = None
        if on_distance is not None:
            early = g.early_distance(dist, on_distance, on_device)
            t2, t_early = time.perf_counter(), t2
            phases["distance_out"] = t2 - t_early
        try:
            final = (cp.asnumpy(dist[cp.asarray(seeds)]).view(np.float64) if seeds.size
                     else seed_dist)
            cells, labels = _root_labels(seeds, seed_dist, seed_label, final)
            label, lstats = g.labels(dist, cells, labels, use_graph, persistent)
            stats.update(lstats)
            stats["rounds"] = stats.get("steps")
            stats["label_rounds"] = lstats["label_steps"]
            g.sync()
            phases["labels"] = time.perf_counter() - t2
            return g.finish(dist, label, stats, phases, hops, early, on_device)
        except BaseException:
            if early is not None:  # no callback may start after this call has failed
                try:
                    early[0]()
                except BaseException:  # noqa: BLE001 - the failure being handled is the news
                    pass
            raise

    def labels(self, z, f, known, dist_in, model, codes, lengths, rows, cols, seed_d,
               seed_labels):
        """Labels for given final distances (:meth:`CpuOps.labels`)."""
        cp = self.be.xp
        g = _Grid(self.be, z, f, model, codes, lengths)
        r, c = z.shape
        dp = np.full((r + 2 * PAD, c + 2 * PAD), np.inf)
        dp[PAD:PAD + r, PAD:PAD + c] = np.where(known, dist_in, np.inf)
        dist = cp.asarray(dp.ravel().view(np.uint64))
        seeds, _, _ = flat_seeds(rows, cols, seed_d, z.shape[1])
        seed_lab = (seed_labels[:, 0].astype(np.int64) << HOPS_BITS) | seed_labels[:, 1]
        finite = np.isfinite(seed_d)
        final = dp.ravel()[seeds]
        cells, labels = _root_labels(seeds[finite], seed_d[finite], seed_lab[finite],
                                     final[finite])
        label, lstats = g.labels(dist, cells, labels)
        return g.finish(dist, label, {"label_rounds": lstats["label_steps"]}, {})
