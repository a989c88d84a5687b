// What v5_fast.cu (CUDA cores) and v5_mma.cu (tensor cores) share: their parameters, the
// pages a CTA attends over, the block-table staging, and the end: every warp has left its
// (m, l, acc) for each head of the group in shared memory; combine the warps and write the
// output (SPLIT 0), or the split's partial (m, l, unnormalised O) and then, in the last CTA
// of the (sequence, KV head) to finish, the merge of every split (SPLIT 1: no second
// kernel). m is a base-2 max. Include it after SPLIT is defined.
#pragma once

#if SPLIT
#define FAST_SPLIT_PARAMS                                                                    \
    float *__restrict__ part_m, float *__restrict__ part_l, float *__restrict__ part_o,     \
        int *__restrict__ counters,
#else
#define FAST_SPLIT_PARAMS
#endif
// The parameters of every v5/v6 kernel; the launcher passes them in this order.
#define FAST_KERNEL_PARAMS                                                                   \
    FAST_SPLIT_PARAMS float *__restrict__ out, const float *__restrict__ query,                \
        const unsigned char *__restrict__ key_cache, const unsigned char *__restrict__ value_cache, \
        const int *__restrict__ block_tables, const int *__restrict__ context_lens, float scale, \
        int q_heads, int kv_heads, int pages_per_seq

// The pages [p_begin, p_end) of the sequence this CTA attends over (its split's slice with
// SPLIT_, grid z = split), and the end of its tokens.
struct PageRange {
    int p_begin, p_end, t_end;
};

template <bool SPLIT_, int PAGE>
__device__ __forceinline__ PageRange page_range(int ctx) {
    const int num_pages = (ctx + PAGE - 1) / PAGE;
    int p_begin = 0, p_end = num_pages;
    if (SPLIT_) {
        const int per_split = (num_pages + gridDim.z - 1) / gridDim.z;
        p_begin = min(num_pages, static_cast<int>(blockIdx.z) * per_split);
        p_end = min(num_pages, p_begin + per_split);
    }
    return {p_begin, p_end, min(ctx, p_end * PAGE)};
}

// Block-table entries [chunk, chunk + n) into shared memory, for the whole CTA.
template <int THREADS>
__device__ __forceinline__ void stage_pages(int* s_pages, const int* table, int chunk, int n) {
    __syncthreads();  // every thread is done with the previous chunk
    for (int i = threadIdx.x; i < n; i += THREADS) s_pages[i] = table[chunk + i];
    __syncthreads();
}

__device__ __forceinline__ float load_l2(const float* p) {  // ld.global.cg: skip L1
    float v;
    asm("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

// Split-KV merge of one (sequence, KV head): m = max m_s over non-empty splits,
// w_s = exp2(m_s - m) / sum_s exp2(m_s - m) l_s, out = sum_s w_s O_s. Empty splits
// (l_s = 0) get w_s = 0. The weights go through shared memory (`scratch`, GROUP x
// num_splits floats), so the loop over O_s has independent loads. The partials were
// written by other SMs: read them from L2 (ld.global.cg), never from a stale L1.
template <int WARPS_, int GROUP_, int HEAD_DIM_>
__device__ __forceinline__ void merge_splits(float* out, const float* part_m, const float* part_l,
                                             const float* part_o, int b, int kvh, int q_heads, int num_splits,
                                             float* scratch) {
    const size_t head0 = static_cast<size_t>(b) * q_heads + kvh * GROUP_;
    for (int i = threadIdx.x; i < GROUP_ * num_splits; i += WARPS_ * 32) {
        const float l = load_l2(part_l + head0 * num_splits + i);
        scratch[i] = l > 0.f ? load_l2(part_m + head0 * num_splits + i) : NEG_INF;
    }
    __syncthreads();
    if (threadIdx.x < GROUP_) {
        float* w = scratch + threadIdx.x * num_splits;
        float mx = NEG_INF;
        for (int s = 0; s < num_splits; ++s) mx = fmaxf(mx, w[s]);
        float lsum = 0.f;
        for (int s = 0; s < num_splits; ++s) {
            w[s] = exp2f(w[s] - mx);  // 0 for empty splits
            lsum += w[s] * load_l2(part_l + (head0 + threadIdx.x) * num_splits + s);
        }
        const float inv = 1.f / lsum;
        for (int s = 0; s < num_splits; ++s) w[s] *= inv;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < GROUP_ * HEAD_DIM_; idx += WARPS_ * 32) {
        const int g = idx / HEAD_DIM_, d = idx % HEAD_DIM_;
        const float* w = scratch + g * num_splits;
        const float* o_s = part_o + (head0 + g) * num_splits * HEAD_DIM_ + d;
        float o0 = 0.f, o1 = 0.f, o2 = 0.f, o3 = 0.f;  // four chains: loads in flight together
        int s = 0;
        for (; s + 4 <= num_splits; s += 4) {
            const float a = load_l2(o_s + static_cast<size_t>(s) * HEAD_DIM_);
            const float c = load_l2(o_s + static_cast<size_t>(s + 1) * HEAD_DIM_);
            const float e = load_l2(o_s + static_cast<size_t>(s + 2) * HEAD_DIM_);
            const float f = load_l2(o_s + static_cast<size_t>(s + 3) * HEAD_DIM_);
            o0 += w[s] * a;
            o1 += w[s + 1] * c;
            o2 += w[s + 2] * e;
            o3 += w[s + 3] * f;
        }
        for (; s < num_splits; ++s) o0 += w[s] * load_l2(o_s + static_cast<size_t>(s) * HEAD_DIM_);
        const float o = (o0 + o1) + (o2 + o3);
        out[(head0 + g) * HEAD_DIM_ + d] = o;
    }
}

// SPLIT_: out_or_o is the partial O; `out` and the per-(sequence, KV head) arrival
// counters (zero before the launch, zero again after it) serve the fused merge.
template <int WARPS_, int GROUP_, int HEAD_DIM_, bool SPLIT_>
__device__ __forceinline__ void merge_warps_and_store(const float* s_m, const float* s_l, const float* s_acc,
                                                      float* out_or_o, float* part_m, float* part_l, int b,
                                                      int kvh, int q_heads, int split, int num_splits,
                                                      float* out = nullptr, int* counters = nullptr) {
    for (int idx = threadIdx.x; idx < GROUP_ * HEAD_DIM_; idx += WARPS_ * 32) {
        const int g = idx / HEAD_DIM_, d = idx % HEAD_DIM_;
        float mx = NEG_INF;
#pragma unroll
        for (int w = 0; w < WARPS_; ++w)
            if (s_l[w * GROUP_ + g] > 0.f) mx = fmaxf(mx, s_m[w * GROUP_ + g]);
        float lsum = 0.f, o = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS_; ++w) {
            const float lw = s_l[w * GROUP_ + g];
            if (!(lw > 0.f)) continue;  // a warp that saw no token carries no weight
            const float wt = exp2f(s_m[w * GROUP_ + g] - mx);
            lsum += lw * wt;
            o += s_acc[(w * GROUP_ + g) * HEAD_DIM_ + d] * wt;
        }
        const int h = kvh * GROUP_ + g;
        if (SPLIT_) {
            const size_t row = (static_cast<size_t>(b) * q_heads + h) * num_splits + split;
            if (d == 0) {
                part_m[row] = mx;  // -inf with l = 0 for an empty split
                part_l[row] = lsum;
            }
            out_or_o[row * HEAD_DIM_ + d] = o;
        } else {
            out_or_o[(static_cast<size_t>(b) * q_heads + h) * HEAD_DIM_ + d] = o / lsum;
        }
    }
    if (SPLIT_) {
        __shared__ int s_last;
        __threadfence();  // this CTA's partials are visible device-wide before it is counted
        __syncthreads();
        if (threadIdx.x == 0) {
            const int arrived = atomicAdd(counters + b * gridDim.x + kvh, 1);
            s_last = arrived == num_splits - 1;
        }
        __syncthreads();
        if (s_last) {
            __threadfence();
            // the warps' scratch (s_m onwards) is free again: reuse it for the weights
            merge_splits<WARPS_, GROUP_, HEAD_DIM_>(out, part_m, part_l, out_or_o, b, kvh, q_heads, num_splits,
                                                    const_cast<float*>(s_m));
            if (threadIdx.x == 0) counters[b * gridDim.x + kvh] = 0;  // ready for the next launch
        }
    }
}
