// Pair case16: C = A B, A (M x K) and B (K x N) fp16 row-major (passed as their 16-bit
// patterns), C fp32 (M x N), the products summed in fp32. Both kernels: 128-thread CTAs,
// each warp one 16 x 16 tile of C (tile t of the (M/16) x (N/16) tiles: row block
// t / (N/16), column block t % (N/16)), reading A and B straight from global memory
// (L1/L2-resident), no shared memory. No headers (NVRTC): fp16 by inline PTX.
// a: lane l owns row l/2 and 8 columns (l%2)*8 .. +8 of the tile; per 8 steps of k it
//    loads 8 halves of A's row and 8 x 8 halves of B (16-byte loads), converts them to
//    float and does 64 FFMA.
// b: the same tile by mma.sync.m16n8k16 (HMMA on the tensor cores), two a 16-wide step
//    of k, each lane loading its fragments (PTX ISA's m16n8k16 .f16 layout) itself.

__device__ __forceinline__ float h2f(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}

extern "C" __global__ void zoo_case16_a(const unsigned short* __restrict__ a,
                                        const unsigned short* __restrict__ b,
                                        float* __restrict__ c, int m, int n, int k) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    int tiles_n = n >> 4;
    if (warp >= (m >> 4) * tiles_n) return;
    int row = ((warp / tiles_n) << 4) + (lane >> 1);
    int col = ((warp % tiles_n) << 4) + ((lane & 1) << 3);
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
    const unsigned short* arow = a + (long long)row * k;
#pragma unroll 1
    for (int kk = 0; kk < k; kk += 8) {
        uint4 av = *reinterpret_cast<const uint4*>(arow + kk);
        const unsigned short* ah = reinterpret_cast<const unsigned short*>(&av);
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            uint4 bv = *reinterpret_cast<const uint4*>(b + (long long)(kk + s) * n + col);
            const unsigned short* bh = reinterpret_cast<const unsigned short*>(&bv);
            float as = h2f(ah[s]);
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[j] = fmaf(as, h2f(bh[j]), acc[j]);
        }
    }
    float* crow = c + (long long)row * n + col;
#pragma unroll
    for (int j = 0; j < 8; ++j) crow[j] = acc[j];
}

extern "C" __global__ void zoo_case16_b(const unsigned short* __restrict__ a,
                                        const unsigned short* __restrict__ b,
                                        float* __restrict__ c, int m, int n, int k) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    int tiles_n = n >> 4;
    if (warp >= (m >> 4) * tiles_n) return;
    int row0 = (warp / tiles_n) << 4, col0 = (warp % tiles_n) << 4;
    int g = lane >> 2, t = lane & 3;  // groupID, thread in group
    const unsigned* a32 = reinterpret_cast<const unsigned*>(a);
    float acc[2][4];
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[j][r] = 0.0f;
#pragma unroll 1
    for (int kk = 0; kk < k; kk += 16) {
        // A: a0a1 (g, 2t..), a2a3 (g+8, 2t..), a4a5 (g, 2t+8..), a6a7 (g+8, 2t+8..)
        long long ra = (long long)(row0 + g) * k + kk + 2 * t, rb = ra + 8LL * k;
        unsigned a0 = a32[ra >> 1], a1 = a32[rb >> 1], a2 = a32[(ra + 8) >> 1], a3 = a32[(rb + 8) >> 1];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            // B (k x 8 block): b0b1 (k = 2t, 2t+1; n = g), b2b3 (k = 2t+8, 2t+9; n = g)
            const unsigned short* bp = b + (long long)(kk + 2 * t) * n + col0 + 8 * j + g;
            unsigned b0 = (unsigned)bp[0] | ((unsigned)bp[n] << 16);
            unsigned b1 = (unsigned)bp[8LL * n] | ((unsigned)bp[9LL * n] << 16);
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                         "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                         : "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
    }
    // C: c0c1 (g, 2t..), c2c3 (g+8, 2t..) of each 8-column block
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        float* cp = c + (long long)(row0 + g) * n + col0 + 8 * j + 2 * t;
        cp[0] = acc[j][0];
        cp[1] = acc[j][1];
        cp[8LL * n] = acc[j][2];
        cp[8LL * n + 1] = acc[j][3];
    }
}
