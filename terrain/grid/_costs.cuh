// Arc tables and arc costs of the directed grid graph (cost distance / SSSP): the CUDA twin of
// terrain/grid/costs.py, bit for bit. Include it from a .cu file compiled with
// -I<terrain/grid> (NVRTC: no system headers needed).
//
// Arc k goes from (r, c) to (r + ARC_DR[k], c + ARC_DC[k]); codes 0..7 clockwise from E, 8..15
// the knight moves (ENE ESE SSE SSW WSW WNW NNW NNE), costed as GRASS r.cost -k: with the four
// cells they touch (KNIGHT_MID). lengths[k] is the horizontal length
// (host-computed float64 table). Models: 0 absdiff, 1 friction, 2 tobler; every float64
// operation is rounded to nearest with an explicit intrinsic so that no FMA is formed.
#pragma once

__constant__ int ARC_DR[16] = {0, 1, 1, 1, 0, -1, -1, -1, -1, 1, 2, 2, 1, -1, -2, -2};
__constant__ int ARC_DC[16] = {1, 1, 0, -1, -1, -1, 0, 1, 2, 2, 1, -1, -2, -2, -1, 1};
// The two cells knight arc k (8..15) passes between, as the codes of the arcs from its tail to
// them (row k - 8): the rook neighbour on its long axis, then the diagonal one.
__constant__ int KNIGHT_MID[8][2] = {{0, 7}, {0, 1}, {2, 1}, {2, 3},
                                     {4, 3}, {4, 5}, {6, 5}, {6, 7}};

#define TERRAIN_TOBLER_V0 (6000.0 / 3600.0)
#define TERRAIN_TOBLER_A 3.5
#define TERRAIN_TOBLER_S0 0.05

// exp(x) with the bits of costs.exp_det: Cody-Waite reduction by ln 2, degree-13 Taylor
// polynomial in Horner form (coefficients 1/n! rounded to float64), exact ldexp.
__device__ __forceinline__ double exp_det(double x) {
    if (x != x) return x;
    if (x > 709.782712893384) return __longlong_as_double(0x7ff0000000000000LL);
    if (x < -745.1332191019411) return 0.0;
    const double k = floor(__dadd_rn(__dmul_rn(x, 1.4426950408889634), 0.5));
    const double r = __dsub_rn(__dsub_rn(x, __dmul_rn(k, 6.93147180369123816490e-01)),
                               __dmul_rn(k, 1.90821492927058770002e-10));
    const double c[14] = {1.0, 1.0, 1.0 / 2.0, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0,
                          1.0 / 720.0, 1.0 / 5040.0, 1.0 / 40320.0, 1.0 / 362880.0,
                          1.0 / 3628800.0, 1.0 / 39916800.0, 1.0 / 479001600.0,
                          1.0 / 6227020800.0};
    double p = c[13];
#pragma unroll
    for (int n = 12; n >= 0; --n) p = __dadd_rn(__dmul_rn(p, r), c[n]);
    return ldexp(p, (int)k);
}

// Friction factor of a rook or diagonal arc: (f_u + f_v) * 0.5 (f = 1 without a friction
// raster).
__device__ __forceinline__ double pair_factor(float fu, float fv) {
    return __dmul_rn(__dadd_rn((double)fu, (double)fv), 0.5);
}

// Friction factor of a knight arc: ((f_u + f_v) + (f_a + f_b)) * 0.25, a and b the cells it
// passes between (GRASS r.cost -k).
__device__ __forceinline__ double quad_factor(float fu, float fv, float fa, float fb) {
    return __dmul_rn(__dadd_rn(__dadd_rn((double)fu, (double)fv),
                               __dadd_rn((double)fa, (double)fb)),
                     0.25);
}

// Whether arc k from cell (ur, uc) of an H x W window (z, f row-major; f read only when has_f;
// NaN = nodata) exists, its two ends being vertices, and its friction factor in *fac: a
// knight arc exists only when the two cells it passes between are vertices of the window too.
// The twin of _costs_cpu.window_arc_factor.
__device__ __forceinline__ bool window_arc_factor(const float* z, const float* f, int has_f,
                                                  int H, int W, int ur, int uc, int k,
                                                  double* fac) {
    const int vr = ur + ARC_DR[k], vc = uc + ARC_DC[k];
    const float fu = has_f ? f[ur * W + uc] : 1.0f, fv = has_f ? f[vr * W + vc] : 1.0f;
    if (k < 8) {
        *fac = pair_factor(fu, fv);
        return true;
    }
    const int ka = KNIGHT_MID[k - 8][0], kb = KNIGHT_MID[k - 8][1];
    const int ar = ur + ARC_DR[ka], ac = uc + ARC_DC[ka];
    const int br = ur + ARC_DR[kb], bc = uc + ARC_DC[kb];
    if (ar < 0 || ar >= H || ac < 0 || ac >= W || br < 0 || br >= H || bc < 0 || bc >= W)
        return false;
    const int a = ar * W + ac, b = br * W + bc;
    const float za = z[a], zb = z[b];
    const float fa = has_f ? f[a] : 1.0f, fb = has_f ? f[b] : 1.0f;
    if (za != za || zb != zb || fa != fa || fb != fb) return false;
    *fac = quad_factor(fu, fv, fa, fb);
    return true;
}

// Cost of arc k from u to v (float64) with friction factor fac (pair_factor / quad_factor;
// unused by absdiff).
__device__ __forceinline__ double arc_cost(float zu, float zv, double fac, int k, int model,
                                           const double* lengths) {
    if (model == 0) return fabs(__dsub_rn((double)zv, (double)zu));
    const double length = lengths[k];
    if (model == 1) return __dmul_rn(length, fac);
    const double s = __ddiv_rn(__dsub_rn((double)zv, (double)zu), length);
    const double e = exp_det(__dmul_rn(TERRAIN_TOBLER_A, fabs(__dadd_rn(s, TERRAIN_TOBLER_S0))));
    return __dmul_rn(__ddiv_rn(__dmul_rn(length, e), TERRAIN_TOBLER_V0), fac);
}
