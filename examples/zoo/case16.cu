// Pair case16: C = A B, A (M x K) and B (K x N) fp16 row-major, C fp32 (M x N), the
// products summed in fp32. Both kernels: 128-thread CTAs, each warp one 16 x 16 tile of
// C (tile t of the (M/16) x (N/16) tiles: row block t / (N/16), column block t % (N/16)),
// reading A and B straight from global memory (L1/L2-resident), no shared memory.
// a: lane l owns row l/2 and 8 columns (l%2)*8 .. +8 of the tile; per 8 steps of k it
//    loads 8 halves of A's row and 8 x 8 halves of B (16-byte loads), converts them to
//    float and does 64 FFMA.
// b: the same tile through wmma (16x16x16 fragments: mma.sync, HMMA on the tensor cores).
#include <cuda_fp16.h>
#include <mma.h>

extern "C" __global__ void zoo_case16_a(const __half* __restrict__ a, const __half* __restrict__ b,
                                        float* __restrict__ c, int m, int n, int k) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    int tiles_n = n >> 4;
    if (warp >= (m >> 4) * tiles_n) return;
    int row = ((warp / tiles_n) << 4) + (lane >> 1);
    int col = ((warp % tiles_n) << 4) + ((lane & 1) << 3);
    float acc[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
    const __half* arow = a + (long long)row * k;
#pragma unroll 1
    for (int kk = 0; kk < k; kk += 8) {
        uint4 av = *reinterpret_cast<const uint4*>(arow + kk);
        const __half* ah = reinterpret_cast<const __half*>(&av);
#pragma unroll
        for (int s = 0; s < 8; ++s) {
            uint4 bv = *reinterpret_cast<const uint4*>(b + (long long)(kk + s) * n + col);
            const __half* bh = reinterpret_cast<const __half*>(&bv);
            float as = __half2float(ah[s]);
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[j] = fmaf(as, __half2float(bh[j]), acc[j]);
        }
    }
    float* crow = c + (long long)row * n + col;
#pragma unroll
    for (int j = 0; j < 8; ++j) crow[j] = acc[j];
}

extern "C" __global__ void zoo_case16_b(const __half* __restrict__ a, const __half* __restrict__ b,
                                        float* __restrict__ c, int m, int n, int k) {
    using namespace nvcuda;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int tiles_n = n >> 4;
    if (warp >= (m >> 4) * tiles_n) return;
    int row = (warp / tiles_n) << 4, col = (warp % tiles_n) << 4;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll 1
    for (int kk = 0; kk < k; kk += 16) {
        wmma::load_matrix_sync(fa, a + (long long)row * k + kk, k);
        wmma::load_matrix_sync(fb, b + (long long)kk * n + col, n);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c + (long long)row * n + col, acc, n, wmma::mem_row_major);
}
