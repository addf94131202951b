// Fixed-capacity, allocation-free tournament tree (thesis 3.3.1, 5.4): the CUDA twin of
// terrain/grid/_tournament.py, same layout and the same comparisons.
//
// 2*cap nodes: node 1 is the root, node p has children 2p and 2p+1, leaf i is node cap+i.
// Every node holds a key (d double, a int, h int) and the leaf it came from (win); keys are
// compared lexicographically as (d, a, h, leaf), so the winner never depends on the order of
// the updates. An empty leaf has key (+inf, INT_MAX, INT_MAX). The arrays are given by the
// caller (shared or global memory): nothing is allocated.
#pragma once

#define TT_INT_INF 2147483647

__device__ __forceinline__ double tt_inf() { return __longlong_as_double(0x7ff0000000000000LL); }

struct TTree {
    double* kd;
    int* ka;
    int* kh;
    int* win;
    int cap;
};

__device__ __forceinline__ bool key_less(double d1, int a1, int h1, int i1,
                                         double d2, int a2, int h2, int i2) {
    if (d1 != d2) return d1 < d2;
    if (a1 != a2) return a1 < a2;
    if (h1 != h2) return h1 < h2;
    return i1 < i2;
}

__device__ __forceinline__ void tt_reset(TTree t) {
    const double inf = tt_inf();
    for (int p = 0; p < 2 * t.cap; ++p) {
        t.kd[p] = inf;
        t.ka[p] = TT_INT_INF;
        t.kh[p] = TT_INT_INF;
    }
    for (int i = 0; i < t.cap; ++i) t.win[t.cap + i] = i;
    for (int p = t.cap - 1; p > 0; --p) t.win[p] = t.win[2 * p];
}

__device__ __forceinline__ void tt_propagate(TTree t, int p) {
    while (p > 1) {
        p >>= 1;
        const int lc = 2 * p, rc = lc + 1;
        const int c = key_less(t.kd[rc], t.ka[rc], t.kh[rc], t.win[rc],
                               t.kd[lc], t.ka[lc], t.kh[lc], t.win[lc]) ? rc : lc;
        t.kd[p] = t.kd[c];
        t.ka[p] = t.ka[c];
        t.kh[p] = t.kh[c];
        t.win[p] = t.win[c];
    }
}

// Set leaf i's key and propagate to the root.
__device__ __forceinline__ void tt_update(TTree t, int i, double d, int a, int h) {
    int p = t.cap + i;
    t.kd[p] = d;
    t.ka[p] = a;
    t.kh[p] = h;
    tt_propagate(t, p);
}

// Lower leaf i's key (the new key must not be larger): climb only while it wins.
__device__ __forceinline__ void tt_lower(TTree t, int i, double d, int a, int h) {
    int p = t.cap + i;
    t.kd[p] = d;
    t.ka[p] = a;
    t.kh[p] = h;
    while (p > 1) {
        p >>= 1;
        if (t.win[p] != i && !key_less(d, a, h, i, t.kd[p], t.ka[p], t.kh[p], t.win[p])) break;
        t.kd[p] = d;
        t.ka[p] = a;
        t.kh[p] = h;
        t.win[p] = i;
    }
}

__device__ __forceinline__ bool tt_empty(TTree t) { return !(t.kd[1] < tt_inf()); }

// Remove the minimum and return its leaf.
__device__ __forceinline__ int tt_pop(TTree t) {
    const int i = t.win[1];
    const int p = t.cap + i;
    t.kd[p] = tt_inf();
    t.ka[p] = TT_INT_INF;
    t.kh[p] = TT_INT_INF;
    tt_propagate(t, p);
    return i;
}
