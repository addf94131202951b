// Tiled SSSP kernels (thesis 5.4): the CUDA twins of terrain/grid/sssp_tiled.py's Numba kernels
// boundary_pairs_cpu (phase 1) and windows_dijkstra_cpu (phase 3). Backend.cuda_module inlines
// the quoted headers.
//
// Both run Dijkstra with the tournament tree of _tournament.cuh and the arc cost of
// _costs.cuh; labels are the least (distance, allocation, hops) keys, which do not depend on the
// order of the pops, so they equal the CPU's bit for bit.
#include "_costs.cuh"
#include "_tournament.cuh"

// Multi-source Dijkstra on an H x W window. ld/la/lh (flat, row-major) hold the seeds (+inf
// elsewhere) and receive the labels; only cells with inner != 0 (all when inner is null) are
// ever updated. z and f may live in shared memory.
__device__ void window_dijkstra_dev(const float* z, const float* f, const unsigned char* inner,
                                    int H, int W, const int* codes, int K, int model,
                                    const double* lengths, double* ld, int* la, int* lh,
                                    TTree t) {
    const double inf = tt_inf();
    tt_reset(t);
    for (int p = 0; p < H * W; ++p)
        if (ld[p] < inf) tt_update(t, p, ld[p], la[p], lh[p]);
    while (!tt_empty(t)) {
        const int u = tt_pop(t);
        const int ur = u / W, uc = u - ur * W;
        const double du = ld[u];
        const int au = la[u], hu = lh[u] + 1;
        const float zu = z[u];
        for (int kk = 0; kk < K; ++kk) {
            const int k = codes[kk];
            const int vr = ur + ARC_DR[k], vc = uc + ARC_DC[k];
            if (vr < 0 || vr >= H || vc < 0 || vc >= W) continue;
            const int v = vr * W + vc;
            if (inner != nullptr && !inner[v]) continue;
            const float zv = z[v], fv = f[v];
            if (zv != zv || fv != fv) continue;
            double fac;
            if (!window_arc_factor(z, f, 1, H, W, ur, uc, k, &fac)) continue;
            const double w = arc_cost(zu, zv, fac, k, model, lengths);
            if (!(w < inf)) continue;
            const double nd = __dadd_rn(du, w);
            if (key_less(nd, au, hu, 0, ld[v], la[v], lh[v], 0)) {
                ld[v] = nd;
                la[v] = au;
                lh[v] = hu;
                tt_lower(t, v, nd, au, hu);
            }
        }
    }
}

// Phase 1: one thread per (tile, boundary source). Grid (n_tiles, ceil(bmax / blockDim.x)),
// dynamic shared memory 2 * T * T floats (the tile's elevations and frictions). Scratch per
// thread slot (tile * bmax + s): T*T labels and a tree of 2*cap nodes, in global memory.
extern "C" __global__ void boundary_pairs(const float* z, const float* f, const int* bidx,
                                          const int* bcount, int T, int bmax, const int* codes,
                                          int K, int model, const double* lengths,
                                          double* out_d, int* out_h, double* s_ld, int* s_la,
                                          int* s_lh, double* s_kd, int* s_ka, int* s_kh,
                                          int* s_win, int cap) {
    extern __shared__ float tile_zf[];
    const int t = blockIdx.x;
    const int n = T * T;
    float* sz = tile_zf;
    float* sf = tile_zf + n;
    for (int p = threadIdx.x; p < n; p += blockDim.x) {
        sz[p] = z[(long long)t * n + p];
        sf[p] = f[(long long)t * n + p];
    }
    __syncthreads();
    const int s = blockIdx.y * blockDim.x + threadIdx.x;
    const int B = bcount[t];
    if (s >= B) return;
    const long long slot = (long long)t * bmax + s;
    double* ld = s_ld + slot * n;
    int* la = s_la + slot * n;
    int* lh = s_lh + slot * n;
    TTree tree = {s_kd + slot * 2 * cap, s_ka + slot * 2 * cap, s_kh + slot * 2 * cap,
                  s_win + slot * 2 * cap, cap};
    const double inf = tt_inf();
    for (int p = 0; p < n; ++p) {
        ld[p] = inf;
        la[p] = TT_INT_INF;
        lh[p] = TT_INT_INF;
    }
    const int src = bidx[(long long)t * bmax + s];
    ld[src] = 0.0;
    la[src] = 0;
    lh[src] = 0;
    window_dijkstra_dev(sz, sf, nullptr, T, T, codes, K, model, lengths, ld, la, lh, tree);
    const long long row = ((long long)t * bmax + s) * bmax;
    for (int j = 0; j < B; ++j) {
        const int c = bidx[(long long)t * bmax + j];
        out_d[row + j] = ld[c];
        out_h[row + j] = lh[c];
    }
}

// Phase 1 with the tile in shared memory (the fast path of boundary_pairs_gpu; the same
// matrices as boundary_pairs / boundary_pairs_cpu, bit for bit): one block per tile, the
// tile's incoming arc costs wt[kk * T*T + v] (arc codes[kk] into v; +inf: none) computed once
// and shared by all its sources, and the labels of S sources at a time in shared memory.
// Instead of a queue per source (which kept each thread's tree in global memory: ~30 k
// scattered accesses per Dijkstra), label correcting in two sweeps, as top_relax_d/_key:
// sweep 1 lowers every cell's distance to min over its in-arcs of fl(d[u] + w) until a
// whole pass changes nothing; that fixpoint is Dijkstra's distance (every value is a
// rounded path sum, rounding is monotone). Sweep 2 then gives every non-source cell
// min(h[u] + 1) over its tight in-arcs (fl(d[u] + w) == d[v]), which is Dijkstra's hops for
// the least (distance, hops) key (all allocations are 0 here). A cell's labels are written
// only by the thread that owns it; other threads may read the old or the new value, both
// real path sums, and a pass that changes nothing has read only final values. The block
// writes the whole padded bmax x bmax matrix of its tile (+inf / INT_MAX padding).
// Dynamic shared memory: 8 * T*T * K + 12 * S * T*T bytes.
extern "C" __global__ void boundary_pairs_shared(const float* z, const float* f,
                                                 const int* bidx, const int* bcount, int T,
                                                 int bmax, const int* codes, int K, int model,
                                                 const double* lengths, double* out_d,
                                                 int* out_h, int S) {
    extern __shared__ double bp_smem[];
    const long long t = blockIdx.x;
    const int n = T * T;
    const double inf = tt_inf();
    double* wt = bp_smem;             // n * K incoming arc costs
    double* d = wt + (long long)n * K;  // S * n distances
    int* h = (int*)(d + (long long)S * n);  // S * n hops
    const float* zt = z + t * n;
    const float* ft = f + t * n;
    for (int p = threadIdx.x; p < n * K; p += blockDim.x) {  // kk-major: no bank conflicts
        const int kk = p / n, v = p - kk * n, k = codes[kk];
        const int vr = v / T, vc = v - vr * T;
        const int ur = vr - ARC_DR[k], uc = vc - ARC_DC[k];
        double w = inf;
        if (ur >= 0 && ur < T && uc >= 0 && uc < T) {
            const int u = ur * T + uc;
            const float zu = zt[u], fu = ft[u], zv = zt[v], fv = ft[v];
            double fac;
            if (zu == zu && fu == fu && zv == zv && fv == fv &&
                window_arc_factor(zt, ft, 1, T, T, ur, uc, k, &fac)) {
                const double c = arc_cost(zu, zv, fac, k, model, lengths);
                if (c < inf) w = c;
            }
        }
        wt[p] = w;
    }
    const int B = bcount[t];
    const int* bt = bidx + t * bmax;
    double* od = out_d + t * bmax * bmax;
    int* oh = out_h + t * bmax * bmax;
    for (int s0 = 0; s0 < B; s0 += S) {
        const int m = min(S, B - s0);
        __syncthreads();  // wt ready; the previous pass's labels read out
        for (int p = threadIdx.x; p < m * n; p += blockDim.x) {
            d[p] = inf;
            h[p] = TT_INT_INF;
        }
        __syncthreads();
        if (threadIdx.x < m) {
            const int src = bt[s0 + threadIdx.x];
            d[threadIdx.x * n + src] = 0.0;
            h[threadIdx.x * n + src] = 0;
        }
        __syncthreads();
        int changed;
        do {  // sweep 1: distances
            changed = 0;
            for (int p = threadIdx.x; p < m * n; p += blockDim.x) {
                const int s = p / n, v = p - s * n;
                const double* dv = d + s * n;
                const double* wv = wt + v;
                double best = d[p];
                for (int kk = 0; kk < K; ++kk) {
                    const double w = wv[kk * n];
                    if (!(w < inf)) continue;
                    const int k = codes[kk];
                    const double du = dv[v - ARC_DR[k] * T - ARC_DC[k]];
                    if (!(du < inf)) continue;
                    const double nd = __dadd_rn(du, w);
                    if (nd < best) best = nd;
                }
                if (best < d[p]) {
                    d[p] = best;
                    changed = 1;
                }
            }
        } while (__syncthreads_or(changed));
        do {  // sweep 2: hops along the tight arcs
            changed = 0;
            for (int p = threadIdx.x; p < m * n; p += blockDim.x) {
                const double dp = d[p];
                if (!(dp < inf) || h[p] == 0) continue;
                const int s = p / n, v = p - s * n;
                const double* dv = d + s * n;
                const int* hv = h + s * n;
                const double* wv = wt + v;
                int best = h[p];
                for (int kk = 0; kk < K; ++kk) {
                    const double w = wv[kk * n];
                    if (!(w < inf)) continue;
                    const int k = codes[kk];
                    const int u = v - ARC_DR[k] * T - ARC_DC[k];
                    const double du = dv[u];
                    if (!(du < inf) || __dadd_rn(du, w) != dp) continue;
                    const int hu = hv[u];
                    if (hu != TT_INT_INF && hu + 1 < best) best = hu + 1;
                }
                if (best < h[p]) {
                    h[p] = best;
                    changed = 1;
                }
            }
        } while (__syncthreads_or(changed));
        for (int p = threadIdx.x; p < m * bmax; p += blockDim.x) {
            const int s = p / bmax, j = p - s * bmax;
            const long long row = (long long)(s0 + s) * bmax + j;
            if (j < B) {
                const int c = bt[j];
                od[row] = d[s * n + c];
                oh[row] = h[s * n + c];
            } else {
                od[row] = inf;
                oh[row] = TT_INT_INF;
            }
        }
    }
    for (long long p = (long long)B * bmax + threadIdx.x; p < (long long)bmax * bmax;
         p += blockDim.x) {  // the rows of absent sources
        od[p] = inf;
        oh[p] = TT_INT_INF;
    }
}

// Phase 3 (and any batch of seeded windows): one thread per H x W window; ld/la/lh hold the
// seeds and receive the labels, inner marks the cells that may be updated.
extern "C" __global__ void windows_dijkstra(const float* z, const float* f,
                                            const unsigned char* inner, int n_win, int H, int W,
                                            const int* codes, int K, int model,
                                            const double* lengths, double* ld, int* la, int* lh,
                                            double* s_kd, int* s_ka, int* s_kh, int* s_win,
                                            int cap) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n_win) return;
    const long long n = (long long)H * W;
    TTree tree = {s_kd + (long long)t * 2 * cap, s_ka + (long long)t * 2 * cap,
                  s_kh + (long long)t * 2 * cap, s_win + (long long)t * 2 * cap, cap};
    window_dijkstra_dev(z + t * n, f + t * n, inner + t * n, H, W, codes, K, model, lengths,
                        ld + t * n, la + t * n, lh + t * n, tree);
}

// Phase 3 with the window in shared memory (the fast path of windows_dijkstra_gpu; the
// labels of windows_dijkstra / windows_dijkstra_cpu, bit for bit): one block per H x W
// window, its incoming arc costs wt[kk * H*W + v] (arcs into inner cells only, both ends
// valid), distances and packed keys (allocation << 32 | hops) in shared memory. Label
// correcting in the two sweeps of boundary_pairs_shared / top_relax_*: distances to their
// least fixpoint (Dijkstra's), then the least key over the tight in-arcs, from the seeds
// whose distance stayed their start distance (every halo seed: its cells are not inner).
// ld/la/lh hold the seeds and receive the labels of the inner cells.
// Dynamic shared memory: 8 * H*W * K + 16 * H*W bytes.
extern "C" __global__ void windows_shared(const float* z, const float* f,
                                          const unsigned char* inner, int H, int W,
                                          const int* codes, int K, int model,
                                          const double* lengths, double* ld, int* la,
                                          int* lh) {
    extern __shared__ double ws_smem[];
    const int n = H * W;
    const long long base = (long long)blockIdx.x * n;
    const double inf = tt_inf();
    const unsigned long long none = ~0ULL;
    double* wt = ws_smem;
    double* d = wt + (long long)n * K;
    unsigned long long* key = (unsigned long long*)(d + n);
    const float* zt = z + base;
    const float* ft = f + base;
    const unsigned char* it = inner + base;
    for (int p = threadIdx.x; p < n * K; p += blockDim.x) {
        const int kk = p / n, v = p - kk * n, k = codes[kk];
        const int vr = v / W, vc = v - vr * W;
        const int ur = vr - ARC_DR[k], uc = vc - ARC_DC[k];
        double w = inf;
        if (it[v] && ur >= 0 && ur < H && uc >= 0 && uc < W) {
            const int u = ur * W + uc;
            const float zu = zt[u], fu = ft[u], zv = zt[v], fv = ft[v];
            double fac;
            if (zu == zu && fu == fu && zv == zv && fv == fv &&
                window_arc_factor(zt, ft, 1, H, W, ur, uc, k, &fac)) {
                const double c = arc_cost(zu, zv, fac, k, model, lengths);
                if (c < inf) w = c;
            }
        }
        wt[p] = w;
    }
    for (int p = threadIdx.x; p < n; p += blockDim.x) d[p] = ld[base + p];
    __syncthreads();
    int changed;
    do {  // sweep 1: distances of the inner cells
        changed = 0;
        for (int v = threadIdx.x; v < n; v += blockDim.x) {
            if (!it[v]) continue;
            double best = d[v];
            for (int kk = 0; kk < K; ++kk) {
                const double w = wt[kk * n + v];
                if (!(w < inf)) continue;
                const int k = codes[kk];
                const double du = d[v - ARC_DR[k] * W - ARC_DC[k]];
                if (!(du < inf)) continue;
                const double nd = __dadd_rn(du, w);
                if (nd < best) best = nd;
            }
            if (best < d[v]) {
                d[v] = best;
                changed = 1;
            }
        }
    } while (__syncthreads_or(changed));
    for (int p = threadIdx.x; p < n; p += blockDim.x) {  // the seeds that stayed final
        const double s = ld[base + p];
        key[p] = (s < inf && d[p] == s)
                     ? ((unsigned long long)(unsigned int)la[base + p] << 32) |
                           (unsigned long long)(unsigned int)lh[base + p]
                     : none;
    }
    __syncthreads();
    do {  // sweep 2: keys along the tight arcs
        changed = 0;
        for (int v = threadIdx.x; v < n; v += blockDim.x) {
            const double dv = d[v];
            if (!it[v] || !(dv < inf)) continue;
            unsigned long long best = key[v];
            for (int kk = 0; kk < K; ++kk) {
                const double w = wt[kk * n + v];
                if (!(w < inf)) continue;
                const int k = codes[kk];
                const int u = v - ARC_DR[k] * W - ARC_DC[k];
                const double du = d[u];
                if (!(du < inf) || __dadd_rn(du, w) != dv || key[u] == none) continue;
                if (key[u] + 1ULL < best) best = key[u] + 1ULL;
            }
            if (best < key[v]) {
                key[v] = best;
                changed = 1;
            }
        }
    } while (__syncthreads_or(changed));
    for (int v = threadIdx.x; v < n; v += blockDim.x) {
        if (!it[v] || !(d[v] < inf)) continue;
        ld[base + v] = d[v];
        la[base + v] = (int)(key[v] >> 32);
        lh[base + v] = (int)(key[v] & 0xffffffffULL);
    }
}

// Dijkstra on a child-boundary graph (the CUDA twin of sssp_tiled.py's _graph_dijkstra): V
// vertices; vertex u belongs to child vchild[u] whose vertices start at coff[c] (node-local),
// csize[c] of them, with its dense (distance, hops) matrix at moff[c] in mat_d / mat_h; the
// grid arcs of u are cdst[e], cw[e] for e in [cptr[u], cptr[u + 1]) (cdst node-local).
// ld/la/lh hold the seeds (+inf elsewhere) and receive the labels.
__device__ void graph_dijkstra_dev(int V, const long long* vchild, const long long* coff,
                                   const long long* csize, const long long* moff,
                                   const double* mat_d, const int* mat_h,
                                   const long long* cptr, const long long* cdst,
                                   const double* cw, double* ld, int* la, int* lh, TTree t) {
    tt_reset(t);
    for (int p = 0; p < V; ++p)
        if (ld[p] < tt_inf()) tt_update(t, p, ld[p], la[p], lh[p]);
    while (!tt_empty(t)) {
        const int u = tt_pop(t);
        const double du = ld[u];
        const int au = la[u], hu = lh[u];
        const long long c = vchild[u];
        const long long base = coff[c];
        const long long B = csize[c];
        const long long row = moff[c] + (u - base) * B;
        for (long long j = 0; j < B; ++j) {
            const double w = mat_d[row + j];
            if (!(w < tt_inf())) continue;
            const int v = (int)(base + j);
            const double nd = __dadd_rn(du, w);
            const int nh = hu + mat_h[row + j];
            if (key_less(nd, au, nh, 0, ld[v], la[v], lh[v], 0)) {
                ld[v] = nd;
                la[v] = au;
                lh[v] = nh;
                tt_lower(t, v, nd, au, nh);
            }
        }
        for (long long e = cptr[u]; e < cptr[u + 1]; ++e) {
            const int v = (int)cdst[e];
            const double nd = __dadd_rn(du, cw[e]);
            const int nh = hu + 1;
            if (key_less(nd, au, nh, 0, ld[v], la[v], lh[v], 0)) {
                ld[v] = nd;
                la[v] = au;
                lh[v] = nh;
                tt_lower(t, v, nd, au, nh);
            }
        }
    }
}

// Phase 2 bottom-up on a batch of nodes (the twin of graphs_pairs_cpu): one thread per
// (node, boundary source) pair p0 + thread. Node n's vertices are [vbase[n], vbase[n + 1]) of
// the concatenated vchild / cptr; its boundary cells (the sources and targets, node-local
// vertex indices) targets[tbase[n] ...], its B x B output at obase[n]. Scratch per thread:
// vmax labels and a tree of 2 * cap nodes.
extern "C" __global__ void graphs_pairs(int n_pairs, int p0, const int* pnode, const int* psrc,
                                        const long long* vbase, const long long* tbase,
                                        const long long* targets, const long long* obase,
                                        const long long* vchild, const long long* coff,
                                        const long long* csize, const long long* moff,
                                        const double* mat_d, const int* mat_h,
                                        const long long* cptr, const long long* cdst,
                                        const double* cw, double* out_d, int* out_h,
                                        double* s_ld, int* s_la, int* s_lh, double* s_kd,
                                        int* s_ka, int* s_kh, int* s_win, int vmax, int cap) {
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= n_pairs) return;
    const int p = p0 + q;
    const int n = pnode[p], s = psrc[p];
    const long long v0 = vbase[n];
    const int V = (int)(vbase[n + 1] - v0);
    const long long t0 = tbase[n];
    const int B = (int)(tbase[n + 1] - t0);
    double* ld = s_ld + (long long)q * vmax;
    int* la = s_la + (long long)q * vmax;
    int* lh = s_lh + (long long)q * vmax;
    TTree tree = {s_kd + (long long)q * 2 * cap, s_ka + (long long)q * 2 * cap,
                  s_kh + (long long)q * 2 * cap, s_win + (long long)q * 2 * cap, cap};
    for (int v = 0; v < V; ++v) {
        ld[v] = tt_inf();
        la[v] = TT_INT_INF;
        lh[v] = TT_INT_INF;
    }
    const long long src = targets[t0 + s];
    ld[src] = 0.0;
    la[src] = 0;
    lh[src] = 0;
    graph_dijkstra_dev(V, vchild + v0, coff, csize, moff, mat_d, mat_h, cptr + v0, cdst, cw, ld,
                       la, lh, tree);
    const long long row = obase[n] + (long long)s * B;
    for (int j = 0; j < B; ++j) {
        const long long c = targets[t0 + j];
        out_d[row + j] = ld[c];
        out_h[row + j] = lh[c];
    }
}

// The top solve on the GPU (the twin of the top Dijkstra, sssp_tiled.py: top_labels_gpu): a
// label-correcting solve of the top nodes' boundary graph in two sweeps that give Dijkstra's
// labels exactly. Vertex u is boundary cell u - coff[c] of top node c = vchild[u]; that
// node's (distance, hops) matrix is pool_d / pool_h[loc[c]] (bpad x bpad, padded); the grid
// arcs of u are cdst[e], cw[e], e in [cptr[u], cptr[u + 1]). One warp per vertex of the
// round's frontier front[0 .. nf) (the vertices that improved in the previous round, listed
// by the host: a launch over every vertex spent most of a round on warps that had nothing
// to do): the lanes share its matrix row and its arcs; a vertex that improves is marked in
// next.
//
// Sweep 1, distances: d holds the bits of non-negative doubles, whose order as unsigned
// integers is their order as numbers, so atomicMin keeps the least; an active vertex relaxes
// its arcs with the same rounded addition as the CPU (__dadd_rn), and a vertex that improved
// is active in the next round, until a round changes nothing.
extern "C" __global__ void top_relax_d(long long nf, const long long* front,
                                       const long long* vchild, const long long* coff,
                                       const long long* loc, int bpad, const long long* csize,
                                       const double* pool_d, const long long* cptr,
                                       const long long* cdst, const double* cw,
                                       unsigned long long* d, unsigned char* next) {
    const int lane = threadIdx.x & 31;
    const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (w >= nf) return;
    const long long u = front[w];
    const double du = __longlong_as_double((long long)d[u]);
    const long long c = vchild[u];
    const long long base = coff[c];
    const long long B = csize[c];
    const double* row = pool_d + (loc[c] * bpad + (u - base)) * bpad;
    for (long long j = lane; j < B; j += 32) {
        const double w = row[j];
        if (!(w < tt_inf())) continue;
        const unsigned long long nd = (unsigned long long)__double_as_longlong(__dadd_rn(du, w));
        const long long v = base + j;
        if (nd < atomicMin(d + v, nd)) {
            next[v] = 1;
        }
    }
    for (long long e = cptr[u] + lane; e < cptr[u + 1]; e += 32) {
        const unsigned long long nd =
            (unsigned long long)__double_as_longlong(__dadd_rn(du, cw[e]));
        const long long v = cdst[e];
        if (nd < atomicMin(d + v, nd)) {
            next[v] = 1;
        }
    }
}

// Sweep 2, (allocation, hops) on the tight arcs (those with d[u] + w == d[v], the same
// rounded sum): key = allocation << 32 | hops, both non-negative, so the least key is the
// lexicographic least (allocation, hops); an arc adds its hops to the low word.
extern "C" __global__ void top_relax_key(long long nf, const long long* front,
                                         const long long* vchild, const long long* coff,
                                         const long long* loc, int bpad,
                                         const long long* csize, const double* pool_d,
                                         const int* pool_h, const long long* cptr,
                                         const long long* cdst, const double* cw,
                                         const unsigned long long* d, unsigned long long* key,
                                         unsigned char* next) {
    const int lane = threadIdx.x & 31;
    const long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (w >= nf) return;
    const long long u = front[w];
    const double du = __longlong_as_double((long long)d[u]);
    const unsigned long long ku = key[u];
    const long long c = vchild[u];
    const long long base = coff[c];
    const long long B = csize[c];
    const long long r = (loc[c] * bpad + (u - base)) * bpad;
    for (long long j = lane; j < B; j += 32) {
        const double w = pool_d[r + j];
        if (!(w < tt_inf())) continue;
        const long long v = base + j;
        if ((unsigned long long)__double_as_longlong(__dadd_rn(du, w)) != d[v]) continue;
        const unsigned long long nk = ku + (unsigned long long)pool_h[r + j];
        if (nk < atomicMin(key + v, nk)) {
            next[v] = 1;
        }
    }
    for (long long e = cptr[u] + lane; e < cptr[u + 1]; e += 32) {
        const long long v = cdst[e];
        if ((unsigned long long)__double_as_longlong(__dadd_rn(du, cw[e])) != d[v]) continue;
        const unsigned long long nk = ku + 1ULL;
        if (nk < atomicMin(key + v, nk)) {
            next[v] = 1;
        }
    }
}

// ---------------------------------------------------------------------------------------
// The top solve with the level on the device (sssp_tiled.py: DeviceLevel, level_solve_gpu):
// the same two sweeps as top_relax_d / top_relax_key, on a level whose nodes sit in slots
// of a device pool instead of a host-built graph. Vertex u = slot * B + j is boundary cell j
// of the node in slot u / B (j < count[slot]; the rest is padding, never reached), with
// global cell id ids[u], elevation z[u], friction f[u]; the node's (distance, hops) matrix
// is pool_d / pool_h[slot] (B x B). The grid arcs between nodes are not stored: a vertex
// finds its neighbours' vertices through cell_vertex (the vertex of every boundary cell of
// the grid, -1 elsewhere) and costs the arc with arc_cost, as the host's _arcs_cpu does (the
// same arcs, the same float64 costs).

// cell_vertex[ids[u]] = u for the level's cells (cell_vertex preset to -1).
extern "C" __global__ void level_cell_vertex(long long V, const long long* ids,
                                             int* cell_vertex) {
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u < V && ids[u] >= 0) cell_vertex[ids[u]] = (int)u;
}

// d = +inf (bits), key = all ones (no label).
extern "C" __global__ void level_reset(long long V, unsigned long long* d,
                                       unsigned long long* key) {
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u < V) {
        d[u] = 0x7ff0000000000000ULL;
        key[u] = ~0ULL;
    }
}

// arr[idx[i]] = min(arr[idx[i]], val[i]) (seeds; unsigned order = the order of non-negative
// doubles' bits and of packed keys).
extern "C" __global__ void scatter_min_u64(long long n, const long long* idx,
                                           const unsigned long long* val,
                                           unsigned long long* arr) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicMin(arr + idx[i], val[i]);
}

// out[i] = arr[idx[i]].
extern "C" __global__ void gather_u64(long long n, const long long* idx,
                                      const unsigned long long* arr, unsigned long long* out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = arr[idx[i]];
}

// The next frontier: every v with next[v] set, listed in front (order immaterial: the
// sweeps' fixpoints do not depend on it), next cleared; *nf counts them.
extern "C" __global__ void level_compact(long long V, unsigned char* next, long long* front,
                                         unsigned long long* nf) {
    const long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v < V && next[v]) {
        next[v] = 0;
        front[atomicAdd(nf, 1ULL)] = v;
    }
}

// The grid neighbour of vertex u along arc codes[kk] that is a vertex of another node (-1:
// none), and the arc's cost in *w. The cells a knight arc passes between lie within a node's
// frame (2 cells) of the edge it crosses, so they are boundary cells of the level when they
// are vertices (cell_vertex >= 0), as in arcs_cpu.
__device__ __forceinline__ long long level_arc(long long u, int kk, int B, const long long* ids,
                                               const float* z, const float* f,
                                               const int* cell_vertex, long long R,
                                               long long C, const int* codes, int model,
                                               const double* lengths, double* w) {
    const long long id = ids[u];
    const long long r = id / C, c = id - (id / C) * C;
    const int k = codes[kk];
    const long long rr = r + ARC_DR[k], cc = c + ARC_DC[k];
    if (rr < 0 || rr >= R || cc < 0 || cc >= C) return -1;
    const long long v = cell_vertex[rr * C + cc];
    if (v < 0 || v / B == u / B) return -1;
    double fac;
    if (k < 8) {
        fac = pair_factor(f[u], f[v]);
    } else {  // the cells passed between lie in the bounding box of u and v: inside the grid
        const int ka = KNIGHT_MID[k - 8][0], kb = KNIGHT_MID[k - 8][1];
        const long long ma = cell_vertex[(r + ARC_DR[ka]) * C + c + ARC_DC[ka]];
        const long long mb = cell_vertex[(r + ARC_DR[kb]) * C + c + ARC_DC[kb]];
        if (ma < 0 || mb < 0) return -1;
        fac = quad_factor(f[u], f[v], f[ma], f[mb]);
    }
    const double a = arc_cost(z[u], z[v], fac, k, model, lengths);
    if (!(a < tt_inf())) return -1;
    *w = a;
    return v;
}

// Sweep 1 (distances): vertex u's warp; lanes share its matrix row, lanes 0..K-1 also take
// one grid arc each.
__device__ __forceinline__ void level_relax_d_one(
    long long u, int lane, int B, const int* count, const long long* ids, const float* z,
    const float* f, const int* cell_vertex, long long R, long long C, const int* codes, int K,
    int model, const double* lengths, const double* pool_d, unsigned long long* d,
    unsigned char* next) {
    const long long slot = u / B;
    const double du = __longlong_as_double((long long)d[u]);
    const double* row = pool_d + u * B;
    const int n = count[slot];
    for (int j = lane; j < n; j += 32) {
        const double w = row[j];
        if (!(w < tt_inf())) continue;
        const unsigned long long nd = (unsigned long long)__double_as_longlong(__dadd_rn(du, w));
        const long long v = slot * B + j;
        if (nd < atomicMin(d + v, nd)) next[v] = 1;
    }
    if (lane < K) {
        double w;
        const long long v = level_arc(u, lane, B, ids, z, f, cell_vertex, R, C, codes, model,
                                      lengths, &w);
        if (v >= 0) {
            const unsigned long long nd =
                (unsigned long long)__double_as_longlong(__dadd_rn(du, w));
            if (nd < atomicMin(d + v, nd)) next[v] = 1;
        }
    }
}

// Sweep 2 (allocation << 32 | hops on the tight arcs), as top_relax_key.
__device__ __forceinline__ void level_relax_key_one(
    long long u, int lane, int B, const int* count, const long long* ids, const float* z,
    const float* f, const int* cell_vertex, long long R, long long C, const int* codes, int K,
    int model, const double* lengths, const double* pool_d, const int* pool_h,
    const unsigned long long* d, unsigned long long* key, unsigned char* next) {
    const long long slot = u / B;
    const double du = __longlong_as_double((long long)d[u]);
    const unsigned long long ku = key[u];
    const double* row = pool_d + u * B;
    const int* hrow = pool_h + u * B;
    const int n = count[slot];
    for (int j = lane; j < n; j += 32) {
        const double w = row[j];
        if (!(w < tt_inf())) continue;
        const long long v = slot * B + j;
        if ((unsigned long long)__double_as_longlong(__dadd_rn(du, w)) != d[v]) continue;
        const unsigned long long nk = ku + (unsigned long long)hrow[j];
        if (nk < atomicMin(key + v, nk)) next[v] = 1;
    }
    if (lane < K) {
        double w;
        const long long v = level_arc(u, lane, B, ids, z, f, cell_vertex, R, C, codes, model,
                                      lengths, &w);
        if (v >= 0 &&
            (unsigned long long)__double_as_longlong(__dadd_rn(du, w)) == d[v]) {
            const unsigned long long nk = ku + 1ULL;
            if (nk < atomicMin(key + v, nk)) next[v] = 1;
        }
    }
}

// One round of a sweep over the frontier front[0 .. *nf): the count is read on the device,
// so the host queues many rounds (relax, compact, relax, ...) between two waits; each warp
// of the fixed grid takes frontier vertices in turn.
extern "C" __global__ void level_relax_d(const unsigned long long* nf, const long long* front,
                                         int B, const int* count, const long long* ids,
                                         const float* z, const float* f,
                                         const int* cell_vertex, long long R, long long C,
                                         const int* codes, int K, int model,
                                         const double* lengths, const double* pool_d,
                                         unsigned long long* d, unsigned char* next) {
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const long long n = (long long)*nf;
    for (long long wi = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; wi < n;
         wi += warps)
        level_relax_d_one(front[wi], lane, B, count, ids, z, f, cell_vertex, R, C, codes, K,
                          model, lengths, pool_d, d, next);
}

extern "C" __global__ void level_relax_key(const unsigned long long* nf,
                                           const long long* front, int B, const int* count,
                                           const long long* ids, const float* z,
                                           const float* f, const int* cell_vertex,
                                           long long R, long long C, const int* codes, int K,
                                           int model, const double* lengths,
                                           const double* pool_d, const int* pool_h,
                                           const unsigned long long* d,
                                           unsigned long long* key, unsigned char* next) {
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const long long n = (long long)*nf;
    for (long long wi = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; wi < n;
         wi += warps)
        level_relax_key_one(front[wi], lane, B, count, ids, z, f, cell_vertex, R, C, codes, K,
                            model, lengths, pool_d, pool_h, d, key, next);
}

// Labels out: la, lh from the packed keys where d is finite, INT_MAX elsewhere.
extern "C" __global__ void level_labels(long long V, const unsigned long long* d,
                                        const unsigned long long* key, int* la, int* lh) {
    const long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= V) return;
    if (d[u] < 0x7ff0000000000000ULL) {
        la[u] = (int)(key[u] >> 32);
        lh[u] = (int)(key[u] & 0xffffffffULL);
    } else {
        la[u] = TT_INT_INF;
        lh[u] = TT_INT_INF;
    }
}
