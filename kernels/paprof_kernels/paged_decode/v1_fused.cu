// v1 fused: same CTA mapping as the baseline, but the dot product is shared: thread d
// multiplies dimension d, a warp-shuffle tree sums each warp, the warp partials meet in
// shared memory (barrier), every thread reads the total (the broadcast score), and a second
// barrier keeps the next token from overwriting the partials too early. Online softmax per
// dimension as before.
#include "common.cuh"

extern "C" __global__ void paged_decode_v1(
    float* __restrict__ out, const float* __restrict__ query, const float* __restrict__ key_cache,
    const float* __restrict__ value_cache, const int* __restrict__ block_tables,
    const int* __restrict__ context_lens, float scale, int q_heads, int kv_heads, int head_dim,
    int page_size, int pages_per_seq) {
    __shared__ float warp_partial[32];
    const int h = blockIdx.x;
    const int b = blockIdx.y;
    const int d = threadIdx.x;  // blockDim.x == head_dim, a multiple of 32
    const int lane = d & 31, warp = d >> 5, num_warps = blockDim.x >> 5;
    const int kvh = h / (q_heads / kv_heads);
    const int* table = block_tables + static_cast<size_t>(b) * pages_per_seq;
    const int ctx = context_lens[b];
    const float qd = query[(static_cast<size_t>(b) * q_heads + h) * head_dim + d];

    float m = NEG_INF, l = 0.f, acc = 0.f;
    for (int t = 0; t < ctx; ++t) {
        const int page = table[t / page_size];
        const size_t base = kv_offset(page, t % page_size, kvh, page_size, kv_heads, head_dim);
        const float partial = warp_sum(qd * key_cache[base + d]);
        if (lane == 0) warp_partial[warp] = partial;
        __syncthreads();
        float s = 0.f;
        for (int w = 0; w < num_warps; ++w) s += warp_partial[w];
        s *= scale;
        __syncthreads();
        const float m_new = fmaxf(m, s);
        const float correction = expf(m - m_new);
        const float p = expf(s - m_new);
        l = l * correction + p;
        acc = acc * correction + p * value_cache[base + d];
        m = m_new;
    }
    out[(static_cast<size_t>(b) * q_heads + h) * head_dim + d] = acc / l;
}
