// What v5_fast.cu (CUDA cores) and v5_mma.cu (tensor cores) share: their parameters, the
// pages a CTA attends over, the block-table staging, and the end: every warp has left its
// (m, l, acc) for each head of the group in shared memory; combine the warps and write the
// output (SPLIT 0), or the split's partial (m, l, unnormalised O) and then, in the last CTA
// of the (sequence, KV head) to finish, the merge of every split (SPLIT 1: no second
// kernel). m is a base-2 max. It also gives both kernels' shared knobs their defaults.
// WORKLIST 1 (v7, with SPLIT 1): grid (kv_heads, items), each CTA's sequence and pages
// from a work list the host built (token-balanced chunks, longest first), the parts of a
// sequence merged by its last CTA; a sequence of one part writes its output directly.
// WORKLIST 2 (v7's packed path): grid (kv_heads, CTAs), CTA y takes item y, then the items
// each names as its next, in turn (FAST_ITEMS_BEGIN / END around the kernel's body: the
// online-softmax state, the query and the block-table staging are per item; a barrier at
// the start of each item but the first, so no thread writes shared memory another still
// reads for the previous one). A CTA that is the last of a sequence's parts to finish
// merges it after its last item; no CTA ever waits for another.
#pragma once

#ifndef SPLIT
#define SPLIT 0  // 0: write the output; 1: v6, one split of gridDim.z a CTA
#endif
#ifndef WORKLIST
#define WORKLIST 0  // 1: v7, blockIdx.y indexes the work list (WORK_ITEM_INTS ints an item);
                    // 2: v7 packed, blockIdx.y indexes the CTA's first item
#endif
#if WORKLIST && !SPLIT
#error "WORKLIST (v7) writes partials: it needs SPLIT 1"
#endif
#ifndef DEFER_MERGE
#define DEFER_MERGE 0  // 1 (v7, V7_MERGE "kernel"): the CTAs only write their partials, with no
                       // fence, counter or merge; paged_decode_v7_merge, launched after the
                       // kernel in the same stream, merges every sequence of several parts
#endif
#if DEFER_MERGE && !WORKLIST
#error "DEFER_MERGE is v7's (WORKLIST 1 or 2)"
#endif
// A work item: sequence, first page, end page (exclusive), part index within the
// sequence, the sequence's part count, the sequence's first part slot in the partial
// buffers (its rows start at part_base x q_heads; [q_head][part] within), two unused ints
// (32 bytes an item). variants.py's plan_work writes them. WORKLIST 2: item y is CTA y's
// first item, int 6 of an item the index of the CTA's next one (-1 after its last), the
// CTAs' further items after the first gridDim.y (variants.py's plan_packed and
// packed_array).
#define WORK_ITEM_INTS 8
#ifndef KERNEL_NAME
#define KERNEL_NAME paged_decode_v5
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 4  // __launch_bounds__: resident CTAs a SM the registers must allow; shipped
                      // 4, but 2 for v5_fast.cu at groups over 4 and 8 for the 16-bit and fp8
                      // caches at group 1, head_dim 64 (variants.fast_defines)
#endif
#ifndef RESCALE_THRESHOLD
#define RESCALE_THRESHOLD 8.f  // log2 units: rescale (l, acc) only when the max grows by more
#endif

#ifndef TIMELINE
#define TIMELINE 0  // 1: record each CTA's start, end (globaltimer), SM, progress and end of its
                    // streaming in paprof_timeline (read by kernels/scripts/tune_v5.py)
#endif
#if TIMELINE
// per CTA: start, end (ns), SM, end of streaming, warp 0 at 1/4, 1/2, 3/4 of its tiles, counted (v6)
#define TL_SLOTS 8
extern "C" __device__ unsigned long long paprof_timeline[TL_SLOTS * 65536];

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
#endif

#if SPLIT && WORKLIST
#define FAST_SPLIT_PARAMS                                                                    \
    float *__restrict__ part_m, float *__restrict__ part_l, float *__restrict__ part_o,     \
        int *__restrict__ counters, const int *__restrict__ work_items,
#define FAST_WORK_ITEMS work_items
#elif SPLIT
#define FAST_SPLIT_PARAMS                                                                    \
    float *__restrict__ part_m, float *__restrict__ part_l, float *__restrict__ part_o,     \
        int *__restrict__ counters,
#else
#define FAST_SPLIT_PARAMS
#endif
#ifndef FAST_WORK_ITEMS
#define FAST_WORK_ITEMS nullptr
#endif
#if defined(KV_DTYPE) && KV_DTYPE == 3
#define FAST_SCALE_PARAMS , const float *__restrict__ k_scales, const float *__restrict__ v_scales
#else
#define FAST_SCALE_PARAMS
#endif
// The parameters of every v5/v6 kernel; the launcher passes them in this order (an fp8
// cache adds its scales, one float a KV head for K and for V, at the end).
#define FAST_KERNEL_PARAMS                                                                   \
    FAST_SPLIT_PARAMS float *__restrict__ out, const float *__restrict__ query,                \
        const unsigned char *__restrict__ key_cache, const unsigned char *__restrict__ value_cache, \
        const int *__restrict__ block_tables, const int *__restrict__ context_lens, float scale, \
        int q_heads, int kv_heads, int pages_per_seq FAST_SCALE_PARAMS

// The kernel's dynamic shared memory (the emulation on the host gives the CTA's own).
#ifndef FAST_DYNAMIC_SMEM
#define FAST_DYNAMIC_SMEM(type, name) extern __shared__ type name[]
#endif

// The pages [p_begin, p_end) of the sequence this CTA attends over (its split's slice with
// SPLIT_, grid z = split), and the end of its tokens.
struct PageRange {
    int p_begin, p_end, t_end;
};

template <int PAGE>
__device__ __forceinline__ PageRange split_pages(int ctx, int split, int splits) {
    const int num_pages = (ctx + PAGE - 1) / PAGE;
    const int per_split = (num_pages + splits - 1) / splits;
    const int p_begin = min(num_pages, split * per_split);
    const int p_end = min(num_pages, p_begin + per_split);
    return {p_begin, p_end, min(ctx, p_end * PAGE)};
}

template <bool SPLIT_, int PAGE>
__device__ __forceinline__ PageRange page_range(int ctx) {
    return SPLIT_ ? split_pages<PAGE>(ctx, blockIdx.z, gridDim.z) : split_pages<PAGE>(ctx, 0, 1);
}

// What one CTA works on: its sequence b, pages [p_begin, p_end) and the end of its tokens,
// its part of the sequence's `parts`, and where the sequence's partials start (rows of
// part_m before them; v6: 0, its rows are [batch x q_heads][splits]).
struct CtaWork {
    int b, p_begin, p_end, t_end, part, parts;
    size_t part_row0;
};

#if WORKLIST == 2
#ifdef PAGED_EMULATE
void paged_emu_item(int index);  // tests/paged_emu: the item this thread works on
#endif
// The sequences whose merge this CTA owes (it was the last of their parts to finish): at
// most PACKED_MERGES (a range's first and last segments are the only ones cut), done after
// its last item (packed_merges), so that no call of merge_parts sits inside the item loop
// (a call there made ptxas save 232-496 bytes of registers around it and spill the merge).
#define PACKED_MERGES 2
struct PackedMerges {
    int count, b[PACKED_MERGES], parts[PACKED_MERGES];
    size_t row0[PACKED_MERGES];  // the sequence's first partial row (CtaWork's part_row0)
};
__device__ __forceinline__ PackedMerges& packed_merge_list() {
    __shared__ PackedMerges list;
    return list;
}
// The kernel's body runs once an item of the CTA: CTA y's first item is item y (addressed
// at once, as the token kernel's), each item names the next (its int 6; -1 after the
// last), which cta_work leaves in shared memory (packed_next_item) for the loop to read
// when the body is done: no register holds loop state across the body. A barrier starts
// every item but the first, so no thread writes shared memory another still reads for the
// previous one (the body has barriers of its own between its start and its end).
__device__ __forceinline__ int& packed_next_item() {
    __shared__ int next;
    return next;
}
// threadIdx.x (CTA_X false) or blockIdx.x (true) read anew at each item (volatile), so that
// what the body derives from them is computed an item, not hoisted out of the item loop
// and held in registers across the streaming loop.
template <bool CTA_X>
__device__ __forceinline__ int fresh_index() {
#ifdef PAGED_EMULATE
    return CTA_X ? int(blockIdx.x) : int(threadIdx.x);
#else
    int v;
    if (CTA_X)
        asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(v));
    else
        asm volatile("mov.u32 %0, %%tid.x;" : "=r"(v));
    return v;
#endif
}
#define FAST_TID fresh_index<false>()
#define FAST_KVH fresh_index<true>()
#define FAST_ITEMS_BEGIN                                                                     \
    if (threadIdx.x == 0) packed_merge_list().count = 0;                                     \
    for (int item_index = blockIdx.y; item_index >= 0; item_index = packed_next_item()) {    \
        if (item_index != static_cast<int>(blockIdx.y)) __syncthreads();
#define FAST_ITEMS_END                                                                       \
    }                                                                                        \
    packed_merges<WARPS, GROUP, HEAD_DIM>(reinterpret_cast<float*>(s_dyn), q_heads, out, part_m, part_l, part_o);
#else
#define FAST_ITEMS_BEGIN {                                                                   \
        constexpr int item_index = 0;
#define FAST_ITEMS_END }
#define FAST_TID static_cast<int>(threadIdx.x)
#define FAST_KVH static_cast<int>(blockIdx.x)
#endif

template <int PAGE>
__device__ __forceinline__ CtaWork cta_work(const int* context_lens, const int* work_items, int q_heads,
                                            [[maybe_unused]] int item_index) {
#if WORKLIST
#if WORKLIST == 2
    const int* item = work_items + static_cast<size_t>(WORK_ITEM_INTS) * item_index;
#ifdef PAGED_EMULATE
    paged_emu_item(item_index);
#endif
    if (threadIdx.x == 0) packed_next_item() = item[6];
#else
    const int* item = work_items + static_cast<size_t>(WORK_ITEM_INTS) * blockIdx.y;
#endif
    const int b = item[0], p_begin = item[1], p_end = item[2];
    return {b, p_begin, p_end, min(context_lens[b], p_end * PAGE), item[3], item[4],
            static_cast<size_t>(item[5]) * q_heads};
#else
    const int b = blockIdx.y;
    const PageRange r = page_range<SPLIT, PAGE>(context_lens[b]);
    return {b, r.p_begin, r.p_end, r.t_end, SPLIT ? static_cast<int>(blockIdx.z) : 0,
            SPLIT ? static_cast<int>(gridDim.z) : 1, 0};
#endif
}


// Block-table entries [chunk, chunk + n) into shared memory, for the whole CTA.
template <int THREADS>
__device__ __forceinline__ void stage_pages(int* s_pages, const int* table, int chunk, int n) {
    __syncthreads();  // every thread is done with the previous chunk
    for (int i = threadIdx.x; i < n; i += THREADS) s_pages[i] = table[chunk + i];
    __syncthreads();
}

#ifndef PAGED_EMULATE  // tests/paged_emu/paged_emulate.h has the host's
__device__ __forceinline__ float load_l2(const float* p) {  // ld.global.cg: skip L1
    float v;
    asm("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}

__device__ __forceinline__ float4 load_l2(const float4* p) {
    float4 v;
    asm("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
#endif

// The split-KV merge of one (sequence, KV head): m = max m_s over non-empty parts,
// w_s = exp2(m_s - m) / sum_s exp2(m_s - m) l_s, out_g = sum_s w_s O_s (empty parts, l_s = 0,
// get w_s = 0). Built for latency: every (row, part)'s (m, l) is loaded in one go, a warp
// per row turns them into weights, then each warp sums a share of the parts for every
// output vector, four parts (4 x ROWS x HEAD_DIM / 128 float4 loads a lane) in flight, and
// the warps' sums meet in shared memory (`scratch`: merge_smem in variants.py bytes).
// Row g's part s sits at index (first + g) * parts + s of part_m / part_l, times HEAD_DIM
// in part_o (v6's [head][split] layout; `first` = the group's first head). Partials were
// written by other SMs: read them from L2 (ld.global.cg), never from a stale L1.
template <int WARPS_, int ROWS_, int HEAD_DIM_>
__device__ __noinline__ void merge_parts(float* out_rows, const float* part_m, const float* part_l,
                                         const float* part_o, size_t first, int parts, float* scratch) {
    static_assert(HEAD_DIM_ % 4 == 0, "float4 rows");
    constexpr int THREADS = WARPS_ * 32, VECS = ROWS_ * HEAD_DIM_ / 4, PER_LANE = (VECS + 31) / 32;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int n = ROWS_ * parts;  // part_m[first * parts + i], i < n
    float* w = scratch;             // [ROWS][parts]: m, then the weight
    float* l_of = scratch + n;      // [ROWS][parts]; then the non-empty parts' indices
    float4* red = reinterpret_cast<float4*>(scratch + (2 * n + 3) / 4 * 4);  // [WARPS][VECS], 16-byte aligned
    __shared__ int s_used;
    for (int base = threadIdx.x; base < n; base += 4 * THREADS) {
        float mv[4], lv[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int i = base + k * THREADS;
            if (i < n) {
                mv[k] = load_l2(part_m + first * parts + i);
                lv[k] = load_l2(part_l + first * parts + i);
            }
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int i = base + k * THREADS;
            if (i < n) {
                w[i] = lv[k] > 0.f ? mv[k] : NEG_INF;
                l_of[i] = lv[k];
            }
        }
    }
    __syncthreads();
    for (int g = warp; g < ROWS_; g += WARPS_) {
        float* wg = w + g * parts;
        const float* lg = l_of + g * parts;
        float mx = NEG_INF;
        for (int s = lane; s < parts; s += 32) mx = fmaxf(mx, wg[s]);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, off));
        float lsum = 0.f;
        for (int s = lane; s < parts; s += 32) {
            wg[s] = exp2f(wg[s] - mx);  // 0 for empty parts
            lsum += wg[s] * lg[s];
        }
#pragma unroll
        for (int off = 16; off > 0; off >>= 1) lsum += __shfl_xor_sync(FULL_MASK, lsum, off);
        const float inv = 1.f / lsum;
        for (int s = lane; s < parts; s += 32) wg[s] *= inv;
    }
    // A part is empty for every row or for none (no token of its range): list the others,
    // in order (warp 0, a ballot per 32 parts).
    __syncthreads();
    int* used = reinterpret_cast<int*>(l_of);
    if (warp == 0) {
        int count = 0;
        for (int base = 0; base < parts; base += 32) {
            const bool keep = base + lane < parts && w[base + lane] > 0.f;
            const unsigned mask = __ballot_sync(FULL_MASK, keep);
            if (keep) used[count + __popc(mask & ((1u << lane) - 1))] = base + lane;
            count += __popc(mask);
        }
        if (lane == 0) s_used = count;
    }
    __syncthreads();
    const int n_used = s_used;
    float4 acc[PER_LANE];
#pragma unroll
    for (int k = 0; k < PER_LANE; ++k) acc[k] = make_float4(0.f, 0.f, 0.f, 0.f);
    constexpr int VPR = HEAD_DIM_ / 4;  // float4 vectors a row
    for (int i0 = warp; i0 < n_used; i0 += 4 * WARPS_) {
        int s[4];  // this round's parts (-1: past the list)
        float4 v[4][PER_LANE];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            s[u] = i0 + u * WARPS_ < n_used ? used[i0 + u * WARPS_] : -1;
#pragma unroll
            for (int k = 0; k < PER_LANE; ++k) {
                const int vec = lane + 32 * k;
                if (s[u] >= 0 && vec < VECS)
                    v[u][k] = load_l2(reinterpret_cast<const float4*>(
                                          part_o + ((first + vec / VPR) * parts + s[u]) * HEAD_DIM_) +
                                      vec % VPR);
            }
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
#pragma unroll
            for (int k = 0; k < PER_LANE; ++k) {
                const int vec = lane + 32 * k;
                if (s[u] >= 0 && vec < VECS) {
                    const float wt = w[(vec / VPR) * parts + s[u]];
                    acc[k].x += wt * v[u][k].x;
                    acc[k].y += wt * v[u][k].y;
                    acc[k].z += wt * v[u][k].z;
                    acc[k].w += wt * v[u][k].w;
                }
            }
        }
    }
#pragma unroll
    for (int k = 0; k < PER_LANE; ++k)
        if (lane + 32 * k < VECS) red[warp * VECS + lane + 32 * k] = acc[k];
    __syncthreads();
    for (int vec = threadIdx.x; vec < VECS; vec += THREADS) {
        float4 o = red[vec];
#pragma unroll
        for (int ww = 1; ww < WARPS_; ++ww) {
            const float4 r = red[ww * VECS + vec];
            o.x += r.x;
            o.y += r.y;
            o.z += r.z;
            o.w += r.w;
        }
        reinterpret_cast<float4*>(out_rows)[vec] = o;
    }
}

// The end of a CTA (v5, v6, v7): every warp has left its (m, l, acc) for each head of the
// group in s_m / s_l / s_acc. Combine the warps, then write the output (SPLIT_ false, or a
// v7 sequence of one part), or the CTA's partial and count it in the (sequence, KV head)'s
// counter (zero before the launch, zero again after it); the CTA that brings the count to
// the part count merges every part into `out` (no second kernel), with s_m onwards as its
// scratch (the warps' values are read before). Partial rows: v6 [batch x q_heads][splits];
// v7 from work.part_row0 on, [q_heads][parts] for the sequence. m is a base-2 max.
template <int WARPS_, int GROUP_, int HEAD_DIM_, bool SPLIT_>
__device__ __forceinline__ void merge_warps_and_store(const float* s_m, const float* s_l, const float* s_acc,
                                                      const CtaWork& work, int kvh, int q_heads, float* out,
                                                      float* part_m = nullptr, float* part_l = nullptr,
                                                      float* part_o = nullptr, int* counters = nullptr) {
    const size_t head0 = static_cast<size_t>(work.b) * q_heads + kvh * GROUP_;
    // v7's sequences of one part have no partials; v6's split kernel always writes them
    const bool direct = !SPLIT_ || (WORKLIST && work.parts == 1);
    const size_t phead0 = WORKLIST ? static_cast<size_t>(kvh) * GROUP_ : head0;  // first partial head
    for (int idx = threadIdx.x; idx < GROUP_ * HEAD_DIM_; idx += WARPS_ * 32) {
        const int g = idx / HEAD_DIM_, d = idx % HEAD_DIM_;
        float mx = NEG_INF;
#pragma unroll
        for (int w = 0; w < WARPS_; ++w)
            if (s_l[w * GROUP_ + g] > 0.f) mx = fmaxf(mx, s_m[w * GROUP_ + g]);
        float lsum = 0.f, o = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS_; ++w) {
            const float lw = s_l[w * GROUP_ + g];
            if (!(lw > 0.f)) continue;  // a warp that saw no token carries no weight
            const float wt = exp2f(s_m[w * GROUP_ + g] - mx);
            lsum += lw * wt;
            o += s_acc[(w * GROUP_ + g) * HEAD_DIM_ + d] * wt;
        }
        if (!direct) {
            const size_t row = work.part_row0 + (phead0 + g) * work.parts + work.part;
            if (d == 0) {
                part_m[row] = mx;  // -inf with l = 0 for an empty split
                part_l[row] = lsum;
            }
            part_o[row * HEAD_DIM_ + d] = o;
        } else {
            out[(head0 + g) * HEAD_DIM_ + d] = o / lsum;
        }
    }
    if (SPLIT_ && !direct && !DEFER_MERGE) {
        __shared__ int s_last;
        int* counter = counters + work.b * gridDim.x + kvh;
        __threadfence();  // this CTA's partials are visible device-wide before it is counted
        __syncthreads();
        if (threadIdx.x == 0) s_last = atomicAdd(counter, 1) == work.parts - 1;
        __syncthreads();
#if TIMELINE
        if (threadIdx.x == 0)
            paprof_timeline[TL_SLOTS * (blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)) + 7] = global_ns();
#endif
        if (s_last) {
#if WORKLIST == 2
            if (threadIdx.x == 0) {  // merged after the CTA's last item (packed_merges)
                *counter = 0;  // every part has been counted: ready for the next launch
                PackedMerges& list = packed_merge_list();
                list.b[list.count] = work.b;
                list.parts[list.count] = work.parts;
                list.row0[list.count] = work.part_row0;
                ++list.count;
            }
#else
            __threadfence();
            merge_parts<WARPS_, GROUP_, HEAD_DIM_>(out + head0 * HEAD_DIM_, part_m + work.part_row0,
                                                   part_l + work.part_row0, part_o + work.part_row0 * HEAD_DIM_,
                                                   phead0, work.parts, const_cast<float*>(s_m));
            if (threadIdx.x == 0) *counter = 0;  // ready for the next launch
#endif
        }
    }
}

#if WORKLIST == 2
// After the packed kernel's last item: the merges the CTA owes (merge_warps_and_store listed
// them), as the token kernel does its one, with the CTA's shared memory as scratch.
template <int WARPS_, int GROUP_, int HEAD_DIM_>
__device__ __forceinline__ void packed_merges(float* scratch, int q_heads, float* out, const float* part_m,
                                              const float* part_l, const float* part_o) {
    PackedMerges& list = packed_merge_list();
    for (;;) {  // the list from its end: nothing held in registers across the call
        __syncthreads();  // the list is complete (the previous merge's reads of scratch are done)
        const int k = list.count - 1;
        if (k < 0) return;
        const int b = list.b[k], parts = list.parts[k];
        const size_t row0 = list.row0[k];
        __syncthreads();  // every thread has read the count
        if (threadIdx.x == 0) list.count = k;
        __threadfence();  // the other parts' partials are visible (they were counted before)
        const int kvh = blockIdx.x;
        const size_t head0 = static_cast<size_t>(b) * q_heads + kvh * GROUP_;
        merge_parts<WARPS_, GROUP_, HEAD_DIM_>(out + head0 * HEAD_DIM_, part_m + row0, part_l + row0,
                                               part_o + row0 * HEAD_DIM_, static_cast<size_t>(kvh) * GROUP_,
                                               parts, scratch);
    }
}
#endif

#if DEFER_MERGE
// v7's merges in a kernel of their own (V7_MERGE "kernel"), launched after the streaming
// kernel in the same stream, so that the kernel boundary orders the partials before their
// reads (no fence, no counter, no CTA that merges 66 parts alone at the end of the wave).
// CTA (h, i) merges query head h of the i-th sequence of several parts: `merges` holds
// MERGE_INTS ints a sequence (its batch index, its first part slot, its part count, unused),
// its rows [q_heads][parts] from slot x q_heads on, as merge_warps_and_store wrote them.
// MERGE_THREADS / (HEAD_DIM / 4) groups of threads each sum a share of the parts, float4 a
// thread: the first MERGE_UNROLL parts of each share are loaded at the start, with the
// (m, l) of every part, so that their latency overlaps the two block reductions that make
// the weights (d128: 16 groups x 8, 128 parts in one round); the groups meet in shared
// memory. Dynamic shared memory: variants.deferred_merge_smem.
#define MERGE_INTS 4
#ifndef MERGE_THREADS
#define MERGE_THREADS 512
#endif
#ifndef MERGE_UNROLL
#define MERGE_UNROLL 8
#endif
// The block's max (MAX_) or sum of v: common.cuh's warp reduction, then the warps' values
// through s_red; every thread gets the result.
template <bool MAX_>
__device__ __forceinline__ float merge_block_reduce(float v, float* s_red) {
    constexpr int NW = MERGE_THREADS / 32;
    v = MAX_ ? warp_max(v) : warp_sum(v);
    __syncthreads();  // s_red's previous use is read
    if ((threadIdx.x & 31) == 0) s_red[threadIdx.x >> 5] = v;
    __syncthreads();
    v = s_red[0];
#pragma unroll
    for (int w = 1; w < NW; ++w) v = MAX_ ? fmaxf(v, s_red[w]) : v + s_red[w];
    return v;
}

extern "C" __global__ void __launch_bounds__(MERGE_THREADS)
    paged_decode_v7_merge(float* __restrict__ out, const float* __restrict__ part_m, const float* __restrict__ part_l,
                          const float* __restrict__ part_o, const int* __restrict__ merges, int q_heads) {
    static_assert(HEAD_DIM % 4 == 0 && MERGE_THREADS % (HEAD_DIM / 4) == 0, "float4s a row divide the threads");
    constexpr int VPR = HEAD_DIM / 4, GROUPS = MERGE_THREADS / VPR;
    const int h = blockIdx.x;
    const int* mg = merges + static_cast<size_t>(MERGE_INTS) * blockIdx.y;
    const int b = mg[0], parts = mg[2];
    const size_t row0 = static_cast<size_t>(mg[1]) * q_heads + static_cast<size_t>(h) * parts;
    FAST_DYNAMIC_SMEM(float4, s_dyn4);
    float4* red = s_dyn4;                                    // [GROUPS][VPR]
    float* w = reinterpret_cast<float*>(s_dyn4 + GROUPS * VPR);  // [parts]: m (or -inf), then the weight
    float* l_of = w + parts;                                      // [parts]
    __shared__ float s_red[MERGE_THREADS / 32];
    const int vec = threadIdx.x % VPR, grp = threadIdx.x / VPR;
    const float4* col = reinterpret_cast<const float4*>(part_o + row0 * HEAD_DIM) + vec;
    float4 v[MERGE_UNROLL];  // the share's first parts, in flight while the weights are made
#pragma unroll
    for (int u = 0; u < MERGE_UNROLL; ++u) {
        const int s = grp + u * GROUPS;
        if (s < parts) v[u] = load_l2(col + static_cast<size_t>(s) * VPR);
    }
    float mx = NEG_INF;
    for (int s = threadIdx.x; s < parts; s += MERGE_THREADS) {
        const float l = load_l2(part_l + row0 + s), m = load_l2(part_m + row0 + s);
        w[s] = l > 0.f ? m : NEG_INF;  // an empty part (l = 0) carries no weight
        l_of[s] = l;
        mx = fmaxf(mx, w[s]);
    }
    mx = merge_block_reduce<true>(mx, s_red);
    float lsum = 0.f;
    for (int s = threadIdx.x; s < parts; s += MERGE_THREADS) {
        const float wt = w[s] > NEG_INF ? exp2f(w[s] - mx) : 0.f;
        w[s] = wt;
        lsum += wt * l_of[s];
    }
    lsum = merge_block_reduce<false>(lsum, s_red);  // its barriers also publish w
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int s0 = grp;;) {
#pragma unroll
        for (int u = 0; u < MERGE_UNROLL; ++u) {
            const int s = s0 + u * GROUPS;
            if (s < parts) {
                const float wt = w[s];
                acc.x += wt * v[u].x;
                acc.y += wt * v[u].y;
                acc.z += wt * v[u].z;
                acc.w += wt * v[u].w;
            }
        }
        s0 += MERGE_UNROLL * GROUPS;
        if (s0 >= parts) break;
#pragma unroll
        for (int u = 0; u < MERGE_UNROLL; ++u) {  // more parts than one round holds
            const int s = s0 + u * GROUPS;
            if (s < parts) v[u] = load_l2(col + static_cast<size_t>(s) * VPR);
        }
    }
    red[grp * VPR + vec] = acc;
    __syncthreads();
    if (threadIdx.x < VPR) {
        float4 o = red[threadIdx.x];
        for (int g2 = 1; g2 < GROUPS; ++g2) {
            const float4 r = red[g2 * VPR + threadIdx.x];
            o.x += r.x;
            o.y += r.y;
            o.z += r.z;
            o.w += r.w;
        }
        const float inv = 1.f / lsum;
        o.x *= inv;
        o.y *= inv;
        o.z *= inv;
        o.w *= inv;
        reinterpret_cast<float4*>(out + (static_cast<size_t>(b) * q_heads + h) * HEAD_DIM)[threadIdx.x] = o;
    }
}
#endif
