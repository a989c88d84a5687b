// flash_fwd mma: flash-attention forward on the tensor cores with mma.sync (fp16 / bf16
// inputs, fp32 accumulation), FlashAttention-2's work split.
//
// A CTA of 4 warps owns BR = 64 queries of one (batch, head); warp w owns rows
// 16w..16w+15 and keeps, for the whole pass, its Q fragments, its scores, its output
// accumulator and its online-softmax state (running max and sum of rows g and g+8 of
// each lane, g = lane / 4) in registers. The keys come BC = 64 at a time:
//   S = Q K^T     mma m16n8k16: A = Q (ldmatrix), B = K rows as they lie (ldmatrix);
//   P = 2^(S - m) on the accumulator fragments; the row max and sum need only the 4
//                 lanes that share a row (two shuffles); the accumulator is rescaled;
//   O += P V      P's accumulator fragments are A's layout once packed to 16 bits (no
//                 shuffles); B = V through ldmatrix.trans.
// K and V tiles are double-buffered in shared memory, filled by cp.async (zero-filled
// past seq_k): K of step j+1 is requested once S of step j is done, V of step j+1 once
// O += P V of step j is, each overlapping the other half of the step. Rows are 16-byte
// chunks XOR-swizzled with (row % 8), so the 8 rows an ldmatrix reads lie in 8 different
// bank groups. Causal (bottom-right aligned): key tiles wholly above the diagonal of the
// CTA's last query are skipped, only tiles crossing the diagonal (and a partial last
// tile) are masked, and the CTAs of the longest rows are launched first. O is normalised,
// rounded to 16 bits and written through shared memory as 16-byte rows.
//
// grid (ceil(seq_q / 64), batch * q_heads), 128 threads, dynamic shared memory
// (64 + 4 x 64) rows x HEAD_DIM x 2 bytes: 80 KiB at head_dim 128, 40 KiB at 64.
#include "flash_common.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef BC
#define BC 64  // keys a step
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 2  // resident CTAs a SM the registers must allow
#endif

#define BR 64                    // queries a CTA
#define WARPS 4                  // 16 query rows each
#define THREADS (WARPS * 32)
#define CHUNKS (HEAD_DIM / 8)    // 16-byte chunks a row
#define KSTEPS (HEAD_DIM / 16)   // k16 steps of Q K^T
#define NTILES (BC / 8)          // n8 tiles of S
#define PSTEPS (BC / 16)         // k16 steps of P V
#define OTILES (HEAD_DIM / 8)    // n8 tiles of O

static_assert(DTYPE == 1 || DTYPE == 2, "mma takes fp16 (1) or bf16 (2)");
static_assert(HEAD_DIM % 64 == 0, "the swizzle needs at least 8 chunks a row");
static_assert(BC % 16 == 0 && (BC * CHUNKS) % THREADS == 0, "a K/V tile is whole copies of the CTA");

typedef unsigned short elem;

// Row r, column c of a [rows][HEAD_DIM] tile in shared memory: chunk c/8 XOR (r % 8).
FLASH_DEVICE int swz(int r, int c) { return r * HEAD_DIM + (((c >> 3) ^ (r & 7)) << 3) + (c & 7); }

// rows [row0, row0 + ROWS) of a [n][HEAD_DIM] matrix into a tile, zeros past row n
template <int ROWS>
FLASH_DEVICE void load_tile(elem* tile, const elem* src, int row0, int n, int tid) {
    load_rows<ROWS, HEAD_DIM, THREADS>(reinterpret_cast<unsigned char*>(tile), src, row0, n, tid,
                                       [](int r, int c) { return 2 * swz(r, c); });
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
flash_fwd_mma(const elem* __restrict__ q, const elem* __restrict__ k,
              const elem* __restrict__ v, elem* __restrict__ o,
              int seq_q, int seq_k, int q_heads, int kv_heads, float scale_log2, int causal) {
    FLASH_SHARED_BYTES(smem);
    elem* sQ = reinterpret_cast<elem*>(smem);  // [BR][HEAD_DIM], later O's staging
    elem* sK = sQ + BR * HEAD_DIM;             // [2][BC][HEAD_DIM]
    elem* sV = sK + 2 * BC * HEAD_DIM;         // [2][BC][HEAD_DIM]

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;  // a fragment's row group and column pair
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
    cp_async_wait<1>();
    block_sync();

    unsigned qf[KSTEPS][4];  // this warp's 16 query rows as A fragments
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk)
        ldsm_x4(qf[kk], sQ + swz(warp * 16 + (lane % 16), kk * 16 + (lane / 16) * 8));

    float acc[OTILES][4];
#pragma unroll
    for (int n = 0; n < OTILES; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    float m0 = neg_inf(), m1 = neg_inf();  // running max of rows g and g + 8 (base 2, scaled)
    float l0 = 0.f, l1 = 0.f;              // this lane's share of their running sums
    const int row0 = q0 + warp * 16 + g, row1 = row0 + 8;

    for (int step = 0; step < steps; ++step) {
        const int buf = step & 1;
        const elem* tK = sK + buf * BC * HEAD_DIM;
        const elem* tV = sV + buf * BC * HEAD_DIM;
        if (step > 0) {
            cp_async_wait<1>();  // K of this step is in (V of this step may still fly)
            block_sync();
        }

        float s[NTILES][4];
#pragma unroll
        for (int n = 0; n < NTILES; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
#pragma unroll
            for (int n = 0; n < NTILES; n += 2) {  // two n8 tiles of keys a ldmatrix
                unsigned kb[4];
                ldsm_x4(kb, tK + swz(n * 8 + (lane & 7) + ((lane >> 4) << 3),
                                     kk * 16 + ((lane >> 3) & 1) * 8));
                mma_16816_x2(s[n], s[n + 1], qf[kk], kb);
            }
        }

        // K of the next step into the other buffer (its last readers passed this step's sync)
        if (step + 1 < steps) load_tile<BC>(sK + (buf ^ 1) * BC * HEAD_DIM, kh, (step + 1) * BC, seq_k, tid);
        cp_async_commit();

        const int k0 = step * BC;
        if (step >= first_masked) {
#pragma unroll
            for (int n = 0; n < NTILES; ++n) {
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = k0 + n * 8 + 2 * t + (e & 1);
                    const int row = e < 2 ? row0 : row1;
                    if (key >= seq_k || (causal && key > row + offset)) s[n][e] = neg_inf();
                }
            }
        }

        // online softmax, base 2: x = s * log2(e) / sqrt(head_dim)
        float mx0 = neg_inf(), mx1 = neg_inf();
#pragma unroll
        for (int n = 0; n < NTILES; ++n) {
            mx0 = fmaxf(mx0, fmaxf(s[n][0], s[n][1]) * scale_log2);
            mx1 = fmaxf(mx1, fmaxf(s[n][2], s[n][3]) * scale_log2);
        }
        float c0, c1;
        const float base0 = softmax_step(m0, l0, mx0, c0), base1 = softmax_step(m1, l1, mx1, c1);
#pragma unroll
        for (int n = 0; n < OTILES; ++n) {
            acc[n][0] *= c0;
            acc[n][1] *= c0;
            acc[n][2] *= c1;
            acc[n][3] *= c1;
        }
        unsigned pa[PSTEPS][4];  // P as A fragments: k16 step kk is S tiles 2kk and 2kk+1
#pragma unroll
        for (int n = 0; n < NTILES; ++n) {
            const float p0 = fast_exp2(s[n][0] * scale_log2 - base0);
            const float p1 = fast_exp2(s[n][1] * scale_log2 - base0);
            const float p2 = fast_exp2(s[n][2] * scale_log2 - base1);
            const float p3 = fast_exp2(s[n][3] * scale_log2 - base1);
            l0 += p0 + p1;
            l1 += p2 + p3;
            pa[n / 2][(n & 1) * 2] = pack2(p0, p1);      // row g, keys 8n + 2t, +1
            pa[n / 2][(n & 1) * 2 + 1] = pack2(p2, p3);  // row g + 8
        }

        cp_async_wait<1>();  // V of this step is in (K of the next may still fly)
        block_sync();
#pragma unroll
        for (int kk = 0; kk < PSTEPS; ++kk) {
#pragma unroll
            for (int n = 0; n < OTILES; n += 2) {  // two n8 tiles of dims a ldmatrix
                unsigned vb[4];
                ldsm_x4_trans(vb, tV + swz(kk * 16 + (lane & 15), n * 8 + (lane >> 4) * 8));
                mma_16816_x2(acc[n], acc[n + 1], pa[kk], vb);
            }
        }

        // V of the next step into the other buffer (its last readers passed this step's sync)
        if (step + 1 < steps) load_tile<BC>(sV + (buf ^ 1) * BC * HEAD_DIM, vh, (step + 1) * BC, seq_k, tid);
        cp_async_commit();
    }
    cp_async_wait<0>();

    const float inv0 = softmax_inverse(l0), inv1 = softmax_inverse(l1);

    // O through this warp's own 16 rows of sQ (only this warp ever read them), then out
    // as 16-byte rows
    const int r0 = warp * 16 + g, r1 = r0 + 8;
#pragma unroll
    for (int n = 0; n < OTILES; ++n) {
        const int c = n * 8 + 2 * t;
        *reinterpret_cast<unsigned*>(sQ + swz(r0, c)) = pack2(acc[n][0] * inv0, acc[n][1] * inv0);
        *reinterpret_cast<unsigned*>(sQ + swz(r1, c)) = pack2(acc[n][2] * inv1, acc[n][3] * inv1);
    }
    __syncwarp();
    store_warp_rows<HEAD_DIM>(rows.o, sQ, [](int r, int c) { return swz(r, c); },
                              warp * 16, q0, seq_q, lane);
}
