// Pair case18: out = (2x + 1)^2 on n floats (a thread an element, 256-thread CTAs).
// a: two kernels: zoo_case18_a1 writes t = 2x + 1 to a buffer of n floats in global
//    memory, zoo_case18_a2 reads t back and writes t * t.
// b: one kernel computes t in a register and writes t * t.
extern "C" __global__ void zoo_case18_a1(const float* __restrict__ x, float* __restrict__ t,
                                         long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) t[i] = fmaf(2.0f, x[i], 1.0f);
}

extern "C" __global__ void zoo_case18_a2(const float* __restrict__ t, float* __restrict__ out,
                                         long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = t[i]; out[i] = v * v; }
}

extern "C" __global__ void zoo_case18_b(const float* __restrict__ x, float* __restrict__ out,
                                        long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { float v = fmaf(2.0f, x[i], 1.0f); out[i] = v * v; }
}
