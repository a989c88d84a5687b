// Reductions shared by the block and fused softmax kernels (NVRTC-friendly: no headers).
#pragma once

#define SOFTMAX_NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block-wide max / sum (blockDim.x a multiple of 32, at most 1024): each warp reduces
// with shuffles, lane 0 leaves its warp's value in scratch[warp], one barrier, then
// every warp reduces the per-warp values again, so all threads return the result.
// scratch holds blockDim.x / 32 floats; two reductions in a row need two scratch areas
// (nobody may overwrite a value a slower warp has not read yet).
__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_max(v);
    if (warps == 1) return v;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_max(lane < warps ? scratch[lane] : SOFTMAX_NEG_INF);
}

__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    if (warps == 1) return v;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    return warp_sum(lane < warps ? scratch[lane] : 0.0f);
}

// Online softmax: merge the running (max m, sum s of exp(x - m)) of two parts.
__device__ __forceinline__ void online_merge(float& m, float& s, float m2, float s2) {
    const float mm = fmaxf(m, m2);
    if (mm == SOFTMAX_NEG_INF) return;  // both parts empty: keep (-inf, 0)
    s = s * __expf(m - mm) + s2 * __expf(m2 - mm);
    m = mm;
}
