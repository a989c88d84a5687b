// Pair "dependent_chain": out[i] = ITERS affine steps of x[i]; a small grid (one 128-thread
// CTA an SM: one warp per SM sub-partition), CHAINS = 8 elements a thread.
// slow: the thread works its 8 elements one after another: every FFMA waits for the one
//       before (~4 cycles), and the scheduler has no other warp to issue: 1 FFMA / 4 cycles.
// fast: the same 8 elements interleaved: 8 independent chains, an FFMA can issue each cycle.
// Both step loops are unrolled 16 times, so that the loop's branch (which one warp cannot
// hide either) costs little next to the FFMAs.
#include "zoo_common.cuh"
#define CHAINS 8

extern "C" __global__ void zoo_dependent_chain_slow(const float* __restrict__ x, float* __restrict__ out,
                                                    long long n, int iters) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll 1
    for (int j = 0; j < CHAINS; ++j) {
        long long i = g + j * stride;
        float y = i < n ? x[i] : 0.0f;
#pragma unroll 16
        for (int k = 0; k < iters; ++k) y = fmaf(y, ZOO_C, ZOO_D);
        if (i < n) out[i] = y;
    }
}

extern "C" __global__ void zoo_dependent_chain_fast(const float* __restrict__ x, float* __restrict__ out,
                                                    long long n, int iters) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float y[CHAINS];
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) {
        long long i = g + j * stride;
        y[j] = i < n ? x[i] : 0.0f;
    }
#pragma unroll 16
    for (int k = 0; k < iters; ++k) {
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) y[j] = fmaf(y[j], ZOO_C, ZOO_D);
    }
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) {
        long long i = g + j * stride;
        if (i < n) out[i] = y[j];
    }
}
