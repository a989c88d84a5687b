// Pair "vector_loads": out = 2 x + 1 over n floats (n a multiple of 4), on a small grid
// (4 CTAs of 256 threads an SM) with a grid-stride loop kept rolled, so that each thread
// has one load in flight at a time.
// slow: 4-byte loads and stores (LDG.E.32): 4 KB in flight an SM, far below what HBM needs.
// fast: 16-byte float4 loads and stores (LDG.E.128): 4x the bytes per instruction in flight.
extern "C" __global__ void zoo_vector_loads_slow(const float* __restrict__ x, float* __restrict__ out,
                                                 long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
#pragma unroll 1
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = fmaf(2.0f, x[i], 1.0f);
}

extern "C" __global__ void zoo_vector_loads_fast(const float* __restrict__ x, float* __restrict__ out,
                                                 long long n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* out4 = reinterpret_cast<float4*>(out);
#pragma unroll 1
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n / 4; i += stride) {
        float4 v = x4[i];
        out4[i] = make_float4(fmaf(2.0f, v.x, 1.0f), fmaf(2.0f, v.y, 1.0f),
                              fmaf(2.0f, v.z, 1.0f), fmaf(2.0f, v.w, 1.0f));
    }
}
