// v3 GQA reuse: one CTA per (kv_head, sequence) with one warp per query head of the group.
// The CTA copies each page of K and V for its KV head into shared memory once (float4,
// coalesced), and every warp consumes it: the group reads each KV byte from DRAM once
// instead of q_heads / kv_heads times. Inside a warp the math is v2's (lane owns VEC dims).
#include "common.cuh"

#define VEC (HEAD_DIM / 32)

extern "C" __global__ void paged_decode_v3(
    float* __restrict__ out, const float* __restrict__ query, const float* __restrict__ key_cache,
    const float* __restrict__ value_cache, const int* __restrict__ block_tables,
    const int* __restrict__ context_lens, float scale, int q_heads, int kv_heads, int page_size,
    int pages_per_seq) {
    typedef FloatVec<VEC> Vec;
    extern __shared__ float4 smem4[];
    float* k_page = reinterpret_cast<float*>(smem4);  // [page_size][HEAD_DIM]
    float* v_page = k_page + page_size * HEAD_DIM;

    const int kvh = blockIdx.x;
    const int b = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int group = q_heads / kv_heads;
    const int h = kvh * group + warp;
    const int* table = block_tables + static_cast<size_t>(b) * pages_per_seq;
    const int ctx = context_lens[b];
    const Vec q = *reinterpret_cast<const Vec*>(query + (static_cast<size_t>(b) * q_heads + h) * HEAD_DIM +
                                                lane * VEC);

    float m = NEG_INF, l = 0.f;
    float acc[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[i] = 0.f;

    const int row4 = HEAD_DIM / 4;  // float4s in one token's row
    const int num_pages = (ctx + page_size - 1) / page_size;
    for (int p = 0; p < num_pages; ++p) {
        const int page = table[p];
        const int tokens = min(page_size, ctx - p * page_size);
        __syncthreads();  // the previous page is consumed by every warp
        for (int i = threadIdx.x; i < tokens * row4; i += blockDim.x) {
            const int slot = i / row4, c = i % row4;
            const size_t src = kv_offset(page, slot, kvh, page_size, kv_heads, HEAD_DIM) / 4 + c;
            smem4[i] = reinterpret_cast<const float4*>(key_cache)[src];
            smem4[page_size * row4 + i] = reinterpret_cast<const float4*>(value_cache)[src];
        }
        __syncthreads();
        for (int j = 0; j < tokens; ++j) {
            const Vec k = *reinterpret_cast<const Vec*>(k_page + j * HEAD_DIM + lane * VEC);
            const Vec v = *reinterpret_cast<const Vec*>(v_page + j * HEAD_DIM + lane * VEC);
            float partial = 0.f;
#pragma unroll
            for (int i = 0; i < VEC; ++i) partial += q.v[i] * k.v[i];
            const float s = warp_sum(partial) * scale;
            const float m_new = fmaxf(m, s);
            const float correction = expf(m - m_new);
            const float pr = expf(s - m_new);
            l = l * correction + pr;
#pragma unroll
            for (int i = 0; i < VEC; ++i) acc[i] = acc[i] * correction + pr * v.v[i];
            m = m_new;
        }
    }
    Vec o;
    const float inv_l = 1.f / l;
#pragma unroll
    for (int i = 0; i < VEC; ++i) o.v[i] = acc[i] * inv_l;
    *reinterpret_cast<Vec*>(out + (static_cast<size_t>(b) * q_heads + h) * HEAD_DIM + lane * VEC) = o;
}
