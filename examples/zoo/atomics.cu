// Pair "atomics": out[s] = sum of x over segment s (SEG = 4096 floats, 16 CTAs of 256
// threads a segment); out is zeroed by the launcher before the kernel (both variants).
// slow: every thread atomicAdd()s its element to out[s]: 4096 float atomics on one address
//       per segment, serialized in the L2.
// fast: a warp-shuffle then shared-memory reduction in the CTA, one atomicAdd per CTA.
#define SEG 4096
#define THREADS 256

extern "C" __global__ void zoo_atomics_slow(const float* __restrict__ x, float* __restrict__ out, long long n) {
    long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
    if (i < n) atomicAdd(out + i / SEG, x[i]);
}

extern "C" __global__ void zoo_atomics_fast(const float* __restrict__ x, float* __restrict__ out, long long n) {
    __shared__ float partial[THREADS / 32];
    long long i = (long long)blockIdx.x * THREADS + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < THREADS / 32 ? partial[threadIdx.x] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        long long first = (long long)blockIdx.x * THREADS;
        if (threadIdx.x == 0 && first < n) atomicAdd(out + first / SEG, v);
    }
}
