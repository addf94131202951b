// Frontier operators of terrain.graph.frontier (their CPU twins: terrain/native/kernels.c and
// terrain/graph/_frontier_cpu.py).
//
// A traversal keeps, on the device: dist (int32, -1 = unvisited), a visited bitmask (one bit
// per vertex), two vertex queues, and a ring of per-level counter slots. Slot L holds
// {frontier size of level L, sum of the degrees of that frontier, spare, operator}. Kernels
// read their input size from the slot on
// the device, so the host may launch several levels without reading anything back; the
// kernel of level L zeroes slot L+2 before anybody writes it.
//
// Gathering (Merrill, Garland & Grimshaw, "Scalable GPU graph traversal", sec. 4.1):
// adjacency lists of >= BS edges are strip-mined by the whole block (CTA), lists of >= 32 by
// a warp, and what is left by fine-grained scan-based gathering: a block-wide prefix sum of
// the remaining lengths packs all edges of the tile into a shared gather vector.
// Enqueueing uses prefix-sum scatter offsets: a warp ballot/popc prefix, a block prefix over
// the warps, and one atomicAdd per block for the global offset.
// Status lookup (sec. 4.2): visited bitmask, then the label (dist), then warp culling of
// duplicates (__match_any_sync), then an atomicOr on the bitmask as the exact claim (the
// paper avoided atomics on Fermi and tolerated duplicates; today's atomics are cheap, and an
// exact claim gives every vertex exactly one queue entry).

typedef long long i64;
typedef unsigned long long u64;

#define BS 256
#define WARPS (BS / 32)
#define FULL 0xffffffffu
#define SLOTS 64

__device__ __forceinline__ u64* level_slot(u64* counters, int level)
{
    return counters + 4 * (level % SLOTS);
}

__device__ __forceinline__ void zero_slot(u64* counters, int level)
{
    if (blockIdx.x == 0 && threadIdx.x < 4) level_slot(counters, level)[threadIdx.x] = 0;
}

// Exact claim of w for the next level: bitmask filter, label check, atomic bit set.
template <typename IT>
__device__ __forceinline__ bool try_claim(IT w, int* dist, unsigned* visited, int next_level)
{
    const unsigned bit = 1u << (unsigned)(w & 31);
    unsigned* word = visited + (w >> 5);
    if (*word & bit) return false;
    if (dist[w] >= 0) return false;
    if (atomicOr(word, bit) & bit) return false;
    dist[w] = next_level;
    return true;
}

// Edge e of a gathered list: its head w, claimed; whether it was (with w's degree).
template <typename IT>
__device__ __forceinline__ bool visit_edge(i64 e, const i64* __restrict__ indptr,
                                           const IT* __restrict__ indices, int* dist,
                                           unsigned* visited, int next_level, IT& w, i64& deg)
{
    w = indices[e];
    if (!try_claim(w, dist, visited, next_level)) return false;
    deg = indptr[w + 1] - indptr[w];
    return true;
}

// Every thread of the block calls this together. Appends the values of the valid threads to
// out[] at offsets from a block-wide prefix sum plus one atomicAdd on *count; adds their
// degrees to *degsum (when not null).
template <typename IT>
__device__ __forceinline__ void block_enqueue(bool valid, IT value, i64 degree, IT* out,
                                              u64* count, u64* degsum, unsigned* s_wcount,
                                              u64* s_wdeg, unsigned* s_wbase, u64* s_base)
{
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned ballot = __ballot_sync(FULL, valid);
    u64 d = valid ? (u64)degree : 0;
    for (int o = 16; o > 0; o >>= 1) d += __shfl_down_sync(FULL, d, o);
    if (lane == 0) {
        s_wcount[warp] = __popc(ballot);
        s_wdeg[warp] = d;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned total = 0;
        u64 dt = 0;
        for (int w = 0; w < WARPS; ++w) {
            s_wbase[w] = total;
            total += s_wcount[w];
            dt += s_wdeg[w];
        }
        *s_base = total ? atomicAdd(count, (u64)total) : 0;
        if (degsum != nullptr && dt) atomicAdd(degsum, dt);
    }
    __syncthreads();
    if (valid) out[*s_base + s_wbase[warp] + __popc(ballot & ((1u << lane) - 1u))] = value;
}

// The threads of one warp call this together (warp-strip-mined lists).
template <typename IT>
__device__ __forceinline__ void warp_enqueue(bool valid, IT value, i64 degree, IT* out,
                                             u64* count, u64* degsum)
{
    const unsigned lane = threadIdx.x & 31;
    const unsigned ballot = __ballot_sync(FULL, valid);
    if (!ballot) return;
    u64 d = valid ? (u64)degree : 0;
    for (int o = 16; o > 0; o >>= 1) d += __shfl_down_sync(FULL, d, o);
    u64 base = 0;
    if (lane == 0) {
        base = atomicAdd(count, (u64)__popc(ballot));
        if (degsum != nullptr && d) atomicAdd(degsum, d);
    }
    base = __shfl_sync(FULL, base, 0);
    if (valid) out[base + __popc(ballot & ((1u << lane) - 1u))] = value;
}

// Exclusive block-wide prefix sum of x; every thread gets its offset and the block total.
__device__ __forceinline__ void block_exclusive_scan(int x, int& excl, int& total, int* s_warp)
{
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int incl = x;
    for (int o = 1; o < 32; o <<= 1) {
        const int y = __shfl_up_sync(FULL, incl, o);
        if (lane >= (unsigned)o) incl += y;
    }
    if (lane == 31) s_warp[warp] = incl;
    __syncthreads();
    if (threadIdx.x == 0) {
        int run = 0;
        for (int w = 0; w < WARPS; ++w) {
            const int t = s_warp[w];
            s_warp[w] = run;
            run += t;
        }
        s_warp[WARPS] = run;
    }
    __syncthreads();
    excl = s_warp[warp] + incl - x;
    total = s_warp[WARPS];
    __syncthreads();
}

// Expand-contract the vertex frontier of `level` in one kernel, writing the claimed
// neighbours to out (the next vertex queue; slot level+1): the gathering loop of
// advance_topdown and of the device-driven level loop, the block striding over the n_in
// vertices of in_q. With hub_q, lists of at least hub_min edges are not gathered here but
// appended to hub_q (count in *hub_count) for step_hubs, which spreads each of them over the
// whole grid.
template <typename IT>
__device__ __forceinline__ void topdown_tiles(
    const i64* __restrict__ indptr, const IT* __restrict__ indices, const IT* __restrict__ in_q,
    u64 n_in, IT* __restrict__ out, u64* out_count, u64* out_deg, int* dist, unsigned* visited,
    int next, IT* hub_q, u64* hub_count, i64 hub_min)
{
    __shared__ unsigned s_wcount[WARPS], s_wbase[WARPS];
    __shared__ u64 s_wdeg[WARPS], s_base;
    __shared__ int s_owner, s_scan[WARPS + 1];
    __shared__ i64 s_row[2];
    __shared__ i64 s_gather[BS];
    const unsigned lane = threadIdx.x & 31;

    for (u64 tile = (u64)blockIdx.x * BS; tile < n_in; tile += (u64)gridDim.x * BS) {
        const u64 i = tile + threadIdx.x;
        i64 rs = 0, re = 0;
        if (i < n_in) {
            const IT u = in_q[i];
            rs = indptr[u];
            re = indptr[u + 1];
            if (hub_q != nullptr && re - rs >= hub_min) {
                hub_q[atomicAdd(hub_count, (u64)1)] = u;
                rs = re;
            }
        }
        // 1. CTA-wide gathering of lists of at least BS edges
        while (true) {
            if (threadIdx.x == 0) s_owner = -1;
            __syncthreads();
            if (re - rs >= BS) s_owner = threadIdx.x;
            __syncthreads();
            const int owner = s_owner;
            if (owner < 0) break;
            if ((int)threadIdx.x == owner) {
                s_row[0] = rs;
                s_row[1] = re;
                rs = re;
            }
            __syncthreads();
            const i64 cs = s_row[0], ce = s_row[1];
            for (i64 e = cs + threadIdx.x; e - (i64)threadIdx.x < ce; e += BS) {
                IT w = 0;
                i64 deg = 0;
                const bool ok = e < ce && visit_edge<IT>(e, indptr, indices, dist,
                                                                visited, next, w, deg);
                block_enqueue(ok, w, deg, out, out_count, out_deg, s_wcount, s_wdeg, s_wbase,
                              &s_base);
            }
        }
        // 2. warp-wide gathering of lists of at least 32 edges
        while (true) {
            const unsigned want = __ballot_sync(FULL, re - rs >= 32);
            if (!want) break;
            const int leader = __ffs(want) - 1;
            const i64 ws = __shfl_sync(FULL, rs, leader), we = __shfl_sync(FULL, re, leader);
            if ((int)lane == leader) rs = re;
            for (i64 e = ws + lane; e - (i64)lane < we; e += 32) {
                IT w = 0;
                i64 deg = 0;
                const bool ok = e < we && visit_edge<IT>(e, indptr, indices, dist,
                                                                visited, next, w, deg);
                warp_enqueue(ok, w, deg, out, out_count, out_deg);
            }
        }
        // 3. fine-grained scan-based gathering of the rest (each list now < 32 edges)
        int off, total;
        block_exclusive_scan((int)(re - rs), off, total, s_scan);
        i64 ptr = rs;
        for (int base = 0; base < total; base += BS) {
            while (ptr < re && off < base + BS) {
                s_gather[off - base] = ptr;
                ++off;
                ++ptr;
            }
            __syncthreads();
            const bool have = base + (int)threadIdx.x < total;
            IT w = have ? indices[s_gather[threadIdx.x]] : (IT)-1;
            i64 deg = 0;
            // warp culling: of equal ids in the warp only the lowest lane goes on
            const unsigned peers = __match_any_sync(FULL, w);
            const bool ok = have && (__ffs(peers) - 1) == (int)lane
                            && try_claim(w, dist, visited, next);
            if (ok) deg = indptr[w + 1] - indptr[w];
            block_enqueue(ok, w, deg, out, out_count, out_deg, s_wcount, s_wdeg, s_wbase,
                          &s_base);
            __syncthreads();
        }
    }
}

// One top-down level of the batched route (the host reads the counters every few levels).
template <typename IT>
__global__ void __launch_bounds__(BS) advance_topdown(
    const i64* __restrict__ indptr, const IT* __restrict__ indices, const IT* __restrict__ in_q,
    IT* __restrict__ out, int* dist, unsigned* visited, u64* counters, int level)
{
    u64* cur = level_slot(counters, level);
    u64* nxt = level_slot(counters, level + 1);
    zero_slot(counters, level + 2);
    topdown_tiles<IT>(indptr, indices, in_q, cur[0], out, &nxt[0], &nxt[1], dist, visited,
                      level + 1, (IT*)nullptr, (u64*)nullptr, 0);
}

// Bottom-up step (direction-optimising BFS, Beamer et al.): every unvisited vertex looks for
// a neighbour in the frontier (dist == level) and stops at the first one.
template <typename IT>
__global__ void __launch_bounds__(BS) advance_bottomup(
    const i64* __restrict__ indptr, const IT* __restrict__ indices, IT* __restrict__ out_q,
    int* dist, unsigned* visited, u64* counters, int level, i64 n)
{
    __shared__ unsigned s_wcount[WARPS], s_wbase[WARPS];
    __shared__ u64 s_wdeg[WARPS], s_base;
    u64* nxt = level_slot(counters, level + 1);
    zero_slot(counters, level + 2);
    const unsigned lane = threadIdx.x & 31;
    for (i64 tile = (i64)blockIdx.x * BS; tile < n; tile += (i64)gridDim.x * BS) {
        const i64 v = tile + threadIdx.x;
        bool ok = false;
        i64 deg = 0;
        if (v < n && !(visited[v >> 5] & (1u << (v & 31)))) {
            const i64 rs = indptr[v], re = indptr[v + 1];
            for (i64 e = rs; e < re; ++e) {
                if (dist[indices[e]] == level) {
                    ok = true;
                    break;
                }
            }
            deg = re - rs;
        }
        const unsigned ballot = __ballot_sync(FULL, ok);
        if (ok) dist[v] = level + 1;
        // the 32 vertices of a warp share one bitmask word (tile is a multiple of BS)
        if (lane == 0 && ballot) atomicOr(&visited[v >> 5], ballot);
        block_enqueue(ok, (IT)v, ok ? deg : 0, out_q, &nxt[0], &nxt[1], s_wcount, s_wdeg,
                      s_wbase, &s_base);
    }
}

// Sources: label 0, mark visited, fill the first queue, set slot 0.
template <typename IT>
__global__ void seed_sources(const i64* __restrict__ indptr, const IT* __restrict__ sources,
                             i64 k, IT* q, int* dist, unsigned* visited, u64* counters)
{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < k;
         i += (i64)gridDim.x * blockDim.x) {
        const IT s = sources[i];
        dist[s] = 0;
        atomicOr(&visited[s >> 5], 1u << (unsigned)(s & 31));
        q[i] = s;
        atomicAdd(&counters[1], (u64)(indptr[s + 1] - indptr[s]));
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&counters[0], (u64)k);
}

// Deterministic predecessors: the smallest-id neighbour one level closer (rows are sorted).
template <typename IT>
__global__ void bfs_parents(const i64* __restrict__ indptr, const IT* __restrict__ indices,
                            const int* __restrict__ dist, IT* __restrict__ pred, i64 n)
{
    for (i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x; v < n;
         v += (i64)gridDim.x * blockDim.x) {
        const int d = dist[v];
        IT p = (IT)-1;
        if (d > 0) {
            for (i64 e = indptr[v]; e < indptr[v + 1]; ++e) {
                const IT u = indices[e];
                if (dist[u] == d - 1) {
                    p = u;
                    break;
                }
            }
        }
        pred[v] = p;
    }
}

// ------------------------------------------------------------------ device-driven level loop
// A whole BFS without the host in the loop: every step is the same three launches, so a
// stream of steps can be captured once into a CUDA graph and replayed per BFS. A step reads
// what to do from `ctrl` on the device:
//   step_advance   top-down: expand-contract (topdown_tiles), hub lists to the hub queue;
//                  bottom-up over the current visited bitmask: an unvisited vertex's
//                  visited neighbours all sit on the current level (else it would have been
//                  reached earlier), so the bitmask alone is the frontier and the scan reads
//                  one bit per neighbour (an n/8-byte array that lives in L2) and stops at
//                  the first hit; every warp writes its own 32-vertex word of the *other*
//                  bitmask (no atomics, no torn reads), and the next step_decide makes that
//                  one current (ctrl[C_VIS]);
//   step_hubs      the hub lists, each spread over the whole grid in chunks of BS edges;
//   step_decide    (one thread) advances to the level the last step built, stops when that
//                  level is empty, and picks the next direction by Beamer's rule.
// Inactive kernels return at once. Slot L+1 gets {count, degree sum, 0, operator} with
// operator 1 = top-down, 2 = bottom-up, so the host rebuilds the statistics from one read.

#define C_LEVEL 0
#define C_ACTIVE 1
#define C_BOTTOM 2
#define C_EXPLORED 3
#define C_PREV 4
#define C_HUBS 5
#define C_STARTED 6
#define C_VIS 7  // which of the two bitmasks is current (bottom-up writes the other)
#define C_WORDS 16

// One thread: the decision for the next step (volatile: step_seed_decide runs it on counters
// its block has just written).
__device__ void decide_step(volatile u64* counters, volatile u64* ctrl, i64 n, i64 nnz,
                            int alpha, int beta)
{
    if (!ctrl[C_STARTED]) {
        ctrl[C_STARTED] = 1;
        ctrl[C_EXPLORED] = counters[1];
        ctrl[C_BOTTOM] = 0;
    } else if (ctrl[C_ACTIVE]) {
        if (ctrl[C_BOTTOM]) ctrl[C_VIS] ^= 1;  // the bottom-up step wrote the other bitmask
        const int done = (int)ctrl[C_LEVEL];
        ctrl[C_PREV] = counters[4 * (done % SLOTS)];
        ctrl[C_LEVEL] = done + 1;
        ctrl[C_EXPLORED] += counters[4 * ((done + 1) % SLOTS) + 1];
    }
    const int level = (int)ctrl[C_LEVEL];
    const u64 nf = counters[4 * (level % SLOTS)], mf = counters[4 * (level % SLOTS) + 1];
    if (nf == 0) {
        ctrl[C_ACTIVE] = 0;
        return;
    }
    bool bottom = ctrl[C_BOTTOM] != 0;
    const bool growing = level == 0 || nf > ctrl[C_PREV];
    const i64 left = nnz - (i64)ctrl[C_EXPLORED];
    if (!bottom && growing && (i64)mf * alpha > left && 4 * (i64)mf > n) bottom = true;
    else if (bottom && !growing && (i64)nf * beta < n) bottom = false;
    ctrl[C_BOTTOM] = bottom;
    ctrl[C_ACTIVE] = 1;
    ctrl[C_HUBS] = 0;
    volatile u64* nxt = counters + 4 * ((level + 1) % SLOTS);
    nxt[0] = nxt[1] = nxt[2] = 0;
    nxt[3] = bottom ? 2 : 1;
}

extern "C" __global__ void step_decide(u64* counters, u64* ctrl, i64 n, i64 nnz, int alpha,
                                       int beta)
{
    if (blockIdx.x == 0 && threadIdx.x == 0) decide_step(counters, ctrl, n, nnz, alpha, beta);
}

template <typename IT>
__device__ __forceinline__ void topdown_step(
    const i64* __restrict__ indptr, const IT* __restrict__ indices, IT* q0, IT* q1, int* dist,
    unsigned* visited_a, unsigned* visited_b, u64* counters, u64* ctrl, IT* hub_q, i64 hub_min)
{
    const int level = (int)ctrl[C_LEVEL];
    unsigned* visited = ctrl[C_VIS] ? visited_b : visited_a;
    u64* cur = level_slot(counters, level);
    u64* nxt = level_slot(counters, level + 1);
    topdown_tiles<IT>(indptr, indices, (level & 1) ? q1 : q0, cur[0], (level & 1) ? q0 : q1,
                            &nxt[0], &nxt[1], dist, visited, level + 1, hub_q, &ctrl[C_HUBS],
                            hub_min);
}

// The hub lists of this level, each cut into chunks of BS edges, chunk c of their
// concatenation to block c % gridDim.x. The hubs are taken BS at a time: every thread loads
// one hub's row bounds, a block-wide prefix sum of their chunk counts gives every chunk its
// hub by a binary search in shared memory (no block walks the hub list one dependent load
// after another).
template <typename IT>
__device__ __forceinline__ void hubs_step(
    const i64* __restrict__ indptr, const IT* __restrict__ indices, IT* q0, IT* q1, int* dist,
    unsigned* visited_a, unsigned* visited_b, u64* counters, u64* ctrl,
    const IT* __restrict__ hub_q, u64 hubs)
{
    __shared__ unsigned s_wcount[WARPS], s_wbase[WARPS];
    __shared__ u64 s_wdeg[WARPS], s_base;
    __shared__ i64 s_rs[BS], s_re[BS];
    __shared__ int s_off[BS], s_scan[WARPS + 1];
    unsigned* visited = ctrl[C_VIS] ? visited_b : visited_a;
    const int level = (int)ctrl[C_LEVEL];
    u64* nxt = level_slot(counters, level + 1);
    IT* out = (level & 1) ? q0 : q1;
    u64 first = 0;  // global number of this batch's first chunk
    for (u64 h0 = 0; h0 < hubs; h0 += BS) {
        const u64 h = h0 + threadIdx.x;
        i64 rs = 0, re = 0;
        if (h < hubs) {
            const IT u = hub_q[h];
            rs = indptr[u];
            re = indptr[u + 1];
        }
        int off, total;
        block_exclusive_scan((int)((re - rs + BS - 1) / BS), off, total, s_scan);
        s_rs[threadIdx.x] = rs;
        s_re[threadIdx.x] = re;
        s_off[threadIdx.x] = off;
        __syncthreads();
        const int last = (int)min((u64)BS, hubs - h0) - 1;  // the batch's last hub
        for (u64 c = first + (blockIdx.x + gridDim.x - first % gridDim.x) % gridDim.x;
             c < first + (u64)total; c += gridDim.x) {
            const int local = (int)(c - first);
            int lo = 0, hi = last;  // the hub of chunk `local`: last lo with s_off[lo] <= local
            while (lo < hi) {
                const int mid = (lo + hi + 1) >> 1;
                if (s_off[mid] <= local) lo = mid; else hi = mid - 1;
            }
            const i64 e = s_rs[lo] + (i64)(local - s_off[lo]) * BS + threadIdx.x;
            bool ok = false;
            IT w = 0;
            i64 deg = 0;
            if (e < s_re[lo]) {
                w = indices[e];
                ok = try_claim(w, dist, visited, level + 1);
                if (ok) deg = indptr[w + 1] - indptr[w];
            }
            block_enqueue(ok, w, deg, out, &nxt[0], &nxt[1], s_wcount, s_wdeg, s_wbase,
                          &s_base);
        }
        first += (u64)total;
        __syncthreads();  // the next batch overwrites the bounds
    }
}

template <typename IT>
__global__ void __launch_bounds__(BS) step_hubs(
    const i64* __restrict__ indptr, const IT* __restrict__ indices, IT* q0, IT* q1, int* dist,
    unsigned* visited_a, unsigned* visited_b, u64* counters, u64* ctrl,
    const IT* __restrict__ hub_q)
{
    if (!ctrl[C_ACTIVE] || ctrl[C_BOTTOM]) return;
    const u64 hubs = ctrl[C_HUBS];
    if (hubs == 0) return;
    hubs_step<IT>(indptr, indices, q0, q1, dist, visited_a, visited_b, counters, ctrl, hub_q,
                  hubs);
}

template <typename IT>
__device__ __forceinline__ void bottomup_step(
    const i64* __restrict__ indptr, const IT* __restrict__ indices, IT* q0, IT* q1, int* dist,
    unsigned* visited_a, unsigned* visited_b, u64* counters, u64* ctrl, i64 n)
{
    __shared__ unsigned s_wcount[WARPS], s_wbase[WARPS];
    __shared__ u64 s_wdeg[WARPS], s_base;
    const unsigned* __restrict__ visited = ctrl[C_VIS] ? visited_b : visited_a;
    unsigned* __restrict__ visited_next = ctrl[C_VIS] ? visited_a : visited_b;
    const int level = (int)ctrl[C_LEVEL];
    u64* nxt = level_slot(counters, level + 1);
    IT* out = (level & 1) ? q0 : q1;
    const unsigned lane = threadIdx.x & 31;
    for (i64 tile = (i64)blockIdx.x * BS; tile < n; tile += (i64)gridDim.x * BS) {
        const i64 v = tile + threadIdx.x;
        const i64 word = v >> 5;  // the warp's word: tile is a multiple of BS
        const unsigned seen = (v - (i64)lane < n) ? visited[word] : FULL;
        bool ok = false;
        i64 deg = 0;
        if (v < n && !(seen & (1u << lane))) {
            const i64 rs = indptr[v], re = indptr[v + 1];
            for (i64 e = rs; e < re; ++e) {
                const IT u = indices[e];
                if ((visited[u >> 5] >> (unsigned)(u & 31)) & 1u) {
                    ok = true;
                    break;
                }
            }
            if (ok) {
                dist[v] = level + 1;
                deg = re - rs;
            }
        }
        const unsigned ballot = __ballot_sync(FULL, ok);
        if (lane == 0 && v < n) visited_next[word] = seen | ballot;
        block_enqueue(ok, (IT)v, deg, out, &nxt[0], &nxt[1], s_wcount, s_wdeg, s_wbase,
                      &s_base);
    }
}

// The level's step in the direction step_decide chose.
template <typename IT>
__global__ void __launch_bounds__(BS) step_advance(
    const i64* __restrict__ indptr, const IT* __restrict__ indices, IT* q0, IT* q1, int* dist,
    unsigned* visited_a, unsigned* visited_b, u64* counters, u64* ctrl, IT* hub_q, i64 hub_min,
    i64 n)
{
    if (!ctrl[C_ACTIVE]) return;
    if (ctrl[C_BOTTOM])
        bottomup_step<IT>(indptr, indices, q0, q1, dist, visited_a, visited_b, counters, ctrl, n);
    else
        topdown_step<IT>(indptr, indices, q0, q1, dist, visited_a, visited_b, counters, ctrl,
                         hub_q, hub_min);
}

// Sources of the captured loop: src[0] = k, src[1..k] the sources (unique).
template <typename IT>
__global__ void step_seed(const i64* __restrict__ indptr, const long long* __restrict__ src,
                          IT* q, int* dist, unsigned* visited, u64* counters)
{
    const i64 k = src[0];
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < k;
         i += (i64)gridDim.x * blockDim.x) {
        const IT s = (IT)src[1 + i];
        dist[s] = 0;
        atomicOr(&visited[s >> 5], 1u << (unsigned)(s & 31));
        q[i] = s;
        atomicAdd(&counters[1], (u64)(indptr[s + 1] - indptr[s]));
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(&counters[0], (u64)k);
}

// step_seed and the first decide_step in one block: one launch less per traversal.
template <typename IT>
__global__ void step_seed_decide(const i64* __restrict__ indptr,
                                 const long long* __restrict__ src, IT* q, int* dist,
                                 unsigned* visited, u64* counters, u64* ctrl, i64 n, i64 nnz,
                                 int alpha, int beta)
{
    const i64 k = src[0];
    u64 deg = 0;
    for (i64 i = threadIdx.x; i < k; i += blockDim.x) {
        const IT s = (IT)src[1 + i];
        dist[s] = 0;
        atomicOr(&visited[s >> 5], 1u << (unsigned)(s & 31));
        q[i] = s;
        deg += (u64)(indptr[s + 1] - indptr[s]);
    }
    if (deg) atomicAdd(&counters[1], deg);
    __syncthreads();  // the block's global writes are visible to its thread 0
    if (threadIdx.x == 0) {
        counters[0] = (u64)k;
        __threadfence_block();
        decide_step(counters, ctrl, n, nnz, alpha, beta);
    }
}

// ------------------------------------------------------------------ weighted operators (SSSP)
// Distances are int64 sums (integer weights) or float64 left-fold sums (real weights), one
// array of WT = long long | double; "unreached" is `inf` (2**62 for integers, +inf for reals).
// A 64-bit atomicMin on the bit pattern orders non-negative doubles like their values.

#include "_dist.cuh"  // is_tight, dist_add

// Canonical predecessors, pass 1: pred[v] = the smallest u with dist[u] < dist[v] and
// dist[u] + w(u, v) == dist[v] (atomicMin over the tails; pred starts at LLONG_MAX).
template <typename IT, typename WT>
__global__ void sssp_parents(const i64* __restrict__ indptr, const IT* __restrict__ indices,
                             const WT* __restrict__ weights, const WT* __restrict__ dist,
                             WT inf, long long* pred, i64 n)
{
    for (i64 u = (i64)blockIdx.x * blockDim.x + threadIdx.x; u < n;
         u += (i64)gridDim.x * blockDim.x) {
        const WT du = dist[u];
        if (du == inf) continue;
        for (i64 e = indptr[u]; e < indptr[u + 1]; ++e) {
            const IT v = indices[e];
            if (is_tight(du, weights[e], dist[v])) atomicMin(pred + v, (long long)u);
        }
    }
}

// Pass 2 (where a reached vertex has no strictly closer tight tail): hop levels over
// zero-length arcs, dist[u] + w == dist[u] == dist[v] (a zero weight, or one absorbed in the
// sum). Vertices with hops == level label their zero-length heads that have no label yet.
template <typename IT, typename WT>
__global__ void zero_hop_level(const i64* __restrict__ indptr, const IT* __restrict__ indices,
                               const WT* __restrict__ weights, const WT* __restrict__ dist,
                               int* hops, int level, i64 n, u64* changed)
{
    for (i64 u = (i64)blockIdx.x * blockDim.x + threadIdx.x; u < n;
         u += (i64)gridDim.x * blockDim.x) {
        if (hops[u] != level) continue;
        const WT du = dist[u];
        for (i64 e = indptr[u]; e < indptr[u + 1]; ++e) {
            const IT v = indices[e];
            if (dist[v] == du && dist_add(du, weights[e]) == du && hops[v] < 0) {
                hops[v] = level + 1;
                *changed = 1;
            }
        }
    }
}

// Pass 3: a vertex of hop level h > 0 takes the smallest zero-length tail of level h - 1.
template <typename IT, typename WT>
__global__ void zero_parents(const i64* __restrict__ indptr, const IT* __restrict__ indices,
                             const WT* __restrict__ weights, const WT* __restrict__ dist,
                             const int* __restrict__ hops, long long* pred, i64 n)
{
    for (i64 u = (i64)blockIdx.x * blockDim.x + threadIdx.x; u < n;
         u += (i64)gridDim.x * blockDim.x) {
        const int h = hops[u];
        if (h < 0) continue;
        const WT du = dist[u];
        for (i64 e = indptr[u]; e < indptr[u + 1]; ++e) {
            const IT v = indices[e];
            if (dist[v] == du && dist_add(du, weights[e]) == du && hops[v] == h + 1)
                atomicMin(pred + v, (long long)u);
        }
    }
}

// ------------------------------------------------------------------ bit-parallel BFS
// Up to 64 BFS at once (for eccentricity bounding): source i owns bit i of a uint64 per
// vertex. seen[v] holds the sources that have reached v, frontier[v] those that reached it
// on the last level; a level is next[v] = (OR of frontier over v's neighbours) & ~seen[v]
// (pull: no atomics, and a vertex stops scanning once every source it lacks has been found),
// then bitwise_finish folds next into seen and frontier. The bits that appear on level L
// are the sources whose distance to v is L, so the eccentricity of source i is the last
// level on which bit i appears anywhere; with those known, a second pass turns every
// (source, vertex, level) into the Takes-Kosters bounds of v without storing distances.
// Rows of at least `hub_min` edges are pulled by bitwise_pull_hubs, spread over the grid.

template <typename IT>
__global__ void __launch_bounds__(BS) bitwise_pull(
    const i64* __restrict__ indptr, const IT* __restrict__ indices,
    const u64* __restrict__ frontier, const u64* __restrict__ seen, u64* __restrict__ next,
    u64 full, i64 hub_min, i64 n)
{
    const unsigned lane = threadIdx.x & 31;
    const i64 warps = ((i64)gridDim.x * BS) >> 5;
    for (i64 v = ((i64)blockIdx.x * BS + threadIdx.x) >> 5; v < n; v += warps) {
        const u64 s = seen[v];
        const i64 rs = indptr[v], re = indptr[v + 1];
        if (re - rs >= hub_min) continue;  // bitwise_pull_hubs
        u64 acc = 0;
        if (s != full) {
            for (i64 base = rs; base < re; base += 32) {
                const i64 e = base + lane;
                u64 f = e < re ? frontier[indices[e]] : 0;
                for (int o = 16; o > 0; o >>= 1) f |= __shfl_xor_sync(FULL, f, o);
                acc |= f;
                if ((acc | s) == full) break;
            }
        }
        if (lane == 0) next[v] = acc & ~s;
    }
}

template <typename IT>
__global__ void __launch_bounds__(BS) bitwise_pull_hubs(
    const i64* __restrict__ indptr, const IT* __restrict__ indices,
    const u64* __restrict__ frontier, const u64* __restrict__ seen, u64* next,
    const IT* __restrict__ hubs, i64 n_hubs, u64 full)
{
    // chunk c (BS edges) of the concatenated hub rows goes to block c % gridDim.x
    u64 first = 0;
    for (i64 h = 0; h < n_hubs; ++h) {
        const IT v = hubs[h];
        const i64 rs = indptr[v], re = indptr[v + 1];
        const u64 chunks = (u64)((re - rs + BS - 1) / BS);
        const u64 s = seen[v];
        if (s != full) {
            for (u64 c = (blockIdx.x + gridDim.x - first % gridDim.x) % gridDim.x; c < chunks;
                 c += gridDim.x) {
                const i64 e = rs + (i64)c * BS + threadIdx.x;
                u64 f = e < re ? frontier[indices[e]] : 0;
                for (int o = 16; o > 0; o >>= 1) f |= __shfl_xor_sync(FULL, f, o);
                f &= ~s;
                if ((threadIdx.x & 31) == 0 && f) atomicOr(next + v, f);
            }
        }
        first += chunks;
    }
}

// Sources: bit i at sources[i] (unique); with bounds, the sources' own bounds (distance 0).
extern "C" __global__ void bitwise_seed(const long long* __restrict__ sources, int k, u64* seen,
                                        u64* frontier, const int* __restrict__ ecc, int* lower,
                                        int* upper, int with_bounds)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k) return;
    const long long s = sources[i];
    seen[s] = frontier[s] = 1ull << i;
    if (with_bounds) {
        lower[s] = max(lower[s], ecc[i]);
        upper[s] = min(upper[s], ecc[i]);
    }
}

// Fold level `level`'s next into seen and frontier (next is cleared for the following
// level); OR of every new bit into bits[0], their number (the (source, vertex) pairs at
// distance `level`) into bits[1]; with bounds, each new (source i, v) pair at
// distance `level` tightens v's bounds with ecc[i].
extern "C" __global__ void __launch_bounds__(BS) bitwise_finish(
    u64* seen, u64* frontier, u64* next, i64 n, int level, const int* __restrict__ ecc,
    int* lower, int* upper, int with_bounds, u64* bits)
{
    u64 acc = 0, pairs = 0;
    for (i64 v = (i64)blockIdx.x * BS + threadIdx.x; v < n; v += (i64)gridDim.x * BS) {
        const u64 fresh = next[v];
        frontier[v] = fresh;
        if (!fresh) continue;
        next[v] = 0;
        seen[v] |= fresh;
        acc |= fresh;
        pairs += __popcll(fresh);
        if (with_bounds) {
            int lo = lower[v], up = upper[v];
            for (u64 m = fresh; m; m &= m - 1) {
                const int e = ecc[__ffsll((long long)m) - 1];
                lo = max(lo, max(level, e - level));
                up = min(up, e + level);
            }
            lower[v] = lo;
            upper[v] = up;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        acc |= __shfl_xor_sync(FULL, acc, o);
        pairs += __shfl_xor_sync(FULL, pairs, o);
    }
    if ((threadIdx.x & 31) == 0 && acc) {
        atomicOr(bits, acc);
        atomicAdd(bits + 1, pairs);
    }
}
