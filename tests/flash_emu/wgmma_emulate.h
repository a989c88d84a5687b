// Host stand-ins for paprof/families/flash_fwd/flash_wgmma.cuh (Hopper's warpgroup MMA),
// written from the PTX ISA (section "Asynchronous Warpgroup Level Matrix Multiply-
// Accumulate": register fragments of .m64nNk16, the matrix descriptor format, the shared
// memory matrix layouts and strides, wgmma.fence / commit_group / wait_group), not from
// the kernel's encoding functions: a wrong descriptor, swizzle or fragment in the kernel
// gives wrong numbers here.
//
// wgmma.mma_async is deferred, as on the GPU: it is recorded when issued and computed
// when a wgmma.wait_group retires its group, reading the A registers, B in shared memory
// and the accumulators then. So a kernel that reads the accumulators before the wait, or
// overwrites A or B's tile before it, computes with the wrong values. Checked as errors:
// an mma_async with no wgmma.fence since the thread's last wait (or since it started); a
// descriptor with reserved bits set, a swizzle other than 128-byte or a base offset
// (not modelled); reads outside shared memory; reads of a 16-byte chunk written by a
// cp.async whose thread has not yet run fence.proxy.async; the 128 threads of a
// warpgroup disagreeing on the instruction (shape, transpose, scale-d, descriptor);
// operations never committed or waited for (the driver).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

namespace flash_emu {

// The shared-memory window address of dynamic shared memory's first byte: on purpose not
// a multiple of 1024 (the 128-byte swizzle's period), so a kernel must align its tiles.
constexpr unsigned SHARED_WINDOW_BASE = 0x0410;

struct WgmmaOp {
    int n;                 // N of m64nNk16
    int trans_b;           // imm-trans-b: 0 K-major, 1 N-major
    int scale_d;           // 0: D = A B, 1: D = A B + D
    unsigned long long desc_b;
    const unsigned* a;     // this thread's 4 A registers (read at the wait)
    float* d;              // this thread's N/2 accumulators
};
inline thread_local bool wgmma_fenced = false;
inline thread_local std::vector<WgmmaOp> wgmma_open;
inline thread_local std::deque<std::vector<WgmmaOp>> wgmma_groups;
inline std::vector<const std::vector<WgmmaOp>*> wgmma_slots(1024);

inline const unsigned char* shared_at(unsigned addr, size_t bytes) {
    auto& s = cta().smem;
    if (addr < SHARED_WINDOW_BASE || addr - SHARED_WINDOW_BASE + bytes > s.size())
        fail("wgmma reads outside shared memory");
    const size_t off = addr - SHARED_WINDOW_BASE;
    if (off / 16 < writer_chunks && writer[off / 16] != -1)
        fail("wgmma reads a chunk a cp.async wrote, before that thread's fence.proxy.async");
    return s.data() + off;
}

// The PTX ISA's matrix descriptor: bits 13-0 start address >> 4, 29-16 leading dimension
// byte offset >> 4, 45-32 stride dimension byte offset >> 4, 51-49 base offset, 63-62
// swizzle mode (0 none, 1 128-byte, 2 64-byte, 3 32-byte); every other bit reserved.
struct Desc {
    unsigned start, lbo, sbo, base_offset, swizzle;
};
inline Desc decode(unsigned long long d) {
    const unsigned long long reserved = (3ull << 14) | (3ull << 30) | (7ull << 46) | (0x3FFull << 52);
    if (d & reserved) fail("wgmma descriptor: reserved bits set");
    Desc x{unsigned(d & 0x3FFF) << 4, unsigned((d >> 16) & 0x3FFF) << 4, unsigned((d >> 32) & 0x3FFF) << 4,
           unsigned((d >> 49) & 7), unsigned(d >> 62)};
    if (x.swizzle != 1) fail("wgmma descriptor: only the 128-byte swizzle is modelled");
    if (x.base_offset != 0) fail("wgmma descriptor: a base offset is not modelled");
    return x;
}

// 128-byte swizzle (the ISA's pattern: 8 rows of 128 bytes repeating every 1024 bytes):
// the 16-byte chunk of an address, bits 6-4, is XORed with its row in the pattern, bits 9-7.
inline unsigned swizzle128(unsigned addr) { return addr ^ (((addr >> 7) & 7) << 4); }

// Element (k, n) of B (16 x N, 16-bit) by the ISA's canonical layouts for the 128-byte
// swizzle, in units of 16 bytes (T = 8 elements): K-major ((8,m),(T,2)) : ((8T,SBO),(1,T))
// - row n of B is its 16 k values, contiguous, rows 128 bytes apart in a group of 8, the
// groups SBO apart (LBO unused); N-major ((T,8,m),(8,2)) : ((1,T,LBO),(8T,SBO)) - 64 n
// values contiguous (128 bytes), the k rows 128 bytes apart in a group of 8, the groups
// of 8 k SBO apart, the next 64 n LBO on.
inline float b_element(const Desc& x, int trans_b, int k, int n) {
    unsigned addr;
    if (!trans_b)
        addr = x.start + unsigned(n / 8) * x.sbo + unsigned(n % 8) * 128 + unsigned(k) * 2;
    else
        addr = x.start + unsigned(n / 64) * x.lbo + unsigned(n % 64) * 2 + unsigned(k % 8) * 128 +
               unsigned(k / 8) * x.sbo;
    unsigned short bits;
    std::memcpy(&bits, shared_at(swizzle128(addr), 2), 2);
    return from16(bits);
}

// Retire one group: every thread of the warpgroup computes its own accumulators from the
// whole warpgroup's A fragments (a warpgroup collective: all 128 threads call it).
inline void retire(const std::vector<WgmmaOp>& group) {
    const int me = int(threadIdx.x), wg = me / 128, base = wg * 128;
    wgmma_slots[me] = &group;
    warpgroups[wg]->arrive_and_wait();
    for (size_t i = 0; i < group.size(); ++i) {
        const WgmmaOp& op = group[i];
        for (int x = base; x < base + 128; ++x) {
            const auto& other = *wgmma_slots[x];
            if (other.size() != group.size() || other[i].n != op.n || other[i].trans_b != op.trans_b ||
                other[i].scale_d != op.scale_d || other[i].desc_b != op.desc_b)
                fail("the threads of a warpgroup issued different wgmma.mma_async");
        }
        // A (64 x 16) from the ISA's .m64nNk16 A fragments: warp w of the warpgroup holds
        // rows 16w..16w+15; in it lane l (g = l / 4, t = l % 4) holds a0,a1 = (g, 2t..2t+1),
        // a2,a3 = (g+8, 2t..), a4,a5 = (g, 2t+8..), a6,a7 = (g+8, 2t+8..), two a register,
        // the lower element in the lower half
        float A[64][16];
        for (int x = 0; x < 128; ++x) {
            const unsigned* r = (*wgmma_slots[base + x])[i].a;
            const int w = x / 32, g = (x % 32) / 4, t = x % 4, row = 16 * w + g;
            const int rows[4] = {row, row + 8, row, row + 8}, cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
            for (int j = 0; j < 4; ++j) {
                A[rows[j]][cols[j]] = lo(r[j]);
                A[rows[j]][cols[j] + 1] = hi(r[j]);
            }
        }
        const Desc x = decode(op.desc_b);
        // D (64 x N) from the ISA's accumulator fragment: warp w rows 16w..16w+15; lane l
        // holds d[4j + e] = row g + 8 (e / 2), column 8j + 2t + (e % 2)
        const int w = (me % 128) / 32, g = (me % 32) / 4, t = me % 4;
        for (int r = 0; r < op.n / 2; ++r) {
            const int row = 16 * w + g + 8 * ((r / 2) % 2), col = 8 * (r / 4) + 2 * t + (r % 2);
            double sum = op.scale_d ? op.d[r] : 0.0;
            for (int kk = 0; kk < 16; ++kk) sum += double(A[row][kk]) * double(b_element(x, op.trans_b, kk, col));
            op.d[r] = float(sum);
        }
    }
    warpgroups[wg]->arrive_and_wait();
}

template <int N>
inline void issue(float* d, const unsigned (&a)[4], unsigned long long desc_b, int trans_b, int accumulate) {
    if (!wgmma_fenced) fail("wgmma.mma_async without a wgmma.fence since the last wait");
    if (warpgroups.size() * 128 <= threadIdx.x) fail("wgmma.mma_async outside a whole warpgroup");
    wgmma_open.push_back({N, trans_b, accumulate != 0, desc_b, a, d});
    ++wgmma_pending;
}

}  // namespace flash_emu

FLASH_DEVICE unsigned smem_addr(const void* p) {
    flash_emu::check_smem(p, 1, 1);
    return flash_emu::SHARED_WINDOW_BASE + unsigned(static_cast<const unsigned char*>(p) - flash_emu::cta().smem.data());
}

FLASH_DEVICE void wgmma_fence() { flash_emu::wgmma_fenced = true; }

FLASH_DEVICE void wgmma_commit() {
    flash_emu::wgmma_groups.push_back(std::move(flash_emu::wgmma_open));
    flash_emu::wgmma_open.clear();
}

template <int N>
FLASH_DEVICE void wgmma_wait() {
    auto& groups = flash_emu::wgmma_groups;
    while (groups.size() > size_t(N)) {
        flash_emu::retire(groups.front());
        flash_emu::wgmma_pending -= int(groups.front().size());
        groups.pop_front();
    }
    flash_emu::wgmma_fenced = false;  // registers the kernel now touches need a new fence
}

template <int R>
FLASH_DEVICE void wgmma_hold(float (&)[R]) {}
template <int R>
FLASH_DEVICE void wgmma_hold(unsigned (&)[R]) {}

FLASH_DEVICE void fence_proxy_async() {
    const int me = int(threadIdx.x);
    for (size_t i = 0; i < flash_emu::writer_chunks; ++i) {
        int expected = me;
        flash_emu::writer[i].compare_exchange_strong(expected, -1);
    }
}

template <int TRANS_B>
FLASH_DEVICE void wgmma_m64n64(float (&d)[32], const unsigned (&a)[4], unsigned long long desc_b, int accumulate) {
    flash_emu::issue<64>(d, a, desc_b, TRANS_B, accumulate);
}

template <int TRANS_B>
FLASH_DEVICE void wgmma_m64n128(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b, int accumulate) {
    flash_emu::issue<128>(d, a, desc_b, TRANS_B, accumulate);
}
