// Pair "spills": each thread holds a vector v of W = 36 floats (column t of a W x rows
// matrix, coalesced) and applies ROUNDS times the circulant map
//   v[j] <- 0.75 v[j] + 0.25 v[(j + 1) % W]
// keeping all 36 values live. The two kernels are the same code; only the register budget
// differs (256-thread CTAs in both):
// slow: __launch_bounds__(256, 8): at most 32 registers a thread, so ptxas spills the
//       vector to local memory (STL/LDL every round, L1 traffic, stalls on local loads).
// fast: __launch_bounds__(256, 4): up to 64 registers, the vector stays in registers.
#define W 36

__device__ __forceinline__ void circulant(const float* __restrict__ x, float* __restrict__ out,
                                          long long rows, int rounds) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= rows) return;
    float v[W];
#pragma unroll
    for (int j = 0; j < W; ++j) v[j] = x[j * rows + t];
#pragma unroll 1
    for (int k = 0; k < rounds; ++k) {
        float first = v[0];
#pragma unroll
        for (int j = 0; j < W - 1; ++j) v[j] = fmaf(0.75f, v[j], 0.25f * v[j + 1]);
        v[W - 1] = fmaf(0.75f, v[W - 1], 0.25f * first);
    }
#pragma unroll
    for (int j = 0; j < W; ++j) out[j * rows + t] = v[j];
}

extern "C" __global__ void __launch_bounds__(256, 8)
zoo_spills_slow(const float* __restrict__ x, float* __restrict__ out, long long rows, int rounds) {
    circulant(x, out, rows, rounds);
}

extern "C" __global__ void __launch_bounds__(256, 4)
zoo_spills_fast(const float* __restrict__ x, float* __restrict__ out, long long rows, int rounds) {
    circulant(x, out, rows, rounds);
}
