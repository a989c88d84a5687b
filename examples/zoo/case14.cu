// Pair case14: out[r][c] = x[c] * s[r] + 1 on an R x C matrix (C = 4096, R = n / C).
// Both kernels: one thread an element, 256-thread CTAs, two loads an element (one of
// them the same address across the warp), one store. Only the element a lane takes
// differs:
// a: consecutive lanes take consecutive rows (r = i & (R-1)): the load of s[r] is
//    coalesced, x[c] is one address a warp, and the store out[r * C + c] puts the 32
//    lanes 16 KB apart.
// b: consecutive lanes take consecutive columns (c = i & (C-1)): x[c] coalesced, s[r] one
//    address a warp, the store 32 consecutive floats.
extern "C" __global__ void zoo_case14_a(const float* __restrict__ x, const float* __restrict__ s,
                                        float* __restrict__ out, int log_rows, int log_cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long r = i & ((1LL << log_rows) - 1), c = i >> log_rows;
    out[(r << log_cols) + c] = fmaf(x[c], s[r], 1.0f);
}

extern "C" __global__ void zoo_case14_b(const float* __restrict__ x, const float* __restrict__ s,
                                        float* __restrict__ out, int log_rows, int log_cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long c = i & ((1LL << log_cols) - 1), r = i >> log_cols;
    out[(r << log_cols) + c] = fmaf(x[c], s[r], 1.0f);
}
