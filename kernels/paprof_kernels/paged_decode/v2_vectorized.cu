// v2 vectorized: one warp per (q_head, sequence). Lane i owns VEC = HEAD_DIM / 32 consecutive
// dimensions and reads them as one vector (float4 for head_dim 128). The dot product is a
// per-lane partial plus a warp-shuffle sum that leaves the score in every lane: no shared
// memory, no block barrier. Online softmax per lane over its VEC dimensions.
#include "common.cuh"

#define VEC (HEAD_DIM / 32)

extern "C" __global__ void __launch_bounds__(32) paged_decode_v2(
    float* __restrict__ out, const float* __restrict__ query, const float* __restrict__ key_cache,
    const float* __restrict__ value_cache, const int* __restrict__ block_tables,
    const int* __restrict__ context_lens, float scale, int q_heads, int kv_heads, int page_size,
    int pages_per_seq) {
    typedef FloatVec<VEC> Vec;
    const int h = blockIdx.x;
    const int b = blockIdx.y;
    const int lane = threadIdx.x;
    const int kvh = h / (q_heads / kv_heads);
    const int* table = block_tables + static_cast<size_t>(b) * pages_per_seq;
    const int ctx = context_lens[b];
    const Vec q = *reinterpret_cast<const Vec*>(query + (static_cast<size_t>(b) * q_heads + h) * HEAD_DIM +
                                                lane * VEC);

    float m = NEG_INF, l = 0.f;
    float acc[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[i] = 0.f;

    for (int t = 0; t < ctx; ++t) {
        const int page = table[t / page_size];
        const size_t base = kv_offset(page, t % page_size, kvh, page_size, kv_heads, HEAD_DIM) + lane * VEC;
        const Vec k = *reinterpret_cast<const Vec*>(key_cache + base);
        const Vec v = *reinterpret_cast<const Vec*>(value_cache + base);
        float partial = 0.f;
#pragma unroll
        for (int i = 0; i < VEC; ++i) partial += q.v[i] * k.v[i];
        const float s = warp_sum(partial) * scale;
        const float m_new = fmaxf(m, s);
        const float correction = expf(m - m_new);
        const float p = expf(s - m_new);
        l = l * correction + p;
#pragma unroll
        for (int i = 0; i < VEC; ++i) acc[i] = acc[i] * correction + p * v.v[i];
        m = m_new;
    }
    Vec o;
    const float inv_l = 1.f / l;
#pragma unroll
    for (int i = 0; i < VEC; ++i) o.v[i] = acc[i] * inv_l;
    *reinterpret_cast<Vec*>(out + (static_cast<size_t>(b) * q_heads + h) * HEAD_DIM + lane * VEC) = o;
}
