"""The tiled SSSP's GPU twins (``_boundary.cu``): phase 1's boundary pairs, the windows of
phase 3, the bottom-up Dijkstras of a batch of nodes, and the label-correcting solve of the
top; :class:`DeviceLevel` (a level's matrices kept on the device) and :class:`TiledGpuOps`,
the GPU side of the algorithm's kernel table (CPU twins in ``_tiled_cpu.py``, bit for bit).
"""

from pathlib import Path

import numpy as np

from ._tournament import INT_INF, tt_capacity

__all__ = ["TiledGpuOps", "DeviceLevel", "level_solve_gpu", "top_solve_gpu", "shared_pass",
           "SHARED_BYTES", "MAX_GPU_TILE", "boundary_pairs_gpu", "windows_dijkstra_gpu",
           "graphs_pairs_gpu"]

_INF = np.inf
#: phase 1 on the GPU: larger tiles run on the CPU kernel (a T x T tournament tree per
#: thread does not fit the device's per-thread budget)
MAX_GPU_TILE = 64


def _cuda(be):
    return be.cuda_module(Path(__file__).with_name("_boundary.cu"))


#: shared memory of one ``boundary_pairs_shared`` block (the default limit without opt-in)
SHARED_BYTES = 48 << 10


def shared_pass(T, K, shared=SHARED_BYTES):
    """``(sources per pass, threads per block)`` of ``boundary_pairs_shared`` for tiles of
    side ``T`` and ``K`` arc codes, or None when ``8 T^2 K + 12 T^2`` bytes exceed ``shared``.

    >>> shared_pass(16, 8), shared_pass(16, 16), shared_pass(8, 8), shared_pass(32, 8)
    ((8, 256), (5, 256), (8, 64), None)
    """
    n = T * T
    s = (int(shared) - 8 * n * K) // (12 * n)
    if s < 1:
        return None
    return min(s, 8), min(256, max(32, -(-n // 32) * 32))


def boundary_pairs_gpu(be, z, f, bidx, bcount, codes, model, lengths, max_scratch=4 << 30,
                       out=None, kernel=None):
    """CUDA twin of :func:`terrain.grid._tiled_cpu.boundary_pairs_cpu` (``out``: device
    ``(dist, hops)`` filled, nothing copied back): ``boundary_pairs_shared`` (a block per tile)
    where :func:`shared_pass` fits, else ``boundary_pairs`` (a queue per thread) in launches
    under ``max_scratch`` bytes. ``kernel`` ('shared' or 'queue') forces one."""
    cp = be.xp
    n, T, _ = z.shape
    bmax = bidx.shape[1]
    fit = shared_pass(T, int(codes.size))
    if kernel == "queue" or (kernel is None and fit is None):
        fit = None
    elif fit is None:
        raise ValueError(f"tiles of {T} with {codes.size} codes do not fit shared memory")
    if fit is not None:
        S, threads = fit
        od, oh = (cp.empty((n, bmax, bmax)), cp.empty((n, bmax, bmax), cp.int32)) \
            if out is None else out
        if n:
            kern = _cuda(be).get_function("boundary_pairs_shared")
            kern((n,), (threads,),
                 (cp.asarray(z), cp.asarray(f), cp.asarray(bidx), cp.asarray(bcount),
                  np.int32(T), np.int32(bmax), cp.asarray(codes, cp.int32),
                  np.int32(codes.size), np.int32(model), cp.asarray(lengths, cp.float64), od,
                  oh, np.int32(S)),
                 shared_mem=8 * T * T * int(codes.size) + 12 * S * T * T)
        if out is not None:
            return out
        return od.get(), oh.get()
    cap = tt_capacity(T * T)
    per_tile = bmax * (T * T * 16 + 2 * cap * 20)
    chunk = max(1, min(n, max_scratch // max(per_tile, 1)))
    kern = _cuda(be).get_function("boundary_pairs")
    if out is None:
        out_d = np.empty((n, bmax, bmax))
        out_h = np.empty((n, bmax, bmax), np.int32)
    codes_d = cp.asarray(codes, cp.int32)
    len_d = cp.asarray(lengths, cp.float64)
    threads = 64
    for t0 in range(0, n, chunk):
        m = min(chunk, n - t0)
        zd = cp.asarray(z[t0:t0 + m])
        fd = cp.asarray(f[t0:t0 + m])
        bi = cp.asarray(bidx[t0:t0 + m])
        bc = cp.asarray(bcount[t0:t0 + m])
        od = cp.full((m, bmax, bmax), np.inf)
        oh = cp.full((m, bmax, bmax), INT_INF, cp.int32)
        slots = m * bmax
        s_ld = cp.empty(slots * T * T, cp.float64)
        s_la = cp.empty(slots * T * T, cp.int32)
        s_lh = cp.empty(slots * T * T, cp.int32)
        s_kd = cp.empty(slots * 2 * cap, cp.float64)
        s_ka = cp.empty(slots * 2 * cap, cp.int32)
        s_kh = cp.empty(slots * 2 * cap, cp.int32)
        s_win = cp.empty(slots * 2 * cap, cp.int32)
        grid = (m, -(-bmax // threads))
        kern(grid, (threads,), (zd, fd, bi, bc, np.int32(T), np.int32(bmax), codes_d,
                                np.int32(codes.size), np.int32(model), len_d, od, oh, s_ld, s_la,
                                s_lh, s_kd, s_ka, s_kh, s_win, np.int32(cap)),
             shared_mem=2 * T * T * 4)
        if out is not None:
            out[0][t0:t0 + m], out[1][t0:t0 + m] = od, oh
            continue
        od.get(out=out_d[t0:t0 + m])  # straight into the batch (no temporary host copy)
        oh.get(out=out_h[t0:t0 + m])
    return out if out is not None else (out_d, out_h)


def windows_dijkstra_gpu(be, z, f, inner, codes, model, lengths, ld, la, lh, kernel=None):
    """CUDA twin of :func:`terrain.grid._tiled_cpu.windows_dijkstra_cpu`: ``windows_shared``
    (a block per window) where ``8 HW K + 16 HW`` bytes fit shared memory, else
    ``windows_dijkstra`` (a queue per thread). ``kernel`` ('shared' or 'queue') forces one."""
    cp = be.xp
    n, H, W = z.shape
    if n == 0:
        return
    K = int(codes.size)
    fits = 8 * H * W * K + 16 * H * W <= SHARED_BYTES
    if kernel == "shared" and not fits:
        raise ValueError(f"windows of {H} x {W} with {K} codes do not fit shared memory")
    if kernel != "queue" and fits:
        dd, da, dh = cp.asarray(ld), cp.asarray(la), cp.asarray(lh)
        threads = min(256, max(32, -(-H * W // 32) * 32))
        _cuda(be).get_function("windows_shared")(
            (n,), (threads,),
            (cp.asarray(z), cp.asarray(f), cp.asarray(inner.astype(np.uint8)), np.int32(H),
             np.int32(W), cp.asarray(codes, cp.int32), np.int32(K), np.int32(model),
             cp.asarray(lengths, cp.float64), dd, da, dh),
            shared_mem=8 * H * W * K + 16 * H * W)
        ld[...], la[...], lh[...] = dd.get(), da.get(), dh.get()
        return
    cap = tt_capacity(H * W)
    kern = _cuda(be).get_function("windows_dijkstra")
    dd, da, dh = cp.asarray(ld), cp.asarray(la), cp.asarray(lh)
    s_kd = cp.empty(n * 2 * cap, cp.float64)
    s_ka = cp.empty(n * 2 * cap, cp.int32)
    s_kh = cp.empty(n * 2 * cap, cp.int32)
    s_win = cp.empty(n * 2 * cap, cp.int32)
    threads = 32
    kern((-(-n // threads),), (threads,),
         (cp.asarray(z), cp.asarray(f), cp.asarray(inner.astype(np.uint8)), np.int32(n),
          np.int32(H), np.int32(W), cp.asarray(codes, cp.int32), np.int32(codes.size),
          np.int32(model), cp.asarray(lengths, cp.float64), dd, da, dh, s_kd, s_ka, s_kh, s_win,
          np.int32(cap)))
    ld[...], la[...], lh[...] = dd.get(), da.get(), dh.get()


def graphs_pairs_gpu(be, pnode, psrc, vbase, tbase, targets, obase, vchild, coff, csize,
                     moff, mat_d, mat_h, cptr, cdst, cw, out_d, out_h, max_scratch=2 << 30):
    """CUDA twin of :func:`terrain.grid._tiled_cpu.graphs_pairs_cpu`: one thread per pair,
    in launches under ``max_scratch`` bytes of scratch; ``out_*`` host arrays, filled."""
    cp = be.xp
    n_pairs = int(pnode.size)
    if n_pairs == 0:
        return
    vmax = int(np.max(np.diff(vbase)))
    cap = tt_capacity(vmax)
    per_pair = vmax * 16 + 2 * cap * 20
    chunk = max(1, min(n_pairs, max_scratch // per_pair))
    dev = [cp.asarray(a) for a in (pnode.astype(np.int32), psrc.astype(np.int32), vbase,
                                   tbase, targets, obase, vchild, coff, csize, moff, mat_d,
                                   mat_h, cptr, cdst, cw)]
    od = cp.asarray(out_d)
    oh = cp.asarray(out_h)
    s_ld = cp.empty(chunk * vmax, cp.float64)
    s_la = cp.empty(chunk * vmax, cp.int32)
    s_lh = cp.empty(chunk * vmax, cp.int32)
    s_kd = cp.empty(chunk * 2 * cap, cp.float64)
    s_ka = cp.empty(chunk * 2 * cap, cp.int32)
    s_kh = cp.empty(chunk * 2 * cap, cp.int32)
    s_win = cp.empty(chunk * 2 * cap, cp.int32)
    kern = _cuda(be).get_function("graphs_pairs")
    threads = 64
    for p0 in range(0, n_pairs, chunk):
        m = min(chunk, n_pairs - p0)
        kern((-(-m // threads),), (threads,),
             (np.int32(m), np.int32(p0), *dev, od, oh, s_ld, s_la, s_lh, s_kd, s_ka, s_kh,
              s_win, np.int32(vmax), np.int32(cap)))
    out_d[...] = od.get()
    out_h[...] = oh.get()


def top_solve_gpu(be, vchild, coff, csize, loc, pool_d, pool_h, cptr, cdst, cw, ld, la, lh):
    """The top Dijkstra's labels on the GPU by two label-correcting sweeps (distances, then
    ``(allocation, hops)`` over tight arcs: the CPU's bits, docs/cost-distance-tiled.md);
    ``ld, la, lh`` hold the seeds and receive the labels. Returns the sweeps' rounds."""
    cp = be.xp
    V = int(vchild.size)
    B = int(pool_d.shape[-1])

    def dev(a):
        return cp.asarray(np.ascontiguousarray(a))
    vc, co, lo, cs = dev(vchild), dev(coff), dev(loc), dev(csize)
    pd, ph = dev(pool_d), dev(pool_h)
    cpd, cdd, cwd = dev(cptr), dev(cdst), dev(cw)
    seeds = ld < _INF
    d = cp.asarray(np.ascontiguousarray(ld, np.float64)).view(cp.uint64)
    cuda = _cuda(be)
    threads = 256

    def sweep(kern, args, start):
        """Rounds until none improves: each round one warp per vertex of the frontier (the
        vertices that improved in the previous round, listed here)."""
        front = cp.asarray(np.flatnonzero(start).astype(np.int64))
        nxt = cp.zeros(V, cp.uint8)
        rounds = 0
        while front.size:
            kern((-(-front.size * 32 // threads),), (threads,),
                 (np.int64(front.size), front) + args + (nxt,))
            rounds += 1
            front = cp.flatnonzero(nxt)
            nxt.fill(0)
        return rounds
    r1 = sweep(cuda.get_function("top_relax_d"),
               (vc, co, lo, np.int32(B), cs, pd, cpd, cdd, cwd, d), seeds)
    dist = d.view(cp.float64).get()
    tight = seeds & (dist == ld)  # seeds that keep their start label's distance
    key0 = np.full(V, np.iinfo(np.uint64).max, np.uint64)
    key0[tight] = (la[tight].astype(np.uint64) << np.uint64(32)) | lh[tight].astype(np.uint64)
    key = cp.asarray(key0)
    r2 = sweep(cuda.get_function("top_relax_key"),
               (vc, co, lo, np.int32(B), cs, pd, ph, cpd, cdd, cwd, d, key), tight)
    k = key.get()
    reached = dist < _INF
    ld[:] = dist
    la[:] = np.where(reached, (k >> np.uint64(32)).astype(np.int64), INT_INF).astype(np.int32)
    lh[:] = np.where(reached, (k & np.uint64(0xFFFFFFFF)).astype(np.int64),
                     INT_INF).astype(np.int32)
    return r1, r2


class DeviceLevel:
    """A level's nodes on the device, in *slots* (``count``, ``ids``, ``z``, ``f``,
    ``dist``, ``hops``, padded as :class:`TileBatch`): phase 1 writes a group's matrices
    straight into its slots, so :func:`level_solve_gpu` reads nothing back; ``filled``
    records the ranges written."""

    def __init__(self, be, n, B):
        cp = be.xp
        self.be, self.n, self.B = be, int(n), int(B)
        self.count = cp.zeros(self.n, cp.int32)
        self.ids = cp.empty((self.n, self.B), cp.int64)
        self.z = cp.empty((self.n, self.B), cp.float32)
        self.f = cp.empty((self.n, self.B), cp.float32)
        self.dist = cp.empty((self.n, self.B, self.B), cp.float64)
        self.hops = cp.empty((self.n, self.B, self.B), cp.int32)
        self.filled = set()

    @staticmethod
    def nbytes(n, B, cells=0):
        """Device bytes of a level of ``n`` nodes of ``B`` boundary cells in a grid of
        ``cells`` cells (matrices, the solve's vertex arrays and map).

        >>> round(DeviceLevel.nbytes(65536, 60, 4096 * 4096) / 2**30, 2)  # 4096^2, tiles of 16
        2.91
        """
        n, B = int(n), int(B)
        return n * (4 + B * 16 + B * B * 12) + n * B * (8 + 8 + 8 + 8 + 4 + 4 + 1) + 4 * int(cells)

    def put(self, start, count, ids, z, f, dist=None, hops=None):
        """Slots ``start : start + len(count)`` from host arrays (``dist``/``hops`` too unless
        phase 1 wrote them there); copies, no kernels."""
        s = slice(int(start), int(start) + len(count))
        for dst, src, dtype in ((self.count, count, np.int32), (self.ids, ids, np.int64),
                                (self.z, z, np.float32), (self.f, f, np.float32),
                                (self.dist, dist, np.float64), (self.hops, hops, np.int32)):
            if src is not None:
                dst[s].set(np.ascontiguousarray(src, dtype))

    def views(self, start, n):
        """The ``(dist, hops)`` of slots ``start : start + n`` (contiguous device views)."""
        return self.dist[start:start + n], self.hops[start:start + n]


def level_solve_gpu(be, spec, level, seeds, per_wait=16):
    """``(d, a, h)`` device arrays over the ``n * B`` padded vertices of a
    :class:`DeviceLevel` and the sweeps' rounds: :func:`top_solve_gpu`'s sweeps with the arcs
    between nodes found through a device map cell -> vertex (the top Dijkstra's bits).
    ``seeds``: host ``(vertex, d, a, h)``; the host waits once per ``per_wait`` rounds.
    """
    cp = be.xp
    V, B = level.n * level.B, level.B
    if V >= 2**31:
        raise ValueError(f"{V} vertices: more than a 32-bit map holds")
    R, C = spec.shape
    mod = _cuda(be)
    threads = 256

    def launch(name, n, *args):
        if n:
            mod.get_function(name)((-(-int(n) // threads),), (threads,), (np.int64(n),) + args)
    cell_vertex = cp.empty(R * C, cp.int32)
    cell_vertex.data.memset_async(0xFF, cell_vertex.nbytes)  # -1
    launch("level_cell_vertex", V, level.ids, cell_vertex)
    d = cp.empty(V, cp.uint64)
    key = cp.empty(V, cp.uint64)
    launch("level_reset", V, d, key)
    sv, sd, sa, sh = (np.asarray(x) for x in seeds)
    sv = sv.astype(np.int64)
    live = sd < _INF
    sv, sd, sa, sh = sv[live], sd[live], sa[live], sh[live]
    nxt = cp.zeros(V, cp.uint8)
    fronts = (cp.empty(V, cp.int64), cp.empty(V, cp.int64))
    codes = cp.asarray(spec.codes, cp.int32)
    lengths = cp.asarray(spec.lengths, cp.float64)
    geo = (np.int32(B), level.count, level.ids.reshape(-1), level.z.reshape(-1),
           level.f.reshape(-1), cell_vertex, np.int64(R), np.int64(C), codes,
           np.int32(spec.codes.size), np.int32(spec.model), lengths)

    dev = cp.cuda.Device()
    blocks = int(dev.attributes["MultiProcessorCount"]) * 8  # the resident warps, in turn
    counts = cp.zeros(per_wait + 1, cp.uint64)

    def sweep(kern, tail, start):
        """Rounds until none improves, each relaxing the previous round's improved vertices;
        the frontier's size stays on the device, ``per_wait`` rounds between two waits."""
        front, other = fronts
        nf = int(start.size)
        if nf:
            front[:nf].set(start)
        rounds = 0
        while nf:
            counts.data.memset_async(0, counts.nbytes)
            counts[:1].set(np.array([nf], np.uint64))
            for r in range(per_wait):
                mod.get_function(kern)((blocks,), (threads,),
                                       (counts[r:r + 1], front) + geo + tail + (nxt,))
                launch("level_compact", V, nxt, other, counts[r + 1:r + 2])
                front, other = other, front
            c = counts.get()
            rounds += int(np.count_nonzero(c[:per_wait]))
            nf = int(c[per_wait])
        return rounds
    if sv.size:
        idx = cp.asarray(sv)
        launch("scatter_min_u64", sv.size, idx, cp.asarray(sd.astype(np.float64).view(np.uint64)),
               d)
    r1 = sweep("level_relax_d", (level.dist.reshape(-1), d), np.unique(sv))
    # the seeds whose start distance stayed final start sweep 2 with their (a, h)
    got = cp.empty(sv.size, cp.uint64)
    if sv.size:
        launch("gather_u64", sv.size, cp.asarray(sv), d, got)
    final = got.get().view(np.float64)
    tight = final == sd
    tkey = (sa[tight].astype(np.uint64) << np.uint64(32)) | sh[tight].astype(np.uint64)
    if tight.any():
        launch("scatter_min_u64", int(tight.sum()), cp.asarray(sv[tight]), cp.asarray(tkey),
               key)
    r2 = sweep("level_relax_key", (level.dist.reshape(-1), level.hops.reshape(-1), d, key),
               np.unique(sv[tight]))
    la = cp.empty(V, cp.int32)
    lh = cp.empty(V, cp.int32)
    launch("level_labels", V, d, key, la, lh)
    return (d.view(cp.float64), la, lh), (r1, r2)


class TiledGpuOps:
    """The GPU side of the tiled algorithm's kernel table (twin: ``TiledCpuOps``)."""

    name = "gpu"

    def __init__(self, be):
        self.be = be

    def boundary_pairs(self, zb, fb, bidx, count, codes, model, lengths, out=None):
        """Phase 1 on a batch of tiles (:func:`boundary_pairs_gpu`); tiles above
        :data:`MAX_GPU_TILE` on the CPU kernel."""
        if zb.shape[1] > MAX_GPU_TILE:
            if out is not None:
                raise ValueError(f"out= needs tiles of at most {MAX_GPU_TILE}")
            from ._tiled_cpu import TiledCpuOps
            return TiledCpuOps().boundary_pairs(zb, fb, bidx, count, codes, model, lengths)
        return boundary_pairs_gpu(self.be, zb, fb, bidx, count, codes, model, lengths, out=out)

    def graphs_pairs(self, *args):
        """The bottom-up Dijkstras of a batch of nodes (:func:`graphs_pairs_gpu`)."""
        graphs_pairs_gpu(self.be, *args)

    def windows_dijkstra(self, *args):
        """Seeded Dijkstras on a batch of windows (:func:`windows_dijkstra_gpu`)."""
        windows_dijkstra_gpu(self.be, *args)

    def top_solve(self, *args):
        """The top's labels when every matrix is in one page (:func:`top_solve_gpu`)."""
        return top_solve_gpu(self.be, *args)
