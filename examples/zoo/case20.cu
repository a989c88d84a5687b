// Pair case20: out[i] = x[i] + sum over k < iters of tab[((k * 32) & 1023) + ((7 i + k) & 31)],
// tab a fixed table of 1024 floats (zoo_family.case20_table), n floats, a thread an
// element, 256-thread CTAs. In step k the 32 lanes of a warp read 32 different floats of
// one 128-byte stretch of the table (i & 31 is the lane).
// a: the table in __constant__ memory (the launcher copies it there once): the constant
//    cache serves one address at a time, so a warp's read is replayed for each of its 32
//    addresses.
// b: the same table from global memory (`tab`, read-only, through L1): one request, one
//    128-byte line a warp.
// Both kernels take the same arguments (a ignores `tab`).
__constant__ float zoo_case20_table[1024];

extern "C" __global__ void zoo_case20_a(const float* __restrict__ x, const float* __restrict__ tab,
                                        float* __restrict__ out, long long n, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int lane = (int)(i * 7);
    float acc = x[i];
#pragma unroll 4
    for (int k = 0; k < iters; ++k) acc += zoo_case20_table[((k << 5) & 1023) + ((lane + k) & 31)];
    out[i] = acc;
}

extern "C" __global__ void zoo_case20_b(const float* __restrict__ x, const float* __restrict__ tab,
                                        float* __restrict__ out, long long n, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int lane = (int)(i * 7);
    float acc = x[i];
#pragma unroll 4
    for (int k = 0; k < iters; ++k) acc += __ldg(&tab[((k << 5) & 1023) + ((lane + k) & 31)]);
    out[i] = acc;
}
