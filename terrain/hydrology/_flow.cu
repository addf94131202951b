// Flow directions and accumulation on the GPU: the CUDA twins of terrain/hydrology/_flow_cpu.py
// (same names without _cpu; conventions in terrain/hydrology/flow.py). Blocks are padded,
// row-major, R x C; neighbour k (E, SE, S, SW, W, NW, N, NE) of cell i is i + DR[k] * C + DC[k].
//
// classify            one thread a cell: nodata 255, outlet 0, steepest drop 1 << k, flat 254
// flat_seed           the seeds of the away (which 0) / towards (which 1) distances
// flat_frontier       one round of the flats' BFS distances: every cell of the frontier
//                     offers d + 1 to its inner flat neighbours (atomicMin); a neighbour it
//                     lowers joins the next frontier once (stamped with the round). The fixed
//                     point is the BFS distance from the seeds (with their initial distances),
//                     whatever the order of updates, and each round touches only the frontier
// label_min, label_jump  connected components of the flat cells: min-index propagation with
//                     pointer jumping; a component's label is its first cell in row-major
//                     order, the CPU's numbering after a rank (flow.py)
// flat_directions     one thread a flat cell: the neighbour of least mask (flow.py)
// indegree            in-degree counting of the interior (+ an error flag for a code that is
//                     not a D8 code or leads to nodata)
// accumulate          one thread per source cell walks downstream; at a confluence the last
//                     thread to arrive (atomicSub of the in-degree) goes on, so every cell is
//                     summed once, after all its inflows, in code order: the CPU's bits.
//
// Lists of cells (frontiers, flat cells, sources) hold unsigned 32-bit indices: a block has
// fewer than 2^32 cells (_flow_gpu.MAX_CELLS), and a list of a quarter of the 10-ft size's
// cells takes 3.5 GB so, where 64-bit indices took 7.

#define FLAT 254
#define NODATA 255
#define INF 2147483647

__constant__ int DR[8] = {0, 1, 1, 1, 0, -1, -1, -1};
__constant__ int DC[8] = {1, 1, 0, -1, -1, -1, 0, 1};

__device__ __forceinline__ int code_k(unsigned char v) {
    for (int k = 0; k < 8; ++k)
        if (v == (1 << k)) return k;
    return -1;
}

extern "C" __global__ void classify(const float* zp, const unsigned char* outp, int has_out,
                                    int edge_outlets, const double* dist, int step, int R, int C,
                                    unsigned char* code) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)R * C) return;
    int r = (int)(i / C), c = (int)(i % C);
    if (r < 1 || r >= R - 1 || c < 1 || c >= C - 1) return;
    float z = zp[i];
    if (z != z) { code[i] = NODATA; return; }
    if (has_out && outp[i] != 0) { code[i] = 0; return; }
    double best = 0.0;
    int bk = -1;
    bool boundary = false;
    for (int k = 0; k < 8; k += step) {
        float zn = zp[i + (long long)DR[k] * C + DC[k]];
        if (zn != zn) { boundary = true; continue; }
        double drop = __ddiv_rn(__dsub_rn((double)z, (double)zn), dist[k]);
        if (drop > best) { best = drop; bk = k; }
    }
    if (bk >= 0) code[i] = (unsigned char)(1 << bk);
    else if (edge_outlets && boundary) code[i] = 0;
    else code[i] = FLAT;
}

// which 0: a flat interior cell beside a higher cell; which 1: beside a drain (a coded or
// outlet cell of its elevation). Halo flat cells take their given distances (has_halo), else
// none: a block that holds its flats whole has no halo to read.
extern "C" __global__ void flat_seed(const float* zp, const unsigned char* code, const int* halo,
                                     int has_halo, int which, int step, int R, int C,
                                     int* dist) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)R * C) return;
    int r = (int)(i / C), c = (int)(i % C);
    dist[i] = INF;
    if (r < 1 || r >= R - 1 || c < 1 || c >= C - 1 || code[i] != FLAT) return;
    bool inner = r >= 2 && r < R - 2 && c >= 2 && c < C - 2;
    if (!inner) { dist[i] = has_halo ? halo[i] : INF; return; }
    float z = zp[i];
    for (int k = 0; k < 8; k += step) {
        long long n = i + (long long)DR[k] * C + DC[k];
        float zn = zp[n];
        unsigned char cn = code[n];
        if ((which == 0 && zn > z) || (which == 1 && cn != FLAT && cn != NODATA && zn == z)) {
            dist[i] = 1;
            return;
        }
    }
}

extern "C" __global__ void flat_frontier(const unsigned int* front, const unsigned int* count,
                                         const unsigned char* code, int step, int R, int C,
                                         int round, int* dist, int* stamp, unsigned int* next,
                                         unsigned int* next_count) {
    // read on the device: the host enqueues rounds without waiting; a block's cells (and so
    // its flat cells) are fewer than 2^32 (GpuOps)
    unsigned int n = *count;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n;
         t += (long long)gridDim.x * blockDim.x) {
        long long i = front[t];
        int d = ((volatile int*)dist)[i] + 1;
        for (int k = 0; k < 8; k += step) {
            long long m = i + (long long)DR[k] * C + DC[k];
            int r = (int)(m / C), c = (int)(m % C);
            if (r < 2 || r >= R - 2 || c < 2 || c >= C - 2 || code[m] != FLAT) continue;
            if (atomicMin(&dist[m], d) > d && atomicExch(&stamp[m], round) != round)
                next[atomicAdd(next_count, 1u)] = (unsigned int)m;
        }
    }
}

// labels are cell indices: unsigned 32 bits hold every index of a block below 2^32 cells
extern "C" __global__ void label_min(const unsigned int* cells, long long n,
                                     const unsigned char* code, int step, int R, int C,
                                     unsigned int* label, int* changed) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    long long i = cells[t];
    unsigned int l = label[i];
    unsigned int best = l;
    for (int k = 0; k < 8; k += step) {
        long long m = i + (long long)DR[k] * C + DC[k];
        int r = (int)(m / C), c = (int)(m % C);
        if (r < 2 || r >= R - 2 || c < 2 || c >= C - 2 || code[m] != FLAT) continue;
        unsigned int lm = ((volatile unsigned int*)label)[m];
        if (lm < best) best = lm;
    }
    if (best < l) {
        atomicMin(&label[l], best);  // hook the old root too
        atomicMin(&label[i], best);
        *changed = 1;
    }
}

extern "C" __global__ void label_jump(const unsigned int* cells, long long n, unsigned int* label) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    long long i = cells[t];
    unsigned int l = label[i];
    unsigned int p = label[l];
    while (p != l) {
        l = p;
        p = label[l];
    }
    label[i] = l;
}

__device__ __forceinline__ long long mask_of(int a, int t, int h) {
    return 2LL * t + (a < INF ? (long long)h - a : 0LL);
}

extern "C" __global__ void flat_directions(const float* zp, const unsigned char* code,
                                           const int* away, const int* towards, const int* labels,
                                           const int* height, int step, int R, int C,
                                           unsigned char* out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)R * C) return;
    int r = (int)(i / C), c = (int)(i % C);
    if (r < 2 || r >= R - 2 || c < 2 || c >= C - 2 || code[i] != FLAT) return;
    int t = towards[i];
    if (t >= INF) { out[i] = 0; return; }
    int h = height[labels[i]];
    long long best = mask_of(away[i], t, h);
    int bk = -1;
    bool bcard = false;
    for (int k = 0; k < 8; k += step) {
        long long m = i + (long long)DR[k] * C + DC[k];
        unsigned char cn = code[m];
        long long v;
        if (cn == FLAT) v = mask_of(away[m], towards[m], h);
        else if (cn != NODATA && zp[m] == zp[i]) v = -1;
        else continue;
        bool card = (k % 2) == 0;
        if (v < best || (v == best && bk >= 0 && card && !bcard)) {
            best = v;
            bk = k;
            bcard = card;
        }
    }
    out[i] = bk < 0 ? 0 : (unsigned char)(1 << bk);
}

extern "C" __global__ void indegree(const unsigned char* dp, int R, int C, unsigned int* indeg,
                                    int* err) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)R * C) return;
    int r = (int)(i / C), c = (int)(i % C);
    if (r < 1 || r >= R - 1 || c < 1 || c >= C - 1) return;
    unsigned char v = dp[i];
    if (v == 0 || v == NODATA) return;
    int k = code_k(v);
    if (k < 0) { *err = 1; return; }
    int nr = r + DR[k], nc = c + DC[k];
    long long n = (long long)nr * C + nc;
    if (dp[n] == NODATA) { *err = 1; return; }
    if (nr >= 1 && nr < R - 1 && nc >= 1 && nc < C - 1)
        atomicAdd(indeg + n, 1u);
}

extern "C" __global__ void accumulate(const unsigned char* dp, const double* weights, int has_w,
                                      const double* ext, int has_ext, const unsigned int* sources,
                                      long long n,
                                      int R, int C, unsigned int* indeg, double* acc,
                                      unsigned long long* done) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    long long i = sources[t];
    unsigned long long count = 0;
    while (true) {
        int r = (int)(i / C), c = (int)(i % C);
        double s = has_w ? weights[(long long)(r - 1) * (C - 2) + (c - 1)] : 1.0;
        for (int k = 0; k < 8; ++k) {
            long long m = i + (long long)DR[k] * C + DC[k];
            if (dp[m] == (1 << ((k + 4) & 7))) {
                int mr = r + DR[k], mc = c + DC[k];
                if (mr >= 1 && mr < R - 1 && mc >= 1 && mc < C - 1) s = __dadd_rn(s, __ldcg(acc + m));
                else if (has_ext) s = __dadd_rn(s, ext[m]);
            }
        }
        __stcg(acc + i, s);
        ++count;
        unsigned char v = dp[i];
        if (v == 0) break;
        int k = code_k(v);
        int nr = r + DR[k], nc = c + DC[k];
        if (nr < 1 || nr >= R - 1 || nc < 1 || nc >= C - 1) break;
        long long d = (long long)nr * C + nc;
        __threadfence();
        if (atomicSub(indeg + d, 1u) != 1u) break;  // not the last inflow: another goes on
        __threadfence();
        i = d;
    }
    atomicAdd(done, count);
}
