// Pair "fp64": out[i] = ITERS affine steps of x[i] (zoo_common.cuh), 4 elements a thread
// interleaved (4 independent chains), full occupancy: compute-bound on the FMA pipe.
// slow: the steps in double (DFMA): the H200 has half as many FP64 lanes as FP32 ones.
// fast: the steps in float (FFMA). The output is float either way.
#include "zoo_common.cuh"
#define CHAINS 4

template <typename T>
__device__ __forceinline__ void affine4(const float* __restrict__ x, float* __restrict__ out,
                                        long long n, int iters) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const T c = (T)ZOO_C, d = (T)ZOO_D;
    T y[CHAINS];
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) {
        long long i = g + j * stride;
        y[j] = i < n ? (T)x[i] : (T)0;
    }
#pragma unroll 2
    for (int k = 0; k < iters; ++k) {
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) y[j] = fma(y[j], c, d);
    }
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) {
        long long i = g + j * stride;
        if (i < n) out[i] = (float)y[j];
    }
}

extern "C" __global__ void zoo_fp64_slow(const float* __restrict__ x, float* __restrict__ out,
                                         long long n, int iters) {
    affine4<double>(x, out, n, iters);
}

extern "C" __global__ void zoo_fp64_fast(const float* __restrict__ x, float* __restrict__ out,
                                         long long n, int iters) {
    affine4<float>(x, out, n, iters);
}
