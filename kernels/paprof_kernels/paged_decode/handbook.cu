// handbook: the teaching kernel. One CTA of 4 warps per (q_head, sequence).
// Phase 1: warps take tokens round-robin; the 32 lanes split the dot product, a shuffle
//          sum gives the score, lane 0 stores it in shared memory (so context is capped
//          by shared memory).
// Phase 2: block-wide max, then exp(s - max) in place and the block-wide sum.
// Phase 3: thread d sums p_t * V_t[d] over every token (strided over head_dim).
// GQA is only an index here: each KV head is re-read by every query head of its group.
#include "common.cuh"

#define HB_THREADS 128
#define HB_WARPS (HB_THREADS / 32)

__device__ float block_reduce(float v, float* scratch, bool is_max) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    float r = scratch[0];
    for (int w = 1; w < HB_WARPS; ++w) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
    __syncthreads();  // scratch is reused by the next reduction
    return r;
}

extern "C" __global__ void __launch_bounds__(HB_THREADS) paged_decode_handbook(
    float* __restrict__ out, const float* __restrict__ query, const float* __restrict__ key_cache,
    const float* __restrict__ value_cache, const int* __restrict__ block_tables,
    const int* __restrict__ context_lens, float scale, int q_heads, int kv_heads, int head_dim,
    int page_size, int pages_per_seq) {
    extern __shared__ float smem[];
    float* scratch = smem;             // HB_WARPS floats (64 reserved)
    float* scores = smem + 64;         // [ctx]
    const int h = blockIdx.x;
    const int b = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kvh = h / (q_heads / kv_heads);
    const float* q = query + (static_cast<size_t>(b) * q_heads + h) * head_dim;
    const int* table = block_tables + static_cast<size_t>(b) * pages_per_seq;
    const int ctx = context_lens[b];

    // Phase 1: scores.
    for (int t = warp; t < ctx; t += HB_WARPS) {
        const size_t base = kv_offset(table[t / page_size], t % page_size, kvh, page_size, kv_heads, head_dim);
        float partial = 0.f;
        for (int i = lane; i < head_dim; i += 32) partial += q[i] * key_cache[base + i];
        partial = warp_sum(partial);
        if (lane == 0) scores[t] = partial * scale;
    }
    __syncthreads();

    // Phase 2: softmax weights.
    float local_max = NEG_INF;
    for (int t = threadIdx.x; t < ctx; t += HB_THREADS) local_max = fmaxf(local_max, scores[t]);
    const float max_score = block_reduce(local_max, scratch, true);
    float local_sum = 0.f;
    for (int t = threadIdx.x; t < ctx; t += HB_THREADS) {
        const float p = expf(scores[t] - max_score);
        scores[t] = p;
        local_sum += p;
    }
    const float inv_sum = 1.f / block_reduce(local_sum, scratch, false);  // also orders the writes

    // Phase 3: weighted sum of values, thread d owns dimension d (and d + 128, ...).
    for (int d = threadIdx.x; d < head_dim; d += HB_THREADS) {
        float acc = 0.f;
        for (int t = 0; t < ctx; ++t) {
            const size_t base = kv_offset(table[t / page_size], t % page_size, kvh, page_size, kv_heads, head_dim);
            acc += scores[t] * value_cache[base + d];
        }
        out[(static_cast<size_t>(b) * q_heads + h) * head_dim + d] = acc * inv_sum;
    }
}
