// v5 / v6 / v7 for fp16 and bf16 caches: the work of v5_fast.cu on the tensor cores.
//
// On CUDA cores a 16-bit cache costs twice the arithmetic per byte of an fp32 one (every
// element feeds GROUP multiply-adds twice, plus a conversion), and v5_fast.cu stalls at
// about 80 % of the read ceiling. Here each warp streams 16-token tiles of K and V
// through its own ring of shared-memory stages (16-byte cp.async, zero-filled past the
// end; or one bulk copy a row, COPY_MODE 1), and:
//   S = Q K^T   mma.m16n8k16, A = the group's queries (rows = heads, padded to 16; fp32
//               query split into a hi and a lo 16-bit part, so the scores keep fp32-level
//               accuracy), B = K read with ldmatrix;
//   P = exp2(S - m)   lazy-rescaled online softmax on the accumulator fragments; S's
//               fragments are exactly P's A fragments (no shuffles);
//   O += P V    B = V read with ldmatrix.trans; bf16 P is split hi + lo as well.
// Rows are padded by 16 bytes so ldmatrix's 8 rows fall in distinct banks.
//
// SPLIT 0 (v5, v6 unsplit) and 1 (v6): a CTA per (KV head, sequence[, split]), its warps
// take the tiles in turn; same parameters, partial layout and merge as v5_fast.cu.
// SPLIT 2 (v7): the same grid, but the warps claim tiles one at a time from an atomic
// counter of their item (KV head, sequence, split), and a CTA whose item is done helps the
// open item with the most tiles left (one helper an item): the SMs that stream faster
// (measured: up to 1.3x) take over the slower ones' work instead of idling at the end.
#include "common.cuh"

#ifndef GROUP
#define GROUP 4
#endif
#ifndef KV_DTYPE
#define KV_DTYPE 1  // 1 fp16, 2 bf16
#endif
#ifndef PAGE_SIZE
#define PAGE_SIZE 16
#endif
#ifndef WARPS
#define WARPS 2
#endif
#ifndef NSTAGES
#define NSTAGES 3  // tiles in each warp's ring
#endif
#ifndef SPLIT
#define SPLIT 0
#endif
#include "fast_common.cuh"
#ifndef KERNEL_NAME
#define KERNEL_NAME paged_decode_v5
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 4
#endif
#ifndef RESCALE_THRESHOLD
#define RESCALE_THRESHOLD 8.f
#endif
#ifndef COPY_HINT
#define COPY_HINT 0  // 0: cp.async.cg; 1: + L2::128B prefetch; 2: + L2::256B; 3: cp.async.ca
#endif
#ifndef COPY_MODE
#define COPY_MODE 0  // 0: 16-byte cp.async by every lane; 1: one bulk copy (TMA) per K/V row
#endif
#ifndef MIN_STEAL
#define MIN_STEAL (4 * WARPS)  // v7 helps an item only with at least this many tiles left
#endif
#ifndef CLAIM_BATCH
#define CLAIM_BATCH 4  // v7: tiles a warp claims with one atomicAdd
#endif
#ifndef V7_CLAIM
#define V7_CLAIM 1  // 0: v7's warps take fixed turns and nobody helps (to measure the claims' cost)
#endif
#ifndef TIMELINE
#define TIMELINE 0  // 1: record each CTA's start, end (globaltimer), SM and end of its streaming
#endif

#define TILE 16
#define ROW_BYTES (HEAD_DIM * 2)
#define PITCH (ROW_BYTES + 16)
#define CHUNKS (ROW_BYTES / 16)
#define TILE_BYTES (TILE * PITCH)
#define COPIES (TILE * CHUNKS / 32)
#define KSTEPS (HEAD_DIM / 16)
#define NBLK (HEAD_DIM / 8)
#define CHUNK_PAGES 256
#define LOG2E 1.4426950408889634f

static_assert(KV_DTYPE == 1 || KV_DTYPE == 2, "the tensor-core path reads 16-bit caches");
static_assert(GROUP >= 1 && GROUP <= 8, "a group's heads fill at most the 8 real rows of an m16 tile");
static_assert(HEAD_DIM % 16 == 0 && (TILE * CHUNKS) % 32 == 0, "head_dim must be a multiple of 16");

__device__ __forceinline__ unsigned smem_u32(const void* ptr) {
    unsigned addr;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(addr) : "l"(ptr));
    return addr;
}

// 16 bytes global -> shared, bypassing L1; src_bytes = 0 writes zeros and reads nothing.
__device__ __forceinline__ void copy16(unsigned dst, const void* src, int src_bytes) {
#if COPY_HINT == 1
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
#elif COPY_HINT == 2
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
#elif COPY_HINT == 3
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
#endif
}

// The bulk-copy path: one cp.async.bulk per K or V row of a tile (a lane each), counted in
// bytes by the stage's mbarrier; rows past the end are zeroed by ordinary stores.
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    asm volatile(
        "{ .reg .pred done;\n"
        "WAIT_%=: mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=; }" ::"r"(bar),
        "r"(parity)
        : "memory");
}

__device__ __forceinline__ void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void ldsm_x4_trans(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

#if KV_DTYPE == 1
#define MMA_OP "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
#else
#define MMA_OP "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
#endif

// d += A B for one m16n8k16 tile, all 16 rows of A (a0..a3) and of d used.
__device__ __forceinline__ void mma16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0,
                                      unsigned b1) {
    asm volatile(MMA_OP "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// d += A B for rows 0..7 only: rows 8..15 of A are zero and their results are dropped
// (written to scratch registers), so an accumulator takes 2 registers instead of 4.
__device__ __forceinline__ void mma8(float& d0, float& d1, unsigned a0, unsigned a2, unsigned b0, unsigned b1) {
    float drop0, drop1;  // rows 8..15: never read
    (void)drop0;
    (void)drop1;
    asm volatile(MMA_OP "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %10, %10};"
                 : "+f"(d0), "+f"(d1), "=f"(drop0), "=f"(drop1)
                 : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1), "f"(0.f));
}

// Two floats as one 16-bit pair (x0 in the low half), rounded to nearest.
__device__ __forceinline__ unsigned pack2(float x0, float x1) {
    unsigned r;
#if KV_DTYPE == 1
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
#else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
#endif
    return r;
}

__device__ __forceinline__ float2 unpack2(unsigned w) {
#if KV_DTYPE == 1
    float lo, hi;
    asm("{.reg .b16 a, b; mov.b32 {a, b}, %2; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b;}" : "=f"(lo), "=f"(hi) : "r"(w));
    return make_float2(lo, hi);
#else
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
#endif
}

// x = hi + lo with both parts 16-bit: about 22 (fp16) or 16 (bf16) significant bits.
__device__ __forceinline__ void split2(float x0, float x1, unsigned& hi, unsigned& lo) {
    hi = pack2(x0, x1);
    const float2 h = unpack2(hi);
    lo = pack2(x0 - h.x, x1 - h.y);
}

#if TIMELINE
extern "C" __device__ unsigned long long paprof_timeline[4 * 65536];  // start, end ns, SM, end of streaming

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
#endif

template <int N>
struct IntC {  // a compile-time int passed to a generic lambda
    static constexpr int value = N;
};

#if SPLIT == 2
enum : int { ITEM_OPEN = 0, ITEM_CLOSED = 1, ITEM_HELPED = 2 };
#endif

#if SPLIT == 2
// v7, the end of an item (s_work: item, first token, end token, tiles, helping; the warps'
// results in s_m / s_l / s_acc): write its result, then pick the item to help next (-1:
// none). Not inlined, so that its registers do not crowd the streaming loop's.
__device__ __noinline__ int v7_finish_and_find(float* s_m, float* s_l, float* s_acc, float* out,
                                               float* part_m, float* part_l, float* part_o, int* counters,
                                               const int* context_lens, int q_heads, const int* work) {
    const int item = work[0], units = gridDim.x * gridDim.y, items = units * gridDim.z;
    const int unit = item % units, split = item / units, splits = gridDim.z;
    const int kvh = unit % gridDim.x, b = unit / gridDim.x;
    const bool helping = work[4];
    __shared__ int s_item, s_mode;
    __shared__ unsigned long long s_best;
    int* state = counters + items;
    int* finished = counters + 2 * items;
    // Where this item's result goes: the output (its only CTA), or a partial slot.
    if (threadIdx.x == 0) {
        int mode = 2;  // partial, slot splits + split (a helper)
        if (!helping) {
            const int before = atomicCAS(state + item, ITEM_OPEN, ITEM_CLOSED);
            mode = before == ITEM_OPEN ? (splits == 1 ? 0 : 1) : 3;  // 1: alone, 3: helped
        }
        s_mode = mode;
    }
    __syncthreads();
    const int mode = s_mode;
    const size_t head0 = static_cast<size_t>(b) * q_heads + kvh * GROUP;
    float* out_rows = out + head0 * HEAD_DIM;
    if (mode == 0) {
        finish_segment<WARPS, GROUP, HEAD_DIM>(s_m, s_l, s_acc, out_rows, nullptr, nullptr, nullptr,
                                               PartLayout{0, 0, 0, 0}, 0, nullptr, nullptr);
    } else {
        // 2 x splits slots a head: split s's CTA in slot s, its helper (if any) in splits + s
        const PartLayout lay{head0 * 2 * splits, 2 * splits, 1, 2 * splits};
        if (mode == 1 && threadIdx.x < GROUP) {  // no helper will come: its slot is empty
            part_m[lay.at(threadIdx.x, splits + split)] = NEG_INF;
            part_l[lay.at(threadIdx.x, splits + split)] = 0.f;
        }
        const HelpedItems helped{state + unit, units, splits};
        finish_segment<WARPS, GROUP, HEAD_DIM>(s_m, s_l, s_acc, out_rows, part_m, part_l, part_o, lay,
                                               mode == 2 ? splits + split : split, finished + unit, s_m, &helped);
    }
    // Help: the open item with the most tiles left (at least MIN_STEAL).
    __syncthreads();
    if (threadIdx.x == 0) s_best = 0;
    __syncthreads();
    unsigned long long best = 0;
    for (int base = threadIdx.x; V7_CLAIM && base < items; base += 4 * WARPS * 32) {
        int st[4], handed[4], ctx[4];  // every load of the round in flight together
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int c = min(base + i * WARPS * 32, items - 1);
            st[i] = load_volatile(state + c);
            handed[i] = load_volatile(counters + c);
            ctx[i] = context_lens[c % units / gridDim.x];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int c = base + i * WARPS * 32;
            if (c >= items || st[i] != ITEM_OPEN) continue;
            const PageRange r = split_pages<PAGE_SIZE>(ctx[i], c / units, splits);
            const int left = (r.t_end - r.p_begin * PAGE_SIZE + TILE - 1) / TILE - handed[i];
            if (left >= MIN_STEAL)
                best = max(best, (static_cast<unsigned long long>(left) << 32) | static_cast<unsigned>(c));
        }
    }
    if (best) atomicMax(&s_best, best);
    __syncthreads();
    if (threadIdx.x == 0) {
        int victim = -1;
        if (s_best) {
            const int c = static_cast<int>(s_best & 0xffffffffu);
            if (atomicCAS(state + c, ITEM_OPEN, ITEM_HELPED) == ITEM_OPEN) victim = c;
        }
        s_item = victim;
    }
    __syncthreads();
    return s_item;
}
#endif

extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS) KERNEL_NAME(FAST_KERNEL_PARAMS) {
#if TIMELINE
    const unsigned long long t_start = global_ns();
    unsigned long long t_work = 0;
#endif
    // [WARPS][NSTAGES][K, V] tiles of TILE rows x PITCH bytes; reused for the merge at the end.
    extern __shared__ uint4 s_dyn[];

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t4 = lane & 3;  // fragment row (head) and column pair
    const size_t token_stride = static_cast<size_t>(kv_heads) * HEAD_DIM * 2;
    const size_t page_stride = token_stride * PAGE_SIZE;
    const unsigned ring = smem_u32(s_dyn) + warp * NSTAGES * 2 * TILE_BYTES;
    // ldmatrix row addresses of this lane within a tile (see the fragment layouts).
    const int mat = lane >> 3, mrow = lane & 7;
    const unsigned k_lane = (8 * (mat >> 1) + mrow) * PITCH + (mat & 1) * 16;  // + kk * 32
    const unsigned v_lane = (8 * (mat & 1) + mrow) * PITCH + (mat >> 1) * 16;  // + pair * 32
#if COPY_MODE == 1
    static_assert(TILE == 16, "a lane per K or V row of a tile");
    __shared__ __align__(8) unsigned long long s_bars[WARPS * NSTAGES];
    const unsigned bars = smem_u32(s_bars) + warp * NSTAGES * 8;  // this warp's, one a stage
    if (lane < NSTAGES) mbar_init(bars + 8 * lane, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncwarp();
    unsigned parity = 0;  // bit s: the phase stage s completes next
#endif

    // -- the state of one (sequence, KV head) --------------------------------------------
    unsigned qa_hi[KSTEPS][2], qa_lo[KSTEPS][2];  // the queries as A fragments
    float o[NBLK][2];  // row g, dims 8 jb + 2 t4 + {0, 1}
    float m, l;  // row g; l is this thread's share until the end
    size_t head_offset;
    // A fragments of the group's queries (row g = head g), pre-scaled for exp2 and split
    // into hi + lo 16-bit parts; accumulators cleared.
    auto begin_unit = [&](int b, int kvh) {
        const float qscale = scale * LOG2E;
        const float* qrow = query + (static_cast<size_t>(b) * q_heads + kvh * GROUP + min(g, GROUP - 1)) * HEAD_DIM;
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                float2 x = *reinterpret_cast<const float2*>(qrow + 16 * kk + 8 * half + 2 * t4);
                if (g >= GROUP) x = make_float2(0.f, 0.f);
                split2(x.x * qscale, x.y * qscale, qa_hi[kk][half], qa_lo[kk][half]);
            }
#pragma unroll
        for (int j = 0; j < NBLK; ++j) o[j][0] = o[j][1] = 0.f;
        m = NEG_INF;
        l = 0.f;
        head_offset = static_cast<size_t>(kvh) * HEAD_DIM * 2;
    };

    // Start the copy of tokens c_begin + first .. + TILE (those before c_end) into stage s;
    // page_of(i) is the page of token c_begin + i * PAGE_SIZE (c_begin is a page start).
    // cp.async: the caller commits the group.
    auto copy_tile = [&](int s, int first, auto page_of, int c_begin, int c_end) {
#if COPY_MODE == 1
        const unsigned bar = bars + 8 * s;
        const int rows = min(TILE, c_end - c_begin - first);
        if (lane == 0) mbar_expect_tx(bar, rows * ROW_BYTES * 2);
        __syncwarp();
        const int row = lane & (TILE - 1), is_v = lane >> 4;
        const unsigned dst = ring + s * 2 * TILE_BYTES + is_v * TILE_BYTES + row * PITCH;
        if (row < rows) {
            const int rel = first + row;
            const size_t off = static_cast<size_t>(page_of(rel / PAGE_SIZE)) * page_stride +
                               (rel % PAGE_SIZE) * token_stride + head_offset;
            bulk_copy(dst, (is_v ? value_cache : key_cache) + off, ROW_BYTES, bar);
        } else {  // past the end: zeros, so that P = 0 meets finite V
#pragma unroll
            for (int c = 0; c < CHUNKS; ++c)
                asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(dst + 16 * c), "r"(0u) : "memory");
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // before a later bulk copy here
        }
#else
        const unsigned k_dst = ring + s * 2 * TILE_BYTES;
#pragma unroll
        for (int c = 0; c < COPIES; ++c) {
            const int idx = lane + 32 * c;
            const int row = idx / CHUNKS, piece = idx % CHUNKS;
            const int rel = first + row;
            const bool valid = c_begin + rel < c_end;
            const size_t off = valid ? static_cast<size_t>(page_of(rel / PAGE_SIZE)) * page_stride +
                                           (rel % PAGE_SIZE) * token_stride + head_offset + piece * 16
                                     : 0;
            const unsigned dst = k_dst + row * PITCH + piece * 16;
            copy16(dst, key_cache + off, valid ? 16 : 0);
            copy16(dst + TILE_BYTES, value_cache + off, valid ? 16 : 0);
        }
#endif
    };

    // Wait until stage s holds its tile (cp.async: all but the newest `newer` groups).
    auto wait_stage = [&](int s, auto newer) {
#if COPY_MODE == 1
        mbar_wait(bars + 8 * s, (parity >> s) & 1u);
        parity ^= 1u << s;
#else
        asm volatile("cp.async.wait_group %0;" ::"n"(decltype(newer)::value) : "memory");
#endif
        __syncwarp();  // every lane's copies (and zeros) of the tile are visible to the warp
    };

    // Attend over the tile in stage s: tokens first_tok .. + TILE, those before c_end.
    auto consume_tile = [&](int s, int first_tok, int c_end) {
        const unsigned k_tile = ring + s * 2 * TILE_BYTES;
        const unsigned v_tile = k_tile + TILE_BYTES;
        // A = the query's hi part in rows 0..7 and its lo part in rows 8..15: one product
        // gives both, row g + 8 of the result is the lo part's share of row g's score.
        float sc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
            unsigned kb[4];
            ldsm_x4(kb, k_tile + k_lane + kk * 32);
            mma16(sc[0], qa_hi[kk][0], qa_lo[kk][0], qa_hi[kk][1], qa_lo[kk][1], kb[0], kb[1]);
            mma16(sc[1], qa_hi[kk][0], qa_lo[kk][0], qa_hi[kk][1], qa_lo[kk][1], kb[2], kb[3]);
        }
        // Scores of row g for tokens 2*t4 + {0, 1} and 8 + 2*t4 + {0, 1} of the tile.
        float x[4] = {sc[0][0] + sc[0][2], sc[0][1] + sc[0][3], sc[1][0] + sc[1][2], sc[1][1] + sc[1][3]};
#pragma unroll
        for (int i = 0; i < 4; ++i)
            if (first_tok + 8 * (i >> 1) + 2 * t4 + (i & 1) >= c_end) x[i] = NEG_INF;
        float mx = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
        if (mx > m + RESCALE_THRESHOLD) {  // lazy rescaling, as in v5_fast.cu
            const float correction = exp2f(m - mx);
            l *= correction;
#pragma unroll
            for (int jb = 0; jb < NBLK; ++jb) {
                o[jb][0] *= correction;
                o[jb][1] *= correction;
            }
            m = mx;
        }
        const float m_ref = (m == NEG_INF) ? 0.f : m;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            x[i] = exp2f(x[i] - m_ref);
            l += x[i];
        }
        // P as A fragments: a0 = tokens 2*t4.., a2 = tokens 8 + 2*t4..
        unsigned pa0 = pack2(x[0], x[1]), pa2 = pack2(x[2], x[3]);
#if KV_DTYPE == 2
        unsigned pl0, pl2;
        split2(x[0], x[1], pa0, pl0);
        split2(x[2], x[3], pa2, pl2);
#endif
#pragma unroll
        for (int pair = 0; pair < NBLK / 2; ++pair) {
            unsigned vb[4];
            ldsm_x4_trans(vb, v_tile + v_lane + pair * 32);
            mma8(o[2 * pair][0], o[2 * pair][1], pa0, pa2, vb[0], vb[1]);
            mma8(o[2 * pair + 1][0], o[2 * pair + 1][1], pa0, pa2, vb[2], vb[3]);
#if KV_DTYPE == 2
            mma8(o[2 * pair][0], o[2 * pair][1], pl0, pl2, vb[0], vb[1]);
            mma8(o[2 * pair + 1][0], o[2 * pair + 1][1], pl0, pl2, vb[2], vb[3]);
#endif
        }
        __syncwarp();  // the tile is read before its slot is refilled
    };

    // Every warp's (m, l, acc) into shared memory (the rings become the merge area).
    float* s_m = reinterpret_cast<float*>(s_dyn);
    float* s_l = s_m + WARPS * GROUP;
    float* s_acc = s_l + WARPS * GROUP;
    auto warps_to_smem = [&]() {
        l += __shfl_xor_sync(FULL_MASK, l, 1);
        l += __shfl_xor_sync(FULL_MASK, l, 2);
#if TIMELINE
        t_work = global_ns();
#endif
        __syncthreads();
        if (g < GROUP) {
            if (t4 == 0) {
                s_m[warp * GROUP + g] = m;
                s_l[warp * GROUP + g] = l;
            }
#pragma unroll
            for (int jb = 0; jb < NBLK; ++jb) {
                s_acc[(warp * GROUP + g) * HEAD_DIM + 8 * jb + 2 * t4] = o[jb][0];
                s_acc[(warp * GROUP + g) * HEAD_DIM + 8 * jb + 2 * t4 + 1] = o[jb][1];
            }
        }
        __syncthreads();
    };

#if SPLIT == 2
    // ---- v7: tiles claimed one at a time; finished CTAs help -------------------------------
    // counters: [items] tiles handed out, [items] ITEM_* state, [units] partials written,
    // [1] CTAs done; all zero before a launch, zeroed again by the last CTA to finish.
    // counters: [items] tiles handed out, [items] ITEM_* state, [units] partials written,
    // [1] CTAs done; all zero before a launch, zeroed again by the last CTA to finish.
    // The item being worked on lives in shared memory (read back where needed): registers
    // stay free for the query fragments and accumulators of the hot loop.
    __shared__ int s_work[5];  // item, first token, end token, tiles, helping
    const volatile int* work = s_work;
    if (threadIdx.x == 0) {
        s_work[0] = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);  // its own first
        s_work[4] = 0;
    }
    for (;;) {
        if (threadIdx.x == 0) {
            const int it = s_work[0], units = gridDim.x * gridDim.y;
            const PageRange r = split_pages<PAGE_SIZE>(context_lens[it % units / gridDim.x], it / units, gridDim.z);
            s_work[1] = r.p_begin * PAGE_SIZE;
            s_work[2] = r.t_end;
            s_work[3] = (r.t_end - r.p_begin * PAGE_SIZE + TILE - 1) / TILE;
        }
        __syncthreads();
        {
            const int unit = work[0] % (gridDim.x * gridDim.y);
            begin_unit(unit / gridDim.x, unit % gridDim.x);
        }
        // Tiles are claimed one at a time (lane 0's atomicAdd) an iteration before they are
        // needed, so the atomic's latency hides behind a tile; pages come from the block
        // table (cached) as the copies are issued.
        auto claim = [&]() { return atomicAdd(counters + work[0], CLAIM_BATCH); };  // counters[item]: tiles handed out
        auto produce = [&](int stage, int t) {
            if (t < work[3]) {
                // a tile starts on a 16-token boundary, so it touches at most two pages
                const int t_end = work[2], tok = work[1] + t * TILE, c_begin = tok / PAGE_SIZE * PAGE_SIZE;
                const int* table = block_tables + static_cast<size_t>(work[0] % (gridDim.x * gridDim.y) / gridDim.x) * pages_per_seq;
                const int p0 = __ldg(table + tok / PAGE_SIZE);
                const int p1 = TILE > PAGE_SIZE && c_begin + PAGE_SIZE < t_end ? __ldg(table + tok / PAGE_SIZE + 1) : 0;
                copy_tile(stage, tok - c_begin, [&](int i) { return i ? p1 : p0; }, c_begin, t_end);
            }
#if COPY_MODE == 0
            asm volatile("cp.async.commit_group;" ::: "memory");
#endif
        };
        // The warp's k-th tile sits in stage k % NSTAGES; q[0] is the next one to read,
        // q[1..] the ones after it, already claimed.
        int q[NSTAGES];
#if V7_CLAIM
        // Tiles come in batches of CLAIM_BATCH (one atomicAdd each); the next batch is asked
        // for when the current one is handed out, so its answer has a batch of tiles to arrive.
        int batch = __shfl_sync(FULL_MASK, lane == 0 ? claim() : 0, 0), used = 0;
        int pending = lane == 0 ? claim() : 0;  // lane 0: the next batch's first tile, in flight
        auto next_tile = [&]() {
            if (used == CLAIM_BATCH) {
                batch = __shfl_sync(FULL_MASK, pending, 0);
                used = 0;
                if (lane == 0 && batch < work[3]) pending = claim();
            }
            return min(batch + used++, work[3]);
        };
#pragma unroll
        for (int i = 0; i < NSTAGES; ++i) q[i] = next_tile();
#else  // static turns, as v5 (no helping possible): a measurement aid
        int next_turn = warp + WARPS * NSTAGES;
#pragma unroll
        for (int i = 0; i < NSTAGES; ++i) q[i] = warp + WARPS * i;
#endif
#pragma unroll
        for (int i = 0; i < NSTAGES - 1; ++i) produce(i, q[i]);
        for (int k = 0; q[0] < work[3]; ++k) {
            produce((k + NSTAGES - 1) % NSTAGES, q[NSTAGES - 1]);
#if V7_CLAIM
            const int after = next_tile();
#else
            const int after = next_turn;
            next_turn += WARPS;
#endif
            wait_stage(k % NSTAGES, IntC<NSTAGES - 1>{});
            consume_tile(k % NSTAGES, work[1] + q[0] * TILE, work[2]);
#pragma unroll
            for (int i = 0; i < NSTAGES - 1; ++i) q[i] = q[i + 1];
            q[NSTAGES - 1] = after;
        }
#if COPY_MODE == 0
        asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
        warps_to_smem();
        const int victim = v7_finish_and_find(s_m, s_l, s_acc, out, part_m, part_l, part_o, counters, context_lens,
                                              q_heads, s_work);
        if (victim < 0) break;  // nothing worth helping (or another CTA got there first)
        if (threadIdx.x == 0) {
            s_work[0] = victim;
            s_work[4] = 1;
        }
    }
    // The last CTA out zeroes the counters for the next launch.
    const int units = gridDim.x * gridDim.y, items = units * gridDim.z;
    int* done_ctas = counters + 2 * items + units;
    __shared__ int s_out;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_out = atomicAdd(done_ctas, 1) == static_cast<int>(gridDim.x * gridDim.y * gridDim.z) - 1;
    __syncthreads();
    if (s_out) {
        for (int i = threadIdx.x; i < 2 * items + units; i += WARPS * 32) counters[i] = 0;
        if (threadIdx.x == 0) *done_ctas = 0;
    }
#else
    // ---- v5 / v6: the CTA's warps take the tiles of its (sequence, KV head[, split]) in turn --
    {
        __shared__ int s_pages[CHUNK_PAGES];
        const int kvh = blockIdx.x;
        const int b = blockIdx.y;
        const int ctx = context_lens[b];
        const PageRange range = page_range<SPLIT, PAGE_SIZE>(ctx);
        const int p_begin = range.p_begin, p_end = range.p_end, t_end = range.t_end;
        const int* table = block_tables + static_cast<size_t>(b) * pages_per_seq;
        begin_unit(b, kvh);
        for (int chunk = p_begin; chunk < p_end; chunk += CHUNK_PAGES) {
            const int chunk_pages = min(CHUNK_PAGES, p_end - chunk);
            stage_pages<WARPS * 32>(s_pages, table, chunk, chunk_pages);
            const int c_begin = chunk * PAGE_SIZE;
            const int c_end = min(t_end, (chunk + chunk_pages) * PAGE_SIZE);
            const int n_tiles = (c_end - c_begin + TILE - 1) / TILE;
            const int n_mine = warp < n_tiles ? (n_tiles - warp + WARPS - 1) / WARPS : 0;  // tiles warp, warp+WARPS, ...
            auto produce = [&](int j) {  // this warp's tile j into stage j % NSTAGES
                if (j < n_mine)
                    copy_tile(j % NSTAGES, (j * WARPS + warp) * TILE, [&](int i) { return s_pages[i]; }, c_begin, c_end);
#if COPY_MODE == 0
                asm volatile("cp.async.commit_group;" ::: "memory");  // one group per tile, maybe empty
#endif
            };
#pragma unroll
            for (int j = 0; j < NSTAGES - 1; ++j) produce(j);
            for (int j = 0; j < n_mine; ++j) {
                produce(j + NSTAGES - 1);
                wait_stage(j % NSTAGES, IntC<NSTAGES - 1>{});
                consume_tile(j % NSTAGES, c_begin + (j * WARPS + warp) * TILE, c_end);
            }
#if COPY_MODE == 0
            asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
        }
        warps_to_smem();
#if SPLIT
        merge_warps_and_store<WARPS, GROUP, HEAD_DIM, true>(s_m, s_l, s_acc, part_o, part_m, part_l, b, kvh, q_heads,
                                                             blockIdx.z, gridDim.z, out, counters);
#else
        merge_warps_and_store<WARPS, GROUP, HEAD_DIM, false>(s_m, s_l, s_acc, out, nullptr, nullptr, b, kvh,
                                                              q_heads, 0, 1);
#endif
    }
#endif
#if TIMELINE
    __syncthreads();
    const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (threadIdx.x == 0 && cta < 65536) {
        unsigned sm;
        asm volatile("mov.u32 %0, %smid;" : "=r"(sm));
        paprof_timeline[4 * cta] = t_start;
        paprof_timeline[4 * cta + 1] = global_ns();
        paprof_timeline[4 * cta + 2] = sm;
        paprof_timeline[4 * cta + 3] = t_work;
    }
#endif
}
