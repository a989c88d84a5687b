// Host stand-ins for the CUDA builtins and PTX helpers of paprof_kernels/paged_decode/
// v5_mma.cu (the register feed, FEED 1) and fast_common.cuh, so that v5/v6's tensor-core
// kernel runs unchanged on the CPU (compiled with -DPAGED_EMULATE by
// tests/test_paged_emulated.py; common.cuh includes this file first): one std::thread per
// CUDA thread of a CTA, the CTAs one after another.
//
// Warp collectives (mma, shuffles, votes) exchange every lane's operands through memory
// between two warp barriers (tests/emu_common/warp_emulate.h, shared with flash_emu) and
// compute each lane's result from the PTX ISA's definitions (mma.m16n8k16's fragments,
// cvt's packings: written from the ISA, not from the kernel's index arithmetic, so the
// kernel's indexing is what is tested). Every global load of the register feed must lie
// inside the K or V cache, aligned, in a row of the CTA's own KV head, sequence, tokens
// and split (from the block table, not from the kernel's arithmetic), and marks the bytes
// it read (the test checks that every byte of every token attended to was read).
// __shared__ arrays are static (one CTA at a time); the dynamic area is the CTA's, poisoned.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#ifndef KV_DTYPE
#error "the emulation needs KV_DTYPE (1 fp16, 2 bf16, 3 fp8)"
#endif
#if !defined(FEED) || !FEED
#error "the emulation covers the register feed (FEED 1) only"
#endif
#if defined(TIMELINE) && TIMELINE
#error "no TIMELINE in the emulation"
#endif

#ifndef WORK_ITEM_INTS
#define WORK_ITEM_INTS 8  // fast_common.cuh's (the same definition, repeated there)
#endif

#define EMU_BF16 (KV_DTYPE == 2)  // the mma's elements: fp16 for fp16 and fp8, bf16 for bf16
#include "../emu_common/warp_emulate.h"

#define __global__
#define __device__ static
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
#define FAST_DYNAMIC_SMEM(type, name) type* const name = reinterpret_cast<type*>(paged_emu::cta().smem.data())

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}
inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }

namespace paged_emu {

using namespace warp_emu;  // fail, Cta, cta(), lane(), warp(), exchange, lo, hi, to16

// The caches the register feed may read, each with a byte map of what was read.
struct Cache {
    const unsigned char* lo = nullptr;
    size_t bytes = 0;
    std::vector<std::atomic<unsigned char>>* seen = nullptr;
};
inline Cache caches[2];

// The caches' layout, [pages][page_size][kv_heads][row_bytes], and which sequence and
// logical page each physical page is (from the block table): a CTA (KV head x, sequence
// y, split z) may read only its head's rows of its sequence's tokens in its split's pages;
// with WORKLIST (v7: y is a work item) only those of its item's sequence and pages;
// WORKLIST 2 (packed: CTA y's items are item y, then each item's next, int 6) those of the
// item the thread is on, which must be the CTA's next in that chain (the kernel names it
// through paged_emu_item).
struct Layout {
    int page_size = 0, kv_heads = 0, row_bytes = 0;
    std::vector<int> seq_of_page, logical_of_page, lens;
    const int* items = nullptr;  // WORKLIST: the host's work list (WORK_ITEM_INTS an item)
    int n_items = 0;             // WORKLIST 2: items in the list
};
inline Layout layout;
inline thread_local int current_item = -1;  // WORKLIST 2: the item this thread works on

inline const int* cta_item() {
#if WORKLIST == 2
    if (current_item < 0) fail("a load before the CTA's first item");
    return layout.items + size_t(WORK_ITEM_INTS) * size_t(current_item);
#else
    return layout.items + size_t(WORK_ITEM_INTS) * blockIdx.y;
#endif
}

inline void check_owner(size_t at) {
    const Layout& L = layout;
    const size_t row = at / size_t(L.row_bytes);
    const int head = int(row % size_t(L.kv_heads));
    const size_t token_row = row / size_t(L.kv_heads);
    const size_t page = token_row / size_t(L.page_size);
    const int slot = int(token_row % size_t(L.page_size));
    if (head != int(blockIdx.x)) fail("a load from another KV head's row");
#if WORKLIST
    const int* item = cta_item();  // sequence, first page, end page
    const int seq = item[0];
#else
    const int seq = int(blockIdx.y);
#endif
    if (page >= L.seq_of_page.size() || L.seq_of_page[page] != seq)
        fail("a load from a page of another sequence");
    const int logical = L.logical_of_page[page], ctx = L.lens[size_t(seq)];
    if (logical * L.page_size + slot >= ctx) fail("a load of a token past the sequence's end");
#if WORKLIST
    if (logical < item[1] || logical >= item[2]) fail("a load of a page outside the CTA's work item");
#else
    const int pages = (ctx + L.page_size - 1) / L.page_size;
    const int per_split = (pages + int(gridDim.z) - 1) / int(gridDim.z);
    if (logical / per_split != int(blockIdx.z)) fail("a load of a page outside the CTA's split");
#endif
}

inline void global_load(void* dst, const unsigned char* p, size_t bytes) {
    for (auto& c : caches) {
        if (c.lo && p >= c.lo && p + bytes <= c.lo + c.bytes) {
            const size_t at = size_t(p - c.lo);
            if (at % bytes) fail("misaligned vector load");  // (a GPU allocation starts 256-byte aligned)
            check_owner(at);
            check_owner(at + bytes - 1);
            for (size_t i = 0; i < bytes; ++i) (*c.seen)[at + i].store(1, std::memory_order_relaxed);
            std::memcpy(dst, p, bytes);
            return;
        }
    }
    fail("register-feed load outside the K and V caches");
}

inline void full_mask(unsigned mask) {
    if (mask != 0xffffffffu) fail("a warp collective with a partial mask");
}

// One e4m3 byte (1 sign, 4 exponent bits of bias 7, 3 mantissa bits; S.1111.111 is NaN,
// no infinities) as the fp16 bit pattern of the same value (exact: fp16 holds every e4m3
// value, subnormals included).
inline unsigned short e4m3_to_f16(unsigned char b) {
    const int e = (b >> 3) & 15, m = b & 7;
    if (e == 15 && m == 7) return 0x7FFF;  // NaN
    const float mag = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(float(8 + m), e - 10);
    const _Float16 h = _Float16((b & 0x80) ? -mag : mag);
    unsigned short bits;
    std::memcpy(&bits, &h, 2);
    return bits;
}

}  // namespace paged_emu

#if WORKLIST == 2
// fast_common.cuh's hook: the packed kernel names each item as it starts it; anything but
// the CTA's next item (item y first, then each item's int 6) fails
void paged_emu_item(int index) {
    const int cur = paged_emu::current_item;
    const int want = cur < 0 ? int(blockIdx.y) : paged_emu::layout.items[size_t(WORK_ITEM_INTS) * size_t(cur) + 6];
    if (index != want || index < 0 || index >= paged_emu::layout.n_items)
        paged_emu::fail("an item that is not the CTA's next (outside its chain, or out of order)");
    paged_emu::current_item = index;
}
#endif

#define FULL_MASK 0xffffffffu

inline void __syncthreads() { paged_emu::cta().block->arrive_and_wait(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline int atomicAdd(int* p, int v) { return std::atomic_ref<int>(*p).fetch_add(v); }

inline float __shfl_sync(unsigned mask, float v, int src) {
    paged_emu::full_mask(mask);
    float all[32];
    paged_emu::exchange(v, all);
    return all[src & 31];
}
inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
    paged_emu::full_mask(mask);
    float all[32];
    paged_emu::exchange(v, all);
    return all[(paged_emu::lane() ^ lane_mask) & 31];
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
    paged_emu::full_mask(mask);
    int all[32];
    paged_emu::exchange(pred, all);
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= unsigned(all[i] != 0) << i;
    return r;
}
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }

// CUDA's __byte_perm(x, y, s): byte n of the result is byte (s >> 4n) & 7 of the eight
// bytes y:x (x's bytes 0..3, y's 4..7).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
    unsigned r = 0;
    for (int n = 0; n < 4; ++n) r |= unsigned((bytes >> (8 * ((s >> (4 * n)) & 7))) & 0xFF) << (8 * n);
    return r;
}

// -- the PTX helpers of v5_mma.cu (FEED 1) and fast_common.cuh -------------------------------

// mma16's `mma.sync.aligned.m16n8k16.row.col.f32.{f16|bf16}` (warp_emulate.h, from the
// PTX ISA's fragments)
inline void mma16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {
    const unsigned a[4] = {a0, a1, a2, a3};
    warp_emu::mma_16816(d, a, b0, b1);
}

// pack2's `cvt.rn.f16x2.f32 d, x1, x0` (bf16x2 for bf16): PTX ISA, the first source goes
// to the upper half of d, the second to the lower half.
inline unsigned pack2(float x0, float x1) {
    return unsigned(paged_emu::to16(x0)) | (unsigned(paged_emu::to16(x1)) << 16);
}

// unpack2's `mov.b32 {a, b}, w`: a is the lower half.
inline float2 unpack2(unsigned w) { return make_float2(paged_emu::lo(w), paged_emu::hi(w)); }

// e4m3x4_to_f16x2's `mov.b32 {a, b}, w; cvt.rn.f16x2.e4m3x2 lo, a; cvt.rn.f16x2.e4m3x2 hi, b`:
// a = bytes 0, 1 of w, b = bytes 2, 3; PTX ISA (and cuda_fp8.hpp's host path of
// __nv_cvt_fp8x2_to_halfraw2): the upper half of the destination comes from the upper
// byte of the source.
inline void e4m3x4_to_f16x2(unsigned w, unsigned& lo, unsigned& hi) {
    using paged_emu::e4m3_to_f16;
    lo = unsigned(e4m3_to_f16(w & 0xFF)) | (unsigned(e4m3_to_f16((w >> 8) & 0xFF)) << 16);
    hi = unsigned(e4m3_to_f16((w >> 16) & 0xFF)) | (unsigned(e4m3_to_f16(w >> 24)) << 16);
}

inline uint4 lds16(const uint4* p) {
    if (reinterpret_cast<uintptr_t>(p) % 16) paged_emu::fail("misaligned shared-memory load");
    return *p;
}

inline uint4 load16(const unsigned char* p) {
    uint4 v;
    paged_emu::global_load(&v, p, 16);
    return v;
}

inline uint4 load8(const unsigned char* p) {
    uint2 v;
    paged_emu::global_load(&v, p, 8);
    return make_uint4(v.x, v.y, 0u, 0u);
}

inline float load_l2(const float* p) { return *p; }
inline float4 load_l2(const float4* p) {
    if (reinterpret_cast<uintptr_t>(p) % 16) paged_emu::fail("misaligned float4 load");
    return *p;
}
