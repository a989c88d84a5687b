// block: one CTA per row; its threads stride across the row, so a warp's 32 loads are
// 32 consecutive floats (coalesced). Max and sum are block reductions (warp shuffles,
// then one float per warp through shared memory). Still three passes over the row in
// global memory: the second and third re-read it, mostly from L1/L2.
#include "softmax_reduce.cuh"

extern "C" __global__ void __launch_bounds__(1024)
softmax_block(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float scratch[2][32];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;

    float m = SOFTMAX_NEG_INF;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
    m = block_max(m, scratch[0]);

    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += __expf(xr[j] - m);
    s = block_sum(s, scratch[1]);

    const float inv = 1.0f / s;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = __expf(xr[j] - m) * inv;
}
