// The end of v5/v6's kernels: every warp has left its (m, l, acc) for each head of the
// group in shared memory; combine the warps and write the output (SPLIT 0) or the split's
// partial (m, l, unnormalised O) for the merge kernel (SPLIT 1). m is a base-2 max.
#pragma once

// s_m, s_l: [WARPS][GROUP]; s_acc: [WARPS][GROUP][HEAD_DIM]. Call after a barrier.
template <int WARPS_, int GROUP_, int HEAD_DIM_, bool SPLIT_>
__device__ __forceinline__ void merge_warps_and_store(const float* s_m, const float* s_l, const float* s_acc,
                                                      float* out_or_o, float* part_m, float* part_l, int b,
                                                      int kvh, int q_heads, int split, int num_splits) {
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
}
