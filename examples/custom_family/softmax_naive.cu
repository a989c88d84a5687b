// naive: one thread per row, three passes over the row straight from global memory.
// Adjacent threads of a warp are a whole row apart, so every load of a warp touches 32
// different cache lines (uncoalesced), and only `rows` threads exist in all.
#define NEG_INF __int_as_float(0xff800000)

extern "C" __global__ void softmax_naive(const float* __restrict__ x, float* __restrict__ y,
                                         int rows, int cols) {
    const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + row * cols;  // 64-bit offsets: rows x cols may pass 2^31
    float* yr = y + row * cols;

    float m = NEG_INF;                          // pass 1: the row's max
    for (int j = 0; j < cols; ++j) m = fmaxf(m, xr[j]);
    float s = 0.0f;                             // pass 2: sum of exp(x - max)
    for (int j = 0; j < cols; ++j) s += __expf(xr[j] - m);
    const float inv = 1.0f / s;                 // pass 3: normalise and write
    for (int j = 0; j < cols; ++j) yr[j] = __expf(xr[j] - m) * inv;
}
