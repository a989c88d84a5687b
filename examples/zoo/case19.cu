// Pair case19: each thread holds a vector v of 16 floats (column t of a 16 x rows matrix,
// coalesced) and applies `rounds` sweeps of the in-place update, j = 0, 1, ..., 15 in turn,
//   v[j] <- 0.75 v[j] + 0.25 v[(j + 1) % 16]
// (Gauss-Seidel order: v[15]'s update reads the new v[0]). No __launch_bounds__ in
// either kernel, 256-thread CTAs, the same loads and stores of x and out.
// a: the sweep is a loop the compiler is told not to unroll: j is a run-time value, so
//    v is addressed through memory and lives in local memory (LDL/STL every update).
// b: the sweep is unrolled: every index is a compile-time constant, v stays in registers.
#define V 16

extern "C" __global__ void zoo_case19_a(const float* __restrict__ x, float* __restrict__ out,
                                        long long rows, int rounds) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= rows) return;
    float v[V];
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = x[j * rows + t];
#pragma unroll 1
    for (int k = 0; k < rounds; ++k) {
#pragma unroll 1
        for (int j = 0; j < V; ++j) v[j] = fmaf(0.75f, v[j], 0.25f * v[(j + 1) & (V - 1)]);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) out[j * rows + t] = v[j];
}

extern "C" __global__ void zoo_case19_b(const float* __restrict__ x, float* __restrict__ out,
                                        long long rows, int rounds) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= rows) return;
    float v[V];
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = x[j * rows + t];
#pragma unroll 1
    for (int k = 0; k < rounds; ++k) {
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = fmaf(0.75f, v[j], 0.25f * v[(j + 1) & (V - 1)]);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) out[j * rows + t] = v[j];
}
