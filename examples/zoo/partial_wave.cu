// Pair "partial_wave": out[i] = ITERS affine steps of x[i] (zoo_common.cuh), compute-bound.
// Both kernels take 1024-thread CTAs and are launched with 120 KiB of dynamic shared memory
// (unused, the same for both), so exactly one CTA fits an SM: a wave is SM-count CTAs.
// Each thread works its elements one after another (32 warps an SM keep the FMA pipe busy).
// slow: one CTA per chunk of 1024*ept elements and (sms + 4) chunks: a full wave, then a
//       second wave of 4 CTAs on 4 SMs while the other SMs idle (the kernel takes 2 waves).
// fast: exactly SM-count CTAs striding over the same elements: one wave, ~3 % longer.
#include "zoo_common.cuh"

__device__ __forceinline__ float affine_steps(float y, int iters) {
#pragma unroll 8
    for (int k = 0; k < iters; ++k) y = fmaf(y, ZOO_C, ZOO_D);
    return y;
}

extern "C" __global__ void __launch_bounds__(1024, 1)
zoo_partial_wave_slow(const float* __restrict__ x, float* __restrict__ out, long long n, int ept, int iters) {
    long long base = (long long)blockIdx.x * blockDim.x * ept + threadIdx.x;
    for (int j = 0; j < ept; ++j) {
        long long i = base + (long long)j * blockDim.x;
        if (i < n) out[i] = affine_steps(x[i], iters);
    }
}

extern "C" __global__ void __launch_bounds__(1024, 1)
zoo_partial_wave_fast(const float* __restrict__ x, float* __restrict__ out, long long n, int ept, int iters) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = affine_steps(x[i], iters);
}
