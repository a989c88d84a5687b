// Host stand-ins for paprof/families/flash_fwd/flash_common.cuh (compiled with
// -DFLASH_EMULATE by tests/test_flash_emulated.py): the family's kernels run unchanged on
// the CPU, one std::thread per CUDA thread of a CTA, the CTAs one after another.
//
// Warp collectives (ldmatrix, mma, shuffles) exchange every lane's operands through
// memory between two warp barriers and compute each lane's result from the PTX ISA's
// definitions of the fragments (written here from the ISA, not from the kernels'
// address arithmetic, so the kernels' indexing is what is tested). cp.async copies are
// performed when waited for (deferred, the default: a missing wait reads stale data) or
// when issued (eager: a copy into a buffer another warp still reads shows up). Every
// shared-memory access through these functions is bounds- and alignment-checked, and
// every global read of a cp.async must lie inside a registered input.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#define EMU_BF16 (DTYPE == 2)
#include "../emu_common/warp_emulate.h"

using std::max;
using std::min;

#define __global__
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define FLASH_DEVICE static inline
#define FLASH_SHARED_BYTES(name) unsigned char* name = flash_emu::cta().smem.data()

namespace flash_emu {

using namespace warp_emu;  // fail, Cta, cta(), lane(), warp(), exchange, to16

inline bool eager = false;

struct Range {
    const unsigned char* lo;
    size_t bytes;
};
inline std::vector<Range> inputs;  // where cp.async may read

inline void check_smem(const void* p, size_t bytes, size_t align) {
    auto* c = static_cast<const unsigned char*>(p);
    auto& s = cta().smem;
    if (c < s.data() || c + bytes > s.data() + s.size()) fail("shared-memory access out of bounds");
    if ((reinterpret_cast<uintptr_t>(c) - reinterpret_cast<uintptr_t>(s.data())) % align)
        fail("misaligned shared-memory access");
}

inline void check_input(const void* p, size_t bytes) {
    auto* c = static_cast<const unsigned char*>(p);
    for (auto& r : inputs)
        if (c >= r.lo && c + bytes <= r.lo + r.bytes) return;
    fail("cp.async reads outside every input");
}

struct Copy {
    void* dst;
    const void* src;
    int bytes;
};
inline thread_local std::vector<Copy> open_group;
inline thread_local std::vector<std::vector<Copy>> committed;

// The async proxy (wgmma's reads of shared memory) sees a generic-proxy write only after
// the writer's fence.proxy.async: writer[chunk] is the thread whose cp.async last wrote
// that 16-byte chunk and has not fenced since, -1 when none. (Plain stores are not
// tracked: no kernel here writes a tile wgmma reads with them.)
inline std::unique_ptr<std::atomic<int>[]> writer;
inline size_t writer_chunks = 0;
// warpgroup barriers (128 threads each), for the warpgroup collectives of wgmma_emulate.h
inline std::vector<std::unique_ptr<std::barrier<>>> warpgroups;
// wgmma.mma_async operations issued and not yet waited for, this thread
inline thread_local int wgmma_pending = 0;

// Set up the per-CTA state above: called by the driver for each CTA before its threads start.
inline void begin_cta(size_t smem_bytes, int threads) {
    writer_chunks = smem_bytes / 16;
    writer = std::make_unique<std::atomic<int>[]>(writer_chunks);
    for (size_t i = 0; i < writer_chunks; ++i) writer[i] = -1;
    warpgroups.clear();
    for (int w = 0; w < threads / 128; ++w) warpgroups.push_back(std::make_unique<std::barrier<>>(128));
}

inline void perform(const Copy& c) {
    std::memset(c.dst, 0, 16);
    if (c.bytes) std::memcpy(c.dst, c.src, c.bytes);
    const size_t chunk = size_t(static_cast<unsigned char*>(c.dst) - cta().smem.data()) / 16;
    if (chunk < writer_chunks) writer[chunk] = int(threadIdx.x);
}

}  // namespace flash_emu

FLASH_DEVICE float neg_inf() { return -std::numeric_limits<float>::infinity(); }
FLASH_DEVICE float fast_exp2(float x) { return std::exp2(x); }
FLASH_DEVICE void block_sync() { flash_emu::cta().block->arrive_and_wait(); }
FLASH_DEVICE void __syncwarp() { flash_emu::cta().warps[flash_emu::warp()]->arrive_and_wait(); }

FLASH_DEVICE float shfl_xor(float v, int mask) {
    float all[32];
    flash_emu::exchange(v, all);
    return all[flash_emu::lane() ^ mask];
}

FLASH_DEVICE void cp_async16(void* dst_smem, const void* src, int src_bytes) {
    flash_emu::check_smem(dst_smem, 16, 16);
    if (src_bytes != 0 && src_bytes != 16) flash_emu::fail("cp.async of a partial vector");
    if (src_bytes) {
        flash_emu::check_input(src, 16);
        if (reinterpret_cast<uintptr_t>(src) % 16) flash_emu::fail("misaligned cp.async source");
    }
    flash_emu::Copy c{dst_smem, src, src_bytes};
    if (flash_emu::eager)
        flash_emu::perform(c);
    else
        flash_emu::open_group.push_back(c);
}

FLASH_DEVICE void cp_async_commit() {
    flash_emu::committed.push_back(std::move(flash_emu::open_group));
    flash_emu::open_group.clear();
}

template <int N>
FLASH_DEVICE void cp_async_wait() {
    auto& groups = flash_emu::committed;
    while (groups.size() > size_t(N)) {
        for (auto& c : groups.front()) flash_emu::perform(c);
        groups.erase(groups.begin());
    }
}

// PTX ISA, ldmatrix .m8n8 .x4 .b16: lanes 8i..8i+7 address the rows of matrix i; lane l
// receives row l/4, elements 2(l%4) and 2(l%4)+1 of each matrix (transposed: rows
// 2(l%4) and 2(l%4)+1 of column l/4).
inline void emu_ldsm(unsigned (&r)[4], const void* row, bool trans) {
    flash_emu::check_smem(row, 16, 16);
    const void* rows[32];
    flash_emu::exchange(row, rows);
    const int l = flash_emu::lane();
    for (int i = 0; i < 4; ++i) {
        auto at = [&](int rr, int cc) {
            return static_cast<const unsigned short*>(rows[8 * i + rr])[cc];
        };
        unsigned a, b;
        if (!trans) {
            a = at(l / 4, 2 * (l % 4));
            b = at(l / 4, 2 * (l % 4) + 1);
        } else {
            a = at(2 * (l % 4), l / 4);
            b = at(2 * (l % 4) + 1, l / 4);
        }
        r[i] = a | (b << 16);
    }
}
FLASH_DEVICE void ldsm_x4(unsigned (&r)[4], const void* row) { emu_ldsm(r, row, false); }
FLASH_DEVICE void ldsm_x4_trans(unsigned (&r)[4], const void* row) { emu_ldsm(r, row, true); }

// mma .m16n8k16, f32 accumulators (warp_emulate.h, from the PTX ISA's fragments)
FLASH_DEVICE void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    warp_emu::mma_16816(d, a, b0, b1);
}

FLASH_DEVICE unsigned pack2(float lo, float hi) {
    return unsigned(flash_emu::to16(lo)) | (unsigned(flash_emu::to16(hi)) << 16);
}
