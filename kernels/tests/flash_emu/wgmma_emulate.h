// Host stand-ins for paprof_kernels/flash_fwd/flash_wgmma.cuh (Hopper's warpgroup MMA,
// mbarriers, named barriers), written from the PTX ISA (section "Asynchronous Warpgroup
// Level Matrix Multiply-Accumulate": register fragments of .m64nNk16, the matrix descriptor
// format, the shared memory matrix layouts and strides, wgmma.fence / commit_group /
// wait_group; "mbarrier"; "bar, barrier"), not from the kernels' encoding functions: a
// wrong descriptor, swizzle or fragment in a kernel gives wrong numbers here.
//
// wgmma.mma_async is deferred, as on the GPU: it is recorded when issued and computed
// when a wgmma.wait_group retires its group (wait_group N retires the oldest groups until
// at most N stay pending, so the N newest really are still in flight), reading B (and an
// SS A) in shared memory then. Its A registers are copied at issue and must be unchanged
// at the retirement; its accumulators are taken at issue (the true values live in a
// shadow until the group retires) and the registers are poisoned with a signalling NaN:
// a kernel that reads an accumulator before the wait computes with NaN, one that writes
// it (a rescale of O while P V is in flight) aborts. Checked as errors: an mma_async with
// no wgmma.fence since the thread's last wait (or since it started); a descriptor with
// reserved bits set, a swizzle other than 128-byte or a base offset (not modelled); reads
// outside shared memory; reads of a 16-byte chunk a cp.async wrote with no
// fence.proxy.async after it (by the writer, or by the reader before issuing); a copy
// landing in a chunk an in-flight wgmma reads; the 128 threads of a warpgroup disagreeing
// on the instruction (shape, transpose, scale-d, descriptors); operations never
// committed or waited for (the driver).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace flash_emu {

// The shared-memory window address of dynamic shared memory's first byte: on purpose not
// a multiple of 1024 (the 128-byte swizzle's period), so a kernel must align its tiles.
constexpr unsigned SHARED_WINDOW_BASE = 0x0410;

struct WgmmaOp {
    int n;                  // N of m64nNk16
    int trans_b;            // imm-trans-b: 0 K-major, 1 N-major
    int scale_d;            // 0: D = A B, 1: D = A B + D
    unsigned long long desc_a, desc_b;  // desc_a: SS (A K-major in shared memory), else 0
    const unsigned* a;      // this thread's 4 A registers (RS), checked unchanged at the wait
    unsigned a_copy[4];
    float* d;               // this thread's N/2 accumulators
    unsigned long long fenced_at;  // the thread's last fence.proxy.async when it issued this
    std::vector<int> chunks;       // the 16-byte chunks it reads (the warpgroup's first thread)
};
inline thread_local bool wgmma_fenced = false;
inline thread_local std::vector<WgmmaOp> wgmma_open;
inline thread_local std::deque<std::vector<WgmmaOp>> wgmma_groups;
inline thread_local std::map<float*, std::vector<float>> wgmma_shadow;  // in-flight accumulators
inline std::vector<const std::vector<WgmmaOp>*> wgmma_slots(1024);
constexpr unsigned POISON = 0x7f80dead;  // a signalling NaN: arithmetic on it (a read before the wait) gives a quiet one

inline size_t window_offset(unsigned addr, size_t bytes) {
    auto& s = cta().smem;
    if (addr < SHARED_WINDOW_BASE || addr - SHARED_WINDOW_BASE + bytes > s.size())
        fail("wgmma reads outside shared memory");
    return addr - SHARED_WINDOW_BASE;
}

inline const unsigned char* shared_at(unsigned addr, size_t bytes, unsigned long long reader_fence) {
    const size_t off = window_offset(addr, bytes), c = off / 16;
    if (c < writer_chunks && chunk_time[c] != 0) {
        const unsigned long long t = chunk_time[c];
        if (!(fence_time[chunk_thread[c]] > t || reader_fence > t))
            fail("wgmma reads a chunk a cp.async wrote, with no fence.proxy.async after it (writer or reader)");
    }
    return cta().smem.data() + off;
}

// The PTX ISA's matrix descriptor: bits 13-0 start address >> 4, 29-16 leading dimension
// byte offset >> 4, 45-32 stride dimension byte offset >> 4, 51-49 base offset, 63-62
// swizzle mode (0 none, 1 128-byte, 2 64-byte, 3 32-byte); every other bit reserved.
struct Desc {
    unsigned start, lbo, sbo, base_offset, swizzle;
};
inline Desc decode(unsigned long long d) {
    const unsigned long long reserved = (3ull << 14) | (3ull << 30) | (7ull << 46) | (0x3FFull << 52);
    if (d & reserved) fail("wgmma descriptor: reserved bits set");
    Desc x{unsigned(d & 0x3FFF) << 4, unsigned((d >> 16) & 0x3FFF) << 4, unsigned((d >> 32) & 0x3FFF) << 4,
           unsigned((d >> 49) & 7), unsigned(d >> 62)};
    if (x.swizzle != 1) fail("wgmma descriptor: only the 128-byte swizzle is modelled");
    if (x.base_offset != 0) fail("wgmma descriptor: a base offset is not modelled");
    return x;
}

// 128-byte swizzle (the ISA's pattern: 8 rows of 128 bytes repeating every 1024 bytes):
// the 16-byte chunk of an address, bits 6-4, is XORed with its row in the pattern, bits 9-7.
inline unsigned swizzle128(unsigned addr) { return addr ^ (((addr >> 7) & 7) << 4); }

// The window address of element (k, mn) of a 16 x MN operand (B: mn = n; an SS A: the
// 64 x 16 A read as its transpose, mn = m, always K-major) by the ISA's canonical layouts
// for the 128-byte swizzle, in units of 16 bytes (T = 8 elements): K-major
// ((8,m),(T,2)) : ((8T,SBO),(1,T)) - row mn is its 16 k values, contiguous, rows 128 bytes
// apart in a group of 8, the groups SBO apart (LBO unused); N-major ((T,8,m),(8,2)) :
// ((1,T,LBO),(8T,SBO)) - 64 mn values contiguous (128 bytes), the k rows 128 bytes apart in a
// group of 8, the groups of 8 k SBO apart, the next 64 mn LBO on.
inline unsigned operand_addr(const Desc& x, int trans, int k, int mn) {
    unsigned addr;
    if (!trans)
        addr = x.start + unsigned(mn / 8) * x.sbo + unsigned(mn % 8) * 128 + unsigned(k) * 2;
    else
        addr = x.start + unsigned(mn / 64) * x.lbo + unsigned(mn % 64) * 2 + unsigned(k % 8) * 128 +
               unsigned(k / 8) * x.sbo;
    return swizzle128(addr);
}
inline float operand_element(const Desc& x, int trans, int k, int mn, unsigned long long reader_fence) {
    unsigned short bits;
    std::memcpy(&bits, shared_at(operand_addr(x, trans, k, mn), 2, reader_fence), 2);
    return from16(bits);
}

// The 16-byte chunks an operation reads (to refuse a copy landing in one while it flies).
inline std::vector<int> chunks_of(const WgmmaOp& op) {
    std::vector<int> out;
    auto add = [&](unsigned long long desc, int trans, int mn_count) {
        const Desc x = decode(desc);
        for (int k = 0; k < 16; ++k)
            for (int mn = 0; mn < mn_count; ++mn) out.push_back(int(window_offset(operand_addr(x, trans, k, mn), 2) / 16));
    };
    add(op.desc_b, op.trans_b, op.n);
    if (op.desc_a) add(op.desc_a, 0, 64);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

// Retire one group: every thread of the warpgroup computes its own accumulators from the
// whole warpgroup's A fragments (a warpgroup collective: all 128 threads call it).
inline void retire(const std::vector<WgmmaOp>& group) {
    const int me = int(threadIdx.x), wg = me / 128, base = wg * 128;
    wgmma_slots[me] = &group;
    warpgroups[wg]->arrive_and_wait();
    for (size_t i = 0; i < group.size(); ++i) {
        const WgmmaOp& op = group[i];
        for (int x = base; x < base + 128; ++x) {
            const auto& other = *wgmma_slots[x];
            if (other.size() != group.size() || other[i].n != op.n || other[i].trans_b != op.trans_b ||
                other[i].scale_d != op.scale_d || other[i].desc_b != op.desc_b || other[i].desc_a != op.desc_a)
                fail("the threads of a warpgroup issued different wgmma.mma_async");
        }
        if (!op.desc_a && std::memcmp(op.a, op.a_copy, sizeof op.a_copy))
            fail("the A registers of a wgmma.mma_async changed before its wgmma.wait_group");
        // A (64 x 16): SS from shared memory (K-major, element (m, k) at operand (k, m));
        // RS from the ISA's .m64nNk16 A fragments: warp w of the warpgroup holds rows
        // 16w..16w+15; in it lane l (g = l / 4, t = l % 4) holds a0,a1 = (g, 2t..2t+1),
        // a2,a3 = (g+8, 2t..), a4,a5 = (g, 2t+8..), a6,a7 = (g+8, 2t+8..), two a register,
        // the lower element in the lower half (the values as they were at the issue)
        float A[64][16];
        if (op.desc_a) {
            const Desc xa = decode(op.desc_a);
            for (int m = 0; m < 64; ++m)
                for (int k = 0; k < 16; ++k) A[m][k] = operand_element(xa, 0, k, m, op.fenced_at);
        } else {
            for (int x = 0; x < 128; ++x) {
                const unsigned* r = (*wgmma_slots[base + x])[i].a_copy;
                const int w = x / 32, g = (x % 32) / 4, t = x % 4, row = 16 * w + g;
                const int rows[4] = {row, row + 8, row, row + 8}, cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
                for (int j = 0; j < 4; ++j) {
                    A[rows[j]][cols[j]] = lo(r[j]);
                    A[rows[j]][cols[j] + 1] = hi(r[j]);
                }
            }
        }
        const Desc x = decode(op.desc_b);
        // D (64 x N) from the ISA's accumulator fragment: warp w rows 16w..16w+15; lane l
        // holds d[4j + e] = row g + 8 (e / 2), column 8j + 2t + (e % 2)
        const int w = (me % 128) / 32, g = (me % 32) / 4, t = me % 4;
        std::vector<float>& d = wgmma_shadow.at(op.d);
        for (int r = 0; r < op.n / 2; ++r) {
            const int row = 16 * w + g + 8 * ((r / 2) % 2), col = 8 * (r / 4) + 2 * t + (r % 2);
            double sum = op.scale_d ? d[r] : 0.0;
            for (int kk = 0; kk < 16; ++kk)
                sum += double(A[row][kk]) * double(operand_element(x, op.trans_b, kk, col, op.fenced_at));
            d[r] = float(sum);
        }
        if (me == base)
            for (int c : op.chunks) --inflight[c];
    }
    warpgroups[wg]->arrive_and_wait();
}

inline void issue(int n, float* d, const unsigned* a, unsigned long long desc_a, unsigned long long desc_b,
                  int trans_b, int accumulate) {
    if (!wgmma_fenced) fail("wgmma.mma_async without a wgmma.fence since the last wait");
    if (warpgroups.size() * 128 <= threadIdx.x) fail("wgmma.mma_async outside a whole warpgroup");
    WgmmaOp op{n, trans_b, accumulate != 0, desc_a, desc_b, a, {}, d, fence_time[threadIdx.x], {}};
    if (a) std::memcpy(op.a_copy, a, sizeof op.a_copy);
    if (threadIdx.x % 128 == 0) {
        op.chunks = chunks_of(op);
        for (int c : op.chunks) ++inflight[c];
    }
    // the accumulators' values at the issue (or, if an earlier in-flight wgmma writes them,
    // that one's result) go to the shadow; the registers read NaN until the wait
    if (!wgmma_shadow.count(d)) wgmma_shadow[d] = std::vector<float>(d, d + n / 2);
    for (int r = 0; r < n / 2; ++r) std::memcpy(d + r, &POISON, 4);
    wgmma_open.push_back(std::move(op));
    ++wgmma_pending;
}

// After a retirement: accumulators no pending operation writes any more get their values
// back; they must still hold the poison (nothing wrote them while in flight).
inline void release_shadows() {
    for (auto it = wgmma_shadow.begin(); it != wgmma_shadow.end();) {
        bool busy = false;
        for (auto& g : wgmma_groups)
            for (auto& op : g) busy |= op.d == it->first;
        for (auto& op : wgmma_open) busy |= op.d == it->first;
        if (busy) {
            ++it;
            continue;
        }
        for (size_t r = 0; r < it->second.size(); ++r)
            if (std::memcmp(it->first + r, &POISON, 4))
                fail("an accumulator was written while its wgmma.mma_async was in flight");
        std::memcpy(it->first, it->second.data(), it->second.size() * 4);
        it = wgmma_shadow.erase(it);
    }
}

}  // namespace flash_emu

FLASH_DEVICE unsigned smem_addr(const void* p) {
    flash_emu::check_smem(p, 1, 1);
    return flash_emu::SHARED_WINDOW_BASE + unsigned(static_cast<const unsigned char*>(p) - flash_emu::cta().smem.data());
}

FLASH_DEVICE void wgmma_fence() { flash_emu::wgmma_fenced = true; }

FLASH_DEVICE void wgmma_commit() {
    flash_emu::wgmma_groups.push_back(std::move(flash_emu::wgmma_open));
    flash_emu::wgmma_open.clear();
}

template <int N>
FLASH_DEVICE void wgmma_wait() {
    auto& groups = flash_emu::wgmma_groups;
    while (groups.size() > size_t(N)) {
        flash_emu::retire(groups.front());
        flash_emu::wgmma_pending -= int(groups.front().size());
        groups.pop_front();
    }
    flash_emu::release_shadows();
    flash_emu::wgmma_fenced = false;  // registers the kernel now touches need a new fence
}

template <int R>
FLASH_DEVICE void wgmma_hold(float (&)[R]) {}
template <int R>
FLASH_DEVICE void wgmma_hold(unsigned (&)[R]) {}

FLASH_DEVICE void fence_proxy_async() { flash_emu::fence_time[threadIdx.x] = ++flash_emu::clock; }

template <int TRANS_B>
FLASH_DEVICE void wgmma_m64n64(float (&d)[32], const unsigned (&a)[4], unsigned long long desc_b, int accumulate) {
    flash_emu::issue(64, d, a, 0, desc_b, TRANS_B, accumulate);
}
template <int TRANS_B>
FLASH_DEVICE void wgmma_m64n128(float (&d)[64], const unsigned (&a)[4], unsigned long long desc_b, int accumulate) {
    flash_emu::issue(128, d, a, 0, desc_b, TRANS_B, accumulate);
}
template <int TRANS_B>
FLASH_DEVICE void wgmma_m64n64_ss(float (&d)[32], unsigned long long desc_a, unsigned long long desc_b, int accumulate) {
    if (!desc_a) flash_emu::fail("wgmma: an SS A descriptor of 0");
    flash_emu::issue(64, d, nullptr, desc_a, desc_b, TRANS_B, accumulate);
}
template <int TRANS_B>
FLASH_DEVICE void wgmma_m64n128_ss(float (&d)[64], unsigned long long desc_a, unsigned long long desc_b, int accumulate) {
    if (!desc_a) flash_emu::fail("wgmma: an SS A descriptor of 0");
    flash_emu::issue(128, d, nullptr, desc_a, desc_b, TRANS_B, accumulate);
}

// ---- mbarriers (flash_emulate.h's MBar), named barriers ----
inline long mbar_key(unsigned bar) {
    const size_t off = flash_emu::window_offset(bar, 8);
    if (off % 8) flash_emu::fail("misaligned mbarrier");
    return long(off);
}
FLASH_DEVICE void mbar_init(unsigned bar, unsigned count) {
    auto& b = flash_emu::barrier_at(mbar_key(bar), true);
    std::lock_guard<std::mutex> g(b.m);
    if (count == 0) flash_emu::fail("mbarrier.init with a count of 0");
    b.expected = b.pending = int(count);
    b.phase = 0;
}
FLASH_DEVICE void mbar_init_fence() {}
FLASH_DEVICE void mbar_arrive(unsigned bar) {
    auto& b = flash_emu::barrier_at(mbar_key(bar), false);
    std::lock_guard<std::mutex> g(b.m);
    flash_emu::arrive_locked(b);
}
FLASH_DEVICE void mbar_wait(unsigned bar, unsigned parity) {
    auto& b = flash_emu::barrier_at(mbar_key(bar), false);
    std::unique_lock<std::mutex> lk(b.m);
    flash_emu::wait_locked(b, lk, [&] { return (b.phase & 1) != (parity & 1); }, "mbarrier wait timed out (deadlock)");
}
// .noinc: one of the phase's expected arrivals; this thread's earlier copies (committed or
// not) land when the phase completes (deferred mode) or have landed (eager mode)
FLASH_DEVICE void cp_async_mbar_arrive(unsigned bar) {
    auto& b = flash_emu::barrier_at(mbar_key(bar), false);
    std::lock_guard<std::mutex> g(b.m);
    for (auto& group : flash_emu::committed)
        for (auto& c : group) b.copies.push_back(c);
    for (auto& c : flash_emu::open_group) b.copies.push_back(c);
    flash_emu::committed.clear();
    flash_emu::open_group.clear();
    flash_emu::arrive_locked(b);
}
inline flash_emu::MBar& named_barrier(int id, int count) {
    if (id < 1 || id > 15) flash_emu::fail("named barrier id outside 1..15");
    if (count % 32 || count <= 0 || unsigned(count) > blockDim.x) flash_emu::fail("named barrier count not a multiple of 32");
    auto& b = flash_emu::barrier_at(-long(id), true);
    std::lock_guard<std::mutex> g(b.m);
    if (!b.named) b.named = true, b.expected = b.pending = count;
    if (b.expected != count) flash_emu::fail("named barrier used with two counts");
    return b;
}
FLASH_DEVICE void named_arrive(int id, int count) {
    auto& b = named_barrier(id, count);
    std::lock_guard<std::mutex> g(b.m);
    flash_emu::arrive_locked(b);
}
FLASH_DEVICE void named_sync(int id, int count) {
    auto& b = named_barrier(id, count);
    std::unique_lock<std::mutex> lk(b.m);
    const unsigned long long gen = b.phase;
    flash_emu::arrive_locked(b);
    flash_emu::wait_locked(b, lk, [&] { return b.phase != gen; }, "named barrier wait timed out (deadlock)");
}

template <int N>
FLASH_DEVICE void setmaxnreg_inc() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg: a multiple of 8 in 24..256");
}
template <int N>
FLASH_DEVICE void setmaxnreg_dec() {
    static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg: a multiple of 8 in 24..256");
}
FLASH_DEVICE int warp_uniform(int x) {
    int all[32];
    flash_emu::exchange(x, all);
    return all[0];
}

// ---- TMA: cp.async.bulk.tensor (tile mode) through a tensor map, mbarrier expect_tx ----
// The driver's CUtensorMap is opaque; here the map is the encode call's parameters
// (paprof/kernels/tensormap.py's TiledMap, filled by the same Python helper the launcher
// encodes with) and the tensor's host address. A copy (PTX ISA, "Tensor Access Modes" /
// "Tiled mode", "Tensor-map swizzling modes") reads the box at the given coordinates
// (dimension 0 innermost; box elements stored densely, dimension 0 fastest), elements
// outside [0, globalDim) of any dimension as zeros (OOB fill none), and writes it to shared
// memory at dst with the 128-byte swizzle applied to the shared address: the 16-byte chunk
// bits 6-4 XORed with bits 9-7 (the same pattern wgmma's descriptors decode). The box's
// bytes, out-of-bounds ones included, complete as transactions on the mbarrier. Checked:
// the map acquired by the issuing thread (fence.proxy.tensormap::generic.acquire), rank 3,
// a 16-bit data type, no interleave, unit element strides, the 128-byte swizzle with a
// 128-byte inner box (others not modelled), dst 128-byte aligned and inside shared memory,
// every element read inside a registered input.
namespace flash_emu {
struct TensorMap {
    long long data_type, rank, dims[5], strides[4], box[5], element_strides[5], interleave, swizzle, l2_promotion,
        oob_fill;
    const unsigned char* address;
};
constexpr int TENSOR_MAP_FIELDS = 25;  // TiledMap.fields(): all but the address
inline thread_local std::vector<const void*> acquired_maps;
}  // namespace flash_emu

FLASH_DEVICE void tensormap_acquire(const void* map) { flash_emu::acquired_maps.push_back(map); }

FLASH_DEVICE void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    auto& b = flash_emu::barrier_at(mbar_key(bar), false);
    std::lock_guard<std::mutex> g(b.m);
    flash_emu::tx_locked(b, (long long)bytes);
    flash_emu::arrive_locked(b);
}

FLASH_DEVICE void tma_load_3d(unsigned dst, const void* map, int x, int y, int z, unsigned bar) {
    using namespace flash_emu;
    const auto& m = *static_cast<const TensorMap*>(map);
    if (std::find(acquired_maps.begin(), acquired_maps.end(), map) == acquired_maps.end())
        fail("cp.async.bulk.tensor through a tensor map this thread never acquired (fence.proxy.tensormap)");
    if (m.rank != 3) fail("cp.async.bulk.tensor.3d with a map of another rank");
    if (m.data_type != 1 && m.data_type != 6 && m.data_type != 9) fail("tensor map: not a 16-bit data type");
    if (m.interleave != 0 || m.oob_fill != 0) fail("tensor map: interleave / NaN fill not modelled");
    for (int i = 0; i < 3; ++i)
        if (m.element_strides[i] != 1) fail("tensor map: element strides other than 1 not modelled");
    if (m.swizzle != 3 || m.box[0] * 2 != 128) fail("tensor map: only the 128-byte swizzle with a 128-byte inner box is modelled");
    if (dst % 128) fail("cp.async.bulk.tensor: shared destination not 128-byte aligned");
    const long long bytes = m.box[0] * m.box[1] * m.box[2] * 2;
    window_offset(dst, size_t(bytes));
    std::vector<TmaChunk> chunks;
    for (long long zz = 0; zz < m.box[2]; ++zz)
        for (long long yy = 0; yy < m.box[1]; ++yy)
            for (long long xc = 0; xc < m.box[0] / 8; ++xc) {
                const unsigned lin = unsigned(((zz * m.box[1] + yy) * m.box[0] + xc * 8) * 2);
                TmaChunk c;
                c.dst = cta().smem.data() + window_offset(swizzle128(dst + lin), 16);
                for (int e = 0; e < 8; ++e) {
                    const long long gx = x + xc * 8 + e, gy = y + yy, gz = z + zz;
                    unsigned short v = 0;
                    if (gx >= 0 && gx < m.dims[0] && gy >= 0 && gy < m.dims[1] && gz >= 0 && gz < m.dims[2]) {
                        const unsigned char* src = m.address + gz * m.strides[1] + gy * m.strides[0] + gx * 2;
                        check_input(src, 2);
                        std::memcpy(&v, src, 2);
                    }
                    std::memcpy(c.data + 2 * e, &v, 2);
                }
                chunks.push_back(c);
            }
    auto& b = barrier_at(mbar_key(bar), false);
    std::lock_guard<std::mutex> g(b.m);
    if (eager)
        for (auto& c : chunks) perform_tma(c);
    else
        b.tma.insert(b.tma.end(), chunks.begin(), chunks.end());
    tx_locked(b, -bytes);
    complete_if_done(b);
}

