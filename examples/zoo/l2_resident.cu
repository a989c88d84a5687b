// Pair "l2_resident": out[i] = sum over r < REPS of x[(i + r*SHIFT) % m], x of m floats.
// The inputs hold x (m floats) and big = REPS copies of x laid end to end (REPS*m floats),
// so both kernels request the same REPS*m*4 bytes and add the same values in the same order:
// slow: reads copy r of big for term r: every byte comes from DRAM (REPS*m*4 bytes of it).
// fast: reads x for every term: after the first pass its m*4 bytes (16 MB) are L2 hits.
// The shift (a multiple of 32 floats: loads stay coalesced) moves each term's reads 256 KiB
// on, so that an SM re-reads nothing it read lately: the hits are L2 hits, not L1 hits.
// Loads are ld.global.cg (L2 only, no L1) through volatile asm, so neither the compiler
// nor the L1 can turn the re-reads into register or L1 reuse. Each thread sums EPT elements
// (grid-stride) for each r, r in the outer loop.
#define EPT 8
#define SHIFT 65568LL  // 64 Ki + 32 floats

__device__ __forceinline__ float ld_cg(const float* p) {
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

extern "C" __global__ void zoo_l2_resident_slow(const float* __restrict__ x, const float* __restrict__ big,
                                                float* __restrict__ out, long long m, int reps) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc[EPT];
#pragma unroll
    for (int j = 0; j < EPT; ++j) acc[j] = 0.0f;
    for (int r = 0; r < reps; ++r) {
        const float* src = big + (long long)r * m;
        long long shift = (r * SHIFT) % m;
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            long long i = g + j * stride, k = i + shift;
            if (k >= m) k -= m;
            if (i < m) acc[j] += ld_cg(src + k);
        }
    }
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        long long i = g + j * stride;
        if (i < m) out[i] = acc[j];
    }
}

extern "C" __global__ void zoo_l2_resident_fast(const float* __restrict__ x, const float* __restrict__ big,
                                                float* __restrict__ out, long long m, int reps) {
    long long stride = (long long)gridDim.x * blockDim.x;
    long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc[EPT];
#pragma unroll
    for (int j = 0; j < EPT; ++j) acc[j] = 0.0f;
    for (int r = 0; r < reps; ++r) {
        const float* src = x;
        long long shift = (r * SHIFT) % m;
#pragma unroll
        for (int j = 0; j < EPT; ++j) {
            long long i = g + j * stride, k = i + shift;
            if (k >= m) k -= m;
            if (i < m) acc[j] += ld_cg(src + k);
        }
    }
#pragma unroll
    for (int j = 0; j < EPT; ++j) {
        long long i = g + j * stride;
        if (i < m) out[i] = acc[j];
    }
}
