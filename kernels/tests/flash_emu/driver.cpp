// Runs one flash_fwd kernel on the CPU (see flash_emulate.h). Built by
// tests/test_flash_emulated.py with
//   g++ -std=c++20 -DFLASH_EMULATE -DFLASH_KERNEL_FILE='"mma.cu"' -DFLASH_KERNEL=flash_fwd_mma
//       -DFLASH_ELEM='unsigned short' -DHEAD_DIM=.. -DDTYPE=.. -I<family> -I<here> driver.cpp
// and run as `driver IN OUT`. IN: int32 batch, q_heads, kv_heads, seq_q, seq_k, causal,
// eager, shared-memory bytes, grid x, threads; float32 scale * log2(e); then Q, K, V as
// FLASH_ELEM; a kernel built with TMA 1 (wgmma2) then takes K's and V's tensor maps: two
// records of flash_emu::TENSOR_MAP_FIELDS int64 (tensormap.TiledMap.fields(), the launcher's
// encode parameters), over K and V. OUT: O as FLASH_ELEM.
#include "flash_common.cuh"
#include FLASH_KERNEL_FILE

#include <fstream>
#include <thread>

int main(int argc, char** argv) {
    if (argc != 3) return 2;
    std::ifstream in(argv[1], std::ios::binary);
    int hdr[10];
    float scale_log2;
    in.read(reinterpret_cast<char*>(hdr), sizeof hdr);
    in.read(reinterpret_cast<char*>(&scale_log2), sizeof scale_log2);
    const int batch = hdr[0], q_heads = hdr[1], kv_heads = hdr[2], seq_q = hdr[3], seq_k = hdr[4];
    const int causal = hdr[5], smem = hdr[7], grid_x = hdr[8], threads = hdr[9];
    flash_emu::eager = hdr[6] != 0;
    const size_t nq = size_t(batch) * q_heads * seq_q * HEAD_DIM;
    const size_t nkv = size_t(batch) * kv_heads * seq_k * HEAD_DIM;
    std::vector<FLASH_ELEM> q(nq), k(nkv), v(nkv), o(nq);
    in.read(reinterpret_cast<char*>(q.data()), nq * sizeof(FLASH_ELEM));
    in.read(reinterpret_cast<char*>(k.data()), nkv * sizeof(FLASH_ELEM));
    in.read(reinterpret_cast<char*>(v.data()), nkv * sizeof(FLASH_ELEM));
    constexpr int persistent = 0;
#if defined(TMA) && TMA
    constexpr int nmaps = 2 + persistent;
    flash_emu::TensorMap maps[3];
    for (int i = 0; i < nmaps; ++i) {
        long long f[flash_emu::TENSOR_MAP_FIELDS];
        in.read(reinterpret_cast<char*>(f), sizeof f);
        auto& m = maps[i];
        long long* at = f;
        m.data_type = *at++, m.rank = *at++;
        for (auto& d : m.dims) d = *at++;
        for (auto& d : m.strides) d = *at++;
        for (auto& d : m.box) d = *at++;
        for (auto& d : m.element_strides) d = *at++;
        m.interleave = *at++, m.swizzle = *at++, m.l2_promotion = *at++, m.oob_fill = *at++;
        m.address = reinterpret_cast<const unsigned char*>(i == 0 ? k.data() : i == 1 ? v.data() : q.data());
    }
#endif
    if (!in) return 3;
    std::memset(o.data(), 0xFF, nq * sizeof(FLASH_ELEM));  // poison: NaN in every type
    flash_emu::inputs = {{reinterpret_cast<const unsigned char*>(q.data()), nq * sizeof(FLASH_ELEM)},
                         {reinterpret_cast<const unsigned char*>(k.data()), nkv * sizeof(FLASH_ELEM)},
                         {reinterpret_cast<const unsigned char*>(v.data()), nkv * sizeof(FLASH_ELEM)}};
    gridDim = {unsigned(grid_x), persistent ? 1u : unsigned(batch * q_heads), 1};
    blockDim = {unsigned(threads), 1, 1};
    for (unsigned y = 0; y < gridDim.y; ++y) {
        for (unsigned x = 0; x < gridDim.x; ++x) {
            blockIdx = {x, y, 0};
            flash_emu::Cta cta(size_t(smem), threads);
            flash_emu::current = &cta;
            flash_emu::begin_cta(size_t(smem), threads);
            std::vector<std::thread> pool;
            for (int t = 0; t < threads; ++t) {
                pool.emplace_back([&, t] {
                    threadIdx = {unsigned(t), 0, 0};
                    flash_emu::open_group.clear();
                    flash_emu::committed.clear();
                    flash_emu::wgmma_pending = 0;
                    FLASH_KERNEL(q.data(), k.data(), v.data(), o.data(), seq_q, seq_k, q_heads,
                                 kv_heads, scale_log2, causal
#if defined(TMA) && TMA
                                 , &maps[0], &maps[1]
#endif
                    );
                    if (flash_emu::wgmma_pending) flash_emu::fail("wgmma.mma_async never waited for");
                    if (!flash_emu::open_group.empty()) flash_emu::fail("cp.async never committed");
                    for (auto& group : flash_emu::committed)
                        if (!group.empty()) flash_emu::fail("cp.async never waited for");
                });
            }
            for (auto& th : pool) th.join();
        }
    }
    std::ofstream out(argv[2], std::ios::binary);
    out.write(reinterpret_cast<const char*>(o.data()), nq * sizeof(FLASH_ELEM));
    return out ? 0 : 4;
}
