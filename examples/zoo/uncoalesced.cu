// Pair "uncoalesced": out = 2 x + 1 elementwise on an R x C row-major matrix (n = R*C).
// slow: thread i takes element (row i % R, column i / R): the 32 lanes of a warp touch 32
//       rows, 32 sectors (32 x 32 B) per load and store request.
// fast: thread i takes element i: a warp reads 128 contiguous bytes, 4 sectors a request.
extern "C" __global__ void zoo_uncoalesced_slow(const float* __restrict__ x, float* __restrict__ out,
                                                int rows, int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)rows * cols;
    if (i >= n) return;
    long long r = i % rows, c = i / rows;
    long long j = r * cols + c;
    out[j] = fmaf(2.0f, x[j], 1.0f);
}

extern "C" __global__ void zoo_uncoalesced_fast(const float* __restrict__ x, float* __restrict__ out,
                                                int rows, int cols) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long n = (long long)rows * cols;
    if (i >= n) return;
    out[i] = fmaf(2.0f, x[i], 1.0f);
}
