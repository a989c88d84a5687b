// v5 / v6: paged decode built for bandwidth.
//  - GQA packed: one CTA per (kv_head, sequence[, split]); every lane keeps the query of
//    every head of the group in registers, so each K/V byte is read from DRAM once.
//  - 16-byte loads: a token's K row is read by R = HEAD_DIM * bytes / 16 lanes, one 16-byte
//    vector each (fp32, fp16 or bf16 storage, converted to fp32 in registers); a warp reads
//    32 / R tokens per step and a CTA STEP = WARPS * 32 / R.
//  - Several tokens in flight: UNROLL steps' K and V loads are issued before the first
//    use. (A cp.async ring in shared memory instead of registers measured slower here;
//    16-bit caches take the tensor-core kernel v5_mma.cu: kernels/NOTES.md.)
//  - Online softmax in base 2 (the query pre-scaled by scale * log2 e) with lazy
//    rescaling; each lane group keeps its own (m, l, acc); the groups of a warp merge by
//    shuffles, the warps through shared memory at the end. No score buffer: no context cap.
//  - The block table is staged in shared memory CHUNK_PAGES entries at a time, so a K/V
//    address never waits on a global load.
// SPLIT = 0 writes the output; SPLIT = 1 writes (m, l, unnormalised O) per split, and the
// last split of each (sequence, KV head) to finish merges them (v6, fast_common.cuh);
// with WORKLIST 1 as well (v7), each CTA's sequence and pages come from the host's work list.
// Shape constants come in as macros: the launcher compiles one module per (dtype,
// head_dim, group, page_size).
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
// WARPS and UNROLL's defaults are the shipped build (fp32, variants.FAST_TUNING).
#ifndef WARPS
#define WARPS 4
#endif
#ifndef UNROLL
#define UNROLL 8  // steps whose loads are in flight together
#endif
#include "fast_common.cuh"

#if KV_DTYPE == 0
#define ESIZE 4
#else
#define ESIZE 2
#endif
#define E (16 / ESIZE)      // elements in one 16-byte vector
#define R (HEAD_DIM / E)    // lanes per token row
#define TPW (32 / R)        // tokens per warp step
#define STEP (WARPS * TPW)  // tokens per CTA step
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

// One batch of UNROLL steps: scores for every head, lazy-rescaled online softmax, and
// the weighted sum of values into acc.
__device__ __forceinline__ void attend(const uint4 (&kraw)[UNROLL], const uint4 (&vraw)[UNROLL],
                                       const bool (&valid)[UNROLL], const float (&q)[GROUP][E],
                                       float (&m)[GROUP], float (&l)[GROUP], float (&acc)[GROUP][E]) {
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
        // Lazy rescaling: the reference m moves only when a score exceeds it by more than
        // RESCALE_THRESHOLD, so exp2(s - m) <= 2^threshold and (l, acc) are rescaled a few
        // times per sequence, not every step. l and acc share the reference: still exact.
        if (mx > m[g] + RESCALE_THRESHOLD) {
            const float correction = exp2f(m[g] - mx);  // 0 on the first tokens
            l[g] *= correction;
#pragma unroll
            for (int i = 0; i < E; ++i) acc[g][i] *= correction;
            m[g] = mx;
        }
        const float m_ref = (m[g] == NEG_INF) ? 0.f : m[g];  // nothing seen yet: p = 0
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

extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS) KERNEL_NAME(FAST_KERNEL_PARAMS) {
    __shared__ int s_pages[CHUNK_PAGES];
    // The merge of the warps at the end: [WARPS][GROUP] m, l, then [WARPS][GROUP][HEAD_DIM] acc.
    extern __shared__ uint4 s_dyn[];

    FAST_ITEMS_BEGIN  // v7 packed: once an item of the CTA's range (fast_common.cuh)
    const int kvh = FAST_KVH;
    const CtaWork work = cta_work<PAGE_SIZE>(context_lens, FAST_WORK_ITEMS, q_heads, item_index);  // v7: its item
    const int b = work.b;
    const int tid = FAST_TID, lane = tid & 31, warp = tid >> 5;
    const int sub = lane / R;  // which token of the warp step
    const int r = lane % R;    // which 16-byte vector of the row
    const int* table = block_tables + static_cast<size_t>(b) * pages_per_seq;
    const int p_begin = work.p_begin, p_end = work.p_end, t_end = work.t_end;

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
        stage_pages<WARPS * 32>(s_pages, table, chunk, chunk_pages);
        const int c_begin = chunk * PAGE_SIZE;
        const int c_end = min(t_end, (chunk + chunk_pages) * PAGE_SIZE);
        // Byte offset of step `step`'s token for this lane in the caches, or -1 past the end.
        auto token_offset = [&](int step) -> long long {
            const int rel = step * STEP + my_offset;
            if (c_begin + rel >= c_end) return -1;
            return static_cast<long long>(s_pages[rel / PAGE_SIZE]) * page_stride +
                   (rel % PAGE_SIZE) * token_stride + head_offset;
        };
        const int n_batches = (c_end - c_begin + STEP * UNROLL - 1) / (STEP * UNROLL);
        for (int batch = 0; batch < n_batches; ++batch) {
            uint4 kraw[UNROLL], vraw[UNROLL];
            bool valid[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const long long off = token_offset(batch * UNROLL + u);
                valid[u] = off >= 0;
                kraw[u] = valid[u] ? load_stream(key_cache + off) : make_uint4(0, 0, 0, 0);
                vraw[u] = valid[u] ? load_stream(value_cache + off) : make_uint4(0, 0, 0, 0);
            }
            attend(kraw, vraw, valid, q, m, l, acc);
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
    float* s_m = reinterpret_cast<float*>(s_dyn);
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
#if SPLIT
    merge_warps_and_store<WARPS, GROUP, HEAD_DIM, true>(s_m, s_l, s_acc, work, kvh, q_heads, out, part_m, part_l,
                                                         part_o, counters);
#else
    merge_warps_and_store<WARPS, GROUP, HEAD_DIM, false>(s_m, s_l, s_acc, work, kvh, q_heads, out);
#endif
    FAST_ITEMS_END
}
