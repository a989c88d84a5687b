// The read ceiling: every thread streams 16-byte vectors through a grid-stride loop, four
// independent loads in flight, and folds them into one word so the loads stay live.
// Bytes read over time is the most a read-only kernel (like decode attention) can reach.

// src[i], src[i + stride], ... below n folded into one word, four loads in flight
// (scripts/stream_timeline.py reuses it for its timed and chunked reads).
__device__ __forceinline__ unsigned int stream_fold(const uint4* __restrict__ src, unsigned long long n,
                                                    unsigned long long i, unsigned long long stride) {
    unsigned int fold = 0;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a, b, c, d;
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a.x), "=r"(a.y), "=r"(a.z), "=r"(a.w) : "l"(src + i));
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(b.x), "=r"(b.y), "=r"(b.z), "=r"(b.w) : "l"(src + i + stride));
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(c.x), "=r"(c.y), "=r"(c.z), "=r"(c.w) : "l"(src + i + 2 * stride));
        asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(d.x), "=r"(d.y), "=r"(d.z), "=r"(d.w) : "l"(src + i + 3 * stride));
        fold ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += stride) {
        const uint4 a = src[i];
        fold ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    return fold;
}

extern "C" __global__ void __launch_bounds__(256) stream_read(const uint4* __restrict__ src,
                                                               unsigned long long n,
                                                               unsigned int* __restrict__ sink) {
    const unsigned int fold = stream_fold(src, n, static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x,
                                          static_cast<unsigned long long>(gridDim.x) * blockDim.x);
    if (fold == 0x9e3779b9u) sink[0] = fold;  // practically never; keeps the loads
}
