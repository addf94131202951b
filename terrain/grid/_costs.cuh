// Arc tables and arc costs of the directed grid graph (cost distance / SSSP): the CUDA twin of
// terrain/grid/costs.py, bit for bit. Include it from a .cu file compiled with
// -I<terrain/grid> (NVRTC: no system headers needed).
//
// Arc k goes from (r, c) to (r + ARC_DR[k], c + ARC_DC[k]); codes 0..7 clockwise from E, 8..15
// the knight moves (ENE ESE SSE SSW WSW WNW NNW NNE). lengths[k] is the horizontal length
// (host-computed float64 table). Models: 0 absdiff, 1 friction, 2 tobler; every float64
// operation is rounded to nearest with an explicit intrinsic so that no FMA is formed.
#pragma once

__constant__ int ARC_DR[16] = {0, 1, 1, 1, 0, -1, -1, -1, -1, 1, 2, 2, 1, -1, -2, -2};
__constant__ int ARC_DC[16] = {1, 1, 0, -1, -1, -1, 0, 1, 2, 2, 1, -1, -2, -2, -1, 1};

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

// Cost of arc k from u to v (float64); fu, fv = 1 without a friction raster.
__device__ __forceinline__ double arc_cost(float zu, float zv, float fu, float fv, int k,
                                           int model, const double* lengths) {
    if (model == 0) return fabs(__dsub_rn((double)zv, (double)zu));
    const double fmean = __dmul_rn(__dadd_rn((double)fu, (double)fv), 0.5);
    const double length = lengths[k];
    if (model == 1) return __dmul_rn(length, fmean);
    const double s = __ddiv_rn(__dsub_rn((double)zv, (double)zu), length);
    const double e = exp_det(__dmul_rn(TERRAIN_TOBLER_A, fabs(__dadd_rn(s, TERRAIN_TOBLER_S0))));
    return __dmul_rn(__ddiv_rn(__dmul_rn(length, e), TERRAIN_TOBLER_V0), fmean);
}
