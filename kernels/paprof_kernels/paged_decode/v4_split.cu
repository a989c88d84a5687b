// v4 split-KV (flash-decoding): v2's one-warp kernel over a slice of each sequence's pages
// (grid z = split). Each split writes its running max m, its sum l and its unnormalised
// accumulator O; a split that got no tokens writes m = -inf, l = 0. The merge kernel then
// combines the splits of each (sequence, head): m = max m_s, w_s = exp(m_s - m),
// out = sum w_s O_s / sum w_s l_s, skipping empty splits.
#include "common.cuh"

#define VEC (HEAD_DIM / 32)

extern "C" __global__ void __launch_bounds__(32) paged_decode_v4_partial(
    float* __restrict__ part_m, float* __restrict__ part_l, float* __restrict__ part_o,
    const float* __restrict__ query, const float* __restrict__ key_cache,
    const float* __restrict__ value_cache, const int* __restrict__ block_tables,
    const int* __restrict__ context_lens, float scale, int q_heads, int kv_heads, int page_size,
    int pages_per_seq) {
    typedef FloatVec<VEC> Vec;
    const int h = blockIdx.x;
    const int b = blockIdx.y;
    const int split = blockIdx.z, num_splits = gridDim.z;
    const int lane = threadIdx.x;
    const int kvh = h / (q_heads / kv_heads);
    const int* table = block_tables + static_cast<size_t>(b) * pages_per_seq;
    const int ctx = context_lens[b];
    const int num_pages = (ctx + page_size - 1) / page_size;
    const int pages_per_split = (num_pages + num_splits - 1) / num_splits;
    const int t_begin = split * pages_per_split * page_size;
    const int t_end = min(ctx, (split + 1) * pages_per_split * page_size);
    const Vec q = *reinterpret_cast<const Vec*>(query + (static_cast<size_t>(b) * q_heads + h) * HEAD_DIM +
                                                lane * VEC);

    float m = NEG_INF, l = 0.f;
    float acc[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[i] = 0.f;
    for (int t = t_begin; t < t_end; ++t) {
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
    const size_t row = (static_cast<size_t>(b) * q_heads + h) * num_splits + split;
    if (lane == 0) {
        part_m[row] = m;  // -inf and 0 for an empty split
        part_l[row] = l;
    }
    Vec o;
#pragma unroll
    for (int i = 0; i < VEC; ++i) o.v[i] = acc[i];
    *reinterpret_cast<Vec*>(part_o + row * HEAD_DIM + lane * VEC) = o;
}

extern "C" __global__ void __launch_bounds__(32) paged_decode_v4_merge(
    float* __restrict__ out, const float* __restrict__ part_m, const float* __restrict__ part_l,
    const float* __restrict__ part_o, int q_heads, int num_splits) {
    typedef FloatVec<VEC> Vec;
    const int h = blockIdx.x;
    const int b = blockIdx.y;
    const int lane = threadIdx.x;
    const size_t row0 = (static_cast<size_t>(b) * q_heads + h) * num_splits;
    float m = NEG_INF;
    for (int s = 0; s < num_splits; ++s)
        if (part_l[row0 + s] > 0.f) m = fmaxf(m, part_m[row0 + s]);
    float l = 0.f;
    float acc[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[i] = 0.f;
    for (int s = 0; s < num_splits; ++s) {
        const float ls = part_l[row0 + s];
        if (!(ls > 0.f)) continue;  // an empty split carries no weight (and would give NaN)
        const float w = expf(part_m[row0 + s] - m);
        l += w * ls;
        const Vec o = *reinterpret_cast<const Vec*>(part_o + (row0 + s) * HEAD_DIM + lane * VEC);
#pragma unroll
        for (int i = 0; i < VEC; ++i) acc[i] += w * o.v[i];
    }
    Vec o;
    const float inv_l = 1.f / l;
#pragma unroll
    for (int i = 0; i < VEC; ++i) o.v[i] = acc[i] * inv_l;
    *reinterpret_cast<Vec*>(out + (static_cast<size_t>(b) * q_heads + h) * HEAD_DIM + lane * VEC) = o;
}
