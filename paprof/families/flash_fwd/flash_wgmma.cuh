// The Hopper (sm_90a) helpers of the flash_fwd family's wgmma kernel: warpgroup MMA
// (wgmma.mma_async with A in registers, B in shared memory through a matrix descriptor),
// its fence / commit / wait, and the async-proxy fence. Only wgmma.cu includes this file;
// it compiles for sm_90a alone (catalog.WGMMA_ARCH). With FLASH_EMULATE defined,
// tests/flash_emu/wgmma_emulate.h supplies the same functions for the host, decoding the
// descriptors and fragments from the PTX ISA's text, not from this file.
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
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32" WGMMA_AB " "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, %37;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B), "r"(accumulate));
}

// D (64 x 128, fp32) = A (64 x 16, registers) x B (16 x 128, shared memory through desc_b)
// (+ D when accumulate != 0); TRANS_B 0: B K-major, 1: B N-major (transposed).
template <int TRANS_B>
FLASH_DEVICE void wgmma_m64n128(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %70, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32" WGMMA_AB " "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, %69;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
          "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
          "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
          "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
          "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(TRANS_B), "r"(accumulate));
}
#else
#include "wgmma_emulate.h"
#endif
