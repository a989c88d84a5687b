// flash_fwd wgmma2: flash-attention forward on Hopper's warpgroup MMA (sm_90a; fp16 / bf16
// inputs, fp32 accumulation, head_dim 128) with FlashAttention-3's scheduling ideas, each a
// compile-time knob (catalog.WGMMA2_KNOBS) so they can be A/B'd:
//   BC 128      keys a step: S = Q K^T is m64n128k16 (8 instructions), O += P V k16 over 128
//               keys (8 m64n128k16); BC 64 is wgmma's step (m64n64 for S).
//   QSMEM 0     (shipped) Q's A fragments in 32 registers (RS); 1: S reads Q from shared memory through
//               a descriptor (SS). RS shipped since the diet: measured faster, kernels/NOTES.md
//               item 85, and needs fewer descriptors a step.
//   OVERLAP 1   intra-warpgroup overlap: S(j+1) is issued (its own commit group) together
//               with P(j) V(j); wgmma.wait_group 1 retires S(j+1) alone, its softmax runs
//               while P(j) V(j) is still on the tensor cores, then wait_group 0, the rescale
//               of O and P(j+1). OVERLAP 0: each GEMM waited for at once, as wgmma.
//   PINGPONG 1  the two consumer warpgroups take turns issuing their GEMMs (named barriers
//               1 and 2, bar.sync / bar.arrive of 256 threads): one's softmax runs while the
//               other's GEMMs run, instead of both meeting at one __syncthreads.
//   STAGES 3    K and V buffers each (a ring).
// Loads are decoupled from the consumers: a third warpgroup (the producer) fills the K/V
// ring with cp.async and signals each tile's full mbarrier with cp.async.mbarrier.arrive.noinc
// (128 arrivals a phase, one a producer thread, when its copies have landed); the consumers
// wait on it (phase parity (j / STAGES) & 1), fence.proxy.async (the reader's fence: the
// tile is visible to this thread, now to its async proxy too) and, once the wgmma that read
// the tile has been waited for, arrive on its empty mbarrier (256 arrivals), which the
// producer waits on before refilling it. No __syncthreads after the prologue.
//   TMA 1       the producer's copies: cp.async (0, above) or, TMA 1 (shipped), one producer thread
//               issuing cp.async.bulk.tensor through tensor maps of K and V the host built
//               (catalog.wgmma2_args; two copies a tile, one a 64-column swizzle atom), each
//               tile's full barrier expecting 1 arrival (mbarrier.arrive.expect_tx of the
//               tile's bytes) and the copies' complete_tx; rows past seq_k land as zeros. The
//               copies write through the async proxy, so the consumers need no proxy fence.
//   With OVERLAP 1, FlashAttention-3's order within a step: O is rescaled by the factors of
//               step j's softmax between the issue of S(j + 1) and that of P(j) V(j) (a second
//               wgmma.fence before P V), under S(j + 1)'s tensor-core time, instead of after
//               P(j) V(j) was waited for.
//   FAST_MAX, DESC_ADD (flash_wgmma.cuh; 1 shipped): the softmax's row maxima of the raw
//               scores in two chains, scaled once; each wgmma descriptor as its tile's plus the
//               operand's offset. With the rescale above and QSMEM 0, the consumers' "diet"
//               (kernels/NOTES.md items 85-87: 590 -> 635 TFLOP/s).
//   SETMAXNREG 1  ptxas budgets a 384-thread CTA at 168 registers a thread (it rounds a
//               lone producer warp up to a warpgroup too); setmaxnreg moves them: the
//               producer gives its down to REG_PRODUCER, the consumers take REG_CONSUMER.
//
// A CTA of 2 consumer warpgroups (256 threads) + 1 producer warpgroup owns BR = 128 queries of
// one (batch, head); warpgroup wg owns rows 64wg..64wg+63 (warp w of the CTA rows 16w..),
// as wgmma's m64nNk16 fragments place them. Tiles lie in shared memory in the 128-byte
// swizzle (tile_offset in flash_wgmma.cuh, the same layout and descriptors as wgmma);
// they start on 1024-byte boundaries. Causal, bottom-right aligned: key tiles above the
// diagonal of the CTA's last query are skipped, tiles crossing it (and a partial last
// tile) masked, the longest rows launched first.
//
// grid (ceil(seq_q / 128), batch * q_heads), 384 threads, dynamic shared memory
// (128 + 2 x STAGES x BC) rows x 256 bytes + 1 KiB of alignment slack + the mbarriers:
// 225 KiB at BC 128, STAGES 3.
// Compiled with no -D values this file is the shipped build (catalog.WGMMA2_SHIPPED, bf16):
// the diet's FAST_MAX and DESC_ADD on here (flash_wgmma.cuh's default, wgmma's, is off).
#ifndef FAST_MAX
#define FAST_MAX 1
#endif
#ifndef DESC_ADD
#define DESC_ADD 1
#endif
#include "flash_wgmma.cuh"

#ifndef HEAD_DIM
#define HEAD_DIM 128
#endif
#ifndef BC
#define BC 128
#endif
#ifndef QSMEM
#define QSMEM 0
#endif
#ifndef OVERLAP
#define OVERLAP 1
#endif
#ifndef PINGPONG
#define PINGPONG 1
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef SETMAXNREG
#define SETMAXNREG 1
#endif
#ifndef TMA
#define TMA 1  // K and V by cp.async.bulk.tensor (two tensor-map arguments follow causal); 0: cp.async
#endif
#ifndef REG_CONSUMER
#define REG_CONSUMER 232  // registers a consumer thread after setmaxnreg.inc
#endif
#ifndef REG_PRODUCER
#define REG_PRODUCER 40   // a producer thread after setmaxnreg.dec (2 x 128 x 232 + 128 x 40 <= 64 Ki)
#endif

#define BR 128                      // queries a CTA
#define CONSUMERS 256               // 2 warpgroups of 64 query rows
#define PRODUCERS 128               // the producer warpgroup
#define THREADS (CONSUMERS + PRODUCERS)
#define KSTEPS (HEAD_DIM / 16)      // k16 steps of Q K^T
#define PSTEPS (BC / 16)            // k16 steps of P V
#define SREGS (BC / 2)              // S accumulators a thread
#define OREGS (HEAD_DIM / 2)        // O accumulators a thread
#define QREGS (QSMEM ? 1 : KSTEPS)  // Q's A fragments a thread (none used when QSMEM)
#define TILE(rows) ((rows) * HEAD_DIM * 2)
#define FULL_ARRIVALS (TMA ? 1 : PRODUCERS)  // a full barrier's arrivals a phase

static_assert(DTYPE == 1 || DTYPE == 2, "wgmma2 takes fp16 (1) or bf16 (2)");
static_assert(HEAD_DIM == 128, "wgmma2 is written for head_dim 128");
static_assert(BC == 64 || BC == 128, "BC 64 or 128");
static_assert(STAGES >= 2, "a ring of two buffers at least");
// OVERLAP 0 with Q in registers: ptxas (CUDA 13) writes other values into Q's A fragments
// inside that loop (the SASS check in tests/test_kernels_compile.py; wrong on the H200)
#ifndef ALLOW_Q_HAZARD  // defined only by the SASS test that shows the hazard
static_assert(OVERLAP || QSMEM, "OVERLAP 0 needs QSMEM 1");
#endif
static_assert(CONSUMERS * REG_CONSUMER + PRODUCERS * REG_PRODUCER <= 65536, "the register file");

typedef unsigned short elem;

// The mbarriers, 8 bytes each after the tiles (bars: the first's window address): full and
// empty, of K and of V, per stage; step j uses stage j % STAGES.
FLASH_DEVICE unsigned full_k(unsigned bars, int j) { return bars + 8 * (j % STAGES); }
FLASH_DEVICE unsigned full_v(unsigned bars, int j) { return bars + 8 * (STAGES + j % STAGES); }
FLASH_DEVICE unsigned empty_k(unsigned bars, int j) { return bars + 8 * (2 * STAGES + j % STAGES); }
FLASH_DEVICE unsigned empty_v(unsigned bars, int j) { return bars + 8 * (3 * STAGES + j % STAGES); }
// rows [row0, row0 + ROWS) of a [n][HEAD_DIM] matrix into a swizzled tile, zeros past row n,
// by NT threads (tid 0..NT-1)
template <int ROWS, int NT>
FLASH_DEVICE void load_tile(unsigned char* tile, const elem* src, int row0, int n, int tid) {
    load_rows<ROWS, HEAD_DIM, NT>(tile, src, row0, n, tid, [](int r, int c) { return tile_offset<ROWS>(r, c); });
}

// The producer's copy of rows [row0, row0 + ROWS) of a [n][HEAD_DIM] matrix into a swizzled
// tile, zeros past row n: thread ptid of NT moves chunk ptid % CHUNKS of rows ptid / CHUNKS
// + RSTEP i. RSTEP is a multiple of the swizzle's 8 rows, so a thread's chunks all sit at
// one offset plus RSTEP i rows (tile_offset(r + 8i, c) = tile_offset(r, c) + 8i x 128): a
// few registers a copy, where load_rows' general indexing spilled at REG_PRODUCER.
template <int ROWS, int NT>
FLASH_DEVICE void copy_tile(unsigned char* tile, const elem* src, int row0, int n, int ptid) {
    constexpr int CHUNKS = HEAD_DIM / 8, RSTEP = NT / CHUNKS;
    static_assert(RSTEP % 8 == 0 && ROWS % RSTEP == 0, "whole swizzle periods a step");
    const int r = ptid / CHUNKS, c = (ptid % CHUNKS) * 8;
    unsigned char* dst = tile + tile_offset<ROWS>(r, c);
    const elem* from = src + (size_t)(row0 + r) * HEAD_DIM + c;
#pragma unroll 4
    for (int i = 0; i < ROWS / RSTEP; ++i) {
        const bool ok = row0 + r + i * RSTEP < n;
        cp_async16(dst + i * RSTEP * WGMMA_ATOM, ok ? from + (size_t)i * RSTEP * HEAD_DIM : src, ok ? 16 : 0);
    }
}

// A producer thread's copies of a tile signalled on its full barrier: when they land
// (cp.async's noinc arrive-on; the consumers fence for their async proxy after the wait).
FLASH_DEVICE void tile_filled(unsigned full) {
    cp_async_mbar_arrive(full);
}

// The producer warpgroup: K and V of every step into the ring, each tile's copies signalled on its
// full barrier; a buffer is refilled once its empty barrier's previous phase completed.
// j is the ring index: r0 (0) for the tile's first key step.
FLASH_DEVICE void produce(unsigned char* sK, unsigned char* sV, const elem* kh, const elem* vh, unsigned bars, int steps,
                          int seq_k, int ptid, int r0 = 0) {
    for (int j = r0; j < r0 + steps; ++j) {
        const unsigned round = j / STAGES;
        if (j >= STAGES) mbar_wait(empty_k(bars, j), (round - 1) & 1);
        copy_tile<BC, PRODUCERS>(sK + (j % STAGES) * TILE(BC), kh, (j - r0) * BC, seq_k, ptid);
        tile_filled(full_k(bars, j));
        if (j >= STAGES) mbar_wait(empty_v(bars, j), (round - 1) & 1);
        copy_tile<BC, PRODUCERS>(sV + (j % STAGES) * TILE(BC), vh, (j - r0) * BC, seq_k, ptid);
        tile_filled(full_v(bars, j));
    }
    cp_async_wait_all();
}

// TMA 1: the producer's thread 0 alone. Tile j's buffer is refilled once the previous
// round's consumers released it (as produce); the tile's full barrier gets the thread's one
// arrival with the tile's bytes as expected transactions, then the HEAD_DIM / 64 copies of
// BC rows x 64 columns (atom a: columns 64a.. of rows j BC.. of K/V head kvh), each
// completing its bytes on it. Every tile starts on the swizzle's 1024-byte period and an
// atom is BC x 128 bytes, so TMA's 128-byte swizzle lands exactly tile_offset's layout.
FLASH_DEVICE void refill_wait(unsigned empty, int j) {
    if (j >= STAGES) mbar_wait(empty, (j / STAGES - 1) & 1);
}
FLASH_DEVICE void tma_tile(unsigned tile, const void* map, int row0, int kvh, unsigned full) {
    mbar_arrive_expect_tx(full, TILE(BC));
#pragma unroll
    for (int a = 0; a < HEAD_DIM / 64; ++a) tma_load_3d(tile + a * BC * WGMMA_ATOM, map, 64 * a, row0, kvh, full);
}
FLASH_DEVICE void acquire_maps(const void* kmap, const void* vmap) {
    tensormap_acquire(kmap);
    tensormap_acquire(vmap);
}
FLASH_DEVICE void produce_tma_steps(unsigned aK, unsigned aV, const void* kmap, const void* vmap, unsigned bars,
                                    int steps, int kvh, int r0) {
    for (int j = r0; j < r0 + steps; ++j) {  // j: the ring index, as produce's
        refill_wait(empty_k(bars, j), j);
        tma_tile(aK + (j % STAGES) * TILE(BC), kmap, (j - r0) * BC, kvh, full_k(bars, j));
        refill_wait(empty_v(bars, j), j);
        tma_tile(aV + (j % STAGES) * TILE(BC), vmap, (j - r0) * BC, kvh, full_v(bars, j));
    }
}
FLASH_DEVICE void produce_tma(unsigned aK, unsigned aV, const void* kmap, const void* vmap, unsigned bars, int steps,
                              int kvh) {
    acquire_maps(kmap, vmap);
    produce_tma_steps(aK, aV, kmap, vmap, bars, steps, kvh, 0);
}


// Tile j of a ring is in (its full barrier's phase j / STAGES completed) and visible to this
// thread's async proxy (TMA's copies wrote through it: no fence).
FLASH_DEVICE void tile_wait(unsigned full, int j) {
    mbar_wait(full, (j / STAGES) & 1);
#if !TMA
    fence_proxy_async();
#endif
}

// The ping-pong: warpgroup wg waits for its turn (barrier 1 + wg: its own bar.sync and the
// other's bar.arrive) before issuing GEMMs and passes the turn on after. Warpgroup 1 passes
// none after its last round, so every barrier's arrivals balance at the end.
FLASH_DEVICE void turn_take(int wg) {
#if PINGPONG
    named_sync(1 + wg, CONSUMERS);
#endif
}
FLASH_DEVICE void turn_pass(int wg, bool last) {
#if PINGPONG
    if (!(last && wg == 1)) named_arrive(2 - wg, CONSUMERS);
#endif
}

// S = Q K^T of warpgroup wg's 64 rows against the K tile at window address tK
FLASH_DEVICE void s_gemm(float (&s)[SREGS], const unsigned (&qf)[QREGS][4], unsigned aQ, int wg, unsigned tK) {
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk) {
        const unsigned long long kd = kmajor_desc<BC>(tK, 0, kk);
#if QSMEM
        const unsigned long long qd = kmajor_desc<BR>(aQ, 64 * wg, kk);
#if BC == 128
        wgmma_m64n128_ss<0>(s, qd, kd, kk);
#else
        wgmma_m64n64_ss<0>(s, qd, kd, kk);
#endif
#else
#if BC == 128
        wgmma_m64n128<0>(s, qf[kk], kd, kk);
#else
        wgmma_m64n64<0>(s, qf[kk], kd, kk);
#endif
#endif
    }
}

// O += P V against the V tile at window address tV (N-major: the descriptor's transpose)
FLASH_DEVICE void pv_gemm(float (&acc)[OREGS], const unsigned (&pa)[PSTEPS][4], unsigned tV) {
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk) wgmma_m64n128<1>(acc, pa[kk], nmajor_desc<BC>(tV, kk), 1);
}

FLASH_DEVICE void hold_p(unsigned (&pa)[PSTEPS][4]) {
#pragma unroll
    for (int kk = 0; kk < PSTEPS; ++kk) wgmma_hold(pa[kk]);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1)
flash_fwd_wgmma2(const elem* __restrict__ q, const elem* __restrict__ k,
                 const elem* __restrict__ v, elem* __restrict__ o,
                 int seq_q, int seq_k, int q_heads, int kv_heads, float scale_log2, int causal
#if TMA
                 , const void* kmap, const void* vmap  // K's and V's tensor maps (128 bytes each, global)
#endif
) {
    FLASH_SHARED_BYTES(smem_raw);
    unsigned char* smem = period_aligned(smem_raw);
    unsigned char* sQ = smem;                    // [BR][HEAD_DIM], later O's staging
    unsigned char* sK = sQ + TILE(BR);           // [STAGES][BC][HEAD_DIM]
    unsigned char* sV = sK + STAGES * TILE(BC);  // [STAGES][BC][HEAD_DIM]
    const unsigned bars = smem_addr(sV + STAGES * TILE(BC));
    const unsigned aQ = smem_addr(sQ), aK = smem_addr(sK), aV = smem_addr(sV);

    const int tid = threadIdx.x;
    const int warp = warp_uniform(tid / 32), lane = tid % 32;  // warp: known uniform to the compiler
    const FlashCta cta = flash_cta(q_heads, kv_heads, causal);
    const HeadRows<elem> rows = head_rows<HEAD_DIM>(q, k, v, o, cta, seq_q, seq_k);
    const int q0 = cta.tile * BR;
    const int offset = seq_k - seq_q;  // query i sees keys j <= i + offset when causal
    const KeySteps ks = key_steps(q0, BR, BC, seq_k, offset, causal);
    const int steps = ks.steps;

    if (tid == 0) {
        for (int st = 0; st < STAGES; ++st) {
            mbar_init(full_k(bars, st), FULL_ARRIVALS);
            mbar_init(full_v(bars, st), FULL_ARRIVALS);
            mbar_init(empty_k(bars, st), CONSUMERS);
            mbar_init(empty_v(bars, st), CONSUMERS);
        }
        mbar_init_fence();
    }
    if (tid < CONSUMERS) {  // Q by the consumers, in and fenced before the barrier
        load_tile<BR, CONSUMERS>(sQ, rows.q, q0, seq_q, tid);
        cp_async_wait_all();
        fence_proxy_async();
    }
    block_sync();  // the barriers initialised, Q in: the last CTA-wide barrier
    if (warp >= CONSUMERS / 32) {
#if SETMAXNREG
        setmaxnreg_dec<REG_PRODUCER>();
#endif
#if   TMA
        if (tid == CONSUMERS) produce_tma(aK, aV, kmap, vmap, bars, steps, cta.kvh);
#else
        produce(sK, sV, rows.k, rows.v, bars, steps, seq_k, tid - CONSUMERS);
#endif
        return;
    }
#if SETMAXNREG
    setmaxnreg_inc<REG_CONSUMER>();
#endif

    const int wg = warp / 4, g = lane / 4, t = lane % 4;
    {  // one tile
    const int ring = 0;
    unsigned qf[QREGS][4];  // RS: this warp's 16 query rows as A fragments of m64nNk16
#if !QSMEM
#pragma unroll
    for (int kk = 0; kk < KSTEPS; ++kk)
        ldsm_x4(qf[kk], sQ + tile_offset<BR>(warp * 16 + (lane % 16), kk * 16 + (lane / 16) * 8));
#endif
    float acc[OREGS];  // O: acc[4n + e], dims 8n + 2t + (e & 1), row g + 8 (e >> 1)
#pragma unroll
    for (int i = 0; i < OREGS; ++i) acc[i] = 0.f;
    float s[SREGS];         // S, then P in fp32, of the tile being softmaxed
    unsigned pa[PSTEPS][4];  // P of the tile P V is issued for, as A fragments
    float m[2] = {neg_inf(), neg_inf()}, l[2] = {0.f, 0.f}, c[2];
    const int row0 = q0 + warp * 16 + g, row1 = row0 + 8;
    // key step j of the tile at ring index ring + j (its buffers and barriers' phases)
    auto k_tile = [&](int j) { return aK + ((ring + j) % STAGES) * TILE(BC); };
    auto v_tile = [&](int j) { return aV + ((ring + j) % STAGES) * TILE(BC); };
    // S of step j (waited for, its K buffer released) to P: masks, softmax, c
    auto softmax = [&](int j) {
        if (j >= ks.first_masked) mask_scores(s, j * BC, t, row0, row1, seq_k, causal, offset);
        scores_to_probs(s, scale_log2, m, l, c);
    };
#if PINGPONG
    if (wg == 1 && steps > 0) named_arrive(1, CONSUMERS);  // warpgroup 0 issues first
#endif

    // one round of S = Q K^T (step j) alone, waited for, K released: softmax(j) may follow
    auto s_round = [&](int j) {
        tile_wait(full_k(bars, ring + j), ring + j);
        turn_take(wg);
        wgmma_fence();
        s_gemm(s, qf, aQ, wg, k_tile(j));
        wgmma_commit();
        turn_pass(wg, false);
        wgmma_wait<0>();
        wgmma_hold(s);
        mbar_arrive(empty_k(bars, ring + j));
    };
    // one round of O += P(j) V(j) alone, waited for, V released
    auto pv_round = [&](int j) {
        tile_wait(full_v(bars, ring + j), ring + j);
        turn_take(wg);
        wgmma_hold(acc);
        hold_p(pa);
        wgmma_fence();
        pv_gemm(acc, pa, v_tile(j));
        wgmma_commit();
        turn_pass(wg, j + 1 == steps);
        wgmma_wait<0>();
        wgmma_hold(acc);
        mbar_arrive(empty_v(bars, ring + j));
    };

#if OVERLAP
    if (steps > 0) {  // S(0) and its softmax alone; O is 0, nothing to rescale
        s_round(0);
        softmax(0);
        probs_to_a(s, pa);
    }
    // S(j + 1) with P(j) V(j): no branch between the issues and the waits (a wgmma issued
    // under a condition makes ptxas serialise them all), the last P V peeled off below
    for (int j = 0; j + 1 < steps; ++j) {
        tile_wait(full_k(bars, ring + j + 1), ring + j + 1);
        tile_wait(full_v(bars, ring + j), ring + j);
        turn_take(wg);
        wgmma_hold(acc);
        hold_p(pa);
        wgmma_fence();
        s_gemm(s, qf, aQ, wg, k_tile(j + 1));
        wgmma_commit();
        rescale_rows(acc, c);  // c(j), from softmax(j): O up to step j - 1 onto step j's maxima
        wgmma_hold(acc);       // the multiplies before the fence (volatile asm keeps the order)
        wgmma_fence();         // registers written by this thread, then read by P(j) V(j)
        pv_gemm(acc, pa, v_tile(j));
        wgmma_commit();
        turn_pass(wg, false);
        wgmma_wait<1>();  // S(j + 1) done, P(j) V(j) may still fly
        wgmma_hold(s);
        mbar_arrive(empty_k(bars, ring + j + 1));
        softmax(j + 1);
        wgmma_wait<0>();
        wgmma_hold(acc);
        wgmma_hold(s);  // P(j + 1) into pa only after P(j) V(j), which reads pa, is done
        mbar_arrive(empty_v(bars, ring + j));
        probs_to_a(s, pa);
    }
    if (steps > 0) {
        rescale_rows(acc, c);  // c(steps - 1)
        pv_round(steps - 1);
    }
#else
    for (int j = 0; j < steps; ++j) {
        s_round(j);
        softmax(j);
        rescale_rows(acc, c);
        probs_to_a(s, pa);
        pv_round(j);
    }
#endif
    // O through this warp's own 16 rows of sQ (its warpgroup's S GEMMs are all done), then out
    store_o_rows<BR, HEAD_DIM>(acc, l, sQ, rows.o, warp, q0, seq_q, lane);
    }  // the tile loop
}
