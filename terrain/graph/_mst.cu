// Borůvka operators of terrain.graph.mst, everything on the device (CPU twins: the _*_cpu
// functions there, same names without the suffix).
//
// Edges: every undirected edge once (u < v), numbered in CSR order (the edge id e), with the
// key rank(w) << id_bits | e: unique, so the minimum spanning forest is unique and every
// backend finds the same one whatever order its threads run in. rank is order-preserving and
// needs no pass over the weights for int32 (w + 2^31) and float32 (order_bits of w + 0.0f, so
// -0.0 ranks as +0.0); int64 and float64 ranks come from the caller (RANK_GIVEN).
//
// Components are a union-find forest in parent (roots: parent[r] == r, a non-root's parent
// is always smaller: unions hook the larger root under the smaller). A worklist holds edges
// as (a, b, key) with a, b vertices of the edge's two components (after the first round the
// roots found then: finds start near the top, ECL-MST's implicit path compression).
//
//   count_upper  per row, the number of its u < v arcs (cumsum: the rows' first edge ids)
//   extract      per row, its u < v arcs in order: eu, ev, w_e, key at their edge ids
//   offer        per worklist edge with lo < key <= hi: find both roots (path halving); an
//                edge inside one component is dropped (edge filtering), any other is
//                appended to the next worklist and offers its key to both roots
//                (atomicMin after a plain test: most offers lose and then cost no atomic)
//   join         per worklist edge that won at one of its roots: union the two components
//                (CAS on the larger root), mark the edge; the winner resets that root's best
//                (no other edge compares equal to its key, so resetting early is safe)
//
// Rows: one thread per row; rows of more than SMALL_ROW arcs are walked by the whole warp
// (ballot + popc keep the arcs' order), so hubs of a skewed graph do not stall one thread.
// Appends: one atomicAdd per warp (ballot + popc offsets).

#include "../grid/_grid_edges.cuh"  // u64, u32, order_bits

typedef long long i64;

#define FULL_MASK 0xffffffffu
#define SMALL_ROW 32
#define NONE_KEY 0x7fffffffffffffffll  // int64 max: the CPU twin's "none"

// order-preserving ranks of the weight types whose rank needs no reduction
__device__ __forceinline__ i64 rank_of(int w) { return (i64)w + 2147483648ll; }
__device__ __forceinline__ i64 rank_of(float w) { return (i64)order_bits(w + 0.0f); }
__device__ __forceinline__ i64 rank_of(i64) { return 0; }     // given by the caller
__device__ __forceinline__ i64 rank_of(double) { return 0; }  // given by the caller

// Calls visit(r, a, p) for every arc a of row r with indices[a] > r, p = its position among
// them, then done(r, count). Whole warps call this (no early return before it): lanes with a
// short row walk it alone, then the warp walks each long row of its lanes together.
template <typename IT, typename Visit, typename Done>
__device__ __forceinline__ void upper_arcs(i64 r, i64 n, const i64* __restrict__ indptr,
                                           const IT* __restrict__ indices, Visit visit,
                                           Done done)
{
    i64 beg = 0, end = 0;
    if (r < n) {
        beg = indptr[r];
        end = indptr[r + 1];
    }
    const bool small = end - beg <= SMALL_ROW;
    if (r < n && small) {
        i64 p = 0;
        for (i64 a = beg; a < end; ++a)
            if ((i64)indices[a] > r) visit(r, a, p++);
        done(r, p);
    }
    const int lane = threadIdx.x & 31;
    const unsigned below = (1u << lane) - 1u;
    unsigned long_rows = __ballot_sync(FULL_MASK, r < n && !small);
    while (long_rows) {
        const int src = __ffs(long_rows) - 1;
        long_rows &= long_rows - 1;
        const i64 rr = __shfl_sync(FULL_MASK, r, src);
        const i64 b = __shfl_sync(FULL_MASK, beg, src);
        const i64 e = __shfl_sync(FULL_MASK, end, src);
        i64 p = 0;
        for (i64 a0 = b; a0 < e; a0 += 32) {
            const i64 a = a0 + lane;
            const bool up = a < e && (i64)indices[a] > rr;
            const unsigned mask = __ballot_sync(FULL_MASK, up);
            if (up) visit(rr, a, p + __popc(mask & below));
            p += __popc(mask);
        }
        if (lane == src) done(rr, p);
    }
}

template <typename IT>
__global__ void count_upper(const i64* __restrict__ indptr, const IT* __restrict__ indices,
                            i64 n, i64* __restrict__ count)
{
    const i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    upper_arcs<IT>(r, n, indptr, indices, [](i64, i64, i64) {},
                   [&](i64 row, i64 p) { count[row] = p; });
}

// first[r]: the edge id of row r's first u < v arc (exclusive prefix sum of count_upper).
// key_mode: 1 = rank_of(w), 2 = rank 0 (unweighted: weights may be null), 0 = keys left to
// the caller (ranks that need a sort).
template <typename IT, typename W>
__global__ void extract(const i64* __restrict__ indptr, const IT* __restrict__ indices,
                        const W* __restrict__ weights, i64 n, const i64* __restrict__ first,
                        int key_mode, int id_bits, IT* __restrict__ eu, IT* __restrict__ ev,
                        W* __restrict__ w_e, i64* __restrict__ key)
{
    const i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    upper_arcs<IT>(r, n, indptr, indices,
                   [&](i64 row, i64 a, i64 p) {
                       const i64 e = first[row] + p;
                       eu[e] = (IT)row;
                       ev[e] = indices[a];
                       if (key_mode != 2) w_e[e] = weights[a];
                       if (key_mode == 1) key[e] = (rank_of(weights[a]) << id_bits) | e;
                       else if (key_mode == 2) key[e] = e;
                   },
                   [](i64, i64) {});
}

// root of x's component, halving the path on the way (every value written is an ancestor of
// the vertex written: safe against concurrent halving; no union runs during offer)
template <typename IT>
__device__ __forceinline__ IT find_halving(IT x, IT* parent)
{
    IT p = parent[x];
    while (p != x) {
        const IT pp = parent[p];
        if (pp == p) return p;
        parent[x] = pp;
        x = pp;
        p = parent[x];
    }
    return x;
}

// Appends (a, b, k) for every lane with keep: one atomicAdd per warp.
template <typename IT>
__device__ __forceinline__ void warp_append(bool keep, IT a, IT b, i64 k, IT* out_a, IT* out_b,
                                            i64* out_key, unsigned long long* count)
{
    const unsigned mask = __ballot_sync(FULL_MASK, keep);
    if (!mask) return;
    const int lane = threadIdx.x & 31;
    const int leader = __ffs(mask) - 1;
    unsigned long long base = 0;
    if (lane == leader) base = atomicAdd(count, (unsigned long long)__popc(mask));
    base = __shfl_sync(FULL_MASK, base, leader);
    if (keep) {
        const unsigned long long at = base + __popc(mask & ((1u << lane) - 1u));
        out_a[at] = a;
        out_b[at] = b;
        out_key[at] = k;
    }
}

template <typename IT>
__global__ void offer(const IT* __restrict__ in_a, const IT* __restrict__ in_b,
                      const i64* __restrict__ in_key, i64 n_in, i64 lo, i64 hi, IT* parent,
                      i64* best, IT* __restrict__ out_a, IT* __restrict__ out_b,
                      i64* __restrict__ out_key, unsigned long long* count)
{
    // grid-stride with whole warps in every iteration (the append is warp-wide)
    const i64 stride = (i64)gridDim.x * blockDim.x;
    for (i64 i0 = (i64)blockIdx.x * blockDim.x; i0 < n_in; i0 += stride) {
        const i64 i = i0 + threadIdx.x;
        bool keep = false;
        IT ra = 0, rb = 0;
        i64 k = 0;
        if (i < n_in) {
            k = in_key[i];
            if (k > lo && k <= hi) {
                ra = find_halving<IT>(in_a[i], parent);
                rb = find_halving<IT>(in_b[i], parent);
                keep = ra != rb;
            }
        }
        warp_append<IT>(keep, ra, rb, k, out_a, out_b, out_key, count);
        if (keep) {
            if (k < *(volatile i64*)&best[ra]) atomicMin(&best[ra], k);
            if (k < *(volatile i64*)&best[rb]) atomicMin(&best[rb], k);
        }
    }
}

__device__ __forceinline__ int cas_vertex(int* at, int expect, int value)
{
    return atomicCAS(at, expect, value);
}
__device__ __forceinline__ i64 cas_vertex(i64* at, i64 expect, i64 value)
{
    return (i64)atomicCAS((unsigned long long*)at, (unsigned long long)expect,
                          (unsigned long long)value);
}

template <typename IT>
__global__ void join(const IT* __restrict__ wl_a, const IT* __restrict__ wl_b,
                     const i64* __restrict__ wl_key, i64 n, IT* parent, i64* best,
                     i64 id_mask, unsigned char* __restrict__ in_forest)
{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (i64)gridDim.x * blockDim.x) {
        const i64 k = wl_key[i];
        IT a = wl_a[i], b = wl_b[i];
        const bool won_a = best[a] == k, won_b = best[b] == k;
        if (!won_a && !won_b) continue;
        if (won_a) best[a] = NONE_KEY;
        if (won_b) best[b] = NONE_KEY;
        in_forest[k & id_mask] = 1;
        // union: hook the larger root under the smaller (CAS: another union may have hooked
        // it meanwhile; then climb and retry). volatile: parents change under our feet.
        volatile IT* p = parent;
        while (true) {
            while (p[a] != a) a = p[a];
            while (p[b] != b) b = p[b];
            if (a == b) break;  // not reached: a round's winning edges form a forest
            const IT hi_root = a > b ? a : b, lo_root = a > b ? b : a;
            if (cas_vertex(parent + hi_root, hi_root, lo_root) == hi_root) break;
            a = lo_root;
            b = hi_root;
        }
    }
}
