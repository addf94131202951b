// In-core grid SSSP on the GPU: the CUDA twin of terrain/grid/sssp.py (same labels, same bits).
//
// Layout: the grid padded by PAD NaN cells on every side, flattened row-major (width = cols +
// 2*PAD), so a neighbour is cell + offs[k] with no bounds check. z, f: float32 (f may be a
// 1-element array of 1.0 when has_f == 0). dist: non-negative float64 distances stored as
// their uint64 bits, whose unsigned order is the float order, so atomicMin on unsigned long
// long is a float64 atomic min; +inf = unreached. label: alloc << 32 | hops (uint64), all ones
// = none.
//
// 1. nf_step / nf_persistent (below): near-far label-correcting relaxation; its fixed point
//    is the least one: the left-fold minimum over paths, as on the CPU.
// 2. labels_step / labels_persistent (below): min-label propagation of (alloc, hops) over tight arcs
//    (dist[u] + w == dist[v], exact), the loop on the device.
// 3. backlinks: per cell, the lowest arc code k whose neighbour is a tight predecessor with
//    label == label[v] - 1.
#include "_costs.cuh"
#include "../graph/_nearfar.cuh"  // list_push, stamped_push, push_near_or_far, last_block;
                                  // next_threshold (_dist.cuh)

typedef unsigned long long u64;

#define SSSP_INF_BITS 0x7ff0000000000000ULL
#define SSSP_NO_LABEL 0xffffffffffffffffULL

__device__ __forceinline__ bool is_vertex(const float* z, const float* f, int has_f, long long v) {
    const float zv = z[v];
    if (zv != zv) return false;
    if (has_f) {
        const float fv = f[v];
        if (fv != fv) return false;
    }
    return true;
}

// Whether arc k from vertex u to vertex u + offs[k] exists, and its friction factor in fac
// (fu, fv: the ends' frictions, 1 without a friction raster): a knight arc exists only when
// the two cells it passes between are vertices. The twin of kernels.c's sssp_arc_factor.
__device__ __forceinline__ bool flat_arc_factor(const float* __restrict__ z,
                                                const float* __restrict__ f, int has_f,
                                                const long long* __restrict__ offs, long long u,
                                                int k, float fu, float fv, double& fac) {
    if (k < 8) {
        fac = pair_factor(fu, fv);
        return true;
    }
    const long long a = u + offs[KNIGHT_MID[k - 8][0]], b = u + offs[KNIGHT_MID[k - 8][1]];
    if (!is_vertex(z, f, has_f, a) || !is_vertex(z, f, has_f, b)) return false;
    fac = quad_factor(fu, fv, has_f ? f[a] : 1.0f, has_f ? f[b] : 1.0f);
    return true;
}

__device__ __forceinline__ double bits_to_double(u64 b) {
    return __longlong_as_double((long long)b);
}
__device__ __forceinline__ u64 double_to_bits(double d) {
    return (u64)__double_as_longlong(d);
}

// Relax the arc of code k from cell u (distance d, elevation zu, friction fu) to cell v =
// u + offs[k]: true when it lowered dist[v] to nd (this thread's atomicMin won). Costs past
// max_cost (and +inf costs) are dropped. The one relaxation of every queue and launch scheme
// below.
__device__ __forceinline__ bool relax_arc(const float* __restrict__ z,
                                          const float* __restrict__ f, int has_f, int model,
                                          const double* __restrict__ lengths,
                                          const long long* __restrict__ offs, long long u,
                                          long long v, int k, double d, float zu, float fu,
                                          u64* dist, double max_cost, double& nd) {
    if (!is_vertex(z, f, has_f, v)) return false;
    const u64 dv_bits = dist[v];
    // cannot improve unless w == 0 and equal: w >= 0 so nd >= d >= dv
    if (dv_bits != SSSP_INF_BITS && bits_to_double(dv_bits) <= d) return false;
    double fac;
    if (!flat_arc_factor(z, f, has_f, offs, u, k, fu, has_f ? f[v] : 1.0f, fac)) return false;
    const double w = arc_cost(zu, z[v], fac, k, model, lengths);
    nd = __dadd_rn(d, w);
    if (!(nd <= max_cost)) return false;  // also drops +inf costs
    const u64 nd_bits = double_to_bits(nd);
    return nd_bits < dv_bits && nd_bits < atomicMin(&dist[v], nd_bits);
}

// Relax every arc of cell u (one thread): push(v, nd) for each neighbour v whose distance
// it lowered to nd.
template <typename F>
__device__ __forceinline__ void relax_cell(const float* __restrict__ z,
                                           const float* __restrict__ f, int has_f, int model,
                                           const double* __restrict__ lengths,
                                           const long long* __restrict__ offs,
                                           const int* __restrict__ codes, int nk, long long u,
                                           u64* dist, double max_cost, const F& push) {
    const double d = bits_to_double(dist[u]);
    const float zu = z[u];
    const float fu = has_f ? f[u] : 1.0f;
    for (int j = 0; j < nk; ++j) {
        const int k = codes[j];
        const long long v = u + offs[k];
        double nd;
        if (relax_arc(z, f, has_f, model, lengths, offs, u, v, k, d, zu, fu, dist, max_cost,
                      nd))
            push(v, nd);
    }
}

// Offer the label nlab (the label of cell u at distance d, elevation zu, friction fu, plus
// one hop) to cell v = u + offs[k] across the arc of code k when that arc is tight (d + w ==
// dist[v], exact): true when it lowered label[v].
__device__ __forceinline__ bool label_arc(const float* __restrict__ z,
                                          const float* __restrict__ f, int has_f, int model,
                                          const double* __restrict__ lengths,
                                          const long long* __restrict__ offs, long long u,
                                          long long v, int k, double d, float zu, float fu,
                                          const u64* __restrict__ dist, u64* label, u64 nlab) {
    const u64 dv_bits = dist[v];
    if (dv_bits == SSSP_INF_BITS || !is_vertex(z, f, has_f, v)) return false;
    const double dv = bits_to_double(dv_bits);
    if (dv < d) return false;
    if (nlab >= label[v]) return false;
    double fac;
    if (!flat_arc_factor(z, f, has_f, offs, u, k, fu, has_f ? f[v] : 1.0f, fac)) return false;
    const double w = arc_cost(zu, z[v], fac, k, model, lengths);
    if (__dadd_rn(d, w) != dv) return false;
    return nlab < atomicMin(&label[v], nlab);
}

// Backlink codes (0 root, k+1, 255 unreached) of the unpadded grid, and its distance (NaN
// where unreached), allocation and hops (-1 where unreached).
extern "C" __global__ void backlinks(const float* __restrict__ z, const float* __restrict__ f,
                                     int has_f, int model, const double* __restrict__ lengths,
                                     const long long* __restrict__ offs,
                                     const int* __restrict__ codes, int nk,
                                     const u64* __restrict__ dist, const u64* __restrict__ label,
                                     long long rows, long long cols, int pad,
                                     unsigned char* __restrict__ backlink,
                                     double* __restrict__ distance, int* __restrict__ allocation,
                                     int* __restrict__ hops) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    const long long r = i / cols, c = i - r * cols;
    const long long v = (r + pad) * (cols + 2 * pad) + pad + c;
    const u64 lv = label[v];
    const u64 dv_bits = dist[v];
    if (lv == SSSP_NO_LABEL || dv_bits == SSSP_INF_BITS || !is_vertex(z, f, has_f, v)) {
        backlink[i] = 255;
        distance[i] = __longlong_as_double(0x7ff8000000000000LL);
        allocation[i] = -1;
        hops[i] = -1;
        return;
    }
    const double dv = __longlong_as_double((long long)dv_bits);
    distance[i] = dv;
    allocation[i] = (int)(lv >> 32);
    hops[i] = (int)(lv & 0xffffffffULL);
    if ((lv & 0xffffffffULL) == 0) {
        backlink[i] = 0;
        return;
    }
    const u64 want = lv - 1ULL;
    const float zv = z[v];
    const float fv = has_f ? f[v] : 1.0f;
    unsigned char code = 255;
    for (int j = 0; j < nk; ++j) {  // codes are increasing
        const int k = codes[j];
        const long long u = v + offs[k];
        if (label[u] != want) continue;
        const int ku = (k & 8) | ((k + 4) & 7);  // the reverse arc u -> v
        const double du = __longlong_as_double((long long)dist[u]);
        double fac;
        if (!flat_arc_factor(z, f, has_f, offs, u, ku, has_f ? f[u] : 1.0f, fv, fac)) continue;
        if (__dadd_rn(du, arc_cost(z[u], zv, fac, ku, model, lengths)) == dv) {
            code = (unsigned char)(k + 1);
            break;
        }
    }
    backlink[i] = code;
}

// The distance of the unpadded grid (NaN where unreached), as backlinks writes it, from the
// distances alone: the distance phase's result, available before the labels are (a reached
// cell always has a label, so the two agree; the launcher checks the counts).
extern "C" __global__ void distances(const u64* __restrict__ dist, long long rows,
                                     long long cols, int pad, double* __restrict__ distance) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    const long long r = i / cols, c = i - r * cols;
    const u64 dv_bits = dist[(r + pad) * (cols + 2 * pad) + pad + c];
    distance[i] = __longlong_as_double(dv_bits == SSSP_INF_BITS ? 0x7ff8000000000000LL
                                                                : (long long)dv_bits);
}

// The reached cells of an unpadded distance grid (NaN unreached) and the largest of their
// distances: out[0] += the count, out[1] = max(out[1], the largest distance's bits), the
// distances being >= 0 (+0.0 for a -0.0), whose bits order as their values. What
// cupy.count_nonzero and cupy.nanmax gave, without CuPy's reduction machinery: its first
// use in a process imports cupyx.scipy and compiles.
extern "C" __global__ void reached_stats(const double* __restrict__ distance, long long n,
                                         unsigned long long* __restrict__ out) {
    unsigned long long count = 0, best = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const double d = distance[i];
        if (d == d) {
            count += 1;
            const unsigned long long b =
                (unsigned long long)__double_as_longlong(__dadd_rn(d, 0.0));
            best = b > best ? b : best;
        }
    }
    if (count) {
        atomicAdd(&out[0], count);
        atomicMax(&out[1], best);
    }
}

// ------------------------------------------------------------------------------------------
// Near-far SSSP (Davidson, Baxter, Garland, Owens 2014) and tight-arc label propagation with
// the iteration loop on the device.
//
// One launch of nf_step is one step: it either relaxes the near list (every cell whose
// distance dropped below the threshold T and was not yet relaxed with that distance) or,
// when the near list ran dry, splits the far list (cells whose distance is >= T) at the
// next threshold. The last block to finish a launch (a counter in ctl) does the control:
// it swaps the double-buffered lists and decides the next step, so the host only enqueues
// launches and reads ctl[C_DONE] every few dozen steps. Lists hold flat cell indices (the
// padded grid has < 2^31 cells); a cell enters a list at most once per list (stamps in
// near_mark / far_mark: the step id or the far epoch that list belongs to).
//
// Invariant: a cell whose latest distance has not been relaxed is in the near list when
// that distance is < T, else in the far list. Far entries whose distance fell below the
// previous threshold were relaxed through a near list already and are dropped at the
// split. Any order of relaxations reaches the same least fixed point (fl(d + w) is
// monotone in d), so the distances are the CPU's bits.

#define C_NNEAR 0    // 0, 1: sizes of the near lists
#define C_NFAR 2     // 2, 3: sizes of the far lists
#define C_CUR 4      // the near list being relaxed
#define C_FCUR 5     // the far list being filled
#define C_STEP 6     // step id (the stamp of the current near list)
#define C_EPOCH 7    // far epoch (the stamp of the current far list)
#define C_T 8        // threshold (float64 bits)
#define C_TOLD 9     // previous threshold (float64 bits)
#define C_FARMIN 10  // smallest distance pushed to the current far list (bits)
#define C_SPLIT 11   // 1: this step splits the far list
#define C_DONE 12
#define C_BLOCKS 13  // blocks finished in this launch
#define C_DELTA 14   // bucket width (float64 bits)
#define C_NSTEPS 15  // relax steps run
#define C_NSPLITS 16 // splits run
#define C_NPROC 17   // cells relaxed, summed over steps

// The far minimum is a float64 kept as its bits in a u64 word (as dist): the distance-typed
// atomic min of _dist.cuh orders non-negative doubles like their bits.
__device__ __forceinline__ double* as_double(u64* word) {
    return reinterpret_cast<double*>(word);
}

// The last block's control at the end of a relax step (nf_step, labels_step): the list just
// relaxed (cur) is counted and emptied, the one filled becomes current, the step id moves on.
__device__ __forceinline__ void end_relax_step(volatile u64* c, int cur) {
    c[C_NPROC] += c[C_NNEAR + cur];
    c[C_NNEAR + cur] = 0;
    c[C_CUR] = 1 - cur;
    c[C_STEP] += 1;
    c[C_NSTEPS] += 1;
}

extern "C" __global__ void nf_step(const float* __restrict__ z, const float* __restrict__ f,
                                   int has_f, int model, const double* __restrict__ lengths,
                                   const long long* __restrict__ offs,
                                   const int* __restrict__ codes, int nk, u64* dist,
                                   int* near0, int* near1, int* far0, int* far1,
                                   int* near_mark, int* far_mark, u64* ctl, double max_cost) {
    if (ctl[C_DONE]) return;
    const int split = (int)ctl[C_SPLIT];
    const int cur = (int)ctl[C_CUR];
    const int fcur = (int)ctl[C_FCUR];
    int* near_cur = cur ? near1 : near0;
    int* near_next = cur ? near0 : near1;
    int* far_cur = fcur ? far1 : far0;
    int* far_next = fcur ? far0 : far1;
    const int epoch = (int)ctl[C_EPOCH];
    const double T = bits_to_double(ctl[C_T]);
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (split) {
        // far list -> near list (distance < T), next far list (>= T) or dropped (< T_old)
        const long long n = (long long)ctl[C_NFAR + fcur];
        const double told = bits_to_double(ctl[C_TOLD]);
        const NearFarLists<int, double> q{near_cur, &ctl[C_NNEAR + cur], near_mark,
                                          (int)ctl[C_STEP], far_next, &ctl[C_NFAR + 1 - fcur],
                                          far_mark, epoch, as_double(&ctl[C_FARMIN])};
        for (long long i = tid; i < n; i += stride) {
            const int v = far_cur[i];
            const double d = bits_to_double(dist[v]);
            if (!(d < told)) push_near_or_far(v, d, T, q);  // below told: relaxed already
        }
    } else {
        const long long n = (long long)ctl[C_NNEAR + cur];
        const NearFarLists<int, double> q{near_next, &ctl[C_NNEAR + 1 - cur], near_mark,
                                          (int)ctl[C_STEP] + 1, far_cur, &ctl[C_NFAR + fcur],
                                          far_mark, epoch, as_double(&ctl[C_FARMIN])};
        for (long long i = tid; i < n; i += stride)
            relax_cell(z, f, has_f, model, lengths, offs, codes, nk, near_cur[i], dist, max_cost,
                       [&](long long v, double nd) { push_near_or_far((int)v, nd, T, q); });
    }
    if (!last_block(&ctl[C_BLOCKS])) return;
    // control, one thread: finish this step, then choose the next
    volatile u64* c = ctl;
    if (split) {
        c[C_NFAR + fcur] = 0;
        c[C_FCUR] = 1 - fcur;
        c[C_SPLIT] = 0;
        c[C_NSPLITS] += 1;
    } else {
        end_relax_step(c, cur);
    }
    c[C_BLOCKS] = 0;
    if (c[C_NNEAR + c[C_CUR]] == 0) {
        if (c[C_NFAR + c[C_FCUR]] == 0) {
            c[C_DONE] = 1;
        } else {
            const double t_now = bits_to_double(c[C_T]);
            const double m = fmax(t_now, bits_to_double(c[C_FARMIN]));
            c[C_TOLD] = double_to_bits(t_now);
            c[C_T] = double_to_bits(next_threshold(m, bits_to_double(c[C_DELTA])));
            c[C_FARMIN] = SSSP_INF_BITS;
            c[C_EPOCH] += 1;
            c[C_SPLIT] = 1;
        }
    }
    __threadfence();
}

// One step of min-label propagation of (alloc << 32 | hops) over tight arcs, with the loop
// control of nf_step (C_NNEAR, C_CUR, C_STEP, C_DONE, C_BLOCKS, C_NSTEPS, C_NPROC).
extern "C" __global__ void labels_step(const float* __restrict__ z, const float* __restrict__ f,
                                       int has_f, int model, const double* __restrict__ lengths,
                                       const long long* __restrict__ offs,
                                       const int* __restrict__ codes, int nk,
                                       const u64* __restrict__ dist, u64* label,
                                       int* list0, int* list1, int* mark, u64* ctl) {
    if (ctl[C_DONE]) return;
    const int cur = (int)ctl[C_CUR];
    int* list = cur ? list1 : list0;
    int* next = cur ? list0 : list1;
    const long long n = (long long)ctl[C_NNEAR + cur];
    const int stamp = (int)ctl[C_STEP] + 1;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int u = list[i];
        const double d = bits_to_double(dist[u]);
        const u64 nlab = label[u] + 1ULL;
        const float zu = z[u];
        const float fu = has_f ? f[u] : 1.0f;
        for (int j = 0; j < nk; ++j) {
            const int k = codes[j];
            const int v = u + (int)offs[k];
            if (label_arc(z, f, has_f, model, lengths, offs, u, v, k, d, zu, fu, dist, label,
                          nlab))
                stamped_push(v, stamp, mark, next, &ctl[C_NNEAR + 1 - cur]);
        }
    }
    if (!last_block(&ctl[C_BLOCKS])) return;
    volatile u64* c = ctl;
    end_relax_step(c, cur);
    c[C_BLOCKS] = 0;
    if (c[C_NNEAR + 1 - cur] == 0) c[C_DONE] = 1;
    __threadfence();
}

// Pad the grid on the device: out (rows + 2 pad) x (cols + 2 pad), NaN frame.
extern "C" __global__ void pad_grid(const float* __restrict__ a, long long rows, long long cols,
                                    int pad, float* __restrict__ out) {
    const long long width = cols + 2 * pad;
    const long long n = (rows + 2 * pad) * width;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const long long r = i / width - pad, c = i % width - pad;
        out[i] = (r >= 0 && r < rows && c >= 0 && c < cols)
                     ? a[r * cols + c] : __int_as_float(0x7fc00000);
    }
}

// ------------------------------------------------------------------------------------------
// Persistent variants: one launch runs the whole loop, one block per SM (all resident at once),
// with a software grid barrier between steps (grid_barrier). Every block takes the same
// decisions from the same counters, so no block runs the control alone: lists are
// triple-buffered (the list of step s is L[s % 3]; step s appends to L[(s + 1) % 3]; block 0
// clears the count of L[(s + 2) % 3], last read in step s - 1, before the barrier that ends
// step s), and the far lists the same way by split index e (the split reads F[e % 3] and
// appends to F[(e + 1) % 3]; relax steps append to F[e % 3]). A split is a step as well (it
// fills L[(s + 1) % 3]): no block ever changes a counter that the others read to decide the
// current step. A step costs one barrier instead of a launch and a serial control.
//
// bar: [0] arrivals, [1] generation, [2] abort. cnt: near counts [0..2], far counts [3..5], far minima
// [6..8] (bits), statistics [9..11] = steps, splits, cells relaxed.

#define BARRIER_TIMEOUT_NS 5000000000ULL

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Returns false when the run is aborted: a block waited BARRIER_TIMEOUT_NS (the blocks were
// not all resident, which the launcher sizes against) or another block gave up; the
// launcher then starts over with one launch a step.
__device__ __forceinline__ bool grid_barrier(unsigned int* bar) {
    __shared__ bool ok;
    __syncthreads();  // then thread 0's fence publishes the block's writes (as cg grid.sync)
    if (threadIdx.x == 0) {
        volatile unsigned int* vbar = bar;
        const unsigned int g = vbar[1];
        ok = true;
        __threadfence();
        if (atomicAdd(&bar[0], 1u) == gridDim.x - 1) {
            bar[0] = 0;
            __threadfence();
            atomicAdd(&bar[1], 1u);
        } else {
            const unsigned long long t0 = global_ns();
            while (vbar[1] == g) {
                __nanosleep(32);
                if (vbar[2] || global_ns() - t0 > BARRIER_TIMEOUT_NS) {
                    atomicExch(&bar[2], 1u);
                    break;
                }
            }
        }
        __threadfence();
        ok = vbar[2] == 0;
    }
    __syncthreads();
    return ok;
}

// A persistent kernel's thread: its place in the grid (tid of stride), and as one of the
// nk lanes of a (cell, arc) pair its first cell, the stride between its cells and its arc
// code (blockDim is a multiple of nk: 4, 8 or 16). boss: block 0's thread 0.
struct PersistentThread {
    long long stride, tid, cell0, cell_stride;
    int my_code;
    bool boss;

    __device__ __forceinline__ PersistentThread(const int* __restrict__ codes, int nk)
        : stride((long long)gridDim.x * blockDim.x),
          tid((long long)blockIdx.x * blockDim.x + threadIdx.x),
          cell0(tid / nk), cell_stride(stride / nk), my_code(codes[threadIdx.x % nk]),
          boss(blockIdx.x == 0 && threadIdx.x == 0) {}
};

extern "C" __global__ void nf_persistent(const float* __restrict__ z, const float* __restrict__ f,
                                         int has_f, int model, const double* __restrict__ lengths,
                                         const long long* __restrict__ offs,
                                         const int* __restrict__ codes, int nk, u64* dist,
                                         int* near0, int* near1, int* near2, int* far0, int* far1,
                                         int* far2, int* near_mark, int* far_mark, u64* cnt,
                                         unsigned int* bar, double delta, double max_cost) {
    int* nears[3] = {near0, near1, near2};
    int* fars[3] = {far0, far1, far2};
    volatile u64* vc = cnt;
    const PersistentThread t(codes, nk);
    long long s = 0, e = 0, steps = 0, splits = 0, relaxed = 0;
    double T = -1.0, told = -1.0;
    if (((volatile unsigned int*)bar)[2]) return;  // started after an abort
    while (true) {
        const long long n = (long long)vc[s % 3];
        if (n > 0) {
            if (t.boss) vc[(s + 2) % 3] = 0;
            const int* cur = nears[s % 3];
            const NearFarLists<int, double> q{nears[(s + 1) % 3], &cnt[(s + 1) % 3], near_mark,
                                              (int)(s + 1), fars[e % 3], &cnt[3 + e % 3],
                                              far_mark, (int)e, as_double(&cnt[6 + e % 3])};
            // one thread per (cell, arc): the nk arcs of a cell are nk neighbouring lanes
            for (long long i = t.cell0; i < n; i += t.cell_stride) {
                const int u = cur[i];
                const double d = bits_to_double(dist[u]);
                const int v = u + (int)offs[t.my_code];
                double nd;
                if (relax_arc(z, f, has_f, model, lengths, offs, u, v, t.my_code, d, z[u],
                              has_f ? f[u] : 1.0f, dist, max_cost, nd))
                    push_near_or_far(v, nd, T, q);
            }
            s += 1;
            steps += 1;
            relaxed += n;
        } else {
            const long long nf = (long long)vc[3 + e % 3];
            if (nf == 0) break;
            told = T;
            T = next_threshold(fmax(T, bits_to_double(vc[6 + e % 3])), delta);
            if (t.boss) {
                vc[(s + 2) % 3] = 0;
                vc[3 + (e + 2) % 3] = 0;
                vc[6 + (e + 2) % 3] = SSSP_INF_BITS;
            }
            // a split is a step too: it fills L[(s + 1) % 3], so that no block changes the
            // count (of L[s % 3]) that a slower block may still be reading to decide
            const int* src = fars[e % 3];
            const NearFarLists<int, double> q{nears[(s + 1) % 3], &cnt[(s + 1) % 3], near_mark,
                                              (int)(s + 1), fars[(e + 1) % 3],
                                              &cnt[3 + (e + 1) % 3], far_mark, (int)(e + 1),
                                              as_double(&cnt[6 + (e + 1) % 3])};
            for (long long i = t.tid; i < nf; i += t.stride) {
                const int v = src[i];
                const double d = bits_to_double(dist[v]);
                if (!(d < told)) push_near_or_far(v, d, T, q);  // below told: relaxed already
            }
            s += 1;
            e += 1;
            splits += 1;
        }
        if (!grid_barrier(bar)) break;
    }
    if (t.boss) {
        cnt[9] = steps;
        cnt[10] = splits;
        cnt[11] = relaxed;
    }
}

extern "C" __global__ void labels_persistent(const float* __restrict__ z,
                                             const float* __restrict__ f, int has_f, int model,
                                             const double* __restrict__ lengths,
                                             const long long* __restrict__ offs,
                                             const int* __restrict__ codes, int nk,
                                             const u64* __restrict__ dist, u64* label,
                                             int* list0, int* list1, int* list2, int* mark,
                                             u64* cnt, unsigned int* bar) {
    int* lists[3] = {list0, list1, list2};
    volatile u64* vc = cnt;
    const PersistentThread t(codes, nk);
    long long s = 0, relaxed = 0;
    if (((volatile unsigned int*)bar)[2]) return;  // started after an abort
    while (true) {
        const long long n = (long long)vc[s % 3];
        if (n == 0) break;
        if (t.boss) vc[(s + 2) % 3] = 0;
        const int* cur = lists[s % 3];
        int* next = lists[(s + 1) % 3];
        u64* n_next = &cnt[(s + 1) % 3];
        const int stamp = (int)(s + 1);
        // one thread per (cell, arc), as in nf_persistent
        for (long long i = t.cell0; i < n; i += t.cell_stride) {
            const int u = cur[i];
            const int v = u + (int)offs[t.my_code];
            if (label_arc(z, f, has_f, model, lengths, offs, u, v, t.my_code,
                          bits_to_double(dist[u]), z[u], has_f ? f[u] : 1.0f, dist, label,
                          label[u] + 1ULL))
                stamped_push(v, stamp, mark, next, n_next);
        }
        s += 1;
        relaxed += n;
        if (!grid_barrier(bar)) break;
    }
    if (t.boss) {
        cnt[9] = s;
        cnt[11] = relaxed;
    }
}
