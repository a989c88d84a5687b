// Pair "occupancy_shared_mem": out = 2 x + 1, one element a thread, 256-thread CTAs: a
// memory-bound kernel with no ILP, whose only way to hide DRAM latency is warps in flight.
// The two kernels are the same code; the slow variant is launched with 100 KiB of dynamic
// shared memory it never touches, so only 2 CTAs (16 warps, 25 % occupancy) fit an SM
// instead of 8 (64 warps).
extern "C" __global__ void zoo_occupancy_shared_mem_slow(const float* __restrict__ x, float* __restrict__ out,
                                              long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaf(2.0f, x[i], 1.0f);
}

extern "C" __global__ void zoo_occupancy_shared_mem_fast(const float* __restrict__ x, float* __restrict__ out,
                                              long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaf(2.0f, x[i], 1.0f);
}
