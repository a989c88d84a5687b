// v5 / v6 for fp16 and bf16 caches: the work of v5_fast.cu on the tensor cores.
//
// On CUDA cores a 16-bit cache costs twice the arithmetic per byte of an fp32 one (every
// element feeds GROUP multiply-adds twice, plus a conversion), and v5_fast.cu stalls at
// about 80 % of the read ceiling. Here each warp takes 16-token tiles of K and V, and:
//   S = Q K^T   mma.m16n8k16, A = the group's queries, fp32 split into a hi (rows 0..7)
//               and a lo (rows 8..15) 16-bit part: one product gives both shares of a
//               score, which keeps fp32-level accuracy; B = K;
//   P = exp2(S - m)   lazy-rescaled online softmax on the accumulator fragments; S's
//               fragments are exactly the fragments P V needs (no shuffles);
//   O += P V    bf16 P is split hi + lo as well.
// Two ways to feed the tensor cores (FEED):
//   1 (head_dim 64, 128; shipped): 16-byte ld.global.nc straight into the registers the
//     mma reads. The dot product does not care which dim is which k index, so each
//     thread's K vectors are its B fragments as loaded; V is paired across tokens with
//     byte permutes and the product runs transposed (O^T += V^T P^T: no wasted rows, P's
//     fragments are B as they are). The query fragments wait in shared memory. One tile
//     a warp in flight (K of the next tile is requested once S is done, V once P V is).
//   0 (any head_dim, e.g. 32, 256): a per-warp ring of shared-memory stages filled with
//     cp.async (zero-filled past the end), read with ldmatrix / ldmatrix.trans (rows padded
//     by 16 bytes against bank conflicts); P V with rows 8..15 of A zero, results dropped.
//     With no arithmetic at all this path streams at ~91.5 % of the read ceiling against
//     ~96 % for register loads over the same addresses (kernels/NOTES.md, item 18).
// fp8 caches (KV_DTYPE 3, e4m3 with a float scale per KV head for K and one for V) take the
// register feed only: each 16-byte load brings 16 e4m3 values, converted in registers to f16
// pairs (cvt.rn.f16x2.e4m3x2, one instruction for two values on sm_89+) that feed the same
// f16 mma. e4m3 -> f16 is exact; the scales are never applied per element: K's is folded
// into the query (the scores), V's into the output. A 16-token tile is half fp16's bytes, so
// a warp takes TSUB tiles a step to keep as many bytes in flight.
// Same parameters, partial layout and merge as v5_fast.cu (SPLIT, WORKLIST, KERNEL_NAME); fp8
// adds k_scales, v_scales at the end.
// With PAGED_EMULATE (tests/test_paged_emulated.py) the register feed runs on the CPU: the
// PTX helpers below give way to tests/paged_emu/paged_emulate.h's, the rest is unchanged.
#include "common.cuh"

#ifndef GROUP
#define GROUP 4
#endif
#ifndef KV_DTYPE
#define KV_DTYPE 1  // 1 fp16, 2 bf16, 3 fp8 (e4m3; FEED 1 only)
#endif
#ifndef PAGE_SIZE
#define PAGE_SIZE 16
#endif
// The defaults are the shipped build of the main dtype (fp16 at head_dim 128, group 4:
// variants.FAST_TUNING); what ships also depends on dtype and shape where said below.
#ifndef WARPS
#define WARPS 3  // shipped; 2 at group 1, head_dim 64 (variants.GROUP1_D64_TUNING)
#endif
#ifndef NSTAGES
#define NSTAGES 2  // FEED 0: tiles in each warp's ring (the ring's shipped build)
#endif
#include "fast_common.cuh"
#ifndef FEED
#define FEED 1  // 1: K/V straight into registers (shipped at head_dim 64, 128); 0: through a
                // cp.async ring and ldmatrix (shipped at other head dims: variants.RING_TUNING)
#endif
// The L2::256B hint (FEED_HINT 2, COPY_HINT 2) and cp.async.ca (COPY_HINT 3) lost (kernels/NOTES.md:
// the ring's copies 88.5 % and 88.8 % of the read ceiling against L2::128B's 89.5 %, the
// loads 86.7 % against 94.7 %) and left the code after e6f8bcd; the ring's copies without a
// hint (COPY_HINT 0, item 8's build before it) left it after bfc4832: the ring always hints.
#ifndef FEED_HINT
#define FEED_HINT 1  // FEED 1: 1 (shipped) adds an L2::128B prefetch hint to the loads; 0: none
#endif
static_assert(FEED_HINT == 0 || FEED_HINT == 1, "FEED_HINT 0 or 1");
#ifndef TSUB
#define TSUB 1  // FEED 1: 16-token tiles a warp takes in one step (loads in flight: TSUB tiles);
                // shipped 1 for fp16 and bf16, 2 for fp8 (KV_DTYPE 3: half the bytes a tile)
#endif

#define TILE 16
#define ELEM_BYTES (KV_DTYPE == 3 ? 1 : 2)
#define ROW_BYTES (HEAD_DIM * ELEM_BYTES)
#define PITCH (ROW_BYTES + 16)
#define CHUNKS (ROW_BYTES / 16)
#define TILE_BYTES (TILE * PITCH)
#define COPIES (TILE * CHUNKS / 32)
#define KSTEPS (HEAD_DIM / 16)
#define NBLK (HEAD_DIM / 8)
#define CHUNK_PAGES 256
#define LOG2E 1.4426950408889634f
// FEED 1: thread (g, t4) holds K of tokens g, g + 8 as KPIECES 16-byte vectors (bytes
// 64 piece + 16 t4 of the row) and V of tokens 2 t4 + {0, 1, 8, 9} as VCHUNKS vectors of
// V_LANE_BYTES (bytes 128 c + V_LANE_BYTES g); a 16-byte vector holds VEC_ELEMS elements.
#define KPIECES (ROW_BYTES / 64)
#define VCHUNKS (ROW_BYTES >= 128 ? ROW_BYTES / 128 : 1)
#define V_LANE_BYTES (ROW_BYTES >= 128 ? 16 : ROW_BYTES / 8)
#define VEC_ELEMS (16 / ELEM_BYTES)

static_assert(KV_DTYPE >= 1 && KV_DTYPE <= 3, "the tensor-core path reads fp16, bf16 or fp8 caches");
static_assert(KV_DTYPE != 3 || FEED, "fp8 caches take the register feed only");
static_assert(TSUB == 1 || FEED, "TSUB is the register feed's");
static_assert(GROUP >= 1 && GROUP <= 8, "a group's heads fill at most the 8 real rows of an m16 tile");
static_assert(HEAD_DIM % 16 == 0 && (TILE * CHUNKS) % 32 == 0, "head_dim must be a multiple of 16");

#ifndef PAGED_EMULATE  // tests/paged_emu/paged_emulate.h has the host's (FEED 1)
__device__ __forceinline__ unsigned smem_u32(const void* ptr) {
    unsigned addr;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(addr) : "l"(ptr));
    return addr;
}

// 16 bytes global -> shared, bypassing L1, with an L2::128B prefetch hint; src_bytes = 0
// writes zeros and reads nothing.
__device__ __forceinline__ void copy16(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
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

#if KV_DTYPE != 2  // fp16, and fp8 converted to fp16
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
    [[maybe_unused]] float drop0, drop1;  // rows 8..15: never read
    asm volatile(MMA_OP "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %10, %10};"
                 : "+f"(d0), "+f"(d1), "=f"(drop0), "=f"(drop1)
                 : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1), "f"(0.f));
}

// Two floats as one 16-bit pair (x0 in the low half), rounded to nearest.
__device__ __forceinline__ unsigned pack2(float x0, float x1) {
    unsigned r;
#if KV_DTYPE != 2
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
#else
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(x1), "f"(x0));
#endif
    return r;
}

__device__ __forceinline__ float2 unpack2(unsigned w) {
#if KV_DTYPE != 2
    float lo, hi;
    asm("{.reg .b16 a, b; mov.b32 {a, b}, %2; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b;}" : "=f"(lo), "=f"(hi) : "r"(w));
    return make_float2(lo, hi);
#else
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
#endif
}
#endif  // PAGED_EMULATE

// x = hi + lo with both parts 16-bit: about 22 (fp16) or 16 (bf16) significant bits.
__device__ __forceinline__ void split2(float x0, float x1, unsigned& hi, unsigned& lo) {
    hi = pack2(x0, x1);
    const float2 h = unpack2(hi);
    lo = pack2(x0 - h.x, x1 - h.y);
}


// The dims of k-step kk whose query values thread t4 holds in A fragment half `half`
// (cols 2 t4 + {0, 1} + 8 half). The dot product does not care how dims map to the mma's
// k index, as long as Q and K agree: the register feed lets each thread's 16-byte K
// vectors be its B fragments (a vector feeds VEC_ELEMS / 4 k-steps; 16-bit: dims
// 32 (kk / 2) + 8 t4 + 4 (kk % 2) + {0..3}; fp8: 64 (kk / 4) + 16 t4 + 4 (kk % 4) + {0..3}).
__device__ __forceinline__ int q_dim(int kk, int half, int t4) {
#if FEED
    constexpr int KPV = VEC_ELEMS / 4;  // k-steps a vector feeds
    return 4 * VEC_ELEMS * (kk / KPV) + 4 * (kk % KPV) + VEC_ELEMS * t4 + 2 * half;
#else
    return 16 * kk + 8 * half + 2 * t4;
#endif
}

// Row g's scores of a tile from S's fragments (hi + lo shares): tokens 2 t4 + {0, 1} and
// 8 + 2 t4 + {0, 1}, -inf from c_end on (the tile starts at token first_tok). Returns the
// row's max over its four lanes.
__device__ __forceinline__ float row_scores(const float (&sc)[2][4], int first_tok, int c_end, int t4, float (&x)[4]) {
    x[0] = sc[0][0] + sc[0][2];
    x[1] = sc[0][1] + sc[0][3];
    x[2] = sc[1][0] + sc[1][2];
    x[3] = sc[1][1] + sc[1][3];
#pragma unroll
    for (int i = 0; i < 4; ++i)
        if (first_tok + 8 * (i >> 1) + 2 * t4 + (i & 1) >= c_end) x[i] = NEG_INF;
    float mx = fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3]));
    mx = fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 1));
    return fmaxf(mx, __shfl_xor_sync(FULL_MASK, mx, 2));
}

// P = exp2(x - m) for row g's four tokens as 16-bit pairs (tokens 2 t4.. and 8 + 2 t4..),
// which both feeds take as they are; bf16 also the lo parts. Adds P to l.
struct PFrags {
    unsigned hi0, hi1, lo0, lo1;
};

__device__ __forceinline__ PFrags row_probs(float (&x)[4], float m, float& l) {
    const float m_ref = (m == NEG_INF) ? 0.f : m;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        x[i] = exp2f(x[i] - m_ref);
        l += x[i];
    }
    PFrags p;
#if KV_DTYPE == 2
    split2(x[0], x[1], p.hi0, p.lo0);
    split2(x[2], x[3], p.hi1, p.lo1);
#else
    p.hi0 = pack2(x[0], x[1]);
    p.hi1 = pack2(x[2], x[3]);
    p.lo0 = p.lo1 = 0u;
#endif
    return p;
}

#define MBLK (HEAD_DIM / 16)

// FEED: the dim of row g + 8 hi of m-block mb of O^T. 16-bit: thread g's V vectors hold
// dims 64 c + 8 g + {0..7}; index i = mb + hi MBLK of them is row (mb, hi). fp8: its bytes
// hold dims V_LANE_BYTES g + {0..}; byte 2 mb + hi is row (mb, hi) (see v_frags).
__device__ __forceinline__ int v_dim(int mb, int hi, int g) {
#if KV_DTYPE == 3
    return V_LANE_BYTES * g + 2 * mb + hi;
#else
    const int i = mb + hi * MBLK;
    return 64 * (i / 8) + 8 * g + i % 8;
#endif
}

__device__ __forceinline__ unsigned word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

#ifndef PAGED_EMULATE
// 16 bytes from shared memory, in program order (volatile: not hoisted ahead of its use,
// where it would hold registers the loads in flight need).
__device__ __forceinline__ uint4 lds16(const uint4* p) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(smem_u32(p)));
    return v;
}

// 16 bytes global -> registers, no L1 allocation (read once).
__device__ __forceinline__ uint4 load16(const unsigned char* p) {
    uint4 v;
#if FEED_HINT == 1
    asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#else
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
#endif
    return v;
}

// 8 bytes global -> registers (.x, .y; fp8 with head_dim 64: 8 dims of V a thread and token).
__device__ __forceinline__ uint4 load8(const unsigned char* p) {
    uint2 v;
#if FEED_HINT == 1
    asm volatile("ld.global.nc.L1::no_allocate.L2::128B.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
#else
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
#endif
    return make_uint4(v.x, v.y, 0u, 0u);
}

// Four e4m3 bytes as two f16 pairs, exactly: bytes 0, 1 -> lo, bytes 2, 3 -> hi (the lower
// byte in the lower half). One F2FP instruction a pair on sm_89+.
__device__ __forceinline__ void e4m3x4_to_f16x2(unsigned w, unsigned& lo, unsigned& hi) {
    asm("{.reg .b16 a, b; mov.b32 {a, b}, %2; cvt.rn.f16x2.e4m3x2 %0, a; cvt.rn.f16x2.e4m3x2 %1, b;}"
        : "=r"(lo), "=r"(hi)
        : "r"(w));
}
#endif  // PAGED_EMULATE

// FEED: the B fragments (b0: k 2 t4 + {0, 1}; b1: + 8) of k-step kk from one token's K
// vectors, as q_dim maps dims to k: 16-bit words as loaded, fp8 bytes converted.
__device__ __forceinline__ void k_frags(const uint4 (&kv)[KPIECES], int kk, unsigned& b0, unsigned& b1) {
#if KV_DTYPE == 3
    e4m3x4_to_f16x2(word(kv[kk / 4], kk % 4), b0, b1);
#else
    b0 = word(kv[kk / 2], 2 * (kk % 2));
    b1 = word(kv[kk / 2], 2 * (kk % 2) + 1);
#endif
}

// FEED: the A fragments of m-block mb of V^T (rows: dims v_dim(mb, 0 | 1, g); columns:
// tokens 2 t4 + {0, 1} in a0, a1 and 8 + 2 t4 + {0, 1} in a2, a3), from the V vectors of
// tokens 2 t4 + {0, 1, 8, 9} (vr[0..3]), paired across tokens with byte permutes.
__device__ __forceinline__ void v_frags(const uint4 (&vr)[4][VCHUNKS], int mb, unsigned (&a)[4]) {
#if KV_DTYPE == 3
    // bytes 2 mb + {0, 1} of both tokens of a pair: [t0 b, t1 b, t0 b+1, t1 b+1], then to f16
    const int u = mb / 2;
    const unsigned sel = (mb & 1) ? 0x7362u : 0x5140u;
    e4m3x4_to_f16x2(__byte_perm(word(vr[0][0], u), word(vr[1][0], u), sel), a[0], a[1]);
    e4m3x4_to_f16x2(__byte_perm(word(vr[2][0], u), word(vr[3][0], u), sel), a[2], a[3]);
#else
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
        const int i = mb + hi * MBLK, c = i / 8, w = (i % 8) / 2;
        const unsigned sel = (i & 1) ? 0x7632u : 0x5410u;
        a[hi] = __byte_perm(word(vr[0][c], w), word(vr[1][c], w), sel);
        a[2 + hi] = __byte_perm(word(vr[2][c], w), word(vr[3][c], w), sel);
    }
#endif
}

extern "C" __global__ void __launch_bounds__(WARPS * 32, MIN_BLOCKS) KERNEL_NAME(FAST_KERNEL_PARAMS) {
#if TIMELINE
    const unsigned long long t_start = global_ns();
    unsigned long long t_quarter[3] = {0, 0, 0}, t_work = 0;  // packed: the CTA's last item's
#endif
    __shared__ int s_pages[CHUNK_PAGES];
    // FEED 0: [WARPS][NSTAGES][K, V] tiles of TILE rows x PITCH bytes. Either feed: the merge
    // of the warps (and of v6's splits) at the end.
    FAST_DYNAMIC_SMEM(uint4, s_dyn);

    FAST_ITEMS_BEGIN  // v7 packed: once an item of the CTA's range (fast_common.cuh)
    const int kvh = FAST_KVH;
    const CtaWork work = cta_work<PAGE_SIZE>(context_lens, FAST_WORK_ITEMS, q_heads, item_index);  // v7: its item
    const int b = work.b;
    const int tid = FAST_TID, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t4 = lane & 3;  // fragment row (head) and column pair
    const int* table = block_tables + static_cast<size_t>(b) * pages_per_seq;
    const int p_begin = work.p_begin, p_end = work.p_end, t_end = work.t_end;

    // A fragments of the group's queries (row g = head g), pre-scaled for exp2: the hi
    // 16-bit part goes to rows 0..7 (a0, a2), the lo part to rows 8..15 (a1, a3).
    unsigned qa_hi[KSTEPS][2], qa_lo[KSTEPS][2];
#if FEED
    // the register feed needs the registers: the fragments wait in shared memory (the same
    // for every warp), one 16-byte read a k-step
    __shared__ uint4 s_q[KSTEPS][32];
#endif
    {
#if KV_DTYPE == 3
        const float qscale = scale * LOG2E * k_scales[kvh];  // K's scale, once for every score
#else
        const float qscale = scale * LOG2E;
#endif
        const float* qrow = query + (static_cast<size_t>(b) * q_heads + kvh * GROUP + min(g, GROUP - 1)) * HEAD_DIM;
#pragma unroll
        for (int kk = 0; kk < KSTEPS; ++kk) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                float2 x = *reinterpret_cast<const float2*>(qrow + q_dim(kk, half, t4));
                if (g >= GROUP) x = make_float2(0.f, 0.f);
                split2(x.x * qscale, x.y * qscale, qa_hi[kk][half], qa_lo[kk][half]);
            }
#if FEED
            if (warp == 0) s_q[kk][lane] = make_uint4(qa_hi[kk][0], qa_lo[kk][0], qa_hi[kk][1], qa_lo[kk][1]);
#endif
        }
    }  // (FEED: visible to every warp after stage_pages' barrier)

#if FEED
    // O^T in MBLK m-blocks of 16 dims: rows g, g + 8 = dims v_dim(mb, 0 | 1, g), columns
    // 2 t4 + {0, 1} = heads (columns past GROUP are never stored)
    float ot[MBLK][4];
#pragma unroll
    for (int mb = 0; mb < MBLK; ++mb) ot[mb][0] = ot[mb][1] = ot[mb][2] = ot[mb][3] = 0.f;
#else
    float o[NBLK][2];  // row g, dims 8 jb + 2 t4 + {0, 1}
#pragma unroll
    for (int j = 0; j < NBLK; ++j) o[j][0] = o[j][1] = 0.f;
#endif
    float m = NEG_INF, l = 0.f;  // row g; l is this thread's share until the end

    // Byte strides of the cache [pages][PAGE_SIZE][kv_heads][HEAD_DIM]: ROW_BYTES a head's
    // row (ELEM_BYTES an element: 1 for fp8, whose loads would otherwise land on the wrong
    // rows, heads and pages, out of the cache for half of them).
    const size_t token_stride = static_cast<size_t>(kv_heads) * ROW_BYTES;
    const size_t page_stride = token_stride * PAGE_SIZE;
    const size_t head_offset = static_cast<size_t>(kvh) * ROW_BYTES;

#if FEED
    // Each warp's tiles go straight into registers (16-byte ld.global.nc): thread (g, t4)
    // holds K of tokens g and g + 8 (bytes 64 s + 16 t4 of the row: its B fragments of S
    // as they are, fp8 after a conversion) and V of tokens 2 t4 + {0, 1, 8, 9} (bytes
    // 128 c + 16 g, fp8 with head_dim 64 8 g: paired across tokens into A fragments of V^T
    // with byte permutes). A step takes TSUB tiles; K of step j + 1 is requested once S of
    // step j is done, V of step j + 1 after P V of step j: one step a warp in flight and no
    // shared memory. (cp.async into shared memory left the SMs reading unevenly: 91.5 % of
    // the ceiling with no arithmetic at all against 96 % through registers; NOTES item 18.)
    static_assert(HEAD_DIM % 64 == 0 && HEAD_DIM <= 128, "the register feed holds 64-byte K and 128-byte V pieces");
    constexpr int STEP = TILE * TSUB;  // tokens a warp takes a step
    const int token_stride32 = kv_heads * ROW_BYTES;
    const unsigned char* k_head = key_cache + head_offset + 16 * t4;
    const unsigned char* v_head = value_cache + head_offset + V_LANE_BYTES * g;
    for (int chunk = p_begin; chunk < p_end; chunk += CHUNK_PAGES) {
        const int chunk_pages = min(CHUNK_PAGES, p_end - chunk);
        stage_pages<WARPS * 32>(s_pages, table, chunk, chunk_pages);
        const int c_begin = chunk * PAGE_SIZE;
        const int c_end = min(t_end, (chunk + chunk_pages) * PAGE_SIZE);
        const int n_tiles = (c_end - c_begin + STEP - 1) / STEP;  // steps, of TSUB tiles
        const int n_mine = warp < n_tiles ? (n_tiles - warp + WARPS - 1) / WARPS : 0;  // steps warp, warp+WARPS, ...
        const int last = c_end - 1 - c_begin;
        // The first token of tile s of the warp's step j, relative to c_begin; with TSUB > 1
        // a tile wholly past the end reads the last tile instead (finite values, weight 0).
        auto tile_first = [&](int j, int s) -> int {
            const int first = (j * WARPS + warp) * STEP + s * TILE;
            return TSUB > 1 ? min(first, last / TILE * TILE) : first;
        };
        // Where token `tok` (0..TILE-1) of that tile sits, relative to the head's row 0 of
        // the cache; a token past the end reads the last one instead (finite values, weight
        // 0). A tile lies in one page when pages are whole tiles.
        auto tile_base = [&](int j, int s) -> size_t {
            const int first = tile_first(j, s);
            return static_cast<size_t>(s_pages[first / PAGE_SIZE]) * page_stride + (first % PAGE_SIZE) * token_stride;
        };
        auto token = [&](int j, int s, size_t base, int tok) -> size_t {
            const int rel = min(tile_first(j, s) + tok, last);
#if PAGE_SIZE % TILE == 0
            return base + static_cast<unsigned>((rel % TILE) * token_stride32);
#else
            return static_cast<size_t>(s_pages[rel / PAGE_SIZE]) * page_stride + (rel % PAGE_SIZE) * token_stride;
#endif
        };
        uint4 kr[TSUB][2][KPIECES], vr[TSUB][4][VCHUNKS];
        auto load_k = [&](int j) {
#pragma unroll
            for (int s = 0; s < TSUB; ++s) {
                const size_t base = PAGE_SIZE % TILE == 0 ? tile_base(j, s) : 0;
#pragma unroll
                for (int nb = 0; nb < 2; ++nb) {
                    const unsigned char* src = k_head + token(j, s, base, g + 8 * nb);
#pragma unroll
                    for (int piece = 0; piece < KPIECES; ++piece) kr[s][nb][piece] = load16(src + 64 * piece);
                }
            }
        };
        auto load_v = [&](int j) {
#pragma unroll
            for (int s = 0; s < TSUB; ++s) {
                const size_t base = PAGE_SIZE % TILE == 0 ? tile_base(j, s) : 0;
#pragma unroll
                for (int ti = 0; ti < 4; ++ti) {
                    const unsigned char* src = v_head + token(j, s, base, 2 * t4 + (ti & 1) + 8 * (ti >> 1));
#pragma unroll
                    for (int c = 0; c < VCHUNKS; ++c)
                        vr[s][ti][c] = V_LANE_BYTES == 16 ? load16(src + 128 * c) : load8(src);
                }
            }
        };
        if (n_mine > 0) {
            load_k(0);
            load_v(0);
        }
        for (int j = 0; j < n_mine; ++j) {
#if TIMELINE
#pragma unroll
            for (int qq = 0; qq < 3; ++qq)
                if (j == (qq + 1) * n_mine / 4) t_quarter[qq] = global_ns();
#endif
            // One product gives the hi and the lo share of each score (rows g and g + 8).
            float sc[TSUB][2][4];
#pragma unroll
            for (int s = 0; s < TSUB; ++s)
#pragma unroll
                for (int e = 0; e < 4; ++e) sc[s][0][e] = sc[s][1][e] = 0.f;
#pragma unroll
            for (int kk = 0; kk < KSTEPS; ++kk) {
                const uint4 qa = lds16(&s_q[kk][lane]);
#pragma unroll
                for (int s = 0; s < TSUB; ++s) {
#pragma unroll
                    for (int nb = 0; nb < 2; ++nb) {
                        unsigned b0, b1;
                        k_frags(kr[s][nb], kk, b0, b1);
                        mma16(sc[s][nb], qa.x, qa.y, qa.z, qa.w, b0, b1);
                    }
                }
            }
            if (j + 1 < n_mine) load_k(j + 1);

            float x[TSUB][4];
            const int step_tok = c_begin + (j * WARPS + warp) * STEP;
            float mx = row_scores(sc[0], step_tok, c_end, t4, x[0]);
#pragma unroll
            for (int s = 1; s < TSUB; ++s) mx = fmaxf(mx, row_scores(sc[s], step_tok + s * TILE, c_end, t4, x[s]));
            // Lazy rescaling as in v5_fast.cu, decided for the whole warp: O^T's columns are
            // heads 2 t4 and 2 t4 + 1, whose factors live in the lanes of rows 2 t4, 2 t4 + 1.
            if (__any_sync(FULL_MASK, mx > m + RESCALE_THRESHOLD)) {
                const float m_new = mx > m + RESCALE_THRESHOLD ? mx : m;
                const float correction = m_new == m ? 1.f : exp2f(m - m_new);  // 0 from -inf
                l *= correction;
                m = m_new;
                const float c0 = __shfl_sync(FULL_MASK, correction, 8 * t4);
                const float c1 = __shfl_sync(FULL_MASK, correction, 8 * t4 + 4);
#pragma unroll
                for (int mb = 0; mb < MBLK; ++mb) {
                    ot[mb][0] *= c0;
                    ot[mb][1] *= c1;
                    ot[mb][2] *= c0;
                    ot[mb][3] *= c1;
                }
            }

            // O^T += V^T P^T: A = V^T (16 dims x 16 tokens), B = P^T, whose fragments are
            // this thread's P values as they are (tokens 2 t4.. in b0, 8 + 2 t4.. in b1).
#pragma unroll
            for (int s = 0; s < TSUB; ++s) {
                const PFrags p = row_probs(x[s], m, l);
#pragma unroll
                for (int mb = 0; mb < MBLK; ++mb) {
                    unsigned a[4];
                    v_frags(vr[s], mb, a);
                    mma16(ot[mb], a[0], a[1], a[2], a[3], p.hi0, p.hi1);
#if KV_DTYPE == 2
                    mma16(ot[mb], a[0], a[1], a[2], a[3], p.lo0, p.lo1);
#endif
                }
            }
            if (j + 1 < n_mine) load_v(j + 1);
        }
    }
#else
    const unsigned ring = smem_u32(s_dyn) + warp * NSTAGES * 2 * TILE_BYTES;
    // ldmatrix row addresses of this lane within a tile (see the fragment layouts).
    const int mat = lane >> 3, mrow = lane & 7;
    const unsigned k_lane = (8 * (mat >> 1) + mrow) * PITCH + (mat & 1) * 16;  // + kk * 32
    const unsigned v_lane = (8 * (mat & 1) + mrow) * PITCH + (mat >> 1) * 16;  // + pair * 32

    for (int chunk = p_begin; chunk < p_end; chunk += CHUNK_PAGES) {
        const int chunk_pages = min(CHUNK_PAGES, p_end - chunk);
        stage_pages<WARPS * 32>(s_pages, table, chunk, chunk_pages);
        const int c_begin = chunk * PAGE_SIZE;
        const int c_end = min(t_end, (chunk + chunk_pages) * PAGE_SIZE);
        const int n_tiles = (c_end - c_begin + TILE - 1) / TILE;
        const int n_mine = warp < n_tiles ? (n_tiles - warp + WARPS - 1) / WARPS : 0;  // tiles warp, warp+WARPS, ...

        auto produce = [&](int j) {  // this warp's tile j into stage j % NSTAGES
            if (j < n_mine) {
                const int first = (j * WARPS + warp) * TILE;  // relative to c_begin
                const unsigned k_dst = ring + (j % NSTAGES) * 2 * TILE_BYTES;
#pragma unroll
                for (int c = 0; c < COPIES; ++c) {
                    const int idx = lane + 32 * c;
                    const int row = idx / CHUNKS, piece = idx % CHUNKS;
                    const int rel = first + row;
                    const bool valid = c_begin + rel < c_end;
                    const size_t off = valid ? static_cast<size_t>(s_pages[rel / PAGE_SIZE]) * page_stride +
                                                   (rel % PAGE_SIZE) * token_stride + head_offset + piece * 16
                                             : 0;
                    const unsigned dst = k_dst + row * PITCH + piece * 16;
                    copy16(dst, key_cache + off, valid ? 16 : 0);
                    copy16(dst + TILE_BYTES, value_cache + off, valid ? 16 : 0);
                }
            }
            asm volatile("cp.async.commit_group;" ::: "memory");  // one group per tile, maybe empty
        };

#pragma unroll
        for (int j = 0; j < NSTAGES - 1; ++j) produce(j);
        for (int j = 0; j < n_mine; ++j) {
            produce(j + NSTAGES - 1);
#if TIMELINE
#pragma unroll
            for (int qq = 0; qq < 3; ++qq)
                if (j == (qq + 1) * n_mine / 4) t_quarter[qq] = global_ns();
#endif
            asm volatile("cp.async.wait_group %0;" ::"n"(NSTAGES - 1) : "memory");
            __syncwarp();  // every lane's copies of tile j are visible to the warp
            const unsigned k_tile = ring + (j % NSTAGES) * 2 * TILE_BYTES;
            const unsigned v_tile = k_tile + TILE_BYTES;

            // One product gives the hi and the lo share of each score (rows g and g + 8).
            float sc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
            for (int kk = 0; kk < KSTEPS; ++kk) {
                unsigned kb[4];
                ldsm_x4(kb, k_tile + k_lane + kk * 32);
                mma16(sc[0], qa_hi[kk][0], qa_lo[kk][0], qa_hi[kk][1], qa_lo[kk][1], kb[0], kb[1]);
                mma16(sc[1], qa_hi[kk][0], qa_lo[kk][0], qa_hi[kk][1], qa_lo[kk][1], kb[2], kb[3]);
            }

            float x[4];
            const float mx = row_scores(sc, c_begin + (j * WARPS + warp) * TILE, c_end, t4, x);
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
            const PFrags p = row_probs(x, m, l);

            // P as A fragments: a0 = tokens 2*t4.., a2 = tokens 8 + 2*t4..
#pragma unroll
            for (int pair = 0; pair < NBLK / 2; ++pair) {
                unsigned vb[4];
                ldsm_x4_trans(vb, v_tile + v_lane + pair * 32);
                mma8(o[2 * pair][0], o[2 * pair][1], p.hi0, p.hi1, vb[0], vb[1]);
                mma8(o[2 * pair + 1][0], o[2 * pair + 1][1], p.hi0, p.hi1, vb[2], vb[3]);
#if KV_DTYPE == 2
                mma8(o[2 * pair][0], o[2 * pair][1], p.lo0, p.lo1, vb[0], vb[1]);
                mma8(o[2 * pair + 1][0], o[2 * pair + 1][1], p.lo0, p.lo1, vb[2], vb[3]);
#endif
            }
            __syncwarp();  // the tile is read before its slot is refilled
        }
        asm volatile("cp.async.wait_group 0;" ::: "memory");
    }
#endif

    l += __shfl_xor_sync(FULL_MASK, l, 1);
    l += __shfl_xor_sync(FULL_MASK, l, 2);

#if TIMELINE
    t_work = global_ns();
#endif
    __syncthreads();  // the rings become the merge area
    float* s_m = reinterpret_cast<float*>(s_dyn);
    float* s_l = s_m + WARPS * GROUP;
    float* s_acc = s_l + WARPS * GROUP;
    if (g < GROUP && t4 == 0) {
        s_m[warp * GROUP + g] = m;
        s_l[warp * GROUP + g] = l;
    }
#if FEED
#if KV_DTYPE == 3
    const float vscale = v_scales[kvh];  // V's scale, once for every output
#else
    constexpr float vscale = 1.f;
#endif
#pragma unroll
    for (int mb = 0; mb < MBLK; ++mb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int head = 2 * t4 + (e & 1);
            if (head < GROUP) s_acc[(warp * GROUP + head) * HEAD_DIM + v_dim(mb, e >> 1, g)] = ot[mb][e] * vscale;
        }
#else
    if (g < GROUP) {
#pragma unroll
        for (int jb = 0; jb < NBLK; ++jb) {
            s_acc[(warp * GROUP + g) * HEAD_DIM + 8 * jb + 2 * t4] = o[jb][0];
            s_acc[(warp * GROUP + g) * HEAD_DIM + 8 * jb + 2 * t4 + 1] = o[jb][1];
        }
    }
#endif
    __syncthreads();
#if SPLIT
    merge_warps_and_store<WARPS, GROUP, HEAD_DIM, true>(s_m, s_l, s_acc, work, kvh, q_heads, out, part_m, part_l,
                                                         part_o, counters);
#else
    merge_warps_and_store<WARPS, GROUP, HEAD_DIM, false>(s_m, s_l, s_acc, work, kvh, q_heads, out);
#endif
    FAST_ITEMS_END
#if TIMELINE
    __syncthreads();
    const unsigned cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (threadIdx.x == 0 && cta < 65536) {
        unsigned sm;
        asm volatile("mov.u32 %0, %smid;" : "=r"(sm));
        unsigned long long* rec = paprof_timeline + TL_SLOTS * cta;
        rec[0] = t_start;
        rec[1] = global_ns();
        rec[2] = sm;
        rec[3] = t_work;
        for (int qq = 0; qq < 3; ++qq) rec[4 + qq] = t_quarter[qq];
    }
#endif
}
