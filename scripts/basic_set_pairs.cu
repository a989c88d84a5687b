// Two of the zoo's pairs (examples/zoo: uncoalesced, bank_conflicts) launched from a plain
// CUDA program, once each kernel, for reports of ncu's basic set (what `ncu` collects
// without --set: SpeedOfLight, LaunchStats, Occupancy; no stall, scheduler or instruction
// counters). scripts/device_basic_set.sh builds it and profiles each kernel into a report
// of its own; tests/data/basic-set holds the reports (tests/test_basic_set_reports.py).
#include <cstdio>
#include <cuda_runtime.h>
#include "../examples/zoo/uncoalesced.cu"
#include "../examples/zoo/bank_conflicts.cu"

#define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) { \
    std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e)); return 1; } } while (0)

int main() {
    const int rows = 8192, cols = 4096, n = 8192;  // the zoo's default sizes
    float *x, *out;
    CHECK(cudaMalloc(&x, sizeof(float) * (size_t)n * n));
    CHECK(cudaMalloc(&out, sizeof(float) * (size_t)n * n));
    CHECK(cudaMemset(x, 0, sizeof(float) * (size_t)n * n));
    const int elements = rows * cols, block = 256;
    zoo_uncoalesced_slow<<<(elements + block - 1) / block, block>>>(x, out, rows, cols);
    zoo_uncoalesced_fast<<<(elements + block - 1) / block, block>>>(x, out, rows, cols);
    dim3 tiles(n / 32, n / 32), threads(32, 8);
    zoo_bank_conflicts_slow<<<tiles, threads>>>(x, out, n);
    zoo_bank_conflicts_fast<<<tiles, threads>>>(x, out, n);
    CHECK(cudaDeviceSynchronize());
    std::printf("ok\n");
    return 0;
}
