"""The read ceiling at the sizes decode reads (kernels/NOTES.md, item 73).

    python3 scripts/ceiling_sizes.py

The streaming-read kernel that `paprof bench` calibrates against (2 GiB, 8 CTAs a SM) timed
over 2 GiB down to 64 MiB of the same buffer, at 8 and 4 CTAs a SM, CUDA events, medians of
30 launches, twice: how much of the 2 GiB ceiling a kernel that only reads can reach when it
reads as many bytes as a decode step (fp8 at batch 1 or 4 and context 131,072 tokens in
total: 268 MiB; fp16: 512 MiB). Also an empty kernel's event time (the host's share of a
launch when the GPU waits for it).
"""
import numpy as np
from paprof.measure.kernels import gpu, harness
cp = gpu.cupy()
dev = gpu.current_device()
module = gpu.compile_module([harness.STREAM_READ_SOURCE])
kernel = module.get_function("stream_read")
empty = cp.RawKernel(r'extern "C" __global__ void empty_k(int* p) { if (p[0] == 12345) p[0] = 0; }', "empty_k")
big = cp.random.default_rng(7).integers(0, 2**31, size=(2 << 30) // 4, dtype=cp.int32)
sink = cp.zeros(1, dtype=cp.uint32)
def timed(fn, launches=30):
    for _ in range(3):
        fn()
    s = [cp.cuda.Event() for _ in range(launches)]
    e = [cp.cuda.Event() for _ in range(launches)]
    for a, b in zip(s, e):
        a.record(); fn(); b.record()
    e[-1].synchronize()
    us = sorted(cp.cuda.get_elapsed_time(a, b) * 1000 for a, b in zip(s, e))
    return us[len(us) // 2]
for rep in range(2):
    ref = None
    for nb in (2 << 30, 1 << 30, 512 << 20, 256 << 20, 128 << 20, 64 << 20):
        words = nb // 4
        for per_sm in (8, 4):
            grid = (dev.sm_count * per_sm,)
            us = timed(lambda: kernel(grid, (256,), (big, np.uint64(words // 4), sink)))
            tbs = words * 4 / us / 1e6
            if ref is None:
                ref = tbs
            print(f"rep {rep} {nb/1e6:8.1f} MB  {per_sm} CTAs/SM  {us:8.1f} us  {tbs:5.2f} TB/s  {100*tbs/ref:5.1f} % of 2 GiB",
                  flush=True)
    us = timed(lambda: empty((1,), (32,), (sink,)))
    us2 = timed(lambda: empty((dev.sm_count * 4,), (256,), (sink,)))
    print(f"rep {rep} empty launch 1 CTA {us:.2f} us, {dev.sm_count*4} CTAs {us2:.2f} us", flush=True)
