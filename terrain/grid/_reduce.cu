// Reduce a block's spanning forest to its boundary graph on the device: the CUDA twin of
// terrain/grid/reduce.py's _reduce_tile_cpu (dead ends peeled, degree-2 paths contracted; the
// same edges, endpoints, weights and representatives, in the same order once sorted by
// (first endpoint, slot) -- terrain/grid/reduce.py: reduce_block_device).
//
// The forest is the direction-bit mask of terrain/grid/_mst_device.cu, held as 32-bit words
// (edge (owner, d) is bit 8 * (owner & 3) + d of word owner >> 2) so that an edge is cleared
// with one atomicAnd. Slot k of a cell is its neighbour k of _grid_edges.cuh (k < 4 its own
// edges E, S, SE, SW, k >= 4 the same edges seen from the other end); the opposite slot is
// k ^ 4. A cell is on the boundary when it lies on a side of the block flagged in `sides`
// (bit 0 top, 1 bottom, 2 left, 3 right: the sides facing other blocks).
//
//   reduce_degree  every cell's degree, and whether it starts as a dead end (degree 1, not on
//                  the boundary).
//   reduce_peel    one thread per starting dead end walks inwards: it takes its one edge
//                  (atomicAnd test-and-clear: when both ends of a last edge race, one wins and
//                  the other stops), lowers both degrees, and goes on from the other end when
//                  that end's degree fell from 2 to 1 (exactly one thread sees that) and it is
//                  not on the boundary. The fixpoint of peeling does not depend on the order,
//                  so the surviving edges are the CPU stack's. The work is the number of dead
//                  edges; the launch lasts as long as the longest dead branch.
//   reduce_count_kept  the cells of degree > 0 other than 2 after the peeling (with the
//                  boundary's, the bound on the paths that sizes the output), one atomic add
//                  per block: a CuPy count_nonzero here compiled a reduction kernel at run
//                  time in every task thread of a process (seconds each, the GIL held).
//   reduce_chains  one thread per kept cell (degree > 0 and not an inner degree-2 cell) walks
//                  each of its surviving edges' paths to the next kept cell, keeping the largest
//                  (weight, id); the path is written by its end with the smaller index (as the
//                  CPU's row-major scan does), at a slot of an atomic counter, with the sort key
//                  8 * cell + slot that puts the edges in the CPU's order.
#include "_grid_edges.cuh"

__device__ __forceinline__ bool on_boundary(int r, int c, int R, int C, int sides) {
    return (r == 0 && (sides & 1)) || (r == R - 1 && (sides & 2)) || (c == 0 && (sides & 4)) ||
           (c == C - 1 && (sides & 8));
}

// The edge in slot k of cell (r, c) of an R x C block: its owner, direction and the other
// endpoint; false when the neighbour is outside the block.
__device__ __forceinline__ bool slot_edge(int r, int c, int k, int R, int C, int* owner, int* d,
                                          int* other) {
    const int rr = r + NB_DR[k], cc = c + NB_DC[k];
    if (rr < 0 || rr >= R || cc < 0 || cc >= C) return false;
    *d = k & 3;
    *other = rr * C + cc;
    *owner = k < 4 ? r * C + c : *other;
    return true;
}

__device__ __forceinline__ unsigned edge_bit(int owner, int d) {
    return 1u << (8 * (owner & 3) + d);
}

extern "C" __global__ void reduce_degree(const unsigned* __restrict__ alive,
                                         int* __restrict__ deg,
                                         unsigned char* __restrict__ dead_end, int R, int C,
                                         int sides) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= R * C) return;
    const int r = v / C, c = v - r * C;
    int n = 0;
    for (int k = 0; k < 8; ++k) {
        int owner, d, other;
        if (!slot_edge(r, c, k, R, C, &owner, &d, &other)) continue;
        if (alive[owner >> 2] & edge_bit(owner, d)) ++n;
    }
    deg[v] = n;
    dead_end[v] = (n == 1 && !on_boundary(r, c, R, C, sides)) ? 1 : 0;
}

extern "C" __global__ void reduce_peel(unsigned* alive, int* deg,
                                       const unsigned char* __restrict__ dead_end, int R, int C,
                                       int sides) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= R * C || !dead_end[v]) return;
    while (true) {
        const int r = v / C, c = v - r * C;
        int o = -1;
        for (int k = 0; k < 8 && o < 0; ++k) {
            int owner, d, other;
            if (!slot_edge(r, c, k, R, C, &owner, &d, &other)) continue;
            const unsigned bit = edge_bit(owner, d);
            unsigned* word = alive + (owner >> 2);
            if (!(*(volatile unsigned*)word & bit)) continue;
            if (atomicAnd(word, ~bit) & bit) o = other;  // the edge is this thread's
        }
        if (o < 0) return;  // a last edge taken from its other end: that thread lowered deg[v]
        __threadfence();    // the cleared edge before the degrees that announce it
        atomicSub(&deg[v], 1);
        const int before = atomicSub(&deg[o], 1);
        __threadfence();
        const int orow = o / C;
        if (before != 2 || on_boundary(orow, o - orow * C, R, C, sides)) return;
        v = o;  // o became a dead end by this edge: this thread peels it
    }
}

extern "C" __global__ void reduce_count_kept(const int* __restrict__ deg,
                                             unsigned long long* __restrict__ count, int n) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    const int d = v < n ? deg[v] : 0;
    const int kept = __syncthreads_count(d > 0 && d != 2);
    if (threadIdx.x == 0 && kept) atomicAdd(count, (unsigned long long)kept);
}

extern "C" __global__ void reduce_chains(const float* __restrict__ z,
                                         const unsigned* __restrict__ alive,
                                         const int* __restrict__ deg, int R, int C, int sides,
                                         int model, const double* __restrict__ hlen,
                                         unsigned long long* __restrict__ count, long long cap,
                                         long long* __restrict__ out_key,
                                         int* __restrict__ out_b, float* __restrict__ out_w,
                                         u32* __restrict__ out_rep) {
    const int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= R * C) return;
    const int r = v / C, c = v - r * C;
    const int dv = deg[v];
    if (dv == 0 || (dv == 2 && !on_boundary(r, c, R, C, sides))) return;
    for (int k = 0; k < 8; ++k) {
        int owner, d, other;
        if (!slot_edge(r, c, k, R, C, &owner, &d, &other)) continue;
        if (!(alive[owner >> 2] & edge_bit(owner, d))) continue;
        float bw = edge_weight(z[owner], z[owner + NB_DR[d] * C + NB_DC[d]], d, model, hlen);
        u32 brep = 4u * (u32)owner + (u32)d;
        int cur = other, in_k = k ^ 4;
        while (true) {
            const int cr = cur / C, cc = cur - cr * C;
            if (deg[cur] != 2 || on_boundary(cr, cc, R, C, sides)) break;
            int next = -1, next_k = -1;
            for (int k2 = 0; k2 < 8; ++k2) {
                if (k2 == in_k) continue;
                int o2, d2, x2;
                if (!slot_edge(cr, cc, k2, R, C, &o2, &d2, &x2)) continue;
                if (!(alive[o2 >> 2] & edge_bit(o2, d2))) continue;
                const float w2 =
                    edge_weight(z[o2], z[o2 + NB_DR[d2] * C + NB_DC[d2]], d2, model, hlen);
                const u32 id2 = 4u * (u32)o2 + (u32)d2;  // local ids order as global ones
                if (w2 > bw || (w2 == bw && id2 > brep)) {
                    bw = w2;
                    brep = id2;
                }
                next = x2;
                next_k = k2;
                break;
            }
            cur = next;
            in_k = next_k ^ 4;
        }
        if (v < cur) {
            const unsigned long long i = atomicAdd(count, 1ull);
            if ((long long)i < cap) {
                out_key[i] = 8ll * v + k;
                out_b[i] = cur;
                out_w[i] = bw;
                out_rep[i] = brep;
            }
        }
    }
}
