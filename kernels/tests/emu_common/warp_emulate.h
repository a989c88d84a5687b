// What the CPU emulations of the kernels share (kernels/tests/flash_emu, kernels/tests/paged_emu): CUDA's
// grid variables and vector types, a CTA as one std::thread per CUDA thread (the CTAs one
// after another), warp collectives exchanged through memory between two warp barriers,
// 16-bit elements and mma.m16n8k16 computed from the PTX ISA's fragment layouts.
//
// The includer defines EMU_BF16 first: 1 when the 16-bit elements are bf16, 0 for fp16.
#pragma once

#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#ifndef EMU_BF16
#error "define EMU_BF16 (1: bf16 elements, 0: fp16) before including warp_emulate.h"
#endif

struct emu_dim3 {
    unsigned x = 0, y = 0, z = 0;
};
inline emu_dim3 gridDim, blockDim, blockIdx;  // one CTA at a time
inline thread_local emu_dim3 threadIdx;

struct float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct uint2 {
    unsigned x, y;
};
struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }

namespace warp_emu {

[[noreturn]] inline void fail(const char* what) {
    std::fprintf(stderr, "emulation: %s (block %u,%u,%u thread %u)\n", what, blockIdx.x, blockIdx.y, blockIdx.z,
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
#if !EMU_BF16
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
#if !EMU_BF16
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

// PTX ISA, mma .m16n8k16 with .f16/.bf16 A and B, .f32 C and D; groupID g = lane / 4,
// threadID_in_group t = lane % 4:
//   A (16x16, row): a0,a1 (g, 2t+{0,1}), a2,a3 (g+8, 2t+{0,1}), a4,a5 (g, 2t+8+{0,1}),
//                   a6,a7 (g+8, 2t+8+{0,1}); two elements a register, the lower first
//   B (16x8, col):  b0,b1 (k 2t+{0,1}, n g), b2,b3 (k 2t+8+{0,1}, n g)
//   C, D (16x8):    c0,c1 (g, 2t+{0,1}), c2,c3 (g+8, 2t+{0,1})
// A warp collective: every lane of the warp calls it.
struct MmaLane {
    unsigned a[4];
    unsigned b[2];
    float c[4];
};
inline void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
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

}  // namespace warp_emu
