// Borůvka operators of terrain.graph.mst (CPU twins: the _*_cpu functions there).
//
// Edges are (eu, ev, key) with key = weight rank << id_bits | edge id: unique, so the minimum
// spanning forest is unique and every backend finds the same one. comp[v] is the root of v's
// component (fully compressed after every round), best[r] the smallest key leaving root r.

typedef long long i64;

// 1. every live edge offers its key to both endpoint components (atomicMin on packed keys)
template <typename IT>
__global__ void min_edge(const IT* __restrict__ eu, const IT* __restrict__ ev,
                         const i64* __restrict__ key, const i64* __restrict__ live, i64 n_live,
                         const IT* __restrict__ comp, i64* best)
{
    for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n_live;
         i += (i64)gridDim.x * blockDim.x) {
        const i64 e = live[i];
        const IT cu = comp[eu[e]], cv = comp[ev[e]];
        if (cu == cv) continue;
        const i64 k = key[e];
        if (k < best[cu]) atomicMin((long long*)best + cu, (long long)k);
        if (k < best[cv]) atomicMin((long long*)best + cv, (long long)k);
    }
}

// 2. every root with a best edge hooks onto the component across it; of a mutual pair (both
// chose the same edge) the smaller root stays a root. The edge joins the forest.
template <typename IT>
__global__ void hook(const IT* __restrict__ eu, const IT* __restrict__ ev,
                     const IT* __restrict__ comp, const i64* __restrict__ best, i64 id_mask,
                     i64 none, IT* parent, unsigned char* in_forest, i64 n)
{
    for (i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (i64)gridDim.x * blockDim.x) {
        if (comp[c] != (IT)c || best[c] == none) continue;
        const i64 e = best[c] & id_mask;
        const IT cu = comp[eu[e]], cv = comp[ev[e]];
        const IT other = cu == (IT)c ? cv : cu;
        in_forest[e] = 1;
        if (!(best[other] == best[c] && (IT)c < other)) parent[c] = other;
    }
}

// 3. pointer jumping on the roots' parents until every chain points at its root
template <typename IT>
__global__ void jump(IT* parent, i64 n, unsigned long long* changed)
{
    for (i64 c = (i64)blockIdx.x * blockDim.x + threadIdx.x; c < n;
         c += (i64)gridDim.x * blockDim.x) {
        const IT p = parent[c];
        const IT pp = parent[p];
        if (p != pp) {
            parent[c] = pp;
            *changed = 1;
        }
    }
}
