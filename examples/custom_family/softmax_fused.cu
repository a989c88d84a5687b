// fused: one pass over the row in DRAM. One CTA per row of THREADS threads (-D THREADS).
//
// VPT > 0 (rows up to 32K columns): each thread loads VPT float4s of the row into
// registers, all loads issued before any arithmetic; block max, exp in place, block sum,
// then the row is written once with float4 stores. Read once, written once.
// VPT == 0 (longer rows, too big for a CTA's registers): pass 1 streams the row with
// float4 loads keeping an online (max, sum) per thread, merged across the block; pass 2
// re-reads the row (partly from L2) and writes it. Read twice, written once.
//
// The row is split as [head | body | tail]: the body is every 16-byte-aligned float4 of
// the row; the head and tail (at most 3 floats each, present when cols % 4 != 0 makes
// rows start off a 16-byte boundary) are handled one float per thread.
#include "softmax_reduce.cuh"

#ifndef THREADS
#define THREADS 128
#endif
#ifndef VPT
#define VPT 8
#endif
#define UNROLL 4  // two-pass path: float4 loads in flight per thread per step

#define NEG_INF SOFTMAX_NEG_INF

#if VPT > 0
#define BOUNDS __launch_bounds__(THREADS)
#else  // one 1024-thread CTA per SM is enough to stream: let it have 64 registers, no spills
#define BOUNDS __launch_bounds__(THREADS, 1)
#endif

__device__ __forceinline__ float max4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

__device__ __forceinline__ float4 exp4(float4 v, float m) {
    return make_float4(__expf(v.x - m), __expf(v.y - m), __expf(v.z - m), __expf(v.w - m));
}

__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

__device__ __forceinline__ void store4(float* p, float4 v, float scale, bool vec) {
    v = make_float4(v.x * scale, v.y * scale, v.z * scale, v.w * scale);
    if (vec) {
        *reinterpret_cast<float4*>(p) = v;
    } else {  // y's rows not aligned like x's (never for arrays paprof allocates)
        p[0] = v.x; p[1] = v.y; p[2] = v.z; p[3] = v.w;
    }
}

extern "C" __global__ void BOUNDS
softmax_fused(const float* __restrict__ x, float* __restrict__ y, int cols) {
    extern __shared__ float scratch[];  // 2 x THREADS/32 floats: two reductions in a row
    constexpr int WARPS = THREADS / 32;
    const int t = threadIdx.x;
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;

    const int misalign = (int)(((unsigned long long)xr >> 2) & 3);  // floats past 16 B
    const int head = min((4 - misalign) & 3, cols);
    const int nvec = (cols - head) >> 2;
    const int tail = cols - head - 4 * nvec;
    const float4* xv = reinterpret_cast<const float4*>(xr + head);
    float* yb = yr + head;
    const bool vec_store = (((unsigned long long)yb) & 15) == 0;
    float eh = t < head ? xr[t] : NEG_INF;                   // head element of thread t
    float et = t < tail ? xr[head + 4 * nvec + t] : NEG_INF;  // tail element of thread t

#if VPT > 0
    // ---- the row in registers -------------------------------------------------------
    float4 v[VPT];
    float m = fmaxf(eh, et);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * THREADS;
        v[k] = i < nvec ? xv[i] : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
    }
#pragma unroll
    for (int k = 0; k < VPT; ++k) m = fmaxf(m, max4(v[k]));
    m = block_max(m, scratch);

    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        v[k] = exp4(v[k], m);  // padding (-inf) becomes 0
        s += sum4(v[k]);
    }
    eh = __expf(eh - m);
    et = __expf(et - m);
    s = block_sum(s + eh + et, scratch + WARPS);

    const float inv = 1.0f / s;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * THREADS;
        if (i < nvec) store4(yb + 4 * i, v[k], inv, vec_store);
    }
#else
    // ---- pass 1: online max and sum, streamed --------------------------------------
    float m = fmaxf(eh, et);
    float s = m == NEG_INF ? 0.0f : __expf(eh - m) + __expf(et - m);
    for (int base = t; base < nvec; base += UNROLL * THREADS) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int i = base + u * THREADS;
            v[u] = i < nvec ? xv[i] : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
        }
        float cm = max4(v[0]);  // v[0] is always in the row: finite
#pragma unroll
        for (int u = 1; u < UNROLL; ++u) cm = fmaxf(cm, max4(v[u]));
        float cs = 0.0f;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) cs += sum4(exp4(v[u], cm));
        online_merge(m, s, cm, cs);
    }
    // merge the threads' (max, sum): within each warp, then across the warps
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        online_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    if (WARPS > 1) {
        const int lane = t & 31;
        if (lane == 0) {
            scratch[t >> 5] = m;
            scratch[WARPS + (t >> 5)] = s;
        }
        __syncthreads();
        m = lane < WARPS ? scratch[lane] : NEG_INF;
        s = lane < WARPS ? scratch[WARPS + lane] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
            online_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    }

    // ---- pass 2: re-read, normalise, write -----------------------------------------
    const float inv = 1.0f / s;
#pragma unroll 4
    for (int i = t; i < nvec; i += THREADS) store4(yb + 4 * i, exp4(xv[i], m), inv, vec_store);
    eh = __expf(eh - m);
    et = __expf(et - m);
#endif
    if (t < head) yr[t] = eh * inv;
    if (t < tail) yr[head + 4 * nvec + t] = et * inv;
}
