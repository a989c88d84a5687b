// Pair "divergence": element i (n of them) gets one of two recurrences by its parity:
//   even i: ITERS steps of y <- fma(y, ZOO_C, ZOO_D)                  (one FFMA a step)
//   odd  i: ITERS steps of y <- (y * ZOO_C2) + ZOO_D2, unfused         (FMUL + FADD a step)
// slow: thread t takes element t: even and odd lanes share every warp, so each warp runs
//       both loops one after the other with half its lanes masked off.
// fast: per pair of warps (64 elements), warp 0 takes the 32 even elements and warp 1 the
//       32 odd ones: the branch is uniform in each warp (loads touch 256 B for 128 used).
#include "zoo_common.cuh"
#define ZOO_C2 0.99951171875f    // 1 - 2^-11
#define ZOO_D2 -0.00048828125f   // -2^-11: fixed point -1

__device__ __forceinline__ float zoo_even(float y, int iters) {
#pragma unroll 4
    for (int k = 0; k < iters; ++k) y = fmaf(y, ZOO_C, ZOO_D);
    return y;
}

__device__ __forceinline__ float zoo_odd(float y, int iters) {
#pragma unroll 4
    for (int k = 0; k < iters; ++k) y = __fadd_rn(__fmul_rn(y, ZOO_C2), ZOO_D2);
    return y;
}

__device__ __forceinline__ void zoo_element(const float* __restrict__ x, float* __restrict__ out,
                                            long long i, long long n, int iters) {
    if (i >= n) return;
    float y = x[i];
    if (i & 1) y = zoo_odd(y, iters);
    else y = zoo_even(y, iters);
    out[i] = y;
}

extern "C" __global__ void zoo_divergence_slow(const float* __restrict__ x, float* __restrict__ out,
                                               long long n, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    zoo_element(x, out, i, n, iters);
}

extern "C" __global__ void zoo_divergence_fast(const float* __restrict__ x, float* __restrict__ out,
                                               long long n, int iters) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long group = t >> 6;            // 64 threads (two warps) per 64 elements
    int lane = threadIdx.x & 31;
    int parity = (threadIdx.x >> 5) & 1; // warp-uniform
    long long i = group * 64 + 2 * lane + parity;
    zoo_element(x, out, i, n, iters);
}
