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
