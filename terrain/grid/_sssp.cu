// In-core grid SSSP on the GPU: the CUDA twin of terrain/grid/sssp.py (same labels, same bits).
//
// Layout: the grid padded by PAD NaN cells on every side, flattened row-major (width = cols +
// 2*PAD), so a neighbour is cell + offs[k] with no bounds check. z, f: float32 (f may be a
// 1-element array of 1.0 when has_f == 0). dist: non-negative float64 distances stored as
// their uint64 bits, whose unsigned order is the float order, so atomicMin on unsigned long
// long is a float64 atomic min; +inf = unreached. label: alloc << 32 | hops (uint64), all ones
// = none.
//
// 1. sssp_relax: label-correcting relaxation of a frontier (a list of cells whose distance
//    dropped); a cell whose distance drops is appended to the next frontier once (flag).
//    The fixed point is the least one: the left-fold minimum over paths, as on the CPU.
// 2. labels_relax: min-label propagation of (alloc, hops) over tight arcs
//    (dist[u] + w == dist[v], exact), the same frontier scheme.
// 3. backlinks: per cell, the lowest arc code k whose neighbour is a tight predecessor with
//    label == label[v] - 1.
#include "_costs.cuh"

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

// Append v to the next frontier unless it is already there.
__device__ __forceinline__ void push_next(long long v, int* in_next, long long* next,
                                          unsigned long long* n_next) {
    if (atomicExch(&in_next[v], 1) == 0) {
        const unsigned long long slot = atomicAdd(n_next, 1ULL);
        next[slot] = v;
    }
}

extern "C" __global__ void sssp_relax(const float* __restrict__ z, const float* __restrict__ f,
                                      int has_f, int model, const double* __restrict__ lengths,
                                      const long long* __restrict__ offs,
                                      const int* __restrict__ codes, int nk,
                                      u64* __restrict__ dist, const long long* __restrict__ frontier,
                                      long long n_frontier, int* __restrict__ in_next,
                                      long long* __restrict__ next,
                                      unsigned long long* __restrict__ n_next, double max_cost) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_frontier) return;
    const long long u = frontier[i];
    const double d = __longlong_as_double((long long)dist[u]);
    const float zu = z[u];
    const float fu = has_f ? f[u] : 1.0f;
    for (int j = 0; j < nk; ++j) {
        const int k = codes[j];
        const long long v = u + offs[k];
        if (!is_vertex(z, f, has_f, v)) continue;
        const u64 dv_bits = dist[v];
        if (__longlong_as_double((long long)dv_bits) <= d && dv_bits != SSSP_INF_BITS) {
            // cannot improve unless w == 0 and equal: w >= 0 so nd >= d >= dv
            continue;
        }
        const double w = arc_cost(zu, z[v], fu, has_f ? f[v] : 1.0f, k, model, lengths);
        const double nd = __dadd_rn(d, w);
        if (!(nd <= max_cost)) continue;  // also drops +inf costs
        const u64 nd_bits = (u64)__double_as_longlong(nd);
        if (nd_bits < dv_bits) {
            const u64 old = atomicMin(&dist[v], nd_bits);
            if (nd_bits < old) push_next(v, in_next, next, n_next);
        }
    }
}

// Clear the in_next flags of a frontier (before it is relaxed, so cells can re-enter).
extern "C" __global__ void clear_flags(const long long* __restrict__ frontier, long long n,
                                       int* __restrict__ in_next) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) in_next[frontier[i]] = 0;
}

extern "C" __global__ void labels_relax(const float* __restrict__ z, const float* __restrict__ f,
                                        int has_f, int model, const double* __restrict__ lengths,
                                        const long long* __restrict__ offs,
                                        const int* __restrict__ codes, int nk,
                                        const u64* __restrict__ dist, u64* __restrict__ label,
                                        const long long* __restrict__ frontier,
                                        long long n_frontier, int* __restrict__ in_next,
                                        long long* __restrict__ next,
                                        unsigned long long* __restrict__ n_next) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_frontier) return;
    const long long u = frontier[i];
    const double d = __longlong_as_double((long long)dist[u]);
    const u64 nlab = label[u] + 1ULL;
    const float zu = z[u];
    const float fu = has_f ? f[u] : 1.0f;
    for (int j = 0; j < nk; ++j) {
        const int k = codes[j];
        const long long v = u + offs[k];
        const u64 dv_bits = dist[v];
        if (dv_bits == SSSP_INF_BITS || !is_vertex(z, f, has_f, v)) continue;
        const double dv = __longlong_as_double((long long)dv_bits);
        if (dv < d) continue;
        const double w = arc_cost(zu, z[v], fu, has_f ? f[v] : 1.0f, k, model, lengths);
        if (__dadd_rn(d, w) != dv) continue;
        if (nlab < label[v]) {
            const u64 old = atomicMin(&label[v], nlab);
            if (nlab < old) push_next(v, in_next, next, n_next);
        }
    }
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
        if (__dadd_rn(du, arc_cost(z[u], zv, has_f ? f[u] : 1.0f, fv, ku, model, lengths)) == dv) {
            code = (unsigned char)(k + 1);
            break;
        }
    }
    backlink[i] = code;
}
