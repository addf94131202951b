// Whole-grid Boruvka on the device: the minimum spanning forest of a grid that fits in GPU
// memory, in one pass over the grid per step, with no CSR (the graph is implicit in the grid).
//
// Cells are v = row * cols + col (n = rows * cols <= 2^30), edge (owner, d) has the global id
// 4 * owner + d (< 2^32), d in E, S, SE, SW. An edge's key is
//   order_bits(float32 weight) << 32 | id           (u64; the all-ones key means "none")
// so the minimum key is the minimum of the total order (weight, id): the forest is unique and
// equal to the tiled path's. Weights are computed from z on the fly (_grid_edges.cuh), never
// stored. Working arrays: comp (int32 supervertex label, -1 = nodata), parent (int32),
// best (u64 per root), active (uint8), mask (uint8 direction bits, written here).
//
// A round (launched by terrain/grid/mst_device.py, one host read of a flag per round):
//   mst_min_edge  every active vertex finds its lightest edge to another supervertex and
//                 offers it to its root with atomicMin (after a plain read: most offers lose,
//                 and a lost offer costs no atomic). Combining a warp's offers to the same
//                 root first (__match_any_sync + __reduce_min_sync) was slower (docs/mst.md,
//                 "Design notes"), so it is not done. A vertex all of whose neighbours share its
//                 supervertex is deactivated for good: edges inside a component are never
//                 looked at again (ECL-MST's filtering, here without a worklist: one byte a
//                 cell tells).
//   mst_hook      every root with an edge hooks onto the root across it, except the smaller
//                 root of a mutual pair (both chose the same edge: under a total order the only
//                 cycle); the hooking root sets the edge's mask bit (each forest edge once) and
//                 raises the round's flag.
//   mst_jump      every hooked root finds its final root by path halving on parent (concurrent
//                 halving only ever shortens paths: every value read is an ancestor).
//   mst_relabel   every cell takes its root's final label (following parent to the root: a
//                 halving write that lands after a thread's final write may leave a step or
//                 two); old roots' best keys are reset.
// Then mst_weight_sum adds the forest's weights exactly: per binary exponent the integer
// mantissas (terrain.grid.edges.WeightSum's layout), in shared memory per block, then one
// global atomic per exponent and block.

#include "_grid_edges.cuh"  // u64, u32, NB_* tables, edge_weight, order_bits

#define NONE_KEY 0xFFFFFFFFFFFFFFFFull

extern "C" __global__ void mst_init(const float* __restrict__ z, int* __restrict__ comp,
                                    int* __restrict__ parent, unsigned char* __restrict__ active,
                                    u64* __restrict__ best, int n) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    bool ok = !isnan(z[v]);
    comp[v] = ok ? v : -1;
    parent[v] = v;
    active[v] = ok ? 1 : 0;
    best[v] = NONE_KEY;
}

extern "C" __global__ void mst_min_edge(const float* __restrict__ z, const int* __restrict__ comp,
                                        unsigned char* __restrict__ active, u64* best,
                                        int rows, int cols, int conn8, int model,
                                        const double* __restrict__ hlen) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= rows * cols || !active[v]) return;
    const int r = v / cols, c = v - r * cols;
    const int cv = comp[v];
    const float zv = z[v];
    u64 best_key = NONE_KEY;
    for (int k = 0; k < 8; ++k) {
        if (!conn8 && (k & 3) >= 2) continue;
        const int rr = r + NB_DR[k], cc = c + NB_DC[k];
        if (rr < 0 || rr >= rows || cc < 0 || cc >= cols) continue;
        const int u = rr * cols + cc;
        const int cu = comp[u];
        if (cu < 0 || cu == cv) continue;
        const int d = NB_DIR[k];
        const float zu = z[u];
        float w;
        u32 id;
        if (k < 4) {
            w = edge_weight(zv, zu, d, model, hlen);
            id = 4u * (u32)v + (u32)d;
        } else {
            w = edge_weight(zu, zv, d, model, hlen);
            id = 4u * (u32)u + (u32)d;
        }
        const u64 key = ((u64)order_bits(w) << 32) | (u64)id;
        if (key < best_key) best_key = key;
    }
    if (best_key == NONE_KEY) {
        active[v] = 0;  // every neighbour is in v's supervertex: it always will be
        return;
    }
    if (best_key < *(volatile u64*)&best[cv]) atomicMin(&best[cv], best_key);
}

extern "C" __global__ void mst_hook(const int* __restrict__ comp, const u64* __restrict__ best,
                                    int* __restrict__ parent, u32* __restrict__ mask32,
                                    int* __restrict__ flag, int rows, int cols) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= rows * cols || comp[v] != v) return;
    const u64 key = best[v];
    if (key == NONE_KEY) return;
    const u32 id = (u32)key;
    const int d = id & 3;
    const int owner = (int)(id >> 2);
    const int other = owner + NB_DR[d] * cols + NB_DC[d];
    const int c_owner = comp[owner];
    const int target = (c_owner == v) ? comp[other] : c_owner;
    if (best[target] == key && v < target) return;  // mutual pair: the smaller root stays
    parent[v] = target;
    atomicOr(&mask32[owner >> 2], (1u << d) << (8 * (owner & 3)));
    if (!*(volatile int*)flag) *flag = 1;  // one address: read first, most hooks need no store
}

extern "C" __global__ void mst_jump(const int* __restrict__ comp, int* parent, int n) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n || comp[v] != v) return;
    volatile int* p = parent;
    if (p[v] == v) return;
    int x = v, root;
    while (true) {
        const int px = p[x];
        const int ppx = p[px];
        if (px == ppx) {
            root = px;
            break;
        }
        p[x] = ppx;  // path halving: ppx is an ancestor of x whatever others wrote meanwhile
        x = ppx;
    }
    p[v] = root;
}

extern "C" __global__ void mst_relabel(int* __restrict__ comp, const int* __restrict__ parent,
                                       u64* __restrict__ best, int n) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    const int c = comp[v];
    if (c < 0) return;
    int p = parent[c];
    if (p != c) {
        // a late halving write may leave a hooked root one step short of its root: finish
        int pp;
        while ((pp = parent[p]) != p) p = pp;
        comp[v] = p;
    }
    if (c == v) best[v] = NONE_KEY;
}

// acc[e] += signed integer mantissa of every forest edge's weight with biased exponent e
// (WeightSum's layout); counts[0] += forest edges, counts[1] += vertices (cells not NaN).
extern "C" __global__ void mst_weight_sum(const float* __restrict__ z,
                                          const unsigned char* __restrict__ mask,
                                          u64* __restrict__ acc, u64* __restrict__ counts,
                                          int rows, int cols, int model,
                                          const double* __restrict__ hlen) {
    __shared__ u64 hist[256];
    __shared__ u32 n_edges, n_vertices;
    for (int t = threadIdx.x; t < 256; t += blockDim.x) hist[t] = 0;
    if (threadIdx.x == 0) n_edges = n_vertices = 0;
    __syncthreads();
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    u32 my_edges = 0, my_vertex = 0;
    if (v < rows * cols) {
        const float zv = z[v];
        my_vertex = isnan(zv) ? 0 : 1;
        const unsigned m = mask[v];
        for (int d = 0; d < 4; ++d) {
            if (!((m >> d) & 1)) continue;
            const float w = edge_weight(zv, z[v + NB_DR[d] * cols + NB_DC[d]], d, model, hlen);
            const u32 b = __float_as_uint(w);
            const int e = (b >> 23) & 0xFF;
            long long mant = (long long)(b & 0x7FFFFF);
            if (e > 0) mant |= 1ll << 23;
            if (b >> 31) mant = -mant;
            atomicAdd(&hist[e], (u64)mant);  // two's complement: a signed sum modulo 2^64
            ++my_edges;
        }
    }
    if (my_edges) atomicAdd(&n_edges, my_edges);
    if (my_vertex) atomicAdd(&n_vertices, my_vertex);
    __syncthreads();
    for (int t = threadIdx.x; t < 256; t += blockDim.x) {
        if (hist[t]) atomicAdd(&acc[t], hist[t]);
    }
    if (threadIdx.x == 0) {
        if (n_edges) atomicAdd(&counts[0], (u64)n_edges);
        if (n_vertices) atomicAdd(&counts[1], (u64)n_vertices);
    }
}
