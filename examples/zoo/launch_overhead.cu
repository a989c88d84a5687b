// Pair "launch_overhead": out = 2 x + 1 over n floats, the same kernel for both variants,
// each launch covering elements [offset, offset + count).
// slow: LAUNCHES launches one after another, each on n / LAUNCHES elements: each pays the
//       launch latency, the ramp-up and the drain of a tiny grid.
// fast: one launch on all n elements.
extern "C" __global__ void zoo_launch_overhead(const float* __restrict__ x, float* __restrict__ out,
                                               long long offset, long long count) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) out[offset + i] = fmaf(2.0f, x[offset + i], 1.0f);
}
