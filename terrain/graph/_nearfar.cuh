// The queues of near-far delta-stepping (Davidson, Baxter, Garland, Owens 2014), one
// definition for the graph SSSP (terrain/graph/_sssp.cu) and the in-core grid SSSP
// (terrain/grid/_sssp.cu).
//
// A vertex whose distance falls to d goes to the near list when d is below the bucket bound,
// else to the far pile. Each list takes a vertex at most once while its stamp lasts: a list
// has a mark array (int per vertex) and a stamp; a vertex is appended when it swaps its mark
// to the stamp and the mark was something else (a new near list or far pile takes a new
// stamp, or clears the marks of the vertices it lets go).
#pragma once

#include "_dist.cuh"  // atomic_min_dist

// Append v to list (size *count) from whichever lanes of the warp reach this call together,
// grouped by list: one atomicAdd per warp and list.
template <typename IT>
__device__ __forceinline__ void list_push(IT v, IT* list, unsigned long long* count)
{
    const unsigned active = __activemask();
    const unsigned peers = __match_any_sync(active, (unsigned long long)count);
    const unsigned lane = threadIdx.x & 31;
    const int leader = __ffs(peers) - 1;
    unsigned long long base = 0;
    if ((int)lane == leader) base = atomicAdd(count, (unsigned long long)__popc(peers));
    base = __shfl_sync(peers, base, leader);
    list[base + __popc(peers & ((1u << lane) - 1u))] = v;
}

// Append v unless its mark already holds this stamp; true when it was appended.
template <typename IT>
__device__ __forceinline__ bool stamped_push(IT v, int stamp, int* mark, IT* list,
                                             unsigned long long* count)
{
    if (atomicExch(mark + v, stamp) == stamp) return false;
    list_push(v, list, count);
    return true;
}

// Where a step's improved vertices go.
template <typename IT, typename WT>
struct NearFarLists {
    IT* near;                       // the next near list
    unsigned long long* near_count;
    int* near_mark;
    int near_stamp;
    IT* far;                        // the far pile
    unsigned long long* far_count;
    int* far_mark;
    int far_stamp;
    WT* far_min;                    // smallest distance pushed to the far pile (null: untracked)
};

// v's distance is now d: below the bucket bound thr it joins the near list, else the far pile
// (and the pile's minimum, when tracked).
template <typename IT, typename WT>
__device__ __forceinline__ void push_near_or_far(IT v, WT d, WT thr,
                                                 const NearFarLists<IT, WT>& q)
{
    if (d < thr) {
        stamped_push(v, q.near_stamp, q.near_mark, q.near, q.near_count);
    } else if (stamped_push(v, q.far_stamp, q.far_mark, q.far, q.far_count)
               && q.far_min != nullptr) {
        atomic_min_dist(q.far_min, d);
    }
}

// Called by every thread of every block after its share of a step: true in thread 0 of the
// last block to finish (one ticket per block), which then sees every block's writes and may
// write the next step's control words (and reset *ticket).
__device__ __forceinline__ bool last_block(unsigned long long* ticket)
{
    __shared__ bool s_last;
    __threadfence();  // this thread's writes before the block's arrival below
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicAdd(ticket, 1ull) == (unsigned long long)gridDim.x - 1;
    __syncthreads();
    if (!s_last || threadIdx.x != 0) return false;
    __threadfence();
    return true;
}
