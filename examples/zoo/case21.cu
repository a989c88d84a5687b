// Pair case21: nxt is the table nxt[j] = (j + S) & (N - 1) of N ints (S = 65568, a
// multiple of 32; N a power of two, 16 MB by default: L2-resident). Thread i visits
// j_1 = nxt[i], j_2 = nxt[j_1], ... j_iters and writes out[i] = sum_k (j_k & 255) (an int
// sum converted once: exact in float32 while iters < 65793). A warp's 32 lanes
// read 32 consecutive ints at every step in both kernels (coalesced), and both read the
// same elements in the same order. 256-thread CTAs, `threads` threads.
// a: each address is the value the previous load returned (pointer chasing): one load
//    in flight a thread.
// b: the addresses computed, (i + k S) & (N - 1): the loads of 8 steps are independent
//    and in flight together.
extern "C" __global__ void zoo_case21_a(const int* __restrict__ nxt, float* __restrict__ out,
                                        long long threads, int mask, int stride, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= threads) return;
    int j = (int)(i & mask), acc = 0;
#pragma unroll 8
    for (int k = 0; k < iters; ++k) {
        j = nxt[j];
        acc += j & 255;
    }
    out[i] = (float)acc;
}

extern "C" __global__ void zoo_case21_b(const int* __restrict__ nxt, float* __restrict__ out,
                                        long long threads, int mask, int stride, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= threads) return;
    unsigned j = (unsigned)(i & mask);
    int acc = 0;
#pragma unroll 8
    for (int k = 0; k < iters; ++k) {
        acc += nxt[(j + (unsigned)k * (unsigned)stride) & (unsigned)mask] & 255;
    }
    out[i] = (float)acc;
}
