// Eccentricity-bound kernels of terrain.graph.eccentricity (CPU twins in kernels.c's bounding
// loop). Takes & Kosters' bounds after a BFS from v with
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

// The cover bound (kernels.c's bound_cover): every vertex outside the candidates has
// ecc <= delta_lower, so ecc(w) <= max(delta_lower, d(c, w) + reach), reach the largest
// d(c, x) over the candidates, c the centre. Sets *fell when an upper bound falls.
extern "C" __global__ void cover_bounds(const int* __restrict__ centre, int reach,
                                        int delta_lower, int* __restrict__ upper, long long n,
                                        unsigned* fell)
{
    bool any = false;
    for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < n;
         w += (long long)gridDim.x * blockDim.x) {
        const int t = max(delta_lower, centre[w] + reach);
        if (t < upper[w]) {
            upper[w] = t;
            any = true;
        }
    }
    if (__any_sync(0xffffffffu, any) && (threadIdx.x & 31) == 0) *fell = 1u;
}

// ------------------------------------------------------------------ connected components
// Union-find on the device (in the spirit of Jaiganesh & Burtscher's ECL-CC): every edge
// (u, v) with v < u hooks the larger of the two roots under the smaller with a CAS, finds
// halve their paths as they go. Pointers only ever point to a smaller id, so each
// component's root is its smallest vertex: the labels are unique whatever order the hooks
// ran in, the same as the sequential twin's (_component_roots_cpu).

template <typename IT>
__device__ __forceinline__ IT find_root(IT* parent_, IT v)
{
    volatile IT* parent = parent_;  // other threads hook and halve concurrently: no caching
    while (true) {
        const IT p = parent[v];
        if (p == v) return v;
        const IT g = parent[p];
        if (g != p) parent[v] = g;  // path halving; g is still an ancestor of v
        v = p;
    }
}

__device__ __forceinline__ int cas_parent(int* a, int expect, int value)
{
    return atomicCAS(a, expect, value);
}
__device__ __forceinline__ long long cas_parent(long long* a, long long expect, long long value)
{
    return (long long)atomicCAS((unsigned long long*)a, (unsigned long long)expect,
                                (unsigned long long)value);
}

template <typename IT>
__global__ void init_parents(IT* parent, long long n)
{
    for (long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x; v < n;
         v += (long long)gridDim.x * blockDim.x)
        parent[v] = (IT)v;
}

// One warp per vertex u (lanes stride its row): hook u with each smaller neighbour.
template <typename IT>
__global__ void hook_edges(const long long* __restrict__ indptr, const IT* __restrict__ indices,
                           IT* parent, long long n)
{
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const int lane = threadIdx.x & 31;
    for (long long u = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; u < n;
         u += warps) {
        const long long re = indptr[u + 1];
        for (long long e = indptr[u] + lane; e < re; e += 32) {
            const IT v = indices[e];
            if (v >= (IT)u) continue;
            IT a = find_root(parent, (IT)u), b = find_root(parent, v);
            while (a != b) {
                const IT hi = a > b ? a : b, lo = a > b ? b : a;
                const IT old = cas_parent(parent + hi, hi, lo);
                if (old == hi) break;  // hooked
                a = find_root(parent, hi);
                b = find_root(parent, lo);
            }
        }
    }
}

// Final labels: every vertex points at its root (the smallest vertex of its component).
template <typename IT>
__global__ void flatten_parents(IT* parent, long long n)
{
    for (long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x; v < n;
         v += (long long)gridDim.x * blockDim.x)
        parent[v] = find_root(parent, (IT)v);
}

// Safety net: any edge whose ends carry different labels after flatten_parents sets *missed
// (hooks only ever join vertices of one component, so a miss can only leave a component
// split; the host then hooks and flattens again).
template <typename IT>
__global__ void check_components(const long long* __restrict__ indptr,
                                 const IT* __restrict__ indices, const IT* __restrict__ parent,
                                 long long n, unsigned long long* missed)
{
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const int lane = threadIdx.x & 31;
    for (long long u = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; u < n;
         u += warps) {
        const IT pu = parent[u];
        const long long re = indptr[u + 1];
        for (long long e = indptr[u] + lane; e < re; e += 32)
            if (parent[indices[e]] != pu) *missed = 1;
    }
}
