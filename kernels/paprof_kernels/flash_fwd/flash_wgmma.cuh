// The Hopper (sm_90a) helpers of the flash_fwd family's wgmma kernels (wgmma.cu, wgmma2.cu):
// warpgroup MMA (wgmma.mma_async with A in registers or, SS, in shared memory, B in shared
// memory, both through matrix descriptors), its fence / commit / wait, the async-proxy fence,
// the 128-byte-swizzled tile layout and its descriptors, mbarriers (init / arrive / wait on
// a phase parity, cp.async's arrive-on) and named barriers. It compiles for sm_90a alone
// (catalog.WGMMA_ARCH). With FLASH_EMULATE defined, tests/flash_emu/wgmma_emulate.h
// supplies the instructions for the host, decoding the descriptors and fragments from the
// PTX ISA's text, not from this file; the layout functions below are shared by both.
#pragma once

#include "flash_common.cuh"

#ifndef FLASH_EMULATE

#if DTYPE == 1
#define WGMMA_AB ".f16.f16"
#else
#define WGMMA_AB ".bf16.bf16"
#endif

// Before the first wgmma.mma_async after registers it reads (A, the accumulators) were
// written by other instructions.
FLASH_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

// The wgmma.mma_async issued so far, and not yet committed, become one group.
FLASH_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// Wait until at most N of this warpgroup's committed groups are pending.
template <int N>
FLASH_DEVICE void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

// The accumulator operands of an m64n64 (32 registers) / m64n128 (64) wgmma: text and constraints.
#define WGMMA_D32_TEXT "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define WGMMA_D64_TEXT "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define WGMMA_D8(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WGMMA_D32(d) WGMMA_D8(d, 0), WGMMA_D8(d, 8), WGMMA_D8(d, 16), WGMMA_D8(d, 24)
#define WGMMA_D64(d) WGMMA_D32(d), WGMMA_D8(d, 32), WGMMA_D8(d, 40), WGMMA_D8(d, 48), WGMMA_D8(d, 56)

// Keep the compiler from moving reads or writes of the accumulators across a fence / wait.
template <int R>
FLASH_DEVICE void wgmma_hold(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The same for A fragments in registers (P): computed before the wgmma.fence, not sunk past it.
template <int R>
FLASH_DEVICE void wgmma_hold(unsigned (&a)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// This thread's generic-proxy writes to shared memory (cp.async, st.shared) become visible
// to the async proxy, which wgmma reads shared memory through.
FLASH_DEVICE void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// D (64 x 64, fp32) = A (64 x 16, registers) x B (16 x 64, shared memory through desc_b)
// (+ D when accumulate != 0); TRANS_B 0: B K-major, 1: B N-major (transposed).
template <int TRANS_B>
FLASH_DEVICE void wgmma_m64n64(float (&d)[32], const unsigned (&a)[4], unsigned long long desc_b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32" WGMMA_AB " " WGMMA_D32_TEXT
                 ", {%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"
                 : WGMMA_D32(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B), "r"(accumulate));
}

// D (64 x 128, fp32) = A (64 x 16, registers) x B (16 x 128, shared memory through desc_b)
// (+ D when accumulate != 0); TRANS_B 0: B K-major, 1: B N-major (transposed).
template <int TRANS_B>
FLASH_DEVICE void wgmma_m64n128(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %70, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32" WGMMA_AB " " WGMMA_D64_TEXT
                 ", {%64, %65, %66, %67}, %68, p, 1, 1, %69;\n}\n"
                 : WGMMA_D64(d)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B), "r"(accumulate));
}

// The same with A (64 x 16, K-major) in shared memory too, through desc_a (SS).
template <int TRANS_B>
FLASH_DEVICE void wgmma_m64n64_ss(float (&d)[32], unsigned long long desc_a, unsigned long long desc_b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %35, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32" WGMMA_AB " " WGMMA_D32_TEXT
                 ", %32, %33, p, 1, 1, 0, %34;\n}\n"
                 : WGMMA_D32(d)
                 : "l"(desc_a), "l"(desc_b), "n"(TRANS_B), "r"(accumulate));
}
template <int TRANS_B>
FLASH_DEVICE void wgmma_m64n128_ss(float (&d)[64], unsigned long long desc_a, unsigned long long desc_b, int accumulate) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %67, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32" WGMMA_AB " " WGMMA_D64_TEXT
                 ", %64, %65, p, 1, 1, 0, %66;\n}\n"
                 : WGMMA_D64(d)
                 : "l"(desc_a), "l"(desc_b), "n"(TRANS_B), "r"(accumulate));
}

// ---- mbarriers and named barriers (wgmma2's producer / consumer pipeline) ------------
// An mbarrier (8 bytes of shared memory at window address bar) expecting count arrivals a phase.
FLASH_DEVICE void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// The initialisations visible to the async proxy (cp.async's arrive-on) before the CTA's barrier.
FLASH_DEVICE void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// One arrival of this thread on the current phase (release semantics).
FLASH_DEVICE void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Wait until the phase of parity `parity` has completed (acquire semantics): phase 0 first.
FLASH_DEVICE void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
// An arrival on bar when every cp.async this thread issued before it has landed; .noinc:
// the barrier's count must include it (no pending arrival is added).
FLASH_DEVICE void cp_async_mbar_arrive(unsigned bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// Every cp.async of this thread landed (committed or not).
FLASH_DEVICE void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
// The warpgroup's registers a thread raised / lowered to N (a multiple of 8, 24..256).
template <int N>
FLASH_DEVICE void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N>
FLASH_DEVICE void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
// x as lane 0 has it: the compiler then knows a branch on it is uniform across the warp.
FLASH_DEVICE int warp_uniform(int x) { return __shfl_sync(0xffffffffu, x, 0); }
// Named barrier `id` (1..15; 0 is __syncthreads) of `count` threads: wait for them / only arrive.
FLASH_DEVICE void named_sync(int id, int count) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory"); }
FLASH_DEVICE void named_arrive(int id, int count) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory"); }

// ---- TMA: cp.async.bulk.tensor into shared memory, completing on an mbarrier -----------
// One arrival on bar (release) that first raises its current phase's expected transaction
// count by `bytes`: the phase completes once every arrival came and that many bytes landed.
FLASH_DEVICE void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// The tensor map at generic address `map` (128 bytes of global memory the host wrote) ordered
// before this thread's tensormap-proxy reads of it (the ISA's acquire for a map in .global).
FLASH_DEVICE void tensormap_acquire(const void* map) {
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;" ::"l"(map) : "memory");
}
// The box of tensor map `map` at coordinates (x, y, z) (dimension 0 innermost) into shared
// memory at window address dst, in the map's swizzle; elements outside the tensor are zeros.
// It completes the box's bytes as transactions on the mbarrier at bar.
FLASH_DEVICE void tma_load_3d(unsigned dst, const void* map, int x, int y, int z, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst), "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar)
                 : "memory");
}
#else
#include "wgmma_emulate.h"
#endif

// ---- The 128-byte-swizzled tiles and their descriptors (shared with the emulation) ----
#define WGMMA_ATOM 128     // bytes of an atom row (64 16-bit columns)
#define WGMMA_PERIOD 1024  // bytes of the swizzle's period (8 atom rows)

// The layout function: byte offset of element (r, c) in a [ROWS][dims] tile under the
// 128-byte swizzle. Atom a = c / 64 holds columns 64a..64a+63 of every row, ROWS x 128
// bytes; in it row r is 128 bytes at r * 128, chunk (c % 64) / 8 at ((c % 64) / 8 ^ r % 8).
template <int ROWS>
FLASH_DEVICE int tile_offset(int r, int c) {
    return (c >> 6) * (ROWS * WGMMA_ATOM) + r * WGMMA_ATOM + ((((c >> 3) & 7) ^ (r & 7)) << 4) + ((c & 7) << 1);
}

// The first byte at or after p on the swizzle's 1024-byte period (the dynamic shared
// window need not start on one; the tiles must).
FLASH_DEVICE unsigned char* period_aligned(unsigned char* p) {
    return p + ((WGMMA_PERIOD - (smem_addr(p) & (WGMMA_PERIOD - 1))) & (WGMMA_PERIOD - 1));
}

// A wgmma matrix descriptor, 128-byte swizzle: start address, leading and stride byte
// offsets (each >> 4, 14 bits), base offset 0 (every tile starts on a 1024-byte boundary).
FLASH_DEVICE unsigned long long sw128_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) |
           ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}

// A K-major operand from a [ROWS][dims] tile, k16 step kk, rows row0..row0+63 (A) or the
// tile's rows as N (B of S = Q K^T): 8-row groups PERIOD bytes apart (SBO), dims
// 16kk..16kk+15 inside one atom row (its 32-byte slice kk % 4 of atom kk / 4); a K-major
// swizzled layout has no leading offset (the ISA: "assumed 1").
//
// DESC_ADD 1: the tile's descriptor plus the offset's 16-byte units, instead of a descriptor
// built from each operand's address: the same 64-bit value (the tile is 16-byte aligned and
// tile + offset stays below 256 KiB, so the 14-bit address field cannot carry), one add an
// operand once the tile's own descriptor is known (the compiler cannot see that the masks
// and shifts of sw128_desc distribute over the sum).
#ifndef DESC_ADD
#define DESC_ADD 0
#endif
template <int ROWS>
FLASH_DEVICE unsigned long long kmajor_desc(unsigned tile, int row0, int kk) {
    constexpr unsigned K_LBO = 16, K_SBO = WGMMA_PERIOD;
#if DESC_ADD
    return sw128_desc(tile, K_LBO, K_SBO) + (unsigned)(tile_offset<ROWS>(row0, kk * 16) >> 4);
#else
    return sw128_desc(tile + tile_offset<ROWS>(row0, kk * 16), K_LBO, K_SBO);
#endif
}

// B of O += P V from a [ROWS][dims] V tile, k16 step kk: keys 16kk..16kk+15 as K (8-row
// groups PERIOD bytes apart: SBO), the dims as N, contiguous in atom rows of 64 (N-major);
// the next 64 dims are the next atom, ROWS rows on (LBO).
template <int ROWS>
FLASH_DEVICE unsigned long long nmajor_desc(unsigned tile, int kk) {
    constexpr unsigned N_LBO = ROWS * WGMMA_ATOM, N_SBO = WGMMA_PERIOD;
#if DESC_ADD
    return sw128_desc(tile, N_LBO, N_SBO) + (unsigned)(tile_offset<ROWS>(kk * 16, 0) >> 4);
#else
    return sw128_desc(tile + tile_offset<ROWS>(kk * 16, 0), N_LBO, N_SBO);
#endif
}

// ---- Online softmax on wgmma's accumulator fragments (m64nNk16, R = N / 2 registers) ----
// s[4n + e]: key 8n + 2t + (e & 1) of the tile, row g + 8 (e >> 1) of the warp's 16.

// Scores of keys past seq_k or (causal) past a row's diagonal to -inf; k0 is the tile's
// first key, row0 / row1 the query rows g and g + 8, offset = seq_k - seq_q.
template <int R>
FLASH_DEVICE void mask_scores(float (&s)[R], int k0, int t, int row0, int row1, int seq_k, int causal, int offset) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
        const int key = k0 + (i / 4) * 8 + 2 * t + (i & 1);
        const int row = (i & 2) ? row1 : row0;
        if (key >= seq_k || (causal && key > row + offset)) s[i] = neg_inf();
    }
}

// One key tile of the online softmax, base 2 (x = s * scale_log2): the running max m and
// this lane's share l of the running sum of rows g (index 0) and g + 8 (1) are updated,
// the scores become the probabilities 2^(x - m) in place, and c gets the factors the
// output accumulators must be multiplied by.
// FAST_MAX 1: each row's maximum of the raw scores in two independent chains, scaled once
// (scale_log2 > 0 and rounding is monotonic, so max(s) x scale is max(s x scale) exactly):
// R - 4 FMNMX and 2 FMUL a row pair instead of R / 2 FMUL and 3R / 4 FMNMX in two serial chains.
#ifndef FAST_MAX
#define FAST_MAX 0
#endif
template <int R>
FLASH_DEVICE void scores_to_probs(float (&s)[R], float scale_log2, float (&m)[2], float (&l)[2], float (&c)[2]) {
#if FAST_MAX
    float a0 = s[0], b0 = s[1], a1 = s[2], b1 = s[3];
#pragma unroll
    for (int i = 4; i < R; i += 4) {
        a0 = fmaxf(a0, s[i]);
        b0 = fmaxf(b0, s[i + 1]);
        a1 = fmaxf(a1, s[i + 2]);
        b1 = fmaxf(b1, s[i + 3]);
    }
    const float mx0 = fmaxf(a0, b0) * scale_log2, mx1 = fmaxf(a1, b1) * scale_log2;
#else
    float mx0 = neg_inf(), mx1 = neg_inf();
#pragma unroll
    for (int i = 0; i < R; i += 4) {
        mx0 = fmaxf(mx0, fmaxf(s[i], s[i + 1]) * scale_log2);
        mx1 = fmaxf(mx1, fmaxf(s[i + 2], s[i + 3]) * scale_log2);
    }
#endif
    const float base0 = softmax_step(m[0], l[0], mx0, c[0]), base1 = softmax_step(m[1], l[1], mx1, c[1]);
#pragma unroll
    for (int i = 0; i < R; i += 4) {
        s[i] = fast_exp2(s[i] * scale_log2 - base0);
        s[i + 1] = fast_exp2(s[i + 1] * scale_log2 - base0);
        s[i + 2] = fast_exp2(s[i + 2] * scale_log2 - base1);
        s[i + 3] = fast_exp2(s[i + 3] * scale_log2 - base1);
        l[0] += s[i] + s[i + 1];
        l[1] += s[i + 2] + s[i + 3];
    }
}

// P as A fragments of m64nNk16: k16 step kk is the n8 blocks 2kk (a0..a3: rows g, g + 8)
// and 2kk + 1 (a4..a7) of the probabilities, the registers in the accumulators' order.
template <int R>
FLASH_DEVICE void probs_to_a(const float (&p)[R], unsigned (&pa)[R / 8][4]) {
#pragma unroll
    for (int i = 0; i < R; i += 4) {
        pa[i / 8][(i / 4) % 2 * 2] = pack2(p[i], p[i + 1]);          // row g, keys 8(i/4) + 2t, +1
        pa[i / 8][(i / 4) % 2 * 2 + 1] = pack2(p[i + 2], p[i + 3]);  // row g + 8
    }
}

// The output accumulators times the rows' factors c (index 0: row g, 1: row g + 8).
template <int R>
FLASH_DEVICE void rescale_rows(float (&acc)[R], const float (&c)[2]) {
#pragma unroll
    for (int i = 0; i < R; i += 4) {
        acc[i] *= c[0];
        acc[i + 1] *= c[0];
        acc[i + 2] *= c[1];
        acc[i + 3] *= c[1];
    }
}

// A warp's 16 rows of O (its accumulators over the rows' sums l) staged through its own
// rows of the swizzled [ROWS][DIM] tile `stage` (only this warp reads or writes them
// now), then out to the head's rows oh as 16-byte rows; rows past seq_q are not written.
template <int ROWS, int DIM, int R>
FLASH_DEVICE void store_o_rows(const float (&acc)[R], const float (&l)[2], unsigned char* stage, unsigned short* oh,
                               int warp, int q0, int seq_q, int lane) {
    const float inv0 = softmax_inverse(l[0]), inv1 = softmax_inverse(l[1]);
    const int g = lane / 4, t = lane % 4, r0 = warp * 16 + g, r1 = r0 + 8;
#pragma unroll
    for (int i = 0; i < R; i += 4) {
        const int c = (i / 4) * 8 + 2 * t;
        *reinterpret_cast<unsigned*>(stage + tile_offset<ROWS>(r0, c)) = pack2(acc[i] * inv0, acc[i + 1] * inv0);
        *reinterpret_cast<unsigned*>(stage + tile_offset<ROWS>(r1, c)) = pack2(acc[i + 2] * inv1, acc[i + 3] * inv1);
    }
    __syncwarp();
    store_warp_rows<DIM>(oh, reinterpret_cast<const unsigned short*>(stage),
                         [](int r, int c) { return tile_offset<ROWS>(r, c) / 2; }, warp * 16, q0, seq_q, lane);
}
