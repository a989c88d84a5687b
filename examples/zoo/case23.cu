// Pair case23: the column sums of a row-major float32 matrix x of R rows and C columns,
// out[c] = sum over r of x[r][c] (R and C multiples of 32).
// a: two kernels through a C x R buffer xt in global memory:
//    zoo_case23_a1 transposes x into xt the usual way: a 32 x 33 padded shared-memory tile
//    (no bank conflicts), CTA 32 x 8 threads, 4 rows a thread, coalesced loads and stores;
//    zoo_case23_a2 sums each row of xt: one warp a row (8 warps a CTA), the lanes stride
//    the row (coalesced, 4 loads in flight a lane), a shuffle reduction, lane 0 writes.
// b: zoo_case23_b sums the columns of x where they lie: a CTA of 32 x 32 threads over 32
//    adjacent columns (one CTA a column block, C / 32 CTAs), each of the 32 thread rows
//    sums every 32nd row (a warp's loads: 32 adjacent floats of one row, 4 loads in flight
//    a lane), the 32 partials of a column reduced through shared memory, one store a
//    column. One kernel, no atomics. The thread rows are 32, not 8, so that C / 32 CTAs
//    (256 at C = 8192) keep as many loads in flight an SM as kernel a2's.
#define T23 32      // the tile side, the warp width, the columns of a CTA of kernel b
#define ROWS_A 8    // kernel a1's thread rows (4 rows of the tile a thread)
#define ROWS_B 32   // kernel b's thread rows
#define WARPS_A 8   // kernel a2's warps a CTA

extern "C" __global__ void zoo_case23_a1(const float* __restrict__ x, float* __restrict__ xt,
                                         int rows, int cols) {
    __shared__ float tile[T23][T23 + 1];
    int c0 = blockIdx.x * T23, r0 = blockIdx.y * T23;
    int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int r = ty; r < T23; r += ROWS_A)
        tile[r][tx] = x[(long long)(r0 + r) * cols + c0 + tx];
    __syncthreads();
#pragma unroll
    for (int r = ty; r < T23; r += ROWS_A)
        xt[(long long)(c0 + r) * rows + r0 + tx] = tile[tx][r];
}

extern "C" __global__ void zoo_case23_a2(const float* __restrict__ xt, float* __restrict__ out,
                                         int rows, int cols) {
    int row = blockIdx.x * WARPS_A + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= cols) return;  // xt has cols rows of rows floats
    const float* p = xt + (long long)row * rows;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int i = lane;
    for (; i + 3 * T23 < rows; i += 4 * T23) {
        s0 += p[i];
        s1 += p[i + T23];
        s2 += p[i + 2 * T23];
        s3 += p[i + 3 * T23];
    }
    for (; i < rows; i += T23) s0 += p[i];
    float s = (s0 + s1) + (s2 + s3);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0) out[row] = s;
}

extern "C" __global__ void __launch_bounds__(T23 * ROWS_B, 2)
zoo_case23_b(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
    __shared__ float part[ROWS_B][T23];
    int tx = threadIdx.x, ty = threadIdx.y;
    int c = blockIdx.x * T23 + tx;
    const float* p = x + c;
    long long step = (long long)ROWS_B * cols;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int r = ty;
    for (; r + 3 * ROWS_B < rows; r += 4 * ROWS_B) {
        const float* q = p + (long long)r * cols;
        s0 += q[0];
        s1 += q[step];
        s2 += q[2 * step];
        s3 += q[3 * step];
    }
    for (; r < rows; r += ROWS_B) s0 += p[(long long)r * cols];
    part[ty][tx] = (s0 + s1) + (s2 + s3);
    __syncthreads();
    if (ty == 0) {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < ROWS_B; ++j) s += part[j][tx];
        out[c] = s;
    }
}
