// The GPU's drain pass of depression filling (terrain/hydrology/_fill_gpu.py launches it;
// the Numba twins of every kernel are there, same names with _twin, same steps).
//
// Input: a forest in which every tree holds at most one outlet (the whole-grid Borůvka with
// the outlets seeded as one supervertex: terrain.grid.mst_device.device_mst(seeds=...)), as
// the grid MST's direction-bit mask (1 E, 2 S, 4 SE, 8 SW of the owning cell), and the
// supervertex labels. Every tree is rooted at its outlet (a tree without one at its label
// cell), and each cell's level is the largest weight max(z_u, z_v) on its path to the root,
// and at least the root's own elevation (inf for a root that is not an outlet: undrained).
//
//   fill_adjacency   nb[v]: bit k set when the forest joins v to its neighbour k, k in the
//                    cyclic order E, SE, S, SW, W, NW, N, NE; deg[v] = popcount
//   (host)           base = exclusive prefix sum of deg: arc (v, k) is base[v] + the number
//                    of set bits of nb[v] below k (2 (cells - trees) arcs in all)
//   fill_succ        the Euler tour: the arc after (v -> u) is (u -> the next forest
//                    neighbour of u after v, cyclically); the tour of a tree is cut where it
//                    would return to its root's first arc (succ = -1)
//   fill_rank        Wyllie's list ranking, one round of pointer jumping (double buffers):
//                    rank = the number of arcs after this one in its tour
//   fill_parent      the parent of v is the neighbour u whose arc u -> v comes first in the
//                    tour (the larger rank); pw = max(z_v, z_u)
//   fill_jump        pointer jumping to the roots (double buffers): val = max(val,
//                    val[P]), P = P[P]; max is idempotent, so the roots' self-loops may be
//                    passed any number of times
// Every value is a comparison of float32 inputs: the result equals the CPU's bit for bit.

#define INF_F __int_as_float(0x7f800000)

__constant__ int FD_R[8] = {0, 1, 1, 1, 0, -1, -1, -1};
__constant__ int FD_C[8] = {1, 1, 0, -1, -1, -1, 0, 1};

extern "C" __global__ void fill_adjacency(const unsigned char* __restrict__ mask,
                                          unsigned char* __restrict__ nb, int* __restrict__ deg,
                                          int rows, int cols) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= rows * cols) return;
    const int r = v / cols, c = v - r * cols;
    const unsigned char m = mask[v];
    int b = 0;
    if (m & 1) b |= 1;    // E
    if (m & 4) b |= 2;    // SE
    if (m & 2) b |= 4;    // S
    if (m & 8) b |= 8;    // SW
    if (c > 0 && (mask[v - 1] & 1)) b |= 16;                             // W
    if (r > 0 && c > 0 && (mask[v - cols - 1] & 4)) b |= 32;             // NW
    if (r > 0 && (mask[v - cols] & 2)) b |= 64;                          // N
    if (r > 0 && c + 1 < cols && (mask[v - cols + 1] & 8)) b |= 128;     // NE
    nb[v] = (unsigned char)b;
    deg[v] = __popc(b);
}

__device__ __forceinline__ int arc_of(const unsigned char* nb, const int* base, int v, int k) {
    return base[v] + __popc(nb[v] & ((1 << k) - 1));
}

extern "C" __global__ void fill_succ(const unsigned char* __restrict__ nb,
                                     const int* __restrict__ base,
                                     const unsigned char* __restrict__ is_root,
                                     int* __restrict__ succ, int rows, int cols) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= rows * cols) return;
    const int b = nb[v];
    if (!b) return;
    int a = base[v];
    for (int k = 0; k < 8; ++k) {
        if (!(b & (1 << k))) continue;
        const int u = v + FD_R[k] * cols + FD_C[k];
        const int bu = nb[u];
        const int j = (k + 4) & 7;  // the direction from u back to v
        int kk = j;
        for (int t = 1; t <= 8; ++t) {
            kk = (j + t) & 7;
            if (bu & (1 << kk)) break;
        }
        const int first = __ffs(bu) - 1;  // u's first arc: where its tour starts
        succ[a] = (is_root[u] && kk == first) ? -1 : arc_of(nb, base, u, kk);
        ++a;
    }
}

extern "C" __global__ void fill_rank(const int* __restrict__ nxt, const int* __restrict__ rank,
                                     int* __restrict__ nxt2, int* __restrict__ rank2,
                                     int* __restrict__ flag, int arcs) {
    int a = blockIdx.x * blockDim.x + threadIdx.x;
    if (a >= arcs) return;
    const int s = nxt[a];
    if (s < 0) {
        nxt2[a] = s;
        rank2[a] = rank[a];
        return;
    }
    rank2[a] = rank[a] + rank[s];
    const int ss = nxt[s];
    nxt2[a] = ss;
    if (ss >= 0 && !*(volatile int*)flag) *flag = 1;
}

extern "C" __global__ void fill_parent(const unsigned char* __restrict__ nb,
                                       const int* __restrict__ base,
                                       const int* __restrict__ rank,
                                       const unsigned char* __restrict__ is_root,
                                       const unsigned char* __restrict__ outlet,
                                       const float* __restrict__ z, int* __restrict__ parent,
                                       float* __restrict__ val, int rows, int cols) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= rows * cols) return;
    parent[v] = v;
    const float zv = z[v];
    if (isnan(zv)) {
        val[v] = INF_F;
        return;
    }
    const int b = nb[v];
    if (is_root[v] || !b) {
        val[v] = outlet[v] ? zv : INF_F;
        return;
    }
    val[v] = INF_F;  // (every cell but a root has a parent: one neighbour's arc comes first)
    for (int k = 0; k < 8; ++k) {
        if (!(b & (1 << k))) continue;
        const int u = v + FD_R[k] * cols + FD_C[k];
        if (rank[arc_of(nb, base, u, (k + 4) & 7)] > rank[arc_of(nb, base, v, k)]) {
            parent[v] = u;
            const float zu = z[u];
            val[v] = zv >= zu ? zv : zu;
            return;
        }
    }
}

extern "C" __global__ void fill_jump(const int* __restrict__ P, const float* __restrict__ val,
                                     int* __restrict__ P2, float* __restrict__ val2,
                                     int* __restrict__ flag, int n) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= n) return;
    const int p = P[v];
    const float a = val[v], b = val[p];
    val2[v] = a >= b ? a : b;
    const int pp = P[p];
    P2[v] = pp;
    if (pp != p && !*(volatile int*)flag) *flag = 1;
}
