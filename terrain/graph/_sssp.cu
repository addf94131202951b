// Device-resident SSSP loops of terrain.graph.sssp (CPU twins: _nearfar_cpu and _crauser_cpu
// there).
//
// The bucket loop never returns to the host between iterations: every kernel reads its mode,
// queue sizes and thresholds from a small control block in device memory (ctl: int64 words,
// wctl: distance-typed words), and the *last block to finish* a step (one atomic ticket per
// block, after a __threadfence) writes the control block of the next step: queue sizes,
// buffer parity, threshold, mode. The host launches steps in batches (or replays a CUDA graph
// of a batch) and reads one word, the mode, once per batch; steps launched after the loop
// has finished return at once.
//
// Distances are int64 sums (integer weights) or float64 left-fold sums (real weights), one
// array of WT = long long | double; "unreached" is `inf` (2**62 for integers, +inf for
// reals). A 64-bit atomicMin on the bit pattern orders non-negative doubles like their values.
//
// Work distribution per queue (Merrill et al.'s gathering, as the frontier core's advance):
// adjacency lists of >= BS arcs are strip-mined by the whole block, lists of >= 32 by a warp,
// the rest by their own thread; appends are warp-aggregated (one atomicAdd per warp).

typedef long long i64;
typedef unsigned long long u64;

#define BS 256
#define FULL 0xffffffffu

// control words (ctl, int64)
#define C_MODE 0       // M_RELAX / M_SPLIT (near-far) or M_RELAX (Crauser), M_DONE
#define C_STEP 1       // steps run so far
#define C_NEAR_SEL 2   // which near buffer (Crauser: fringe buffer) is the input
#define C_NEAR_N 3     // input size
#define C_NEAR_OUT 4   // output size (atomic)
#define C_FAR_SEL 5    // which far buffer is the pile
#define C_FAR_N0 6     // far pile sizes per buffer (atomic)
#define C_FAR_N1 7
#define C_TICKET 8     // blocks finished in this step
#define C_WORK 9       // arcs scanned (statistics)
#define C_SPLITS 10    // near-far: bucket splits
#define C_WORDS 16

#define M_RELAX 0
#define M_SPLIT 1
#define M_DONE 2

// distance-typed control words (wctl)
#define W_THR 0        // near-far: upper end (exclusive) of the current bucket; Crauser: L
#define W_FARMIN 1     // near-far: smallest distance left in the far pile; Crauser: M

#include "_dist.cuh"     // dist_add, atomic_min_dist, next_threshold, is_tight
#include "_nearfar.cuh"  // list_push, stamped_push, push_near_or_far, last_block

template <typename WT>
__device__ __forceinline__ WT warp_min(WT x)
{
    for (int o = 16; o > 0; o >>= 1) {
        const WT y = __shfl_down_sync(FULL, x, o);
        x = y < x ? y : x;
    }
    return x;
}

// Every thread of the block calls this together with its own list [rs, re), the distance
// `base` of the list's tail and the tail itself (`owner`); f(arc, base, owner) runs once per
// arc, by whichever thread.
template <typename WT, typename F>
__device__ __forceinline__ void gather_rows_owned(i64 rs, i64 re, WT base, long long owner,
                                                  const F& f)
{
    __shared__ int s_owner;
    __shared__ i64 s_row[2];
    __shared__ WT s_base;
    __shared__ long long s_tail;
    const unsigned lane = threadIdx.x & 31;
    while (true) {  // 1. the block strip-mines lists of >= BS arcs, one at a time
        if (threadIdx.x == 0) s_owner = -1;
        __syncthreads();
        if (re - rs >= BS) s_owner = threadIdx.x;
        __syncthreads();
        const int who = s_owner;
        if (who < 0) break;
        if ((int)threadIdx.x == who) {
            s_row[0] = rs;
            s_row[1] = re;
            s_base = base;
            s_tail = owner;
            rs = re;
        }
        __syncthreads();
        const i64 cs = s_row[0], ce = s_row[1];
        const WT b = s_base;
        const long long t = s_tail;
        for (i64 e = cs + threadIdx.x; e < ce; e += BS) f(e, b, t);
        __syncthreads();
    }
    while (true) {  // 2. a warp strip-mines lists of >= 32 arcs
        const unsigned want = __ballot_sync(FULL, re - rs >= 32);
        if (!want) break;
        const int leader = __ffs(want) - 1;
        const i64 ws = __shfl_sync(FULL, rs, leader), we = __shfl_sync(FULL, re, leader);
        const WT b = __shfl_sync(FULL, base, leader);
        const long long t = __shfl_sync(FULL, owner, leader);
        if ((int)lane == leader) rs = re;
        for (i64 e = ws + lane; e < we; e += 32) f(e, b, t);
    }
    for (i64 e = rs; e < re; ++e) f(e, base, owner);  // 3. short lists: their own thread
}

// The relax steps' form: f(arc, base) (the tail is not needed).
template <typename F>
struct DropOwner {
    const F& f;
    template <typename WT>
    __device__ __forceinline__ void operator()(i64 e, WT b, long long) const { f(e, b); }
};

template <typename WT, typename F>
__device__ __forceinline__ void gather_rows(i64 rs, i64 re, WT base, const F& f)
{
    gather_rows_owned(rs, re, base, 0LL, DropOwner<F>{f});
}

// Count the arcs a warp scans (statistics, one atomic per warp).
__device__ __forceinline__ void add_work(i64* ctl, i64 arcs)
{
    u64 a = (u64)arcs;
    for (int o = 16; o > 0; o >>= 1) a += __shfl_down_sync(FULL, a, o);
    if ((threadIdx.x & 31) == 0 && a) atomicAdd((u64*)&ctl[C_WORK], a);
}

// The last block's part of ending every step: the ticket and the output queue's counter
// reset, the output queue (buffer sel ^ 1) becomes the next step's input. Returns its size.
__device__ __forceinline__ i64 next_step(volatile i64* c, int step, int sel)
{
    c[C_TICKET] = 0;
    c[C_STEP] = step + 1;
    const i64 nn = c[C_NEAR_OUT];
    c[C_NEAR_OUT] = 0;
    c[C_NEAR_N] = nn;
    c[C_NEAR_SEL] = sel ^ 1;
    return nn;
}

// ------------------------------------------------------------------ near-far delta-stepping

#define LOCAL_Q 2048   // bucket fusion: capacity of a block's local near queue (shared memory)

// The near list is stamped with the step (stamp[]), the far pile with 1 (in_far[]: a vertex
// is in the pile at most once; the split clears the flag of those it takes out).
template <typename IT, typename WT>
struct NearFarRelax {
    const IT* __restrict__ indices;
    const WT* __restrict__ weights;
    WT* dist;
    NearFarLists<IT, WT> lists;
    WT thr;
    IT* local_q;     // bucket fusion: the block's local near queue (null: off)
    int* local_n;

    __device__ __forceinline__ void operator()(i64 e, WT du) const
    {
        const IT v = indices[e];
        const WT nd = dist_add(du, weights[e]);
        if (!(nd < dist[v])) return;  // a stale read only costs an atomic
        const WT old = atomic_min_dist(dist + v, nd);
        if (!(nd < old)) return;
        if (nd < thr && local_q != nullptr) {
            const int at = atomicAdd(local_n, 1);
            if (at < LOCAL_Q) {
                local_q[at] = v;
                return;
            }
        }
        push_near_or_far(v, nd, thr, lists);
    }
};

// Every thread of the block together: relax the row of near vertex u (when `has`) if u's
// distance fell since it was last relaxed (relaxed_at).
template <typename IT, typename WT, typename F>
__device__ __forceinline__ void relax_near(bool has, IT u, const i64* __restrict__ indptr,
                                           WT* dist, WT* relaxed_at, i64* ctl, const F& f)
{
    i64 rs = 0, re = 0;
    WT du = 0;
    if (has) {
        du = *(volatile WT*)(dist + u);
        if (du < relaxed_at[u]) {
            relaxed_at[u] = du;
            rs = indptr[u];
            re = indptr[u + 1];
        }
    }
    add_work(ctl, re - rs);
    gather_rows(rs, re, du, f);
}

// One step of near-far delta-stepping (Davidson et al. 2014; Gunrock's SSSP). M_RELAX: relax
// every arc of the near queue (vertices whose distance fell below the bucket bound W_THR);
// improvements below the bound go to the next near queue (once per step: stamp), the others
// to the far pile (once: in_far). A vertex is relaxed only when its distance fell since it
// was last relaxed (relaxed_at). M_SPLIT (near queue empty): the bound moves up by delta
// (or to the far pile's minimum when the next bucket is empty); far entries below it become
// the near queue, those below the old bound are dropped (already relaxed there).
template <typename IT, typename WT>
__global__ void __launch_bounds__(BS) nearfar_step(
    const i64* __restrict__ indptr, const IT* __restrict__ indices,
    const WT* __restrict__ weights, WT* dist, WT* relaxed_at, int* stamp, int* in_far,
    IT* near0, IT* near1, IT* far0, IT* far1, i64* ctl, WT* wctl, WT delta, WT inf,
    int fuse_rounds)
{
    const i64 mode = ctl[C_MODE];
    if (mode == M_DONE) return;
    const int near_sel = (int)ctl[C_NEAR_SEL], far_sel = (int)ctl[C_FAR_SEL];
    const int step = (int)ctl[C_STEP];
    const IT* near_in = near_sel ? near1 : near0;
    IT* near_out = near_sel ? near0 : near1;
    u64* near_count = (u64*)&ctl[C_NEAR_OUT];
    const WT thr = wctl[W_THR];
    const WT thr_new = next_threshold(thr, delta);
    if (mode == M_RELAX) {
        __shared__ IT s_local[2][LOCAL_Q];
        __shared__ int s_local_n[2];
        if (threadIdx.x < 2) s_local_n[threadIdx.x] = 0;
        __syncthreads();
        const i64 n = ctl[C_NEAR_N];
        const NearFarLists<IT, WT> lists{near_out, near_count, stamp, step,
                                         far_sel ? far1 : far0, (u64*)&ctl[C_FAR_N0 + far_sel],
                                         in_far, 1, nullptr};
        NearFarRelax<IT, WT> f{indices, weights, dist, lists, thr,
                               fuse_rounds > 0 ? s_local[0] : nullptr, &s_local_n[0]};
        for (i64 tile = (i64)blockIdx.x * BS; tile < n; tile += (i64)gridDim.x * BS) {
            const i64 i = tile + threadIdx.x;
            relax_near(i < n, i < n ? near_in[i] : (IT)0, indptr, dist, relaxed_at, ctl, f);
        }
        // Bucket fusion (Zhang et al., CGO 2020): the block goes on relaxing what it put in
        // its own local queue, for up to fuse_rounds rounds, instead of waiting a whole step
        // for it; what is left (or overflowed) goes to the global near queue.
        int cur = 0;
        for (int round = 0; round < fuse_rounds; ++round) {
            __syncthreads();
            const int m = min(s_local_n[cur], LOCAL_Q);
            if (m == 0) break;
            if (threadIdx.x == 0) s_local_n[cur ^ 1] = 0;
            __syncthreads();
            f.local_q = s_local[cur ^ 1];
            f.local_n = &s_local_n[cur ^ 1];
            for (int base = 0; base < m; base += BS) {
                const int i = base + threadIdx.x;
                relax_near(i < m, i < m ? s_local[cur][i] : (IT)0, indptr, dist, relaxed_at,
                           ctl, f);
            }
            cur ^= 1;
        }
        __syncthreads();
        if (fuse_rounds > 0) {
            const int m = min(s_local_n[cur], LOCAL_Q);
            for (int i = threadIdx.x; i < m; i += BS)
                stamped_push(s_local[cur][i], step, stamp, near_out, near_count);
        }
    } else {
        const IT* far_in = far_sel ? far1 : far0;
        IT* far_out = far_sel ? far0 : far1;
        u64* far_count = (u64*)&ctl[C_FAR_N0 + (far_sel ^ 1)];
        const i64 n = ctl[C_FAR_N0 + far_sel];
        WT low = inf;
        for (i64 tile = (i64)blockIdx.x * BS; tile < n; tile += (i64)gridDim.x * BS) {
            const i64 i = tile + threadIdx.x;
            if (i < n) {
                const IT v = far_in[i];
                const WT d = dist[v];
                if (d < thr_new) {
                    in_far[v] = 0;
                    if (!(d < thr)) list_push(v, near_out, near_count);
                } else {
                    list_push(v, far_out, far_count);
                    low = d < low ? d : low;
                }
            }
        }
        low = warp_min(low);
        if ((threadIdx.x & 31) == 0 && low < inf) atomic_min_dist(wctl + W_FARMIN, low);
    }
    if (!last_block((u64*)&ctl[C_TICKET])) return;
    volatile i64* c = ctl;
    volatile WT* w = wctl;
    const i64 nn = next_step(c, step, near_sel);
    if (mode == M_RELAX) {
        if (nn == 0) {
            if (c[C_FAR_N0 + far_sel] == 0) {
                c[C_MODE] = M_DONE;
            } else {
                c[C_MODE] = M_SPLIT;
                w[W_FARMIN] = inf;
            }
        }
    } else {
        c[C_FAR_N0 + far_sel] = 0;
        c[C_FAR_SEL] = far_sel ^ 1;
        c[C_SPLITS] = c[C_SPLITS] + 1;
        if (nn > 0) {
            c[C_MODE] = M_RELAX;
            w[W_THR] = thr_new;
        } else if (c[C_FAR_N0 + (far_sel ^ 1)] == 0) {
            c[C_MODE] = M_DONE;
        } else {
            // the next bucket is empty: jump so that the next split takes the pile's minimum
            w[W_THR] = w[W_FARMIN];
            w[W_FARMIN] = inf;
        }
    }
}

// ------------------------------------------------------------------ Crauser (the seed)

template <typename IT, typename WT>
struct CrauserRelax {
    const IT* __restrict__ indices;
    const WT* __restrict__ weights;
    WT* dist;
    const unsigned char* settled;
    IT* out;
    u64* count;
    WT inf;

    __device__ __forceinline__ void operator()(i64 e, WT du) const
    {
        const IT v = indices[e];
        if (settled[v]) return;
        const WT nd = dist_add(du, weights[e]);
        if (!(nd < dist[v])) return;
        if (atomic_min_dist(dist + v, nd) == inf) list_push(v, out, count);  // first reach
    }
};

// Crauser step 1: over the fringe (reached, unsettled vertices), L = min d(v) (W_THR) and
// M = min d(v) + minout(v) (W_FARMIN), block-reduced, one atomicMin per warp.
template <typename IT, typename WT>
__global__ void __launch_bounds__(BS) crauser_bounds(
    const IT* __restrict__ fringe0, const IT* __restrict__ fringe1,
    const WT* __restrict__ dist, const WT* __restrict__ min_out, i64* ctl, WT* wctl, WT inf)
{
    if (ctl[C_MODE] == M_DONE) return;
    const IT* in = ctl[C_NEAR_SEL] ? fringe1 : fringe0;
    const i64 n = ctl[C_NEAR_N];
    WT low = inf, out_bound = inf;
    for (i64 i = (i64)blockIdx.x * BS + threadIdx.x; i < n; i += (i64)gridDim.x * BS) {
        const IT v = in[i];
        const WT d = dist[v];
        const WT b = dist_add(d, min_out[v]);
        low = d < low ? d : low;
        out_bound = b < out_bound ? b : out_bound;
    }
    low = warp_min(low);
    out_bound = warp_min(out_bound);
    if ((threadIdx.x & 31) == 0) {
        if (low < inf) atomic_min_dist(wctl + W_THR, low);
        if (out_bound < inf) atomic_min_dist(wctl + W_FARMIN, out_bound);
    }
}

// Crauser step 2: settle every fringe vertex with d(v) <= L + minin(v) (IN) or d(v) <= M
// (OUT) and relax its arcs into unsettled heads at once (a settled distance is final, so the
// order does not matter); the unsettled rest and the first-reached heads form the next
// fringe. Distances that fall during the step only make the criteria safer.
template <typename IT, typename WT>
__global__ void __launch_bounds__(BS) crauser_settle(
    const i64* __restrict__ indptr, const IT* __restrict__ indices,
    const WT* __restrict__ weights, WT* dist, const WT* __restrict__ min_in,
    unsigned char* settled, IT* fringe0, IT* fringe1, i64* ctl, WT* wctl, WT inf)
{
    if (ctl[C_MODE] == M_DONE) return;
    const int sel = (int)ctl[C_NEAR_SEL];
    const int step = (int)ctl[C_STEP];
    const IT* in = sel ? fringe1 : fringe0;
    IT* out = sel ? fringe0 : fringe1;
    u64* count = (u64*)&ctl[C_NEAR_OUT];
    const i64 n = ctl[C_NEAR_N];
    const WT low = wctl[W_THR], out_bound = wctl[W_FARMIN];
    const CrauserRelax<IT, WT> f{indices, weights, dist, settled, out, count, inf};
    for (i64 tile = (i64)blockIdx.x * BS; tile < n; tile += (i64)gridDim.x * BS) {
        const i64 i = tile + threadIdx.x;
        i64 rs = 0, re = 0;
        WT d = 0;
        if (i < n) {
            const IT v = in[i];
            d = *(volatile WT*)(dist + v);
            if (d <= dist_add(low, min_in[v]) || d <= out_bound) {
                settled[v] = 1;
                rs = indptr[v];
                re = indptr[v + 1];
            } else {
                list_push(v, out, count);
            }
        }
        add_work(ctl, re - rs);
        gather_rows(rs, re, d, f);
    }
    if (!last_block((u64*)&ctl[C_TICKET])) return;
    volatile i64* c = ctl;
    volatile WT* w = wctl;
    const i64 nn = next_step(c, step, sel);
    w[W_THR] = inf;
    w[W_FARMIN] = inf;
    if (nn == 0) c[C_MODE] = M_DONE;
}

// ------------------------------------------------------------------ predecessors

template <typename IT, typename WT>
struct TightTail {
    const IT* __restrict__ indices;
    const WT* __restrict__ weights;
    const WT* __restrict__ dist;
    long long* pred;

    // arc e = u -> v of the row of u (base = d(u), owner = u)
    __device__ __forceinline__ void operator()(i64 e, WT du, long long u) const
    {
        const IT v = indices[e];
        if (is_tight(du, weights[e], dist[v]) && u < pred[v]) atomicMin(pred + v, u);
    }
};

// Canonical predecessors, pass 1 (the frontier core's sssp_parents, load-balanced): every
// reached u offers itself to the heads v of its tight arcs (d(u) < d(v), d(u) + w == d(v));
// pred[v] keeps the smallest (pred starts at LLONG_MAX). Rows are gathered as in the relax
// steps, so a hub's list is spread over a block instead of one thread.
template <typename IT, typename WT>
__global__ void __launch_bounds__(BS) tight_tails(
    const i64* __restrict__ indptr, const IT* __restrict__ indices,
    const WT* __restrict__ weights, const WT* __restrict__ dist, WT inf, long long* pred, i64 n)
{
    const TightTail<IT, WT> f{indices, weights, dist, pred};
    for (i64 tile = (i64)blockIdx.x * BS; tile < n; tile += (i64)gridDim.x * BS) {
        const i64 u = tile + threadIdx.x;
        i64 rs = 0, re = 0;
        WT du = 0;
        if (u < n) {
            du = dist[u];
            if (du != inf) {
                rs = indptr[u];
                re = indptr[u + 1];
            }
        }
        gather_rows_owned(rs, re, du, (long long)u, f);
    }
}
