// v5 / v6: paged decode built for bandwidth.
//  - GQA packed: one CTA per (kv_head, sequence[, split]); every lane keeps the query of
//    every head of the group in registers, so each K/V byte is read from DRAM once.
//  - 16-byte loads: a token's K row is read by R = HEAD_DIM * bytes / 16 lanes, one 16-byte
//    vector each (fp32, fp16 or bf16 storage, converted to fp32 in registers); a warp reads
//    32 / R tokens per step and a CTA WARPS * 32 / R.
//  - Several tokens in flight: UNROLL steps' K and V loads are issued before the first use.
//  - Online softmax (base 2, the query pre-scaled by scale * log2 e): each lane group keeps
//    its own (m, l, acc); the groups of a warp merge by shuffles, the warps through shared
//    memory at the end. No score buffer, so no context cap.
//  - The block table is staged in shared memory CHUNK_PAGES entries at a time, so the K/V
//    address does not wait on a global load.
// SPLIT = 0 writes the output; SPLIT = 1 writes (m, l, unnormalised O) per split for the
// merge kernel (v6). Shape constants come in as macros: the launcher compiles one module
// per (dtype, head_dim, group, page_size).
#include "common.cuh"

#ifndef GROUP
#define GROUP 4
#endif
#ifndef KV_DTYPE
#define KV_DTYPE 0  // 0 fp32, 1 fp16, 2 bf16
#endif
#ifndef PAGE_SIZE
#define PAGE_SIZE 16
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef UNROLL
#define UNROLL 2
#endif
#ifndef SPLIT
#define SPLIT 0
#endif
#ifndef KERNEL_NAME
#define KERNEL_NAME paged_decode_v5
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 4
#endif

#if KV_DTYPE == 0
#define ESIZE 4
#else
#define ESIZE 2
#endif
#define E (16 / ESIZE)             // elements in one 16-byte vector
#define R (HEAD_DIM / E)           // lanes per token row
#define TPW (32 / R)               // tokens per warp step
#define STEP (WARPS * TPW)         // tokens per CTA step
#define CHUNK_PAGES 256
#define LOG2E 1.4426950408889634f

static_assert(R >= 1 && R <= 32 && (R & (R - 1)) == 0, "head_dim * bytes / 16 must be a power of two <= 32");

__device__ __forceinline__ uint4 load_stream(const void* ptr) {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(ptr));
    return r;
}

// The E values of one 16-byte vector as floats.
__device__ __forceinline__ void unpack(const uint4& raw, float (&f)[E]) {
    const unsigned int w[4] = {raw.x, raw.y, raw.z, raw.w};
#if KV_DTYPE == 0
#pragma unroll
    for (int i = 0; i < 4; ++i) f[i] = __uint_as_float(w[i]);
#elif KV_DTYPE == 1
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float lo, hi;
        asm("{.reg .b16 a, b; mov.b32 {a, b}, %2; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b;}"
            : "=f"(lo), "=f"(hi)
            : "r"(w[i]));
        f[2 * i] = lo;
        f[2 * i + 1] = hi;
    }
#else
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        f[2 * i] = __uint_as_float(w[i] << 16);
        f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
#endif
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS) KERNEL_NAME(
#if SPLIT
    float* __restrict__ part_m, float* __restrict__ part_l, float* __restrict__ part_o,
#else
    float* __restrict__ out,
#endif
    const float* __restrict__ query, const unsigned char* __restrict__ key_cache,
    const unsigned char* __restrict__ value_cache, const int* __restrict__ block_tables,
    const int* __restrict__ context_lens, float scale, int q_heads, int kv_heads, int pages_per_seq) {
    __shared__ int s_pages[CHUNK_PAGES];
    extern __shared__ float s_merge[];  // [WARPS][GROUP] m, [WARPS][GROUP] l, [WARPS][GROUP][HEAD_DIM] acc

    const int kvh = blockIdx.x;
    const int b = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int sub = lane / R;     // which token of the warp step
    const int r = lane % R;       // which 16-byte vector of the row
    const int* table = block_tables + static_cast<size_t>(b) * pages_per_seq;
    const int ctx = context_lens[b];
    const int num_pages = (ctx + PAGE_SIZE - 1) / PAGE_SIZE;
#if SPLIT
    const int split = blockIdx.z, num_splits = gridDim.z;
    const int pages_per_split = (num_pages + num_splits - 1) / num_splits;
    const int p_begin = min(num_pages, split * pages_per_split);
    const int p_end = min(num_pages, p_begin + pages_per_split);
#else
    const int p_begin = 0, p_end = num_pages;
#endif
    const int t_end = min(ctx, p_end * PAGE_SIZE);

    // The group's queries, this lane's E dims of each, pre-scaled for exp2.
    float q[GROUP][E];
    const float qscale = scale * LOG2E;
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
        const float4* src = reinterpret_cast<const float4*>(
            query + (static_cast<size_t>(b) * q_heads + kvh * GROUP + g) * HEAD_DIM + r * E);
#pragma unroll
        for (int i = 0; i < E / 4; ++i) {
            const float4 v = src[i];
            q[g][4 * i] = v.x * qscale;
            q[g][4 * i + 1] = v.y * qscale;
            q[g][4 * i + 2] = v.z * qscale;
            q[g][4 * i + 3] = v.w * qscale;
        }
    }

    float m[GROUP], l[GROUP], acc[GROUP][E];
#pragma unroll
    for (int g = 0; g < GROUP; ++g) {
        m[g] = NEG_INF;
        l[g] = 0.f;
#pragma unroll
        for (int i = 0; i < E; ++i) acc[g][i] = 0.f;
    }

    const size_t token_stride = static_cast<size_t>(kv_heads) * HEAD_DIM * ESIZE;  // bytes
    const size_t page_stride = token_stride * PAGE_SIZE;
    const size_t head_offset = static_cast<size_t>(kvh) * HEAD_DIM * ESIZE + r * 16;
    const int my_offset = warp * TPW + sub;

    for (int chunk = p_begin; chunk < p_end; chunk += CHUNK_PAGES) {
        const int chunk_pages = min(CHUNK_PAGES, p_end - chunk);
        __syncthreads();
        for (int i = threadIdx.x; i < chunk_pages; i += WARPS * 32) s_pages[i] = table[chunk + i];
        __syncthreads();
        const int c_begin = chunk * PAGE_SIZE;
        const int c_end = min(t_end, (chunk + chunk_pages) * PAGE_SIZE);
        for (int t0 = c_begin; t0 < c_end; t0 += STEP * UNROLL) {
            uint4 kraw[UNROLL], vraw[UNROLL];
            bool valid[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int t = t0 + u * STEP + my_offset;
                valid[u] = t < c_end;
                if (valid[u]) {
                    const int rel = t - c_begin;
                    const size_t off = static_cast<size_t>(s_pages[rel / PAGE_SIZE]) * page_stride +
                                       (rel % PAGE_SIZE) * token_stride + head_offset;
                    kraw[u] = load_stream(key_cache + off);
                    vraw[u] = load_stream(value_cache + off);
                } else {
                    kraw[u] = make_uint4(0, 0, 0, 0);
                    vraw[u] = make_uint4(0, 0, 0, 0);
                }
            }
            float s[UNROLL][GROUP];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                float k[E];
                unpack(kraw[u], k);
#pragma unroll
                for (int g = 0; g < GROUP; ++g) {
                    float dot = 0.f;
#pragma unroll
                    for (int i = 0; i < E; ++i) dot = fmaf(q[g][i], k[i], dot);
#pragma unroll
                    for (int off = R / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(FULL_MASK, dot, off);
                    s[u][g] = valid[u] ? dot : NEG_INF;
                }
            }
#pragma unroll
            for (int g = 0; g < GROUP; ++g) {
                float mx = s[0][g];
#pragma unroll
                for (int u = 1; u < UNROLL; ++u) mx = fmaxf(mx, s[u][g]);
                const float m_new = fmaxf(m[g], mx);
                const float m_ref = (m_new == NEG_INF) ? 0.f : m_new;  // nothing seen yet: keep zeros
                const float correction = exp2f(m[g] - m_ref);
                l[g] *= correction;
#pragma unroll
                for (int i = 0; i < E; ++i) acc[g][i] *= correction;
                m[g] = m_new;
#pragma unroll
                for (int u = 0; u < UNROLL; ++u) s[u][g] = exp2f(s[u][g] - m_ref);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                float v[E];
                unpack(vraw[u], v);
#pragma unroll
                for (int g = 0; g < GROUP; ++g) {
                    l[g] += s[u][g];
#pragma unroll
                    for (int i = 0; i < E; ++i) acc[g][i] = fmaf(s[u][g], v[i], acc[g][i]);
                }
            }
        }
    }

    // Merge the lane groups of this warp (they saw different tokens).
#pragma unroll
    for (int off = R; off < 32; off <<= 1) {
#pragma unroll
        for (int g = 0; g < GROUP; ++g) {
            const float m_o = __shfl_xor_sync(FULL_MASK, m[g], off);
            const float l_o = __shfl_xor_sync(FULL_MASK, l[g], off);
            const float m_new = fmaxf(m[g], m_o);
            const float m_ref = (m_new == NEG_INF) ? 0.f : m_new;
            const float w_self = exp2f(m[g] - m_ref), w_other = exp2f(m_o - m_ref);
            l[g] = l[g] * w_self + l_o * w_other;
#pragma unroll
            for (int i = 0; i < E; ++i) {
                const float a_o = __shfl_xor_sync(FULL_MASK, acc[g][i], off);
                acc[g][i] = acc[g][i] * w_self + a_o * w_other;
            }
            m[g] = m_new;
        }
    }

    // Merge the warps through shared memory.
    float* s_m = s_merge;
    float* s_l = s_m + WARPS * GROUP;
    float* s_acc = s_l + WARPS * GROUP;
    if (sub == 0) {
#pragma unroll
        for (int g = 0; g < GROUP; ++g) {
            if (r == 0) {
                s_m[warp * GROUP + g] = m[g];
                s_l[warp * GROUP + g] = l[g];
            }
#pragma unroll
            for (int i = 0; i < E; ++i) s_acc[(warp * GROUP + g) * HEAD_DIM + r * E + i] = acc[g][i];
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < GROUP * HEAD_DIM; idx += WARPS * 32) {
        const int g = idx / HEAD_DIM, d = idx % HEAD_DIM;
        float mx = NEG_INF;
#pragma unroll
        for (int w = 0; w < WARPS; ++w)
            if (s_l[w * GROUP + g] > 0.f) mx = fmaxf(mx, s_m[w * GROUP + g]);
        float lsum = 0.f, o = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
            const float lw = s_l[w * GROUP + g];
            if (!(lw > 0.f)) continue;
            const float wt = exp2f(s_m[w * GROUP + g] - mx);
            lsum += lw * wt;
            o += s_acc[(w * GROUP + g) * HEAD_DIM + d] * wt;
        }
        const int h = kvh * GROUP + g;
#if SPLIT
        const size_t row = (static_cast<size_t>(b) * q_heads + h) * num_splits + split;
        if (d == 0) {
            part_m[row] = mx;  // base-2 max; -inf with l = 0 for an empty split
            part_l[row] = lsum;
        }
        part_o[row * HEAD_DIM + d] = o;
#else
        out[(static_cast<size_t>(b) * q_heads + h) * HEAD_DIM + d] = o / lsum;
#endif
    }
}
