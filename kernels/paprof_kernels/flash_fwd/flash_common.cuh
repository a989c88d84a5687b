// The flash_fwd family's device helpers: every PTX instruction the kernels use sits
// behind one of these functions.
//
// Compiled at run time by NVRTC (CuPy) and by nvcc in CI, so it includes no header:
// everything is a builtin. With FLASH_EMULATE defined, tests/flash_emulate.h supplies the
// same functions for the host instead (a thread per CUDA thread, warp collectives
// exchanged through memory, from the PTX ISA's definitions of ldmatrix and mma), so the
// kernels' index arithmetic runs, unchanged, on a machine with no GPU.
//
// 16-bit elements (fp16 or bf16, DTYPE 1 or 2) are moved as unsigned short bit patterns;
// only pack2 (two floats to one 32-bit register of two elements) and the mma know which.
#pragma once

#ifndef DTYPE
#define DTYPE 2  // 1 fp16, 2 bf16 (the tensor-core kernels); the handbook is fp32 only
#endif

#define FLASH_LOG2E 1.4426950408889634f

#ifndef FLASH_EMULATE

#define FLASH_DEVICE __device__ __forceinline__
#define FLASH_SHARED_BYTES(name) extern __shared__ __align__(16) unsigned char name[]

FLASH_DEVICE float neg_inf() { return __int_as_float(0xff800000); }

// 2^x, the SFU's approximation (relative error ~2^-22); 2^-inf = +0.
FLASH_DEVICE float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

FLASH_DEVICE void block_sync() { __syncthreads(); }

FLASH_DEVICE float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }

FLASH_DEVICE unsigned smem_addr(const void* ptr) {
    unsigned addr;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(addr) : "l"(ptr));
    return addr;
}

// 16 bytes global -> shared, not through L1; src_bytes 0 writes 16 zero bytes and reads nothing.
FLASH_DEVICE void cp_async16(void* dst_smem, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
                 ::"r"(smem_addr(dst_smem)), "l"(src), "r"(src_bytes) : "memory");
}

FLASH_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Wait until at most N of this thread's committed groups are still in flight.
template <int N>
FLASH_DEVICE void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// Four 8x8 matrices of 16-bit elements; lanes 8i..8i+7 give the row addresses of matrix i.
// Lane l receives, of matrix i, row l/4, columns 2(l%4) and 2(l%4)+1 in r[i].
FLASH_DEVICE void ldsm_x4(unsigned (&r)[4], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(row)));
}

// The same, transposed: lane l receives rows 2(l%4) and 2(l%4)+1 of column l/4.
FLASH_DEVICE void ldsm_x4_trans(unsigned (&r)[4], const void* row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(row)));
}

// D = A B + D for one m16n8k16 tile: A 16x16 (row), B 16x8 (col), fp32 accumulators.
FLASH_DEVICE void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if DTYPE == 1
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#endif
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats rounded to nearest into one register: lo in bits 0..15, hi in 16..31.
FLASH_DEVICE unsigned pack2(float lo, float hi) {
    unsigned r;
#if DTYPE == 1
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

#else
#include "flash_emulate.h"
#endif

// The head and query tile a CTA of grid (query tiles, batch * q_heads) owns: its row block
// bh = b * q_heads + h of Q and O, the K/V head h reads under GQA (q_heads / kv_heads query
// heads share one), and its query tile, reversed when causal so the longest rows start first.
struct FlashCta {
    int bh, kvh, tile;
};
FLASH_DEVICE FlashCta flash_cta(int q_heads, int kv_heads, int causal) {
    const int bh = blockIdx.y, b = bh / q_heads;
    const int x = blockIdx.x, last = gridDim.x - 1;
    return {bh, b * kv_heads + (bh - b * q_heads) / (q_heads / kv_heads), causal ? last - x : x};
}

// The rows a CTA reads and writes: Q and O of its head, K and V of its K/V head (every
// tensor [heads][seq][DIM], contiguous).
template <class T>
struct HeadRows {
    const T *q, *k, *v;
    T* o;
};
template <int DIM, class T>
FLASH_DEVICE HeadRows<T> head_rows(const T* q, const T* k, const T* v, T* o, FlashCta c, int seq_q, int seq_k) {
    const size_t qo = (size_t)c.bh * seq_q * DIM, kv = (size_t)c.kvh * seq_k * DIM;
    return {q + qo, k + kv, v + kv, o + qo};
}

// Two m16n8k16 tiles sharing A: d0 += A (b[0], b[1]), d1 += A (b[2], b[3]), the four
// registers of one ldmatrix.x4 of two n8 tiles.
FLASH_DEVICE void mma_16816_x2(float (&d0)[4], float (&d1)[4], const unsigned (&a)[4], const unsigned (&b)[4]) {
    mma_16816(d0, a, b[0], b[1]);
    mma_16816(d1, a, b[2], b[3]);
}

// A tile of br queries from q0 against keys in steps of bc: keys at or past the tile's end
// (causal: past the diagonal of its last query) are masked for all of its queries and
// never loaded; first_masked is the first step that needs a mask: it crosses the diagonal
// of the tile's first query (q0 + offset, offset = seq_k - seq_q) or holds keys past seq_k.
struct KeySteps {
    int steps, first_masked;
};
FLASH_DEVICE KeySteps key_steps(int q0, int br, int bc, int seq_k, int offset, int causal) {
    const int key_end = causal ? min(seq_k, q0 + br + offset) : seq_k;
    return {(key_end + bc - 1) / bc, causal ? (q0 + offset + 1) / bc : seq_k / bc};
}

// A warp's 16 rows of O, staged in shared memory (element at(r, c) of staged holds row r,
// column c of the CTA's tile), out to the head's rows oh as 16-byte chunks; rows past
// seq_q are not written.
template <int DIM, class T, class At>
FLASH_DEVICE void store_warp_rows(T* oh, const T* staged, At at, int r0, int q0, int seq_q, int lane) {
    constexpr int chunks = DIM / 8;
#pragma unroll
    for (int i = lane; i < 16 * chunks; i += 32) {
        const int r = r0 + i / chunks, c = (i % chunks) * 8;
        if (q0 + r < seq_q)
            *reinterpret_cast<uint4*>(oh + (size_t)(q0 + r) * DIM + c) =
                *reinterpret_cast<const uint4*>(staged + at(r, c));
    }
}

// ---- Online softmax on the accumulator fragments (mma, wgmma) -----------------------
// The 4 lanes that hold one row of an accumulator fragment (lanes 4g..4g+3) share its
// max and sum through two shuffles.
FLASH_DEVICE float quad_max(float x) {
    x = fmaxf(x, shfl_xor(x, 1));
    return fmaxf(x, shfl_xor(x, 2));
}
FLASH_DEVICE float quad_sum(float x) {
    x += shfl_xor(x, 1);
    return x + shfl_xor(x, 2);
}

// One key step of a row's online softmax (base 2, scores scaled): m is the running max,
// l this lane's share of the running sum, lane_max the largest scaled score of the step
// in this lane. Returns the base the step's scores subtract (0 while the row has seen no
// key: no NaN) and sets c to the factor l (done here) and the accumulators are rescaled by.
FLASH_DEVICE float softmax_step(float& m, float& l, float lane_max, float& c) {
    const float mx = quad_max(fmaxf(m, lane_max));
    const float base = mx == neg_inf() ? 0.f : mx;
    c = fast_exp2(m - base);  // 0 on a row's first step with a key
    m = mx;
    l *= c;
    return base;
}

// 1 / (the row's sum), from the lanes' shares; 0 for a row that saw no key.
FLASH_DEVICE float softmax_inverse(float l) {
    const float s = quad_sum(l);
    return s > 0.f ? 1.f / s : 0.f;
}

// Rows [row0, row0 + ROWS) of a [n][DIM] matrix of 16-bit elements into a tile by the
// CTA's NTHREADS threads, 16-byte cp.async chunks, zeros past row n; at(r, c) is the byte
// offset in the tile of row r, column c (a multiple of 8): the kernel's layout.
template <int ROWS, int DIM, int NTHREADS, class At>
FLASH_DEVICE void load_rows(unsigned char* tile, const unsigned short* src, int row0, int n, int tid, At at) {
    constexpr int chunks = DIM / 8;
#pragma unroll
    for (int i = 0; i < ROWS * chunks / NTHREADS; ++i) {
        const int idx = tid + i * NTHREADS;
        const int r = idx / chunks, c = (idx % chunks) * 8;
        const bool ok = row0 + r < n;
        const unsigned short* from = ok ? src + (size_t)(row0 + r) * DIM + c : src;
        cp_async16(tile + at(r, c), from, ok ? 16 : 0);
    }
}
