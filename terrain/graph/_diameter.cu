// Eccentricity-bound kernels of terrain.graph.diameter (CPU twins: _update_bounds_cpu and
// _prune_candidates_cpu there). Takes & Kosters' bounds after a BFS from v with
// eccentricity e and distances d(v, w):  max(d, e - d) <= ecc(w) <= e + d.

typedef unsigned long long u64;

extern "C" __global__ void update_bounds(const int* __restrict__ dist, int ecc,
                                         int* __restrict__ lower, int* __restrict__ upper,
                                         long long n)
{
    for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < n;
         w += (long long)gridDim.x * blockDim.x) {
        const int d = dist[w];
        if (d < 0) continue;  // not in the component (never happens on the LCC)
        lower[w] = max(lower[w], max(d, ecc - d));
        upper[w] = min(upper[w], ecc + d);
    }
}

// Drop candidates whose bounds can no longer change the answer. A candidate stays while its
// eccentricity is open (lower < upper) and it could still be peripheral (diameter only:
// upper > delta_lower; with extremes: upper >= delta_lower) or, with extremes, central
// (lower <= radius_upper). Counts the candidates left in *remaining.
extern "C" __global__ void prune_candidates(unsigned char* __restrict__ cand,
                                            const int* __restrict__ lower,
                                            const int* __restrict__ upper, int delta_lower,
                                            int radius_upper, int extremes, long long n,
                                            u64* remaining)
{
    unsigned left = 0;
    for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < n;
         w += (long long)gridDim.x * blockDim.x) {
        if (!cand[w]) continue;
        const int lo = lower[w], up = upper[w];
        bool keep;
        if (lo == up) keep = false;
        else if (extremes) keep = up >= delta_lower || lo <= radius_upper;
        else keep = up > delta_lower;
        if (keep) ++left;
        else cand[w] = 0;
    }
    for (int o = 16; o > 0; o >>= 1) left += __shfl_down_sync(0xffffffffu, left, o);
    if ((threadIdx.x & 31) == 0 && left) atomicAdd(remaining, (u64)left);
}
