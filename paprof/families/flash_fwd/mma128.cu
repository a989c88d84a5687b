// flash_fwd mma128: flash-attention forward on the tensor cores with mma.sync (fp16 /
// bf16 inputs, fp32 accumulation), a 128-query tile shared by 8 warps.
//
// What changes against mma.cu (64 queries, 4 warps, 2 CTAs a SM):
//  - BR = 128 queries a CTA, warp w owns rows 16w..16w+15 (Q fragments, scores, output
//    accumulator and online-softmax state in registers, as in mma.cu). A K/V tile read
//    from L2 into shared memory now feeds 128 queries: half the L2->SM bytes a FLOP.
//  - K/V in a ring of STAGES buffers (3: a tile is requested two steps before it is
//    used), ONE cp.async group and ONE barrier a step: at step j the barrier says that
//    K of step j+1 and V of step j have landed and that every warp is done with step
//    j-1, whose K and V buffers are then refilled (K of j+STAGES, V of j+STAGES-1).
//  - Software pipelining inside a warp: S of step j+1 (Q K^T, 64 mma at d128) is issued
//    in the same basic block as step j's softmax and P V, so ptxas can interleave the
//    tensor-core work of one with the exp2/FMNMX/FMUL of the other (two score sets live:
//    32 more registers). The last step has no next S and is peeled off the loop.
//  - Shared rows padded by 8 elements (16 bytes) instead of XOR-swizzled: a row starts 4
//    banks after the one above it, so the 8 row addresses of an ldmatrix (and the 8 rows
//    of a cp.async wavefront) hit 8 different 16-byte bank groups, and every ldmatrix
//    address is a per-thread base plus a compile-time offset (no XOR per fragment). Cost:
//    6 % more shared memory.
//  - Masking only where it can change a score: the steps from the first one crossing the
//    diagonal of the tile's first query (causal) or holding keys past seq_k; one compare
//    an element against a per-row limit computed once. Elsewhere the loop has no mask.
//  - The scale folded: the running max is taken on raw scores and scaled once, and each
//    probability is exp2(fma(s, scale*log2e, -max)): one FFMA and one MUFU a score.
// Causal (bottom-right aligned): key tiles wholly above the diagonal of the tile's last
// query are never loaded, the CTAs with the longest rows are launched first. O is
// normalised, rounded to 16 bits and written through the warp's own rows of sQ.
//
// grid (ceil(seq_q / 128), batch * q_heads), 256 threads, dynamic shared memory
// (128 + 2 x STAGES x 64) rows x (HEAD_DIM + 8) x 2 bytes: 136 KiB at head_dim 128, 72 KiB
// at 64 (STAGES 3).
#include "flash_common.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef STAGES
#define STAGES 3  // K/V buffers in the ring
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1  // resident CTAs a SM the registers must allow
#endif
#ifndef PIPELINE
#define PIPELINE 1  // 1: the next step's Q K^T issued beside this step's softmax (two S sets)
#endif

#define BR 128                   // queries a CTA
#define BC 64                    // keys a step
#define WARPS 8                  // 16 query rows each
#define THREADS (WARPS * 32)
#define LD (HEAD_DIM + 8)        // shared row stride in elements (padded by 16 bytes)
#define CHUNKS (HEAD_DIM / 8)    // 16-byte chunks a row
#define KSTEPS (HEAD_DIM / 16)   // k16 steps of Q K^T
#define NTILES (BC / 8)          // n8 tiles of S
#define PSTEPS (BC / 16)         // k16 steps of P V
#define OTILES (HEAD_DIM / 8)    // n8 tiles of O
#define TILE_ELEMS (BC * LD)     // one K or V buffer

static_assert(DTYPE == 1 || DTYPE == 2, "mma128 takes fp16 (1) or bf16 (2)");
static_assert(HEAD_DIM % 16 == 0 && OTILES % 2 == 0, "whole k16 steps and pairs of n8 tiles");
static_assert(THREADS % CHUNKS == 0, "a thread copies the same chunk column of every row it copies");
static_assert(STAGES >= 2, "the ring needs a buffer being read and one being filled");

typedef unsigned short elem;

// rows [row0, row0 + ROWS) of a [n][HEAD_DIM] matrix into a padded tile, zeros past row n.
// A thread copies chunk column tid % CHUNKS of rows tid / CHUNKS + i * THREADS / CHUNKS.
template <int ROWS>
FLASH_DEVICE void load_rows(elem* tile, const elem* src, int row0, int n, int tid) {
    const int c = (tid % CHUNKS) * 8, r0 = tid / CHUNKS;
#pragma unroll
    for (int i = 0; i < ROWS * CHUNKS / THREADS; ++i) {
        const int r = r0 + i * (THREADS / CHUNKS);
        const bool ok = row0 + r < n;
        const elem* from = ok ? src + (size_t)(row0 + r) * HEAD_DIM + c : src;
        cp_async16(tile + r * LD + c, from, ok ? 16 : 0);
    }
}

// S = Q K^T for one key tile: s[n] holds keys 8n..8n+7 of the warp's 16 rows.
// kb: this lane's ldmatrix row address inside the step's K buffer (see the kernel).
FLASH_DEVICE void scores(float (&s)[NTILES][4], const unsigned (&qf)[KSTEPS][4], const elem* kb) {
#pragma unroll
    for (int n = 0; n < NTILES; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
#pragma unroll
        for (int n = 0; n < NTILES; n += 2) {  // two n8 tiles of keys a ldmatrix
            unsigned b[4];
            ldsm_x4(b, kb + n * 8 * LD + kk * 16);
            mma_16816_x2(s[n], s[n + 1], qf[kk], b);
        }
    }
}

// Scores of keys past this row's limit (lim: the last visible key minus the step's first
// key minus 2t, so that the fragment's own key offset 8n + (e & 1) is compared alone).
FLASH_DEVICE void mask_scores(float (&s)[NTILES][4], int lim0, int lim1) {
#pragma unroll
    for (int n = 0; n < NTILES; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e)
            if (n * 8 + (e & 1) > (e < 2 ? lim0 : lim1)) s[n][e] = neg_inf();
    }
}

// Online softmax of one step (base 2) and O += P V. m: running max of the scaled scores
// of rows g and g + 8; l: this lane's share of their running sums; vb: this lane's
// ldmatrix.trans row address inside the step's V buffer.
FLASH_DEVICE void softmax_pv(float (&acc)[OTILES][4], float (&m)[2], float (&l)[2],
                             const float (&s)[NTILES][4], float scale_log2, const elem* vb) {
    float mx[2] = {neg_inf(), neg_inf()};  // raw max: the scale is positive, it commutes
#pragma unroll
    for (int n = 0; n < NTILES; ++n) {
        mx[0] = fmaxf(mx[0], fmaxf(s[n][0], s[n][1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[n][2], s[n][3]));
    }
    float base[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], shfl_xor(mx[h], 1));
        mx[h] = fmaxf(mx[h], shfl_xor(mx[h], 2));
        const float mnew = fmaxf(m[h], mx[h] * scale_log2);
        base[h] = mnew == neg_inf() ? 0.f : mnew;  // a row with no key yet: no NaN
        const float c = fast_exp2(m[h] - base[h]);  // 0 on a row's first keys
        m[h] = mnew;
        l[h] *= c;
#pragma unroll
        for (int n = 0; n < OTILES; ++n) {
            acc[n][2 * h] *= c;
            acc[n][2 * h + 1] *= c;
        }
    }
    unsigned pa[PSTEPS][4];  // P as A fragments: k16 step kk is S tiles 2kk and 2kk+1
#pragma unroll
    for (int n = 0; n < NTILES; ++n) {
        const float p0 = fast_exp2(fmaf(s[n][0], scale_log2, -base[0]));
        const float p1 = fast_exp2(fmaf(s[n][1], scale_log2, -base[0]));
        const float p2 = fast_exp2(fmaf(s[n][2], scale_log2, -base[1]));
        const float p3 = fast_exp2(fmaf(s[n][3], scale_log2, -base[1]));
        l[0] += p0 + p1;
        l[1] += p2 + p3;
        pa[n / 2][(n & 1) * 2] = pack2(p0, p1);      // row g, keys 8n + 2t, +1
        pa[n / 2][(n & 1) * 2 + 1] = pack2(p2, p3);  // row g + 8
    }
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk) {
#pragma unroll
        for (int n = 0; n < OTILES; n += 2) {  // two n8 tiles of dims a ldmatrix
            unsigned b[4];
            ldsm_x4_trans(b, vb + kk * 16 * LD + n * 8);
            mma_16816_x2(acc[n], acc[n + 1], pa[kk], b);
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
flash_fwd_mma128(const elem* __restrict__ q, const elem* __restrict__ k,
                 const elem* __restrict__ v, elem* __restrict__ o,
                 int seq_q, int seq_k, int q_heads, int kv_heads, float scale_log2, int causal) {
    FLASH_SHARED_BYTES(smem);
    elem* sQ = reinterpret_cast<elem*>(smem);  // [BR][LD], later O's staging
    elem* sK = sQ + BR * LD;                   // [STAGES][BC][LD]
    elem* sV = sK + STAGES * TILE_ELEMS;       // [STAGES][BC][LD]

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;  // a fragment's row group and column pair
    const FlashCta cta = flash_cta(q_heads, kv_heads, causal);
    const HeadRows<elem> rows = head_rows<HEAD_DIM>(q, k, v, o, cta, seq_q, seq_k);
    const elem *qh = rows.q, *kh = rows.k, *vh = rows.v;
    const int q0 = cta.tile * BR;
    const int offset = seq_k - seq_q;  // query i sees keys j <= i + offset when causal

    const KeySteps ks = key_steps(q0, BR, BC, seq_k, offset, causal);
    const int steps = ks.steps, first_masked = ks.first_masked;  // steps >= 1: all see key 0

    // group G(-1): Q and K of step 0; G(i), i >= 0: K of step i+1 and V of step i
    load_rows<BR>(sQ, qh, q0, seq_q, tid);
    load_rows<BC>(sK, kh, 0, seq_k, tid);
    cp_async_commit();
#pragma unroll
    for (int i = 0; i + 1 < STAGES; ++i) {
        if (i + 1 < steps) load_rows<BC>(sK + (i + 1) * TILE_ELEMS, kh, (i + 1) * BC, seq_k, tid);
        if (i < steps) load_rows<BC>(sV + i * TILE_ELEMS, vh, i * BC, seq_k, tid);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 1>();  // G(-1) is in
    block_sync();

    // per-lane ldmatrix row addresses: Q (A: rows 0-15, k 0-7 | 8-15), K (B, two n8 tiles:
    // keys 0-7 | 8-15, dims 0-7 | 8-15 of each), V (B transposed: keys 0-15, dims 0-7 | 8-15)
    const elem* qa = sQ + (warp * 16 + (lane & 15)) * LD + (lane >> 4) * 8;
    const int koff = ((lane & 7) + ((lane >> 4) << 3)) * LD + ((lane >> 3) & 1) * 8;
    const int voff = (lane & 15) * LD + (lane >> 4) * 8;

    unsigned qf[KSTEPS][4];  // this warp's 16 query rows as A fragments
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) ldsm_x4(qf[kk], qa + kk * 16);

    float acc[OTILES][4];
#pragma unroll
    for (int n = 0; n < OTILES; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    float m[2] = {neg_inf(), neg_inf()};  // running max of rows g and g + 8 (base 2, scaled)
    float l[2] = {0.f, 0.f};              // this lane's share of their running sums
    const int row0 = q0 + warp * 16 + g;
    // the last key rows g and g + 8 may see, less 2t (mask_scores compares 8n + (e & 1))
    const int last0 = min(seq_k - 1, causal ? row0 + offset : seq_k) - 2 * t;
    const int last1 = min(seq_k - 1, causal ? row0 + 8 + offset : seq_k) - 2 * t;

    float s[NTILES][4];
    scores(s, qf, sK + koff);  // step 0

    for (int step = 0;; ++step) {
        cp_async_wait<STAGES - 2>();  // G(step): K of step+1, V of step
        block_sync();                 // ... and every warp is done with step - 1
        const int slot = step % STAGES;
        // refill step-1's buffers: K of step+STAGES (K's buffer of step), V of step+STAGES-1
        if (step + STAGES < steps)
            load_rows<BC>(sK + slot * TILE_ELEMS, kh, (step + STAGES) * BC, seq_k, tid);
        if (step + STAGES - 1 < steps)
            load_rows<BC>(sV + ((step + STAGES - 1) % STAGES) * TILE_ELEMS, vh,
                          (step + STAGES - 1) * BC, seq_k, tid);
        cp_async_commit();

        if (step >= first_masked) mask_scores(s, last0 - step * BC, last1 - step * BC);
        const elem* vb = sV + slot * TILE_ELEMS + voff;
        if (step + 1 == steps) {
            softmax_pv(acc, m, l, s, scale_log2, vb);
            break;
        }
        const elem* kb = sK + ((step + 1) % STAGES) * TILE_ELEMS + koff;
#if PIPELINE
        // one basic block: the next step's Q K^T beside this step's softmax and P V
        float sn[NTILES][4];
        scores(sn, qf, kb);
        softmax_pv(acc, m, l, s, scale_log2, vb);
#pragma unroll
        for (int n = 0; n < NTILES; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[n][e] = sn[n][e];
#else
        softmax_pv(acc, m, l, s, scale_log2, vb);
        scores(s, qf, kb);
#endif
    }
    cp_async_wait<0>();  // the groups left are empty (no tile past the last step)

    // the 4 lanes of a row hold parts of its sum
    float inv[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l[h] += shfl_xor(l[h], 1);
        l[h] += shfl_xor(l[h], 2);
        inv[h] = l[h] > 0.f ? 1.f / l[h] : 0.f;
    }

    // O through this warp's own 16 rows of sQ (only this warp ever read them), then out
    // as 16-byte rows
    const int r0 = warp * 16 + g;
#pragma unroll
    for (int n = 0; n < OTILES; ++n) {
        const int c = n * 8 + 2 * t;
        *reinterpret_cast<unsigned*>(sQ + r0 * LD + c) = pack2(acc[n][0] * inv[0], acc[n][1] * inv[0]);
        *reinterpret_cast<unsigned*>(sQ + (r0 + 8) * LD + c) = pack2(acc[n][2] * inv[1], acc[n][3] * inv[1]);
    }
    __syncwarp();
    store_warp_rows<HEAD_DIM>(rows.o, sQ, [](int r, int c) { return r * LD + c; },
                              warp * 16, q0, seq_q, lane);
}
