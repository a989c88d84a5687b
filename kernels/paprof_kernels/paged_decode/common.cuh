// Helpers shared by the paged-decode kernels. Compiled by NVRTC (CuPy RawModule) on the
// GPU machine and by nvcc in CI, so it includes no header: everything used is a builtin.
#pragma once

#ifdef PAGED_EMULATE  // v5_mma.cu on the CPU (tests/test_paged_emulated.py): host stand-ins
#include "paged_emulate.h"
#endif

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif

#define FULL_MASK 0xffffffffu
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(FULL_MASK, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, offset));
    return v;
}

// Offset of token slot `slot` of physical page `page` for KV head `kvh`
// in a cache laid out as [num_pages, page_size, kv_heads, head_dim].
__device__ __forceinline__ size_t kv_offset(int page, int slot, int kvh, int page_size, int kv_heads,
                                            int head_dim) {
    return ((static_cast<size_t>(page) * page_size + slot) * kv_heads + kvh) * head_dim;
}

// N consecutive floats loaded as one vector (N = 1, 2, 4: LDG.32/.64/.128; 8: two LDG.128).
template <int N>
struct alignas(N >= 4 ? 16 : 4 * N) FloatVec {
    float v[N];
};
