"""How the read ceiling itself behaves (kernels/NOTES.md, item 18).

    python3 scripts/stream_timeline.py

1. The streaming-read kernel (paprof/measure/kernels/common/stream_read.cu, grid-stride) with a
   timestamp and SM id per CTA, at 8 and 4 CTAs a SM: the time each SM finished.
2. The same 1 GiB read as independent contiguous streams (each CTA or each warp its own
   region): the bandwidth, to see whether the number of streams the DRAM serves at once
   costs anything (it did not: 8,448 warp streams read 4.42-4.53 TB/s in two calls, the
   fastest of the chunked layouts, against 4.52-4.63 for grid-stride).
"""
import numpy as np

from paprof.measure.kernels import harness
from paprof.measure.kernels import gpu

# The ceiling kernel's own loop (stream_fold in stream_read.cu), timed per CTA or run over
# one contiguous region a CTA or a warp.
SRC = harness.STREAM_READ_SOURCE.read_text() + r'''
extern "C" __global__ void __launch_bounds__(256) tl_read(const uint4* __restrict__ src, unsigned long long n,
        unsigned int* __restrict__ sink, unsigned long long* __restrict__ rec) {
    unsigned long long t0; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t0));
    const unsigned int fold = stream_fold(src, n, (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x,
                                          (unsigned long long)gridDim.x * blockDim.x);
    if (fold == 0x9e3779b9u) sink[0] = fold;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned long long t1; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t1));
        unsigned sm; asm volatile("mov.u32 %0, %smid;" : "=r"(sm));
        rec[3 * blockIdx.x] = t0; rec[3 * blockIdx.x + 1] = t1; rec[3 * blockIdx.x + 2] = sm;
    }
}

extern "C" __global__ void __launch_bounds__(256) chunk_read(const uint4* __restrict__ src, unsigned long long per,
        int per_warp, unsigned int* __restrict__ sink) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned int fold = per_warp ? stream_fold(src + (blockIdx.x * 8ull + warp) * per, per, lane, 32)
                                       : stream_fold(src + blockIdx.x * per, per, threadIdx.x, 256);
    if (fold == 0x9e3779b9u) sink[0] = fold;
}
'''
cp = gpu.cupy()
module = cp.RawModule(code=SRC)
k, k2 = module.get_function("tl_read"), module.get_function("chunk_read")
sms = gpu.current_device().sm_count
nbytes = 1 << 30
buf = cp.random.default_rng(7).integers(0, 2**31, size=nbytes // 4, dtype=cp.int32)
sink = cp.zeros(1, dtype=cp.uint32)
for per_sm in (8, 4):
    grid = sms * per_sm
    rec = cp.zeros(3 * grid, dtype=cp.uint64)
    for _ in range(3):
        k((grid,), (256,), (buf, np.uint64(nbytes // 16), sink, rec))
    cp.cuda.runtime.deviceSynchronize()
    r = rec.get().reshape(-1, 3).astype(float)
    t0 = r[:, 0].min()
    end = (r[:, 1] - t0) / 1e3
    sm = r[:, 2].astype(int)
    last = np.zeros(sm.max() + 1)
    np.maximum.at(last, sm, end)
    print(f"{per_sm} CTAs/SM: end us by smid: {' '.join(f'{e:.0f}' for e in last)}")
    print(f"  end percentiles 0/10/50/90/100: {np.percentile(end, [0, 10, 50, 90, 100]).round(1)}")

# The same bytes read as independent contiguous streams (each CTA or each warp its own
# region): does the number of streams the DRAM sees at once cost bandwidth?
for per_sm, per_warp in ((8, 0), (8, 1), (4, 0), (4, 1), (2, 1)):
    grid = sms * per_sm
    streams = grid * (8 if per_warp else 1)
    per = np.uint64(nbytes // 16 // streams)
    ev = [cp.cuda.Event() for _ in range(22)]
    for i in range(11):
        ev[2 * i].record()
        k2((grid,), (256,), (buf, per, np.int32(per_warp), sink))
        ev[2 * i + 1].record()
    ev[-1].synchronize()
    us = sorted(cp.cuda.get_elapsed_time(ev[2 * i], ev[2 * i + 1]) * 1e3 for i in range(1, 11))
    print(f"chunk_read {per_sm} CTAs/SM, {streams} streams of {int(per) * 16 / 1e3:.0f} kB: {us[5]:.1f} us, "
          f"{nbytes / us[5] / 1e6:.2f} TB/s")
