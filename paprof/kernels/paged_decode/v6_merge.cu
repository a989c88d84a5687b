// v6 merge: combine the split partials of v5's split mode. One warp per (q_head, sequence);
// m is a base-2 max (the partial kernel works in exp2), so the weights are exp2(m_s - m).
// Empty splits (l_s = 0, m_s = -inf) are skipped.
#include "common.cuh"

extern "C" __global__ void __launch_bounds__(32) paged_decode_v6_merge(
    float* __restrict__ out, const float* __restrict__ part_m, const float* __restrict__ part_l,
    const float* __restrict__ part_o, int q_heads, int num_splits) {
    const int h = blockIdx.x;
    const int b = blockIdx.y;
    const int lane = threadIdx.x;
    const size_t row0 = (static_cast<size_t>(b) * q_heads + h) * num_splits;
    float m = NEG_INF;
    for (int s = lane; s < num_splits; s += 32)
        if (part_l[row0 + s] > 0.f) m = fmaxf(m, part_m[row0 + s]);
    m = warp_max(m);
    float l = 0.f;
    float acc[HEAD_DIM / 32];
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 32; ++i) acc[i] = 0.f;
    for (int s = 0; s < num_splits; ++s) {
        const float ls = part_l[row0 + s];
        if (!(ls > 0.f)) continue;
        const float w = exp2f(part_m[row0 + s] - m);
        l += w * ls;
        const float* o = part_o + (row0 + s) * HEAD_DIM;
#pragma unroll
        for (int i = 0; i < HEAD_DIM / 32; ++i) acc[i] += w * o[lane + 32 * i];
    }
    const float inv_l = 1.f / l;
#pragma unroll
    for (int i = 0; i < HEAD_DIM / 32; ++i)
        out[(static_cast<size_t>(b) * q_heads + h) * HEAD_DIM + lane + 32 * i] = acc[i] * inv_l;
}
