// flash_fwd wgmma: flash-attention forward on Hopper's warpgroup MMA (sm_90a; fp16 / bf16
// inputs, fp32 accumulation), FlashAttention-2's work split at 128 queries a CTA.
//
// A CTA of 2 warpgroups (256 threads) owns BR = 128 queries of one (batch, head);
// warpgroup wg owns rows 64wg..64wg+63, warp w of it rows 16w..16w+15 of those, as the
// wgmma m64nNk16 fragments place them. For the whole pass a thread keeps its Q rows as
// wgmma A fragments (ldmatrix, the same registers as mma.sync's A), its scores, its
// output accumulator and its online-softmax state in registers. Keys come BC = 64 a step:
//   S = Q K^T     wgmma m64n64k16, A = Q (registers), B = the K tile [keys][dims] in
//                 shared memory, K-major (no transpose): HEAD_DIM / 16 instructions;
//   P = 2^(S - m) on the accumulator fragments (a row's 4 lanes: two shuffles), O rescaled;
//   O += P V      wgmma m64n{HEAD_DIM}k16, A = P (the S accumulators packed to 16 bits are
//                 A's fragments as they lie), B = the V tile [keys][dims], N-major (the
//                 descriptor's transpose): BC / 16 instructions.
// Tiles lie in shared memory in the 128-byte swizzle of wgmma's canonical layouts: a row
// of 64 columns (128 bytes) is an atom row, its 16-byte chunk c stored at c ^ (row % 8);
// a head_dim-128 row is two atoms, the atoms of a tile one after the other (tile_offset
// in flash_wgmma.cuh is the one layout function: the loads use it, the descriptors are derived from the
// same geometry). Tiles start on 1024-byte boundaries (the pattern's period), so every
// descriptor's base offset is 0. K/V tiles are double-buffered and filled by cp.async
// (zero-filled past seq_k); each thread fences its copies into the async proxy
// (fence.proxy.async) before the barrier that precedes the wgmma reading them. Each GEMM
// is one commit group, waited for at once (no overlap of a warpgroup's GEMM with its own
// softmax: the other warpgroup's work is what fills the gaps). Causal, bottom-right
// aligned: key tiles above the diagonal of the CTA's last query are skipped, tiles
// crossing it (and a partial last tile) masked, the longest rows launched first.
//
// grid (ceil(seq_q / 128), batch * q_heads), 256 threads, dynamic shared memory
// (128 + 4 x 64) rows x HEAD_DIM x 2 bytes + 1 KiB of alignment slack: 97 KiB at
// head_dim 128, 49 KiB at 64.
#include "flash_wgmma.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef QRELOAD
// 1: Q's fragments are read from sQ again at every key step. At head_dim 64 ptxas (CUDA 13)
// gave the fragments loaded once before the loop the registers that P's packs and the K
// prefetch's addresses write inside it, so the second tile's S read P (kernels/NOTES.md, items
// 64 and 76); loaded in the loop they are the step's own values. 4 LDSM a warp a step.
#define QRELOAD (HEAD_DIM == 64)
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1  // resident CTAs a SM the registers must allow
#endif

#define BR 128                    // queries a CTA
#define BC 64                     // keys a step
#define WARPGROUPS 2              // 64 query rows each
#define THREADS (WARPGROUPS * 128)
#define CHUNKS (HEAD_DIM / 8)     // 16-byte chunks a row
#define KSTEPS (HEAD_DIM / 16)    // k16 steps of Q K^T
#define PSTEPS (BC / 16)          // k16 steps of P V
#define SREGS (BC / 2)            // S accumulators a thread
#define OREGS (HEAD_DIM / 2)      // O accumulators a thread
#define PERIOD WGMMA_PERIOD       // bytes of the swizzle's period (8 atom rows)

static_assert(DTYPE == 1 || DTYPE == 2, "wgmma takes fp16 (1) or bf16 (2)");
static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "head_dim 64 or 128");
static_assert((BC * CHUNKS) % THREADS == 0 && (BR * CHUNKS) % THREADS == 0, "tiles are whole copies of the CTA");

typedef unsigned short elem;

// rows [row0, row0 + ROWS) of a [n][HEAD_DIM] matrix into a tile, zeros past row n
template <int ROWS>
FLASH_DEVICE void load_tile(unsigned char* tile, const elem* src, int row0, int n, int tid) {
    load_rows<ROWS, HEAD_DIM, THREADS>(tile, src, row0, n, tid, [](int r, int c) { return tile_offset<ROWS>(r, c); });
}

// This thread's copies are in (at most N groups still flying), visible to the async proxy,
// and every thread's are, past the barrier.
template <int N>
FLASH_DEVICE void tiles_ready() {
    cp_async_wait<N>();
    fence_proxy_async();
    block_sync();
}

// This warp's 16 query rows of sQ as the A fragments of m64nNk16 (KSTEPS k16 steps).
FLASH_DEVICE void load_q(unsigned (&qf)[KSTEPS][4], const unsigned char* sQ, int warp, int lane) {
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk)
        ldsm_x4(qf[kk], sQ + tile_offset<BR>(warp * 16 + (lane % 16), kk * 16 + (lane / 16) * 8));
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
flash_fwd_wgmma(const elem* __restrict__ q, const elem* __restrict__ k,
                const elem* __restrict__ v, elem* __restrict__ o,
                int seq_q, int seq_k, int q_heads, int kv_heads, float scale_log2, int causal) {
    FLASH_SHARED_BYTES(smem_raw);
    // the tiles start on the swizzle's 1024-byte period (the dynamic window need not)
    unsigned char* smem = smem_raw + ((PERIOD - (smem_addr(smem_raw) & (PERIOD - 1))) & (PERIOD - 1));
    unsigned char* sQ = smem;                        // [BR][HEAD_DIM], later O's staging
    unsigned char* sK = sQ + BR * HEAD_DIM * 2;      // [2][BC][HEAD_DIM]
    unsigned char* sV = sK + 2 * BC * HEAD_DIM * 2;  // [2][BC][HEAD_DIM]
    const unsigned aK = smem_addr(sK), aV = smem_addr(sV);

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;  // warp 4wg + w: rows 64wg + 16w ..
    const int g = lane / 4, t = lane % 4;        // a fragment's row group and column pair
    const FlashCta cta = flash_cta(q_heads, kv_heads, causal);
    const HeadRows<elem> rows = head_rows<HEAD_DIM>(q, k, v, o, cta, seq_q, seq_k);
    const elem *qh = rows.q, *kh = rows.k, *vh = rows.v;
    const int q0 = cta.tile * BR;
    const int offset = seq_k - seq_q;  // query i sees keys j <= i + offset when causal
    const KeySteps ks = key_steps(q0, BR, BC, seq_k, offset, causal);
    const int steps = ks.steps, first_masked = ks.first_masked;

    load_tile<BR>(sQ, qh, q0, seq_q, tid);
    load_tile<BC>(sK, kh, 0, seq_k, tid);
    cp_async_commit();  // group: Q and K of step 0
    load_tile<BC>(sV, vh, 0, seq_k, tid);
    cp_async_commit();  // group: V of step 0
    tiles_ready<1>();

    unsigned qf[KSTEPS][4];  // this warp's 16 query rows as A fragments of m64nNk16
    load_q(qf, sQ, warp, lane);

    float acc[OREGS];  // O: acc[4n + e], dims 8n + 2t + (e & 1), row g + 8 (e >> 1)
#pragma unroll
    for (int i = 0; i < OREGS; ++i) acc[i] = 0.f;
    float m0 = neg_inf(), m1 = neg_inf();  // running max of rows g and g + 8 (base 2, scaled)
    float l0 = 0.f, l1 = 0.f;              // this lane's share of their running sums
    const int row0 = q0 + warp * 16 + g, row1 = row0 + 8;

    for (int step = 0; step < steps; ++step) {
        const int buf = step & 1;
        const unsigned tK = aK + buf * BC * HEAD_DIM * 2, tV = aV + buf * BC * HEAD_DIM * 2;
        if (step > 0) tiles_ready<1>();  // K of this step is in (V of this step may still fly)
#if QRELOAD
        if (step > 0) load_q(qf, sQ, warp, lane);  // sQ still holds Q (O is staged there after the loop)
#endif

        float s[SREGS];  // S: s[4n + e], keys 8n + 2t + (e & 1), row g + 8 (e >> 1)
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) wgmma_m64n64<0>(s, qf[kk], kmajor_desc<BC>(tK, 0, kk), kk);
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_hold(s);

        // K of the next step into the other buffer (its last readers passed this step's barrier)
        if (step + 1 < steps) load_tile<BC>(sK + (buf ^ 1) * BC * HEAD_DIM * 2, kh, (step + 1) * BC, seq_k, tid);
        cp_async_commit();

        const int k0 = step * BC;
        if (step >= first_masked) {
#pragma unroll
            for (int i = 0; i < SREGS; ++i) {
                const int key = k0 + (i / 4) * 8 + 2 * t + (i & 1);
                const int row = (i & 2) ? row1 : row0;
                if (key >= seq_k || (causal && key > row + offset)) s[i] = neg_inf();
            }
        }

        // online softmax, base 2: x = s * log2(e) / sqrt(head_dim)
        float mx0 = neg_inf(), mx1 = neg_inf();
#pragma unroll
        for (int i = 0; i < SREGS; i += 4) {
            mx0 = fmaxf(mx0, fmaxf(s[i], s[i + 1]) * scale_log2);
            mx1 = fmaxf(mx1, fmaxf(s[i + 2], s[i + 3]) * scale_log2);
        }
        float c0, c1;
        const float base0 = softmax_step(m0, l0, mx0, c0), base1 = softmax_step(m1, l1, mx1, c1);
#pragma unroll
        for (int i = 0; i < OREGS; i += 4) {
            acc[i] *= c0;
            acc[i + 1] *= c0;
            acc[i + 2] *= c1;
            acc[i + 3] *= c1;
        }
        // P as A fragments of m64nNk16: k16 step kk is S's n8 blocks 2kk (a0..a3: rows g,
        // g + 8) and 2kk + 1 (a4..a7), the registers in the accumulators' order
        unsigned pa[PSTEPS][4];
#pragma unroll
        for (int i = 0; i < SREGS; i += 4) {
            const float p0 = fast_exp2(s[i] * scale_log2 - base0);
            const float p1 = fast_exp2(s[i + 1] * scale_log2 - base0);
            const float p2 = fast_exp2(s[i + 2] * scale_log2 - base1);
            const float p3 = fast_exp2(s[i + 3] * scale_log2 - base1);
            l0 += p0 + p1;
            l1 += p2 + p3;
            pa[i / 8][(i / 4) % 2 * 2] = pack2(p0, p1);      // row g, keys 8(i/4) + 2t, +1
            pa[i / 8][(i / 4) % 2 * 2 + 1] = pack2(p2, p3);  // row g + 8
        }

        tiles_ready<1>();  // V of this step is in (K of the next may still fly)
        wgmma_hold(acc);
#pragma unroll
        for (int kk = 0; kk < PSTEPS; ++kk) wgmma_hold(pa[kk]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < PSTEPS; ++kk) {
#if HEAD_DIM == 128
            wgmma_m64n128<1>(acc, pa[kk], nmajor_desc<BC>(tV, kk), 1);
#else
            wgmma_m64n64<1>(acc, pa[kk], nmajor_desc<BC>(tV, kk), 1);
#endif
        }
        wgmma_commit();
        wgmma_wait<0>();
        wgmma_hold(acc);

        // V of the next step into the other buffer (its last readers passed this step's barriers)
        if (step + 1 < steps) load_tile<BC>(sV + (buf ^ 1) * BC * HEAD_DIM * 2, vh, (step + 1) * BC, seq_k, tid);
        cp_async_commit();
    }
    cp_async_wait<0>();

    const float inv0 = softmax_inverse(l0), inv1 = softmax_inverse(l1);

    // O through this warp's own 16 rows of sQ (only this warp ever read them), then out
    // as 16-byte rows
    const int r0 = warp * 16 + g, r1 = r0 + 8;
#pragma unroll
    for (int i = 0; i < OREGS; i += 4) {
        const int c = (i / 4) * 8 + 2 * t;
        *reinterpret_cast<unsigned*>(sQ + tile_offset<BR>(r0, c)) = pack2(acc[i] * inv0, acc[i + 1] * inv0);
        *reinterpret_cast<unsigned*>(sQ + tile_offset<BR>(r1, c)) = pack2(acc[i + 2] * inv1, acc[i + 3] * inv1);
    }
    __syncwarp();
    store_warp_rows<HEAD_DIM>(rows.o, reinterpret_cast<const elem*>(sQ),
                              [](int r, int c) { return tile_offset<BR>(r, c) / 2; }, warp * 16, q0, seq_q, lane);
}
