// baseline: one CTA per (q_head, sequence), one thread per output dimension.
// Every thread recomputes the full Q.K dot product of every token (head_dim-fold redundant
// work), then keeps its own online softmax over the scores and accumulates its dimension.
#include "common.cuh"

extern "C" __global__ void paged_decode_baseline(
    float* __restrict__ out, const float* __restrict__ query, const float* __restrict__ key_cache,
    const float* __restrict__ value_cache, const int* __restrict__ block_tables,
    const int* __restrict__ context_lens, float scale, int q_heads, int kv_heads, int head_dim,
    int page_size, int pages_per_seq) {
    const int h = blockIdx.x;
    const int b = blockIdx.y;
    const int d = threadIdx.x;
    if (d >= head_dim) return;
    const int kvh = h / (q_heads / kv_heads);
    const float* q = query + (static_cast<size_t>(b) * q_heads + h) * head_dim;
    const int* table = block_tables + static_cast<size_t>(b) * pages_per_seq;
    const int ctx = context_lens[b];

    float m = NEG_INF, l = 0.f, acc = 0.f;
    for (int t = 0; t < ctx; ++t) {
        const int page = table[t / page_size];
        const size_t base = kv_offset(page, t % page_size, kvh, page_size, kv_heads, head_dim);
        float s = 0.f;
        for (int i = 0; i < head_dim; ++i) s += q[i] * key_cache[base + i];
        s *= scale;
        const float m_new = fmaxf(m, s);
        const float correction = expf(m - m_new);  // 0 on the first token (m = -inf)
        const float p = expf(s - m_new);
        l = l * correction + p;
        acc = acc * correction + p * value_cache[base + d];
        m = m_new;
    }
    out[(static_cast<size_t>(b) * q_heads + h) * head_dim + d] = acc / l;
}
