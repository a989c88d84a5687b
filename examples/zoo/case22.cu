// Pair case22: n independent sequences of 32-bit integers, v <- 1664525 v + 1013904223
// (mod 2^32) from v = s[i], iters steps; at each step the divisor e = d + (v >> 30) (one of
// d .. d + 3, d given at run time: all in [2^13, 2^14)), q = v / e, r = v mod e, and
// out[i] = sum_k ((q ^ r) & 255) (an int sum converted once: exact in float32 while
// iters < 65793). A thread an element, 256-thread CTAs, no shared memory; both kernels
// take the same arguments and read and write the same bytes.
// a: q = v / e as written (e known only at run time, and changing from step to step).
// b: q from e's precomputed multiplier (m0 .. m3, one per divisor, picked by v >> 30)
//    and the shift s (Granlund-Montgomery: t = umulhi(m, v), q = (t + ((v - t) >> 1)) >> s;
//    exact for every 32-bit v).
extern "C" __global__ void zoo_case22_a(const unsigned* __restrict__ s, float* __restrict__ out,
                                        long long n, unsigned d, unsigned m0, unsigned m1,
                                        unsigned m2, unsigned m3, int sh, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = s[i], acc = 0;
#pragma unroll 4
    for (int k = 0; k < iters; ++k) {
        v = v * 1664525u + 1013904223u;
        unsigned e = d + (v >> 30);
        unsigned q = v / e;
        unsigned r = v - q * e;
        acc += (q ^ r) & 255u;
    }
    out[i] = (float)acc;
}

extern "C" __global__ void zoo_case22_b(const unsigned* __restrict__ s, float* __restrict__ out,
                                        long long n, unsigned d, unsigned m0, unsigned m1,
                                        unsigned m2, unsigned m3, int sh, int iters) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = s[i], acc = 0;
#pragma unroll 4
    for (int k = 0; k < iters; ++k) {
        v = v * 1664525u + 1013904223u;
        unsigned top = v >> 30;
        unsigned e = d + top;
        unsigned m = top & 2u ? (top & 1u ? m3 : m2) : (top & 1u ? m1 : m0);
        unsigned t = __umulhi(m, v);
        unsigned q = (t + ((v - t) >> 1)) >> sh;
        unsigned r = v - q * e;
        acc += (q ^ r) & 255u;
    }
    out[i] = (float)acc;
}
