// The grid graph's edges on the GPU: neighbour tables, the four weight models and the
// order-preserving float bits. One definition for every .cu file of terrain/grid (included
// by Backend.cuda_module, which inlines `#include "x.cuh"` from the .cu file's folder).
// The CPU twin is terrain/grid/edges.py: edge_weight (bit-identical, see its docstring).
#pragma once

typedef unsigned long long u64;
typedef unsigned int u32;

// neighbour k of a cell: (drow, dcol, direction); k < 4 are the cell's own edges E, S, SE, SW,
// k >= 4 the same directions seen from their other endpoint (W, N, NW, NE). 4-connectivity
// uses k = 0, 1, 4, 5 ((k & 3) < 2).
__constant__ int NB_DR[8] = {0, 1, 1, 1, 0, -1, -1, -1};
__constant__ int NB_DC[8] = {1, 0, 1, -1, -1, 0, -1, 1};
__constant__ int NB_DIR[8] = {0, 1, 2, 3, 0, 1, 2, 3};

// Weight of the edge in direction d from its owner: model 0 max, 1 absdiff, 2 slope,
// 3 length3d, in float64 with round-to-nearest operations (no FMA), rounded once; -0 -> +0.
__device__ __forceinline__ float edge_weight(float z_owner, float z_other, int d, int model,
                                             const double* hlen) {
    float w;
    if (model == 0) {
        w = z_owner >= z_other ? z_owner : z_other;
    } else {
        double dz = fabs(__dsub_rn((double)z_owner, (double)z_other));
        if (model == 1) {
            w = __double2float_rn(dz);
        } else if (model == 2) {
            w = __double2float_rn(__ddiv_rn(dz, hlen[d]));
        } else {
            double h = hlen[d];
            w = __double2float_rn(__dsqrt_rn(__dadd_rn(__dmul_rn(h, h), __dmul_rn(dz, dz))));
        }
    }
    if (w == 0.0f) w = 0.0f;  // -0.0 -> +0.0
    return w;
}

// uint32 whose unsigned order is the float order (no NaN)
__device__ __forceinline__ u32 order_bits(float w) {
    u32 b = __float_as_uint(w);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// inverse of order_bits
__device__ __forceinline__ float order_bits_float(u32 o) {
    return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}
