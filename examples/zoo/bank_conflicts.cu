// Pair "bank_conflicts": out = x^T for a square n x n float matrix, through a 32 x 32
// shared-memory tile (CTA 32 x 8 threads, 4 rows a thread); global loads and stores are
// coalesced in both. The tile is written row-wise and read column-wise:
// slow: tile[32][32]: a column's 32 floats sit in one bank, a 32-way conflict per read.
// fast: tile[32][33]: the padding puts a column's floats in 32 different banks.
#define TILE 32
#define ROWS 8

template <int PAD>
__device__ __forceinline__ void transpose(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float tile[TILE][TILE + PAD];
    int bx = blockIdx.x * TILE, by = blockIdx.y * TILE;
    int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int r = ty; r < TILE; r += ROWS)
        tile[r][tx] = x[(long long)(by + r) * n + bx + tx];
    __syncthreads();
#pragma unroll
    for (int r = ty; r < TILE; r += ROWS)
        out[(long long)(bx + r) * n + by + tx] = tile[tx][r];
}

extern "C" __global__ void zoo_bank_conflicts_slow(const float* __restrict__ x, float* __restrict__ out, int n) {
    transpose<0>(x, out, n);
}

extern "C" __global__ void zoo_bank_conflicts_fast(const float* __restrict__ x, float* __restrict__ out, int n) {
    transpose<1>(x, out, n);
}
