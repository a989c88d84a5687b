// flash_fwd mma128: flash-attention forward on the tensor cores with mma.sync (fp16 /
// bf16 inputs, fp32 accumulation), a 128-query tile a CTA, in two warp layouts built
// (-D values; catalog.py picks per head_dim):
//  - 4 warps (WARP_M 2): a warp owns 32 query rows, two m16 tiles, so every K
//    fragment (ldmatrix) and V fragment (ldmatrix.trans) feeds two mma instead of one:
//    half the shared-memory reads a FLOP of the 8 x 16 layout. 128 threads, 2 CTAs a SM
//    (MIN_BLOCKS 2: at most 255 registers), so one CTA's barrier and softmax overlap the
//    other's matrix work. At d128 O alone is 128 registers a thread: Q is re-read from sQ
//    by ldmatrix every step (QREG 0; its k16 loop rolled by QK_UNROLL, else ptxas hoists
//    every fragment and spills), S is taken 32 keys at a time (KSUB 32: an online-softmax
//    step each half of the 64-key tile), 2 K/V buffers (102 KiB: two CTAs fit in 228).
//    At d64 Q stays in registers and the ring has 3 buffers (72 KiB).
//    The first round's 8 x 16 layout (WARP_M 1, 8 warps, the next tile's Q K^T issued
//    beside this tile's softmax: PIPELINE 1) lost (kernels/NOTES.md items 50-54); its code
//    stays in history at e6f8bcd.
//  - K/V in a ring of STAGES buffers of BC keys, ONE cp.async group and ONE barrier a
//    step: the barrier of step j says that K and V of step j have landed and that step
//    j-1's buffers are free; they are refilled with step j+STAGES-1.
//  - Shared rows padded by 8 elements (16 bytes) instead of XOR-swizzled: a row starts 4
//    banks after the one above it, so the 8 row addresses of an ldmatrix (and the 8 rows
//    of a cp.async wavefront) hit 8 different 16-byte bank groups, and every ldmatrix
//    address is a per-thread base plus a compile-time offset (no XOR per fragment).
//  - Masking only where it can change a score: the steps from the first one crossing the
//    diagonal of the tile's first query (causal) or holding keys past seq_k; one compare
//    an element against a per-row limit computed once. Elsewhere the loop has no mask.
//  - The scale folded: the running max is taken on raw scores and scaled once, and each
//    probability is exp2(fma(s, scale*log2e, -max)): one FFMA and one MUFU a score.
// Causal (bottom-right aligned): key tiles wholly above the diagonal of the tile's last
// query are never loaded, the CTAs with the longest rows are launched first. O is
// normalised, rounded to 16 bits and written through the warp's own rows of sQ.
//
// grid (ceil(seq_q / 128), batch * q_heads), WARPS x 32 threads, dynamic shared memory
// (128 + 2 x STAGES x BC) rows x (HEAD_DIM + 8) x 2 bytes.
#include "flash_common.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
// Compiled with no -D values this file is the shipped build at head_dim 128 in bf16
// (catalog.MMA128_4X32[128]).
#define WARP_M 2  // m16 tiles (16 query rows each) a warp
#define WARPS 4   // warps a CTA: 128 queries
#ifndef QREG
#define QREG 0  // 1: the warp's Q fragments held in registers; 0: re-read from sQ every step
#endif
#ifndef STAGES
#define STAGES 2  // K/V buffers in the ring
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2  // resident CTAs a SM the registers must allow
#endif
#ifndef BC
#define BC 64  // keys a step (a K/V buffer of the ring)
#endif
#ifndef QK_UNROLL
#define QK_UNROLL 2  // (QREG 0) k16 steps of Q K^T unrolled together
#endif
#ifndef KSUB
#define KSUB 32  // keys of S live at once: a step's tile may be taken in sub-tiles of KSUB
#endif

#define WROWS (16 * WARP_M)      // query rows a warp
#define BR (WARPS * WROWS)       // queries a CTA
#define THREADS (WARPS * 32)
#define LD (HEAD_DIM + 8)        // shared row stride in elements (padded by 16 bytes)
#define CHUNKS (HEAD_DIM / 8)    // 16-byte chunks a row
#define KSTEPS (HEAD_DIM / 16)   // k16 steps of Q K^T
#define NTILES (KSUB / 8)        // n8 tiles of S
#define PSTEPS (KSUB / 16)       // k16 steps of P V
#define OTILES (HEAD_DIM / 8)    // n8 tiles of O
#define TILE_ELEMS (BC * LD)     // one K or V buffer

static_assert(DTYPE == 1 || DTYPE == 2, "mma128 takes fp16 (1) or bf16 (2)");
static_assert(HEAD_DIM % 16 == 0 && OTILES % 2 == 0, "whole k16 steps and pairs of n8 tiles");
static_assert(THREADS % CHUNKS == 0, "a thread copies the same chunk column of every row it copies");
static_assert(STAGES >= 2, "the ring needs a buffer being read and one being filled");
static_assert(BR == 128, "the catalogue launches ceil(seq_q / 128) CTAs");
static_assert(BC % 16 == 0 && (BC * CHUNKS) % THREADS == 0, "whole k16 steps of P V; every thread copies whole rows' chunks");
static_assert(KSUB % 16 == 0 && BC % KSUB == 0, "whole sub-tiles");

typedef unsigned short elem;
constexpr int kQkUnroll = QK_UNROLL;  // (#pragma unroll takes no macro)

// rows [row0, row0 + ROWS) of a [n][HEAD_DIM] matrix into a padded tile, zeros past row n.
// A thread copies chunk column tid % CHUNKS of rows tid / CHUNKS + i * THREADS / CHUNKS.
// A whole tile (every tile but a partial last one) is one base address plus compile-time
// offsets: no 64-bit pointer a row for the registers to hold.
template <int ROWS>
FLASH_DEVICE void load_rows(elem* tile, const elem* src, int row0, int n, int tid) {
    static_assert((ROWS * CHUNKS) % THREADS == 0, "every thread copies as many rows");
    constexpr int STEP = THREADS / CHUNKS;  // rows between a thread's copies
    const int c = (tid % CHUNKS) * 8, r0 = tid / CHUNKS;
    elem* to = tile + r0 * LD + c;
    if (row0 + ROWS <= n) {
        const elem* from = src + (size_t)(row0 + r0) * HEAD_DIM + c;
#pragma unroll
        for (int i = 0; i < ROWS / STEP; ++i) cp_async16(to + i * STEP * LD, from + i * STEP * HEAD_DIM, 16);
        return;
    }
#pragma unroll
    for (int i = 0; i < ROWS / STEP; ++i) {
        const int r = r0 + i * STEP;
        const bool ok = row0 + r < n;
        const elem* from = ok ? src + (size_t)(row0 + r) * HEAD_DIM + c : src;
        cp_async16(to + i * STEP * LD, from, ok ? 16 : 0);
    }
}

// The warp's Q as A fragments: held in registers (QREG 1: KSTEPS x 4 registers an m16
// tile) or re-read from sQ by ldmatrix at every use (QREG 0: registers left for O and S).
struct QOperand {
#if QREG
    unsigned f[WARP_M][KSTEPS][4];
#else
    const elem* a;  // this lane's ldmatrix row address in the warp's first m16 tile of sQ
#endif
};

FLASH_DEVICE QOperand q_operand(const elem* qa) {
    QOperand q;
#if QREG
#pragma unroll
    for (int mi = 0; mi < WARP_M; ++mi)
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) ldsm_x4(q.f[mi][kk], qa + mi * 16 * LD + kk * 16);
#else
    q.a = qa;
#endif
    return q;
}

// A fragment of m16 tile mi, k16 step kk.
FLASH_DEVICE void q_frag(unsigned (&a)[4], const QOperand& q, int mi, int kk) {
#if QREG
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] = q.f[mi][kk][i];
#else
    ldsm_x4(a, q.a + mi * 16 * LD + kk * 16);
#endif
}

// S = Q K^T for one key tile: s[mi][n] holds keys 8n..8n+7 of the warp's m16 tile mi;
// each K fragment (one ldmatrix) feeds the WARP_M tiles.
// kb: this lane's ldmatrix row address inside the step's K buffer (see the kernel).
FLASH_DEVICE void scores(float (&s)[WARP_M][NTILES][4], const QOperand& q, const elem* kb) {
#pragma unroll
    for (int mi = 0; mi < WARP_M; ++mi)
#pragma unroll
        for (int n = 0; n < NTILES; ++n) s[mi][n][0] = s[mi][n][1] = s[mi][n][2] = s[mi][n][3] = 0.f;
#if QREG
#pragma unroll
#else
#pragma unroll kQkUnroll  // Q from sQ: a rolled loop keeps ptxas from hoisting every fragment
#endif
    for (int kk = 0; kk < KSTEPS; ++kk) {
        unsigned a[WARP_M][4];
#pragma unroll
        for (int mi = 0; mi < WARP_M; ++mi) q_frag(a[mi], q, mi, kk);
#pragma unroll
        for (int n = 0; n < NTILES; n += 2) {  // two n8 tiles of keys a ldmatrix
            unsigned b[4];
            ldsm_x4(b, kb + n * 8 * LD + kk * 16);
#pragma unroll
            for (int mi = 0; mi < WARP_M; ++mi) mma_16816_x2(s[mi][n], s[mi][n + 1], a[mi], b);
        }
    }
}

// Scores of keys past a row's limit (lim[mi][h]: the last key row g + 8h of m16 tile mi
// may see, minus the step's first key minus 2t, so that the fragment's own key offset
// 8n + (e & 1) is compared alone).
FLASH_DEVICE void mask_scores(float (&s)[WARP_M][NTILES][4], const int (&lim)[WARP_M][2], int key0) {
#pragma unroll
    for (int mi = 0; mi < WARP_M; ++mi)
#pragma unroll
        for (int n = 0; n < NTILES; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (n * 8 + (e & 1) > lim[mi][e >> 1] - key0) s[mi][n][e] = neg_inf();
}

// Online softmax of one step (base 2) and O += P V for the warp's WARP_M m16 tiles.
// m[mi]: running max of the scaled scores of rows g and g + 8 of tile mi; l[mi]: this
// lane's share of their running sums; vb: this lane's ldmatrix.trans row address inside
// the step's V buffer. Each V fragment (one ldmatrix.trans) feeds the WARP_M tiles. P is
// made one k16 step at a time, just before the P V that takes it: the scores die as they
// are consumed and the exp2 of step kk + 1 can overlap the mma of step kk.
FLASH_DEVICE void softmax_pv(float (&acc)[WARP_M][OTILES][4], float (&m)[WARP_M][2], float (&l)[WARP_M][2],
                             const float (&s)[WARP_M][NTILES][4], float scale_log2, const elem* vb) {
    float base[WARP_M][2];
#pragma unroll
    for (int mi = 0; mi < WARP_M; ++mi) {
        float mx[2] = {neg_inf(), neg_inf()};  // raw max: the scale is positive, it commutes
#pragma unroll
        for (int n = 0; n < NTILES; ++n) {
            mx[0] = fmaxf(mx[0], fmaxf(s[mi][n][0], s[mi][n][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[mi][n][2], s[mi][n][3]));
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            mx[h] = fmaxf(mx[h], shfl_xor(mx[h], 1));
            mx[h] = fmaxf(mx[h], shfl_xor(mx[h], 2));
            const float mnew = fmaxf(m[mi][h], mx[h] * scale_log2);
            base[mi][h] = mnew == neg_inf() ? 0.f : mnew;  // a row with no key yet: no NaN
            const float c = fast_exp2(m[mi][h] - base[mi][h]);  // 0 on a row's first keys
            m[mi][h] = mnew;
            l[mi][h] *= c;
#pragma unroll
            for (int n = 0; n < OTILES; ++n) {
                acc[mi][n][2 * h] *= c;
                acc[mi][n][2 * h + 1] *= c;
            }
        }
    }
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk) {
        unsigned pa[WARP_M][4];  // P of keys 16kk..16kk+15 as A fragments: S tiles 2kk, 2kk+1
#pragma unroll
        for (int mi = 0; mi < WARP_M; ++mi) {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const float* x = s[mi][2 * kk + j];
                const float p0 = fast_exp2(fmaf(x[0], scale_log2, -base[mi][0]));
                const float p1 = fast_exp2(fmaf(x[1], scale_log2, -base[mi][0]));
                const float p2 = fast_exp2(fmaf(x[2], scale_log2, -base[mi][1]));
                const float p3 = fast_exp2(fmaf(x[3], scale_log2, -base[mi][1]));
                l[mi][0] += p0 + p1;
                l[mi][1] += p2 + p3;
                pa[mi][2 * j] = pack2(p0, p1);      // row g, keys 8(2kk + j) + 2t, +1
                pa[mi][2 * j + 1] = pack2(p2, p3);  // row g + 8
            }
        }
#pragma unroll
        for (int n = 0; n < OTILES; n += 2) {  // two n8 tiles of dims a ldmatrix
            unsigned b[4];
            ldsm_x4_trans(b, vb + kk * 16 * LD + n * 8);
#pragma unroll
            for (int mi = 0; mi < WARP_M; ++mi) mma_16816_x2(acc[mi][n], acc[mi][n + 1], pa[mi], b);
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

    // the plain ring: group G(i) holds K and V of step i (G(0) also Q), STAGES - 1 ahead
#pragma unroll
    for (int i = 0; i + 1 < STAGES; ++i) {
        if (i == 0) load_rows<BR>(sQ, qh, q0, seq_q, tid);
        if (i < steps) {
            load_rows<BC>(sK + i * TILE_ELEMS, kh, i * BC, seq_k, tid);
            load_rows<BC>(sV + i * TILE_ELEMS, vh, i * BC, seq_k, tid);
        }
        cp_async_commit();
    }
    cp_async_wait<STAGES - 2>();  // G(0) is in
    block_sync();

    // per-lane ldmatrix row addresses: Q (A: rows 0-15 of the warp's first m16 tile, k 0-7 |
    // 8-15), K (B, two n8 tiles: keys 0-7 | 8-15, dims 0-7 | 8-15 of each), V (B
    // transposed: keys 0-15, dims 0-7 | 8-15)
    const elem* qa = sQ + (warp * WROWS + (lane & 15)) * LD + (lane >> 4) * 8;
    const int koff = ((lane & 7) + ((lane >> 4) << 3)) * LD + ((lane >> 3) & 1) * 8;
    const int voff = (lane & 15) * LD + (lane >> 4) * 8;

    const QOperand qf = q_operand(qa);

    float acc[WARP_M][OTILES][4];
    float m[WARP_M][2], l[WARP_M][2];  // running max (base 2, scaled) and this lane's sums
    int last[WARP_M][2];  // the last key rows g and g + 8 of tile mi may see, less 2t
#pragma unroll
    for (int mi = 0; mi < WARP_M; ++mi) {
#pragma unroll
        for (int n = 0; n < OTILES; ++n) acc[mi][n][0] = acc[mi][n][1] = acc[mi][n][2] = acc[mi][n][3] = 0.f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = q0 + warp * WROWS + mi * 16 + h * 8 + g;
            m[mi][h] = neg_inf();
            l[mi][h] = 0.f;
            last[mi][h] = min(seq_k - 1, causal ? row + offset : seq_k) - 2 * t;
        }
    }

    float s[WARP_M][NTILES][4];
#pragma unroll 1
    for (int step = 0; step < steps; ++step) {
        if (step > 0) {
            cp_async_wait<STAGES - 2>();  // G(step): K and V of step
            block_sync();                 // ... and every warp is done with step - 1
        }
        // refill step-1's buffers with step+STAGES-1 (nothing to free at step 0: the slot
        // of step STAGES-1 is still empty)
        const int next = step + STAGES - 1;
        if (next < steps) {
            load_rows<BC>(sK + (next % STAGES) * TILE_ELEMS, kh, next * BC, seq_k, tid);
            load_rows<BC>(sV + (next % STAGES) * TILE_ELEMS, vh, next * BC, seq_k, tid);
        }
        cp_async_commit();
        const int slot = step % STAGES;
#pragma unroll
        for (int h = 0; h < BC / KSUB; ++h) {  // sub-tiles of KSUB keys: an online-softmax step each
            scores(s, qf, sK + slot * TILE_ELEMS + h * KSUB * LD + koff);
            if (step >= first_masked) mask_scores(s, last, step * BC + h * KSUB);
            softmax_pv(acc, m, l, s, scale_log2, sV + slot * TILE_ELEMS + h * KSUB * LD + voff);
        }
    }
    cp_async_wait<0>();  // the groups left are empty (no tile past the last step)
    __syncwarp();        // (QREG 0) every lane's last ldmatrix of sQ is done before O lands there

    // O through this warp's own rows of sQ (only this warp ever read them), then out as
    // 16-byte rows; the 4 lanes of a row hold parts of its sum
#pragma unroll
    for (int mi = 0; mi < WARP_M; ++mi) {
        float inv[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float sum = l[mi][h];
            sum += shfl_xor(sum, 1);
            sum += shfl_xor(sum, 2);
            inv[h] = sum > 0.f ? 1.f / sum : 0.f;
        }
        const int r0 = warp * WROWS + mi * 16 + g;
#pragma unroll
        for (int n = 0; n < OTILES; ++n) {
            const int c = n * 8 + 2 * t;
            *reinterpret_cast<unsigned*>(sQ + r0 * LD + c) =
                pack2(acc[mi][n][0] * inv[0], acc[mi][n][1] * inv[0]);
            *reinterpret_cast<unsigned*>(sQ + (r0 + 8) * LD + c) =
                pack2(acc[mi][n][2] * inv[1], acc[mi][n][3] * inv[1]);
        }
    }
    __syncwarp();
#pragma unroll
    for (int mi = 0; mi < WARP_M; ++mi)
        store_warp_rows<HEAD_DIM>(rows.o, sQ, [](int r, int c) { return r * LD + c; },
                                  warp * WROWS + mi * 16, q0, seq_q, lane);
}
