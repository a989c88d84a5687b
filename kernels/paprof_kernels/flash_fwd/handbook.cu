// flash_fwd handbook: the sources' teaching kernel of flash-attention forward, fp32 on
// CUDA cores.
//
// A CTA owns BR = 64 consecutive queries of one (batch, head), one thread a query row.
// It walks the keys BC = 32 at a time: the CTA copies the K and V rows of the step into
// shared memory, each thread scores its query against the 32 keys (its scores in
// registers), updates its online softmax (running max m, running sum l, the accumulator
// rescaled by 2^(m_old - m_new)) and adds p_j V_j for the 32 keys; its probabilities go
// through its own column of shared memory so that the P V loop need not be unrolled.
// Causal (bottom-right aligned, query i sees keys j <= i + seq_k - seq_q): key steps
// wholly above the diagonal of the CTA's last query are never loaded, the steps that
// cross it are masked per element; the CTAs of the longest rows are launched first.
//
// grid (ceil(seq_q / 64), batch * q_heads), 64 threads; dynamic shared memory
// (64 x (HEAD_DIM + 4) + 2 x 32 x HEAD_DIM + 32 x 64) floats: 74 KiB at head_dim 128.
#include "flash_common.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif

#define BR 64                  // queries a CTA, one thread each
#define BC 32                  // keys a step
#define QPITCH (HEAD_DIM + 4)  // floats a row of sQ: 16-byte aligned rows, each in other banks
#define V4 (HEAD_DIM / 4)      // float4s a row

static_assert(HEAD_DIM % 4 == 0, "rows are moved as float4");

extern "C" __global__ void __launch_bounds__(BR)
flash_fwd_handbook(const float* __restrict__ q, const float* __restrict__ k,
                   const float* __restrict__ v, float* __restrict__ o,
                   int seq_q, int seq_k, int q_heads, int kv_heads, float scale_log2, int causal) {
    FLASH_SHARED_BYTES(smem);
    float* sQ = reinterpret_cast<float*>(smem);  // [BR][QPITCH]
    float* sK = sQ + BR * QPITCH;                // [BC][HEAD_DIM]
    float* sV = sK + BC * HEAD_DIM;              // [BC][HEAD_DIM]
    float* sP = sV + BC * HEAD_DIM;              // [BC][BR]: column tid is thread tid's

    const int tid = threadIdx.x;
    const FlashCta cta = flash_cta(q_heads, kv_heads, causal);
    const int bh = cta.bh, kvh = cta.kvh, tile = cta.tile;
    const int q0 = tile * BR;
    const int row = q0 + tid;
    const int offset = seq_k - seq_q;  // query i sees keys j <= i + offset when causal
    const float* qh = q + (size_t)bh * seq_q * HEAD_DIM;
    const float* kh = k + (size_t)kvh * seq_k * HEAD_DIM;
    const float* vh = v + (size_t)kvh * seq_k * HEAD_DIM;

    float4 zero;
    zero.x = zero.y = zero.z = zero.w = 0.f;
    for (int i = tid; i < BR * V4; i += BR) {  // the Q tile; rows past seq_q as zeros
        const int r = i / V4, c = (i % V4) * 4;
        float4 x = zero;
        if (q0 + r < seq_q) x = *reinterpret_cast<const float4*>(qh + (size_t)(q0 + r) * HEAD_DIM + c);
        *reinterpret_cast<float4*>(sQ + r * QPITCH + c) = x;
    }

    // keys past key_end are masked for every query of the tile: never loaded
    const int key_end = causal ? min(seq_k, q0 + BR + offset) : seq_k;
    float m = neg_inf(), l = 0.f;
    float acc[HEAD_DIM];
#pragma unroll
    for (int d = 0; d < HEAD_DIM; ++d) acc[d] = 0.f;

    for (int k0 = 0; k0 < key_end; k0 += BC) {
        block_sync();  // every thread is done with the previous step's K, V (and Q is stored)
        for (int i = tid; i < BC * V4; i += BR) {
            const int r = i / V4, c = (i % V4) * 4;
            float4 kx = zero, vx = zero;
            if (k0 + r < seq_k) {
                kx = *reinterpret_cast<const float4*>(kh + (size_t)(k0 + r) * HEAD_DIM + c);
                vx = *reinterpret_cast<const float4*>(vh + (size_t)(k0 + r) * HEAD_DIM + c);
            }
            *reinterpret_cast<float4*>(sK + r * HEAD_DIM + c) = kx;
            *reinterpret_cast<float4*>(sV + r * HEAD_DIM + c) = vx;
        }
        block_sync();

        // s_j = q . k_j for the BC keys of the step (every thread reads the same k_j: broadcast)
        float s[BC];
#pragma unroll
        for (int j = 0; j < BC; ++j) s[j] = 0.f;
        for (int c = 0; c < HEAD_DIM; c += 4) {
            const float4 qx = *reinterpret_cast<const float4*>(sQ + tid * QPITCH + c);
#pragma unroll
            for (int j = 0; j < BC; ++j) {
                const float4 kx = *reinterpret_cast<const float4*>(sK + j * HEAD_DIM + c);
                s[j] += qx.x * kx.x + qx.y * kx.y + qx.z * kx.z + qx.w * kx.w;
            }
        }

        // online softmax in base 2: scores scaled by log2(e) / sqrt(head_dim)
        float mx = m;
#pragma unroll
        for (int j = 0; j < BC; ++j) {
            const int key = k0 + j;
            const bool masked = key >= seq_k || (causal && key > row + offset);
            s[j] = masked ? neg_inf() : s[j] * scale_log2;
            mx = fmaxf(mx, s[j]);
        }
        const float base = mx == neg_inf() ? 0.f : mx;  // a row with no key yet: no NaN
        const float corr = fast_exp2(m - base);           // 0 on the first step (m = -inf)
        l *= corr;
#pragma unroll
        for (int d = 0; d < HEAD_DIM; ++d) acc[d] *= corr;
#pragma unroll
        for (int j = 0; j < BC; ++j) {
            const float p = fast_exp2(s[j] - base);
            l += p;
            sP[j * BR + tid] = p;
        }
        m = mx;

        // acc += sum_j p_j v_j (v_j broadcast from shared memory)
        for (int j = 0; j < BC; ++j) {
            const float p = sP[j * BR + tid];
#pragma unroll
            for (int c = 0; c < HEAD_DIM; c += 4) {
                const float4 vx = *reinterpret_cast<const float4*>(sV + j * HEAD_DIM + c);
                acc[c] += p * vx.x;
                acc[c + 1] += p * vx.y;
                acc[c + 2] += p * vx.z;
                acc[c + 3] += p * vx.w;
            }
        }
    }

    if (row < seq_q) {
        const float inv = l > 0.f ? 1.f / l : 0.f;
        float* oh = o + (size_t)bh * seq_q * HEAD_DIM + (size_t)row * HEAD_DIM;
#pragma unroll
        for (int c = 0; c < HEAD_DIM; c += 4) {
            float4 y;
            y.x = acc[c] * inv;
            y.y = acc[c + 1] * inv;
            y.z = acc[c + 2] * inv;
            y.w = acc[c + 3] * inv;
            *reinterpret_cast<float4*>(oh + c) = y;
        }
    }
}
