// Distance arithmetic of the weighted traversals (_frontier.cu's predecessor passes, the near-far
// and Crauser loops of graph/_sssp.cu, and through _nearfar.cuh the grid's near-far in
// grid/_sssp.cu), one definition for all.
// Distances are int64 sums (integer weights) or float64 left-fold sums (real weights); the
// real sum is rounded once per arc (__dadd_rn, no contraction into an FMA) so the CPU twin's
// plain `d + w` gives the same bits. A 64-bit atomicMin on the bit pattern orders
// non-negative doubles like their values (distances are never negative).
#pragma once

__device__ __forceinline__ long long dist_add(long long d, long long w) { return d + w; }
__device__ __forceinline__ double dist_add(double d, double w) { return __dadd_rn(d, w); }

// The arc u -> v (weight w) is a predecessor arc: u strictly closer, and tight (the canonical
// predecessor rule; _is_tight_cpu in frontier.py).
template <typename WT>
__device__ __forceinline__ bool is_tight(WT du, WT w, WT dv)
{
    return du < dv && dist_add(du, w) == dv;
}

__device__ __forceinline__ long long atomic_min_dist(long long* a, long long v)
{
    return atomicMin(a, v);
}
__device__ __forceinline__ double atomic_min_dist(double* a, double v)
{
    return __longlong_as_double(atomicMin((long long*)a, __double_as_longlong(v)));
}

// The next bucket bound after `thr` (near-far delta-stepping): thr + delta, and for reals at
// least the next double (a delta below thr's ulp would not move it).
__device__ __forceinline__ long long next_threshold(long long thr, long long delta)
{
    return thr + delta;
}
__device__ __forceinline__ double next_threshold(double thr, double delta)
{
    const double t = __dadd_rn(thr, delta);
    return t > thr ? t : nextafter(thr, __longlong_as_double(0x7ff0000000000000LL));
}
