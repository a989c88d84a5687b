// Pair case17: iters steps of
//   t = y / 8,  y <- 0.5 (y cos t + sin t) + 0.5 x
// on n floats (a thread an element, 256-thread CTAs, no shared memory). |x| <= 1 keeps
// |y| < 2 and |t| < 1/4; the map is contractive (derivative < 0.6), so float32 stays
// within ~1e-6 of the float64 iteration.
// a: sin and cos by the hardware approximations __sinf / __cosf (MUFU.SIN, MUFU.COS on
//    the XU pipe: a quarter warp a cycle an SM partition).
// b: the same sin and cos by their Taylor polynomials in t (|t| < 1/4: truncation error
//    below 4e-7), evaluated with FFMA.
extern "C" __global__ void zoo_case17_a(const float* __restrict__ x, float* __restrict__ out,
                                        long long n, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xi = 0.5f * x[i], y = x[i];
#pragma unroll 4
    for (int k = 0; k < iters; ++k) {
        float t = 0.125f * y;
        float s = __sinf(t), c = __cosf(t);
        y = fmaf(0.5f, fmaf(y, c, s), xi);
    }
    out[i] = y;
}

extern "C" __global__ void zoo_case17_b(const float* __restrict__ x, float* __restrict__ out,
                                        long long n, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float xi = 0.5f * x[i], y = x[i];
#pragma unroll 4
    for (int k = 0; k < iters; ++k) {
        float t = 0.125f * y;
        float u = t * t;
        float c = fmaf(u, fmaf(u, fmaf(u, -1.0f / 720.0f, 1.0f / 24.0f), -0.5f), 1.0f);
        float s = t * fmaf(u, fmaf(u, 1.0f / 120.0f, -1.0f / 6.0f), 1.0f);
        y = fmaf(0.5f, fmaf(y, c, s), xi);
    }
    out[i] = y;
}
