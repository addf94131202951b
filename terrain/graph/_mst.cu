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
//   count_upper  per row, the number of its u < v arcs (cumsum: the rows' first edge ids);
//                a graph on the device only (the host counts while it compacts)
//   check_arcs   a graph on the device: heads in range, rows strictly increasing
//   extract      per row, its u < v edges in order: eu and key at their edge ids, and for a
//                graph on the device ev and w_e gathered from the CSR (the host uploads
//                those of a host graph already in place)
//   extract_long the same for rows of more than LONG_ROW upper arcs, a block a row
//   offer        per worklist edge with lo < key <= hi: find both roots (path halving); an
//                edge inside one component is dropped (edge filtering), any other is
//                appended to the next worklist and offers its key to both roots
//                (atomicMin after a plain test: most offers lose and then cost no atomic)
//   join         per worklist edge that won at one of its roots: union the two components
//                (CAS on the larger root), mark the edge; the winner resets that root's best
//                (no other edge compares equal to its key, so resetting early is safe)
//
// Appends to worklists: one atomicAdd per warp (ballot + popc offsets).

#include "../grid/_grid_edges.cuh"  // u64, u32, order_bits

typedef long long i64;

#define FULL_MASK 0xffffffffu
#define SMALL_ROW 32
#define LONG_ROW 512
#define NONE_KEY 0x7fffffffffffffffll  // int64 max: the CPU twin's "none"

// order-preserving ranks of the weight types whose rank needs no reduction
__device__ __forceinline__ i64 rank_of(int w) { return (i64)w + 2147483648ll; }
__device__ __forceinline__ i64 rank_of(float w) { return (i64)order_bits(w + 0.0f); }
__device__ __forceinline__ i64 rank_of(i64) { return 0; }     // given by the caller
__device__ __forceinline__ i64 rank_of(double) { return 0; }  // given by the caller

// Rows are sorted (Graph's invariant), so row r's u < v arcs are the suffix
// [end - count[r], end) and edge id first[r] + k is its k-th arc: no arc needs a comparison.

// count[r]: the number of arcs of row r with indices[a] > r (binary search in the row)
template <typename IT>
__global__ void count_upper(const i64* __restrict__ indptr, const IT* __restrict__ indices,
                            i64 n, IT* __restrict__ count)
{
    for (i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x; r < n;
         r += (i64)gridDim.x * blockDim.x) {
        i64 lo = indptr[r];
        const i64 end = indptr[r + 1];
        i64 hi = end;
        while (lo < hi) {  // first arc with indices[a] > r
            const i64 mid = (lo + hi) >> 1;
            if ((i64)indices[mid] > r) hi = mid;
            else lo = mid + 1;
        }
        count[r] = (IT)(end - lo);
    }
}

// A device graph handed in by the caller: every head in [0, n) and every row strictly
// increasing (row_start[a]: arc a opens a row); *bad = 1 otherwise.
template <typename IT>
__global__ void check_arcs(const IT* __restrict__ indices,
                           const unsigned char* __restrict__ row_start, i64 nnz, i64 n,
                           int* bad)
{
    for (i64 a = (i64)blockIdx.x * blockDim.x + threadIdx.x; a < nnz;
         a += (i64)gridDim.x * blockDim.x) {
        const i64 v = (i64)indices[a];
        bool ok = v >= 0 && v < n;
        if (a + 1 < nnz && !row_start[a + 1]) ok = ok && (i64)indices[a + 1] > v;
        if (!ok) *bad = 1;
    }
}

// Edge e = first[r] + k (the k-th u < v arc of row r): its tail and key; with gather (a
// graph on the device) also its head and weight from arc a of the CSR, else (uploaded by
// the host) those are in ev, w_e already.
template <typename IT, typename W>
__device__ __forceinline__ void put_edge(i64 r, i64 a, i64 e, int gather,
                                         const IT* __restrict__ indices,
                                         const W* __restrict__ weights, int key_mode,
                                         int id_bits, IT* __restrict__ eu, IT* __restrict__ ev,
                                         W* __restrict__ w_e, i64* __restrict__ key)
{
    eu[e] = (IT)r;
    W w = W(0);
    if (gather) {
        ev[e] = indices[a];
        if (key_mode != 2) w_e[e] = w = weights[a];
    } else if (key_mode == 1) {
        w = w_e[e];
    }
    if (key_mode == 1) key[e] = (rank_of(w) << id_bits) | e;
    else if (key_mode == 2) key[e] = e;
}

// One thread a row for rows of up to SMALL_ROW upper arcs, the warp together for rows of up
// to LONG_ROW; longer rows (hubs: one warp would walk 10^5 arcs alone) go to long_rows for
// extract_long, a block a row. first[r]: exclusive prefix sum of count. key_mode: 1 =
// rank_of(w), 2 = rank 0 (unweighted: weights unused), 0 = keys left to the caller.
// Without gather, indptr, indices and weights are not read.
template <typename IT, typename W>
__global__ void extract(const i64* __restrict__ indptr, const IT* __restrict__ indices,
                        const W* __restrict__ weights, i64 n, const IT* __restrict__ count,
                        const i64* __restrict__ first, int gather, int key_mode, int id_bits,
                        IT* __restrict__ eu, IT* __restrict__ ev, W* __restrict__ w_e,
                        i64* __restrict__ key, i64* __restrict__ long_rows,
                        unsigned long long* n_long)
{
    const i64 r = (i64)blockIdx.x * blockDim.x + threadIdx.x;  // no grid-stride: warps whole
    i64 cnt = 0, lo = 0;
    if (r < n) {
        cnt = (i64)count[r];
        if (gather) lo = indptr[r + 1] - cnt;
        if (cnt <= SMALL_ROW) {
            const i64 f = first[r];
            for (i64 k = 0; k < cnt; ++k)
                put_edge<IT, W>(r, lo + k, f + k, gather, indices, weights, key_mode, id_bits,
                                eu, ev, w_e, key);
        } else if (cnt > LONG_ROW) {
            long_rows[atomicAdd(n_long, 1ull)] = r;
        }
    }
    const int lane = threadIdx.x & 31;
    unsigned medium = __ballot_sync(FULL_MASK, cnt > SMALL_ROW && cnt <= LONG_ROW);
    while (medium) {
        const int src = __ffs(medium) - 1;
        medium &= medium - 1;
        const i64 rr = __shfl_sync(FULL_MASK, r, src);
        const i64 c = __shfl_sync(FULL_MASK, cnt, src);
        const i64 l = __shfl_sync(FULL_MASK, lo, src);
        const i64 f = first[rr];
        for (i64 k = lane; k < c; k += 32)
            put_edge<IT, W>(rr, l + k, f + k, gather, indices, weights, key_mode, id_bits,
                            eu, ev, w_e, key);
    }
}

template <typename IT, typename W>
__global__ void extract_long(const i64* __restrict__ indptr, const IT* __restrict__ indices,
                             const W* __restrict__ weights, const IT* __restrict__ count,
                             const i64* __restrict__ first, int gather, int key_mode,
                             int id_bits, IT* __restrict__ eu, IT* __restrict__ ev,
                             W* __restrict__ w_e, i64* __restrict__ key,
                             const i64* __restrict__ long_rows,
                             const unsigned long long* n_long)
{
    const i64 rows = (i64)*n_long;
    for (i64 j = blockIdx.x; j < rows; j += gridDim.x) {
        const i64 r = long_rows[j];
        const i64 c = (i64)count[r], f = first[r];
        const i64 l = gather ? indptr[r + 1] - c : 0;
        for (i64 k = threadIdx.x; k < c; k += blockDim.x)
            put_edge<IT, W>(r, l + k, f + k, gather, indices, weights, key_mode, id_bits, eu,
                            ev, w_e, key);
    }
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
