// Host stand-ins for paprof_kernels/flash_fwd/flash_common.cuh (compiled with
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
#include <chrono>
#include <condition_variable>
#include <limits>
#include <map>
#include <mutex>
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
    int thread;  // the CUDA thread that issued it
};
inline thread_local std::vector<Copy> open_group;
inline thread_local std::vector<std::vector<Copy>> committed;

// The async proxy (wgmma's reads of shared memory) sees a generic-proxy write only after a
// fence.proxy.async ordered after it: by the thread whose cp.async wrote the chunk (then a
// barrier), or by the reading thread itself once the write is visible to it (after the
// mbarrier wait that acquired it). Logical time: clock ticks at every copy performed and
// every fence; chunk_time / chunk_thread say when and by whose cp.async a 16-byte chunk was
// last written (0: never by a cp.async; plain stores are not tracked: no kernel here
// writes a tile wgmma reads with them), fence_time a thread's last fence. inflight counts
// the in-flight wgmma (issued, not yet retired) that read a chunk: a copy landing in one
// is an error (the tile was refilled before the wgmma that reads it was waited for).
inline std::atomic<unsigned long long> clock{0};
inline std::unique_ptr<std::atomic<unsigned long long>[]> chunk_time;
inline std::unique_ptr<std::atomic<int>[]> chunk_thread, inflight;
inline std::unique_ptr<std::atomic<unsigned long long>[]> fence_time;
inline size_t writer_chunks = 0;
// warpgroup barriers (128 threads each), for the warpgroup collectives of wgmma_emulate.h
inline std::vector<std::unique_ptr<std::barrier<>>> warpgroups;
// wgmma.mma_async operations issued and not yet waited for, this thread
inline thread_local int wgmma_pending = 0;

inline void perform(const Copy& c);

// ---- mbarriers and named barriers -----------------------------------------------------
// An mbarrier (PTX ISA, "Parallel Synchronization and Communication Instructions: mbarrier"):
// an expected count and a pending count per phase; the phase completes when pending reaches
// 0 (phase number + 1, pending = expected again). try_wait.parity p succeeds once the
// current phase's parity differs from p (the phase of parity p has completed). cp.async's
// .noinc arrive-on counts as one of the phase's expected arrivals; its copies land (in the
// default, deferred mode) when that phase completes, the latest the ISA allows, so a
// consumer that reads a tile without waiting for the phase reads the old tile. A wait
// that sees no progress for 20 s aborts (a deadlock). Named barriers (bar.sync / bar.arrive
// id, count): a generation completes when count threads have arrived.
// The transaction count (PTX ISA, "mbarrier: tx-count"): expect_tx raises the current
// phase's, complete_tx (a cp.async.bulk's bytes landing) lowers it; the phase completes when
// the pending arrivals and the tx-count are both 0 (the count may go below 0 for a while: a
// copy completing before its expect_tx). TmaChunk: 16 bytes a cp.async.bulk.tensor writes,
// read from global memory when issued, landing (deferred mode) when the phase completes.
struct TmaChunk {
    unsigned char* dst;
    unsigned char data[16];
};
struct MBar {
    std::mutex m;
    std::condition_variable cv;
    int expected = 0, pending = 0;
    long long tx = 0;
    unsigned long long phase = 0;
    std::vector<Copy> copies;  // landing when the current phase completes
    std::vector<TmaChunk> tma;  // likewise (TMA's copies, through the async proxy)
    bool named = false;
};
inline void perform_tma(const TmaChunk& c);
inline std::mutex barriers_lock;
inline std::map<long, std::unique_ptr<MBar>> barriers;  // smem offset (mbarriers), -id (named)
inline void begin_barriers() { barriers.clear(); }
inline MBar& barrier_at(long key, bool create) {
    std::lock_guard<std::mutex> g(barriers_lock);
    auto it = barriers.find(key);
    if (it == barriers.end()) {
        if (!create) fail("mbarrier used before mbarrier.init");
        it = barriers.emplace(key, std::make_unique<MBar>()).first;
    }
    return *it->second;
}
// one arrival, the lock held; completes the phase on the last
inline void complete_if_done(MBar& b) {
    if (b.pending == 0 && b.tx == 0) {
        for (auto& c : b.copies) perform(c);
        b.copies.clear();
        for (auto& c : b.tma) perform_tma(c);
        b.tma.clear();
        ++b.phase;
        b.pending = b.expected;
        b.cv.notify_all();
    }
}
inline void arrive_locked(MBar& b) {
    if (b.pending <= 0) fail("barrier arrival with no pending count");
    --b.pending;
    complete_if_done(b);
}
// the ISA's tx-count range: -(2^20 - 1) .. 2^20 - 1
inline void tx_locked(MBar& b, long long bytes) {
    b.tx += bytes;
    if (b.tx >= (1 << 20) || b.tx <= -(1 << 20)) fail("mbarrier tx-count outside the ISA's range");
}
template <class Pred>
inline void wait_locked(MBar& b, std::unique_lock<std::mutex>& lk, Pred done, const char* what) {
    while (!done())
        if (b.cv.wait_for(lk, std::chrono::seconds(20)) == std::cv_status::timeout && !done()) fail(what);
}

// Set up the per-CTA state above: called by the driver for each CTA before its threads start.
inline void begin_cta(size_t smem_bytes, int threads) {
    writer_chunks = smem_bytes / 16;
    chunk_time = std::make_unique<std::atomic<unsigned long long>[]>(writer_chunks);
    chunk_thread = std::make_unique<std::atomic<int>[]>(writer_chunks);
    inflight = std::make_unique<std::atomic<int>[]>(writer_chunks);
    for (size_t i = 0; i < writer_chunks; ++i) chunk_time[i] = 0, chunk_thread[i] = -1, inflight[i] = 0;
    fence_time = std::make_unique<std::atomic<unsigned long long>[]>(threads);
    for (int t = 0; t < threads; ++t) fence_time[t] = 0;
    begin_barriers();
    warpgroups.clear();
    for (int w = 0; w < threads / 128; ++w) warpgroups.push_back(std::make_unique<std::barrier<>>(128));
}

inline void perform(const Copy& c) {
    const size_t chunk = size_t(static_cast<unsigned char*>(c.dst) - cta().smem.data()) / 16;
    if (chunk < writer_chunks && inflight[chunk] > 0)
        fail("a cp.async landed in a tile an in-flight wgmma reads (refilled before its wgmma.wait_group)");
    std::memset(c.dst, 0, 16);
    if (c.bytes) std::memcpy(c.dst, c.src, c.bytes);
    if (chunk < writer_chunks) {
        chunk_thread[chunk] = c.thread;
        chunk_time[chunk] = ++clock;
    }
}

// A TMA write: no generic-proxy write (chunk_time 0: wgmma may read it with no proxy fence)
inline void perform_tma(const TmaChunk& c) {
    const size_t chunk = size_t(c.dst - cta().smem.data()) / 16;
    if (chunk < writer_chunks && inflight[chunk] > 0)
        fail("a cp.async.bulk.tensor landed in a tile an in-flight wgmma reads (refilled before its wgmma.wait_group)");
    std::memcpy(c.dst, c.data, 16);
    if (chunk < writer_chunks) {
        chunk_thread[chunk] = -1;
        chunk_time[chunk] = 0;
    }
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
    flash_emu::Copy c{dst_smem, src, src_bytes, int(threadIdx.x)};
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

// cp.async.wait_all: every copy of this thread, committed or not
FLASH_DEVICE void cp_async_wait_all() {
    cp_async_commit();
    cp_async_wait<0>();
}

FLASH_DEVICE unsigned pack2(float lo, float hi) {
    return unsigned(flash_emu::to16(lo)) | (unsigned(flash_emu::to16(hi)) << 16);
}
