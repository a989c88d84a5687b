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

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

using std::max;
using std::min;

struct emu_dim3 {
    unsigned x = 0, y = 0, z = 0;
};
inline emu_dim3 gridDim, blockDim, blockIdx;  // one CTA at a time
inline thread_local emu_dim3 threadIdx;

struct float4 {
    float x, y, z, w;
};
struct uint4 {
    unsigned x, y, z, w;
};

#define __global__
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define FLASH_DEVICE static inline
#define FLASH_SHARED_BYTES(name) unsigned char* name = flash_emu::cta().smem.data()

namespace flash_emu {

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "emulation: %s (block %u,%u thread %u)\n", what, blockIdx.x, blockIdx.y,
                 threadIdx.x);
    std::abort();
}

struct Cta {
    std::vector<unsigned char> smem;
    std::unique_ptr<std::barrier<>> block;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::vector<unsigned char> slots;  // warps x 32 lanes x 64 bytes
    Cta(size_t smem_bytes, int threads) : smem(smem_bytes, 0xA5) {
        block = std::make_unique<std::barrier<>>(threads);
        for (int w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<std::barrier<>>(32));
        slots.resize(size_t(threads) * 64);
    }
};
inline Cta* current = nullptr;
inline Cta& cta() { return *current; }

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

inline void perform(const Copy& c) {
    std::memset(c.dst, 0, 16);
    if (c.bytes) std::memcpy(c.dst, c.src, c.bytes);
}

inline int lane() { return threadIdx.x % 32; }
inline int warp() { return threadIdx.x / 32; }

// every lane's value of `mine`, in lane order
template <class T>
inline void exchange(const T& mine, T (&all)[32]) {
    static_assert(sizeof(T) <= 64, "a slot holds 64 bytes");
    auto& c = cta();
    unsigned char* base = c.slots.data() + size_t(warp()) * 32 * 64;
    std::memcpy(base + lane() * 64, &mine, sizeof(T));
    c.warps[warp()]->arrive_and_wait();
    for (int i = 0; i < 32; ++i) std::memcpy(&all[i], base + i * 64, sizeof(T));
    c.warps[warp()]->arrive_and_wait();
}

inline float from16(unsigned short bits) {
#if DTYPE == 1
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    return float(h);
#else
    unsigned u = unsigned(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
#endif
}

inline unsigned short to16(float x) {
#if DTYPE == 1
    _Float16 h = _Float16(x);  // round to nearest even
    unsigned short bits;
    std::memcpy(&bits, &h, 2);
    return bits;
#else
    unsigned u;
    std::memcpy(&u, &x, 4);
    u += ((u >> 16) & 1) + 0x7FFF;  // round to nearest even (no NaN here)
    return static_cast<unsigned short>(u >> 16);
#endif
}

inline float lo(unsigned r) { return from16(static_cast<unsigned short>(r & 0xFFFF)); }
inline float hi(unsigned r) { return from16(static_cast<unsigned short>(r >> 16)); }

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

// PTX ISA, mma .m16n8k16 with .f16/.bf16 A and B, .f32 C and D; groupID g = lane / 4,
// threadID_in_group t = lane % 4:
//   A (16x16, row): a0,a1 (g, 2t+{0,1}), a2,a3 (g+8, 2t+{0,1}), a4,a5 (g, 2t+8+{0,1}),
//                   a6,a7 (g+8, 2t+8+{0,1}); two elements a register, the lower first
//   B (16x8, col):  b0,b1 (k 2t+{0,1}, n g), b2,b3 (k 2t+8+{0,1}, n g)
//   C, D (16x8):    c0,c1 (g, 2t+{0,1}), c2,c3 (g+8, 2t+{0,1})
struct MmaLane {
    unsigned a[4];
    unsigned b[2];
    float c[4];
};
FLASH_DEVICE void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    using namespace flash_emu;
    MmaLane mine{{a[0], a[1], a[2], a[3]}, {b0, b1}, {d[0], d[1], d[2], d[3]}};
    MmaLane all[32];
    exchange(mine, all);
    float A[16][16], B[16][8], C[16][8];
    for (int L = 0; L < 32; ++L) {
        const int g = L / 4, t = L % 4;
        const MmaLane& x = all[L];
        A[g][2 * t] = lo(x.a[0]);
        A[g][2 * t + 1] = hi(x.a[0]);
        A[g + 8][2 * t] = lo(x.a[1]);
        A[g + 8][2 * t + 1] = hi(x.a[1]);
        A[g][2 * t + 8] = lo(x.a[2]);
        A[g][2 * t + 9] = hi(x.a[2]);
        A[g + 8][2 * t + 8] = lo(x.a[3]);
        A[g + 8][2 * t + 9] = hi(x.a[3]);
        B[2 * t][g] = lo(x.b[0]);
        B[2 * t + 1][g] = hi(x.b[0]);
        B[2 * t + 8][g] = lo(x.b[1]);
        B[2 * t + 9][g] = hi(x.b[1]);
        C[g][2 * t] = x.c[0];
        C[g][2 * t + 1] = x.c[1];
        C[g + 8][2 * t] = x.c[2];
        C[g + 8][2 * t + 1] = x.c[3];
    }
    const int g = lane() / 4, t = lane() % 4;
    auto dot = [&](int r, int n) {
        double s = C[r][n];
        for (int kk = 0; kk < 16; ++kk) s += double(A[r][kk]) * double(B[kk][n]);
        return float(s);
    };
    d[0] = dot(g, 2 * t);
    d[1] = dot(g, 2 * t + 1);
    d[2] = dot(g + 8, 2 * t);
    d[3] = dot(g + 8, 2 * t + 1);
}

FLASH_DEVICE unsigned pack2(float lo, float hi) {
    return unsigned(flash_emu::to16(lo)) | (unsigned(flash_emu::to16(hi)) << 16);
}
