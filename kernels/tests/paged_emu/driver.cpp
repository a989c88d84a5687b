// Runs v5/v6's tensor-core kernel (paged_decode/v5_mma.cu, FEED 1) on the CPU (see
// paged_emulate.h). Built by tests/test_paged_emulated.py with
//   g++ -std=c++20 -DPAGED_EMULATE -D<the launcher's defines> -I<family> -I<here> driver.cpp
// and run as `driver IN OUT`. IN: int32 batch, q_heads, kv_heads, pages_per_seq, num_pages,
// splits (WORKLIST: work items), threads, shared-memory bytes, cache bytes (each of K and
// V), partial rows; float32 scale; then query (float32), key_cache, value_cache (bytes),
// block_tables, context_lens (int32), for fp8 k_scale, v_scale (float32 a KV head) and,
// with WORKLIST (v7), the work list (WORK_ITEM_INTS int32 an item; WORKLIST 2, packed:
// splits = CTAs, CTA y's first item is item y, int 6 of an item the CTA's next, -1 none). OUT: the output
// (float32), a byte a cache byte of K then of V (1: the kernel read it), the split
// counters (int32).
#include "v5_mma.cu"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <set>
#include <fstream>
#include <string>
#include <limits>
#include <thread>

template <class T>
static std::vector<T> read(std::ifstream& in, size_t n) {
    std::vector<T> v(n);
    in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(T)));
    return v;
}

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    std::ifstream in(argv[1], std::ios::binary);
    int hdr[10];
    float scale;
    in.read(reinterpret_cast<char*>(hdr), sizeof hdr);
    in.read(reinterpret_cast<char*>(&scale), sizeof scale);
    const int batch = hdr[0], q_heads = hdr[1], kv_heads = hdr[2], pages_per_seq = hdr[3];
    const int splits = hdr[5], threads = hdr[6], smem = hdr[7];
    const size_t cache_bytes = size_t(hdr[8]);
    const size_t nq = size_t(batch) * q_heads * HEAD_DIM;
    auto query = read<float>(in, nq);
    auto key = read<unsigned char>(in, cache_bytes);
    auto value = read<unsigned char>(in, cache_bytes);
    auto tables = read<int>(in, size_t(batch) * pages_per_seq);
    auto lens = read<int>(in, size_t(batch));
#if KV_DTYPE == 3
    auto k_scale = read<float>(in, size_t(kv_heads));
    auto v_scale = read<float>(in, size_t(kv_heads));
#endif
#if WORKLIST == 2
    std::vector<int> items;  // the rest of the file: CTA y's first item is item y, int 6 the next
    for (int v; in.read(reinterpret_cast<char*>(&v), sizeof v);) items.push_back(v);
    in.clear();
    if (items.size() % WORK_ITEM_INTS || items.size() < size_t(splits) * WORK_ITEM_INTS) return 3;
    paged_emu::layout.items = items.data();
    paged_emu::layout.n_items = int(items.size() / WORK_ITEM_INTS);
#elif WORKLIST
    auto items = read<int>(in, size_t(splits) * WORK_ITEM_INTS);
    paged_emu::layout.items = items.data();
#endif
    if (!in) return 3;

    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> out(nq, nan);  // poison: an output never written fails
    std::vector<std::atomic<unsigned char>> seen_k(cache_bytes), seen_v(cache_bytes);
    paged_emu::caches[0] = {key.data(), cache_bytes, &seen_k};
    paged_emu::caches[1] = {value.data(), cache_bytes, &seen_v};
    paged_emu::layout.page_size = PAGE_SIZE;
    paged_emu::layout.kv_heads = kv_heads;
    paged_emu::layout.row_bytes = int(cache_bytes / (size_t(hdr[4]) * PAGE_SIZE * kv_heads));
    paged_emu::layout.seq_of_page.assign(size_t(hdr[4]), -1);
    paged_emu::layout.logical_of_page.assign(size_t(hdr[4]), -1);
    paged_emu::layout.lens = lens;
    for (int b = 0; b < batch; ++b)
        for (int lp = 0; lp < pages_per_seq; ++lp)
            if (const int page = tables[size_t(b) * pages_per_seq + lp]; page >= 0) {
                paged_emu::layout.seq_of_page[size_t(page)] = b;
                paged_emu::layout.logical_of_page[size_t(page)] = lp;
            }
    std::vector<int> counters(size_t(batch) * kv_heads, 0);
#if SPLIT
    const size_t rows = size_t(hdr[9]);  // v6: batch x q_heads x splits; v7: its part slots x q_heads
    std::vector<float> part_m(rows, nan), part_l(rows, nan), part_o(rows * HEAD_DIM, nan);
#endif

#if WORKLIST
    gridDim = {unsigned(kv_heads), unsigned(splits), 1u};  // y: the work item
#else
    gridDim = {unsigned(kv_heads), unsigned(batch), unsigned(splits)};
#endif
    blockDim = {unsigned(threads), 1, 1};
    // the CTAs one after another, y in order, or (PAGED_EMU_CTA_ORDER=odd-first) the odd y
    // first: then an even CTA can be the last of two sequences' parts (v7 packed: two merges)
    std::vector<unsigned> ys;
    const char* order = std::getenv("PAGED_EMU_CTA_ORDER");
    const bool odd_first = order && std::string(order) == "odd-first";
    for (int pass = odd_first ? 0 : 1; pass < 2; ++pass)
        for (unsigned y = 0; y < gridDim.y; ++y)
            if (!odd_first || (y % 2 == 0) == (pass == 1)) ys.push_back(y);
    for (unsigned z = 0; z < gridDim.z; ++z) {
        for (unsigned y : ys) {
            for (unsigned x = 0; x < gridDim.x; ++x) {
                blockIdx = {x, y, z};
                paged_emu::Cta cta(size_t(smem), threads);
                paged_emu::current = &cta;
                std::vector<std::thread> pool;
                for (int t = 0; t < threads; ++t) {
                    pool.emplace_back([&, t] {
                        threadIdx = {unsigned(t), 0, 0};
                        paged_emu::current_item = -1;
                        KERNEL_NAME(
#if SPLIT
                            part_m.data(), part_l.data(), part_o.data(), counters.data(),
#endif
#if WORKLIST
                            items.data(),
#endif
                            out.data(), query.data(), key.data(), value.data(), tables.data(), lens.data(), scale,
                            q_heads, kv_heads, pages_per_seq
#if KV_DTYPE == 3
                            ,
                            k_scale.data(), v_scale.data()
#endif
                        );
                    });
                }
                for (auto& th : pool) th.join();
            }
        }
    }
#if DEFER_MERGE
    // v7's merges in their own kernel (paged_decode_v7_merge), after the streaming grid as
    // the launcher enqueues it: the list as variants.merge_list builds it from the items
    std::vector<std::array<int, MERGE_INTS>> merges;
    {
        std::set<std::array<int, 3>> seqs;  // (sequence, first part slot, parts), batch order
        for (size_t i = 0; i < items.size() / WORK_ITEM_INTS; ++i) {
            const int* it = items.data() + i * WORK_ITEM_INTS;
            if (it[4] > 1) seqs.insert({it[0], it[5], it[4]});
        }
        for (const auto& q : seqs) merges.push_back({q[0], q[1], q[2], 0});
    }
    int max_parts = 1;
    for (const auto& m : merges) max_parts = std::max(max_parts, m[2]);
    gridDim = {unsigned(q_heads), unsigned(merges.size()), 1u};
    blockDim = {unsigned(MERGE_THREADS), 1, 1};
    for (unsigned y = 0; y < gridDim.y; ++y)
        for (unsigned x = 0; x < gridDim.x; ++x) {
            blockIdx = {x, y, 0};
            paged_emu::Cta cta(size_t(16 * MERGE_THREADS + 8 * max_parts), MERGE_THREADS);
            paged_emu::current = &cta;
            std::vector<std::thread> pool;
            for (int t = 0; t < MERGE_THREADS; ++t)
                pool.emplace_back([&, t] {
                    threadIdx = {unsigned(t), 0, 0};
                    paged_decode_v7_merge(out.data(), part_m.data(), part_l.data(), part_o.data(),
                                          merges.empty() ? nullptr : merges[0].data(), q_heads);
                });
            for (auto& th : pool) th.join();
        }
#endif
    std::ofstream o(argv[2], std::ios::binary);
    o.write(reinterpret_cast<const char*>(out.data()), std::streamsize(nq * sizeof(float)));
    for (auto* seen : {&seen_k, &seen_v})
        for (auto& byte : *seen) o.put(char(byte.load()));
    o.write(reinterpret_cast<const char*>(counters.data()), std::streamsize(counters.size() * sizeof(int)));
    return o ? 0 : 4;
}
