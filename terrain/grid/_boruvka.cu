// Per-tile Boruvka by supervertex merging (thesis section 3.1), many tiles per launch.
//
// Layout: a batch of B square tiles of side T = 2^log2t, cells flattened as
// v = b*T*T + row*T + col (NaN = no vertex). comp[v] is v's supervertex (a root: comp[r] == r),
// -1 for NaN cells. Edge (owner, d) has the tile-local index 4*(row*T + col) + d, which orders
// like the global id inside a tile. Keys are uint64: order_bits(float32 weight) << 32 | local
// index -- never lossy, so the minimum is the (weight, id) minimum. Numba twins with the same
// names (suffix _cpu) live in _boruvka.py and give the identical forest.

typedef unsigned long long u64;
typedef unsigned int u32;

// neighbour k of a cell: (drow, dcol, owned-by-this-cell, direction); k < 4 are E,S,SE,SW owned,
// k >= 4 the same edges seen from their other endpoint. 4-connectivity uses k = 0, 1, 4, 5.
__constant__ int NB_DR[8] = {0, 1, 1, 1, 0, -1, -1, -1};
__constant__ int NB_DC[8] = {1, 0, 1, -1, -1, 0, -1, 1};
__constant__ int NB_DIR[8] = {0, 1, 2, 3, 0, 1, 2, 3};

__device__ __forceinline__ float edge_weight(float z_owner, float z_other, int d, int model,
                                             const double* hlen) {
    float w;
    if (model == 0) {
        w = z_owner >= z_other ? z_owner : z_other;
    } else {
        double dz = fabs(__dsub_rn((double)z_owner, (double)z_other));
        if (model == 1) {
            w = __double2float_rn(dz);
        } else if (model == 2) {
            w = __double2float_rn(__ddiv_rn(dz, hlen[d]));
        } else {
            double h = hlen[d];
            w = __double2float_rn(__dsqrt_rn(__dadd_rn(__dmul_rn(h, h), __dmul_rn(dz, dz))));
        }
    }
    if (w == 0.0f) w = 0.0f;  // -0.0 -> +0.0
    return w;
}

__device__ __forceinline__ u32 order_bits(float w) {
    u32 b = __float_as_uint(w);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

extern "C" __global__ void boruvka_min_edge(const float* __restrict__ z, const int* __restrict__ comp,
                                            unsigned char* __restrict__ active, u64* best,
                                            long long n, int log2t, int conn8, int model,
                                            const double* __restrict__ hlen) {
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || !active[v]) return;
    const int T = 1 << log2t;
    const long long base = v & ~(((long long)T << log2t) - 1);
    const int r = (int)((v - base) >> log2t), c = (int)((v - base) & (T - 1));
    const int cv = comp[v];
    const float zv = z[v];
    u64 best_key = ~0ull;
    for (int k = 0; k < 8; ++k) {
        if (!conn8 && (k & 3) >= 2) continue;
        int rr = r + NB_DR[k], cc = c + NB_DC[k];
        if (rr < 0 || rr >= T || cc < 0 || cc >= T) continue;
        long long u = base + ((long long)rr << log2t) + cc;
        int cu = comp[u];
        if (cu < 0 || cu == cv) continue;
        int d = NB_DIR[k];
        float w;
        u32 owner_local;
        if (k < 4) {
            w = edge_weight(zv, z[u], d, model, hlen);
            owner_local = (u32)((r << log2t) + c);
        } else {
            w = edge_weight(z[u], zv, d, model, hlen);
            owner_local = (u32)((rr << log2t) + cc);
        }
        u64 key = ((u64)order_bits(w) << 32) | (u64)(owner_local * 4u + (u32)d);
        if (key < best_key) best_key = key;
    }
    if (best_key == ~0ull) {
        active[v] = 0;  // all neighbours share v's supervertex: they always will
    } else {
        atomicMin(&best[cv], best_key);
    }
}

extern "C" __global__ void boruvka_hook(const int* __restrict__ comp, const u64* __restrict__ best,
                                        int* parent, u32* mask32, int* n_hooks, long long n,
                                        int log2t) {
    long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || comp[v] != v) return;
    u64 key = best[v];
    if (key == ~0ull) {
        parent[v] = (int)v;
        return;
    }
    const int T = 1 << log2t;
    const long long base = v & ~(((long long)T << log2t) - 1);
    u32 idx = (u32)(key & 0xffffffffull);
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
