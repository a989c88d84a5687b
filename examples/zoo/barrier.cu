// Pair "barrier": out[i] = ITERS affine steps of x[i], one element a thread, 1024-thread CTAs.
// slow: a __syncthreads() in every iteration of the hot loop, needed by nothing (no shared
//       memory): each step waits for the CTA's slowest warp, and the loop cannot unroll.
// fast: the same loop without it.
#include "zoo_common.cuh"

extern "C" __global__ void zoo_barrier_slow(const float* __restrict__ x, float* __restrict__ out,
                                            long long n, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float y = i < n ? x[i] : 0.0f;
    for (int k = 0; k < iters; ++k) {
        y = fmaf(y, ZOO_C, ZOO_D);
        __syncthreads();
    }
    if (i < n) out[i] = y;
}

extern "C" __global__ void zoo_barrier_fast(const float* __restrict__ x, float* __restrict__ out,
                                            long long n, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float y = i < n ? x[i] : 0.0f;
    for (int k = 0; k < iters; ++k) {
        y = fmaf(y, ZOO_C, ZOO_D);
    }
    if (i < n) out[i] = y;
}
