// One emulated wgmma.mma_async (wgmma_emulate.h) against a plain matrix product, on
// operands laid out by hand from the PTX ISA's pictures, not by the emulator's or the
// kernel's functions. Built by tests/test_flash_emulated.py with
//   g++ -std=c++20 -DFLASH_EMULATE -DDTYPE=2 -I<family> -I<here> wgmma_unit.cpp
// and run as `wgmma_unit CASE`: one warpgroup (128 threads) issues one m64nNk16 with A in
// registers and B in shared memory, and the program prints the largest error against
// A x B in float64. CASE names the layout; the "bad_*" cases break one thing on purpose
// (the test expects those to print a large error, or the emulator to abort). "ss" takes A
// from shared memory (K-major, laid out as the K-major B); "wait1" commits two groups and
// checks, after wgmma.wait_group 1, that the first is done and the second still in flight
// (its accumulators NaN); "bad_write_in_flight" and "bad_a_changed" touch the accumulators
// / the A registers between the issue and the wait (the emulator must abort).
//
// The pictures, for 16-bit elements:
//  - 128-byte swizzle: a 1024-byte block of 8 rows of 128 bytes; in row r, the 16-byte
//    chunk c holds what an unswizzled layout puts at chunk c ^ r.
//  - B K-major (imm-trans-b 0): row n of B (its k values) is a 128-byte swizzle row; the
//    rows of one 8-row block are consecutive; 8-row blocks are SBO apart.
//  - B N-major (imm-trans-b 1): k row of B holds 64 n values in a 128-byte swizzle row;
//    the 8 k rows of a block are consecutive; blocks of 8 k are SBO apart, blocks of 64 n
//    LBO apart.
//  - A, .m64nNk16: warp w has rows 16w..16w+15; its lane (g = lane / 4, t = lane % 4)
//    holds in register 0 (row g, cols 2t, 2t+1), 1 (row g+8, the same cols), 2 (row g,
//    cols 2t+8, 2t+9), 3 (row g+8, cols 2t+8, 2t+9), the lower column in the low half.
//  - D: lane (g, t) of warp w holds d[4j + e] at row 16w + g + 8 (e / 2), column
//    8j + 2t + (e % 2).
#include "flash_common.cuh"
#include "flash_wgmma.cuh"

#include <cstdio>
#include <string>
#include <thread>

namespace {

float value(int i, int j, int salt) { return float(((i * 7 + j * 13 + salt) % 17) - 8) / 8.f; }  // exact in 16 bits

unsigned short bits_of(float x) { return flash_emu::to16(x); }

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) return 2;
    const std::string which = argv[1];
    const bool nmajor = which == "nmajor" || which.rfind("bad_nmajor", 0) == 0;  // B's layout
    const bool ss = which == "ss" || which == "bad_ss_sbo";                     // A from shared memory
    const int N = nmajor ? 128 : 64;
    constexpr int K = 16;
    // shared memory: 64 KiB, tiles from a 1024-byte boundary of the window
    const size_t bytes = 65536 + 2048;
    flash_emu::Cta cta(bytes, 128);
    flash_emu::current = &cta;
    flash_emu::begin_cta(bytes, 128);
    blockDim = {128, 1, 1};
    gridDim = {1, 1, 1};
    blockIdx = {0, 0, 0};
    unsigned char* smem = cta.smem.data();
    std::memset(smem, 0x7F, bytes);  // poison: large bf16 / fp16 values everywhere unwritten
    const unsigned base_addr = smem_addr(smem);
    const unsigned pad = (1024 - (base_addr & 1023)) & 1023;
    unsigned char* tile = smem + pad;  // window address a multiple of 1024
    const unsigned tile_addr = base_addr + pad;

    float A[64][K], B[K][128];
    for (int i = 0; i < 64; ++i)
        for (int k = 0; k < K; ++k) A[i][k] = value(i, k, 1);
    for (int k = 0; k < K; ++k)
        for (int n = 0; n < N; ++n) B[k][n] = value(k, n, 5);

    unsigned long long desc = 0;
    auto put = [&](size_t at, float x) { const unsigned short b = bits_of(x); std::memcpy(tile + at, &b, 2); };
    auto field = [](unsigned x) { return (unsigned long long)((x & 0x3FFFF) >> 4); };
    int trans = 0;
    if (!nmajor) {
        // K-major B: 64 rows (n) of 128-byte swizzle rows, 8-row blocks SBO = 2048 apart (a
        // gap of 1024 poisoned bytes between them); the 16 k values are chunks 4, 5 of the row
        // (the third 32-byte slice: the descriptor starts 64 bytes into the block)
        const unsigned sbo = which == "bad_kmajor_sbo" ? 1024 : 2048;
        for (int n = 0; n < N; ++n)
            for (int k = 0; k < K; ++k) {
                const int chunk = 4 + k / 8;
                const int stored = which == "bad_kmajor_noswizzle" ? chunk : chunk ^ (n % 8);
                put(size_t(n / 8) * 2048 + (n % 8) * 128 + stored * 16 + (k % 8) * 2, B[k][n]);
            }
        desc = field(tile_addr + 64) | (field(16) << 16) | (field(sbo) << 32) | (1ull << 62);
        trans = which == "bad_kmajor_as_nmajor" ? 1 : 0;
    } else {
        // N-major B: k rows of 64 n (a 128-byte swizzle row), 8 k rows a block, the two
        // blocks of k SBO = 1024 apart, the two blocks of 64 n LBO = 4096 apart
        const unsigned lbo = which == "bad_nmajor_lbo_sbo_swapped" ? 1024 : 4096;
        const unsigned sbo = which == "bad_nmajor_lbo_sbo_swapped" ? 4096 : 1024;
        for (int k = 0; k < K; ++k)
            for (int n = 0; n < N; ++n) {
                const int chunk = (n % 64) / 8;
                put(size_t(n / 64) * 4096 + size_t(k / 8) * 1024 + (k % 8) * 128 + (chunk ^ (k % 8)) * 16 + (n % 8) * 2,
                    B[k][n]);
            }
        desc = field(tile_addr) | (field(lbo) << 16) | (field(sbo) << 32) | (1ull << 62);
        trans = which == "bad_nmajor_as_kmajor" ? 0 : 1;
    }

    unsigned long long desc_a = 0;
    if (ss) {
        // A K-major at tile + 32 KiB: row m is a 128-byte swizzle row (its 16 k values in
        // chunks 2, 3: the descriptor starts 32 bytes in), 8-row blocks 1024 apart
        const unsigned sbo = which == "bad_ss_sbo" ? 2048 : 1024;
        for (int m = 0; m < 64; ++m)
            for (int k = 0; k < K; ++k) {
                const int chunk = 2 + k / 8;
                put(32768 + size_t(m / 8) * 1024 + (m % 8) * 128 + (chunk ^ (m % 8)) * 16 + (k % 8) * 2, A[m][k]);
            }
        desc_a = field(tile_addr + 32768 + 32) | (field(16) << 16) | (field(sbo) << 32) | (1ull << 62);
    }

    float D[128][64] = {};
    std::vector<std::thread> pool;
    for (int tid = 0; tid < 128; ++tid) {
        pool.emplace_back([&, tid] {
            threadIdx = {unsigned(tid), 0, 0};
            const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4, row = 16 * w + g;
            const int rows[4] = {row, row + 8, row, row + 8};
            const int cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
            unsigned a[4];
            for (int j = 0; j < 4; ++j) {
                int r = rows[j], c = cols[j];
                if (which == "bad_a_fragment") r = rows[j ^ 1], c = cols[j ^ 1];  // rows g, g+8 swapped
                a[j] = unsigned(bits_of(A[r][c])) | (unsigned(bits_of(A[r][c + 1])) << 16);
            }
            float d[64], d2[64];
            for (int i = 0; i < 64; ++i) d[i] = 1000.f, d2[i] = 0.f;  // scale-d 0: d never read
            if (which != "bad_no_fence") wgmma_fence();
            if (ss) {
                float (&d32)[32] = *reinterpret_cast<float (*)[32]>(d);
                wgmma_m64n64_ss<0>(d32, desc_a, desc, 0);
            } else if (N == 64) {
                float (&d32)[32] = *reinterpret_cast<float (*)[32]>(d);
                if (trans) wgmma_m64n64<1>(d32, a, desc, 0); else wgmma_m64n64<0>(d32, a, desc, 0);
            } else {
                if (trans) wgmma_m64n128<1>(d, a, desc, 0); else wgmma_m64n128<0>(d, a, desc, 0);
            }
            wgmma_commit();
            if (which == "wait1") {  // a second group, d2 += A B twice: still in flight after wait 1
                float (&e32)[32] = *reinterpret_cast<float (*)[32]>(d2);
                wgmma_m64n64<0>(e32, a, desc, 1);
                wgmma_m64n64<0>(e32, a, desc, 1);
                wgmma_commit();
            }
            if (which == "bad_write_in_flight") d[0] = 0.f;
            if (which == "bad_a_changed") a[1] ^= 1u;
            float early[64];
            std::memcpy(early, d, sizeof d);  // what a read before the wait sees
            if (which == "wait1") {
                wgmma_wait<1>();
                for (int i = 0; i < 32; ++i)
                    if (d2[i] == d2[i]) d[0] = 1e30f;  // the second group's accumulators must be NaN
                std::memcpy(early, d, sizeof d);
            }
            wgmma_wait<0>();
            const float* got = which == "bad_read_before_wait" || which == "wait1" ? early : d;
            for (int i = 0; i < N / 2; ++i)
                D[tid][i] = got[i];
            if (which == "wait1")
                for (int i = 0; i < N / 2; ++i)
                    if (d2[i] != 2 * got[i]) D[tid][i] = 1e30f;  // twice the product
        });
    }
    for (auto& th : pool) th.join();

    double worst = 0;
    for (int tid = 0; tid < 128; ++tid) {
        const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
        for (int i = 0; i < N / 2; ++i) {
            const int row = 16 * w + g + 8 * ((i / 2) % 2), col = 8 * (i / 4) + 2 * t + (i % 2);
            double want = 0;
            for (int k = 0; k < K; ++k) want += double(A[row][k]) * double(B[k][col]);
            const double e = std::abs(want - double(D[tid][i]));
            worst = std::max(worst, e <= 1e30 ? e : 1e30);  // NaN: a read before the wait
        }
    }
    std::printf("%.6g\n", worst);
    return 0;
}
