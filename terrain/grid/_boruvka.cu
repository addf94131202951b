// Per-tile Boruvka by supervertex merging (thesis section 3.1), many tiles per launch.
//
// Layout: a batch of B square tiles of side T = 2^log2t, cells flattened as
// v = b*T*T + row*T + col (NaN = no vertex). comp[v] is v's supervertex (a root: comp[r] == r),
// -1 for NaN cells. Edge (owner, d) has the tile-local index 4*(row*T + col) + d, which orders
// like the global id inside a tile (idx_bits = 2*log2t + 2 bits). Two key widths, both
// lossless, so the minimum key is the (weight, id) minimum:
//   64 bits: order_bits(float32 weight) << 32 | local index       (boruvka_min_edge / _hook)
//   32 bits: rank << idx_bits | local index, where rank is the weight's dense rank among the
//            distinct weights of its tile (host-side ranking; only when rank_bits + idx_bits
//            <= 32)                                                (boruvka_min_edge32 / _hook32)
// The all-ones key means "none": the index 4*T*T - 1 (last cell, SW) is never an edge inside a
// tile, so no edge's key is all ones. Numba twins with the same names (suffix _cpu) live in
// _boruvka.py and give the identical forest.

#include "_grid_edges.cuh"  // u64, u32, NB_* tables, edge_weight, order_bits

// Weight of every edge (v, d) inside its tile, NaN where there is none; the table the
// 32-bit path ranks for the weight models other than max.
extern "C" __global__ void boruvka_edge_weights(const float* __restrict__ z, float* __restrict__ w,
                                                long long n, int log2t, int conn8, int model,
                                                const double* __restrict__ hlen) {
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    const int T = 1 << log2t;
    const long long base = v & ~(((long long)T << log2t) - 1);
    const int r = (int)((v - base) >> log2t), c = (int)((v - base) & (T - 1));
    const float zv = z[v];
    for (int d = 0; d < 4; ++d) {
        float out = __int_as_float(0x7fc00000);  // NaN
        int rr = r + NB_DR[d], cc = c + NB_DC[d];
        if ((conn8 || d < 2) && rr < T && cc >= 0 && cc < T) {
            float zu = z[base + ((long long)rr << log2t) + cc];
            if (!isnan(zv) && !isnan(zu)) out = edge_weight(zv, zu, d, model, hlen);
        }
        w[4 * v + d] = out;
    }
}

// Lightest edge from active vertex v to another supervertex; atomic min into best[comp[v]].
// Key = u64 (weights from z) or u32 (ranks: rank[4*owner + d] when per_edge, else the
// larger of the two cells' ranks -- the max model's weight is a cell's elevation).
template <typename Key>
__device__ __forceinline__ void min_edge_body(const float* __restrict__ z, const u32* __restrict__ rank,
                                              int per_edge, const int* __restrict__ comp,
                                              unsigned char* __restrict__ active, Key* best,
                                              long long n, int log2t, int conn8, int model,
                                              const double* __restrict__ hlen) {
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || !active[v]) return;
    const int T = 1 << log2t;
    const int idx_bits = 2 * log2t + 2;
    const long long base = v & ~(((long long)T << log2t) - 1);
    const int r = (int)((v - base) >> log2t), c = (int)((v - base) & (T - 1));
    const int cv = comp[v];
    const Key none = (Key)~(Key)0;
    Key best_key = none;
    for (int k = 0; k < 8; ++k) {
        if (!conn8 && (k & 3) >= 2) continue;
        int rr = r + NB_DR[k], cc = c + NB_DC[k];
        if (rr < 0 || rr >= T || cc < 0 || cc >= T) continue;
        long long u = base + ((long long)rr << log2t) + cc;
        int cu = comp[u];
        if (cu < 0 || cu == cv) continue;
        int d = NB_DIR[k];
        long long owner = k < 4 ? v : u, other = k < 4 ? u : v;
        u32 idx = (u32)(owner - base) * 4u + (u32)d;
        Key key;
        if (sizeof(Key) == 8) {
            float w = edge_weight(z[owner], z[other], d, model, hlen);
            key = (Key)(((u64)order_bits(w) << 32) | (u64)idx);
        } else {
            u32 rk = per_edge ? rank[4 * owner + d] : max(rank[owner], rank[other]);
            key = (Key)(((u64)rk << idx_bits) | (u64)idx);
        }
        if (key < best_key) best_key = key;
    }
    if (best_key == none) {
        active[v] = 0;  // all neighbours share v's supervertex: they always will
    } else {
        atomicMin(&best[cv], best_key);
    }
}

extern "C" __global__ void boruvka_min_edge(const float* __restrict__ z, const int* __restrict__ comp,
                                            unsigned char* __restrict__ active, u64* best,
                                            long long n, int log2t, int conn8, int model,
                                            const double* __restrict__ hlen) {
    min_edge_body<u64>(z, nullptr, 0, comp, active, best, n, log2t, conn8, model, hlen);
}

extern "C" __global__ void boruvka_min_edge32(const u32* __restrict__ rank, int per_edge,
                                              const int* __restrict__ comp,
                                              unsigned char* __restrict__ active, u32* best,
                                              long long n, int log2t, int conn8) {
    min_edge_body<u32>(nullptr, rank, per_edge, comp, active, best, n, log2t, conn8, 0, nullptr);
}

// Every root with an edge hooks onto the root across it and sets the edge's mask bit.
template <typename Key>
__device__ __forceinline__ void hook_body(const int* __restrict__ comp, const Key* __restrict__ best,
                                          int* parent, u32* mask32, int* n_hooks, long long n,
                                          int log2t) {
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || comp[v] != v) return;
    Key key = best[v];
    if (key == (Key)~(Key)0) {
        parent[v] = (int)v;
        return;
    }
    const int T = 1 << log2t;
    const int idx_bits = sizeof(Key) == 8 ? 32 : 2 * log2t + 2;
    const long long base = v & ~(((long long)T << log2t) - 1);
    u32 idx = (u32)((u64)key & ((1ull << idx_bits) - 1ull));
    int d = idx & 3;
    long long owner = base + (idx >> 2);
    const int dr[4] = {0, 1, 1, 1}, dc[4] = {1, 0, 1, -1};
    long long other = owner + ((long long)dr[d] << log2t) + dc[d];
    int c_owner = comp[owner];
    int target = (c_owner == (int)v) ? comp[other] : c_owner;
    // mutual choice (same edge both ways): the smaller root stays a root
    if (best[target] == key && (int)v < target) {
        parent[v] = (int)v;
    } else {
        parent[v] = target;
    }
    atomicOr(&mask32[owner], 1u << d);
    atomicAdd(n_hooks, 1);
}

extern "C" __global__ void boruvka_hook(const int* __restrict__ comp, const u64* __restrict__ best,
                                        int* parent, u32* mask32, int* n_hooks, long long n,
                                        int log2t) {
    hook_body<u64>(comp, best, parent, mask32, n_hooks, n, log2t);
}

extern "C" __global__ void boruvka_hook32(const int* __restrict__ comp, const u32* __restrict__ best,
                                          int* parent, u32* mask32, int* n_hooks, long long n,
                                          int log2t) {
    hook_body<u32>(comp, best, parent, mask32, n_hooks, n, log2t);
}

extern "C" __global__ void boruvka_jump(const int* __restrict__ comp, int* parent, long long n) {
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || comp[v] != v) return;
    volatile int* p = parent;
    int r = p[v];
    while (p[r] != r) r = p[r];  // others only shorten chains meanwhile: any value read is an ancestor
    p[v] = r;
}

extern "C" __global__ void boruvka_relabel(int* comp, const int* __restrict__ parent, long long n) {
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    int c = comp[v];
    if (c >= 0) comp[v] = parent[c];
}
